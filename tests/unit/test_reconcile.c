/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reconcile's pure diff: from nothing it creates DeviceClass, template,
 * quota and only then labels the Namespace; in sync it writes nothing; it
 * touches only kpgpud's quota keys (others survive, old ones of ours are
 * removed); its keys live in its own quota kpgpud-gpu and move out of
 * KubePlus's (or an old-named one of ours) only once its own is in force; a drifted immutable spec is replaced; stale owned objects go;
 * cleanup runs in reverse and deletes a quota only when kpgpud created it
 * and nothing else is in it; unused DeviceClasses are collected; events get
 * deterministic names. Creates of kpgpud's objects are verified on 409; an
 * object of kpgpud's name that is not kpgpud's (label, owner reference,
 * spec) is reported and deleted with a uid precondition, or waited for when
 * terminating; decoys with only the managed-by label are left alone; keys
 * of classes added and removed follow the class list. Quota comes first:
 * nothing else until its status.hard shows the plan (a lowered maxDevices
 * included). A shared claim's spec change creates a new claim with room
 * in the quota for the old one while it drains, moves the Namespace to it
 * and deletes the old one without waiting; the room goes with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jsonw.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-quota/reconcile.h"
#include "tests/unit/test.h"

/* The instance "Agent/t1" (uid u-1) with annotation (NULL: none). */
static void
mkinstance(struct plan_instance *in, const char *annotation)
{
	memset(in, 0, sizeof(*in));
	snprintf(in->api_version, sizeof(in->api_version), "kubeplus.io/v1");
	snprintf(in->kind, sizeof(in->kind), "Agent");
	snprintf(in->name, sizeof(in->name), "t1");
	snprintf(in->uid, sizeof(in->uid), "u-1");
	if (annotation != NULL) {
		in->has_annotation = true;
		snprintf(in->annotation, sizeof(in->annotation), "%s",
		    annotation);
		in->annotation_len = strlen(annotation);
	}
}

/* A plan for the instance with the given annotation and configuration. */
static struct plan *
mkplan_with(const char *annotation, const struct plan_config *cfg)
{
	struct plan_instance *in = calloc(1, sizeof(*in));
	struct plan *p = NULL;
	char err[256];

	if (in == NULL)
		return NULL;
	mkinstance(in, annotation);
	if (plan_build(in, cfg, &p, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "plan: %s", err);
	free(in);
	return p;
}

/* A plan for the instance with the given annotation. */
static struct plan *
mkplan(const char *annotation)
{
	static const struct plan_config defaults;

	return mkplan_with(annotation, &defaults);
}

/* An observed namespace t1 that exists and holds nothing of ours. */
static void
mkobs(struct rc_observed *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->ns, sizeof(o->ns), "t1");
	o->ns_exists = true;
	o->quotas = json_array();
}

/* Release what mkobs and the tests put into o. */
static void
obs_free(struct rc_observed *o)
{
	for (int i = 0; i < o->nowned; i++)
		json_decref(o->owned[i].data);
	json_decref(o->planned.data);
	json_decref(o->device_class);
	json_decref(o->quotas);
	json_decref(o->ns_annots);
}

/* The quota controller caught up: every quota's status.hard = spec.hard. */
static void
enforce(struct rc_observed *o)
{
	size_t i;
	json_t *q;

	json_array_foreach(o->quotas, i, q)
		json_object_set_new(q, "status", json_pack("{s:o}", "hard",
		    json_deep_copy(json_object_get(json_object_get(q,
		    "spec"), "hard"))));
}

/* The plan's quota as kpgpud-quota created it, and enforced. */
static void
add_quota(struct rc_observed *o, const struct plan *p)
{
	char keys[2048] = "";

	for (int i = 0; i < p->nkeys; i++)
		snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys),
		    "%s%s", i ? "," : "", p->keys[i].name);
	json_array_append_new(o->quotas, json_pack("{s:{s:s, s:{s:s}, "
	    "s:{s:s}}, s:{s:o}}", "metadata", "name", p->quota_name,
	    "labels", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, "annotations",
	    PLAN_QUOTA_KEYS_ANNOT, keys, "spec", "hard", plan_quota_hard(p)));
	enforce(o);
}

/* A quota of that name holding keys (of kpgpud's) and hard (stolen). */
static json_t *
quota_json(const char *name, const char *keys, json_t *hard)
{
	return json_pack("{s:{s:s, s:{s:s}}, s:{s:o}}", "metadata", "name",
	    name, "annotations", PLAN_QUOTA_KEYS_ANNOT, keys, "spec", "hard",
	    hard);
}

/* Make o look exactly like what p wants. */
static void
obs_from_plan(struct rc_observed *o, const struct plan *p)
{
	json_t *m = json_object_get(p->claim, "metadata");
	char keys[2048] = "";

	for (int i = 0; i < p->nkeys; i++)
		snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys),
		    "%s%s", i ? "," : "", p->keys[i].name);
	if (p->device_class != NULL)
		o->device_class = json_pack("{s:o, s:o}", "labels", json_deep_copy(
		    json_object_get(json_object_get(p->device_class,
		    "metadata"), "labels")), "spec", json_deep_copy(
		    json_object_get(p->device_class, "spec")));
	snprintf(o->owned[0].kind, sizeof(o->owned[0].kind), "%s",
	    json_string_value(json_object_get(p->claim, "kind")));
	snprintf(o->owned[0].name, sizeof(o->owned[0].name), "%s",
	    p->claim_name);
	o->owned[0].data = json_pack("{s:o, s:o, s:o}", "labels",
	    json_deep_copy(json_object_get(m, "labels")), "annotations",
	    json_deep_copy(json_object_get(m, "annotations")), "spec",
	    json_deep_copy(json_object_get(p->claim, "spec")));
	o->nowned = 1;
	/* looked up by name too (the cleanup walk has it in owned[]) */
	o->planned = o->owned[0];
	o->planned.data = json_deep_copy(o->owned[0].data);
	o->has_planned = true;
	json_array_append_new(o->quotas, quota_json(p->quota_name, keys,
	    plan_quota_hard(p)));
	o->ns_isolated = true;
	o->ns_resolved = p->resolved;
	o->ns_annots = plan_ns_annotations(p);
	enforce(o);
}

