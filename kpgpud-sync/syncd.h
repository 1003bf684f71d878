/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kpgpud-sync core: the reflectors write through it into the cache, one
 * transaction per event-loop turn (a batch); when a batch commits, its
 * changes go to the subscribers of sync.sock. syncd.c holds the batch and
 * the reflector glue, sync_ipc.c the sync.sock handlers, main.c the wiring.
 */
#ifndef KPGPUD_SYNC_SYNCD_H
#define KPGPUD_SYNC_SYNCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "ipc/ipc.h"
#include "cache/cache_write.h"
#include "kpgpud-sync/objects.h"
#include "kpgpud-sync/reflector.h"

struct event_base;
struct event;
struct kube_client;
struct metrics;
struct metric;
struct acct;

#define SYNCD_MAX_RES		32	/* watched collections */
#define SYNCD_MAX_LOOKUPS	64	/* read-through GETs in flight */
#define SYNCD_TOMB_KEEP		100000	/* tombstones kept for deltas */

/* A change committed to the cache, on its way to the subscribers. */
struct syncd_change {
	uint64_t	 gen;
	uint32_t	 topic;		/* IPC_TOPIC_* */
	char		 kind[IPC_KIND_MAX + 1];
	char		 ns[IPC_NS_MAX + 1];
	char		 name[IPC_NAME_MAX + 1];
	bool		 deleted;
	bool		 isolated;
	char		*resolved;	/* owned; NULL = nil */
	uint64_t	 recv_ms;	/* when the event arrived */
};

/* One SUBSCRIBE'd peer. */
struct syncd_sub {
	struct ipc_conn		*conn;
	uint32_t		 topics;
	LIST_ENTRY(syncd_sub)	 entry;
};

struct syncd_metrics {
	struct metrics	*reg;
	struct metric	*objects;	/* gauge by kind */
	struct metric	*restarts;	/* counter by resource, reason */
	struct metric	*relists;	/* counter by resource */
	struct metric	*api_errors;	/* counter by code */
	struct metric	*bad_objects;	/* counter by resource */
	struct metric	*lag;		/* histogram, seconds */
	struct metric	*batches;	/* counter */
	struct metric	*commit_errors;	/* counter */
	struct metric	*subscribers;	/* gauge */
	struct metric	*lookups;	/* counter by result */
	struct metric	*generation;	/* gauge */
	struct metric	*synced;	/* gauge: 1 once first-synced */
	struct metric	*unserved;	/* gauge by resource: 1 while a
					   configured one is not served */
	struct metric	*discovered;	/* gauge: discovered instance
					   resources watched */
};

struct syncd_disc;

struct syncd {
	struct event_base	*base;
	struct cache		*cache;
	struct kube_client	*kc;
	struct reflector	*rf[SYNCD_MAX_RES];
	size_t			 nrf;
	/* per reflector: found by discovery; its list answered 404 */
	bool			 rf_discovered[SYNCD_MAX_RES];
	bool			 rf_unserved[SYNCD_MAX_RES];
	/* why a collection's last list failed ("" once one succeeded):
	   /readyz names what keeps sync unready */
	char			 rf_error[SYNCD_MAX_RES][192];
	struct syncd_disc	*disc;		/* discovery.c; NULL: none */
	bool			 started;	/* syncd_start ran */
	struct reflector_config	 rcfg;		/* for added reflectors */
	size_t			 nsynced;
	bool			 synced;	/* every reflector synced */
	void			(*on_synced)(struct syncd *sd);
	/* the batch */
	bool			 in_batch;
	bool			 batch_failed;
	bool			 announce;	/* on_synced after the commit */
	struct event		*flush_ev;
	struct event		*retry_ev;	/* relist after a lost batch */
	uint64_t		 retry_ms;
	struct event		*housekeep_ev;
	struct syncd_change	*pending;
	size_t			 npending, apending;
	/* sync.sock */
	struct ipc_server	*srv;
	LIST_HEAD(, syncd_sub)	 subs;
	unsigned		 nsubs;
	unsigned		 nlookups;
	struct syncd_metrics	 m;
	struct acct		*acct;		/* usage ledger (acct.c) */
	/* keys of the one claims watch whose last object made no
	   allocation row (malformed) while the ledger took it */
	struct strset		*claims_bad;
	/* counters also shown in STATUS */
	uint64_t		 n_relists, n_restarts, n_api_errors;
	uint64_t		 n_bad_objects, n_commit_errors;
};

/*
 * Set up sd on base with an open cache and a kube client: register the
 * metrics in reg (may be NULL) and create a reflector per collection.
 */
int	 syncd_init(struct syncd *sd, struct event_base *base,
	    struct cache *cache, struct kube_client *kc, struct metrics *reg,
	    const struct sync_res *res, size_t nres,
	    const struct reflector_config *rcfg);
/*
 * Start every reflector: resume its watch from the resourceVersion stored
 * in the cache, or list. Instance rows of collections no longer configured
 * are deleted first.
 */
int	 syncd_start(struct syncd *sd);
/* Commit the open batch now and publish its changes. */
void	 syncd_flush(struct syncd *sd);
/* Open the batch of this loop turn unless one is open (for acct.c). */
int	 syncd_begin(struct syncd *sd);
/* Stop the reflectors, commit, free everything but the cache and client. */
void	 syncd_fini(struct syncd *sd);
/* Refresh the per-kind object gauges from the cache. */
void	 syncd_update_gauges(struct syncd *sd);
/*
 * Watch one more instance collection (gvr), resuming from the cache's
 * resourceVersion once started. 0 when added, 1 when already watched,
 * -EINVAL, -E2BIG (SYNCD_MAX_RES), -ENOMEM.
 */
int	 syncd_add_instance(struct syncd *sd, const char *gvr,
	    bool discovered);
/* discovery.c: the first pass is complete; an API error to count. */
void	 syncd_disc_complete(struct syncd *sd);
void	 syncd_disc_api_error(struct syncd *sd, long status);
/*
 * The configured collections the API does not serve (their list answered
 * 404), at most max keys into keys (borrowed). Returns how many there are.
 */
/*
 * The collections not synced yet, up to max of them: their keys and why
 * their last list failed ("" while the first list is under way).
 */
size_t	 syncd_unsynced(const struct syncd *sd, const char **keys,
	    const char **why, size_t max);
size_t	 syncd_unserved(const struct syncd *sd, const char **keys,
	    size_t max);

/* ---- sync_ipc.c ---- */

struct syncd_ipc_config {
	const char	*path;
	int		 listen_fd;	/* -1: bind path */
	const uid_t	*uids;
	size_t		 nuids;
	size_t		 max_outbuf;	/* per peer; a slower one is dropped */
	/* uids bound to the admit, quota and ctl roles (none: unbound) */
	const uid_t	*role_uids[IPC_ROLE_COUNT];
	size_t		 nrole_uids[IPC_ROLE_COUNT];
};

/* Serve sync.sock for sd. */
int	 syncd_ipc_start(struct syncd *sd, const struct syncd_ipc_config *cfg);
void	 syncd_ipc_stop(struct syncd *sd);
/* Send one committed change to every subscriber of its topic. */
void	 syncd_ipc_publish(struct syncd *sd, const struct syncd_change *ch);

#endif
