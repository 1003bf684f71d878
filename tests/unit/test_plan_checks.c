/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan's refusals of valid annotations (kpgpud-quota/plan_checks.c):
 * time-slicing composes a shared claim without any GpuConfig (a default
 * NVIDIA driver time-shares it); timeSlicing.interval and sharing mps are
 * composed only when the operator declared TimeSlicingSettings /
 * MPSSupport on, otherwise plan_build refuses with PLAN_EGATE and a
 * message that says the pods would not start and what to enable; the gate
 * list parser; and minMemory above what a MIG profile's devices report
 * is refused with PLAN_ENEVER naming the profile's real memory, compared
 * exactly (binary and decimal suffixes, fractions).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kpgpud-quota/plan.h"
#include "tests/unit/test.h"

/* An instance of kind Agent named team-g with annotation ann. */
static void
mkinst(struct plan_instance *in, const char *ann)
{
	memset(in, 0, sizeof(*in));
	snprintf(in->api_version, sizeof(in->api_version),
	    "platformapi.kubeplus/v1alpha1");
	snprintf(in->kind, sizeof(in->kind), "Agent");
	snprintf(in->name, sizeof(in->name), "team-g");
	snprintf(in->uid, sizeof(in->uid), "u-1");
	in->has_annotation = true;
	in->annotation_len = strlen(ann);
	snprintf(in->annotation, sizeof(in->annotation), "%s", ann);
}

/* plan_build of ann under gates: the result code, the plan or err. */
static int
try_plan(const char *ann, unsigned gates, struct plan **p, char *err,
    size_t errlen)
{
	static struct plan_instance in;
	struct plan_config cfg = { .driver_gates = gates };

	mkinst(&in, ann);
	*p = NULL;
	err[0] = '\0';
	return plan_build(&in, &cfg, p, err, errlen);
}

/* The member at a '>'-separated path of keys and indexes. */
static json_t *
jget(json_t *j, const char *path)
{
	char buf[256], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ">", &save); tok != NULL && j != NULL;
	    tok = strtok_r(NULL, ">", &save))
		j = json_is_array(j) ? json_array_get(j, strtoul(tok, NULL,
		    10)) : json_object_get(j, tok);
	return j;
}

TEST(time_slicing_without_config_on_a_default_driver)
{
	struct plan *p;
	char err[512];

	REQUIRE(try_plan("{\"sharing\":\"time-slicing\",\"maxDevices\":2}",
	    0, &p, err, sizeof(err)) == 0);
	CHECK(!p->claim_is_template);
	CHECK_STR(json_string_value(jget(p->claim, "kind")), "ResourceClaim");
	CHECK_STR(json_string_value(jget(p->claim, "spec>devices>requests>0>"
	    "exactly>deviceClassName")), "gpu.nvidia.com");
	CHECK(jget(p->claim, "spec>devices>config") == NULL);
	CHECK_INT(p->nevents, 0);
	plan_free(p);
	/* the gates declared change nothing without an interval */
	REQUIRE(try_plan("{\"sharing\":\"time-slicing\"}",
	    PLAN_GATE_TIME_SLICING | PLAN_GATE_MPS, &p, err,
	    sizeof(err)) == 0);
	CHECK(jget(p->claim, "spec>devices>config") == NULL);
	plan_free(p);
}

TEST(interval_needs_the_declared_gate)
{
	static const char *ann = "{\"sharing\":\"time-slicing\","
	    "\"timeSlicing\":{\"interval\":\"Short\"}}";
	struct plan *p;
	char err[512];

	CHECK_INT(try_plan(ann, 0, &p, err, sizeof(err)), PLAN_EGATE);
	CHECK(p == NULL);
	CHECK_STR(err, "timeSlicing.interval needs the NVIDIA DRA driver's "
	    "feature gate TimeSlicingSettings (alpha, off by default), not "
	    "declared on: the driver would refuse the claim and its pods "
	    "would stay ContainerCreating. Enable TimeSlicingSettings on the "
	    "driver and add it to kpgpud-quota --driver-gates, or drop "
	    "timeSlicing.interval (time-shared without it)");
	/* the other gate is not this one */
	CHECK_INT(try_plan(ann, PLAN_GATE_MPS, &p, err, sizeof(err)),
	    PLAN_EGATE);
	/* even the Default interval is a GpuConfig with a strategy */
	CHECK_INT(try_plan("{\"sharing\":\"time-slicing\",\"timeSlicing\":"
	    "{\"interval\":\"Default\"}}", 0, &p, err, sizeof(err)),
	    PLAN_EGATE);
	REQUIRE(try_plan(ann, PLAN_GATE_TIME_SLICING, &p, err,
	    sizeof(err)) == 0);
	CHECK_STR(json_string_value(jget(p->claim, "spec>devices>config>0>"
	    "opaque>parameters>sharing>strategy")), "TimeSlicing");
	CHECK_STR(json_string_value(jget(p->claim, "spec>devices>config>0>"
	    "opaque>parameters>sharing>timeSlicingConfig>interval")),
	    "Short");
	plan_free(p);
}

