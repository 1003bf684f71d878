/*
 * The webhook's HTTPS server: see server.h. Each worker thread owns its
 * event_base, evhttp and connections; the only cross-thread traffic is a
 * read-through lookup, posted to the main loop and answered back with
 * event_base_once (libevent is set up for threads by main). A deferred
 * request may lose its connection meanwhile: the connection's close
 * callback clears the job's request pointer so the answer is dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <openssl/ssl.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/tokenbucket.h"
#include "common/util.h"
#include "kpgpud-admit/jscan.h"
#include "kpgpud-admit/nscache.h"
#include "kpgpud-admit/review.h"
#include "kpgpud-admit/server.h"
#include "kpgpud-admit/syncconn.h"
#include "kpgpud-admit/tls.h"

#define SRV_MAX_THREADS	64
#define SRV_BEAT_MS	500	/* a worker's loop proves it turns */
#define SRV_STUCK_MS	5000	/* no beat for this long: stuck */
#define SRV_ADDR_BUCKETS 1024	/* per-address connection counts */
#define SRV_NEG_SLOTS	4096	/* negative lookup cache (direct-mapped) */

struct worker {
	struct server		*srv;
	int			 idx;
	pthread_t		 thread;
	bool			 started;
	struct event_base	*base;
	struct evhttp		*http;
	struct evhttp_bound_socket *bound;
	struct event		*beat;
	atomic_uint_least64_t	 last_beat_ms;
	unsigned		 inflight;	/* worker thread only */
	unsigned		 sending;	/* replies not yet flushed */
	bool			 stopping;	/* worker thread only */
	uint64_t		 refused_logged_ms;	/* worker thread only */
	uint64_t		 addr_logged_ms;	/* worker thread only */
	uint64_t		 deadline_logged_ms;	/* worker thread only */
	atomic_bool		 done;
};

/*
 * One accepted connection, tied to its SSL (ex_data) so that it ends with
 * it whatever closes it. The timer first runs at once (the socket is set on
 * the bufferevent by then) to count the peer's address, then waits for the
 * first request's deadline.
 */
struct conn {
	struct server		*srv;
	struct worker		*w;
	struct bufferevent	*bev;
	struct event		*timer;
	struct addr_count	*addr;	/* counted against its address */
	bool			 armed;	/* the deadline is running */
};

/* Open connections from one peer address (under server.addr_lock). */
struct addr_count {
	struct addr_count	*next;
	struct in6_addr		 a;	/* IPv4 as ::ffff:a.b.c.d */
	unsigned		 n;
};

/* A namespace sync said does not exist, until expiry (main thread). */
struct neg_slot {
	char			 ns[64];
	uint64_t		 expiry_ms;
};

/* One deferred /mutate request (owned by its worker). */
struct job {
	struct worker		*w;
	struct evhttp_request	*req;	/* NULL once the connection is gone */
	struct review		*rv;
	uint64_t		 t0_us;
	unsigned		 timeout_ms;
	char			 ns[64];
	struct syncconn_answer	 answer;
	bool			 limited;	/* over --lookup-rate */
	bool			 negative;	/* sync said lately: no such
						   namespace */
	struct job		*next_waiter;	/* main thread: same lookup */
};

/*
 * The main thread's side of a lookup in flight (main thread only). Requests
 * for the same namespace that arrive while it runs wait on it instead of
 * asking sync again, when its deadline is no later than theirs.
 */
struct lookup {
	struct server		*srv;
	struct job		*jobs;	/* waiting; NULL once answered or
					   cancelled */
	char			 ns[64];
	uint64_t		 deadline_ms;
	struct lookup		*next;
	struct lookup		**prevp;
};

struct server {
	struct server_config	 cfg;
	struct worker		*w;
	struct lookup		*lookups;	/* main thread only */
	atomic_uint		 nconns;	/* open connections */
	/* reloadable (SIGHUP): the main thread writes, workers read */
	atomic_bool		 miss_deny;
	atomic_uint		 lookup_timeout_ms;
	pthread_mutex_t		 addr_lock;
	struct addr_count	*addrs[SRV_ADDR_BUCKETS];
	/* main thread only: negative cache and the lookup token bucket */
	struct neg_slot		*neg;
	struct tokenbucket	 lookup_tb;
};

