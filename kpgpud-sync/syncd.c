/* SPDX-License-Identifier: Apache-2.0 */
/* The kpgpud-sync core: reflectors into the cache, batches, publishing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/discovery.h"
#include "kpgpud-sync/syncd.h"

#define SYNCD_HOUSEKEEP_MS	30000
#define SYNCD_RETRY_MIN_MS	500
#define SYNCD_RETRY_MAX_MS	30000

/* The IPC topic of a cache table. */
static uint32_t
syncd_topic(enum cache_table t)
{
	return t == CACHE_T_NS ? IPC_TOPIC_NAMESPACES :
	    t == CACHE_T_INSTANCE ? IPC_TOPIC_INSTANCES : IPC_TOPIC_OWNED;
}

/* Open the batch (a write transaction) unless one is open. */
static int
syncd_batch(struct syncd *sd)
{
	static const struct timeval now = { 0, 0 };
	int r;

	if (sd->in_batch)
		return 0;
	if ((r = cache_begin(sd->cache)) < 0)
		return r;
	sd->in_batch = true;
	event_add(sd->flush_ev, &now);
	return 0;
}

/* Open the batch for acct.c. */
int
syncd_begin(struct syncd *sd)
{
	return syncd_batch(sd);
}

/* Queue a committed-to-be change for the subscribers. */
static void
syncd_queue(struct syncd *sd, uint64_t gen, enum cache_table t,
    const char *kind, const char *ns, const char *name, bool deleted,
    bool isolated, const char *resolved)
{
	struct syncd_change *ch;
	size_t n;

	if (sd->npending == sd->apending) {
		n = sd->apending ? sd->apending * 2 : 256;
		ch = realloc(sd->pending, n * sizeof(*ch));
		if (ch == NULL) {
			sd->batch_failed = true;	/* relist rather than lose */
			return;
		}
		sd->pending = ch;
		sd->apending = n;
	}
	ch = &sd->pending[sd->npending];
	memset(ch, 0, sizeof(*ch));
	ch->gen = gen;
	ch->topic = syncd_topic(t);
	snprintf(ch->kind, sizeof(ch->kind), "%s", kind != NULL && *kind ?
	    kind : "Unknown");
	snprintf(ch->ns, sizeof(ch->ns), "%s", ns);
	snprintf(ch->name, sizeof(ch->name), "%s", name);
	ch->deleted = deleted;
	ch->isolated = isolated;
	if (resolved != NULL && strlen(resolved) <= IPC_RESOLVED_MAX &&
	    (ch->resolved = strdup(resolved)) == NULL) {
		sd->batch_failed = true;
		return;
	}
	ch->recv_ms = monotonic_ms();
	sd->npending++;
}

/* Drop the queued changes. */
static void
syncd_drop_pending(struct syncd *sd)
{
	size_t i;

	for (i = 0; i < sd->npending; i++)
		free(sd->pending[i].resolved);
	sd->npending = 0;
}

/* A cache write failed: the batch will be rolled back and relisted. */
static int
syncd_write_failed(struct syncd *sd, const struct sync_res *res, int r)
{
	log_err("cache write failed resource=%s error=%s", log_q(res->key),
	    strerror(-r));
	sd->batch_failed = true;
	return r;
}

/* What a reflector op asks of the usage ledger. */
enum syncd_usage_op {
	SYNCD_USAGE_PUT,
	SYNCD_USAGE_DEL,
	SYNCD_USAGE_PRUNE,
};

/* Hand an op on a usage collection to the ledger, in the open batch. */
static int
syncd_usage(struct syncd *sd, struct reflector *rf, enum syncd_usage_op op,
    json_t *obj, const struct strset *seen)
{
	int r;

	if (sd->acct == NULL)
		return 0;
	if ((r = syncd_batch(sd)) < 0)
		return syncd_write_failed(sd, reflector_res(rf), r);
	switch (op) {
	case SYNCD_USAGE_PUT:
		return acct_put(sd->acct, rf, obj);
	case SYNCD_USAGE_DEL:
		return acct_del(sd->acct, rf, obj);
	case SYNCD_USAGE_PRUNE:
		break;
	}
	return acct_prune(sd->acct, rf, seen);
}

/*
 * The one claims watch: remember whether obj's last version made an
 * allocation row (bad: it did not, though the ledger took the claim), so
 * that a list's prune drops that row as a watch of its own would have.
 */
