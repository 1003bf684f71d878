/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the one home of hand-written JSON, common/jscan.c
 * (reader) and common/jsonw.c (writer), checked against jansson 2.14 on
 * any input:
 * - jscan_validate() accepts exactly what json_loadb(0) accepts, but for
 *   the one difference jscan.h documents (jansson skips a NUL byte right
 *   after a number or a literal): an input only jansson reads must, with
 *   such NULs taken out, be one jscan reads, to the same tree;
 * - jscan_load() gives json_loadb()'s tree: json_equal, and the same
 *   members in the same order and the same reals (an unsorted dump at 17
 *   digits);
 * - on that tree jsonw writes json_dumps(JSON_COMPACT | JSON_SORT_KEYS)'s
 *   bytes, by itself unless the tree holds what it leaves to jansson (a
 *   real, an object over 64 members, nesting past 32), and so do
 *   jsonw_members_to() for the members a prefix picks;
 * - jscan_depth() is the text's depth as the steppers find it walking
 *   every container (no less than the tree's: a duplicate member's first
 *   value is in the text only), and at the top level each element the
 *   steppers find parses to the tree's (jscan_str_is() true of each short
 *   string) and each member name is one of the tree's.
 * Any disagreement aborts.
 * fuzz-sources: common/jscan.c common/jsonw.c common/util.c
 */
#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jscan.h"
#include "common/jsonw.h"
#include "common/util.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a tree holds that jsonw leaves to jansson. */
struct fj_shape {
	int	 depth;		/* levels of containers; 0 for a scalar */
	bool	 real;		/* a real anywhere */
	bool	 wide;		/* an object over JSONW_MAX_KEYS members */
};

/* Abort unless cond: the module and jansson disagree. */
static void
fj_agree(bool cond)
{
	if (!cond)
		abort();
}

/* The shape of v; see struct fj_shape. */
static struct fj_shape
fj_shape_of(json_t *v)
{
	struct fj_shape s = { 0, json_is_real(v), false }, k;
	const char *key;
	json_t *m;
	size_t i;

	if (json_is_array(v)) {
		json_array_foreach(v, i, m) {
			k = fj_shape_of(m);
			s.depth = k.depth > s.depth ? k.depth : s.depth;
			s.real |= k.real;
			s.wide |= k.wide;
		}
	} else if (json_is_object(v)) {
		s.wide = json_object_size(v) > JSONW_MAX_KEYS;
		json_object_foreach(v, key, m) {
			k = fj_shape_of(m);
			s.depth = k.depth > s.depth ? k.depth : s.depth;
			s.real |= k.real;
			s.wide |= k.wide;
		}
	} else
		return s;
	s.depth++;
	return s;
}

/* got is want: equal, same member order, same reals to the last bit. */
static void
fj_same_tree(json_t *got, json_t *want)
{
	size_t fl = JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17);
	char *a, *b;

	fj_agree(got != NULL && json_equal(got, want));
	a = json_dumps(got, fl);
	b = json_dumps(want, fl);
	fj_agree(a != NULL && b != NULL && strcmp(a, b) == 0);
	free(a);
	free(b);
}

/*
 * jsonw writes v (an object or array of shape s) as jansson's compact
 * sorted dump: whole, and by itself unless s holds what it leaves.
 */
static void
fj_check_dump(json_t *v, struct fj_shape s)
{
	struct buf b = BUF_INIT(0);
	char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	char *got = jsonw_dump(v);
	int r = jsonw_dump_to(&b, v);

	fj_agree(want != NULL && got != NULL && strcmp(want, got) == 0);
	fj_agree(r == 0 ? strcmp(buf_str(&b), want) == 0 :
	    r == 1 && (s.real || s.wide || s.depth > JSONW_MAX_DEPTH));
	free(want);
	free(got);
	buf_free(&b);
}

/*
 * jsonw_members_to() writes the members of v that a prefix picks (the
 * first byte of its first member's name) as jansson dumps an object of
 * them; none of an array.
 */
