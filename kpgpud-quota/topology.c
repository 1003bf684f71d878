/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology isolation: fleet, domain assignment, selectors (see topology.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-quota/topology.h"

#define ATTRS	"device.attributes['" TOPO_DRIVER "']"
#define GPUID	"('parentUUID' in " ATTRS " ? " ATTRS ".parentUUID : " \
		ATTRS ".uuid)"

enum dom_kind { DOM_GPU, DOM_ROOT };

struct gpu_ent {
	const char	*uuid;
	const char	*node;
	const char	*root;
	const char	*busy;		/* as topo_device.busy, over the GPU */
	bool		 multi;
	int		 first, end;	/* its devices in idx.dev[] */
};

struct dom {
	char		 id[TOPO_ID_MAX + 1];
	enum dom_kind	 kind;
	int		 first, end;	/* its GPUs in idx.gpu[] */
};

/* The fleet seen as GPUs and domains. */
struct idx {
	const struct topo_device **dev;	/* sorted by node, root, gpu */
	int		 ndev;
	struct gpu_ent	*gpu;		/* in dev order: by node, root */
	int		 ngpu;
	struct dom	*dom;		/* sorted by id */
	int		 ndom;
	int		*owner;		/* per GPU: tenant index or -1 */
};

/* Attribute strings kpgpud puts into ids and CEL literals. */
static bool
safe_str(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' ||
		    *s == '.' || *s == ':'))
			return false;
	return true;
}

/* The string value of an attribute ({"string": ...}) or NULL. */
static const char *
attr_str(json_t *attrs, const char *name)
{
	json_t *v = json_object_get(json_object_get(attrs, name), "string");

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Copy s into a field; false when it does not fit. */
static bool
put(char *dst, size_t len, const char *s)
{
	if (s == NULL)
		s = "";
	if (strlen(s) >= len)
		return false;
	memcpy(dst, s, strlen(s) + 1);
	return true;
}

int
topo_fleet_add(struct topo_fleet *f, json_t *slice)
{
	json_t *spec = json_object_get(slice, "spec"), *d, *attrs;
	const char *node, *type, *gpu, *pool;
	struct topo_device *td;
	size_t i;

	if (spec == NULL)
		spec = slice;
	if (!json_is_string(json_object_get(spec, "driver")) ||
	    strcmp(json_string_value(json_object_get(spec, "driver")),
	    TOPO_DRIVER) != 0)
		return 0;
	node = json_string_value(json_object_get(spec, "nodeName"));
	pool = json_string_value(json_object_get(json_object_get(spec, "pool"),
	    "name"));
	free(f->by_name);
	f->by_name = NULL;
	f->nby_name = 0;
	json_array_foreach(json_object_get(spec, "devices"), i, d) {
		attrs = json_object_get(d, "attributes");
		type = attr_str(attrs, "type");
		gpu = attr_str(attrs, "parentUUID");
		if (gpu == NULL)
			gpu = attr_str(attrs, "uuid");
		if (node == NULL || type == NULL || gpu == NULL ||
		    !safe_str(gpu) || !safe_str(node) ||
		    f->n >= TOPO_MAX_DEVICES) {
			f->skipped++;
			continue;
		}
		if (f->n == f->cap) {
			int cap = f->cap ? f->cap * 2 : 64;
			void *nd = realloc(f->d, (size_t)cap * sizeof(*f->d));

			if (nd == NULL)
				return -ENOMEM;
			f->d = nd;
			f->cap = cap;
		}
		td = &f->d[f->n];
		memset(td, 0, sizeof(*td));
		if (!put(td->node, sizeof(td->node), node) ||
		    !put(td->pool, sizeof(td->pool), pool ? pool : node) ||
		    !put(td->name, sizeof(td->name), json_string_value(
		    json_object_get(d, "name"))) ||
		    !put(td->gpu, sizeof(td->gpu), gpu) ||
		    !put(td->root, sizeof(td->root),
		    attr_str(attrs, TOPO_ROOT_ATTR)) ||
		    !put(td->profile, sizeof(td->profile),
		    attr_str(attrs, "profile")) ||
		    !put(td->product, sizeof(td->product),
		    attr_str(attrs, "productName")) ||
		    (td->root[0] != '\0' && !safe_str(td->root))) {
			f->skipped++;
			continue;
		}
		td->mig = strcmp(type, "mig") == 0;
		td->multi = json_is_true(json_object_get(d,
		    "allowMultipleAllocations"));
		f->n++;
	}
	return 0;
}

static int
name_cmp(const void *a, const void *b)
{
	const struct topo_device *x = *(struct topo_device *const *)a;
	const struct topo_device *y = *(struct topo_device *const *)b;
	int r;

	if ((r = strcmp(x->pool, y->pool)) != 0)
		return r;
	return strcmp(x->name, y->name);
}

int
topo_fleet_busy(struct topo_fleet *f, const char *pool, const char *name,
    const char *ns)
{
	struct topo_device key, *kp = &key, **hit;

	if (f->by_name == NULL && f->n > 0) {
		if ((f->by_name = calloc((size_t)f->n, sizeof(*f->by_name))) ==
		    NULL)
			return -ENOMEM;
		for (int i = 0; i < f->n; i++)
			f->by_name[i] = &f->d[i];
		f->nby_name = f->n;
		qsort(f->by_name, (size_t)f->n, sizeof(*f->by_name),
		    name_cmp);
	}
	if (pool == NULL || name == NULL || ns == NULL ||
	    !put(key.pool, sizeof(key.pool), pool) ||
	    !put(key.name, sizeof(key.name), name))
		return 0;
	hit = f->nby_name == 0 ? NULL : bsearch(&kp, f->by_name,
	    (size_t)f->nby_name, sizeof(*f->by_name), name_cmp);
	if (hit == NULL)
		return 0;
	if ((*hit)->busy[0] == '\0')
		snprintf((*hit)->busy, sizeof((*hit)->busy), "%s", ns);
	else if (strcmp((*hit)->busy, ns) != 0)
		snprintf((*hit)->busy, sizeof((*hit)->busy), "*");
	return 0;
}

void
topo_fleet_free(struct topo_fleet *f)
{
	free(f->by_name);
	free(f->d);
	memset(f, 0, sizeof(*f));
}

void
topo_tenant_init(struct topo_tenant *t, const char *ns,
    const struct annotation *a, const char *prev)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->ns, sizeof(t->ns), "%s", ns);
	t->level = a->isolation;
	t->want = a->max_devices;
	t->mig = annotation_sharing_mig(a->sharing);
	snprintf(t->profile, sizeof(t->profile), "%s", a->mig_profile);
	snprintf(t->product, sizeof(t->product), "%s", a->product_name);
	t->prev = prev;
}

