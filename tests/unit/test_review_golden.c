/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every review reply of the fuzz corpora (tests/fuzz/seed-review*) and of
 * the fixtures (tests/fixtures/pods, wrapped in a Pod CREATE review when
 * they are bare pods, and tests/fixtures/bench) under every namespace state
 * and several policies must be byte-identical to the replies recorded in
 * tests/fixtures/golden/review-replies.txt. This guards refactors of the
 * admission path (the JSON scanner, the patch builder, base64, the reply
 * writer): a change in any byte of any reply fails here. A change of
 * behaviour that is meant rewrites the file:
 *   KPGPUD_GOLDEN_UPDATE=1 build/test/tests/test_review_golden
 * and the diff of the file is reviewed with the change.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-admit/review.h"
#include "tests/unit/test.h"

#define GOLDEN		"tests/fixtures/golden/review-replies.txt"
#define FILE_MAX	(4 * 1024 * 1024)
#define NAMES_MAX	64

/* The policies a reply is recorded under (REVIEW_NS_ISOLATED). */
static const char *const policies[] = {
	"{\"claimTemplateName\":\"gpu\"}",
	"{\"claimName\":\"shared\"}",
	"{\"claimName\":\"shared\",\"initContainers\":\"all\","
	    "\"legacyGPU\":\"translate\"}",
	"{\"claimName\":\"shared\",\"initContainers\":[\"a\",\"init\"],"
	    "\"legacyGPU\":\"allow\"}",
	"{\"claimTemplateName\":\"gpu-1g10gb\",\"legacyGPU\":\"reject\"}",
};

/* Read a whole file; NULL on error. */
static char *
slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rbe");
	char *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	if ((buf = malloc(FILE_MAX + 1)) == NULL) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, FILE_MAX + 1, f);
	fclose(f);
	if (n > FILE_MAX) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*ret_len = n;
	return buf;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append the reply of one body under one state and policy to out. */
static void
answer_one(FILE *out, const char *label, const char *body, size_t len,
    enum review_ns ns, const char *policy)
{
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	struct resolved r;
	struct resolved_pack *pk = NULL;
	char err[256];
	int e;

	memset(&r, 0, sizeof(r));
	if (policy != NULL && resolved_parse(policy, strlen(policy), &r, err,
	    sizeof(err)) < 0) {
		test_fail(__FILE__, __LINE__, "policy %s: %s", policy, err);
		return;
	}
	if (resolved_pack_new(&r, &pk) < 0) {
		test_fail(__FILE__, __LINE__, "policy %s: no memory", policy);
		return;
	}
	fprintf(out, "%s ns=%d policy=%s\n", label, (int)ns,
	    policy != NULL ? policy : "-");
	e = review_parse(body, len, &rv, err, sizeof(err));
	if (e == -E2BIG) {
		fprintf(out, "  deep: %s\n", err);
		e = review_parse_head(body, len, "too deep", &rv, err,
		    sizeof(err));
	}
	if (e < 0) {
		fprintf(out, "  parse %d: %s\n", e, err);
		resolved_pack_unref(pk);
		return;
	}
	fprintf(out, "  namespace=%s\n", review_namespace(rv) != NULL ?
	    review_namespace(rv) : "-");
	e = review_answer(rv, ns, pk, &rep, err, sizeof(err));
	if (e < 0)
		fprintf(out, "  answer %d: %s\n", e, err);
	else {
		fprintf(out, "  result=%s allowed=%d message=%s\n",
		    review_result_name(rep->result), rep->allowed,
		    rep->message);
		fprintf(out, "  body=%.*s\n", (int)rep->len, rep->body);
		review_reply_free(rep);
	}
	review_free(rv);
	resolved_pack_unref(pk);
}

/* Every state and policy for one body. */
static void
answer_all(FILE *out, const char *label, const char *body, size_t len)
{
	for (size_t i = 0; i < nitems(policies); i++)
		answer_one(out, label, body, len, REVIEW_NS_ISOLATED,
		    policies[i]);
	for (int ns = REVIEW_NS_OPEN; ns <= REVIEW_NS_UNRESOLVED_DENY; ns++)
		answer_one(out, label, body, len, (enum review_ns)ns, NULL);
}

/*
 * Every file of one directory, in name order; wrap: bare pods (kind Pod)
 * are put in a Pod CREATE review of team-a. The number of files, -1.
 */
static int
replay_dir(FILE *out, const char *rel)
{
	char *names[NAMES_MAX], path[4096];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if ((d = opendir(test_srcpath(rel))) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL && n < NAMES_MAX)
		if (de->d_name[0] != '.')
			names[n++] = strdup(de->d_name);
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), cmpstr);
	for (int i = 0; i < n; i++) {
		char label[512], *body, *wrapped = NULL;
		size_t len;

		snprintf(path, sizeof(path), "%s/%s", test_srcpath(rel),
		    names[i]);
		snprintf(label, sizeof(label), "%s/%s", rel, names[i]);
		if ((body = slurp(path, &len)) == NULL) {
			test_fail(__FILE__, __LINE__, "cannot read %s", path);
			free(names[i]);
			continue;
		}
		if (strstr(body, "\"AdmissionReview\"") == NULL &&
		    asprintf(&wrapped, "{\"apiVersion\":\"admission.k8s.io/v1\","
		    "\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u1\","
		    "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
		    "\"Pod\"},\"operation\":\"CREATE\",\"namespace\":\"team-a\","
		    "\"object\":%s}}", body) >= 0) {
			answer_all(out, label, wrapped, strlen(wrapped));
			free(wrapped);
		} else
			answer_all(out, label, body, len);
		free(body);
		free(names[i]);
	}
	return n;
}

TEST(replies_match_golden)
{
	static const char *const dirs[] = {
		"tests/fuzz/seed-review",
		"tests/fuzz/seed-review_diff",
		"tests/fixtures/pods",
		"tests/fixtures/bench",
	};
	char *got = NULL, *want;
	size_t gotlen = 0, wantlen = 0;
	FILE *out = open_memstream(&got, &gotlen);

	REQUIRE(out != NULL);
	for (size_t i = 0; i < nitems(dirs); i++)
		CHECK(replay_dir(out, dirs[i]) > 0);
	fclose(out);
	if (getenv("KPGPUD_GOLDEN_UPDATE") != NULL) {
		FILE *f = fopen(test_srcpath(GOLDEN), "we");

		REQUIRE(f != NULL);
		fwrite(got, 1, gotlen, f);
		fclose(f);
	}
	want = slurp(test_srcpath(GOLDEN), &wantlen);
	REQUIRE(want != NULL);
	if (gotlen != wantlen || memcmp(got, want, gotlen) != 0) {
		size_t i = 0, line = 1;

		while (i < gotlen && i < wantlen && got[i] == want[i])
			if (got[i++] == '\n')
				line++;
		test_fail(__FILE__, __LINE__, "replies differ from %s at line "
		    "%zu (got %zu bytes, recorded %zu)", GOLDEN, line, gotlen,
		    wantlen);
	}
	free(want);
	free(got);
}
