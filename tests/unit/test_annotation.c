/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeplus.io/gpu-isolation annotation parsing: every field is read into
 * the struct, defaults apply, and every kind of invalid annotation is
 * rejected with its precise message while the output stays untouched.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-quota/annotation.h"
#include "tests/unit/test.h"

/* Parse s; on failure copy the reason into err. */
static int
parse(const char *s, struct annotation *a, char *err, size_t errlen)
{
	err[0] = '\0';
	return annotation_parse(s, strlen(s), a, err, errlen);
}

/* Expect s to be rejected with exactly msg, leaving the output alone. */
static void
expect_err(const char *s, const char *msg)
{
	struct annotation a;
	char err[512];

	memset(&a, 0x5a, sizeof(a));
	if (parse(s, &a, err, sizeof(err)) != -EINVAL)
		test_fail(__FILE__, __LINE__, "accepted: %s", s);
	else if (strcmp(err, msg) != 0)
		test_fail(__FILE__, __LINE__, "for %s\n  got  \"%s\"\n  want "
		    "\"%s\"", s, err, msg);
	for (size_t i = 0; i < sizeof(a); i++)
		if (((unsigned char *)&a)[i] != 0x5a) {
			test_fail(__FILE__, __LINE__, "output touched: %s", s);
			break;
		}
}

TEST(minimal_exclusive_defaults)
{
	struct annotation a;
	char err[256];

	REQUIRE(parse("{\"sharing\":\"exclusive\"}", &a, err,
	    sizeof(err)) == 0);
	CHECK_INT(a.sharing, ANNOTATION_SHARING_EXCLUSIVE);
	CHECK_INT(a.max_devices, 1);
	CHECK_INT(a.devices_per_pod, 1);
	CHECK_STR(a.mig_profile, "");
	CHECK_STR(a.product_name, "");
	CHECK_STR(a.min_memory, "");
	CHECK_INT(a.topology, ANNOTATION_TOPO_NONE);
	CHECK_INT(a.interval, ANNOTATION_INTERVAL_UNSET);
	CHECK_INT(a.mps_thread_pct, 0);
	CHECK_INT(a.pol.init, RESOLVED_INIT_NONE);
	CHECK_INT(a.pol.legacy, RESOLVED_LEGACY_REJECT);
	CHECK_INT(a.isolation, ANNOTATION_ISOLATION_DEVICE);
	/* the common injected proxies get no claim unless it says so */
	CHECK(a.pol.nsidecar_names > 8);
	for (int i = 0; i < a.pol.nsidecar_names; i++)
		CHECK_STR(a.pol.sidecar_names[i], resolved_default_sidecars[i]);
	CHECK(resolved_default_sidecars[a.pol.nsidecar_names] == NULL);
}

/* sidecarContainers: "none", a list replacing the default, never "all". */
TEST(sidecar_containers)
{
	struct annotation a;
	char err[256];

	REQUIRE(parse("{\"sharing\":\"exclusive\",\"sidecarContainers\":"
	    "\"none\"}", &a, err, sizeof(err)) == 0);
	CHECK_INT(a.pol.nsidecar_names, 0);
	REQUIRE(parse("{\"sharing\":\"exclusive\",\"sidecarContainers\":"
	    "[\"my-proxy\",\"istio-proxy\"]}", &a, err, sizeof(err)) == 0);
	CHECK_INT(a.pol.nsidecar_names, 2);
	CHECK_STR(a.pol.sidecar_names[0], "my-proxy");
	CHECK_STR(a.pol.sidecar_names[1], "istio-proxy");
	REQUIRE(parse("{\"sharing\":\"exclusive\",\"sidecarContainers\":"
	    "[]}", &a, err, sizeof(err)) == 0);
	CHECK_INT(a.pol.nsidecar_names, 0);
	expect_err("{\"sharing\":\"exclusive\",\"sidecarContainers\":"
	    "\"all\"}", "unknown sidecarContainers \"all\" (expected \"none\" "
	    "or a list of names)");
	expect_err("{\"sharing\":\"exclusive\",\"sidecarContainers\":"
	    "[\"Envoy\"]}", "sidecarContainers name \"Envoy\" is not a valid "
	    "container name");
	expect_err("{\"sharing\":\"exclusive\",\"sidecarContainers\":"
	    "[\"e\",\"e\"]}", "sidecarContainers lists \"e\" twice");
	expect_err("{\"sharing\":\"exclusive\",\"sidecarContainers\":7}",
	    "field \"sidecarContainers\" must be \"none\" or a list of names");
}

