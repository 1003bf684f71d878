/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sidecar list changes nothing but sidecars: every review of the fuzz
 * seeds (seed-review, seed-review_diff) and every pod fixture as a review
 * is answered under several namespace policies, once without a sidecar list
 * and once with the default one; for a pod with no container of a default
 * sidecar name the two replies are byte-identical, and for the fixture
 * with sidecars they differ (so the comparison can fail).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-admit/review.h"
#include "tests/fuzz/review_specs.h"
#include "tests/unit/test.h"

#define BODY_MAX	(4 * 1024 * 1024)

static int same, differ, with_sidecars;

/* Whether n (NULL: no name) is one of the default sidecar names. */
static bool
default_sidecar(const char *n)
{
	for (int k = 0; n != NULL && resolved_default_sidecars[k]; k++)
		if (strcmp(n, resolved_default_sidecars[k]) == 0)
			return true;
	return false;
}

/* Whether the pod of a review body has a container of a sidecar name. */
static bool
has_sidecar(const char *body, size_t len)
{
	static const char *const lists[] = { "containers", "initContainers" };
	json_t *j = json_loadb(body, len, 0, NULL);
	const json_t *spec = json_object_get(json_object_get(json_object_get(
	    j, "request"), "object"), "spec"), *c;
	bool r = false;
	size_t i;

	for (size_t l = 0; l < nitems(lists); l++)
		json_array_foreach(json_object_get(spec, lists[l]), i, c)
			r = r || default_sidecar(json_string_value(
			    json_object_get(c, "name")));
	json_decref(j);
	return r;
}

/* Answer body under r; the reply or NULL (the error text in err). */
static struct review_reply *
answer(const char *body, size_t len, const struct resolved *r, char *err,
    size_t errlen)
{
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	struct resolved_pack *pk = NULL;

	if (resolved_pack_new(r, &pk) < 0 ||
	    review_parse(body, len, &rv, err, errlen) < 0) {
		resolved_pack_unref(pk);
		return NULL;
	}
	if (review_answer(rv, REVIEW_NS_ISOLATED, pk, &rep, err, errlen) < 0)
		rep = NULL;
	review_free(rv);
	resolved_pack_unref(pk);
	return rep;
}

/* Compare the replies to one body without and with the default list. */
static void
compare(const char *what, const char *body, size_t len, void *arg)
{
	bool side = has_sidecar(body, len);

	(void)arg;
	with_sidecars += side;
	for (size_t s = 0; s < nitems(review_specs); s++) {
		struct resolved plain, listed;
		struct review_reply *a, *b;
		char e1[256] = "", e2[256] = "";
		bool eq;

		memset(&plain, 0, sizeof(plain));
		if (resolved_parse(review_specs[s], strlen(review_specs[s]), &plain, NULL,
		    0) < 0) {
			test_fail(__FILE__, __LINE__, "spec %zu", s);
			return;
		}
		listed = plain;
		for (int k = 0; resolved_default_sidecars[k] != NULL; k++)
			snprintf(listed.pol.sidecar_names[
			    listed.pol.nsidecar_names++], 64, "%s",
			    resolved_default_sidecars[k]);
		a = answer(body, len, &plain, e1, sizeof(e1));
		b = answer(body, len, &listed, e2, sizeof(e2));
		eq = (a == NULL) == (b == NULL) && (a == NULL ?
		    strcmp(e1, e2) == 0 : a->len == b->len &&
		    memcmp(a->body, b->body, a->len) == 0);
		if (eq)
			same++;
		else
			differ++;
		if (!side && !eq)
			test_fail(__FILE__, __LINE__, "%s [spec %zu]: reply "
			    "changed by the sidecar list", what, s);
		review_reply_free(a);
		review_reply_free(b);
	}
}

/* One pod fixture (other kinds are skipped) wrapped in a Pod CREATE review. */
static void
compare_pod(const char *what, const char *body, size_t len, void *arg)
{
	json_t *pod, *rv;
	char *s;

	if ((pod = json_loadb(body, len, 0, NULL)) == NULL ||
	    strcmp(json_string_value(json_object_get(pod, "kind")) ?
	    json_string_value(json_object_get(pod, "kind")) : "", "Pod") != 0) {
		json_decref(pod);
		return;
	}
	rv = json_pack("{s:s, s:s, s:{s:s, s:{s:s,s:s,s:s}, s:s, s:s, s:o}}",
	    "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview",
	    "request", "uid", "u-1", "kind", "group", "", "version", "v1",
	    "kind", "Pod", "namespace", "team-a", "operation", "CREATE",
	    "object", pod);
	if ((s = json_dumps(rv, JSON_COMPACT)) != NULL)
		compare(what, s, strlen(s), arg);
	free(s);
	json_decref(rv);
}

TEST(replies_unchanged_without_sidecar_names)
{
	test_each_file("tests/fuzz/seed-review", BODY_MAX, compare, NULL);
	test_each_file("tests/fuzz/seed-review_diff", BODY_MAX, compare, NULL);
	test_each_file("tests/fixtures/pods", BODY_MAX, compare_pod, NULL);
	printf("    %d replies identical, %d changed; %d inputs with "
	    "sidecar names\n", same, differ, with_sidecars);
	CHECK(same >= 30);
	CHECK(with_sidecars >= 2);
	/* sidecars.json (and legacy-sidecar.json under translate) */
	CHECK(differ >= 2);
}
