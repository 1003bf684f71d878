/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 request framing: see httphead.h. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "kpgpud-admit/httphead.h"

/* The head of a request being parsed. */
struct hp {
	const char		*b;
	size_t			 len;
	size_t			 pos;
	struct httphead		 h;
	int			 nfields;
	bool			 has_te;
};

/* Length of the head; see httphead.h. */
size_t
httphead_end(const char *buf, size_t len, size_t *scan)
{
	size_t i = *scan > 3 ? *scan - 3 : 0;
	const char *p;

	while (i < len &&
	    (p = memchr(buf + i, '\n', len - i)) != NULL) {
		i = (size_t)(p - buf);
		if (i >= 3 && memcmp(p - 3, "\r\n\r\n", 4) == 0)
			return i + 1;
		i++;
	}
	*scan = len;
	return 0;
}

/* Whether c may be in a token (RFC 9110 tchar). */
static bool
tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != 0 && strchr("!#$%&'*+-.^_`|~",
	    c) != NULL);
}

/* The end of the line at p->pos (its CR); false on a bare CR or LF. */
static bool
line_end(struct hp *p, size_t *ret)
{
	const char *e = memchr(p->b + p->pos, '\r', p->len - p->pos);

	if (e == NULL || (size_t)(e - p->b) + 1 >= p->len || e[1] != '\n' ||
	    memchr(p->b + p->pos, '\n', (size_t)(e - p->b) - p->pos) != NULL)
		return false;
	*ret = (size_t)(e - p->b);
	return true;
}

/* The request line: METHOD SP origin-form SP HTTP/1.x CRLF. */
static int
request_line(struct hp *p)
{
	static const struct { const char *name; enum httphead_method m; }
	    methods[] = { { "GET", HTTPHEAD_GET }, { "HEAD", HTTPHEAD_HEAD },
	    { "POST", HTTPHEAD_POST } };
	size_t end, i = 0, t;

	if (!line_end(p, &end))
		return 400;
	while (i < end && tchar((unsigned char)p->b[i]))
		i++;
	if (i == 0 || i > 16 || i >= end || p->b[i] != ' ')
		return 400;
	p->h.method = HTTPHEAD_OTHER;
	for (size_t k = 0; k < sizeof(methods) / sizeof(methods[0]); k++)
		if (strlen(methods[k].name) == i &&
		    memcmp(p->b, methods[k].name, i) == 0)
			p->h.method = methods[k].m;
	t = ++i;
	if (t >= end || p->b[t] != '/')
		return 400;
	while (i < end && p->b[i] > ' ' && p->b[i] < 0x7f)
		i++;
	if (i >= end || p->b[i] != ' ')
		return 400;
	p->h.path_off = t;
	p->h.path_len = i - t;
	for (size_t k = t; k < i; k++)
		if (p->b[k] == '?') {
			p->h.path_len = k - t;
			p->h.query_off = k + 1;
			p->h.query_len = i - k - 1;
			break;
		}
	i++;
	if (end - i != 8 || memcmp(p->b + i, "HTTP/", 5) != 0 ||
	    p->b[i + 6] != '.' || p->b[i + 5] < '0' || p->b[i + 5] > '9' ||
	    p->b[i + 7] < '0' || p->b[i + 7] > '9')
		return 400;
	if (p->b[i + 5] != '1' || p->b[i + 7] > '1')
		return 505;
	p->h.minor = (unsigned)(p->b[i + 7] - '0');
	p->pos = end + 2;
	return 0;
}

/* Whether name[0, n) is the field name want (case-insensitive). */
static bool
named(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* A Content-Length value: digits only; a repeat must say the same. */
static int
content_length(struct hp *p, const char *v, size_t n)
{
	int64_t cl = 0;

	if (n == 0 || n > 18)
		return 400;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 400;
		cl = cl * 10 + (v[i] - '0');
	}
	if (p->h.content_length >= 0 && p->h.content_length != cl)
		return 400;
	p->h.content_length = cl;
	return 0;
}

/* The tokens of a Connection value: only "close" changes anything. */
static int
connection(struct hp *p, const char *v, size_t n)
{
	size_t i = 0, s, e;

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		for (s = i; i < n && v[i] != ','; i++)
			;
		for (e = i; e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'); e--)
			;
		if (named(v + s, e - s, "close"))
			p->h.close = true;
	}
	return 0;
}

/* Act on one field the server reads; others are only checked. */
static int
field(struct hp *p, const char *name, size_t nl, const char *v, size_t n)
{
	if (named(name, nl, "content-length"))
		return content_length(p, v, n);
	if (named(name, nl, "transfer-encoding")) {
		if (p->has_te)
			return 400;
		p->has_te = true;
		if (!named(v, n, "chunked"))
			return 501;
		p->h.chunked = true;
	} else if (named(name, nl, "connection"))
		return connection(p, v, n);
	else if (named(name, nl, "content-type")) {
		if (p->h.has_ctype)
			return 400;
		p->h.has_ctype = true;
		p->h.ctype_off = (size_t)(v - p->b);
		p->h.ctype_len = n;
	} else if (named(name, nl, "expect")) {
		if (!named(v, n, "100-continue"))
			return 417;
		p->h.expect_continue = true;
	}
	return 0;
}

