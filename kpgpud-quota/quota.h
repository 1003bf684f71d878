/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kpgpud-quota core: a work queue of tenant namespaces fed by
 * kpgpud-sync's change stream and a periodic resync; each key is
 * reconciled by reading the cache (instances, Namespace row, owned
 * objects) and the namespace's ResourceQuotas, planning (plan.c), diffing
 * (reconcile.c) and running the writes one by one, only while this replica
 * holds the Lease. This header is the core's outside and the calls between
 * its parts; quota_int.h is the inside of the queue and the writes.
 *
 * FILE MAP of kpgpud-quota/:
 *   main.c            the daemon: options, config file, kube client, metrics
 *   quota.h           the core: struct quotad, its config, its parts' calls
 *   quota_int.h       the inside of the queue and writes: the work item
 *   quota.c           the core's start and stop, leadership, resync, metrics
 *   queue.c           the queue's driver: dispatch by kind, finish, backoff
 *   work.c            one key's work: a tenant planned and diffed; the writes
 *   verify.c          a create refused (409/403): verify, replace impostors
 *   gc.c              the DeviceClass collector, the parameter ConfigMap
 *   quota_src.c       the inputs: cache, sync's change stream, full enqueue
 *   quota_policies.c  one pass over the admission policies (their key),
 *                     the injecting mutating ones kept or removed by
 *                     --injection
 *   own.c             our own writes streamed back wake no reconcile
 *   classes.c         the cluster's DeviceClasses, read again on change
 *   workqueue.h       the rate-limited work queue of string keys, pure
 *   workqueue.c       the queue itself: keys, ready FIFO, delays, bucket
 *   lease.h           leader election through a coordination.k8s.io Lease
 *   lease.c           the election's pure decision and its driver
 *   annotation.h      the gpu-isolation annotation's fields and limits
 *   annotation.c      the annotation parsed and validated, pure
 *   plan.h            the plan: instance + annotation -> objects, pure
 *   plan.c            the plan's objects, quota keys and Namespace metadata
 *   plan_checks.c     the plan's refusals: feature gates, never allocatable
 *   plan_classes.c    which DeviceClasses are GPU classes (strict quota)
 *   reconcile.h       plan + observed -> ordered writes, pure
 *   reconcile.c       the diff, the write bodies, the ownership verdicts
 *   policies.h        the admission policies' file: read, check, compare
 *   policies.c        the file read and checked, objects compared, pure
 *   topology.h        topology isolation's pure half: domains, selectors
 *   topology.c        the fleet, the domains assigned, the selectors
 *   topology_src.h    topology isolation's cache half: its index
 *   topology_src.c    the index read from the cache, a tenant's topology
 */
#ifndef KPGPUD_QUOTA_QUOTA_H
#define KPGPUD_QUOTA_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "ipc/ipc.h"
#include "kpgpud-quota/lease.h"
#include "kpgpud-quota/plan.h"
#include "kpgpud-quota/policies.h"
#include "kpgpud-quota/workqueue.h"

#define QUOTAD_GC_KEY		"classes"	/* the DeviceClass collector */
#define QUOTAD_POLICIES_KEY	"admission-policies"	/* quota_policies.c */
#define QUOTAD_NS_PREFIX	"ns/"
#define QUOTAD_MAX_CANDIDATES	16	/* instances per namespace considered */
#define QUOTAD_EVENTS_SEEN	1024	/* reported events remembered */
/* Namespaces patched whose change sync has not streamed back yet. */
#define QUOTAD_NS_SENT_MAX	65536
/* Objects written whose change sync has not streamed back yet (own.c). */
#define QUOTAD_OWN_MAX		262144
/* Changes of the tenant in process, looked at when it is done. */
#define QUOTAD_DEFER_MAX	8
/* Changes that may be our own writes, held until the worker is free. */
#define QUOTAD_LATER_MAX	256
/*
 * Plans kept for tenants expected back soon (their quota not enforced
 * yet, an object terminating, a failed write): about 11 KB each.
 */
#define QUOTAD_PLANS_KEPT	1024
/* Non-GPU DeviceClasses named in the parameter ConfigMap; past it the
   rest stay unlisted, so their claims are denied (fail closed). */
#define QUOTAD_MAX_NON_GPU	1024

struct event_base;
struct event;
struct kube_client;
struct kube_config;
struct cache;
struct metrics;
struct metric;
struct qwork;
struct strmap;
struct quotad_topo;

