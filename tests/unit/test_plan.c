/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan (kpgpud-quota/plan.c): for every sharing mode and optional field
 * it composes the real resource.k8s.io/v1 shapes with the NVIDIA driver's
 * attribute names, guarded CEL, deterministic DNS-valid names (hashed when
 * too long), owner references only where scope allows, kpgpud's quota keys,
 * the Namespace annotation admit reads, and the Warning events; invalid
 * annotations yield their precise message and no plan. DeviceClasses are
 * GPU classes unless their CEL provably names another driver (fail
 * closed); the quota is kpgpud's own (kpgpud-gpu), never the one KubePlus
 * names lower(kind)-<instance>; strict zeroes every GPU class but the tenant's, and more GPU
 * classes than a quota keys (or an unkeyable one) hold the claims at 0.
 * A plan kept between reconciles serves again only for the very inputs it
 * was built from (each input changed in turn gives the fresh plan).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-quota/plan.h"
#include "tests/unit/test.h"

/* Walk a '>'-separated path of keys and array indexes. */
static json_t *
jget(json_t *j, const char *path)
{
	char buf[512], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ">", &save); tok != NULL && j != NULL;
	    tok = strtok_r(NULL, ">", &save)) {
		if (json_is_array(j))
			j = json_array_get(j, strtoul(tok, NULL, 10));
		else
			j = json_object_get(j, tok);
	}
	return j;
}

/* The string at path, or NULL. */
static const char *
jstr(json_t *j, const char *path)
{
	return json_string_value(jget(j, path));
}

/* Load a fixture instance. */
static int
load(const char *name, struct plan_instance *in)
{
	char rel[256], err[256], *buf;
	FILE *f;
	long n;
	int r;

	snprintf(rel, sizeof(rel), "tests/fixtures/instances/%s.json", name);
	if ((f = fopen(test_srcpath(rel), "r")) == NULL)
		return -errno;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	r = plan_instance_parse(buf, (size_t)n, in, err, sizeof(err));
	if (r < 0)
		test_fail(__FILE__, __LINE__, "%s: %s", name, err);
	free(buf);
	return r;
}

/* Build the plan of a fixture with a configuration (NULL: the defaults). */
static struct plan *
build(const char *name, const struct plan_config *cfg)
{
	static const struct plan_config defaults;
	static struct plan_instance in;
	struct plan *p = NULL;
	char err[512];

	if (cfg == NULL)
		cfg = &defaults;
	if (load(name, &in) < 0)
		return NULL;
	if (plan_build(&in, cfg, &p, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "%s: %s", name, err);
	return p;
}

/* The value of a quota key in the plan, or -1. */
static int
key(const struct plan *p, const char *name)
{
	for (int i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].name, name) == 0)
			return p->keys[i].value;
	return -1;
}

/* The plan's Namespace annotation parsed as admit will (to free), or NULL. */
static struct resolved *
resolved_of(const struct plan *p)
{
	struct resolved *r = calloc(1, sizeof(*r));
	char err[256];

	if (r != NULL && resolved_parse(p->resolved, strlen(p->resolved), r,
	    err, sizeof(err)) != 0) {
		test_fail(__FILE__, __LINE__, "resolved: %s", err);
		free(r);
		r = NULL;
	}
	return r;
}

/* Whether admit, reading the plan's annotation, sees a sidecar in name. */
static bool
admit_sidecar(const struct plan *p, const char *name)
{
	struct resolved_pack *k = NULL;
	char err[256];
	bool yes;

	if (resolved_pack_parse(p->resolved, strlen(p->resolved), &k, err,
	    sizeof(err)) != 0) {
		test_fail(__FILE__, __LINE__, "resolved: %s", err);
		return false;
	}
	yes = resolved_sidecar(k, name);
	resolved_pack_unref(k);
	return yes;
}

/* A string a JSON document must hold at a path. */
struct want_str {
	const char	*path;
	const char	*want;
};

/* Check the strings of j at the paths of w (up to a NULL path). */
static void
check_strs(json_t *j, const struct want_str *w)
{
	for (; w->path != NULL; w++) {
		const char *have = jstr(j, w->path);

		if (have == NULL || strcmp(have, w->want) != 0)
			test_fail(__FILE__, __LINE__, "%s: \"%s\" != \"%s\"",
			    w->path, have ? have : "(null)", w->want);
	}
}

/* The quota keys of a class and of the claim count. */
#define CLASS_KEY(c)	c ".deviceclass.resource.k8s.io/devices"
#define CLAIMS_KEY	"count/resourceclaims.resource.k8s.io"

/* A quota key a plan must hold with that value (-1: not at all). */
struct want_key {
	const char	*name;
	int		 value;
};

/*
 * Check a plan: closed or not, its number of keys (-1: any) and the keys
 * of w (up to a NULL name).
 */
static void
check_plan(const struct plan *p, bool closed, int nkeys,
    const struct want_key *w)
{
	CHECK(p->closed == closed);
	if (nkeys >= 0)
		CHECK_INT(p->nkeys, nkeys);
	for (; w->name != NULL; w++)
		if (key(p, w->name) != w->value)
			test_fail(__FILE__, __LINE__, "key %s: %d, not %d",
			    w->name, key(p, w->name), w->value);
}

/* The strings of the exclusive fixture's ResourceClaimTemplate. */
static const struct want_str exclusive_claim[] = {
	{ "apiVersion", "resource.k8s.io/v1" },
	{ "kind", "ResourceClaimTemplate" },
	{ "metadata>name", "agent-team-a-gpu" },
	{ "metadata>namespace", "team-a" },
	{ "metadata>labels>app.kubernetes.io/managed-by", "kpgpud" },
	{ "metadata>annotations>" PLAN_INSTANCE_ANNOT, "Agent/team-a" },
	{ "spec>spec>devices>requests>0>name", "gpu" },
	{ "spec>spec>devices>requests>0>exactly>deviceClassName",
	  "gpu.nvidia.com" },
	{ "spec>spec>devices>requests>0>exactly>allocationMode",
	  "ExactCount" },
	{ "spec>metadata>labels>" PLAN_INSTANCE_LABEL, "agent-team-a" },
	{ NULL, NULL },
};

TEST(exclusive_template)
{
	struct plan *p = build("exclusive", NULL);
	struct resolved *r;
	json_t *c;

	REQUIRE(p != NULL);
	c = p->claim;
	CHECK(p->device_class == NULL);
	CHECK(p->claim_is_template);
	check_strs(c, exclusive_claim);
	/* the instance lives in "default": no cross-namespace owner */
	CHECK(jget(c, "metadata>ownerReferences") == NULL);
	CHECK_INT(json_integer_value(jget(c, "spec>spec>devices>requests>0>"
	    "exactly>count")), 1);
	CHECK(jget(c, "spec>spec>devices>requests>0>exactly>selectors") ==
	    NULL);
	CHECK(jget(c, "spec>spec>devices>requests>0>deviceClassName") ==
	    NULL);
	CHECK(jget(c, "spec>spec>devices>constraints") == NULL);
	CHECK(jget(c, "spec>spec>devices>config") == NULL);
	/* kpgpud's own quota, never KubePlus's agent-team-a */
	CHECK_STR(p->quota_name, "kpgpud-gpu");
	CHECK_INT(p->nkeys, 2);
	CHECK_INT(key(p, "count/resourceclaims.resource.k8s.io"), 2);
	CHECK_INT(key(p, "gpu.nvidia.com.deviceclass.resource.k8s.io/"
	    "devices"), 2);
	CHECK_INT(p->nevents, 0);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_STR(r->claim_template, "agent-team-a-gpu");
	CHECK_STR(r->claim, "");
	CHECK_STR(r->sharing, "exclusive");
	CHECK_STR(r->instance, "Agent/team-a");
	CHECK_INT(r->pol.legacy, RESOLVED_LEGACY_REJECT);
	free(r);
	plan_free(p);
}