TEST(isolation_levels)
{
	static const struct {
		const char		*word;
		enum annotation_isolation level;
	} cases[] = {
		{ "device", ANNOTATION_ISOLATION_DEVICE },
		{ "gpu", ANNOTATION_ISOLATION_GPU },
		{ "pcie-root", ANNOTATION_ISOLATION_PCIE_ROOT },
	};
	struct annotation a;
	char err[256], buf[128];

	for (size_t i = 0; i < nitems(cases); i++) {
		snprintf(buf, sizeof(buf), "{\"sharing\":\"mig\",\"migProfile\":"
		    "\"1g.10gb\",\"isolation\":\"%s\"}", cases[i].word);
		REQUIRE(parse(buf, &a, err, sizeof(err)) == 0);
		CHECK_INT(a.isolation, cases[i].level);
		CHECK_STR(annotation_isolation_name(a.isolation),
		    cases[i].word);
	}
	/* every sharing mode takes every level */
	REQUIRE(parse("{\"sharing\":\"time-slicing\",\"isolation\":"
	    "\"pcie-root\",\"maxDevices\":4}", &a, err, sizeof(err)) == 0);
	CHECK_INT(a.isolation, ANNOTATION_ISOLATION_PCIE_ROOT);
	expect_err("{\"sharing\":\"exclusive\",\"isolation\":\"pcieRoot\"}",
	    "unknown isolation \"pcieRoot\" (expected device, gpu or "
	    "pcie-root)");
	expect_err("{\"sharing\":\"exclusive\",\"isolation\":\"GPU\"}",
	    "unknown isolation \"GPU\" (expected device, gpu or pcie-root)");
	expect_err("{\"sharing\":\"exclusive\",\"isolation\":1}",
	    "field \"isolation\" must be a string");
	CHECK_STR(annotation_isolation_name((enum annotation_isolation)9), "?");
}

TEST(every_sharing_mode)
{
	static const struct {
		const char *json;
		enum annotation_sharing s;
		bool shared, mig;
	} cases[] = {
		{ "{\"sharing\":\"exclusive\"}", ANNOTATION_SHARING_EXCLUSIVE,
		  false, false },
		{ "{\"sharing\":\"mig\",\"migProfile\":\"1g.10gb\"}",
		  ANNOTATION_SHARING_MIG, false, true },
		{ "{\"sharing\":\"time-slicing\"}",
		  ANNOTATION_SHARING_TIME_SLICING, true, false },
		{ "{\"sharing\":\"mps\"}", ANNOTATION_SHARING_MPS, true,
		  false },
		{ "{\"sharing\":\"hybrid\",\"migProfile\":\"3g.40gb\"}",
		  ANNOTATION_SHARING_HYBRID, true, true },
	};
	struct annotation a;
	char err[256];

	for (size_t i = 0; i < nitems(cases); i++) {
		REQUIRE(parse(cases[i].json, &a, err, sizeof(err)) == 0);
		CHECK_INT(a.sharing, cases[i].s);
		CHECK(annotation_sharing_shared(a.sharing) == cases[i].shared);
		CHECK(annotation_sharing_mig(a.sharing) == cases[i].mig);
	}
	CHECK_STR(annotation_sharing_name(ANNOTATION_SHARING_TIME_SLICING),
	    "time-slicing");
}

