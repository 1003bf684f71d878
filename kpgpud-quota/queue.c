/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-quota's queue (see quota_int.h): keys queued from sync's changes,
 * the resync and leadership; one key in process at a time, handed out by
 * the kick event while this replica may write, started by its kind from a
 * table, and finished here: counted, forgotten or backed off, and the
 * tenant's changes that came meanwhile looked at.
 */
#include "kpgpud-quota/quota_int.h"

/* Queue a key now. */
void
queue_enqueue(struct quotad *q, const char *key)
{
	int r;

	if ((r = wq_add(q->wq, key, monotonic_ms())) < 0)
		log_warn("work queue refused key=%s error=%s", log_q(key),
		    strerror(-r));
	queue_kick(q);
}

/* Whether w is the reconcile of tenant namespace ns. */
static bool
item_is_ns(const struct qwork *w, const char *ns)
{
	size_t n = strlen(QUOTAD_NS_PREFIX);

	return w != NULL && strncmp(w->key, QUOTAD_NS_PREFIX, n) == 0 &&
	    strcmp(w->key + n, ns) == 0;
}

/*
 * A change of an object in tenant namespace ns: queue the tenant, unless
 * it is our own last write coming back (own.c). While the tenant is in
 * process its writes' answers may still be on the way, so its changes are
 * looked at when it is done; a change of another tenant that may be ours
 * is looked at before the next key starts (own.c).
 */
void
queue_change_ns(struct quotad *q, const struct ipc_change *ch,
    const char *ns)
{
	struct qwork *w = q->cur;

	if (item_is_ns(w, ns)) {
		if (w->ndefer < QUOTAD_DEFER_MAX) {
			w->defer[w->ndefer] = *ch;
			w->defer[w->ndefer++].resolved = NULL;
			return;
		}
	} else if (quotad_own_later(q, ch)) {
		queue_kick(q);
		return;
	} else if (quotad_own_echo(q, quotad_cache(q), ch)) {
		metric_inc(q->m.own, NULL, NULL);
		return;
	}
	queue_enqueue_ns(q, ns);
}

/* Queue a tenant namespace. */
void
queue_enqueue_ns(struct quotad *q, const char *ns)
{
	char key[WQ_KEY_MAX + 1];

	if (ns == NULL || !dns1123_label_valid(ns))
		return;
	snprintf(key, sizeof(key), QUOTAD_NS_PREFIX "%s", ns);
	queue_enqueue(q, key);
}

/* Empty an action list, leaving its entries: each is filled as it counts. */
static void
actions_init(struct rc_actions *a)
{
	a->n = 0;
	a->nimpostors = 0;
	a->wait = false;
	a->quota_pending = false;
}

/*
 * A work item for q (the last one's memory when kept: one allocation of
 * 460 KB per reconcile made malloc sort its bins every time), zeroed but
 * for the entries of its lists, each filled before it counts.
 */
static struct qwork *
item_new(struct quotad *q)
{
	struct qwork *w = q->spare != NULL ? q->spare : malloc(sizeof(*w));

	if (w == NULL)
		return NULL;
	q->spare = NULL;
	memset(w, 0, offsetof(struct qwork, ev));
	actions_init(&w->ev);
	actions_init(&w->acts);
	w->cands.n = 0;
	w->q = q;
	return w;
}

/* Free a work item and what it holds. */
static void
item_free(struct qwork *w)
{
	if (w == NULL)
		return;
	kube_request_cancel(w->req);
	kube_list_cancel(w->list);
	qpol_free(w->pol);
	plan_free(w->plan);
	quotad_topology_free(w->topo);
	free(w->vbody);
	free(w->params);
	json_decref(w->obs.planned.data);
	for (int i = 0; i < w->obs.nowned; i++)
		json_decref(w->obs.owned[i].data);
	json_decref(w->obs.device_class);
	json_decref(w->obs.quotas);
	free((char *)w->obs.ns_resolved);
	json_decref(w->obs.ns_annots);
	reconcile_actions_clear(&w->ev);
	reconcile_actions_clear(&w->acts);
	if (w->q->spare == NULL)
		w->q->spare = w;
	else
		free(w);
}

/*
 * The changes of the tenant that came while it was in process: our own
 * writes coming back wake nothing, anything else queues it again (as a
 * key added while in process is). Those that may be ours are looked at
 * before the next key starts, with its reads (own.c).
 */
static void
item_deferred(struct qwork *w, uint64_t now)
{
	struct quotad *q = w->q;
	bool wake = false;

	for (int i = 0; i < w->ndefer; i++) {
		if (quotad_own_later(q, &w->defer[i]))
			continue;
		if (quotad_own_echo(q, quotad_cache(q), &w->defer[i]))
			metric_inc(q->m.own, NULL, NULL);
		else
			wake = true;
	}
	w->ndefer = 0;
	if (wake)
		(void)wq_add(q->wq, w->key, now);
}

