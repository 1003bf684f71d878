/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/resolved.c: the resolved-isolation annotation, and
 * its packed form (the same spec, every string and name kept; shared by
 * reference).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/resolved.h"
#include "tests/unit/test.h"
#include "common/util.h"

/* Parse s into r; the return value of resolved_parse. */
static int
parse(const char *s, struct resolved *r, char *err, size_t errlen)
{
	return resolved_parse(s, strlen(s), r, err, errlen);
}

/* Ask the policy question q about name of r packed, as admit does. */
static bool
ask(const struct resolved *r,
    bool (*q)(const struct resolved_pack *, const char *), const char *name)
{
	struct resolved_pack *p = NULL;
	bool yes;

	if (resolved_pack_new(r, &p) < 0) {
		test_fail(__FILE__, __LINE__, "pack: out of memory");
		return false;
	}
	yes = q(p, name);
	resolved_pack_unref(p);
	return yes;
}

TEST(template_with_defaults)
{
	struct resolved_policy none;
	struct resolved r;
	char err[128];

	REQUIRE(parse("{\"claimTemplateName\":\"gpu-1g10gb\",\"sharing\":\"mig\","
	    "\"instance\":\"Agent/team-a\"}", &r, err, sizeof(err)) == 0);
	CHECK_STR(r.claim_template, "gpu-1g10gb");
	CHECK_STR(r.claim, "");
	CHECK_STR(r.sharing, "mig");
	CHECK_STR(r.instance, "Agent/team-a");
	/* all zero: initContainers "none", no sidecars, legacyGPU "reject" */
	memset(&none, 0, sizeof(none));
	CHECK(resolved_policy_equal(&r.pol, &none));
	CHECK_INT(r.pol.init, RESOLVED_INIT_NONE);
	CHECK_INT(r.pol.legacy, RESOLVED_LEGACY_REJECT);
}

TEST(shared_claim_and_policies)
{
	struct resolved r;
	char err[128];

	REQUIRE(parse("{\"claimName\":\"team-a.gpu\",\"initContainers\":\"all\","
	    "\"legacyGPU\":\"translate\"}", &r, err, sizeof(err)) == 0);
	CHECK_STR(r.claim, "team-a.gpu");
	CHECK_STR(r.claim_template, "");
	CHECK_INT(r.pol.init, RESOLVED_INIT_ALL);
	CHECK_INT(r.pol.legacy, RESOLVED_LEGACY_TRANSLATE);
	REQUIRE(parse("{\"claimName\":\"c\",\"initContainers\":[\"a\",\"b-2\"],"
	    "\"legacyGPU\":\"allow\"}", &r, err, sizeof(err)) == 0);
	CHECK_INT(r.pol.init, RESOLVED_INIT_NAMED);
	CHECK_INT(r.pol.ninit_names, 2);
	CHECK_STR(r.pol.init_names[1], "b-2");
	CHECK_INT(r.pol.legacy, RESOLVED_LEGACY_ALLOW);
	CHECK(ask(&r, resolved_init_selected, "a"));
	CHECK(!ask(&r, resolved_init_selected, "c"));
	CHECK(!ask(&r, resolved_init_selected, NULL));
}

/* sidecarContainers: absent or "none" is none; a list is matched by name. */
TEST(sidecar_containers)
{
	struct resolved r;
	char err[128], *s;

	REQUIRE(parse("{\"claimName\":\"c\"}", &r, err, sizeof(err)) == 0);
	CHECK_INT(r.pol.nsidecar_names, 0);
	CHECK(!ask(&r, resolved_sidecar, "istio-proxy"));
	REQUIRE(parse("{\"claimName\":\"c\",\"sidecarContainers\":\"none\"}",
	    &r, err, sizeof(err)) == 0);
	CHECK_INT(r.pol.nsidecar_names, 0);
	/* none is not written: the same text as before the field existed */
	REQUIRE((s = resolved_format(&r)) != NULL);
	CHECK(strstr(s, "sidecar") == NULL);
	free(s);
	REQUIRE(parse("{\"claimName\":\"c\",\"sidecarContainers\":"
	    "[\"istio-proxy\",\"envoy\"]}", &r, err, sizeof(err)) == 0);
	CHECK_INT(r.pol.nsidecar_names, 2);
	CHECK(ask(&r, resolved_sidecar, "envoy"));
	CHECK(!ask(&r, resolved_sidecar, "envoy2"));
	CHECK(!ask(&r, resolved_sidecar, NULL));
	REQUIRE((s = resolved_format(&r)) != NULL);
	CHECK_STR(s, "{\"claimName\":\"c\",\"initContainers\":\"none\","
	    "\"legacyGPU\":\"reject\",\"sidecarContainers\":"
	    "[\"istio-proxy\",\"envoy\"]}");
	free(s);
	CHECK_INT(parse("{\"claimName\":\"c\",\"sidecarContainers\":\"all\"}",
	    &r, err, sizeof(err)), -EINVAL);
	CHECK_INT(parse("{\"claimName\":\"c\",\"sidecarContainers\":[\"A\"]}",
	    &r, err, sizeof(err)), -EINVAL);
}

