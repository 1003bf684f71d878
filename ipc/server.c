/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The IPC server on libevent: accept, check the peer uid, HELLO, dispatch
 * requests through a handler table, answer now or later, drop bad peers.
 *
 * A peer is never freed from inside a call the daemon made (a send that hit
 * the output cap, a close): it is marked dead and freed by a deferred event,
 * where on_close and the cancel callbacks of its pending requests run. So a
 * daemon can walk its own list of subscribers and send to each safely.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "ipc/ipc.h"

#define SRV_DEF_OUTBUF		(4u * 1024 * 1024)
#define SRV_DEF_CONNS		64
#define SRV_DEF_PENDING		256
#define SRV_DEF_HELLO_MS	5000

struct ipc_req {
	LIST_ENTRY(ipc_req)	 link;
	struct ipc_conn		*conn;		/* NULL once the peer is gone */
	enum ipc_type		 type;
	uint32_t		 id;
	uint64_t		 deadline;	/* monotonic ms, 0 = none */
	void			(*cancel)(struct ipc_req *, void *);
	void			*cancel_arg;
};

struct ipc_conn {
	LIST_ENTRY(ipc_conn)	 link;
	struct ipc_server	*srv;
	struct bufferevent	*bev;
	struct event		*hello_timer;
	struct ipc_cred		 cred;
	enum ipc_role		 role;
	bool			 hello_done;
	bool			 dead;
	void			*data;
	LIST_HEAD(, ipc_req)	 reqs;
	unsigned		 npending;
};

struct handler {
	ipc_handler_fn		 fn;
	void			*arg;
};

struct ipc_server {
	struct event_base	*base;
	struct ipc_server_config cfg;
	char			*path;
	bool			 bound;		/* we created path */
	struct evconnlistener	*lev;
	struct event		*reaper;
	struct handler		 handlers[IPC_TYPE_COUNT];
	LIST_HEAD(, ipc_conn)	 conns;
	unsigned		 nconns;
};

