/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology isolation, the cache half (kpgpud-quota/topology_src.c): over
 * random changes of a cache (instances added, changed, made invalid and
 * deleted; stored domains on Namespaces; slices and allocations; tombstones
 * pruned past the index), the index that follows the cache by generation
 * gives every tenant the same part as a fresh index reading every row, and
 * the same selectors and domains as the scan it replaced (every instance,
 * tenants in a list, all of them assigned: modelled here from the changes
 * made). It parses an annotation once per change of its instance, not once
 * per pass, and reads no row when nothing changed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache_write.h"
#include "common/util.h"
#include "kpgpud-quota/topology.h"
#include "kpgpud-quota/topology_src.h"
#include "tests/unit/test.h"

#define GVR	"kubeplus.io/v1alpha1/agents"
#define NNS	3		/* instance namespaces a, b, c */
#define NTEN	6		/* tenants t0..t5 */
#define NKEYS	(NNS * NTEN)
#define NNODES	3
#define NCLAIMS	4

static const char *const anns[] = {
	"{\"sharing\":\"exclusive\",\"maxDevices\":1}",
	"{\"sharing\":\"exclusive\",\"maxDevices\":2,\"isolation\":\"gpu\"}",
	"{\"sharing\":\"exclusive\",\"maxDevices\":4,"
	    "\"isolation\":\"pcie-root\"}",
	"{\"sharing\":\"exclusive\",\"maxDevices\":1,\"isolation\":\"gpu\"}",
	"{not json",
};
static const char *const prevs[] = {
	NULL, "", "gpu/GPU-n0-0", "gpu/GPU-n0-1,gpu/GPU-n1-2",
	"root/n0/pci0000:10", "gpu/GPU-gone", "root/n2/pci0000:20",
};

/* The model: what the test put into the cache. */
struct model {
	bool		 ns_from_namespace;
	struct {
		bool	 live;
		bool	 deleting;
		int	 ann;		/* into anns[] */
		int	 created;	/* 0..3: ties on purpose */
	} in[NKEYS];			/* ns-major, as the cache orders them */
	int		 prev[NTEN];	/* into prevs[] */
	bool		 node[NNODES];
	int		 claim[NCLAIMS];	/* -1 none, else GPU index */
};

/* parts seen with domains, with events, and tenants' checks made */
static int ndomains, nevents, nchecks;
static unsigned seed = 1;
static int rvn;

static unsigned
rnd(unsigned n)
{
	seed = seed * 1103515245u + 12345u;
	return (seed >> 16) % n;
}

/* A node's slice: 4 GPUs behind 2 PCIe roots. */
static char *
slice_text(int node)
{
	json_t *devs = json_array(), *s;
	char uuid[32], name[16], root[32], nn[16];
	char *t;

	snprintf(nn, sizeof(nn), "n%d", node);
	for (int g = 0; g < 4; g++) {
		snprintf(uuid, sizeof(uuid), "GPU-n%d-%d", node, g);
		snprintf(name, sizeof(name), "gpu-%d", g);
		snprintf(root, sizeof(root), "pci0000:%d0", 1 + g / 2);
		json_array_append_new(devs, json_pack("{s:s, s:{s:{s:s}, "
		    "s:{s:s}, s:{s:s}}}", "name", name, "attributes", "type",
		    "string", "gpu", "uuid", "string", uuid,
		    "resource.kubernetes.io/pcieRoot", "string", root));
	}
	s = json_pack("{s:{s:s, s:s, s:{s:s}, s:o}}", "spec", "driver",
	    TOPO_DRIVER, "nodeName", nn, "pool", "name", nn, "devices", devs);
	t = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(s);
	return t;
}

static char *
alloc_text(int gpu)
{
	char b[160];

	snprintf(b, sizeof(b), "{\"devices\":[{\"device\":\"gpu-%d\","
	    "\"driver\":\"" TOPO_DRIVER "\",\"pool\":\"n%d\"}]}", gpu % 4,
	    gpu / 4);
	return strdup(b);
}

static void
key_names(int k, char *ns, char *name)
{
	sprintf(ns, "%c", 'a' + k / NTEN);
	sprintf(name, "t%d", k % NTEN);
}