TEST(rejects_bad_values)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[]",
		"{}",
		"{\"claimTemplateName\":\"a\",\"claimName\":\"b\"}",
		"{\"claimTemplateName\":\"Upper\"}",
		"{\"claimTemplateName\":\"-a\"}",
		"{\"claimTemplateName\":\"a..b\"}",
		"{\"claimTemplateName\":\"\"}",
		"{\"claimTemplateName\":7}",
		"{\"claimTemplateName\":\"a\",\"extra\":1}",
		"{\"claimTemplateName\":\"a\",\"initContainers\":\"some\"}",
		"{\"claimTemplateName\":\"a\",\"initContainers\":[\"A\"]}",
		"{\"claimTemplateName\":\"a\",\"initContainers\":[1]}",
		"{\"claimTemplateName\":\"a\",\"initContainers\":{}}",
		"{\"claimTemplateName\":\"a\",\"legacyGPU\":\"drop\"}",
		"{\"claimTemplateName\":\"a\",\"legacyGPU\":true}",
		"{\"claimTemplateName\":\"a\",\"sharing\":\"xxxxxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxx\"}",
		"{\"claimTemplateName\":\"a\",\"sharing\":\"a\\nb\"}",
		"{\"claimTemplateName\":\"a\",\"claimTemplateName\":\"b\"}",
		"{\"claimTemplateName\":\"a\\u0000b\"}",
	};
	struct resolved r;
	char err[128];

	for (size_t i = 0; i < nitems(bad); i++) {
		err[0] = '\0';
		if (parse(bad[i], &r, err, sizeof(err)) != -EINVAL)
			test_fail(__FILE__, __LINE__, "accepted %s", bad[i]);
		else if (err[0] == '\0')
			test_fail(__FILE__, __LINE__, "no reason for %s",
			    bad[i]);
	}
}

TEST(too_many_init_names)
{
	char buf[2048] = "{\"claimName\":\"c\",\"initContainers\":[";
	struct resolved r;
	char err[128];

	for (int i = 0; i <= RESOLVED_MAX_NAMES; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
		    "%s\"n%d\"", i ? "," : "", i);
	strcat(buf, "]}");
	CHECK_INT(parse(buf, &r, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "more than") != NULL);
}

TEST(untouched_on_failure)
{
	struct resolved r, before;

	memset(&r, 0x5a, sizeof(r));
	before = r;
	CHECK(parse("{\"claimName\":\"ok\",\"legacyGPU\":\"nope\"}", &r, NULL,
	    0) == -EINVAL);
	CHECK(memcmp(&r, &before, sizeof(r)) == 0);
}

TEST(error_names_the_key)
{
	struct resolved r;
	char err[128];

	CHECK_INT(parse("{\"claimName\":\"x\",\"bogus\":1}", &r, err,
	    sizeof(err)), -EINVAL);
	CHECK(strstr(err, "bogus") != NULL);
	CHECK_INT(parse("{\"claimName\":\"x\",\"legacyGPU\":1}", &r, err,
	    sizeof(err)), -EINVAL);
	CHECK(strstr(err, "legacyGPU") != NULL);
}

TEST(format_sorted_and_round_trips)
{
	static const char *const in[] = {
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"sharing\":\"mig\"}",
		"{\"claimName\":\"shared\",\"instance\":\"Agent/x\","
		    "\"initContainers\":[\"a\",\"b\"],\"legacyGPU\":\"allow\"}",
		"{\"claimName\":\"shared\",\"initContainers\":\"all\","
		    "\"legacyGPU\":\"translate\"}",
		"{\"claimName\":\"shared\",\"sidecarContainers\":"
		    "[\"envoy\",\"vault-agent\"]}",
	};
	struct resolved a, b;
	char *s;

	REQUIRE(parse(in[0], &a, NULL, 0) == 0);
	s = resolved_format(&a);
	CHECK_STR(s, "{\"claimTemplateName\":\"gpu-1g10gb\",\"initContainers\""
	    ":\"none\",\"legacyGPU\":\"reject\",\"sharing\":\"mig\"}");
	free(s);
	for (size_t i = 0; i < nitems(in); i++) {
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		REQUIRE(parse(in[i], &a, NULL, 0) == 0);
		REQUIRE((s = resolved_format(&a)) != NULL);
		CHECK(parse(s, &b, NULL, 0) == 0);
		CHECK(resolved_equal(&a, &b));
		free(s);
	}
	/* a differing sidecar list is a different spec */
	b.pol.nsidecar_names = 1;
	CHECK(!resolved_equal(&a, &b));
	b = a;
	b.pol.legacy = RESOLVED_LEGACY_TRANSLATE;
	CHECK(!resolved_equal(&a, &b));
}

