/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request handling on a worker thread (see server_int.h): routing, /mutate
 * (parse the review, decide it from the namespace map or defer it to
 * lookup.c, answer), /metrics and the replies with their accounting.
 */
#include "kpgpud-admit/server_int.h"

/* Count one request outcome and its duration. */
void
request_account(struct worker *w, const char *result, uint64_t t0_us)
{
	metric_inc(w->srv->cfg.requests, result, NULL);
	metric_observe(w->srv->cfg.duration, NULL, NULL,
	    (double)(monotonic_usec() - t0_us) / 1e6);
}

/* One request is over. */
void
request_done(struct worker *w)
{
	w->inflight--;
	server_maybe_finish(w);
}

/* Send a plain-text reply (extra: more header lines, or NULL). */
static void
reply_text(struct conn *c, int code, const char *reason, const char *extra,
    const char *msg)
{
	char buf[600];
	int n = snprintf(buf, sizeof(buf), "%s\n", msg);

	conn_reply(c, code, reason, "text/plain; charset=utf-8", extra, buf,
	    n < 0 ? 0 : (size_t)n >= sizeof(buf) ? sizeof(buf) - 1 :
	    (size_t)n);
}

/* Count and log a fallback (one line each, never the pod). */
void
request_fallback(struct worker *w, const char *kind, const struct review *rv,
    const char *ns, const char *detail)
{
	metric_inc(w->srv->cfg.fallbacks, kind, NULL);
	log_warn("fallback kind=%s uid=%s namespace=%s detail=%s", kind,
	    log_q(review_uid(rv)), log_q(ns), log_q(detail));
}

/* The miss policy's answer. */
enum review_ns
request_miss(struct worker *w)
{
	return atomic_load(&w->srv->miss_deny) ? REVIEW_NS_MISS_DENY :
	    REVIEW_NS_MISS_ALLOW;
}

/* The miss policy's answer for a labelled namespace not resolved yet. */
enum review_ns
request_unresolved(struct worker *w)
{
	return atomic_load(&w->srv->miss_deny) ? REVIEW_NS_UNRESOLVED_DENY :
	    REVIEW_NS_UNRESOLVED_ALLOW;
}

/* Build and send the AdmissionReview response; frees the review. */
void
request_answer(struct worker *w, struct conn *c, struct review *rv,
    enum review_ns ns, const struct resolved_pack *r, uint64_t t0_us)
{
	struct review_reply *rep = NULL;
	char err[256];
	int rv_;

	rv_ = review_answer(rv, ns, r, &rep, err, sizeof(err));
	if (rv_ == -EINVAL) {
		log_warn("bad request uid=%s reason=%s", log_q(review_uid(rv)),
		    log_q(err));
		reply_text(c, 400, "Bad Request", NULL, err);
		request_account(w, "bad_request", t0_us);
	} else if (rv_ < 0) {
		reply_text(c, 500, "Internal Server Error", NULL,
		    "out of memory");
		request_account(w, "error", t0_us);
	} else {
		if (!rep->allowed)
			log_notice("denied uid=%s namespace=%s reason=%s",
			    log_q(review_uid(rv)),
			    log_q(review_namespace(rv)), log_q(rep->message));
		conn_reply(c, 200, "OK", "application/json", NULL, rep->body,
		    rep->len);
		request_account(w, review_result_name(rep->result), t0_us);
	}
	review_reply_free(rep);
	review_free(rv);
}

/* Decide a parsed review from the map, or defer it to a lookup. */
static void
decide(struct worker *w, struct conn *c, const char *buf,
    const struct httphead *h, struct review *rv, uint64_t t0_us)
{
	const char *ns = review_namespace(rv);
	bool up = syncconn_connected(w->srv->cfg.sync);
	enum review_ns st = REVIEW_NS_OPEN;
	const struct resolved_pack *r = NULL;

	w->inflight++;
	if (ns != NULL) {
		switch (nscache_get(w->srv->cfg.cache, ns, &r)) {
		case NSCACHE_ISOLATED:
			st = REVIEW_NS_ISOLATED;
			/* FALLTHROUGH */
		case NSCACHE_OPEN:
			if (!up)
				request_fallback(w, "last_known", rv, ns,
				    "sync unavailable");
			break;
		case NSCACHE_UNRESOLVED:
			request_fallback(w, "unresolved", rv, ns, "annotation "
			    "missing or invalid");
			st = request_unresolved(w);
			break;
		case NSCACHE_MISSING:
		default:
			if (up) {
				lookup_defer(w, c, rv, t0_us, lookup_budget(w,
				    buf + h->query_off, h->query_len));
				return;
			}
			request_fallback(w, "sync_down", rv, ns, "namespace not known "
			    "and sync unavailable");
			st = request_miss(w);
			break;
		}
	}
	request_answer(w, c, rv, st, r, t0_us);
	resolved_pack_unref(r);
	request_done(w);
}

