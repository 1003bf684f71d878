/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The last reconcile result of each instance (kpgpud-sync/acct_result.c):
 * kpgpud-quota's Warning Events only (a Normal notice is none), the
 * newest per instance, an older one ignored, deletion, relist pruning,
 * the message cap (cut on a UTF-8 boundary), the cap on entries per
 * namespace, and Events forged in another namespace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-sync/acct_result.h"
#include "tests/unit/test.h"

/* An Event of component comp on Agent ns/name at version rv, time ts. */
static json_t *
event(const char *evname, const char *comp, const char *name,
    const char *rv, const char *reason, const char *ts, const char *msg)
{
	return json_pack("{s:{s:s,s:s},s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:s}",
	    "metadata", "namespace", "ta", "name", evname,
	    "involvedObject", "kind", "Agent", "namespace", "ta", "name", name,
	    "resourceVersion", rv, "reason", reason, "message", msg,
	    "lastTimestamp", ts, "reportingComponent", comp);
}

/* Put (or delete) one Event and release it. */
static void
put(struct acct_results *s, json_t *ev, bool deleted)
{
	acct_result_event(s, ev, deleted);
	json_decref(ev);
}

TEST(acct_result_newest)
{
	struct acct_results s;
	const struct acct_result *r;
	struct strset *seen;
	json_t *ev;

	memset(&s, 0, sizeof(s));
	put(&s, event("e1", "kpgpud-quota", "a", "5", "InvalidGPUIsolation",
	    "2026-01-01T00:00:02Z", "bad"), false);
	r = acct_result_get(&s, "Agent", "ta", "a");
	REQUIRE(r != NULL);
	CHECK_STR(r->reason, "InvalidGPUIsolation");
	CHECK_STR(r->rv, "5");
	CHECK_STR(r->msg, "bad");
	CHECK_STR(r->ts, "2026-01-01T00:00:02Z");
	/* an older Event does not replace it; a newer one does */
	put(&s, event("e0", "kpgpud-quota", "a", "4", "NeverAllocatable",
	    "2026-01-01T00:00:01Z", "old"), false);
	CHECK_STR(acct_result_get(&s, "Agent", "ta", "a")->reason,
	    "InvalidGPUIsolation");
	put(&s, event("e2", "kpgpud-quota", "a", "6",
	    "DriverFeatureGateRequired", "2026-01-01T00:00:03Z", "gate"),
	    false);
	r = acct_result_get(&s, "Agent", "ta", "a");
	CHECK_STR(r->reason, "DriverFeatureGateRequired");
	CHECK_STR(r->rv, "6");
	CHECK_INT(s.n, 1);
	/* a newer Normal Event (a notice: the plan was applied) is no result */
	ev = event("e3", "kpgpud-quota", "a", "7", "ExperimentalHybridSharing",
	    "2026-01-01T00:00:04Z", "note");
	json_object_set_new(ev, "type", json_string("Normal"));
	put(&s, ev, false);
	CHECK_STR(acct_result_get(&s, "Agent", "ta", "a")->reason,
	    "DriverFeatureGateRequired");
	CHECK_INT(s.n, 1);
	/* another component's Events are not results */
	put(&s, event("e3", "kubelet", "b", "1", "Failed",
	    "2026-01-01T00:00:04Z", "x"), false);
	CHECK(acct_result_get(&s, "Agent", "ta", "b") == NULL);
	CHECK(acct_result_get(&s, "Agent", "tb", "a") == NULL);
	CHECK(acct_result_get(&s, "Other", "ta", "a") == NULL);
	/* deleting an Event not kept changes nothing; the kept one drops */
	put(&s, event("e1", "kpgpud-quota", "a", "5", "X", "", ""), true);
	CHECK_INT(s.n, 1);
	put(&s, event("e2", "kpgpud-quota", "a", "6", "X", "", ""), true);
	CHECK(acct_result_get(&s, "Agent", "ta", "a") == NULL);
	/* a relist keeps what it saw */
	put(&s, event("e4", "kpgpud-quota", "a", "7", "NeverAllocatable",
	    "2026-01-01T00:00:05Z", "m"), false);
	put(&s, event("e5", "kpgpud-quota", "c", "7", "NeverAllocatable",
	    "2026-01-01T00:00:05Z", "m"), false);
	seen = strset_new();
	REQUIRE(seen != NULL);
	CHECK_INT(strset_add(seen, "ta/e5"), 1);
	acct_result_prune(&s, seen);
	strset_free(seen);
	CHECK(acct_result_get(&s, "Agent", "ta", "a") == NULL);
	CHECK(acct_result_get(&s, "Agent", "ta", "c") != NULL);
	acct_result_free(&s);
}

