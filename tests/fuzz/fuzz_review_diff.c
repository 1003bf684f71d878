/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Differential libFuzzer target for kpgpud-admit's review parse: the input
 * is an HTTP body. The scanner (jscan) must accept exactly what jansson
 * accepts, and review_parse() (scanner + jansson on the members read) must
 * agree with review_parse_full() (jansson on everything): same result, same
 * error text, and, when the body parses, the same uid and namespace and the
 * same reply byte for byte under every namespace state and policy.
 * fuzz-sources: common/resolved.c common/util.c kpgpud-admit/patch.c kpgpud-admit/review.c common/jscan.c common/jsonw.c kpgpud-admit/reqhead.c kpgpud-admit/podscan.c common/region.c
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/resolved.h"
#include "common/jscan.h"
#include "kpgpud-admit/review.h"
#include "tests/fuzz/review_specs.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether two optional strings are equal. */
static int
diff_same_str(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* Whether two replies (or answer failures) are the same. */
static int
diff_same_reply(int e1, const struct review_reply *a, const char *err1,
    int e2, const struct review_reply *b, const char *err2)
{
	if (e1 != e2)
		return 0;
	if (e1 < 0)
		return strcmp(err1, err2) == 0;
	return a->len == b->len && memcmp(a->body, b->body, a->len) == 0 &&
	    a->allowed == b->allowed && a->result == b->result &&
	    diff_same_str(a->patch, b->patch) &&
	    strcmp(a->message, b->message) == 0;
}

/* Answer both parses under every state and policy; 0 when they agree. */
static int
diff_answers(const struct review *fast, const struct review *full)
{
	const size_t nspecs = sizeof(review_specs) / sizeof(review_specs[0]);
	char err1[256], err2[256];
	struct resolved_pack *r;
	int bad = 0;

	/* every spec isolated, then the five other states */
	for (size_t i = 0; i < nspecs + 5 && !bad; i++) {
		enum review_ns ns = i < nspecs ? REVIEW_NS_ISOLATED :
		    (enum review_ns)(i - nspecs + 1);
		const char *spec = review_specs[i % nspecs];
		struct review_reply *a = NULL, *b = NULL;
		int e1, e2;

		if (resolved_pack_parse(spec, strlen(spec), &r, NULL, 0) < 0)
			return 1;
		err1[0] = err2[0] = '\0';
		e1 = review_answer(fast, ns, r, &a, err1, sizeof(err1));
		e2 = review_answer(full, ns, r, &b, err2, sizeof(err2));
		resolved_pack_unref(r);
		bad = !diff_same_reply(e1, a, err1, e2, b, err2);
		review_reply_free(a);
		review_reply_free(b);
	}
	return bad;
}

/*
 * Whether the scanner's verdict on body is right. jansson drops one NUL
 * byte that follows a number or a literal (its stream forgets a pushed-back
 * NUL) and refuses a NUL anywhere else, so a body it accepts has NULs only
 * there: the scanner refuses them (review_parse() then takes the full
 * parse) and must accept the body without them.
 */
static int
diff_verdict_ok(const char *body, size_t size, bool jansson_ok)
{
	bool scan_ok = jscan_validate(body, size) == 0;
	char *copy;
	size_t n = 0;

	if (scan_ok == jansson_ok)
		return 1;
	if (scan_ok || memchr(body, '\0', size) == NULL ||
	    (copy = malloc(size)) == NULL)
		return 0;
	for (size_t i = 0; i < size; i++)
		if (body[i] != '\0')
			copy[n++] = body[i];
	scan_ok = jscan_validate(copy, n) == 0;
	free(copy);
	return scan_ok;
}

/*
 * Run one body through both paths. Returns 0 when they agree, 1 when the
 * scanner and jansson disagree on validity, 2 when the parses differ, 3
 * when the answers differ.
 */
static int
review_diff(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct review *fast = NULL, *full = NULL;
	char err1[256] = "", err2[256] = "";
	json_t *j = json_loadb(body, size, 0, NULL);
	int e1, e2, rc = 0;

	if (!diff_verdict_ok(body, size, j != NULL))
		rc = 1;
	json_decref(j);
	if (rc != 0)
		return rc;
	e1 = review_parse(body, size, &fast, err1, sizeof(err1));
	e2 = review_parse_full(body, size, &full, err2, sizeof(err2));
	if (e1 != e2 || strcmp(err1, err2) != 0)
		rc = 2;
	else if (e1 == 0 && (strcmp(review_uid(fast), review_uid(full)) != 0 ||
	    !diff_same_str(review_namespace(fast), review_namespace(full))))
		rc = 2;
	else if (e1 == 0 && diff_answers(fast, full) != 0)
		rc = 3;
	review_free(fast);
	review_free(full);
	return rc;
}

/* Abort when the two parse paths disagree on this body. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (review_diff(data, size) != 0)
		abort();
	return 0;
}