/* The SSL ex_data slot that ties a connection to its server's count. */
static int conn_slot = -1;
static pthread_once_t conn_slot_once = PTHREAD_ONCE_INIT;

static void worker_finish_cb(evutil_socket_t fd, short what, void *arg);
static void conn_served(struct evhttp_request *req);

/* Count one request outcome and its duration. */
static void
account(struct worker *w, const char *result, uint64_t t0_us)
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
		event_base_once(w->base, -1, EV_TIMEOUT, worker_finish_cb, w,
		    &now);
}

/* One request is over. */
static void
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
static void
fallback(struct worker *w, const char *kind, const struct review *rv,
    const char *ns, const char *detail)
{
	metric_inc(w->srv->cfg.fallbacks, kind, NULL);
	log_warn("fallback kind=%s uid=%s namespace=%s detail=%s", kind,
	    log_q(review_uid(rv)), log_q(ns), log_q(detail));
}

/* The miss policy's answer. */
static enum review_ns
miss(struct worker *w)
{
	return atomic_load(&w->srv->miss_deny) ? REVIEW_NS_MISS_DENY :
	    REVIEW_NS_MISS_ALLOW;
}

/* The miss policy's answer for a labelled namespace not resolved yet. */
static enum review_ns
unresolved(struct worker *w)
{
	return atomic_load(&w->srv->miss_deny) ? REVIEW_NS_UNRESOLVED_DENY :
	    REVIEW_NS_UNRESOLVED_ALLOW;
}

/* Build and send the AdmissionReview response; frees the review. */
static void
answer(struct worker *w, struct evhttp_request *req, struct review *rv,
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
		account(w, "bad_request", t0_us);
	} else if (rv_ < 0) {
		reply_text(w, req, 500, "Internal Server Error",
		    "out of memory");
		account(w, "error", t0_us);
	} else {
		if (!rep->allowed)
			log_notice("denied uid=%s namespace=%s reason=%s",
			    log_q(review_uid(rv)),
			    log_q(review_namespace(rv)), log_q(rep->message));
		reply(w, req, 200, "OK", "application/json", rep->body,
		    rep->len);
		account(w, review_result_name(rep->result), t0_us);
	}
	review_reply_free(rep);
	review_free(rv);
}

/*
 * The deferred request's connection is being freed. A request still on it
 * is freed with it, so forget it; one evhttp already detached (the peer
 * closed first) stays ours, and answering it frees it.
 */
static void
job_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct job *j = arg;

	if (j->req != NULL && evhttp_request_get_connection(j->req) == evcon)
		j->req = NULL;
}

/* Worker side: the lookup's answer is back (or was cancelled). */
static void
job_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct worker *w = j->w;
	struct syncconn_answer *a = &j->answer;
	enum review_ns ns = REVIEW_NS_OPEN;
	struct resolved r;
	char why[256];

	(void)fd;
	(void)what;
	if (j->req == NULL) {
		review_free(j->rv);
		account(w, "client_gone", j->t0_us);
		goto done;
	}
	if (evhttp_request_get_connection(j->req) != NULL)
		evhttp_connection_set_closecb(evhttp_request_get_connection(
		    j->req), NULL, NULL);
	if (j->limited) {
		fallback(w, "lookup_limited", j->rv, j->ns, "over "
		    "--lookup-rate; miss policy without a lookup");
		ns = miss(w);
	} else if (j->negative) {
		/*
		 * The apiserver sends reviews only for labelled namespaces:
		 * one for a namespace sync just said does not exist is stale
		 * (it appeared meanwhile) or not from the apiserver. Never
		 * "open", which would admit it unpatched.
		 */
		fallback(w, "negative_cached", j->rv, j->ns, "sync said "
		    "lately that it does not exist; miss policy");
		ns = miss(w);
	} else if (a->err < 0) {
		snprintf(why, sizeof(why), "lookup failed: %s",
		    strerror(-a->err));
		fallback(w, "lookup_failed", j->rv, j->ns, why);
		ns = miss(w);
	} else if (a->isolated) {
		ns = REVIEW_NS_ISOLATED;
		if (a->resolved == NULL || resolved_parse(a->resolved,
		    strlen(a->resolved), &r, why, sizeof(why)) < 0) {
			if (a->resolved == NULL)
				snprintf(why, sizeof(why), "no annotation");
			fallback(w, "unresolved", j->rv, j->ns, why);
			ns = unresolved(w);
		}
	}
	answer(w, j->req, j->rv, ns, &r, j->t0_us);
