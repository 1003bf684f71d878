/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small unit-test harness. Each TEST() registers itself; harness.c runs
 * them all (or those named on the command line) and ends with the line
 * "N passed, N failed, N skipped". A failed CHECK marks the test failed
 * and goes on; REQUIRE returns from the test; test_skip() reports a test
 * that cannot run here as skipped.
 */
#ifndef KPGPUD_TEST_H
#define KPGPUD_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef void (*test_fn)(void);

void test_register(const char *name, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * The current test cannot run here (why says so): it is reported as
 * skipped, not passed; the caller returns.
 */
void test_skip(const char *why);
/* Absolute path of a file under the source tree (tests/fixtures/...). */
const char *test_srcpath(const char *rel);
/*
 * Call fn with the contents of every file (names not starting with '.') of
 * the source-tree directory rel, in name order, each read whole up to cap
 * bytes; a directory or file that cannot be read fails the test. Returns
 * how many files fn got.
 */
int test_each_file(const char *rel, size_t cap,
    void (*fn)(const char *name, const char *body, size_t len, void *arg),
    void *arg);

struct cache;
/*
 * A new cache file in a fresh temporary directory: its writer, and in *rd
 * a read-only handle on it (kpgpud-quota's view); NULL on failure. One at
 * a time: test_cache_remove closes both and removes the files and the
 * directory.
 */
struct cache *test_cache_new(struct cache **rd);
void test_cache_remove(struct cache *c, struct cache *rd);

#define TEST(name)							\
	static void test_##name(void);					\
	__attribute__((constructor)) static void test_reg_##name(void)	\
	{ test_register(#name, test_##name); }				\
	static void test_##name(void)

#define CHECK(cond) do {						\
	if (!(cond))							\
		test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);	\
} while (0)

/* CHECK for one case of a table: the failure names the case. */
#define CHECK_CASE(cond, what) do {					\
	const char *_w = (what);					\
	if (!(cond))							\
		test_fail(__FILE__, __LINE__, "CHECK(%s) for \"%s\"",	\
		    #cond, _w ? _w : "(null)");				\
} while (0)

#define REQUIRE(cond) do {						\
	if (!(cond)) {							\
		test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);	\
		return;							\
	}								\
} while (0)

#define CHECK_INT(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a != _b)							\
		test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld",	\
		    #a, #b, _a, _b);					\
} while (0)

#define CHECK_STR(a, b) do {						\
	const char *_a = (a), *_b = (b);				\
	if (_a == NULL || _b == NULL || strcmp(_a, _b) != 0)		\
		test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", \
		    #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");	\
} while (0)

#endif
