/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/jsonw.c: every string and tree it writes is the
 * bytes of jansson's compact sorted dump (escapes, scalars, key order,
 * member names with a NUL, a prefix's members), written by jsonw itself
 * up to its limits and by jansson past them; jsonw_plain() tells which
 * strings need no escape.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jsonw.h"
#include "common/util.h"
#include "tests/unit/test.h"

/* jsonw_put_str writes exactly what jansson's compact dump writes. */
TEST(string_like_jansson)
{
	static const char *const samples[] = {
		"", "plain", "quote \" and \\ backslash", "tab\there\n",
		"\b\f\r\x01\x1f\x7f", "slash / stays",
		"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	};
	char all[128];
	struct buf b = BUF_INIT(0);

	for (int i = 1; i < 128; i++)
		all[i - 1] = (char)i;
	all[127] = '\0';
	for (size_t i = 0; i <= nitems(samples); i++) {
		const char *s = i < nitems(samples) ?
		    samples[i] : all;
		json_t *j = json_string(s);
		char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);

		buf_reset(&b);
		CHECK_INT(jsonw_put_str(&b, s, strlen(s)), 0);
		CHECK_STR(buf_str(&b), want);
		CHECK_CASE(jsonw_plain(s, strlen(s)) ==
		    (strlen(want) == strlen(s) + 2), s);
		free(want);
		json_decref(j);
	}
	buf_free(&b);
}

/* A string that does not fit the buffer's cap fails with its error. */
TEST(string_over_cap)
{
	struct buf b = BUF_INIT(8);

	CHECK_INT(jsonw_put_str(&b, "123456", 6), 0);
	CHECK_STR(buf_str(&b), "\"123456\"");
	buf_free(&b);
	CHECK_INT(jsonw_put_str(&b, "1234567", 7), -E2BIG);
	buf_free(&b);
	CHECK(jsonw_plain("a/b c\x7f\xc3\xa9", 8));
	CHECK(!jsonw_plain("a\"", 2) && !jsonw_plain("\\", 1) &&
	    !jsonw_plain("\x1f", 1) && !jsonw_plain("a\0", 2));
	CHECK(jsonw_plain("", 0));
}

/*
 * One value: jsonw_dump gives json_dumps's bytes (compact, sorted keys,
 * any value), written by jsonw_dump_to itself when fast, else by jansson.
 */
static void
check_dump(json_t *v, bool fast, const char *what)
{
	struct buf b = BUF_INIT(0);
	char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS |
	    JSON_ENCODE_ANY);
	char *got = jsonw_dump(v);
	int r = jsonw_dump_to(&b, v);

	CHECK_CASE(want != NULL && got != NULL && strcmp(want, got) == 0,
	    what);
	if (fast)
		CHECK_CASE(r == 0 && want != NULL &&
		    strcmp(buf_str(&b), want) == 0, what);
	else
		CHECK_CASE(r == 1, what);
	free(want);
	free(got);
	buf_free(&b);
}

/*
 * Strings needing every escape (control characters, quotes, backslash, a
 * NUL, non-ASCII kept as is), integers at both ends, empty members and
 * unsorted keys are written by jsonw; a real, a wide object and deep
 * nesting are left to jansson, with the same bytes.
 */
