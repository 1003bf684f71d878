/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook's HTTP/1.1 request framing, as pure functions of the bytes a
 * peer sent: the request head (request line and the fields the server acts
 * on), a chunked body decoded in place, and one query parameter. Strict:
 * whatever could be read two ways (both Content-Length and
 * Transfer-Encoding, differing Content-Lengths, obs-fold, bare CR or LF,
 * white space before a colon, control bytes) is refused, with the status
 * to answer. No I/O, no allocation.
 */
#ifndef KPGPUD_ADMIT_HTTPHEAD_H
#define KPGPUD_ADMIT_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTPHEAD_MAX_FIELDS	100	/* header fields in one request */
#define HTTPHEAD_MAX_CHUNKLINE	256	/* a chunk-size line, extensions in */
#define HTTPHEAD_MAX_TRAILERS	4096	/* trailer bytes after the last chunk */

enum httphead_method {
	HTTPHEAD_GET,
	HTTPHEAD_HEAD,
	HTTPHEAD_POST,
	HTTPHEAD_OTHER,		/* a valid token the server does not serve */
};

/* A parsed request head; offsets are into the buffer parsed. */
struct httphead {
	enum httphead_method	 method;
	unsigned		 minor;		/* HTTP/1.minor, 0 or 1 */
	size_t			 path_off, path_len;	/* before '?' */
	size_t			 query_off, query_len;	/* after '?' */
	size_t			 ctype_off, ctype_len;	/* Content-Type */
	bool			 has_ctype;
	int64_t			 content_length;	/* -1: none */
	bool			 chunked;	/* Transfer-Encoding: chunked */
	bool			 close;		/* no keep-alive after it */
	bool			 expect_continue;
	size_t			 head_len;	/* through the empty line */
};

/*
 * The length of the head in buf (through its empty line), searching from
 * *scan on (the caller keeps *scan between calls so bytes that arrive one
 * at a time are looked at once); 0 when the empty line has not come yet.
 */
size_t	 httphead_end(const char *buf, size_t len, size_t *scan);

/*
 * Parse the complete head buf[0, len) (len from httphead_end). 0 with *ret
 * filled, or -EPROTO with the status to answer in *ret_status (400
 * malformed or ambiguous, 431 too many fields, 417 an Expect other than
 * 100-continue, 501 a transfer coding other than chunked, 505 a version
 * other than HTTP/1.0 and 1.1); ret untouched then.
 */
int	 httphead_parse(const char *buf, size_t len, struct httphead *ret,
	    int *ret_status);

/* Where a chunked body's decoder is (zeroed: at the first chunk-size). */
struct httpchunk {
	int			 state;
	uint64_t		 left;		/* data bytes of this chunk */
	size_t			 line;		/* bytes of this line so far */
	size_t			 trailers;	/* trailer bytes so far */
};

/*
 * Decode chunked bytes in place: buf[*pos, len) are received and not yet
 * decoded, buf[0, *out) the body so far (*out <= *pos). Moves what it
 * decodes down to *out. 1 when the body ended (*pos is then past it and
 * its trailers), 0 when more bytes are needed, -EPROTO for a malformed
 * encoding, -EFBIG when the body would pass max.
 */
int	 httphead_chunked(struct httpchunk *st, char *buf, size_t len,
	    size_t *pos, size_t *out, size_t max);

/*
 * The raw value of the first key=value in query q[0, qlen) named key, into
 * out (NUL-terminated); false when absent or longer than outlen - 1.
 */
bool	 httphead_query(const char *q, size_t qlen, const char *key,
	    char *out, size_t outlen);

#endif