static void
fj_check_members(json_t *v)
{
	char prefix[2] = { 0, 0 }, *want;
	struct buf b = BUF_INIT(0);
	json_t *f, *m;
	const char *k;
	int r;

	if (!json_is_object(v)) {
		fj_agree(jsonw_members_to(&b, v, "") == 0 &&
		    strcmp(buf_str(&b), "{}") == 0);
		buf_free(&b);
		return;
	}
	if ((k = json_object_iter_key(json_object_iter(v))) != NULL)
		prefix[0] = k[0];
	fj_agree((f = json_object()) != NULL);
	json_object_foreach(v, k, m)
		if (strncmp(k, prefix, strlen(prefix)) == 0)
			fj_agree(json_object_set(f, k, m) == 0);
	want = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);
	r = jsonw_members_to(&b, v, prefix);
	fj_agree(want != NULL && (r == 1 || (r == 0 &&
	    strcmp(buf_str(&b), want) == 0)));
	free(want);
	json_decref(f);
	buf_free(&b);
}

/*
 * The depth of the container at buf[off] of accepted text (0 for a
 * scalar), walked with the steppers up to its end.
 */
static int
fj_text_depth(const char *buf, size_t end, size_t off)
{
	struct jscan_span k, v;
	size_t pos = off;
	int d = 0, c;

	if (buf[off] != '[' && buf[off] != '{')
		return 0;
	while (buf[off] == '[' ? jscan_next_elem(buf, end, &pos, &v) == 1 :
	    jscan_next_member(buf, end, &pos, &k, &v) == 1)
		if ((c = fj_text_depth(buf, v.off + v.len, v.off)) > d)
			d = c;
	return d + 1;
}

/*
 * The steppers on accepted text: the top level's elements parse to the
 * tree's (a short string also by jscan_str_is()), its members' names are
 * the tree's.
 */
static void
fj_check_steps(const char *buf, size_t len, json_t *want)
{
	size_t pos = jscan_skip_ws(buf, 0, len), n = 0, kl;
	struct jscan_span key, val;
	json_t *e;
	char *tmp;

	if (json_is_array(want)) {
		while (jscan_next_elem(buf, len, &pos, &val) == 1) {
			json_t *w = json_array_get(want, n++);

			e = json_loadb(buf + val.off, val.len, JSON_DECODE_ANY,
			    NULL);
			fj_agree(w != NULL && e != NULL && json_equal(e, w));
			json_decref(e);
			if (json_is_string(w) && json_string_length(w) <= 64)
				fj_agree(jscan_str_is(buf, val,
				    json_string_value(w)));
			else
				fj_agree(!jscan_str_is(buf, val, ""));
		}
		fj_agree(n == json_array_size(want));
		return;
	}
	while (jscan_next_member(buf, len, &pos, &key, &val) == 1) {
		fj_agree(key.len >= 2 && buf[key.off] == '"' && val.len > 0);
		fj_agree((tmp = malloc(key.len)) != NULL);
		kl = jscan_unescape(buf + key.off + 1, key.len - 2, tmp);
		fj_agree(json_object_getn(want, tmp, kl) != NULL);
		free(tmp);
		n++;
	}
	fj_agree(n >= json_object_size(want));
}

/*
 * Whether an input only jansson reads is one it reads by skipping a NUL
 * byte after a number or a literal (jscan.h): with every NUL that follows
 * a digit or a letter taken out, jscan reads it, to want's tree.
 */
static bool
fj_nul_skipped(const char *buf, size_t len, json_t *want)
{
	char *t = malloc(len);
	size_t n = 0;
	json_t *got;
	bool ok;

	fj_agree(t != NULL);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != '\0' || n == 0 ||
		    !isalnum((unsigned char)t[n - 1]))
			t[n++] = buf[i];
	ok = n < len && jscan_validate(t, n) == 0;
	if (ok) {
		got = jscan_load(t, n);
		fj_same_tree(got, want);
		json_decref(got);
	}
	free(t);
	return ok;
}

/* Read one input both ways and write what was read; see above. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	json_t *want = json_loadb(buf, size, 0, NULL);
	json_t *got = jscan_load(buf, size);
	bool valid = jscan_validate(buf, size) == 0;
	struct fj_shape s;

	if (want == NULL) {
		fj_agree(!valid && got == NULL);
		return 0;
	}
	fj_same_tree(got, want);
	if (!valid)
		fj_agree(fj_nul_skipped(buf, size, want));
	s = fj_shape_of(want);
	fj_check_dump(got, s);
	fj_check_members(got);
	if (valid) {
		fj_agree(jscan_depth(buf, size) == fj_text_depth(buf, size,
		    jscan_skip_ws(buf, 0, size)));
		fj_agree(jscan_depth(buf, size) >= s.depth);
		fj_check_steps(buf, size, want);
	}
	json_decref(got);
	json_decref(want);
	return 0;
}