/*
 * The sidecar containers: the instance's list, else the operator's
 * (--sidecar-containers), else the built-in one; into the resolved and
 * the plain Namespace annotation alike.
 */
TEST(sidecar_containers_sources)
{
	struct plan_config cfg = { 0 };
	struct resolved *r;
	struct plan *p;
	char err[256];
	json_t *d;

	cfg.sidecars = "my-mesh,istio-proxy";
	REQUIRE((p = build("exclusive", &cfg)) != NULL);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_INT(r->pol.nsidecar_names, 2);
	CHECK(admit_sidecar(p, "my-mesh"));
	CHECK(!admit_sidecar(p, "linkerd-proxy"));
	d = plan_ns_annotations(p);
	CHECK_STR(jstr(d, PLAN_NS_SIDECAR_ANNOT), "my-mesh,istio-proxy");
	json_decref(d);
	free(r);
	plan_free(p);
	/* the instance's own list wins */
	REQUIRE((p = build("exclusive-sidecars", &cfg)) != NULL);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_INT(r->pol.nsidecar_names, 1);
	CHECK_STR(r->pol.sidecar_names[0], "my-proxy");
	free(r);
	plan_free(p);
	/* the operator says none: every container gets the claim */
	cfg.sidecars = "none";
	REQUIRE((p = build("exclusive", &cfg)) != NULL);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_INT(r->pol.nsidecar_names, 0);
	CHECK(strstr(p->resolved, "sidecar") == NULL);
	d = plan_ns_annotations(p);
	CHECK_STR(jstr(d, PLAN_NS_SIDECAR_ANNOT), "none");
	json_decref(d);
	free(r);
	plan_free(p);
	/* unset: the built-in list */
	cfg.sidecars = NULL;
	REQUIRE((p = build("exclusive", &cfg)) != NULL);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK(admit_sidecar(p, "vault-agent-init"));
	plan_free(p);
	free(r);
	CHECK(plan_sidecars_valid("none", err, sizeof(err)));
	CHECK(plan_sidecars_valid("a,b-c", err, sizeof(err)));
	CHECK(!plan_sidecars_valid("all", err, sizeof(err)));
	CHECK(!plan_sidecars_valid("a,,b", err, sizeof(err)));
	CHECK(!plan_sidecars_valid("Envoy", err, sizeof(err)));
	CHECK(strstr(err, "not a valid container name") != NULL);
	CHECK(!plan_sidecars_valid("a,a", err, sizeof(err)));
}

TEST(exclusive_optional_fields)
{
	struct plan *p = build("exclusive-full", NULL);
	struct resolved *r;
	json_t *d;

	REQUIRE(p != NULL);
	d = jget(p->claim, "spec>spec>devices");
	CHECK_INT(json_integer_value(jget(d, "requests>0>exactly>count")), 2);
	CHECK_INT(json_array_size(jget(d, "requests>0>exactly>selectors")),
	    2);
	CHECK_STR(jstr(d, "requests>0>exactly>selectors>0>cel>expression"),
	    "'productName' in device.attributes['gpu.nvidia.com'] && "
	    "device.attributes['gpu.nvidia.com'].productName == "
	    "'NVIDIA A100 80GB PCIe'");
	CHECK_STR(jstr(d, "requests>0>exactly>selectors>1>cel>expression"),
	    "'memory' in device.capacity['gpu.nvidia.com'] && "
	    "device.capacity['gpu.nvidia.com'].memory.compareTo("
	    "quantity('40Gi')) >= 0");
	CHECK_STR(jstr(d, "constraints>0>matchAttribute"),
	    "resource.kubernetes.io/pcieRoot");
	CHECK_STR(jstr(d, "constraints>0>requests>0"), "gpu");
	CHECK_INT(key(p, "count/resourceclaims.resource.k8s.io"), 4);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_INT(r->pol.init, RESOLVED_INIT_NAMED);
	CHECK_INT(r->pol.ninit_names, 2);
	CHECK_STR(r->pol.init_names[0], "setup");
	CHECK_INT(r->pol.legacy, RESOLVED_LEGACY_TRANSLATE);
	/* the plain Namespace annotations of the admission policy */
	d = plan_ns_annotations(p);
	CHECK_STR(jstr(d, PLAN_NS_TEMPLATE_ANNOT), "agent-team-b-gpu");
	CHECK(json_object_get(d, PLAN_NS_CLAIM_ANNOT) == NULL);
	CHECK_STR(jstr(d, PLAN_NS_CLASS_ANNOT), "gpu.nvidia.com");
	CHECK_STR(jstr(d, PLAN_NS_MAX_ANNOT), "4");
	CHECK_STR(jstr(d, PLAN_NS_INIT_ANNOT), "setup,warmup");
	/* the default sidecars, in the plain and in the resolved form */
	CHECK(strncmp(jstr(d, PLAN_NS_SIDECAR_ANNOT), "istio-proxy,", 12)
	    == 0);
	CHECK(strstr(jstr(d, PLAN_NS_SIDECAR_ANNOT), ",cloud-sql-proxy,")
	    != NULL);
	CHECK(admit_sidecar(p, "linkerd-proxy"));
	CHECK(!admit_sidecar(p, "setup"));
	CHECK_STR(jstr(d, RESOLVED_ANNOTATION), p->resolved);
	json_decref(d);
	free(r);
	plan_free(p);
}

