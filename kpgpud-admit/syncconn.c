/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-admit's link to kpgpud-sync: see syncconn.h. The change stream is
 * ipc/sub.c's (it logs the link's state changes); this glue applies it to
 * the nscache and logs what happens there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "ipc/ipc.h"
#include "kpgpud-admit/syncconn.h"

#define SC_SUBSCRIBE_MS		5000
#define SC_STATUS_MS		2000
#define SC_STATUS_EVERY_MS	5000

struct syncconn {
	struct event_base	*base;
	struct ipc_sub		*sub;		/* the Namespace change stream */
	struct nscache		*cache;
	struct metric		*gauge;
	bool			 full;		/* a full snapshot is arriving */
	bool			 status_pending;
	bool			 synced;	/* sync's own STATUS */
	uint64_t		 last_status_ms;
	atomic_bool		 connected;
	atomic_bool		 ready;
};

struct sc_lookup {
	struct syncconn		*s;
	syncconn_lookup_fn	 cb;
	void			*arg;
	char			 ns[IPC_NS_MAX + 1];
};

/* Recompute the flags the workers read. */
static void
publish(struct syncconn *s)
{
	bool conn = ipc_client_connected(ipc_sub_client(s->sub));

	atomic_store(&s->connected, conn);
	atomic_store(&s->ready, conn && ipc_sub_state(s->sub) ==
	    IPC_SUB_LIVE && s->synced);
	metric_set(s->gauge, NULL, NULL, conn ? 1 : 0);
}

/* Apply one Namespace change to the map. */
static void
on_change(struct ipc_sub *sub, const struct ipc_change *c, void *arg)
{
	struct syncconn *s = arg;
	char err[256];
	int rv;

	(void)sub;
	if (strcmp(c->kind, "Namespace") != 0)
		return;
	if (c->deleted) {
		nscache_delete(s->cache, c->name);
		return;
	}
	rv = nscache_put(s->cache, c->name, c->isolated, c->resolved, err,
	    sizeof(err));
	if (rv == -EINVAL)
		log_warn("namespace unusable namespace=%s reason=%s",
		    log_q(c->name), log_q(err));
	else if (rv < 0)
		log_err("namespace not cached namespace=%s error=%s",
		    log_q(c->name), strerror(-rv));
}

/* SNAPSHOT_BEGIN: a full snapshot replaces the map at its end. */
static void
on_begin(struct ipc_sub *sub, bool full, uint64_t generation, void *arg)
{
	struct syncconn *s = arg;

	(void)sub;
	(void)generation;
	if (s->full)
		nscache_abort_full(s->cache);
	s->full = full;
	if (full)
		nscache_begin_full(s->cache);
}

/* SNAPSHOT_END: drop what a full snapshot did not name; maybe ready. */
static void
on_end(struct ipc_sub *sub, uint64_t generation, void *arg)
{
	struct syncconn *s = arg;
	size_t dropped;

	(void)sub;
	if (s->full) {
		dropped = nscache_end_full(s->cache);
		s->full = false;
		log_info("namespace snapshot applied namespaces=%zu dropped=%zu "
		    "generation=%llu", nscache_count(s->cache), dropped,
		    (unsigned long long)generation);
	}
	publish(s);
}

/* HELLO_OK: poll STATUS (the subscriber sends SUBSCRIBE). */
static void
on_connected(struct ipc_sub *sub, void *arg)
{
	struct syncconn *s = arg;

	(void)sub;
	s->synced = false;
	s->status_pending = false;
	s->last_status_ms = 0;
	publish(s);
	syncconn_tick(s);
}

/* The link is gone; the map stays as it is. */
static void
on_disconnected(struct ipc_sub *sub, int err, bool mid_snapshot, void *arg)
{
	struct syncconn *s = arg;

	(void)sub;
	(void)err;
	(void)mid_snapshot;
	s->synced = false;
	s->status_pending = false;
	if (s->full) {
		/* An unfinished snapshot must not drop what we knew. */
		nscache_abort_full(s->cache);
		s->full = false;
	}
	publish(s);
}

