/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_sync: plays kpgpud-sync for kpgpud-admit's integration tests, over
 * the real IPC server code (ipc/server.c), so admit's side of the protocol
 * is exercised end to end without the API server.
 *
 *   fake_sync [--lookup-delay MS] [--unsynced] SOCKET NSFILE [APIFILE]
 *
 * NSFILE holds the namespaces sync "knows", one per line:
 *	NAME isolated RESOLVED-JSON    or    NAME open
 * They make the SUBSCRIBE snapshot and answer NS_LOOKUP. APIFILE (optional,
 * same format) holds namespaces only a read-through would find (from_api).
 * SIGHUP re-reads NSFILE and pushes the differences to subscribers as
 * CHANGEs (deletions included). NS_LOOKUP answers wait --lookup-delay ms.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/log.h"
#include "ipc/ipc.h"

#define FS_MAX	256

struct fs_ns {
	char	 name[64];
	bool	 isolated;
	char	*resolved;
};

struct fs_table {
	struct fs_ns	 ns[FS_MAX];
	int		 n;
};

struct fs_sub {
	struct ipc_conn	*conn;
	bool		 used;
};

struct fs {
	struct event_base	*base;
	struct ipc_server	*srv;
	const char		*nsfile;
	const char		*apifile;
	struct fs_table		 known;
	uint64_t		 generation;
	unsigned		 delay_ms;
	bool			 unsynced;
	struct fs_sub		 subs[16];
};

struct fs_delayed {
	struct fs		*fs;
	struct ipc_req		*req;
	char			 ns[64];
};

/* Free a table's strings. */
static void
table_clear(struct fs_table *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->ns[i].resolved);
	t->n = 0;
}

/* Read a namespace file into t (a missing file is an empty table). */
static void
table_load(const char *path, struct fs_table *t)
{
	char line[9000];
	FILE *f;

	t->n = 0;
	if (path == NULL || (f = fopen(path, "r")) == NULL)
		return;
	while (t->n < FS_MAX && fgets(line, sizeof(line), f) != NULL) {
		struct fs_ns *e = &t->ns[t->n];
		char kind[16], *json;

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || sscanf(line, "%63s %15s", e->name,
		    kind) != 2)
			continue;
		e->isolated = strcmp(kind, "isolated") == 0;
		json = strchr(strchr(line, ' ') + 1, ' ');
		e->resolved = e->isolated && json != NULL ? strdup(json + 1) :
		    NULL;
		t->n++;
	}
	fclose(f);
}

/* The entry called name in t, or NULL. */
static struct fs_ns *
table_find(struct fs_table *t, const char *name)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->ns[i].name, name) == 0)
			return &t->ns[i];
	return NULL;
}

/* Fill a CHANGE for e (or a deletion of name). */
static void
change_of(struct fs *fs, struct ipc_msg *m, const char *name,
    const struct fs_ns *e)
{
	memset(m, 0, sizeof(*m));
	m->type = IPC_CHANGE;
	m->u.change.generation = ++fs->generation;
	m->u.change.topic = IPC_TOPIC_NAMESPACES;
	snprintf(m->u.change.kind, sizeof(m->u.change.kind), "Namespace");
	snprintf(m->u.change.ns, sizeof(m->u.change.ns), "%s", name);
	snprintf(m->u.change.name, sizeof(m->u.change.name), "%s", name);
	m->u.change.deleted = e == NULL;
	m->u.change.isolated = e != NULL && e->isolated;
	m->u.change.resolved = e != NULL ? e->resolved : NULL;
}

/* Send m to every subscriber. */
static void
broadcast(struct fs *fs, const struct ipc_msg *m)
{
	for (size_t i = 0; i < sizeof(fs->subs) / sizeof(fs->subs[0]); i++)
		if (fs->subs[i].used)
			ipc_conn_send(fs->subs[i].conn, m);
}

/* SIGHUP: re-read NSFILE and push what changed. */
static void
on_hup(evutil_socket_t fd, short what, void *arg)
{
	struct fs *fs = arg;
	struct fs_table *next = calloc(1, sizeof(*next));
	struct ipc_msg m;

	(void)fd;
	(void)what;
	table_load(fs->nsfile, next);
	for (int i = 0; i < fs->known.n; i++)
		if (table_find(next, fs->known.ns[i].name) == NULL) {
			change_of(fs, &m, fs->known.ns[i].name, NULL);
			broadcast(fs, &m);
		}
	for (int i = 0; i < next->n; i++) {
		struct fs_ns *old = table_find(&fs->known, next->ns[i].name);

		if (old != NULL && old->isolated == next->ns[i].isolated &&
		    ((old->resolved == NULL && next->ns[i].resolved == NULL) ||
		    (old->resolved && next->ns[i].resolved &&
		    strcmp(old->resolved, next->ns[i].resolved) == 0)))
			continue;
		change_of(fs, &m, next->ns[i].name, &next->ns[i]);
		broadcast(fs, &m);
	}
	table_clear(&fs->known);
	fs->known = *next;
	free(next);
	log_notice("reloaded namespaces=%d generation=%llu", fs->known.n,
	    (unsigned long long)fs->generation);
}