static void conn_send_error(struct ipc_conn *c, uint32_t id, int code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The socket path for log lines. */
static const char *
srv_name(const struct ipc_server *srv)
{
	return srv->path != NULL ? srv->path : "(passed fd)";
}

/* Mark a peer dead with one log line; it is freed by the reaper. */
static void
conn_drop(struct ipc_conn *c, enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
conn_drop(struct ipc_conn *c, enum log_level lvl, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	if (c->dead)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (lvl < LOG_LVL_DEBUG || log_debug_enabled())
		log_msg(lvl, "ipc peer dropped socket=%s pid=%ld uid=%lu role=%s "
	    "reason=%s", log_q(srv_name(c->srv)), (long)c->cred.pid,
	    (unsigned long)c->cred.uid,
	    c->hello_done ? ipc_role_name(c->role) : "-", log_q(why));
	c->dead = true;
	bufferevent_disable(c->bev, EV_READ);
	event_active(c->srv->reaper, EV_TIMEOUT, 0);
}

/* Best effort: put what is queued (e.g. a final ERROR) on the wire. */
static void
conn_flush(struct ipc_conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	size_t len = evbuffer_get_length(out);
	const uint8_t *p;

	if (len > 65536)
		len = 65536;
	if (len == 0 || (p = evbuffer_pullup(out, (ev_ssize_t)len)) == NULL)
		return;
	(void)!send(bufferevent_getfd(c->bev), p, len,
	    MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Free one dead peer: flush what fits, cancel its requests, tell the daemon. */
static void
conn_free(struct ipc_conn *c)
{
	struct ipc_server *srv = c->srv;
	struct ipc_req *r;

	conn_flush(c);
	while ((r = LIST_FIRST(&c->reqs)) != NULL) {
		LIST_REMOVE(r, link);
		r->conn = NULL;
		if (r->cancel != NULL)
			r->cancel(r, r->cancel_arg);
	}
	if (c->hello_done && srv->cfg.on_close != NULL)
		srv->cfg.on_close(c, srv->cfg.arg);
	LIST_REMOVE(c, link);
	srv->nconns--;
	if (c->hello_timer != NULL)
		event_free(c->hello_timer);
	bufferevent_free(c->bev);
	free(c);
}

/* Deferred event: free every dead peer. */
static void
reaper_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_server *srv = arg;
	struct ipc_conn *c, *next;

	(void)fd;
	(void)what;
	for (c = LIST_FIRST(&srv->conns); c != NULL; c = next) {
		next = LIST_NEXT(c, link);
		if (c->dead)
			conn_free(c);
	}
}

/* Queue one frame to a peer, dropping it if its output is over the cap. */
static int
conn_send(struct ipc_conn *c, const struct ipc_msg *msg)
{
	struct evbuffer *out;
	uint8_t *buf;
	size_t len;
	int rc;

	if (c->dead)
		return -ENOTCONN;
	if ((rc = FAULT("ipc.server.send")) < 0) {
		conn_drop(c, LOG_LVL_WARN, "send failed (fault): %s",
		    strerror(-rc));
		return rc;
	}
	if ((rc = ipc_msg_encode(msg, c->srv->cfg.max_frame, &buf, &len)) < 0)
		return rc;
	out = bufferevent_get_output(c->bev);
	if (evbuffer_get_length(out) + len > c->srv->cfg.max_outbuf) {
		free(buf);
		conn_drop(c, LOG_LVL_WARN, "output buffer over %zu bytes "
		    "(slow peer)", c->srv->cfg.max_outbuf);
		return -ENOBUFS;
	}
	rc = evbuffer_add(out, buf, len) == 0 ? 0 : -ENOMEM;
	free(buf);
	return rc;
}

/* Queue an ERROR frame to a peer (best effort). */
static void
conn_send_error(struct ipc_conn *c, uint32_t id, int code, const char *fmt,
    ...)
{
	struct ipc_msg m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.type = IPC_ERROR;
	m.id = id;
	m.u.error.code = (uint32_t)(code < 0 ? -code : code);
	va_start(ap, fmt);
	vsnprintf(m.u.error.message, sizeof(m.u.error.message), fmt, ap);
	va_end(ap);
	(void)conn_send(c, &m);
}

/* Detach a request from its peer's pending list. */
static void
req_detach(struct ipc_req *r)
{
	if (r->conn != NULL) {
		LIST_REMOVE(r, link);
		r->conn->npending--;
		r->conn = NULL;
	}
}

/* Answer a request and free it; an unencodable reply becomes an ERROR. */
int
ipc_req_reply(struct ipc_req *req, struct ipc_msg *msg)
{
	struct ipc_conn *c = req->conn;
	uint32_t id = req->id;
	int rc;

	req_detach(req);
	free(req);
	if (c == NULL || c->dead)
		return -ENOTCONN;
	msg->id = id;
	rc = conn_send(c, msg);
	if (rc == -EINVAL || rc == -EMSGSIZE)
		conn_send_error(c, id, -rc, "reply %s could not be encoded",
		    ipc_type_name(msg->type));
	return rc;
}

/* Answer a request with ERROR and free it. */
int
ipc_req_error(struct ipc_req *req, int code, const char *fmt, ...)
{
	struct ipc_msg m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.type = IPC_ERROR;
	m.u.error.code = (uint32_t)(code < 0 ? -code : code);
	va_start(ap, fmt);
	vsnprintf(m.u.error.message, sizeof(m.u.error.message), fmt, ap);
	va_end(ap);
	return ipc_req_reply(req, &m);
}

/* The request's monotonic deadline in ms, 0 for none. */
uint64_t
ipc_req_deadline(const struct ipc_req *req)
{
	return req->deadline;
}

/* Milliseconds left for the request, UINT32_MAX without a deadline. */
uint32_t
ipc_req_remaining_ms(const struct ipc_req *req)
{
	uint64_t now;

	if (req->deadline == 0)
		return UINT32_MAX;
	now = monotonic_ms();
	return now >= req->deadline ? 0 : (uint32_t)(req->deadline - now);
}

/* Whether the requesting peer is still there. */
bool
ipc_req_alive(const struct ipc_req *req)
{
	return req->conn != NULL && !req->conn->dead;
}

/* The requesting peer, or NULL once gone. */
struct ipc_conn *
ipc_req_conn(const struct ipc_req *req)
{
	return ipc_req_alive(req) ? req->conn : NULL;
}

/* Set the callback run if the peer leaves before the answer. */
void
ipc_req_on_cancel(struct ipc_req *req, void (*fn)(struct ipc_req *, void *),
    void *arg)
{
	req->cancel = fn;
	req->cancel_arg = arg;
}

/* Send a push to a peer. */
int
ipc_conn_send(struct ipc_conn *conn, const struct ipc_msg *msg)
{
	return conn_send(conn, msg);
}

/* Drop a peer on the daemon's request. */
void
ipc_conn_close(struct ipc_conn *conn, const char *reason)
{
	conn_drop(conn, LOG_LVL_NOTICE, "%s", reason);
}

/* Attach daemon data to a peer. */
void
ipc_conn_set_data(struct ipc_conn *conn, void *data)
{
	conn->data = data;
}

/* The daemon data of a peer. */
void *
ipc_conn_data(const struct ipc_conn *conn)
{
	return conn->data;
}

/* The peer's SO_PEERCRED credentials. */
const struct ipc_cred *
ipc_conn_cred(const struct ipc_conn *conn)
{
	return &conn->cred;
}

/* The role the peer announced in HELLO. */
enum ipc_role
ipc_conn_role(const struct ipc_conn *conn)
{
	return conn->role;
}

/* Bytes waiting in the peer's output buffer. */
size_t
ipc_conn_outbuf(const struct ipc_conn *conn)
{
	return evbuffer_get_length(bufferevent_get_output(conn->bev));
}

/*
 * Whether uid may take role: always when no role is bound to uids, else
 * only when role's configured list holds uid.
 */
static bool
role_bound_ok(const struct ipc_server_config *cfg, enum ipc_role role,
    uid_t uid)
{
	bool bound = false;

	for (int r = 0; r < IPC_ROLE_COUNT; r++)
		bound |= cfg->nrole_uids[r] > 0;
	if (!bound)
		return true;
	if ((unsigned)role >= IPC_ROLE_COUNT)
		return false;
	for (size_t i = 0; i < cfg->nrole_uids[role]; i++)
		if (cfg->role_uids[role][i] == uid)
			return true;
	return false;
}

/* Handle the first frame: it must be an acceptable HELLO. */
static void
conn_hello(struct ipc_conn *c, const struct ipc_msg *m)
{
	struct ipc_server *srv = c->srv;
	struct ipc_msg ok;

	if (m->type != IPC_HELLO) {
		conn_send_error(c, 0, EPROTO, "HELLO expected");
		conn_drop(c, LOG_LVL_WARN, "%s before HELLO",
		    ipc_type_name(m->type));
		return;
	}
	if (m->u.hello.version != IPC_PROTO_VERSION) {
		conn_send_error(c, 0, EPROTONOSUPPORT,
		    "protocol version %u not supported (want %d)",
		    m->u.hello.version, IPC_PROTO_VERSION);
		conn_drop(c, LOG_LVL_WARN, "protocol version %u not supported",
		    m->u.hello.version);
		return;
	}
	if (srv->cfg.allowed_roles != 0 &&
	    (srv->cfg.allowed_roles & (1u << m->u.hello.role)) == 0) {
		conn_send_error(c, 0, EPERM, "role %s not allowed here",
		    ipc_role_name(m->u.hello.role));
		conn_drop(c, LOG_LVL_WARN, "role %s not allowed on this socket",
		    ipc_role_name(m->u.hello.role));
		return;
	}
	if (!role_bound_ok(&srv->cfg, m->u.hello.role, c->cred.uid)) {
		conn_send_error(c, 0, EPERM, "uid %lu may not take role %s "
		    "here", (unsigned long)c->cred.uid,
		    ipc_role_name(m->u.hello.role));
		conn_drop(c, LOG_LVL_WARN, "uid %lu is not configured for "
		    "role %s", (unsigned long)c->cred.uid,
		    ipc_role_name(m->u.hello.role));
		return;
	}
	c->role = m->u.hello.role;
	c->hello_done = true;
	event_del(c->hello_timer);
	memset(&ok, 0, sizeof(ok));
	ok.type = IPC_HELLO_OK;
	ok.u.hello.version = IPC_PROTO_VERSION;
	ok.u.hello.role = srv->cfg.role;
	(void)conn_send(c, &ok);
}

/* Built-in answers for PING and, in test builds, FAULT_ARM. */
static void
builtin_handler(struct ipc_req *req, const struct ipc_msg *m, void *arg)
{
	struct ipc_msg r;
	int rc;

	(void)arg;
	memset(&r, 0, sizeof(r));
	switch (m->type) {
	case IPC_PING:
		r.type = IPC_PONG;
		(void)ipc_req_reply(req, &r);
		return;
	case IPC_FAULT_ARM:
		if (!FAULTS_ENABLED) {
			(void)ipc_req_error(req, ENOTSUP, "not a test build");
			return;
		}
		if ((rc = fault_arm(m->u.fault_arm.spec)) < 0) {
			(void)ipc_req_error(req, -rc, "bad fault spec");
			return;
		}
		log_notice("ipc fault armed spec=%s", log_q(m->u.fault_arm.spec));
		r.type = IPC_OK;
		(void)ipc_req_reply(req, &r);
		return;
	default:
		(void)ipc_req_error(req, ENOTSUP, "%s has no handler",
		    ipc_type_name(m->type));
	}
}

/* Dispatch one request after HELLO, enforcing the socket's allowlist. */
static void
conn_request(struct ipc_conn *c, const struct ipc_msg *m)
{
	struct ipc_server *srv = c->srv;
	struct handler *h;
	struct ipc_req *r;

	if (!ipc_type_is_request(m->type)) {
		conn_send_error(c, 0, EPROTO, "%s is not a request",
		    ipc_type_name(m->type));
		conn_drop(c, LOG_LVL_WARN, "unexpected %s from a client",
		    ipc_type_name(m->type));
		return;
	}
	if ((srv->cfg.allowed_types & IPC_BIT(m->type)) == 0) {
		conn_send_error(c, m->id, EPERM, "%s not allowed here",
		    ipc_type_name(m->type));
		conn_drop(c, LOG_LVL_WARN, "%s not allowed on this socket",
		    ipc_type_name(m->type));
		return;
	}
	if ((unsigned)c->role < IPC_ROLE_COUNT &&
	    srv->cfg.role_types[c->role] != 0 &&
	    (srv->cfg.role_types[c->role] & IPC_BIT(m->type)) == 0) {
		conn_send_error(c, m->id, EPERM, "%s not allowed for role %s",
		    ipc_type_name(m->type), ipc_role_name(c->role));
		conn_drop(c, LOG_LVL_WARN, "%s not allowed for role %s",
		    ipc_type_name(m->type), ipc_role_name(c->role));
		return;
	}
	if (c->npending >= srv->cfg.max_pending) {
		conn_drop(c, LOG_LVL_WARN, "more than %u pending requests",
		    srv->cfg.max_pending);
		return;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		conn_send_error(c, m->id, ENOMEM, "out of memory");
		return;
	}
	r->conn = c;
	r->type = m->type;
	r->id = m->id;
	if (m->deadline_ms != 0)
		r->deadline = monotonic_ms() + m->deadline_ms;
	LIST_INSERT_HEAD(&c->reqs, r, link);
	c->npending++;
	h = &srv->handlers[m->type];
	if (h->fn != NULL)
		h->fn(r, m, h->arg);
	else
		builtin_handler(r, m, NULL);
}

/* Input from a peer: take each whole frame; a bad one drops the peer. */
static void
conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct ipc_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct ipc_msg m;
	const char *why = NULL;
	int rc;

	while (!c->dead) {
		rc = ipc_frame_read(in, c->srv->cfg.max_frame, &m, &why);
		if (rc == 0)
			break;
		if (rc < 0) {
			conn_drop(c, LOG_LVL_WARN, "bad frame: %s (%s)",
			    why != NULL ? why : "?", strerror(-rc));
			return;
		}
		if (!c->hello_done)
			conn_hello(c, &m);
		else if (m.type == IPC_HELLO)
			conn_drop(c, LOG_LVL_WARN, "second HELLO");
		else
			conn_request(c, &m);
		ipc_msg_clear(&m);
	}
}

/* EOF or error on a peer's socket. */
static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ipc_conn *c = arg;
	size_t left = evbuffer_get_length(bufferevent_get_input(bev));

	if (what & BEV_EVENT_EOF) {
		if (left > 0)
			conn_drop(c, LOG_LVL_WARN, "truncated frame: EOF with "
			    "%zu bytes of a frame", left);
		else
			conn_drop(c, LOG_LVL_DEBUG, "disconnected");
	} else if (what & BEV_EVENT_ERROR) {
		conn_drop(c, LOG_LVL_WARN, "socket error: %s",
		    strerror(EVUTIL_SOCKET_ERROR()));
	}
}

/* A peer did not say HELLO in time. */
static void
conn_hello_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_conn *c = arg;

	(void)fd;
	(void)what;
	conn_drop(c, LOG_LVL_WARN, "no HELLO within %u ms",
	    c->srv->cfg.hello_timeout_ms);
}