/* Create the link and start connecting; see syncconn.h. */
int
syncconn_new(struct event_base *base, const struct syncconn_config *cfg,
    struct nscache *cache, struct syncconn **ret)
{
	struct ipc_sub_config sc;
	struct syncconn *s;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->base = base;
	s->cache = cache;
	s->gauge = cfg->connected_gauge;
	memset(&sc, 0, sizeof(sc));
	sc.client.path = cfg->path;
	sc.client.role = IPC_ROLE_ADMIT;
	sc.client.nserver_uids = cfg->nuids < IPC_UIDS_MAX ? cfg->nuids :
	    IPC_UIDS_MAX;
	memcpy(sc.client.server_uids, cfg->uids,
	    sc.client.nserver_uids * sizeof(uid_t));
	sc.client.backoff_min_ms = 50;
	sc.client.backoff_max_ms = cfg->backoff_max_ms ? cfg->backoff_max_ms :
	    400;
	sc.topics = IPC_TOPIC_NAMESPACES;
	sc.timeout_ms = SC_SUBSCRIBE_MS;
	sc.on_connected = on_connected;
	sc.on_begin = on_begin;
	sc.on_change = on_change;
	sc.on_end = on_end;
	sc.on_disconnected = on_disconnected;
	sc.arg = s;
	if ((rv = ipc_sub_new(base, &sc, &s->sub)) < 0 ||
	    (rv = ipc_sub_start(s->sub)) < 0) {
		ipc_sub_free(s->sub);
		free(s);
		return rv;
	}
	publish(s);
	*ret = s;
	return 0;
}

/* Disconnect and free (NULL ok). */
void
syncconn_free(struct syncconn *s)
{
	if (s == NULL)
		return;
	ipc_sub_free(s->sub);
	free(s);
}

/* Whether sync is connected. */
bool
syncconn_connected(const struct syncconn *s)
{
	return atomic_load(&((struct syncconn *)s)->connected);
}

/* Whether sync is connected, subscribed and its cache synced. */
bool
syncconn_ready(const struct syncconn *s)
{
	return atomic_load(&((struct syncconn *)s)->ready);
}

/* NS_RESULT (or a failure) for one lookup. */
static void
on_lookup(struct ipc_client *c, int err, const struct ipc_msg *reply,
    void *arg)
{
	struct sc_lookup *l = arg;
	struct syncconn_answer a = { .err = err };
	const struct ipc_ns_result *r;
	char why[256];

	(void)c;
	if (err == 0 && (reply == NULL || reply->type != IPC_NS_RESULT))
		a.err = -EPROTO;
	if (a.err == 0) {
		r = &reply->u.ns_result;
		a.found = r->found;
		a.isolated = r->found && r->isolated;
		if (r->resolved != NULL && (a.resolved = strdup(r->resolved))
		    == NULL)
			a.err = -ENOMEM;
		if (a.err == 0 && r->found && nscache_put(l->s->cache, l->ns,
		    a.isolated, a.resolved, why, sizeof(why)) == -EINVAL)
			log_warn("namespace unusable namespace=%s reason=%s",
			    log_q(l->ns), log_q(why));
	}
	l->cb(&a, l->arg);
	free(l);
}

/* Ask sync about ns; see syncconn.h. */
void
syncconn_lookup(struct syncconn *s, const char *ns, unsigned timeout_ms,
    syncconn_lookup_fn cb, void *arg)
{
	struct syncconn_answer a = { .err = -ENOMEM };
	struct sc_lookup *l;
	struct ipc_msg m;

	if ((l = calloc(1, sizeof(*l))) == NULL) {
		cb(&a, arg);
		return;
	}
	l->s = s;
	l->cb = cb;
	l->arg = arg;
	snprintf(l->ns, sizeof(l->ns), "%s", ns);
	memset(&m, 0, sizeof(m));
	m.type = IPC_NS_LOOKUP;
	snprintf(m.u.ns_lookup.ns, sizeof(m.u.ns_lookup.ns), "%s", ns);
	a.err = ipc_client_request(ipc_sub_client(s->sub), &m,
	    timeout_ms ? timeout_ms : 1, on_lookup, l, NULL);
	if (a.err < 0) {
		free(l);
		cb(&a, arg);
	}
}

/* STATUS_RESULT: whether sync's cache is synced. */
static void
on_status(struct ipc_client *c, int err, const struct ipc_msg *reply,
    void *arg)
{
	struct syncconn *s = arg;

	(void)c;
	if (err == -ECANCELED)
		return;
	s->status_pending = false;
	if (err == 0 && reply != NULL && reply->type == IPC_STATUS_RESULT) {
		if (reply->u.status_result.synced != s->synced)
			log_info("sync cache synced=%s",
			    reply->u.status_result.synced ? "true" : "false");
		s->synced = reply->u.status_result.synced;
	}
	publish(s);
}

/* Housekeeping: poll STATUS. */
void
syncconn_tick(struct syncconn *s)
{
	struct ipc_msg m;
	uint64_t now = monotonic_ms();

	publish(s);
	if (!ipc_client_connected(ipc_sub_client(s->sub)))
		return;
	if (s->status_pending || (s->synced &&
	    now - s->last_status_ms < SC_STATUS_EVERY_MS))
		return;
	memset(&m, 0, sizeof(m));
	m.type = IPC_STATUS;
	if (ipc_client_request(ipc_sub_client(s->sub), &m, SC_STATUS_MS,
	    on_status, s, NULL) == 0) {
		s->status_pending = true;
		s->last_status_ms = now;
	}
}