/* One field line: name ":" OWS value OWS CRLF. */
static int
field_line(struct hp *p)
{
	size_t end, i = p->pos, name, vs, ve;

	if (!line_end(p, &end))
		return 400;
	if (++p->nfields > HTTPHEAD_MAX_FIELDS)
		return 431;
	while (i < end && tchar((unsigned char)p->b[i]))
		i++;
	if (i == p->pos || i >= end || p->b[i] != ':')
		return 400;	/* obs-fold, no name, space before ':' */
	for (vs = i + 1; vs < end && (p->b[vs] == ' ' || p->b[vs] == '\t');
	    vs++)
		;
	for (ve = end; ve > vs && (p->b[ve - 1] == ' ' || p->b[ve - 1] ==
	    '\t'); ve--)
		;
	for (size_t k = vs; k < ve; k++) {
		unsigned char c = (unsigned char)p->b[k];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 400;
	}
	name = p->pos;
	p->pos = end + 2;
	return field(p, p->b + name, i - name, p->b + vs, ve - vs);
}

/* Parse a complete head; see httphead.h. */
int
httphead_parse(const char *buf, size_t len, struct httphead *ret,
    int *ret_status)
{
	struct hp p = { .b = buf, .len = len };
	int st;

	p.h.content_length = -1;
	if ((st = request_line(&p)) != 0)
		goto fail;
	while (p.pos + 2 <= len && memcmp(buf + p.pos, "\r\n", 2) != 0)
		if ((st = field_line(&p)) != 0)
			goto fail;
	if (p.pos + 2 != len) {
		st = 400;
		goto fail;
	}
	st = 400;
	if (p.h.chunked && (p.h.content_length >= 0 || p.h.minor == 0))
		goto fail;
	if (p.h.minor == 0)
		p.h.close = true;	/* no HTTP/1.0 keep-alive */
	p.h.head_len = len;
	*ret = p.h;
	return 0;
fail:
	*ret_status = st;
	return -EPROTO;
}

enum {
	CH_SIZE,	/* hex digits of a chunk-size */
	CH_EXT,		/* chunk extensions, up to CR */
	CH_SIZE_LF,	/* LF after the chunk-size line */
	CH_DATA,	/* data bytes of the chunk */
	CH_DATA_CR,	/* CRLF after the data */
	CH_DATA_LF,
	CH_TRAILER,	/* a trailer line (or the final empty one) */
	CH_TRAILER_LF,
	CH_DONE,
};

/* The value of a hex digit, or -1. */
static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* One byte of a chunk-size, extension or trailer line. */
static int
chunk_line_byte(struct httpchunk *st, char c, size_t *out, size_t max)
{
	int d;

	switch (st->state) {
	case CH_SIZE:
		if ((d = hexval(c)) >= 0) {
			if (st->line >= 15)
				return -EPROTO;
			st->left = st->left * 16 + (uint64_t)d;
			st->line++;
			return 0;
		}
		if (st->line == 0 || (c != ';' && c != '\r'))
			return -EPROTO;
		if (st->left > max - *out)
			return -EFBIG;
		st->state = c == ';' ? CH_EXT : CH_SIZE_LF;
		return 0;
	case CH_EXT:
		if (++st->line > HTTPHEAD_MAX_CHUNKLINE ||
		    (c != '\r' && c != '\t' && ((unsigned char)c < 0x20 ||
		    c == 0x7f)))
			return -EPROTO;
		if (c == '\r')
			st->state = CH_SIZE_LF;
		return 0;
	case CH_SIZE_LF:
		if (c != '\n')
			return -EPROTO;
		st->line = 0;
		st->state = st->left > 0 ? CH_DATA : CH_TRAILER;
		return 0;
	case CH_DATA_CR:
		st->state = CH_DATA_LF;
		return c == '\r' ? 0 : -EPROTO;
	case CH_DATA_LF:
		st->state = CH_SIZE;
		return c == '\n' ? 0 : -EPROTO;
	case CH_TRAILER:
		if (++st->trailers > HTTPHEAD_MAX_TRAILERS ||
		    (c == '\n') || (c != '\r' && c != '\t' &&
		    ((unsigned char)c < 0x20 || c == 0x7f)))
			return -EPROTO;
		if (c == '\r')
			st->state = CH_TRAILER_LF;
		else
			st->line++;
		return 0;
	case CH_TRAILER_LF:
		if (c != '\n')
			return -EPROTO;
		st->state = st->line == 0 ? CH_DONE : CH_TRAILER;
		st->line = 0;
		return 0;
	default:
		return -EPROTO;
	}
}

/* Decode chunked bytes in place; see httphead.h. */
int
httphead_chunked(struct httpchunk *st, char *buf, size_t len, size_t *pos,
    size_t *out, size_t max)
{
	size_t p = *pos, o = *out, n;
	int rv = 0;

	while (p < len && st->state != CH_DONE) {
		if (st->state == CH_DATA) {
			n = len - p;
			if (n > st->left)
				n = (size_t)st->left;
			memmove(buf + o, buf + p, n);
			o += n;
			p += n;
			if ((st->left -= n) == 0)
				st->state = CH_DATA_CR;
			continue;
		}
		if ((rv = chunk_line_byte(st, buf[p], &o, max)) < 0)
			break;
		p++;
	}
	*pos = p;
	*out = o;
	if (rv < 0)
		return rv;
	return st->state == CH_DONE;
}

/* One query parameter's raw value; see httphead.h. */
bool
httphead_query(const char *q, size_t qlen, const char *key, char *out,
    size_t outlen)
{
	size_t kl = strlen(key), i = 0, e, v;

	while (i < qlen) {
		const char *amp = memchr(q + i, '&', qlen - i);

		e = amp != NULL ? (size_t)(amp - q) : qlen;
		if (e - i > kl && q[i + kl] == '=' &&
		    memcmp(q + i, key, kl) == 0) {
			v = i + kl + 1;
			if (e - v >= outlen)
				return false;
			memcpy(out, q + v, e - v);
			out[e - v] = '\0';
			return true;
		}
		i = e + 1;
	}
	return false;
}
