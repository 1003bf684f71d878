/*
 * The kpgpud-quota queue and writes: one key at a time, read what is
 * needed, plan, diff, then run the writes in order through the API client
 * with the writer token, stopping at the first failure (the key then
 * backs off) or as soon as this replica is no longer the leader.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kube/kube.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/resolved.h"
#include "common/strmap.h"
#include "common/util.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/reconcile.h"
#include "kpgpud-quota/topology_src.h"
#include "cache/cache.h"

#define NOT_LEADER	(-EPERM)

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
	/* a create answered 409: read, verify, maybe replace */
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
	/* last: work_new leaves their entries (260 KB) as they are */
	struct rc_actions	 ev;		/* events, first */
	struct rc_actions	 acts;		/* the diff */
	struct quotad_cands	 cands;		/* the tenant's instances */
};

enum {
	VS_NONE, VS_READ, VS_DELETE, VS_EVENT, VS_CREATE,
};

/* A key for one report: instance, its version, reason and message. */
static uint32_t
event_key(const struct plan_instance *in, const char *rv, const char *reason,
    const char *message)
{
	const char *parts[] = { in->kind, in->namespace, in->name, in->uid, rv,
	    reason, message };
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < nitems(parts); i++) {
		for (const char *c = parts[i]; *c != '\0'; c++)
			h = (h ^ (unsigned char)*c) * 16777619u;
		h = (h ^ 0xff) * 16777619u;
	}
	return h;
}

/* Whether a report is known to be on the server already. */
static bool
event_seen(const struct quotad *q, uint32_t key)
{
	unsigned n = q->nseen < QUOTAD_EVENTS_SEEN ? q->nseen :
	    QUOTAD_EVENTS_SEEN;

	for (unsigned i = 0; i < n; i++)
		if (q->seen[i] == key)
			return true;
	return false;
}

/* Whether this replica may write now. */
bool
quotad_may_write(const struct quotad *q)
{
	if (!q->cfg.leader_elect)
		return true;
	return lease_leader(q->lease);
}

/* Queue a key now. */
void
quotad_enqueue(struct quotad *q, const char *key)
{
	int r;

	if ((r = wq_add(q->wq, key, monotonic_ms())) < 0)
		log_warn("work queue refused key=%s error=%s", log_q(key),
		    strerror(-r));
	quotad_kick(q);
}

/* Whether w is the reconcile of tenant namespace ns. */
static bool
work_is_ns(const struct qwork *w, const char *ns)
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
quotad_change_ns(struct quotad *q, const struct ipc_change *ch,
    const char *ns)
{
	struct qwork *w = q->cur;

	if (work_is_ns(w, ns)) {
		if (w->ndefer < QUOTAD_DEFER_MAX) {
			w->defer[w->ndefer] = *ch;
			w->defer[w->ndefer++].resolved = NULL;
			return;
		}
	} else if (quotad_own_later(q, ch)) {
		quotad_kick(q);
		return;
	} else if (quotad_own_echo(q, quotad_cache(q), ch)) {
		metric_inc(q->m.own, NULL, NULL);
		return;
	}
	quotad_enqueue_ns(q, ns);
}

/* Queue a tenant namespace. */
void
quotad_enqueue_ns(struct quotad *q, const char *ns)
{
	char key[WQ_KEY_MAX + 1];

	if (ns == NULL || !dns1123_label_valid(ns))
		return;
	snprintf(key, sizeof(key), QUOTAD_NS_PREFIX "%s", ns);
	quotad_enqueue(q, key);
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
work_new(struct quotad *q)
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
work_free(struct qwork *w)
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
work_deferred(struct qwork *w, uint64_t now)
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

/*
 * Keep the plan of a tenant that comes back soon: waiting for its quota
 * to be enforced (or for an object to go), or failed. Its next reconcile
 * takes it (plan_take) and serves it again if nothing it was built from
 * changed; past QUOTAD_PLANS_KEPT plans the next one is built again.
 */
static void
plan_keep(struct qwork *w, int r)
{
	struct quotad *q = w->q;
	void *old = NULL;

	if (w->plan == NULL || q->plans == NULL || r == NOT_LEADER ||
	    (r == 0 && !w->requeue))
		return;
	if (strmap_put(q->plans, w->plan->namespace, w->plan, &old) < 0)
		return;
	plan_free(old);
	w->plan = NULL;
}

/* The plan kept for tenant namespace ns, taken out of the map, or NULL. */
static struct plan *
plan_take(struct quotad *q, const char *ns)
{
	void *p = NULL;

	if (q->plans == NULL || strmap_remove(q->plans, ns, &p) < 0)
		return NULL;
	return p;
}

/* Free every plan kept (strmap_free). */
static void
plan_free_kept(void *p)
{
	plan_free(p);
}

/* End a key: count it, forget or back off, and take the next one. */
static void
work_finish(struct qwork *w, int r)
{
	struct quotad *q = w->q;
	uint64_t now = monotonic_ms(), delay = 0;

	work_deferred(w, now);
	plan_keep(w, r);
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
	} else if (r == NOT_LEADER) {
		metric_inc(q->m.reconciles, "not_leader", NULL);
	} else {
		metric_inc(q->m.reconciles, "error", NULL);
		(void)wq_add_rate_limited(q->wq, w->key, now, &delay);
		log_warn("reconcile failed key=%s error=%s retry_ms=%llu",
		    log_q(w->key), strerror(-r), (unsigned long long)delay);
	}
	wq_done(q->wq, w->key, now);
	q->cur = NULL;
	work_free(w);
	quotad_kick(q);
}