TEST(mig_class_and_template)
{
	struct plan *p = build("mig", NULL);
	json_t *dc;

	REQUIRE(p != NULL);
	dc = p->device_class;
	REQUIRE(dc != NULL);
	CHECK_STR(jstr(dc, "apiVersion"), "resource.k8s.io/v1");
	CHECK_STR(jstr(dc, "kind"), "DeviceClass");
	CHECK_STR(jstr(dc, "metadata>name"), "kpgpud-mig-1g.10gb");
	CHECK(jget(dc, "metadata>namespace") == NULL);
	CHECK(jget(dc, "metadata>ownerReferences") == NULL);
	CHECK_STR(jstr(dc, "metadata>labels>app.kubernetes.io/managed-by"),
	    "kpgpud");
	CHECK_STR(jstr(dc, "metadata>labels>" PLAN_PROFILE_LABEL),
	    "1g.10gb");
	CHECK_STR(jstr(dc, "spec>selectors>0>cel>expression"),
	    "device.driver == 'gpu.nvidia.com' && 'type' in "
	    "device.attributes['gpu.nvidia.com'] && "
	    "device.attributes['gpu.nvidia.com'].type == 'mig' && 'profile' "
	    "in device.attributes['gpu.nvidia.com'] && "
	    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'");
	CHECK_STR(jstr(p->claim, "kind"), "ResourceClaimTemplate");
	CHECK_STR(jstr(p->claim, "spec>spec>devices>requests>0>exactly>"
	    "deviceClassName"), "kpgpud-mig-1g.10gb");
	CHECK_STR(p->class_name, "kpgpud-mig-1g.10gb");
	CHECK_INT(key(p, "kpgpud-mig-1g.10gb.deviceclass.resource.k8s.io/"
	    "devices"), 1);
	CHECK_INT(key(p, "gpu.nvidia.com.deviceclass.resource.k8s.io/"
	    "devices"), -1);
	CHECK_INT(p->nevents, 0);
	plan_free(p);
}

TEST(mig_suffix_profile_and_parent_uuid)
{
	struct plan_config cfg = { .class_prefix = "tenant-gpu-" };
	struct plan *p = build("mig-topology", &cfg);
	struct resolved *r;

	REQUIRE(p != NULL);
	CHECK_STR(p->class_name, "tenant-gpu-1g.10gb-me");
	CHECK_STR(jstr(p->device_class, "metadata>labels>"
	    PLAN_PROFILE_LABEL), "1g.10gb-me");
	CHECK(strstr(jstr(p->device_class, "spec>selectors>0>cel>"
	    "expression"), ".profile == '1g.10gb+me'") != NULL);
	CHECK_STR(jstr(p->claim, "spec>spec>devices>constraints>0>"
	    "matchAttribute"), "gpu.nvidia.com/parentUUID");
	CHECK_INT(json_integer_value(jget(p->claim, "spec>spec>devices>"
	    "requests>0>exactly>count")), 2);
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_INT(r->pol.init, RESOLVED_INIT_ALL);
	free(r);
	plan_free(p);
}

TEST(topology_needs_more_than_one_device)
{
	struct plan_instance in;
	struct plan_config cfg = { 0 };
	struct plan *p = NULL;
	char err[256];

	REQUIRE(load("mig", &in) == 0);
	snprintf(in.annotation, sizeof(in.annotation), "{\"sharing\":\"mig\","
	    "\"migProfile\":\"1g.10gb\",\"topology\":\"parentUUID\"}");
	in.annotation_len = strlen(in.annotation);
	REQUIRE(plan_build(&in, &cfg, &p, err, sizeof(err)) == 0);
	CHECK(jget(p->claim, "spec>spec>devices>constraints") == NULL);
	plan_free(p);
}

TEST(time_slicing_shared_claim)
{
	struct plan_config cfg = { .driver_gates = PLAN_GATE_TIME_SLICING };
	struct plan *p = build("time-slicing", &cfg);
	struct resolved *r;
	json_t *c;

	REQUIRE(p != NULL);
	c = p->claim;
	CHECK(!p->claim_is_template);
	CHECK(p->device_class == NULL);
	CHECK_STR(jstr(c, "kind"), "ResourceClaim");
	/* the name is the base and a hash of the spec */
	CHECK(strncmp(jstr(c, "metadata>name"), "agent-team-e-gpu-", 17) ==
	    0);
	CHECK_INT(strlen(jstr(c, "metadata>name")), 25);
	CHECK_STR(jstr(c, "metadata>name"), p->claim_name);
	CHECK_STR(p->claim_legacy, "agent-team-e-gpu");
	CHECK_STR(jstr(c, "metadata>namespace"), "team-e");
	CHECK_STR(jstr(c, "spec>devices>requests>0>exactly>deviceClassName"),
	    "gpu.nvidia.com");
	CHECK_STR(jstr(c, "spec>devices>config>0>requests>0"), "gpu");
	CHECK_STR(jstr(c, "spec>devices>config>0>opaque>driver"),
	    "gpu.nvidia.com");
	CHECK_STR(jstr(c, "spec>devices>config>0>opaque>parameters>"
	    "apiVersion"), "resource.nvidia.com/v1beta1");
	CHECK_STR(jstr(c, "spec>devices>config>0>opaque>parameters>kind"),
	    "GpuConfig");
	CHECK_STR(jstr(c, "spec>devices>config>0>opaque>parameters>sharing>"
	    "strategy"), "TimeSlicing");
	CHECK_STR(jstr(c, "spec>devices>config>0>opaque>parameters>sharing>"
	    "timeSlicingConfig>interval"), "Long");
	REQUIRE((r = resolved_of(p)) != NULL);
	CHECK_STR(r->claim, p->claim_name);
	CHECK_STR(r->claim_template, "");
	c = plan_ns_annotations(p);
	CHECK_STR(jstr(c, PLAN_NS_CLAIM_ANNOT), p->claim_name);
	CHECK(json_object_get(c, PLAN_NS_TEMPLATE_ANNOT) == NULL);
	CHECK_STR(jstr(c, PLAN_NS_MAX_ANNOT), "1");
	CHECK_STR(jstr(c, PLAN_NS_INIT_ANNOT), "none");
	json_decref(c);
	/* the operator declared the gate: nothing to warn about */
	CHECK_INT(p->nevents, 0);
	free(r);
	plan_free(p);
}

TEST(mps_shared_claim)
{
	struct plan_config cfg = { .driver_gates = PLAN_GATE_MPS };
	struct plan *p = build("mps", &cfg);
	json_t *sh;

	REQUIRE(p != NULL);
	CHECK_STR(jstr(p->claim, "kind"), "ResourceClaim");
	sh = jget(p->claim, "spec>devices>config>0>opaque>parameters>"
	    "sharing");
	CHECK_STR(jstr(sh, "strategy"), "MPS");
	CHECK(jget(sh, "timeSlicingConfig") == NULL);
	CHECK_INT(json_integer_value(jget(sh, "mpsConfig>"
	    "defaultActiveThreadPercentage")), 50);
	CHECK_STR(jstr(sh, "mpsConfig>defaultPinnedDeviceMemoryLimit"),
	    "10Gi");
	CHECK_INT(p->nevents, 0);
	plan_free(p);
}

TEST(hybrid_shared_mig_claim)
{
	struct plan_config cfg = { 0 };
	struct plan *p = build("hybrid", &cfg);

	REQUIRE(p != NULL);
	REQUIRE(p->device_class != NULL);
	CHECK_STR(jstr(p->device_class, "metadata>name"),
	    "kpgpud-mig-2g.20gb");
	CHECK_STR(jstr(p->claim, "kind"), "ResourceClaim");
	CHECK_STR(jstr(p->claim, "spec>devices>requests>0>exactly>"
	    "deviceClassName"), "kpgpud-mig-2g.20gb");
	CHECK(jget(p->claim, "spec>devices>config") == NULL);
	REQUIRE(p->nevents == 1);
	CHECK_STR(p->events[0].reason, "ExperimentalHybridSharing");
	CHECK_STR(p->events[0].type, "Normal");	/* a notice, not a failure */
	CHECK_STR(p->events[0].message, "sharing \"hybrid\" is experimental: "
	    "the tenant's pods time-share one ResourceClaim of a MIG device "
	    "of profile 2g.20gb");
	plan_free(p);
}

/* The plan of the time-slicing fixture with another annotation. */
static struct plan *
build_ann(const char *fixture, const char *annotation)
{
	static struct plan_instance in;
	struct plan_config cfg = { 0 };
	struct plan *p = NULL;
	char err[512];

	if (load(fixture, &in) < 0)
		return NULL;
	snprintf(in.annotation, sizeof(in.annotation), "%s", annotation);
	in.annotation_len = strlen(in.annotation);
	if (plan_build(&in, &cfg, &p, err, sizeof(err)) < 0)
		test_fail(__FILE__, __LINE__, "%s", err);
	return p;
}

TEST(shared_claim_name_follows_spec)
{
	struct plan *a = build_ann("time-slicing", "{\"sharing\":"
	    "\"time-slicing\",\"maxDevices\":2}");
	struct plan *b = build_ann("time-slicing", "{\"sharing\":"
	    "\"time-slicing\",\"maxDevices\":4,\"initContainers\":\"all\","
	    "\"legacyGPU\":\"translate\"}");
	struct plan *c = build_ann("time-slicing", "{\"sharing\":"
	    "\"time-slicing\",\"maxDevices\":2,\"devicesPerPod\":2}");
	struct plan *d = build_ann("time-slicing", "{\"sharing\":"
	    "\"exclusive\",\"maxDevices\":2}");
	char name[80];

	REQUIRE(a != NULL && b != NULL && c != NULL && d != NULL);
	/* fields outside the claim's spec keep the name; a spec change not */
	CHECK_STR(a->claim_name, b->claim_name);
	CHECK(strcmp(a->claim_name, c->claim_name) != 0);
	CHECK(dns1123_label_valid(a->claim_name) && dns1123_label_valid(c->claim_name));
	/* the tenant's other claim names: legacy and base-<8 hex> only */
	CHECK(plan_claim_old_name(a, c->claim_name));
	CHECK(plan_claim_old_name(a, "agent-team-e-gpu"));
	CHECK(!plan_claim_old_name(a, a->claim_name));
	CHECK(!plan_claim_old_name(a, "agent-team-e-gpu-1234567"));
	CHECK(!plan_claim_old_name(a, "agent-team-e-gpu-1234567g"));
	CHECK(!plan_claim_old_name(a, "agent-team-e-gpu-123456789"));
	CHECK(!plan_claim_old_name(a, "agent-team-e-gpux12345678"));
	CHECK(!plan_claim_old_name(a, "mine"));
	snprintf(name, sizeof(name), "%s-0000000A", a->claim_base);
	CHECK(!plan_claim_old_name(a, name));
	snprintf(name, sizeof(name), "%s-0000000a", a->claim_base);
	CHECK(plan_claim_old_name(a, name));
	/* a template keeps the fixed name */
	CHECK_STR(d->claim_name, "agent-team-e-gpu");
	plan_free(a);
	plan_free(b);
	plan_free(c);
	plan_free(d);
}

TEST(name_fit_hashes_long_names)
{
	char a[64], b[64], c[64], longa[200], longb[200];

	CHECK(plan_name_fit("short", 63, a, sizeof(a)) == 0);
	CHECK_STR(a, "short");
	memset(longa, 'a', 100);
	longa[100] = '\0';
	memcpy(longb, longa, 101);
	longb[99] = 'b';
	REQUIRE(plan_name_fit(longa, 63, a, sizeof(a)) == 0);
	REQUIRE(plan_name_fit(longb, 63, b, sizeof(b)) == 0);
	REQUIRE(plan_name_fit(longa, 63, c, sizeof(c)) == 0);
	CHECK_INT(strlen(a), 63);
	CHECK(strncmp(a, longa, 54) == 0);
	CHECK(a[54] == '-');
	CHECK(strcmp(a, b) != 0);	/* same prefix, different hash */
	CHECK_STR(a, c);		/* deterministic */
	CHECK(dns1123_label_valid(a));
	/* a cut that ends in a dash or dot loses it */
	memset(longa, 'x', 100);
	longa[53] = '-';
	longa[52] = '.';
	REQUIRE(plan_name_fit(longa, 63, a, sizeof(a)) == 0);
	CHECK_INT(strlen(a), 61);
	CHECK(a[51] == 'x' && a[52] == '-');
	CHECK(plan_name_fit(longa, 63, a, 40) == -EINVAL);
	CHECK(plan_name_fit(longa, 5, a, sizeof(a)) == -EINVAL);
}

TEST(long_instance_name)
{
	struct plan_config cfg = { .quota_name = "{kind}-{name}-gpu" };
	struct plan *p = build("long-name", &cfg), *q = build("long-name",
	    &cfg);
	const char *name;

	REQUIRE(p != NULL && q != NULL);
	name = jstr(p->claim, "metadata>name");
	REQUIRE(name != NULL);
	CHECK_INT(strlen(name), 63);
	CHECK(dns1123_label_valid(name));
	CHECK(strncmp(name, "wordpressservice-tenant-xxx", 27) == 0);
	CHECK_STR(name, jstr(q->claim, "metadata>name"));
	CHECK_STR(p->claim_name, name);
	CHECK_INT(strlen(jstr(p->claim, "metadata>labels>"
	    PLAN_INSTANCE_LABEL)), 63);
	CHECK_STR(p->namespace, "tenant-xxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxx");
	CHECK_STR(p->quota_name, "wordpressservice-tenant-xxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-gpu");
	plan_free(p);
	plan_free(q);
}

TEST(owner_references_where_scope_allows)
{
	struct plan_config cfg = { .owner_refs = true };
	struct plan_instance in;
	struct plan *p;
	char err[256];

	/* cluster-scoped instance: may own namespaced objects */
	p = build("cluster-scoped", &cfg);
	REQUIRE(p != NULL);
	CHECK_STR(jstr(p->claim, "metadata>ownerReferences>0>kind"),
	    "Tenant");
	CHECK_STR(jstr(p->claim, "metadata>ownerReferences>0>name"),
	    "team-h");
	CHECK_STR(jstr(p->claim, "metadata>ownerReferences>0>apiVersion"),
	    "platformapi.kubeplus/v1alpha1");
	CHECK(jstr(p->claim, "metadata>ownerReferences>0>uid") != NULL);
	CHECK(json_is_true(jget(p->claim, "metadata>ownerReferences>0>"
	    "controller")));
	plan_free(p);

	/* instance in another namespace: no owner reference */
	p = build("exclusive", &cfg);
	REQUIRE(p != NULL);
	CHECK(jget(p->claim, "metadata>ownerReferences") == NULL);
	plan_free(p);

	/* instance in the tenant namespace itself: owner reference */
	REQUIRE(load("mig", &in) == 0);
	snprintf(in.namespace, sizeof(in.namespace), "team-c");
	REQUIRE(plan_build(&in, &cfg, &p, err, sizeof(err)) == 0);
	CHECK_STR(jstr(p->claim, "metadata>ownerReferences>0>name"),
	    "team-c");
	CHECK(jget(p->device_class, "metadata>ownerReferences") == NULL);
	plan_free(p);

	/* render without --owner-refs: none */
	cfg.owner_refs = false;
	p = build("cluster-scoped", &cfg);
	REQUIRE(p != NULL);
	CHECK(jget(p->claim, "metadata>ownerReferences") == NULL);
	plan_free(p);
}

/* Strict plans: fixture, strict classes, key count and some keys. */
static const struct {
	const char	*fixture;
	const char	*strict_classes;
	int		 nkeys;
	struct want_key	 keys[4];
} strict_cases[] = {
	{ "exclusive", NULL, 4, {
		{ CLASS_KEY("gpu.nvidia.com"), 2 },
		{ CLASS_KEY("mig.nvidia.com"), 0 },
		{ CLASS_KEY("vfio.gpu.nvidia.com"), 0 },
		{ NULL, 0 } } },
	{ "mig", NULL, 5, {
		{ CLASS_KEY("gpu.nvidia.com"), 0 },
		{ CLASS_KEY("kpgpud-mig-1g.10gb"), 1 },
		{ NULL, 0 } } },
	{ "exclusive", "a.example.com, b.example.com,a.example.com", 4, {
		{ CLASS_KEY("b.example.com"), 0 },
		{ NULL, 0 } } },
};

TEST(strict_zeroes_other_classes)
{
	for (size_t i = 0; i < nitems(strict_cases); i++) {
		struct plan_config cfg = { .strict = true,
		    .strict_classes = strict_cases[i].strict_classes };
		struct plan *p = build(strict_cases[i].fixture, &cfg);

		REQUIRE(p != NULL);
		check_plan(p, false, strict_cases[i].nkeys,
		    strict_cases[i].keys);
		plan_free(p);
	}
}

TEST(config_errors)
{
	struct plan_config cfg = { 0 };
	struct plan_instance in;
	struct plan *p = NULL;
	char err[256];

	REQUIRE(load("exclusive", &in) == 0);
	cfg.strict = true;
	cfg.strict_classes = "gpu.nvidia.com,Bad_Class";
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "strict class \"Bad_Class\" is not a valid "
	    "DeviceClass name");
	cfg.strict = false;
	cfg.quota_name = "{kind}_{name}";
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "quota name template \"{kind}_{name}\" gives an "
	    "invalid name");
	cfg.quota_name = "{name}-quota";
	REQUIRE(plan_build(&in, &cfg, &p, err, sizeof(err)) == 0);
	CHECK_STR(p->quota_name, "team-a-quota");
	plan_free(p);
	p = NULL;
	/* never the quota KubePlus creates for the instance's release */
	cfg.quota_name = "{kind}-{name}";
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "quota name \"agent-team-a\" is the one KubePlus "
	    "creates for the Helm release of Agent/team-a; kpgpud keeps its "
	    "keys in a quota of its own");
	cfg.quota_name = "agent-team-a";
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK(p == NULL);
	cfg.quota_name = NULL;
	cfg.gpu_class = "-gpu";
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "GPU class \"-gpu\" is not a valid DeviceClass name");
	CHECK(p == NULL);
}