static int
syncd_claim_mark(struct syncd *sd, json_t *obj, bool bad)
{
	char key[CACHE_KEY_MAX * 2 + 2];
	const char *ns, *name;

	if (sync_obj_key(obj, &ns, &name) < 0 ||
	    strset_key(key, sizeof(key), ns, name) < 0)
		return 0;
	if (!bad) {
		if (sd->claims_bad != NULL)
			strset_del(sd->claims_bad, key);
		return 0;
	}
	if (sd->claims_bad == NULL && (sd->claims_bad = strset_new()) == NULL)
		return -ENOMEM;
	return strset_add(sd->claims_bad, key) < 0 ? -ENOMEM : 0;
}

/* Reflector op: store an object. */
static int
syncd_put(void *arg, struct reflector *rf, json_t *obj)
{
	struct syncd *sd = arg;
	const struct sync_res *res = reflector_res(rf);
	struct sync_row row;
	const char *why = "";
	uint64_t gen = 0;
	int r;

	if (res->usage || res->usage_claims) {
		r = syncd_usage(sd, rf, SYNCD_USAGE_PUT, obj, NULL);
		if (res->usage || r < 0)
			return r;
	}
	if ((r = sync_row_from_json(res, obj, &row, &why)) < 0) {
		if (r == -ENOMEM)
			return syncd_write_failed(sd, res, r);
		sd->n_bad_objects++;
		metric_inc(sd->m.bad_objects, res->key, NULL);
		log_warn("object skipped resource=%s reason=%s",
		    log_q(res->key), log_q(why));
		if (res->usage_claims)
			return (r = syncd_claim_mark(sd, obj, true)) < 0 ?
			    syncd_write_failed(sd, res, r) : 0;
		return r;
	}
	if (res->usage_claims)
		(void)syncd_claim_mark(sd, obj, false);
	if ((r = FAULT("sync.apply")) < 0 || (r = syncd_batch(sd)) < 0) {
		sync_row_clear(&row);
		return syncd_write_failed(sd, res, r);
	}
	if (row.table == CACHE_T_NS) {
		r = cache_ns_put(sd->cache, &row.u.ns, &gen);
		if (r == 0 && gen != 0)
			syncd_queue(sd, gen, row.table, "Namespace",
			    row.u.ns.name, row.u.ns.name, false,
			    row.u.ns.isolated, row.u.ns.resolved);
	} else if (row.table == CACHE_T_INSTANCE) {
		r = cache_instance_put(sd->cache, &row.u.in, &gen);
		if (r == 0 && gen != 0)
			syncd_queue(sd, gen, row.table, row.u.in.kind,
			    row.u.in.ns, row.u.in.name, false, false, NULL);
	} else {
		r = cache_owned_put(sd->cache, &row.u.ow, &gen);
		if (r == 0 && gen != 0)
			syncd_queue(sd, gen, row.table, row.u.ow.kind,
			    row.u.ow.ns, row.u.ow.name, false, false, NULL);
	}
	sync_row_clear(&row);
	return r < 0 ? syncd_write_failed(sd, res, r) : 0;
}

/* Delete one row of collection res; queue the change. */
static int
syncd_delete(struct syncd *sd, const struct sync_res *res, const char *kind,
    const char *ns, const char *name)
{
	uint64_t gen = 0;
	int r;

	if ((r = FAULT("sync.apply")) < 0 || (r = syncd_batch(sd)) < 0)
		return syncd_write_failed(sd, res, r);
	if (res->table == CACHE_T_NS) {
		r = cache_ns_delete(sd->cache, name, &gen);
		kind = "Namespace";
		ns = name;
	} else if (res->table == CACHE_T_INSTANCE)
		r = cache_instance_delete(sd->cache, res->key, ns, name, &gen);
	else {
		r = cache_owned_delete(sd->cache, res->kind, ns, name, &gen);
		kind = res->kind;
	}
	if (r < 0)
		return syncd_write_failed(sd, res, r);
	if (gen != 0)
		syncd_queue(sd, gen, res->table, kind, ns, name, true, false,
		    NULL);
	return 0;
}

/* Reflector op: a DELETED event. */
static int
syncd_del(void *arg, struct reflector *rf, json_t *obj)
{
	struct syncd *sd = arg;
	const struct sync_res *res = reflector_res(rf);
	const char *ns, *name;
	json_t *k = json_object_get(obj, "kind");

	int r;

	if (res->usage || res->usage_claims) {
		r = syncd_usage(sd, rf, SYNCD_USAGE_DEL, obj, NULL);
		if (res->usage || r < 0)
			return r;
	}
	if (sync_obj_key(obj, &ns, &name) < 0) {
		sd->n_bad_objects++;
		metric_inc(sd->m.bad_objects, res->key, NULL);
		log_warn("deletion skipped resource=%s reason=\"no usable name\"",
		    log_q(res->key));
		return -EINVAL;
	}
	if (res->usage_claims)
		(void)syncd_claim_mark(sd, obj, false);
	return syncd_delete(sd, res, json_is_string(k) ? json_string_value(k) :
	    NULL, ns, name);
}

