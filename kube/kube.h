/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Asynchronous Kubernetes API client on libevent: libcurl's multi interface
 * driven by the event loop (curl_multi_socket_action from event callbacks and
 * one timer), jansson for bodies. One client per event_base; every callback
 * runs on that loop. Modules do not log: results carry a status, an errno
 * and a message for the caller to log once.
 *
 * - TLS is always verified (CA from the config, else the system store).
 * - A token bucket limits requests (qps/burst); waits are counted.
 * - 429, 5xx and transport errors are retried with jittered exponential
 *   backoff honouring Retry-After, up to max_retries; other 4xx are not.
 *   Every method is retried, so a POST whose first attempt did reach the
 *   server may come back 409 AlreadyExists (resp->attempts > 1 tells).
 *   TLS verification failures and over-size responses are never retried.
 * - Watches are chunked streams decoded by kube/watchstream.h; a stall
 *   detector ends a watch that receives no bytes for watch_stall_ms.
 * - HTTP/2 when the server negotiates it (as kube-apiserver does): every
 *   request and watch is then a stream multiplexed on one connection, a
 *   stopped watch resets its stream, and GOAWAY or a reset stream is a
 *   transport error (-ECONNRESET) like a dropped HTTP/1.1 connection.
 *   http_version selects auto, HTTP/1.1 only or h2 required.
 * - The bearer token is re-read from its file (if any) before each request
 *   when the file changed.
 */
#ifndef KPGPUD_KUBE_H
#define KPGPUD_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "kube/kubeconfig.h"
#include "kube/watchstream.h"

struct event_base;
struct kube_client;
struct kube_req;
struct kube_list;
struct kube_watch;

/* The HTTP version of API requests (kube_client_opts.http_version). */
enum kube_http_version {
	KUBE_HTTP_AUTO = 0,	/* h2 when the server offers it (ALPN), else 1.1 */
	KUBE_HTTP_1_1,		/* HTTP/1.1 only: one connection per transfer */
	KUBE_HTTP_2,		/* h2 required: an HTTP/1.x reply is -EPROTO */
};

/* Option names of enum kube_http_version, in its order, NULL-ended. */
extern const char *const kube_http_versions[];

/* Zero fields take the defaults in brackets. */
struct kube_client_opts {
	double		 qps;		/* [5]; < 0: unlimited */
	int		 burst;		/* [10] */
	const char	*user_agent;	/* ["kpgpud/" KPGPUD_VERSION] */
	int		 timeout_ms;	/* per attempt, not watches [30000] */
	int		 connect_timeout_ms; /* [10000] */
	int		 max_retries;	/* [5]; < 0: none */
	int		 backoff_base_ms; /* first retry delay [200] */
	int		 backoff_max_ms;  /* cap, also on Retry-After [30000] */
	size_t		 max_response;	/* body cap [64 MiB] */
	size_t		 max_line;	/* watch line cap [16 MiB] */
	int		 watch_stall_ms; /* no bytes for this long [120000]; < 0 off */
	int		 http_version;	/* enum kube_http_version [AUTO] */
};

/* Counters the caller can read at any time (kube_client_metrics). */
struct kube_metrics {
	uint64_t	 requests;	/* attempts sent, retries, watches */
	uint64_t	 status[600];	/* completed attempts by HTTP status;
					   [0]: transport error */
	uint64_t	 retries;	/* attempts that were retries */
	uint64_t	 throttled;	/* requests that waited for the rate limiter */
	uint64_t	 throttled_ms;	/* total time spent waiting for it */
	uint64_t	 watches;	/* watches started */
	uint64_t	 watch_events;	/* events delivered */
	uint64_t	 watch_stalls;	/* watches ended as stalled */
	uint64_t	 token_reloads;	/* token file re-reads that changed it */
	uint64_t	 http1;		/* responses over HTTP/1.x */
	uint64_t	 http2;		/* responses over HTTP/2 */
	uint64_t	 kicks;		/* rounds of curl acting again on its
					   sockets after bytes came (kube.c) */
};

/* The outcome of a request, valid only during the callback. */
struct kube_response {
	long		 status;	/* HTTP status; 0 when no response */
	int		 error;		/* 0 or -errno: -ETIMEDOUT, -ECONNREFUSED,
					   -EMSGSIZE (over max_response),
					   -EPROTO (TLS / transport), -ENOMEM */
	json_t		*json;		/* parsed JSON body or NULL; borrowed,
					   json_incref() to keep */
	const char	*body;		/* raw body, NUL-terminated; "" if none */
	size_t		 body_len;
	const char	*message;	/* Status.message, else a short text; never NULL */
	const char	*reason;	/* Status.reason, e.g. "NotFound"; "" if none */
	int		 attempts;	/* 1 + retries */
};