/* Write instance k of the model into the cache. */
static void
put_inst(struct cache *c, const struct model *m, int k)
{
	char ns[16], name[16], rv[16], created[32];
	struct cache_instance ci = { .gvr = GVR, .kind = "Agent", .ns = ns,
	    .name = name, .uid = "u", .rv = rv, .created = created };

	key_names(k, ns, name);
	if (!m->in[k].live) {
		CHECK(cache_instance_delete(c, GVR, ns, name, NULL) == 0);
		return;
	}
	snprintf(rv, sizeof(rv), "%d", ++rvn);
	snprintf(created, sizeof(created), "2026-01-01T00:00:0%dZ",
	    m->in[k].created);
	ci.isolation = anns[m->in[k].ann];
	ci.deleted = m->in[k].deleting ? "2026-01-02T00:00:00Z" : NULL;
	CHECK(cache_instance_put(c, &ci, NULL) == 0);
}

static void
put_ns(struct cache *c, const struct model *m, int t)
{
	char name[16], rv[16], an[128];
	struct cache_ns ns = { .name = name, .uid = "u", .rv = rv,
	    .phase = "Active", .labels = "{}", .annotations = an };

	sprintf(name, "t%d", t);
	snprintf(rv, sizeof(rv), "%d", ++rvn);
	if (prevs[m->prev[t]] == NULL)
		snprintf(an, sizeof(an), "{\"kubeplus.io/x\":\"y\"}");
	else
		snprintf(an, sizeof(an), "{\"%s\":\"%s\"}", PLAN_NS_TOPO_ANNOT,
		    prevs[m->prev[t]]);
	CHECK(cache_ns_put(c, &ns, NULL) == 0);
}

static void
put_node(struct cache *c, const struct model *m, int n)
{
	char name[16], *d = slice_text(n);
	struct cache_owned o = { .kind = CACHE_KIND_SLICE, .ns = "",
	    .name = name, .uid = "u", .rv = "1", .data = d };

	sprintf(name, "n%d", n);
	if (m->node[n])
		CHECK(cache_owned_put(c, &o, NULL) == 0);
	else
		CHECK(cache_owned_delete(c, CACHE_KIND_SLICE, "", name,
		    NULL) == 0);
	free(d);
}

/* Claim i of namespace t(i % NTEN). */
static void
put_claim(struct cache *c, const struct model *m, int i)
{
	char ns[16], name[16], *d = alloc_text(m->claim[i] < 0 ? 0 :
	    m->claim[i]);
	struct cache_owned o = { .kind = CACHE_KIND_ALLOC, .ns = ns,
	    .name = name, .uid = "u", .rv = "1", .data = d };

	sprintf(ns, "t%d", i % NTEN);
	sprintf(name, "c%d", i);
	if (m->claim[i] >= 0)
		CHECK(cache_owned_put(c, &o, NULL) == 0);
	else
		CHECK(cache_owned_delete(c, CACHE_KIND_ALLOC, ns, name,
		    NULL) == 0);
	free(d);
}

/* One random change of the model, written through. */
static void
change(struct cache *c, struct model *m)
{
	unsigned what = rnd(10), k;

	if (what < 6) {
		k = rnd(NKEYS);
		m->in[k].live = rnd(4) != 0;
		m->in[k].deleting = rnd(8) == 0;
		m->in[k].ann = (int)rnd(nitems(anns));
		m->in[k].created = (int)rnd(4);
		put_inst(c, m, (int)k);
	} else if (what < 8) {
		k = rnd(NTEN);
		m->prev[k] = (int)rnd(nitems(prevs));
		put_ns(c, m, (int)k);
	} else if (what < 9) {
		k = rnd(NNODES);
		m->node[k] = rnd(3) != 0;
		put_node(c, m, (int)k);
	} else {
		k = rnd(NCLAIMS);
		m->claim[k] = rnd(3) == 0 ? -1 : (int)rnd(4 * NNODES);
		put_claim(c, m, (int)k);
	}
}

/* The scan the index replaced, one tenant of it. */
struct old_ten {
	struct topo_tenant	 t;
	char			 created[40];
	bool			 valid;
};

static int
old_cmp(const void *a, const void *b)
{
	const struct old_ten *x = a, *y = b;
	int r;

	if (x->valid != y->valid)
		return x->valid ? 1 : -1;
	if ((r = strcmp(x->created, y->created)) != 0)
		return r;
	return strcmp(x->t.ns, y->t.ns);
}

static struct old_ten *
old_of(struct old_ten *ten, int *n, const char *ns)
{
	for (int i = 0; i < *n; i++)
		if (strcmp(ten[i].t.ns, ns) == 0)
			return &ten[i];
	memset(&ten[*n], 0, sizeof(ten[0]));
	snprintf(ten[*n].t.ns, sizeof(ten[0].t.ns), "%s", ns);
	return &ten[(*n)++];
}

/*
 * The old scan's selectors and domains for tenant self (sel NULL when it
 * is no tenant): every instance in key order, oldest valid per tenant,
 * stored domains, every tenant assigned in priority order.
 */
