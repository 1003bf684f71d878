/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/sdnotify.c: notify datagrams reach a socket the
 * test binds (path and abstract names), the watchdog variables, and
 * LISTEN_FDS with a real passed fd; and the common/daemon.c glue that
 * drives them from signals and the watchdog timer.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "tests/unit/test.h"

/* Bind a datagram socket at name ('@' = abstract); -1 on failure. */
static int
listen_dgram(const char *name)
{
	struct sockaddr_un sa;
	socklen_t len;
	size_t n = strlen(name);
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, name, n);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (name[0] == '@' ? 0 : 1));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Receive one datagram within a bounded wait; "" if none arrived. */
static const char *
recv_msg(int fd)
{
	static char buf[4096];
	struct pollfd p = { fd, POLLIN, 0 };
	ssize_t n;

	buf[0] = '\0';
	if (poll(&p, 1, 5000) != 1)
		return buf;
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/*
 * Listen on the abstract datagram socket "@kpgpud-TAG-PID" and point
 * NOTIFY_SOCKET at it; the socket, or -1.
 */
static int
notify_listen(const char *tag)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "@kpgpud-%s-%ld", tag, (long)getpid());
	if ((fd = listen_dgram(name)) >= 0)
		setenv("NOTIFY_SOCKET", name, 1);
	return fd;
}

/* Undo notify_listen(). */
static void
notify_close(int fd)
{
	unsetenv("NOTIFY_SOCKET");
	close(fd);
}

TEST(notify_path_socket)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/kpgpud-sdn-%ld.sock",
	    (long)getpid());
	unlink(path);
	REQUIRE((fd = listen_dgram(path)) >= 0);
	setenv("NOTIFY_SOCKET", path, 1);
	CHECK_INT(sdn_ready(), 1);
	CHECK_STR(recv_msg(fd), "READY=1");
	CHECK_INT(sdn_watchdog(), 1);
	CHECK_STR(recv_msg(fd), "WATCHDOG=1");
	CHECK_INT(sdn_stopping(), 1);
	CHECK_STR(recv_msg(fd), "STOPPING=1");
	CHECK_INT(sdn_status("synced %d namespaces\nREADY=1", 3), 1);
	CHECK_STR(recv_msg(fd), "STATUS=synced 3 namespaces READY=1");
	unsetenv("NOTIFY_SOCKET");
	close(fd);
	unlink(path);
}

TEST(notify_abstract_socket)
{
	int fd;

	REQUIRE((fd = notify_listen("sdn-test")) >= 0);
	CHECK_INT(sdn_notify("X_TEST=1"), 1);
	CHECK_STR(recv_msg(fd), "X_TEST=1");
	notify_close(fd);
}

TEST(notify_reloading_has_monotonic_usec)
{
	unsigned long long usec = 0;
	uint64_t before, after;
	int fd;

	REQUIRE((fd = notify_listen("sdn-reload")) >= 0);
	before = monotonic_usec();
	CHECK_INT(sdn_reloading(), 1);
	after = monotonic_usec();
	const char *m = recv_msg(fd);
	CHECK(sscanf(m, "RELOADING=1\nMONOTONIC_USEC=%llu", &usec) == 1);
	CHECK(usec >= before && usec <= after);
	notify_close(fd);
}

TEST(notify_without_socket_is_noop)
{
	unsetenv("NOTIFY_SOCKET");
	CHECK_INT(sdn_ready(), 0);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	CHECK_INT(sdn_ready(), -EINVAL);
	setenv("NOTIFY_SOCKET", "/nonexistent/kpgpud/notify.sock", 1);
	CHECK_INT(sdn_ready(), -ENOENT);
	unsetenv("NOTIFY_SOCKET");
}

TEST(watchdog_usec)
{
	char pid[32];
	uint64_t u = 0;

	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	CHECK_INT(sdn_watchdog_usec(&u), -ENODATA);
	setenv("WATCHDOG_USEC", "2000000", 1);
	CHECK_INT(sdn_watchdog_usec(&u), 0);
	CHECK_INT(u, 2000000);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	u = 0;
	CHECK_INT(sdn_watchdog_usec(&u), 0);
	CHECK_INT(u, 2000000);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1);
	CHECK_INT(sdn_watchdog_usec(&u), -ENODATA);
	setenv("WATCHDOG_PID", "x", 1);
	CHECK_INT(sdn_watchdog_usec(&u), -EINVAL);
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "0", 1);
	CHECK_INT(sdn_watchdog_usec(&u), -EINVAL);
	setenv("WATCHDOG_USEC", "12abc", 1);
	CHECK_INT(sdn_watchdog_usec(&u), -EINVAL);
	unsetenv("WATCHDOG_USEC");
}

/* A socketpair with both ends above the fds LISTEN_FDS uses. */
static int
high_pair(int sp[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		int fd = fcntl(sp[i], F_DUPFD_CLOEXEC, 30);

		close(sp[i]);
		sp[i] = fd;
	}
	return sp[0] >= 0 && sp[1] >= 0 ? 0 : -1;
}

