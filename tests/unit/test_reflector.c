/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of kpgpud-sync's reflector: the key set used to find
 * deletions after a relist (and the bytes it keeps under churn), what
 * follows each way a watch can end, the backoff, the collections and the
 * reduction of objects to cache rows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-sync/objects.h"
#include "kpgpud-sync/reflector.h"
#include "tests/unit/test.h"

TEST(strset_add_has_grow)
{
	struct strset *s = strset_new();
	char key[64];
	int i, fresh = 0;

	REQUIRE(s != NULL);
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "ns-%d/obj", i);
		fresh += strset_add(s, key);
	}
	CHECK_INT(fresh, 5000);
	CHECK_INT(strset_add(s, "ns-17/obj"), 0);
	CHECK_INT(strset_count(s), 5000);
	CHECK(strset_has(s, "ns-4999/obj"));
	CHECK(strset_has(s, "ns-0/obj"));
	CHECK(!strset_has(s, "ns-5000/obj"));
	CHECK(!strset_has(s, "ns-1/ob"));
	strset_del(s, "ns-17/obj");
	strset_del(s, "ns-17/obj");	/* absent: nothing */
	CHECK(!strset_has(s, "ns-17/obj"));
	CHECK_INT(strset_count(s), 4999);
	CHECK_INT(strset_add(s, "ns-17/obj"), 1);
	strset_free(s);
	strset_free(NULL);
}

TEST(strset_churn_reuses_removed_bytes)
{
	struct strset *s = strset_new();
	char key[64];
	size_t most = 0;
	int i, bad = 0;

	/*
	 * The keys are packed in a region: a removed key's bytes stay until
	 * removed ones outweigh the live ones, then the set is copied afresh.
	 * 100,000 claims marked and unmarked, never more than 10 at once:
	 * what it holds for removed keys stays bounded, the live ones stay.
	 */
	REQUIRE(s != NULL);
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "team-%d/claim-%d", i % 7, i);
		if (strset_add(s, key) != 1)
			bad++;
		if (i >= 10) {
			snprintf(key, sizeof(key), "team-%d/claim-%d",
			    (i - 10) % 7, i - 10);
			strset_del(s, key);
		}
		if (strset_dead_bytes(s) > most)
			most = strset_dead_bytes(s);
	}
	CHECK_INT(bad, 0);
	CHECK_INT(strset_count(s), 10);
	CHECK(most <= 4096 + 64);
	for (i = 99990; i < 100000; i++) {
		snprintf(key, sizeof(key), "team-%d/claim-%d", i % 7, i);
		CHECK(strset_has(s, key));
	}
	snprintf(key, sizeof(key), "team-%d/claim-%d", 99989 % 7, 99989);
	CHECK(!strset_has(s, key));
	CHECK_INT(strset_add(s, key), 1);
	strset_free(s);
}

TEST(strset_key_format)
{
	char buf[8];

	CHECK(strset_key(buf, sizeof(buf), "", "dc") == 0);
	CHECK_STR(buf, "/dc");
	CHECK(strset_key(buf, sizeof(buf), "a", "b") == 0);
	CHECK_STR(buf, "a/b");
	CHECK(strset_key(buf, sizeof(buf), "abcd", "efgh") == -ENAMETOOLONG);
}

/* Ways a watch ends (reason, status, events, ran for ms), what follows. */
static const struct {
	enum kube_watch_reason	 reason;
	long			 status;
	unsigned long		 events;
	uint64_t		 ran_ms;
	enum reflector_next	 next;
} watch_ends[] = {
	{ KUBE_WATCH_EXPIRED, 410, 3, 5000, REFL_NEXT_RELIST },
	{ KUBE_WATCH_HTTP_ERROR, 410, 0, 5, REFL_NEXT_RELIST },
	{ KUBE_WATCH_HTTP_ERROR, 500, 0, 5, REFL_NEXT_WATCH_LATER },
	{ KUBE_WATCH_HTTP_ERROR, 429, 0, 5, REFL_NEXT_WATCH_LATER },
	/* a normal timeout: renew at once */
	{ KUBE_WATCH_CLOSED, 200, 0, 300000, REFL_NEXT_WATCH },
	{ KUBE_WATCH_CLOSED, 200, 4, 10, REFL_NEXT_WATCH },
	/* a very short empty watch is an error: back off */
	{ KUBE_WATCH_CLOSED, 200, 0, 10, REFL_NEXT_WATCH_LATER },
	{ KUBE_WATCH_STALLED, 200, 0, 10, REFL_NEXT_WATCH },
	{ KUBE_WATCH_PARSE_ERROR, 200, 1, 10, REFL_NEXT_WATCH_LATER },
	{ KUBE_WATCH_TRANSPORT, 0, 0, 10, REFL_NEXT_WATCH_LATER },
	{ KUBE_WATCH_ERROR_EVENT, 500, 0, 10, REFL_NEXT_WATCH_LATER },
};

