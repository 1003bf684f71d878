/* SPDX-License-Identifier: Apache-2.0 */
/* The head of an AdmissionReview: see reqhead.h. */
#include <string.h>

#include "common/jscan.h"
#include "kpgpud-admit/reqhead.h"

struct scan {
	const char	*b;
	size_t		 len;
	size_t		 pos;
};

/* Skip white space; whether a byte follows. */
static bool
ws(struct scan *s)
{
	s->pos = jscan_skip_ws(s->b, s->pos, s->len);
	return s->pos < s->len;
}

/*
 * The string at s->pos (its '"'): its raw bytes are b[*ret_off, +*ret_len).
 * False at the end of the buffer or on a control byte.
 */
static bool
string(struct scan *s, size_t *ret_off, size_t *ret_len)
{
	size_t i = s->pos + 1;

	for (; i < s->len && s->b[i] != '"'; i++) {
		if ((unsigned char)s->b[i] < 0x20)
			return false;
		if (s->b[i] == '\\')
			i++;
	}
	if (i >= s->len)
		return false;
	*ret_off = s->pos + 1;
	*ret_len = i - s->pos - 1;
	s->pos = i + 1;
	return true;
}

/* Skip one value of any depth (a counter, not a stack); false at the end. */
static bool
skip_value(struct scan *s)
{
	size_t depth = 0, off, n, start;
	char c;

	do {
		if (!ws(s))
			return false;
		c = s->b[s->pos];
		if (c == '"') {
			if (!string(s, &off, &n))
				return false;
		} else if (c == '{' || c == '[') {
			depth++;
			s->pos++;
		} else if (c == '}' || c == ']') {
			if (depth-- == 0)
				return false;
			s->pos++;
		} else if (depth > 0 && (c == ',' || c == ':')) {
			s->pos++;
			continue;
		} else {
			for (start = s->pos; s->pos < s->len &&
			    strchr("0123456789+-.eEtrufalsn", s->b[s->pos]) !=
			    NULL; s->pos++)
				;
			if (s->pos == start || s->pos == s->len)
				return false;
		}
	} while (depth > 0);
	return true;
}

/* A string value into out; false at the end of the buffer. */
static bool
keep_string(struct scan *s, struct reqhead_str *out)
{
	size_t off, n;

	out->seen = true;
	out->ok = false;
	if (!ws(s))
		return false;
	if (s->b[s->pos] != '"')
		return skip_value(s);
	if (!string(s, &off, &n))
		return false;
	if (n > REQHEAD_STR_MAX)
		return true;
	for (size_t i = 0; i < n; i++)
		if (s->b[off + i] < 0x20 || s->b[off + i] > 0x7e ||
		    s->b[off + i] == '\\')
			return true;
	memcpy(out->v, s->b + off, n);
	out->v[n] = '\0';
	out->ok = true;
	return true;
}

struct member {
	const char	*key;
	int		 sub;		/* -1, or the object level to descend */
	size_t		 field;		/* offset in struct reqhead */
};

#define F(m)	offsetof(struct reqhead, m)
enum { L_ROOT, L_REQ, L_GVK, L_COUNT };
static const struct member levels[L_COUNT][8] = {
	[L_ROOT] = {
		{ "apiVersion", -1, F(api) }, { "kind", -1, F(kind) },
		{ "request", L_REQ, 0 }, { NULL, 0, 0 } },
	[L_REQ] = {
		{ "uid", -1, F(uid) }, { "kind", L_GVK, 0 },
		{ "operation", -1, F(op) }, { "subResource", -1, F(sub) },
		{ "namespace", -1, F(ns) }, { NULL, 0, 0 } },
	[L_GVK] = {
		{ "group", -1, F(group) }, { "kind", -1, F(rkind) },
		{ NULL, 0, 0 } },
};
#undef F

/* Walk an object of a level, keeping the members it lists. */
static bool
object(struct scan *s, int level, struct reqhead *h)
{
	const struct member *m;
	size_t off, n;

	if (!ws(s) || s->b[s->pos] != '{')
		return false;
	s->pos++;
	if (!ws(s))
		return false;
	if (s->b[s->pos] == '}') {
		s->pos++;
		return true;
	}
	for (;;) {
		if (!ws(s) || s->b[s->pos] != '"' || !string(s, &off, &n) ||
		    !ws(s) || s->b[s->pos++] != ':')
			return false;
		for (m = levels[level]; m->key != NULL; m++)
			if (strlen(m->key) == n &&
			    memcmp(m->key, s->b + off, n) == 0)
				break;
		if (m->key == NULL ? !skip_value(s) : m->sub >= 0 ?
		    !object(s, m->sub, h) : !keep_string(s,
		    (struct reqhead_str *)((char *)h + m->field)))
			return false;
		if (!ws(s))
			return false;
		if (s->b[s->pos] == '}') {
			s->pos++;
			return true;
		}
		if (s->b[s->pos++] != ',')
			return false;
	}
}

/* Read the head of a review; see reqhead.h. */
void
reqhead_scan(const char *buf, size_t len, struct reqhead *ret)
{
	struct scan s = { buf, len, 0 };

	memset(ret, 0, sizeof(*ret));
	(void)object(&s, L_ROOT, ret);
}
