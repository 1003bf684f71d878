/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The IPC client on libevent: connect, check the server's uid, HELLO,
 * requests with ids and local deadlines, pushes, and reconnection with
 * jittered exponential backoff.
 *
 * Callbacks may free the client: every entry from libevent holds a busy
 * count, and ipc_client_free() inside a callback only marks the client; the
 * outermost entry frees it on the way out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "ipc/ipc.h"

#define CLI_DEF_OUTBUF		(4u * 1024 * 1024)
#define CLI_DEF_PENDING		1024
#define CLI_DEF_BACKOFF_MIN	100
#define CLI_DEF_BACKOFF_MAX	5000
#define CLI_DEF_HELLO_MS	5000

enum cli_state {
	CLI_IDLE,	/* not started */
	CLI_BACKOFF,	/* waiting to reconnect */
	CLI_HELLO,	/* connected, HELLO sent */
	CLI_READY,	/* HELLO_OK received */
};

struct pend {
	TAILQ_ENTRY(pend)	 link;
	struct ipc_client	*c;
	uint32_t		 id;
	ipc_reply_fn		 cb;
	void			*arg;
	struct event		*timer;
};

struct ipc_client {
	struct event_base	*base;
	struct ipc_client_config cfg;
	char			*path;
	enum cli_state		 state;
	struct bufferevent	*bev;
	struct event		*timer;		/* reconnect or HELLO timeout */
	unsigned		 attempts;	/* reconnects since the last HELLO_OK */
	uint32_t		 next_id;
	uint64_t		 rng;
	TAILQ_HEAD(, pend)	 pending;
	unsigned		 npending;
	int			 busy;
	bool			 doomed;
};

static void client_connect(struct ipc_client *c);
static void client_destroy(struct ipc_client *c);

/* Enter a libevent callback. */
static void
enter(struct ipc_client *c)
{
	c->busy++;
}

/* Leave a libevent callback; free the client if a callback asked to. */
static void
leave(struct ipc_client *c)
{
	if (--c->busy == 0 && c->doomed)
		client_destroy(c);
}

/* Arm the client's timer for ms milliseconds. */
static void
timer_in(struct event *ev, unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

/* Remove a pending request and call its callback once. */
static void
pend_finish(struct pend *p, int err, const struct ipc_msg *reply)
{
	struct ipc_client *c = p->c;

	TAILQ_REMOVE(&c->pending, p, link);
	c->npending--;
	event_free(p->timer);
	if (p->cb != NULL)
		p->cb(c, err, reply, p->arg);
	free(p);
}

/* Fail every pending request with err. */
static void
fail_pending(struct ipc_client *c, int err)
{
	struct pend *p;

	while ((p = TAILQ_FIRST(&c->pending)) != NULL)
		pend_finish(p, err, NULL);
}

/* Drop the connection: fail pending requests, tell the daemon, back off. */
static void
client_disconnect(struct ipc_client *c, int err)
{
	bool was_ready = c->state == CLI_READY;
	unsigned delay;

	if (c->bev != NULL) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	evtimer_del(c->timer);
	c->state = CLI_BACKOFF;
	fail_pending(c, -ECONNRESET);
	if (was_ready && c->cfg.on_disconnected != NULL && !c->doomed)
		c->cfg.on_disconnected(c, err, c->cfg.arg);
	if (c->doomed)
		return;
	delay = backoff_delay_ms(c->cfg.backoff_min_ms, c->cfg.backoff_max_ms,
	    c->attempts, &c->rng);
	if (c->attempts < 32)
		c->attempts++;
	timer_in(c->timer, delay);
}

/* Handle a frame from the server while HELLO is outstanding. */
static void
client_hello_reply(struct ipc_client *c, const struct ipc_msg *m)
{
	if (m->type == IPC_HELLO_OK && m->u.hello.version == IPC_PROTO_VERSION) {
		c->state = CLI_READY;
		c->attempts = 0;
		evtimer_del(c->timer);
		log_debug("ipc connected socket=%s server_role=%s",
		    log_q(c->path), ipc_role_name(m->u.hello.role));
		if (c->cfg.on_connected != NULL)
			c->cfg.on_connected(c, c->cfg.arg);
		return;
	}
	if (m->type == IPC_ERROR)
		log_warn("ipc HELLO refused socket=%s code=%u message=%s",
		    log_q(c->path), m->u.error.code, log_q(m->u.error.message));
	else
		log_warn("ipc bad HELLO answer socket=%s type=%s",
		    log_q(c->path), ipc_type_name(m->type));
	client_disconnect(c, m->type == IPC_ERROR ?
	    -(int)m->u.error.code : -EPROTO);
}

/* Handle one frame from a ready server: a reply, a push, or a violation. */
static void
client_frame(struct ipc_client *c, const struct ipc_msg *m)
{
	struct pend *p;

	if (c->state == CLI_HELLO) {
		client_hello_reply(c, m);
		return;
	}
	if (m->type == IPC_ERROR && m->id == 0) {
		log_warn("ipc server closed the connection socket=%s code=%u "
		    "message=%s", log_q(c->path), m->u.error.code,
		    log_q(m->u.error.message));
		client_disconnect(c, -(int)m->u.error.code);
		return;
	}
	if (ipc_type_is_reply(m->type)) {
		TAILQ_FOREACH(p, &c->pending, link)
			if (p->id == m->id)
				break;
		if (p == NULL)	/* timed out or cancelled already */
			return;
		pend_finish(p, m->type == IPC_ERROR ?
		    -(int)m->u.error.code : 0, m);
		return;
	}
	if (m->type == IPC_CHANGE || m->type == IPC_SNAPSHOT_END) {
		if (c->cfg.on_push != NULL)
			c->cfg.on_push(c, m, c->cfg.arg);
		return;
	}
	log_warn("ipc unexpected frame from server socket=%s type=%s",
	    log_q(c->path), ipc_type_name(m->type));
	client_disconnect(c, -EPROTO);
}

/* Input from the server: every whole frame; a bad one drops the link. */
static void
client_read_cb(struct bufferevent *bev, void *arg)
{
	struct ipc_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	struct ipc_msg m;
	int rc;

	enter(c);
	while (c->bev == bev && !c->doomed) {
		rc = ipc_frame_read(in, c->cfg.max_frame, &m, &why);
		if (rc == 0)
			break;
		if (rc < 0) {
			log_warn("ipc bad frame from server socket=%s reason=%s",
			    log_q(c->path), log_q(why != NULL ? why : "?"));
			client_disconnect(c, rc);
			break;
		}
		client_frame(c, &m);
		ipc_msg_clear(&m);
	}
	leave(c);
}

/* EOF or error on the connection. */
static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ipc_client *c = arg;

	(void)bev;
	enter(c);
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		if (c->state == CLI_READY)
			log_notice("ipc disconnected socket=%s", log_q(c->path));
		client_disconnect(c, (what & BEV_EVENT_EOF) ? -ECONNRESET :
		    -EVUTIL_SOCKET_ERROR());
	}
	leave(c);
}

