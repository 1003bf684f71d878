/* SPDX-License-Identifier: Apache-2.0 */
/* Runs the registered unit tests and prints "N passed, N failed". */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cache/cache.h"
#include "common/util.h"
#include "tests/unit/test.h"

#define MAX_TESTS	1024

static struct {
	const char	*name;
	test_fn		 fn;
} tests[MAX_TESTS];
static int ntests;
static int cur_failed;
static const char *cur_skipped;	/* why, when the test skipped */

/* Remember one test; called from constructors before main. */
void
test_register(const char *name, test_fn fn)
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "too many tests\n");
		exit(2);
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	ntests++;
}

/* Report one failed check of the running test. */
void
test_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "  FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	cur_failed = 1;
}

/* Resolve a path relative to the source tree (KPGPUD_SRCDIR or "."). */
const char *
test_srcpath(const char *rel)
{
	static char buf[4096];
	const char *top = getenv("KPGPUD_SRCDIR");

	snprintf(buf, sizeof(buf), "%s/%s", top ? top : ".", rel);
	return buf;
}

static char cache_dir[64], cache_path[128];

/* A new cache, written and read-only, in a fresh temporary directory. */
struct cache *
test_cache_new(struct cache **rd)
{
	struct cache *c;

	snprintf(cache_dir, sizeof(cache_dir), "/tmp/kpgpud-unit.XXXXXX");
	if (mkdtemp(cache_dir) == NULL)
		return NULL;
	snprintf(cache_path, sizeof(cache_path), "%s/cache.db", cache_dir);
	if (cache_open(cache_path, 0, &c) < 0)
		return NULL;
	if (cache_open(cache_path, CACHE_OPEN_RDONLY, rd) < 0) {
		cache_free(c);
		return NULL;
	}
	return c;
}

/* Close both handles and remove the cache's files and directory. */
void
test_cache_remove(struct cache *c, struct cache *rd)
{
	static const char *const suffix[] = { "", "-wal", "-shm" };
	char p[160];

	cache_free(rd);
	cache_free(c);
	for (size_t i = 0; i < nitems(suffix); i++) {
		snprintf(p, sizeof(p), "%s%s", cache_path, suffix[i]);
		(void)unlink(p);
	}
	if (rmdir(cache_dir) < 0)
		test_fail(__FILE__, __LINE__, "cannot remove %s", cache_dir);
}

/* scandir filter: every name but the hidden ones (and . and ..). */
static int
visible(const struct dirent *de)
{
	return de->d_name[0] != '.';
}

int
test_each_file(const char *rel, size_t cap,
    void (*fn)(const char *name, const char *body, size_t len, void *arg),
    void *arg)
{
	char dir[4096], path[4096 + 256], *buf;
	struct dirent **names;
	size_t len;
	int n, done = 0;

	snprintf(dir, sizeof(dir), "%s", test_srcpath(rel));
	if ((n = scandir(dir, &names, visible, alphasort)) < 0) {
		test_fail(__FILE__, __LINE__, "cannot open %s", rel);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (read_file_capped(path, cap, &buf, &len) < 0)
			test_fail(__FILE__, __LINE__, "cannot read %s", path);
		else {
			fn(names[i]->d_name, buf, len, arg);
			free(buf);
			done++;
		}
		free(names[i]);
	}
	free(names);
	return done;
}

/* Whether test name was selected on the command line. */
static int
selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return 1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

/* See test.h. */
void
test_skip(const char *why)
{
	cur_skipped = why;
}

int
main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < ntests; i++) {
		if (!selected(tests[i].name, argc, argv))
			continue;
		cur_failed = 0;
		cur_skipped = NULL;
		tests[i].fn();
		if (cur_skipped != NULL && !cur_failed)
			printf("skip %s: %s\n", tests[i].name, cur_skipped);
		else
			printf("%s %s\n", cur_failed ? "FAIL" : "ok  ",
			    tests[i].name);
		if (cur_failed)
			failed++;
		else if (cur_skipped != NULL)
			skipped++;
		else
			passed++;
	}
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}
