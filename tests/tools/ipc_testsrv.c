/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test IPC server: the real ipc server code with real allowlists, for
 * integration tests. It answers PING (built in), NS_LOOKUP from namespaces
 * given with --ns NAME=RESOLVED, and STATUS with the number of peers.
 *
 *   ipc_testsrv --path SOCK [--uids 0,65534] [--types PING,NS_LOOKUP]
 *               [--roles admit,ctl] [--max-frame N] [--hello-timeout MS]
 *               [--world] [--ns NAME=RESOLVED]...
 *
 * --world makes the socket and its directory reachable by any uid, so that
 * the uid allowlist (not file permissions) is what refuses a stranger.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/opts.h"
#include "common/util.h"
#include "ipc/ipc.h"

#define TS_MAX_NS	32

struct testsrv {
	int		 nns;
	char		*names[TS_MAX_NS];
	char		*resolved[TS_MAX_NS];
	struct ipc_server *srv;
};

/* Answer NS_LOOKUP from the --ns table. */
static void
h_lookup(struct ipc_req *req, const struct ipc_msg *m, void *arg)
{
	struct testsrv *ts = arg;
	struct ipc_msg r;

	memset(&r, 0, sizeof(r));
	r.type = IPC_NS_RESULT;
	for (int i = 0; i < ts->nns; i++)
		if (strcmp(ts->names[i], m->u.ns_lookup.ns) == 0) {
			r.u.ns_result.found = true;
			r.u.ns_result.isolated = true;
			r.u.ns_result.resolved = ts->resolved[i];
		}
	(void)ipc_req_reply(req, &r);
}

/* Answer STATUS with the number of connected peers. */
static void
h_status(struct ipc_req *req, const struct ipc_msg *m, void *arg)
{
	struct testsrv *ts = arg;
	struct ipc_count cnt = { "peers", 0 };
	struct ipc_msg r;

	(void)m;
	cnt.count = ipc_server_nconns(ts->srv);
	memset(&r, 0, sizeof(r));
	r.type = IPC_STATUS_RESULT;
	r.u.status_result.synced = true;
	r.u.status_result.counts = &cnt;
	r.u.status_result.ncounts = 1;
	(void)ipc_req_reply(req, &r);
}

/* Parse a comma-separated list of names with a lookup function. */
static uint32_t
parse_bits(const char *s, int (*lookup)(const char *))
{
	char *dup = strdup(s), *save = NULL, *tok;
	uint32_t bits = 0;

	for (tok = strtok_r(dup, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		int v = lookup(tok);

		if (v <= 0)
			fatal("unknown name %s", log_q(tok));
		bits |= 1u << v;
	}
	free(dup);
	return bits;
}

/* Type number from its name. */
static int
type_lookup(const char *name)
{
	for (int t = 1; t < IPC_TYPE_COUNT; t++)
		if (strcmp(ipc_type_name((enum ipc_type)t), name) == 0)
			return t;
	return -1;
}

/* Role number from its name. */
static int
role_lookup(const char *name)
{
	return (int)ipc_role_parse(name);
}

/* Stop on SIGTERM/SIGINT. */
static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

/* Parse options into the server config and the namespace table. */
static void
parse_args(int argc, char **argv, struct ipc_server_config *sc,
    struct testsrv *ts, bool *world)
{
	static const struct opts_long opts[] = {
		{ "path=", 'p' },
		{ "uids=", 'u' },
		{ "types=", 't' },
		{ "roles=", 'r' },
		{ "max-frame=", 'f' },
		{ "hello-timeout=", 'h' },
		{ "world", 'w' },
		{ "ns=", 'n' },
	};
	struct opts o;
	char *eq, bad[64];
	int c;

	opts_init(&o, argc, argv, "", opts, nitems(opts));
	while ((c = opts_next(&o)) != OPTS_END) {
		switch (c) {
		case 'p': sc->path = o.arg; break;
		case 'u':
			if (parse_uid_list(o.arg, sc->uids, IPC_UIDS_MAX,
			    &sc->nuids, bad, sizeof(bad)) < 0)
				fatal("bad --uids item \"%s\"", bad);
			break;
		case 't': sc->allowed_types = parse_bits(o.arg, type_lookup);
			break;
		case 'r': sc->allowed_roles = parse_bits(o.arg, role_lookup);
			break;
		case 'f': sc->max_frame = strtoul(o.arg, NULL, 10); break;
		case 'h': sc->hello_timeout_ms = (unsigned)atoi(o.arg); break;
		case 'w': *world = true; break;
		case 'n':
			if ((eq = strchr(o.arg, '=')) == NULL ||
			    ts->nns == TS_MAX_NS)
				fatal("bad --ns");
			*eq = '\0';
			ts->names[ts->nns] = o.arg;
			ts->resolved[ts->nns++] = eq + 1;
			break;
		default:
			fprintf(stderr, "%s\n", o.err);	/* OPTS_ERR */
			fatal("usage: ipc_testsrv --path SOCK [options]");
		}
	}
	if (sc->path == NULL)
		fatal("--path is required");
}

/* Run the real IPC server with the allowlists given until SIGTERM. */
int
main(int argc, char **argv)
{
	struct ipc_server_config sc;
	struct testsrv ts;
	struct event_base *base;
	struct event *sigterm, *sigint;
	bool world = false;
	int rc;

	log_init("ipc_testsrv", getenv("IPC_DEBUG") != NULL);
	signal(SIGPIPE, SIG_IGN);
	memset(&sc, 0, sizeof(sc));
	memset(&ts, 0, sizeof(ts));
	sc.listen_fd = -1;
	sc.role = IPC_ROLE_SYNC;
	sc.allowed_types = IPC_BIT(IPC_PING);
	parse_args(argc, argv, &sc, &ts, &world);
	if ((base = event_base_new()) == NULL)
		fatal("event_base_new failed");
	if ((rc = ipc_server_new(base, &sc, &ts.srv)) < 0)
		fatal("listen %s: %s", log_q(sc.path), strerror(-rc));
	if (world && chmod(sc.path, 0666) < 0)
		fatal("chmod: %s", strerror(errno));
	ipc_server_handle(ts.srv, IPC_NS_LOOKUP, h_lookup, &ts);
	ipc_server_handle(ts.srv, IPC_STATUS, h_status, &ts);
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	sigint = evsignal_new(base, SIGINT, on_signal, base);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	log_info("listening socket=%s", log_q(sc.path));
	event_base_dispatch(base);
	ipc_server_free(ts.srv);
	event_free(sigterm);
	event_free(sigint);
	event_base_free(base);
	return 0;
}
