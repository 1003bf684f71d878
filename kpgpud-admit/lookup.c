/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lookup path (see server_int.h): a review whose namespace is not in
 * the map waits on a job while the main thread asks kpgpud-sync, one
 * question per namespace at a time, under a token bucket and a negative
 * cache; the answer is posted back to the worker. A deferred request may
 * lose its connection meanwhile: freeing the connection clears the job's
 * pointer to it, so the answer is dropped.
 */
#include "kpgpud-admit/server_int.h"

/* Worker side: the lookup's answer is back (or was cancelled). */
static void
job_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct worker *w = j->w;
	struct syncconn_answer *a = &j->answer;
	enum review_ns ns = REVIEW_NS_OPEN;
	struct resolved_pack *r = NULL;
	char why[256];

	(void)fd;
	(void)what;
	if (j->c == NULL) {
		review_free(j->rv);
		request_account(w, "client_gone", j->t0_us);
		goto done;
	}
	j->c->job = NULL;
	if (j->limited) {
		request_fallback(w, "lookup_limited", j->rv, j->ns, "over "
		    "--lookup-rate; miss policy without a lookup");
		ns = request_miss(w);
	} else if (j->negative) {
		/*
		 * The apiserver sends reviews only for labelled namespaces:
		 * one for a namespace sync just said does not exist is stale
		 * (it appeared meanwhile) or not from the apiserver. Never
		 * "open", which would admit it unpatched.
		 */
		request_fallback(w, "negative_cached", j->rv, j->ns, "sync said "
		    "lately that it does not exist; miss policy");
		ns = request_miss(w);
	} else if (a->err < 0) {
		snprintf(why, sizeof(why), "lookup failed: %s",
		    strerror(-a->err));
		request_fallback(w, "lookup_failed", j->rv, j->ns, why);
		ns = request_miss(w);
	} else if (a->isolated) {
		ns = REVIEW_NS_ISOLATED;
		if (a->resolved == NULL || resolved_pack_parse(a->resolved,
		    strlen(a->resolved), &r, why, sizeof(why)) < 0) {
			if (a->resolved == NULL)
				snprintf(why, sizeof(why), "no annotation");
			request_fallback(w, "unresolved", j->rv, j->ns, why);
			ns = request_unresolved(w);
		}
	}
	request_answer(w, j->c, j->rv, ns, r, j->t0_us);
	resolved_pack_unref(r);
	conn_resume(j->c);
done:
	free(a->resolved);
	free(j);
	request_done(w);
}

/* Hand a job back to its worker. */
void
lookup_post_back(struct job *j)
{
	static const struct timeval now = { 0, 0 };

	if (event_base_once(j->w->base, -1, EV_TIMEOUT, job_done_cb, j,
	    &now) < 0)
		log_err("cannot post a lookup answer to worker %d", j->w->idx);
}