/* Check action i: method and path. */
static void
check_action(const struct rc_actions *a, int i, const char *method,
    const char *path)
{
	if (i >= a->n) {
		test_fail(__FILE__, __LINE__, "no action %d (%d)", i, a->n);
		return;
	}
	CHECK_STR(a->a[i].method, method);
	CHECK_STR(a->a[i].path, path);
}

/* A plan, what is observed of namespace t1, and the actions of a diff. */
struct rc_fx {
	struct plan		*p;
	struct rc_observed	 o;
	struct rc_actions	*a;
};

/*
 * Set t up around plan p (owned by t from now on): t1 holds nothing of
 * ours, or (in_sync) exactly what p wants. False if p or an allocation
 * failed.
 */
static bool
rc_setup(struct rc_fx *t, struct plan *p, bool in_sync)
{
	t->p = p;
	t->a = calloc(1, sizeof(*t->a));
	mkobs(&t->o);
	if (p != NULL && in_sync)
		obs_from_plan(&t->o, p);
	return p != NULL && t->a != NULL;
}

/*
 * Diff plan p (NULL: the cleanup) against t's observation, afresh;
 * whether it worked and made n actions (n < 0: any number).
 */
static bool
rc_diff(struct rc_fx *t, const struct plan *p, int n)
{
	reconcile_actions_clear(t->a);
	if (reconcile_diff(p, &t->o, t->a) != 0)
		return false;
	if (n >= 0 && t->a->n != n) {
		test_fail(__FILE__, __LINE__, "%d actions, not %d", t->a->n, n);
		return false;
	}
	return true;
}

/* Free what rc_setup() and the test made. */
static void
rc_done(struct rc_fx *t)
{
	reconcile_actions_clear(t->a);
	obs_free(&t->o);
	free(t->a);
	plan_free(t->p);
}

#define EXCL3	"{\"sharing\":\"exclusive\",\"maxDevices\":3}"
#define MIG	"{\"sharing\":\"mig\",\"migProfile\":\"1g.10gb\"," \
		"\"maxDevices\":2}"

TEST(from_nothing_in_order)
{
	struct rc_fx t;
	json_t *b, *an;

	REQUIRE(rc_setup(&t, mkplan(MIG), false));
	REQUIRE(rc_diff(&t, t.p, -1));
	/* class and quota; nothing else until status.hard shows the quota */
	CHECK_INT(t.a->n, 2);
	CHECK(t.a->quota_pending);
	CHECK(t.a->wait);
	check_action(t.a, 0, "POST", "/apis/resource.k8s.io/v1/deviceclasses");
	/* a 409 is never success: the object of the name is read */
	CHECK_INT(t.a->a[0].also_ok, 0);
	CHECK_STR(t.a->a[0].verify_kind, "DeviceClass");
	CHECK_STR(t.a->a[0].item, "/apis/resource.k8s.io/v1/deviceclasses/"
	    "kpgpud-mig-1g.10gb");
	check_action(t.a, 1, "POST", "/api/v1/namespaces/t1/resourcequotas");
	b = json_loads(t.a->a[1].body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(b, "spec"), "hard"),
	    "count/resourceclaims.resource.k8s.io")), "2");
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(b, "metadata"), "labels"),
	    "app.kubernetes.io/managed-by")), "kpgpud");
	json_decref(b);
	/* created, but the quota controller has not written its status */
	add_quota(&t.o, t.p);
	json_object_del(json_array_get(t.o.quotas, 0), "status");
	REQUIRE(rc_diff(&t, t.p, 1));
	CHECK(t.a->quota_pending);
	/* a status.hard with a lower value is not the plan either */
	enforce(&t.o);
	json_object_set_new(json_object_get(json_object_get(json_array_get(
	    t.o.quotas, 0), "status"), "hard"),
	    "count/resourceclaims.resource.k8s.io", json_string("1"));
	REQUIRE(rc_diff(&t, t.p, -1));
	CHECK(t.a->quota_pending);
	/* enforced: template, then the Namespace last */
	enforce(&t.o);
	REQUIRE(rc_diff(&t, t.p, -1));
	CHECK(!t.a->quota_pending);
	CHECK_INT(t.a->n, 3);
	check_action(t.a, 0, "POST", "/apis/resource.k8s.io/v1/deviceclasses");
	CHECK_STR(t.a->a[1].verify_kind, "ResourceClaimTemplate");
	CHECK_STR(t.a->a[1].item, "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaimtemplates/agent-t1-gpu");
	check_action(t.a, 1, "POST", "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaimtemplates");
	check_action(t.a, 2, "PATCH", "/api/v1/namespaces/t1");
	CHECK_STR(t.a->a[2].content_type, RC_MERGE);
	b = json_loads(t.a->a[2].body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(b, "metadata"), "labels"), RESOLVED_LABEL)),
	    "true");
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(b, "metadata"), "annotations"),
	    RESOLVED_ANNOTATION)), t.p->resolved);
	/* the plain annotations the admission policy reads, same patch */
	an = json_object_get(json_object_get(b, "metadata"), "annotations");
	CHECK_STR(json_string_value(json_object_get(an,
	    PLAN_NS_TEMPLATE_ANNOT)), "agent-t1-gpu");
	CHECK(json_is_null(json_object_get(an, PLAN_NS_CLAIM_ANNOT)));
	CHECK_STR(json_string_value(json_object_get(an, PLAN_NS_CLASS_ANNOT)),
	    "kpgpud-mig-1g.10gb");
	CHECK_STR(json_string_value(json_object_get(an, PLAN_NS_MAX_ANNOT)),
	    "2");
	CHECK_STR(json_string_value(json_object_get(an, PLAN_NS_INIT_ANNOT)),
	    "none");
	json_decref(b);
	rc_done(&t);
}