void
topo_tenant_clear(struct topo_tenant *t)
{
	for (int i = 0; i < t->ndomains; i++)
		free(t->domains[i]);
	free(t->domains);
	t->domains = NULL;
	t->ndomains = 0;
}

static int
dev_cmp(const void *a, const void *b)
{
	const struct topo_device *x = *(const struct topo_device *const *)a;
	const struct topo_device *y = *(const struct topo_device *const *)b;
	int r;

	if ((r = strcmp(x->node, y->node)) != 0 ||
	    (r = strcmp(x->root, y->root)) != 0)
		return r;
	return strcmp(x->gpu, y->gpu);
}

static int
dom_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dom *)a)->id, ((const struct dom *)b)->id);
}

static void
idx_free(struct idx *x)
{
	free(x->dev);
	free(x->gpu);
	free(x->dom);
	free(x->owner);
}

/* Index the fleet: GPUs (one per uuid and node), domains by id. */
static int
idx_build(const struct topo_fleet *f, struct idx *x)
{
	int i, j;

	memset(x, 0, sizeof(*x));
	x->dev = calloc((size_t)f->n + 1, sizeof(*x->dev));
	x->gpu = calloc((size_t)f->n + 1, sizeof(*x->gpu));
	x->dom = calloc(2 * (size_t)f->n + 1, sizeof(*x->dom));
	x->owner = calloc((size_t)f->n + 1, sizeof(*x->owner));
	if (x->dev == NULL || x->gpu == NULL || x->dom == NULL ||
	    x->owner == NULL) {
		idx_free(x);
		return -ENOMEM;
	}
	for (i = 0; i < f->n; i++)
		x->dev[i] = &f->d[i];
	x->ndev = f->n;
	qsort(x->dev, (size_t)x->ndev, sizeof(*x->dev), dev_cmp);
	for (i = 0; i < x->ndev; i = j) {
		struct gpu_ent *g = &x->gpu[x->ngpu];

		g->uuid = x->dev[i]->gpu;
		g->node = x->dev[i]->node;
		g->root = x->dev[i]->root;
		g->first = i;
		g->busy = "";
		for (j = i; j < x->ndev && dev_cmp(&x->dev[i], &x->dev[j]) == 0;
		    j++) {
			const char *b = x->dev[j]->busy;

			g->multi |= x->dev[j]->multi;
			if (b[0] != '\0' && g->busy[0] == '\0')
				g->busy = b;
			else if (b[0] != '\0' && strcmp(b, g->busy) != 0)
				g->busy = "*";
		}
		g->end = j;
		x->owner[x->ngpu] = -1;
		x->ngpu++;
	}
	for (i = 0; i < x->ngpu; i++) {
		struct dom *d = &x->dom[x->ndom++];

		snprintf(d->id, sizeof(d->id), "gpu/%s", x->gpu[i].uuid);
		d->kind = DOM_GPU;
		d->first = i;
		d->end = i + 1;
	}
	for (i = 0; i < x->ngpu; i = j) {
		struct dom *d;

		for (j = i + 1; j < x->ngpu &&
		    strcmp(x->gpu[i].node, x->gpu[j].node) == 0 &&
		    strcmp(x->gpu[i].root, x->gpu[j].root) == 0; j++)
			;
		if (x->gpu[i].root[0] == '\0')
			continue;
		d = &x->dom[x->ndom++];
		snprintf(d->id, sizeof(d->id), "root/%s/%s", x->gpu[i].node,
		    x->gpu[i].root);
		d->kind = DOM_ROOT;
		d->first = i;
		d->end = j;
	}
	qsort(x->dom, (size_t)x->ndom, sizeof(*x->dom), dom_cmp);
	return 0;
}

