/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sync.sock: NS_LOOKUP (with a read-through GET bounded by the caller's
 * deadline), NS_LIST, SUBSCRIBE (snapshot then deltas) and STATUS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/fault.h"
#include "kube/kube.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/syncd.h"

#define LOOKUP_DEFAULT_MS	2000	/* read-through budget without deadline */

/* The current cache generation (0 if unreadable). */
static uint64_t
cur_generation(struct syncd *sd)
{
	uint64_t g = 0;

	(void)cache_generation(sd->cache, &g);
	return g;
}

/* The resolved annotation if it fits the protocol, else NULL. */
static char *
fit_resolved(const char *s)
{
	return s != NULL && strlen(s) <= IPC_RESOLVED_MAX ? (char *)s : NULL;
}

/* Answer a lookup with what we know of one namespace. */
static void
lookup_answer(struct syncd *sd, struct ipc_req *req, bool found,
    bool isolated, const char *resolved, bool from_api)
{
	struct ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = IPC_NS_RESULT;
	m.u.ns_result.found = found;
	m.u.ns_result.isolated = isolated;
	m.u.ns_result.resolved = fit_resolved(resolved);
	m.u.ns_result.generation = cur_generation(sd);
	m.u.ns_result.from_api = from_api;
	metric_inc(sd->m.lookups, !found ? "absent" : from_api ? "api" :
	    "cache", NULL);
	(void)ipc_req_reply(req, &m);
}

/* A read-through GET in flight. */
struct lookup {
	struct syncd	*sd;
	struct ipc_req	*req;
	struct kube_req	*kr;
	struct event	*timer;
	char		 ns[IPC_NS_MAX + 1];
};

/* Release a lookup (its request has been answered). */
static void
lookup_free(struct lookup *lk)
{
	lk->sd->nlookups--;
	if (lk->timer != NULL)
		event_free(lk->timer);
	free(lk);
}

/* The GET answered. */
static void
lookup_done(const struct kube_response *resp, void *arg)
{
	struct lookup *lk = arg;
	struct syncd *sd = lk->sd;
	struct sync_res res;
	struct sync_row row;
	const char *why;

	lk->kr = NULL;
	if (resp->status == 200 && resp->json != NULL) {
		sync_res_namespaces(&res);
		if (sync_row_from_json(&res, resp->json, &row, &why) == 0) {
			log_info("read-through namespace=%s isolated=%s",
			    log_q(lk->ns), row.u.ns.isolated ? "true" : "false");
			lookup_answer(sd, lk->req, true, row.u.ns.isolated,
			    row.u.ns.resolved, true);
			sync_row_clear(&row);
		} else
			(void)ipc_req_error(lk->req, EBADMSG,
			    "bad Namespace from the API: %s", why);
	} else if (resp->status == 404) {
		lookup_answer(sd, lk->req, false, false, NULL, true);
	} else {
		log_warn("read-through failed namespace=%s status=%ld "
		    "message=%s", log_q(lk->ns), resp->status,
		    log_q(resp->message));
		metric_inc(sd->m.lookups, "error", NULL);
		(void)ipc_req_error(lk->req, EIO, "API GET failed: status %ld",
		    resp->status);
	}
	lookup_free(lk);
}

/* The caller's deadline passed before the API answered. */
static void
lookup_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct lookup *lk = arg;

	(void)fd;
	(void)what;
	kube_request_cancel(lk->kr);
	log_warn("read-through timed out namespace=%s", log_q(lk->ns));
	metric_inc(lk->sd->m.lookups, "timeout", NULL);
	(void)ipc_req_error(lk->req, ETIMEDOUT,
	    "namespace not cached and the API did not answer in time");
	lookup_free(lk);
}

/* The peer went away: stop the GET. */
static void
lookup_cancel(struct ipc_req *req, void *arg)
{
	struct lookup *lk = arg;

	kube_request_cancel(lk->kr);
	log_info("read-through abandoned namespace=%s reason=\"peer gone\"",
	    log_q(lk->ns));
	(void)ipc_req_error(req, ECANCELED, "peer gone");
	lookup_free(lk);
}

