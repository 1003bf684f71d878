/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plain-HTTP /metrics listener every daemon opens for --metrics-listen
 * (HOST:PORT as in hostport.h; no HOST: 127.0.0.1; port 0: any free one).
 * GET only, no body, 8 KiB of headers; /healthz answers 200 "ok" from the
 * event loop (a liveness probe). More read-only paths (sync's /readyz)
 * can be added with metrics_http_handle().
 */
#ifndef KPGPUD_METRICS_HTTP_H
#define KPGPUD_METRICS_HTTP_H

#include <stddef.h>

struct buf;
struct event_base;
struct evhttp_request;
struct metrics_http;

/* Append the Prometheus text of the process to out; 0 or -errno. */
typedef int (*metrics_http_render_fn)(void *arg, struct buf *out);

/*
 * Bind spec on base and serve GET /metrics from render(arg) and GET
 * /healthz. 0, or
 * -EINVAL (bad spec) / -EADDRINUSE / -ENOMEM with a reason in err;
 * ret untouched on failure.
 */
int	 metrics_http_new(struct event_base *base, const char *spec,
	    metrics_http_render_fn render, void *arg,
	    struct metrics_http **ret, char *err, size_t errlen);
/* Serve one more GET path on the listener; 0 or -errno. */
int	 metrics_http_handle(struct metrics_http *mh, const char *path,
	    void (*cb)(struct evhttp_request *, void *), void *arg);
/* The bound socket, for the caller's "listening on" log line. */
int	 metrics_http_fd(const struct metrics_http *mh);
void	 metrics_http_free(struct metrics_http *mh);

#endif