TEST(after_watch_decisions)
{
	for (size_t i = 0; i < nitems(watch_ends); i++) {
		struct kube_watch_end e = { watch_ends[i].reason,
		    watch_ends[i].status, 0, "", "", watch_ends[i].events };
		enum reflector_next got;

		got = reflector_after_watch(&e, watch_ends[i].ran_ms);
		if (got != watch_ends[i].next)
			test_fail(__FILE__, __LINE__, "case %zu: next %d, not %d",
			    i, (int)got, (int)watch_ends[i].next);
	}
}

TEST(backoff_doubles_caps_and_jitters)
{
	CHECK_INT(reflector_backoff_ms(1, 500, 30000, 1.0), 500);
	CHECK_INT(reflector_backoff_ms(2, 500, 30000, 1.0), 1000);
	CHECK_INT(reflector_backoff_ms(4, 500, 30000, 1.0), 4000);
	CHECK_INT(reflector_backoff_ms(7, 500, 30000, 1.0), 30000);
	CHECK_INT(reflector_backoff_ms(1000, 500, 30000, 1.0), 30000);
	CHECK_INT(reflector_backoff_ms(2, 500, 30000, 0.5), 500);
	/* jitter outside [0.5, 1] is clamped */
	CHECK_INT(reflector_backoff_ms(2, 500, 30000, 0.0), 500);
	CHECK_INT(reflector_backoff_ms(2, 500, 30000, 7.0), 1000);
}

TEST(collections)
{
	struct sync_res r;

	sync_res_namespaces(&r);
	CHECK_STR(r.path, "/api/v1/namespaces");
	CHECK(r.selector == NULL);
	CHECK(sync_res_instance("kubeplus.io/v1alpha1/agents", &r) == 0);
	CHECK_STR(r.path, "/apis/kubeplus.io/v1alpha1/agents");
	CHECK_STR(r.key, "kubeplus.io/v1alpha1/agents");
	CHECK_INT(r.table, CACHE_T_INSTANCE);
	CHECK(sync_res_instance("v1/pods", &r) == -EINVAL);
	CHECK(sync_res_instance("nodots/v1/x", &r) == -EINVAL);
	CHECK(sync_res_instance("a.b/v1/x/y", &r) == -EINVAL);
	CHECK(sync_res_instance("a.b/v1/X", &r) == -EINVAL);
	CHECK(sync_res_instance("a.b//x", &r) == -EINVAL);
	CHECK(sync_res_instance("a.b/v1/x?watch=1", &r) == -EINVAL);
	CHECK(sync_res_owned(CACHE_KIND_QUOTA, &r) == 0);
	CHECK_STR(r.path, "/api/v1/resourcequotas");
	CHECK_STR(r.selector, SYNC_MANAGED_SELECTOR);
	CHECK(sync_res_owned(CACHE_KIND_CLAIMTEMPLATE, &r) == 0);
	CHECK_STR(r.path, "/apis/resource.k8s.io/v1/resourceclaimtemplates");
	CHECK(sync_res_owned("Pod", &r) == -EINVAL);
}

/* Parse JSON text or fail the test. */
static json_t *
J(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, 0, &e);

	if (j == NULL)
		test_fail(__FILE__, __LINE__, "bad JSON %s", e.text);
	return j;
}

TEST(row_namespace)
{
	struct sync_res res;
	struct sync_row row;
	const char *why = NULL;
	json_t *o = J("{\"metadata\":{\"name\":\"team-a\",\"uid\":\"u1\","
	    "\"resourceVersion\":\"42\",\"labels\":{\"z\":\"1\","
	    "\"kubeplus.io/gpu-isolation-enabled\":\"true\"},"
	    "\"annotations\":{\"kubeplus.io/gpu-isolation-resolved\":"
	    "\"{\\\"claimTemplateName\\\":\\\"gpu\\\"}\",\"other\":\"x\","
	    "\"kubectl.kubernetes.io/last-applied-configuration\":\"big\"}},"
	    "\"status\":{\"phase\":\"Active\"}}");

	REQUIRE(o != NULL);
	sync_res_namespaces(&res);
	REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
	CHECK_STR(row.u.ns.name, "team-a");
	CHECK_STR(row.u.ns.uid, "u1");
	CHECK_STR(row.u.ns.rv, "42");
	CHECK_STR(row.u.ns.phase, "Active");
	CHECK(row.u.ns.isolated);
	CHECK_STR(row.u.ns.resolved, "{\"claimTemplateName\":\"gpu\"}");
	CHECK_STR(row.u.ns.labels,
	    "{\"kubeplus.io/gpu-isolation-enabled\":\"true\",\"z\":\"1\"}");
	CHECK_STR(row.u.ns.annotations, "{\"kubeplus.io/gpu-isolation-resolved"
	    "\":\"{\\\"claimTemplateName\\\":\\\"gpu\\\"}\"}");
	sync_row_clear(&row);
	/* label "false" or absent: not isolated */
	json_object_set_new(json_object_get(json_object_get(o, "metadata"),
	    "labels"), "kubeplus.io/gpu-isolation-enabled", json_string("no"));
	REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
	CHECK(!row.u.ns.isolated);
	sync_row_clear(&row);
	json_decref(o);
}

