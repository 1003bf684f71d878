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

/* A stopping worker finishes once nothing is in flight or unsent. */
static void
maybe_finish(struct worker *w)
{
	static const struct timeval now = { 0, 0 };

	if (w->stopping && w->inflight == 0 && w->sending == 0)
		event_base_once(w->base, -1, EV_TIMEOUT, server_worker_finish_cb, w,
		    &now);
}

/* One request is over. */
void
request_done(struct worker *w)
{
	w->inflight--;
	maybe_finish(w);
}

/* A reply has been written out completely. */
static void
sent_cb(struct evhttp_request *req, void *arg)
{
	struct worker *w = arg;

	evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL,
	    NULL);
	w->sending--;
	maybe_finish(w);
}

/* The connection went away with a reply still unsent. */
static void
send_aborted(struct evhttp_connection *evcon, void *arg)
{
	struct worker *w = arg;

	(void)evcon;
	w->sending--;
	maybe_finish(w);
}

/* Send a reply with a body. */
static void
reply(struct worker *w, struct evhttp_request *req, int code,
    const char *reason, const char *ctype, const char *body, size_t len)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evhttp_connection *conn = evhttp_request_get_connection(req);

	evhttp_add_header(h, "Content-Type", ctype);
	if (w->stopping)
		evhttp_add_header(h, "Connection", "close");
	evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
	/* A detached request (peer gone) is freed at once, never completed. */
	if (evhttp_request_get_connection(req) != NULL) {
		w->sending++;
		evhttp_request_set_on_complete_cb(req, sent_cb, w);
		evhttp_connection_set_closecb(evhttp_request_get_connection(
		    req), send_aborted, w);
	}
	evhttp_send_reply(req, code, reason, NULL);
	/*
	 * evhttp leaves the head and the body in two chains, which
	 * bufferevent_openssl would send as two TLS records and two writes;
	 * the write happens on the next loop turn, so join them now.
	 */
	if (conn != NULL)
		evbuffer_pullup(bufferevent_get_output(
		    evhttp_connection_get_bufferevent(conn)), -1);
}

/* Send a plain-text error reply. */
static void
reply_text(struct worker *w, struct evhttp_request *req, int code,
    const char *reason, const char *msg)
{
	char buf[600];
	int n = snprintf(buf, sizeof(buf), "%s\n", msg);

	reply(w, req, code, reason, "text/plain; charset=utf-8", buf,
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
request_answer(struct worker *w, struct evhttp_request *req, struct review *rv,
    enum review_ns ns, const struct resolved *r, uint64_t t0_us)
{
	struct review_reply *rep = NULL;
	char err[256];
	int rv_;

	rv_ = review_answer(rv, ns, r, &rep, err, sizeof(err));
	if (rv_ == -EINVAL) {
		log_warn("bad request uid=%s reason=%s", log_q(review_uid(rv)),
		    log_q(err));
		reply_text(w, req, 400, "Bad Request", err);
		request_account(w, "bad_request", t0_us);
	} else if (rv_ < 0) {
		reply_text(w, req, 500, "Internal Server Error",
		    "out of memory");
		request_account(w, "error", t0_us);
	} else {
		if (!rep->allowed)
			log_notice("denied uid=%s namespace=%s reason=%s",
			    log_q(review_uid(rv)),
			    log_q(review_namespace(rv)), log_q(rep->message));
		reply(w, req, 200, "OK", "application/json", rep->body,
		    rep->len);
		request_account(w, review_result_name(rep->result), t0_us);
	}
	review_reply_free(rep);
	review_free(rv);
}

/* Decide a parsed review from the map, or defer it to a lookup. */
static void
decide(struct worker *w, struct evhttp_request *req, struct review *rv,
    uint64_t t0_us)
{
	const char *ns = review_namespace(rv);
	bool up = syncconn_connected(w->srv->cfg.sync);
	enum review_ns st = REVIEW_NS_OPEN;
	struct resolved r;

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
				lookup_defer(w, req, rv, t0_us);
				return;
			}
			request_fallback(w, "sync_down", rv, ns, "namespace not known "
			    "and sync unavailable");
			st = request_miss(w);
			break;
		}
	}
	request_answer(w, req, rv, st, &r, t0_us);
	request_done(w);
}