/* Not cached: one GET of the Namespace within the caller's deadline. */
static void
lookup_read_through(struct syncd *sd, struct ipc_req *req, const char *ns)
{
	struct lookup *lk;
	struct timeval tv;
	uint32_t left = ipc_req_remaining_ms(req);
	char path[IPC_NS_MAX + 32];
	int r;

	if (left == UINT32_MAX)
		left = LOOKUP_DEFAULT_MS;
	/* answer a little before the caller gives up, so it hears why */
	left -= left / 10 < 100 ? left / 10 : 100;
	if (left == 0) {
		(void)ipc_req_error(req, ETIMEDOUT, "deadline already passed");
		return;
	}
	if (sd->nlookups >= SYNCD_MAX_LOOKUPS) {
		(void)ipc_req_error(req, EAGAIN, "too many lookups in flight");
		return;
	}
	if ((lk = calloc(1, sizeof(*lk))) == NULL) {
		(void)ipc_req_error(req, ENOMEM, "out of memory");
		return;
	}
	sd->nlookups++;
	lk->sd = sd;
	lk->req = req;
	snprintf(lk->ns, sizeof(lk->ns), "%s", ns);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", ns);
	if ((lk->timer = evtimer_new(sd->base, lookup_timeout, lk)) == NULL ||
	    (r = kube_request(sd->kc, "GET", path, NULL, NULL, 0, lookup_done,
	    lk, &lk->kr)) < 0) {
		(void)ipc_req_error(req, EIO, "cannot start the GET");
		lookup_free(lk);
		return;
	}
	tv.tv_sec = left / 1000;
	tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	evtimer_add(lk->timer, &tv);
	ipc_req_on_cancel(req, lookup_cancel, lk);
}

/* NS_LOOKUP: from the cache, else read through to the API. */
static void
h_lookup(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct syncd *sd = arg;
	const char *ns = msg->u.ns_lookup.ns;
	struct cache_ns *row;
	int r;

	if (!dns1123_label_valid(ns)) {
		(void)ipc_req_error(req, EINVAL, "not a namespace name");
		return;
	}
	if ((r = FAULT("sync.lookup")) < 0) {
		(void)ipc_req_error(req, -r, "fault sync.lookup");
		return;
	}
	r = cache_ns_get(sd->cache, ns, &row);
	if (r == 0) {
		lookup_answer(sd, req, true, row->isolated, row->resolved,
		    false);
		cache_ns_free(row);
	} else if (r == -ENOENT)
		lookup_read_through(sd, req, ns);
	else {
		log_err("cache lookup failed namespace=%s error=%s",
		    log_q(ns), strerror(-r));
		(void)ipc_req_error(req, -r, "cache read failed");
	}
}

/* Collects one NS_LIST page. */
struct list_page {
	const char		*prefix;
	size_t			 plen;
	unsigned		 limit;
	struct ipc_ns_list_result *res;
};

/* Add one namespace to the page, or stop at the end of the prefix. */
static int
list_row(const struct cache_ns *ns, void *arg)
{
	struct list_page *p = arg;
	struct ipc_ns_item *it;

	if (strncmp(ns->name, p->prefix, p->plen) != 0)
		return -ECANCELED;
	if (p->res->nitems == p->limit) {
		p->res->more = true;
		return -ECANCELED;
	}
	it = &p->res->items[p->res->nitems];
	snprintf(it->name, sizeof(it->name), "%s", ns->name);
	it->isolated = ns->isolated;
	it->resolved = NULL;
	p->res->nitems++;
	if (fit_resolved(ns->resolved) != NULL &&
	    (it->resolved = strdup(ns->resolved)) == NULL)
		return -ENOMEM;
	return 0;
}