/* The negative-cache slot of a namespace (main thread). */
static struct neg_slot *
neg_slot(struct server *s, const char *ns)
{
	uint32_t h = 2166136261u;

	for (const char *p = ns; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return &s->neg[h % SRV_NEG_SLOTS];
}

/*
 * Whether sync said recently that ns does not exist. A namespace that
 * appears since is in the map from the change stream, and its reviews do
 * not come here; a newer entry in the same slot just evicts this one.
 */
static bool
neg_hit(struct server *s, const char *ns)
{
	struct neg_slot *n = neg_slot(s, ns);

	return n->expiry_ms > monotonic_ms() && strcmp(n->ns, ns) == 0;
}

/* Remember that sync said ns does not exist (--negative-ttl). */
static void
neg_put(struct server *s, const char *ns)
{
	struct neg_slot *n = neg_slot(s, ns);

	if (s->cfg.negative_ttl_ms == 0)
		return;
	snprintf(n->ns, sizeof(n->ns), "%s", ns);
	n->expiry_ms = monotonic_ms() + s->cfg.negative_ttl_ms;
}

/* Take a token for one read-through lookup (--lookup-rate, -burst). */
static bool
lookup_token(struct server *s)
{
	if (s->cfg.lookup_rate == 0)
		return true;
	return tokenbucket_take(&s->lookup_tb, monotonic_usec());
}

/* Main side: sync answered the lookup; every waiting job gets the answer. */
static void
lookup_answered(struct syncconn_answer *a, void *arg)
{
	struct lookup *lk = arg;
	struct job *j, *next;

	if (a->err == 0 && !a->found && lk->jobs != NULL)
		neg_put(lk->srv, lk->ns);
	for (j = lk->jobs; j != NULL; j = next) {
		next = j->next_waiter;
		j->answer = *a;
		if (next == NULL)
			a->resolved = NULL;	/* the last one takes it */
		else if (a->resolved != NULL &&
		    (j->answer.resolved = strdup(a->resolved)) == NULL)
			j->answer.err = -ENOMEM;
		lookup_post_back(j);
	}
	free(a->resolved);
	if ((*lk->prevp = lk->next) != NULL)
		lk->next->prevp = lk->prevp;
	free(lk);
}

/* Main side: start the lookup a worker asked for, or join one in flight. */
static void
lookup_start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct server *s = j->w->srv;
	uint64_t deadline = monotonic_ms() + j->timeout_ms;
	struct lookup *lk;

	(void)fd;
	(void)what;
	j->next_waiter = NULL;
	for (lk = s->lookups; s->cfg.sync != NULL && lk != NULL; lk = lk->next)
		if (lk->jobs != NULL && lk->deadline_ms <= deadline &&
		    strcmp(lk->ns, j->ns) == 0) {
			j->next_waiter = lk->jobs;
			lk->jobs = j;
			metric_inc(s->cfg.merged, NULL, NULL);
			return;
		}
	if (s->cfg.sync != NULL && neg_hit(s, j->ns)) {
		metric_inc(s->cfg.lookups, "negative_cached", NULL);
		j->negative = true;
		lookup_post_back(j);
		return;
	}
	if (s->cfg.sync != NULL && !lookup_token(s)) {
		metric_inc(s->cfg.lookups, "rate_limited", NULL);
		j->answer.err = -EAGAIN;
		j->limited = true;
		lookup_post_back(j);
		return;
	}
	if (s->cfg.sync == NULL || (lk = calloc(1, sizeof(*lk))) == NULL) {
		j->answer.err = s->cfg.sync == NULL ? -ECANCELED : -ENOMEM;
		lookup_post_back(j);
		return;
	}
	metric_inc(s->cfg.lookups, "sent", NULL);
	lk->srv = s;
	lk->jobs = j;
	lk->deadline_ms = deadline;
	snprintf(lk->ns, sizeof(lk->ns), "%s", j->ns);
	if ((lk->next = s->lookups) != NULL)
		lk->next->prevp = &lk->next;
	lk->prevp = &s->lookups;
	s->lookups = lk;
	syncconn_lookup(s->cfg.sync, j->ns, j->timeout_ms, lookup_answered,
	    lk);
}

/* How long a lookup may take for a request; see server_int.h. */
unsigned
lookup_budget(struct worker *w, const char *q, size_t qlen)
{
	unsigned budget = atomic_load(&w->srv->lookup_timeout_ms);
	char t[32];
	int64_t ms;

	/* Leave the apiserver time to receive our answer. */
	if (httphead_query(q, qlen, "timeout", t, sizeof(t)) &&
	    parse_duration_ms(t, &ms) == 0 && ms > 0 &&
	    (uint64_t)ms < budget + 250u)
		budget = ms > 300 ? (unsigned)ms - 250 : 50;
	return budget;
}

/* Defer a request whose namespace the map does not know. */
void
lookup_defer(struct worker *w, struct conn *c, struct review *rv,
    uint64_t t0_us, unsigned budget_ms)
{
	static const struct timeval now = { 0, 0 };
	struct job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL) {
		request_fallback(w, "lookup_failed", rv, review_namespace(rv),
		    "out of memory");
		request_answer(w, c, rv, request_miss(w), NULL, t0_us);
		request_done(w);
		return;
	}
	j->w = w;
	j->c = c;
	j->rv = rv;
	j->t0_us = t0_us;
	j->timeout_ms = budget_ms;
	snprintf(j->ns, sizeof(j->ns), "%s", review_namespace(rv));
	c->job = j;
	if (event_base_once(w->srv->cfg.main_base, -1, EV_TIMEOUT,
	    lookup_start_cb, j, &now) < 0) {
		j->answer.err = -ENOMEM;
		job_done_cb(-1, 0, j);
	}
}
