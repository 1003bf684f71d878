/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpuctl cache: ask kpgpud-sync over sync.sock what its cache holds.
 *   cache [--sync-socket PATH] [--timeout MS] list [--prefix P]
 *   cache [--sync-socket PATH] [--timeout MS] get NAMESPACE
 *   cache [--sync-socket PATH] [--timeout MS] status
 *   cache [--sync-socket PATH] [--since GEN] [--count N] watch
 * list prints one namespace per line: NAME ISOLATED RESOLVED ('-' if none);
 * get prints key=value lines; status the sync state and object counts;
 * watch subscribes to every change and prints one line per message
 * (after SNAPSHOT_END it stops after N more changes, or runs until the
 * connection ends).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/opts.h"
#include "common/util.h"
#include "ipc/ipc.h"
#include "kpgpuctl/ctl.h"

#define CTL_DEFAULT_SOCKET	"/run/kpgpud/sync.sock"
#define CACHE_DEFAULT_TIMEOUT	5000

struct cachecmd {
	const char	*socket;
	unsigned	 timeout_ms;
	const char	*prefix;
	uint64_t	 since;
	long		 count;		/* watch: -1 = forever */
};

/* Where sync.sock is: the flag, the environment, or the default. */
const char *
ctl_sync_socket(const char *flag)
{
	static char path[4096];
	const char *e;

	if (flag != NULL)
		return flag;
	if ((e = getenv("KPGPUD_SYNC_SOCKET")) != NULL && *e != '\0')
		return e;
	if ((e = getenv("KPGPUD_RUNTIME_DIR")) != NULL && *e != '\0' &&
	    snprintf(path, sizeof(path), "%s/sync.sock", e) <
	    (int)sizeof(path))
		return path;
	return CTL_DEFAULT_SOCKET;
}

/* Print usage to f. */
static void
cachecmd_usage(FILE *f)
{
	fprintf(f, "usage: kpgpuctl cache [--sync-socket PATH] [--timeout MS] "
	    "list [--prefix P] | get NAMESPACE | status |\n"
	    "    [--since GEN] [--count N] watch\n"
	    "  --sync-socket (or --socket) defaults to $KPGPUD_SYNC_SOCKET, else "
	    "$KPGPUD_RUNTIME_DIR/sync.sock,\n"
	    "  else " CTL_DEFAULT_SOCKET "\n");
}

/* Report an IPC failure: ERROR replies carry their message. */
static int
cachecmd_fail(const char *what, int r, const struct ipc_msg *reply)
{
	if (reply != NULL && reply->type == IPC_ERROR)
		fprintf(stderr, "kpgpuctl cache %s: %s (%s)\n", what,
		    reply->u.error.message, strerror((int)reply->u.error.code));
	else
		fprintf(stderr, "kpgpuctl cache %s: %s\n", what, strerror(-r));
	return 1;
}

/* One request, one reply of the expected type. */
static int
cachecmd_call(const struct cachecmd *o, struct ipc_call *s, struct ipc_msg *req,
    enum ipc_type want, struct ipc_msg *ret)
{
	int r;

	memset(ret, 0, sizeof(*ret));
	if ((r = ipc_call_request(s, req, o->timeout_ms, ret)) < 0)
		return r;
	if (ret->type == IPC_ERROR)
		return -(int)ret->u.error.code;
	if (ret->type != want) {
		ipc_msg_clear(ret);
		return -EBADMSG;
	}
	return 0;
}

/* cache list: every page of NS_LIST. */
static int
cachecmd_list(const struct cachecmd *o, struct ipc_call *s)
{
	struct ipc_msg req, rep;
	char after[IPC_NS_MAX + 1] = "";
	size_t i;
	bool more = true;
	int r;

	while (more) {
		memset(&req, 0, sizeof(req));
		req.type = IPC_NS_LIST;
		req.u.ns_list.limit = IPC_LIST_MAX;
		snprintf(req.u.ns_list.prefix, sizeof(req.u.ns_list.prefix),
		    "%s", o->prefix != NULL ? o->prefix : "");
		snprintf(req.u.ns_list.after, sizeof(req.u.ns_list.after), "%s",
		    after);
		if ((r = cachecmd_call(o, s, &req, IPC_NS_LIST_RESULT,
		    &rep)) < 0) {
			cachecmd_fail("list", r, &rep);
			ipc_msg_clear(&rep);
			return 1;
		}
		for (i = 0; i < rep.u.ns_list_result.nitems; i++) {
			const struct ipc_ns_item *it =
			    &rep.u.ns_list_result.items[i];
			printf("%s %s %s\n", it->name,
			    it->isolated ? "true" : "false",
			    it->resolved != NULL ? it->resolved : "-");
			snprintf(after, sizeof(after), "%s", it->name);
		}
		more = rep.u.ns_list_result.more &&
		    rep.u.ns_list_result.nitems > 0;
		ipc_msg_clear(&rep);
	}
	return 0;
}

