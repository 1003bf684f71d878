/*
 * Pods of the watched namespaces that wait for their generated
 * ResourceClaim (Pending, a template claim with no claim yet): with the
 * tenant's claim quota used up, those are the Pods held back by quota.
 * In memory only; a relist rebuilds it.
 */
#ifndef KPGPUD_SYNC_ACCT_PENDING_H
#define KPGPUD_SYNC_ACCT_PENDING_H

#include <stddef.h>
#include <jansson.h>

#include "kpgpud-sync/reflector.h"

#define ACCT_PENDING_MAX	65536

struct acct_pending_pod {
	char	 ns[64];
	char	 name[254];
};

struct acct_pending {
	struct acct_pending_pod	*pods;
	size_t			 n, alloc;
};

/* Whether a Pod waits for a claim from one of its templates (pure). */
bool	 acct_pending_waits(json_t *pod);
/* Track or untrack a Pod after an event. */
void	 acct_pending_pod(struct acct_pending *p, json_t *obj, const char *ns,
	    const char *name);
void	 acct_pending_forget(struct acct_pending *p, json_t *obj);
/* Drop the Pods a relist no longer has. */
void	 acct_pending_prune(struct acct_pending *p, const struct strset *seen);
/* How many wait in namespace ns. */
size_t	 acct_pending_count(const struct acct_pending *p, const char *ns);
void	 acct_pending_free(struct acct_pending *p);

#endif
