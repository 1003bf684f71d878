/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inputs of kpgpud-quota: the SQLite cache opened read-only, the
 * change stream of kpgpud-sync (SUBSCRIBE on sync.sock, resumed from the
 * last generation after a reconnect) and the full enqueue that a resync,
 * a full snapshot or a new leadership triggers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/topology_src.h"
#include "cache/cache.h"

#define SUBSCRIBE_MS	10000

/* The cache, opened on first use; NULL (logged once) while absent. */
struct cache *
quotad_cache(struct quotad *q)
{
	int r;

	if (q->cache != NULL)
		return q->cache;
	r = cache_open(q->cfg.cache_path, CACHE_OPEN_RDONLY, &q->cache);
	if (r < 0) {
		if (!q->cache_warned)
			log_warn("cache not readable yet path=%s error=%s",
			    log_q(q->cfg.cache_path), strerror(-r));
		q->cache_warned = true;
		q->cache = NULL;
		return NULL;
	}
	log_info("cache opened path=%s", log_q(q->cfg.cache_path));
	q->cache_warned = false;
	return q->cache;
}

/* The tenant namespace of an instance. */
const char *
quotad_tenant_ns(const struct quotad *q, const char *inst_ns,
    const char *inst_name)
{
	return q->cfg.plan.ns_from_namespace ? inst_ns : inst_name;
}

/* Copy a cache string into a fixed buffer; -EINVAL when too long. */
static int
ccopy(char *dst, size_t len, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= len)
		return -EINVAL;
	memcpy(dst, src ? src : "", n + 1);
	return 0;
}

/* A cached instance as the plan's input. */
int
quotad_instance(const struct cache_instance *ci, struct plan_instance *ret)
{
	const char *slash = strrchr(ci->gvr, '/');
	size_t gv = slash ? (size_t)(slash - ci->gvr) : 0;
	size_t n;

	memset(ret, 0, sizeof(*ret));
	if (gv == 0 || gv >= sizeof(ret->api_version))
		return -EINVAL;
	memcpy(ret->api_version, ci->gvr, gv);
	if (ccopy(ret->kind, sizeof(ret->kind), ci->kind) < 0 ||
	    ccopy(ret->name, sizeof(ret->name), ci->name) < 0 ||
	    ccopy(ret->namespace, sizeof(ret->namespace), ci->ns) < 0 ||
	    ccopy(ret->uid, sizeof(ret->uid), ci->uid) < 0 ||
	    ccopy(ret->created, sizeof(ret->created), ci->created) < 0)
		return -EINVAL;
	if (ci->isolation != NULL) {
		ret->has_annotation = true;
		ret->annotation_len = strlen(ci->isolation);
		n = ret->annotation_len > ANNOTATION_MAX_LEN ?
		    ANNOTATION_MAX_LEN : ret->annotation_len;
		memcpy(ret->annotation, ci->isolation, n);
		ret->annotation[n] = '\0';
	}
	return 0;
}

struct cands_ctx {
	const struct quotad	*q;
	const char		*ns;
	struct quotad_cands	*c;
	struct cache		*cache;
};

/* Keep an instance that asks for isolation of the namespace. */
static int
cand_cb(const struct cache_instance *ci, void *arg)
{
	struct cands_ctx *x = arg;
	struct quotad_cands *c = x->c;
	const char *t = quotad_tenant_ns(x->q, ci->ns, ci->name);

	if (ci->isolation == NULL || ci->deleted != NULL ||
	    strcmp(t, x->ns) != 0 || c->n >= QUOTAD_MAX_CANDIDATES)
		return 0;
	if (quotad_instance(ci, &c->in[c->n]) < 0 ||
	    ccopy(c->rv[c->n], sizeof(c->rv[0]), ci->rv) < 0)
		return 0;
	c->n++;
	return 0;
}

/* One instance the topology index names for the tenant: its row. */
static int
cand_key_cb(const char *gvr, const char *ns, const char *name, void *arg)
{
	struct cands_ctx *x = arg;
	struct cache_instance *ci;
	int r;

	if ((r = cache_instance_get(x->cache, gvr, ns, name, &ci)) < 0)
		return r == -ENOENT ? 0 : r;	/* gone since the pass */
	r = cand_cb(ci, x);
	cache_instance_free(ci);
	return r;
}

/*
 * The instances that want ns isolated: the tenant's own rows through the
 * topology index (kept by the pass that runs before every plan), or every
 * instance row when the index cannot tell.
 */
int
quotad_candidates(struct quotad *q, const char *ns, struct quotad_cands *ret)
{
	struct cache *c = quotad_cache(q);
	struct cands_ctx x = { q, ns, ret, c };
	int r;

	ret->n = 0;
	if (c == NULL)
		return -ENOENT;
	if ((r = quotad_topo_instances(q->topo, c, ns, cand_key_cb,
	    &x)) != -ENOENT)
		return r;
	ret->n = 0;
	return cache_instance_foreach(c, NULL, 0, cand_cb, &x);
}