/* Reflector op: remember the resourceVersion in the same batch. */
static int
syncd_set_rv(void *arg, struct reflector *rf, const char *rv)
{
	struct syncd *sd = arg;
	const struct sync_res *res = reflector_res(rf);
	int r;

	if (res->usage)
		return 0;	/* the ledger relists on every start */
	if ((r = syncd_batch(sd)) < 0 ||
	    (r = cache_watch_set(sd->cache, res->key, rv)) < 0)
		return syncd_write_failed(sd, res, r);
	return 0;
}

/* Cached rows of one collection that the last list did not return. */
struct syncd_stale {
	const struct strset	*seen;
	const struct strset	*bad;	/* seen, but no row made: stale too */
	struct syncd_stalekey {
		char	*kind, *ns, *name;
	}			*keys;
	size_t			 n, alloc;
};

/* Collect a row key when the list did not have it. */
static int
syncd_stale_add(struct syncd_stale *st, const char *kind, const char *ns,
    const char *name)
{
	char key[CACHE_KEY_MAX * 2 + 2];
	struct syncd_stalekey *k;
	size_t n;

	if (strset_key(key, sizeof(key), ns, name) == 0 &&
	    strset_has(st->seen, key) &&
	    (st->bad == NULL || !strset_has(st->bad, key)))
		return 0;
	if (st->n == st->alloc) {
		n = st->alloc ? st->alloc * 2 : 64;
		if ((k = realloc(st->keys, n * sizeof(*k))) == NULL)
			return -ENOMEM;
		st->keys = k;
		st->alloc = n;
	}
	k = &st->keys[st->n];
	k->kind = strdup(kind);
	k->ns = strdup(ns);
	k->name = strdup(name);
	st->n++;
	if (k->kind == NULL || k->ns == NULL || k->name == NULL)
		return -ENOMEM;
	return 0;
}

/* foreach callbacks feeding syncd_stale_add. */
static int
stale_ns(const struct cache_ns *ns, void *arg)
{
	return syncd_stale_add(arg, "Namespace", "", ns->name);
}

static int
stale_in(const struct cache_instance *in, void *arg)
{
	return syncd_stale_add(arg, in->kind, in->ns, in->name);
}

static int
stale_ow(const struct cache_owned *o, void *arg)
{
	return syncd_stale_add(arg, o->kind, o->ns, o->name);
}

/* Reflector op: after a list, delete what the list no longer has. */
static int
syncd_prune(void *arg, struct reflector *rf, const struct strset *seen)
{
	struct syncd *sd = arg;
	const struct sync_res *res = reflector_res(rf);
	struct syncd_stale st = { .seen = seen, .bad = sd->claims_bad };
	size_t i;
	int r;

	if (res->usage || res->usage_claims) {
		r = syncd_usage(sd, rf, SYNCD_USAGE_PRUNE, NULL, seen);
		if (res->usage || r < 0)
			return r;
	}
	if (res->table == CACHE_T_NS)
		r = cache_ns_foreach(sd->cache, 0, stale_ns, &st);
	else if (res->table == CACHE_T_INSTANCE)
		r = cache_instance_foreach(sd->cache, res->key, 0, stale_in,
		    &st);
	else
		r = cache_owned_foreach(sd->cache, NULL, res->kind, 0, stale_ow,
		    &st);
	for (i = 0; i < st.n; i++) {
		if (r == 0)
			r = syncd_delete(sd, res, st.keys[i].kind,
			    st.keys[i].ns, st.keys[i].name);
		free(st.keys[i].kind);
		free(st.keys[i].ns);
		free(st.keys[i].name);
	}
	free(st.keys);
	if (r == 0 && st.n > 0)
		log_info("relist deleted objects resource=%s count=%zu",
		    log_q(res->key), st.n);
	return r;
}

static void syncd_check_synced(struct syncd *sd);

/* Reflector op: one more collection is in place. */
static void
syncd_synced(void *arg, struct reflector *rf)
{
	struct syncd *sd = arg;

	log_info("collection synced resource=%s rv=%s",
	    log_q(reflector_res(rf)->key), log_q(reflector_rv(rf)));
	sd->nsynced++;
	syncd_check_synced(sd);
}