done:
	free(a->resolved);
	free(j);
	request_done(w);
}

/* Hand a job back to its worker. */
static void
post_back(struct job *j)
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
		post_back(j);
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
		post_back(j);
		return;
	}
	if (s->cfg.sync != NULL && !lookup_token(s)) {
		metric_inc(s->cfg.lookups, "rate_limited", NULL);
		j->answer.err = -EAGAIN;
		j->limited = true;
		post_back(j);
		return;
	}
	if (s->cfg.sync == NULL || (lk = calloc(1, sizeof(*lk))) == NULL) {
		j->answer.err = s->cfg.sync == NULL ? -ECANCELED : -ENOMEM;
		post_back(j);
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

/* How long a lookup may take for this request (?timeout= of the review). */
static unsigned
lookup_budget(struct worker *w, struct evhttp_request *req)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(
	    req));
	unsigned budget = atomic_load(&w->srv->lookup_timeout_ms);
	struct evkeyvalq args;
	const char *t;
	int64_t ms;

	if (q == NULL || evhttp_parse_query_str(q, &args) < 0)
		return budget;
	t = evhttp_find_header(&args, "timeout");
	/* Leave the apiserver time to receive our answer. */
	if (t != NULL && parse_duration_ms(t, &ms) == 0 && ms > 0 &&
	    (uint64_t)ms < budget + 250u)
		budget = ms > 300 ? (unsigned)ms - 250 : 50;
	evhttp_clear_headers(&args);
	return budget;
}

/* Defer a request whose namespace the map does not know. */
static void
defer(struct worker *w, struct evhttp_request *req, struct review *rv,
    uint64_t t0_us)
{
	static const struct timeval now = { 0, 0 };
	struct job *j;

	if ((j = calloc(1, sizeof(*j))) == NULL) {
		fallback(w, "lookup_failed", rv, review_namespace(rv),
		    "out of memory");
		answer(w, req, rv, miss(w), NULL, t0_us);
		request_done(w);
		return;
	}
	j->w = w;
	j->req = req;
	j->rv = rv;
	j->t0_us = t0_us;
	j->timeout_ms = lookup_budget(w, req);
	snprintf(j->ns, sizeof(j->ns), "%s", review_namespace(rv));
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
	    job_conn_closed, j);
	if (event_base_once(w->srv->cfg.main_base, -1, EV_TIMEOUT,
	    lookup_start_cb, j, &now) < 0) {
		j->answer.err = -ENOMEM;
		job_done_cb(-1, 0, j);
	}
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
				fallback(w, "last_known", rv, ns,
				    "sync unavailable");
			break;
		case NSCACHE_UNRESOLVED:
			fallback(w, "unresolved", rv, ns, "annotation "
			    "missing or invalid");
			st = unresolved(w);
			break;
		case NSCACHE_MISSING:
		default:
			if (up) {
				defer(w, req, rv, t0_us);
				return;
			}
			fallback(w, "sync_down", rv, ns, "namespace not known "
			    "and sync unavailable");
			st = miss(w);
			break;
		}
	}
	answer(w, req, rv, st, &r, t0_us);
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
		account(w, "bad_request", t0);
		return;
	}
	if (!is_json(evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Content-Type"))) {
		reply_text(w, req, 415, "Unsupported Media Type",
		    "Content-Type must be application/json");
		account(w, "bad_request", t0);
		return;
	}
	if (len > w->srv->cfg.max_body) {
		reply_text(w, req, 413, "Payload Too Large", "body too large");
		account(w, "too_large", t0);
		return;
	}
	if (FAULT("admit.mutate") < 0) {
		reply_text(w, req, 500, "Internal Server Error", "fault");
		account(w, "error", t0);
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
		account(w, "bad_request", t0);
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
static void
handle(struct evhttp_request *req, void *arg)
{
	struct worker *w = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req));
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	bool get = cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD;

	conn_served(req);
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

/* An input filter that refuses everything: for a failed SSL_new. */
static enum bufferevent_filter_result
refuse(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t lim,
    enum bufferevent_flush_mode mode, void *arg)
{
	(void)src;
	(void)dst;
	(void)lim;
	(void)mode;
	(void)arg;
	return BEV_ERROR;
}

/* The bucket of an address. */
static size_t
addr_bucket(const struct in6_addr *a)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(a->s6_addr); i++)
		h = (h ^ a->s6_addr[i]) * 16777619u;
	return h % SRV_ADDR_BUCKETS;
}

