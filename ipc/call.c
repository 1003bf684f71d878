/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The blocking IPC client for kpgpuctl and tests: connect, HELLO, then
 * request/reply with a timeout on every wait. No event loop.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "common/util.h"
#include "ipc/ipc.h"

#define CALL_READ_CHUNK	65536

struct ipc_call {
	int		 fd;
	struct evbuffer	*in;
	uint32_t	 next_id;
};

/* Milliseconds left until the monotonic deadline end (0 if past). */
static int
left_ms(uint64_t end)
{
	uint64_t now = monotonic_ms();

	return now >= end ? 0 : (int)(end - now);
}

/* Connect a blocking Unix socket, the wait bounded by timeout_ms. */
static int
call_connect(const char *path, unsigned timeout_ms, int *ret_fd)
{
	struct sockaddr_un sun;
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
	    .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	int fd, rc;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	/* a Unix connect() waits for backlog room at most SO_SNDTIMEO */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		rc = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT :
		    -errno;
		close(fd);
		return rc;
	}
	*ret_fd = fd;
	return 0;
}

/* Write all of buf before the deadline. */
static int
write_all(int fd, const uint8_t *buf, size_t len, uint64_t end)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };

	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (left_ms(end) == 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left_ms(end)) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Send one frame, bounded by the deadline. */
static int
call_send_until(struct ipc_call *s, const struct ipc_msg *msg, uint64_t end)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if ((rc = ipc_msg_encode(msg, 0, &buf, &len)) < 0)
		return rc;
	rc = write_all(s->fd, buf, len, end);
	free(buf);
	return rc;
}

/* Read the next frame before the deadline. */
static int
call_recv_until(struct ipc_call *s, uint64_t end, struct ipc_msg *ret)
{
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	int rc, n;

	for (;;) {
		rc = ipc_frame_read(s->in, 0, ret, NULL);
		if (rc != 0)
			return rc < 0 ? rc : 0;
		if (left_ms(end) == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left_ms(end));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		n = evbuffer_read(s->in, s->fd, CALL_READ_CHUNK);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

/* Connect, check the server's uid, and exchange HELLO. */
int
ipc_call_open(const char *path, enum ipc_role role,
    const uid_t *server_uids, size_t nuids, unsigned timeout_ms,
    struct ipc_call **ret)
{
	uint64_t end = monotonic_ms() + timeout_ms;
	struct ipc_call *s;
	struct ipc_cred cr;
	struct ipc_msg m;
	int rc;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->fd = -1;
	s->next_id = 1;
	if ((s->in = evbuffer_new()) == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = call_connect(path, timeout_ms, &s->fd)) < 0)
		goto fail;
	if ((rc = ipc_peer_cred(s->fd, &cr)) < 0)
		goto fail;
	if (nuids > 0 && !ipc_uid_allowed(server_uids, nuids, cr.uid)) {
		rc = -EPERM;
		goto fail;
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_HELLO;
	m.u.hello.version = IPC_PROTO_VERSION;
	m.u.hello.role = role;
	if ((rc = call_send_until(s, &m, end)) < 0 ||
	    (rc = call_recv_until(s, end, &m)) < 0)
		goto fail;
	if (m.type != IPC_HELLO_OK)
		rc = m.type == IPC_ERROR ? -(int)m.u.error.code : -EBADMSG;
	ipc_msg_clear(&m);
	if (rc < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	ipc_call_close(s);
	return rc;
}

/* Close the connection. NULL ok. */
void
ipc_call_close(struct ipc_call *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->in != NULL)
		evbuffer_free(s->in);
	free(s);
}

/* Send one frame as is. */
int
ipc_call_send(struct ipc_call *s, const struct ipc_msg *msg)
{
	return call_send_until(s, msg, monotonic_ms() + 5000);
}

/* Wait for the next frame of any type. */
int
ipc_call_recv(struct ipc_call *s, unsigned timeout_ms, struct ipc_msg *ret)
{
	return call_recv_until(s, monotonic_ms() + timeout_ms, ret);
}

/* Send a request and wait for the reply with its id; pushes are skipped. */
int
ipc_call_request(struct ipc_call *s, struct ipc_msg *req, unsigned timeout_ms,
    struct ipc_msg *ret)
{
	uint64_t end = monotonic_ms() + timeout_ms;
	struct ipc_msg m;
	int rc;

	if (!ipc_type_is_request(req->type))
		return -EINVAL;
	req->id = s->next_id++;
	if (s->next_id == 0)
		s->next_id = 1;
	req->deadline_ms = timeout_ms;
	if ((rc = call_send_until(s, req, end)) < 0)
		return rc;
	for (;;) {
		if ((rc = call_recv_until(s, end, &m)) < 0)
			return rc;
		if (ipc_type_is_reply(m.type) && m.id == req->id)
			break;
		if (m.type == IPC_ERROR && m.id == 0) {
			rc = -(int)m.u.error.code;
			ipc_msg_clear(&m);
			return rc < 0 ? rc : -EPROTO;
		}
		ipc_msg_clear(&m);
	}
	*ret = m;
	return 0;
}

/* The connected socket. */
int
ipc_call_fd(const struct ipc_call *s)
{
	return s->fd;
}

/* Connect, HELLO, one request, one reply, close. */
int
ipc_call(const char *path, enum ipc_role role, struct ipc_msg *req,
    unsigned timeout_ms, struct ipc_msg *ret)
{
	uint64_t end = monotonic_ms() + timeout_ms;
	struct ipc_call *s;
	int rc, left;

	if ((rc = ipc_call_open(path, role, NULL, 0, timeout_ms, &s)) < 0)
		return rc;
	left = left_ms(end);
	rc = left > 0 ? ipc_call_request(s, req, (unsigned)left, ret) :
	    -ETIMEDOUT;
	ipc_call_close(s);
	return rc;
}