/* Whether the Content-Type is JSON (the apiserver sends application/json). */
static bool
is_json(const char *ct, size_t len)
{
	size_t n = strlen("application/json");

	return len >= n && strncasecmp(ct, "application/json", n) == 0 &&
	    (len == n || ct[n] == ';' || ct[n] == ' ');
}

/* POST /mutate. */
static void
handle_mutate(struct conn *c, const char *buf, const struct httphead *h,
    const char *body, size_t len)
{
	struct worker *w = c->w;
	uint64_t t0 = monotonic_usec();
	struct review *rv = NULL;
	char err[256], why[128];
	int e;

	if (h->method != HTTPHEAD_POST) {
		reply_text(c, 405, "Method Not Allowed", "Allow: POST\r\n",
		    "use POST");
		request_account(w, "bad_request", t0);
		return;
	}
	if (!h->has_ctype || !is_json(buf + h->ctype_off, h->ctype_len)) {
		reply_text(c, 415, "Unsupported Media Type", NULL,
		    "Content-Type must be application/json");
		request_account(w, "bad_request", t0);
		return;
	}
	if (len > w->srv->cfg.max_body) {
		reply_text(c, 413, "Payload Too Large", NULL, "body too large");
		request_account(w, "too_large", t0);
		return;
	}
	if (FAULT("admit.mutate") < 0) {
		reply_text(c, 500, "Internal Server Error", NULL, "fault");
		request_account(w, "error", t0);
		return;
	}
	if (len == 0)
		body = "";
	if ((e = review_parse(body, len, &rv, err, sizeof(err))) == -E2BIG) {
		/* Too deep to parse whole: answered from its head. */
		snprintf(why, sizeof(why), "the pod is nested deeper than %d "
		    "levels", JSCAN_MAX_DEPTH);
		e = review_parse_head(body, len, why, &rv, err, sizeof(err));
	}
	if (e < 0) {
		log_warn("bad request bytes=%zu reason=%s", len, log_q(err));
		reply_text(c, 400, "Bad Request", NULL, err);
		request_account(w, "bad_request", t0);
		return;
	}
	review_set_max_patch(rv, w->srv->cfg.max_patch);
	decide(w, c, buf, h, rv, t0);
}

/* GET /metrics. */
static void
handle_metrics(struct conn *c)
{
	struct buf b = BUF_INIT(0);

	server_update_gauges(c->w->srv);
	if (metrics_render(c->w->srv->cfg.registry, &b) < 0)
		reply_text(c, 500, "Internal Server Error", NULL, "metrics");
	else
		conn_reply(c, 200, "OK", "text/plain; version=0.0.4", NULL,
		    b.data ? b.data : "", b.len);
	buf_free(&b);
}

/* Whether the request's path is p. */
static bool
path_is(const char *buf, const struct httphead *h, const char *p)
{
	return strlen(p) == h->path_len &&
	    memcmp(buf + h->path_off, p, h->path_len) == 0;
}

/* Every request: route by path. */
void
request_handle(struct conn *c, const char *buf, const struct httphead *h,
    const char *body, size_t len)
{
	struct worker *w = c->w;
	bool get = h->method == HTTPHEAD_GET || h->method == HTTPHEAD_HEAD;
	bool health = path_is(buf, h, "/healthz");
	bool ready = path_is(buf, h, "/readyz");
	bool metrics = path_is(buf, h, "/metrics");

	if (path_is(buf, h, "/mutate"))
		handle_mutate(c, buf, h, body, len);
	else if (!get && (health || ready || metrics))
		reply_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
		    "use GET");
	else if (health)
		reply_text(c, 200, "OK", NULL, "ok");
	else if (ready) {
		if (!w->stopping && syncconn_ready(w->srv->cfg.sync))
			reply_text(c, 200, "OK", NULL, "ok");
		else
			reply_text(c, 503, "Service Unavailable", NULL,
			    w->stopping ? "stopping" : "sync not connected "
			    "or its cache not synced");
	} else if (metrics)
		handle_metrics(c);
	else
		reply_text(c, 404, "Not Found", NULL, "not found");
}