/*
 * Count one more connection from a; NULL when it is over the cap (or out
 * of memory), else the entry to release with addr_release().
 */
static struct addr_count *
addr_take(struct server *s, const struct in6_addr *a)
{
	struct addr_count **pp, *e;

	pthread_mutex_lock(&s->addr_lock);
	for (pp = &s->addrs[addr_bucket(a)]; (e = *pp) != NULL; pp = &e->next)
		if (memcmp(&e->a, a, sizeof(*a)) == 0)
			break;
	if (e == NULL && (e = calloc(1, sizeof(*e))) != NULL) {
		e->a = *a;
		*pp = e;
	}
	if (e != NULL && e->n >= s->cfg.max_conns_per_addr)
		e = NULL;
	else if (e != NULL)
		e->n++;
	pthread_mutex_unlock(&s->addr_lock);
	return e;
}

/* A connection counted by addr_take() ended. */
static void
addr_release(struct server *s, struct addr_count *e)
{
	struct addr_count **pp;

	pthread_mutex_lock(&s->addr_lock);
	if (--e->n == 0)
		for (pp = &s->addrs[addr_bucket(&e->a)]; *pp != NULL;
		    pp = &(*pp)->next)
			if (*pp == e) {
				*pp = e->next;
				free(e);
				break;
			}
	pthread_mutex_unlock(&s->addr_lock);
}

/*
 * A connection's SSL is freed with its bufferevent, whatever ends it: that
 * is where it stops counting against --max-connections and its address's
 * cap, and its timer goes.
 */
static void
conn_gone(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
    void *argp)
{
	struct conn *c = ptr;

	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	if (c == NULL)
		return;
	metric_set(c->srv->cfg.open, NULL, NULL,
	    (double)(atomic_fetch_sub(&c->srv->nconns, 1) - 1));
	if (c->addr != NULL)
		addr_release(c->srv, c->addr);
	if (c->timer != NULL)
		event_free(c->timer);
	free(c);
}

static void
conn_slot_init(void)
{
	conn_slot = SSL_get_ex_new_index(0, NULL, NULL, NULL, conn_gone);
}

/* Whether a rate-limited log line may go out now (once a minute). */
static bool
rate_due(uint64_t *last_ms)
{
	uint64_t now = monotonic_ms();

	if (*last_ms != 0 && now - *last_ms < 60000)
		return false;
	*last_ms = now;
	return true;
}

/* Say, at most once a minute per worker, that connections are refused. */
static void
warn_refused(struct worker *w)
{
	if (!rate_due(&w->refused_logged_ms))
		return;
	log_warn("connection refused: %u open, --max-connections reached "
	    "(counted in kpgpud_admit_connections_refused_total)",
	    atomic_load(&w->srv->nconns));
}

