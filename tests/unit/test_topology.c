/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology isolation, the pure half: the fleet read from ResourceSlices
 * (other drivers and unusable devices left out), domains assigned to gpu
 * and pcie-root tenants enough for maxDevices, deterministically (slice
 * order does not matter) and stably (previous domains kept, lost ones
 * replaced and reported, exhaustion reported), never two tenants on one
 * GPU, and the selectors: an isolated tenant admits only its GPUs (none
 * when it has no domain), every tenant excludes the others' GPUs and
 * multi-allocatable GPUs outside its own domains.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-quota/topology.h"
#include "tests/unit/test.h"

/*
 * A slice of NODE with 8 GPUs behind ROOTS roots; GPUs below nmig are in
 * MIG mode (two 1g.10gb each); multi: allowMultipleAllocations.
 */
static json_t *
mkslice(const char *node, int roots, int nmig, bool multi)
{
	json_t *devs = json_array(), *d;
	char uuid[64], parent[64], root[32], name[32];

	for (int g = 0; g < 8; g++) {
		snprintf(parent, sizeof(parent), "GPU-%s-%d", node, g);
		snprintf(root, sizeof(root), "pci0000:%02x",
		    0x10 * (1 + g / (8 / roots)));
		for (int m = 0; m < (g < nmig ? 2 : 1); m++) {
			snprintf(uuid, sizeof(uuid), "MIG-%s-%d-%d", node, g, m);
			snprintf(name, sizeof(name), "gpu-%d%s", g,
			    g < nmig ? (m ? "-mig-b" : "-mig-a") : "");
			d = json_pack("{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}, "
			    "s:{s:s}}}", "name", name, "attributes", "type",
			    "string", g < nmig ? "mig" : "gpu", "uuid", "string",
			    g < nmig ? uuid : parent,
			    "resource.kubernetes.io/pcieRoot", "string", root,
			    "productName", "string", "H100");
			if (g < nmig) {
				json_object_set_new(json_object_get(d,
				    "attributes"), "parentUUID", json_pack(
				    "{s:s}", "string", parent));
				json_object_set_new(json_object_get(d,
				    "attributes"), "profile", json_pack("{s:s}",
				    "string", "1g.10gb"));
			}
			if (multi)
				json_object_set_new(d,
				    "allowMultipleAllocations", json_true());
			json_array_append_new(devs, d);
		}
	}
	return json_pack("{s:{s:s, s:s, s:o}}", "spec", "driver",
	    "gpu.nvidia.com", "nodeName", node, "devices", devs);
}

static void
add(struct topo_fleet *f, json_t *s)
{
	REQUIRE(topo_fleet_add(f, s) == 0);
	json_decref(s);
}

/* A tenant from an annotation text. */
static void
tenant(struct topo_tenant *t, const char *ns, const char *ann,
    const char *prev)
{
	struct annotation a;
	char err[256];

	REQUIRE(annotation_parse(ann, strlen(ann), &a, err, sizeof(err)) ==
	    0);
	topo_tenant_init(t, ns, &a, prev);
}

static void
clear(struct topo_tenant *t, int n)
{
	for (int i = 0; i < n; i++)
		topo_tenant_clear(&t[i]);
}

/* One test's fleet, tenants (in priority order) and selectors. */
struct topo_case {
	struct topo_fleet	 f;
	struct topo_tenant	 t[3];
	int			 n;
	json_t			*sel;
};

/* Free what a topo_case holds. */
static void
tc_free(struct topo_case *x)
{
	json_decref(x->sel);
	clear(x->t, x->n);
	topo_fleet_free(&x->f);
}

/* Assign domains to the tenants of x. */
static int
assign(struct topo_case *x)
{
	return topo_assign(&x->f, x->t, x->n);
}

