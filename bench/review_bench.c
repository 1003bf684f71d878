/* SPDX-License-Identifier: Apache-2.0 */
/*
 * review_bench: CPU cost of kpgpud-admit's review path alone (parse, patch,
 * answer, free), without TLS, HTTP or threads, to split a request's cost.
 *
 *   review_bench FILE [ITERATIONS]
 *
 * Prints one JSON line: {"bytes":N,"iterations":N,"us_per_review":X}.
 * Built by scripts/bench against build/lib/libkpgpud-kpgpud-admit.a and
 * libkpgpud-common.a.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/resolved.h"
#include "kpgpud-admit/review.h"

/* Read a whole file; NULL on error. */
static char *
slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) != NULL &&
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	} else if (buf != NULL)
		*ret_len = (size_t)n;
	fclose(f);
	return buf;
}

/* One review through parse and answer; 0 or -errno. */
static int
one(const char *body, size_t len, const struct resolved_pack *r)
{
	struct review *rv;
	struct review_reply *rep;
	char err[256];
	int e;

	if ((e = review_parse(body, len, &rv, err, sizeof(err))) < 0)
		return e;
	e = review_answer(rv, REVIEW_NS_ISOLATED, r, &rep, err, sizeof(err));
	if (e == 0 && rep->patch == NULL)
		e = -EPROTO;
	if (e == 0)
		review_reply_free(rep);
	review_free(rv);
	return e;
}

int
main(int argc, char **argv)
{
	static const char res[] = "{\"claimTemplateName\":\"agent-gpu\"}";
	struct resolved_pack *r = NULL;
	struct timespec a, b;
	char err[256];
	size_t len = 0;
	long n = argc > 2 ? atol(argv[2]) : 2000;
	char *body;

	if (argc < 2 || (body = slurp(argv[1], &len)) == NULL ||
	    resolved_pack_parse(res, strlen(res), &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "usage: review_bench FILE [ITERATIONS]\n");
		return 2;
	}
	for (int i = 0; i < 50; i++)
		if (one(body, len, r) < 0) {
			fprintf(stderr, "review_bench: review not patched\n");
			return 1;
		}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (long i = 0; i < n; i++)
		one(body, len, r);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	printf("{\"bytes\":%zu,\"iterations\":%ld,\"us_per_review\":%.2f}\n",
	    len, n, ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) /
	    1e3 / (double)n);
	resolved_pack_unref(r);
	free(body);
	return 0;
}