TEST(every_optional_field)
{
	struct annotation a;
	char err[256];

	REQUIRE(parse("{\"sharing\":\"mig\",\"migProfile\":\"1g.10gb+me\","
	    "\"maxDevices\":8,\"devicesPerPod\":2,\"productName\":"
	    "\"NVIDIA A100 80GB PCIe\",\"minMemory\":\"9.5Gi\",\"topology\":"
	    "\"parentUUID\",\"initContainers\":[\"setup\",\"warm-up\"],"
	    "\"legacyGPU\":\"translate\"}", &a, err, sizeof(err)) == 0);
	CHECK_STR(a.mig_profile, "1g.10gb+me");
	CHECK_INT(a.max_devices, 8);
	CHECK_INT(a.devices_per_pod, 2);
	CHECK_STR(a.product_name, "NVIDIA A100 80GB PCIe");
	CHECK_STR(a.min_memory, "9.5Gi");
	CHECK_INT(a.topology, ANNOTATION_TOPO_PARENT_UUID);
	CHECK_STR(annotation_topology_attr(a.topology),
	    "gpu.nvidia.com/parentUUID");
	CHECK_INT(a.pol.init, RESOLVED_INIT_NAMED);
	CHECK_INT(a.pol.ninit_names, 2);
	CHECK_STR(a.pol.init_names[1], "warm-up");
	CHECK_INT(a.pol.legacy, RESOLVED_LEGACY_TRANSLATE);

	REQUIRE(parse("{\"sharing\":\"time-slicing\",\"timeSlicing\":"
	    "{\"interval\":\"Medium\"},\"topology\":\"pcieRoot\","
	    "\"initContainers\":\"all\",\"legacyGPU\":\"allow\"}", &a, err,
	    sizeof(err)) == 0);
	CHECK_STR(annotation_interval_name(a.interval), "Medium");
	CHECK_STR(annotation_topology_attr(a.topology),
	    "resource.kubernetes.io/pcieRoot");
	CHECK_INT(a.pol.init, RESOLVED_INIT_ALL);
	CHECK_INT(a.pol.legacy, RESOLVED_LEGACY_ALLOW);

	REQUIRE(parse("{\"sharing\":\"mps\",\"mps\":{"
	    "\"defaultActiveThreadPercentage\":25,"
	    "\"defaultPinnedDeviceMemoryLimit\":\"10Gi\"},"
	    "\"initContainers\":\"none\",\"topology\":\"none\"}", &a, err,
	    sizeof(err)) == 0);
	CHECK_INT(a.mps_thread_pct, 25);
	CHECK_STR(a.mps_pinned_mem, "10Gi");
	CHECK_INT(a.pol.init, RESOLVED_INIT_NONE);
	CHECK(annotation_topology_attr(a.topology) == NULL);
}

TEST(invalid_json)
{
	expect_err("{\"sharing\":\"mig\",", "invalid JSON at line 1 column "
	    "17: string or '}' expected near end of file");
	expect_err("", "invalid JSON at line 1 column 0: '[' or '{' "
	    "expected near end of file");
	expect_err("[\"mig\"]", "annotation must be a JSON object");
	expect_err("{\"sharing\":\"mig\",\"sharing\":\"mps\"}",
	    "invalid JSON at line 1 column 26: duplicate object key near "
	    "'\"sharing\"'");
}

TEST(unknown_sharing)
{
	expect_err("{\"sharing\":\"shared\"}", "unknown sharing \"shared\" "
	    "(expected exclusive, mig, time-slicing, mps or hybrid)");
	expect_err("{\"sharing\":\"MIG\"}", "unknown sharing \"MIG\" "
	    "(expected exclusive, mig, time-slicing, mps or hybrid)");
	expect_err("{\"sharing\":3}", "field \"sharing\" must be a string");
	expect_err("{\"maxDevices\":3}", "missing required field "
	    "\"sharing\"");
}

TEST(mig_without_profile)
{
	expect_err("{\"sharing\":\"mig\",\"maxDevices\":1}",
	    "sharing \"mig\" requires field \"migProfile\"");
	expect_err("{\"sharing\":\"hybrid\"}",
	    "sharing \"hybrid\" requires field \"migProfile\"");
	expect_err("{\"sharing\":\"exclusive\",\"migProfile\":\"1g.10gb\"}",
	    "field \"migProfile\" is only valid with sharing \"mig\" or "
	    "\"hybrid\", not \"exclusive\"");
}

TEST(malformed_profile)
{
	static const char *bad[] = { "10gb", "1g10gb", "0g.10gb", "9g.10gb",
	    "1g.gb", "1g.010gb", "1g.10GB", "1g.10gb+", "1g.10gb+ME",
	    "1g.10gb+me.", "1g.12345gb", "1g.10gb+abcdefghijklm",
	    "1g.10gb'" };
	static const char *good[] = { "1g.5gb", "1g.10gb", "7g.80gb",
	    "1g.10gb+me", "1g.18gb+gfx", "1g.24gb+me.all", "4g.20gb" };
	char json[128], msg[256];

	for (size_t i = 0; i < nitems(bad); i++)
		CHECK(!annotation_profile_valid(bad[i]));
	for (size_t i = 0; i < nitems(good); i++)
		CHECK(annotation_profile_valid(good[i]));
	snprintf(json, sizeof(json), "{\"sharing\":\"mig\",\"migProfile\":"
	    "\"%s\"}", "1x.10gb");
	snprintf(msg, sizeof(msg), "malformed migProfile \"1x.10gb\" "
	    "(expected <slices>g.<memory>gb with an optional +suffix, e.g. "
	    "\"1g.10gb\" or \"1g.10gb+me\")");
	expect_err(json, msg);
}