TEST(in_sync_writes_nothing)
{
	struct rc_fx t;

	REQUIRE(rc_setup(&t, mkplan(MIG), true));
	REQUIRE(rc_diff(&t, t.p, 0));
	/* empty defaulted fields on the server side do not count as drift */
	json_object_set_new(json_object_get(t.o.planned.data, "spec"),
	    "extra", json_false());
	REQUIRE(rc_diff(&t, t.p, 0));
	CHECK_INT(t.a->nimpostors, 0);
	/* a Namespace without a plain annotation (or with a stale one) */
	json_object_del(t.o.ns_annots, PLAN_NS_MAX_ANNOT);
	REQUIRE(rc_diff(&t, t.p, 1));
	check_action(t.a, 0, "PATCH", "/api/v1/namespaces/t1");
	json_object_set_new(t.o.ns_annots, PLAN_NS_MAX_ANNOT, json_string("2"));
	json_object_set_new(t.o.ns_annots, PLAN_NS_CLAIM_ANNOT,
	    json_string("x"));
	REQUIRE(rc_diff(&t, t.p, 1));
	rc_done(&t);
}

TEST(only_our_quota_keys)
{
	struct rc_fx t;
	json_t *b, *hard, *own;

	REQUIRE(rc_setup(&t, mkplan(EXCL3), false));
	CHECK_STR(t.p->quota_name, "kpgpud-gpu");
	/* KubePlus's quota, with its own keys and an old key of ours */
	json_array_append_new(t.o.quotas, json_pack("{s:{s:s, s:{s:s}}, "
	    "s:{s:{s:s, s:s, s:s}}}", "metadata", "name", "agent-t1",
	    "annotations", PLAN_QUOTA_KEYS_ANNOT,
	    "kpgpud-mig-1g.10gb.deviceclass.resource.k8s.io/devices", "spec",
	    "hard", "requests.cpu", "2", "limits.memory", "4Gi",
	    "kpgpud-mig-1g.10gb.deviceclass.resource.k8s.io/devices", "1"));
	/* first our own quota; KubePlus's keeps our old key meanwhile */
	REQUIRE(rc_diff(&t, t.p, -1));
	/* ours only, and nothing else until its status.hard shows it */
	REQUIRE(t.a->n == 1);
	CHECK(t.a->quota_pending);
	check_action(t.a, 0, "POST", "/api/v1/namespaces/t1/resourcequotas");
	b = json_loads(t.a->a[0].body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "metadata"), "name")), "kpgpud-gpu");
	hard = json_object_get(json_object_get(b, "spec"), "hard");
	CHECK_INT(json_object_size(hard), 2);
	CHECK_STR(json_string_value(json_object_get(hard,
	    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices")), "3");
	json_decref(b);
	CHECK(t.a->wait);
	/* ours exists, not yet in status.hard: still nothing released */
	own = json_pack("{s:{s:s, s:{s:s}, s:{s:s}}, s:{s:o}}", "metadata",
	    "name", "kpgpud-gpu", "labels", PLAN_MANAGED_BY_KEY,
	    PLAN_MANAGED_BY, "annotations", PLAN_QUOTA_KEYS_ANNOT,
	    "count/resourceclaims.resource.k8s.io,"
	    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "spec",
	    "hard", plan_quota_hard(t.p));
	json_array_append_new(t.o.quotas, own);
	REQUIRE(rc_diff(&t, t.p, 0));
	CHECK(t.a->wait);
	/* in force: template, Namespace, then our key leaves KubePlus's */
	json_object_set_new(own, "status", json_pack("{s:o}", "hard",
	    plan_quota_hard(t.p)));
	CHECK(reconcile_quota_in_force(t.p, own));
	REQUIRE(rc_diff(&t, t.p, 3));
	CHECK(!t.a->wait);
	check_action(t.a, 0, "POST", "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaimtemplates");
	check_action(t.a, 1, "PATCH", "/api/v1/namespaces/t1");
	check_action(t.a, 2, "PATCH", "/api/v1/namespaces/t1/resourcequotas/"
	    "agent-t1");
	CHECK_STR(t.a->a[2].content_type, RC_MERGE);
	b = json_loads(t.a->a[2].body, 0, NULL);
	hard = json_object_get(json_object_get(b, "spec"), "hard");
	CHECK_INT(json_object_size(hard), 1);
	CHECK(json_is_null(json_object_get(hard, "kpgpud-mig-1g.10gb."
	    "deviceclass.resource.k8s.io/devices")));
	CHECK(json_is_null(json_object_get(json_object_get(json_object_get(
	    b, "metadata"), "annotations"), PLAN_QUOTA_KEYS_ANNOT)));
	CHECK(json_object_get(json_object_get(b, "metadata"), "labels") ==
	    NULL);
	json_decref(b);
	/* a limit not yet in force (status.hard at another value) waits */
	json_object_set_new(json_object_get(json_object_get(own, "status"),
	    "hard"), "count/resourceclaims.resource.k8s.io",
	    json_string("5"));
	CHECK(!reconcile_quota_in_force(t.p, own));
	rc_done(&t);
}

TEST(old_quota_name_moved)
{
	struct rc_fx t;

	REQUIRE(rc_setup(&t, mkplan(EXCL3), false));
	/* an older kpgpud's quota under KubePlus's name, only our keys */
	json_array_append_new(t.o.quotas, json_pack("{s:{s:s, s:{s:s}, "
	    "s:{s:s}}, s:{s:o}}", "metadata", "name", "agent-t1", "labels",
	    PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, "annotations",
	    PLAN_QUOTA_KEYS_ANNOT, "count/resourceclaims.resource.k8s.io,"
	    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "spec",
	    "hard", plan_quota_hard(t.p)));
	json_array_append_new(t.o.quotas, json_pack("{s:{s:s, s:{s:s}, "
	    "s:{s:s}}, s:{s:o}, s:{s:o}}", "metadata", "name", "kpgpud-gpu",
	    "labels", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, "annotations",
	    PLAN_QUOTA_KEYS_ANNOT, "count/resourceclaims.resource.k8s.io,"
	    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices", "spec",
	    "hard", plan_quota_hard(t.p), "status", "hard",
	    plan_quota_hard(t.p)));
	REQUIRE(rc_diff(&t, t.p, 3));
	check_action(t.a, 2, "DELETE", "/api/v1/namespaces/t1/resourcequotas/"
	    "agent-t1");
	rc_done(&t);
}

TEST(drift_replaced_and_stale_removed)
{
	struct rc_fx t;
	json_t *ex;

	REQUIRE(rc_setup(&t, mkplan(MIG), true));
	/* someone edited the template's count and the class's selector */
	ex = json_object_get(json_array_get(json_object_get(json_object_get(
	    json_object_get(json_object_get(t.o.planned.data, "spec"), "spec"),
	    "devices"), "requests"), 0), "exactly");
	REQUIRE(ex != NULL);
	json_object_set_new(ex, "count", json_integer(5));
	json_object_set_new(json_object_get(t.o.device_class, "spec"),
	    "selectors", json_array());
	/* and an old shared claim of ours is still there, and a decoy */
	snprintf(t.o.owned[1].kind, sizeof(t.o.owned[1].kind), "ResourceClaim");
	snprintf(t.o.owned[1].name, sizeof(t.o.owned[1].name), "old-gpu");
	t.o.owned[1].data = json_pack("{s:{s:s, s:s}}", "labels",
	    PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, PLAN_INSTANCE_LABEL,
	    "agent-t0");
	snprintf(t.o.owned[2].kind, sizeof(t.o.owned[2].kind), "ResourceClaim");
	snprintf(t.o.owned[2].name, sizeof(t.o.owned[2].name), "decoy");
	t.o.owned[2].data = json_pack("{s:{s:s}}", "labels",
	    PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY);
	t.o.nowned = 3;
	REQUIRE(rc_diff(&t, t.p, -1));
	/* kpgpud's own, an older plan's: replaced, not an impostor */
	CHECK_INT(t.a->nimpostors, 0);
	REQUIRE(t.a->n == 4);
	check_action(t.a, 0, "PATCH", "/apis/resource.k8s.io/v1/deviceclasses/"
	    "kpgpud-mig-1g.10gb");
	check_action(t.a, 1, "DELETE", "/apis/resource.k8s.io/v1/namespaces/"
	    "t1/resourceclaimtemplates/agent-t1-gpu");
	check_action(t.a, 2, "POST", "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaimtemplates");
	CHECK_INT(t.a->a[2].also_ok, 0);
	check_action(t.a, 3, "DELETE", "/apis/resource.k8s.io/v1/namespaces/"
	    "t1/resourceclaims/old-gpu");
	rc_done(&t);
}

TEST(cleanup_in_reverse)
{
	struct rc_fx t;
	json_t *b, *q;

	REQUIRE(rc_setup(&t, mkplan(MIG), true));
	/* the plan's quota also carries KubePlus's keys */
	q = json_array_get(t.o.quotas, 0);
	json_object_set_new(json_object_get(json_object_get(q, "spec"),
	    "hard"), "requests.cpu", json_string("2"));
	REQUIRE(rc_diff(&t, NULL, 3));
	check_action(t.a, 0, "PATCH", "/api/v1/namespaces/t1");
	b = json_loads(t.a->a[0].body, 0, NULL);
	CHECK(json_is_null(json_object_get(json_object_get(json_object_get(b,
	    "metadata"), "labels"), RESOLVED_LABEL)));
	for (int i = 0; plan_ns_annotation_keys[i] != NULL; i++)
		CHECK(json_is_null(json_object_get(json_object_get(
		    json_object_get(b, "metadata"), "annotations"),
		    plan_ns_annotation_keys[i])));
	json_decref(b);
	check_action(t.a, 1, "PATCH", "/api/v1/namespaces/t1/resourcequotas/"
	    "kpgpud-gpu");
	b = json_loads(t.a->a[1].body, 0, NULL);
	CHECK_INT(json_object_size(json_object_get(json_object_get(b, "spec"),
	    "hard")), 2);
	CHECK(json_object_get(json_object_get(json_object_get(b, "spec"),
	    "hard"), "requests.cpu") == NULL);
	json_decref(b);
	check_action(t.a, 2, "DELETE", "/apis/resource.k8s.io/v1/namespaces/"
	    "t1/resourceclaimtemplates/agent-t1-gpu");

	/* a quota kpgpud created, holding only our keys: deleted */
	json_object_del(json_object_get(json_object_get(q, "spec"), "hard"),
	    "requests.cpu");
	json_object_set_new(json_object_get(q, "metadata"), "labels",
	    json_pack("{s:s}", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY));
	REQUIRE(rc_diff(&t, NULL, 3));
	check_action(t.a, 1, "DELETE", "/api/v1/namespaces/t1/resourcequotas/"
	    "kpgpud-gpu");
	rc_done(&t);
}

TEST(missing_or_terminating_namespace)
{
	struct rc_fx t;

	REQUIRE(rc_setup(&t, mkplan(MIG), false));
	t.o.ns_exists = false;
	REQUIRE(rc_diff(&t, t.p, 0));
	t.o.ns_exists = true;
	t.o.ns_terminating = true;
	REQUIRE(rc_diff(&t, t.p, 0));
	REQUIRE(rc_diff(&t, NULL, 0));
	rc_done(&t);
}

TEST(unused_classes_collected)
{
	const char *names[] = { "kpgpud-mig-1g.10gb", "kpgpud-mig-2g.20gb",
	    "kpgpud-mig-3g.40gb" };
	const char *used[] = { "kpgpud-mig-2g.20gb" };
	struct rc_actions *a = calloc(1, sizeof(*a));

	REQUIRE(a != NULL);
	REQUIRE(reconcile_gc_classes(names, 3, used, 1, a) == 0);
	REQUIRE(a->n == 2);
	check_action(a, 0, "DELETE", "/apis/resource.k8s.io/v1/deviceclasses/"
	    "kpgpud-mig-1g.10gb");
	check_action(a, 1, "DELETE", "/apis/resource.k8s.io/v1/deviceclasses/"
	    "kpgpud-mig-3g.40gb");
	CHECK_INT(a->a[0].also_ok, 404);
	free(a);
}

TEST(event_names_are_deterministic)
{
	struct plan_instance in;
	struct rc_action e1, e2, e3, e4;
	json_t *b;

	mkinstance(&in, NULL);
	snprintf(in.namespace, sizeof(in.namespace), "default");
	REQUIRE(reconcile_event(&in, "5", NULL, "InvalidGPUIsolation", "bad",
	    0, &e1) == 0);
	REQUIRE(reconcile_event(&in, "5", NULL, "InvalidGPUIsolation", "bad",
	    9999, &e2) == 0);
	REQUIRE(reconcile_event(&in, "6", NULL, "InvalidGPUIsolation", "bad",
	    0, &e3) == 0);
	REQUIRE(reconcile_event(&in, "6", "Normal", "ExperimentalHybridSharing",
	    "note", 0, &e4) == 0);
	CHECK_STR(e1.path, "/api/v1/namespaces/default/events");
	CHECK_INT(e1.also_ok, 409);
	b = json_loads(e1.body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(b, "type")), "Warning");
	CHECK_STR(json_string_value(json_object_get(b, "reason")),
	    "InvalidGPUIsolation");
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "involvedObject"), "kind")), "Agent");
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "involvedObject"), "uid")), "u-1");
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "involvedObject"), "resourceVersion")), "5");
	CHECK(strncmp(json_string_value(json_object_get(json_object_get(b,
	    "metadata"), "name")), "t1.", 3) == 0);
	json_decref(b);
	/* same report, same name; a new resourceVersion, a new event */
	CHECK(strstr(e2.body, strstr(e1.body, "\"name\":\"t1.")) != NULL);
	CHECK(strstr(e3.body, strstr(e1.body, "\"name\":\"t1.")) == NULL);
	free(e1.body);
	free(e2.body);
	free(e3.body);
	/* a notice is a Normal Event */
	b = json_loads(e4.body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(b, "type")), "Normal");
	json_decref(b);
	free(e4.body);
}

