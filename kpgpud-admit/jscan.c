/*
 * Single-pass JSON scanner: see jscan.h. Every rule below is the one
 * jansson 2.14's json_loadb() applies with no flags, so that a body this
 * scanner accepts is exactly a body jansson accepts.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-admit/jscan.h"

#define KEY_MAX		64	/* unescaped member names compared; longer
				   ones cannot be in a schema */

struct scan {
	const unsigned char	*b;
	size_t			 len;
	size_t			 pos;
	const struct jscan_node	*nodes;
	size_t			 nnodes;
	struct jscan_span	*spans;
	struct jscan_list	*lists;
	int			 depth;		/* open containers */
	unsigned char		 open[JSCAN_MAX_DEPTH];	/* '{' or '[' */
	signed char		 node[JSCAN_MAX_DEPTH];	/* schema node, -1 */
};

/* Whether c is an ASCII digit. */
static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Skip white space. */
static inline void
skip_ws(struct scan *s)
{
	s->pos = jscan_skip_ws((const char *)s->b, s->pos, s->len);
}

/* Length of the well-formed UTF-8 sequence at p (p[0] >= 0x80), or 0. */
static size_t
utf8_seq(const unsigned char *p, size_t avail)
{
	unsigned c = p[0], v;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		v = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		v = c & 0x07;
	} else
		return 0;
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3f);
	}
	if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) ||
	    (n == 3 && v < 0x800) || (n == 4 && v < 0x10000))
		return 0;
	return n;
}

/* The value of the 4 hex digits at b[i], or -1. */
static long
hex4(const unsigned char *b, size_t i, size_t len)
{
	long v = 0;

	if (len < 4 || i > len - 4)
		return -1;
	for (size_t k = i; k < i + 4; k++) {
		unsigned char c = b[k];

		if (is_digit(c))
			v = v * 16 + (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v = v * 16 + (c - 'A' + 10);
		else
			return -1;
	}
	return v;
}

/*
 * Length of the valid escape at b[i] (a backslash), or 0: \u0000 and
 * unpaired surrogates are refused as jansson refuses them.
 */
static size_t
escape_len(const unsigned char *b, size_t i, size_t len)
{
	long u, u2;

	if (i + 1 >= len)
		return 0;
	switch (b[i + 1]) {
	case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r':
	case 't':
		return 2;
	case 'u':
		break;
	default:
		return 0;
	}
	if ((u = hex4(b, i + 2, len)) <= 0 || (u >= 0xdc00 && u <= 0xdfff))
		return 0;
	if (u < 0xd800 || u > 0xdbff)
		return 6;
	if (i + 7 >= len || b[i + 6] != '\\' || b[i + 7] != 'u')
		return 0;
	u2 = hex4(b, i + 8, len);
	return u2 >= 0xdc00 && u2 <= 0xdfff ? 12 : 0;
}

/*
 * The bytes of v that are a quote, a backslash, a control byte or not
 * ASCII, as their top bits. The lowest one set is exact (the borrows of
 * the subtractions only reach bytes above one that matches), so on a
 * little-endian machine it gives the first such byte in memory.
 */
static inline uint64_t
special8(uint64_t v)
{
	const uint64_t ones = 0x0101010101010101ULL;
	uint64_t ctl = (v - ones * 0x20) & ~v;
	uint64_t q = v ^ (ones * '"'), bs = v ^ (ones * '\\');

	q = (q - ones) & ~q;
	bs = (bs - ones) & ~bs;
	return (ctl | q | bs | v) & ones * 0x80;
}

/* Scan the string at s->pos (its '"'); *esc: whether it has escapes. */
static int
scan_string(struct scan *s, bool *esc)
{
	const unsigned char *b = s->b;
	size_t i = s->pos + 1, k;
	uint64_t v, m;

	*esc = false;
	for (;;) {
		for (; s->len >= 8 && i <= s->len - 8; i += 8) {
			memcpy(&v, b + i, 8);
			if ((m = special8(v)) != 0) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
				i += (size_t)__builtin_ctzll(m) / 8;
#endif
				break;
			}
		}
		if (i >= s->len)
			return -EINVAL;
		if (b[i] == '"')
			break;
		if (b[i] < 0x20)
			return -EINVAL;
		if (b[i] < 0x80 && b[i] != '\\') {
			i++;
			continue;
		}
		if (b[i] == '\\')
			k = escape_len(b, i, s->len), *esc = true;
		else
			k = utf8_seq(b + i, s->len - i);
		if (k == 0)
			return -EINVAL;
		i += k;
	}
	s->pos = i + 1;
	return 0;
}