static const struct dom *
idx_find(const struct idx *x, const char *id)
{
	struct dom key;

	if (strlen(id) >= sizeof(key.id))
		return NULL;
	memcpy(key.id, id, strlen(id) + 1);
	return bsearch(&key, x->dom, (size_t)x->ndom, sizeof(*x->dom),
	    dom_cmp);
}

/* Devices of domain d that tenant t can use. */
static int
dom_capacity(const struct idx *x, const struct dom *d,
    const struct topo_tenant *t)
{
	int n = 0;

	for (int g = d->first; g < d->end; g++)
		for (int i = x->gpu[g].first; i < x->gpu[g].end; i++) {
			const struct topo_device *v = x->dev[i];

			if (v->mig != t->mig || (t->mig &&
			    strcmp(v->profile, t->profile) != 0) ||
			    (t->product[0] != '\0' &&
			    strcmp(v->product, t->product) != 0))
				continue;
			n++;
		}
	return n;
}

/*
 * Whether domain d can go to tenant t: no GPU of it in a domain, none
 * holding a device allocated to a claim of another namespace (t NULL: the
 * first condition only).
 */
static bool
dom_free(const struct idx *x, const struct dom *d,
    const struct topo_tenant *t)
{
	for (int g = d->first; g < d->end; g++)
		if (x->owner[g] >= 0 || (t != NULL && x->gpu[g].busy[0] != '\0'
		    && strcmp(x->gpu[g].busy, t->ns) != 0))
			return false;
	return true;
}

static enum dom_kind
level_kind(enum annotation_isolation l)
{
	return l == ANNOTATION_ISOLATION_PCIE_ROOT ? DOM_ROOT : DOM_GPU;
}

/* Give domain d to tenant i. */
static int
take(struct idx *x, const struct dom *d, struct topo_tenant *t, int i)
{
	char **nd;

	if (t->ndomains >= TOPO_MAX_DOMAINS)
		return 0;
	nd = realloc(t->domains, (size_t)(t->ndomains + 1) * sizeof(*nd));
	if (nd == NULL)
		return -ENOMEM;
	t->domains = nd;
	if ((nd[t->ndomains] = strdup(d->id)) == NULL)
		return -ENOMEM;
	t->ndomains++;
	for (int g = d->first; g < d->end; g++)
		x->owner[g] = i;
	t->have += dom_capacity(x, d, t);
	return 1;
}

/* Phase 1: a tenant keeps the previous domains that still hold. */
static int
keep_previous(struct idx *x, struct topo_tenant *t, int i)
{
	char *list, *tok, *save = NULL;
	const struct dom *d;
	int r = 0;

	if (t->prev == NULL || *t->prev == '\0')
		return 0;
	if ((list = strdup(t->prev)) == NULL)
		return -ENOMEM;
	for (tok = strtok_r(list, ",", &save); tok != NULL && r >= 0;
	    tok = strtok_r(NULL, ",", &save)) {
		d = idx_find(x, tok);
		if (d != NULL && d->kind != level_kind(t->level))
			continue;	/* the level changed: let it go */
		if (d == NULL || !dom_free(x, d, NULL)) {
			if (t->nlost++ == 0)
				snprintf(t->lost, sizeof(t->lost), "%s", tok);
			continue;
		}
		r = take(x, d, t, i);
	}
	free(list);
	return r < 0 ? r : 0;
}

/* Mark every GPU of the tenants' current domains with its owner. */
static void
mark_owners(struct idx *x, const struct topo_tenant *t, int n)
{
	for (int i = 0; i < n; i++)
		for (int k = 0; k < t[i].ndomains; k++) {
			const struct dom *d = idx_find(x, t[i].domains[k]);

			for (int g = d ? d->first : 0; d && g < d->end; g++)
				x->owner[g] = i;
		}
}