/* A Namespace row's labels and annotations are json_dumps's bytes. */
TEST(row_namespace_json_as_jansson)
{
	static const char *const vals[] = { "", "plain", "q\"uote",
	    "back\\slash", "ctl\b\f\n\r\t\x01\x1f\x7f", "sl/ash",
	    "\xc3\xa9t\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80",
	    "{\"sharing\":\"mig\"}" };
	struct sync_res res;
	struct sync_row row;
	const char *why = NULL;
	json_t *o, *labels, *ann, *kp;
	char key[32], *want;
	size_t i, round;

	sync_res_namespaces(&res);
	for (round = 0; round < 4; round++) {
		labels = json_object();
		ann = json_object();
		kp = json_object();
		for (i = 0; i < nitems(vals); i++) {
			snprintf(key, sizeof(key), "%c%zu\t/%s", (int)('z' - i),
			    i, i % 2 ? "\xc3\xa9" : "\"");
			json_object_set_new(labels, key, json_string(vals[i]));
			snprintf(key, sizeof(key), "kubeplus.io/k%zu", 7 - i);
			json_object_set_new(ann, key, json_string(vals[i]));
			json_object_set_new(kp, key, json_string(vals[i]));
			json_object_set_new(ann, vals[i], json_string("x"));
		}
		if (round == 1)	/* not all strings: the general way */
			json_object_set_new(labels, "n", json_integer(3));
		if (round == 2) {	/* more members than the fast path sorts */
			for (i = 0; i < 80; i++) {
				snprintf(key, sizeof(key), "kubeplus.io/m%zu",
				    i * 7 % 80);
				json_object_set_new(ann, key, json_string("v"));
				json_object_set_new(kp, key, json_string("v"));
			}
		}
		if (round == 3) {	/* empty: "{}" */
			json_object_clear(labels);
			json_object_clear(ann);
			json_object_clear(kp);
		}
		o = json_pack("{s:{s:s, s:s, s:s, s:O, s:O}}", "metadata",
		    "name", "ns", "uid", "u", "resourceVersion", "1",
		    "labels", labels, "annotations", ann);
		REQUIRE(o != NULL);
		REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
		want = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
		CHECK_STR(row.u.ns.labels, want);
		free(want);
		want = json_dumps(kp, JSON_COMPACT | JSON_SORT_KEYS);
		CHECK_STR(row.u.ns.annotations, want);
		free(want);
		sync_row_clear(&row);
		json_decref(o);
		json_decref(labels);
		json_decref(ann);
		json_decref(kp);
	}
}

TEST(row_rejects_bad_objects)
{
	struct sync_res res;
	struct sync_row row;
	const char *why = NULL;
	const char *bad[] = {
		"{}",
		"{\"metadata\":[]}",
		"{\"metadata\":{\"resourceVersion\":\"1\"}}",
		"{\"metadata\":{\"name\":\"\",\"resourceVersion\":\"1\"}}",
		"{\"metadata\":{\"name\":7,\"resourceVersion\":\"1\"}}",
		"{\"metadata\":{\"name\":\"a\"}}",
		"{\"metadata\":{\"name\":\"a\",\"resourceVersion\":1}}",
		"{\"metadata\":{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		    "aaaaaaaaaaaaaaaaaaaaaaaaa\",\"resourceVersion\":\"1\"}}",
	};
	size_t i;

	sync_res_namespaces(&res);
	for (i = 0; i < nitems(bad); i++) {
		json_t *o = J(bad[i]);

		why = NULL;
		CHECK(sync_row_from_json(&res, o, &row, &why) == -EINVAL);
		CHECK(why != NULL);
		json_decref(o);
	}
}