static void work_next(struct qwork *w);
static void work_verify(struct qwork *w, const struct rc_action *a);
static void work_read_failed(struct qwork *w, const char *what,
    const struct kube_response *resp);

/* The answer to one write. */
static void
work_wrote(const struct kube_response *resp, void *arg)
{
	struct qwork *w = arg;
	int i = w->next - 1;
	const struct rc_action *a = i < w->ev.n ? &w->ev.a[i] :
	    &w->acts.a[i - w->ev.n];

	w->req = NULL;
	if (i < w->ev.n && (resp->status == 201 || resp->status == 409) &&
	    !event_seen(w->q, w->ev_key[i]))
		w->q->seen[w->q->nseen++ % QUOTAD_EVENTS_SEEN] = w->ev_key[i];
	if (resp->status >= 200 && resp->status < 300 && i < w->ev.n) {
		log_warn("reported %s", a->what);
		if (strstr(a->what, "InvalidGPUIsolation") != NULL)
			metric_inc(w->q->m.invalid, NULL, NULL);
	} else if (resp->status >= 200 && resp->status < 300) {
		log_info("%s %s key=%s", a->verb, a->what, log_q(w->key));
		quotad_own_wrote(w->q, a->method, resp->json);
		if (a->impostor_kind != NULL)
			metric_inc(w->q->m.impostors, a->impostor_kind, NULL);
	} else if ((resp->status == 409 || resp->status == 403) &&
	    a->verify_kind != NULL) {
		/*
		 * A name of ours taken: never done without reading it. Quota
		 * admission runs before the name check, so an object under our
		 * name that fills the quota makes our create a 403.
		 */
		work_verify(w, a);
		return;
	} else if (resp->status != a->also_ok || a->also_ok == 0) {
		log_warn("%s failed %s status=%ld reason=%s message=%s",
		    a->verb, a->what, resp->status, log_q(resp->reason),
		    log_q(resp->message));
		work_finish(w, resp->status == 0 && resp->error < 0 ?
		    resp->error : -EIO);
		return;
	}
	work_next(w);
}

/* Whether a is the write of w's tenant Namespace itself. */
static bool
is_ns_write(const struct qwork *w, const struct rc_action *a)
{
	char path[RC_PATH_MAX];

	if (w->obs.ns[0] == '\0')
		return false;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", w->obs.ns);
	return strcmp(a->path, path) == 0;
}

/*
 * Remember that Namespace ns is being patched, until sync streams its
 * change back; a set that cannot take it any more is never trusted again.
 */
static void
ns_sent_add(struct quotad *q, const char *ns)
{
	char *k;

	if (q->ns_sent == NULL || q->ns_sent_lost ||
	    strmap_has(q->ns_sent, ns))
		return;
	if ((k = strdup(ns)) == NULL || strmap_put(q->ns_sent, k, k,
	    NULL) < 0) {
		free(k);
		q->ns_sent_lost = true;
		log_warn("too many Namespace patches not streamed back by sync: "
		    "each Namespace write is read from the API first from now "
		    "on");
	}
}

/* sync streamed a change of Namespace ns: its cache row is current. */
void
quotad_ns_seen(struct quotad *q, const char *ns)
{
	void *k = NULL;

	if (q->ns_sent != NULL && strmap_remove(q->ns_sent, ns, &k) == 0)
		free(k);
}

/*
 * Whether the cache's row of Namespace ns is at least as new as our own
 * last patch of it (sync has streamed back every one we sent).
 */
static bool
ns_row_current(const struct quotad *q, const char *ns)
{
	return q->ns_sent != NULL && !q->ns_sent_lost &&
	    !strmap_has(q->ns_sent, ns);
}

/* Run the next write, if we still may. */
static void
work_next(struct qwork *w)
{
	const struct rc_action *a;
	int i = w->next, r;

	if (i >= w->ev.n + w->acts.n) {
		work_finish(w, 0);
		return;
	}
	if (!quotad_may_write(w->q)) {
		work_finish(w, NOT_LEADER);
		return;
	}
	a = i < w->ev.n ? &w->ev.a[i] : &w->acts.a[i - w->ev.n];
	w->next++;
	if (is_ns_write(w, a))
		ns_sent_add(w->q, w->obs.ns);
	r = kube_request(w->q->kc, a->method, a->path, a->content_type,
	    a->body, a->body ? strlen(a->body) : 0, work_wrote, w, &w->req);
	if (r < 0) {
		work_finish(w, r);
		return;
	}
	kube_request_meta(w->req);	/* work_wrote reads only who */
	metric_inc(w->q->m.writes, a->verb, NULL);
}

/* The write in process (the one a verify step belongs to). */
static const struct rc_action *
work_cur(const struct qwork *w)
{
	int i = w->next - 1;

	return i < w->ev.n ? &w->ev.a[i] : &w->acts.a[i - w->ev.n];
}

static void work_verify_cb(const struct kube_response *resp, void *arg);

/* Send one request of the verify steps; on failure end the key. */
static void
verify_send(struct qwork *w, int step, const char *method, const char *path,
    const char *body)
{
	int r;

	w->vstep = step;
	r = kube_request(w->q->kc, method, path, body ? RC_JSON : NULL, body,
	    body ? strlen(body) : 0, work_verify_cb, w, &w->req);
	if (r < 0) {
		w->vstep = VS_NONE;
		work_finish(w, r);
		return;
	}
	/* a read is judged whole; of a write only who it is about is read */
	if (strcmp(method, "GET") != 0) {
		kube_request_meta(w->req);
		metric_inc(w->q->m.writes, strcmp(method, "POST") == 0 ?
		    "create" : "delete", NULL);
	}
}