/* cache get NAMESPACE. */
static int
cachecmd_get(const struct cachecmd *o, struct ipc_call *s, const char *ns)
{
	struct ipc_msg req, rep;
	const struct ipc_ns_result *nr = &rep.u.ns_result;
	int r;

	if (!dns1123_label_valid(ns)) {
		fprintf(stderr, "kpgpuctl cache get: \"%s\" is not a "
		    "namespace name\n", ns);
		return 2;
	}
	memset(&req, 0, sizeof(req));
	req.type = IPC_NS_LOOKUP;
	snprintf(req.u.ns_lookup.ns, sizeof(req.u.ns_lookup.ns), "%s", ns);
	if ((r = cachecmd_call(o, s, &req, IPC_NS_RESULT, &rep)) < 0) {
		cachecmd_fail("get", r, &rep);
		ipc_msg_clear(&rep);
		return 1;
	}
	printf("namespace=%s\nfound=%s\nisolated=%s\nresolved=%s\n"
	    "generation=%llu\nfrom_api=%s\n", ns, nr->found ? "true" : "false",
	    nr->isolated ? "true" : "false",
	    nr->resolved != NULL ? nr->resolved : "-",
	    (unsigned long long)nr->generation,
	    nr->from_api ? "true" : "false");
	r = nr->found ? 0 : 3;
	ipc_msg_clear(&rep);
	return r;
}

/* cache status. */
static int
cachecmd_status(const struct cachecmd *o, struct ipc_call *s)
{
	struct ipc_msg req, rep;
	size_t i;
	int r;

	memset(&req, 0, sizeof(req));
	req.type = IPC_STATUS;
	if ((r = cachecmd_call(o, s, &req, IPC_STATUS_RESULT, &rep)) < 0) {
		cachecmd_fail("status", r, &rep);
		ipc_msg_clear(&rep);
		return 1;
	}
	printf("synced=%s\ngeneration=%llu\n",
	    rep.u.status_result.synced ? "true" : "false",
	    (unsigned long long)rep.u.status_result.generation);
	for (i = 0; i < rep.u.status_result.ncounts; i++)
		printf("count.%s=%llu\n", rep.u.status_result.counts[i].kind,
		    (unsigned long long)rep.u.status_result.counts[i].count);
	ipc_msg_clear(&rep);
	return 0;
}

/* Print one pushed message of a subscription; 1 for a live CHANGE. */
static int
cachecmd_print_push(const struct ipc_msg *m, bool live)
{
	const struct ipc_change *c = &m->u.change;

	if (m->type == IPC_SNAPSHOT_END) {
		printf("SNAPSHOT_END %llu\n",
		    (unsigned long long)m->u.snapshot.generation);
		return 0;
	}
	if (m->type != IPC_CHANGE)
		return 0;
	printf("CHANGE %llu %u %s %s %s %s %s %s\n",
	    (unsigned long long)c->generation, c->topic, c->kind,
	    *c->ns ? c->ns : "-", c->name, c->deleted ? "deleted" : "present",
	    c->isolated ? "true" : "false",
	    c->resolved != NULL ? c->resolved : "-");
	return live ? 1 : 0;
}