static void
old_part(const struct model *m, const char *self, json_t **sel,
    char **domains)
{
	struct old_ten ten[NTEN + NNS];
	struct topo_tenant tt[NTEN + NNS];
	struct topo_fleet f;
	struct annotation a;
	char ns[16], name[16], created[32], err[256];
	int n = 0, me = -1;

	memset(&f, 0, sizeof(f));
	*sel = NULL;
	*domains = NULL;
	for (int i = 0; i < NNODES; i++)
		if (m->node[i]) {
			char *t = slice_text(i);
			json_t *j = json_loads(t, 0, NULL);

			CHECK(topo_fleet_add(&f, j) == 0);
			json_decref(j);
			free(t);
		}
	for (int i = 0; i < NCLAIMS; i++)
		if (m->claim[i] >= 0) {
			char cns[16], dev[16], pool[16];

			sprintf(cns, "t%d", i % NTEN);
			sprintf(dev, "gpu-%d", m->claim[i] % 4);
			sprintf(pool, "n%d", m->claim[i] / 4);
			CHECK(topo_fleet_busy(&f, pool, dev, cns) == 0);
		}
	for (int k = 0; k < NKEYS; k++) {
		struct old_ten *t;
		const char *tn;

		if (!m->in[k].live || m->in[k].deleting)
			continue;
		key_names(k, ns, name);
		tn = m->ns_from_namespace ? ns : name;
		t = old_of(ten, &n, tn);
		snprintf(created, sizeof(created), "2026-01-01T00:00:0%dZ",
		    m->in[k].created);
		if ((t->valid && strcmp(t->created, created) <= 0) ||
		    annotation_parse(anns[m->in[k].ann],
		    strlen(anns[m->in[k].ann]), &a, err, sizeof(err)) < 0)
			continue;
		topo_tenant_init(&t->t, tn, &a, NULL);
		snprintf(t->created, sizeof(t->created), "%s", created);
		t->valid = true;
	}
	for (int i = 0; i < NTEN; i++)
		if (prevs[m->prev[i]] != NULL && *prevs[m->prev[i]] != '\0') {
			sprintf(name, "t%d", i);
			old_of(ten, &n, name)->t.prev = prevs[m->prev[i]];
		}
	for (int i = 0; i < n; i++)
		if (!ten[i].valid && ten[i].t.prev != NULL)
			ten[i].t.level = strncmp(ten[i].t.prev, "root/", 5) ==
			    0 ? ANNOTATION_ISOLATION_PCIE_ROOT :
			    ANNOTATION_ISOLATION_GPU;
	qsort(ten, (size_t)n, sizeof(ten[0]), old_cmp);
	for (int i = 0; i < n; i++) {
		tt[i] = ten[i].t;
		if (strcmp(tt[i].ns, self) == 0)
			me = i;
	}
	CHECK(topo_assign(&f, tt, n) == 0);
	if (me >= 0) {
		*sel = json_array();
		CHECK(topo_selectors(&f, tt, n, me, *sel) == 0);
		if (tt[me].level != ANNOTATION_ISOLATION_DEVICE)
			*domains = topo_domains_value(&tt[me]);
	}
	for (int i = 0; i < n; i++)
		topo_tenant_clear(&tt[i]);
	topo_fleet_free(&f);
}

static bool
same_json(json_t *a, json_t *b)
{
	char *x = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
	char *y = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	bool r = x != NULL && y != NULL && strcmp(x, y) == 0;

	free(x);
	free(y);
	return r;
}

static bool
same_str(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL &&
	    strcmp(a, b) == 0);
}

/* Whether two parts are the same, events and state included. */
static bool
same_part(const struct plan_topology *a, const struct plan_topology *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	if (!same_json(a->selectors, b->selectors) ||
	    !same_str(a->domains, b->domains) ||
	    strcmp(a->state, b->state) != 0 || a->nevents != b->nevents)
		return false;
	for (int i = 0; i < a->nevents; i++)
		if (strcmp(a->events[i].reason, b->events[i].reason) != 0 ||
		    strcmp(a->events[i].message, b->events[i].message) != 0)
			return false;
	return true;
}

/* Append "ns/name " of one instance the index names. */
static int
inst_note(const char *gvr, const char *ns, const char *name, void *arg)
{
	char *b = arg;
	size_t n = strlen(b);

	CHECK(strcmp(gvr, GVR) == 0);
	snprintf(b + n, 512 - n, "%s/%s ", ns, name);
	return 0;
}

