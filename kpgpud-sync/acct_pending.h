/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pods that wait for their generated ResourceClaim (Pending, a template
 * claim with no claim yet), and the messages of the
 * FailedResourceClaimCreation Events the resourceclaim controller gave
 * Pods: a waiting Pod whose message says "exceeded quota" is Pending on
 * quota. In memory only; a relist rebuilds both.
 *
 * Kept per namespace, each namespace capped on its own (a tenant's Pods
 * and Events, forged ones included, fill only its own namespace's room and
 * never displace another tenant's), looked up by name in O(1).
 */
#ifndef KPGPUD_SYNC_ACCT_PENDING_H
#define KPGPUD_SYNC_ACCT_PENDING_H

#include <stddef.h>
#include <jansson.h>

#include "kpgpud-sync/reflector.h"

#define ACCT_PENDING_NS_MAX	512	/* waiting Pods, and refusals, per
					   namespace */
#define ACCT_MESSAGE_MAX	511
#define ACCT_CLAIM_EVENT	"FailedResourceClaimCreation"

struct strmap;

/* Namespace name -> its waiting Pods and refusals; NULL until the first. */
struct acct_pending {
	struct strmap	*by_ns;
};

/* Whether a Pod waits for a claim from one of its templates (pure). */
bool	 acct_pending_waits(json_t *pod);
/* Track or untrack a Pod after an event. */
void	 acct_pending_pod(struct acct_pending *p, json_t *obj, const char *ns,
	    const char *name);
void	 acct_pending_forget(struct acct_pending *p, json_t *obj);
/* Drop the Pods a relist no longer has. */
void	 acct_pending_prune(struct acct_pending *p, const struct strset *seen);
/* A FailedResourceClaimCreation Event was put (deleted: false) or deleted. */
void	 acct_pending_event(struct acct_pending *p, json_t *ev, bool deleted);
/* Drop the Event messages a relist of Events no longer has. */
void	 acct_pending_event_prune(struct acct_pending *p,
	    const struct strset *seen);
/* The quota message of a waiting Pod, or NULL when not refused by quota. */
const char *acct_pending_quota_msg(const struct acct_pending *p,
	    const char *ns, const char *name);
/*
 * How many wait on quota in namespace ns; the names of the first max of
 * them go to ret_names (may be NULL when max is 0) and one of their
 * messages to *ret_msg (may be NULL; untouched when none waits).
 */
size_t	 acct_pending_quota_pods(const struct acct_pending *p, const char *ns,
	    const char **ret_names, size_t max, const char **ret_msg);
/* How many wait on quota in namespace ns. */
size_t	 acct_pending_count(const struct acct_pending *p, const char *ns);
/* Waiting Pods and refusals held in namespace ns (tests and figures). */
size_t	 acct_pending_held(const struct acct_pending *p, const char *ns);
void	 acct_pending_free(struct acct_pending *p);

#endif