/* cache watch: SUBSCRIBE to everything and print what arrives. */
static int
cachecmd_watch(const struct cachecmd *o, struct ipc_call *s)
{
	struct ipc_msg req, m;
	bool live = false;
	long seen = 0;
	int r;

	memset(&req, 0, sizeof(req));
	req.type = IPC_SUBSCRIBE;
	req.u.subscribe.topics = IPC_TOPIC_ALL;
	req.u.subscribe.since_generation = o->since;
	if ((r = cachecmd_call(o, s, &req, IPC_SNAPSHOT_BEGIN, &m)) < 0) {
		cachecmd_fail("watch", r, &m);
		ipc_msg_clear(&m);
		return 1;
	}
	printf("SNAPSHOT_BEGIN %llu %s\n",
	    (unsigned long long)m.u.snapshot.generation,
	    m.u.snapshot.full ? "full" : "delta");
	ipc_msg_clear(&m);
	fflush(stdout);
	while (!live || o->count < 0 || seen < o->count) {
		if ((r = ipc_call_recv(s, 24u * 3600 * 1000, &m)) < 0) {
			fprintf(stderr, "kpgpuctl cache watch: %s\n",
			    strerror(-r));
			return 1;
		}
		seen += cachecmd_print_push(&m, live);
		if (m.type == IPC_SNAPSHOT_END)
			live = true;
		ipc_msg_clear(&m);
		fflush(stdout);
	}
	return 0;
}

/* Parse options anywhere (the one argv walker, getopt_long's rules);
   positional words go to pos, at most two. -1 on misuse. */
static int
cachecmd_opts(int argc, char **argv, struct cachecmd *o, char **pos)
{
	static const struct opts_long tab[] = {
		{ "sync-socket=", 's' },
		{ "socket=", 's' },
		{ "timeout=", 't' },
		{ "prefix=", 'p' },
		{ "since=", 'S' },
		{ "count=", 'c' },
	};
	struct opts w;
	int c, n = 0, t;

	opts_init(&w, argc, argv, "", tab, nitems(tab));
	while ((c = opts_next(&w)) != OPTS_END) {
		switch (c) {
		case 's': o->socket = w.arg; break;
		case 't':
			if (parse_int(w.arg, 1, 600000, &t) < 0)
				return -1;
			o->timeout_ms = (unsigned)t;
			break;
		case 'p': o->prefix = w.arg; break;
		case 'S':
			if (parse_uint64(w.arg, UINT64_MAX, &o->since) < 0)
				return -1;
			break;
		case 'c':
			if (parse_int(w.arg, 0, 1000000000, &t) < 0)
				return -1;
			o->count = t;
			break;
		default:
			fprintf(stderr, "%s\n", w.err);	/* OPTS_ERR */
			return -1;
		}
	}
	for (int i = w.ind; i < argc; i++) {
		if (n == 2)
			return -1;
		pos[n++] = argv[i];
	}
	return n;
}

/* kpgpuctl cache ... */
int
ctl_cmd_cache(int argc, char **argv)
{
	struct cachecmd o = { NULL, CACHE_DEFAULT_TIMEOUT, NULL, 0, -1 };
	struct ipc_call *s;
	char *pos[2];
	int n, r;

	if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
		cachecmd_usage(stdout);
		return 0;
	}
	n = cachecmd_opts(argc, argv, &o, pos);
	if (n < 1 || !((strcmp(pos[0], "list") == 0 && n == 1) ||
	    (strcmp(pos[0], "get") == 0 && n == 2) ||
	    (strcmp(pos[0], "status") == 0 && n == 1) ||
	    (strcmp(pos[0], "watch") == 0 && n == 1))) {
		cachecmd_usage(stderr);
		return 2;
	}
	o.socket = ctl_sync_socket(o.socket);
	if ((r = ipc_call_open(o.socket, IPC_ROLE_CTL, NULL, 0,
	    o.timeout_ms, &s)) < 0) {
		fprintf(stderr, "kpgpuctl cache: cannot reach %s: %s\n",
		    o.socket, strerror(-r));
		return 1;
	}
	if (strcmp(pos[0], "list") == 0)
		r = cachecmd_list(&o, s);
	else if (strcmp(pos[0], "get") == 0)
		r = cachecmd_get(&o, s, pos[1]);
	else if (strcmp(pos[0], "watch") == 0)
		r = cachecmd_watch(&o, s);
	else
		r = cachecmd_status(&o, s);
	ipc_call_close(s);
	return r;
}
