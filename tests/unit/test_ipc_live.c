/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ipc server + client on a real Unix socket in one event loop: replies,
 * pushes, local deadlines, answers that arrive after the peer left, the
 * slow-subscriber cap, reconnection, and the client's server-uid check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "common/fault.h"

#include "common/util.h"
#include "ipc/ipc.h"
#include "tests/unit/test.h"

struct world {
	struct event_base	*base;
	struct event		*tick;
	struct ipc_server	*srv;
	struct ipc_client	*cli;
	char			 path[108];
	/* client side */
	int			 connected, disconnected, pushes, replies;
	int			 last_err;
	enum ipc_type		 last_type;
	enum ipc_type		 push_types[8];
	/* server side */
	struct ipc_req		*held;
	int			 nheld, nsubs;
	uint32_t		 held_remaining;
	int			 cancelled, closed;
	struct ipc_conn		*sub;
};

static struct world w;

/* Wake the loop regularly so run_until can look at its condition. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* Run the loop until *flag >= want, for at most 5 seconds. */
static bool
run_until(const int *flag, int want)
{
	uint64_t end = monotonic_ms() + 5000;

	while (*flag < want && monotonic_ms() < end)
		event_base_loop(w.base, EVLOOP_ONCE);
	return *flag >= want;
}

/* Count HELLO_OK from the server. */
static void
on_connected(struct ipc_client *c, void *arg)
{
	(void)c;
	(void)arg;
	w.connected++;
}

/* Count lost connections. */
static void
on_disconnected(struct ipc_client *c, int err, void *arg)
{
	(void)c;
	(void)arg;
	(void)err;
	w.disconnected++;
}

/* Record the types of pushed frames. */
static void
on_push(struct ipc_client *c, const struct ipc_msg *m, void *arg)
{
	(void)c;
	(void)arg;
	if (w.pushes < 8)
		w.push_types[w.pushes] = m->type;
	w.pushes++;
}

/* Record the outcome of the last request. */
static void
on_reply(struct ipc_client *c, int err, const struct ipc_msg *reply,
    void *arg)
{
	(void)c;
	(void)arg;
	w.last_err = err;
	w.last_type = reply != NULL ? reply->type : IPC_NONE;
	w.replies++;
}

/* Answer req with NS_RESULT: found (a resolved claim) or not. */
static int
answer(struct ipc_req *req, bool found)
{
	struct ipc_msg r;

	memset(&r, 0, sizeof(r));
	r.type = IPC_NS_RESULT;
	if (found) {
		r.u.ns_result.found = true;
		r.u.ns_result.resolved = "{\"claimName\":\"c\"}";
	}
	return ipc_req_reply(req, &r);
}

/* NS_LOOKUP: "now" answers at once; anything else is held for later. */
static void
h_lookup(struct ipc_req *req, const struct ipc_msg *m, void *arg)
{
	(void)arg;
	if (strcmp(m->u.ns_lookup.ns, "now") == 0) {
		(void)answer(req, true);
		return;
	}
	w.held = req;
	w.nheld++;
	w.held_remaining = ipc_req_remaining_ms(req);
}

/* SUBSCRIBE: snapshot begin, one change, snapshot end. */
static void
h_subscribe(struct ipc_req *req, const struct ipc_msg *m, void *arg)
{
	struct ipc_conn *conn = ipc_req_conn(req);
	struct ipc_msg r;

	(void)arg;
	(void)m;
	memset(&r, 0, sizeof(r));
	r.type = IPC_SNAPSHOT_BEGIN;
	r.u.snapshot.full = true;
	(void)ipc_req_reply(req, &r);
	memset(&r, 0, sizeof(r));
	r.type = IPC_CHANGE;
	r.u.change.topic = IPC_TOPIC_NAMESPACES;
	strcpy(r.u.change.kind, "Namespace");
	strcpy(r.u.change.ns, "a");
	strcpy(r.u.change.name, "a");
	(void)ipc_conn_send(conn, &r);
	memset(&r, 0, sizeof(r));
	r.type = IPC_SNAPSHOT_END;
	(void)ipc_conn_send(conn, &r);
	w.sub = conn;
	w.nsubs++;
}

/* Count requests whose peer left first. */
static void
on_cancel(struct ipc_req *req, void *arg)
{
	(void)req;
	(void)arg;
	w.cancelled++;
}

/* Count closed peers; forget a closed subscriber. */
static void
on_close(struct ipc_conn *conn, void *arg)
{
	(void)arg;
	if (conn == w.sub)
		w.sub = NULL;
	w.closed++;
}