/*
 * The instances the index names for tenant ns are the model's live ones
 * (not being deleted, any annotation) of that tenant, in key order.
 */
static void
check_instances(struct quotad_topo *idx, struct cache *rd,
    const struct model *m, const char *tenant, const char *what)
{
	char got[512] = "", want[512] = "", ns[16], name[16];

	for (int k = 0; k < NKEYS; k++) {
		key_names(k, ns, name);
		if (m->in[k].live && !m->in[k].deleting && strcmp(tenant,
		    m->ns_from_namespace ? ns : name) == 0)
			snprintf(want + strlen(want), sizeof(want) -
			    strlen(want), "%s/%s ", ns, name);
	}
	CHECK_CASE(quotad_topo_instances(idx, rd, tenant, inst_note,
	    got) == 0, what);
	CHECK_CASE(strcmp(got, want) == 0, what);
}

/* Check every tenant's part: index, fresh index and old scan agree. */
static void
check_all(struct quotad_topo *idx, struct cache *rd, const struct model *m,
    int step)
{
	const char *names[] = { "t0", "t1", "t2", "t3", "t4", "t5", "a", "b",
	    "c", "nobody" };
	char what[32];

	for (size_t i = 0; i < nitems(names); i++) {
		struct plan_topology *p = NULL, *q = NULL;
		struct quotad_topo *fresh;
		json_t *osel;
		char *odom;

		snprintf(what, sizeof(what), "step %d ns %s", step, names[i]);
		REQUIRE(quotad_topo_new(m->ns_from_namespace, &fresh) == 0);
		CHECK_CASE(quotad_topo_get(idx, rd, names[i], &p) == 0, what);
		CHECK_CASE(quotad_topo_get(fresh, rd, names[i], &q) == 0,
		    what);
		CHECK_CASE(same_part(p, q), what);
		check_instances(idx, rd, m, names[i], what);
		nchecks++;
		if (p != NULL && p->domains != NULL && *p->domains != '\0')
			ndomains++;
		if (p != NULL && p->nevents > 0)
			nevents++;
		old_part(m, names[i], &osel, &odom);
		CHECK_CASE((p == NULL) == (osel == NULL), what);
		if (p != NULL && osel != NULL) {
			CHECK_CASE(same_json(p->selectors, osel), what);
			CHECK_CASE(same_str(p->domains, odom), what);
		}
		json_decref(osel);
		free(odom);
		quotad_topology_free(p);
		quotad_topology_free(q);
		quotad_topo_free(fresh);
	}
}

/* A fresh cache with every node's slice, listed. */
static struct cache *
setup(struct model *m, struct cache **rd)
{
	struct cache *c;

	if ((c = test_cache_new(rd)) == NULL)
		return NULL;
	for (int i = 0; i < NNODES; i++) {
		m->node[i] = true;
		put_node(c, m, i);
	}
	for (int i = 0; i < NCLAIMS; i++)
		m->claim[i] = -1;
	if (cache_watch_set(c, CACHE_WATCH_SLICES, "1") < 0 ||
	    cache_watch_set(c, CACHE_WATCH_ALLOCS, "1") < 0) {
		test_cache_remove(c, *rd);
		return NULL;
	}
	return c;
}

/* Random changes in both tenant modes; prunes force full reads. */
static void
random_run(bool ns_from_namespace, unsigned s0)
{
	struct model m;
	struct cache *c, *rd;
	struct quotad_topo *idx;
	struct quotad_topo_stats st;

	memset(&m, 0, sizeof(m));
	m.ns_from_namespace = ns_from_namespace;
	seed = s0;
	ndomains = nevents = nchecks = 0;
	REQUIRE((c = setup(&m, &rd)) != NULL);
	REQUIRE(quotad_topo_new(ns_from_namespace, &idx) == 0);
	for (int step = 0; step < 300; step++) {
		int nchanges = (int)rnd(4);

		for (int i = 0; i < nchanges; i++)
			change(c, &m);
		if (rnd(40) == 0)
			CHECK(cache_tomb_prune(c, 0) == 0);
		check_all(idx, rd, &m, step);
	}
	quotad_topo_stats(idx, &st);
	/* some passes read only the changes, a few (prunes) everything */
	CHECK(st.full >= 1 && st.full < st.passes);
	CHECK(st.assigned >= 1);
	/* not vacuous: tenants held domains, lost some, ran out */
	CHECK(ndomains > nchecks / 20 && nevents > nchecks / 50);
	printf("# %d parts checked, %d with domains, %d with events; "
	    "%llu passes, %llu full, %llu assignments, %llu parses\n",
	    nchecks, ndomains, nevents, (unsigned long long)st.passes,
	    (unsigned long long)st.full, (unsigned long long)st.assigned,
	    (unsigned long long)st.parsed);
	quotad_topo_free(idx);
	test_cache_remove(c, rd);
}