int
topo_assign(const struct topo_fleet *f, struct topo_tenant *t, int n)
{
	struct idx x;
	int i, k, r = 0;

	for (i = 0; i < n; i++) {
		topo_tenant_clear(&t[i]);
		t[i].have = t[i].nlost = 0;
		t[i].exhausted = false;
		t[i].lost[0] = '\0';
	}
	if ((r = idx_build(f, &x)) < 0)
		return r;
	for (i = 0; i < n && r >= 0; i++)
		if (t[i].level != ANNOTATION_ISOLATION_DEVICE)
			r = keep_previous(&x, &t[i], i);
	for (i = 0; i < n && r >= 0; i++) {
		if (t[i].level == ANNOTATION_ISOLATION_DEVICE)
			continue;
		for (k = 0; k < x.ndom && t[i].have < t[i].want && r >= 0;
		    k++) {
			const struct dom *d = &x.dom[k];

			if (d->kind != level_kind(t[i].level) ||
			    !dom_free(&x, d, &t[i]) ||
			    dom_capacity(&x, d, &t[i]) == 0)
				continue;
			r = take(&x, d, &t[i], i);
		}
		t[i].exhausted = t[i].have < t[i].want;
	}
	idx_free(&x);
	if (r < 0)
		for (i = 0; i < n; i++)
			topo_tenant_clear(&t[i]);
	return r < 0 ? r : 0;
}

/* Append one selector: PREFIX [uuid list] SUFFIX. */
static int
add_list_sel(json_t *sel, const char *prefix, const char **uuids, int n,
    const char *suffix)
{
	size_t len = strlen(prefix) + strlen(suffix) + 3;
	char *e, *p;
	int r;

	for (int i = 0; i < n; i++)
		len += strlen(uuids[i]) + 3;
	if ((e = malloc(len)) == NULL)
		return -ENOMEM;
	p = e + sprintf(e, "%s[", prefix);
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s'%s'", i ? "," : "", uuids[i]);
	sprintf(p, "]%s", suffix);
	r = json_array_append_new(sel, json_pack("{s:{s:s}}", "cel",
	    "expression", e)) < 0 ? -ENOMEM : 0;
	free(e);
	return r;
}

int
topo_selectors(const struct topo_fleet *f, const struct topo_tenant *t,
    int n, int self, json_t *sel)
{
	const char **allow = NULL, **deny = NULL;
	int nallow = 0, ndeny = 0, r, nsel;
	struct idx x;

	if ((r = idx_build(f, &x)) < 0)
		return r;
	mark_owners(&x, t, n);
	allow = calloc((size_t)x.ngpu + 1, sizeof(*allow));
	deny = calloc((size_t)x.ngpu + 1, sizeof(*deny));
	r = -ENOMEM;
	if (allow == NULL || deny == NULL)
		goto out;
	for (int g = 0; g < x.ngpu; g++) {
		if (x.owner[g] == self)
			allow[nallow++] = x.gpu[g].uuid;
		else if (x.owner[g] >= 0 || x.gpu[g].multi)
			deny[ndeny++] = x.gpu[g].uuid;
	}
	nsel = (ndeny + TOPO_UUIDS_PER_SEL - 1) / TOPO_UUIDS_PER_SEL;
	if (t[self].level != ANNOTATION_ISOLATION_DEVICE)
		nsel++;
	r = -E2BIG;
	if (nsel > TOPO_MAX_SELECTORS || nallow > TOPO_UUIDS_PER_SEL)
		goto out;
	r = 0;
	/* an isolated tenant without domains gets "in []": nothing */
	if (t[self].level != ANNOTATION_ISOLATION_DEVICE)
		r = add_list_sel(sel, "'uuid' in " ATTRS " && " GPUID " in ",
		    allow, nallow, "");
	for (int i = 0; i < ndeny && r == 0; i += TOPO_UUIDS_PER_SEL)
		r = add_list_sel(sel, "!('uuid' in " ATTRS ") || !(" GPUID
		    " in ", deny + i, ndeny - i < TOPO_UUIDS_PER_SEL ?
		    ndeny - i : TOPO_UUIDS_PER_SEL, ")");
out:
	free(allow);
	free(deny);
	idx_free(&x);
	return r;
}

char *
topo_domains_value(const struct topo_tenant *t)
{
	size_t len = 1;
	char *v, *p;

	for (int i = 0; i < t->ndomains; i++)
		len += strlen(t->domains[i]) + 1;
	if ((v = malloc(len)) == NULL)
		return NULL;
	p = v;
	*p = '\0';
	for (int i = 0; i < t->ndomains; i++)
		p += sprintf(p, "%s%s", i ? "," : "", t->domains[i]);
	return v;
}
