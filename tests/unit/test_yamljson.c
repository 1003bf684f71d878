/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/yamljson.c: YAML streams to jansson documents: core-schema typing
 * of plain scalars only, quoted and block scalars as strings, empty
 * documents left out, JSON read as YAML, and refusals (duplicate keys,
 * non-scalar keys, alias bombs, depth, broken YAML) with the place.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube/yamljson.h"
#include "tests/unit/test.h"

/* Parse s; the documents as compact sorted JSON text, or NULL. */
static char *
docs(const char *s, char *err, size_t errlen)
{
	json_t *d = NULL;
	char *t;

	if (yamljson_parse(s, strlen(s), &d, err, errlen) < 0)
		return NULL;
	t = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(d);
	return t;
}

TEST(typing_and_documents)
{
	char err[256], *t;

	t = docs("---\na: 1\nb: -2.5\nc: true\nd: ~\ne: \"1\"\nf: 'true'\n"
	    "g: >-\n  folded\n  text\nh: [x, 0x1, 1e3]\n---\n---\n- k: v\n",
	    err, sizeof(err));
	REQUIRE(t != NULL);
	CHECK_STR(t, "[{\"a\":1,\"b\":-2.5,\"c\":true,\"d\":null,\"e\":\"1\","
	    "\"f\":\"true\",\"g\":\"folded text\",\"h\":[\"x\",\"0x1\","
	    "\"1e3\"]},[{\"k\":\"v\"}]]");
	free(t);
	t = docs("{\"a\": [1, {\"b\": null}], \"c\": \"d\"}", err, sizeof(err));
	REQUIRE(t != NULL);
	CHECK_STR(t, "[{\"a\":[1,{\"b\":null}],\"c\":\"d\"}]");
	free(t);
	t = docs("", err, sizeof(err));
	REQUIRE(t != NULL);
	CHECK_STR(t, "[]");
	free(t);
}

TEST(refusals)
{
	static const struct {
		const char	*in;
		const char	*why;
	} bad[] = {
		{ "a: 1\na: 2\n", "key \"a\" twice" },
		{ "? [x]\n: 1\n", "not a scalar" },
		{ "a: [unclosed\n", "line 2" },
		{ "a: b: c\n", "line 1" },
	};
	char err[256];
	json_t *d = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(yamljson_parse(bad[i].in, strlen(bad[i].in), &d, err,
		    sizeof(err)), -EINVAL);
		if (strstr(err, bad[i].why) == NULL)
			test_fail(__FILE__, __LINE__, "%s: \"%s\" lacks \"%s\"",
			    bad[i].in, err, bad[i].why);
	}
	CHECK(d == NULL);
}

/* Aliases count each time they are expanded; nesting is bounded. */
TEST(caps)
{
	char err[256], deep[1024] = "";
	json_t *d = NULL;
	const char *bomb =
	    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
	    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
	    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
	    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n";

	CHECK_INT(yamljson_parse(bomb, strlen(bomb), &d, err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, "more than") != NULL);
	for (int i = 0; i < YAMLJSON_MAX_DEPTH + 2; i++)
		strcat(deep, "[");
	CHECK_INT(yamljson_parse(deep, strlen(deep), &d, err, sizeof(err)),
	    -EINVAL);
	CHECK(d == NULL);
}