/* Whether the Content-Type is JSON (the apiserver sends application/json). */
static bool
is_json(const char *ct)
{
	size_t n = strlen("application/json");

	return ct != NULL && strncasecmp(ct, "application/json", n) == 0 &&
	    (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* POST /mutate. */
static void
handle_mutate(struct worker *w, struct evhttp_request *req)
{
	uint64_t t0 = monotonic_usec();
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	struct review *rv = NULL;
	const char *body;
	char err[256], why[128];
	int e;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "POST");
		reply_text(w, req, 405, "Method Not Allowed", "use POST");
		request_account(w, "bad_request", t0);
		return;
	}
	if (!is_json(evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Content-Type"))) {
		reply_text(w, req, 415, "Unsupported Media Type",
		    "Content-Type must be application/json");
		request_account(w, "bad_request", t0);
		return;
	}
	if (len > w->srv->cfg.max_body) {
		reply_text(w, req, 413, "Payload Too Large", "body too large");
		request_account(w, "too_large", t0);
		return;
	}
	if (FAULT("admit.mutate") < 0) {
		reply_text(w, req, 500, "Internal Server Error", "fault");
		request_account(w, "error", t0);
		return;
	}
	body = len > 0 ? (const char *)evbuffer_pullup(in, -1) : "";
	if ((e = review_parse(body, len, &rv, err, sizeof(err))) == -E2BIG) {
		/* Too deep to parse whole: answered from its head. */
		snprintf(why, sizeof(why), "the pod is nested deeper than %d "
		    "levels", JSCAN_MAX_DEPTH);
		e = review_parse_head(body, len, why, &rv, err, sizeof(err));
	}
	if (e < 0) {
		log_warn("bad request bytes=%zu reason=%s", len, log_q(err));
		reply_text(w, req, 400, "Bad Request", err);
		request_account(w, "bad_request", t0);
		return;
	}
	review_set_max_patch(rv, w->srv->cfg.max_patch);
	decide(w, req, rv, t0);
}

/* GET /metrics. */
static void
handle_metrics(struct worker *w, struct evhttp_request *req)
{
	struct buf b = BUF_INIT(0);

	if (metrics_render(w->srv->cfg.registry, &b) < 0)
		reply_text(w, req, 500, "Internal Server Error", "metrics");
	else
		reply(w, req, 200, "OK", "text/plain; version=0.0.4", b.data ?
		    b.data : "", b.len);
	buf_free(&b);
}

/* Every request: route by path. */
void
request_handle(struct evhttp_request *req, void *arg)
{
	struct worker *w = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req));
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;

	server_conn_served(req);
	if (path == NULL)
		reply_text(w, req, 400, "Bad Request", "no path");
	else if (strcmp(path, "/mutate") == 0)
		handle_mutate(w, req);
	else if (!get && (strcmp(path, "/healthz") == 0 ||
	    strcmp(path, "/readyz") == 0 || strcmp(path, "/metrics") == 0))
		reply_text(w, req, 405, "Method Not Allowed", "use GET");
	else if (strcmp(path, "/healthz") == 0)
		reply_text(w, req, 200, "OK", "ok");
	else if (strcmp(path, "/readyz") == 0) {
		if (!w->stopping && syncconn_ready(w->srv->cfg.sync))
			reply_text(w, req, 200, "OK", "ok");
		else
			reply_text(w, req, 503, "Service Unavailable",
			    w->stopping ? "stopping" : "sync not connected "
			    "or its cache not synced");
	} else if (strcmp(path, "/metrics") == 0)
		handle_metrics(w, req);
	else
		reply_text(w, req, 404, "Not Found", "not found");
}