/*
 * Called once per request unless it was cancelled. The kube_req handle is
 * invalid from the moment the callback starts.
 */
typedef void (*kube_response_cb)(const struct kube_response *resp,
    void *arg);

/* New client on base; cfg must outlive it. NULL with errno set on failure. */
struct kube_client *kube_client_new(struct event_base *base,
	    struct kube_config *cfg, const struct kube_client_opts *opts);
/*
 * Cancel everything (no callbacks run) and free; NULL-safe. Not from inside
 * one of the client's callbacks.
 */
void	 kube_client_free(struct kube_client *c);
/*
 * The API part of a daemon's configuration (the member k of its options
 * struct): kubeconfig and context (NULL for kube_config_load's default
 * search, in-cluster included), the token file to switch to (NULL: the
 * kubeconfig's credentials), the rate limit and the HTTP version (enum
 * kube_http_version).
 */
struct kube_conf {
	char	*kubeconfig;
	char	*context;
	char	*token_file;
	int64_t	 qps;
	int64_t	 burst;
	int	 http_version;
};

/*
 * Its entries for the daemon's options table (T: the options struct);
 * the token file's help, the qps default and help, the burst default and
 * the HTTP version's default ("auto" or "1.1") are the daemon's. Needs
 * common/config.h.
 */
#define KUBE_CONF_OPTS(T, token_help, qps_def, qps_help, burst_def,	\
	    http_def)							\
	CONFIG_PATH(T, k.kubeconfig, "kubeconfig", 0, NULL, "API",	\
	    "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config).", \
	    CONFIG_NORELOAD),						\
	CONFIG_STRING(T, k.context, "context", 0, NULL, "API",		\
	    "kubeconfig context.", CONFIG_NORELOAD),			\
	CONFIG_PATH(T, k.token_file, "token-file", 0, NULL, "API",	\
	    token_help, CONFIG_NORELOAD),				\
	CONFIG_INT(T, k.qps, "qps", 0, qps_def, 1, 100000, "API",	\
	    qps_help, CONFIG_NORELOAD),					\
	CONFIG_INT(T, k.burst, "burst", 0, burst_def, 1, 100000, "API",	\
	    "Request burst.", CONFIG_NORELOAD),				\
	CONFIG_ENUM(T, k.http_version, "api-http-version", 0, http_def,	\
	    kube_http_versions, "API", "HTTP version to the API server: " \
	    "auto (HTTP/2 when the server offers it, else HTTP/1.1), 1.1, " \
	    "or 2 (required).", CONFIG_NORELOAD)

/*
 * A daemon's API client from its configuration: load conf's kubeconfig
 * and context, switch to its token file when set, create the client with
 * opts, whose qps, burst and http_version are set from conf. 0, or -errno
 * with err set to one line naming the step ("kubeconfig: ...", "token
 * file: ...", "kube client: ..."); nothing is left allocated and the
 * ret_* are untouched on failure. The caller frees both.
 */
int	 kube_setup(struct event_base *base, const struct kube_conf *conf,
	    struct kube_client_opts *opts, struct kube_config **ret_cfg,
	    struct kube_client **ret_client, char *err, size_t errlen);
const struct kube_metrics *kube_client_metrics(const struct kube_client *c);
/* The client's enum kube_http_version (for a helper client to match). */
int	 kube_client_http_version(const struct kube_client *c);

/*
 * Start a request. path_and_query starts with '/', e.g.
 * "/api/v1/namespaces?limit=500". content_type and body may be NULL (no
 * body); body is copied. On success *ret (if ret is not NULL) is a handle
 * for kube_request_cancel(). Returns 0, -EINVAL or -ENOMEM.
 */
int	 kube_request(struct kube_client *c, const char *method,
	    const char *path_and_query, const char *content_type,
	    const char *body, size_t len, kube_response_cb cb, void *arg,
	    struct kube_req **ret);
/*
 * For a caller that reads only who the answer of req (a pending request,
 * right after kube_request()) is about, such as a write's resourceVersion:
 * resp->json then holds only the string members kind, apiVersion, message,
 * reason and metadata's name, namespace, uid and resourceVersion of an
 * object answer (other members, and these when not strings, are left out);
 * resp->body is the whole answer. The answer is scanned without building
 * its tree (common/jscan.h); one that is not JSON is NULL as without this
 * call. NULL-safe.
 */