TEST(device_counts)
{
	expect_err("{\"sharing\":\"exclusive\",\"maxDevices\":0}",
	    "maxDevices must be at least 1, got 0");
	expect_err("{\"sharing\":\"exclusive\",\"maxDevices\":-3}",
	    "maxDevices must be at least 1, got -3");
	expect_err("{\"sharing\":\"exclusive\",\"maxDevices\":5000}",
	    "maxDevices must be at most 1024, got 5000");
	expect_err("{\"sharing\":\"exclusive\",\"maxDevices\":1.5}",
	    "field \"maxDevices\" must be an integer");
	expect_err("{\"sharing\":\"exclusive\",\"maxDevices\":\"2\"}",
	    "field \"maxDevices\" must be an integer");
	expect_err("{\"sharing\":\"exclusive\",\"devicesPerPod\":0}",
	    "devicesPerPod must be at least 1, got 0");
	expect_err("{\"sharing\":\"exclusive\",\"devicesPerPod\":33,"
	    "\"maxDevices\":64}", "devicesPerPod must be at most 32, got 33");
	expect_err("{\"sharing\":\"exclusive\",\"devicesPerPod\":4,"
	    "\"maxDevices\":2}", "devicesPerPod (4) exceeds maxDevices (2)");
}

TEST(unknown_fields)
{
	expect_err("{\"sharing\":\"exclusive\",\"maxDevice\":2}",
	    "unknown field \"maxDevice\" (known: sharing, migProfile, "
	    "maxDevices, devicesPerPod, productName, minMemory, topology, "
	    "timeSlicing, mps, initContainers, sidecarContainers, "
	    "legacyGPU, isolation)");
	expect_err("{\"sharing\":\"time-slicing\",\"timeSlicing\":"
	    "{\"intervall\":\"Long\"}}", "unknown field "
	    "\"timeSlicing.intervall\" (known: interval)");
	expect_err("{\"sharing\":\"mps\",\"mps\":{\"threads\":1}}",
	    "unknown field \"mps.threads\" (known: "
	    "defaultActiveThreadPercentage, defaultPinnedDeviceMemoryLimit)");
	/* user text in a message is bounded and stripped of quotes */
	expect_err("{\"sharing\":\"exclusive\",\"a\\\"b\\n\":1}",
	    "unknown field \"a?b?\" (known: sharing, migProfile, "
	    "maxDevices, devicesPerPod, productName, minMemory, topology, "
	    "timeSlicing, mps, initContainers, sidecarContainers, "
	    "legacyGPU, isolation)");
}

