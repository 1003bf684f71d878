/* SPDX-License-Identifier: Apache-2.0 */
/* Small shared helpers: see util.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

/* Set up an empty buffer with a size cap (0: the default cap). */
void
buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->max = max;
}

/* The effective cap of b. */
static size_t
buf_cap(const struct buf *b)
{
	return b->max == 0 ? BUF_DEFAULT_MAX : b->max;
}

/* Make room for need more bytes plus the terminating NUL. */
static int
buf_grow(struct buf *b, size_t need)
{
	size_t want, n;
	char *p;

	if (need > buf_cap(b) || b->len > buf_cap(b) - need)
		return -E2BIG;
	want = b->len + need + 1;
	if (want <= b->alloc)
		return 0;
	n = b->alloc < 64 ? 64 : b->alloc;
	while (n < want)
		n *= 2;
	if (n > buf_cap(b) + 1)
		n = buf_cap(b) + 1;
	p = realloc(b->data, n);
	if (p == NULL)
		return -ENOMEM;
	b->data = p;
	b->alloc = n;
	return 0;
}

/* Append n bytes. */
int
buf_append(struct buf *b, const void *p, size_t n)
{
	int r;

	if ((r = buf_grow(b, n)) < 0)
		return r;
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

/* Make room for n more bytes (and the NUL) without appending. */
int
buf_reserve(struct buf *b, size_t n)
{
	int r = buf_grow(b, n);

	if (r == 0)
		b->data[b->len] = '\0';	/* data stays a C string */
	return r;
}

/* Append a C string. */
int
buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

/* Append one byte. */
int
buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

/* Append formatted text. */
int
buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n, r;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return -EINVAL;
	if ((r = buf_grow(b, (size_t)n)) < 0)
		return r;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

/* Append formatted text. */
int
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

/* Empty the buffer, keeping its memory. */
void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

/* Release the memory of b. */
void
buf_free(struct buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
}

/* Wipe the whole allocation, then release it. */
void
buf_free_secret(struct buf *b)
{
	if (b == NULL)
		return;
	if (b->data != NULL)
		wipe(b->data, b->alloc);
	buf_free(b);
}

/* Give the data to the caller and leave b empty. */
char *
buf_steal(struct buf *b, size_t *ret_len)
{
	char *p = b->data;

	if (p == NULL)
		p = calloc(1, 1);
	if (p == NULL)
		return NULL;
	if (ret_len != NULL)
		*ret_len = b->len;
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	return p;
}

/* The contents as a NUL-terminated string. */
const char *
buf_str(const struct buf *b)
{
	return b->data != NULL ? b->data : "";
}

/* Reject what strtoll/strtoull would silently accept: space, empty. */
static int
parse_check_start(const char *s)
{
	if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
		return -EINVAL;
	return 0;
}

/* Parse a signed integer in [min, max]; the whole string must be used. */
int
parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
	long long v;
	char *end;
	int r;

	if ((r = parse_check_start(s)) < 0)
		return r;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (end == s || *end != '\0')
		return -EINVAL;
	/* strtoll base 0 reads a leading 0 as octal: refuse "010" */
	if ((s[0] == '0' || ((s[0] == '-' || s[0] == '+') && s[1] == '0')) &&
	    isdigit((unsigned char)s[s[0] == '0' ? 1 : 2]))
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = (int64_t)v;
	return 0;
}

