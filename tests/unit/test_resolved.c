/* Unit tests for common/resolved.c: the resolved-isolation annotation. */
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
	CHECK(resolved_init_selected(&r, "a"));
	CHECK(!resolved_init_selected(&r, "c"));
	CHECK(!resolved_init_selected(&r, NULL));
}

/* sidecarContainers: absent or "none" is none; a list is matched by name. */
TEST(sidecar_containers)
{
	struct resolved r;
	char err[128], *s;

	REQUIRE(parse("{\"claimName\":\"c\"}", &r, err, sizeof(err)) == 0);
	CHECK_INT(r.pol.nsidecar_names, 0);
	CHECK(!resolved_sidecar(&r, "istio-proxy"));
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
	CHECK(resolved_sidecar(&r, "envoy"));
	CHECK(!resolved_sidecar(&r, "envoy2"));
	CHECK(!resolved_sidecar(&r, NULL));
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
