/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for kpgpud-admit's request path: the input is an HTTP
 * body as the webhook receives it. It is parsed as an AdmissionReview and,
 * when it parses, answered under each namespace state and under an
 * annotation with every policy, which runs patch.c on the pod it carries.
 * Every reply must be JSON with the request's uid.
 * fuzz-sources: common/resolved.c common/util.c kpgpud-admit/patch.c kpgpud-admit/review.c common/jscan.c common/jsonw.c kpgpud-admit/reqhead.c kpgpud-admit/podscan.c common/region.c
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/resolved.h"
#include "kpgpud-admit/review.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parse one body and answer it every way; a reply must be well formed. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const specs[] = {
		"{\"claimTemplateName\":\"gpu\"}",
		"{\"claimName\":\"shared\",\"initContainers\":\"all\","
		    "\"legacyGPU\":\"translate\"}",
		"{\"claimName\":\"shared\",\"initContainers\":[\"a\"],"
		    "\"legacyGPU\":\"allow\"}",
	};
	struct review *rv = NULL;
	struct review_reply *rep;
	struct resolved_pack *r;
	char err[256];

	int e = review_parse((const char *)data, size, &rv, err, sizeof(err));

	/* Too deep to parse whole: read from its head, as the server does. */
	if (e == -E2BIG)
		e = review_parse_head((const char *)data, size, "too deep", &rv,
		    err, sizeof(err));
	/* Any prefix's head must also give an answer that echoes its uid. */
	else if (e < 0 && review_parse_head((const char *)data, size, "x",
	    &rv, err, sizeof(err)) == 0)
		e = 0;
	if (e < 0)
		return 0;
	for (size_t i = 0; i < 3 + 3; i++) {
		enum review_ns ns = i < 3 ? REVIEW_NS_ISOLATED :
		    (enum review_ns)(i - 2);

		if (resolved_pack_parse(specs[i % 3], strlen(specs[i % 3]), &r,
		    NULL, 0) < 0)
			abort();
		rep = NULL;
		e = review_answer(rv, ns, r, &rep, err, sizeof(err));
		resolved_pack_unref(r);
		if (e < 0)
			continue;
		json_t *j = json_loadb(rep->body, rep->len, 0, NULL);
		const char *uid = json_string_value(json_object_get(
		    json_object_get(j, "response"), "uid"));

		if (j == NULL || uid == NULL || strcmp(uid, review_uid(rv)) != 0)
			abort();
		json_decref(j);
		review_reply_free(rep);
	}
	review_free(rv);
	return 0;
}
