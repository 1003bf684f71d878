/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kpgpud-admit/review.c: the AdmissionReview envelope the
 * apiserver checks (uid, apiVersion, kind, patchType with a base64 patch),
 * pass-through cases, miss policies, denials and malformed requests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-admit/patch.h"
#include "kpgpud-admit/review.h"
#include "tests/unit/test.h"

#include "tests/unit/jsonpatch_apply.c"
#include "tests/unit/podcheck.c"

#define TMPL	"{\"claimTemplateName\":\"gpu-1g10gb\"}"
#define UID	"cb2373d5-7933-43a4-9ca7-0be7db7c6f33"

/* The text of tests/fixtures/pods/name; caller frees. */
static char *
fixture_text(const char *name)
{
	char rel[256];
	json_t *j;
	char *s;

	snprintf(rel, sizeof(rel), "tests/fixtures/pods/%s", name);
	if ((j = json_load_file(test_srcpath(rel), 0, NULL)) == NULL) {
		test_fail(__FILE__, __LINE__, "cannot load %s", rel);
		return NULL;
	}
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

/* A Pod CREATE review around the pod fixture; caller frees. */
static char *
review_of(const char *pod_fixture)
{
	char rel[256];
	json_t *pod, *rv;
	char *s;

	snprintf(rel, sizeof(rel), "tests/fixtures/pods/%s", pod_fixture);
	if ((pod = json_load_file(test_srcpath(rel), 0, NULL)) == NULL)
		return NULL;
	rv = json_pack("{s:s, s:s, s:{s:s, s:{s:s,s:s,s:s}, s:s, s:s, s:o}}",
	    "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview",
	    "request", "uid", UID, "kind", "group", "", "version", "v1", "kind",
	    "Pod", "namespace", "team-a", "operation", "CREATE", "object", pod);
	s = json_dumps(rv, JSON_COMPACT);
	json_decref(rv);
	return s;
}

/* Decode standard base64 (written here, apart from review.c). */
static char *
unbase64(const char *s)
{
	size_t n = strlen(s), o = 0;
	char *out = malloc(n + 1);
	unsigned v = 0;
	int bits = 0;

	if (out == NULL || n % 4 != 0) {
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n && s[i] != '='; i++) {
		const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
		    "qrstuvwxyz0123456789+/";
		const char *p = strchr(tab, s[i]);

		if (p == NULL) {
			free(out);
			return NULL;
		}
		v = (v << 6) | (unsigned)(p - tab);
		if ((bits += 6) >= 8) {
			bits -= 8;
			out[o++] = (char)((v >> bits) & 0xff);
		}
	}
	out[o] = '\0';
	return out;
}

/* Parse a review and answer it; the reply or NULL. */
static struct review_reply *
run(const char *body, enum review_ns ns, const char *resolved_json)
{
	struct resolved r;
	struct resolved_pack *pk = NULL;
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	char err[256];

	memset(&r, 0, sizeof(r));
	if (resolved_json != NULL && resolved_parse(resolved_json,
	    strlen(resolved_json), &r, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "resolved: %s", err);
	if (resolved_pack_new(&r, &pk) < 0)
		test_fail(__FILE__, __LINE__, "pack: out of memory");
	else if (review_parse(body, strlen(body), &rv, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "parse: %s", err);
	else if (review_answer(rv, ns, pk, &rep, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "answer: %s", err);
	resolved_pack_unref(pk);
	review_free(rv);
	return rep;
}

/* The response member of a reply body, checked against the envelope rules. */
static json_t *
response_of(const struct review_reply *rep)
{
	json_t *root = json_loads(rep->body, 0, NULL), *resp;

	if (root == NULL) {
		test_fail(__FILE__, __LINE__, "reply is not JSON");
		return NULL;
	}
	CHECK_STR(json_string_value(json_object_get(root, "apiVersion")),
	    "admission.k8s.io/v1");
	CHECK_STR(json_string_value(json_object_get(root, "kind")),
	    "AdmissionReview");
	resp = json_incref(json_object_get(root, "response"));
	json_decref(root);
	CHECK(resp != NULL);
	CHECK_STR(json_string_value(json_object_get(resp, "uid")), UID);
	/* patch and patchType come together, and only as JSONPatch. */
	CHECK((json_object_get(resp, "patch") == NULL) ==
	    (json_object_get(resp, "patchType") == NULL));
	if (json_object_get(resp, "patchType") != NULL)
		CHECK_STR(json_string_value(json_object_get(resp, "patchType")),
		    "JSONPatch");
	return resp;
}

/* A review answered: the reply and its response member. */
struct answered {
	struct review_reply	*rep;
	json_t			*resp;
};

/*
 * Answer body in a namespace in state ns (resolved: its annotation) and
 * check the reply: allowed or not, the result, a patch only when patched.
 * False when there is no reply to look at.
 */
static bool
answer(struct answered *a, const char *body, enum review_ns ns,
    const char *resolved, bool allowed, enum review_result result)
{
	json_t *ok;

	a->resp = NULL;
	if ((a->rep = run(body, ns, resolved)) == NULL)
		return false;
	CHECK(a->rep->allowed == allowed);
	CHECK_INT(a->rep->result, result);
	CHECK((a->rep->patch != NULL) == (result == REVIEW_PATCHED));
	if ((a->resp = response_of(a->rep)) == NULL)
		return false;
	ok = json_object_get(a->resp, "allowed");
	CHECK(json_is_boolean(ok) && json_boolean_value(ok) == allowed);
	CHECK((json_object_get(a->resp, "patch") != NULL) ==
	    (result == REVIEW_PATCHED));
	return true;
}

/* The first warning of an answer, or NULL. */
static const char *
warning(const struct answered *a)
{
	return json_string_value(json_array_get(json_object_get(a->resp,
	    "warnings"), 0));
}

/* The message of a denial, whose status code is checked to be code. */
static const char *
denial(const struct answered *a, int code)
{
	json_t *st = json_object_get(a->resp, "status");

	CHECK_INT(json_integer_value(json_object_get(st, "code")), code);
	return json_string_value(json_object_get(st, "message"));
}

/* Free what answer() made. */
static void
answered_free(struct answered *a)
{
	json_decref(a->resp);
	review_reply_free(a->rep);
}

TEST(pod_create_in_isolated_namespace_is_patched)
{
	static const char *const pods[][2] = {
		{ "plain.json", TMPL },
		{ "plain.json", "{\"claimName\":\"team-a-gpu\"}" },
		{ "plain.json", "{\"claimName\":\"shared-gpu1\"}" },
		{ "no-resources.json", TMPL },
		{ "chart-claims.json", TMPL },
		{ "init.json", TMPL },
	};
	int mods[3] = { 0, 0, 0 };

	for (size_t i = 0; i < nitems(pods); i++) {
		char *body = review_of(pods[i][0]), *patch, err[256];
		struct answered a;
		json_t *ops, *req, *out;

		REQUIRE(body != NULL);
		REQUIRE(answer(&a, body, REVIEW_NS_ISOLATED, pods[i][1], true,
		    REVIEW_PATCHED));
		patch = unbase64(json_string_value(json_object_get(a.resp,
		    "patch")));
		REQUIRE(patch != NULL);
		CHECK_STR(patch, a.rep->patch);
		mods[strlen(patch) % 3] = 1;
		ops = json_loads(patch, 0, NULL);
		req = json_loads(body, 0, NULL);
		out = jp_apply(json_object_get(json_object_get(req, "request"),
		    "object"), ops, err, sizeof(err));
		CHECK(out != NULL);
		if (out != NULL && pc_check(out, err, sizeof(err)) < 0)
			test_fail(__FILE__, __LINE__, "%s: %s", pods[i][0],
			    err);
		json_decref(out);
		json_decref(req);
		json_decref(ops);
		free(patch);
		answered_free(&a);
		free(body);
	}
	/* Every base64 padding case was exercised. */
	CHECK(mods[0] && mods[1] && mods[2]);
}

TEST(captured_request_and_namespace_from_object)
{
	char *body = fixture_text("review-pod-create.json");
	struct review *rv = NULL;
	json_t *j;
	char *s;

	REQUIRE(body != NULL);
	REQUIRE(review_parse(body, strlen(body), &rv, NULL, 0) == 0);
	CHECK_STR(review_namespace(rv), "team-a");
	CHECK_STR(review_uid(rv), UID);
	review_free(rv);
	/* Without request.namespace the object's metadata decides. */
	j = json_loads(body, 0, NULL);
	json_object_del(json_object_get(j, "request"), "namespace");
	s = json_dumps(j, 0);
	REQUIRE(review_parse(s, strlen(s), &rv, NULL, 0) == 0);
	CHECK_STR(review_namespace(rv), "team-a");
	review_free(rv);
	free(s);
	json_decref(j);
	free(body);
}

TEST(non_pod_and_non_create_pass)
{
	static const char *const edits[][2] = {
		{ "kind", "{\"group\":\"apps\",\"version\":\"v1\",\"kind\":"
		    "\"Deployment\"}" },
		{ "kind", "{\"group\":\"example.com\",\"version\":\"v1\","
		    "\"kind\":\"Pod\"}" },
		{ "operation", "\"UPDATE\"" },
		{ "operation", "\"DELETE\"" },
		{ "subResource", "\"ephemeralcontainers\"" },
	};
	char *body = fixture_text("review-pod-create.json");

	REQUIRE(body != NULL);
	for (size_t i = 0; i < nitems(edits); i++) {
		json_t *j = json_loads(body, 0, NULL);
		struct review *rv = NULL;
		struct answered a;
		char *s;

		json_object_set_new(json_object_get(j, "request"), edits[i][0],
		    json_loads(edits[i][1], JSON_DECODE_ANY, NULL));
		s = json_dumps(j, 0);
		REQUIRE(review_parse(s, strlen(s), &rv, NULL, 0) == 0);
		CHECK(review_namespace(rv) == NULL);
		review_free(rv);
		REQUIRE(answer(&a, s, REVIEW_NS_ISOLATED, TMPL, true,
		    REVIEW_SKIPPED));
		answered_free(&a);
		free(s);
		json_decref(j);
	}
	free(body);
}

TEST(open_namespace_and_miss_policies)
{
	char *body = fixture_text("review-pod-create.json");
	struct answered a;

	REQUIRE(body != NULL);
	REQUIRE(answer(&a, body, REVIEW_NS_OPEN, NULL, true, REVIEW_OPEN));
	CHECK(json_object_get(a.resp, "warnings") == NULL);
	answered_free(&a);

	REQUIRE(answer(&a, body, REVIEW_NS_MISS_ALLOW, NULL, true,
	    REVIEW_MISS_ALLOWED));
	CHECK(strstr(warning(&a), "team-a") != NULL);
	answered_free(&a);

	REQUIRE(answer(&a, body, REVIEW_NS_MISS_DENY, NULL, false,
	    REVIEW_MISS_DENIED));
	CHECK(strstr(denial(&a, 503), "\"team-a\"") != NULL);
	CHECK(strstr(a.rep->message, "cannot tell whether namespace") != NULL);
	CHECK(strstr(a.rep->message, "not known yet") != NULL);
	answered_free(&a);
	free(body);
}

TEST(unresolved_namespace_is_not_called_unknown)
{
	char *body = fixture_text("review-pod-create.json");
	struct answered a;
	const char *w, *m;

	REQUIRE(body != NULL);
	REQUIRE(answer(&a, body, REVIEW_NS_UNRESOLVED_ALLOW, NULL, true,
	    REVIEW_MISS_ALLOWED));
	REQUIRE((w = warning(&a)) != NULL);
	CHECK(strstr(w, "team-a") != NULL);
	CHECK(strstr(w, "labelled for GPU isolation") != NULL);
	CHECK(strstr(w, "kubeplus.io/gpu-isolation-resolved") != NULL);
	CHECK(strstr(w, "kpgpud-quota") != NULL);
	CHECK(strstr(w, "not known yet") == NULL);
	answered_free(&a);

	REQUIRE(answer(&a, body, REVIEW_NS_UNRESOLVED_DENY, NULL, false,
	    REVIEW_MISS_DENIED));
	REQUIRE((m = denial(&a, 503)) != NULL);
	CHECK_STR(m, a.rep->message);
	CHECK(strstr(m, "\"team-a\"") != NULL);
	CHECK(strstr(m, "labelled for GPU isolation") != NULL);
	CHECK(strstr(m, "not (yet) resolved") != NULL);
	CHECK(strstr(m, "kubeplus.io/gpu-isolation-resolved") != NULL);
	CHECK(strstr(m, "retry shortly") != NULL);
	CHECK(strstr(m, "kpgpud-quota") != NULL);
	CHECK(strstr(m, "cannot tell") == NULL);
	CHECK(strstr(m, "cache is unavailable") == NULL);
	answered_free(&a);
	free(body);
}

/*
 * Pod fixtures in an isolated namespace: a legacy GPU request is denied
 * (403, naming the resource) or translated with one short warning; a pod
 * that carries the claim already is left unchanged.
 */
static const struct {
	const char		*fixture;
	const char		*resolved;
	bool			 allowed;
	enum review_result	 result;
	size_t			 nwarnings;
	const char		*denial;	/* in the 403 message */
} pod_answers[] = {
	{ "legacy.json", TMPL, false, REVIEW_DENIED, 0, "kubeplus-gpu" },
	{ "legacy.json", "{\"claimTemplateName\":\"gpu-1g10gb\","
	  "\"legacyGPU\":\"translate\"}", true, REVIEW_PATCHED, 1, NULL },
	{ "already-patched.json", TMPL, true, REVIEW_UNCHANGED, 0, NULL },
};

TEST(legacy_and_already_patched_pods)
{
	for (size_t i = 0; i < nitems(pod_answers); i++) {
		char *body = review_of(pod_answers[i].fixture);
		struct answered a;
		json_t *ws;

		REQUIRE(body != NULL);
		REQUIRE(answer(&a, body, REVIEW_NS_ISOLATED,
		    pod_answers[i].resolved, pod_answers[i].allowed,
		    pod_answers[i].result));
		ws = json_object_get(a.resp, "warnings");
		CHECK_INT(json_array_size(ws), pod_answers[i].nwarnings);
		for (size_t k = 0; k < json_array_size(ws); k++)
			CHECK(strlen(json_string_value(json_array_get(ws, k)))
			    <= 120);
		if (pod_answers[i].denial != NULL)
			CHECK(strstr(denial(&a, 403), pod_answers[i].denial)
			    != NULL);
		answered_free(&a);
		free(body);
	}
}

TEST(malformed_requests)
{
	static const char *const bad[] = {
		"",
		"{",
		"not json",
		"[]",
		"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{\"uid\":\"u\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\","
		    "\"request\":{\"uid\":\"u\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\"}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{\"uid\":7}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":"
		    "{\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"namespace\":"
		    "\"a\"}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":"
		    "{\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"namespace\":"
		    "\"Bad_NS\",\"object\":{}}}",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":"
		    "{\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"object\":{}}}",
	};
	struct review *rv;
	char err[256];

	for (size_t i = 0; i < nitems(bad); i++) {
		rv = NULL;
		err[0] = '\0';
		if (review_parse(bad[i], strlen(bad[i]), &rv, err,
		    sizeof(err)) != -EINVAL || err[0] == '\0')
			test_fail(__FILE__, __LINE__, "accepted %s", bad[i]);
		CHECK(rv == NULL);
	}
}

TEST(truncated_request)
{
	char *body = fixture_text("review-pod-create.json");
	struct review *rv = NULL;
	char err[256];

	REQUIRE(body != NULL);
	for (size_t n = 0; n < strlen(body); n += 7) {
		if (review_parse(body, n, &rv, err, sizeof(err)) != -EINVAL)
			test_fail(__FILE__, __LINE__, "accepted %zu bytes", n);
		rv = NULL;
	}
	free(body);
}

TEST(malformed_pod_object)
{
	const char *body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
	    "\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":{\"kind\":"
	    "\"Pod\"},\"operation\":\"CREATE\",\"namespace\":\"a\",\"object\":"
	    "{\"spec\":{\"containers\":{}}}}}";
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	struct resolved_pack *r = NULL;
	char err[256] = "";

	REQUIRE(resolved_pack_parse(TMPL, strlen(TMPL), &r, NULL, 0) == 0);
	REQUIRE(review_parse(body, strlen(body), &rv, err, sizeof(err)) == 0);
	/* Denied with its uid, never an error (failurePolicy: Ignore). */
	CHECK_INT(review_answer(rv, REVIEW_NS_ISOLATED, r, &rep, err,
	    sizeof(err)), 0);
	REQUIRE(rep != NULL);
	CHECK(!rep->allowed);
	CHECK(rep->result == REVIEW_REFUSED);
	CHECK(strstr(rep->message, "containers") != NULL);
	CHECK(strstr(rep->body, "\"uid\":\"u\",\"allowed\":false") != NULL);
	CHECK(strstr(err, "containers") != NULL);
	review_reply_free(rep);
	rep = NULL;
	/* The same pod passes untouched where the namespace is open. */
	CHECK_INT(review_answer(rv, REVIEW_NS_OPEN, r, &rep, err,
	    sizeof(err)), 0);
	review_reply_free(rep);
	review_free(rv);
	resolved_pack_unref(r);
}

TEST(result_names)
{
	CHECK_STR(review_result_name(REVIEW_PATCHED), "patched");
	CHECK_STR(review_result_name(REVIEW_MISS_DENIED), "miss_denied");
	CHECK_STR(review_result_name(REVIEW_NRESULTS), "unknown");
}

/* A review built to answer, in namespace a, for a pod of the given spec. */
static char *
pod_review(const char *spec)
{
	struct buf b = BUF_INIT(0);

	CHECK(buf_printf(&b, "{\"apiVersion\":\"admission.k8s.io/v1\","
	    "\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u-1\","
	    "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
	    "\"Pod\"},\"namespace\":\"a\",\"operation\":\"CREATE\","
	    "\"object\":{\"spec\":%s}}}", spec) == 0);
	return b.data;
}

/* Answer body for an isolated namespace; the reply is checked to deny. */
static void
check_refused(const char *body, size_t max_patch, const char *reason)
{
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	struct resolved_pack *r = NULL;
	char err[256] = "";
	int e;

	REQUIRE(resolved_pack_parse(TMPL, strlen(TMPL), &r, NULL, 0) == 0);
	e = review_parse(body, strlen(body), &rv, err, sizeof(err));
	if (e == -E2BIG)
		e = review_parse_head(body, strlen(body), "nested too deep",
		    &rv, err, sizeof(err));
	REQUIRE(e == 0);
	review_set_max_patch(rv, max_patch);
	CHECK_INT(review_answer(rv, REVIEW_NS_ISOLATED, r, &rep, err,
	    sizeof(err)), 0);
	REQUIRE(rep != NULL);
	CHECK(!rep->allowed);
	CHECK(rep->result == REVIEW_REFUSED);
	if (strstr(rep->message, reason) == NULL)
		test_fail(__FILE__, __LINE__, "message %s lacks %s",
		    rep->message, reason);
	CHECK(strstr(rep->body, "\"uid\":\"u-1\",\"allowed\":false") !=
	    NULL);
	review_reply_free(rep);
	/* Where the namespace is not isolated, the same pod just passes. */
	CHECK_INT(review_answer(rv, REVIEW_NS_OPEN, r, &rep, err,
	    sizeof(err)), 0);
	CHECK(rep->allowed);
	review_reply_free(rep);
	review_free(rv);
	resolved_pack_unref(r);
}

TEST(caps_deny_never_fail)
{
	struct buf b = BUF_INIT(0);
	char *body;

	/* More containers than PATCH_MAX_CONTAINERS. */
	REQUIRE(buf_puts(&b, "{\"containers\":[") == 0);
	for (int i = 0; i <= PATCH_MAX_CONTAINERS; i++)
		REQUIRE(buf_printf(&b, "%s{\"name\":\"c%d\"}", i ? "," : "",
		    i) == 0);
	REQUIRE(buf_puts(&b, "]}") == 0);
	body = pod_review(b.data);
	check_refused(body, 0, "more than 4096 entries");
	free(body);
	buf_reset(&b);
	/* A patch over its cap. */
	body = pod_review("{\"containers\":[{\"name\":\"a\"},{\"name\":"
	    "\"b\"}]}");
	check_refused(body, 64, "larger than 64 bytes");
	free(body);
	/* Nested deeper than the parser goes: answered from the head. */
	REQUIRE(buf_puts(&b, "{\"containers\":[{\"name\":\"a\",\"x\":") ==
	    0);
	for (int i = 0; i < 3000; i++)
		REQUIRE(buf_putc(&b, '[') == 0);
	for (int i = 0; i < 3000; i++)
		REQUIRE(buf_putc(&b, ']') == 0);
	REQUIRE(buf_puts(&b, "}]}") == 0);
	body = pod_review(b.data);
	check_refused(body, 0, "nested too deep");
	free(body);
	buf_free(&b);
}

TEST(head_of_a_review)
{
	static const char *const heads[] = {
		/* not a review, or no uid before the cap: still an error */
		"{\"apiVersion\":\"v1\",\"kind\":\"AdmissionReview\","
		    "\"request\":{\"uid\":\"u\"",
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
		    "\"AdmissionReview\",\"request\":{\"object\":{",
		"[1,2,3",
	};
	const char *nopod = "{\"apiVersion\":\"admission.k8s.io/v1\","
	    "\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
	    "\"kind\":{\"kind\":\"Service\"},\"operation\":\"CREATE\","
	    "\"namespace\":\"a\",\"object\":[[[[";
	const char *nons = "{\"apiVersion\":\"admission.k8s.io/v1\","
	    "\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
	    "\"object\":[[[[";
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	char err[256];

	for (size_t i = 0; i < nitems(heads); i++) {
		if (review_parse_head(heads[i], strlen(heads[i]), "x", &rv,
		    err, sizeof(err)) != -EINVAL)
			test_fail(__FILE__, __LINE__, "accepted %s", heads[i]);
	}
	/* Not a Pod CREATE: answered as a whole one would be. */
	REQUIRE(review_parse_head(nopod, strlen(nopod), "x", &rv, err,
	    sizeof(err)) == 0);
	CHECK(review_namespace(rv) == NULL);
	REQUIRE(review_answer(rv, REVIEW_NS_OPEN, NULL, &rep, err,
	    sizeof(err)) == 0);
	CHECK(rep->allowed);
	review_reply_free(rep);
	review_free(rv);
	/* Cannot tell kind nor namespace: refused wherever it is. */
	REQUIRE(review_parse_head(nons, strlen(nons), "x", &rv, err,
	    sizeof(err)) == 0);
	CHECK(review_namespace(rv) == NULL);
	REQUIRE(review_answer(rv, REVIEW_NS_OPEN, NULL, &rep, err,
	    sizeof(err)) == 0);
	CHECK(!rep->allowed);
	CHECK_STR(review_uid(rv), "u");
	review_reply_free(rep);
	review_free(rv);
}