TEST(tenant_namespace_choice)
{
	struct plan_config cfg = { .ns_from_namespace = true };
	struct plan_instance in;
	struct plan *p = NULL;
	char err[256];

	p = build("exclusive", &cfg);
	REQUIRE(p != NULL);
	CHECK_STR(p->namespace, "default");
	CHECK_STR(jstr(p->claim, "metadata>namespace"), "default");
	plan_free(p);
	p = NULL;

	REQUIRE(load("long-name", &in) == 0);
	memset(in.name + strlen(in.name), 'y', 20);	/* 77 characters */
	cfg.ns_from_namespace = false;
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "is not a valid namespace name") != NULL);
	REQUIRE(load("cluster-scoped", &in) == 0);
	cfg.ns_from_namespace = true;
	CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "tenant namespace \"\" of Tenant/team-h is not a "
	    "valid namespace name");
}

TEST(invalid_annotations_give_no_plan)
{
	static const struct {
		const char *fixture, *msg;
	} cases[] = {
		{ "invalid-json", "invalid JSON at line 1 column 17: string "
		  "or '}' expected near end of file" },
		{ "invalid-sharing", "unknown sharing \"shared\" (expected "
		  "exclusive, mig, time-slicing, mps or hybrid)" },
		{ "invalid-mig-no-profile", "sharing \"mig\" requires field "
		  "\"migProfile\"" },
		{ "invalid-profile", "malformed migProfile \"10gb\" (expected "
		  "<slices>g.<memory>gb with an optional +suffix, e.g. "
		  "\"1g.10gb\" or \"1g.10gb+me\")" },
		{ "invalid-max-devices", "maxDevices must be at least 1, got 0" },
		{ "invalid-unknown-field", "unknown field \"maxDevice\" (known: "
		  "sharing, migProfile, maxDevices, devicesPerPod, productName, "
		  "minMemory, topology, timeSlicing, mps, initContainers, "
		  "sidecarContainers, legacyGPU, isolation)" },
		{ "no-annotation", "Agent/team-i has no "
		  "kubeplus.io/gpu-isolation annotation" },
	};
	struct plan_config cfg = { 0 };
	struct plan_instance in;
	struct plan *p;
	char err[512];

	for (size_t i = 0; i < nitems(cases); i++) {
		p = NULL;
		REQUIRE(load(cases[i].fixture, &in) == 0);
		CHECK(plan_build(&in, &cfg, &p, err, sizeof(err)) == -EINVAL);
		CHECK(p == NULL);
		CHECK_STR(err, cases[i].msg);
	}
}