/* Synced once every reflector is and discovery had its first pass. */
static void
syncd_check_synced(struct syncd *sd)
{
	if (sd->nsynced < sd->nrf || sd->synced || !syncd_disc_done(sd))
		return;
	sd->synced = true;
	metric_set(sd->m.synced, NULL, NULL, 1);
	if (sd->in_batch)
		sd->announce = true;	/* once the batch is committed */
	else if (sd->on_synced != NULL)
		sd->on_synced(sd);
}

/* Count an API error status in the metrics. */
static void
syncd_api_error(struct syncd *sd, long status)
{
	char code[24];

	if (status < 400 && status != 0)
		return;
	snprintf(code, sizeof(code), "%ld", status);
	sd->n_api_errors++;
	metric_inc(sd->m.api_errors, code, NULL);
}

/* The name of a watch end reason, for logs and metrics. */
static const char *
syncd_reason_name(enum kube_watch_reason r)
{
	switch (r) {
	case KUBE_WATCH_CLOSED:		return "closed";
	case KUBE_WATCH_HTTP_ERROR:	return "http_error";
	case KUBE_WATCH_EXPIRED:	return "expired";
	case KUBE_WATCH_ERROR_EVENT:	return "error_event";
	case KUBE_WATCH_PARSE_ERROR:	return "parse_error";
	case KUBE_WATCH_STALLED:	return "stalled";
	case KUBE_WATCH_TRANSPORT:	return "transport";
	}
	return "unknown";
}

/* The index of rf in sd->rf (sd->nrf when absent). */
static size_t
syncd_rf_index(const struct syncd *sd, const struct reflector *rf)
{
	size_t i;

	for (i = 0; i < sd->nrf && sd->rf[i] != rf; i++)
		;
	return i;
}

static bool
syncd_rf_discovered(const struct syncd *sd, const struct reflector *rf)
{
	size_t i = syncd_rf_index(sd, rf);

	return i < sd->nrf && sd->rf_discovered[i];
}

/*
 * Whether a configured collection is served: its list answered 404 or
 * not. A discovered one that goes away is no error (its kind was removed).
 */
static void
syncd_served(struct syncd *sd, struct reflector *rf, bool served)
{
	size_t i = syncd_rf_index(sd, rf);

	if (i == sd->nrf || sd->rf_discovered[i])
		return;
	sd->rf_unserved[i] = !served;
	metric_set(sd->m.unserved, reflector_res(rf)->key, NULL,
	    served ? 0 : 1);
}

/* The collections that keep sync unready, and why. */
size_t
syncd_unsynced(const struct syncd *sd, const char **keys, const char **why,
    size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < sd->nrf; i++)
		if (!reflector_synced(sd->rf[i])) {
			if (n < max) {
				keys[n] = reflector_res(sd->rf[i])->key;
				why[n] = sd->rf_error[i];
			}
			n++;
		}
	return n;
}

/* Remember why a collection's list failed ("" when it did not). */
static void
syncd_list_error(struct syncd *sd, struct reflector *rf,
    const struct reflector_note *n)
{
	size_t i = syncd_rf_index(sd, rf);

	if (i == sd->nrf)
		return;
	if (n == NULL)
		sd->rf_error[i][0] = '\0';
	else
		snprintf(sd->rf_error[i], sizeof(sd->rf_error[i]),
		    "list failed: status %ld, %s%s%.120s", n->status,
		    n->error ? strerror(-n->error) : "no transport error",
		    n->message != NULL && *n->message ? ": " : "",
		    n->message != NULL ? n->message : "");
}

size_t
syncd_unserved(const struct syncd *sd, const char **keys, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < sd->nrf; i++)
		if (sd->rf_unserved[i]) {
			if (n < max)
				keys[n] = reflector_res(sd->rf[i])->key;
			n++;
		}
	return n;
}

void
syncd_disc_api_error(struct syncd *sd, long status)
{
	syncd_api_error(sd, status);
}