/*
 * classes.c: the cluster's DeviceClasses from the cache, kept between
 * reconciles and read again when a class row changed (see classes.c).
 */
struct quotad_classes {
	int		 ngpu;
	char		**gpu;		/* GPU classes (plan_class_is_gpu),
					   sorted by name */
	int		 nnon_gpu;
	char		*non_gpu;	/* the others, space-separated */
	bool		 non_gpu_over;	/* more than QUOTAD_MAX_NON_GPU */
	int		 nours;
	char		**ours;		/* kpgpud's (its managed-by label) */
	struct cache	*c;		/* the cache they were read from */
	uint64_t	 gen;		/* its generation then; 0: none */
	uint64_t	 reads;		/* reads of every class row */
};

struct quotad_config {
	struct plan_config	 plan;
	const char		*cache_path;
	const char		*sync_socket;
	uid_t			 sync_uids[IPC_UIDS_MAX];
	size_t			 nsync_uids;
	const char		*gpu_drivers;	/* NULL: the plan's default */
	uint64_t		 resync_ms;
	struct wq_config	 wq;
	bool			 leader_elect;
	struct lease_config	 lease;
	unsigned		 lease_retry_ms;
	/*
	 * The admission policies' parameter ConfigMap (params_name "": not
	 * maintained): non-gpu-classes, and quota-user when params_user is
	 * set; written with the DeviceClass collector's key.
	 */
	char			 params_ns[PLAN_LABEL_MAX + 1];
	char			 params_name[PLAN_NAME_MAX + 1];
	const char		*params_user;
	/* the admission policies to apply and keep (NULL: none) */
	const struct policies	*policies;
	/*
	 * The MutatingAdmissionPolicy and binding that inject the claim
	 * (NULL: none): kept while injection resolves to policy, removed
	 * (those labelled as ours) while it resolves to webhook.
	 */
	const struct policies	*mpolicies;
	enum policies_injection	 injection;
};

struct quotad_metrics {
	struct metric	*reconciles;	/* counter by result */
	struct metric	*invalid;	/* counter */
	struct metric	*depth;		/* gauge */
	struct metric	*writes;	/* counter by verb */
	struct metric	*leader;	/* gauge */
	struct metric	*resyncs;	/* counter */
	struct metric	*impostors;	/* counter by kind */
	struct metric	*classes;	/* gauge: GPU classes closed */
	struct metric	*pol_repairs;	/* counter by kind */
	struct metric	*pol_in_place;	/* gauge: policies as the file says */
	struct metric	*own;		/* counter: own writes streamed back */
};

struct quotad {
	struct quotad_config	 cfg;
	struct event_base	*base;
	struct kube_client	*kc;
	struct cache		*cache;
	struct ipc_sub		*sub;		/* sync's change stream */
	struct quotad_topo	*topo;		/* topology_src.c's index */
	struct lease		*lease;
	struct wq		*wq;
	struct event		*kick_ev;
	struct event		*resync_ev;
	struct quotad_metrics	 m;
	struct qwork		*cur;		/* the key in process */
	bool			 leader;	/* last reported */
	bool			 cache_warned;
	/* events already on the server, by hash: not posted again */
	uint32_t		 seen[QUOTAD_EVENTS_SEEN];
	unsigned		 nseen;
	/* admission policies this replica has had in place */
	bool			 pol_seen[2 * POLICIES_MAX];	/* then mpolicies */
	int			 inject_by_policy;	/* auto's last answer:
							   -1 not asked yet */
	/*
	 * Namespaces this replica patched whose next change from sync has
	 * not arrived yet: their cache rows may lag behind our own write.
	 */
	struct strmap		*ns_sent;
	bool			 ns_sent_lost;	/* a patch not remembered */
	/* own.c: objects we wrote, by "Kind/ns/name", until streamed back */
	struct strmap		*own;
	bool			 own_full;	/* a write not remembered */
	struct ipc_change	*later;		/* held, QUOTAD_LATER_MAX */
	int			 nlater;
	struct quotad_classes	 classes;	/* classes.c */
	struct qwork		*spare;		/* a work item's memory, kept */
	/*
	 * Tenant namespace -> its last plan, kept while the tenant is
	 * expected back (the reconcile after its quota is enforced builds
	 * the same plan): served again only if plan_serves says so.
	 */
	struct strmap		*plans;
};

/*
 * Register the metrics in reg, connect to sync, start electing (or not)
 * and resyncing. cfg's strings must outlive q. 0 or -errno.
 */
