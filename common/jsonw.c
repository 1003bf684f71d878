/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON writer: see jsonw.h. Every byte below is the one jansson 2.14's
 * dumper writes with JSON_COMPACT | JSON_SORT_KEYS (tests/fuzz/fuzz_json.c
 * compares the two on every tree the fuzzer reads).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/util.h"

/* One member of an object being sorted. */
struct member {
	const char	*key;
	size_t		 len;
	json_t		*val;
};

/* Whether the n bytes at s need no escape; see jsonw.h. */
bool
jsonw_plain(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

/* Append s as a JSON string; see jsonw.h. */
int
jsonw_put_str(struct buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
	const unsigned char *p = (const unsigned char *)s;
	const char *k;
	size_t i = 0, run;
	int r = buf_putc(b, '"');

	while (r == 0 && i < n) {
		for (run = i; run < n && p[run] >= 0x20 && p[run] != '"' &&
		    p[run] != '\\'; run++)
			;
		if (run > i && (r = buf_append(b, p + i, run - i)) < 0)
			break;
		if ((i = run) >= n)
			break;
		if ((k = memchr(from, p[i], sizeof(from) - 1)) != NULL) {
			char e[2] = { '\\', to[k - from] };

			r = buf_append(b, e, sizeof(e));
		} else {
			char u[6] = { '\\', 'u', '0', '0', hex[p[i] >> 4],
			    hex[p[i] & 15] };

			r = buf_append(b, u, sizeof(u));
		}
		i++;
	}
	return r == 0 ? buf_putc(b, '"') : r;
}

/*
 * The order of jansson's JSON_SORT_KEYS: bytes, then length (strcmp order
 * for names without a NUL).
 */
static int
member_cmp(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static int	 put_value(struct buf *b, json_t *v, int depth);

/*
 * Append the members of o (at nesting depth) whose names start with the
 * plen bytes of prefix, sorted, as one object; see jsonw_dump_to().
 */
static int
put_members(struct buf *b, json_t *o, const char *prefix, size_t plen,
    int depth)
{
	struct member m[JSONW_MAX_KEYS];
	size_t n = 0, i;
	void *it;
	int r;

	for (it = json_object_iter(o); it != NULL;
	    it = json_object_iter_next(o, it)) {
		const char *k = json_object_iter_key(it);
		size_t kl = json_object_iter_key_len(it);

		if (plen > 0 && (kl < plen || memcmp(k, prefix, plen) != 0))
			continue;
		if (n == JSONW_MAX_KEYS)
			return 1;
		m[n++] = (struct member){ k, kl, json_object_iter_value(it) };
	}
	qsort(m, n, sizeof(m[0]), member_cmp);
	r = buf_putc(b, '{');
	for (i = 0; i < n && r == 0; i++)
		if ((i == 0 || (r = buf_putc(b, ',')) == 0) &&
		    (r = jsonw_put_str(b, m[i].key, m[i].len)) == 0 &&
		    (r = buf_putc(b, ':')) == 0)
			r = put_value(b, m[i].val, depth + 1);
	return r == 0 ? buf_putc(b, '}') : r;
}

/* Append one value at nesting depth; see jsonw_dump_to(). */
static int
put_value(struct buf *b, json_t *v, int depth)
{
	char num[32];
	json_t *m;
	size_t i;
	int r = 0;

	if (depth > JSONW_MAX_DEPTH)
		return 1;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return put_members(b, v, "", 0, depth);
	case JSON_ARRAY:
		r = buf_putc(b, '[');
		json_array_foreach(v, i, m) {
			if (r != 0 || (i > 0 && (r = buf_putc(b, ',')) != 0) ||
			    (r = put_value(b, m, depth + 1)) != 0)
				break;
		}
		return r == 0 ? buf_putc(b, ']') : r;
	case JSON_STRING:
		return jsonw_put_str(b, json_string_value(v),
		    json_string_length(v));
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		return buf_puts(b, num);
	case JSON_TRUE:
		return buf_puts(b, "true");
	case JSON_FALSE:
		return buf_puts(b, "false");
	case JSON_NULL:
		return buf_puts(b, "null");
	default:
		return 1;	/* a real: jansson's formatting */
	}
}

/* Append v as jansson's compact sorted dump; see jsonw.h. */
int
jsonw_dump_to(struct buf *b, json_t *v)
{
	return put_value(b, v, 0);
}

/* Append the members of o named prefix...; see jsonw.h. */
int
jsonw_members_to(struct buf *b, json_t *o, const char *prefix)
{
	return put_members(b, o, prefix, strlen(prefix), 0);
}

/* A new string of jansson's compact sorted dump of v; see jsonw.h. */
char *
jsonw_dump(json_t *v)
{
	struct buf b = BUF_INIT(0);
	int r;

	if (v == NULL)
		return NULL;
	if ((r = buf_reserve(&b, 1024)) == 0 &&
	    (r = jsonw_dump_to(&b, v)) == 0)
		return buf_steal(&b, NULL);
	buf_free(&b);
	return r == 1 ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENCODE_ANY) : NULL;
}