TEST(oversized_annotation)
{
	struct plan_config cfg = { 0 };
	struct plan_instance *in = calloc(1, sizeof(*in));
	struct plan *p = NULL;
	char err[256], *obj;
	size_t n = 100000;

	REQUIRE(in != NULL && (obj = malloc(n + 512)) != NULL);
	n = (size_t)sprintf(obj, "{\"apiVersion\":\"a/v1\",\"kind\":\"A\","
	    "\"metadata\":{\"name\":\"x\",\"annotations\":{"
	    "\"kubeplus.io/gpu-isolation\":\"");
	memset(obj + n, ' ', 90000);
	n += 90000;
	n += (size_t)sprintf(obj + n, "\"}}}");
	REQUIRE(plan_instance_parse(obj, n, in, err, sizeof(err)) == 0);
	CHECK_INT(in->annotation_len, 90000);
	CHECK(plan_build(in, &cfg, &p, err, sizeof(err)) == -EINVAL);
	CHECK_STR(err, "annotation is 90000 bytes, more than the limit of "
	    "4096");
	free(obj);
	free(in);
}

TEST(instance_parse_errors)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{ "[]", "instance is not a JSON object" },
		{ "{\"kind\":\"A\"}", "instance has no metadata" },
		{ "{\"kind\":\"A\",\"metadata\":{\"name\":\"x\"}}",
		  "instance has no apiVersion" },
		{ "{\"apiVersion\":\"v1\",\"kind\":\"A-b\",\"metadata\":"
		  "{\"name\":\"x\"}}", "instance kind is not an identifier" },
		{ "{\"apiVersion\":\"v1\",\"kind\":\"A\",\"metadata\":"
		  "{\"name\":\"X\"}}", "instance name is not a DNS subdomain" },
		{ "{\"apiVersion\":\"v1\",\"kind\":\"A\",\"metadata\":"
		  "{\"name\":7}}", "instance name is not a string" },
		{ "{\"apiVersion\":\"v1\",\"kind\":\"A\",\"metadata\":"
		  "{\"name\":\"x\",\"annotations\":{"
		  "\"kubeplus.io/gpu-isolation\":{}}}}",
		  "annotation kubeplus.io/gpu-isolation is not a string" },
	};
	struct plan_instance in;
	char err[256];

	for (size_t i = 0; i < nitems(cases); i++) {
		CHECK(plan_instance_parse(cases[i].json,
		    strlen(cases[i].json), &in, err, sizeof(err)) == -EINVAL);
		CHECK_STR(err, cases[i].msg);
	}
}