TEST(row_instance_and_owned)
{
	struct sync_res res;
	struct sync_row row;
	const char *why;
	json_t *o = J("{\"kind\":\"Agent\",\"metadata\":{\"name\":\"a1\","
	    "\"namespace\":\"t\",\"uid\":\"u\",\"resourceVersion\":\"9\","
	    "\"generation\":4,\"creationTimestamp\":\"2025-01-01T00:00:00Z\","
	    "\"deletionTimestamp\":\"2025-01-02T00:00:00Z\","
	    "\"annotations\":{\"kubeplus.io/gpu-isolation\":"
	    "\"{\\\"sharing\\\":\\\"mig\\\"}\"}},\"spec\":{\"x\":1}}");
	json_t *q = J("{\"metadata\":{\"name\":\"q\",\"namespace\":\"t\","
	    "\"resourceVersion\":\"3\",\"labels\":{\"app.kubernetes.io/"
	    "managed-by\":\"kpgpud\"}},\"spec\":{\"hard\":{\"count/"
	    "resourceclaims.resource.k8s.io\":\"1\"},\"scopes\":[\"x\"]},"
	    "\"status\":{\"hard\":{\"a\":\"1\"},\"used\":{\"a\":\"0\"}}}");

	REQUIRE(sync_res_instance("kubeplus.io/v1/agents", &res) == 0);
	REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
	CHECK_STR(row.u.in.gvr, "kubeplus.io/v1/agents");
	CHECK_STR(row.u.in.kind, "Agent");
	CHECK_STR(row.u.in.ns, "t");
	CHECK_INT(row.u.in.generation, 4);
	CHECK_STR(row.u.in.isolation, "{\"sharing\":\"mig\"}");
	CHECK_STR(row.u.in.deleted, "2025-01-02T00:00:00Z");
	CHECK_STR(row.u.in.created, "2025-01-01T00:00:00Z");
	sync_row_clear(&row);

	REQUIRE(sync_res_owned(CACHE_KIND_QUOTA, &res) == 0);
	REQUIRE(sync_row_from_json(&res, q, &row, &why) == 0);
	CHECK_STR(row.u.ow.kind, "ResourceQuota");
	CHECK_STR(row.u.ow.data, "{\"labels\":{\"app.kubernetes.io/managed-by"
	    "\":\"kpgpud\"},\"spec\":{\"hard\":{\"count/resourceclaims."
	    "resource.k8s.io\":\"1\"}},\"status\":{\"hard\":{\"a\":\"1\"},"
	    "\"used\":{\"a\":\"0\"}}}");
	sync_row_clear(&row);
	/* other owned kinds keep the whole spec, and deletion and owners */
	REQUIRE(sync_res_owned(CACHE_KIND_DEVICECLASS, &res) == 0);
	REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
	CHECK_STR(row.u.ow.data, "{\"annotations\":{\"kubeplus.io/gpu-"
	    "isolation\":\"{\\\"sharing\\\":\\\"mig\\\"}\"},"
	    "\"deletionTimestamp\":\"2025-01-02T00:00:00Z\",\"spec\":"
	    "{\"x\":1}}");
	sync_row_clear(&row);
	/* every DeviceClass is watched, kpgpud's objects by label */
	CHECK(res.selector == NULL);
	REQUIRE(sync_res_owned(CACHE_KIND_CLAIM, &res) == 0);
	CHECK_STR(res.selector, SYNC_MANAGED_SELECTOR);
	json_object_set_new(json_object_get(o, "metadata"), "ownerReferences",
	    json_pack("[{s:s}]", "uid", "u-9"));
	REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
	CHECK(strstr(row.u.ow.data, "\"ownerReferences\":[{\"uid\":"
	    "\"u-9\"}]") != NULL);
	sync_row_clear(&row);
	json_decref(o);
	json_decref(q);
}

TEST(oversize_deviceclass_kept_without_spec)
{
	struct sync_res res;
	struct sync_row row;
	const char *why = NULL;
	size_t n = CACHE_JSON_MAX + 16;
	char *big = malloc(n + 1);
	json_t *o;

	REQUIRE(big != NULL);
	memset(big, 'x', n);
	big[n] = '\0';
	/* a class too large to keep must not vanish: no spec, counts as GPU */
	o = json_pack("{s:{s:s, s:s, s:s}, s:{s:[{s:{s:s}}]}}", "metadata",
	    "name", "huge", "uid", "u-1", "resourceVersion", "7", "spec",
	    "selectors", "cel", "expression", big);
	free(big);
	REQUIRE(o != NULL);
	REQUIRE(sync_res_owned(CACHE_KIND_DEVICECLASS, &res) == 0);
	REQUIRE(sync_row_from_json(&res, o, &row, &why) == 0);
	CHECK_STR(row.u.ow.data, "{\"oversize\":true}");
	CHECK_STR(row.u.ow.name, "huge");
	sync_row_clear(&row);
	/* any other kind over the cap is still refused */
	REQUIRE(sync_res_owned(CACHE_KIND_CLAIM, &res) == 0);
	CHECK(sync_row_from_json(&res, o, &row, &why) == -EINVAL);
	json_decref(o);
}
