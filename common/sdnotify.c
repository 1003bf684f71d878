/* SPDX-License-Identifier: Apache-2.0 */
/* The systemd notify and socket-activation protocols: see sdnotify.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/sdnotify.h"
#include "common/util.h"

#define SDN_MSG_MAX	4096

/* Fill a sockaddr_un from $NOTIFY_SOCKET; 0 when unset, 1 when set. */
static int
sdn_addr(struct sockaddr_un *sa, socklen_t *ret_len)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t n;

	if (path == NULL || *path == '\0')
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa->sun_path))
		return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n);
	if (path[0] == '@')
		sa->sun_path[0] = '\0';	/* abstract namespace */
	*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
	    (path[0] == '@' ? 0 : 1));
	return 1;
}

/* Send one notify datagram. */
int
sdn_notify(const char *state)
{
	struct sockaddr_un sa;
	socklen_t salen = 0;
	ssize_t n;
	size_t len;
	int fd, r;

	if (state == NULL || (len = strlen(state)) == 0)
		return -EINVAL;
	if ((r = sdn_addr(&sa, &salen)) <= 0)
		return r;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	do
		n = sendto(fd, state, len, MSG_NOSIGNAL,
		    (struct sockaddr *)&sa, salen);
	while (n < 0 && errno == EINTR);
	r = n < 0 ? -errno : ((size_t)n == len ? 1 : -EMSGSIZE);
	close(fd);
	return r;
}

/* Tell the manager start-up is complete. */
int
sdn_ready(void)
{
	return sdn_notify("READY=1");
}

/* Keep the watchdog from firing. */
int
sdn_watchdog(void)
{
	return sdn_notify("WATCHDOG=1");
}

/* Tell the manager we are shutting down. */
int
sdn_stopping(void)
{
	return sdn_notify("STOPPING=1");
}

/* Tell the manager a reload started, with the timestamp it requires. */
int
sdn_reloading(void)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)monotonic_usec());
	return sdn_notify(msg);
}

/* Set the one-line status shown by systemctl status. */
int
sdn_status(const char *fmt, ...)
{
	char msg[SDN_MSG_MAX];
	va_list ap;
	int n;

	memcpy(msg, "STATUS=", 7);
	va_start(ap, fmt);
	n = vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	/* a newline would start a new, unintended assignment */
	for (char *p = msg + 7; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return sdn_notify(msg);
}

/* Parse $name as a positive pid and compare with ours; 1 mine, 0 not. */
static int
sdn_pid_is_mine(const char *name)
{
	const char *s = getenv(name);
	int64_t pid;

	if (s == NULL)
		return -ENOENT;
	if (parse_int64(s, 1, INT32_MAX, &pid) < 0)
		return -EINVAL;
	return (pid_t)pid == getpid();
}

/* The watchdog interval systemd expects from this process. */
int
sdn_watchdog_usec(uint64_t *ret_usec)
{
	const char *s = getenv("WATCHDOG_USEC");
	uint64_t usec;
	int r;

	if (s == NULL || *s == '\0')
		return -ENODATA;
	if (parse_uint64(s, UINT64_MAX, &usec) < 0 || usec == 0)
		return -EINVAL;
	r = sdn_pid_is_mine("WATCHDOG_PID");
	if (r == -EINVAL)
		return r;
	if (r == 0)
		return -ENODATA;
	*ret_usec = usec;
	return 0;
}

/* Copy the idx-th ':'-separated name of names into out ("unknown"). */
static void
sdn_fdname(const char *names, size_t idx, char *out, size_t outlen)
{
	const char *p = names, *e;
	size_t n;

	snprintf(out, outlen, "unknown");
	if (names == NULL)
		return;
	for (size_t i = 0; i < idx; i++) {
		if ((p = strchr(p, ':')) == NULL)
			return;
		p++;
	}
	e = strchr(p, ':');
	n = e ? (size_t)(e - p) : strlen(p);
	if (n == 0 || n >= outlen)
		return;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* Unset the socket-activation variables so children do not inherit them. */
static void
sdn_listen_unset(void)
{
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
}

/* Take the fds passed by socket activation. */
int
sdn_listen_fds(struct sdn_fd *ret_fds, size_t max, size_t *ret_n)
{
	const char *s = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	int64_t n;
	int r;

	if (s == NULL) {
		*ret_n = 0;
		return 0;
	}
	r = sdn_pid_is_mine("LISTEN_PID");
	if (r == -ENOENT || r == 0) {
		/* meant for another process: leave it alone */
		*ret_n = 0;
		return 0;
	}
	if (r < 0 || parse_int64(s, 0, SDN_MAX_LISTEN_FDS, &n) < 0) {
		r = -EINVAL;
		goto fail;
	}
	if ((size_t)n > max) {
		r = -E2BIG;
		goto fail;
	}
	for (int64_t i = 0; i < n; i++)
		if ((r = fd_cloexec(SDN_LISTEN_FDS_START + (int)i)) < 0)
			goto fail;
	for (int64_t i = 0; i < n; i++) {
		ret_fds[i].fd = SDN_LISTEN_FDS_START + (int)i;
		sdn_fdname(names, (size_t)i, ret_fds[i].name,
		    sizeof(ret_fds[i].name));
	}
	*ret_n = (size_t)n;
	sdn_listen_unset();
	return 0;
fail:
	sdn_listen_unset();
	return r;
}

/* Find a passed fd by its FileDescriptorName=. */
int
sdn_listen_fd_named(const struct sdn_fd *fds, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(fds[i].name, name) == 0)
			return fds[i].fd;
	return -ENOENT;
}