/* Whether an integer of n digits at p overflows jansson's 64-bit json_int_t. */
static bool
int_overflows(const unsigned char *p, size_t n, bool neg)
{
	if (n != 19)
		return n > 19;
	return memcmp(p, neg ? "9223372036854775808" : "9223372036854775807",
	    19) > 0;
}

/*
 * Scan the number at s->pos. A number cannot end a valid document (the top
 * is an object or array), so one that reaches the end is refused before
 * strtod(), which therefore never reads past the buffer.
 */
static int
scan_number(struct scan *s)
{
	const unsigned char *b = s->b;
	size_t i = s->pos, n = s->len, digits;
	bool neg = false, real = false;
	double v;

	if (b[i] == '-')
		neg = true, i++;
	if (i >= n || !is_digit(b[i]))
		return -EINVAL;
	if (b[i] == '0') {
		if (++i < n && is_digit(b[i]))
			return -EINVAL;
	} else
		while (i < n && is_digit(b[i]))
			i++;
	digits = i - s->pos - neg;
	if (i < n && b[i] == '.') {
		if (++i >= n || !is_digit(b[i]))
			return -EINVAL;
		while (i < n && is_digit(b[i]))
			i++;
		real = true;
	}
	if (i < n && (b[i] == 'e' || b[i] == 'E')) {
		if (++i < n && (b[i] == '+' || b[i] == '-'))
			i++;
		if (i >= n || !is_digit(b[i]))
			return -EINVAL;
		while (i < n && is_digit(b[i]))
			i++;
		real = true;
	}
	if (i >= n)
		return -EINVAL;
	if (!real && int_overflows(b + s->pos + neg, digits, neg))
		return -EINVAL;
	if (real) {
		errno = 0;
		v = strtod((const char *)b + s->pos, NULL);
		if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE)
			return -EINVAL;
	}
	s->pos = i;
	return 0;
}

/* Scan the literal word at s->pos. */
static int
scan_literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if (s->len - s->pos < n || memcmp(s->b + s->pos, word, n) != 0)
		return -EINVAL;
	s->pos += n;
	return 0;
}

