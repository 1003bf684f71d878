/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kpgpud-admit/patch.c. Every patch is applied by the
 * independent RFC 6902 applier (jsonpatch_apply.c), the result must pass the
 * apiserver's claim validation (podcheck.c), keep what the chart declared,
 * change nothing else, and yield an empty patch when patched again.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-admit/patch.h"
#include "tests/unit/test.h"

#include "tests/unit/jsonpatch_apply.c"
#include "tests/unit/podcheck.c"

#define TMPL	"{\"claimTemplateName\":\"gpu-1g10gb\",\"sharing\":\"mig\"}"

/* Load tests/fixtures/pods/name. */
static json_t *
fixture(const char *name)
{
	char rel[256];
	json_error_t e;
	json_t *j;

	snprintf(rel, sizeof(rel), "tests/fixtures/pods/%s", name);
	if ((j = json_load_file(test_srcpath(rel), 0, &e)) == NULL)
		test_fail(__FILE__, __LINE__, "%s: %s", rel, e.text);
	return j;
}

/* Parse an annotation that the test knows to be valid (a reference). */
static struct resolved_pack *
spec(const char *json)
{
	struct resolved_pack *r = NULL;
	char err[128];

	if (resolved_pack_parse(json, strlen(json), &r, err,
	    sizeof(err)) < 0) {
		test_fail(__FILE__, __LINE__, "%s: %s", json, err);
		exit(1);
	}
	return r;
}

/* Whether list (an array) holds an element equal to v. */
static int
contains(const json_t *list, const json_t *v)
{
	const json_t *e;
	size_t i;

	json_array_foreach(list, i, e)
		if (json_equal(e, v))
			return 1;
	return 0;
}

/* Whether a container references the GPU claim. */
static int
refs_gpu(const json_t *ctr)
{
	const json_t *claims = json_object_get(json_object_get(ctr,
	    "resources"), "claims"), *e;
	size_t i;

	json_array_foreach(claims, i, e)
		if (strcmp(json_string_value(json_object_get(e, "name")),
		    RESOLVED_POD_CLAIM) == 0)
			return 1;
	return 0;
}

/* Delete every nvidia.com/ key of a resource map. */
static void
drop_nvidia(json_t *map)
{
	const char *key;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(map, tmp, key, v)
		if (strncmp(key, "nvidia.com/", 11) == 0)
			json_object_del(map, key);
}

/* The pod without what the patch may touch: claims and legacy requests. */
static json_t *
strip(const json_t *pod)
{
	static const char *const lists[] = { "containers", "initContainers" };
	json_t *p = json_deep_copy(pod), *s = json_object_get(p, "spec"), *c;
	size_t i;

	json_object_del(s, "resourceClaims");
	for (size_t l = 0; l < 2; l++)
		json_array_foreach(json_object_get(s, lists[l]), i, c) {
			json_t *res = json_object_get(c, "resources");

			json_object_del(res, "claims");
			drop_nvidia(json_object_get(res, "limits"));
			drop_nvidia(json_object_get(res, "requests"));
			if (res == NULL || json_is_null(res) ||
			    json_object_size(res) == 0)
				json_object_del(c, "resources");
		}
	return p;
}

/* Check that each op is a kind and at a place the patch may use. */
static void
check_ops(const json_t *ops)
{
	const json_t *op;
	size_t i;

	json_array_foreach(ops, i, op) {
		const char *o = json_string_value(json_object_get(op, "op"));
		const char *p = json_string_value(json_object_get(op, "path"));

		if (o == NULL || p == NULL || (strcmp(o, "add") != 0 &&
		    strcmp(o, "remove") != 0 && strcmp(o, "replace") != 0))
			test_fail(__FILE__, __LINE__, "op %zu: bad op", i);
		else if (strncmp(p, "/spec/resourceClaims", 20) != 0 &&
		    ((strncmp(p, "/spec/containers/", 17) != 0 &&
		    strncmp(p, "/spec/initContainers/", 21) != 0) ||
		    strstr(p, "/resources") == NULL))
			test_fail(__FILE__, __LINE__, "op %zu: path %s", i, p);
	}
}