int	 quotad_start(struct quotad *q, struct event_base *base,
	    struct kube_client *kc, struct metrics *reg,
	    const struct quotad_config *cfg);
/* Stop everything (a write in flight is cancelled). */
void	 quotad_stop(struct quotad *q);
/* Give up the Lease if we hold it (graceful stop); 0 or -errno. */
int	 quotad_release(struct quotad *q, struct kube_config *cfg);
/* Refresh the gauges (queue depth, leader) before rendering metrics. */
void	 quotad_update_gauges(struct quotad *q);

/*
 * classes.c: the DeviceClasses of cache c into s, read again only when a
 * class changed since the last call (drivers: the GPU drivers, NULL for
 * the plan's default). -EAGAIN until sync has listed the DeviceClasses;
 * 0 or -errno (s then holds none). quotad_classes_free empties s.
 */
int	 quotad_classes_get(struct quotad_classes *s, struct cache *c,
	    const char *drivers);
void	 quotad_classes_free(struct quotad_classes *s);

/* quota.c: whether this replica may write now. */
bool	 quotad_may_write(const struct quotad *q);

/*
 * queue.c: queue a key (a namespace, the class collector, the policies)
 * and look at the queue from the event loop soon.
 */
void	 queue_enqueue(struct quotad *q, const char *key);
void	 queue_enqueue_ns(struct quotad *q, const char *ns);
void	 queue_kick(struct quotad *q);
/*
 * sync streamed a change of an object in tenant namespace ns (not a
 * delete): queue the tenant unless the change is our own last write
 * (own.c); a change of the tenant in process is looked at when it is done.
 */
void	 queue_change_ns(struct quotad *q, const struct ipc_change *ch,
	    const char *ns);

/* work.c: sync streamed a change of Namespace ns: its cache row is current. */
void	 work_ns_seen(struct quotad *q, const char *ns);

/*
 * quota_policies.c: one pass over cfg.policies, reading each object and
 * creating or restoring it; done(r, requeue, arg) runs once at the end
 * (r -EPERM: no longer leader). 0 or -errno; *ret is set before any
 * callback, for qpol_free (which cancels).
 */
struct qpol;
typedef void (*qpol_done_cb)(int r, bool requeue, void *arg);
int	 qpol_start(struct quotad *q, qpol_done_cb done, void *arg,
	    struct qpol **ret);
void	 qpol_free(struct qpol *s);

/*
 * own.c: remember what a 2xx write of ours (method, the answer's object)
 * left; whether a streamed change is exactly that write, nothing after it.
 */
void	 quotad_own_wrote(struct quotad *q, const char *method, json_t *obj);
bool	 quotad_own_echo(struct quotad *q, struct cache *c,
	    const struct ipc_change *ch);
/* Forget every write (a snapshot from sync begins), held changes looked at. */
void	 quotad_own_reset(struct quotad *q);
/*
 * Hold a change that may be our write until quotad_own_settle (false: look
 * at it now); look at the held ones, queueing the tenants of those not
 * ours; forget them (quotad_stop).
 */
bool	 quotad_own_later(struct quotad *q, const struct ipc_change *ch);
void	 quotad_own_settle(struct quotad *q);
void	 quotad_own_free(struct quotad *q);

/* quota_src.c: the cache, opened read-only on first use; NULL if absent. */
struct cache *quotad_cache(struct quotad *q);
/* Queue every namespace kpgpud has or may have something in. */
void	 quotad_enqueue_all(struct quotad *q);
/* Connect to sync.sock and subscribe to its change stream. */
int	 quotad_src_start(struct quotad *q);
void	 quotad_src_stop(struct quotad *q);

/* The candidates of one namespace, read from the cache. */
struct quotad_cands {
	int			 n;
	struct plan_instance	 in[QUOTAD_MAX_CANDIDATES];
	char			 rv[QUOTAD_MAX_CANDIDATES][64];
};
/* Instances with the annotation whose tenant namespace is ns. */
int	 quotad_candidates(struct quotad *q, const char *ns,
	    struct quotad_cands *ret);
struct cache_instance;
/* A cached instance as the plan reads it. 0 or -EINVAL. */
int	 quotad_instance(const struct cache_instance *ci,
	    struct plan_instance *ret);
/* The tenant namespace of a cached instance (its name or namespace). */
const char *quotad_tenant_ns(const struct quotad *q, const char *inst_ns,
	    const char *inst_name);

#endif