/*
 * End a connection from its timer: evhttp takes it for a read timeout and
 * frees it (and so c) at once; nothing of c may be touched afterwards.
 */
static void
conn_end(struct conn *c)
{
	bufferevent_trigger_event(c->bev, BEV_EVENT_READING |
	    BEV_EVENT_TIMEOUT, 0);
}

/* The peer's address as an IPv6 address; false when it has none. */
static bool
peer_addr(int fd, struct in6_addr *ret, char *text, size_t textlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return false;
	if (ss.ss_family == AF_INET6) {
		*ret = ((struct sockaddr_in6 *)&ss)->sin6_addr;
		inet_ntop(AF_INET6, ret, text, (socklen_t)textlen);
		return true;
	}
	if (ss.ss_family != AF_INET)
		return false;
	memset(ret, 0, sizeof(*ret));
	ret->s6_addr[10] = ret->s6_addr[11] = 0xff;
	memcpy(&ret->s6_addr[12], &((struct sockaddr_in *)&ss)->sin_addr, 4);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, text,
	    (socklen_t)textlen);
	return true;
}

/*
 * The connection's timer. First run (right after accept): count the peer
 * against --max-connections-per-address, then start the deadline for the
 * TLS handshake and the first request. Second run: that deadline passed.
 */
static void
conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct server *s = c->srv;
	struct worker *w = c->w;
	struct timeval tv;
	struct in6_addr a;
	char text[INET6_ADDRSTRLEN] = "?";

	(void)fd;
	(void)what;
	if (c->armed) {
		metric_inc(s->cfg.deadline_closed, NULL, NULL);
		if (rate_due(&w->deadline_logged_ms))
			log_warn("connection closed: no complete first request "
			    "within --first-request-timeout (counted in "
			    "kpgpud_admit_connections_deadline_total)");
		conn_end(c);
		return;
	}
	if (s->cfg.max_conns_per_addr > 0 &&
	    peer_addr(bufferevent_getfd(c->bev), &a, text, sizeof(text)) &&
	    (c->addr = addr_take(s, &a)) == NULL) {
		metric_inc(s->cfg.refused_addr, NULL, NULL);
		if (rate_due(&w->addr_logged_ms))
			log_warn("connection refused: address=%s has "
			    "--max-connections-per-address=%u open (counted "
			    "in kpgpud_admit_connections_refused_per_address"
			    "_total)", text, s->cfg.max_conns_per_addr);
		conn_end(c);
		return;
	}
	c->armed = true;
	tv.tv_sec = s->cfg.first_request_ms / 1000;
	tv.tv_usec = (s->cfg.first_request_ms % 1000) * 1000;
	event_add(c->timer, &tv);
}

/* The first request on a connection is in: its deadline is over. */
static void
conn_served(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev;
	SSL *ssl;
	struct conn *c;

	if (evcon == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL ||
	    (ssl = bufferevent_openssl_get_ssl(bev)) == NULL ||
	    (c = SSL_get_ex_data(ssl, conn_slot)) == NULL || !c->armed)
		return;
	c->armed = false;
	event_del(c->timer);
}

/* A refusing plain bufferevent: the connection is closed at once. */
static struct bufferevent *
refuse_bev(struct event_base *base)
{
	struct bufferevent *under = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE);

	return bufferevent_filter_new(under, refuse, NULL,
	    BEV_OPT_CLOSE_ON_FREE, NULL, NULL);
}