/* Refuse a connection before it gets a peer record: ERROR, then close. */
static void
refuse(struct ipc_server *srv, int fd, const struct ipc_cred *cr, int code,
    const char *why)
{
	struct ipc_msg m;
	uint8_t *buf;
	size_t len;

	log_warn("ipc peer refused socket=%s pid=%ld uid=%lu reason=%s",
	    log_q(srv_name(srv)), cr != NULL ? (long)cr->pid : -1L,
	    cr != NULL ? (unsigned long)cr->uid : 0UL, log_q(why));
	memset(&m, 0, sizeof(m));
	m.type = IPC_ERROR;
	m.u.error.code = (uint32_t)code;
	snprintf(m.u.error.message, sizeof(m.u.error.message), "%s", why);
	if (ipc_msg_encode(&m, 0, &buf, &len) == 0) {
		(void)!send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		free(buf);
	}
	close(fd);
}

/* Set up a peer record for an accepted connection. */
static int
conn_new(struct ipc_server *srv, int fd, const struct ipc_cred *cr)
{
	struct ipc_conn *c;
	struct timeval tv;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	c->srv = srv;
	c->cred = *cr;
	LIST_INIT(&c->reqs);
	c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->hello_timer = evtimer_new(srv->base, conn_hello_timeout_cb, c);
	if (c->bev == NULL || c->hello_timer == NULL) {
		if (c->hello_timer != NULL)
			event_free(c->hello_timer);
		if (c->bev != NULL)
			bufferevent_free(c->bev);	/* closes fd */
		else
			close(fd);
		free(c);
		return -ENOMEM;
	}
	bufferevent_setcb(c->bev, conn_read_cb, NULL, conn_event_cb, c);
	/* never hold more than one whole frame of input */
	bufferevent_setwatermark(c->bev, EV_READ, 0,
	    srv->cfg.max_frame + IPC_FRAME_HDR);
	bufferevent_enable(c->bev, EV_READ);
	tv.tv_sec = srv->cfg.hello_timeout_ms / 1000;
	tv.tv_usec = (srv->cfg.hello_timeout_ms % 1000) * 1000;
	evtimer_add(c->hello_timer, &tv);
	LIST_INSERT_HEAD(&srv->conns, c, link);
	srv->nconns++;
	log_debug("ipc peer connected socket=%s pid=%ld uid=%lu",
	    log_q(srv_name(srv)), (long)cr->pid, (unsigned long)cr->uid);
	return 0;
}