/* Parse an unsigned integer in [0, max]; no sign allowed. */
int
parse_uint64(const char *s, uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end;
	int r;

	if ((r = parse_check_start(s)) < 0)
		return r;
	if (s[0] == '-' || s[0] == '+')
		return -EINVAL;
	if (s[0] == '0' && isdigit((unsigned char)s[1]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (end == s || *end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v > max)
		return -ERANGE;
	*ret = (uint64_t)v;
	return 0;
}

/* Parse an int in [min, max]. */
int
parse_int(const char *s, int min, int max, int *ret)
{
	int64_t v;
	int r;

	if ((r = parse_int64(s, min, max, &v)) < 0)
		return r;
	*ret = (int)v;
	return 0;
}

/* Parse a duration such as "250ms", "5s", "1m30s" or a bare ms count. */
int
parse_duration_ms(const char *s, int64_t *ret_ms)
{
	double total = 0;
	const char *p = s;
	bool bare = true;

	if (s == NULL || *s == '\0')
		return -EINVAL;
	while (*p != '\0') {
		char *end;
		double v, mul;

		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		v = strtod(p, &end);
		if (end == p || !isfinite(v))
			return -EINVAL;
		p = end;
		if (strncmp(p, "ms", 2) == 0) {
			mul = 1;
			p += 2;
		} else if (*p == 's' || *p == 'm' || *p == 'h') {
			mul = *p == 's' ? 1e3 : *p == 'm' ? 60e3 : 3600e3;
			p++;
		} else if (*p == '\0' && bare) {
			mul = 1;
		} else {
			return -EINVAL;
		}
		bare = false;
		total += v * mul;
		if (total > (double)DURATION_MAX_MS)
			return -ERANGE;
	}
	*ret_ms = (int64_t)llround(total);
	return 0;
}

/* Format a millisecond duration with the largest exact unit. */
int
format_duration_ms(int64_t ms, struct buf *out)
{
	if (ms != 0 && ms % 3600000 == 0)
		return buf_printf(out, "%lldh", (long long)(ms / 3600000));
	if (ms != 0 && ms % 60000 == 0)
		return buf_printf(out, "%lldm", (long long)(ms / 60000));
	if (ms != 0 && ms % 1000 == 0)
		return buf_printf(out, "%llds", (long long)(ms / 1000));
	return buf_printf(out, "%lldms", (long long)ms);
}

/* Parse a boolean word; 0 or -EINVAL. */
int
parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*ret = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Resolve one uid list element, a number or a user name. */
static int
parse_uid(const char *s, uid_t *ret)
{
	struct passwd pw, *res = NULL;
	char pwbuf[4096];
	uint64_t v;

	if (isdigit((unsigned char)s[0])) {
		if (parse_uint64(s, (uint64_t)UINT32_MAX - 1, &v) < 0)
			return -EINVAL;
		*ret = (uid_t)v;
		return 0;
	}
	if (getpwnam_r(s, &pw, pwbuf, sizeof(pwbuf), &res) != 0 || res == NULL)
		return -ENOENT;
	*ret = pw.pw_uid;
	return 0;
}

/* Parse "1000, 1001,kpgpud" into at most max uids. */
int
parse_uid_list(const char *s, uid_t *ret, size_t max, size_t *ret_n,
    char *bad, size_t badlen)
{
	uid_t tmp[PARSE_UIDS_MAX];
	const char *p = s;
	size_t k = 0;
	int r;

	if (max > PARSE_UIDS_MAX)
		max = PARSE_UIDS_MAX;
	while (*p != '\0') {
		char item[64];
		size_t n;

		while (isspace((unsigned char)*p))
			p++;
		n = strcspn(p, ",");
		while (n > 0 && isspace((unsigned char)p[n - 1]))
			n--;
		snprintf(bad, badlen, "%.*s", (int)n, p);
		if (n == 0 || n >= sizeof(item))
			return -EINVAL;
		if (k == max)
			return -E2BIG;
		memcpy(item, p, n);
		item[n] = '\0';
		if ((r = parse_uid(item, &tmp[k])) < 0)
			return r;
		k++;
		p += strcspn(p, ",");
		if (*p == ',' && *++p == '\0')
			return -EINVAL;
	}
	memcpy(ret, tmp, k * sizeof(uid_t));
	*ret_n = k;
	return 0;
}

/* Strip one double-quoted string in place; -EINVAL if malformed. */
int
str_unquote(char *v)
{
	char *w = v;
	const char *r = v + 1;

	if (*v != '"')
		return -EINVAL;
	for (; *r != '"'; r++) {
		if (*r == '\0')
			return -EINVAL;
		if (*r == '\\') {
			r++;
			if (*r == 'n')
				*w++ = '\n';
			else if (*r == 't')
				*w++ = '\t';
			else if (*r == '"' || *r == '\\')
				*w++ = *r;
			else
				return -EINVAL;
			continue;
		}
		*w++ = *r;
	}
	if (r[1] != '\0')
		return -EINVAL;
	*w = '\0';
	return 0;
}

/* Append s in double quotes, escaping quote, backslash, newline, tab. */
int
buf_put_quoted(struct buf *b, const char *s)
{
	int r = buf_putc(b, '"');

	for (; *s != '\0' && r == 0; s++) {
		if (*s == '\n')
			r = buf_puts(b, "\\n");
		else if (*s == '\t')
			r = buf_puts(b, "\\t");
		else if (*s == '"' || *s == '\\')
			r = buf_printf(b, "\\%c", *s);
		else
			r = buf_putc(b, *s);
	}
	return r == 0 ? buf_putc(b, '"') : r;
}

/* Set close-on-exec on fd. */
int
fd_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -errno;
	if ((fl & FD_CLOEXEC) == 0 && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* Make fd non-blocking. */
int
fd_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if ((fl & O_NONBLOCK) == 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Read all of fd into b, failing with -EFBIG beyond cap bytes. */
static int
read_fd_capped(int fd, size_t cap, struct buf *b)
{
	char chunk[8192];
	ssize_t n;
	int r;

	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		if ((size_t)n > cap - b->len)
			return -EFBIG;
		if ((r = buf_append(b, chunk, (size_t)n)) < 0)
			return r == -E2BIG ? -EFBIG : r;
	}
}

/* Read a whole file of at most cap bytes. */
int
read_file_capped(const char *path, size_t cap, char **ret_buf,
    size_t *ret_len)
{
	struct buf b = BUF_INIT(cap);
	int fd, r;
	char *p;

	if (cap == 0)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	r = read_fd_capped(fd, cap, &b);
	close(fd);
	if (r < 0)
		goto fail;
	if ((p = buf_steal(&b, ret_len)) == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	*ret_buf = p;
	return 0;
fail:
	buf_free_secret(&b);
	return r;
}

/* Overwrite a secret in memory. */
void
wipe(void *p, size_t n)
{
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}

/* Wipe and free a secret string. */
void
wipe_free_str(char *s)
{
	if (s == NULL)
		return;
	wipe(s, strlen(s));
	free(s);
}

/* Read a clock as microseconds. */
static uint64_t
clock_usec(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Monotonic milliseconds. */
uint64_t
monotonic_ms(void)
{
	return clock_usec(CLOCK_MONOTONIC) / 1000u;
}

/* Monotonic microseconds (the unit of sd_notify MONOTONIC_USEC). */
uint64_t
monotonic_usec(void)
{
	return clock_usec(CLOCK_MONOTONIC);
}

/* Wall-clock milliseconds since the epoch. */
uint64_t
realtime_ms(void)
{
	return clock_usec(CLOCK_REALTIME) / 1000u;
}

/* Format t as RFC 3339 UTC with seconds. */
int
time_rfc3339(time_t t, char *out, size_t outlen)
{
	struct tm tm;

	if (outlen < TIME_RFC3339_LEN)
		return -ENOSPC;
	if (gmtime_r(&t, &tm) == NULL)
		return -EOVERFLOW;
	if (tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
		return -EOVERFLOW;
	snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02dZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec);
	return 0;
}

/* Format epoch milliseconds as RFC 3339 UTC with milliseconds. */
int
time_rfc3339_ms(uint64_t epoch_ms, char *out, size_t outlen)
{
	char sec[TIME_RFC3339_LEN];
	int r;

	if (outlen < TIME_RFC3339_MS_LEN)
		return -ENOSPC;
	if (epoch_ms / 1000u > (uint64_t)INT64_MAX)
		return -EOVERFLOW;
	if ((r = time_rfc3339((time_t)(epoch_ms / 1000u), sec,
	    sizeof(sec))) < 0)
		return r;
	/* sec ends in 'Z': splice the fraction in before it */
	snprintf(out, outlen, "%.19s.%03uZ", sec,
	    (unsigned int)(epoch_ms % 1000u));
	return 0;
}

/* 32-bit FNV-1a of s, continuing from h. */
uint32_t
fnv1a32(uint32_t h, const char *s)
{
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* 64-bit FNV-1a of s, continuing from h. */
uint64_t
fnv1a64(uint64_t h, const char *s)
{
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* A non-zero PRNG seed: from the kernel, else from time and pid. */
uint64_t
prng_seed(void)
{
	uint64_t s = 0;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s) ||
	    s == 0)
		s = (monotonic_usec() ^ ((uint64_t)getpid() << 40) ^
		    (uint64_t)time(NULL)) * 0x9e3779b97f4a7c15ull;
	return s != 0 ? s : 0x9e3779b97f4a7c15ull;
}

/* xorshift64: advance *state (never 0 once seeded) and return it. */
uint64_t
prng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

/* Doubling, capped retry delay with equal jitter; see util.h. */
unsigned
backoff_delay_ms(unsigned base_ms, unsigned max_ms, unsigned attempt,
    uint64_t *rng)
{
	uint64_t d = (uint64_t)base_ms << (attempt > 20 ? 20 : attempt);

	if (d > max_ms)
		d = max_ms;
	return (unsigned)(d / 2 + prng_next(rng) % (d / 2 + 1));
}

/* Write a formatted reason into err when there is one; see util.h. */
int
vseterr(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err != NULL && errlen > 0)
		vsnprintf(err, errlen, fmt, ap);
	return -EINVAL;
}

/* The same with the arguments inline; see util.h. */
int
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vseterr(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Whether the n bytes at s form one DNS-1123 label (no length limit). */
static bool
dns1123_label_n(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c == '-' && i != 0 && i != n - 1)
			continue;
		return false;
	}
	return true;
}

/* Whether s is a DNS-1123 label (namespace names). */
bool
dns1123_label_valid(const char *s)
{
	size_t n;

	if (s == NULL)
		return false;
	n = strnlen(s, DNS1123_LABEL_MAX + 1);
	return n <= DNS1123_LABEL_MAX && dns1123_label_n(s, n);
}

/* Whether s is a DNS-1123 subdomain (most object names). */
bool
dns1123_subdomain_valid(const char *s)
{
	const char *p, *dot;
	size_t n;

	if (s == NULL)
		return false;
	n = strnlen(s, DNS1123_SUBDOMAIN_MAX + 1);
	if (n == 0 || n > DNS1123_SUBDOMAIN_MAX)
		return false;
	for (p = s;; p = dot + 1) {
		dot = strchr(p, '.');
		if (!dns1123_label_n(p, dot ? (size_t)(dot - p) : strlen(p)))
			return false;
		if (dot == NULL)
			return true;
	}
}