/* A TLS bufferevent for each accepted connection, never a plain one. */
static struct bufferevent *
bevcb(struct event_base *base, void *arg)
{
	struct worker *w = arg;
	struct server *s = w->srv;
	struct bufferevent *bev;
	struct conn *c = NULL;
	SSL *ssl = NULL;
	char idx[16];

	snprintf(idx, sizeof(idx), "%d", w->idx);
	metric_inc(s->cfg.connections, idx, NULL);
	if (atomic_load(&s->nconns) >= s->cfg.max_connections) {
		metric_inc(s->cfg.refused, NULL, NULL);
		warn_refused(w);
		return refuse_bev(base);
	}
	if ((c = calloc(1, sizeof(*c))) != NULL &&
	    (c->timer = evtimer_new(base, conn_timer_cb, c)) != NULL &&
	    (ssl = tls_ssl_new(s->cfg.tls)) != NULL &&
	    SSL_set_ex_data(ssl, conn_slot, c) == 1) {
		c->srv = s;
		c->w = w;
		metric_set(s->cfg.open, NULL, NULL,
		    (double)(atomic_fetch_add(&s->nconns, 1) + 1));
		bev = bufferevent_openssl_socket_new(base, -1, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
		if (bev != NULL) {
			bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
			c->bev = bev;
			/* evhttp sets the socket before this runs */
			event_active(c->timer, EV_TIMEOUT, 0);
			return bev;
		}
		c = NULL;	/* the slot's free uncounts and frees it */
	}
	SSL_free(ssl);
	if (c != NULL) {
		if (c->timer != NULL)
			event_free(c->timer);
		free(c);
	}
	log_err("cannot set up TLS for a connection; refusing it");
	return refuse_bev(base);
}

/* Worker side: stop accepting; finish now when nothing is in flight. */
static void
worker_stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	if (w->stopping)
		return;
	w->stopping = true;
	if (w->bound != NULL) {
		evhttp_del_accept_socket(w->http, w->bound);
		w->bound = NULL;
	}
	if (w->inflight == 0 && w->sending == 0)
		worker_finish_cb(-1, 0, w);
}

/*
 * Worker side: close every connection (idle keep-alive ones at once; a
 * request still in flight loses its connection and its answer is dropped)
 * and leave the loop.
 */
static void
worker_finish_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	if (w->http != NULL) {
		if (w->bound != NULL)
			evhttp_del_accept_socket(w->http, w->bound);
		w->bound = NULL;
		evhttp_free(w->http);
		w->http = NULL;
	}
	if (w->beat != NULL)
		event_del(w->beat);
	atomic_store(&w->done, true);
	event_base_loopexit(w->base, NULL);
}

/* Heartbeat of a worker's loop, read by the watchdog gate. */
static void
beat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	atomic_store(&w->last_beat_ms, monotonic_ms());
}

/* Change the miss policy and the lookup bound; see server.h. */
void
server_set_policy(struct server *s, bool miss_deny, unsigned lookup_timeout_ms)
{
	atomic_store(&s->miss_deny, miss_deny);
	atomic_store(&s->lookup_timeout_ms, lookup_timeout_ms);
}

/* Whether every worker's loop turned recently. */
bool
server_alive(struct server *s)
{
	uint64_t now = monotonic_ms();

	for (int i = 0; i < s->cfg.nthreads; i++)
		if (s->w[i].started && !atomic_load(&s->w[i].done) &&
		    now - atomic_load(&s->w[i].last_beat_ms) > SRV_STUCK_MS)
			return false;
	return true;
}

/* A worker thread: its own loop until stopped. */
static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	event_base_dispatch(w->base);
	atomic_store(&w->done, true);
	return NULL;
}

/*
 * A worker's event base. On epoll, libevent's change list folds the
 * enable/disable pairs evhttp and bufferevent_openssl make for every
 * request into at most one epoll_ctl per loop turn; nothing in a worker
 * dup()s a descriptor, which is the change list's one caveat.
 */
static struct event_base *
worker_base_new(void)
{
	struct event_config *ec = event_config_new();
	struct event_base *base;

	if (ec == NULL)
		return NULL;
	event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	base = event_base_new_with_config(ec);
	event_config_free(ec);
	return base;
}

/* Copy an int socket option of the shared listener onto fd. */
static int
copy_opt(int from, int fd, int level, int opt)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if (getsockopt(from, level, opt, &v, &l) < 0)
		return -1;
	return setsockopt(fd, level, opt, &v, sizeof(v));
}