void	 kube_request_meta(struct kube_req *req);
/* Cancel a pending request; its callback will not run. NULL-safe. */
void	 kube_request_cancel(struct kube_req *req);

/*
 * Paginated list: GETs path with limit=L (and resourceVersion on the first
 * page, continue=... after), calls on_page with each page's items array
 * (borrowed), then on_end once. On success resp->status is 200 and
 * resource_version is the list's metadata.resourceVersion (the one to watch
 * from); on failure resp says why (410 = continue token expired: relist)
 * and resource_version is NULL. query: extra parameters such as
 * "labelSelector=a%3Db" or NULL. limit 0: 500.
 */
typedef void (*kube_list_page_cb)(json_t *items, void *arg);
typedef void (*kube_list_end_cb)(const struct kube_response *resp,
    const char *resource_version, void *arg);
int	 kube_list_start(struct kube_client *c, const char *path,
	    const char *query, unsigned limit, const char *resource_version,
	    kube_list_page_cb on_page, kube_list_end_cb on_end, void *arg,
	    struct kube_list **ret);
/* Stop a list; no more callbacks. NULL-safe; may be called from on_page
 * (and is a no-op from on_end). The handle is invalid after on_end. */
void	 kube_list_cancel(struct kube_list *l);

/* Why a watch ended. */
enum kube_watch_reason {
	KUBE_WATCH_CLOSED = 1,	/* server ended the stream (e.g. timeoutSeconds) */
	KUBE_WATCH_HTTP_ERROR,	/* status != 200; status/message/reason say why */
	KUBE_WATCH_EXPIRED,	/* ERROR event with 410 Expired/Gone: relist */
	KUBE_WATCH_ERROR_EVENT,	/* any other ERROR event; code in status */
	KUBE_WATCH_PARSE_ERROR,	/* malformed, oversized or truncated line */
	KUBE_WATCH_STALLED,	/* no bytes for watch_stall_ms */
	KUBE_WATCH_TRANSPORT,	/* connect / TLS / reset; error says which */
};

struct kube_watch_end {
	enum kube_watch_reason reason;
	long		 status;	/* HTTP status, or the ERROR event's code */
	int		 error;		/* -errno for TRANSPORT / PARSE_ERROR */
	const char	*message;	/* never NULL, never has secrets */
	const char	*reason_text;	/* Status.reason or "" */
	unsigned long	 events;	/* events delivered by this watch */
};

/*
 * Per event (ADDED, MODIFIED, DELETED, BOOKMARK; an ERROR event ends the
 * watch instead). ev->object is borrowed: json_incref() to keep it.
 * kube_watch_stop() may be called from here.
 */
typedef void (*kube_watch_event_cb)(const struct watch_event *ev, void *arg);
/* Called once when the watch ends by itself; the handle is then freed. */
typedef void (*kube_watch_end_cb)(const struct kube_watch_end *end,
    void *arg);

/*
 * Start a watch. path_and_query carries the watch parameters, e.g.
 * "/api/v1/namespaces?watch=true&allowWatchBookmarks=true&
 * resourceVersion=12&timeoutSeconds=300" (see kube_path()). Not retried:
 * the caller (reflector) decides. Returns 0, -EINVAL or -ENOMEM.
 */
int	 kube_watch_start(struct kube_client *c, const char *path_and_query,
	    kube_watch_event_cb on_event, kube_watch_end_cb on_end, void *arg,
	    struct kube_watch **ret);
/* Stop a watch; on_end is not called. NULL-safe. */
void	 kube_watch_stop(struct kube_watch *w);

/*
 * Build "path?k1=v1&k2=v2" with values percent-encoded. Arguments after
 * path are key, value pairs ending with a NULL key; a NULL or "" value
 * skips its key. Returns 0 or -ENOMEM; caller frees *ret.
 */
int	 kube_path(char **ret, const char *path, ...)
	    __attribute__((sentinel));

/*
 * Blocking helper for the CLI: one request on a private event loop.
 * *ret_status gets the HTTP status (0: none), *ret_json the parsed body
 * (caller json_decref()s; NULL if not JSON). Returns 0 when a response
 * arrived (any status), else -errno with a reason in err.
 */
int	 kube_request_sync(struct kube_config *cfg,
	    const struct kube_client_opts *opts, const char *method,
	    const char *path_and_query, const char *content_type,
	    const char *body, size_t len, long *ret_status, json_t **ret_json,
	    char *err, size_t errlen);

#endif