/* Report the impostor found on the instance, then go on with next. */
static void
verify_report(struct qwork *w, const struct rc_action *a, int next)
{
	struct rc_action ev;
	char msg[RC_WHY_MAX + 400];

	snprintf(msg, sizeof(msg), "%.200s (uid %s) is not kpgpud's: %.300s; "
	    "%s", a->what, w->vuid, w->vwhy, w->vdeleting ? "it is being "
	    "deleted, replaced once gone" : "replaced");
	log_warn("impostor %s key=%s", msg, log_q(w->key));
	if (!w->has_inst || reconcile_event(&w->inst, w->inst_rv,
	    NULL, "ImpostorReplaced", msg, realtime_ms(), &ev) < 0) {
		w->vstep = next;
		work_verify_cb(NULL, w);
		return;
	}
	free(w->vbody);
	w->vbody = ev.body;
	/* the answer does not matter: the report is best effort */
	w->vstep = VS_EVENT;
	w->vnext = next;
	if (kube_request(w->q->kc, ev.method, ev.path, ev.content_type,
	    ev.body, strlen(ev.body), work_verify_cb, w, &w->req) < 0) {
		w->vstep = next;
		work_verify_cb(NULL, w);
	}
}

/* What was read under our name: ours, or replace it. */
static void
verify_read(struct qwork *w, const struct rc_action *a,
    const struct kube_response *resp)
{
	json_t *want = strcmp(a->verify_kind, "DeviceClass") == 0 ?
	    w->plan->device_class : w->plan->claim;
	json_t *md = json_object_get(resp->json, "metadata");
	const char *uid = json_string_value(json_object_get(md, "uid"));
	enum rc_verdict v;

	if (resp->status == 404) {
		verify_send(w, VS_CREATE, "POST", a->path, a->body);
		return;
	}
	if (resp->status != 200 || !json_is_object(md)) {
		work_read_failed(w, a->item, resp);
		return;
	}
	v = reconcile_verdict(want, resp->json, w->vwhy, sizeof(w->vwhy));
	snprintf(w->vuid, sizeof(w->vuid), "%s", uid ? uid : "");
	w->vimpostor = v == RC_IMPOSTOR;
	w->vdeleting = json_object_get(md, "deletionTimestamp") != NULL;
	if (v == RC_OURS && !w->vdeleting) {
		w->vstep = VS_NONE;
		work_next(w);
		return;
	}
	if (w->vdeleting) {
		/* in use: it goes with its last pod; ours comes then */
		w->requeue = true;
		if (w->vimpostor) {
			verify_report(w, a, VS_NONE);
			return;
		}
		w->vstep = VS_NONE;
		work_next(w);
		return;
	}
	free(w->vbody);
	if ((w->vbody = reconcile_delete_body(w->vuid)) == NULL) {
		work_finish(w, -ENOMEM);
		return;
	}
	verify_send(w, VS_DELETE, "DELETE", a->item, w->vbody);
}

/*
 * The steps after a 409 on a create of ours: read the object of that
 * name; if it is not ours as planned, delete exactly it (uid
 * precondition), report an impostor, create ours again.
 */
static void
work_verify_cb(const struct kube_response *resp, void *arg)
{
	struct qwork *w = arg;
	const struct rc_action *a = work_cur(w);
	const char *kind = a->verify_kind;

	w->req = NULL;
	switch (w->vstep) {
	case VS_READ:
		verify_read(w, a, resp);
		return;
	case VS_DELETE:
		if (resp->status < 200 || (resp->status >= 300 &&
		    resp->status != 404)) {
			log_warn("replacing %s failed status=%ld message=%s",
			    a->what, resp->status, log_q(resp->message));
			work_finish(w, -EAGAIN);
			return;
		}
		if (w->vimpostor && resp->status != 404)
			metric_inc(w->q->m.impostors, kind, NULL);
		if (w->vimpostor) {
			verify_report(w, a, VS_CREATE);
			return;
		}
		verify_send(w, VS_CREATE, "POST", a->path, a->body);
		return;
	case VS_EVENT:
		if (resp != NULL && (resp->status < 200 || resp->status >= 300) &&
		    resp->status != 409)
			log_warn("impostor report failed status=%ld",
			    resp->status);
		if (w->vnext == VS_NONE) {
			w->vstep = VS_NONE;
			work_next(w);
			return;
		}
		verify_send(w, VS_CREATE, "POST", a->path, a->body);
		return;
	case VS_CREATE:
		if (resp == NULL) {
			verify_send(w, VS_CREATE, "POST", a->path, a->body);
			return;
		}
		w->vstep = VS_NONE;
		if (resp->status == 409) {
			/* deleted but still there (in use): look again later */
			log_info("%s still terminating key=%s", a->what,
			    log_q(w->key));
			w->requeue = true;
		} else if (resp->status < 200 || resp->status >= 300) {
			log_warn("create failed %s status=%ld message=%s",
			    a->what, resp->status, log_q(resp->message));
			work_finish(w, -EIO);
			return;
		} else {
			log_notice("replaced %s key=%s", a->what,
			    log_q(w->key));
			quotad_own_wrote(w->q, "POST", resp->json);
		}
		work_next(w);
		return;
	case VS_NONE:	/* from verify_report without an event */
		work_next(w);
		return;
	default:
		work_finish(w, -EINVAL);
		return;
	}
}

