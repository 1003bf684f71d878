/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An RFC 6902 JSON Patch applier for the tests, written apart from
 * kpgpud-admit/patch.c so that a patch is checked by an implementation that
 * does not share its assumptions: strict JSON Pointers (RFC 6901), array
 * indices without leading zeros, "-" only where add allows it, and "add" into
 * a missing parent fails as the apiserver's applier does. Included by the
 * unit tests that need it (#include "tests/unit/jsonpatch_apply.c").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define JP_MAX_TOKENS	64

struct jp_ptr {
	int	 n;
	char	*tok[JP_MAX_TOKENS];
	char	 buf[1024];
};

/* Split a JSON Pointer into unescaped tokens; 0 or -1 when invalid. */
static int
jp_split(const char *ptr, struct jp_ptr *p)
{
	size_t o = 0;

	p->n = 0;
	if (ptr[0] == '\0')
		return 0;
	if (ptr[0] != '/' || strlen(ptr) >= sizeof(p->buf))
		return -1;
	for (const char *s = ptr; *s != '\0'; s++) {
		if (*s == '/') {
			if (p->n == JP_MAX_TOKENS)
				return -1;
			p->buf[o++] = '\0';
			p->tok[p->n++] = p->buf + o;
			continue;
		}
		if (*s == '~') {
			if (s[1] != '0' && s[1] != '1')
				return -1;
			p->buf[o++] = s[1] == '0' ? '~' : '/';
			s++;
			continue;
		}
		p->buf[o++] = *s;
	}
	p->buf[o] = '\0';
	return 0;
}

/* Parse an array index token; -1 when not a canonical decimal index. */
static long
jp_index(const char *t)
{
	char *end;
	long v;

	if (t[0] < '0' || t[0] > '9' || (t[0] == '0' && t[1] != '\0'))
		return -1;
	v = strtol(t, &end, 10);
	return *end == '\0' ? v : -1;
}

/* Follow the first n tokens of p from doc; NULL when a step is missing. */
static json_t *
jp_walk(json_t *doc, const struct jp_ptr *p, int n)
{
	for (int i = 0; i < n && doc != NULL; i++) {
		if (json_is_object(doc))
			doc = json_object_get(doc, p->tok[i]);
		else if (json_is_array(doc)) {
			long ix = jp_index(p->tok[i]);

			doc = ix < 0 ? NULL : json_array_get(doc, (size_t)ix);
		} else
			doc = NULL;
	}
	return doc;
}

/* Insert v (stolen) at the location p in *doc, per "add". */
static int
jp_add(json_t **doc, const char *path, json_t *v)
{
	struct jp_ptr p;
	json_t *parent;
	const char *last;

	if (jp_split(path, &p) < 0) {
		json_decref(v);
		return -1;
	}
	if (p.n == 0) {
		json_decref(*doc);
		*doc = v;
		return 0;
	}
	parent = jp_walk(*doc, &p, p.n - 1);
	last = p.tok[p.n - 1];
	if (json_is_object(parent))
		return json_object_set_new(parent, last, v);
	if (json_is_array(parent)) {
		long ix = strcmp(last, "-") == 0 ?
		    (long)json_array_size(parent) : jp_index(last);

		if (ix >= 0 && (size_t)ix <= json_array_size(parent))
			return json_array_insert_new(parent, (size_t)ix, v);
	}
	json_decref(v);
	return -1;
}

/* Remove the value at p from doc; the removed value is returned (owned). */
static json_t *
jp_remove(json_t *doc, const char *path)
{
	struct jp_ptr p;
	json_t *parent, *v;
	const char *last;

	if (jp_split(path, &p) < 0 || p.n == 0)
		return NULL;
	parent = jp_walk(doc, &p, p.n - 1);
	last = p.tok[p.n - 1];
	if (json_is_object(parent)) {
		if ((v = json_object_get(parent, last)) == NULL)
			return NULL;
		json_incref(v);
		json_object_del(parent, last);
		return v;
	}
	if (json_is_array(parent)) {
		long ix = jp_index(last);

		if (ix < 0 || (size_t)ix >= json_array_size(parent))
			return NULL;
		v = json_incref(json_array_get(parent, (size_t)ix));
		json_array_remove(parent, (size_t)ix);
		return v;
	}
	return NULL;
}

/* Apply one operation object to *doc. */
static int
jp_op(json_t **doc, const json_t *op, char *err, size_t errlen)
{
	const char *name = json_string_value(json_object_get(op, "op"));
	const char *path = json_string_value(json_object_get(op, "path"));
	const char *from = json_string_value(json_object_get(op, "from"));
	json_t *value = json_object_get(op, "value"), *v;
	struct jp_ptr p;

	if (name == NULL || path == NULL) {
		snprintf(err, errlen, "operation without op or path");
		return -1;
	}
	if (strcmp(name, "add") == 0 && value != NULL)
		return jp_add(doc, path, json_deep_copy(value));
	if (strcmp(name, "remove") == 0) {
		if ((v = jp_remove(*doc, path)) == NULL)
			goto bad;
		json_decref(v);
		return 0;
	}
	if (strcmp(name, "replace") == 0 && value != NULL) {
		if ((v = jp_remove(*doc, path)) == NULL)
			goto bad;
		json_decref(v);
		return jp_add(doc, path, json_deep_copy(value));
	}
	if ((strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) &&
	    from != NULL) {
		if (jp_split(from, &p) < 0 || jp_walk(*doc, &p, p.n) == NULL)
			goto bad;
		v = name[0] == 'm' ? jp_remove(*doc, from) :
		    json_deep_copy(jp_walk(*doc, &p, p.n));
		return v == NULL ? -1 : jp_add(doc, path, v);
	}
	if (strcmp(name, "test") == 0 && value != NULL) {
		if (jp_split(path, &p) < 0)
			goto bad;
		return json_equal(jp_walk(*doc, &p, p.n), value) ? 0 : -1;
	}
bad:
	snprintf(err, errlen, "cannot apply %s at %s", name, path);
	return -1;
}

/* Apply patch to a copy of doc; NULL (reason in err) if any op fails. */
static json_t *
jp_apply(const json_t *doc, const json_t *patch, char *err, size_t errlen)
{
	json_t *out, *op;
	size_t i;

	if (!json_is_array(patch)) {
		snprintf(err, errlen, "patch is not an array");
		return NULL;
	}
	err[0] = '\0';
	out = json_deep_copy(doc);
	json_array_foreach(patch, i, op) {
		if (!json_is_object(op) || jp_op(&out, op, err, errlen) < 0) {
			if (err[0] == '\0')
				snprintf(err, errlen, "operation %zu fails", i);
			json_decref(out);
			return NULL;
		}
	}
	return out;
}