/* Move whatever occupies fds 3 and 4 out of the way; restore later. */
static void
save_fds(int saved[2])
{
	for (int i = 0; i < 2; i++)
		saved[i] = fcntl(3 + i, F_DUPFD_CLOEXEC, 20);
}

/* Put back fds 3 and 4 as they were. */
static void
restore_fds(const int saved[2])
{
	for (int i = 0; i < 2; i++) {
		if (saved[i] >= 0) {
			dup2(saved[i], 3 + i);
			close(saved[i]);
		} else {
			close(3 + i);
		}
	}
}

TEST(listen_fds_real_fd)
{
	struct sdn_fd fds[4];
	char pid[32], got[16] = "";
	int sp[2], sp2[2], saved[2];
	size_t n = 99;

	REQUIRE(high_pair(sp) == 0);
	REQUIRE(high_pair(sp2) == 0);
	save_fds(saved);
	REQUIRE(dup2(sp[0], 3) == 3 && dup2(sp2[0], 4) == 4);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "2", 1);
	setenv("LISTEN_FDNAMES", "api:metrics", 1);
	CHECK_INT(sdn_listen_fds(fds, 4, &n), 0);
	CHECK_INT(n, 2);
	CHECK_INT(fds[0].fd, 3);
	CHECK_STR(fds[0].name, "api");
	CHECK_INT(fds[1].fd, 4);
	CHECK_STR(fds[1].name, "metrics");
	CHECK((fcntl(3, F_GETFD) & FD_CLOEXEC) != 0);
	CHECK((fcntl(4, F_GETFD) & FD_CLOEXEC) != 0);
	CHECK(getenv("LISTEN_FDS") == NULL);
	CHECK(getenv("LISTEN_PID") == NULL);
	CHECK(getenv("LISTEN_FDNAMES") == NULL);
	CHECK_INT(sdn_listen_fd_named(fds, n, "metrics"), 4);
	CHECK_INT(sdn_listen_fd_named(fds, n, "nope"), -ENOENT);
	/* the fd we got really is the passed socket */
	int fd = sdn_listen_fd_named(fds, n, "api");
	CHECK(fd >= 0 && write(fd, "ping", 4) == 4);
	fd_nonblock(sp[1]);	/* a wrong fd fails the check, not hangs */
	CHECK(read(sp[1], got, sizeof(got) - 1) == 4);
	CHECK_STR(got, "ping");
	restore_fds(saved);
	close(sp[0]);
	close(sp[1]);
	close(sp2[0]);
	close(sp2[1]);
}

TEST(listen_fds_unnamed_and_foreign)
{
	struct sdn_fd fds[1];
	char pid[32];
	int sp[2], saved[2];
	size_t n = 99;

	REQUIRE(high_pair(sp) == 0);
	save_fds(saved);
	REQUIRE(dup2(sp[0], 3) == 3);
	/* LISTEN_PID of another process: not ours, leave the env alone */
	snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "1", 1);
	CHECK_INT(sdn_listen_fds(fds, 1, &n), 0);
	CHECK_INT(n, 0);
	CHECK(getenv("LISTEN_FDS") != NULL);
	/* ours, no names */
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("LISTEN_PID", pid, 1);
	unsetenv("LISTEN_FDNAMES");
	CHECK_INT(sdn_listen_fds(fds, 1, &n), 0);
	CHECK_INT(n, 1);
	CHECK_STR(fds[0].name, "unknown");
	/* more fds than room */
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "2", 1);
	CHECK_INT(sdn_listen_fds(fds, 1, &n), -E2BIG);
	CHECK(getenv("LISTEN_FDS") == NULL);
	/* garbage */
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", "two", 1);
	CHECK_INT(sdn_listen_fds(fds, 1, &n), -EINVAL);
	/* nothing passed */
	n = 99;
	CHECK_INT(sdn_listen_fds(fds, 1, &n), 0);
	CHECK_INT(n, 0);
	restore_fds(saved);
	close(sp[0]);
	close(sp[1]);
}

struct dstate {
	struct event_base	*base;
	int			 stops, reloads, alive_calls, alive_true;
	int			 stop_signo;
	int			 reload_ret;
};

/* stop hook: remember the call. */
static void
d_stop(void *arg, int signo)
{
	struct dstate *s = arg;

	s->stops++;
	s->stop_signo = signo;
}

/* reload hook: remember the call, then end the loop. */
static int
d_reload(void *arg)
{
	struct dstate *s = arg;

	s->reloads++;
	event_base_loopexit(s->base, NULL);
	return s->reload_ret;
}

/* alive hook: alternate true/false; end the loop after six calls. */
static bool
d_alive(void *arg)
{
	struct dstate *s = arg;
	bool ok = s->alive_calls % 2 == 0;

	s->alive_calls++;
	s->alive_true += ok;
	if (s->alive_calls == 6)
		event_base_loopexit(s->base, NULL);
	return ok;
}

/* Raise signo from inside the loop once it runs. */
static void
raise_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	raise(*(int *)arg);
}