/* Reflector op: log once and count. */
static void
syncd_note(void *arg, struct reflector *rf, const struct reflector_note *n)
{
	struct syncd *sd = arg;
	const char *key = log_q(reflector_res(rf)->key);
	const char *why;

	if (n->next == REFL_NEXT_RELIST || n->next == REFL_NEXT_RELIST_LATER) {
		if (n->event != REFL_EV_LIST_DONE) {
			sd->n_relists++;
			metric_inc(sd->m.relists, reflector_res(rf)->key, NULL);
		}
	}
	switch (n->event) {
	case REFL_EV_LIST_DONE:
		syncd_served(sd, rf, n->status != 404);
		if (n->status == 404 && syncd_rf_discovered(sd, rf))
			log_info("discovered resource no longer served, empty "
			    "resource=%s retry_ms=%llu", key,
			    (unsigned long long)n->delay_ms);
		else if (n->status == 404)
			log_warn("configured resource not served by the API "
			    "server, watched as empty until it is resource=%s "
			    "retry_ms=%llu", key,
			    (unsigned long long)n->delay_ms);
		else
			log_info("list done resource=%s items=%zu rv=%s", key,
			    n->items, log_q(reflector_rv(rf)));
		syncd_list_error(sd, rf, NULL);
		break;
	case REFL_EV_LIST_FAILED:
		syncd_api_error(sd, n->status);
		syncd_list_error(sd, rf, n);
		log_warn("list failed resource=%s status=%ld error=%s "
		    "message=%s retry_ms=%llu", key, n->status,
		    n->error ? strerror(-n->error) : "none", log_q(n->message),
		    (unsigned long long)n->delay_ms);
		break;
	case REFL_EV_WATCH_ENDED:
		why = syncd_reason_name(n->end->reason);
		sd->n_restarts++;
		metric_inc(sd->m.restarts, reflector_res(rf)->key, why);
		if (n->end->reason == KUBE_WATCH_HTTP_ERROR ||
		    n->end->reason == KUBE_WATCH_ERROR_EVENT ||
		    n->end->reason == KUBE_WATCH_EXPIRED)
			syncd_api_error(sd, n->status);
		log_msg(n->end->reason == KUBE_WATCH_CLOSED ? LOG_LVL_INFO :
		    LOG_LVL_WARN, "watch ended resource=%s reason=%s "
		    "status=%ld events=%lu message=%s next=%s retry_ms=%llu",
		    key, why, n->status, n->end->events, log_q(n->message),
		    n->next == REFL_NEXT_RELIST || n->next ==
		    REFL_NEXT_RELIST_LATER ? "relist" : "watch",
		    (unsigned long long)n->delay_ms);
		break;
	case REFL_EV_WATCH_FAILED:
		log_warn("watch not started resource=%s error=%s", key,
		    strerror(-n->error));
		break;
	case REFL_EV_BAD_OBJECT:
		sd->n_bad_objects++;
		metric_inc(sd->m.bad_objects, reflector_res(rf)->key, NULL);
		log_warn("object skipped resource=%s reason=%s", key,
		    log_q(n->message));
		break;
	}
}

static const struct reflector_ops syncd_ops = {
	.put = syncd_put,
	.del = syncd_del,
	.set_rv = syncd_set_rv,
	.prune = syncd_prune,
	.synced = syncd_synced,
	.note = syncd_note,
};

/* The retry timer: relist every collection after a lost batch. */
static void
syncd_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct syncd *sd = arg;
	size_t i;

	(void)fd;
	(void)what;
	for (i = 0; i < sd->nrf; i++)
		reflector_relist(sd->rf[i]);
}

/*
 * A batch could not be committed: roll back, and relist every collection
 * (what the reflectors applied in memory is no longer in the cache) after
 * a backoff that grows while commits keep failing.
 */
static void
syncd_batch_lost(struct syncd *sd, int r)
{
	struct timeval tv;

	cache_rollback(sd->cache);
	if (sd->acct != NULL)
		acct_rolled_back(sd->acct);
	syncd_drop_pending(sd);
	sd->batch_failed = false;
	sd->n_commit_errors++;
	metric_inc(sd->m.commit_errors, NULL, NULL);
	/*
	 * A relist already scheduled covers this batch too; only a loss after
	 * it ran (the relist itself failing) backs off further.
	 */
	if (evtimer_pending(sd->retry_ev, NULL)) {
		log_err("cache batch lost error=%s; relist already scheduled "
		    "retry_ms=%llu", strerror(-r),
		    (unsigned long long)sd->retry_ms);
		return;
	}
	sd->retry_ms = sd->retry_ms ? sd->retry_ms * 2 : SYNCD_RETRY_MIN_MS;
	if (sd->retry_ms > SYNCD_RETRY_MAX_MS)
		sd->retry_ms = SYNCD_RETRY_MAX_MS;
	log_err("cache batch lost error=%s; relisting every collection "
	    "retry_ms=%llu", strerror(-r), (unsigned long long)sd->retry_ms);
	tv.tv_sec = (time_t)(sd->retry_ms / 1000);
	tv.tv_usec = (suseconds_t)(sd->retry_ms % 1000) * 1000;
	evtimer_add(sd->retry_ev, &tv);
}

