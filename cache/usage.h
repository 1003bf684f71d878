/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The usage ledger in the cache (kpgpud-sync writes it; see
 * kpgpud-sync/ledger.h for what an interval is). Writes join the cache's
 * open transaction (cache_begin/cache_commit), so an interval and the
 * watch position that produced it are committed together. Times are
 * microseconds since the epoch; 0 means unknown or open.
 */
#ifndef KPGPUD_CACHE_USAGE_H
#define KPGPUD_CACHE_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

#define USAGE_HOUR_US		3600000000ull

struct usage_store;

/* One device row of an interval being opened; strings borrowed. */
struct usage_row {
	const char	*claim_uid;
	uint64_t	 start_us;
	unsigned	 dev;
	const char	*ns;
	const char	*instance;
	const char	*claim;
	const char	*driver;
	const char	*pool;
	const char	*device;
	const char	*device_class;
	const char	*profile;
	double		 share;
	const char	*sig;
	int		 start_how;
	uint64_t	 lo_us;
};

enum usage_by {
	USAGE_BY_TENANT = 0,
	USAGE_BY_CLAIM,
	USAGE_BY_POD,
	USAGE_BY_DEVICE,
};

/* One aggregated row of a usage query; strings valid during the call. */
struct usage_sum {
	const char	*ns;
	const char	*instance;
	const char	*key;		/* claim, pod, driver/pool/device or "" */
	const char	*device_class;
	const char	*profile;
	uint64_t	 device_us;
	double		 gpu_us;
	uint64_t	 intervals;	/* distinct intervals (0: rolled up) */
	uint64_t	 bounded;	/* of them with a bounded end */
	uint64_t	 open;		/* of them still open */
};

/*
 * An open interval (one per claim), as usage_open_foreach gives it: of the
 * usage_row, claim_uid, ns, claim, sig and start_us are set.
 */
typedef int (*usage_open_cb)(const struct usage_row *o, void *arg);
typedef int (*usage_sum_cb)(const struct usage_sum *s, void *arg);

/* Prepare the ledger's statements on the writer's (or a reader's) cache. */
int	 usage_store_open(struct cache *c, struct usage_store **ret);
void	 usage_store_free(struct usage_store *s);

/* The open interval of a claim: 0 (found), -ENOENT. sig is copied. */
int	 usage_open_get(struct usage_store *s, const char *claim_uid,
	    uint64_t *ret_start, char *sig, size_t siglen);
/* Every open interval, one call per claim. */
int	 usage_open_foreach(struct usage_store *s, usage_open_cb cb,
	    void *arg);
/* Add one device row (a duplicate key is ignored). */
int	 usage_row_add(struct usage_store *s, const struct usage_row *r);
/*
 * Close an open interval; hi_us is the latest the end can be. An end
 * before the start, or a latest end before the end (and so before the
 * start), is refused with -EINVAL, nothing written (an end equal to the
 * start is an interval of no length; hi_us equal to the end is an end
 * known exactly). usage_close_refused says why, NULL when it would not.
 */
int	 usage_close(struct usage_store *s, const char *claim_uid,
	    uint64_t start_us, uint64_t end_us, int how, uint64_t hi_us);
const char *usage_close_refused(uint64_t start_us, uint64_t end_us,
	    uint64_t hi_us);
/* The latest end of a closed interval on a device (0: none). */
int	 usage_prev_end(struct usage_store *s, const char *driver,
	    const char *pool, const char *device, uint64_t *ret);

/* The Pods that use claims: their start and finish (0 unknown). */
typedef int (*usage_key_cb)(const char *ns, const char *name, void *arg);
int	 usage_pod_put(struct usage_store *s, const char *uid, const char *ns,
	    const char *name, uint64_t start_us, uint64_t finish_us);
int	 usage_pod_get(struct usage_store *s, const char *uid,
	    uint64_t *ret_start, uint64_t *ret_finish);
int	 usage_pod_del(struct usage_store *s, const char *ns,
	    const char *name);
int	 usage_pod_foreach(struct usage_store *s, usage_key_cb cb, void *arg);

/* Whether the ledger has any interval of a claim (namespace, name). */
int	 usage_claim_known(struct usage_store *s, const char *ns,
	    const char *claim, bool *ret);

/*
 * Record a consumer of an interval (a duplicate is ignored), with the
 * Pod's times when usage_pods knows them.
 */