/* Count queued datagrams on fd equal to msg, without waiting. */
static int
count_msgs(int fd, const char *msg, int *other)
{
	char buf[512];
	ssize_t n;
	int c = 0;

	while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) >= 0) {
		buf[n] = '\0';
		if (strcmp(buf, msg) == 0)
			c++;
		else if (other != NULL)
			(*other)++;
	}
	return c;
}

/* Run one loop turn in which signo is raised. */
static void
loop_with_signal(struct event_base *base, int signo)
{
	struct timeval zero = { 0, 0 };

	event_base_once(base, -1, EV_TIMEOUT, raise_cb, &signo, &zero);
	event_base_dispatch(base);
}

TEST(daemon_signals_notify)
{
	struct dstate st = { 0 };
	struct daemon_hooks h = { d_stop, d_reload, NULL, &st };
	struct daemon *d = NULL;
	const char *m;
	bool dbg;
	int fd;

	REQUIRE((fd = notify_listen("daemon")) >= 0);
	unsetenv("WATCHDOG_USEC");
	REQUIRE((st.base = event_base_new()) != NULL);
	REQUIRE(daemon_new(st.base, &h, &d) == 0);
	CHECK_INT(daemon_state(d)->wd_ms, 0);
	/* SIGHUP: RELOADING=1, hook, READY=1 */
	st.reload_ret = -EINVAL;
	loop_with_signal(st.base, SIGHUP);
	CHECK_INT(st.reloads, 1);
	CHECK_INT(daemon_state(d)->last_reload, -EINVAL);
	m = recv_msg(fd);
	CHECK(strncmp(m, "RELOADING=1\nMONOTONIC_USEC=", 27) == 0);
	m = recv_msg(fd);
	CHECK(strncmp(m, "STATUS=reload failed", 20) == 0);
	CHECK_STR(recv_msg(fd), "READY=1");
	/* SIGUSR1 flips debug logging; SIGPIPE is ignored */
	dbg = log_debug_enabled();
	raise(SIGUSR1);
	for (int i = 0; i < 100 && log_debug_enabled() == dbg; i++)
		event_base_loop(st.base, EVLOOP_NONBLOCK);
	CHECK(log_debug_enabled() != dbg);
	log_set_debug(dbg);
	raise(SIGPIPE);
	/* SIGTERM: STOPPING=1, stop hook, loop exits by itself */
	loop_with_signal(st.base, SIGTERM);
	CHECK_INT(st.stops, 1);
	CHECK_INT(st.stop_signo, SIGTERM);
	CHECK(daemon_state(d)->stopping);
	CHECK_STR(recv_msg(fd), "STOPPING=1");
	daemon_free(d);
	daemon_free(NULL);
	event_base_free(st.base);
	notify_close(fd);
}

TEST(daemon_watchdog_pings_only_when_alive)
{
	struct dstate st = { 0 };
	struct daemon_hooks h = { NULL, NULL, d_alive, &st };
	struct daemon *d = NULL;
	int fd, other = 0;

	REQUIRE((fd = notify_listen("wd")) >= 0);
	setenv("WATCHDOG_USEC", "20000", 1);
	unsetenv("WATCHDOG_PID");
	REQUIRE((st.base = event_base_new()) != NULL);
	REQUIRE(daemon_new(st.base, &h, &d) == 0);
	CHECK_INT(daemon_state(d)->wd_ms, 10);
	/* ends itself after six ticks (d_alive) */
	event_base_dispatch(st.base);
	CHECK_INT(st.alive_calls, 6);
	CHECK_INT(count_msgs(fd, "WATCHDOG=1", &other), st.alive_true);
	CHECK_INT(st.alive_true, 3);
	CHECK_INT(other, 0);
	daemon_free(d);
	event_base_free(st.base);
	unsetenv("WATCHDOG_USEC");
	notify_close(fd);
}

TEST(daemon_refuses_root)
{
	if (getuid() == 0 || geteuid() == 0)
		CHECK_INT(daemon_check_root(false), -EPERM);
	else
		CHECK_INT(daemon_check_root(false), 0);
	CHECK_INT(daemon_check_root(true), 0);
}

TEST(daemon_pidfile_locks)
{
	char path[64], *data = NULL, want[32];
	size_t len;
	int fd = -1, fd2 = -1;

	snprintf(path, sizeof(path), "/tmp/kpgpud-pid-%ld", (long)getpid());
	unlink(path);
	REQUIRE(daemon_pidfile_write(path, &fd) == 0);
	CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
	CHECK_INT(read_file_capped(path, 64, &data, &len), 0);
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	CHECK_STR(data, want);
	free(data);
	CHECK_INT(daemon_pidfile_write(path, &fd2), -EBUSY);
	CHECK_INT(fd2, -1);
	daemon_pidfile_remove(path, fd);
	CHECK(access(path, F_OK) != 0);
	CHECK_INT(daemon_pidfile_write("/nonexistent-dir/x.pid", &fd2),
	    -ENOENT);
}
