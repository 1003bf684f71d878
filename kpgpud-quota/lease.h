/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election through a coordination.k8s.io/v1 Lease, so that only one
 * kpgpud-quota replica writes. The decision is pure (lease_decide: observed
 * Lease + local clock -> what to write); the driver runs it every retry
 * period on the event loop with GET then POST / PUT, the PUT carrying the
 * observed resourceVersion as precondition.
 *
 * Safety: a candidate takes over only after the holder's record stayed
 * unchanged for leaseDurationSeconds by the candidate's own clock; a leader
 * stops writing once its last successful renewal is older than the renew
 * deadline (2/3 of the duration), before anyone else may take over.
 */
#ifndef KPGPUD_QUOTA_LEASE_H
#define KPGPUD_QUOTA_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#define LEASE_ID_MAX	128
#define LEASE_TIME_LEN	sizeof("2026-11-29T09:47:05.123456Z")

struct event_base;
struct kube_client;
struct metric;

struct lease_config {
	const char	*ns;		/* Lease namespace */
	const char	*name;		/* Lease name */
	const char	*identity;	/* this replica, unique */
	unsigned	 duration_s;	/* leaseDurationSeconds */
};

/* The elector's memory between decisions. */
struct lease_elector {
	char		 ns[64], name[254], identity[LEASE_ID_MAX + 1];
	unsigned	 duration_s;
	bool		 leader;
	uint64_t	 renewed_ms;	/* monotonic time of our last renewal */
	/* someone else's record and when we first saw it like this */
	char		 seen_holder[LEASE_ID_MAX + 1];
	char		 seen_renew[LEASE_TIME_LEN + 8];
	char		 seen_rv[64];
	uint64_t	 seen_ms;
	uint64_t	 transitions;	/* times we became leader */
};

enum lease_action {
	LEASE_WAIT = 0,		/* someone else holds it */
	LEASE_CREATE,		/* POST the body */
	LEASE_UPDATE,		/* PUT the body (resourceVersion precondition) */
};

/* Initialise an elector. 0 or -EINVAL (names or identity too long). */
int	 lease_elector_init(struct lease_elector *e,
	    const struct lease_config *cfg);
/*
 * Decide what to write given the observed Lease (NULL: it does not exist),
 * the monotonic time and the wall-clock time (ms since the epoch). On
 * CREATE or UPDATE *ret_body is the object to send (caller json_decref()s).
 * Also drops leadership when the Lease shows another holder.
 */
enum lease_action lease_decide(struct lease_elector *e, json_t *observed,
	    uint64_t now_ms, uint64_t wall_ms, json_t **ret_body);
/*
 * The Lease that gives ours up (client-go's release: holderIdentity "",
 * leaseDurationSeconds 1, acquireTime = renewTime = wall_ms, transitions
 * kept). NULL when ours has no spec or on allocation failure.
 */
json_t	*lease_release_body(const json_t *ours, uint64_t wall_ms);
/* Record the outcome of our write (ok: 200/201). */
void	 lease_written(struct lease_elector *e, bool ok, uint64_t now_ms);
/* Whether we may write now: leader and renewed within the deadline. */
bool	 lease_is_leader(const struct lease_elector *e, uint64_t now_ms);
/* The renew deadline in ms (2/3 of the duration). */
uint64_t lease_renew_deadline_ms(const struct lease_elector *e);
/* MicroTime text "2006-01-02T15:04:05.000000Z" of wall_ms. */
void	 lease_microtime(uint64_t wall_ms, char out[LEASE_TIME_LEN]);

/* ---- the driver on the event loop ---- */

struct lease;

/* Leadership changed (leader true: start writing; false: stop). */
typedef void (*lease_change_cb)(bool leader, void *arg);

/*
 * Start electing on base with client every retry_ms (0: duration / 10).
 * writes (may be NULL) counts Lease writes by verb. 0 or -errno.
 */
int	 lease_new(struct event_base *base, struct kube_client *client,
	    const struct lease_config *cfg, unsigned retry_ms,
	    struct metric *writes, lease_change_cb cb, void *arg,
	    struct lease **ret);
/* Stop (no callback) and free; NULL-safe. */
void	 lease_free(struct lease *l);
/* Whether this replica may write now. */
bool	 lease_leader(const struct lease *l);
struct kube_config;
/*
 * On a graceful stop: if we hold the Lease, write lease_release_body()
 * (blocking, within timeout_ms) so another replica takes over at once.
 * 0 or -errno.
 */
int	 lease_release(struct lease *l, struct kube_config *cfg,
	    unsigned timeout_ms);
/* The elector state (for status and tests). */
const struct lease_elector *lease_state(const struct lease *l);

#endif
