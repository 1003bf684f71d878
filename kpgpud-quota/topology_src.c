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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache/cache.h"
#include "common/log.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/topology.h"
#include "kpgpud-quota/topology_src.h"

#define TS_MAX_TENANTS	4096

struct ts_tenant {
	struct topo_tenant	 t;
	char			 created[40];
	char			*prev;
	bool			 valid;		/* from a valid annotation */
};

struct ts_ctx {
	struct quotad		*q;
	struct cache		*c;
	struct topo_fleet	 fleet;
	struct ts_tenant	*ten;
	int			 n, cap;
	int			 err;
};

static int
slice_cb(const struct cache_owned *o, void *arg)
{
	struct ts_ctx *x = arg;
	json_t *d = json_loads(o->data, 0, NULL);
	int r;

	if (d == NULL)
		return 0;
	r = topo_fleet_add(&x->fleet, d);
	json_decref(d);
	return r;
}

/* Devices held by claims: their GPUs go to no other tenant. */
static int
alloc_cb(const struct cache_owned *o, void *arg)
{
	struct ts_ctx *x = arg;
	json_t *d = json_loads(o->data, 0, NULL), *v;
	size_t i;
	int r = 0;

	json_array_foreach(json_object_get(d, "devices"), i, v) {
		const char *drv = json_string_value(json_object_get(v,
		    "driver"));

		if (drv != NULL && strcmp(drv, TOPO_DRIVER) == 0 &&
		    (r = topo_fleet_busy(&x->fleet, json_string_value(
		    json_object_get(v, "pool")), json_string_value(
		    json_object_get(v, "device")), o->ns)) < 0)
			break;
	}
	json_decref(d);
	return r;
}

/* The tenant of namespace ns, added when new; NULL past the cap. */
static struct ts_tenant *
tenant_of(struct ts_ctx *x, const char *ns)
{
	struct ts_tenant *nt;

	for (int i = 0; i < x->n; i++)
		if (strcmp(x->ten[i].t.ns, ns) == 0)
			return &x->ten[i];
	if (x->n >= TS_MAX_TENANTS || strlen(ns) >= sizeof(nt->t.ns))
		return NULL;
	if (x->n == x->cap) {
		int cap = x->cap ? 2 * x->cap : 16;

		if ((nt = realloc(x->ten, (size_t)cap * sizeof(*nt))) == NULL) {
			x->err = -ENOMEM;
			return NULL;
		}
		x->ten = nt;
		x->cap = cap;
	}
	nt = &x->ten[x->n++];
	memset(nt, 0, sizeof(*nt));
	snprintf(nt->t.ns, sizeof(nt->t.ns), "%s", ns);
	return nt;
}

/* Every live instance with an annotation: the oldest per namespace. */
static int
inst_cb(const struct cache_instance *ci, void *arg)
{
	struct ts_ctx *x = arg;
	struct annotation a;
	struct ts_tenant *t;
	const char *ns;
	char err[256];

	if (ci->isolation == NULL || ci->deleted != NULL)
		return 0;
	ns = quotad_tenant_ns(x->q, ci->ns, ci->name);
	if (ns == NULL || (t = tenant_of(x, ns)) == NULL)
		return x->err;
	if (t->valid && strcmp(t->created, ci->created) <= 0)
		return 0;
	if (annotation_parse(ci->isolation, strlen(ci->isolation), &a, err,
	    sizeof(err)) < 0)
		return 0;
	topo_tenant_init(&t->t, ns, &a, NULL);
	snprintf(t->created, sizeof(t->created), "%s", ci->created);
	t->valid = true;
	return 0;
}

/* Namespaces holding domains: their previous assignment. */
static int
ns_cb(const struct cache_ns *ns, void *arg)
{
	struct ts_ctx *x = arg;
	struct ts_tenant *t;
	json_t *an, *v;

	if (ns->annotations == NULL || strstr(ns->annotations,
	    PLAN_NS_TOPO_ANNOT) == NULL)
		return 0;
	if ((an = json_loads(ns->annotations, 0, NULL)) == NULL)
		return 0;
	v = json_object_get(an, PLAN_NS_TOPO_ANNOT);
	if (json_is_string(v) && json_string_length(v) > 0 &&
	    (t = tenant_of(x, ns->name)) != NULL &&
	    (t->prev = strdup(json_string_value(v))) == NULL)
		x->err = -ENOMEM;
	json_decref(an);
	return x->err;
}

