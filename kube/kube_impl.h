/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the Kubernetes client shared by kube/kube.c (client,
 * curl glue, rate limiter, requests) and kube/kube_watch.c (watches).
 * Not for use outside those two files.
 */
#ifndef KPGPUD_KUBE_IMPL_H
#define KPGPUD_KUBE_IMPL_H

#include <sys/queue.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <curl/curl.h>
#include <event2/event.h>

#include "kube/kube.h"
#include "common/tokenbucket.h"

enum kx_state {
	KX_IDLE = 0,	/* built, not yet submitted */
	KX_QUEUED,	/* waiting for the rate limiter */
	KX_BACKOFF,	/* waiting to retry */
	KX_RUNNING,	/* attached to the multi handle */
	KX_DONE,	/* finished, result not yet handed out */
	KX_DEAD,	/* cancelled or finished; freed at the next reap */
};

/* One request or watch; struct kube_watch is the same object. */
struct kube_req {
	struct kube_client	*c;
	bool			 watch;
	enum kx_state		 state;
	char			*method;
	char			*url;
	char			*ctype;
	char			*body;
	size_t			 blen;
	CURL			*easy;
	struct curl_slist	*hdrs;
	char			 errbuf[CURL_ERROR_SIZE];
	CURLcode		 result;
	char			*rbuf;		/* response body (requests, errors) */
	size_t			 rlen;
	size_t			 rcap;
	bool			 overflow;
	bool			 http_checked;	/* watch: status looked at */
	bool			 stream;	/* watch: 200, body goes to ws */
	bool			 data;		/* watch: bytes to decode */
	bool			 not_h2;	/* HTTP/1.x reply, h2 required */
	bool			 meta;		/* answer as kube_body_meta() */
	long			 retry_after_ms; /* -1: none */
	int			 attempts;
	struct timespec		 queued_at;
	struct event		*timer;		/* backoff or stall */
	struct watchstream	*ws;
	unsigned long		 events;
	kube_response_cb	 cb;
	kube_watch_event_cb	 on_event;
	kube_watch_end_cb	 on_end;
	void			*arg;
	TAILQ_ENTRY(kube_req)	 all;
	TAILQ_ENTRY(kube_req)	 queue;
};
TAILQ_HEAD(kx_list, kube_req);

struct kube_watch {
	struct kube_req		 r;
};

struct kube_client {
	struct event_base	*base;
	struct kube_config	*cfg;
	struct kube_client_opts	 o;
	char			*user_agent;
	char			*url_base;	/* with tls-server-name: the
						   server's URL with that name
						   as host; else NULL */
	struct curl_slist	*connect_to;	/* tls-server-name: where to
						   connect really; or NULL */
	CURLM			*multi;
	struct event		*curl_timer;
	struct event		*rl_timer;
	struct event		*pump_ev;	/* hand out results soon */
	struct event		*kick_ev;	/* curl acts again on its
						   sockets (kube.c, kick_cb) */
	curl_socket_t		*socks;		/* the sockets curl watches */
	size_t			 nsocks;
	size_t			 socks_cap;
	bool			 delivered;	/* curl handed us bytes since
						   the last kick */
	bool			 kicking;	/* kick_cb walks socks: removals
						   only mark their slot */
	struct tokenbucket	 rl;		/* the qps limiter */
	struct kx_list		 all;
	struct kx_list		 rlq;		/* waiting for a token */
	int			 depth;		/* nesting of entry points */
	uint64_t		 rng;
	struct kube_metrics	 m;
};

/* Allocate a transfer (watch: with a decoder) and link it to the client. */
int	 kube_kx_new(struct kube_client *c, const char *method,
	    const char *pq, bool watch, struct kube_req **ret);
/* Run a transfer's next attempt through the rate limiter. */
void	 kube_kx_submit(struct kube_req *x);
/* Stop a transfer; freed now, or at the next reap inside callbacks. */
void	 kube_kx_kill(struct kube_req *x);
/* Free transfers killed while callbacks were running. */
void	 kube_client_reap(struct kube_client *c);
/* The negative errno for a finished attempt's curl result. */
int	 kube_curl_errno(const struct kube_req *x);
/* curl's error text of a finished attempt, or ours (never NULL). */
const char *kube_errtext(const struct kube_req *x);
/* A body as kube_request_meta() hands it out (see kube.c). */
json_t	*kube_body_meta(const char *body, size_t len);
/* Fill a response's message and reason (buf holds a made-up message). */
void	 kube_status_text(struct kube_response *r, char *buf, size_t buflen,
	    const char *errbuf);
/* Deliver the complete events a watch has buffered. */
void	 kube_watch_dispatch(struct kube_req *x);
/* A watch's transfer finished: classify how and call on_end. */
void	 kube_watch_finish(struct kube_req *x, long status);
/* The stall timer of a watch. */
void	 kube_watch_stall_cb(evutil_socket_t fd, short what, void *arg);

#endif