/* Reconnect timer, or the HELLO answer did not come in time. */
static void
client_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_client *c = arg;

	(void)fd;
	(void)what;
	enter(c);
	if (c->state == CLI_HELLO) {
		log_warn("ipc no HELLO answer socket=%s", log_q(c->path));
		client_disconnect(c, -ETIMEDOUT);
	} else if (c->state == CLI_BACKOFF) {
		client_connect(c);
	}
	leave(c);
}

/* Open the socket and check the server's uid; returns the fd or -errno. */
static int
client_open(struct ipc_client *c)
{
	struct sockaddr_un sun;
	struct ipc_cred cr;
	int fd, rc;

	if (strlen(c->path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, c->path, strlen(c->path));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = ipc_peer_cred(fd, &cr)) < 0)
		goto fail;
	if (c->cfg.nserver_uids > 0 && !ipc_uid_allowed(c->cfg.server_uids,
	    c->cfg.nserver_uids, cr.uid)) {
		log_err("ipc server refused socket=%s pid=%ld uid=%lu "
		    "reason=\"server uid not expected\"", log_q(c->path),
		    (long)cr.pid, (unsigned long)cr.uid);
		rc = -EPERM;
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

/* Try one connection: connect, check the server, send HELLO. */
static void
client_connect(struct ipc_client *c)
{
	struct ipc_msg hello;
	int fd;

	if ((fd = client_open(c)) < 0) {
		log_debug("ipc connect socket=%s: %s", log_q(c->path),
		    strerror(-fd));
		client_disconnect(c, fd);
		return;
	}
	c->bev = bufferevent_socket_new(c->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		close(fd);
		client_disconnect(c, -ENOMEM);
		return;
	}
	bufferevent_setcb(c->bev, client_read_cb, NULL, client_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0,
	    c->cfg.max_frame + IPC_FRAME_HDR);
	bufferevent_enable(c->bev, EV_READ);
	memset(&hello, 0, sizeof(hello));
	hello.type = IPC_HELLO;
	hello.u.hello.version = IPC_PROTO_VERSION;
	hello.u.hello.role = c->cfg.role;
	if (ipc_frame_write(bufferevent_get_output(c->bev), &hello,
	    c->cfg.max_frame) < 0) {
		client_disconnect(c, -ENOMEM);
		return;
	}
	c->state = CLI_HELLO;
	timer_in(c->timer, c->cfg.hello_timeout_ms);
}

/* Create a client (not yet connecting). */
int
ipc_client_new(struct event_base *base, const struct ipc_client_config *cfg,
    struct ipc_client **ret)
{
	struct ipc_client *c;

	if (cfg->path == NULL || ipc_role_name(cfg->role) == NULL)
		return -EINVAL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	c->base = base;
	c->cfg = *cfg;
	if (c->cfg.max_frame == 0 || c->cfg.max_frame > IPC_FRAME_MAX)
		c->cfg.max_frame = IPC_FRAME_MAX;
	if (c->cfg.max_outbuf == 0)
		c->cfg.max_outbuf = CLI_DEF_OUTBUF;
	if (c->cfg.max_pending == 0)
		c->cfg.max_pending = CLI_DEF_PENDING;
	if (c->cfg.backoff_min_ms == 0)
		c->cfg.backoff_min_ms = CLI_DEF_BACKOFF_MIN;
	if (c->cfg.backoff_max_ms < c->cfg.backoff_min_ms)
		c->cfg.backoff_max_ms = c->cfg.backoff_min_ms > CLI_DEF_BACKOFF_MAX
		    ? c->cfg.backoff_min_ms : CLI_DEF_BACKOFF_MAX;
	if (c->cfg.hello_timeout_ms == 0)
		c->cfg.hello_timeout_ms = CLI_DEF_HELLO_MS;
	if (c->cfg.nserver_uids > IPC_UIDS_MAX)
		c->cfg.nserver_uids = IPC_UIDS_MAX;
	c->attempts = 0;
	c->next_id = 1;
	TAILQ_INIT(&c->pending);
	c->rng = prng_seed();
	c->path = strdup(cfg->path);
	c->timer = evtimer_new(base, client_timer_cb, c);
	if (c->path == NULL || c->timer == NULL) {
		client_destroy(c);
		return -ENOMEM;
	}
	c->cfg.path = c->path;
	*ret = c;
	return 0;
}

/* Start connecting. */
int
ipc_client_start(struct ipc_client *c)
{
	if (c->state != CLI_IDLE)
		return -EALREADY;
	c->state = CLI_BACKOFF;
	enter(c);
	client_connect(c);
	leave(c);
	return 0;
}

/* Free everything; pending callbacks get -ECANCELED. */
static void
client_destroy(struct ipc_client *c)
{
	c->doomed = true;
	c->busy++;		/* callbacks below must not re-enter free */
	fail_pending(c, -ECANCELED);
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	if (c->timer != NULL)
		event_free(c->timer);
	free(c->path);
	free(c);
}

/* Free the client, now or (inside a callback) on the way out of it. */
void
ipc_client_free(struct ipc_client *c)
{
	if (c == NULL || c->doomed)
		return;
	if (c->busy > 0) {
		c->doomed = true;
		return;
	}
	client_destroy(c);
}

/* Whether the server has said HELLO_OK. */
bool
ipc_client_connected(const struct ipc_client *c)
{
	return c->state == CLI_READY && !c->doomed;
}

/* Requests waiting for an answer. */
unsigned
ipc_client_npending(const struct ipc_client *c)
{
	return c->npending;
}

/* A pending request's deadline passed. */
static void
pend_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pend *p = arg;
	struct ipc_client *c = p->c;

	(void)fd;
	(void)what;
	enter(c);
	pend_finish(p, -ETIMEDOUT, NULL);
	leave(c);
}

