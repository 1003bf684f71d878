/*
 * The webhook's HTTPS server, its worker pool: see server.h and, for how
 * it is split, server_int.h. Each worker thread owns its event_base, evhttp
 * and connections; the only cross-thread traffic is a read-through lookup
 * (lookup.c), posted to the main loop and answered back with
 * event_base_once (libevent is set up for threads by main).
 */
#include "kpgpud-admit/server_int.h"

/* The SSL ex_data slot that ties a connection to its server's count. */
static int conn_slot = -1;
static pthread_once_t conn_slot_once = PTHREAD_ONCE_INIT;

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
void
server_conn_served(struct evhttp_request *req)
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
		server_worker_finish_cb(-1, 0, w);
}

/*
 * Worker side: close every connection (idle keep-alive ones at once; a
 * request still in flight loses its connection and its answer is dropped)
 * and leave the loop.
 */
void
server_worker_finish_cb(evutil_socket_t fd, short what, void *arg)
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
	evhttp_set_gencb(w->http, request_handle, w);
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
	review_init();	/* jansson's allocator, before the threads */
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
			lookup_post_back(j);
		}
		lk->jobs = NULL;
	}
	s->cfg.sync = NULL;
	run_main_until_done(s, 1000);
	post_all(s, server_worker_finish_cb);
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
