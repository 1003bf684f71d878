/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The work of one key (see quota_int.h): a tenant namespace read from the
 * cache (candidates, Namespace row, owned objects) and the API (its
 * ResourceQuotas, the Namespace when our own patch may be ahead of the
 * cache), planned (plan.c, or the plan kept from its last reconcile) and
 * diffed (reconcile.c); then, for every kind of key, the writes run in
 * order, events first, stopping at the first failure or as soon as this
 * replica is no longer the leader.
 */
#include "kpgpud-quota/quota_int.h"

#include "common/resolved.h"

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
		verify_start(w, a);
		return;
	} else if (resp->status != a->also_ok || a->also_ok == 0) {
		log_warn("%s failed %s status=%ld reason=%s message=%s",
		    a->verb, a->what, resp->status, log_q(resp->reason),
		    log_q(resp->message));
		queue_finish(w, resp->status == 0 && resp->error < 0 ?
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
work_ns_seen(struct quotad *q, const char *ns)
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
void
work_next(struct qwork *w)
{
	const struct rc_action *a;
	int i = w->next, r;

	if (i >= w->ev.n + w->acts.n) {
		queue_finish(w, 0);
		return;
	}
	if (!quotad_may_write(w->q)) {
		queue_finish(w, QUOTAD_NOT_LEADER);
		return;
	}
	a = i < w->ev.n ? &w->ev.a[i] : &w->acts.a[i - w->ev.n];
	w->next++;
	if (is_ns_write(w, a))
		ns_sent_add(w->q, w->obs.ns);
	r = kube_request(w->q->kc, a->method, a->path, a->content_type,
	    a->body, a->body ? strlen(a->body) : 0, work_wrote, w, &w->req);
	if (r < 0) {
		queue_finish(w, r);
		return;
	}
	kube_request_meta(w->req);	/* work_wrote reads only who */
	metric_inc(w->q->m.writes, a->verb, NULL);
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
		queue_finish(w, r);
		return;
	}
	if (w->acts.n > 0)
		log_debug("reconcile key=%s writes=%d", log_q(w->key),
		    w->acts.n);
	work_next(w);
}

/* The failure of a read: back off. */
void
work_read_failed(struct qwork *w, const char *what,
    const struct kube_response *resp)
{
	log_warn("reading %s failed key=%s status=%ld message=%s", what,
	    log_q(w->key), resp->status, log_q(resp->message));
	queue_finish(w, resp->status == 0 && resp->error < 0 ? resp->error :
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
		queue_finish(w, r);
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
		queue_finish(w, r);
}

/*
 * Keep the plan of a tenant that comes back soon: waiting for its quota
 * to be enforced (or for an object to go), or failed. Its next reconcile
 * takes it (kept_plan_take) and serves it again if nothing it was built
 * from changed; past QUOTAD_PLANS_KEPT plans the next one is built again.
 */
void
work_keep_plan(struct qwork *w, int r)
{
	struct quotad *q = w->q;
	void *old = NULL;

	if (w->plan == NULL || q->plans == NULL || r == QUOTAD_NOT_LEADER ||
	    (r == 0 && !w->requeue))
		return;
	if (strmap_put(q->plans, w->plan->namespace, w->plan, &old) < 0)
		return;
	plan_free(old);
	w->plan = NULL;
}

/* The plan kept for tenant namespace ns, taken out of the map, or NULL. */
static struct plan *
kept_plan_take(struct quotad *q, const char *ns)
{
	void *p = NULL;

	if (q->plans == NULL || strmap_remove(q->plans, ns, &p) < 0)
		return NULL;
	return p;
}

/* Free one plan kept (strmap_free). */
static void
kept_plan_free(void *p)
{
	plan_free(p);
}

/* Free every plan kept (quotad_stop). */
void
work_plans_free(struct quotad *q)
{
	strmap_free(q->plans, kept_plan_free);
	q->plans = NULL;
}

/*
 * The annotation of the instance planned for was refused (r, why: err):
 * report it; the last good state is kept.
 */
static void
work_refused(struct qwork *w, const struct plan_instance *in, const char *rv,
    int r, const char *err)
{
	char msg[512];

	log_debug("annotation refused kind=%s name=%s reason=%s",
	    in->kind, log_q(in->name), log_q(err));
	if (r == -EINVAL)
		snprintf(msg, sizeof(msg), "invalid %s annotation: %s; "
		    "the last good state is kept", ANNOTATION_KEY, err);
	else
		snprintf(msg, sizeof(msg), "%s; nothing of this %s is "
		    "composed, the last good state is kept", err,
		    ANNOTATION_KEY);
	work_event(w, in, rv, NULL, plan_refusal_reason(r), msg);
	w->result = "invalid";
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
	struct plan *kept = kept_plan_take(w->q, ns);
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
		work_refused(w, &c->in[win], c->rv[win], r, err);
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
int
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