/* The next tenant of x: exclusive, max devices, isolation iso (or none). */
static void
exclusive(struct topo_case *x, const char *ns, int max, const char *iso,
    const char *prev)
{
	char ann[128];

	if (iso != NULL)
		snprintf(ann, sizeof(ann), "{\"sharing\":\"exclusive\","
		    "\"maxDevices\":%d,\"isolation\":\"%s\"}", max, iso);
	else
		snprintf(ann, sizeof(ann), "{\"sharing\":\"exclusive\","
		    "\"maxDevices\":%d}", max);
	tenant(&x->t[x->n++], ns, ann, prev);
}

static char *
val(const struct topo_tenant *t)
{
	static char buf[4096];
	char *v = topo_domains_value(t);

	snprintf(buf, sizeof(buf), "%s", v ? v : "(null)");
	free(v);
	return buf;
}

TEST(fleet_reads_nvidia_devices_only)
{
	struct topo_fleet f = { 0 };
	json_t *other = json_pack("{s:{s:s, s:s, s:[{s:s, s:{}}]}}", "spec",
	    "driver", "example.com", "nodeName", "n1", "devices", "name", "x",
	    "attributes");
	json_t *nouuid = json_pack("{s:s, s:s, s:[{s:s, s:{s:{s:s}}}]}",
	    "driver", "gpu.nvidia.com", "nodeName", "n1", "devices", "name",
	    "x", "attributes", "type", "string", "gpu");
	json_t *quote = json_pack("{s:s, s:s, s:[{s:s, s:{s:{s:s}, s:{s:s}}}]}",
	    "driver", "gpu.nvidia.com", "nodeName", "n1", "devices", "name",
	    "x", "attributes", "type", "string", "gpu", "uuid", "string",
	    "GPU-'] || true || ['");

	add(&f, other);
	CHECK_INT(f.n, 0);
	CHECK_INT(f.skipped, 0);
	add(&f, nouuid);
	add(&f, quote);
	CHECK_INT(f.n, 0);
	CHECK_INT(f.skipped, 2);
	add(&f, mkslice("n1", 4, 2, false));
	CHECK_INT(f.n, 10);
	CHECK(f.d[0].mig);
	CHECK_STR(f.d[0].gpu, "GPU-n1-0");
	CHECK_STR(f.d[0].root, "pci0000:10");
	CHECK_STR(f.d[0].profile, "1g.10gb");
	CHECK(!f.d[9].mig);
	CHECK_STR(f.d[9].gpu, "GPU-n1-7");
	CHECK_STR(f.d[9].root, "pci0000:40");
	topo_fleet_free(&f);
}

TEST(gpu_and_root_tenants_get_disjoint_domains)
{
	struct topo_case x = { 0 };

	add(&x.f, mkslice("n1", 4, 0, false));
	add(&x.f, mkslice("n2", 2, 0, false));
	exclusive(&x, "a", 2, "gpu", NULL);
	exclusive(&x, "b", 3, "pcie-root", NULL);
	exclusive(&x, "c", 2, "pcie-root", NULL);
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[0]), "gpu/GPU-n1-0,gpu/GPU-n1-1");
	CHECK_INT(x.t[0].have, 2);
	/* b: root 10 of n1 holds a's GPUs; 20 and 30 have 2 each */
	CHECK_STR(val(&x.t[1]), "root/n1/pci0000:20,root/n1/pci0000:30");
	CHECK_INT(x.t[1].have, 4);
	CHECK_STR(val(&x.t[2]), "root/n1/pci0000:40");
	CHECK(!x.t[2].exhausted);
	tc_free(&x);
}

TEST(assignment_ignores_slice_order)
{
	struct topo_fleet f1 = { 0 }, f2 = { 0 };
	struct topo_tenant t1, t2;
	char a[4096];

	add(&f1, mkslice("n1", 2, 2, false));
	add(&f1, mkslice("n2", 4, 0, false));
	add(&f2, mkslice("n2", 4, 0, false));
	add(&f2, mkslice("n1", 2, 2, false));
	tenant(&t1, "a", "{\"sharing\":\"mig\",\"migProfile\":\"1g.10gb\","
	    "\"maxDevices\":3,\"isolation\":\"gpu\"}", NULL);
	t2 = t1;
	REQUIRE(topo_assign(&f1, &t1, 1) == 0);
	REQUIRE(topo_assign(&f2, &t2, 1) == 0);
	snprintf(a, sizeof(a), "%s", val(&t1));
	CHECK_STR(val(&t2), a);
	/* MIG devices: two per GPU, so two MIG GPUs for three */
	CHECK_STR(a, "gpu/GPU-n1-0,gpu/GPU-n1-1");
	CHECK_INT(t1.have, 4);
	clear(&t1, 1);
	clear(&t2, 1);
	topo_fleet_free(&f1);
	topo_fleet_free(&f2);
}