/* Commit the batch and publish its changes. */
void
syncd_flush(struct syncd *sd)
{
	uint64_t now, gen;
	size_t i;
	int r = -EIO;

	if (!sd->in_batch)
		return;
	sd->in_batch = false;
	event_del(sd->flush_ev);
	if (sd->batch_failed || (r = FAULT("sync.commit")) < 0 ||
	    (r = cache_commit(sd->cache)) < 0) {
		syncd_batch_lost(sd, r);
		return;
	}
	metric_inc(sd->m.batches, NULL, NULL);
	now = monotonic_ms();
	for (i = 0; i < sd->npending; i++) {
		metric_observe(sd->m.lag, NULL, NULL,
		    (double)(now - sd->pending[i].recv_ms) / 1000.0);
		syncd_ipc_publish(sd, &sd->pending[i]);
	}
	syncd_drop_pending(sd);
	sd->retry_ms = 0;
	if (cache_generation(sd->cache, &gen) == 0)
		metric_set(sd->m.generation, NULL, NULL, (double)gen);
	if (sd->announce) {
		sd->announce = false;
		if (sd->on_synced != NULL)
			sd->on_synced(sd);
	}
}

/* The flush event: end of this loop turn's batch. */
static void
syncd_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	syncd_flush(arg);
}

/* The housekeeping timer: prune tombstones, refresh the gauges. */
static void
syncd_housekeep_cb(evutil_socket_t fd, short what, void *arg)
{
	struct syncd *sd = arg;
	int r;

	(void)fd;
	(void)what;
	if (sd->in_batch)
		syncd_flush(sd);
	if ((r = cache_tomb_prune(sd->cache, SYNCD_TOMB_KEEP)) < 0)
		log_warn("tombstone pruning failed error=%s", strerror(-r));
	syncd_update_gauges(sd);
}

/* Register the metrics of the sync core. */
static int
syncd_metrics_init(struct syncd_metrics *m, struct metrics *reg)
{
	static const double lag_bounds[] = { 0.001, 0.0025, 0.005, 0.01,
	    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5 };
	int r = 0;

	memset(m, 0, sizeof(*m));
	if ((m->reg = reg) == NULL)
		return 0;
	r = r ? r : metrics_gauge(reg, "kpgpud_sync_objects_cached",
	    "Objects in the cache by kind.", "kind", NULL, 16, &m->objects);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_watch_restarts_total",
	    "Watches that ended and were restarted.", "resource", "reason",
	    256, &m->restarts);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_relists_total",
	    "Lists started again (410 Gone, failures).", "resource", NULL,
	    SYNCD_MAX_RES, &m->relists);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_api_errors_total",
	    "API server errors by HTTP status (0: transport).", "code", NULL,
	    64, &m->api_errors);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_bad_objects_total",
	    "Objects or events skipped as malformed.", "resource", NULL,
	    SYNCD_MAX_RES, &m->bad_objects);
	r = r ? r : metrics_histogram(reg, "kpgpud_sync_event_lag_seconds",
	    "From receiving an event to its commit in the cache.", lag_bounds,
	    nitems(lag_bounds), NULL, NULL, 0,
	    &m->lag);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_batches_total",
	    "Write transactions committed.", NULL, NULL, 0, &m->batches);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_commit_errors_total",
	    "Write transactions lost (rolled back, relisted).", NULL, NULL, 0,
	    &m->commit_errors);
	r = r ? r : metrics_gauge(reg, "kpgpud_sync_subscribers_connected",
	    "Peers subscribed to changes.", NULL, NULL, 0, &m->subscribers);
	r = r ? r : metrics_counter(reg, "kpgpud_sync_lookups_total",
	    "NS_LOOKUP requests by result.", "result", NULL, 8, &m->lookups);
	r = r ? r : metrics_gauge(reg, "kpgpud_sync_cache_generation",
	    "The newest cache generation.", NULL, NULL, 0, &m->generation);
	r = r ? r : metrics_gauge(reg, "kpgpud_sync_cache_synced",
	    "1 once the first full list of every collection is in the cache "
	    "(kpgpuctl cache status: synced=true).", NULL, NULL, 0,
	    &m->synced);
	r = r ? r : metrics_gauge(reg, "kpgpud_sync_unserved_resources",
	    "1 while a configured collection is not served by the API "
	    "server (its list answers 404: watched as empty).", "resource",
	    NULL, SYNCD_MAX_RES, &m->unserved);
	r = r ? r : metrics_gauge(reg, "kpgpud_sync_discovered_resources",
	    "Instance resources found by discovery and watched.", NULL, NULL,
	    0, &m->discovered);
	return r;
}

