/*
 * The JSON primitives of common/jscan.h that the scanner, the review
 * loader and the head reader share: the one unescaper (every escape, UTF-8
 * of one to four bytes from \u escapes and surrogate pairs, in place) and
 * the one white-space skipper (JSON's four bytes only, bounded by len).
 */
#include <string.h>

#include "common/jscan.h"
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