/* Queue the namespace of a labelled or annotated Namespace row. */
static int
all_ns_cb(const struct cache_ns *ns, void *arg)
{
	if (ns->isolated || ns->resolved != NULL)
		queue_enqueue_ns(arg, ns->name);
	return 0;
}

/* Queue the tenant namespace of an instance. */
static int
all_inst_cb(const struct cache_instance *ci, void *arg)
{
	struct quotad *q = arg;

	queue_enqueue_ns(q, quotad_tenant_ns(q, ci->ns, ci->name));
	return 0;
}

/* Queue the namespace of an owned object. */
static int
all_owned_cb(const struct cache_owned *o, void *arg)
{
	if (o->ns[0] != '\0' && strcmp(o->kind, CACHE_KIND_ALLOC) != 0)
		queue_enqueue_ns(arg, o->ns);
	return 0;
}

/* Queue everything kpgpud has or may have something in. */
void
quotad_enqueue_all(struct quotad *q)
{
	struct cache *c;

	if (q->cfg.policies != NULL || q->cfg.mpolicies != NULL)
		queue_enqueue(q, QUOTAD_POLICIES_KEY);
	if ((c = quotad_cache(q)) == NULL)
		return;
	(void)cache_ns_foreach(c, 0, all_ns_cb, q);
	(void)cache_instance_foreach(c, NULL, 0, all_inst_cb, q);
	(void)cache_owned_foreach(c, NULL, NULL, 0, all_owned_cb, q);
	queue_enqueue(q, QUOTAD_GC_KEY);
}

/* One change from sync: queue what it affects. */
static void
on_change(struct quotad *q, const struct ipc_change *ch)
{
	switch (ch->topic) {
	case IPC_TOPIC_NAMESPACES:
		work_ns_seen(q, ch->name);
		queue_change_ns(q, ch, ch->name);
		break;
	case IPC_TOPIC_INSTANCES:
		queue_enqueue_ns(q, quotad_tenant_ns(q, ch->ns, ch->name));
		queue_enqueue(q, QUOTAD_GC_KEY);
		break;
	case IPC_TOPIC_OWNED:
		/* a fleet change moves topology domains of every tenant */
		if (strcmp(ch->kind, CACHE_KIND_DEVICECLASS) == 0 ||
		    strcmp(ch->kind, CACHE_KIND_SLICE) == 0) {
			quotad_enqueue_all(q);
			break;
		}
		/* allocations count when domains are handed out (resync) */
		if (strcmp(ch->kind, CACHE_KIND_ALLOC) == 0)
			break;
		queue_change_ns(q, ch, ch->ns);
		/* a claim or template gone may have held the last use */
		if (ch->deleted && strcmp(ch->kind, CACHE_KIND_QUOTA) != 0)
			queue_enqueue(q, QUOTAD_GC_KEY);
		break;
	default:
		break;
	}
}

/* SNAPSHOT_BEGIN: a full snapshot may mean a rebuilt cache. */
static void
on_begin(struct ipc_sub *s, bool full, uint64_t generation, void *arg)
{
	struct quotad *q = arg;

	(void)s;
	(void)generation;
	/* a snapshot gives rows, not every change: none is taken as ours */
	quotad_own_reset(q);
	if (full) {
		/*
		 * A full snapshot may come from a cache sync rebuilt (a removed
		 * or corrupt file replaced): reopen it, never read the old one.
		 */
		quotad_classes_free(&q->classes);
		cache_free(q->cache);
		q->cache = NULL;
		quotad_enqueue_all(q);
	}
}

/* A CHANGE from the stream. */
static void
on_stream_change(struct ipc_sub *s, const struct ipc_change *ch, void *arg)
{
	(void)s;
	on_change(arg, ch);
}

/* Connect to sync.sock and follow its change stream. */
int
quotad_src_start(struct quotad *q)
{
	struct ipc_sub_config sc;
	int r;

	memset(&sc, 0, sizeof(sc));
	sc.client.path = q->cfg.sync_socket;
	sc.client.role = IPC_ROLE_QUOTA;
	memcpy(sc.client.server_uids, q->cfg.sync_uids,
	    sizeof(sc.client.server_uids));
	sc.client.nserver_uids = q->cfg.nsync_uids;
	sc.topics = IPC_TOPIC_ALL;
	sc.timeout_ms = SUBSCRIBE_MS;
	sc.on_begin = on_begin;
	sc.on_change = on_stream_change;
	sc.arg = q;
	if ((r = ipc_sub_new(q->base, &sc, &q->sub)) < 0)
		return r;
	return ipc_sub_start(q->sub);
}

/* Disconnect from sync. */
void
quotad_src_stop(struct quotad *q)
{
	ipc_sub_free(q->sub);
	q->sub = NULL;
}