TEST(older_instance_wins)
{
	struct plan_instance a = { 0 }, b = { 0 };

	snprintf(a.kind, sizeof(a.kind), "Agent");
	snprintf(b.kind, sizeof(b.kind), "Agent");
	snprintf(a.name, sizeof(a.name), "zeta");
	snprintf(b.name, sizeof(b.name), "alpha");
	snprintf(a.created, sizeof(a.created), "2026-01-01T00:00:00Z");
	snprintf(b.created, sizeof(b.created), "2026-02-01T00:00:00Z");
	CHECK(plan_instance_cmp(&a, &b) < 0);
	CHECK(plan_instance_cmp(&b, &a) > 0);
	snprintf(b.created, sizeof(b.created), "2026-01-01T00:00:00Z");
	CHECK(plan_instance_cmp(&b, &a) < 0);	/* tie: by name */
	b.created[0] = '\0';
	CHECK(plan_instance_cmp(&a, &b) < 0);	/* unknown age loses */
}

/* The strings of the mig fixture's plan document (strict). */
static const struct want_str mig_document[] = {
	{ "instance", "Agent/team-c" },
	{ "sharing", "mig" },
	{ "objects>0>kind", "DeviceClass" },
	{ "objects>1>kind", "ResourceClaimTemplate" },
	{ "quota>name", "kpgpud-gpu" },
	{ "quota>namespace", "team-c" },
	{ "quota>hard>" CLAIMS_KEY, "1" },
	{ "quota>hard>" CLASS_KEY("mig.nvidia.com"), "0" },
	{ "namespace>labels>" RESOLVED_LABEL, "true" },
	{ NULL, NULL },
};

TEST(plan_document)
{
	struct plan_config cfg = { .strict = true };
	struct plan *p = build("mig", &cfg);
	json_t *j;

	REQUIRE(p != NULL);
	j = plan_to_json(p);
	REQUIRE(j != NULL);
	check_strs(j, mig_document);
	CHECK_INT(json_array_size(jget(j, "objects")), 2);
	CHECK_STR(jstr(j, "namespace>annotations>" RESOLVED_ANNOTATION),
	    p->resolved);
	CHECK_INT(json_array_size(jget(j, "events")), 0);
	json_decref(j);
	plan_free(p);
}

/* A DeviceClass cache row with one CEL selector (NULL: none). */
static json_t *
dclass(const char *expr)
{
	if (expr == NULL)
		return json_pack("{s:{s:s}, s:{}}", "labels", "a", "b", "spec");
	return json_pack("{s:{s:[{s:{s:s}}]}}", "spec", "selectors", "cel",
	    "expression", expr);
}

/* Whether a class with that selector counts as GPU (default drivers). */
static bool
gpu(const char *expr)
{
	json_t *c = dclass(expr);
	bool r = plan_class_is_gpu(c, NULL);

	json_decref(c);
	return r;
}

TEST(class_classification_fails_closed)
{
	json_t *c;

	/* the stock classes and kpgpud's own: GPU */
	CHECK(gpu("device.driver == 'gpu.nvidia.com' && "
	    "device.attributes['gpu.nvidia.com'].type == 'gpu'"));
	CHECK(gpu("device.driver == 'gpu.nvidia.com' && 'type' in "
	    "device.attributes['gpu.nvidia.com'] && "
	    "device.attributes['gpu.nvidia.com'].type == 'mig'"));
	/* provably another driver's: not GPU, in every spelling */
	CHECK(!gpu("device.driver == 'net.example.com'"));
	CHECK(!gpu("\"net.example.com\" == device.driver"));
	CHECK(!gpu("  (device.driver=='net.example.com')  "));
	CHECK(!gpu("device.attributes['x'].y == 'a && b' && "
	    "(true && device.driver == 'net.example.com')"));
	CHECK(!gpu("device.driver == 'gpu.nvidia.com' && "
	    "device.driver == 'net.example.com'"));
	/* no selectors, not CEL, or not provable: GPU */
	CHECK(gpu(NULL));
	c = json_pack("{s:{s:[{s:{}}]}}", "spec", "selectors", "other");
	CHECK(plan_class_is_gpu(c, NULL));
	json_decref(c);
	c = json_pack("{s:b}", "oversize", 1);
	CHECK(plan_class_is_gpu(c, NULL));
	json_decref(c);
	CHECK(gpu("device.driver == 'net.example.com' || true"));
	CHECK(gpu("true || device.driver == 'net.example.com'"));
	CHECK(gpu("device.driver == 'net.example.com' ? true : true"));
	CHECK(gpu("!(device.driver == 'net.example.com')"));
	CHECK(gpu("device.driver != 'net.example.com'"));
	CHECK(gpu("device.driver == 'net.example.com' + ''"));
	CHECK(gpu("device.driver == 'net.example.com'.lowerAscii()"));
	CHECK(gpu("device.driver.startsWith('net')"));
	CHECK(gpu("device.driver == r'net.example.com'"));
	CHECK(gpu("device.driver == 'net\\x2eexample.com'"));
	CHECK(gpu("device.driver == '''net.example.com'''"));
	CHECK(gpu("// device.driver == 'net.example.com' &&\ntrue"));
	CHECK(gpu("(device.driver == 'net.example.com'"));
	CHECK(gpu("device.driver == 'net.example.com')"));
	CHECK(gpu("device.driver == 'net.example.com' == true"));
	CHECK(gpu("'it''s' == device.driver"));
	CHECK(gpu(""));
	/* the configured GPU drivers decide */
	c = dclass("device.driver == 'net.example.com'");
	CHECK(plan_class_is_gpu(c, "gpu.nvidia.com, net.example.com"));
	CHECK(!plan_class_is_gpu(c, "gpu.nvidia.com,net.example.co"));
	json_decref(c);
	CHECK(plan_drivers_valid("gpu.nvidia.com, x.example.com"));
	CHECK(!plan_drivers_valid(""));
	CHECK(!plan_drivers_valid("Bad_Driver"));
}