TEST(mps_needs_the_declared_gate)
{
	struct plan *p;
	char err[512];

	CHECK_INT(try_plan("{\"sharing\":\"mps\"}", 0, &p, err, sizeof(err)),
	    PLAN_EGATE);
	CHECK(p == NULL);
	CHECK_STR(err, "sharing \"mps\" needs the NVIDIA DRA driver's feature "
	    "gate MPSSupport (alpha, off by default), not declared on: the "
	    "driver would refuse the claim and its pods would stay "
	    "ContainerCreating. Enable MPSSupport on the driver and add it to "
	    "kpgpud-quota --driver-gates, or use sharing \"time-slicing\" (no "
	    "gate needed)");
	CHECK_INT(try_plan("{\"sharing\":\"mps\",\"mps\":"
	    "{\"defaultActiveThreadPercentage\":20}}", PLAN_GATE_TIME_SLICING,
	    &p, err, sizeof(err)), PLAN_EGATE);
	REQUIRE(try_plan("{\"sharing\":\"mps\"}", PLAN_GATE_MPS, &p, err,
	    sizeof(err)) == 0);
	CHECK_STR(json_string_value(jget(p->claim, "spec>devices>config>0>"
	    "opaque>parameters>sharing>strategy")), "MPS");
	plan_free(p);
	CHECK_STR(plan_refusal_reason(PLAN_EGATE),
	    "DriverFeatureGateRequired");
	CHECK_STR(plan_refusal_reason(PLAN_ENEVER), "NeverAllocatable");
	CHECK_STR(plan_refusal_reason(-EINVAL), "InvalidGPUIsolation");
}

TEST(an_invalid_annotation_is_still_invalid_first)
{
	struct plan *p;
	char err[512];

	CHECK_INT(try_plan("{\"sharing\":\"mps\",\"mps\":{\"threads\":4}}", 0,
	    &p, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "unknown field \"mps.threads\"") != NULL);
}

TEST(modes_without_a_gate)
{
	static const char *anns[] = {
		"{\"sharing\":\"exclusive\"}",
		"{\"sharing\":\"mig\",\"migProfile\":\"1g.10gb\"}",
		"{\"sharing\":\"hybrid\",\"migProfile\":\"2g.20gb\"}",
	};
	struct plan *p;
	char err[512];

	for (size_t i = 0; i < sizeof(anns) / sizeof(anns[0]); i++) {
		REQUIRE(try_plan(anns[i], 0, &p, err, sizeof(err)) == 0);
		CHECK(jget(p->claim, "spec>devices>config") == NULL &&
		    jget(p->claim, "spec>spec>devices>config") == NULL);
		plan_free(p);
	}
}

TEST(gate_list_parse)
{
	unsigned g = 99;
	char err[256];

	CHECK_INT(plan_gates_parse("none", &g, err, sizeof(err)), 0);
	CHECK_INT(g, 0);
	CHECK_INT(plan_gates_parse("", &g, err, sizeof(err)), 0);
	CHECK_INT(g, 0);
	CHECK_INT(plan_gates_parse("TimeSlicingSettings", &g, err,
	    sizeof(err)), 0);
	CHECK_INT(g, PLAN_GATE_TIME_SLICING);
	CHECK_INT(plan_gates_parse("TimeSlicingSettings, MPSSupport", &g, err,
	    sizeof(err)), 0);
	CHECK_INT(g, PLAN_GATE_TIME_SLICING | PLAN_GATE_MPS);
	/* the driver's own --feature-gates form, other gates accepted */
	CHECK_INT(plan_gates_parse("MPSSupport=true,TimeSlicingSettings=false,"
	    "DynamicMIG=true", &g, err, sizeof(err)), 0);
	CHECK_INT(g, PLAN_GATE_MPS);
	g = 7;
	CHECK_INT(plan_gates_parse("TimeSlicingSetting", &g, err,
	    sizeof(err)), -EINVAL);
	CHECK_INT(g, 7);
	CHECK_STR(err, "unknown NVIDIA driver feature gate "
	    "\"TimeSlicingSetting\" (the ones kpgpud uses: "
	    "TimeSlicingSettings, MPSSupport)");
	CHECK_INT(plan_gates_parse("MPSSupport=yes", &g, err, sizeof(err)),
	    -EINVAL);
	CHECK_STR(err, "driver gate MPSSupport=yes: the value must be true "
	    "or false");
}

