/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inside of kpgpud-quota's core (quota.h is its outside), shared by
 * its parts:
 *   quota.c   start and stop, the Lease's leadership, the periodic
 *             resync, the metrics;
 *   queue.c   the queue's driver: keys handed out one at a time while
 *             this replica may write, started by their kind from a table
 *             (tenant namespace, DeviceClass collector, admission
 *             policies), finished: counted, forgotten or backed off;
 *   work.c    the work of one key: a tenant namespace read, planned and
 *             diffed, the plans kept for tenants back soon, and the
 *             writes of every kind of key run in order;
 *   verify.c  a create of ours refused with 409 or 403: what holds the
 *             name read and verified, replaced when not ours (uid
 *             precondition, ImpostorReplaced);
 *   gc.c      the DeviceClass collector and the admission policies'
 *             parameter ConfigMap.
 * Not for other modules.
 */
#ifndef KPGPUD_QUOTA_QUOTA_INT_H
#define KPGPUD_QUOTA_QUOTA_INT_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kube/kube.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/strmap.h"
#include "common/util.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/reconcile.h"
#include "kpgpud-quota/topology_src.h"
#include "cache/cache.h"

/* A key ended because this replica may no longer write. */
#define QUOTAD_NOT_LEADER	(-EPERM)

/* The key in process and everything it needs until its writes are done. */
struct qwork {
	struct quotad		*q;
	char			 key[WQ_KEY_MAX + 1];
	struct plan		*plan;		/* NULL: clean up */
	struct rc_observed	 obs;
	uint32_t		 ev_key[RC_MAX_ACTIONS];	/* of each event */
	int			 next;		/* index over ev then acts */
	struct kube_req		*req;
	struct kube_list	*list;		/* the collector's claim list */
	bool			 keep[RC_MAX_ACTIONS];	/* class still
						   requested: not deleted */
	bool			 requeue;	/* look again after a backoff */
	const char		*result;	/* metric label */
	struct plan_instance	 inst;		/* the plan's instance */
	char			 inst_rv[64];
	bool			 has_inst;
	struct plan_topology	*topo;		/* the tenant's, or NULL */
	/* a create answered 409 or 403 (verify.c): read, verify, replace */
	int			 vstep;
	int			 vnext;		/* after the report */
	bool			 vimpostor;
	bool			 vdeleting;
	char			 vwhy[RC_WHY_MAX];
	char			 vuid[PLAN_UID_MAX + 1];
	char			*vbody;		/* delete or event body */
	char			*params;	/* non-GPU classes, for the
						   policies' ConfigMap */
	struct qpol		*pol;		/* the admission policies' pass */
	/* the Namespace row was read with every patch of ours streamed */
	bool			 ns_current;
	/* changes of this tenant that came while it was in process */
	int			 ndefer;
	struct ipc_change	 defer[QUOTAD_DEFER_MAX];
	/* last: item_new leaves their entries (260 KB) as they are */
	struct rc_actions	 ev;		/* events, first */
	struct rc_actions	 acts;		/* the diff */
	struct quotad_cands	 cands;		/* the tenant's instances */
};

/*
 * queue.c: end the key in process with r (0 or -errno) and take the next
 * one; the kick event's callback; cancel the key in process, if any.
 */
void	 queue_finish(struct qwork *w, int r);
void	 queue_kick_cb(evutil_socket_t fd, short what, void *arg);
void	 queue_cancel(struct quotad *q);

/*
 * work.c: run w's next write (the key ends after the last); end the key
 * after a failed read of what; start reconciling tenant namespace ns
 * (0, or -errno and the key is not ended); keep w's plan when its tenant
 * comes back soon, as r and w->requeue say; free every plan kept.
 */
void	 work_next(struct qwork *w);
void	 work_read_failed(struct qwork *w, const char *what,
	    const struct kube_response *resp);
int	 work_ns(struct qwork *w, struct cache *c, const char *ns);
void	 work_keep_plan(struct qwork *w, int r);
void	 work_plans_free(struct quotad *q);

/* verify.c: a create of ours, a, refused as the name is taken: verify. */
void	 verify_start(struct qwork *w, const struct rc_action *a);

/*
 * gc.c: start the DeviceClass collector (rest: unused). 0, or -errno and
 * the key is not ended.
 */
int	 gc_start(struct qwork *w, struct cache *c, const char *rest);

#endif
