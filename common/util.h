/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small helpers every module needs: a capped growable byte buffer, strict
 * integer parsing, fd flags, capped file reads, secret wiping, clocks, an
 * RFC 3339 formatter and DNS-1123 name validation. No logging, no globals.
 */
#ifndef KPGPUD_UTIL_H
#define KPGPUD_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

/* The number of elements of an array (not a pointer). */
#ifndef nitems
#define nitems(a)	(sizeof(a) / sizeof((a)[0]))
#endif

/*
 * Write a formatted reason into err (errlen bytes, cut if need be) when the
 * caller gave a buffer (err NULL or errlen 0: nothing). Returns -EINVAL, so a
 * parser can "return seterr(err, errlen, ...)".
 */
int	 seterr(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
int	 vseterr(char *err, size_t errlen, const char *fmt, va_list ap)
	    __attribute__((format(printf, 3, 0)));

#define BUF_DEFAULT_MAX	(16u * 1024 * 1024)

/*
 * A growable byte buffer with a hard size cap. data is always
 * NUL-terminated (the NUL is not counted in len) once anything was
 * appended; it is NULL for an empty, never-used buffer. Appends that would
 * take len past max fail with -E2BIG and leave the buffer unchanged.
 * Initialise with BUF_INIT(max) or buf_init(); a zeroed struct gets
 * BUF_DEFAULT_MAX.
 */
struct buf {
	char	*data;
	size_t	 len;
	size_t	 alloc;
	size_t	 max;		/* 0 means BUF_DEFAULT_MAX */
};

#define BUF_INIT(m)	{ NULL, 0, 0, (m) }

void	 buf_init(struct buf *b, size_t max);
int	 buf_append(struct buf *b, const void *p, size_t n);
/* Make room for n more bytes now, so that appends up to them do not grow. */
int	 buf_reserve(struct buf *b, size_t n);
int	 buf_puts(struct buf *b, const char *s);
int	 buf_putc(struct buf *b, char c);
int	 buf_printf(struct buf *b, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
int	 buf_vprintf(struct buf *b, const char *fmt, va_list ap)
	    __attribute__((format(printf, 2, 0)));
/* Empty the buffer, keeping its memory (and cap). */
void	 buf_reset(struct buf *b);
/* Release memory; the buffer may be reused afterwards. */
void	 buf_free(struct buf *b);
/* Wipe the contents (secrets) and release memory. */
void	 buf_free_secret(struct buf *b);
/* Hand the data to the caller (to free()); buffer becomes empty. */
char	*buf_steal(struct buf *b, size_t *ret_len);
/* The contents as a C string; "" for an empty buffer. */
const char *buf_str(const struct buf *b);

/*
 * Parse a whole decimal integer (optional sign, base 10, or 0x hex) in
 * [min, max]. -EINVAL: empty, junk, trailing characters or whitespace;
 * -ERANGE: out of range. ret untouched on failure.
 */
int	 parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret);
int	 parse_uint64(const char *s, uint64_t max, uint64_t *ret);
int	 parse_int(const char *s, int min, int max, int *ret);

/*
 * Durations in milliseconds: "250ms", "5s", "2m", "1h", "1.5s", "1m30s", or
 * a bare number of ms. -EINVAL for junk or negative, -ERANGE beyond
 * DURATION_MAX_MS. format_duration_ms appends the largest exact unit.
 */
#define DURATION_MAX_MS	(1000LL * 86400 * 365 * 1000)	/* 1000 years */
int	 parse_duration_ms(const char *s, int64_t *ret_ms);
int	 format_duration_ms(int64_t ms, struct buf *out);
/* true/false, yes/no, on/off, 1/0 (any case); -EINVAL otherwise. */
int	 parse_bool(const char *s, bool *ret);

/*
 * Parse a comma-separated list of uids or user names ("1000, kpgpud") into
 * at most max (<= PARSE_UIDS_MAX) entries. -EINVAL: empty item or bad
 * number; -ENOENT: unknown user; -E2BIG: too many. The offending item is
 * copied to bad. ret untouched on failure.
 */
#define PARSE_UIDS_MAX	64
int	 parse_uid_list(const char *s, uid_t *ret, size_t max, size_t *ret_n,
	    char *bad, size_t badlen);

/*
 * Quoted strings as config files write them: buf_put_quoted appends s in
 * double quotes with \", \\, \n and \t escapes; str_unquote reverses that
 * in place (-EINVAL if s is not exactly one such string).
 */
int	 buf_put_quoted(struct buf *b, const char *s);
int	 str_unquote(char *s);

/* Set FD_CLOEXEC / O_NONBLOCK on fd. 0 or -errno. */
int	 fd_cloexec(int fd);
int	 fd_nonblock(int fd);

/*
 * Read a whole file of at most cap bytes into a NUL-terminated malloc'ed
 * buffer. -EFBIG if larger than cap; -errno on I/O errors.
 */
int	 read_file_capped(const char *path, size_t cap, char **ret_buf,
	    size_t *ret_len);

/* Overwrite memory that held a secret; never optimised away. */
void	 wipe(void *p, size_t n);
/* Wipe and free a NUL-terminated secret string (NULL ok). */
void	 wipe_free_str(char *s);

/* CLOCK_MONOTONIC in milliseconds / microseconds. */
uint64_t monotonic_ms(void);
uint64_t monotonic_usec(void);
/* Wall clock in milliseconds since the epoch. */
uint64_t realtime_ms(void);

/*
 * FNV-1a over the bytes of s (not its NUL), continuing from h: start with
 * FNV1A32_INIT / FNV1A64_INIT. A stable, non-cryptographic hash for bucket
 * indexes and name suffixes (the 32-bit one is part of object names kpgpud
 * writes: never change it).
 */
#define FNV1A32_INIT	2166136261u
#define FNV1A64_INIT	14695981039346656037ull
uint32_t fnv1a32(uint32_t h, const char *s);
uint64_t fnv1a64(uint64_t h, const char *s);

/*
 * A small PRNG (xorshift64) for jitter and fault probabilities, never for
 * secrets. prng_seed gives a non-zero seed (getrandom, else time and pid);
 * prng_next advances *state and returns it.
 */
uint64_t prng_seed(void);
uint64_t prng_next(uint64_t *state);
/*
 * Retry delay for attempt (0 = the first retry): base_ms doubled per attempt,
 * capped at max_ms, with "equal jitter": half of it fixed, half random.
 */
unsigned backoff_delay_ms(unsigned base_ms, unsigned max_ms, unsigned attempt,
	    uint64_t *rng);

/* "2026-11-29T09:47:05Z": RFC 3339 / ISO 8601 UTC, seconds precision. */
#define TIME_RFC3339_LEN	sizeof("2026-11-29T09:47:05Z")
int	 time_rfc3339(time_t t, char *out, size_t outlen);
/* Same with milliseconds: "2026-11-29T09:47:05.123Z". */
#define TIME_RFC3339_MS_LEN	sizeof("2026-11-29T09:47:05.123Z")
int	 time_rfc3339_ms(uint64_t epoch_ms, char *out, size_t outlen);

/*
 * DNS-1123 label (namespace names): 1-63 of [a-z0-9-], alphanumeric at both
 * ends. Subdomain (most object names): 1-253, dot-separated labels.
 */
#define DNS1123_LABEL_MAX	63
#define DNS1123_SUBDOMAIN_MAX	253
bool	 dns1123_label_valid(const char *s);
bool	 dns1123_subdomain_valid(const char *s);

#endif
