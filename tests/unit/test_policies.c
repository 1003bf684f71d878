/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-quota/policies.c: the shipped admission-policy.yaml loads as
 * three policies and three bindings (its ConfigMap skipped); files with
 * other kinds, duplicates or no policy are refused; an object the API
 * holds is "the same" when only the server's defaults and empty members
 * were added, and not when a member was added, changed or removed or a
 * label of the file is gone; the update body carries the resourceVersion.
 * The shipped mutating-policy.yaml loads as one MutatingAdmissionPolicy
 * and its binding, both labelled as kpgpud's, with the mutation kinds and
 * the namespace selector the injection needs; --injection's values,
 * discovery's answer and the managed-by test.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "kpgpud-quota/policies.h"
#include "tests/unit/test.h"

/* Parse s as a policy file; 0 or the error. */
static int
parse(const char *s, struct policies **p, char *err, size_t errlen)
{
	return policies_parse(s, strlen(s), p, err, errlen);
}

TEST(shipped_file)
{
	struct policies *p = NULL;
	char err[512];

	REQUIRE(policies_load(test_srcpath("deploy/base/admission-policy.yaml"),
	    &p, err, sizeof(err)) == 0);
	CHECK_INT(p->n, 6);
	CHECK_INT(p->nskipped, 1);
	CHECK_STR(p->o[0].kind, "ValidatingAdmissionPolicy");
	CHECK_STR(p->o[0].name, "kpgpud-pod-gpu-claim");
	CHECK_STR(p->o[0].item, "/apis/admissionregistration.k8s.io/v1/"
	    "validatingadmissionpolicies/kpgpud-pod-gpu-claim");
	CHECK_STR(p->o[1].kind, "ValidatingAdmissionPolicyBinding");
	CHECK_STR(p->o[1].collection, "/apis/admissionregistration.k8s.io/v1/"
	    "validatingadmissionpolicybindings");
	/* the file's object is the same as itself */
	for (int i = 0; i < p->n; i++)
		CHECK(policies_same(p->o[i].obj, p->o[i].obj, err,
		    sizeof(err)));
	policies_free(p);
}

TEST(shipped_mutating_file)
{
	struct policies *p = NULL;
	json_t *spec, *m;
	char err[512];
	size_t i;
	int jp = 0, ac = 0;

	REQUIRE(policies_load(test_srcpath("deploy/components/policy-injection/"
	    "mutating-policy.yaml"), &p, err, sizeof(err)) == 0);
	CHECK_INT(p->n, 2);
	CHECK_INT(p->nmutating, 2);
	CHECK_STR(p->o[0].kind, "MutatingAdmissionPolicy");
	CHECK(p->o[0].mutating);
	CHECK_STR(p->o[0].item, "/apis/admissionregistration.k8s.io/v1/"
	    "mutatingadmissionpolicies/kpgpud-inject-gpu-claim");
	CHECK_STR(p->o[1].kind, "MutatingAdmissionPolicyBinding");
	CHECK_STR(p->o[1].collection, "/apis/admissionregistration.k8s.io/v1/"
	    "mutatingadmissionpolicybindings");
	CHECK(policies_managed(p->o[0].obj));
	CHECK(policies_managed(p->o[1].obj));
	spec = json_object_get(p->o[0].obj, "spec");
	CHECK_STR(json_string_value(json_object_get(spec, "failurePolicy")),
	    "Fail");
	CHECK_STR(json_string_value(json_object_get(spec,
	    "reinvocationPolicy")), "IfNeeded");
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(json_object_get(spec, "matchConstraints"),
	    "namespaceSelector"), "matchLabels"),
	    "kubeplus.io/gpu-isolation-enabled")), "true");
	CHECK(json_object_get(spec, "paramKind") == NULL);
	/* a name like "on" would be a YAML 1.1 boolean to kubectl */
	json_array_foreach(json_object_get(spec, "variables"), i, m)
		CHECK(json_is_string(json_object_get(m, "name")) &&
		    json_is_string(json_object_get(m, "expression")));
	CHECK(json_array_size(json_object_get(spec, "variables")) >= 10);
	json_array_foreach(json_object_get(spec, "mutations"), i, m) {
		const char *t = json_string_value(json_object_get(m,
		    "patchType"));

		jp += t != NULL && strcmp(t, "JSONPatch") == 0;
		ac += t != NULL && strcmp(t, "ApplyConfiguration") == 0;
	}
	CHECK_INT(jp, 5);
	CHECK_INT(ac, 2);
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    p->o[1].obj, "spec"), "policyName")), "kpgpud-inject-gpu-claim");
	for (int j = 0; j < p->n; j++)
		CHECK(policies_same(p->o[j].obj, p->o[j].obj, err,
		    sizeof(err)));
	policies_free(p);
}

