/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DeviceClass collector, the work of the key QUOTAD_GC_KEY (see
 * quota_int.h): kpgpud's classes that no valid plan, no owned claim or
 * template and no ResourceClaim in the cluster requests any more are
 * deleted, and the admission policies' parameter ConfigMap (the non-GPU
 * classes) is written with them.
 */
#include "kpgpud-quota/quota_int.h"

#define GC_MAX_CLASSES	256
/* Every kpgpud class is known to be in use: nothing more to read. */
#define GC_ALL_USED	(-ECANCELED)

struct gc_ctx {
	struct quotad		*q;
	struct plan_instance	 in;
	int			 nnames, nused, nseen;
	const char *const	*names;		/* kpgpud's classes */
	bool			 seen[GC_MAX_CLASSES];	/* names[i] used */
	char			*used[GC_MAX_CLASSES];
};

/* Remember one class as used. */
static void
gc_use(const char *cls, void *arg)
{
	struct gc_ctx *g = arg;

	for (int i = 0; i < g->nnames; i++)
		if (!g->seen[i] && strcmp(g->names[i], cls) == 0) {
			g->seen[i] = true;
			g->nseen++;
		}
	if (g->nused < GC_MAX_CLASSES &&
	    (g->used[g->nused] = strdup(cls)) != NULL)
		g->nused++;
}

/*
 * GC_ALL_USED once every kpgpud class is in use: the instances and owned
 * objects left to read could only add uses, never a class to delete.
 */
static int
gc_more(const struct gc_ctx *g)
{
	return g->nseen == g->nnames ? GC_ALL_USED : 0;
}

/* Remember the class a valid instance uses. */
static int
gc_used_cb(const struct cache_instance *ci, void *arg)
{
	struct gc_ctx *g = arg;
	struct plan *p = NULL;
	char err[256];

	if (ci->isolation == NULL || ci->deleted != NULL ||
	    quotad_instance(ci, &g->in) < 0 ||
	    plan_build(&g->in, &g->q->cfg.plan, &p, err, sizeof(err)) < 0)
		return 0;
	if (p->device_class != NULL)
		gc_use(p->class_name, g);
	/* its topology class, whether this plan (without topology) has it */
	if (plan_topo_class(p->namespace, err, sizeof(err)) == 0)
		gc_use(err, g);
	plan_free(p);
	return gc_more(g);
}

/*
 * Call fn with every DeviceClass a claim spec's devices member requests:
 * requests[].exactly.deviceClassName and requests[].firstAvailable[]
 * .deviceClassName.
 */
static void
requested_classes(json_t *devices, void (*fn)(const char *, void *),
    void *arg)
{
	json_t *req, *sub;
	const char *cls;
	size_t i, j;

	json_array_foreach(json_object_get(devices, "requests"), i, req) {
		cls = json_string_value(json_object_get(json_object_get(req,
		    "exactly"), "deviceClassName"));
		if (cls != NULL)
			fn(cls, arg);
		json_array_foreach(json_object_get(req, "firstAvailable"), j,
		    sub) {
			cls = json_string_value(json_object_get(sub,
			    "deviceClassName"));
			if (cls != NULL)
				fn(cls, arg);
		}
	}
}

/* Remember the classes an owned claim or template requests. */
static int
gc_ref_cb(const struct cache_owned *o, void *arg)
{
	struct gc_ctx *g = arg;
	json_t *data, *dev;

	if (strcmp(o->kind, CACHE_KIND_CLAIMTEMPLATE) != 0 &&
	    strcmp(o->kind, CACHE_KIND_CLAIM) != 0)
		return 0;
	if ((data = json_loads(o->data ? o->data : "{}", 0, NULL)) == NULL)
		return 0;
	dev = json_object_get(json_object_get(data, "spec"), "devices");
	if (strcmp(o->kind, CACHE_KIND_CLAIMTEMPLATE) == 0)
		dev = json_object_get(json_object_get(json_object_get(data,
		    "spec"), "spec"), "devices");
	requested_classes(dev, gc_use, g);
	json_decref(data);
	return gc_more(g);
}

struct gc_claim {
	struct qwork	*w;
	json_t		*claim;
};

static int gc_push_params(struct qwork *w);

/* A class a claim requests: keep the deletion of that class back. */
static void
gc_claim_class(const char *cls, void *arg)
{
	struct gc_claim *x = arg;
	struct qwork *w = x->w;
	json_t *md = json_object_get(x->claim, "metadata");
	const char *name;

	for (int i = 0; i < w->acts.n; i++) {
		name = strrchr(w->acts.a[i].path, '/');
		if (w->keep[i] || name == NULL || strcmp(name + 1, cls) != 0)
			continue;
		w->keep[i] = true;
		log_info("class still requested, kept class=%s claim_ns=%s "
		    "claim=%s", log_q(cls),
		    log_q(json_string_value(json_object_get(md, "namespace"))),
		    log_q(json_string_value(json_object_get(md, "name"))));
	}
}

