/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inside of kpgpud-admit's HTTPS server (server.h is its outside),
 * shared by its parts:
 *   server.c   the worker pool: threads, listeners, heartbeat, start and
 *              stop;
 *   conn.c     connections: accept and their caps, TLS, HTTP/1.1 framing
 *              (httphead.h), keep-alive, timeouts, the replies' bytes,
 *              the input buffers under --max-buffered (bufcap.h);
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

#include <time.h>

#include <event2/event.h>

#include <openssl/ssl.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/tokenbucket.h"
#include "common/util.h"
#include "kpgpud-admit/bufcap.h"
#include "kpgpud-admit/httphead.h"
#include "common/jscan.h"
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

#define SRV_SPARES	8	/* emptied buffers a worker keeps */

/* Emptied connection buffers a worker keeps for reuse (worker only). */
struct spares {
	char			*p[SRV_SPARES];
	size_t			 cap[SRV_SPARES];
	int			 n;
};

struct worker {
	struct server		*srv;
	int			 idx;
	char			 idxs[16];	/* idx as a metric label */
	pthread_t		 thread;
	bool			 started;
	struct event_base	*base;
	int			 lfd;		/* listening socket, or -1 */
	struct event		*lev;		/* accept */
	struct event		*lpause;	/* accept paused (no fds) */
	struct conn		*conns;		/* open, worker thread only */
	struct spares		 spare_in, spare_out;	/* conn.c */
	const struct timeval	*idle_tv;	/* --idle-timeout */
	const struct timeval	*first_tv;	/* --first-request-timeout */
	struct event		*beat;
	atomic_uint_least64_t	 last_beat_ms;
	unsigned		 inflight;	/* worker thread only */
	unsigned		 sending;	/* replies not yet flushed */
	bool			 stopping;	/* worker thread only */
	bool			 finished;	/* connections closed */
	time_t			 date_t;	/* the second date[] says */
	char			 date[40];	/* "Date: ...\r\n" */
	size_t			 date_len;
	uint64_t		 refused_logged_ms;	/* worker thread only */
	uint64_t		 addr_logged_ms;	/* worker thread only */
	uint64_t		 deadline_logged_ms;	/* worker thread only */
	uint64_t		 accept_logged_ms;	/* worker thread only */
	uint64_t		 bufcap_logged_ms;	/* worker thread only */
	atomic_bool		 done;
};

/*
 * One accepted connection (worker thread only). It reads one request at a
 * time into in[]; a request answered at once is written out before the
 * next is parsed, one deferred (job) stops reading until it is answered.
 */
struct conn {
	struct worker		*w;
	int			 fd;
	SSL			*ssl;
	struct event		*rev;		/* readable, persistent */
	struct event		*wev;		/* writable, once */
	struct event		*timer;		/* deadline, idle, linger */
	struct addr_count	*addr;	/* counted against its address */
	struct conn		*next, **prevp;	/* the worker's list */
	struct job		*job;		/* the request deferred */
	char			*in;		/* received plaintext */
	size_t			 in_len, in_cap;
	size_t			 scan;		/* httphead_end resumes here */
	size_t			 used;		/* bytes of the request */
	struct httphead		 h;		/* the request's head */
	struct httpchunk	 ch;		/* its chunked body */
	size_t			 raw, body_len;	/* chunked: after the head */
	char			*out;		/* reply not yet written */
	size_t			 out_len, out_off, out_cap;
	size_t			 lingered;	/* bytes dropped lingering */
	bool			 have_head;
	bool			 handshaken;
	bool			 served;	/* a whole request came */
	bool			 reading;	/* rev is added */
	bool			 sending;	/* counted in w->sending */
	bool			 rearm;		/* out ends in a final reply */
	bool			 closing;	/* close once out is written */
	bool			 drain;		/* unread input: linger */
	bool			 lingering;
	bool			 dead;		/* no TLS shutdown, just free */
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
	struct conn		*c;	/* NULL once the connection is gone */
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
	struct bufcap		 bufcap;	/* input bytes, all workers */
	/* reloadable (SIGHUP): the main thread writes, workers read */
	atomic_bool		 miss_deny;
	atomic_uint		 lookup_timeout_ms;
	pthread_mutex_t		 addr_lock;
	struct addr_count	*addrs[SRV_ADDR_BUCKETS];
	/* main thread only: negative cache and the lookup token bucket */
	struct neg_slot		*neg;
	struct tokenbucket	 lookup_tb;
};

/* conn.c */
/* Accept new connections (the listening socket's callback; arg: worker). */
void	 conn_accept_cb(evutil_socket_t fd, short what, void *arg);
/* Accept again after a pause (out of descriptors; arg: worker). */
void	 conn_accept_resume_cb(evutil_socket_t fd, short what, void *arg);
/*
 * Send a reply (extra: more header lines, each ending in CRLF, or NULL).
 * Never frees c: a failure marks it for the caller (conn_resume).
 */
void	 conn_reply(struct conn *c, int code, const char *reason,
	    const char *ctype, const char *extra, const char *body, size_t len);
/* A deferred request was answered: go on with the connection. */
void	 conn_resume(struct conn *c);
/* Close every connection of a worker (it is finishing). */
void	 conn_close_all(struct worker *w);
/* Free a worker's spare buffers (it is finishing). */
void	 conn_free_spares(struct worker *w);

/* request.c */
/* Route and answer one request; buf holds its head (h's offsets). */
void	 request_handle(struct conn *c, const char *buf,
	    const struct httphead *h, const char *body, size_t len);
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
void	 request_answer(struct worker *w, struct conn *c, struct review *rv,
	    enum review_ns ns, const struct resolved_pack *r, uint64_t t0_us);

/* lookup.c */
/* How long a lookup may take for a request with query q (?timeout=). */
unsigned lookup_budget(struct worker *w, const char *q, size_t qlen);
/* Defer a request whose namespace the map does not know. */
void	 lookup_defer(struct worker *w, struct conn *c, struct review *rv,
	    uint64_t t0_us, unsigned budget_ms);
/* Hand a job back to its worker. */
void	 lookup_post_back(struct job *j);

/* server.c */
/* A stopping worker finishes once nothing is in flight or unsent. */
void	 server_maybe_finish(struct worker *w);
/* Worker side: close every connection and leave the loop (posted). */
void	 server_worker_finish_cb(evutil_socket_t fd, short what, void *arg);

#endif