int	 usage_consumer_add(struct usage_store *s, const char *claim_uid,
	    uint64_t start_us, const char *pod_uid, const char *pod_name);
/*
 * The consumers of an interval: earliest known start, latest finish (0
 * while any is unfinished or none is known).
 */
int	 usage_consumer_times(struct usage_store *s, const char *claim_uid,
	    uint64_t start_us, uint64_t *ret_start, uint64_t *ret_finish);
/* An interval a Pod consumed, for refining its ends. */
struct usage_span {
	const char	*claim_uid;
	uint64_t	 start_us;
	int		 start_how;
	uint64_t	 lo_us;
	uint64_t	 end_us;	/* 0 open */
	int		 end_how;
	uint64_t	 hi_us;
};
typedef int (*usage_span_cb)(const struct usage_span *sp, void *arg);

/* Store a Pod's start and finish with its consumer rows. */
int	 usage_pod_set(struct usage_store *s, const char *pod_uid,
	    uint64_t start_us, uint64_t finish_us);
/* Every interval the Pod consumed. */
int	 usage_pod_spans(struct usage_store *s, const char *pod_uid,
	    usage_span_cb cb, void *arg);
/*
 * Move an interval's start (key included) or its end, with how. A start
 * after a closed interval's end, or an end before its start, is refused
 * with -EINVAL, nothing written.
 */
int	 usage_set_start(struct usage_store *s, const char *claim_uid,
	    uint64_t old_start, uint64_t new_start, int how);
int	 usage_set_end(struct usage_store *s, const char *claim_uid,
	    uint64_t start_us, uint64_t end_us, int how);

/* The last moment sync was known alive (meta), 0 when never set. */
int	 usage_alive_get(struct usage_store *s, uint64_t *ret);
int	 usage_alive_set(struct usage_store *s, uint64_t us);

/*
 * Sums over [since, until) at now (open intervals count up to now), by
 * tenant, claim, pod or device, in (namespace, instance, key, class,
 * profile) order. Rolled-up hours count (key "") when they lie inside the
 * window.
 */
int	 usage_query(struct usage_store *s, enum usage_by by, uint64_t since,
	    uint64_t until, uint64_t now, usage_sum_cb cb, void *arg);
/* Devices held now per (namespace, instance, class, profile): open = n. */
int	 usage_held(struct usage_store *s, usage_sum_cb cb, void *arg);
/*
 * The two parts of usage_query by tenant over all time, in its order and
 * without intervals, bounded and open: the closed device rows of one
 * interval (claim uid, start), and every open row counted up to now.
 * With the closed rows and hours of usage_query(USAGE_BY_TENANT, 0, ...,
 * now 0) they keep its sums without reading every interval again.
 */
int	 usage_interval_sums(struct usage_store *s, const char *claim_uid,
	    uint64_t start_us, usage_sum_cb cb, void *arg);
int	 usage_open_sums(struct usage_store *s, uint64_t now, usage_sum_cb cb,
	    void *arg);

/*
 * Retention: roll the intervals that closed before cutoff_us up into hours
 * and delete them with their consumers; delete the rolled-up hours before
 * hours_us (0: keep them all). *ret_rows counts interval rows removed.
 */
int	 usage_rollup(struct usage_store *s, uint64_t cutoff_us,
	    uint64_t hours_us, uint64_t *ret_rows);
/* The rolled-up hours before hours_us (what usage_rollup would delete). */
int	 usage_hours_before(struct usage_store *s, uint64_t hours_us,
	    uint64_t *ret);
/* Row counts: intervals (device rows), hourly rows. */
int	 usage_counts(struct usage_store *s, uint64_t *ret_rows,
	    uint64_t *ret_hourly);

/* Record lost closed intervals (a rebuilt cache); sum them. */
int	 usage_lost_add(struct usage_store *s, uint64_t at_us,
	    uint64_t intervals, const char *note);
int	 usage_lost_total(struct usage_store *s, uint64_t *ret,
	    uint64_t *ret_events);
/*
 * Intervals ever closed in this ledger (rolled-up ones included): compared
 * with the tally kept beside the cache, it shows what a rebuilt or removed
 * cache lost.
 */
int	 usage_closed_get(struct usage_store *s, uint64_t *ret);
int	 usage_closed_set(struct usage_store *s, uint64_t n);

#endif
