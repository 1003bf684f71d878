/* SPDX-License-Identifier: Apache-2.0 */
/* The plain-HTTP /metrics listener shared by the daemons. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/hostport.h"
#include "common/metrics_http.h"
#include "common/util.h"

struct metrics_http {
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound;
	metrics_http_render_fn		 render;
	void				*arg;
};

/* GET /metrics: the caller's rendering, or 500 if it fails. */
static void
metrics_http_cb(struct evhttp_request *req, void *arg)
{
	struct metrics_http *mh = arg;
	struct buf b = BUF_INIT(0);
	struct evbuffer *out = evhttp_request_get_output_buffer(req);

	if (mh->render(mh->arg, &b) < 0) {
		evhttp_send_error(req, 500, "metrics unavailable");
	} else {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Content-Type", "text/plain; version=0.0.4");
		evbuffer_add(out, buf_str(&b), b.len);
		evhttp_send_reply(req, 200, "OK", NULL);
	}
	buf_free(&b);
}

/*
 * GET /healthz: 200 without rendering anything. The listener runs on the
 * daemon's event loop, so an answer shows the loop turns (a liveness
 * probe that needs no credential and costs no metrics rendering).
 */
static void
metrics_http_healthz_cb(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	evbuffer_add(evhttp_request_get_output_buffer(req), "ok\n", 3);
	evhttp_send_reply(req, 200, "OK", NULL);
}

/* Parse spec, bind it and serve /metrics and /healthz. */
int
metrics_http_new(struct event_base *base, const char *spec,
    metrics_http_render_fn render, void *arg, struct metrics_http **ret,
    char *err, size_t errlen)
{
	struct metrics_http *mh;
	struct hostport hp;
	int r;

	if ((r = hostport_parse(spec, "127.0.0.1", HOSTPORT_PORT0, &hp, err,
	    errlen)) < 0)
		return r;
	if ((mh = calloc(1, sizeof(*mh))) == NULL ||
	    (mh->http = evhttp_new(base)) == NULL) {
		free(mh);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	mh->render = render;
	mh->arg = arg;
	evhttp_set_allowed_methods(mh->http, EVHTTP_REQ_GET);
	evhttp_set_max_headers_size(mh->http, 8192);
	evhttp_set_max_body_size(mh->http, 0);
	if (evhttp_set_cb(mh->http, "/metrics", metrics_http_cb, mh) != 0 ||
	    evhttp_set_cb(mh->http, "/healthz", metrics_http_healthz_cb,
	    NULL) != 0 ||
	    (mh->bound = evhttp_bind_socket_with_handle(mh->http, hp.host,
	    hp.port)) == NULL) {
		snprintf(err, errlen, "cannot bind %s port %u", hp.host,
		    (unsigned)hp.port);
		metrics_http_free(mh);
		return -EADDRINUSE;
	}
	*ret = mh;
	return 0;
}

/* Register one more GET path. */
int
metrics_http_handle(struct metrics_http *mh, const char *path,
    void (*cb)(struct evhttp_request *, void *), void *arg)
{
	int r = evhttp_set_cb(mh->http, path, cb, arg);

	return r == 0 ? 0 : r == -1 ? -EEXIST : -ENOMEM;
}

/* The listening socket. */
int
metrics_http_fd(const struct metrics_http *mh)
{
	return (int)evhttp_bound_socket_get_fd(mh->bound);
}

/* Close the listener; accepts NULL. */
void
metrics_http_free(struct metrics_http *mh)
{
	if (mh == NULL)
		return;
	if (mh->http != NULL)
		evhttp_free(mh->http);
	free(mh);
}
