/*
 * Pods that wait for their generated ResourceClaim (Pending, a template
 * claim with no claim yet), and the messages of the
 * FailedResourceClaimCreation Events the resourceclaim controller gave
 * Pods: a waiting Pod whose message says "exceeded quota" is Pending on
 * quota. In memory only; a relist rebuilds both.
 */
#ifndef KPGPUD_SYNC_ACCT_PENDING_H
#define KPGPUD_SYNC_ACCT_PENDING_H

#include <stddef.h>
#include <jansson.h>

#include "kpgpud-sync/reflector.h"

#define ACCT_PENDING_MAX	4096	/* each set */
#define ACCT_MESSAGE_MAX	511
#define ACCT_CLAIM_EVENT	"FailedResourceClaimCreation"

/* A waiting Pod (pod: its name) or a refusal (name: the Event's name). */
struct acct_pending_pod {
	char	 ns[64];
	char	 name[254];
	char	 pod[254];
	char	 msg[ACCT_MESSAGE_MAX + 1];
};

struct acct_pod_set {
	struct acct_pending_pod	*e;
	size_t			 n, alloc;
};

struct acct_pending {
	struct acct_pod_set	 waiting;	/* Pods without their claim */
	struct acct_pod_set	 refused;	/* Event messages by Pod */
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
/* How many wait on quota in namespace ns. */
size_t	 acct_pending_count(const struct acct_pending *p, const char *ns);
/* The i-th waiting Pod (i < p->waiting.n). */
const struct acct_pending_pod *acct_pending_at(const struct acct_pending *p,
	    size_t i);
void	 acct_pending_free(struct acct_pending *p);

#endif
