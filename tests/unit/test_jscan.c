/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSON readers of common/jscan.h: the one unescaper (every escape,
 * UTF-8 of one to four bytes from \u escapes and surrogate pairs, in
 * place), the one white-space skipper (JSON's four bytes only, bounded by
 * len), the tree builder (json_loadb()'s tree, byte for byte) and the
 * depth bound (brackets outside strings).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jscan.h"
#include "common/util.h"
#include "tests/unit/test.h"

/* Unescape in (a C string) into a buffer and compare with want (len n). */
static void
check_unescape(const char *in, const char *want, size_t n)
{
	char out[64];
	size_t len = jscan_unescape(in, strlen(in), out);

	CHECK_INT(len, n);
	CHECK(len == n && memcmp(out, want, n) == 0);
}

TEST(unescape_simple)
{
	check_unescape("plain", "plain", 5);
	check_unescape("a\\\"b\\\\c\\/d", "a\"b\\c/d", 7);
	check_unescape("\\b\\f\\n\\r\\t", "\b\f\n\r\t", 5);
	check_unescape("", "", 0);
}

TEST(unescape_unicode)
{
	check_unescape("\\u0041", "A", 1);
	check_unescape("x\\u00e9y", "x\xc3\xa9y", 4);
	check_unescape("\\u20AC", "\xe2\x82\xac", 3);
	check_unescape("\\ud83d\\ude00!", "\xf0\x9f\x98\x80!", 5);
	check_unescape("\\u007f\\u0080", "\x7f\xc2\x80", 3);
}

TEST(unescape_in_place)
{
	char b[] = "k\\u00e9\\ud83d\\ude00\\n";
	size_t n = jscan_unescape(b, strlen(b), b);

	CHECK_INT(n, 8);
	CHECK(memcmp(b, "k\xc3\xa9\xf0\x9f\x98\x80\n", 8) == 0);
}

TEST(skip_ws)
{
	const char *s = " \t\r\n x";

	CHECK_INT(jscan_skip_ws(s, 0, strlen(s)), 5);
	CHECK_INT(jscan_skip_ws(s, 5, strlen(s)), 5);
	CHECK_INT(jscan_skip_ws(s, 0, 3), 3);	/* bounded by len */
	CHECK_INT(jscan_skip_ws("\v\f", 0, 2), 0);	/* not JSON space */
	CHECK(jscan_is_ws(' ') && !jscan_is_ws('\v') && !jscan_is_ws('\0'));
}

/*
 * jscan_load() gives json_loadb()'s tree: the same JSON or none, the same
 * members in the same order, the same integers and reals (dumped at 17
 * digits), for documents on the edges of the grammar (a NUL after a
 * number, which jscan refuses and jansson skips, included) and every
 * JSON file of the fixtures and fuzz seeds.
 */
static const char *const tree_cases[] = {
	"{}", "[]", " [ ] ", "{\"a\":{},\"b\":[],\"c\":[[],{}]}",
	"{\"s\":\"\",\"e\":"
	"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00x\"}",
	"{\"k\\u00e9y\":1,\"k\\\"\":2,\"\":3}",
	"{\"a\":1,\"b\":2,\"a\":3}",
	"[0,-0,1,-1,9223372036854775807,-9223372036854775808,0.5,-0.0,"
	"1e5,1E+5,1e-5,2.5e-400,1.7976931348623157e308,123456789012345678.5]",
	"[true,false,null,\"t\",[true],{\"n\":null}]",
	"\t{\r\n\"a\" :\t[ 1 , 2 ] ,\"b\" : { \"c\" : \"d\" } }\n",
	"[[[[[[[[[[[[[[[[[[[[\"deep\"]]]]]]]]]]]]]]]]]]]]",
	"{\"a\":1} x", "{\"a\":01}", "{\"a\":1.}", "[9223372036854775808]",
	"[1e400]", "{\"a\":\"\\u0000\"}", "{\"a\":\"\\ud800\"}", "[1,]",
	"{\"a\" 1}", "\"str\"", "nul", "{\"a\":\"\xff\"}", "", " ",
};

/* Compare one document's jscan_load() tree with json_loadb()'s. */
static void
tree_check(const char *what, const char *body, size_t len)
{
	json_t *want = json_loadb(body, len, 0, NULL);
	json_t *got = jscan_load(body, len);
	size_t fl = JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17);
	char *a = got ? json_dumps(got, fl) : NULL;
	char *b = want ? json_dumps(want, fl) : NULL;

	if ((a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0))
		test_fail(__FILE__, __LINE__, "%s: got %.200s want %.200s",
		    what, a ? a : "NULL", b ? b : "NULL");
	free(a);
	free(b);
	json_decref(want);
	json_decref(got);
}

/* tree_check() one file of a directory (test_each_file). */
static void
tree_file(const char *name, const char *body, size_t len, void *arg)
{
	(void)arg;
	tree_check(name, body, len);
}

TEST(load_as_jansson)
{
	static const char *const dirs[] = { "tests/fixtures/instances",
	    "tests/fixtures/pods", "tests/fixtures/bench",
	    "tests/fuzz/seed-review", "tests/fuzz/seed-review_diff",
	    "tests/fuzz/seed-plan", "tests/fuzz/seed-json" };
	static const char nul[] = "{\"kind\":\"X\",\"n\":1\0}";
	char what[32];
	json_t *v;
	int files = 0;

	for (size_t i = 0; i < nitems(tree_cases); i++) {
		snprintf(what, sizeof(what), "case %zu", i);
		tree_check(what, tree_cases[i], strlen(tree_cases[i]));
	}
	/* as deep as jansson reads (2048) and one level deeper */
	for (size_t depth = 2048; depth <= 2049; depth++) {
		char *deep = malloc(2 * depth);

		REQUIRE(deep != NULL);
		memset(deep, '[', depth);
		memset(deep + depth, ']', depth);
		snprintf(what, sizeof(what), "depth %zu", depth);
		tree_check(what, deep, 2 * depth);
		CHECK_INT(jscan_depth(deep, 2 * depth), depth);
		free(deep);
	}
	/* jansson skips the NUL; jscan refuses it and jansson answers */
	CHECK_INT(jscan_validate(nul, sizeof(nul) - 1), -EINVAL);
	tree_check("NUL after a number", nul, sizeof(nul) - 1);
	CHECK((v = jscan_load(nul, sizeof(nul) - 1)) != NULL);
	json_decref(v);
	for (size_t i = 0; i < nitems(dirs); i++)
		files += test_each_file(dirs[i], 1 << 20, tree_file, NULL);
	CHECK(files >= 60);
}

/* jscan_depth() counts brackets outside strings only, on any text. */
TEST(depth_outside_strings)
{
	static const struct {
		const char	*text;
		int		 depth;
	} cases[] = {
		{ "", 0 }, { "\"[[[\"", 0 }, { "{\"a\":[1,{\"b\":[]}]}", 4 },
		{ "[\"]\\\"[[\",[[]]]", 3 }, { "[\"\\\\\",[]]", 2 },
		{ "]]][", 0 }, { "[[[", 3 }, { "\"unterminated [[", 0 },
		{ "[{}][{}]", 2 },
	};

	for (size_t i = 0; i < nitems(cases); i++)
		CHECK_CASE(jscan_depth(cases[i].text, strlen(cases[i].text)) ==
		    cases[i].depth, cases[i].text);
}