/* Start a server (outbuf cap) and a started client. */
static void
setup(size_t max_outbuf)
{
	struct ipc_server_config sc;
	struct ipc_client_config cc;
	struct timeval tv = { 0, 20000 };

	memset(&w, 0, sizeof(w));
	snprintf(w.path, sizeof(w.path), "%s/ipc-live-%d.sock",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	w.base = event_base_new();
	w.tick = event_new(w.base, -1, EV_PERSIST, tick_cb, NULL);
	event_add(w.tick, &tv);
	memset(&sc, 0, sizeof(sc));
	sc.path = w.path;
	sc.listen_fd = -1;
	sc.role = IPC_ROLE_SYNC;
	sc.allowed_types = IPC_BIT(IPC_PING) | IPC_BIT(IPC_NS_LOOKUP) |
	    IPC_BIT(IPC_SUBSCRIBE);
	sc.max_outbuf = max_outbuf;
	sc.on_close = on_close;
	if (ipc_server_new(w.base, &sc, &w.srv) < 0)
		return;
	ipc_server_handle(w.srv, IPC_NS_LOOKUP, h_lookup, NULL);
	ipc_server_handle(w.srv, IPC_SUBSCRIBE, h_subscribe, NULL);
	memset(&cc, 0, sizeof(cc));
	cc.path = w.path;
	cc.role = IPC_ROLE_ADMIT;
	cc.server_uids[0] = geteuid();
	cc.nserver_uids = 1;
	cc.backoff_min_ms = 10;
	cc.backoff_max_ms = 40;
	cc.on_connected = on_connected;
	cc.on_disconnected = on_disconnected;
	cc.on_push = on_push;
	if (ipc_client_new(w.base, &cc, &w.cli) == 0)
		ipc_client_start(w.cli);
}

/* Free what setup() made. */
static void
teardown(void)
{
	ipc_client_free(w.cli);
	ipc_server_free(w.srv);
	event_free(w.tick);
	event_base_free(w.base);
}

/* Send a request of type t (NS_LOOKUP of ns when given). */
static int
send_req(enum ipc_type t, const char *ns, unsigned timeout_ms)
{
	struct ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = t;
	if (ns != NULL)
		snprintf(m.u.ns_lookup.ns, sizeof(m.u.ns_lookup.ns), "%s", ns);
	if (t == IPC_SUBSCRIBE)
		m.u.subscribe.topics = IPC_TOPIC_NAMESPACES;
	return ipc_client_request(w.cli, &m, timeout_ms, on_reply, NULL, NULL);
}

/*
 * Set up, connect, and send a lookup (deadline timeout_ms) that the server
 * holds in w.held; false if any step fails.
 */
static bool
setup_held(unsigned timeout_ms)
{
	setup(0);
	return run_until(&w.connected, 1) &&
	    send_req(IPC_NS_LOOKUP, "later", timeout_ms) == 0 &&
	    run_until(&w.nheld, 1);
}

/* Whether a PING is answered with PONG as the replies-th reply. */
static bool
pong(int replies)
{
	return send_req(IPC_PING, NULL, 2000) == 0 &&
	    run_until(&w.replies, replies) && w.last_type == IPC_PONG;
}

TEST(reply_and_push)
{
	setup(0);
	REQUIRE(w.srv != NULL && w.cli != NULL);
	REQUIRE(run_until(&w.connected, 1));
	CHECK(ipc_client_connected(w.cli));
	CHECK_INT(send_req(IPC_NS_LOOKUP, "now", 2000), 0);
	REQUIRE(run_until(&w.replies, 1));
	CHECK_INT(w.last_err, 0);
	CHECK_INT(w.last_type, IPC_NS_RESULT);
	CHECK_INT(send_req(IPC_SUBSCRIBE, NULL, 2000), 0);
	REQUIRE(run_until(&w.pushes, 2));
	CHECK_INT(w.last_type, IPC_SNAPSHOT_BEGIN);
	CHECK_INT(w.push_types[0], IPC_CHANGE);
	CHECK_INT(w.push_types[1], IPC_SNAPSHOT_END);
	CHECK(pong(3));
	CHECK_INT(ipc_client_npending(w.cli), 0);
	teardown();
}

TEST(deadline_expires_locally_and_late_reply_is_dropped)
{
	REQUIRE(setup_held(50));
	REQUIRE(run_until(&w.replies, 1));
	CHECK_INT(w.last_err, -ETIMEDOUT);
	CHECK_INT(w.last_type, IPC_NONE);
	REQUIRE(w.held != NULL);
	/* the server was told the deadline */
	CHECK(ipc_req_deadline(w.held) != 0);
	CHECK(w.held_remaining <= 50);
	/* the late answer reaches the client, which ignores it */
	CHECK_INT(answer(w.held, false), 0);
	w.held = NULL;
	CHECK(pong(2));
	CHECK_INT(w.replies, 2);
	CHECK_INT(w.disconnected, 0);
	teardown();
}

TEST(answer_after_peer_left)
{
	REQUIRE(setup_held(5000));
	ipc_req_on_cancel(w.held, on_cancel, NULL);
	CHECK(ipc_req_alive(w.held));
	ipc_client_free(w.cli);		/* pending request gets -ECANCELED */
	w.cli = NULL;
	CHECK_INT(w.replies, 1);
	CHECK_INT(w.last_err, -ECANCELED);
	REQUIRE(run_until(&w.cancelled, 1));
	CHECK(!ipc_req_alive(w.held));
	CHECK(ipc_req_conn(w.held) == NULL);
	CHECK_INT(answer(w.held, false), -ENOTCONN);
	CHECK_INT(w.closed, 1);
	CHECK_INT(ipc_server_nconns(w.srv), 0);
	teardown();
}

TEST(reconnects_after_server_restart)
{
	struct ipc_server_config sc;

	REQUIRE(setup_held(5000));
	ipc_req_on_cancel(w.held, on_cancel, NULL);
	ipc_server_free(w.srv);		/* the held request is cancelled */
	CHECK_INT(w.cancelled, 1);
	CHECK_INT(ipc_req_error(w.held, EIO, "gone"), -ENOTCONN);
	REQUIRE(run_until(&w.disconnected, 1));
	CHECK_INT(w.last_err, -ECONNRESET);	/* pending failed */
	CHECK(!ipc_client_connected(w.cli));
	CHECK_INT(send_req(IPC_PING, NULL, 100), -ENOTCONN);
	memset(&sc, 0, sizeof(sc));
	sc.path = w.path;
	sc.listen_fd = -1;
	sc.role = IPC_ROLE_SYNC;
	sc.allowed_types = IPC_BIT(IPC_PING);
	REQUIRE(ipc_server_new(w.base, &sc, &w.srv) == 0);
	REQUIRE(run_until(&w.connected, 2));
	CHECK(pong(2));
	teardown();
}

/* Connect a raw socket that says HELLO and SUBSCRIBE, then never reads. */
static int
raw_subscriber(void)
{
	struct sockaddr_un sun;
	struct ipc_msg m;
	uint8_t *buf;
	size_t len;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, w.path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.type = IPC_HELLO;
	m.u.hello.version = IPC_PROTO_VERSION;
	m.u.hello.role = IPC_ROLE_QUOTA;
	ipc_msg_encode(&m, 0, &buf, &len);
	(void)!write(fd, buf, len);
	free(buf);
	memset(&m, 0, sizeof(m));
	m.type = IPC_SUBSCRIBE;
	m.id = 1;
	m.u.subscribe.topics = IPC_TOPIC_ALL;
	ipc_msg_encode(&m, 0, &buf, &len);
	(void)!write(fd, buf, len);
	free(buf);
	return fd;
}

TEST(slow_subscriber_is_dropped)
{
	static char big[4000];
	struct ipc_msg ch;
	int fd, sent = 0, rc = 0;

	setup(64 * 1024);
	REQUIRE(run_until(&w.connected, 1));
	fd = raw_subscriber();
	REQUIRE(fd >= 0);
	REQUIRE(run_until(&w.nsubs, 1));
	memset(big, 'x', sizeof(big) - 1);
	memset(&ch, 0, sizeof(ch));
	ch.type = IPC_CHANGE;
	ch.u.change.topic = IPC_TOPIC_NAMESPACES;
	strcpy(ch.u.change.kind, "Namespace");
	ch.u.change.resolved = big;
	/* push across loop turns so the socket buffer fills first */
	while (sent < 100000 && w.sub != NULL &&
	    (rc = ipc_conn_send(w.sub, &ch)) == 0) {
		sent++;
		if (sent % 4 == 0)
			event_base_loop(w.base, EVLOOP_NONBLOCK);
	}
	CHECK_INT(rc, -ENOBUFS);
	CHECK(sent > 20);	/* the kernel took some before the cap hit */
	REQUIRE(run_until(&w.closed, 1));
	CHECK(w.sub == NULL);
	/* the well-behaved client is still answered */
	CHECK_INT(send_req(IPC_PING, NULL, 2000), 0);
	REQUIRE(run_until(&w.replies, 1));
	CHECK_INT(w.last_type, IPC_PONG);
	close(fd);
	teardown();
}

TEST(client_checks_server_uid)
{
	struct ipc_call *s = NULL;
	uid_t other = geteuid() + 1;
	uid_t me = geteuid();

	setup(0);
	REQUIRE(w.srv != NULL);
	CHECK_INT(ipc_call_open(w.path, IPC_ROLE_CTL, &other, 1, 1000, &s),
	    -EPERM);
	CHECK(s == NULL);
	/* the blocking client with the right uid needs the loop to answer */
	CHECK_INT(ipc_call_open(w.path, IPC_ROLE_CTL, &me, 1, 100, &s),
	    -ETIMEDOUT);
	teardown();
}

TEST(stale_socket_is_replaced_live_one_is_not)
{
	struct ipc_server_config sc;
	struct ipc_server *second = NULL;

	setup(0);
	REQUIRE(w.srv != NULL);
	memset(&sc, 0, sizeof(sc));
	sc.path = w.path;
	sc.listen_fd = -1;
	sc.role = IPC_ROLE_SYNC;
	CHECK_INT(ipc_server_new(w.base, &sc, &second), -EADDRINUSE);
	teardown();
	/* a leftover socket file nobody listens on */
	{
		struct sockaddr_un sun;
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		strcpy(sun.sun_path, w.path);
		REQUIRE(bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
		close(fd);
	}
	w.base = event_base_new();
	REQUIRE(ipc_server_new(w.base, &sc, &second) == 0);
	CHECK(access(w.path, F_OK) == 0);
	ipc_server_free(second);
	CHECK(access(w.path, F_OK) != 0);
	event_base_free(w.base);
}

/* Connect a raw socket to the test path; -1 on failure. */
static int
raw_connect(void)
{
	struct sockaddr_un sun;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, w.path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Make fd non-blocking. */
static void
fcntl_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Read one frame from a raw socket while running the loop (bounded). */
static int
raw_read_frame(int fd, struct ipc_msg *ret)
{
	struct evbuffer *in = evbuffer_new();
	uint64_t end = monotonic_ms() + 5000;
	int rc = 0;

	while (rc == 0 && monotonic_ms() < end) {
		event_base_loop(w.base, EVLOOP_NONBLOCK);
		if (evbuffer_read(in, fd, 4096) == 0)
			break;
		rc = ipc_frame_read(in, 0, ret, NULL);
		if (rc == 0)
			event_base_loop(w.base, EVLOOP_ONCE);
	}
	evbuffer_free(in);
	return rc;
}

TEST(max_connections)
{
	struct ipc_server_config sc;
	struct ipc_msg m;
	int fd;

	memset(&w, 0, sizeof(w));
	snprintf(w.path, sizeof(w.path), "/tmp/ipc-max-%d.sock",
	    (int)getpid());
	w.base = event_base_new();
	memset(&sc, 0, sizeof(sc));
	sc.path = w.path;
	sc.listen_fd = -1;
	sc.role = IPC_ROLE_SYNC;
	sc.max_conns = 1;
	REQUIRE(ipc_server_new(w.base, &sc, &w.srv) == 0);
	fd = raw_connect();
	REQUIRE(fd >= 0);
	while (ipc_server_nconns(w.srv) < 1 &&
	    event_base_loop(w.base, EVLOOP_ONCE) == 0)
		;
	{
		int fd2 = raw_connect();

		REQUIRE(fd2 >= 0);
		fcntl_nonblock(fd2);
		REQUIRE(raw_read_frame(fd2, &m) == 1);
		CHECK_INT(m.type, IPC_ERROR);
		CHECK_INT(m.u.error.code, EBUSY);
		ipc_msg_clear(&m);
		close(fd2);
	}
	CHECK_INT(ipc_server_nconns(w.srv), 1);
	close(fd);
	ipc_server_free(w.srv);
	event_base_free(w.base);
}

TEST(passed_listen_fd_and_fault_arm)
{
	struct ipc_server_config sc;
	struct sockaddr_un sun;
	struct ipc_client_config cc;
	int lfd;

	memset(&w, 0, sizeof(w));
	snprintf(w.path, sizeof(w.path), "/tmp/ipc-fd-%d.sock", (int)getpid());
	unlink(w.path);
	w.base = event_base_new();
	w.tick = event_new(w.base, -1, EV_PERSIST, tick_cb, NULL);
	{
		struct timeval tv = { 0, 20000 };

		event_add(w.tick, &tv);
	}
	/*
	 * a bound, listening socket as a launcher passes it; blocking, as
	 * launchers other than systemd may leave it
	 */
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, w.path);
	REQUIRE(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) == 0);
	REQUIRE(listen(lfd, 8) == 0);
	memset(&sc, 0, sizeof(sc));
	sc.listen_fd = lfd;
	sc.role = IPC_ROLE_QUOTA;
	sc.allowed_types = IPC_BIT(IPC_FAULT_ARM);
	REQUIRE(ipc_server_new(w.base, &sc, &w.srv) == 0);
	CHECK((fcntl(lfd, F_GETFL) & O_NONBLOCK) != 0);
	CHECK((fcntl(lfd, F_GETFD) & FD_CLOEXEC) != 0);
	memset(&cc, 0, sizeof(cc));
	cc.path = w.path;
	cc.role = IPC_ROLE_CTL;
	cc.on_connected = on_connected;
	REQUIRE(ipc_client_new(w.base, &cc, &w.cli) == 0);
	ipc_client_start(w.cli);
	REQUIRE(run_until(&w.connected, 1));
	{
		struct ipc_msg m;

		memset(&m, 0, sizeof(m));
		m.type = IPC_FAULT_ARM;
		strcpy(m.u.fault_arm.spec, "ipc.test.point=error:ENOENT");
		CHECK_INT(ipc_client_request(w.cli, &m, 2000, on_reply, NULL,
		    NULL), 0);
		REQUIRE(run_until(&w.replies, 1));
		CHECK_INT(w.last_err, 0);
		CHECK_INT(w.last_type, IPC_OK);
		CHECK_INT(fault_hit("ipc.test.point"), -ENOENT);
		strcpy(m.u.fault_arm.spec, "bad spec with spaces");
		CHECK_INT(ipc_client_request(w.cli, &m, 2000, on_reply, NULL,
		    NULL), 0);
		REQUIRE(run_until(&w.replies, 2));
		CHECK_INT(w.last_err, -EINVAL);
		CHECK_INT(w.last_type, IPC_ERROR);
		fault_clear();
	}
	teardown();
	unlink(w.path);
}

TEST(blocking_call_against_a_server_process)
{
	struct ipc_msg req, rep;
	pid_t pid;
	int rc;

	memset(&w, 0, sizeof(w));
	snprintf(w.path, sizeof(w.path), "/tmp/ipc-call-%d.sock",
	    (int)getpid());
	unlink(w.path);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setup(0);	/* a server (and a client we ignore) */
		event_base_loopexit(w.base, &(struct timeval){ 10, 0 });
		event_base_dispatch(w.base);
		_exit(0);
	}
	snprintf(w.path, sizeof(w.path), "%s/ipc-live-%d.sock",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)pid);
	memset(&req, 0, sizeof(req));
	req.type = IPC_NS_LOOKUP;
	strcpy(req.u.ns_lookup.ns, "now");
	/* the child may not be listening yet: bounded retry */
	for (int i = 0; i < 200; i++) {
		rc = ipc_call(w.path, IPC_ROLE_CTL, &req, 2000, &rep);
		if (rc != -ENOENT && rc != -ECONNREFUSED)
			break;
		usleep(10000);
	}
	CHECK_INT(rc, 0);
	if (rc == 0) {
		CHECK_INT(rep.type, IPC_NS_RESULT);
		CHECK(rep.u.ns_result.found);
		CHECK_STR(rep.u.ns_result.resolved, "{\"claimName\":\"c\"}");
		ipc_msg_clear(&rep);
	}
	/* a type the socket does not allow: ERROR, then the peer is closed */
	memset(&req, 0, sizeof(req));
	req.type = IPC_STATUS;
	rc = ipc_call(w.path, IPC_ROLE_CTL, &req, 2000, &rep);
	CHECK_INT(rc, 0);
	CHECK_INT(rep.type, IPC_ERROR);
	CHECK_INT(rep.u.error.code, EPERM);
	ipc_msg_clear(&rep);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	unlink(w.path);		/* the killed child could not */
}
