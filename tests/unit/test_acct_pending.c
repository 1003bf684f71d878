/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pods pending on quota (kpgpud-sync/acct_pending.c): which Pods wait for
 * their generated claim, the FailedResourceClaimCreation messages that say
 * the quota refused it, the count per namespace, caps and relist pruning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-sync/acct_pending.h"
#include "tests/unit/test.h"

/* A Pending Pod with a template claim and, optionally, its claim status. */
static json_t *
pod(const char *ns, const char *name, const char *phase, bool has_claim)
{
	return json_pack("{s:{s:s,s:s},s:{s:[{s:s,s:s}]},s:{s:s,s:[o]}}",
	    "metadata", "namespace", ns, "name", name,
	    "spec", "resourceClaims", "name", "kubeplus-gpu",
	    "resourceClaimTemplateName", "gpu",
	    "status", "phase", phase, "resourceClaimStatuses",
	    has_claim ? json_pack("{s:s,s:s}", "name", "kubeplus-gpu",
	    "resourceClaimName", "c-1") : json_object());
}

/* A FailedResourceClaimCreation Event of a Pod. */
static json_t *
event(const char *ns, const char *name, const char *podname, const char *msg)
{
	return json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:s,s:s}",
	    "metadata", "namespace", ns, "name", name,
	    "involvedObject", "kind", "Pod", "name", podname,
	    "reason", ACCT_CLAIM_EVENT, "message", msg);
}

TEST(acct_pending_quota)
{
	struct acct_pending p;
	json_t *o;
	struct strset *seen;
	char *big;

	memset(&p, 0, sizeof(p));
	o = pod("ta", "x5", "Pending", false);
	CHECK(acct_pending_waits(o));
	acct_pending_pod(&p, o, "ta", "x5");
	acct_pending_pod(&p, o, "ta", "x5");	/* a duplicate event */
	json_decref(o);
	CHECK_INT(acct_pending_held(&p, "ta"), 1);
	/* waiting, but no refusal yet: not pending on quota */
	CHECK_INT(acct_pending_count(&p, "ta"), 0);
	o = event("ta", "x5.1", "x5", "PodResourceClaim kubeplus-gpu: create "
	    "ResourceClaim : forbidden: exceeded quota: kpgpud-gpu");
	acct_pending_event(&p, o, false);
	json_decref(o);
	CHECK_INT(acct_pending_count(&p, "ta"), 1);
	CHECK_INT(acct_pending_count(&p, "tb"), 0);
	CHECK(strstr(acct_pending_quota_msg(&p, "ta", "x5"),
	    "exceeded quota: kpgpud-gpu") != NULL);
	/* another refusal (not quota) on another Pod counts nothing */
	o = pod("ta", "x6", "Pending", false);
	acct_pending_pod(&p, o, "ta", "x6");
	json_decref(o);
	o = event("ta", "x6.1", "x6", "create ResourceClaim : invalid");
	acct_pending_event(&p, o, false);
	json_decref(o);
	CHECK_INT(acct_pending_count(&p, "ta"), 1);
	/* the claim was created: no longer waiting */
	o = pod("ta", "x5", "Pending", true);
	CHECK(!acct_pending_waits(o));
	acct_pending_pod(&p, o, "ta", "x5");
	json_decref(o);
	CHECK_INT(acct_pending_count(&p, "ta"), 0);
	/* a running Pod never waits */
	o = pod("ta", "x7", "Running", false);
	CHECK(!acct_pending_waits(o));
	json_decref(o);
	/* a long message is cut at the cap */
	big = malloc(2000);
	REQUIRE(big != NULL);
	memset(big, 'q', 1999);
	big[1999] = '\0';
	memcpy(big, "exceeded quota", 14);
	o = pod("ta", "x8", "Pending", false);
	acct_pending_pod(&p, o, "ta", "x8");
	json_decref(o);
	o = event("ta", "x8.1", "x8", big);
	acct_pending_event(&p, o, false);
	json_decref(o);
	free(big);
	CHECK_INT(strlen(acct_pending_quota_msg(&p, "ta", "x8")),
	    ACCT_MESSAGE_MAX);
	/* a relist of Events without x8.1 forgets it */
	seen = strset_new();
	REQUIRE(seen != NULL);
	CHECK_INT(strset_add(seen, "ta/x6.1"), 1);
	acct_pending_event_prune(&p, seen);
	CHECK(acct_pending_quota_msg(&p, "ta", "x8") == NULL);
	strset_free(seen);
	acct_pending_free(&p);
}

/*
 * One tenant's 5,000 waiting Pods and 5,000 refusals (forged Events
 * included) fill only its own namespace's room: another tenant's Pod
 * pending on quota is still tracked and counted, and the flooding
 * namespace holds at most its cap of each.
 */
TEST(acct_pending_caps_per_namespace)
{
	struct acct_pending p;
	const char *names[4], *msg = NULL;
	char name[32], evname[40];
	json_t *o;
	size_t i;

	memset(&p, 0, sizeof(p));
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "flood-%zu", i);
		snprintf(evname, sizeof(evname), "flood-%zu.ev", i);
		o = pod("ta", name, "Pending", false);
		acct_pending_pod(&p, o, "ta", name);
		json_decref(o);
		o = event("ta", evname, name, "exceeded quota: forged");
		acct_pending_event(&p, o, false);
		json_decref(o);
	}
	CHECK(acct_pending_held(&p, "ta") <= 2 * ACCT_PENDING_NS_MAX);
	CHECK(acct_pending_count(&p, "ta") <= ACCT_PENDING_NS_MAX);
	o = pod("tb", "web-0", "Pending", false);
	acct_pending_pod(&p, o, "tb", "web-0");
	json_decref(o);
	o = event("tb", "web-0.1", "web-0", "create ResourceClaim: forbidden: "
	    "exceeded quota: kpgpud-gpu");
	acct_pending_event(&p, o, false);
	json_decref(o);
	CHECK_INT(acct_pending_count(&p, "tb"), 1);
	CHECK_INT(acct_pending_quota_pods(&p, "tb", names, 4, &msg), 1);
	CHECK_STR(names[0], "web-0");
	CHECK(msg != NULL && strstr(msg, "kpgpud-gpu") != NULL);
	/* a namespace that holds nothing any more is dropped */
	o = pod("tb", "web-0", "Running", false);
	acct_pending_pod(&p, o, "tb", "web-0");
	json_decref(o);
	o = event("tb", "web-0.1", "web-0", "");
	acct_pending_event(&p, o, true);
	json_decref(o);
	CHECK_INT(acct_pending_held(&p, "tb"), 0);
	acct_pending_free(&p);
}