TEST(injection_modes)
{
	enum policies_injection m = POLICIES_INJECT_POLICY;
	json_t *d;

	CHECK_INT(policies_injection_parse("webhook", &m), 0);
	CHECK_INT(m, POLICIES_INJECT_WEBHOOK);
	CHECK_INT(policies_injection_parse("auto", &m), 0);
	CHECK_INT(m, POLICIES_INJECT_AUTO);
	CHECK_INT(policies_injection_parse("policy", &m), 0);
	CHECK_INT(m, POLICIES_INJECT_POLICY);
	CHECK_INT(policies_injection_parse("Policy", &m), -EINVAL);
	CHECK_INT(policies_injection_parse(NULL, &m), -EINVAL);
	CHECK_INT(m, POLICIES_INJECT_POLICY);
	CHECK_STR(policies_injection_name(POLICIES_INJECT_AUTO), "auto");
	CHECK_STR(policies_injection_name(POLICIES_INJECT_WEBHOOK), "webhook");

	/* 1.36+: listed; 1.34 (beta off): only the validating kinds */
	d = json_loads("{\"kind\":\"APIResourceList\",\"resources\":["
	    "{\"name\":\"validatingadmissionpolicies\"},"
	    "{\"name\":\"mutatingadmissionpolicies\"},"
	    "{\"name\":\"mutatingadmissionpolicies/status\"}]}", 0, NULL);
	REQUIRE(d != NULL);
	CHECK(policies_serves_map(d));
	json_decref(d);
	d = json_loads("{\"resources\":[{\"name\":"
	    "\"validatingadmissionpolicies\"},{\"name\":"
	    "\"mutatingadmissionpolicies/status\"}]}", 0, NULL);
	REQUIRE(d != NULL);
	CHECK(!policies_serves_map(d));
	json_decref(d);
	CHECK(!policies_serves_map(NULL));

	d = json_loads("{\"metadata\":{\"labels\":{"
	    "\"app.kubernetes.io/managed-by\":\"helm\"}}}", 0, NULL);
	REQUIRE(d != NULL);
	CHECK(!policies_managed(d));
	json_decref(d);
	CHECK(!policies_managed(NULL));
}

TEST(refused_files)
{
	static const struct {
		const char	*in;
		const char	*why;
	} bad[] = {
		{ "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
		  "spec: {}\n", "Deployment is not an admission policy" },
		{ "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		  "no admission policy" },
		{ "apiVersion: admissionregistration.k8s.io/v1\nkind: "
		  "ValidatingAdmissionPolicy\nmetadata: {name: Bad_Name}\n"
		  "spec: {}\n", "valid metadata.name" },
		{ "apiVersion: admissionregistration.k8s.io/v1\nkind: "
		  "ValidatingAdmissionPolicy\nmetadata: {name: a}\n",
		  "no spec" },
		{ "apiVersion: admissionregistration.k8s.io/v1\nkind: "
		  "ValidatingAdmissionPolicy\nmetadata: {name: a}\nspec: {}\n"
		  "---\napiVersion: admissionregistration.k8s.io/v1\nkind: "
		  "ValidatingAdmissionPolicy\nmetadata: {name: a}\nspec: {}\n",
		  "appears twice" },
		{ "apiVersion: admissionregistration.k8s.io/v1\nkind: "
		  "ValidatingAdmissionPolicy\nmetadata: {name: a, labels: "
		  "{x: 1}}\nspec: {}\n", "must be strings" },
		{ "- 1\n", "not a Kubernetes object" },
	};
	struct policies *p = NULL;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK_INT(parse(bad[i].in, &p, err, sizeof(err)), -EINVAL);
		if (strstr(err, bad[i].why) == NULL)
			test_fail(__FILE__, __LINE__, "case %zu: \"%s\" lacks "
			    "\"%s\"", i, err, bad[i].why);
	}
	CHECK(p == NULL);
}

#define WANT "{\"apiVersion\":\"admissionregistration.k8s.io/v1\"," \
	"\"kind\":\"ValidatingAdmissionPolicy\",\"metadata\":{\"name\":\"p\"," \
	"\"labels\":{\"app\":\"k\"}},\"spec\":{\"failurePolicy\":\"Fail\"," \
	"\"matchConstraints\":{\"resourceRules\":[{\"apiGroups\":[\"\"]," \
	"\"resources\":[\"pods\"]}]},\"validations\":[{\"expression\":\"a\"}]}}"