TEST(acct_result_caps)
{
	char msg[ACCT_RESULT_MSG_MAX + 64], name[32];
	struct acct_results s;
	const struct acct_result *r;
	size_t i;

	memset(&s, 0, sizeof(s));
	/* a two-byte character straddling the cap is cut whole */
	memset(msg, 'x', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	msg[ACCT_RESULT_MSG_MAX - 1] = (char)0xc3;
	msg[ACCT_RESULT_MSG_MAX] = (char)0xa9;
	put(&s, event("e1", "kpgpud-quota", "a", "1", "R",
	    "2026-01-01T00:00:00Z", msg), false);
	r = acct_result_get(&s, "Agent", "ta", "a");
	REQUIRE(r != NULL);
	CHECK_INT(strlen(r->msg), ACCT_RESULT_MSG_MAX - 1);
	/* a reason too long is refused, not cut */
	memset(msg, 'r', 200);
	msg[200] = '\0';
	put(&s, event("e2", "kpgpud-quota", "b", "1", msg,
	    "2026-01-01T00:00:00Z", "m"), false);
	CHECK(acct_result_get(&s, "Agent", "ta", "b") == NULL);
	/* at most ACCT_RESULTS_NS_MAX instances per Event namespace */
	for (i = 0; i < ACCT_RESULTS_NS_MAX + 10; i++) {
		snprintf(name, sizeof(name), "i-%zu", i);
		put(&s, event(name, "kpgpud-quota", name, "1", "R",
		    "2026-01-01T00:00:00Z", "m"), false);
	}
	CHECK_INT(s.n, ACCT_RESULTS_NS_MAX);
	acct_result_free(&s);
}

/*
 * An Event a tenant forges with reportingComponent kpgpud-quota in its own
 * namespace about another namespace's instance is no result: kpgpud-quota
 * writes in the instance's namespace ("default" for a cluster-scoped one),
 * so the other tenant's result is neither hidden nor replaced; and one
 * namespace's flood of its own results leaves room for another's.
 */
TEST(acct_result_forged_elsewhere)
{
	struct acct_results s;
	const struct acct_result *r;
	char name[32];
	json_t *ev;
	size_t i;

	memset(&s, 0, sizeof(s));
	put(&s, event("e1", "kpgpud-quota", "a", "5", "InvalidGPUIsolation",
	    "2026-01-01T00:00:02Z", "real"), false);
	/* from namespace "evil", newer, about ta's instance */
	ev = event("f1", "kpgpud-quota", "a", "5", "Forged",
	    "2026-01-01T00:00:09Z", "forged");
	json_object_set_new(json_object_get(ev, "metadata"), "namespace",
	    json_string("evil"));
	put(&s, ev, false);
	r = acct_result_get(&s, "Agent", "ta", "a");
	REQUIRE(r != NULL);
	CHECK_STR(r->msg, "real");
	/* a cluster-scoped instance's result lives in "default" only */
	ev = event("f2", "kpgpud-quota", "c", "1", "Forged",
	    "2026-01-01T00:00:09Z", "forged");
	json_object_del(json_object_get(ev, "involvedObject"), "namespace");
	put(&s, ev, false);
	CHECK(acct_result_get(&s, "Agent", "", "c") == NULL);
	ev = event("r2", "kpgpud-quota", "c", "1", "NeverAllocatable",
	    "2026-01-01T00:00:09Z", "real");
	json_object_del(json_object_get(ev, "involvedObject"), "namespace");
	json_object_set_new(json_object_get(ev, "metadata"), "namespace",
	    json_string("default"));
	put(&s, ev, false);
	CHECK(acct_result_get(&s, "Agent", "", "c") != NULL);
	/* namespace ta fills its room; tb's result still lands */
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "x-%zu", i);
		put(&s, event(name, "kpgpud-quota", name, "1", "R",
		    "2026-01-01T00:00:00Z", "m"), false);
	}
	ev = event("b1", "kpgpud-quota", "b", "3", "NeverAllocatable",
	    "2026-01-01T00:00:03Z", "tb's");
	json_object_set_new(json_object_get(ev, "metadata"), "namespace",
	    json_string("tb"));
	json_object_set_new(json_object_get(ev, "involvedObject"), "namespace",
	    json_string("tb"));
	put(&s, ev, false);
	r = acct_result_get(&s, "Agent", "tb", "b");
	REQUIRE(r != NULL);
	CHECK_STR(r->msg, "tb's");
	acct_result_free(&s);
}