/* Set up the core and its reflectors. */
int
syncd_init(struct syncd *sd, struct event_base *base, struct cache *cache,
    struct kube_client *kc, struct metrics *reg, const struct sync_res *res,
    size_t nres, const struct reflector_config *rcfg)
{
	static const struct timeval hk = { SYNCD_HOUSEKEEP_MS / 1000, 0 };
	size_t i;
	int r;

	if (nres == 0 || nres > SYNCD_MAX_RES)
		return -EINVAL;
	memset(sd, 0, sizeof(*sd));
	sd->rcfg = *rcfg;
	sd->base = base;
	sd->cache = cache;
	sd->kc = kc;
	LIST_INIT(&sd->subs);
	if ((r = syncd_metrics_init(&sd->m, reg)) < 0)
		return r;
	sd->flush_ev = evtimer_new(base, syncd_flush_cb, sd);
	sd->retry_ev = evtimer_new(base, syncd_retry_cb, sd);
	sd->housekeep_ev = event_new(base, -1, EV_PERSIST, syncd_housekeep_cb,
	    sd);
	if (sd->flush_ev == NULL || sd->retry_ev == NULL ||
	    sd->housekeep_ev == NULL)
		goto nomem;
	event_add(sd->housekeep_ev, &hk);
	for (i = 0; i < nres; i++) {
		r = reflector_new(base, kc, &res[i], rcfg, &syncd_ops, sd,
		    &sd->rf[i]);
		if (r < 0)
			goto fail;
		sd->nrf++;
	}
	return 0;
nomem:
	r = -ENOMEM;
fail:
	syncd_fini(sd);
	return r;
}

/* Whether gvr is one of the configured instance collections. */
static bool
syncd_watches(const struct syncd *sd, const char *gvr)
{
	size_t i;

	for (i = 0; i < sd->nrf; i++)
		if (strcmp(reflector_res(sd->rf[i])->key, gvr) == 0)
			return true;
	return false;
}

struct syncd_orphans {
	const struct syncd	*sd;
	struct sync_res		*res;	/* one per orphan, key = its gvr */
	char			**ns, **name, **kind;
	size_t			 n, alloc;
};

/* Collect an instance row of a collection that is no longer configured. */
static int
syncd_orphan(const struct cache_instance *in, void *arg)
{
	struct syncd_orphans *o = arg;
	size_t n;

	if (syncd_watches(o->sd, in->gvr))
		return 0;
	/* a kind discovery has not found yet: kept until it has looked */
	if (!syncd_disc_done(o->sd) && syncd_disc_owns(o->sd, in->gvr))
		return 0;
	if (o->n == o->alloc) {
		n = o->alloc ? o->alloc * 2 : 16;
		if ((o->res = reallocarray(o->res, n, sizeof(*o->res))) ==
		    NULL || (o->ns = reallocarray(o->ns, n, sizeof(char *))) ==
		    NULL || (o->name = reallocarray(o->name, n,
		    sizeof(char *))) == NULL || (o->kind = reallocarray(o->kind,
		    n, sizeof(char *))) == NULL)
			return -ENOMEM;
		o->alloc = n;
	}
	memset(&o->res[o->n], 0, sizeof(o->res[0]));
	o->res[o->n].table = CACHE_T_INSTANCE;
	snprintf(o->res[o->n].key, sizeof(o->res[0].key), "%s", in->gvr);
	o->ns[o->n] = strdup(in->ns);
	o->name[o->n] = strdup(in->name);
	o->kind[o->n] = strdup(in->kind);
	o->n++;
	if (o->ns[o->n - 1] == NULL || o->name[o->n - 1] == NULL ||
	    o->kind[o->n - 1] == NULL)
		return -ENOMEM;
	return 0;
}

/* Delete the instance rows of collections no longer configured. */
static int
syncd_drop_orphans(struct syncd *sd)
{
	struct syncd_orphans o = { .sd = sd };
	size_t i;
	int r;

	r = cache_instance_foreach(sd->cache, NULL, 0, syncd_orphan, &o);
	for (i = 0; i < o.n; i++) {
		if (r == 0)
			r = syncd_delete(sd, &o.res[i], o.kind[i], o.ns[i],
			    o.name[i]);
		free(o.ns[i]);
		free(o.name[i]);
		free(o.kind[i]);
	}
	if (r == 0 && o.n > 0)
		log_notice("dropped instances of unconfigured collections "
		    "count=%zu", o.n);
	free(o.res);
	free(o.ns);
	free(o.name);
	free(o.kind);
	return r;
}

static int syncd_start_one(struct syncd *sd, size_t i);

/* Start every reflector, resuming where the cache says. */
int
syncd_start(struct syncd *sd)
{
	size_t i;
	int r;

	if ((r = syncd_drop_orphans(sd)) < 0)
		return r;
	sd->started = true;
	for (i = 0; i < sd->nrf; i++)
		if ((r = syncd_start_one(sd, i)) < 0)
			return r;
	return 0;
}

