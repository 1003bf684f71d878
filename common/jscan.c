/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Single-pass JSON scanner and the readers built on it: see jscan.h. Every
 * rule below is the one jansson 2.14's json_loadb() applies with no flags,
 * so that a body this scanner accepts is exactly a body jansson accepts
 * (tests/fuzz/fuzz_json.c compares the two).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/jscan.h"

_Static_assert(JSCAN_MAX_NODES <= 32, "node sets are 32-bit words");

#define KEY_MAX		64	/* unescaped member names compared; longer
				   ones cannot be in a schema */

/*
 * What jscan_run() keeps besides its position (a local): the schema, what
 * it recorded, and the open containers.
 */
struct scan {
	const struct jscan_node	*nodes;
	size_t			 nnodes;
	struct jscan_span	*spans;
	struct jscan_list	*lists;
	/* the schema as bit sets of nodes, made once per run */
	uint32_t		 kids[JSCAN_MAX_NODES];	/* named children */
	uint32_t		 below[JSCAN_MAX_NODES];	/* descendants */
	signed char		 elem[JSCAN_MAX_NODES];	/* element child, -1 */
	size_t			 klen[JSCAN_MAX_NODES];	/* key lengths */
	uint32_t		 dirty;		/* nodes with a record */
	unsigned char		 close[JSCAN_MAX_DEPTH];	/* '}' or ']' */
	signed char		 node[JSCAN_MAX_DEPTH];	/* schema node, -1 */
};

/* Whether c is an ASCII digit. */
static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
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

#if !defined(__SSE2__)
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
#endif

/*
 * The first byte from i on that is a quote, a backslash, a control byte or
 * not ASCII (len when none is before it); i is at most len. With SSE2
 * sixteen bytes at a time (the signed compare with 0x20 takes both the
 * control bytes and those of 0x80 and above), else eight (special8).
 */
static inline size_t
plain_run(const unsigned char *b, size_t len, size_t i)
{
#if defined(__SSE2__)
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
	const __m128i sp = _mm_set1_epi8(0x20);

	for (; len - i >= 16; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)
		    (b + i));
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
		    _mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)),
		    _mm_cmplt_epi8(v, sp)));

		if (m != 0)
			return i + (size_t)__builtin_ctz(m);
	}
#else
	uint64_t v, m;

	for (; len - i >= 8; i += 8) {
		memcpy(&v, b + i, 8);
		if ((m = special8(v)) != 0) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return i + (size_t)__builtin_ctzll(m) / 8;
#endif
			break;
		}
	}
#endif
	while (i < len && b[i] >= 0x20 && b[i] < 0x80 && b[i] != '"' &&
	    b[i] != '\\')
		i++;
	return i;
}

/*
 * The end (past the closing quote) of the string whose '"' is at b[i], or
 * 0 when it is not a valid string; *esc: whether it has escapes.
 */
static inline __attribute__((always_inline)) size_t
string_end(const unsigned char *b, size_t len, size_t i, bool *esc)
{
	size_t k;

	*esc = false;
	for (i++;;) {
		if ((i = plain_run(b, len, i)) >= len)
			return 0;
		if (b[i] == '"')
			return i + 1;
		if (b[i] < 0x20)
			return 0;
		if (b[i] == '\\')
			k = escape_len(b, i, len), *esc = true;
		else
			k = utf8_seq(b + i, len - i);
		if (k == 0)
			return 0;
		i += k;
	}
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
 * The end of the number at b[start], or 0. A number cannot end a valid
 * document (the top is an object or array), so one that reaches the end is
 * refused before strtod(), which therefore never reads past the buffer.
 */
static size_t
number_end(const unsigned char *b, size_t n, size_t start)
{
	size_t i = start, digits;
	bool neg = false, real = false;
	double v;

	if (b[i] == '-')
		neg = true, i++;
	if (i >= n || !is_digit(b[i]))
		return 0;
	if (b[i] == '0') {
		if (++i < n && is_digit(b[i]))
			return 0;
	} else
		while (i < n && is_digit(b[i]))
			i++;
	digits = i - start - neg;
	if (i < n && b[i] == '.') {
		if (++i >= n || !is_digit(b[i]))
			return 0;
		while (i < n && is_digit(b[i]))
			i++;
		real = true;
	}
	if (i < n && (b[i] == 'e' || b[i] == 'E')) {
		if (++i < n && (b[i] == '+' || b[i] == '-'))
			i++;
		if (i >= n || !is_digit(b[i]))
			return 0;
		while (i < n && is_digit(b[i]))
			i++;
		real = true;
	}
	if (i >= n)
		return 0;
	if (!real && int_overflows(b + start + neg, digits, neg))
		return 0;
	if (real) {
		errno = 0;
		v = strtod((const char *)b + start, NULL);
		if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE)
			return 0;
	}
	return i;
}

