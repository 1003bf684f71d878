/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook's HTTPS server: N worker threads, each with its own
 * event_base, listening socket and HTTP/1.1 connections over TLS from
 * tls.h (conn.c, framed by httphead.c). Routes: POST /mutate
 * (AdmissionReview), GET /healthz, /readyz, /metrics. Namespace state
 * comes from the nscache; only a namespace the map does not know is looked
 * up through sync, on the main loop, without blocking the worker.
 */
#ifndef KPGPUD_ADMIT_SERVER_H
#define KPGPUD_ADMIT_SERVER_H

#include <stdbool.h>
#include <stddef.h>

struct event_base;
struct metric;
struct metrics;
struct nscache;
struct syncconn;
struct tls;

/*
 * The largest input buffer a request may need: its head and body caps and
 * room for the reads that bring them (what --max-buffered must hold).
 */
#define SERVER_REQUEST_BUFFER(headers_and_body)	((headers_and_body) + 32768)

struct server_config {
	int			 listen_fd;	/* bound and listening */
	int			 nthreads;	/* >= 1 */
	size_t			 max_body;	/* larger bodies get 413 */
	size_t			 max_patch;	/* JSON patch text; 0: no cap
						   but PATCH_OPS_MAX */
	size_t			 max_headers;
	size_t			 max_buffered;	/* input bytes held across
						   connections; 0: no cap */
	unsigned		 idle_timeout_s;
	unsigned		 lookup_timeout_ms;	/* read-through bound;
							   server_set_policy */
	bool			 miss_deny;	/* unknown namespace: deny */
	struct event_base	*main_base;	/* where sync lookups run */
	struct tls		*tls;
	struct nscache		*cache;
	struct syncconn		*sync;
	struct metrics		*registry;	/* rendered at /metrics */
	struct metric		*requests;	/* {result} */
	struct metric		*duration;	/* histogram */
	struct metric		*fallbacks;	/* {kind} */
	struct metric		*connections;	/* accepted, {worker} */
	struct metric		*refused;	/* over max_connections */
	struct metric		*open;		/* gauge */
	struct metric		*merged;	/* lookups joined */
	unsigned		 max_connections;	/* open at most */
	unsigned		 max_conns_per_addr;	/* 0: no cap */
	unsigned		 first_request_ms;	/* TLS handshake and
							   first request;
							   0: 5000 */
	unsigned		 negative_ttl_ms;	/* "no such namespace"
							   kept; 0: off */
	unsigned		 lookup_rate;	/* lookups per second; 0: any */
	unsigned		 lookup_burst;
	struct metric		*refused_addr;	/* over max_conns_per_addr */
	struct metric		*deadline_closed;	/* first_request_ms */
	struct metric		*lookups;	/* {result} */
	struct metric		*buffered;	/* gauge: input bytes held */
};

struct server;

/* Set the workers up (threads not started yet); cfg is copied. */
int	 server_new(const struct server_config *cfg, struct server **ret);
/* Start the worker threads. */
int	 server_start(struct server *s);
/*
 * Graceful stop, from the main thread after its loop ended: stop accepting,
 * close idle keep-alive connections at once, let requests in flight finish
 * (running the main loop for their lookups) for at most grace_ms, then
 * detach from sync and join the workers.
 */
void	 server_stop(struct server *s, unsigned grace_ms);
/*
 * Change the miss policy and the read-through bound (SIGHUP) for requests
 * from now on; any thread.
 */
void	 server_set_policy(struct server *s, bool miss_deny,
	    unsigned lookup_timeout_ms);
/* Set the gauges read from counters (before rendering /metrics). */
void	 server_update_gauges(struct server *s);
/* Whether every worker's loop turned within the last few seconds. */
bool	 server_alive(struct server *s);
/* Free everything (after server_stop; NULL ok). */
void	 server_free(struct server *s);

#endif