TEST(previous_domains_kept_lost_ones_replaced)
{
	struct topo_case x = { 0 };

	add(&x.f, mkslice("n1", 4, 0, false));
	/* b had n1's last root; a (first in priority) is new */
	exclusive(&x, "a", 2, "pcie-root", NULL);
	exclusive(&x, "b", 2, "pcie-root", "root/n1/pci0000:40");
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[0]), "root/n1/pci0000:10");
	CHECK_STR(val(&x.t[1]), "root/n1/pci0000:40");
	CHECK_INT(x.t[1].nlost, 0);
	/* n1's slice gone, n2 added: b loses its root and gets another */
	topo_fleet_free(&x.f);
	add(&x.f, mkslice("n2", 2, 0, false));
	x.t[0].prev = "root/n1/pci0000:10";
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[0]), "root/n2/pci0000:10");
	CHECK_INT(x.t[0].nlost, 1);
	CHECK_STR(x.t[0].lost, "root/n1/pci0000:10");
	CHECK_STR(val(&x.t[1]), "root/n2/pci0000:20");
	CHECK_INT(x.t[1].nlost, 1);
	/* a level change lets the old domains go without a loss */
	x.t[1].prev = "root/n2/pci0000:20";
	x.t[1].level = ANNOTATION_ISOLATION_GPU;
	REQUIRE(assign(&x) == 0);
	CHECK_INT(x.t[1].nlost, 0);
	CHECK_STR(val(&x.t[1]), "gpu/GPU-n2-4,gpu/GPU-n2-5");
	tc_free(&x);
}

TEST(exhausted_fleet_fails_closed)
{
	struct topo_case x = { .sel = json_array() };

	add(&x.f, mkslice("n1", 2, 0, false));
	exclusive(&x, "a", 9, "pcie-root", NULL);
	exclusive(&x, "b", 1, "gpu", NULL);
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[0]), "root/n1/pci0000:10,root/n1/pci0000:20");
	CHECK(x.t[0].exhausted);
	CHECK_INT(x.t[0].have, 8);
	CHECK_STR(val(&x.t[1]), "");
	CHECK(x.t[1].exhausted);
	REQUIRE(topo_selectors(&x.f, x.t, x.n, 1, x.sel) == 0);
	CHECK_INT(json_array_size(x.sel), 2);
	CHECK(strstr(json_string_value(json_object_get(json_object_get(
	    json_array_get(x.sel, 0), "cel"), "expression")), " in []") !=
	    NULL);
	tc_free(&x);
}