/* The end of the literal word at b[start], or 0. */
static size_t
literal_end(const unsigned char *b, size_t len, size_t start,
    const char *word)
{
	size_t n = strlen(word);

	if (len - start < n || memcmp(b + start, word, n) != 0)
		return 0;
	return start + n;
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
	uint32_t m;

	char buf[KEY_MAX * 6];	/* \\uXXXX: 6 bytes for one */
	const char *key = (const char *)k;
	size_t n = klen;

	if (esc && klen > sizeof(buf))	/* longer than any schema name */
		return -1;
	if (esc) {
		n = jscan_unescape((const char *)k, klen, buf);
		key = buf;
	}
	for (m = s->kids[p]; m != 0; m &= m - 1) {
		int i = __builtin_ctz(m);

		if (s->klen[i] == n && memcmp(s->nodes[i].key, key, n) == 0)
			return i;
	}
	return -1;
}

/*
 * Node n's value starts at off: forget what was recorded under it (a later
 * duplicate, or the next element of a list, replaces it).
 */
static void
begin(struct scan *s, int n, size_t off)
{
	uint32_t m = s->below[n] & s->dirty;

	s->dirty &= ~m;
	for (; m != 0; m &= m - 1) {
		int i = __builtin_ctz(m);

		s->spans[i].len = 0;
		if (s->nodes[i].key == NULL)
			s->lists[i].n = 0;
	}
	s->spans[n].off = off;
	s->spans[n].len = 0;
}

/* Node n's value ends at end: record it, and an element in its list. */
static void
done(struct scan *s, int n, size_t end)
{
	struct jscan_list *l;

	s->dirty |= 1u << n;
	s->spans[n].len = end - s->spans[n].off;
	if (n == 0 || s->nodes[n].key != NULL)
		return;
	l = &s->lists[n];
	if (l->n < l->cap)
		memcpy(l->rec + l->n * l->width, s->spans + n,
		    l->width * sizeof(*l->rec));
	l->n++;
}

/* The byte that closes a container opened by c. */
static inline unsigned char
closer(unsigned char c)
{
	return c == '{' ? '}' : ']';
}

/*
 * Validate and record the schema's members; see jscan.h. One loop over the
 * tokens with the position in a local: a value (for schema node n, -1 when
 * none), then the containers it closes, then the next member name or
 * element. Schema work happens only inside containers that have a node.
 */