/* A new connection: check limits and the peer's uid. */
static void
accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct ipc_server *srv = arg;
	struct ipc_cred cr;
	int rc;

	(void)lev;
	(void)sa;
	(void)salen;
	if ((rc = ipc_peer_cred(fd, &cr)) < 0) {
		refuse(srv, fd, NULL, EPERM, "no peer credentials");
		return;
	}
	if (!ipc_uid_allowed(srv->cfg.uids, srv->cfg.nuids, cr.uid)) {
		refuse(srv, fd, &cr, EPERM, "uid not allowed");
		return;
	}
	if (srv->nconns >= srv->cfg.max_conns) {
		refuse(srv, fd, &cr, EBUSY, "too many connections");
		return;
	}
	if ((rc = conn_new(srv, fd, &cr)) < 0)
		log_err("ipc accept socket=%s: %s", log_q(srv_name(srv)),
		    strerror(-rc));
}

/* accept() failed (e.g. EMFILE): log it; libevent keeps listening. */
static void
accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct ipc_server *srv = arg;

	(void)lev;
	log_err("ipc accept socket=%s: %s", log_q(srv_name(srv)),
	    strerror(EVUTIL_SOCKET_ERROR()));
}

/* Remove a socket file nobody listens on; refuse to steal a live one. */
static int
unlink_stale(const char *path)
{
	struct sockaddr_un sun;
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Create, bind (mode 0660) and listen on a Unix socket path. */
static int
bind_path(const char *path, int *ret_fd)
{
	struct sockaddr_un sun;
	int fd, rc;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	if ((rc = unlink_stale(path)) < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	/* nobody can connect before listen(), so chmod in between is safe */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    chmod(path, 0660) < 0 || listen(fd, 64) < 0) {
		rc = -errno;
		close(fd);
		(void)unlink(path);
		return rc;
	}
	*ret_fd = fd;
	return 0;
}

/* Fill in the defaults of a server config. */
static void
srv_defaults(struct ipc_server_config *cfg)
{
	if (cfg->max_frame == 0 || cfg->max_frame > IPC_FRAME_MAX)
		cfg->max_frame = IPC_FRAME_MAX;
	if (cfg->max_outbuf == 0)
		cfg->max_outbuf = SRV_DEF_OUTBUF;
	if (cfg->max_conns == 0)
		cfg->max_conns = SRV_DEF_CONNS;
	if (cfg->max_pending == 0)
		cfg->max_pending = SRV_DEF_PENDING;
	if (cfg->hello_timeout_ms == 0)
		cfg->hello_timeout_ms = SRV_DEF_HELLO_MS;
	if (cfg->nuids > IPC_UIDS_MAX)
		cfg->nuids = IPC_UIDS_MAX;
}

/* Create a listening server on base. */
int
ipc_server_new(struct event_base *base, const struct ipc_server_config *cfg,
    struct ipc_server **ret)
{
	struct ipc_server *srv;
	int fd = -1, rc = -ENOMEM;

	if (ipc_role_name(cfg->role) == NULL ||
	    (cfg->path == NULL && cfg->listen_fd < 0))
		return -EINVAL;
	if ((srv = calloc(1, sizeof(*srv))) == NULL)
		return -ENOMEM;
	srv->base = base;
	srv->cfg = *cfg;
	srv_defaults(&srv->cfg);
	LIST_INIT(&srv->conns);
	if (cfg->path != NULL && (srv->path = strdup(cfg->path)) == NULL)
		goto fail;
	srv->cfg.path = srv->path;
	if ((srv->reaper = event_new(base, -1, 0, reaper_cb, srv)) == NULL)
		goto fail;
	if (cfg->listen_fd >= 0) {
		/* a launcher may pass a blocking socket: accept must not block */
		fd = cfg->listen_fd;
		if ((rc = fd_nonblock(fd)) < 0 || (rc = fd_cloexec(fd)) < 0)
			goto fail;
	} else {
		if ((rc = bind_path(cfg->path, &fd)) < 0)
			goto fail;
		srv->bound = true;
	}
	srv->lev = evconnlistener_new(base, accept_cb, srv,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (srv->lev == NULL) {
		rc = -ENOMEM;
		if (srv->bound)
			close(fd);
		goto fail;
	}
	evconnlistener_set_error_cb(srv->lev, accept_error_cb);
	*ret = srv;
	return 0;
fail:
	if (srv->bound)
		(void)unlink(srv->path);
	if (srv->reaper != NULL)
		event_free(srv->reaper);
	free(srv->path);
	free(srv);
	return rc;
}

/* Close every peer and the listener. */
void
ipc_server_free(struct ipc_server *srv)
{
	struct ipc_conn *c;

	if (srv == NULL)
		return;
	evconnlistener_free(srv->lev);
	while ((c = LIST_FIRST(&srv->conns)) != NULL) {
		c->dead = true;
		conn_free(c);
	}
	if (srv->bound)
		(void)unlink(srv->path);
	event_free(srv->reaper);
	free(srv->path);
	free(srv);
}

/* Register the handler for one request type. */
int
ipc_server_handle(struct ipc_server *srv, enum ipc_type type,
    ipc_handler_fn fn, void *arg)
{
	if (!ipc_type_is_request(type))
		return -EINVAL;
	srv->handlers[type].fn = fn;
	srv->handlers[type].arg = arg;
	return 0;
}

/* Number of connected peers (dead ones not yet reaped included). */
unsigned
ipc_server_nconns(const struct ipc_server *srv)
{
	return srv->nconns;
}