/* The mig tenant's keys when every GPU class is closed. */
static const struct want_key mig_keys[] = {
	{ CLAIMS_KEY, 1 },
	{ CLASS_KEY("kpgpud-mig-1g.10gb"), 1 },
	{ CLASS_KEY("kpgpud-mig-2g.20gb"), 0 },
	{ CLASS_KEY("a.example.com"), 0 },
	{ CLASS_KEY("gpu.nvidia.com"), 0 },
	{ NULL, 0 },
};

/* As many GPU classes as a quota keys: all closed, claims as asked. */
static const struct want_key most_keys[] = {
	{ CLAIMS_KEY, 2 },
	{ CLASS_KEY("c0255.example.com"), 0 },
	{ NULL, 0 },
};

/* A plan that fails closed: no claims. */
static const struct want_key closed_keys[] = {
	{ CLAIMS_KEY, 0 },
	{ NULL, 0 },
};

TEST(strict_closes_every_gpu_class)
{
	const char *cls[] = { "a.example.com", "gpu.nvidia.com",
	    "kpgpud-mig-1g.10gb", "kpgpud-mig-2g.20gb" };
	struct plan_config cfg = { .strict = true, .classes = cls,
	    .nclasses = 4 };
	const char **many;
	char (*names)[32];
	struct plan *p;

	/* the tenant's own class keeps maxDevices, every other one is 0 */
	p = build("mig", &cfg);
	REQUIRE(p != NULL);
	/* claims, own, 3 strict defaults (gpu in both lists), 2 observed */
	check_plan(p, false, 7, mig_keys);
	plan_free(p);

	/* strict off: the tenant's class only (unsafe, documented) */
	cfg.strict = false;
	p = build("mig", &cfg);
	REQUIRE(p != NULL);
	CHECK_INT(p->nkeys, 2);
	plan_free(p);
	cfg.strict = true;

	/* more GPU classes than a quota keys: fail closed, claims 0 */
	many = calloc(PLAN_MAX_CLASSES + 1, sizeof(*many));
	names = calloc(PLAN_MAX_CLASSES + 1, sizeof(*names));
	REQUIRE(many != NULL && names != NULL);
	for (int i = 0; i <= PLAN_MAX_CLASSES; i++) {
		snprintf(names[i], sizeof(names[i]), "c%04d.example.com", i);
		many[i] = names[i];
	}
	cfg.classes = many;
	cfg.nclasses = PLAN_MAX_CLASSES;
	p = build("exclusive", &cfg);
	REQUIRE(p != NULL);
	check_plan(p, false, -1, most_keys);
	plan_free(p);
	cfg.nclasses = PLAN_MAX_CLASSES + 1;
	p = build("exclusive", &cfg);
	REQUIRE(p != NULL);
	check_plan(p, true, -1, closed_keys);
	CHECK_INT(p->nevents, 1);
	CHECK_STR(p->events[0].reason, "GPUClassesNotLimited");
	plan_free(p);
	/* a GPU class whose key cannot be written also closes */
	{
		static char longname[PLAN_NAME_MAX + 1];
		const char *one[1] = { longname };

		memset(longname, 'a', PLAN_CLASS_NAME_MAX + 1);
		cfg.classes = one;
		cfg.nclasses = 1;
		p = build("exclusive", &cfg);
		REQUIRE(p != NULL);
		check_plan(p, true, -1, closed_keys);
		plan_free(p);
	}
	free(many);
	free(names);
}

TEST(topology_gives_the_tenant_its_own_class)
{
	struct plan_topology t = { 0 };
	struct plan_config cfg = { 0 };
	struct plan *p;
	json_t *ns;

	t.selectors = json_pack("[{s:{s:s}}]", "cel", "expression",
	    "!(device.attributes['gpu.nvidia.com'].uuid in ['GPU-1'])");
	t.domains = strdup("gpu/GPU-2");
	snprintf(t.state, sizeof(t.state), "ok: 1 domain(s), 1 devices");
	t.nevents = 1;
	t.events[0].reason = "TopologyDomainLost";
	snprintf(t.events[0].message, sizeof(t.events[0].message), "gone");
	cfg.topology = &t;
	cfg.strict = true;
	p = build("exclusive", &cfg);
	REQUIRE(p != NULL);
	CHECK_STR(p->class_name, "kpgpud-topo-team-a");
	REQUIRE(p->device_class != NULL);
	CHECK_STR(jstr(p->device_class, "metadata>name"),
	    "kpgpud-topo-team-a");
	CHECK_STR(jstr(p->device_class, "metadata>labels>"
	    "app.kubernetes.io/managed-by"), "kpgpud");
	CHECK_STR(jstr(p->device_class, "spec>selectors>0>cel>expression"),
	    "device.driver == 'gpu.nvidia.com' && 'type' in "
	    "device.attributes['gpu.nvidia.com'] && "
	    "device.attributes['gpu.nvidia.com'].type == 'gpu'");
	CHECK_STR(jstr(p->device_class, "spec>selectors>1>cel>expression"),
	    "!(device.attributes['gpu.nvidia.com'].uuid in ['GPU-1'])");
	CHECK_STR(jstr(p->claim, "spec>spec>devices>requests>0>exactly>"
	    "deviceClassName"), "kpgpud-topo-team-a");
	/* the claim needs no selectors of its own: the class has them */
	CHECK(jget(p->claim, "spec>spec>devices>requests>0>exactly>"
	    "selectors") == NULL);
	CHECK_INT(key(p, "kpgpud-topo-team-a.deviceclass.resource.k8s.io/"
	    "devices"), 2);
	CHECK_INT(key(p, "gpu.nvidia.com.deviceclass.resource.k8s.io/"
	    "devices"), 0);
	ns = plan_ns_annotations(p);
	CHECK_STR(jstr(ns, PLAN_NS_TOPO_ANNOT), "gpu/GPU-2");
	CHECK_STR(jstr(ns, PLAN_NS_TOPO_STATE_ANNOT),
	    "ok: 1 domain(s), 1 devices");
	CHECK_STR(jstr(ns, PLAN_NS_CLASS_ANNOT), "kpgpud-topo-team-a");
	json_decref(ns);
	CHECK_STR(p->events[p->nevents - 1].reason, "TopologyDomainLost");
	plan_free(p);
	/* a MIG tenant's own class keeps the profile selector first */
	p = build("mig", &cfg);
	REQUIRE(p != NULL && p->device_class != NULL);
	CHECK(strstr(jstr(p->device_class, "spec>selectors>0>cel>expression"),
	    ".profile == '1g.10gb'") != NULL);
	CHECK_INT((int)json_array_size(jget(p->device_class, "spec>selectors")),
	    2);
	plan_free(p);
	/* no topology selectors: the stock class, no topology annotations */
	json_array_clear(t.selectors);
	free(t.domains);
	t.domains = NULL;
	p = build("exclusive", &cfg);
	REQUIRE(p != NULL);
	CHECK_STR(p->class_name, "gpu.nvidia.com");
	CHECK(p->device_class == NULL);
	ns = plan_ns_annotations(p);
	CHECK(jget(ns, PLAN_NS_TOPO_ANNOT) == NULL);
	json_decref(ns);
	plan_free(p);
	json_decref(t.selectors);
}