/*
 * A worker's listening socket. When the shared one has SO_REUSEPORT (as
 * --listen binds it), each worker after the first binds a socket of its own
 * to the same address and the kernel spreads new connections over them by
 * hash; otherwise (socket activation, --listen-fd) the workers share one
 * queue, and a burst of connections may all go to whichever wakes first.
 */
static int
worker_listener(struct server *s, int idx)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss), ol = sizeof(int);
	int lfd = s->cfg.listen_fd, fd, on = 0, one = 1;

	if (idx == 0)
		return fcntl(lfd, F_DUPFD_CLOEXEC, 3);
	if (getsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &on, &ol) < 0 || !on ||
	    getsockname(lfd, (struct sockaddr *)&ss, &sl) < 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
		if (idx == 1)
			log_info("workers share the listening socket passed "
			    "in (no SO_REUSEPORT)");
		return fcntl(lfd, F_DUPFD_CLOEXEC, 3);
	}
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0)) >= 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == 0 &&
	    copy_opt(lfd, fd, IPPROTO_TCP, TCP_NODELAY) == 0 &&
	    (ss.ss_family == AF_INET ||
	    copy_opt(lfd, fd, IPPROTO_IPV6, IPV6_V6ONLY) == 0) &&
	    bind(fd, (struct sockaddr *)&ss, sl) == 0 && listen(fd, 1024) == 0)
		return fd;
	log_warn("worker %d shares the listening socket (own socket: %s)",
	    idx, strerror(errno));
	if (fd >= 0)
		close(fd);
	return fcntl(lfd, F_DUPFD_CLOEXEC, 3);
}

/* Set one worker up on its own base with its own copy of the listener. */
static int
worker_init(struct server *s, struct worker *w, int idx)
{
	struct timeval idle = { (time_t)s->cfg.idle_timeout_s, 0 };
	struct timeval beat = { 0, SRV_BEAT_MS * 1000 };
	int fd;

	w->srv = s;
	w->idx = idx;
	atomic_store(&w->last_beat_ms, monotonic_ms());
	if ((w->base = worker_base_new()) == NULL ||
	    (w->http = evhttp_new(w->base)) == NULL ||
	    (w->beat = event_new(w->base, -1, EV_PERSIST, beat_cb, w)) ==
	    NULL || event_add(w->beat, &beat) < 0)
		return -ENOMEM;
	evhttp_set_bevcb(w->http, bevcb, w);
	evhttp_set_gencb(w->http, handle, w);
	evhttp_set_max_body_size(w->http, (ev_ssize_t)s->cfg.max_body);
	evhttp_set_max_headers_size(w->http, (ev_ssize_t)s->cfg.max_headers);
	evhttp_set_timeout_tv(w->http, &idle);
	evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD);
	/* Each worker closes its own socket or descriptor of the shared one. */
	if ((fd = worker_listener(s, idx)) < 0)
		return -errno;
	if ((w->bound = evhttp_accept_socket_with_handle(w->http, fd)) ==
	    NULL) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

/* Set the workers up; see server.h. */
int
server_new(const struct server_config *cfg, struct server **ret)
{
	struct server *s;
	int rv = -ENOMEM;

	if (cfg->nthreads < 1 || cfg->nthreads > SRV_MAX_THREADS)
		return -EINVAL;
	if (pthread_once(&conn_slot_once, conn_slot_init) != 0 ||
	    conn_slot < 0)
		return -ENOMEM;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	if (pthread_mutex_init(&s->addr_lock, NULL) != 0) {
		free(s);
		return -ENOMEM;
	}
	s->cfg = *cfg;
	if (s->cfg.first_request_ms == 0)
		s->cfg.first_request_ms = 5000;
	tokenbucket_init(&s->lookup_tb, (double)s->cfg.lookup_rate,
	    (double)s->cfg.lookup_burst, monotonic_usec());
	if ((s->neg = calloc(SRV_NEG_SLOTS, sizeof(*s->neg))) == NULL)
		goto fail;
	if (s->cfg.max_connections == 0)
		s->cfg.max_connections = UINT_MAX;
	server_set_policy(s, cfg->miss_deny, cfg->lookup_timeout_ms);
	if ((s->w = calloc((size_t)cfg->nthreads, sizeof(*s->w))) == NULL)
		goto fail;
	for (int i = 0; i < cfg->nthreads; i++)
		if ((rv = worker_init(s, &s->w[i], i)) < 0)
			goto fail;
	*ret = s;
	return 0;
fail:
	server_free(s);
	return rv;
}