/* A create of ours answered 409: read what holds the name. */
static void
work_verify(struct qwork *w, const struct rc_action *a)
{
	if (w->plan == NULL) {
		work_finish(w, -EINVAL);
		return;
	}
	verify_send(w, VS_READ, "GET", a->item, NULL);
}

/* Add one event (type NULL: Warning) unless already reported. */
static void
work_event(struct qwork *w, const struct plan_instance *in, const char *rv,
    const char *type, const char *reason, const char *message)
{
	uint32_t key = event_key(in, rv, reason, message);

	if (w->ev.n >= RC_MAX_ACTIONS || event_seen(w->q, key))
		return;
	if (reconcile_event(in, rv, type, reason, message, realtime_ms(),
	    &w->ev.a[w->ev.n]) == 0)
		w->ev_key[w->ev.n++] = key;
}

/* Diff and start writing. */
static void
work_diff(struct qwork *w)
{
	int r;

	reconcile_actions_clear(&w->acts);
	if ((r = reconcile_diff(w->plan, &w->obs, &w->acts)) < 0) {
		work_finish(w, r);
		return;
	}
	if (w->acts.n > 0)
		log_debug("reconcile key=%s writes=%d", log_q(w->key),
		    w->acts.n);
	work_next(w);
}

/* The failure of a read: back off. */
static void
work_read_failed(struct qwork *w, const char *what,
    const struct kube_response *resp)
{
	log_warn("reading %s failed key=%s status=%ld message=%s", what,
	    log_q(w->key), resp->status, log_q(resp->message));
	work_finish(w, resp->status == 0 && resp->error < 0 ? resp->error :
	    -EIO);
}

/*
 * The Namespace as the API has it, read when the cache may lag behind our
 * own last patch of it: a Namespace write is only sent when the API still
 * needs it.
 */
static void
work_namespace(const struct kube_response *resp, void *arg)
{
	struct qwork *w = arg;
	json_t *meta = json_object_get(resp->json, "metadata");
	const char *label, *res;

	w->req = NULL;
	if (resp->status == 404) {
		w->obs.ns_exists = false;
		work_diff(w);
		return;
	}
	if (resp->status != 200 || !json_is_object(meta)) {
		work_read_failed(w, "namespace", resp);
		return;
	}
	label = json_string_value(json_object_get(json_object_get(meta,
	    "labels"), RESOLVED_LABEL));
	res = json_string_value(json_object_get(json_object_get(meta,
	    "annotations"), RESOLVED_ANNOTATION));
	w->obs.ns_isolated = label != NULL && strcmp(label, "true") == 0;
	free((char *)w->obs.ns_resolved);
	w->obs.ns_resolved = res != NULL ? strdup(res) : NULL;
	json_decref(w->obs.ns_annots);
	w->obs.ns_annots = json_incref(json_object_get(meta, "annotations"));
	w->obs.ns_terminating = json_object_get(meta, "deletionTimestamp") !=
	    NULL;
	work_diff(w);
}

/* Whether the diff wants to write the Namespace itself. */
static bool
writes_namespace(const struct qwork *w)
{
	for (int i = 0; i < w->acts.n; i++)
		if (is_ns_write(w, &w->acts.a[i]))
			return true;
	return false;
}

