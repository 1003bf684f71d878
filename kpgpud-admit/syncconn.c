/*
 * kpgpud-admit's link to kpgpud-sync: see syncconn.h. This is daemon glue on
 * the main loop, so it logs state changes itself (one line each).
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
	struct ipc_client	*client;
	struct nscache		*cache;
	struct metric		*gauge;
	uint64_t		 generation;	/* last generation applied */
	bool			 subscribed;	/* SNAPSHOT_BEGIN received */
	bool			 full;		/* ... and it was a full one */
	bool			 snapshot_done;	/* SNAPSHOT_END received */
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
	bool conn = ipc_client_connected(s->client);

	atomic_store(&s->connected, conn);
	atomic_store(&s->ready, conn && s->snapshot_done && s->synced);
	metric_set(s->gauge, NULL, NULL, conn ? 1 : 0);
}

/* Apply one Namespace change to the map. */
static void
apply_change(struct syncconn *s, const struct ipc_change *c)
{
	char err[256];
	int rv;

	if (c->generation > s->generation)
		s->generation = c->generation;
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

/* CHANGE and SNAPSHOT_END pushes. */
static void
on_push(struct ipc_client *c, const struct ipc_msg *m, void *arg)
{
	struct syncconn *s = arg;
	size_t dropped;

	(void)c;
	if (m->type == IPC_CHANGE) {
		apply_change(s, &m->u.change);
		return;
	}
	if (m->u.snapshot.generation > s->generation)
		s->generation = m->u.snapshot.generation;
	if (s->full) {
		dropped = nscache_end_full(s->cache);
		s->full = false;
		log_info("namespace snapshot applied namespaces=%zu dropped=%zu "
		    "generation=%llu", nscache_count(s->cache), dropped,
		    (unsigned long long)s->generation);
	}
	s->snapshot_done = true;
	publish(s);
}

/* The answer to SUBSCRIBE: SNAPSHOT_BEGIN, or a failure. */
static void
on_subscribed(struct ipc_client *c, int err, const struct ipc_msg *reply,
    void *arg)
{
	struct syncconn *s = arg;

	(void)c;
	if (err == -ECANCELED || err == -ECONNRESET)
		return;
	if (err < 0 || reply == NULL || reply->type != IPC_SNAPSHOT_BEGIN) {
		s->subscribed = false;
		log_warn("sync subscription failed error=%s; retrying on the "
		    "next tick", strerror(err < 0 ? -err : EPROTO));
		return;
	}
	s->subscribed = true;
	s->full = reply->u.snapshot.full;
	if (s->full)
		nscache_begin_full(s->cache);
}

/* Send SUBSCRIBE for namespaces since the last generation applied. */
static void
subscribe(struct syncconn *s)
{
	struct ipc_msg m;
	int rv;

	memset(&m, 0, sizeof(m));
	m.type = IPC_SUBSCRIBE;
	m.u.subscribe.topics = IPC_TOPIC_NAMESPACES;
	m.u.subscribe.since_generation = s->generation;
	s->subscribed = true;	/* until the answer says otherwise */
	rv = ipc_client_request(s->client, &m, SC_SUBSCRIBE_MS, on_subscribed,
	    s, NULL);
	if (rv < 0) {
		s->subscribed = false;
		log_warn("sync subscribe not sent error=%s", strerror(-rv));
	}
}

/* HELLO_OK: subscribe and poll STATUS. */
static void
on_connected(struct ipc_client *c, void *arg)
{
	struct syncconn *s = arg;

	(void)c;
	log_notice("sync connected generation=%llu",
	    (unsigned long long)s->generation);
	s->snapshot_done = false;
	s->synced = false;
	s->status_pending = false;
	s->last_status_ms = 0;
	subscribe(s);
	publish(s);
	syncconn_tick(s);
}

/* The link is gone; the map stays as it is. */
static void
on_disconnected(struct ipc_client *c, int err, void *arg)
{
	struct syncconn *s = arg;

	(void)c;
	log_warn("sync disconnected error=%s; answering from %zu known "
	    "namespaces", strerror(err < 0 ? -err : EIO),
	    nscache_count(s->cache));
	s->subscribed = false;
	s->snapshot_done = false;
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
	struct ipc_client_config cc;
	struct syncconn *s;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->base = base;
	s->cache = cache;
	s->gauge = cfg->connected_gauge;
	memset(&cc, 0, sizeof(cc));
	cc.path = cfg->path;
	cc.role = IPC_ROLE_ADMIT;
	cc.nserver_uids = cfg->nuids < IPC_UIDS_MAX ? cfg->nuids : IPC_UIDS_MAX;
	memcpy(cc.server_uids, cfg->uids, cc.nserver_uids * sizeof(uid_t));
	cc.backoff_min_ms = 50;
	cc.backoff_max_ms = cfg->backoff_max_ms ? cfg->backoff_max_ms : 400;
	cc.on_connected = on_connected;
	cc.on_disconnected = on_disconnected;
	cc.on_push = on_push;
	cc.arg = s;
	if ((rv = ipc_client_new(base, &cc, &s->client)) < 0 ||
	    (rv = ipc_client_start(s->client)) < 0) {
		ipc_client_free(s->client);
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
	ipc_client_free(s->client);
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
	a.err = ipc_client_request(s->client, &m, timeout_ms ? timeout_ms : 1,
	    on_lookup, l, NULL);
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

/* Housekeeping: resubscribe after a failure, poll STATUS. */
void
syncconn_tick(struct syncconn *s)
{
	struct ipc_msg m;
	uint64_t now = monotonic_ms();

	publish(s);
	if (!ipc_client_connected(s->client))
		return;
	if (!s->subscribed)
		subscribe(s);
	if (s->status_pending || (s->synced &&
	    now - s->last_status_ms < SC_STATUS_EVERY_MS))
		return;
	memset(&m, 0, sizeof(m));
	m.type = IPC_STATUS;
	if (ipc_client_request(s->client, &m, SC_STATUS_MS, on_status, s,
	    NULL) == 0) {
		s->status_pending = true;
		s->last_status_ms = now;
	}
}
