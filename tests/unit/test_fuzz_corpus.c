/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every libFuzzer target of tests/fuzz/ run as a plain function on its seed
 * corpus (tests/fuzz/seed-NAME/) and on every input a fuzzing run found
 * crashing (kept in tests/fuzz/crash-NAME/ once fixed), so these stay
 * regression tests in the normal unit build and under ASan/UBSan without
 * clang or libFuzzer. A target aborts on a broken invariant, which fails
 * this binary.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"

#define LLVMFuzzerTestOneInput fuzz_annotation_one
#include "tests/fuzz/fuzz_annotation.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_classes_one
#include "tests/fuzz/fuzz_classes.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_httphead_one
#include "tests/fuzz/fuzz_httphead.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_ipc_one
#include "tests/fuzz/fuzz_ipc.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_json_one
#include "tests/fuzz/fuzz_json.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_kubeconfig_one
#include "tests/fuzz/fuzz_kubeconfig.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_plan_one
#include "tests/fuzz/fuzz_plan.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_review_one
#include "tests/fuzz/fuzz_review.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_review_diff_one
#include "tests/fuzz/fuzz_review_diff.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_strmap_one
#include "tests/fuzz/fuzz_strmap.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_watchstream_one
#include "tests/fuzz/fuzz_watchstream.c"
#undef LLVMFuzzerTestOneInput

#define CORPUS_FILE_MAX	(1024 * 1024)

typedef int (*fuzz_fn)(const uint8_t *, size_t);

/* Read a whole (small) file; NULL if unreadable or too large. */
static uint8_t *
slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	if ((buf = malloc(CORPUS_FILE_MAX + 1)) == NULL) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, CORPUS_FILE_MAX + 1, f);
	fclose(f);
	if (n > CORPUS_FILE_MAX) {
		free(buf);
		return NULL;
	}
	*ret_len = n;
	return buf;
}

/* Feed every file of tests/fuzz/DIR to fn; the number fed, -1 if no dir. */
static int
run_dir(const char *dir, fuzz_fn fn)
{
	char rel[256], path[4096];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(rel, sizeof(rel), "tests/fuzz/%s", dir);
	if ((d = opendir(test_srcpath(rel))) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		uint8_t *buf;
		size_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", test_srcpath(rel),
		    de->d_name);
		if ((buf = slurp(path, &len)) == NULL) {
			test_fail(__FILE__, __LINE__, "cannot read %s", path);
			continue;
		}
		fn(buf, len);
		free(buf);
		n++;
	}
	closedir(d);
	return n;
}

/* Seeds (which must exist) and kept crash inputs of one target. */
static void
run_target(const char *name, fuzz_fn fn)
{
	char dir[64];

	snprintf(dir, sizeof(dir), "seed-%s", name);
	if (run_dir(dir, fn) <= 0)
		test_fail(__FILE__, __LINE__, "no seeds in tests/fuzz/%s", dir);
	snprintf(dir, sizeof(dir), "crash-%s", name);
	(void)run_dir(dir, fn);
	/* the empty input and a lone byte, which every target must take */
	fn((const uint8_t *)"", 0);
	fn((const uint8_t *)"\x01", 1);
}

TEST(annotation) { run_target("annotation", fuzz_annotation_one); }
TEST(classes) { run_target("classes", fuzz_classes_one); }
TEST(httphead) { run_target("httphead", fuzz_httphead_one); }
TEST(ipc) { run_target("ipc", fuzz_ipc_one); }
TEST(json) { run_target("json", fuzz_json_one); }
TEST(kubeconfig) { run_target("kubeconfig", fuzz_kubeconfig_one); }
TEST(plan) { run_target("plan", fuzz_plan_one); }
TEST(review) { run_target("review", fuzz_review_one); }
TEST(review_diff) { run_target("review_diff", fuzz_review_diff_one); }
TEST(strmap) { run_target("strmap", fuzz_strmap_one); }
TEST(watchstream) { run_target("watchstream", fuzz_watchstream_one); }