TEST(gate_list_is_bounded)
{
	char *big = malloc(PLAN_GATES_MAX_LEN + 40), err[256];
	unsigned g;

	REQUIRE(big != NULL);
	memset(big, ',', PLAN_GATES_MAX_LEN + 20);
	memcpy(big, "MPSSupport", 10);
	big[PLAN_GATES_MAX_LEN + 20] = '\0';
	CHECK_INT(plan_gates_parse(big, &g, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "driver gate list is longer than 512 bytes");
	big[PLAN_GATES_MAX_LEN] = '\0';
	CHECK_INT(plan_gates_parse(big, &g, err, sizeof(err)), 0);
	CHECK_INT(g, PLAN_GATE_MPS);
	free(big);
}

/* minMemory on a profile: 0 or PLAN_ENEVER. */
static int
mem_on(const char *sharing, const char *profile, const char *min, char *err,
    size_t errlen)
{
	char ann[256];
	struct plan *p;
	int r;

	snprintf(ann, sizeof(ann), "{\"sharing\":\"%s\",\"migProfile\":\"%s\","
	    "\"minMemory\":\"%s\"}", sharing, profile, min);
	r = try_plan(ann, 0, &p, err, errlen);
	plan_free(p);
	return r;
}

TEST(min_memory_above_the_profile_is_never_allocatable)
{
	const char *text = NULL;
	char err[512];

	CHECK_INT(plan_profile_memory_mib("1g.10gb", &text), 9856);
	CHECK_STR(text, "9728Mi or 9856Mi, by GPU model");
	CHECK_INT(plan_profile_memory_mib("1g.10gb+me", NULL), 9856);
	CHECK_INT(plan_profile_memory_mib("3g.40gb", NULL), 0);
	CHECK_INT(mem_on("mig", "1g.10gb", "10Gi", err, sizeof(err)),
	    PLAN_ENEVER);
	CHECK_STR(err, "minMemory 10Gi is more than MIG profile 1g.10gb "
	    "devices report (memory 9728Mi or 9856Mi, by GPU model): no "
	    "device can ever be allocated; lower minMemory to at most 9856Mi "
	    "or choose a larger profile");
	CHECK_INT(mem_on("hybrid", "1g.10gb+me", "10Gi", err, sizeof(err)),
	    PLAN_ENEVER);
	CHECK(strstr(err, "profile 1g.10gb+me") != NULL);
	/* exactly at the largest reported value: allocatable */
	CHECK_INT(mem_on("mig", "1g.10gb", "9856Mi", err, sizeof(err)), 0);
	CHECK_INT(mem_on("mig", "1g.10gb", "9857Mi", err, sizeof(err)),
	    PLAN_ENEVER);
	CHECK_INT(mem_on("mig", "1g.10gb", "9.625Gi", err, sizeof(err)), 0);
	CHECK_INT(mem_on("mig", "1g.10gb", "9.6250001Gi", err, sizeof(err)),
	    PLAN_ENEVER);
	/* 9856Mi = 10334765056 bytes, decimal suffixes compared exactly */
	CHECK_INT(mem_on("mig", "1g.10gb", "10334765056", err, sizeof(err)),
	    0);
	CHECK_INT(mem_on("mig", "1g.10gb", "10334765057", err, sizeof(err)),
	    PLAN_ENEVER);
	CHECK_INT(mem_on("mig", "1g.10gb", "10G", err, sizeof(err)), 0);
	CHECK_INT(mem_on("mig", "1g.10gb", "10.334765056G", err, sizeof(err)),
	    0);
	CHECK_INT(mem_on("mig", "1g.10gb", "10.3347650561G", err,
	    sizeof(err)), PLAN_ENEVER);
	CHECK_INT(mem_on("mig", "1g.10gb", "9Gi", err, sizeof(err)), 0);
	CHECK_INT(mem_on("mig", "1g.10gb", "1Ei", err, sizeof(err)),
	    PLAN_ENEVER);
	CHECK_INT(mem_on("mig", "1g.10gb", "99999999999999999999999", err,
	    sizeof(err)), PLAN_ENEVER);
	CHECK_INT(mem_on("mig", "1g.10gb", "0.0000000000000000001", err,
	    sizeof(err)), 0);
}

TEST(min_memory_on_a_profile_without_a_known_value)
{
	struct plan *p;
	char err[512];

	/* bounded by the name: a 40gb profile reports at most 40Gi */
	CHECK_INT(mem_on("mig", "3g.40gb", "40Gi", err, sizeof(err)), 0);
	CHECK_INT(mem_on("mig", "3g.40gb", "40.5Gi", err, sizeof(err)),
	    PLAN_ENEVER);
	CHECK_STR(err, "minMemory 40.5Gi is more than MIG profile 3g.40gb "
	    "devices report (memory at most 40Gi, as the name says; 1g.10gb "
	    "devices report 9728Mi or 9856Mi): no device can ever be "
	    "allocated; lower minMemory or choose a larger profile");
	/* whole GPUs: no profile, nothing to compare */
	CHECK_INT(try_plan("{\"sharing\":\"exclusive\",\"minMemory\":"
	    "\"500Gi\"}", 0, &p, err, sizeof(err)), 0);
	plan_free(p);
}
