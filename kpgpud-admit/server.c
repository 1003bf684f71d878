/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook's HTTPS server, its worker pool: see server.h and, for how
 * it is split, server_int.h. Each worker thread owns its event_base,
 * listening socket and connections (conn.c); the only cross-thread
 * traffic is a read-through lookup (lookup.c), posted to the main loop and
 * answered back with event_base_once (libevent is set up for threads by
 * main).
 */
#include "kpgpud-admit/server_int.h"

/* Close the worker's listening socket: new connections go elsewhere. */
static void
stop_accepting(struct worker *w)
{
	if (w->lev != NULL) {
		event_free(w->lev);
		w->lev = NULL;
	}
	if (w->lpause != NULL) {
		event_free(w->lpause);
		w->lpause = NULL;
	}
	if (w->lfd >= 0) {
		close(w->lfd);
		w->lfd = -1;
	}
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
	stop_accepting(w);
	if (w->inflight == 0 && w->sending == 0)
		server_worker_finish_cb(-1, 0, w);
}

/* A stopping worker finishes once nothing is in flight or unsent. */
void
server_maybe_finish(struct worker *w)
{
	static const struct timeval now = { 0, 0 };

	if (w->stopping && w->inflight == 0 && w->sending == 0)
		event_base_once(w->base, -1, EV_TIMEOUT, server_worker_finish_cb,
		    w, &now);
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
	if (w->finished)
		return;
	w->finished = true;
	stop_accepting(w);
	conn_close_all(w);
	conn_free_spares(w);
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

/* Set the gauges read from counters (before rendering /metrics). */
void
server_update_gauges(struct server *s)
{
	metric_set(s->cfg.buffered, NULL, NULL,
	    (double)bufcap_used(&s->bufcap));
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
 * A worker's event base. On epoll, libevent's change list folds an event
 * added and deleted in one loop turn into at most one epoll_ctl; nothing
 * in a worker dup()s a descriptor, which is the change list's one caveat.
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
	struct timeval first = { (time_t)(s->cfg.first_request_ms / 1000),
	    (suseconds_t)(s->cfg.first_request_ms % 1000) * 1000 };
	struct timeval beat = { 0, SRV_BEAT_MS * 1000 };

	w->srv = s;
	w->idx = idx;
	w->lfd = -1;
	snprintf(w->idxs, sizeof(w->idxs), "%d", idx);
	atomic_store(&w->last_beat_ms, monotonic_ms());
	if ((w->base = worker_base_new()) == NULL ||
	    (w->idle_tv = event_base_init_common_timeout(w->base, &idle)) ==
	    NULL || (w->first_tv = event_base_init_common_timeout(w->base,
	    &first)) == NULL ||
	    (w->beat = event_new(w->base, -1, EV_PERSIST, beat_cb, w)) ==
	    NULL || event_add(w->beat, &beat) < 0)
		return -ENOMEM;
	/* Each worker closes its own socket or descriptor of the shared one. */
	if ((w->lfd = worker_listener(s, idx)) < 0)
		return -errno;
	if ((w->lev = event_new(w->base, w->lfd, EV_READ | EV_PERSIST,
	    conn_accept_cb, w)) == NULL ||
	    (w->lpause = evtimer_new(w->base, conn_accept_resume_cb, w)) == NULL ||
	    event_add(w->lev, NULL) < 0)
		return -ENOMEM;
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
	if (s->cfg.max_buffered == 0)
		s->cfg.max_buffered = SIZE_MAX;
	bufcap_init(&s->bufcap, s->cfg.max_buffered);
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
		if (w->srv != NULL && !w->finished) {
			w->finished = true;
			stop_accepting(w);
			conn_close_all(w);
			conn_free_spares(w);
		}
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
