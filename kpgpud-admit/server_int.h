/*
 * The inside of kpgpud-admit's HTTPS server (server.h is its outside),
 * shared by its three parts:
 *   server.c   the worker pool: threads, listeners, connections and their
 *              caps, heartbeat, start and stop;
 *   request.c  request handling on a worker: routing, /mutate (parse,
 *              decide from the namespace map, answer), /metrics, replies;
 *   lookup.c   the lookup path: a request whose namespace is not in the
 *              map is deferred to the main thread, which asks kpgpud-sync
 *              (coalesced, rate-limited, negative-cached) and posts the
 *              answer back to the worker.
 * Not for other modules.
 */
#ifndef KPGPUD_ADMIT_SERVER_INT_H
#define KPGPUD_ADMIT_SERVER_INT_H

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

/* request.c */
/* Every request: route by path (the evhttp callback; arg: its worker). */
void	 request_handle(struct evhttp_request *req, void *arg);
/* Count one request outcome and its duration. */
void	 request_account(struct worker *w, const char *result,
	    uint64_t t0_us);
/* One request is over. */
void	 request_done(struct worker *w);
/* Count and log a fallback (one line each, never the pod). */
void	 request_fallback(struct worker *w, const char *kind,
	    const struct review *rv, const char *ns, const char *detail);
/* The miss policy's answer. */
enum review_ns request_miss(struct worker *w);
/* The miss policy's answer for a labelled namespace not resolved yet. */
enum review_ns request_unresolved(struct worker *w);
/* Build and send the AdmissionReview response; frees the review. */
void	 request_answer(struct worker *w, struct evhttp_request *req,
	    struct review *rv, enum review_ns ns, const struct resolved *r,
	    uint64_t t0_us);

/* lookup.c */
/* Defer a request whose namespace the map does not know. */
void	 lookup_defer(struct worker *w, struct evhttp_request *req,
	    struct review *rv, uint64_t t0_us);
/* Hand a job back to its worker. */
void	 lookup_post_back(struct job *j);

/* server.c */
/* The first request on a connection is in: its deadline is over. */
void	 server_conn_served(struct evhttp_request *req);
/* Worker side: close every connection and leave the loop (posted). */
void	 server_worker_finish_cb(evutil_socket_t fd, short what, void *arg);

#endif