/*
 * The operations of p as a JSON array, valid until the next call with other
 * text. The text must parse and be exactly jansson's compact dump of what it
 * parses to (the apiserver and the reply both rely on it), and nops must
 * count the operations.
 */
static json_t *
ops(const struct patch_out *p)
{
	static json_t *tree;
	static char *text;
	json_error_t e;
	char *again;

	if (text != NULL && strcmp(text, p->ops) == 0)
		return tree;
	json_decref(tree);
	free(text);
	text = strdup(p->ops);
	if ((tree = json_loadb(p->ops, p->ops_len, 0, &e)) == NULL) {
		test_fail(__FILE__, __LINE__, "patch text: %s: %s", e.text,
		    p->ops);
		return tree = json_array();
	}
	again = json_dumps(tree, JSON_COMPACT);
	if (again == NULL || strcmp(again, p->ops) != 0 ||
	    strlen(p->ops) != p->ops_len)
		test_fail(__FILE__, __LINE__, "patch text is not compact "
		    "jansson: %s", p->ops);
	if (json_array_size(tree) != p->nops)
		test_fail(__FILE__, __LINE__, "nops %zu, %zu operations",
		    p->nops, json_array_size(tree));
	free(again);
	return tree;
}

/* Check the chart's own claims are all still there, pod and container. */
static void
check_kept(const json_t *before, const json_t *after)
{
	static const char *const lists[] = { "containers", "initContainers" };
	const json_t *bs = json_object_get(before, "spec");
	const json_t *as = json_object_get(after, "spec"), *e, *c;
	size_t i, j;

	json_array_foreach(json_object_get(bs, "resourceClaims"), i, e)
		if (strcmp(json_string_value(json_object_get(e, "name")),
		    RESOLVED_POD_CLAIM) != 0)
			CHECK(json_equal(json_array_get(json_object_get(as,
			    "resourceClaims"), i), e));
	for (size_t l = 0; l < 2; l++)
		json_array_foreach(json_object_get(bs, lists[l]), i, c) {
			const json_t *ac = json_array_get(json_object_get(as,
			    lists[l]), i);
			const json_t *bcl = json_object_get(json_object_get(c,
			    "resources"), "claims");

			json_array_foreach(bcl, j, e)
				CHECK(json_equal(json_array_get(json_object_get(
				    json_object_get(ac, "resources"), "claims"),
				    j), e));
		}
}

/* Whether the init container at index i should reference the claim. */
static int
init_wanted(const struct resolved_pack *r, const json_t *ctr)
{
	const char *name = json_string_value(json_object_get(ctr, "name"));

	return resolved_init_selected(r, name) && !resolved_sidecar(r, name);
}

/*
 * Patch pod under r, apply the patch independently and check everything
 * that must hold for any allowed pod. Returns the patched pod (or NULL).
 */
static json_t *
verify(const json_t *pod, const struct resolved_pack *r,
    struct patch_out **ret)
{
	struct patch_out *p = NULL, *again = NULL;
	json_t *out, *want, *a, *b, *c;
	char err[256] = "";
	size_t i;