int
jscan_run(const char *buf, size_t len, const struct jscan_node *nodes,
    size_t nnodes, struct jscan_span *spans, struct jscan_list *lists)
{
	const unsigned char *b = (const unsigned char *)buf;
	struct scan s;
	size_t pos, end;
	int n = 0, p, depth = 0;
	unsigned char c;
	bool esc;

	if (nnodes < 1 || nnodes > JSCAN_MAX_NODES)
		return -EINVAL;
	memset(s.kids, 0, sizeof(s.kids));
	memset(s.below, 0, sizeof(s.below));
	memset(s.elem, -1, sizeof(s.elem));
	for (size_t i = 1; i < nnodes; i++) {
		if (nodes[i].parent < 0 || (size_t)nodes[i].parent >= i ||
		    (nodes[i].key == NULL && (lists == NULL ||
		    lists[i].width < 1 || i + lists[i].width > nnodes)))
			return -EINVAL;
		if (nodes[i].key != NULL) {
			s.kids[nodes[i].parent] |= 1u << i;
			s.klen[i] = strlen(nodes[i].key);
		}
		else {
			lists[i].n = 0;
			if (s.elem[nodes[i].parent] < 0)
				s.elem[nodes[i].parent] = (signed char)i;
		}
		for (p = nodes[i].parent; p >= 0; p = nodes[p].parent)
			s.below[p] |= 1u << i;
	}
	s.dirty = 0;
	s.nodes = nodes;
	s.nnodes = nnodes;
	s.spans = spans;
	s.lists = lists;
	memset(spans, 0, nnodes * sizeof(*spans));
	pos = jscan_skip_ws(buf, 0, len);
	if (pos >= len || (b[pos] != '{' && b[pos] != '['))
		return -EINVAL;
	for (;;) {
		/*
		 * A value at pos. White space is skipped where a byte that
		 * cannot be space was expected (compact JSON has none), so the
		 * common case costs no extra test.
		 */
		if (depth >= JSCAN_MAX_DEPTH || pos >= len)
			return -EINVAL;
		c = b[pos];
		if (jscan_is_ws(c)) {
			pos = jscan_skip_ws(buf, pos, len);
			continue;
		}
		if (n >= 0)
			begin(&s, n, pos);
		if (c == '{' || c == '[') {
			s.close[depth] = closer(c);
			s.node[depth++] = (signed char)n;
			if ((pos = jscan_skip_ws(buf, pos + 1, len)) >= len)
				return -EINVAL;
			if (b[pos] != closer(c))
				goto entry;
		} else {
			switch (c) {
			case '"': end = string_end(b, len, pos, &esc); break;
			case 't': end = literal_end(b, len, pos, "true"); break;
			case 'f': end = literal_end(b, len, pos, "false"); break;
			case 'n': end = literal_end(b, len, pos, "null"); break;
			default: end = number_end(b, len, pos); break;
			}
			if (end == 0)
				return -EINVAL;
			pos = end;
			if (n >= 0)
				done(&s, n, pos);
		}
		/* After a value: close containers up to the next ','. */
		for (;;) {
			if (depth == 0) {
				pos = jscan_skip_ws(buf, pos, len);
				return pos == len ? 0 : -EINVAL;
			}
			if (pos >= len)
				return -EINVAL;
			c = b[pos];
			if (c == ',') {
				pos++;
				break;
			}
			if (c == s.close[depth - 1]) {
				pos++;
				if ((p = s.node[--depth]) >= 0)
					done(&s, p, pos);
			} else if (jscan_is_ws(c))
				pos = jscan_skip_ws(buf, pos, len);
			else
				return -EINVAL;
		}
entry:
		/* The next entry of the innermost container: its node. */
		p = s.node[depth - 1];
		if (s.close[depth - 1] == ']') {
			n = p >= 0 ? s.elem[p] : -1;
			continue;
		}
		if (pos < len && b[pos] != '"')
			pos = jscan_skip_ws(buf, pos, len);
		if (pos >= len || b[pos] != '"' ||
		    (end = string_end(b, len, pos, &esc)) == 0)
			return -EINVAL;
		n = p >= 0 ? child(&s, p, b + pos + 1, end - pos - 2, esc) :
		    -1;
		pos = end;
		if (pos < len && b[pos] != ':')
			pos = jscan_skip_ws(buf, pos, len);
		if (pos >= len || b[pos] != ':')
			return -EINVAL;
		pos++;
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

/* The end (past its quote) of the string at b[i] of accepted text. */
static size_t
skip_string(const unsigned char *b, size_t len, size_t i)
{
	for (i++; (i = plain_run(b, len, i)) < len; )
		if (b[i] == '"')
			return i + 1;
		else
			i += b[i] == '\\' ? 2 : 1;
	return len;
}

/* The end of the value at b[i] of accepted text. */
static size_t
skip_value(const unsigned char *b, size_t len, size_t i)
{
	int d = 0;

	if (b[i] == '"')
		return skip_string(b, len, i);
	if (b[i] != '{' && b[i] != '[') {
		while (i < len && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
		    !jscan_is_ws(b[i]))
			i++;
		return i;
	}
	do {
		if (b[i] == '"') {
			i = skip_string(b, len, i);
			continue;
		}
		if (b[i] == '{' || b[i] == '[')
			d++;
		else if (b[i] == '}' || b[i] == ']')
			d--;
		i++;
	} while (d > 0 && i < len);
	return i;
}

/* Step through the elements of an accepted array; see jscan.h. */
int
jscan_next_elem(const char *buf, size_t len, size_t *pos,
    struct jscan_span *elem)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t i = jscan_skip_ws(buf, *pos + 1, len), end;

	if (i >= len || b[i] == ']')
		return 0;
	end = skip_value(b, len, i);
	elem->off = i;
	elem->len = end - i;
	*pos = jscan_skip_ws(buf, end, len);
	return 1;
}

/* Step through the members of an accepted object; see jscan.h. */
int
jscan_next_member(const char *buf, size_t len, size_t *pos,
    struct jscan_span *key, struct jscan_span *val)
{
	const unsigned char *b = (const unsigned char *)buf;
	size_t i = jscan_skip_ws(buf, *pos + 1, len), end;

	if (i >= len || b[i] != '"')
		return 0;
	end = skip_string(b, len, i);
	key->off = i;
	key->len = end - i;
	i = jscan_skip_ws(buf, jscan_skip_ws(buf, end, len) + 1, len);
	if (i >= len)
		return 0;
	end = skip_value(b, len, i);
	val->off = i;
	val->len = end - i;
	*pos = jscan_skip_ws(buf, end, len);
	return 1;
}

/* Whether the value at sp of accepted text is the string want. */
bool
jscan_str_is(const char *buf, struct jscan_span sp, const char *want)
{
	const char *raw = buf + sp.off + 1;
	size_t n, wl = strlen(want);
	char tmp[KEY_MAX * 6];

	if (sp.len < 2 || buf[sp.off] != '"')
		return false;
	n = sp.len - 2;
	if (memchr(raw, '\\', n) == NULL)
		return n == wl && memcmp(raw, want, n) == 0;
	/* An escape of k bytes stands for at least one: n / 6 at least. */
	if (n > 6 * wl || n > sizeof(tmp))
		return false;
	n = jscan_unescape(raw, n, tmp);
	return n == wl && memcmp(tmp, want, n) == 0;
}

/*
 * The string at b[i] of accepted text, unescaped: *s and *n, in *tmp
 * (to free) when it had escapes. The end past its quote, 0: no memory.
 */
static size_t
tree_str(const char *b, size_t len, size_t i, const char **s, size_t *n,
    char **tmp)
{
	size_t end = skip_string((const unsigned char *)b, len, i);

	*s = b + i + 1;
	*n = end - i - 2;
	*tmp = NULL;
	if (memchr(*s, '\\', *n) != NULL) {
		if ((*tmp = malloc(*n)) == NULL)
			return 0;
		*n = jscan_unescape(*s, *n, *tmp);
		*s = *tmp;
	}
	return end;
}

/* The number at b[i..end) of accepted text, as jansson reads it. */
static json_t *
tree_number(const char *b, size_t i, size_t end)
{
	char small[64], *t = small, *e;
	size_t n = end - i;
	json_t *v;

	if (n >= sizeof(small) && (t = malloc(n + 1)) == NULL)
		return NULL;
	memcpy(t, b + i, n);
	t[n] = '\0';
	/* jscan accepted it: an integer in 64 bits, or a finite real */
	if (strpbrk(t, ".eE") == NULL)
		v = json_integer((json_int_t)strtoll(t, &e, 10));
	else
		v = json_real(strtod(t, &e));
	if (t != small)
		free(t);
	return v;
}

static json_t	*tree_value(const char *b, size_t len, size_t *pos);

/*
 * The object or array at b[i] of accepted text, built as json_loadb()
 * builds it (member order kept, the last of duplicate names wins in the
 * first's place); *pos is moved past it. NULL when out of memory.
 */
static json_t *
tree_container(const char *b, size_t len, size_t i, size_t *pos)
{
	size_t end, n;
	const char *s;
	json_t *v, *e;
	char *tmp;
	int r;

	if ((v = b[i] == '{' ? json_object() : json_array()) == NULL)
		return NULL;
	for (i = jscan_skip_ws(b, i + 1, len); b[i] != '}' && b[i] != ']';
	    i = jscan_skip_ws(b, i, len)) {
		if (b[i] == ',')
			i = jscan_skip_ws(b, i + 1, len);
		if (json_is_array(v)) {
			e = tree_value(b, len, &i);
			r = e != NULL ? json_array_append_new(v, e) : -1;
		} else {
			if ((end = tree_str(b, len, i, &s, &n, &tmp)) == 0)
				break;
			i = jscan_skip_ws(b, end, len) + 1;	/* ':' */
			e = tree_value(b, len, &i);
			r = e != NULL ?
			    json_object_setn_new_nocheck(v, s, n, e) : -1;
			free(tmp);
		}
		if (r < 0)
			break;
	}
	if (b[i] != '}' && b[i] != ']') {
		json_decref(v);
		return NULL;
	}
	*pos = i + 1;
	return v;
}

/*
 * The value at *pos of text jscan accepted, as json_loadb() builds it;
 * *pos is moved past it. NULL when out of memory. Containers recurse once
 * a level: at most JSCAN_MAX_DEPTH.
 */
static json_t *
tree_value(const char *b, size_t len, size_t *pos)
{
	size_t i = jscan_skip_ws(b, *pos, len), end, n;
	const char *s;
	json_t *v;
	char *tmp;

	switch (b[i]) {
	case '{':
	case '[':
		return tree_container(b, len, i, pos);
	case '"':
		if ((end = tree_str(b, len, i, &s, &n, &tmp)) == 0)
			return NULL;
		v = json_stringn_nocheck(s, n);
		free(tmp);
		*pos = end;
		return v;
	case 't':
		*pos = i + 4;
		return json_true();
	case 'f':
		*pos = i + 5;
		return json_false();
	case 'n':
		*pos = i + 4;
		return json_null();
	default:
		end = skip_value((const unsigned char *)b, len, i);
		*pos = end;
		return tree_number(b, i, end);
	}
}

/* json_loadb(buf, len, 0, NULL), mostly without jansson; see jscan.h. */
json_t *
jscan_load(const char *buf, size_t len)
{
	size_t i = jscan_skip_ws(buf, 0, len);

	if (i == len || (buf[i] != '{' && buf[i] != '['))
		return NULL;
	if (jscan_validate(buf, len) < 0)
		return json_loadb(buf, len, 0, NULL);
	return tree_value(buf, len, &i);
}

/* The deepest bracket nesting outside strings; see jscan.h. */
int
jscan_depth(const char *buf, size_t len)
{
	int depth = 0, max = 0;
	bool in_str = false, esc = false;

	for (size_t i = 0; i < len; i++) {
		char ch = buf[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				in_str = false;
			continue;
		}
		if (ch == '"')
			in_str = true;
		else if (ch == '{' || ch == '[') {
			if (++depth > max)
				max = depth;
		} else if (ch == '}' || ch == ']')
			depth--;
	}
	return max;
}
