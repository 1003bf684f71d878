/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology isolation, the cache half: read the fleet (ResourceSlices), the
 * tenants (instances and their annotations) and the stored assignment
 * (each tenant Namespace's PLAN_NS_TOPO_ANNOT) from kpgpud-sync's cache,
 * run the pure assignment (topology.c) and give one tenant its part.
 *
 * Devices allocated to claims (every claim's status.allocation, cached too)
 * keep their GPUs from being handed to a tenant of another namespace.
 *
 * The assignment is stored nowhere else: the leader writes each tenant's
 * domains onto its Namespace with the rest of the plan, so a restarted or
 * new leader reads them back (through the cache) and keeps them. A tenant
 * whose annotation became invalid, or whose instance is gone but whose
 * Namespace still carries domains, keeps those domains (asking for none
 * more) until kpgpud-quota removes the annotation with the tenant's other
 * objects.
 *
 * Every reconcile asks for one tenant's part, so the inputs are kept
 * between passes in an index that follows the cache by generation: a pass
 * reads only the rows and tombstones changed since the last one (every row
 * after a cache rebuild or when the tombstones no longer reach back), an
 * annotation is parsed once per change of its instance, and tenants are
 * found in a map by namespace. Only the tenants that ask for domains take
 * part in the assignment (a tenant of isolation device neither keeps nor
 * takes one, so it changes no other tenant's part), and it is computed
 * again only when one of them or the fleet changed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/strmap.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/topology.h"
#include "kpgpud-quota/topology_src.h"

#define TS_MAX_TENANTS		4096		/* tenants assigned domains */
#define TS_MAX_INSTANCES	(1u << 20)	/* annotated instances kept */
#define TS_NS_MAX		64		/* as topo_tenant.ns */
/* Instance keys: gvr, ns, name joined by a byte below any name's, so
   keys sort as the cache's (gvr, ns, name) order. */
#define TS_SEP			'\037'
#define TS_KEY_MAX		(CACHE_GVR_MAX + 2 * CACHE_KEY_MAX + 3)

/* What a valid annotation asks: topo_tenant's "in" part but ns and prev. */
struct ts_ask {
	enum annotation_isolation level;
	int			 want;
	bool			 mig;
	char			 profile[TOPO_STR_MAX + 1];
	char			 product[TOPO_STR_MAX + 1];
};

struct ts_ten;

/* A live annotated instance, its annotation parsed when its row changed. */
struct ts_inst {
	char			*key;		/* the map's key */
	struct ts_ten		*ten;
	struct ts_inst		*next;		/* the tenant's other instances */
	char			 created[40];
	bool			 valid;		/* the annotation parsed */
	struct ts_ask		 ask;
};

/* A tenant namespace: its annotated instances, its stored domains. */
struct ts_ten {
	char			 ns[TS_NS_MAX];	/* the map's key */
	struct ts_inst		*insts;
	struct ts_inst		*best;		/* oldest valid instance */
	char			*prev;		/* stored domains, or NULL */
	uint64_t		 epoch;		/* of the assignment slot is in */
	int			 slot;
};

struct quotad_topo {
	bool			 ns_from_namespace;
	struct strmap		*inst;		/* key -> ts_inst */
	struct strmap		*ten;		/* ns -> ts_ten */
	struct cache		*c;		/* the cache followed */
	uint64_t		 gen;		/* changes up to it are in; 0:
						   read every row next */
	int			 err;		/* of a callback */
	bool			 partial;	/* a live annotated instance
						   was left out (a cap) */
	struct topo_fleet	 fleet;
	bool			 fleet_stale;
	bool			 changed;	/* assign again */
	/* the assignment: tenants asking for domains, by priority */
	struct topo_tenant	*tt;		/* ntt, and room for one more */
	int			 ntt;
	uint64_t		 epoch;
	struct quotad_topo_stats st;
	/* metrics (NULL: none) and the counts they last had */
	struct metric		*m_rows, *m_parsed, *m_assigned;
	struct quotad_topo_stats shown;
};

/* Whether tenant t takes part in the assignment. */
static bool
ten_active(const struct ts_ten *t)
{
	if (t->best != NULL)
		return t->best->ask.level != ANNOTATION_ISOLATION_DEVICE;
	return t->prev != NULL;
}

/* Whether instance a is the tenant's choice over b: oldest, then key. */
static bool
inst_before(const struct ts_inst *a, const struct ts_inst *b)
{
	int r = strcmp(a->created, b->created);

	return r < 0 || (r == 0 && strcmp(a->key, b->key) < 0);
}

/* Choose the tenant's oldest valid instance again. */
static void
ten_choose(struct ts_ten *t)
{
	t->best = NULL;
	for (struct ts_inst *i = t->insts; i != NULL; i = i->next)
		if (i->valid && (t->best == NULL || inst_before(i, t->best)))
			t->best = i;
}

/* The tenant of namespace ns; created when new and create is set. */
static struct ts_ten *
ten_get(struct quotad_topo *s, const char *ns, bool create)
{
	struct ts_ten *t = strmap_get(s->ten, ns);
	int r;

	if (t != NULL || !create || strlen(ns) >= sizeof(t->ns))
		return t;
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		s->err = -ENOMEM;
		return NULL;
	}
	memcpy(t->ns, ns, strlen(ns) + 1);
	if ((r = strmap_put(s->ten, t->ns, t, NULL)) < 0) {
		if (r != -E2BIG)
			s->err = r;
		free(t);
		return NULL;
	}
	return t;
}

/* Forget tenant t once nothing keeps it. */
static void
ten_drop_if_empty(struct quotad_topo *s, struct ts_ten *t)
{
	if (t->insts != NULL || t->prev != NULL)
		return;
	strmap_remove(s->ten, t->ns, NULL);
	free(t);
}

/* Note a change of tenant t that was active before it (was). */
static void
ten_changed(struct quotad_topo *s, struct ts_ten *t, bool was)
{
	if (was || ten_active(t))
		s->changed = true;
}

/* Forget instance i. */
static void
inst_drop(struct quotad_topo *s, struct ts_inst *i)
{
	struct ts_ten *t = i->ten;
	struct ts_inst **pp;
	bool was = ten_active(t);

	for (pp = &t->insts; *pp != i; pp = &(*pp)->next)
		;
	*pp = i->next;
	strmap_remove(s->inst, i->key, NULL);
	if (t->best == i)
		ten_choose(t);
	ten_changed(s, t, was);
	free(i->key);
	free(i);
	ten_drop_if_empty(s, t);
}

/* A new instance entry of key for tenant ns; NULL past a cap. */
static struct ts_inst *
inst_new(struct quotad_topo *s, const char *key, const char *ns)
{
	struct ts_inst *i = calloc(1, sizeof(*i));
	struct ts_ten *t;
	int r = 0;

	if (i == NULL || (i->key = strdup(key)) == NULL) {
		free(i);
		s->err = -ENOMEM;
		return NULL;
	}
	if ((t = ten_get(s, ns, true)) == NULL ||
	    (r = strmap_put(s->inst, i->key, i, NULL)) < 0) {
		if (t != NULL && r != -E2BIG)
			s->err = r;
		if (t != NULL)
			ten_drop_if_empty(s, t);
		free(i->key);
		free(i);
		return NULL;
	}
	i->ten = t;
	i->next = t->insts;
	t->insts = i;
	return i;
}

/* One instance row (changed, or every one on a full read). */
static int
inst_cb(const struct cache_instance *ci, void *arg)
{
	struct quotad_topo *s = arg;
	const char *ns = s->ns_from_namespace ? ci->ns : ci->name;
	struct topo_tenant tt;
	struct annotation a;
	struct ts_inst *i;
	char key[TS_KEY_MAX], err[256];
	bool was, live = ci->isolation != NULL && ci->deleted == NULL;

	s->st.rows++;
	if ((size_t)snprintf(key, sizeof(key), "%s%c%s%c%s", ci->gvr, TS_SEP,
	    ci->ns, TS_SEP, ci->name) >= sizeof(key)) {
		s->partial |= live;
		return 0;
	}
	i = strmap_get(s->inst, key);
	if (!live || strlen(ns) >= TS_NS_MAX) {
		s->partial |= live;
		if (i != NULL)
			inst_drop(s, i);
		return 0;
	}
	if (i == NULL && (i = inst_new(s, key, ns)) == NULL) {
		s->partial |= s->err == 0;	/* past the cap */
		return s->err;
	}
	was = ten_active(i->ten);
	s->st.parsed++;
	i->valid = annotation_parse(ci->isolation, strlen(ci->isolation), &a,
	    err, sizeof(err)) == 0;
	if (i->valid) {
		topo_tenant_init(&tt, ns, &a, NULL);
		i->ask.level = tt.level;
		i->ask.want = tt.want;
		i->ask.mig = tt.mig;
		memcpy(i->ask.profile, tt.profile, sizeof(i->ask.profile));
		memcpy(i->ask.product, tt.product, sizeof(i->ask.product));
	}
	snprintf(i->created, sizeof(i->created), "%s", ci->created);
	if (i->ten->best == i)
		ten_choose(i->ten);	/* it may have become worse */
	else if (i->valid && (i->ten->best == NULL ||
	    inst_before(i, i->ten->best)))
		i->ten->best = i;
	ten_changed(s, i->ten, was);
	return 0;
}

/* The stored domains of Namespace name (annotations NULL: it is gone). */
static int
ns_put(struct quotad_topo *s, const char *name, const char *annotations)
{
	struct ts_ten *t;
	char *prev = NULL;
	json_t *an, *v;
	bool was;

	if (annotations != NULL && strstr(annotations, PLAN_NS_TOPO_ANNOT) !=
	    NULL && (an = json_loads(annotations, 0, NULL)) != NULL) {
		v = json_object_get(an, PLAN_NS_TOPO_ANNOT);
		if (json_is_string(v) && json_string_length(v) > 0 &&
		    (prev = strdup(json_string_value(v))) == NULL)
			s->err = -ENOMEM;
		json_decref(an);
	}
	if ((t = ten_get(s, name, prev != NULL)) == NULL ||
	    (prev == NULL && t->prev == NULL) || (prev != NULL &&
	    t->prev != NULL && strcmp(prev, t->prev) == 0)) {
		free(prev);
		return s->err;
	}
	was = ten_active(t);
	free(t->prev);
	t->prev = prev;
	ten_changed(s, t, was);
	ten_drop_if_empty(s, t);
	return s->err;
}

/* One Namespace row. */
static int
ns_cb(const struct cache_ns *ns, void *arg)
{
	struct quotad_topo *s = arg;

	s->st.rows++;
	return ns_put(s, ns->name, ns->annotations);
}

/* One owned row: a slice or an allocation changed the fleet. */
static int
owned_cb(const struct cache_owned *o, void *arg)
{
	struct quotad_topo *s = arg;

	s->st.rows++;
	if (strcmp(o->kind, CACHE_KIND_SLICE) == 0 ||
	    strcmp(o->kind, CACHE_KIND_ALLOC) == 0)
		s->fleet_stale = true;
	return 0;
}

/* One deletion since the last pass. */
static int
tomb_cb(const struct cache_tomb *tb, void *arg)
{
	struct quotad_topo *s = arg;
	struct cache_instance ci;
	struct cache_owned o;

	s->st.rows++;
	switch (tb->table) {
	case CACHE_T_NS:
		return ns_put(s, tb->name, NULL);
	case CACHE_T_INSTANCE:
		memset(&ci, 0, sizeof(ci));
		ci.gvr = tb->key;
		ci.ns = tb->ns;
		ci.name = tb->name;
		s->st.rows--;	/* counted once */
		return inst_cb(&ci, s);
	case CACHE_T_OWNED:
		memset(&o, 0, sizeof(o));
		o.kind = tb->kind;
		s->st.rows--;
		return owned_cb(&o, s);
	}
	return 0;
}

/* Free an instance entry (strmap_free). */
static void
inst_free(void *p)
{
	struct ts_inst *i = p;

	free(i->key);
	free(i);
}

/* Free a tenant entry (strmap_free). */
static void
ten_free(void *p)
{
	struct ts_ten *t = p;

	free(t->prev);
	free(t);
}

/* Forget every row: the next pass reads them all. */
static int
ts_reset(struct quotad_topo *s)
{
	strmap_free(s->inst, inst_free);
	strmap_free(s->ten, ten_free);
	s->inst = s->ten = NULL;
	s->gen = 0;
	s->partial = false;
	s->fleet_stale = s->changed = true;
	if (strmap_new(0, TS_MAX_INSTANCES, &s->inst) < 0 ||
	    strmap_new(0, TS_MAX_INSTANCES, &s->ten) < 0)
		return -ENOMEM;
	return 0;
}

/* Read what changed in c since the last pass (everything the first time). */
static int
ts_follow(struct quotad_topo *s, struct cache *c)
{
	uint64_t now, hz, since = s->gen;
	bool full;
	int r;

	if ((r = cache_generation(c, &now)) < 0 ||
	    (r = cache_horizon(c, &hz)) < 0)
		return r;
	full = s->c != c || since == 0 || since < hz || now < since;
	if (!full && now == since)
		return 0;
	s->st.passes++;
	s->err = 0;
	if (full) {
		s->st.full++;
		if ((r = ts_reset(s)) < 0)
			return r;
		since = 0;
	} else
		s->gen = 0;	/* until this read is complete */
	if ((since > 0 && (r = cache_tomb_foreach(c, since, tomb_cb, s)) < 0) ||
	    (r = cache_instance_foreach(c, NULL, since, inst_cb, s)) < 0 ||
	    (r = cache_ns_foreach(c, since, ns_cb, s)) < 0 ||
	    /* by kind: the rows of one kind are a range of the key */
	    (since > 0 && ((r = cache_owned_foreach(c, NULL, CACHE_KIND_SLICE,
	    since, owned_cb, s)) < 0 || (r = cache_owned_foreach(c, NULL,
	    CACHE_KIND_ALLOC, since, owned_cb, s)) < 0)) || (r = s->err) < 0)
		return r;
	s->c = c;
	s->gen = now;
	return 0;
}

/* A ResourceSlice's devices into the fleet. */
static int
slice_cb(const struct cache_owned *o, void *arg)
{
	struct topo_fleet *f = arg;
	json_t *d = json_loads(o->data, 0, NULL);
	int r;

	if (d == NULL)
		return 0;
	r = topo_fleet_add(f, d);
	json_decref(d);
	return r;
}

/* Devices held by claims: their GPUs go to no other tenant. */
static int
alloc_cb(const struct cache_owned *o, void *arg)
{
	struct topo_fleet *f = arg;
	json_t *d = json_loads(o->data, 0, NULL), *v;
	size_t i;
	int r = 0;

	json_array_foreach(json_object_get(d, "devices"), i, v) {
		const char *drv = json_string_value(json_object_get(v,
		    "driver"));

		if (drv != NULL && strcmp(drv, TOPO_DRIVER) == 0 &&
		    (r = topo_fleet_busy(f, json_string_value(
		    json_object_get(v, "pool")), json_string_value(
		    json_object_get(v, "device")), o->ns)) < 0)
			break;
	}
	json_decref(d);
	return r;
}

/* Read the fleet again. */
static int
ts_fleet(struct quotad_topo *s, struct cache *c)
{
	int r;

	topo_fleet_free(&s->fleet);
	if ((r = cache_owned_foreach(c, "", CACHE_KIND_SLICE, 0, slice_cb,
	    &s->fleet)) < 0 || (r = cache_owned_foreach(c, NULL,
	    CACHE_KIND_ALLOC, 0, alloc_cb, &s->fleet)) < 0) {
		topo_fleet_free(&s->fleet);
		return r;
	}
	s->fleet_stale = false;
	s->changed = true;
	return 0;
}

/* Fill tenant tt from the index's tenant t. */
static void
ts_tenant(struct topo_tenant *tt, const struct ts_ten *t)
{
	const struct ts_inst *b = t->best;

	memset(tt, 0, sizeof(*tt));
	memcpy(tt->ns, t->ns, sizeof(tt->ns));
	tt->prev = t->prev;
	if (b != NULL) {
		tt->level = b->ask.level;
		tt->want = b->ask.want;
		tt->mig = b->ask.mig;
		memcpy(tt->profile, b->ask.profile, sizeof(tt->profile));
		memcpy(tt->product, b->ask.product, sizeof(tt->product));
	} else if (t->prev != NULL)
		/* keep what it holds, ask for nothing more */
		tt->level = strncmp(t->prev, "root/", 5) == 0 ?
		    ANNOTATION_ISOLATION_PCIE_ROOT : ANNOTATION_ISOLATION_GPU;
}

/* Priority of two tenants asking for domains. */
static int
ts_cmp(const void *a, const void *b)
{
	const struct ts_ten *x = *(struct ts_ten *const *)a;
	const struct ts_ten *y = *(struct ts_ten *const *)b;
	int r;

	/* valid tenants by instance age; holders of stale domains first */
	if ((x->best != NULL) != (y->best != NULL))
		return x->best != NULL ? 1 : -1;
	if (x->best != NULL &&
	    (r = strcmp(x->best->created, y->best->created)) != 0)
		return r;
	return strcmp(x->ns, y->ns);
}

/* Drop the last assignment. */
static void
tt_clear(struct quotad_topo *s)
{
	for (int i = 0; i < s->ntt; i++)
		topo_tenant_clear(&s->tt[i]);
	free(s->tt);
	s->tt = NULL;
	s->ntt = 0;
}

/* Assign domains to the tenants that ask for them, by priority. */
static int
ts_assign(struct quotad_topo *s)
{
	struct ts_ten **act = NULL;
	const char *key;
	size_t pos = 0;
	void *v;
	int n = 0, r = -ENOMEM;

	tt_clear(s);
	s->epoch++;
	s->st.assigned++;
	if ((act = calloc(strmap_count(s->ten) + 1, sizeof(*act))) == NULL)
		return -ENOMEM;
	while (strmap_next(s->ten, &pos, &key, &v))
		if (ten_active(v))
			act[n++] = v;
	if (n > 0)
		qsort(act, (size_t)n, sizeof(*act), ts_cmp);
	if (n > TS_MAX_TENANTS)
		n = TS_MAX_TENANTS;
	if ((s->tt = calloc((size_t)n + 1, sizeof(*s->tt))) == NULL)
		goto out;
	for (int i = 0; i < n; i++) {
		ts_tenant(&s->tt[i], act[i]);
		act[i]->epoch = s->epoch;
		act[i]->slot = i;
	}
	s->ntt = n;
	r = topo_assign(&s->fleet, s->tt, n);
	/* the stored domains are read in the assignment only */
	for (int i = 0; i < n; i++)
		s->tt[i].prev = NULL;
	if (r == 0)
		s->changed = false;
out:
	free(act);
	return r;
}

/* Events and state of an isolated tenant. */
static void
ts_report(const struct topo_tenant *t, struct plan_topology *pt)
{
	const char *lv = annotation_isolation_name(t->level);

	if (t->nlost > 0) {
		pt->events[pt->nevents].reason = "TopologyDomainLost";
		snprintf(pt->events[pt->nevents++].message,
		    sizeof(pt->events[0].message), "%d %s domain(s) of this "
		    "tenant left the fleet or went to another tenant (first: "
		    "%.120s); it has %d domain(s) now", t->nlost, lv, t->lost,
		    t->ndomains);
	}
	if (t->exhausted) {
		pt->events[pt->nevents].reason = "TopologyExhausted";
		snprintf(pt->events[pt->nevents++].message,
		    sizeof(pt->events[0].message), "the fleet has no free %s "
		    "domain left for this tenant: its domains hold %d of the "
		    "%d devices it may use; its claims allocate only inside "
		    "them", lv, t->have, t->want);
		snprintf(pt->state, sizeof(pt->state), "exhausted: %d of %d "
		    "devices", t->have, t->want);
	} else
		snprintf(pt->state, sizeof(pt->state), "ok: %d domain(s), %d "
		    "devices", t->ndomains, t->have);
}

/* The part of tenant self among the n of tt (assigned). */
static int
ts_part(const struct quotad_topo *s, const struct topo_tenant *tt, int n,
    int self, struct plan_topology **ret)
{
	struct plan_topology *pt;
	int r;

	if ((pt = calloc(1, sizeof(*pt))) == NULL)
		return -ENOMEM;
	pt->selectors = json_array();
	r = pt->selectors == NULL ? -ENOMEM : topo_selectors(&s->fleet, tt, n,
	    self, pt->selectors);
	if (r == -E2BIG) {
		/* fail closed: nothing allocates */
		log_warn("topology selectors too large ns=%s",
		    log_q(tt[self].ns));
		json_array_clear(pt->selectors);
		r = json_array_append_new(pt->selectors, json_pack("{s:{s:s}}",
		    "cel", "expression", "false")) ? -ENOMEM : 0;
	}
	if (r == 0 && tt[self].level != ANNOTATION_ISOLATION_DEVICE) {
		pt->domains = topo_domains_value(&tt[self]);
		ts_report(&tt[self], pt);
		if (pt->domains == NULL)
			r = -ENOMEM;
	}
	if (r == 0)
		*ret = pt;
	else
		quotad_topology_free(pt);
	return r;
}

/* Tenant ns's part, from the changes since the last call. */
int
quotad_topo_get(struct quotad_topo *s, struct cache *c, const char *ns,
    struct plan_topology **ret)
{
	const struct ts_ten *t;
	char rv[64];
	int r;

	*ret = NULL;
	if ((r = cache_watch_get(c, CACHE_WATCH_SLICES, rv, sizeof(rv))) < 0 ||
	    (r = cache_watch_get(c, CACHE_WATCH_ALLOCS, rv, sizeof(rv))) < 0)
		return r == -ENOENT ? -EAGAIN : r;
	if ((r = ts_follow(s, c)) < 0 ||
	    (s->fleet_stale && (r = ts_fleet(s, c)) < 0) ||
	    (s->changed && (r = ts_assign(s)) < 0))
		return r;
	if (strlen(ns) >= TS_NS_MAX || (t = strmap_get(s->ten, ns)) == NULL)
		return 0;
	if (t->epoch == s->epoch)
		return ts_part(s, s->tt, s->ntt, t->slot, ret);
	if (ten_active(t))
		return 0;	/* past TS_MAX_TENANTS */
	/* a tenant of isolation device: after the others, with no domain */
	ts_tenant(&s->tt[s->ntt], t);
	s->tt[s->ntt].prev = NULL;
	return ts_part(s, s->tt, s->ntt + 1, s->ntt, ret);
}

/* A new index, reading every row at its first pass. */
int
quotad_topo_new(bool ns_from_namespace, struct quotad_topo **ret)
{
	struct quotad_topo *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return -ENOMEM;
	s->ns_from_namespace = ns_from_namespace;
	if (ts_reset(s) < 0) {
		quotad_topo_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

/* Free the index (NULL is fine). */
void
quotad_topo_free(struct quotad_topo *s)
{
	if (s == NULL)
		return;
	strmap_free(s->inst, inst_free);
	strmap_free(s->ten, ten_free);
	tt_clear(s);
	topo_fleet_free(&s->fleet);
	free(s);
}

/* The index's counters so far. */
void
quotad_topo_stats(const struct quotad_topo *s, struct quotad_topo_stats *ret)
{
	*ret = s->st;
}

/* qsort: two C strings. */
static int
key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Tenant ns's instances from the index, by key (see topology_src.h); it
 * cannot tell without a complete pass over c or when a live instance was
 * left out at a cap.
 */
int
quotad_topo_instances(const struct quotad_topo *s, struct cache *c,
    const char *ns, int (*fn)(const char *gvr, const char *ns,
    const char *name, void *arg), void *arg)
{
	const struct ts_ten *t;
	const struct ts_inst *i;
	char **keys, k[TS_KEY_MAX], *sep[2];
	size_t n = 0;
	int r = 0;

	if (s == NULL || s->c != c || s->gen == 0 || s->partial)
		return -ENOENT;
	if ((t = strmap_get(s->ten, ns)) == NULL)
		return 0;
	for (i = t->insts; i != NULL; i = i->next)
		n++;
	if (n == 0)
		return 0;
	if ((keys = calloc(n, sizeof(*keys))) == NULL)
		return -ENOMEM;
	n = 0;
	for (i = t->insts; i != NULL; i = i->next)
		keys[n++] = i->key;
	qsort(keys, n, sizeof(*keys), key_cmp);
	for (size_t j = 0; j < n && r == 0; j++) {
		snprintf(k, sizeof(k), "%s", keys[j]);
		if ((sep[0] = strchr(k, TS_SEP)) == NULL ||
		    (sep[1] = strchr(sep[0] + 1, TS_SEP)) == NULL)
			continue;	/* keys are made with both */
		*sep[0] = *sep[1] = '\0';
		r = fn(k, sep[0] + 1, sep[1] + 1, arg);
	}
	free(keys);
	return r;
}

/* Free a tenant's part (NULL is fine). */
void
quotad_topology_free(struct plan_topology *pt)
{
	if (pt == NULL)
		return;
	json_decref(pt->selectors);
	free(pt->domains);
	free(pt);
}

/* Register the index's metrics and make the index. */
int
quotad_topology_start(struct quotad *q, struct metrics *reg)
{
	struct quotad_topo *s;
	int r;

	if ((r = quotad_topo_new(q->cfg.plan.ns_from_namespace, &s)) < 0)
		return r;
	q->topo = s;
	if ((r = metrics_counter(reg, "kpgpud_quota_topology_rows_read_total",
	    "Cache rows and tombstones the topology pass read.", NULL, NULL, 0,
	    &s->m_rows)) < 0 || (r = metrics_counter(reg,
	    "kpgpud_quota_topology_annotations_parsed_total",
	    "Instance annotations the topology pass parsed.", NULL, NULL, 0,
	    &s->m_parsed)) < 0 || (r = metrics_counter(reg,
	    "kpgpud_quota_topology_assignments_total",
	    "Topology domain assignments computed.", NULL, NULL, 0,
	    &s->m_assigned)) < 0)
		return r;
	return 0;
}

/* Free q's index. */
void
quotad_topology_stop(struct quotad *q)
{
	quotad_topo_free(q->topo);
	q->topo = NULL;
}

/* Tenant ns's part from q's index; the metrics follow its counters. */
int
quotad_topology(struct quotad *q, struct cache *c, const char *ns,
    struct plan_topology **ret)
{
	struct quotad_topo *s = q->topo;
	int r;

	*ret = NULL;
	if (s == NULL)
		return -ENOMEM;
	r = quotad_topo_get(s, c, ns, ret);
	metric_add(s->m_rows, NULL, NULL, (double)(s->st.rows -
	    s->shown.rows));
	metric_add(s->m_parsed, NULL, NULL, (double)(s->st.parsed -
	    s->shown.parsed));
	metric_add(s->m_assigned, NULL, NULL, (double)(s->st.assigned -
	    s->shown.assigned));
	s->shown = s->st;
	return r;
}