TEST(json_subset)
{
	json_t *a = json_loads("{\"x\":[1,{\"y\":2}],\"z\":\"s\"}", 0, NULL);
	json_t *b = json_loads("{\"x\":[1,{\"y\":2,\"w\":3}],\"z\":\"s\","
	    "\"q\":1}", 0, NULL);
	json_t *c = json_loads("{\"x\":[1,{\"y\":2},3],\"z\":\"s\"}", 0,
	    NULL);

	CHECK(reconcile_json_subset(a, b));
	CHECK(!reconcile_json_subset(b, a));
	CHECK(!reconcile_json_subset(a, c));
	CHECK(reconcile_json_subset(NULL, a));
	CHECK(!reconcile_json_subset(a, NULL));
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

/* A plan with an owner reference to instance uid u-1. */
static struct plan *
mkplan_owned(const char *annotation)
{
	static const struct plan_config owned = { .owner_refs = true };

	return mkplan_with(annotation, &owned);
}

TEST(verdict_ours_outdated_impostor)
{
	struct plan *p = mkplan_owned("{\"sharing\":\"time-slicing\"}");
	json_t *obj, *md, *ex;
	char why[RC_WHY_MAX];

	REQUIRE(p != NULL);
	/* the plan's own object, as the server returns it */
	obj = json_deep_copy(p->claim);
	md = json_object_get(obj, "metadata");
	json_object_set_new(md, "uid", json_string("x-1"));
	CHECK_INT(reconcile_verdict(p->claim, obj, why, sizeof(why)), RC_OURS);
	/* its cache row form gives the same answer */
	md = reconcile_row(obj);
	CHECK_INT(reconcile_verdict(p->claim, md, why, sizeof(why)), RC_OURS);
	json_decref(md);
	/* an extra non-empty member the plan has not: not equal */
	ex = json_object_get(json_array_get(json_object_get(json_object_get(
	    json_object_get(obj, "spec"), "devices"), "requests"), 0),
	    "exactly");
	json_object_set_new(ex, "adminAccess", json_true());
	CHECK_INT(reconcile_verdict(p->claim, obj, why, sizeof(why)),
	    RC_OUTDATED);
	CHECK(strstr(why, "spec differs") != NULL);
	json_object_set_new(ex, "adminAccess", json_false());
	CHECK_INT(reconcile_verdict(p->claim, obj, why, sizeof(why)), RC_OURS);
	/* the same spec and labels without the owner reference: impostor */
	json_object_del(json_object_get(obj, "metadata"), "ownerReferences");
	CHECK_INT(reconcile_verdict(p->claim, obj, why, sizeof(why)),
	    RC_IMPOSTOR);
	CHECK(strstr(why, "owner reference") != NULL);
	/* no label at all */
	json_decref(obj);
	obj = json_pack("{s:{s:s}, s:O}", "metadata", "name", "agent-t1-gpu",
	    "spec", json_object_get(p->claim, "spec"));
	CHECK_INT(reconcile_verdict(p->claim, obj, why, sizeof(why)),
	    RC_IMPOSTOR);
	CHECK(strstr(why, "no app.kubernetes.io/managed-by=kpgpud label") !=
	    NULL);
	json_decref(obj);
	plan_free(p);
}

TEST(impostor_replaced_exactly)
{
	struct rc_fx t;
	json_t *b;

	REQUIRE(rc_setup(&t, mkplan_owned("{\"sharing\":\"time-slicing\"}"),
	    false));
	/* a tenant's claim under kpgpud's name, count 8, no label */
	t.o.has_planned = true;
	snprintf(t.o.planned.kind, sizeof(t.o.planned.kind), "ResourceClaim");
	snprintf(t.o.planned.name, sizeof(t.o.planned.name), "%s", t.p->claim_name);
	snprintf(t.o.planned.uid, sizeof(t.o.planned.uid), "evil-uid");
	t.o.planned.data = json_pack("{s:{s:[{s:s, s:{s:s, s:s, s:i}}]}}",
	    "spec", "devices", "requests", "name", "gpu", "exactly",
	    "deviceClassName", "gpu.nvidia.com", "allocationMode",
	    "ExactCount", "count", 8);
	add_quota(&t.o, t.p);
	REQUIRE(rc_diff(&t, t.p, -1));
	CHECK_INT(t.a->nimpostors, 1);
	CHECK(strstr(t.a->impostor[0], "ResourceClaim t1/agent-t1-gpu-") !=
	    NULL);
	CHECK(strstr(t.a->impostor[0], " (uid evil-uid) is not kpgpud's") !=
	    NULL);
	CHECK(strstr(t.a->impostor[0], "replaced") != NULL);
	REQUIRE(t.a->n >= 2);
	CHECK_STR(t.a->a[0].method, "DELETE");
	CHECK_STR(t.a->a[0].path, t.a->a[1].item);
	CHECK_STR(t.a->a[0].impostor_kind, "ResourceClaim");
	b = json_loads(t.a->a[0].body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "preconditions"), "uid")), "evil-uid");
	json_decref(b);
	check_action(t.a, 1, "POST", "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaims");
	CHECK_STR(t.a->a[1].verify_kind, "ResourceClaim");

	/* in use, being deleted: reported, waited for, not deleted again */
	json_object_set_new(t.o.planned.data, "deletionTimestamp",
	    json_string("2026-01-01T00:00:00Z"));
	REQUIRE(rc_diff(&t, t.p, -1));
	CHECK_INT(t.a->nimpostors, 1);
	CHECK(strstr(t.a->impostor[0], "being deleted") != NULL);
	CHECK(t.a->wait);
	for (int i = 0; i < t.a->n; i++)
		CHECK(strstr(t.a->a[i].path, "resourceclaims") == NULL);
	rc_done(&t);
}