/* NS_LIST: one page of namespaces after a name, with a prefix. */
static void
h_list(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct syncd *sd = arg;
	const struct ipc_ns_list *q = &msg->u.ns_list;
	struct ipc_ns_item items[IPC_LIST_MAX];
	struct ipc_msg m;
	struct list_page p;
	size_t i;
	int r;

	if (q->limit == 0 || q->limit > IPC_LIST_MAX) {
		(void)ipc_req_error(req, EINVAL, "limit out of range");
		return;
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_NS_LIST_RESULT;
	m.u.ns_list_result.items = items;
	p.prefix = q->prefix;
	p.plen = strlen(q->prefix);
	p.limit = q->limit;
	p.res = &m.u.ns_list_result;
	r = cache_ns_range(sd->cache, q->after, q->prefix, q->limit + 1,
	    list_row, &p);
	if (r < 0 && r != -ECANCELED)
		(void)ipc_req_error(req, -r, "cache read failed");
	else
		(void)ipc_req_reply(req, &m);
	for (i = 0; i < m.u.ns_list_result.nitems; i++)
		free(items[i].resolved);
}

/* Send one CHANGE to a peer; a full output buffer drops the peer. */
static int
push_change(struct ipc_conn *conn, uint64_t gen, uint32_t topic,
    const char *kind, const char *ns, const char *name, bool deleted,
    bool isolated, const char *resolved)
{
	struct ipc_msg m;

	memset(&m, 0, sizeof(m));
	m.type = IPC_CHANGE;
	m.u.change.generation = gen;
	m.u.change.topic = topic;
	snprintf(m.u.change.kind, sizeof(m.u.change.kind), "%s", kind);
	snprintf(m.u.change.ns, sizeof(m.u.change.ns), "%s", ns);
	snprintf(m.u.change.name, sizeof(m.u.change.name), "%s", name);
	m.u.change.deleted = deleted;
	m.u.change.isolated = isolated;
	m.u.change.resolved = fit_resolved(resolved);
	return ipc_conn_send(conn, &m);
}

struct snap {
	struct ipc_conn	*conn;
	uint32_t	 topics;
};

/* Snapshot callbacks: one CHANGE per row. */
static int
snap_ns(const struct cache_ns *ns, void *arg)
{
	struct snap *s = arg;

	return push_change(s->conn, ns->gen, IPC_TOPIC_NAMESPACES, "Namespace",
	    ns->name, ns->name, false, ns->isolated, ns->resolved);
}

static int
snap_in(const struct cache_instance *in, void *arg)
{
	struct snap *s = arg;

	return push_change(s->conn, in->gen, IPC_TOPIC_INSTANCES, in->kind,
	    in->ns, in->name, false, false, NULL);
}

static int
snap_ow(const struct cache_owned *o, void *arg)
{
	struct snap *s = arg;

	return push_change(s->conn, o->gen, IPC_TOPIC_OWNED, o->kind, o->ns,
	    o->name, false, false, NULL);
}

static int
snap_tomb(const struct cache_tomb *t, void *arg)
{
	struct snap *s = arg;
	uint32_t topic = t->table == CACHE_T_NS ? IPC_TOPIC_NAMESPACES :
	    t->table == CACHE_T_INSTANCE ? IPC_TOPIC_INSTANCES :
	    IPC_TOPIC_OWNED;

	if ((s->topics & topic) == 0)
		return 0;
	return push_change(s->conn, t->gen, topic, t->kind, t->ns, t->name,
	    true, false, NULL);
}

/* Push the rows (and for a delta the tombstones) changed after since. */
static int
snapshot_rows(struct syncd *sd, struct snap *s, uint64_t since, bool full)
{
	int r = 0;

	if (s->topics & IPC_TOPIC_NAMESPACES)
		r = cache_ns_foreach(sd->cache, since, snap_ns, s);
	if (r == 0 && (s->topics & IPC_TOPIC_INSTANCES))
		r = cache_instance_foreach(sd->cache, NULL, since, snap_in, s);
	if (r == 0 && (s->topics & IPC_TOPIC_OWNED))
		r = cache_owned_foreach(sd->cache, NULL, NULL, since, snap_ow,
		    s);
	if (r == 0 && !full)
		r = cache_tomb_foreach(sd->cache, since, snap_tomb, s);
	return r;
}

/* SUBSCRIBE: snapshot (full or since a generation), then live changes. */
static void
h_subscribe(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct syncd *sd = arg;
	struct ipc_conn *conn = ipc_req_conn(req);
	struct snap s = { conn, msg->u.subscribe.topics };
	uint64_t since = msg->u.subscribe.since_generation, gen, hz;
	struct syncd_sub *sub;
	struct ipc_msg m;
	bool full;
	int r;

	if (s.topics == 0 || (s.topics & ~IPC_TOPIC_ALL) != 0) {
		(void)ipc_req_error(req, EINVAL, "bad topics");
		return;
	}
	/* admit needs namespaces only (the privilege split) */
	if (conn != NULL && ipc_conn_role(conn) == IPC_ROLE_ADMIT &&
	    s.topics != IPC_TOPIC_NAMESPACES) {
		(void)ipc_req_error(req, EPERM, "role admit may subscribe to "
		    "namespaces only");
		return;
	}
	if (conn == NULL || ipc_conn_data(conn) != NULL) {
		(void)ipc_req_error(req, EBUSY, "already subscribed");
		return;
	}
	syncd_flush(sd);	/* the snapshot shows committed state */
	if ((r = FAULT("sync.subscribe")) < 0 ||
	    (r = cache_generation(sd->cache, &gen)) < 0 ||
	    (r = cache_horizon(sd->cache, &hz)) < 0 ||
	    (sub = calloc(1, sizeof(*sub))) == NULL) {
		(void)ipc_req_error(req, r < 0 ? -r : ENOMEM,
		    "cannot start the snapshot");
		return;
	}
	full = since == 0 || since < hz || since > gen;
	memset(&m, 0, sizeof(m));
	m.type = IPC_SNAPSHOT_BEGIN;
	m.u.snapshot.generation = gen;
	m.u.snapshot.full = full;
	if (ipc_req_reply(req, &m) < 0) {
		free(sub);
		return;	/* the peer is gone or being dropped */
	}
	if ((r = snapshot_rows(sd, &s, full ? 0 : since, full)) < 0) {
		/* a snapshot without its end would leave the peer waiting */
		free(sub);
		ipc_conn_close(conn, "snapshot failed");
		return;
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_SNAPSHOT_END;
	m.u.snapshot.generation = gen;
	if (ipc_conn_send(conn, &m) < 0) {
		free(sub);
		return;
	}
	sub->conn = conn;
	sub->topics = s.topics;
	ipc_conn_set_data(conn, sub);
	LIST_INSERT_HEAD(&sd->subs, sub, entry);
	sd->nsubs++;
	metric_set(sd->m.subscribers, NULL, NULL, (double)sd->nsubs);
	log_info("subscriber added pid=%ld role=%s topics=%u since=%llu "
	    "full=%s generation=%llu", (long)ipc_conn_cred(conn)->pid,
	    ipc_role_name(ipc_conn_role(conn)), s.topics,
	    (unsigned long long)since, full ? "true" : "false",
	    (unsigned long long)gen);
}

/* Append one count to a STATUS answer. */
static void
status_count(struct ipc_status_result *st, const char *kind, uint64_t n)
{
	if (st->ncounts >= IPC_COUNTS_MAX)
		return;
	snprintf(st->counts[st->ncounts].kind, sizeof(st->counts[0].kind),
	    "%s", kind);
	st->counts[st->ncounts++].count = n;
}

/* STATUS: synced, generation, object counts and a few counters. */
static void
h_status(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct syncd *sd = arg;
	struct ipc_count counts[16];
	struct cache_counts n;
	struct ipc_msg m;
	int r;

	(void)msg;
	if ((r = cache_counts(sd->cache, &n)) < 0) {
		(void)ipc_req_error(req, -r, "cache read failed");
		return;
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_STATUS_RESULT;
	m.u.status_result.synced = sd->synced;
	m.u.status_result.generation = cur_generation(sd);
	m.u.status_result.counts = counts;
	/* admit learns whether sync is synced, nothing about the objects */
	if (ipc_req_conn(req) != NULL &&
	    ipc_conn_role(ipc_req_conn(req)) == IPC_ROLE_ADMIT) {
		(void)ipc_req_reply(req, &m);
		return;
	}
	status_count(&m.u.status_result, "Namespace", n.namespaces);
	status_count(&m.u.status_result, "instance", n.instances);
	status_count(&m.u.status_result, CACHE_KIND_DEVICECLASS,
	    n.deviceclasses);
	status_count(&m.u.status_result, CACHE_KIND_CLAIMTEMPLATE,
	    n.claimtemplates);
	status_count(&m.u.status_result, CACHE_KIND_CLAIM, n.claims);
	status_count(&m.u.status_result, CACHE_KIND_QUOTA, n.quotas);
	status_count(&m.u.status_result, "subscribers", sd->nsubs);
	status_count(&m.u.status_result, "relists", sd->n_relists);
	status_count(&m.u.status_result, "watch_restarts", sd->n_restarts);
	status_count(&m.u.status_result, "api_errors", sd->n_api_errors);
	status_count(&m.u.status_result, "bad_objects", sd->n_bad_objects);
	status_count(&m.u.status_result, "commit_errors",
	    sd->n_commit_errors);
	(void)ipc_req_reply(req, &m);
}

/* A peer left: forget its subscription. */
static void
peer_closed(struct ipc_conn *conn, void *arg)
{
	struct syncd *sd = arg;
	struct syncd_sub *sub = ipc_conn_data(conn);

	if (sub == NULL)
		return;
	LIST_REMOVE(sub, entry);
	sd->nsubs--;
	metric_set(sd->m.subscribers, NULL, NULL, (double)sd->nsubs);
	ipc_conn_set_data(conn, NULL);
	free(sub);
}

/* Serve sync.sock. */
int
syncd_ipc_start(struct syncd *sd, const struct syncd_ipc_config *cfg)
{
	struct ipc_server_config sc;
	int r;

	if (cfg->nuids > IPC_UIDS_MAX)
		return -E2BIG;
	memset(&sc, 0, sizeof(sc));
	sc.path = cfg->path;
	sc.listen_fd = cfg->listen_fd;
	sc.role = IPC_ROLE_SYNC;
	memcpy(sc.uids, cfg->uids, cfg->nuids * sizeof(uid_t));
	sc.nuids = cfg->nuids;
	sc.allowed_roles = (1u << IPC_ROLE_ADMIT) | (1u << IPC_ROLE_QUOTA) |
	    (1u << IPC_ROLE_CTL);
	sc.allowed_types = IPC_BIT(IPC_PING) | IPC_BIT(IPC_NS_LOOKUP) |
	    IPC_BIT(IPC_NS_LIST) | IPC_BIT(IPC_SUBSCRIBE) |
	    IPC_BIT(IPC_STATUS) | IPC_BIT(IPC_USAGE) |
	    (FAULTS_ENABLED ? IPC_BIT(IPC_FAULT_ARM) : 0);
	/* admit looks namespaces up and subscribes to them, nothing else */
	sc.role_types[IPC_ROLE_ADMIT] = IPC_BIT(IPC_PING) |
	    IPC_BIT(IPC_NS_LOOKUP) | IPC_BIT(IPC_SUBSCRIBE) |
	    IPC_BIT(IPC_STATUS);
	/* the usage ledger is the operator's (ctl), not quota's */
	sc.role_types[IPC_ROLE_QUOTA] = sc.allowed_types & ~IPC_BIT(IPC_USAGE);
	for (int ro = 0; ro < IPC_ROLE_COUNT; ro++) {
		if (cfg->nrole_uids[ro] > IPC_UIDS_MAX)
			return -E2BIG;
		if (cfg->nrole_uids[ro] > 0)
			memcpy(sc.role_uids[ro], cfg->role_uids[ro],
			    cfg->nrole_uids[ro] * sizeof(uid_t));
		sc.nrole_uids[ro] = cfg->nrole_uids[ro];
	}
	sc.max_outbuf = cfg->max_outbuf;
	sc.on_close = peer_closed;
	sc.arg = sd;
	if ((r = ipc_server_new(sd->base, &sc, &sd->srv)) < 0)
		return r;
	ipc_server_handle(sd->srv, IPC_NS_LOOKUP, h_lookup, sd);
	ipc_server_handle(sd->srv, IPC_NS_LIST, h_list, sd);
	ipc_server_handle(sd->srv, IPC_SUBSCRIBE, h_subscribe, sd);
	ipc_server_handle(sd->srv, IPC_STATUS, h_status, sd);
	ipc_server_handle(sd->srv, IPC_USAGE, acct_ipc_usage, sd);
	return 0;
}

/* Close sync.sock and every peer. */
void
syncd_ipc_stop(struct syncd *sd)
{
	struct syncd_sub *sub;

	ipc_server_free(sd->srv);
	sd->srv = NULL;
	while ((sub = LIST_FIRST(&sd->subs)) != NULL) {
		LIST_REMOVE(sub, entry);
		free(sub);
	}
	sd->nsubs = 0;
}

/* Send one committed change to the subscribers of its topic. */
void
syncd_ipc_publish(struct syncd *sd, const struct syncd_change *ch)
{
	struct syncd_sub *sub;

	LIST_FOREACH(sub, &sd->subs, entry) {
		if ((sub->topics & ch->topic) == 0)
			continue;
		(void)push_change(sub->conn, ch->gen, ch->topic, ch->kind,
		    ch->ns, ch->name, ch->deleted, ch->isolated, ch->resolved);
	}
}