	if (patch_build(pod, r, &p, err, sizeof(err)) != 0 || p->deny) {
		test_fail(__FILE__, __LINE__, "patch_build: %s", err);
		patch_out_free(p);
		return NULL;
	}
	check_ops(ops(p));
	if ((out = jp_apply(pod, ops(p), err, sizeof(err))) == NULL) {
		test_fail(__FILE__, __LINE__, "apply: %s", err);
		patch_out_free(p);
		return NULL;
	}
	if (pc_check(out, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "apiserver would reject: %s", err);
	want = r->claim_template[0] ? json_pack("{s:s,s:s}", "name",
	    RESOLVED_POD_CLAIM, "resourceClaimTemplateName", r->claim_template)
	    : json_pack("{s:s,s:s}", "name", RESOLVED_POD_CLAIM,
	    "resourceClaimName", r->claim);
	CHECK(contains(json_object_get(json_object_get(out, "spec"),
	    "resourceClaims"), want));
	json_decref(want);
	json_array_foreach(json_object_get(json_object_get(out, "spec"),
	    "containers"), i, c)
		if (!resolved_sidecar(r, json_string_value(json_object_get(c,
		    "name"))))
			CHECK(refs_gpu(c));
	json_array_foreach(json_object_get(json_object_get(out, "spec"),
	    "initContainers"), i, c)
		if (r->pol.legacy != RESOLVED_LEGACY_TRANSLATE)
			CHECK_INT(refs_gpu(c), init_wanted(r, c));
	check_kept(pod, out);
	a = strip(pod);
	b = strip(out);
	CHECK(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	CHECK(patch_build(out, r, &again, err, sizeof(err)) == 0);
	if (again != NULL)
		CHECK_INT(json_array_size(ops(again)), 0);
	patch_out_free(again);
	if (ret != NULL)
		*ret = p;
	else
		patch_out_free(p);
	return out;
}

/* A fixture patched and verified: the pod, the patched pod, the patch. */
struct patched {
	json_t			*pod;
	json_t			*out;
	struct patch_out	*p;
};

/*
 * Patch pod (owned from now on; NULL: a load failed) under the annotation
 * annot with verify(); false when there is no patched pod to look at.
 */
static bool
patch_pod(struct patched *t, json_t *pod, const char *annot)
{
	struct resolved_pack *r = spec(annot);

	t->pod = pod;
	t->out = NULL;
	t->p = NULL;
	if (pod != NULL)
		t->out = verify(pod, r, &t->p);
	resolved_pack_unref(r);
	return t->out != NULL;
}

/* patch_pod() of tests/fixtures/pods/name. */
static bool
patch_fixture(struct patched *t, const char *name, const char *annot)
{
	return patch_pod(t, fixture(name), annot);
}

/* Free what patch_pod() made. */
static void
patched_free(struct patched *t)
{
	patch_out_free(t->p);
	json_decref(t->out);
	json_decref(t->pod);
}

/* Member i of the array at spec.list of a pod. */
static json_t *
spec_item(const json_t *pod, const char *list, size_t i)
{
	return json_array_get(json_object_get(json_object_get(pod, "spec"),
	    list), i);
}

/* The size of the array at spec.list of a pod. */
static size_t
spec_size(const json_t *pod, const char *list)
{
	return json_array_size(json_object_get(json_object_get(pod, "spec"),
	    list));
}

/* Member name of the patch's operation i. */
static const char *
op_member(const struct patch_out *p, size_t i, const char *name)
{
	return json_string_value(json_object_get(json_array_get(ops(p), i),
	    name));
}

/* A string at a '/'-free member chain of j (NULL-terminated), or NULL. */
static const char *
str_at(const json_t *j, ...)
{
	const char *k;
	va_list ap;

	va_start(ap, j);
	while ((k = va_arg(ap, const char *)) != NULL)
		j = json_object_get(j, k);
	va_end(ap);
	return json_string_value(j);
}

/*
 * Patch tests/fixtures/pods/name under annot: it is denied, with no
 * operation and a message holding each of says (NULL-terminated).
 */
static void
check_denied(const char *name, const char *annot, ...)
{
	struct resolved_pack *r = spec(annot);
	json_t *pod = fixture(name);
	struct patch_out *p = NULL;
	const char *say;
	va_list ap;
	int e;

	REQUIRE(pod != NULL);
	e = patch_build(pod, r, &p, NULL, 0);
	resolved_pack_unref(r);
	REQUIRE(e == 0);
	CHECK(p->deny);
	CHECK_INT(json_array_size(ops(p)), 0);
	va_start(ap, annot);
	while ((say = va_arg(ap, const char *)) != NULL)
		if (strstr(p->message, say) == NULL)
			test_fail(__FILE__, __LINE__, "%s: \"%s\" lacks \"%s\"",
			    name, p->message, say);
	va_end(ap);
	patch_out_free(p);
	json_decref(pod);
}

/* The patched pod has the one pod claim, and nothing was warned of. */
static void
check_plain(const struct patched *t)
{
	CHECK_INT(spec_size(t->out, "resourceClaims"), 1);
	CHECK_INT(t->p->nwarnings, 0);
}

#define SHARED	"{\"claimName\":\"team-a-gpu\"}"
#define SIDECAR_ENVOY "{\"claimTemplateName\":\"gpu-1g10gb\"," \
	"\"sidecarContainers\":[\"envoy\"]"
#define TRANSLATE "{\"claimTemplateName\":\"gpu-1g10gb\"," \
	"\"legacyGPU\":\"translate\"}"
#define ALLOW	"{\"claimTemplateName\":\"gpu-1g10gb\"," \
	"\"legacyGPU\":\"allow\"}"

TEST(no_claims)
{
	struct patched t;

	REQUIRE(patch_fixture(&t, "plain.json", TMPL));
	CHECK_INT(json_array_size(ops(t.p)), 2);
	CHECK_STR(op_member(t.p, 0, "path"), "/spec/resourceClaims");
	CHECK_STR(op_member(t.p, 1, "path"),
	    "/spec/containers/0/resources/claims");
	check_plain(&t);
	patched_free(&t);
}

TEST(shared_claim_mode)
{
	struct patched t;
	const json_t *pc;

	REQUIRE(patch_fixture(&t, "plain.json", SHARED));
	pc = spec_item(t.out, "resourceClaims", 0);
	CHECK_STR(str_at(pc, "resourceClaimName", NULL), "team-a-gpu");
	CHECK(json_object_get(pc, "resourceClaimTemplateName") == NULL);
	patched_free(&t);
}

TEST(existing_pod_and_container_claims)
{
	struct patched t;
	const json_t *cl;

	REQUIRE(patch_fixture(&t, "chart-claims.json", TMPL));
	CHECK_INT(spec_size(t.out, "resourceClaims"), 3);
	cl = json_object_get(json_object_get(spec_item(t.out, "containers",
	    0), "resources"), "claims");
	CHECK_INT(json_array_size(cl), 3);
	CHECK_STR(str_at(json_array_get(cl, 1), "request", NULL), "port0");
	CHECK_STR(op_member(t.p, 0, "path"), "/spec/resourceClaims/-");
	patched_free(&t);
}

TEST(already_patched_pod_gets_nothing)
{
	struct resolved_pack *r = spec(TMPL);
	json_t *pod = fixture("already-patched.json");
	struct patch_out *p = NULL;
	int e;

	REQUIRE(pod != NULL);
	e = patch_build(pod, r, &p, NULL, 0);
	resolved_pack_unref(r);
	REQUIRE(e == 0);
	CHECK(!p->deny);
	CHECK_INT(json_array_size(ops(p)), 0);
	patch_out_free(p);
	json_decref(pod);
}

TEST(foreign_claim_of_our_name_is_replaced)
{
	struct patched t;

	REQUIRE(patch_fixture(&t, "already-patched.json", SHARED));
	CHECK_INT(json_array_size(ops(t.p)), 1);
	CHECK_STR(op_member(t.p, 0, "op"), "replace");
	CHECK_INT(t.p->nwarnings, 1);
	patched_free(&t);
}

TEST(null_claim_lists)
{
	struct patched t;

	CHECK(patch_pod(&t, json_pack("{s:{s:n, s:[{s:s, s:{s:n}}]}}", "spec",
	    "resourceClaims", "containers", "name", "a", "resources",
	    "claims"), TMPL));
	patched_free(&t);
}

TEST(hundred_containers)
{
	struct patched t;
	json_t *pod = fixture("chart-claims.json"), *list;

	REQUIRE(pod != NULL);
	list = json_object_get(json_object_get(pod, "spec"), "containers");
	for (int i = json_array_size(list); i < 100; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		if (i % 3 == 0)
			json_array_append_new(list, json_pack("{s:s}", "name",
			    name));
		else if (i % 3 == 1)
			json_array_append_new(list, json_pack("{s:s,s:{}}",
			    "name", name, "resources"));
		else
			json_array_append_new(list, json_pack("{s:s,s:{s:[{s:s}"
			    "]}}", "name", name, "resources", "claims", "name",
			    "scratch"));
	}
	REQUIRE(json_array_size(list) == 100);
	REQUIRE(patch_pod(&t, pod, TMPL));
	CHECK_INT(json_array_size(ops(t.p)), 101);
	patched_free(&t);
}

TEST(init_containers_by_policy)
{
	static const char *const specs[] = {
		TMPL,
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"initContainers\":\"all\"}",
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"initContainers\":"
		    "[\"warmup\",\"absent\"]}",
	};
	static const int want[3][3] = { { 0, 0, 0 }, { 1, 1, 1 }, { 0, 1, 0 } };

	for (int s = 0; s < 3; s++) {
		struct patched t;

		REQUIRE(patch_fixture(&t, "init.json", specs[s]));
		for (int i = 0; i < 3; i++)
			CHECK_INT(refs_gpu(spec_item(t.out, "initContainers",
			    i)), want[s][i]);
		/* Ephemeral containers never. */
		CHECK(json_equal(json_object_get(json_object_get(t.out,
		    "spec"), "ephemeralContainers"), json_object_get(
		    json_object_get(t.pod, "spec"), "ephemeralContainers")));
		patched_free(&t);
	}
}

/*
 * Sidecars (in either list, native or not) never get the claim; the other
 * containers do as before; without a sidecar list every container does.
 */
TEST(sidecars_get_no_claim)
{
	static const char *const specs[] = {
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"initContainers\":\"all\","
		    "\"sidecarContainers\":[\"istio-init\",\"istio-proxy\","
		    "\"linkerd-proxy\",\"cloud-sql-proxy\"]}",
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"initContainers\":\"all\","
		    "\"sidecarContainers\":\"none\"}",
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"initContainers\":"
		    "[\"istio-init\",\"setup\"],\"sidecarContainers\":"
		    "[\"istio-init\",\"envoy\"]}",
	};
	/* containers serve, istio-proxy, cloud-sql-proxy */
	static const int want_c[3][3] = { { 1, 0, 0 }, { 1, 1, 1 },
	    { 1, 1, 1 } };
	/* init containers istio-init, linkerd-proxy, setup */
	static const int want_i[3][3] = { { 0, 0, 1 }, { 1, 1, 1 },
	    { 0, 0, 1 } };

	for (int s = 0; s < 3; s++) {
		struct patched t;

		REQUIRE(patch_fixture(&t, "sidecars.json", specs[s]));
		for (int i = 0; i < 3; i++) {
			CHECK_INT(refs_gpu(spec_item(t.out, "containers", i)),
			    want_c[s][i]);
			CHECK_INT(refs_gpu(spec_item(t.out, "initContainers",
			    i)), want_i[s][i]);
		}
		/* the pod claim is there either way */
		check_plain(&t);
		patched_free(&t);
	}
}

/*
 * A sidecar asking for a legacy GPU is handled as any container: refused
 * under reject; under translate it loses the request and gets the claim
 * (it asked for a GPU: the tenant's own); under allow it keeps it.
 */
TEST(legacy_in_sidecar)
{
	struct patched t;

	check_denied("legacy-sidecar.json", SIDECAR_ENVOY "}", "\"envoy\"",
	    NULL);
	REQUIRE(patch_fixture(&t, "legacy-sidecar.json", SIDECAR_ENVOY
	    ",\"legacyGPU\":\"translate\"}"));
	CHECK(refs_gpu(spec_item(t.out, "containers", 1)));
	patched_free(&t);
	REQUIRE(patch_fixture(&t, "legacy-sidecar.json", SIDECAR_ENVOY
	    ",\"legacyGPU\":\"allow\"}"));
	CHECK(!refs_gpu(spec_item(t.out, "containers", 1)));
	patched_free(&t);
}

TEST(legacy_reject_names_the_claim)
{
	check_denied("legacy.json", TMPL, "nvidia.com/gpu", "\"kubeplus-gpu\"",
	    "\"gpu-1g10gb\"", "\"cuda\"", NULL);
}

/*
 * A container's resources after the patch: kept where no legacy GPU is
 * asked for, the legacy request dropped under legacyGPU translate (the
 * rest kept), kept under allow (a sidecar too); legacy warns once.
 */
static const struct {
	const char	*fixture;
	const char	*annot;
	size_t		 container;
	const char	*map;		/* limits or requests */
	const char	*key;
	const char	*want;		/* NULL: gone */
	size_t		 nwarnings;
} resources_after[] = {
	{ "no-resources.json", TMPL, 2, "limits", "cpu", "1", 0 },
	{ "legacy.json", TRANSLATE, 0, "limits", "nvidia.com/gpu", NULL, 1 },
	{ "legacy.json", TRANSLATE, 0, "requests", "nvidia.com/gpu", NULL, 1 },
	{ "legacy.json", TRANSLATE, 0, "limits", "memory", "4Gi", 1 },
	{ "legacy.json", ALLOW, 0, "limits", "nvidia.com/gpu", "1", 1 },
	{ "legacy-sidecar.json", SIDECAR_ENVOY ",\"legacyGPU\":\"translate\"}",
	  1, "limits", "nvidia.com/gpu", NULL, 1 },
	{ "legacy-sidecar.json", SIDECAR_ENVOY ",\"legacyGPU\":\"allow\"}",
	  1, "limits", "nvidia.com/gpu", "1", 1 },
};

TEST(container_resources_after_patch)
{
	for (size_t i = 0; i < nitems(resources_after); i++) {
		struct patched t;
		const char *have, *want = resources_after[i].want;

		REQUIRE(patch_fixture(&t, resources_after[i].fixture,
		    resources_after[i].annot));
		have = str_at(spec_item(t.out, "containers",
		    resources_after[i].container), "resources",
		    resources_after[i].map, resources_after[i].key, NULL);
		if (want == NULL ? have != NULL : have == NULL ||
		    strcmp(have, want) != 0)
			test_fail(__FILE__, __LINE__, "case %zu: %s is %s, not "
			    "%s", i, resources_after[i].key, have ? have :
			    "gone", want ? want : "gone");
		CHECK_INT(t.p->nwarnings, resources_after[i].nwarnings);
		patched_free(&t);
	}
}

/*
 * A legacy GPU key far longer than any fixed buffer, with '/', '~', a quote
 * and multi-byte characters: its "remove" path is the whole key, escaped,
 * so the patch applies; the warning stays valid UTF-8 when cut.
 */
TEST(legacy_translate_long_key)
{
	struct buf key = BUF_INIT(0);
	struct patched t;
	json_t *limits, *w;

	buf_puts(&key, "nvidia.com/gpu.");
	for (int i = 0; i < 200; i++)
		buf_puts(&key, i % 3 == 0 ? "/~" : i % 3 == 1 ? "\xc3\xa9" :
		    "\"");
	REQUIRE(patch_pod(&t, json_pack("{s:{s:[{s:s, s:{s:{s:s, s:s}}}]}}",
	    "spec", "containers", "name", "cuda-\xc3\xa9\xc3\xa9\xc3\xa9",
	    "resources", "limits", buf_str(&key), "1", "memory", "1Gi"),
	    TRANSLATE));
	limits = json_object_get(json_object_get(spec_item(t.out,
	    "containers", 0), "resources"), "limits");
	CHECK(json_object_get(limits, buf_str(&key)) == NULL);
	CHECK_STR(str_at(limits, "memory", NULL), "1Gi");
	REQUIRE(t.p->nwarnings == 1);
	w = json_string(t.p->warnings[0]);	/* NULL unless valid UTF-8 */
	CHECK(w != NULL);
	json_decref(w);
	patched_free(&t);
	buf_free(&key);
}

TEST(legacy_in_init_container)
{
	struct patched t;
	const json_t *init;

	check_denied("legacy-init.json", TMPL, "nvidia.com/mig-1g.10gb", NULL);
	/* Translated, the init container relies on the claim instead. */
	REQUIRE(patch_fixture(&t, "legacy-init.json", TRANSLATE));
	init = spec_item(t.out, "initContainers", 0);
	CHECK(refs_gpu(init));
	CHECK_INT(json_object_size(json_object_get(json_object_get(init,
	    "resources"), "limits")), 0);
	patched_free(&t);
}

TEST(malformed_pods)
{
	static const char *const bad[] = {
		"{}",
		"[]",
		"{\"spec\":[]}",
		"{\"spec\":{}}",
		"{\"spec\":{\"containers\":{}}}",
		"{\"spec\":{\"containers\":[1]}}",
		"{\"spec\":{\"containers\":[{\"name\":\"a\",\"resources\":\"x\"}]}}",
		"{\"spec\":{\"containers\":[{\"name\":\"a\",\"resources\":"
		    "{\"claims\":{}}}]}}",
		"{\"spec\":{\"resourceClaims\":{},\"containers\":[{}]}}",
		"{\"spec\":{\"containers\":[{}],\"initContainers\":7}}",
	};
	struct resolved_pack *r = spec(TMPL);
	struct patch_out *p;
	char err[128];

	for (size_t i = 0; i < nitems(bad); i++) {
		json_t *pod = json_loads(bad[i], 0, NULL);

		p = NULL;
		err[0] = '\0';
		if (patch_build(pod, r, &p, err, sizeof(err)) != -EINVAL ||
		    err[0] == '\0')
			test_fail(__FILE__, __LINE__, "accepted %s", bad[i]);
		CHECK(p == NULL);
		json_decref(pod);
	}
	resolved_pack_unref(r);
}

TEST(legacy_names)
{
	CHECK(patch_is_legacy_gpu("nvidia.com/gpu"));
	CHECK(patch_is_legacy_gpu("nvidia.com/gpu.shared"));
	CHECK(patch_is_legacy_gpu("nvidia.com/mig-1g.10gb"));
	CHECK(!patch_is_legacy_gpu("nvidia.com/gpux"));
	CHECK(!patch_is_legacy_gpu("cpu"));
	CHECK(!patch_is_legacy_gpu("amd.com/gpu"));
}

TEST(applier_is_strict)
{
	/* The checker itself must refuse what the apiserver refuses. */
	json_t *doc = json_loads("{\"a\":[1],\"b\":{}}", 0, NULL), *out;
	json_t *bad1 = json_loads("[{\"op\":\"add\",\"path\":\"/x/y\","
	    "\"value\":1}]", 0, NULL);
	json_t *bad2 = json_loads("[{\"op\":\"remove\",\"path\":\"/a/01\"}]", 0,
	    NULL);
	json_t *good = json_loads("[{\"op\":\"add\",\"path\":\"/b/c~1d\","
	    "\"value\":1},{\"op\":\"add\",\"path\":\"/a/-\",\"value\":2}]", 0,
	    NULL);
	json_t *pod = json_loads("{\"spec\":{\"containers\":[{\"resources\":"
	    "{\"claims\":[{\"name\":\"gpu\"}]}}]}}", 0, NULL);
	char err[128];

	CHECK(jp_apply(doc, bad1, err, sizeof(err)) == NULL);
	CHECK(jp_apply(doc, bad2, err, sizeof(err)) == NULL);
	REQUIRE((out = jp_apply(doc, good, err, sizeof(err))) != NULL);
	CHECK(json_integer_value(json_object_get(json_object_get(out, "b"),
	    "c/d")) == 1);
	CHECK_INT(json_array_size(json_object_get(out, "a")), 2);
	CHECK(pc_check(pod, err, sizeof(err)) < 0);
	CHECK(strstr(err, "Not found") != NULL);
	json_decref(out);
	json_decref(doc);
	json_decref(bad1);
	json_decref(bad2);
	json_decref(good);
	json_decref(pod);
}