TEST(names)
{
	CHECK_STR(resolved_legacy_name(RESOLVED_LEGACY_REJECT), "reject");
	CHECK_STR(resolved_legacy_name(RESOLVED_LEGACY_TRANSLATE), "translate");
	CHECK_STR(resolved_legacy_name(RESOLVED_LEGACY_ALLOW), "allow");
	CHECK(dns1123_label_valid("a-1"));
	CHECK(!dns1123_label_valid("a.b"));
	CHECK(!dns1123_label_valid("a-"));
	CHECK(!dns1123_label_valid(""));
	CHECK(!dns1123_label_valid("a234567890123456789012345678901234567890"
	    "123456789012345678901234"));
	CHECK(dns1123_subdomain_valid("a.b-c.d"));
	CHECK(!dns1123_subdomain_valid("a.-b"));
	CHECK(!dns1123_subdomain_valid("a_b"));
	CHECK(!dns1123_subdomain_valid(".a"));
}

/* Whether the packed list run of n names is exactly names[0..n). */
static bool
same_names(const char *run, int n, const char names[][64])
{
	for (int i = 0; i < n; i++, run += strlen(run) + 1)
		if (strcmp(run, names[i]) != 0)
			return false;
	return true;
}

/*
 * The pack keeps every field and name of the parse, at the caps too (64
 * names of 63 bytes in each list), and answers the policy questions alike.
 */
TEST(pack_keeps_the_spec)
{
	static char big[16384];
	static const char *const in[] = {
		"{\"claimTemplateName\":\"gpu-1g10gb\",\"sharing\":\"mig\","
		    "\"instance\":\"Agent/team-a\"}",
		"{\"claimName\":\"team-a.gpu\",\"initContainers\":\"all\","
		    "\"legacyGPU\":\"translate\"}",
		"{\"claimName\":\"c\",\"initContainers\":[\"a\",\"b-2\"],"
		    "\"sidecarContainers\":[\"envoy\",\"b-2\"],"
		    "\"legacyGPU\":\"allow\"}",
		big,
	};
	static struct resolved r;
	struct resolved_pack *p;
	size_t o;

	o = (size_t)snprintf(big, sizeof(big), "{\"claimName\":\"c\","
	    "\"initContainers\":[");
	for (int l = 0; l < 2; l++) {
		for (int i = 0; i < RESOLVED_MAX_NAMES; i++)
			o += (size_t)snprintf(big + o, sizeof(big) - o,
			    "%s\"%c%062d\"", i ? "," : "", "is"[l], i);
		o += (size_t)snprintf(big + o, sizeof(big) - o, "%s",
		    l == 0 ? "],\"sidecarContainers\":[" : "]}");
	}
	for (size_t i = 0; i < nitems(in); i++) {
		REQUIRE(parse(in[i], &r, NULL, 0) == 0);
		REQUIRE(resolved_pack_new(&r, &p) == 0);
		CHECK_STR(p->claim_template, r.claim_template);
		CHECK_STR(p->claim, r.claim);
		CHECK_STR(p->sharing, r.sharing);
		CHECK_STR(p->instance, r.instance);
		CHECK_INT(p->pol.init, r.pol.init);
		CHECK_INT(p->pol.legacy, r.pol.legacy);
		CHECK_INT(p->pol.ninit_names, r.pol.ninit_names);
		CHECK_INT(p->pol.nsidecar_names, r.pol.nsidecar_names);
		CHECK(same_names(p->pol.init_names, r.pol.ninit_names,
		    r.pol.init_names));
		CHECK(same_names(p->pol.sidecar_names, r.pol.nsidecar_names,
		    r.pol.sidecar_names));
		for (int k = 0; k < r.pol.ninit_names; k++)
			CHECK(resolved_init_selected(p, r.pol.init_names[k]));
		for (int k = 0; k < r.pol.nsidecar_names; k++)
			CHECK(resolved_sidecar(p, r.pol.sidecar_names[k]));
		CHECK(!resolved_sidecar(p, "not-listed"));
		CHECK(!resolved_sidecar(p, NULL));
		CHECK_INT(resolved_init_selected(p, "not-listed"),
		    r.pol.init == RESOLVED_INIT_ALL);
		resolved_pack_unref(p);
	}
	CHECK_INT(r.pol.ninit_names, RESOLVED_MAX_NAMES);
	CHECK_INT(r.pol.nsidecar_names, RESOLVED_MAX_NAMES);
	CHECK_INT((int)strlen(r.pol.sidecar_names[63]), 63);
}

/* resolved_pack_parse: one step, the parse's errors; references count. */
TEST(pack_parse_and_references)
{
	struct resolved_pack *p = NULL;
	const struct resolved_pack *q;
	char err[128] = "";

	CHECK_INT(resolved_pack_parse("{\"claimName\":1}", 15, &p, err,
	    sizeof(err)), -EINVAL);
	CHECK(p == NULL);
	CHECK(strstr(err, "claimName") != NULL);
	REQUIRE(resolved_pack_parse("{\"claimName\":\"c\"}", 17, &p, NULL,
	    0) == 0);
	q = resolved_pack_ref(p);
	CHECK(q == p);
	resolved_pack_unref(p);
	/* one reference left: still readable (ASan checks it) */
	CHECK_STR(q->claim, "c");
	resolved_pack_unref(q);
	resolved_pack_unref(NULL);
}