TEST(selectors_admit_own_exclude_others_and_multi)
{
	struct topo_case x = { .sel = json_array() };
	const char *e0, *e1;

	add(&x.f, mkslice("n1", 4, 0, false));
	add(&x.f, mkslice("n2", 2, 0, true));
	exclusive(&x, "a", 1, "gpu", NULL);
	exclusive(&x, "b", 1, NULL, NULL);
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[0]), "gpu/GPU-n1-0");
	CHECK_STR(val(&x.t[1]), "");
	REQUIRE(topo_selectors(&x.f, x.t, x.n, 0, x.sel) == 0);
	REQUIRE(json_array_size(x.sel) == 2);
	e0 = json_string_value(json_object_get(json_object_get(
	    json_array_get(x.sel, 0), "cel"), "expression"));
	e1 = json_string_value(json_object_get(json_object_get(
	    json_array_get(x.sel, 1), "cel"), "expression"));
	CHECK_STR(e0, "'uuid' in device.attributes['gpu.nvidia.com'] && "
	    "('parentUUID' in device.attributes['gpu.nvidia.com'] ? "
	    "device.attributes['gpu.nvidia.com'].parentUUID : "
	    "device.attributes['gpu.nvidia.com'].uuid) in ['GPU-n1-0']");
	/* a's own GPU is not denied; n2's multi-allocatable GPUs are */
	CHECK(strstr(e1, "'GPU-n1-0'") == NULL);
	CHECK(strstr(e1, "!('uuid' in device.attributes['gpu.nvidia.com']) "
	    "|| !(") == e1);
	CHECK(strstr(e1, "'GPU-n2-0','GPU-n2-1'") != NULL);
	CHECK(strstr(e1, "'GPU-n2-7']") != NULL);
	json_array_clear(x.sel);
	/* b (device level): no allow list; a's GPU and n2's are denied */
	REQUIRE(topo_selectors(&x.f, x.t, x.n, 1, x.sel) == 0);
	REQUIRE(json_array_size(x.sel) == 1);
	e0 = json_string_value(json_object_get(json_object_get(
	    json_array_get(x.sel, 0), "cel"), "expression"));
	CHECK(strstr(e0, "['GPU-n1-0','GPU-n2-0',") != NULL);
	tc_free(&x);
}

TEST(too_many_denied_gpus_is_an_error)
{
	struct topo_case x = { .sel = json_array() };
	char node[16];

	/* 29 selectors' worth of multi-allocatable GPUs */
	for (int i = 0; i < (TOPO_MAX_SELECTORS + 1) * TOPO_UUIDS_PER_SEL / 8
	    + 1; i++) {
		snprintf(node, sizeof(node), "n%d", i);
		add(&x.f, mkslice(node, 2, 0, true));
	}
	tenant(&x.t[x.n++], "a", "{\"sharing\":\"exclusive\"}", NULL);
	REQUIRE(assign(&x) == 0);
	CHECK_INT(topo_selectors(&x.f, x.t, x.n, 0, x.sel), -E2BIG);
	CHECK_INT(json_array_size(x.sel), 0);
	tc_free(&x);
}

TEST(gpus_busy_with_another_namespace_are_not_handed_out)
{
	struct topo_case x = { 0 };

	add(&x.f, mkslice("n1", 4, 0, false));
	/* d (device level) holds gpu-0; a holds gpu-2 already */
	REQUIRE(topo_fleet_busy(&x.f, "n1", "gpu-0", "d") == 0);
	REQUIRE(topo_fleet_busy(&x.f, "n1", "gpu-2", "a") == 0);
	REQUIRE(topo_fleet_busy(&x.f, "n1", "no-such", "a") == 0);
	REQUIRE(topo_fleet_busy(&x.f, "n9", "gpu-1", "a") == 0);
	exclusive(&x, "a", 4, "pcie-root", NULL);
	exclusive(&x, "b", 1, "gpu", NULL);
	REQUIRE(assign(&x) == 0);
	/* root 10 holds d's device: skipped; root 20 holds a's own: fine */
	CHECK_STR(val(&x.t[0]), "root/n1/pci0000:20,root/n1/pci0000:30");
	/* b: gpu-0 busy with d, 2-5 a's; gpu-1 is free */
	CHECK_STR(val(&x.t[1]), "gpu/GPU-n1-1");
	/* two namespaces on one (multi-allocatable) device: busy for all */
	REQUIRE(topo_fleet_busy(&x.f, "n1", "gpu-1", "x") == 0);
	REQUIRE(topo_fleet_busy(&x.f, "n1", "gpu-1", "b") == 0);
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[1]), "gpu/GPU-n1-6");
	/* a domain already held is kept, busy or not */
	x.t[1].prev = "gpu/GPU-n1-1";
	REQUIRE(assign(&x) == 0);
	CHECK_STR(val(&x.t[1]), "gpu/GPU-n1-1");
	tc_free(&x);
}
