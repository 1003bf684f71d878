/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watches of the Kubernetes client: chunked streams decoded line by line
 * (kube/watchstream.h), events handed out after curl returns, and the
 * reasons a watch ends (closed, HTTP error, 410 Expired, ERROR event,
 * parse error, stall, transport).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/jscan.h"
#include "kube/kube_impl.h"

/* End a watch: detach it, then tell the owner why. */
static void
end_watch(struct kube_req *x, enum kube_watch_reason why, long status,
    int error, const char *message, const char *reason)
{
	struct kube_watch_end e = {
		.reason = why, .status = status, .error = error,
		.message = message ? message : "", .events = x->events,
		.reason_text = reason ? reason : "",
	};
	kube_watch_end_cb cb = x->on_end;
	void *arg = x->arg;

	if (why == KUBE_WATCH_STALLED)
		x->c->m.watch_stalls++;
	kube_kx_kill(x);
	if (cb != NULL)
		cb(&e, arg);
}

/* Deliver the complete events a watch has buffered. */
void
kube_watch_dispatch(struct kube_req *x)
{
	struct watch_event ev;
	int r;

	x->data = false;
	while (x->state == KX_RUNNING || x->state == KX_DONE) {
		if ((r = watchstream_next(x->ws, &ev)) == 0)
			return;
		if (r < 0) {
			end_watch(x, KUBE_WATCH_PARSE_ERROR, 200, r,
			    watchstream_error(x->ws), NULL);
			return;
		}
		if (ev.type == WATCH_ERROR) {
			end_watch(x, ev.expired ? KUBE_WATCH_EXPIRED :
			    KUBE_WATCH_ERROR_EVENT, ev.code, 0,
			    *ev.message ? ev.message : "ERROR event",
			    ev.reason);
			watch_event_clear(&ev);
			return;
		}
		x->events++;
		x->c->m.watch_events++;
		x->on_event(&ev, x->arg);
		watch_event_clear(&ev);
	}
}

/* A watch's transfer finished: classify how. */
void
kube_watch_finish(struct kube_req *x, long status)
{
	struct kube_response r;
	char msg[256];
	int e = kube_curl_errno(x), w;

	kube_watch_dispatch(x);
	if (x->state != KX_DONE)
		return;		/* ended or stopped while dispatching */
	if (x->stream || (status == 200 && e == 0)) {
		if ((w = watchstream_end(x->ws)) < 0 ||
		    (e != 0 && x->result == CURLE_WRITE_ERROR && !x->not_h2))
			end_watch(x, KUBE_WATCH_PARSE_ERROR, status,
			    w < 0 ? w : -EMSGSIZE, watchstream_error(x->ws),
			    NULL);
		else if (e != 0)
			end_watch(x, KUBE_WATCH_TRANSPORT, status, e,
			    *kube_errtext(x) ? kube_errtext(x) : strerror(-e),
			    NULL);
		else
			end_watch(x, KUBE_WATCH_CLOSED, status, 0,
			    "closed by server", NULL);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.status = status;
	r.error = e;
	r.body = x->rbuf ? x->rbuf : "";
	r.body_len = x->rlen;
	if (e == 0 && r.body_len > 0)
		r.json = jscan_load(r.body, r.body_len);
	kube_status_text(&r, msg, sizeof(msg), kube_errtext(x));
	end_watch(x, e != 0 && status == 0 ? KUBE_WATCH_TRANSPORT :
	    KUBE_WATCH_HTTP_ERROR, status, e, r.message, r.reason);
	json_decref(r.json);
}

/* The stall timer of a watch: no bytes for watch_stall_ms. */
void
kube_watch_stall_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kube_req *x = arg;
	struct kube_client *c = x->c;
	char msg[96];

	(void)fd;
	(void)what;
	if (x->state != KX_RUNNING)
		return;
	c->depth++;
	snprintf(msg, sizeof(msg), "no data for %d ms", c->o.watch_stall_ms);
	end_watch(x, KUBE_WATCH_STALLED, 0, -ETIMEDOUT, msg, NULL);
	c->depth--;
	kube_client_reap(c);
}

/* Start a streaming watch. */
int
kube_watch_start(struct kube_client *c, const char *path_and_query,
    kube_watch_event_cb on_event, kube_watch_end_cb on_end, void *arg,
    struct kube_watch **ret)
{
	struct kube_req *x;
	int r;

	if (on_event == NULL)
		return -EINVAL;
	if ((r = kube_kx_new(c, "GET", path_and_query, true, &x)) < 0)
		return r;
	x->on_event = on_event;
	x->on_end = on_end;
	x->arg = arg;
	c->m.watches++;
	kube_kx_submit(x);
	if (ret != NULL)
		*ret = (struct kube_watch *)x;
	return 0;
}

/* Stop a watch without calling on_end. */
void
kube_watch_stop(struct kube_watch *w)
{
	if (w != NULL)
		kube_kx_kill(&w->r);
}
