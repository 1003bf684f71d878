/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/log.c: quoting of user strings. */
#include "common/log.h"
#include "tests/unit/test.h"

TEST(log_q_plain)
{
	CHECK_STR(log_q("abc"), "\"abc\"");
	CHECK_STR(log_q(NULL), "(null)");
}

TEST(log_q_escapes)
{
	CHECK_STR(log_q("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0a\"");
}

TEST(log_q_truncates)
{
	char big[1000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *q = log_q(big);
	CHECK(strlen(q) < 300);
	CHECK(strstr(q, "...\"") != NULL);
}

TEST(log_rings_do_not_alias)
{
	const char *a = log_q("one"), *b = log_q("two");
	CHECK_STR(a, "\"one\"");
	CHECK_STR(b, "\"two\"");
}