TEST(decoys_are_not_kpgpuds)
{
	json_t *d = json_pack("{s:{s:s}}", "labels", PLAN_MANAGED_BY_KEY,
	    PLAN_MANAGED_BY);
	json_t *k = json_pack("{s:{s:s, s:s}}", "labels", PLAN_MANAGED_BY_KEY,
	    PLAN_MANAGED_BY, PLAN_INSTANCE_LABEL, "agent-t1");

	CHECK(!reconcile_owned_ours(d));
	CHECK(reconcile_owned_ours(k));
	CHECK(!reconcile_owned_ours(NULL));
	json_decref(d);
	json_decref(k);
}

/* The spec.hard of the quota patch among t's actions, or NULL. */
static json_t *
quota_patch_hard(const struct rc_fx *t, json_t **body)
{
	*body = NULL;
	for (int i = 0; i < t->a->n; i++)
		if (strstr(t->a->a[i].path, "resourcequotas/") != NULL) {
			json_decref(*body);
			*body = json_loads(t->a->a[i].body, 0, NULL);
		}
	return json_object_get(json_object_get(*body, "spec"), "hard");
}

TEST(quota_keys_follow_classes)
{
	const char *c1[] = { "a.example.com", "gpu.nvidia.com",
	    "kpgpud-mig-1g.10gb" };
	const char *c2[] = { "gpu.nvidia.com", "kpgpud-mig-1g.10gb" };
	struct plan_config cfg = { .strict = true, .strict_classes =
	    "gpu.nvidia.com", .classes = c1, .nclasses = 3 };
	struct plan *p1 = mkplan_with(MIG, &cfg);
	struct rc_fx t;
	json_t *b, *hard;

	cfg.classes = c2;
	cfg.nclasses = 2;
	REQUIRE(rc_setup(&t, mkplan_with(MIG, &cfg), false) && p1 != NULL);
	/* the quota as p1 left it; then a.example.com is deleted */
	json_array_append_new(t.o.quotas, quota_json(p1->quota_name,
	    "count/resourceclaims.resource.k8s.io,"
	    "kpgpud-mig-1g.10gb.deviceclass.resource.k8s.io/devices,"
	    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices,"
	    "a.example.com.deviceclass.resource.k8s.io/devices",
	    plan_quota_hard(p1)));
	REQUIRE(rc_diff(&t, t.p, -1));
	REQUIRE((hard = quota_patch_hard(&t, &b)) != NULL);
	/* the gone class's key is taken out, the others stay as they are */
	CHECK_INT(json_object_size(hard), 1);
	CHECK(json_is_null(json_object_get(hard,
	    "a.example.com.deviceclass.resource.k8s.io/devices")));
	json_decref(b);
	/* and back again: the new class's key is written as 0 */
	json_array_clear(t.o.quotas);
	json_array_append_new(t.o.quotas, quota_json(t.p->quota_name,
	    "count/resourceclaims.resource.k8s.io,"
	    "kpgpud-mig-1g.10gb.deviceclass.resource.k8s.io/devices,"
	    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
	    plan_quota_hard(t.p)));
	REQUIRE(rc_diff(&t, p1, -1));
	REQUIRE((hard = quota_patch_hard(&t, &b)) != NULL);
	CHECK_INT(json_object_size(hard), 1);
	CHECK_STR(json_string_value(json_object_get(hard,
	    "a.example.com.deviceclass.resource.k8s.io/devices")), "0");
	json_decref(b);
	rc_done(&t);
	plan_free(p1);
}