/* One page of every ResourceClaim: mark the classes still requested. */
static void
gc_claims_page(json_t *items, void *arg)
{
	struct gc_claim x = { arg, NULL };
	size_t i;

	json_array_foreach(items, i, x.claim)
		requested_classes(json_object_get(json_object_get(x.claim,
		    "spec"), "devices"), gc_claim_class, &x);
}

/*
 * The claim list is complete: delete only the classes no claim requests
 * (claims generated from a template carry no kpgpud label, so the cache
 * does not have them), and look again later for the ones kept.
 */
static void
gc_claims_end(const struct kube_response *resp, const char *rv, void *arg)
{
	struct qwork *w = arg;
	int n = 0;

	(void)rv;
	w->list = NULL;
	if (resp->status != 200) {
		work_read_failed(w, "resourceclaims", resp);
		return;
	}
	for (int i = 0; i < w->acts.n; i++) {
		if (w->keep[i]) {
			free(w->acts.a[i].body);
			w->requeue = true;
			continue;
		}
		if (n != i)
			w->acts.a[n] = w->acts.a[i];
		n++;
	}
	w->acts.n = n;
	if ((n = gc_push_params(w)) < 0) {
		queue_finish(w, n);
		return;
	}
	work_next(w);
}

/*
 * The non-GPU DeviceClasses for the policies' parameter ConfigMap, into
 * w->params; left NULL while sync has not listed the classes yet.
 */
static int
gc_params(struct qwork *w, const struct quotad_classes *cl, bool listed)
{
	const struct quotad_config *c = &w->q->cfg;

	if (c->params_name[0] == '\0' || !listed)
		return 0;
	if (cl->non_gpu_over)
		log_warn("more than %d non-GPU DeviceClasses: the rest are not "
		    "listed in ConfigMap %s/%s, and the admission policy denies "
		    "tenants' claims of them", QUOTAD_MAX_NON_GPU,
		    c->params_ns, c->params_name);
	if ((w->params = strdup(cl->non_gpu)) == NULL)
		return -ENOMEM;
	return 0;
}

/* Append the parameter ConfigMap's writes, if there are any to make. */
static int
gc_push_params(struct qwork *w)
{
	const struct quotad_config *c = &w->q->cfg;

	if (w->params == NULL)
		return 0;
	return reconcile_params(c->params_ns, c->params_name, w->params,
	    c->params_user, &w->acts);
}

/*
 * Collect the DeviceClasses nothing uses any more: neither a valid plan
 * nor an owned claim or template (an invalid annotation keeps its last
 * good state, class included), nor any ResourceClaim in the cluster, which
 * is listed from the API only when there is a class to delete.
 */
int
gc_start(struct qwork *w, struct cache *c, const char *rest)
{
	struct quotad_classes *cl = &w->q->classes;
	struct gc_ctx *g;
	bool listed;
	int r;

	(void)rest;
	/* a class list still coming from sync: nothing deleted meanwhile */
	r = quotad_classes_get(cl, c, w->q->cfg.gpu_drivers);
	if (r < 0 && r != -EAGAIN)
		return r;
	listed = r == 0;
	if ((g = calloc(1, sizeof(*g))) == NULL)
		return -ENOMEM;
	g->q = w->q;
	g->names = (const char *const *)cl->ours;
	g->nnames = !listed ? 0 : cl->nours < GC_MAX_CLASSES ? cl->nours :
	    GC_MAX_CLASSES;
	r = gc_more(g);
	if (r == 0)
		r = cache_instance_foreach(c, NULL, 0, gc_used_cb, g);
	if (r == 0)
		r = cache_owned_foreach(c, NULL, NULL, 0, gc_ref_cb, g);
	if (r == 0 || r == GC_ALL_USED)
		r = reconcile_gc_classes(g->names, g->nnames,
		    (const char *const *)g->used, g->nused, &w->acts);
	for (int i = 0; i < g->nused; i++)
		free(g->used[i]);
	free(g);
	if (r == 0)
		r = gc_params(w, cl, listed);
	if (r < 0)
		return r;
	if (w->acts.n == 0) {
		if ((r = gc_push_params(w)) < 0)
			return r;
		work_next(w);
		return 0;
	}
	return kube_list_start(w->q->kc, "/apis/resource.k8s.io/v1/"
	    "resourceclaims", NULL, 0, NULL, gc_claims_page, gc_claims_end, w,
	    &w->list);
}