/* Send a request; cb gets the reply, or -ETIMEDOUT after timeout_ms. */
int
ipc_client_request(struct ipc_client *c, struct ipc_msg *req,
    unsigned timeout_ms, ipc_reply_fn cb, void *arg, uint32_t *ret_id)
{
	struct evbuffer *out;
	struct pend *p;
	uint8_t *buf;
	size_t len;
	int rc;

	if (!ipc_type_is_request(req->type) || timeout_ms == 0)
		return -EINVAL;
	if (!ipc_client_connected(c))
		return -ENOTCONN;
	if (c->npending >= c->cfg.max_pending)
		return -EBUSY;
	if (c->next_id == 0)
		c->next_id = 1;
	req->id = c->next_id;
	req->deadline_ms = timeout_ms;
	if ((rc = ipc_msg_encode(req, c->cfg.max_frame, &buf, &len)) < 0)
		return rc;
	out = bufferevent_get_output(c->bev);
	if (evbuffer_get_length(out) + len > c->cfg.max_outbuf) {
		free(buf);
		return -ENOBUFS;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->timer = evtimer_new(c->base, pend_timeout_cb, p)) == NULL ||
	    evbuffer_add(out, buf, len) != 0) {
		if (p != NULL && p->timer != NULL)
			event_free(p->timer);
		free(p);
		free(buf);
		return -ENOMEM;
	}
	free(buf);
	c->next_id++;
	p->c = c;
	p->id = req->id;
	p->cb = cb;
	p->arg = arg;
	TAILQ_INSERT_TAIL(&c->pending, p, link);
	c->npending++;
	timer_in(p->timer, timeout_ms);
	if (ret_id != NULL)
		*ret_id = req->id;
	return 0;
}

/* Drop the connection and reconnect after the backoff. */
void
ipc_client_reset(struct ipc_client *c)
{
	if (c->doomed || (c->state != CLI_READY && c->state != CLI_HELLO))
		return;
	enter(c);
	client_disconnect(c, -ECONNRESET);
	leave(c);
}

/* Forget a pending request without calling its callback. */
int
ipc_client_cancel(struct ipc_client *c, uint32_t id)
{
	struct pend *p;

	TAILQ_FOREACH(p, &c->pending, link)
		if (p->id == id) {
			p->cb = NULL;
			pend_finish(p, -ECANCELED, NULL);
			return 0;
		}
	return -ENOENT;
}
