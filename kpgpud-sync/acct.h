/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-sync's usage accounting: the watches of ResourceClaims and Pods
 * (through the same reflectors as every other collection) feeding the
 * usage ledger in the cache (cache/usage.h), its heartbeat, retention, the
 * tenant metrics and the answers to USAGE queries. The interval logic is
 * ledger.c (pure); acct.c feeds the ledger, acct_tick.c keeps the
 * heartbeat, retention and the tally of closed intervals, acct_metrics.c
 * renders the metrics, acct_ipc.c answers USAGE.
 */
#ifndef KPGPUD_SYNC_ACCT_H
#define KPGPUD_SYNC_ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "kpgpud-sync/reflector.h"

struct syncd;
struct buf;
struct acct;
struct usage_store;

#define ACCT_TICK_MS		1000	/* heartbeat: the bound of a gap */
#define ACCT_ROLLUP_EVERY_MS	60000

/*
 * The four collections: every ResourceClaim (the watch of the claims'
 * allocations, which also feeds the ledger), every Pod, the Events
 * FailedResourceClaimCreation (fieldSelector reason) and kpgpud-quota's
 * Events (fieldSelector reportingComponent: the last reconcile results).
 */
void	 acct_res_claims(struct sync_res *ret);
void	 acct_res_pods(struct sync_res *ret);
void	 acct_res_events(struct sync_res *ret);
void	 acct_res_results(struct sync_res *ret);

/*
 * Set up accounting on sd's cache (after syncd_init): read the last
 * heartbeat, note what a rebuilt or replaced cache lost (the tally of
 * closed intervals kept in cache_path.usage-tally), start the heartbeat.
 * retention_ms: raw intervals older than this are rolled up per hour;
 * hours_ms: rolled-up hours older than this are deleted (0: kept).
 */
int	 acct_new(struct syncd *sd, int64_t retention_ms, int64_t hours_ms,
	    const char *cache_path, struct acct **ret);
void	 acct_free(struct acct *a);

/* Reflector ops for the two collections (the batch is open). */
int	 acct_put(struct acct *a, struct reflector *rf, json_t *obj);
int	 acct_del(struct acct *a, struct reflector *rf, json_t *obj);
int	 acct_prune(struct acct *a, struct reflector *rf,
	    const struct strset *seen);

/* Append the kpgpud_tenant_* metrics (Prometheus text). */
int	 acct_metrics(struct acct *a, struct buf *out);
/* The ledger, for the USAGE handler. */
struct usage_store *acct_store(struct acct *a);
/* Closed intervals reported lost (a rebuilt cache). */
uint64_t acct_lost(struct acct *a);
/* A batch was rolled back: the tenant counters load again. */
void	 acct_rolled_back(struct acct *a);
/* The Pods waiting for their claim and the claim refusals. */
struct acct_pending;
const struct acct_pending *acct_pending(struct acct *a);
/* The last reconcile result of each instance (kpgpud-quota's Events). */
struct acct_results;
const struct acct_results *acct_results(struct acct *a);

/* acct_ipc.c: the USAGE handler of sync.sock (arg: the struct syncd). */
struct ipc_req;
struct ipc_msg;
void	 acct_ipc_usage(struct ipc_req *req, const struct ipc_msg *msg,
	    void *arg);

#endif
