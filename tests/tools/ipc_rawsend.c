/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A misbehaving (or well-behaved) IPC peer for integration tests: connects
 * to SOCK, sends one kind of frame sequence, prints every frame it gets back
 * ("recv TYPE ...") and "eof" when the server closes the connection.
 *
 *   ipc_rawsend SOCK MODE [ROLE]
 *
 * MODE: good (HELLO, PING; exit 0 on PONG), hello (HELLO only), truncated,
 * oversized,
 * notmsgpack, wrongtypes, extrabytes, unknowntype, badversion, nohello,
 * notallowed (STATUS), notrequest (PONG), silent (nothing at all).
 * Bad modes exit 0 when the server closed the connection, 1 otherwise.
 * Request modes (one well-formed request, then its answer is printed, exit
 * 0 on an answer that is not ERROR): lookup (NS_LOOKUP "default"), list
 * (NS_LIST), subscribe (SUBSCRIBE namespaces), subscribeall (every topic),
 * status (STATUS; prints how many counts came back), usage (USAGE).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <msgpack.h>
#include <event2/buffer.h>

#include "ipc/ipc.h"
#include "tests/unit/handpack.c"

static int fd = -1;
static bool answer_mode;	/* a request mode: stop at its answer */

/* Write all bytes; a server that already hung up is reported, not fatal. */
static void
put(const void *p, size_t n)
{
	if (send(fd, p, n, MSG_NOSIGNAL) != (ssize_t)n)
		printf("send failed: %s\n", strerror(errno));
}

/* Write a length header. */
static void
put_len(uint32_t n)
{
	uint8_t h[4] = { n >> 24, n >> 16, n >> 8, n };

	put(h, 4);
}

/* Encode and send a message. */
static void
put_msg(const struct ipc_msg *m)
{
	uint8_t *buf;
	size_t len;

	if (ipc_msg_encode(m, 0, &buf, &len) < 0)
		exit(2);
	put(buf, len);
	free(buf);
}

/* Send HELLO with a version and role. */
static void
put_hello(uint32_t version, enum ipc_role role)
{
	struct ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = IPC_HELLO;
	m.u.hello.version = version;
	m.u.hello.role = role;
	put_msg(&m);
}

/* Send a request of type t with id 1. */
static void
put_req(enum ipc_type t)
{
	struct ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = t;
	m.id = 1;
	put_msg(&m);
}

/* Send a packed buffer as one frame, with extra trailing bytes. */
static void
put_packed(msgpack_sbuffer *sb, const char *extra, size_t nextra)
{
	put_len((uint32_t)(sb->size + nextra));
	put(sb->data, sb->size);
	if (nextra > 0)
		put(extra, nextra);
	msgpack_sbuffer_destroy(sb);
}

/* NS_LOOKUP packed by hand with a wrong-typed namespace. */
static void
put_wrongtypes(void)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	handpack_request(&sb, &pk, IPC_NS_LOOKUP, 1);
	handpack_str(&pk, "namespace");
	msgpack_pack_int(&pk, 12345);
	put_packed(&sb, NULL, 0);
}

/* A valid PING body followed by one extra byte. */
static void
put_extrabytes(void)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	handpack_request(&sb, &pk, IPC_PING, 0);
	put_packed(&sb, "\xc0", 1);
}

/* [99, {}]: a well-formed frame of a type nobody knows. */
static void
put_unknowntype(void)
{
	put_len(3);
	put("\x92\x63\x80", 3);
}