TEST(policy_params_configmap)
{
	struct rc_actions *a = calloc(1, sizeof(*a));
	json_t *b;

	REQUIRE(a != NULL);
	REQUIRE(reconcile_params("kpgpud", "kpgpud-device-classes",
	    "nic.example.com x", "system:serviceaccount:kpgpud:q", a) == 0);
	REQUIRE(a->n == 2);
	/* created when absent (409: it exists), then its two keys set */
	check_action(a, 0, "POST", "/api/v1/namespaces/kpgpud/configmaps");
	CHECK_INT(a->a[0].also_ok, 409);
	b = json_loads(a->a[0].body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(b,
	    "metadata"), "name")), "kpgpud-device-classes");
	json_decref(b);
	check_action(a, 1, "PATCH",
	    "/api/v1/namespaces/kpgpud/configmaps/kpgpud-device-classes");
	CHECK_STR(a->a[1].content_type, RC_MERGE);
	CHECK_STR(a->a[1].body, "{\"data\":{\"non-gpu-classes\":"
	    "\"nic.example.com x\",\"quota-user\":"
	    "\"system:serviceaccount:kpgpud:q\"}}");
	reconcile_actions_clear(a);
	/* without a user the deployed quota-user is left alone */
	REQUIRE(reconcile_params("kpgpud", "p", "", NULL, a) == 0);
	CHECK_STR(a->a[1].body, "{\"data\":{\"non-gpu-classes\":\"\"}}");
	reconcile_actions_clear(a);
	free(a);
}

/* The quota's spec.hard value of key, or -1. */
static long
hard_of(json_t *q, const char *key)
{
	const char *v = json_string_value(json_object_get(json_object_get(
	    json_object_get(q, "spec"), "hard"), key));

	return v != NULL ? atol(v) : -1;
}