static int
ts_cmp(const void *a, const void *b)
{
	const struct ts_tenant *x = a, *y = b;
	int r;

	/* valid tenants by instance age; holders of stale domains first */
	if (x->valid != y->valid)
		return x->valid ? 1 : -1;
	if ((r = strcmp(x->created, y->created)) != 0)
		return r;
	return strcmp(x->t.ns, y->t.ns);
}

static void
ts_free(struct ts_ctx *x)
{
	for (int i = 0; i < x->n; i++) {
		topo_tenant_clear(&x->ten[i].t);
		free(x->ten[i].prev);
	}
	free(x->ten);
	topo_fleet_free(&x->fleet);
}

void
quotad_topology_free(struct plan_topology *pt)
{
	if (pt == NULL)
		return;
	json_decref(pt->selectors);
	free(pt->domains);
	free(pt);
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

int
quotad_topology(struct quotad *q, struct cache *c, const char *ns,
    struct plan_topology **ret)
{
	struct ts_ctx x = { .q = q, .c = c };
	struct plan_topology *pt;
	char rv[64];
	int r, self = -1;

	*ret = NULL;
	if ((r = cache_watch_get(c, CACHE_WATCH_SLICES, rv, sizeof(rv))) < 0 ||
	    (r = cache_watch_get(c, CACHE_WATCH_ALLOCS, rv, sizeof(rv))) < 0)
		return r == -ENOENT ? -EAGAIN : r;
	if ((r = cache_owned_foreach(c, "", CACHE_KIND_SLICE, 0, slice_cb,
	    &x)) < 0 || (r = cache_owned_foreach(c, NULL, CACHE_KIND_ALLOC, 0,
	    alloc_cb, &x)) < 0 ||
	    (r = cache_instance_foreach(c, NULL, 0, inst_cb,
	    &x)) < 0 || (r = cache_ns_foreach(c, 0, ns_cb, &x)) < 0 ||
	    (r = x.err) < 0)
		goto out;
	for (int i = 0; i < x.n; i++) {
		x.ten[i].t.prev = x.ten[i].prev;
		if (!x.ten[i].valid && x.ten[i].prev != NULL)
			/* keep what it holds, ask for nothing more */
			x.ten[i].t.level = strncmp(x.ten[i].prev, "root/", 5)
			    == 0 ? ANNOTATION_ISOLATION_PCIE_ROOT :
			    ANNOTATION_ISOLATION_GPU;
	}
	if (x.n > 0)
		qsort(x.ten, (size_t)x.n, sizeof(*x.ten), ts_cmp);
	/* tenant structs moved: prev pointers moved with them */
	{
		struct topo_tenant *tt = calloc((size_t)x.n + 1, sizeof(*tt));

		r = -ENOMEM;
		if (tt == NULL)
			goto out;
		for (int i = 0; i < x.n; i++) {
			tt[i] = x.ten[i].t;
			if (strcmp(tt[i].ns, ns) == 0)
				self = i;
		}
		r = topo_assign(&x.fleet, tt, x.n);
		if (r == 0 && self >= 0 && (pt = calloc(1, sizeof(*pt))) !=
		    NULL) {
			pt->selectors = json_array();
			r = pt->selectors == NULL ? -ENOMEM :
			    topo_selectors(&x.fleet, tt, x.n, self,
			    pt->selectors);
			if (r == -E2BIG) {
				/* fail closed: nothing allocates */
				log_warn("topology selectors too large ns=%s",
				    log_q(ns));
				json_array_clear(pt->selectors);
				r = json_array_append_new(pt->selectors,
				    json_pack("{s:{s:s}}", "cel", "expression",
				    "false")) ? -ENOMEM : 0;
			}
			if (r == 0 && tt[self].level !=
			    ANNOTATION_ISOLATION_DEVICE) {
				pt->domains = topo_domains_value(&tt[self]);
				ts_report(&tt[self], pt);
				if (pt->domains == NULL)
					r = -ENOMEM;
			}
			if (r == 0)
				*ret = pt;
			else
				quotad_topology_free(pt);
		} else if (r == 0 && self >= 0)
			r = -ENOMEM;
		for (int i = 0; i < x.n; i++)
			topo_tenant_clear(&tt[i]);
		free(tt);
	}
out:
	ts_free(&x);
	return r;
}