/* Send what MODE asks for; returns false for an unknown mode. */
static bool
send_mode(const char *mode, enum ipc_role role)
{
	if (strcmp(mode, "silent") == 0)
		return true;
	if (strcmp(mode, "nohello") == 0) {
		put_req(IPC_PING);
		return true;
	}
	put_hello(strcmp(mode, "badversion") == 0 ? 99 : IPC_PROTO_VERSION,
	    role);
	if (strcmp(mode, "good") == 0)
		put_req(IPC_PING);
	else if (strcmp(mode, "truncated") == 0) {
		put_len(100);
		put("0123456789", 10);
		shutdown(fd, SHUT_WR);
	} else if (strcmp(mode, "oversized") == 0) {
		put_len(0x7fffffff);
		put("\x92\x05", 2);
	} else if (strcmp(mode, "notmsgpack") == 0) {
		put_len(1);
		put("\xc1", 1);
	} else if (strcmp(mode, "wrongtypes") == 0)
		put_wrongtypes();
	else if (strcmp(mode, "extrabytes") == 0)
		put_extrabytes();
	else if (strcmp(mode, "unknowntype") == 0)
		put_unknowntype();
	else if (strcmp(mode, "notallowed") == 0)
		put_req(IPC_STATUS);
	else if (strcmp(mode, "lookup") == 0 || strcmp(mode, "list") == 0 ||
	    strcmp(mode, "subscribe") == 0 ||
	    strcmp(mode, "subscribeall") == 0 || strcmp(mode, "status") == 0 ||
	    strcmp(mode, "usage") == 0) {
		struct ipc_msg m;

		memset(&m, 0, sizeof(m));
		m.id = 1;
		m.deadline_ms = 3000;
		if (mode[0] == 'l' && mode[1] == 'o') {
			m.type = IPC_NS_LOOKUP;
			snprintf(m.u.ns_lookup.ns, sizeof(m.u.ns_lookup.ns),
			    "default");
		} else if (mode[0] == 'l') {
			m.type = IPC_NS_LIST;
			m.u.ns_list.limit = 10;
		} else if (mode[0] == 'u') {
			m.type = IPC_USAGE;
			m.u.usage.until_us = 1ull << 62;
		} else if (mode[1] == 'u') {
			m.type = IPC_SUBSCRIBE;
			m.u.subscribe.topics = strcmp(mode, "subscribe") == 0 ?
			    IPC_TOPIC_NAMESPACES : IPC_TOPIC_ALL;
		} else
			m.type = IPC_STATUS;
		put_msg(&m);
		answer_mode = true;
	}
	else if (strcmp(mode, "notrequest") == 0) {
		struct ipc_msg m;

		memset(&m, 0, sizeof(m));
		m.type = IPC_PONG;
		put_msg(&m);
	} else if (strcmp(mode, "badversion") != 0 &&
	    strcmp(mode, "hello") != 0)
		return false;
	return true;
}

/* Print frames until EOF or 5 s of silence; returns 1 on EOF, 2 on PONG. */
static int
read_back(void)
{
	struct evbuffer *in = evbuffer_new();
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct ipc_msg m;
	const char *why;
	int rc, got = 0;

	for (;;) {
		while ((rc = ipc_frame_read(in, 0, &m, &why)) == 1) {
			printf("recv %s", ipc_type_name(m.type));
			if (m.type == IPC_ERROR)
				printf(" code=%u message=\"%s\"", m.u.error.code,
				    m.u.error.message);
			if (m.type == IPC_STATUS_RESULT)
				printf(" synced=%d counts=%zu",
				    m.u.status_result.synced,
				    m.u.status_result.ncounts);
			printf("\n");
			/* HELLO_OK is not the answer: it may come in a read
			 * of its own, before the request's answer */
			if (m.type == IPC_PONG || (answer_mode &&
			    m.type != IPC_HELLO_OK && m.type != IPC_CHANGE &&
			    m.type != IPC_SNAPSHOT_BEGIN))
				got = m.type == IPC_ERROR ? 3 : 2;
			ipc_msg_clear(&m);
		}
		if (rc < 0) {
			printf("bad frame from server: %s\n", why);
			break;
		}
		if (got >= 2 || poll(&pfd, 1, 5000) <= 0)
			break;
		rc = evbuffer_read(in, fd, 65536);
		if (rc == 0 || (rc < 0 && errno == ECONNRESET)) {
			printf("eof\n");
			got = 1;
			break;
		}
	}
	evbuffer_free(in);
	return got;
}

/* Connect, misbehave as MODE says, and report how the server reacted. */
int
main(int argc, char **argv)
{
	struct sockaddr_un sun;
	enum ipc_role role = IPC_ROLE_CTL;
	int got;

	if (argc < 3 || strlen(argv[1]) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "usage: ipc_rawsend SOCK MODE [ROLE]\n");
		return 2;
	}
	if (argc > 3 && (role = ipc_role_parse(argv[3])) == IPC_ROLE_NONE)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, argv[1], strlen(argv[1]));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		printf("connect failed: %s\n", strerror(errno));
		return 2;
	}
	if (!send_mode(argv[2], role)) {
		fprintf(stderr, "unknown mode %s\n", argv[2]);
		return 2;
	}
	got = read_back();
	close(fd);
	if (strcmp(argv[2], "good") == 0 || answer_mode)
		return got == 2 ? 0 : 1;
	return got == 1 ? 0 : 1;
}