/* End a key: count it, forget or back off, and take the next one. */
void
queue_finish(struct qwork *w, int r)
{
	struct quotad *q = w->q;
	uint64_t now = monotonic_ms(), delay = 0;

	item_deferred(w, now);
	work_keep_plan(w, r);
	if (r == 0 && w->requeue) {
		metric_inc(q->m.reconciles, w->result ? w->result : "ok",
		    NULL);
		(void)wq_add_rate_limited(q->wq, w->key, now, &delay);
		log_debug("requeued key=%s retry_ms=%llu", log_q(w->key),
		    (unsigned long long)delay);
	} else if (r == 0) {
		metric_inc(q->m.reconciles, w->result ? w->result : "ok",
		    NULL);
		wq_forget(q->wq, w->key);
	} else if (r == QUOTAD_NOT_LEADER) {
		metric_inc(q->m.reconciles, "not_leader", NULL);
	} else {
		metric_inc(q->m.reconciles, "error", NULL);
		(void)wq_add_rate_limited(q->wq, w->key, now, &delay);
		log_warn("reconcile failed key=%s error=%s retry_ms=%llu",
		    log_q(w->key), strerror(-r), (unsigned long long)delay);
	}
	wq_done(q->wq, w->key, now);
	q->cur = NULL;
	item_free(w);
	queue_kick(q);
}

/* The admission policies' pass ended. */
static void
policies_done(int r, bool requeue, void *arg)
{
	struct qwork *w = arg;

	w->requeue = requeue;
	queue_finish(w, r == -EPERM ? QUOTAD_NOT_LEADER : r);
}

/* The file's admission policies, one pass (no cache needed). */
static int
policies_start(struct qwork *w, struct cache *c, const char *rest)
{
	(void)c;
	(void)rest;
	return qpol_start(w->q, policies_done, w, &w->pol);
}

/* A key of no known kind: nothing to write. */
static int
other_start(struct qwork *w, struct cache *c, const char *rest)
{
	(void)c;
	(void)rest;
	work_next(w);
	return 0;
}

/*
 * The kinds of keys: the whole key, or with prefix its beginning (rest is
 * the key after it); a kind that is cached starts inside a read
 * transaction of the cache. The first that matches starts the key; the
 * last matches every key.
 */
static const struct queue_kind {
	const char	*key;
	bool		 prefix;
	bool		 cached;
	int		(*start)(struct qwork *w, struct cache *c,
			    const char *rest);
} queue_kinds[] = {
	{ QUOTAD_POLICIES_KEY,	false,	false,	policies_start },
	{ QUOTAD_GC_KEY,	false,	true,	gc_start },
	{ QUOTAD_NS_PREFIX,	true,	true,	work_ns },
	{ "",			true,	true,	other_start },
};

/* The kind of a key. */
static const struct queue_kind *
kind_of(const char *key)
{
	const struct queue_kind *k = queue_kinds;

	for (; k < queue_kinds + nitems(queue_kinds) - 1; k++)
		if (k->prefix ? strncmp(key, k->key, strlen(k->key)) == 0 :
		    strcmp(key, k->key) == 0)
			break;
	return k;
}

/* Start processing a key handed out by the queue. */
static void
item_start(struct quotad *q, const char *key)
{
	const struct queue_kind *k = kind_of(key);
	struct qwork *w;
	struct cache *c = NULL;
	bool tx = false;
	int r;

	if ((w = item_new(q)) == NULL) {
		(void)wq_add_rate_limited(q->wq, key, monotonic_ms(), NULL);
		wq_done(q->wq, key, monotonic_ms());
		return;
	}
	w->q = q;
	snprintf(w->key, sizeof(w->key), "%s", key);
	q->cur = w;
	if (k->cached && (c = quotad_cache(q)) == NULL) {
		queue_finish(w, -ENOENT);
		return;
	}
	/*
	 * The key's reads from one snapshot: SQLite then keeps the pages
	 * they share, instead of reading them again for every statement
	 * after sync wrote (without it, each read is a snapshot of its own).
	 */
	if (c != NULL)
		tx = cache_begin(c) == 0;
	r = k->start(w, c, key + strlen(k->key));
	if (tx && cache_commit(c) < 0)
		cache_rollback(c);
	if (r < 0)
		queue_finish(w, r);
}

/* The kick event: hand out keys while we may, else wait for the queue. */
void
queue_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quotad *q = arg;
	struct cache *c = NULL;
	const char *key;
	uint64_t now = monotonic_ms(), next;
	struct timeval tv;
	bool tx = false;

	(void)fd;
	(void)what;
	if (q->cur != NULL)
		return;
	/*
	 * The changes held that may be our own writes, then the next key,
	 * from one snapshot of the cache (own.c); item_start reads in it.
	 */
	if (q->nlater > 0 && (c = quotad_cache(q)) != NULL)
		tx = cache_begin(c) == 0;
	quotad_own_settle(q);
	if (!quotad_may_write(q))
		;
	else if (wq_get(q->wq, now, &key) == 0)
		item_start(q, key);
	else if ((next = wq_next_ms(q->wq, now)) != WQ_NEVER) {
		tv.tv_sec = (time_t)(next / 1000);
		tv.tv_usec = (suseconds_t)(next % 1000) * 1000;
		event_add(q->kick_ev, &tv);
	}
	if (tx && cache_commit(c) < 0)
		cache_rollback(c);
}

/* Look at the queue from the event loop soon (never re-entrantly). */
void
queue_kick(struct quotad *q)
{
	if (q->kick_ev != NULL)
		event_active(q->kick_ev, EV_TIMEOUT, 0);
}

/* Cancel the key in process, its write in flight with it (stop, release). */
void
queue_cancel(struct quotad *q)
{
	if (q->cur != NULL) {
		item_free(q->cur);
		q->cur = NULL;
	}
}
