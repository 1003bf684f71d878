/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The last reconcile result of each tenant instance: the newest Warning
 * Event kpgpud-quota reported on it (reportingComponent kpgpud-quota:
 * InvalidGPUIsolation, DriverFeatureGateRequired, NeverAllocatable ...),
 * with the instance resourceVersion it was about. A Normal Event (a notice
 * such as ExperimentalHybridSharing: the plan was applied) is no result.
 * One entry per instance; in memory only, a relist rebuilds it.
 *
 * Only an Event in the namespace kpgpud-quota writes in counts: the
 * instance's own (a cluster-scoped instance's: "default"), so a tenant's
 * Event naming another namespace's instance, whatever its
 * reportingComponent, is ignored. Entries are capped per namespace of the
 * Event (ACCT_RESULTS_NS_MAX), so the Events of one namespace never
 * displace another's.
 */
#ifndef KPGPUD_SYNC_ACCT_RESULT_H
#define KPGPUD_SYNC_ACCT_RESULT_H

#include <stddef.h>
#include <jansson.h>

#include "kpgpud-sync/reflector.h"

#define ACCT_RESULTS_NS_MAX	64	/* instances per Event namespace */
#define ACCT_RESULT_MSG_MAX	255
#define ACCT_RESULT_SOURCE	"kpgpud-quota"

struct acct_result {
	char	 ev_ns[64];		/* the Event */
	char	 ev_name[254];
	char	 kind[64];		/* the instance */
	char	 ns[64];
	char	 name[254];
	char	 rv[64];		/* involvedObject.resourceVersion */
	char	 reason[128];
	char	 ts[40];		/* lastTimestamp (RFC 3339) */
	char	 msg[ACCT_RESULT_MSG_MAX + 1];
};

struct acct_results {
	struct acct_result	*e;
	size_t			 n, alloc;
};

/* An Event of kpgpud-quota was put (deleted: false) or deleted. */
void	 acct_result_event(struct acct_results *s, json_t *ev, bool deleted);
/* Drop the entries whose Event a relist no longer has. */
void	 acct_result_prune(struct acct_results *s, const struct strset *seen);
/* The newest result of an instance (ns "" when cluster-scoped), or NULL. */
const struct acct_result *acct_result_get(const struct acct_results *s,
	    const char *kind, const char *ns, const char *name);
void	 acct_result_free(struct acct_results *s);

#endif