/* Apply every quota patch of a to o's quotas, as the server would. */
static void
apply_quota_patches(struct rc_observed *o, const struct rc_actions *a)
{
	size_t i;
	json_t *q, *b, *hard;
	const char *k, *name;
	json_t *v;

	for (int n = 0; n < a->n; n++) {
		if (strstr(a->a[n].path, "/resourcequotas/") == NULL ||
		    strcmp(a->a[n].method, "PATCH") != 0)
			continue;
		b = json_loads(a->a[n].body, 0, NULL);
		json_array_foreach(o->quotas, i, q) {
			name = json_string_value(json_object_get(
			    json_object_get(q, "metadata"), "name"));
			if (strcmp(strrchr(a->a[n].path, '/') + 1, name) != 0)
				continue;
			hard = json_object_get(json_object_get(q, "spec"),
			    "hard");
			json_object_foreach(json_object_get(json_object_get(b,
			    "spec"), "hard"), k, v) {
				if (json_is_null(v))
					json_object_del(hard, k);
				else
					json_object_set(hard, k, v);
			}
		}
		json_decref(b);
	}
}

#define TS1	"{\"sharing\":\"time-slicing\",\"maxDevices\":2}"
#define TS2	"{\"sharing\":\"time-slicing\",\"maxDevices\":3," \
		"\"devicesPerPod\":2,\"initContainers\":\"all\"}"
#define GPU_KEY	"gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
#define CLAIMS	"count/resourceclaims.resource.k8s.io"

TEST(shared_claim_spec_change)
{
	struct plan *p2 = mkplan(TS2);
	char path[RC_PATH_MAX];
	struct rc_fx t;
	json_t *b, *q;

	/* p1 in force, its claim in use; the annotation changes to p2 */
	REQUIRE(rc_setup(&t, mkplan(TS1), true) && p2 != NULL);
	REQUIRE(strcmp(t.p->claim_name, p2->claim_name) != 0);
	t.o.has_planned = false;
	json_decref(t.o.planned.data);
	t.o.planned.data = NULL;
	q = json_array_get(t.o.quotas, 0);
	REQUIRE(rc_diff(&t, p2, -1));
	/* first the room: p2's 3 plus the old claim's 1 claim, 1 device */
	REQUIRE(t.a->n == 1);
	CHECK(t.a->quota_pending);
	apply_quota_patches(&t.o, t.a);
	CHECK_INT(hard_of(q, CLAIMS), 4);
	CHECK_INT(hard_of(q, GPU_KEY), 4);
	/* still not enforced: nothing else, however often we look */
	REQUIRE(rc_diff(&t, p2, 0));
	CHECK(t.a->quota_pending);
	enforce(&t.o);
	REQUIRE(rc_diff(&t, p2, -1));
	CHECK(!t.a->quota_pending);
	/* new claim, Namespace moved to it, old claim deleted (no wait) */
	REQUIRE(t.a->n == 3);
	check_action(t.a, 0, "POST", "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaims");
	CHECK(strstr(t.a->a[0].body, p2->claim_name) != NULL);
	check_action(t.a, 1, "PATCH", "/api/v1/namespaces/t1");
	b = json_loads(t.a->a[1].body, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(b, "metadata"), "annotations"),
	    PLAN_NS_CLAIM_ANNOT)), p2->claim_name);
	CHECK_STR(json_string_value(json_object_get(json_object_get(
	    json_object_get(b, "metadata"), "annotations"),
	    PLAN_NS_MAX_ANNOT)), "3");
	json_decref(b);
	snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/t1/"
	    "resourceclaims/%s", t.p->claim_name);
	check_action(t.a, 2, "DELETE", path);
	CHECK(!t.a->wait);
	/* the old claim terminates (its pods run): no write, room kept */
	json_object_set_new(t.o.owned[0].data, "deletionTimestamp",
	    json_string("2026-01-01T00:00:00Z"));
	t.o.has_planned = true;
	snprintf(t.o.planned.kind, sizeof(t.o.planned.kind), "ResourceClaim");
	snprintf(t.o.planned.name, sizeof(t.o.planned.name), "%s", p2->claim_name);
	t.o.planned.data = json_pack("{s:O, s:O, s:O}", "labels",
	    json_object_get(json_object_get(p2->claim, "metadata"), "labels"),
	    "annotations", json_object_get(json_object_get(p2->claim,
	    "metadata"), "annotations"), "spec", json_object_get(p2->claim,
	    "spec"));
	json_decref(t.o.ns_annots);
	t.o.ns_annots = plan_ns_annotations(p2);
	REQUIRE(rc_diff(&t, p2, 0));
	CHECK(!t.a->wait);
	/* gone: the quota returns to the plan, exactly */
	json_decref(t.o.owned[0].data);
	t.o.nowned = 0;
	REQUIRE(rc_diff(&t, p2, 1));
	apply_quota_patches(&t.o, t.a);
	CHECK_INT(hard_of(q, CLAIMS), 3);
	CHECK_INT(hard_of(q, GPU_KEY), 3);
	enforce(&t.o);
	REQUIRE(rc_diff(&t, p2, 0));
	rc_done(&t);
	plan_free(p2);
}

TEST(room_only_for_the_tenants_claims)
{
	struct rc_fx t;
	json_t *q;

	REQUIRE(rc_setup(&t, mkplan(TS1), true));
	q = json_array_get(t.o.quotas, 0);
	/* the fixed name of earlier versions, 2 devices, still draining */
	snprintf(t.o.owned[1].kind, sizeof(t.o.owned[1].kind), "ResourceClaim");
	snprintf(t.o.owned[1].name, sizeof(t.o.owned[1].name), "agent-t1-gpu");
	t.o.owned[1].data = json_pack("{s:{s:s, s:s}, s:s, s:{s:{s:[{s:s, "
	    "s:{s:s, s:s, s:i}}]}}}", "labels", PLAN_MANAGED_BY_KEY,
	    PLAN_MANAGED_BY, PLAN_INSTANCE_LABEL, "agent-t1",
	    "deletionTimestamp", "2026-01-01T00:00:00Z", "spec", "devices",
	    "requests", "name", "gpu", "exactly", "deviceClassName",
	    "gpu.nvidia.com", "allocationMode", "ExactCount", "count", 2);
	/* one of another name with our labels, and one without the labels */
	snprintf(t.o.owned[2].kind, sizeof(t.o.owned[2].kind), "ResourceClaim");
	snprintf(t.o.owned[2].name, sizeof(t.o.owned[2].name), "other-gpu");
	t.o.owned[2].data = json_deep_copy(t.o.owned[1].data);
	snprintf(t.o.owned[3].kind, sizeof(t.o.owned[3].kind), "ResourceClaim");
	snprintf(t.o.owned[3].name, sizeof(t.o.owned[3].name), "agent-t1-gpu-"
	    "00000000");
	t.o.owned[3].data = json_deep_copy(t.o.owned[1].data);
	json_object_del(json_object_get(t.o.owned[3].data, "labels"),
	    PLAN_MANAGED_BY_KEY);
	t.o.nowned = 4;
	REQUIRE(rc_diff(&t, t.p, 1));
	apply_quota_patches(&t.o, t.a);
	CHECK_INT(hard_of(q, CLAIMS), 3);
	CHECK_INT(hard_of(q, GPU_KEY), 4);
	/* no delete of what is already going */
	enforce(&t.o);
	REQUIRE(rc_diff(&t, t.p, 0));
	rc_done(&t);
}