TEST(optional_field_errors)
{
	expect_err("{\"sharing\":\"exclusive\",\"productName\":\"A100' || "
	    "true\"}", "productName \"A100' || true\" may contain only "
	    "letters, digits, spaces and -_.()/+:");
	expect_err("{\"sharing\":\"exclusive\",\"productName\":\"\"}",
	    "productName must be 1 to 64 characters");
	expect_err("{\"sharing\":\"exclusive\",\"minMemory\":\"40GB\"}",
	    "malformed minMemory \"40GB\" (expected a quantity such as "
	    "\"40Gi\" or \"80G\")");
	expect_err("{\"sharing\":\"exclusive\",\"topology\":\"numa\"}",
	    "unknown topology \"numa\" (expected pcieRoot, parentUUID or "
	    "none)");
	expect_err("{\"sharing\":\"exclusive\",\"topology\":\"parentUUID\"}",
	    "topology \"parentUUID\" needs sharing \"mig\" or \"hybrid\" "
	    "(whole GPUs have no parentUUID)");
	expect_err("{\"sharing\":\"mps\",\"timeSlicing\":{}}",
	    "field \"timeSlicing\" is only valid with sharing "
	    "\"time-slicing\", not \"mps\"");
	expect_err("{\"sharing\":\"time-slicing\",\"timeSlicing\":"
	    "{\"interval\":\"long\"}}", "unknown timeSlicing.interval "
	    "\"long\" (expected Default, Short, Medium or Long)");
	expect_err("{\"sharing\":\"exclusive\",\"mps\":{}}",
	    "field \"mps\" is only valid with sharing \"mps\", not "
	    "\"exclusive\"");
	expect_err("{\"sharing\":\"mps\",\"mps\":"
	    "{\"defaultActiveThreadPercentage\":101}}",
	    "mps.defaultActiveThreadPercentage must be at most 100, got 101");
	expect_err("{\"sharing\":\"mps\",\"mps\":"
	    "{\"defaultPinnedDeviceMemoryLimit\":\"-1Gi\"}}",
	    "malformed mps.defaultPinnedDeviceMemoryLimit \"-1Gi\" (expected "
	    "a quantity such as \"10Gi\")");
	expect_err("{\"sharing\":\"exclusive\",\"initContainers\":\"some\"}",
	    "unknown initContainers \"some\" (expected \"none\", \"all\" or "
	    "a list of names)");
	expect_err("{\"sharing\":\"exclusive\",\"initContainers\":[\"A\"]}",
	    "initContainers name \"A\" is not a valid container name");
	expect_err("{\"sharing\":\"exclusive\",\"initContainers\":[\"a\","
	    "\"a\"]}", "initContainers lists \"a\" twice");
	expect_err("{\"sharing\":\"exclusive\",\"legacyGPU\":\"drop\"}",
	    "unknown legacyGPU \"drop\" (expected \"reject\", \"translate\" "
	    "or \"allow\")");
	expect_err("{\"sharing\":\"exclusive\",\"legacyGPU\":1}",
	    "field \"legacyGPU\" must be \"reject\", \"translate\" or "
	    "\"allow\"");
}

/*
 * initContainers, sidecarContainers and legacyGPU have one grammar: the
 * tenant annotation and the resolved one accept and reject the same
 * values with the same message.
 */
TEST(policy_grammar_shared)
{
	static const char *const vals[] = {
		"\"initContainers\":\"some\"", "\"initContainers\":3",
		"\"initContainers\":[\"A\"]", "\"initContainers\":[1]",
		"\"initContainers\":[\"a\",\"a\"]",
		"\"sidecarContainers\":\"all\"", "\"sidecarContainers\":{}",
		"\"sidecarContainers\":[\"x_y\"]", "\"legacyGPU\":\"drop\"",
		"\"legacyGPU\":true", "\"legacyGPU\":[\"allow\"]",
		"\"initContainers\":[\"a\"],\"legacyGPU\":\"allow\","
		"\"sidecarContainers\":\"none\"",
	};
	struct annotation a;
	struct resolved r;
	char q[256], e1[256], e2[256];
	int r1, r2;

	for (size_t i = 0; i < nitems(vals); i++) {
		snprintf(q, sizeof(q), "{\"sharing\":\"exclusive\",%s}",
		    vals[i]);
		r1 = parse(q, &a, e1, sizeof(e1));
		snprintf(q, sizeof(q), "{\"claimName\":\"c\",%s}", vals[i]);
		e2[0] = '\0';
		r2 = resolved_parse(q, strlen(q), &r, e2, sizeof(e2));
		CHECK_INT(r1, r2);
		CHECK_STR(e1, e2);
		if (r1 == 0)
			CHECK(resolved_policy_equal(&a.pol, &r.pol));
		else
			CHECK(e1[0] != '\0');
	}
}

TEST(size_cap)
{
	char big[ANNOTATION_MAX_LEN + 64];
	char msg[128];

	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "{\"sharing\":\"mig\"}", 17);
	snprintf(msg, sizeof(msg), "annotation is %zu bytes, more than the "
	    "limit of %d", sizeof(big) - 1, ANNOTATION_MAX_LEN);
	expect_err(big, msg);
}

TEST(quantities)
{
	CHECK(annotation_quantity_valid("40Gi"));
	CHECK(annotation_quantity_valid("80G"));
	CHECK(annotation_quantity_valid("1.5Ti"));
	CHECK(annotation_quantity_valid("1024"));
	CHECK(!annotation_quantity_valid(""));
	CHECK(!annotation_quantity_valid("Gi"));
	CHECK(!annotation_quantity_valid("1.Gi"));
	CHECK(!annotation_quantity_valid("40gi"));
	CHECK(!annotation_quantity_valid("40m"));
	CHECK(!annotation_quantity_valid("1e3"));
	CHECK(!annotation_quantity_valid("4')"));
}