TEST(dump_like_jansson)
{
	json_t *v, *deep, *wide;
	char name[16];

	v = json_pack("{s:s, s:s#, s:s, s:I, s:I, s:i, s:b, s:b, s:n, s:{}, "
	    "s:[], s:[{}, [], s, i]}", "zeta", "\x01\x1f\b\f\n\r\t\"\\/",
	    "nul", "a\0b", (int)3, "utf8", "caf\xc3\xa9 \xf0\x9f\x98\x80 "
	    "\xe2\x80\xa8", "max", (json_int_t)INT64_MAX, "min",
	    (json_int_t)INT64_MIN, "zero", 0, "t", 1, "f", 0, "null", "obj",
	    "arr", "mixed", "", -7);
	REQUIRE(v != NULL);
	check_dump(v, true, "escapes and scalars");
	REQUIRE(json_object_set_new(v, "B", json_string("upper first")) == 0);
	REQUIRE(json_object_set_new(v, "a-b", json_true()) == 0);
	REQUIRE(json_object_set_new(v, "\xc3\xa9", json_true()) == 0);
	check_dump(v, true, "unsorted keys");
	REQUIRE(json_object_set_new(v, "real", json_real(0.1)) == 0);
	check_dump(v, false, "a real");
	json_decref(v);
	wide = json_object();
	for (int i = 0; i < 65; i++) {
		snprintf(name, sizeof(name), "k%02d", 64 - i);
		json_object_set_new(wide, name, json_integer(i));
	}
	check_dump(wide, false, "65 members");
	json_object_del(wide, "k00");
	check_dump(wide, true, "64 members");
	json_decref(wide);
	deep = json_string("bottom");
	for (int i = 0; i < 33; i++)
		deep = i % 2 ? json_pack("{s:o}", "k", deep) :
		    json_pack("[o]", deep);
	check_dump(deep, false, "33 deep");
	v = json_array_get(deep, 0);
	check_dump(v, true, "32 deep");
	json_decref(deep);
	check_dump(json_null(), true, "a bare null");
	v = json_real(-2.5);
	check_dump(v, false, "a bare real");
	json_decref(v);
	CHECK(jsonw_dump(NULL) == NULL);
}

/*
 * Member names with a NUL (jansson keeps their length) are written whole
 * and sorted as jansson sorts them: bytes first, then length.
 */
TEST(dump_keys_with_nul)
{
	static const char *const keys[] = { "a\0b", "a", "a\0", "a\0a", "",
	    "\0", "b" };
	static const size_t lens[] = { 3, 1, 2, 3, 0, 1, 1 };
	json_t *v = json_object();

	REQUIRE(v != NULL);
	for (size_t i = 0; i < nitems(keys); i++)
		REQUIRE(json_object_setn_new(v, keys[i], lens[i],
		    json_integer((json_int_t)i)) == 0);
	check_dump(v, true, "names with a NUL");
	json_decref(v);
}

/*
 * The members of an object whose names start with a prefix are written as
 * jansson dumps an object of just them; none of a NULL or a non-object.
 */
TEST(members_with_prefix)
{
	static const char *const prefixes[] = { "", "kpgpud.io/", "k", "zz" };
	json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:{s:s}}",
	    "kpgpud.io/b", "2", "other", "x", "kpgpud.io/a", "1\n",
	    "kpgpud.io/n", 5, "kpgpud.io/o", "k", "v");
	struct buf b = BUF_INIT(0);

	REQUIRE(o != NULL);
	for (size_t i = 0; i < nitems(prefixes); i++) {
		json_t *f = json_object();
		const char *k;
		json_t *v;
		char *want;

		json_object_foreach(o, k, v)
			if (strncmp(k, prefixes[i], strlen(prefixes[i])) == 0)
				json_object_set(f, k, v);
		want = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);
		buf_reset(&b);
		CHECK_INT(jsonw_members_to(&b, o, prefixes[i]), 0);
		CHECK_STR(buf_str(&b), want);
		free(want);
		json_decref(f);
	}
	buf_reset(&b);
	CHECK_INT(jsonw_members_to(&b, NULL, ""), 0);
	CHECK_INT(jsonw_members_to(&b, json_object_get(o, "other"), ""), 0);
	CHECK_STR(buf_str(&b), "{}{}");
	buf_free(&b);
	b = (struct buf)BUF_INIT(10);
	CHECK_INT(jsonw_members_to(&b, o, "kpgpud.io/a"), -E2BIG);
	buf_free(&b);
	json_decref(o);
}