/* Start the worker threads. */
int
server_start(struct server *s)
{
	for (int i = 0; i < s->cfg.nthreads; i++) {
		int rv = pthread_create(&s->w[i].thread, NULL, worker_main,
		    &s->w[i]);

		if (rv != 0)
			return -rv;
		s->w[i].started = true;
	}
	return 0;
}

/* Whether every worker has left its loop's work behind. */
static bool
all_done(struct server *s)
{
	for (int i = 0; i < s->cfg.nthreads; i++)
		if (s->w[i].started && !atomic_load(&s->w[i].done))
			return false;
	return true;
}

/* Post cb to every running worker. */
static void
post_all(struct server *s, event_callback_fn cb)
{
	static const struct timeval now = { 0, 0 };

	for (int i = 0; i < s->cfg.nthreads; i++)
		if (s->w[i].started && !atomic_load(&s->w[i].done))
			event_base_once(s->w[i].base, -1, EV_TIMEOUT, cb,
			    &s->w[i], &now);
}

/* A no-op timer that makes one main-loop turn return. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* Run the main loop until every worker is done or ms passed. */
static void
run_main_until_done(struct server *s, unsigned ms)
{
	static const struct timeval step = { 0, 20 * 1000 };
	uint64_t end = monotonic_ms() + ms;

	while (!all_done(s) && monotonic_ms() < end) {
		event_base_once(s->cfg.main_base, -1, EV_TIMEOUT, tick_cb, NULL,
		    &step);
		event_base_loop(s->cfg.main_base, EVLOOP_ONCE);
	}
}

/* Graceful stop; see server.h. */
void
server_stop(struct server *s, unsigned grace_ms)
{
	struct lookup *lk;

	post_all(s, worker_stop_cb);
	run_main_until_done(s, grace_ms);
	/* Lookups still in flight: answer them as cancelled. */
	for (lk = s->lookups; lk != NULL; lk = lk->next) {
		struct job *j, *next;

		for (j = lk->jobs; j != NULL; j = next) {
			next = j->next_waiter;
			j->answer.err = -ECANCELED;
			post_back(j);
		}
		lk->jobs = NULL;
	}
	s->cfg.sync = NULL;
	run_main_until_done(s, 1000);
	post_all(s, worker_finish_cb);
	for (int i = 0; i < s->cfg.nthreads; i++)
		if (s->w[i].started) {
			pthread_join(s->w[i].thread, NULL);
			s->w[i].started = false;
		}
}

/* Free everything; leftover posted callbacks run here first. */
void
server_free(struct server *s)
{
	struct lookup *lk;

	if (s == NULL)
		return;
	for (int i = 0; s->w != NULL && i < s->cfg.nthreads; i++) {
		struct worker *w = &s->w[i];

		if (w->base != NULL)
			event_base_loop(w->base, EVLOOP_NONBLOCK);
		if (w->http != NULL)
			evhttp_free(w->http);
		if (w->beat != NULL)
			event_free(w->beat);
		if (w->base != NULL)
			event_base_free(w->base);
	}
	/* The lookups' owners are gone; sync's callbacks must not run. */
	for (lk = s->lookups; lk != NULL; lk = lk->next)
		lk->jobs = NULL;
	for (size_t i = 0; i < SRV_ADDR_BUCKETS; i++)
		while (s->addrs[i] != NULL) {
			struct addr_count *e = s->addrs[i];

			s->addrs[i] = e->next;
			free(e);
		}
	pthread_mutex_destroy(&s->addr_lock);
	free(s->neg);
	free(s->w);
	free(s);
}