TEST(same_as_full_read_and_old_scan_by_name)
{
	random_run(false, 7);
}

TEST(same_as_full_read_and_old_scan_by_namespace)
{
	random_run(true, 11);
}

/*
 * 200 tenants of isolation device converge: each annotation is parsed
 * once, a pass with nothing changed reads no row, one more instance costs
 * one more parse, and no assignment runs while nobody asks for domains.
 */
TEST(parse_once_per_change)
{
	struct model m;
	struct cache *c, *rd;
	struct quotad_topo *idx;
	struct quotad_topo_stats st, st2;
	struct plan_topology *p;
	char ns[16], rv[16];
	struct cache_instance ci = { .gvr = GVR, .kind = "Agent", .ns = "a",
	    .name = ns, .uid = "u", .rv = rv,
	    .created = "2026-01-01T00:00:00Z", .isolation = anns[0] };

	memset(&m, 0, sizeof(m));
	REQUIRE((c = setup(&m, &rd)) != NULL);
	REQUIRE(quotad_topo_new(false, &idx) == 0);
	for (int i = 0; i < 200; i++) {
		snprintf(ns, sizeof(ns), "d%d", i);
		snprintf(rv, sizeof(rv), "%d", ++rvn);
		CHECK(cache_instance_put(c, &ci, NULL) == 0);
	}
	/* one reconcile per tenant, twice */
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 200; i++) {
			snprintf(ns, sizeof(ns), "d%d", i);
			p = NULL;
			CHECK(quotad_topo_get(idx, rd, ns, &p) == 0);
			CHECK(p != NULL && p->domains == NULL);
			quotad_topology_free(p);
		}
	quotad_topo_stats(idx, &st);
	CHECK_INT(st.parsed, 200);
	CHECK_INT(st.passes, 1);
	/* the first assignment (empty); none since: nobody asks for domains */
	CHECK_INT(st.assigned, 1);
	snprintf(ns, sizeof(ns), "d%d", 200);
	CHECK(cache_instance_put(c, &ci, NULL) == 0);
	CHECK(quotad_topo_get(idx, rd, "d0", &p) == 0);
	quotad_topology_free(p);
	quotad_topo_stats(idx, &st2);
	CHECK_INT(st2.parsed, 201);
	CHECK_INT(st2.passes, 2);
	CHECK(st2.rows - st.rows < 10);
	CHECK_INT(st2.assigned, 1);
	quotad_topo_free(idx);
	test_cache_remove(c, rd);
}

/*
 * The index names a tenant's instances only when it holds them all:
 * before a pass, and after a live instance was left out (a tenant name
 * too long to index), the caller is told to read the cache instead.
 */
TEST(instances_only_when_complete)
{
	struct model m;
	struct cache *c, *rd;
	struct quotad_topo *idx;
	struct plan_topology *p = NULL;
	char got[512] = "", longname[80];
	struct cache_instance ci = { .gvr = GVR, .kind = "Agent", .ns = "a",
	    .name = "t0", .uid = "u", .rv = "1",
	    .created = "2026-01-01T00:00:00Z", .isolation = anns[0] };

	memset(&m, 0, sizeof(m));
	REQUIRE((c = setup(&m, &rd)) != NULL);
	REQUIRE(quotad_topo_new(false, &idx) == 0);
	CHECK(cache_instance_put(c, &ci, NULL) == 0);
	CHECK_INT(quotad_topo_instances(idx, rd, "t0", inst_note, got),
	    -ENOENT);
	CHECK(quotad_topo_get(idx, rd, "t0", &p) == 0);
	quotad_topology_free(p);
	CHECK_INT(quotad_topo_instances(idx, rd, "t0", inst_note, got), 0);
	CHECK_STR(got, "a/t0 ");
	CHECK_INT(quotad_topo_instances(idx, rd, "t1", inst_note, got), 0);
	CHECK_STR(got, "a/t0 ");
	memset(longname, 'x', 70);
	longname[70] = '\0';
	ci.name = longname;
	ci.rv = "2";
	CHECK(cache_instance_put(c, &ci, NULL) == 0);
	CHECK(quotad_topo_get(idx, rd, "t0", &p) == 0);
	quotad_topology_free(p);
	CHECK_INT(quotad_topo_instances(idx, rd, "t0", inst_note, got),
	    -ENOENT);
	quotad_topo_free(idx);
	test_cache_remove(c, rd);
}