/* Whether have (JSON text) is the same as WANT; why the first reason. */
static bool
same(const char *have, char *why, size_t len)
{
	json_t *w = json_loads(WANT, 0, NULL), *h = json_loads(have, 0, NULL);
	bool r;

	if (w == NULL || h == NULL)
		test_fail(__FILE__, __LINE__, "bad JSON: %s", have);
	r = policies_same(w, h, why, len);
	json_decref(w);
	json_decref(h);
	return r;
}

/* WANT's metadata, its spec's start, resourceRules and the rest. */
#define WANT_META "{\"metadata\":{\"name\":\"p\",\"labels\":{\"app\":\"k\"}},"
#define WANT_SPEC "\"spec\":{\"failurePolicy\":\"Fail\",\"matchConstraints\":{"
#define WANT_RULES "\"resourceRules\":[{\"apiGroups\":[\"\"]," \
	"\"resources\":[\"pods\"]}]"
#define WANT_VALIDATIONS "\"validations\":[{\"expression\":\"a\"}]}}"

/* Objects that differ from WANT in a member, and the reason given. */
static const struct {
	const char *have;
	const char *why;
} changed[] = {
	/* an exclusion added */
	{ WANT_META WANT_SPEC WANT_RULES
	  ",\"excludeResourceRules\":[{\"resources\":[\"pods\"]}]},"
	  WANT_VALIDATIONS, "spec.matchConstraints.excludeResourceRules added" },
	/* a default value that is not the default */
	{ WANT_META "\"spec\":{\"failurePolicy\":\"Ignore\","
	  "\"matchConstraints\":{" WANT_RULES "}," WANT_VALIDATIONS,
	  "spec.failurePolicy differs" },
	{ WANT_META WANT_SPEC "\"matchPolicy\":\"Exact\"," WANT_RULES "},"
	  WANT_VALIDATIONS, "spec.matchConstraints.matchPolicy added" },
	/* a validation replaced, one removed, a label gone */
	{ WANT_META WANT_SPEC WANT_RULES
	  "},\"validations\":[{\"expression\":\"true\"}]}}",
	  "spec.validations[0].expression differs" },
	{ WANT_META WANT_SPEC WANT_RULES "},\"validations\":[]}}",
	  "spec.validations has 0 entries, not 1" },
	{ "{\"metadata\":{\"name\":\"p\"}," WANT_SPEC WANT_RULES "},"
	  WANT_VALIDATIONS, "label app differs" },
	{ "{\"metadata\":{\"name\":\"p\"}}", "spec differs" },
};

TEST(same_but_for_server_defaults)
{
	char why[POLICIES_WHY_MAX];

	/* defaults, empty members and extra metadata are not changes */
	CHECK(same("{\"metadata\":{\"name\":\"p\",\"uid\":\"u\",\"labels\":"
	    "{\"app\":\"k\",\"x\":\"y\"},\"resourceVersion\":\"7\"},\"spec\":"
	    "{\"failurePolicy\":\"Fail\",\"matchConstraints\":{\"matchPolicy\":"
	    "\"Equivalent\",\"namespaceSelector\":{},\"objectSelector\":{},"
	    "\"resourceRules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],"
	    "\"scope\":\"*\"}]},\"validations\":[{\"expression\":\"a\"}],"
	    "\"auditAnnotations\":[]}}", why, sizeof(why)));
	for (size_t i = 0; i < nitems(changed); i++) {
		why[0] = '\0';
		CHECK_CASE(!same(changed[i].have, why, sizeof(why)),
		    changed[i].have);
		CHECK_CASE(strstr(why, changed[i].why) != NULL,
		    changed[i].have);
	}
}

TEST(bodies)
{
	json_t *w = json_loads(WANT, 0, NULL);
	json_t *h = json_loads("{\"metadata\":{\"name\":\"p\",\"uid\":\"u\","
	    "\"resourceVersion\":\"42\"},\"spec\":{}}", 0, NULL), *b;
	char *s;

	REQUIRE(w != NULL && h != NULL);
	REQUIRE((s = policies_update_body(w, h)) != NULL);
	b = json_loads(s, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "metadata"), "resourceVersion")), "42");
	CHECK(json_equal(json_object_get(b, "spec"), json_object_get(w,
	    "spec")));
	json_decref(b);
	free(s);
	REQUIRE((s = policies_create_body(w)) != NULL);
	CHECK(strstr(s, "resourceVersion") == NULL);
	free(s);
	json_decref(w);
	json_decref(h);
}
