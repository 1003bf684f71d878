/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A well-behaved long-lived IPC client for integration tests: one
 * connection (the real libevent client), a PING every 50 ms, one line
 * "pong N" per answer. If that connection is ever lost it prints
 * "disconnected" and exits 1, so a test can prove the same peer survived.
 *
 *   ipc_pinger SOCK [ROLE]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/log.h"
#include "ipc/ipc.h"

struct pinger {
	struct event_base	*base;
	struct ipc_client	*cli;
	struct event		*tick;
	unsigned long		 pongs;
	int			 rc;
};

/* A PING came back (or failed). */
static void
on_pong(struct ipc_client *c, int err, const struct ipc_msg *reply, void *arg)
{
	struct pinger *p = arg;

	(void)c;
	if (err == 0 && reply != NULL && reply->type == IPC_PONG)
		printf("pong %lu\n", ++p->pongs);
	else
		printf("ping failed: %s\n", strerror(-err));
}

/* Send the next PING. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pinger *p = arg;
	struct ipc_msg m;

	(void)fd;
	(void)what;
	if (!ipc_client_connected(p->cli) || ipc_client_npending(p->cli) > 0)
		return;
	memset(&m, 0, sizeof(m));
	m.type = IPC_PING;
	(void)ipc_client_request(p->cli, &m, 2000, on_pong, p, NULL);
}

/* The connection is up. */
static void
on_connected(struct ipc_client *c, void *arg)
{
	(void)c;
	(void)arg;
	printf("connected\n");
}

/* The one connection was lost: the test fails on this. */
static void
on_disconnected(struct ipc_client *c, int err, void *arg)
{
	struct pinger *p = arg;

	(void)c;
	printf("disconnected: %s\n", strerror(-err));
	p->rc = 1;
	event_base_loopbreak(p->base);
}

/* Stop on SIGTERM. */
static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

/* Keep one connection, ping it, and exit 1 if it is ever lost. */
int
main(int argc, char **argv)
{
	struct ipc_client_config cc;
	struct timeval tv = { 0, 50000 };
	struct event *sig;
	struct pinger p;
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: ipc_pinger SOCK [ROLE]\n");
		return 2;
	}
	log_init("ipc_pinger", false);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	memset(&p, 0, sizeof(p));
	memset(&cc, 0, sizeof(cc));
	cc.path = argv[1];
	cc.role = argc > 2 ? ipc_role_parse(argv[2]) : IPC_ROLE_ADMIT;
	cc.on_connected = on_connected;
	cc.on_disconnected = on_disconnected;
	cc.arg = &p;
	p.base = event_base_new();
	if (p.base == NULL || (rc = ipc_client_new(p.base, &cc, &p.cli)) < 0)
		fatal("client setup failed");
	p.tick = event_new(p.base, -1, EV_PERSIST, tick_cb, &p);
	event_add(p.tick, &tv);
	sig = evsignal_new(p.base, SIGTERM, on_signal, p.base);
	event_add(sig, NULL);
	ipc_client_start(p.cli);
	event_base_dispatch(p.base);
	ipc_client_free(p.cli);
	event_free(p.tick);
	event_free(sig);
	event_base_free(p.base);
	return p.rc;
}