/* Append code point c as UTF-8 at out; the bytes written. */
static size_t
put_utf8(unsigned char *out, unsigned long c)
{
	if (c < 0x80) {
		out[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (unsigned char)(0xc0 | c >> 6);
		out[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (unsigned char)(0xe0 | c >> 12);
		out[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | c >> 18);
	out[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
	out[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
	out[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

size_t
jscan_unescape(const char *in, size_t n, char *out)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const unsigned char *b = (const unsigned char *)in;
	unsigned char *o = (unsigned char *)out;
	size_t i = 0, w = 0;
	long c;

	while (i < n) {
		if (b[i] != '\\') {
			o[w++] = b[i++];
			continue;
		}
		if (b[i + 1] != 'u') {
			o[w++] = (unsigned char)to[strchr(from, b[i + 1]) - from];
			i += 2;
			continue;
		}
		c = hex4(b, i + 2, n);
		i += 6;
		if (c >= 0xd800 && c < 0xdc00) {	/* a pair follows */
			c = 0x10000 + ((c - 0xd800) << 10) +
			    (hex4(b, i + 2, n) - 0xdc00);
			i += 6;
		}
		w += put_utf8(o + w, (unsigned long)c);
	}
	return w;
}

/* The schema child of node p named by the raw key k, or -1. */
static int
child(const struct scan *s, int p, const unsigned char *k, size_t klen,
    bool esc)
{
	char buf[KEY_MAX * 6];	/* \\uXXXX: 6 bytes for one */
	const char *key = (const char *)k;
	size_t n = klen;

	if (esc && klen > sizeof(buf))	/* longer than any schema name */
		return -1;
	if (esc) {
		n = jscan_unescape((const char *)k, klen, buf);
		key = buf;
	}
	for (size_t i = (size_t)p + 1; i < s->nnodes; i++)
		if (s->nodes[i].parent == p && s->nodes[i].key != NULL &&
		    strlen(s->nodes[i].key) == n &&
		    memcmp(s->nodes[i].key, key, n) == 0)
			return (int)i;
	return -1;
}

/* The element node of node p (each element of p), or -1. */
static int
elem_child(const struct scan *s, int p)
{
	for (size_t i = (size_t)p + 1; i < s->nnodes; i++)
		if (s->nodes[i].parent == p && s->nodes[i].key == NULL)
			return (int)i;
	return -1;
}

/* Whether node i is below node n. */
static bool
descends(const struct jscan_node *nodes, size_t i, int n)
{
	for (int p = nodes[i].parent; p >= 0; p = nodes[p].parent)
		if (p == n)
			return true;
	return false;
}

/* Forget what was recorded under node n: a later duplicate replaces it. */
static void
begin(struct scan *s, int n, size_t off)
{
	if (n < 0)
		return;
	for (size_t i = (size_t)n + 1; i < s->nnodes; i++)
		if (descends(s->nodes, i, n)) {
			s->spans[i].len = 0;
			if (s->nodes[i].key == NULL)
				s->lists[i].n = 0;
		}
	s->spans[n].off = off;
	s->spans[n].len = 0;
}

/* Node n's value ends at s->pos: record it, and an element in its list. */
static void
done(struct scan *s, int n)
{
	struct jscan_list *l;

	if (n < 0)
		return;
	s->spans[n].len = s->pos - s->spans[n].off;
	if (n == 0 || s->nodes[n].key != NULL)
		return;
	l = &s->lists[n];
	if (l->n < l->cap)
		memcpy(l->rec + l->n * l->width, s->spans + n,
		    l->width * sizeof(*l->rec));
	l->n++;
}

/* Scan a scalar or open a container at s->pos for node n: 0, 1 (opened). */
static int
value(struct scan *s, int n)
{
	size_t start = s->pos;
	bool esc;
	int e;

	if (s->depth >= JSCAN_MAX_DEPTH || start >= s->len)
		return -EINVAL;
	begin(s, n, start);
	switch (s->b[start]) {
	case '{': case '[':
		s->open[s->depth] = s->b[start];
		s->node[s->depth++] = (signed char)n;
		s->pos++;
		return 1;
	case '"': e = scan_string(s, &esc); break;
	case 't': e = scan_literal(s, "true"); break;
	case 'f': e = scan_literal(s, "false"); break;
	case 'n': e = scan_literal(s, "null"); break;
	default: e = scan_number(s); break;
	}
	if (e == 0)
		done(s, n);
	return e;
}

/* Read a member name and ':' in the innermost object; *n: its node. */
static int
member(struct scan *s, int *n)
{
	int p = s->node[s->depth - 1];
	size_t k = s->pos + 1;
	bool esc;

	if (s->pos >= s->len || s->b[s->pos] != '"' || scan_string(s, &esc) < 0)
		return -EINVAL;
	*n = p >= 0 ? child(s, p, s->b + k, s->pos - 1 - k, esc) : -1;
	skip_ws(s);
	if (s->pos >= s->len || s->b[s->pos] != ':')
		return -EINVAL;
	s->pos++;
	skip_ws(s);
	return 0;
}

/* Start the first or next entry of the innermost container; *n: its node. */
static int
entry(struct scan *s, int *n)
{
	int p = s->node[s->depth - 1];

	if (s->open[s->depth - 1] == '{')
		return member(s, n);
	*n = p >= 0 ? elem_child(s, p) : -1;
	return 0;
}

/*
 * After a value: close containers and find the next entry. Returns 0 with
 * *n set for the next value, 1 when the document is complete, -EINVAL.
 */
static int
after_value(struct scan *s, int *n)
{
	for (;;) {
		int top;

		skip_ws(s);
		if (s->depth == 0)
			return s->pos == s->len ? 1 : -EINVAL;
		if (s->pos >= s->len)
			return -EINVAL;
		if (s->b[s->pos] == ',') {
			s->pos++;
			skip_ws(s);
			return entry(s, n);
		}
		if (s->b[s->pos] != (s->open[s->depth - 1] == '{' ? '}' : ']'))
			return -EINVAL;
		s->pos++;
		top = s->node[--s->depth];
		done(s, top);
	}
}

/* Validate and record the schema's members; see jscan.h. */
int
jscan_run(const char *buf, size_t len, const struct jscan_node *nodes,
    size_t nnodes, struct jscan_span *spans, struct jscan_list *lists)
{
	struct scan s;
	int n = 0, e;

	if (nnodes < 1 || nnodes > JSCAN_MAX_NODES)
		return -EINVAL;
	for (size_t i = 1; i < nnodes; i++) {
		if (nodes[i].parent < 0 || (size_t)nodes[i].parent >= i ||
		    (nodes[i].key == NULL && (lists == NULL ||
		    lists[i].width < 1 || i + lists[i].width > nnodes)))
			return -EINVAL;
		if (nodes[i].key == NULL)
			lists[i].n = 0;
	}
	s.lists = lists;
	s.b = (const unsigned char *)buf;
	s.len = len;
	s.pos = 0;
	s.nodes = nodes;
	s.nnodes = nnodes;
	s.spans = spans;
	s.depth = 0;
	memset(spans, 0, nnodes * sizeof(*spans));
	skip_ws(&s);
	if (s.pos >= len || (s.b[s.pos] != '{' && s.b[s.pos] != '['))
		return -EINVAL;
	for (;;) {
		if ((e = value(&s, n)) < 0)
			return e;
		if (e == 1) {
			skip_ws(&s);
			if (s.pos >= len)
				return -EINVAL;
			if (s.b[s.pos] != (s.open[s.depth - 1] == '{' ? '}' :
			    ']')) {
				if (entry(&s, &n) < 0)
					return -EINVAL;
				continue;
			}
		}
		if ((e = after_value(&s, &n)) < 0)
			return e;
		if (e == 1)
			return 0;
	}
}

/* 0 when buf is one JSON document; see jscan.h. */
int
jscan_validate(const char *buf, size_t len)
{
	static const struct jscan_node root = { -1, NULL };
	struct jscan_span span;

	return jscan_run(buf, len, &root, 1, &span, NULL);
}

/* Step through the elements of an accepted array; see jscan.h. */
int
jscan_next_elem(const char *buf, size_t len, size_t *pos,
    struct jscan_span *elem)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t i = *pos + 1, start, end;
	int d = 0;

	while (i < len && jscan_is_ws(b[i]))
		i++;
	if (i >= len || b[i] == ']')
		return 0;
	for (start = i; i < len; i++) {
		if (b[i] == '"') {
			for (i++; i < len && b[i] != '"'; i++)
				if (b[i] == '\\')
					i++;
		} else if (b[i] == '{' || b[i] == '[')
			d++;
		else if ((b[i] == '}' || b[i] == ']') && d-- == 0)
			break;
		else if (b[i] == ',' && d == 0)
			break;
	}
	for (end = i; end > start && jscan_is_ws(b[end - 1]); end--)
		;
	elem->off = start;
	elem->len = end - start;
	*pos = i;
	return 1;
}
