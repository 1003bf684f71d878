/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-sync's usage accounting: the claims and Pods that feed the ledger
 * (see acct.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cache/usage.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/acct_impl.h"
#include "kpgpud-sync/acct_pending.h"
#include "kpgpud-sync/acct_result.h"
#include "kpgpud-sync/acct_totals.h"
#include "kpgpud-sync/ledger.h"
#include "kpgpud-sync/syncd.h"

#define ACCT_RELIST_MS	500

/* One collection the ledger watches: every object of PATH (FIELDS, when
 * not NULL, a field selector), cached as KIND under KEY. */
static void
acct_res(struct sync_res *ret, const char *kind, const char *key,
    const char *path, const char *fields)
{
	memset(ret, 0, sizeof(*ret));
	ret->table = CACHE_T_OWNED;
	ret->usage = true;
	ret->kind = kind;
	ret->field_selector = fields;
	snprintf(ret->key, sizeof(ret->key), "%s", key);
	snprintf(ret->path, sizeof(ret->path), "%s", path);
}

/*
 * Every ResourceClaim (the ledger keeps those of isolated namespaces): the
 * watch of the claims' allocations, which feeds the ledger too.
 */
void
acct_res_claims(struct sync_res *ret)
{
	(void)sync_res_owned(CACHE_KIND_ALLOC, ret);
	ret->usage_claims = true;
}

/* Every Pod (the ledger reads those that use claims). */
void
acct_res_pods(struct sync_res *ret)
{
	acct_res(ret, "usage:Pod", "usage/pods", "/api/v1/pods", NULL);
}

/* The resourceclaim controller's FailedResourceClaimCreation Events. */
void
acct_res_events(struct sync_res *ret)
{
	acct_res(ret, "usage:Event", "usage/events", "/api/v1/events",
	    "reason=" ACCT_CLAIM_EVENT);
}

/* kpgpud-quota's Events (the last reconcile result of each instance). */
void
acct_res_results(struct sync_res *ret)
{
	acct_res(ret, "usage:QuotaEvent", "usage/quota-events",
	    "/api/v1/events", "reportingComponent=" ACCT_RESULT_SOURCE);
}

/* Which of the four collections a reflector is. */
static char
acct_which(struct reflector *rf)
{
	const struct sync_res *res = reflector_res(rf);

	return res->usage_claims ? 'R' : res->kind[6];	/* "usage:X" */
}

/* A write failed: the batch is lost and every collection relisted. */
int
acct_failed(struct acct *a, const char *what, int r)
{
	log_err("usage ledger write failed what=%s error=%s", what,
	    strerror(-r));
	a->sd->batch_failed = true;
	return r;
}

/*
 * The ledger refused a write of one interval (-EINVAL: its end would lie
 * before its start or its latest end before its end; why says which).
 * Logged and skipped: the interval stays as stored and the batch, with
 * every other interval in it, goes on.
 */
static void
acct_skipped(const char *what, const char *why, const char *uid,
    uint64_t start, uint64_t v)
{
	log_warn("usage interval write skipped what=%s claim_uid=%s "
	    "start_us=%llu value_us=%llu reason=%s", what, log_q(uid),
	    (unsigned long long)start, (unsigned long long)v, log_q(why));
}

/* The tenant instance of an isolated namespace ("" if none); -ENOENT. */
int
acct_instance(struct acct *a, const char *ns, char *out, size_t len)
{
	struct cache_ns *row = NULL;
	struct resolved res;
	char err[128];
	int r;

	if ((r = cache_ns_get(a->sd->cache, ns, &row)) < 0)
		return r;
	r = -EPERM;
	if (row->isolated && row->resolved != NULL && resolved_parse(
	    row->resolved, strlen(row->resolved), &res, err, sizeof(err)) ==
	    0) {
		snprintf(out, len, "%s", res.instance);
		r = 0;
	}
	cache_ns_free(row);
	return r;
}

/* The profile of a device, from its class's selectors when they say. */
static void
acct_profile(struct acct *a, struct ledger_device *d)
{
	struct cache_owned *o = NULL;

	if (*d->device_class == '\0' || cache_owned_get(a->sd->cache,
	    CACHE_KIND_DEVICECLASS, "", d->device_class, &o) < 0)
		return;
	ledger_profile_of(o->data, d->device, d->profile);
	cache_owned_free(o);
}

/* Open an interval: one row per device, then its consumers. */
static int
acct_open(struct acct *a, const struct ledger_claim *c, const char *sig,
    const char *instance, uint64_t start, enum ledger_how how, uint64_t lo)
{
	struct usage_row row;
	size_t i;
	int r;

	for (i = 0; i < c->ndevices; i++) {
		memset(&row, 0, sizeof(row));
		row.claim_uid = c->uid;
		row.start_us = start;
		row.dev = (unsigned)i;
		row.ns = c->ns;
		row.instance = instance;
		row.claim = c->name;
		row.driver = c->dev[i].driver;
		row.pool = c->dev[i].pool;
		row.device = c->dev[i].device;
		row.device_class = c->dev[i].device_class;
		row.profile = c->dev[i].profile;
		if (ledger_profile_share(row.profile, &row.share) < 0)
			row.share = 1.0;
		row.sig = sig;
		row.start_how = (int)how;
		row.lo_us = how == LEDGER_OBSERVED ? start : lo;
		if ((r = usage_row_add(a->st, &row)) < 0)
			return r;
	}
	log_info("usage interval opened namespace=%s claim=%s devices=%zu "
	    "how=%s", log_q(c->ns), log_q(c->name), c->ndevices,
	    ledger_how_name(how));
	return 0;
}

/* Record the claim's current consumers with its open interval. */
static int
acct_consumers(struct acct *a, const struct ledger_claim *c, uint64_t start)
{
	size_t i;
	int r;

	for (i = 0; i < c->nconsumers; i++)
		if ((r = usage_consumer_add(a->st, c->uid, start,
		    c->consumers[i].uid, c->consumers[i].name)) < 0)
			return r;
	return 0;
}

/* The earliest known start of the Pods a claim is reserved for (0: none). */
static int
acct_consumers_start(struct acct *a, const struct ledger_claim *c,
    uint64_t *ret)
{
	uint64_t st, fin;
	size_t i;
	int r;

	*ret = 0;
	for (i = 0; i < c->nconsumers; i++) {
		if ((r = usage_pod_get(a->st, c->consumers[i].uid, &st,
		    &fin)) < 0)
			return r;
		if (st != 0 && (*ret == 0 || st < *ret))
			*ret = st;
	}
	return 0;
}

/* The latest end of an earlier interval on any of the claim's devices. */
static int
acct_prev_end(struct acct *a, const struct ledger_claim *c, uint64_t *ret)
{
	uint64_t e;
	size_t i;
	int r;

	*ret = 0;
	for (i = 0; i < c->ndevices; i++) {
		if ((r = usage_prev_end(a->st, c->dev[i].driver, c->dev[i].pool,
		    c->dev[i].device, &e)) < 0)
			return r;
		if (e > *ret)
			*ret = e;
	}
	return 0;
}

/* Close an interval; the tenant counters follow. */
static int
acct_close(struct acct *a, const char *uid, uint64_t start, uint64_t end,
    int how, uint64_t hi)
{
	int r;

	acct_totals_interval(&a->totals, a->st, uid, start, -1);
	r = usage_close(a->st, uid, start, end, how, hi);
	acct_totals_interval(&a->totals, a->st, uid, start, 1);
	return r;
}

/* Forget a refused close of a claim observed again (it decides anew). */
static void
acct_retry_drop(struct acct *a, const char *uid)
{
	size_t i;

	for (i = 0; i < a->nretry; i++)
		if (strcmp(a->retry[i].uid, uid) == 0) {
			a->retry[i] = a->retry[--a->nretry];
			return;
		}
}

/* Keep a refused close of a claim no longer allocated for the heartbeat. */
static void
acct_retry_add(struct acct *a, const struct ledger_claim *c, uint64_t start,
    uint64_t seen, bool live)
{
	struct acct_retry *e;

	if (a->nretry == ACCT_RETRY_MAX) {
		log_warn("usage interval close not retried namespace=%s "
		    "claim=%s reason=%s", log_q(c->ns), log_q(c->name),
		    log_q("too many refused closes: left to the claim's next "
		    "observation or the next list"));
		return;
	}
	e = &a->retry[a->nretry++];
	snprintf(e->uid, sizeof(e->uid), "%s", c->uid);
	snprintf(e->ns, sizeof(e->ns), "%s", c->ns);
	snprintf(e->name, sizeof(e->name), "%s", c->name);
	e->start_us = start;
	e->seen_us = seen;
	e->live = live;
}

/*
 * Apply one observation of a claim (c->allocated false: gone) made at
 * now_us. A refused close of a claim no longer allocated is retried at the
 * next heartbeat (a deleted claim has no next observation); a refused
 * reopen waits for the claim's next one (it is still allocated).
 */
static int
acct_observe(struct acct *a, struct ledger_claim *c, bool live,
    uint64_t now_us)
{
	char sig[LEDGER_SIG_MAX], osig[LEDGER_SIG_MAX];
	char instance[RESOLVED_NAME_MAX + 64] = "";
	struct ledger_obs o;
	struct ledger_decision d;
	const char *why;
	size_t i;
	int r;

	memset(&o, 0, sizeof(o));
	if (a->nretry > 0)
		acct_retry_drop(a, c->uid);
	r = usage_open_get(a->st, c->uid, &o.open_start_us, osig,
	    sizeof(osig));
	if (r < 0 && r != -ENOENT)
		return r;
	o.have_open = r == 0;
	if (!o.have_open && !c->allocated)
		return 0;
	if (ledger_signature(c, sig, sizeof(sig)) < 0)
		return 0;
	if (c->allocated) {
		r = acct_instance(a, c->ns, instance, sizeof(instance));
		if (r == -ENOENT && !a->live)
			a->missed = true;	/* namespaces not listed yet */
		if (r < 0 && !o.have_open)
			return r == -ENOMEM ? r : 0;	/* not a tenant's */
		if (r < 0)
			c->allocated = false;	/* no longer isolated */
	}
	o.open_sig = osig;
	o.allocated = c->allocated;
	o.sig = sig;
	o.live = live;
	o.now_us = now_us;
	o.alive_us = a->prev_alive;
	if (o.have_open && (r = usage_consumer_times(a->st, c->uid,
	    o.open_start_us, &o.pods_start_us, &o.pods_finish_us)) < 0)
		return r;
	if (!o.have_open && c->allocated && !live &&
	    (r = acct_consumers_start(a, c, &o.pods_start_us)) < 0)
		return r;
	if (c->allocated && (r = acct_prev_end(a, c, &o.prev_end_us)) < 0)
		return r;
	ledger_decide(&o, &d);
	if ((d.act == LEDGER_CLOSE || d.act == LEDGER_REOPEN) &&
	    FAULT("acct.close") < 0)
		d.close_us = o.open_start_us - 1;	/* tests: a refused end */
	if ((d.act == LEDGER_CLOSE || d.act == LEDGER_REOPEN) &&
	    (r = acct_close(a, c->uid, o.open_start_us, d.close_us,
	    (int)d.close_how, d.close_hi_us)) == 0)
		log_info("usage interval closed namespace=%s claim=%s how=%s "
		    "seconds=%.3f", log_q(c->ns), log_q(c->name),
		    ledger_how_name(d.close_how),
		    (double)(d.close_us - o.open_start_us) / 1e6);
	if (r == -EINVAL) {
		/* still open: decided again at the retry or the next look */
		why = usage_close_refused(o.open_start_us, d.close_us,
		    d.close_hi_us);
		acct_skipped("close", why != NULL ? why : "refused", c->uid,
		    o.open_start_us, d.close_us);
		if (d.act == LEDGER_CLOSE)
			acct_retry_add(a, c, o.open_start_us, now_us, live);
		return 0;
	}
	if (r < 0)
		return r;
	if (d.act == LEDGER_OPEN || d.act == LEDGER_REOPEN) {
		for (i = 0; i < c->ndevices; i++)
			acct_profile(a, &c->dev[i]);
		if ((r = acct_open(a, c, sig, instance, d.open_us, d.open_how,
		    a->prev_alive)) < 0)
			return r;
		return acct_consumers(a, c, d.open_us);
	}
	if (d.act == LEDGER_KEEP)
		return acct_consumers(a, c, o.open_start_us);
	return 0;
}

/* Move a consumed interval's end or start; the tenant counters follow. */
static int
acct_move(struct acct *a, const struct usage_span *sp, bool end, uint64_t v)
{
	int r;

	acct_totals_interval(&a->totals, a->st, sp->claim_uid, sp->start_us,
	    -1);
	r = end ? usage_set_end(a->st, sp->claim_uid, sp->start_us, v,
	    LEDGER_RECONSTRUCTED) : usage_set_start(a->st, sp->claim_uid,
	    sp->start_us, v, LEDGER_RECONSTRUCTED);
	acct_totals_interval(&a->totals, a->st, sp->claim_uid,
	    !end && r == 0 ? v : sp->start_us, 1);
	return r;
}

/* What a Pod's times change in the intervals it consumed. */
static int
acct_refine(const struct usage_span *sp, void *arg)
{
	struct acct *a = arg;
	uint64_t cs, cf, v;
	int r;

	if ((r = usage_consumer_times(a->st, sp->claim_uid, sp->start_us, &cs,
	    &cf)) < 0)
		return r;
	if (sp->end_us != 0 && ledger_refine_end(sp->start_us, sp->end_us,
	    (enum ledger_how)sp->end_how, sp->hi_us, cf, &v)) {
		if ((r = acct_move(a, sp, true, v)) == -EINVAL)
			acct_skipped("end", "end before start",
			    sp->claim_uid, sp->start_us, v);
		else if (r < 0)
			return r;
		else
			log_info("usage interval end reconstructed "
			    "claim_uid=%s seconds=%.3f", log_q(sp->claim_uid),
			    (double)(v - sp->start_us) / 1e6);
	}
	if (ledger_refine_start(sp->start_us, (enum ledger_how)sp->start_how,
	    sp->lo_us, cs, &v) && (sp->end_us == 0 || v <= sp->end_us)) {
		if ((r = acct_move(a, sp, false, v)) == -EINVAL)
			acct_skipped("start", "start after end",
			    sp->claim_uid, sp->start_us, v);
		else if (r < 0)
			return r;
		else
			log_info("usage interval start reconstructed "
			    "claim_uid=%s", log_q(sp->claim_uid));
	}
	return 0;
}

/* The devices a kpgpud ResourceClaimTemplate asks for, as rows. */
static int
acct_template_rows(struct acct *a, const char *ns, const char *tmpl,
    struct usage_row *rows, char (*cls)[LEDGER_FIELD_MAX + 1],
    char (*prof)[LEDGER_PROFILE_MAX + 1], size_t *ret_n)
{
	struct cache_owned *o = NULL, *c = NULL;
	json_t *d, *reqs, *req;
	const char *name;
	size_t i, n = 0;
	json_int_t k, cnt;
	int r;

	if ((r = cache_owned_get(a->sd->cache, CACHE_KIND_CLAIMTEMPLATE, ns,
	    tmpl, &o)) < 0)
		return r;
	d = json_loads(o->data, 0, NULL);
	reqs = json_object_get(json_object_get(json_object_get(
	    json_object_get(d, "spec"), "spec"), "devices"), "requests");
	json_array_foreach(reqs, i, req) {
		name = json_string_value(json_object_get(json_object_get(req,
		    "exactly"), "deviceClassName"));
		cnt = json_integer_value(json_object_get(json_object_get(req,
		    "exactly"), "count"));
		for (k = 0; name != NULL && k < (cnt > 0 ? cnt : 1) &&
		    n < LEDGER_DEVICES_MAX; k++, n++) {
			snprintf(cls[n], sizeof(cls[0]), "%s", name);
			prof[n][0] = '\0';
			if (cache_owned_get(a->sd->cache,
			    CACHE_KIND_DEVICECLASS, "", name, &c) == 0) {
				ledger_profile_of(c->data, NULL, prof[n]);
				cache_owned_free(c);
			}
			memset(&rows[n], 0, sizeof(rows[n]));
			rows[n].device_class = cls[n];
			rows[n].profile = prof[n];
		}
	}
	json_decref(d);
	cache_owned_free(o);
	*ret_n = n;
	return 0;
}

/*
 * A finished Pod that ran entirely while sync was away: its generated
 * claim's allocation was never seen (the claim is gone with its Pod), so
 * it is reconstructed from the Pod's start and finish and the devices its
 * template asks for (device names unknown).
 */
static int
acct_pod_gap(struct acct *a, json_t *obj, const struct ledger_pod *p)
{
	struct ledger_pod_claim pc[8];
	struct usage_row rows[LEDGER_DEVICES_MAX];
	char cls[LEDGER_DEVICES_MAX][LEDGER_FIELD_MAX + 1];
	char prof[LEDGER_DEVICES_MAX][LEDGER_PROFILE_MAX + 1];
	char inst[RESOLVED_NAME_MAX + 64], uid[LEDGER_FIELD_MAX + 1];
	char devname[LEDGER_DEVICES_MAX][32];
	size_t n, i, j, nrows;
	bool known;
	int r;

	if (!ledger_pod_in_gap(p, a->prev_alive, a->started_us) ||
	    (n = ledger_pod_claims(obj, pc, 8)) == 0 ||
	    acct_instance(a, p->ns, inst, sizeof(inst)) < 0)
		return 0;
	for (i = 0; i < n; i++) {
		if ((r = usage_claim_known(a->st, p->ns, pc[i].claim,
		    &known)) < 0)
			return r;
		if (known || acct_template_rows(a, p->ns, pc[i].template_name,
		    rows, cls, prof, &nrows) < 0 || nrows == 0)
			continue;
		snprintf(uid, sizeof(uid), "pod:%s/%s", p->uid, pc[i].claim);
		for (j = 0; j < nrows; j++) {
			snprintf(devname[j], sizeof(devname[j]), "unknown-%zu",
			    j);
			rows[j].claim_uid = uid;
			rows[j].start_us = p->start_us;
			rows[j].dev = (unsigned)j;
			rows[j].ns = p->ns;
			rows[j].instance = inst;
			rows[j].claim = pc[i].claim;
			rows[j].driver = "";
			rows[j].pool = "";
			rows[j].device = devname[j];
			if (ledger_profile_share(rows[j].profile,
			    &rows[j].share) < 0)
				rows[j].share = 1.0;
			rows[j].sig = "";
			rows[j].start_how = LEDGER_RECONSTRUCTED;
			rows[j].lo_us = a->prev_alive;
			if ((r = usage_row_add(a->st, &rows[j])) < 0)
				return r;
		}
		/*
		 * ledger_pod_in_gap admits no finish before the start, so the
		 * close is not refused; were it, the error rolls the batch
		 * back (logged) rather than leave these rows open.
		 */
		if ((r = usage_consumer_add(a->st, uid, p->start_us, p->uid,
		    p->name)) < 0 || (r = acct_close(a, uid, p->start_us,
		    p->finish_us, LEDGER_RECONSTRUCTED, a->started_us)) < 0)
			return r;
		log_info("usage interval reconstructed from a Pod that ran "
		    "while sync was down namespace=%s claim=%s devices=%zu "
		    "seconds=%.3f", log_q(p->ns), log_q(pc[i].claim), nrows,
		    (double)(p->finish_us - p->start_us) / 1e6);
	}
	return 0;
}

/* A Pod: keep its times with the intervals it consumed. */
static int
acct_pod(struct acct *a, json_t *obj)
{
	struct ledger_pod p;
	const char *why = "";
	bool uses = false;
	int r;

	if (ledger_pod_from_json(obj, &p, &uses, &why) < 0) {
		log_warn("usage: pod skipped reason=%s", log_q(why));
		return 0;
	}
	acct_pending_pod(&a->pending, obj, p.ns, p.name);
	if (!uses)
		return 0;
	if ((r = usage_pod_put(a->st, p.uid, p.ns, p.name, p.start_us,
	    p.finish_us)) < 0 ||
	    (r = usage_pod_set(a->st, p.uid, p.start_us, p.finish_us)) < 0 ||
	    (r = usage_pod_spans(a->st, p.uid, acct_refine, a)) < 0)
		return r;
	return acct_pod_gap(a, obj, &p);
}

/* Reflector op: an object of one of the two collections. */
int
acct_put(struct acct *a, struct reflector *rf, json_t *obj)
{
	struct ledger_claim *c;
	const char *why = "";
	int r;

	if (acct_which(rf) == 'P') {
		if ((r = acct_pod(a, obj)) < 0)
			return acct_failed(a, "pod", r);
		return 0;
	}
	if (acct_which(rf) == 'E') {
		acct_pending_event(&a->pending, obj, false);
		return 0;
	}
	if (acct_which(rf) == 'Q') {
		acct_result_event(&a->results, obj, false);
		return 0;
	}
	a->claims_rf = rf;
	if ((c = malloc(sizeof(*c))) == NULL)
		return acct_failed(a, "claim", -ENOMEM);
	if (ledger_claim_from_json(obj, c, &why) < 0) {
		log_warn("usage: claim skipped reason=%s", log_q(why));
		free(c);
		return 0;
	}
	r = acct_observe(a, c, a->live, ledger_now_us());
	free(c);
	return r < 0 ? acct_failed(a, "claim", r) : 0;
}

/* Reflector op: a deletion (live, from a watch). */
int
acct_del(struct acct *a, struct reflector *rf, json_t *obj)
{
	struct ledger_claim *c;
	int r;

	if (acct_which(rf) == 'P') {
		const char *ns, *name;

		acct_pending_forget(&a->pending, obj);
		if (sync_obj_key(obj, &ns, &name) == 0 &&
		    (r = usage_pod_del(a->st, ns, name)) < 0)
			return acct_failed(a, "pod", r);
		return 0;
	}
	if (acct_which(rf) == 'E') {
		acct_pending_event(&a->pending, obj, true);
		return 0;
	}
	if (acct_which(rf) == 'Q') {
		acct_result_event(&a->results, obj, true);
		return 0;
	}
	if ((c = malloc(sizeof(*c))) == NULL)
		return acct_failed(a, "claim", -ENOMEM);
	if (ledger_claim_from_json(obj, c, NULL) < 0) {
		free(c);
		return 0;
	}
	c->allocated = false;
	r = acct_observe(a, c, true, ledger_now_us());
	free(c);
	return r < 0 ? acct_failed(a, "claim", r) : 0;
}

/* Open intervals whose claim a list did not return. */
struct acct_gone {
	const struct strset	*seen;
	char			 (*uid)[LEDGER_FIELD_MAX + 1];
	char			 (*ns)[64];
	char			 (*name)[LEDGER_FIELD_MAX + 1];
	size_t			 n, alloc;
};

/* Keep (uid, ns, name) unless the list had (ns, name). */
static int
acct_gone_push(struct acct_gone *g, const char *uid, const char *ns,
    const char *name)
{
	char key[LEDGER_FIELD_MAX * 2 + 2];
	void *p;
	size_t n;

	if (strset_key(key, sizeof(key), ns, name) == 0 &&
	    strset_has(g->seen, key))
		return 0;
	if (g->n == g->alloc) {
		n = g->alloc ? g->alloc * 2 : 16;
		if ((p = reallocarray(g->uid, n, sizeof(*g->uid))) == NULL)
			return -ENOMEM;
		g->uid = p;
		if ((p = reallocarray(g->ns, n, sizeof(*g->ns))) == NULL)
			return -ENOMEM;
		g->ns = p;
		if ((p = reallocarray(g->name, n, sizeof(*g->name))) == NULL)
			return -ENOMEM;
		g->name = p;
		g->alloc = n;
	}
	snprintf(g->uid[g->n], sizeof(g->uid[0]), "%s", uid);
	snprintf(g->ns[g->n], sizeof(g->ns[0]), "%s", ns);
	snprintf(g->name[g->n], sizeof(g->name[0]), "%s", name);
	g->n++;
	return 0;
}

/* Free what acct_gone_push kept. */
static void
acct_gone_free(struct acct_gone *g)
{
	free(g->uid);
	free(g->ns);
	free(g->name);
}

/* Collect one open interval when its claim is not in the list. */
static int
acct_gone_add(const struct usage_row *o, void *arg)
{
	return acct_gone_push(arg, o->claim_uid, o->ns, o->claim);
}

/* Collect a remembered Pod a list did not return. */
static int
acct_pod_gone(const char *ns, const char *name, void *arg)
{
	return acct_gone_push(arg, "", ns, name);
}

/* After a list of Pods: forget the times of Pods that are gone. */
static int
acct_pods_prune(struct acct *a, const struct strset *seen)
{
	struct acct_gone g = { .seen = seen };
	size_t i;
	int r;

	r = usage_pod_foreach(a->st, acct_pod_gone, &g);
	for (i = 0; i < g.n && r == 0; i++)
		r = usage_pod_del(a->st, g.ns[i], g.name[i]);
	acct_gone_free(&g);
	return r;
}

/* The relist timer: namespaces were not in yet at the first claims list. */
static void
acct_relist_cb(evutil_socket_t fd, short what, void *arg)
{
	struct acct *a = arg;

	(void)fd;
	(void)what;
	if (a->claims_rf != NULL)
		reflector_relist(a->claims_rf);
}

/* Whether the Namespaces collection is in the cache. */
static bool
acct_ns_synced(struct acct *a)
{
	size_t i;

	for (i = 0; i < a->sd->nrf; i++)
		if (reflector_res(a->sd->rf[i])->table == CACHE_T_NS)
			return reflector_synced(a->sd->rf[i]);
	return true;
}

/* Reflector op: a list ended; claims gone since are closed. */
int
acct_prune(struct acct *a, struct reflector *rf, const struct strset *seen)
{
	static const struct timeval later = { 0, ACCT_RELIST_MS * 1000 };
	struct acct_gone g = { .seen = seen };
	struct ledger_claim *c;
	size_t i;
	int r;

	if (acct_which(rf) == 'P') {
		acct_pending_prune(&a->pending, seen);
		if ((r = acct_pods_prune(a, seen)) < 0)
			return acct_failed(a, "prune", r);
		return 0;
	}
	if (acct_which(rf) == 'E') {
		acct_pending_event_prune(&a->pending, seen);
		return 0;
	}
	if (acct_which(rf) == 'Q') {
		acct_result_prune(&a->results, seen);
		return 0;
	}
	a->claims_rf = rf;
	if ((c = malloc(sizeof(*c))) == NULL)
		return acct_failed(a, "prune", -ENOMEM);
	r = usage_open_foreach(a->st, acct_gone_add, &g);
	for (i = 0; i < g.n && r == 0; i++) {
		memset(c, 0, sizeof(*c));
		c->ns = g.ns[i];
		c->name = g.name[i];
		c->uid = g.uid[i];
		r = acct_observe(a, c, a->live, ledger_now_us());
	}
	free(c);
	acct_gone_free(&g);
	if (r < 0)
		return acct_failed(a, "prune", r);
	if (!a->live && a->missed && !acct_ns_synced(a)) {
		/* claims of namespaces not yet known: list them again */
		a->missed = false;
		evtimer_add(a->relist, &later);
	} else if (!a->live) {
		a->live = true;
		log_info("usage ledger reconciled with the API after start "
		    "gap_seconds=%.3f", a->prev_alive ? (double)(
		    ledger_now_us() - a->prev_alive) / 1e6 : 0.0);
	}
	return 0;
}

/*
 * The heartbeat: the closes refused since the last one, observed again as
 * they were seen (the claim not allocated, at that time), each once: one
 * refused again waits for the next heartbeat. An interval no longer open
 * from the same start was decided since and is left alone.
 */
int
acct_retry_closes(struct acct *a)
{
	struct acct_retry *todo;
	struct ledger_claim *c;
	uint64_t start;
	size_t i, n = a->nretry;
	char sig[2];
	int r = 0;

	if (n == 0)
		return 0;
	todo = malloc(n * sizeof(*todo));
	if (todo == NULL || (c = malloc(sizeof(*c))) == NULL) {
		free(todo);
		return -ENOMEM;
	}
	memcpy(todo, a->retry, n * sizeof(*todo));
	a->nretry = 0;
	for (i = 0; i < n && r == 0; i++) {
		r = usage_open_get(a->st, todo[i].uid, &start, sig, sizeof(sig));
		if (r == -ENOENT || (r == 0 && start != todo[i].start_us)) {
			r = 0;
			continue;
		}
		if (r < 0)
			break;
		log_info("usage interval close retried namespace=%s claim=%s",
		    log_q(todo[i].ns), log_q(todo[i].name));
		memset(c, 0, sizeof(*c));
		c->uid = todo[i].uid;
		c->ns = todo[i].ns;
		c->name = todo[i].name;
		r = acct_observe(a, c, todo[i].live, todo[i].seen_us);
	}
	free(c);
	free(todo);
	return r;
}

/* Set up accounting. */
int
acct_new(struct syncd *sd, int64_t retention_ms, int64_t hours_ms,
    const char *cache_path, struct acct **ret)
{
	static const struct timeval tick = { ACCT_TICK_MS / 1000,
	    (ACCT_TICK_MS % 1000) * 1000 };
	struct acct *a;
	int r;

	if ((a = calloc(1, sizeof(*a))) == NULL)
		return -ENOMEM;
	a->sd = sd;
	a->retention_ms = retention_ms;
	a->hours_ms = hours_ms;
	a->started_us = ledger_now_us();
	a->last_rollup_ms = monotonic_ms();
	if (cache_path != NULL && asprintf(&a->tally, "%s.usage-tally",
	    cache_path) < 0) {
		a->tally = NULL;
		r = -ENOMEM;
		goto fail;
	}
	if ((r = usage_store_open(sd->cache, &a->st)) < 0 ||
	    (r = usage_alive_get(a->st, &a->prev_alive)) < 0 ||
	    (r = acct_check_lost(a)) < 0)
		goto fail;
	a->tick = event_new(sd->base, -1, EV_PERSIST, acct_tick_cb, a);
	a->relist = evtimer_new(sd->base, acct_relist_cb, a);
	if (a->tick == NULL || a->relist == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	event_add(a->tick, &tick);
	*ret = a;
	return 0;
fail:
	acct_free(a);
	return r;
}

/* Release accounting (before the cache is closed). */
void
acct_free(struct acct *a)
{
	if (a == NULL)
		return;
	if (a->tick != NULL)
		event_free(a->tick);
	if (a->relist != NULL)
		event_free(a->relist);
	usage_store_free(a->st);
	acct_pending_free(&a->pending);
	acct_result_free(&a->results);
	acct_totals_free(&a->totals);
	free(a->tally);
	free(a);
}

/* The ledger. */
struct usage_store *
acct_store(struct acct *a)
{
	return a->st;
}

/*
 * A batch was rolled back: the counters load again from the cache; the
 * relist that follows observes every claim again, refused closes too.
 */
void
acct_rolled_back(struct acct *a)
{
	acct_totals_drop(&a->totals);
	a->nretry = 0;
}

/* Closed intervals reported lost. */
uint64_t
acct_lost(struct acct *a)
{
	uint64_t n = 0, ev = 0;

	(void)usage_lost_total(a->st, &n, &ev);
	return n;
}

/* The Pods waiting for their claim, and the refusals. */
const struct acct_pending *
acct_pending(struct acct *a)
{
	return &a->pending;
}

/* The last reconcile result of each instance. */
const struct acct_results *
acct_results(struct acct *a)
{
	return &a->results;
}