/* SUBSCRIBE: a full snapshot of the known table, then live changes. */
static void
h_subscribe(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct fs *fs = arg;
	struct ipc_conn *conn = ipc_req_conn(req);
	struct ipc_msg m;
	size_t i;

	(void)msg;
	memset(&m, 0, sizeof(m));
	m.type = IPC_SNAPSHOT_BEGIN;
	m.u.snapshot.generation = fs->generation;
	m.u.snapshot.full = true;
	if (ipc_req_reply(req, &m) < 0)
		return;
	for (int k = 0; k < fs->known.n; k++) {
		change_of(fs, &m, fs->known.ns[k].name, &fs->known.ns[k]);
		fs->generation--;	/* snapshot items are not new changes */
		m.u.change.generation = fs->generation;
		ipc_conn_send(conn, &m);
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_SNAPSHOT_END;
	m.u.snapshot.generation = fs->generation;
	ipc_conn_send(conn, &m);
	for (i = 0; i < sizeof(fs->subs) / sizeof(fs->subs[0]); i++)
		if (!fs->subs[i].used) {
			fs->subs[i].used = true;
			fs->subs[i].conn = conn;
			ipc_conn_set_data(conn, &fs->subs[i]);
			break;
		}
}

/* Answer one NS_LOOKUP from the known table, then the API table. */
static void
answer_lookup(struct fs *fs, struct ipc_req *req, const char *name)
{
	struct fs_table api;
	struct fs_ns *e = table_find(&fs->known, name);
	struct ipc_msg m;
	bool from_api = false;

	memset(&api, 0, sizeof(api));
	if (e == NULL) {
		table_load(fs->apifile, &api);
		e = table_find(&api, name);
		from_api = e != NULL;
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_NS_RESULT;
	m.u.ns_result.found = e != NULL;
	m.u.ns_result.isolated = e != NULL && e->isolated;
	m.u.ns_result.resolved = e != NULL ? e->resolved : NULL;
	m.u.ns_result.generation = fs->generation;
	m.u.ns_result.from_api = from_api;
	ipc_req_reply(req, &m);
	table_clear(&api);
}

/* A delayed lookup's time has come. */
static void
delayed_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fs_delayed *d = arg;

	(void)fd;
	(void)what;
	answer_lookup(d->fs, d->req, d->ns);
	free(d);
}

/* NS_LOOKUP, now or after --lookup-delay. */
static void
h_lookup(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct fs *fs = arg;
	struct timeval tv = { fs->delay_ms / 1000,
	    (fs->delay_ms % 1000) * 1000 };
	struct fs_delayed *d;

	log_info("lookup namespace=%s", msg->u.ns_lookup.ns);
	if (fs->delay_ms == 0 || (d = calloc(1, sizeof(*d))) == NULL) {
		answer_lookup(fs, req, msg->u.ns_lookup.ns);
		return;
	}
	d->fs = fs;
	d->req = req;
	snprintf(d->ns, sizeof(d->ns), "%s", msg->u.ns_lookup.ns);
	event_base_once(fs->base, -1, EV_TIMEOUT, delayed_cb, d, &tv);
}

/* STATUS: synced unless --unsynced. */
static void
h_status(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct fs *fs = arg;
	struct ipc_msg m;

	(void)msg;
	memset(&m, 0, sizeof(m));
	m.type = IPC_STATUS_RESULT;
	m.u.status_result.synced = !fs->unsynced;
	m.u.status_result.generation = fs->generation;
	ipc_req_reply(req, &m);
}

/* A peer went away: forget its subscription. */
static void
on_close(struct ipc_conn *conn, void *arg)
{
	struct fs_sub *sub = ipc_conn_data(conn);

	(void)arg;
	if (sub != NULL)
		sub->used = false;
}

/* SIGTERM: leave the loop. */
static void
on_term(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopexit(arg, NULL);
}

int
main(int argc, char **argv)
{
	static struct fs fs;
	struct ipc_server_config cfg;
	struct event *hup, *term;
	int i = 1;

	log_init("fake_sync", false);
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++)
		if (strcmp(argv[i], "--lookup-delay") == 0 && i + 1 < argc)
			fs.delay_ms = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--unsynced") == 0)
			fs.unsynced = true;
	if (argc - i < 2)
		fatal("usage: fake_sync [--lookup-delay MS] [--unsynced] SOCKET "
		    "NSFILE [APIFILE]");
	fs.nsfile = argv[i + 1];
	fs.apifile = argc - i > 2 ? argv[i + 2] : NULL;
	fs.generation = 100;
	table_load(fs.nsfile, &fs.known);
	signal(SIGPIPE, SIG_IGN);
	fs.base = event_base_new();
	memset(&cfg, 0, sizeof(cfg));
	cfg.path = argv[i];
	cfg.listen_fd = -1;
	cfg.role = IPC_ROLE_SYNC;
	cfg.allowed_types = IPC_BIT(IPC_PING) | IPC_BIT(IPC_NS_LOOKUP) |
	    IPC_BIT(IPC_SUBSCRIBE) | IPC_BIT(IPC_STATUS);
	cfg.on_close = on_close;
	cfg.arg = &fs;
	if (ipc_server_new(fs.base, &cfg, &fs.srv) < 0)
		fatal("cannot serve %s", argv[i]);
	ipc_server_handle(fs.srv, IPC_SUBSCRIBE, h_subscribe, &fs);
	ipc_server_handle(fs.srv, IPC_NS_LOOKUP, h_lookup, &fs);
	ipc_server_handle(fs.srv, IPC_STATUS, h_status, &fs);
	hup = evsignal_new(fs.base, SIGHUP, on_hup, &fs);
	term = evsignal_new(fs.base, SIGTERM, on_term, fs.base);
	evsignal_add(hup, NULL);
	evsignal_add(term, NULL);
	log_notice("serving socket=%s namespaces=%d", argv[i], fs.known.n);
	event_base_dispatch(fs.base);
	ipc_server_free(fs.srv);
	event_free(hup);
	event_free(term);
	table_clear(&fs.known);
	event_base_free(fs.base);
	return 0;
}