/* The namespace's quotas arrived: diff, confirm the Namespace, write. */
static void
work_quotas(const struct kube_response *resp, void *arg)
{
	struct qwork *w = arg;
	char path[RC_PATH_MAX];
	json_t *items;
	int r;

	w->req = NULL;
	items = json_object_get(resp->json, "items");
	if (resp->status != 200 || !json_is_array(items)) {
		work_read_failed(w, "quotas", resp);
		return;
	}
	w->obs.quotas = json_incref(items);
	if ((r = reconcile_diff(w->plan, &w->obs, &w->acts)) < 0) {
		work_finish(w, r);
		return;
	}
	/* reported before the writes replace them */
	for (int i = 0; w->has_inst && i < w->acts.nimpostors; i++) {
		log_warn("impostor %s key=%s", w->acts.impostor[i],
		    log_q(w->key));
		work_event(w, &w->inst, w->inst_rv, NULL, "ImpostorReplaced",
		    w->acts.impostor[i]);
	}
	if (w->acts.quota_pending)
		log_info("quota %s/%s not enforced yet (its status.hard lacks "
		    "the planned keys): claim and Namespace wait key=%s",
		    w->obs.ns, w->plan->quota_name, log_q(w->key));
	if (w->acts.wait || w->obs.more_owned)
		w->requeue = true;
	/* the cache's row decides unless our own patch may be ahead of it */
	if (!writes_namespace(w) || w->ns_current) {
		work_next(w);
		return;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", w->obs.ns);
	if ((r = kube_request(w->q->kc, "GET", path, NULL, NULL, 0,
	    work_namespace, w, &w->req)) < 0)
		work_finish(w, r);
}

/*
 * Pick the oldest candidate, warn the others, and plan for it: the plan
 * kept from the tenant's last reconcile when built from the same inputs.
 */
static int
work_plan(struct qwork *w, const char *ns, const struct quotad_cands *c,
    bool *ret_keep)
{
	struct plan_config pc;
	struct plan *kept = plan_take(w->q, ns);
	char err[400], msg[512];
	int win = 0, r;

	*ret_keep = false;
	if (c->n == 0) {
		plan_free(kept);
		return 0;
	}
	for (int i = 1; i < c->n; i++)
		if (plan_instance_cmp(&c->in[i], &c->in[win]) < 0)
			win = i;
	for (int i = 0; i < c->n; i++) {
		if (i == win)
			continue;
		snprintf(msg, sizeof(msg), "namespace is already GPU-isolated "
		    "by %s/%s, the older instance; this instance's %s "
		    "annotation is ignored", c->in[win].kind, c->in[win].name,
		    ANNOTATION_KEY);
		work_event(w, &c->in[i], c->rv[i], NULL,
		    "ConflictingGPUIsolation",
		    msg);
	}
	w->inst = c->in[win];
	snprintf(w->inst_rv, sizeof(w->inst_rv), "%s", c->rv[win]);
	w->has_inst = true;
	pc = w->q->cfg.plan;
	if (pc.strict) {
		pc.classes = (const char *const *)w->q->classes.gpu;
		pc.nclasses = w->q->classes.ngpu;
	}
	pc.topology = w->topo;
	if (kept != NULL && plan_serves(kept, &c->in[win], &pc)) {
		w->plan = kept;
		r = 0;
	} else {
		plan_free(kept);
		r = plan_build(&c->in[win], &pc, &w->plan, err, sizeof(err));
	}
	if (r == -EINVAL || r == PLAN_EGATE || r == PLAN_ENEVER) {
		log_debug("annotation refused kind=%s name=%s reason=%s",
		    c->in[win].kind, log_q(c->in[win].name), log_q(err));
		if (r == -EINVAL)
			snprintf(msg, sizeof(msg), "invalid %s annotation: %s; "
			    "the last good state is kept", ANNOTATION_KEY, err);
		else
			snprintf(msg, sizeof(msg), "%s; nothing of this %s is "
			    "composed, the last good state is kept", err,
			    ANNOTATION_KEY);
		work_event(w, &c->in[win], c->rv[win], NULL,
		    plan_refusal_reason(r), msg);
		w->result = "invalid";
		*ret_keep = true;
		return 0;
	}
	if (r < 0)
		return r;
	for (int i = 0; i < w->plan->nevents; i++)
		work_event(w, &c->in[win], c->rv[win], w->plan->events[i].type,
		    w->plan->events[i].reason, w->plan->events[i].message);
	return 0;
}

/* Fill one rc_owned from a cache row; -E2BIG when a field is too long. */
static int
owned_fill(const struct cache_owned *o, struct rc_owned *ro)
{
	if (strlen(o->kind) >= sizeof(ro->kind) ||
	    strlen(o->name) >= sizeof(ro->name) ||
	    (o->uid != NULL && strlen(o->uid) >= sizeof(ro->uid)))
		return -E2BIG;
	strcpy(ro->kind, o->kind);
	strcpy(ro->name, o->name);
	strcpy(ro->uid, o->uid != NULL ? o->uid : "");
	ro->data = json_loads(o->data ? o->data : "{}", 0, NULL);
	if (ro->data == NULL)
		ro->data = json_object();
	return 0;
}

struct owned_ctx {
	struct rc_observed	*obs;
	const char		*skip_kind;	/* the plan's claim */
	const char		*skip;
};

/*
 * Keep one of kpgpud's other claims or templates (both labels; a decoy
 * with the managed-by label alone is not kpgpud's and not looked at). The
 * plan's own name is looked up by name, so nothing here can hide it.
 */
static int
owned_cb(const struct cache_owned *o, void *arg)
{
	struct owned_ctx *x = arg;
	struct rc_observed *obs = x->obs;
	struct rc_owned ro;

	if (strcmp(o->kind, CACHE_KIND_CLAIMTEMPLATE) != 0 &&
	    strcmp(o->kind, CACHE_KIND_CLAIM) != 0)
		return 0;
	if (x->skip != NULL && strcmp(o->name, x->skip) == 0 &&
	    strcmp(o->kind, x->skip_kind) == 0)
		return 0;
	memset(&ro, 0, sizeof(ro));
	if (owned_fill(o, &ro) < 0)
		return 0;
	if (!reconcile_owned_ours(ro.data)) {
		json_decref(ro.data);
		return 0;
	}
	if (obs->nowned >= RC_MAX_OWNED) {
		obs->more_owned = true;
		json_decref(ro.data);
		return 0;
	}
	obs->owned[obs->nowned++] = ro;
	return 0;
}

/* The object of the plan's claim kind and name in the cache, if any. */
static int
observe_planned(struct cache *c, const struct plan *p,
    struct rc_observed *obs)
{
	struct cache_owned *o = NULL;
	int r;

	r = cache_owned_get(c, p->claim_is_template ?
	    CACHE_KIND_CLAIMTEMPLATE : CACHE_KIND_CLAIM, obs->ns,
	    p->claim_name, &o);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (owned_fill(o, &obs->planned) == 0)
		obs->has_planned = true;
	cache_owned_free(o);
	return 0;
}

/* Read the namespace, its owned objects and the plan's class. */
static int
work_observe(struct qwork *w, struct cache *c, const char *ns)
{
	struct rc_observed *obs = &w->obs;
	struct owned_ctx x = { obs, NULL, NULL };
	struct cache_ns *row = NULL;
	struct cache_owned *dc = NULL;
	int r;

	if (w->plan != NULL) {
		x.skip = w->plan->claim_name;
		x.skip_kind = w->plan->claim_is_template ?
		    CACHE_KIND_CLAIMTEMPLATE : CACHE_KIND_CLAIM;
	}
	snprintf(obs->ns, sizeof(obs->ns), "%s", ns);
	/* as of this read: a patch streamed back later is not in the row */
	w->ns_current = ns_row_current(w->q, ns);
	r = cache_ns_get(c, ns, &row);
	if (r < 0 && r != -ENOENT)
		return r;
	if (row != NULL) {
		obs->ns_exists = true;
		obs->ns_terminating = strcmp(row->phase, "Terminating") == 0;
		obs->ns_isolated = row->isolated;
		if (row->resolved != NULL &&
		    (obs->ns_resolved = strdup(row->resolved)) == NULL)
			r = -ENOMEM;
		/* kubeplus.io/ keys only, which are all ns_diff reads */
		if (row->annotations != NULL)
			obs->ns_annots = json_loads(row->annotations, 0, NULL);
		cache_ns_free(row);
		if (r == -ENOMEM)
			return r;
	}
	if ((r = cache_owned_foreach(c, ns, NULL, 0, owned_cb, &x)) < 0)
		return r;
	if (w->plan == NULL)
		return 0;
	if ((r = observe_planned(c, w->plan, obs)) < 0)
		return r;
	if (w->plan->device_class == NULL)
		return 0;
	r = cache_owned_get(c, CACHE_KIND_DEVICECLASS, "",
	    w->plan->class_name, &dc);
	if (r == 0) {
		obs->device_class = json_loads(dc->data ? dc->data : "{}", 0,
		    NULL);
		snprintf(obs->device_class_uid, sizeof(obs->device_class_uid),
		    "%s", dc->uid ? dc->uid : "");
		cache_owned_free(dc);
	}
	return r == -ENOENT ? 0 : r;
}

/*
 * The GPU classes strict quota closes, from q's class index. -EAGAIN while
 * sync has not listed the DeviceClasses yet: strict then waits rather
 * than leave a class out.
 */
static int
work_gpu_classes(struct qwork *w, struct cache *c)
{
	struct quotad *q = w->q;
	int r;

	if ((r = quotad_classes_get(&q->classes, c, q->cfg.gpu_drivers)) < 0)
		return r;
	metric_set(q->m.classes, NULL, NULL, q->classes.ngpu);
	return 0;
}

/* Reconcile one tenant namespace: plan, observe, then list its quotas. */
static int
work_ns(struct qwork *w, struct cache *c, const char *ns)
{
	char path[RC_PATH_MAX];
	bool keep;
	int r;

	if (w->q->cfg.plan.strict && (r = work_gpu_classes(w, c)) < 0) {
		if (r == -EAGAIN)
			log_info("DeviceClasses not listed yet: waiting "
			    "key=%s", log_q(w->key));
		return r;
	}
	if ((r = quotad_topology(w->q, c, ns, &w->topo)) < 0) {
		if (r == -EAGAIN)
			log_info("ResourceSlices not listed yet: waiting "
			    "key=%s", log_q(w->key));
		return r;
	}
	r = quotad_candidates(w->q, ns, &w->cands);
	if (r == 0)
		r = work_plan(w, ns, &w->cands, &keep);
	if (r < 0)
		return r;
	if (keep) {
		work_next(w);
		return 0;
	}
	if ((r = work_observe(w, c, ns)) < 0)
		return r;
	if (!w->obs.ns_exists || w->obs.ns_terminating) {
		work_next(w);
		return 0;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/resourcequotas",
	    ns);
	return kube_request(w->q->kc, "GET", path, NULL, NULL, 0, work_quotas,
	    w, &w->req);
}

#define GC_MAX_CLASSES	256
/* Every kpgpud class is known to be in use: nothing more to read. */
#define GC_ALL_USED	(-ECANCELED)

struct gc_ctx {
	struct quotad		*q;
	struct plan_instance	 in;
	int			 nnames, nused, nseen;
	const char *const	*names;		/* kpgpud's classes */
	bool			 seen[GC_MAX_CLASSES];	/* names[i] used */
	char			*used[GC_MAX_CLASSES];
};

/* Remember one class as used. */
static void
gc_use(const char *cls, void *arg)
{
	struct gc_ctx *g = arg;

	for (int i = 0; i < g->nnames; i++)
		if (!g->seen[i] && strcmp(g->names[i], cls) == 0) {
			g->seen[i] = true;
			g->nseen++;
		}
	if (g->nused < GC_MAX_CLASSES &&
	    (g->used[g->nused] = strdup(cls)) != NULL)
		g->nused++;
}

/*
 * GC_ALL_USED once every kpgpud class is in use: the instances and owned
 * objects left to read could only add uses, never a class to delete.
 */
static int
gc_more(const struct gc_ctx *g)
{
	return g->nseen == g->nnames ? GC_ALL_USED : 0;
}

/* Remember the class a valid instance uses. */
static int
gc_used_cb(const struct cache_instance *ci, void *arg)
{
	struct gc_ctx *g = arg;
	struct plan *p = NULL;
	char err[256];

	if (ci->isolation == NULL || ci->deleted != NULL ||
	    quotad_instance(ci, &g->in) < 0 ||
	    plan_build(&g->in, &g->q->cfg.plan, &p, err, sizeof(err)) < 0)
		return 0;
	if (p->device_class != NULL)
		gc_use(p->class_name, g);
	/* its topology class, whether this plan (without topology) has it */
	if (plan_topo_class(p->namespace, err, sizeof(err)) == 0)
		gc_use(err, g);
	plan_free(p);
	return gc_more(g);
}

/*
 * Call fn with every DeviceClass a claim spec's devices member requests:
 * requests[].exactly.deviceClassName and requests[].firstAvailable[]
 * .deviceClassName.
 */
static void
requested_classes(json_t *devices, void (*fn)(const char *, void *),
    void *arg)
{
	json_t *req, *sub;
	const char *cls;
	size_t i, j;

	json_array_foreach(json_object_get(devices, "requests"), i, req) {
		cls = json_string_value(json_object_get(json_object_get(req,
		    "exactly"), "deviceClassName"));
		if (cls != NULL)
			fn(cls, arg);
		json_array_foreach(json_object_get(req, "firstAvailable"), j,
		    sub) {
			cls = json_string_value(json_object_get(sub,
			    "deviceClassName"));
			if (cls != NULL)
				fn(cls, arg);
		}
	}
}

/* Remember the classes an owned claim or template requests. */
static int
gc_ref_cb(const struct cache_owned *o, void *arg)
{
	struct gc_ctx *g = arg;
	json_t *data, *dev;

	if (strcmp(o->kind, CACHE_KIND_CLAIMTEMPLATE) != 0 &&
	    strcmp(o->kind, CACHE_KIND_CLAIM) != 0)
		return 0;
	if ((data = json_loads(o->data ? o->data : "{}", 0, NULL)) == NULL)
		return 0;
	dev = json_object_get(json_object_get(data, "spec"), "devices");
	if (strcmp(o->kind, CACHE_KIND_CLAIMTEMPLATE) == 0)
		dev = json_object_get(json_object_get(json_object_get(data,
		    "spec"), "spec"), "devices");
	requested_classes(dev, gc_use, g);
	json_decref(data);
	return gc_more(g);
}

struct gc_claim {
	struct qwork	*w;
	json_t		*claim;
};

static int gc_push_params(struct qwork *w);

/* A class a claim requests: keep the deletion of that class back. */
static void
gc_claim_class(const char *cls, void *arg)
{
	struct gc_claim *x = arg;
	struct qwork *w = x->w;
	json_t *md = json_object_get(x->claim, "metadata");
	const char *name;

	for (int i = 0; i < w->acts.n; i++) {
		name = strrchr(w->acts.a[i].path, '/');
		if (w->keep[i] || name == NULL || strcmp(name + 1, cls) != 0)
			continue;
		w->keep[i] = true;
		log_info("class still requested, kept class=%s claim_ns=%s "
		    "claim=%s", log_q(cls),
		    log_q(json_string_value(json_object_get(md, "namespace"))),
		    log_q(json_string_value(json_object_get(md, "name"))));
	}
}

/* One page of every ResourceClaim: mark the classes still requested. */
static void
gc_claims_page(json_t *items, void *arg)
{
	struct gc_claim x = { arg, NULL };
	size_t i;

	json_array_foreach(items, i, x.claim)
		requested_classes(json_object_get(json_object_get(x.claim,
		    "spec"), "devices"), gc_claim_class, &x);
}

/*
 * The claim list is complete: delete only the classes no claim requests
 * (claims generated from a template carry no kpgpud label, so the cache
 * does not have them), and look again later for the ones kept.
 */
static void
gc_claims_end(const struct kube_response *resp, const char *rv, void *arg)
{
	struct qwork *w = arg;
	int n = 0;

	(void)rv;
	w->list = NULL;
	if (resp->status != 200) {
		work_read_failed(w, "resourceclaims", resp);
		return;
	}
	for (int i = 0; i < w->acts.n; i++) {
		if (w->keep[i]) {
			free(w->acts.a[i].body);
			w->requeue = true;
			continue;
		}
		if (n != i)
			w->acts.a[n] = w->acts.a[i];
		n++;
	}
	w->acts.n = n;
	if ((n = gc_push_params(w)) < 0) {
		work_finish(w, n);
		return;
	}
	work_next(w);
}

/*
 * The non-GPU DeviceClasses for the policies' parameter ConfigMap, into
 * w->params; left NULL while sync has not listed the classes yet.
 */
static int
gc_params(struct qwork *w, const struct quotad_classes *cl, bool listed)
{
	const struct quotad_config *c = &w->q->cfg;

	if (c->params_name[0] == '\0' || !listed)
		return 0;
	if (cl->non_gpu_over)
		log_warn("more than %d non-GPU DeviceClasses: the rest are not "
		    "listed in ConfigMap %s/%s, and the admission policy denies "
		    "tenants' claims of them", QUOTAD_MAX_NON_GPU,
		    c->params_ns, c->params_name);
	if ((w->params = strdup(cl->non_gpu)) == NULL)
		return -ENOMEM;
	return 0;
}

/* Append the parameter ConfigMap's writes, if there are any to make. */
static int
gc_push_params(struct qwork *w)
{
	const struct quotad_config *c = &w->q->cfg;

	if (w->params == NULL)
		return 0;
	return reconcile_params(c->params_ns, c->params_name, w->params,
	    c->params_user, &w->acts);
}

/*
 * Collect the DeviceClasses nothing uses any more: neither a valid plan
 * nor an owned claim or template (an invalid annotation keeps its last
 * good state, class included), nor any ResourceClaim in the cluster, which
 * is listed from the API only when there is a class to delete.
 */
static int
work_gc(struct qwork *w, struct cache *c)
{
	struct quotad_classes *cl = &w->q->classes;
	struct gc_ctx *g;
	bool listed;
	int r;

	/* a class list still coming from sync: nothing deleted meanwhile */
	r = quotad_classes_get(cl, c, w->q->cfg.gpu_drivers);
	if (r < 0 && r != -EAGAIN)
		return r;
	listed = r == 0;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return -ENOMEM;
	g->q = w->q;
	g->names = (const char *const *)cl->ours;
	g->nnames = !listed ? 0 : cl->nours < GC_MAX_CLASSES ? cl->nours :
	    GC_MAX_CLASSES;
	r = gc_more(g);
	if (r == 0)
		r = cache_instance_foreach(c, NULL, 0, gc_used_cb, g);
	if (r == 0)
		r = cache_owned_foreach(c, NULL, NULL, 0, gc_ref_cb, g);
	if (r == 0 || r == GC_ALL_USED)
		r = reconcile_gc_classes(g->names, g->nnames,
		    (const char *const *)g->used, g->nused, &w->acts);
	for (int i = 0; i < g->nused; i++)
		free(g->used[i]);
	free(g);
	if (r == 0)
		r = gc_params(w, cl, listed);
	if (r < 0)
		return r;
	if (w->acts.n == 0) {
		if ((r = gc_push_params(w)) < 0)
			return r;
		work_next(w);
		return 0;
	}
	return kube_list_start(w->q->kc, "/apis/resource.k8s.io/v1/"
	    "resourceclaims", NULL, 0, NULL, gc_claims_page, gc_claims_end, w,
	    &w->list);
}

/* The admission policies' pass ended. */
static void
work_policies_done(int r, bool requeue, void *arg)
{
	struct qwork *w = arg;

	w->requeue = requeue;
	work_finish(w, r == -EPERM ? NOT_LEADER : r);
}

/* Start processing a key handed out by the queue. */
static void
work_start(struct quotad *q, const char *key)
{
	struct qwork *w;
	struct cache *c;
	bool tx;
	int r;

	if ((w = work_new(q)) == NULL) {
		(void)wq_add_rate_limited(q->wq, key, monotonic_ms(), NULL);
		wq_done(q->wq, key, monotonic_ms());
		return;
	}
	w->q = q;
	snprintf(w->key, sizeof(w->key), "%s", key);
	q->cur = w;
	if (strcmp(key, QUOTAD_POLICIES_KEY) == 0) {
		/* the file's objects only: no cache needed */
		if ((r = qpol_start(q, work_policies_done, w, &w->pol)) < 0)
			work_finish(w, r);
		return;
	}
	if ((c = quotad_cache(q)) == NULL) {
		work_finish(w, -ENOENT);
		return;
	}
	/*
	 * The key's reads from one snapshot: SQLite then keeps the pages
	 * they share, instead of reading them again for every statement
	 * after sync wrote (without it, each read is a snapshot of its own).
	 */
	tx = cache_begin(c) == 0;
	if (strcmp(key, QUOTAD_GC_KEY) == 0)
		r = work_gc(w, c);
	else if (strncmp(key, QUOTAD_NS_PREFIX, strlen(QUOTAD_NS_PREFIX)) == 0)
		r = work_ns(w, c, key + strlen(QUOTAD_NS_PREFIX));
	else
		r = 0, work_next(w);
	if (tx && cache_commit(c) < 0)
		cache_rollback(c);
	if (r < 0)
		work_finish(w, r);
}

/* The kick event: hand out keys while we may, else wait for the queue. */
static void
kick_cb(evutil_socket_t fd, short what, void *arg)
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
	 * from one snapshot of the cache (own.c); work_start reads in it.
	 */
	if (q->nlater > 0 && (c = quotad_cache(q)) != NULL)
		tx = cache_begin(c) == 0;
	quotad_own_settle(q);
	if (!quotad_may_write(q))
		;
	else if (wq_get(q->wq, now, &key) == 0)
		work_start(q, key);
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
quotad_kick(struct quotad *q)
{
	if (q->kick_ev != NULL)
		event_active(q->kick_ev, EV_TIMEOUT, 0);
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
	quotad_kick(q);
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
	q->base = base;
	q->kc = kc;
	if ((r = quotad_metrics(q, reg)) < 0 ||
	    (r = quotad_topology_start(q, reg)) < 0 ||
	    (r = wq_new(&cfg->wq, monotonic_ms(), &q->wq)) < 0 ||
	    (r = strmap_new(0, QUOTAD_NS_SENT_MAX, &q->ns_sent)) < 0 ||
	    (r = strmap_new(0, QUOTAD_OWN_MAX, &q->own)) < 0 ||
	    (r = strmap_new(0, QUOTAD_PLANS_KEPT, &q->plans)) < 0)
		return r;
	q->kick_ev = event_new(base, -1, 0, kick_cb, q);
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
	if (q->cur != NULL) {
		work_free(q->cur);
		q->cur = NULL;
	}
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
	strmap_free(q->plans, plan_free_kept);
	q->plans = NULL;
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
	if (q->cur != NULL) {
		work_free(q->cur);
		q->cur = NULL;
	}
	return lease_release(q->lease, cfg, 2000);
}

/* Refresh the gauges. */
void
quotad_update_gauges(struct quotad *q)
{
	metric_set(q->m.depth, NULL, NULL, (double)wq_len(q->wq));
	metric_set(q->m.leader, NULL, NULL, quotad_may_write(q) ? 1 : 0);
}