/* Every input plan_build reads, for the kept-plan test below. */
struct plan_inputs {
	struct plan_instance	 in;
	struct plan_config	 cfg;
	struct plan_topology	 t;
	const char		*classes[3];
};

/* The base inputs: an owned MIG tenant, strict, two classes, topology. */
static int
inputs_base(struct plan_inputs *x)
{
	memset(x, 0, sizeof(*x));
	if (load("mig", &x->in) < 0)
		return -1;
	snprintf(x->in.namespace, sizeof(x->in.namespace), "team-c");
	x->classes[0] = "gpu.nvidia.com";
	x->classes[1] = "other-gpu.example.com";
	x->cfg.classes = x->classes;
	x->cfg.nclasses = 2;
	x->cfg.strict = true;
	x->cfg.owner_refs = true;
	x->t.selectors = json_pack("[{s:{s:s}}]", "cel", "expression",
	    "!(device.attributes['gpu.nvidia.com'].uuid in ['GPU-1'])");
	x->t.domains = strdup("gpu/GPU-2");
	snprintf(x->t.state, sizeof(x->t.state), "ok");
	x->t.nevents = 1;
	x->t.events[0].reason = "TopologyDomainLost";
	snprintf(x->t.events[0].message, sizeof(x->t.events[0].message),
	    "gone");
	x->cfg.topology = &x->t;
	return x->t.selectors != NULL && x->t.domains != NULL ? 0 : -1;
}

static void
inputs_free(struct plan_inputs *x)
{
	json_decref(x->t.selectors);
	free(x->t.domains);
}

/* Change input i of x (each one in turn); its name, or NULL past the last. */
static const char *
inputs_change(struct plan_inputs *x, int i)
{
	struct plan_instance *in = &x->in;
	struct plan_config *c = &x->cfg;
	const char *ann = "{\"sharing\":\"mig\",\"migProfile\":\"1g.10gb\","
	    "\"maxDevices\":2}";

	switch (i) {
	case 0: snprintf(in->api_version, sizeof(in->api_version),
		    "platformapi.kubeplus/v1"); return "apiVersion";
	case 1: snprintf(in->kind, sizeof(in->kind), "Tenant"); return "kind";
	case 2: snprintf(in->name, sizeof(in->name), "team-d"); return "name";
	case 3: snprintf(in->namespace, sizeof(in->namespace), "other");
		return "namespace";
	case 4: in->uid[0] = 'x'; return "uid";
	case 5: in->created[3] = '7'; return "creationTimestamp";
	case 6: in->has_annotation = false; return "has annotation";
	case 7: snprintf(in->annotation, sizeof(in->annotation), "%s", ann);
		in->annotation_len = strlen(ann); return "annotation";
	case 8: c->quota_name = "q-{name}"; return "quota name";
	case 9: c->class_prefix = "other-mig-"; return "class prefix";
	case 10: c->gpu_class = "gpu.example.com"; return "gpu class";
	case 11: c->strict_classes = "a.example.com"; return "strict classes";
	case 12: c->strict = false; return "strict";
	case 13: x->classes[2] = "third-gpu.example.com"; c->nclasses = 3;
		return "classes added";
	case 14: x->classes[1] = "renamed-gpu.example.com";
		return "class renamed";
	case 15: c->classes = NULL; c->nclasses = 0; return "no classes";
	case 16: c->owner_refs = false; return "owner refs";
	case 17: c->ns_from_namespace = true; return "namespace from";
	case 18: c->driver_gates = PLAN_GATE_MPS; return "driver gates";
	case 19: c->sidecars = "none"; return "sidecars";
	case 20: c->topology = NULL; return "no topology";
	case 21: json_object_set_new(json_object_get(json_array_get(
		    x->t.selectors, 0), "cel"), "expression",
		    json_string("true")); return "topology selectors";
	case 22: x->t.domains[4] = '3'; return "topology domains";
	case 23: snprintf(x->t.state, sizeof(x->t.state), "exhausted");
		return "topology state";
	case 24: x->t.events[0].message[0] = 'G'; return "topology event";
	case 25: x->t.nevents = 0; return "topology events";
	default: return NULL;
	}
}

/* The whole plan as text (what kpgpuctl render prints), to free. */
static char *
plan_text(const struct plan *p)
{
	json_t *j = plan_to_json(p);
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(j);
	return s;
}

/*
 * kpgpud-quota keeps a tenant's plan for its next reconcile and serves it
 * again only when plan_serves says it was built from the same inputs:
 * with every input changed in turn, the kept plan does not serve, and
 * what the reconcile gets is the plan built from scratch. Inputs equal by
 * value (other copies) serve, with the same plan.
 */
TEST(kept_plan_serves_only_its_inputs)
{
	struct plan_inputs base, x;
	struct plan *kept = NULL, *fresh, *got;
	char err[512], *kept_text, *want_text, *got_text;
	const char *what;
	int r, changed = 0;

	REQUIRE(inputs_base(&base) == 0);
	REQUIRE(plan_build(&base.in, &base.cfg, &kept, err, sizeof(err)) == 0);
	REQUIRE((kept_text = plan_text(kept)) != NULL);
	/* equal inputs in other objects: served, the same plan */
	REQUIRE(inputs_base(&x) == 0);
	CHECK(plan_serves(kept, &x.in, &x.cfg));
	inputs_free(&x);
	for (int i = 0;; i++) {
		REQUIRE(inputs_base(&x) == 0);
		if ((what = inputs_change(&x, i)) == NULL) {
			inputs_free(&x);
			break;
		}
		fresh = NULL;
		r = plan_build(&x.in, &x.cfg, &fresh, err, sizeof(err));
		/* what work_plan does with the kept plan */
		got = plan_serves(kept, &x.in, &x.cfg) ? kept : fresh;
		CHECK_CASE(got != kept, what);
		if (r < 0) {
			changed++;	/* no plan at all */
			CHECK_CASE(got == NULL, what);
		} else {
			want_text = plan_text(fresh);
			got_text = got != NULL ? plan_text(got) : NULL;
			CHECK_CASE(want_text != NULL && got_text != NULL &&
			    strcmp(want_text, got_text) == 0, what);
			CHECK_CASE(got != NULL && strcmp(fresh->keys_text,
			    got->keys_text) == 0, what);
			if (want_text != NULL && strcmp(want_text,
			    kept_text) != 0)
				changed++;
			free(want_text);
			free(got_text);
		}
		plan_free(fresh);
		inputs_free(&x);
	}
	/*
	 * All but five inputs (creationTimestamp, the MIG class prefix and
	 * the GPU class of a tenant with a topology class, the namespace
	 * source when namespace and name agree, the gates of a plan needing
	 * none) change the plan itself: serving the kept plan regardless
	 * fails those cases above.
	 */
	CHECK_INT(changed, 21);
	free(kept_text);
	plan_free(kept);
	inputs_free(&base);
}
