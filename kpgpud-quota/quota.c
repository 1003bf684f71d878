/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kpgpud-quota core's life (see quota_int.h for its parts): start and
 * stop, the Lease's leadership, the periodic resync, the metrics.
 */
#include "kpgpud-quota/quota_int.h"

/* Whether this replica may write now. */
bool
quotad_may_write(const struct quotad *q)
{
	if (!q->cfg.leader_elect)
		return true;
	return lease_leader(q->lease);
}

/* Leadership changed. */
static void
on_leader(bool leader, void *arg)
{
	struct quotad *q = arg;

	q->leader = leader;
	metric_set(q->m.leader, NULL, NULL, leader ? 1 : 0);
	if (leader) {
		log_notice("became leader lease=%s/%s identity=%s",
		    q->cfg.lease.ns, q->cfg.lease.name,
		    log_q(q->cfg.lease.identity));
		quotad_enqueue_all(q);
	} else {
		log_notice("lost leadership lease=%s/%s", q->cfg.lease.ns,
		    q->cfg.lease.name);
	}
	queue_kick(q);
}

/* Periodic resync: every namespace again, to repair drift. */
static void
resync_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quotad *q = arg;

	(void)fd;
	(void)what;
	log_debug("resync");
	metric_inc(q->m.resyncs, NULL, NULL);
	quotad_enqueue_all(q);
}

/* Register the metrics of the core, from a table. */
static int
quotad_metrics(struct quotad *q, struct metrics *reg)
{
	const struct {
		bool		 counter;
		const char	*name, *help, *label;
		struct metric	**m;
	} t[] = {
		{ true, "kpgpud_quota_reconciles_total", "Reconciles by result.",
		  "result", &q->m.reconciles },
		{ true, "kpgpud_quota_invalid_annotations_total",
		  "Invalid annotations reported.", NULL, &q->m.invalid },
		{ false, "kpgpud_quota_queue_depth",
		  "Keys waiting in the work queue.", NULL, &q->m.depth },
		{ true, "kpgpud_quota_api_writes_total", "API writes by verb.",
		  "verb", &q->m.writes },
		{ false, "kpgpud_quota_leader_active",
		  "1 while this replica holds the Lease.", NULL, &q->m.leader },
		{ true, "kpgpud_quota_resyncs_total", "Periodic resyncs.", NULL,
		  &q->m.resyncs },
		{ true, "kpgpud_quota_impostors_replaced_total",
		  "Objects of kpgpud's names that were not kpgpud's, replaced, "
		  "by kind.", "kind", &q->m.impostors },
		{ false, "kpgpud_quota_gpu_classes",
		  "GPU DeviceClasses strict quota closes (last count).", NULL,
		  &q->m.classes },
		{ true, "kpgpud_quota_admission_policy_repairs_total",
		  "Admission policies and bindings found deleted or changed "
		  "and restored from --admission-policies, by kind.", "kind",
		  &q->m.pol_repairs },
		{ false, "kpgpud_quota_admission_policies_in_place",
		  "Admission policies and bindings as the file says after the "
		  "last pass.", NULL, &q->m.pol_in_place },
		{ true, "kpgpud_quota_own_changes_total",
		  "Changes streamed by sync that were this replica's own last "
		  "write of the object (no reconcile).", NULL, &q->m.own },
	};
	int r;

	for (size_t i = 0; i < nitems(t); i++) {
		r = t[i].counter ? metrics_counter(reg, t[i].name, t[i].help,
		    t[i].label, NULL, 0, t[i].m) : metrics_gauge(reg,
		    t[i].name, t[i].help, t[i].label, NULL, 0, t[i].m);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Start the core. */
int
quotad_start(struct quotad *q, struct event_base *base,
    struct kube_client *kc, struct metrics *reg,
    const struct quotad_config *cfg)
{
	struct timeval tv;
	int r;

	memset(q, 0, sizeof(*q));
	q->cfg = *cfg;
	q->inject_by_policy = -1;
	q->base = base;
	q->kc = kc;
	if ((r = quotad_metrics(q, reg)) < 0 ||
	    (r = quotad_topology_start(q, reg)) < 0 ||
	    (r = wq_new(&cfg->wq, monotonic_ms(), &q->wq)) < 0 ||
	    (r = strmap_new(0, QUOTAD_NS_SENT_MAX, &q->ns_sent)) < 0 ||
	    (r = strmap_new(0, QUOTAD_OWN_MAX, &q->own)) < 0 ||
	    (r = strmap_new(0, QUOTAD_PLANS_KEPT, &q->plans)) < 0)
		return r;
	q->kick_ev = event_new(base, -1, 0, queue_kick_cb, q);
	q->resync_ev = event_new(base, -1, EV_PERSIST, resync_cb, q);
	if (q->kick_ev == NULL || q->resync_ev == NULL)
		return -ENOMEM;
	tv.tv_sec = (time_t)(cfg->resync_ms / 1000);
	tv.tv_usec = (suseconds_t)(cfg->resync_ms % 1000) * 1000;
	event_add(q->resync_ev, &tv);
	if ((r = quotad_src_start(q)) < 0)
		return r;
	if (cfg->leader_elect)
		return lease_new(base, kc, &cfg->lease, cfg->lease_retry_ms,
		    q->m.writes, on_leader, q, &q->lease);
	on_leader(true, q);
	return 0;
}

/* Stop the core; NULL fields are fine. */
void
quotad_stop(struct quotad *q)
{
	queue_cancel(q);
	lease_free(q->lease);
	q->lease = NULL;
	quotad_src_stop(q);
	if (q->kick_ev != NULL)
		event_free(q->kick_ev);
	if (q->resync_ev != NULL)
		event_free(q->resync_ev);
	q->kick_ev = q->resync_ev = NULL;
	wq_free(q->wq);
	q->wq = NULL;
	strmap_free(q->ns_sent, free);
	q->ns_sent = NULL;
	strmap_free(q->own, free);
	q->own = NULL;
	quotad_own_free(q);
	work_plans_free(q);
	quotad_classes_free(&q->classes);
	cache_free(q->cache);
	q->cache = NULL;
	quotad_topology_stop(q);
	free(q->spare);
	q->spare = NULL;
}

/* Hand the Lease over before stopping: cancel our write, clear the holder. */
int
quotad_release(struct quotad *q, struct kube_config *cfg)
{
	queue_cancel(q);
	return lease_release(q->lease, cfg, 2000);
}

/* Refresh the gauges. */
void
quotad_update_gauges(struct quotad *q)
{
	metric_set(q->m.depth, NULL, NULL, (double)wq_len(q->wq));
	metric_set(q->m.leader, NULL, NULL, quotad_may_write(q) ? 1 : 0);
}