/* Stop the reflectors, commit what is pending, free the core. */
void
syncd_fini(struct syncd *sd)
{
	size_t i;

	syncd_disc_stop(sd);
	for (i = 0; i < sd->nrf; i++)
		reflector_free(sd->rf[i]);
	sd->nrf = 0;
	strset_free(sd->claims_bad);
	sd->claims_bad = NULL;
	if (sd->cache != NULL)
		syncd_flush(sd);
	syncd_drop_pending(sd);
	free(sd->pending);
	sd->pending = NULL;
	sd->apending = 0;
	if (sd->flush_ev != NULL)
		event_free(sd->flush_ev);
	if (sd->retry_ev != NULL)
		event_free(sd->retry_ev);
	if (sd->housekeep_ev != NULL)
		event_free(sd->housekeep_ev);
	sd->flush_ev = sd->retry_ev = sd->housekeep_ev = NULL;
}

/* Refresh the per-kind gauges from the cache. */
void
syncd_update_gauges(struct syncd *sd)
{
	struct cache_counts n;

	if (sd->m.objects == NULL || cache_counts(sd->cache, &n) < 0)
		return;
	metric_set(sd->m.objects, "Namespace", NULL, (double)n.namespaces);
	metric_set(sd->m.objects, "instance", NULL, (double)n.instances);
	metric_set(sd->m.objects, CACHE_KIND_DEVICECLASS, NULL,
	    (double)n.deviceclasses);
	metric_set(sd->m.objects, CACHE_KIND_CLAIMTEMPLATE, NULL,
	    (double)n.claimtemplates);
	metric_set(sd->m.objects, CACHE_KIND_CLAIM, NULL, (double)n.claims);
	metric_set(sd->m.objects, CACHE_KIND_QUOTA, NULL, (double)n.quotas);
	metric_set(sd->m.subscribers, NULL, NULL, (double)sd->nsubs);
}

/* Start one reflector: resume from the cache's resourceVersion or list. */
static int
syncd_start_one(struct syncd *sd, size_t i)
{
	char rv[CACHE_RV_MAX + 1];
	const char *key = reflector_res(sd->rf[i])->key;
	int r;

	r = cache_watch_get(sd->cache, key, rv, sizeof(rv));
	if (reflector_res(sd->rf[i])->usage_claims && sd->acct != NULL) {
		/* the ledger reconciles with a list on every start */
		log_info("listing resource=%s", log_q(key));
		return reflector_start_list(sd->rf[i]);
	}
	if (r == 0)
		log_info("resuming watch resource=%s rv=%s", log_q(key),
		    log_q(rv));
	else
		log_info("listing resource=%s", log_q(key));
	return reflector_start(sd->rf[i], r == 0 ? rv : NULL);
}

/* Watch one more instance collection. */
int
syncd_add_instance(struct syncd *sd, const char *gvr, bool discovered)
{
	struct reflector_config rc;
	struct sync_res res;
	size_t n, i = sd->nrf;
	int r;

	if (syncd_watches(sd, gvr))
		return 1;
	if ((r = sync_res_instance(gvr, &res)) < 0)
		return r;
	if (sd->nrf == SYNCD_MAX_RES) {
		log_warn("not watching resource=%s: more than %d collections",
		    log_q(gvr), SYNCD_MAX_RES);
		return -E2BIG;
	}
	rc = sd->rcfg;
	if ((r = reflector_new(sd->base, sd->kc, &res, &rc, &syncd_ops, sd,
	    &sd->rf[i])) < 0)
		return r;
	sd->rf_discovered[i] = discovered;
	sd->rf_unserved[i] = false;
	sd->rf_error[i][0] = '\0';
	sd->nrf++;
	if (discovered) {
		for (n = 0, i = 0; i < sd->nrf; i++)
			n += sd->rf_discovered[i];
		metric_set(sd->m.discovered, NULL, NULL, (double)n);
		log_notice("watching discovered resource=%s", log_q(gvr));
	}
	if (sd->started && (r = syncd_start_one(sd, sd->nrf - 1)) < 0)
		log_warn("watch not started resource=%s error=%s", log_q(gvr),
		    strerror(-r));
	return 0;
}

/* Discovery's first pass is complete: drop what it did not find. */
void
syncd_disc_complete(struct syncd *sd)
{
	int r;

	if (sd->started && (r = syncd_drop_orphans(sd)) < 0)
		log_warn("dropping undiscovered instances failed error=%s",
		    strerror(-r));
	syncd_check_synced(sd);
}