TEST(lowered_max_quota_first)
{
	struct plan *lo = mkplan("{\"sharing\":\"exclusive\",\"maxDevices\":1}");
	struct rc_fx t;
	json_t *q;

	REQUIRE(rc_setup(&t, mkplan("{\"sharing\":\"exclusive\","
	    "\"maxDevices\":4}"), true) && lo != NULL);
	q = json_array_get(t.o.quotas, 0);
	/* lowered: the quota alone, the Namespace (max 4) not yet */
	REQUIRE(rc_diff(&t, lo, 1));
	CHECK(t.a->quota_pending);
	check_action(t.a, 0, "PATCH", "/api/v1/namespaces/t1/resourcequotas/"
	    "kpgpud-gpu");
	apply_quota_patches(&t.o, t.a);
	CHECK_INT(hard_of(q, GPU_KEY), 1);
	enforce(&t.o);
	REQUIRE(rc_diff(&t, lo, 1));
	check_action(t.a, 0, "PATCH", "/api/v1/namespaces/t1");
	CHECK(strstr(t.a->a[0].body, "\"" PLAN_NS_MAX_ANNOT "\":\"1\"") != NULL);
	rc_done(&t);
	plan_free(lo);
}

TEST(terminating_planned_claim_keeps_the_namespace)
{
	struct plan *p1 = mkplan(TS1);
	struct rc_fx t;

	/* back to p1 while p1's claim still drains; p2's is in use */
	REQUIRE(rc_setup(&t, mkplan(TS2), true) && p1 != NULL);
	snprintf(t.o.owned[1].kind, sizeof(t.o.owned[1].kind), "ResourceClaim");
	snprintf(t.o.owned[1].name, sizeof(t.o.owned[1].name), "%s",
	    p1->claim_name);
	t.o.owned[1].data = json_pack("{s:O, s:O, s:s}", "labels",
	    json_object_get(json_object_get(p1->claim, "metadata"), "labels"),
	    "spec", json_object_get(p1->claim, "spec"), "deletionTimestamp",
	    "2026-01-01T00:00:00Z");
	t.o.nowned = 2;
	json_decref(t.o.planned.data);
	t.o.planned = t.o.owned[1];
	t.o.planned.data = json_deep_copy(t.o.owned[1].data);
	REQUIRE(rc_diff(&t, p1, -1));
	/* room for p2's claim, then: no create, no Namespace, no delete */
	apply_quota_patches(&t.o, t.a);
	enforce(&t.o);
	REQUIRE(rc_diff(&t, p1, -1));
	CHECK(t.a->wait);
	for (int i = 0; i < t.a->n; i++)
		CHECK(strstr(t.a->a[i].path, "resourcequotas") != NULL);
	rc_done(&t);
	plan_free(p1);
}

/*
 * One plan object: jsonw writes it itself (no real, nothing too wide or
 * deep), with the bytes of jansson's compact sorted dump.
 */
static void
check_body(json_t *v, const char *what)
{
	struct buf b = BUF_INIT(0);
	char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);

	CHECK_CASE(jsonw_dump_to(&b, v) == 0 && want != NULL &&
	    strcmp(buf_str(&b), want) == 0, what);
	free(want);
	buf_free(&b);
}

/*
 * Request bodies need no jansson: every object of the plans of each
 * sharing mode (with owner references and a topology class) is written by
 * jsonw itself (tests/unit/test_jsonw.c: every byte as jansson's).
 */
TEST(bodies_need_no_jansson)
{
	static const char *const modes[] = { EXCL3, MIG,
	    "{\"sharing\":\"time-slicing\",\"maxDevices\":2,"
	    "\"timeSlicing\":{\"interval\":\"Long\"}}",
	    "{\"sharing\":\"mps\",\"maxDevices\":2}",
	    "{\"sharing\":\"hybrid\",\"migProfile\":\"1g.10gb\"}",
	    "{\"sharing\":\"exclusive\",\"maxDevices\":2,"
	    "\"productName\":\"NVIDIA A100\","
	    "\"minMemory\":\"40Gi\",\"devicesPerPod\":2,"
	    "\"topology\":\"pcieRoot\",\"initContainers\":[\"a\",\"b\"],"
	    "\"sidecarContainers\":[\"istio-proxy\"]}" };
	struct plan_topology t = { 0 };
	struct plan_config cfg = { .owner_refs = true, .strict = true,
	    .topology = &t, .driver_gates = PLAN_GATE_MPS |
	    PLAN_GATE_TIME_SLICING };
	json_t *v;

	t.selectors = json_pack("[{s:{s:s}}]", "cel", "expression",
	    "device.attributes['gpu.nvidia.com'].uuid in ['GPU-1']");
	t.domains = "gpu/GPU-1";
	for (size_t i = 0; i < nitems(modes); i++) {
		struct plan *p = mkplan_with(modes[i], &cfg);

		REQUIRE(p != NULL);
		check_body(p->claim, modes[i]);
		if (p->device_class != NULL)
			check_body(p->device_class, modes[i]);
		v = plan_to_json(p);
		check_body(v, modes[i]);
		json_decref(v);
		v = plan_ns_annotations(p);
		check_body(v, modes[i]);
		json_decref(v);
		plan_free(p);
	}
	json_decref(t.selectors);
}
