/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of kpgpud-sync's instance discovery: the preferred
 * version of an APIGroup, the listable and watchable top-level resources
 * of an APIResourceList (subresources and resources without list or watch
 * left out, a document of another group/version refused, the cap), the
 * --instance-groups list and group membership of a gvr.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "kpgpud-sync/discovery.h"
#include "tests/unit/test.h"

TEST(preferred_version)
{
	json_t *g = json_loads("{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\","
	    "\"name\":\"platformapi.kubeplus\",\"versions\":[{\"groupVersion\":"
	    "\"platformapi.kubeplus/v1alpha1\",\"version\":\"v1alpha1\"}],"
	    "\"preferredVersion\":{\"groupVersion\":"
	    "\"platformapi.kubeplus/v1alpha1\",\"version\":\"v1alpha1\"}}", 0,
	    NULL);
	char v[64];

	REQUIRE(g != NULL);
	CHECK_INT(disc_preferred_version(g, v, sizeof(v)), 0);
	CHECK_STR(v, "v1alpha1");
	CHECK_INT(disc_preferred_version(g, v, 4), -EINVAL);
	json_object_set_new(g, "kind", json_string("Status"));
	CHECK_INT(disc_preferred_version(g, v, sizeof(v)), -EINVAL);
	json_object_set_new(g, "kind", json_string("APIGroup"));
	json_object_set_new(json_object_get(g, "preferredVersion"), "version",
	    json_string("V1/../x"));
	CHECK_INT(disc_preferred_version(g, v, sizeof(v)), -EINVAL);
	CHECK_INT(disc_preferred_version(NULL, v, sizeof(v)), -EINVAL);
	json_decref(g);
}

#define ALL "[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\"," \
	"\"patch\",\"update\",\"watch\"]"

TEST(resources)
{
	json_t *l = json_loads("{\"kind\":\"APIResourceList\",\"apiVersion\":"
	    "\"v1\",\"groupVersion\":\"platformapi.kubeplus/v1alpha1\","
	    "\"resources\":[{\"name\":\"mysqlservices\",\"namespaced\":true,"
	    "\"kind\":\"MysqlService\",\"verbs\":" ALL "},{\"name\":"
	    "\"mysqlservices/status\",\"kind\":\"MysqlService\",\"verbs\":"
	    "[\"get\",\"patch\",\"update\"]},{\"name\":\"wordpressservices\","
	    "\"kind\":\"WordpressService\",\"verbs\":" ALL "},{\"name\":"
	    "\"nowatch\",\"kind\":\"X\",\"verbs\":[\"get\",\"list\"]},"
	    "{\"name\":\"Bad_Name\",\"verbs\":" ALL "},{\"verbs\":" ALL "}]}",
	    0, NULL);
	char out[4][CACHE_GVR_MAX + 1];
	size_t n = 99;

	REQUIRE(l != NULL);
	CHECK_INT(disc_resources(l, "platformapi.kubeplus", "v1alpha1", out, 4,
	    &n), 0);
	CHECK_INT(n, 2);
	CHECK_STR(out[0], "platformapi.kubeplus/v1alpha1/mysqlservices");
	CHECK_STR(out[1], "platformapi.kubeplus/v1alpha1/wordpressservices");
	/* the cap: the first ones are kept */
	CHECK_INT(disc_resources(l, "platformapi.kubeplus", "v1alpha1", out, 1,
	    &n), -E2BIG);
	CHECK_INT(n, 1);
	CHECK_STR(out[0], "platformapi.kubeplus/v1alpha1/mysqlservices");
	/* another group or version's document is refused */
	CHECK_INT(disc_resources(l, "platformapi.kubeplus", "v1", out, 4, &n),
	    -EINVAL);
	CHECK_INT(disc_resources(l, "other.example.com", "v1alpha1", out, 4,
	    &n), -EINVAL);
	json_object_set_new(l, "kind", json_string("Status"));
	CHECK_INT(disc_resources(l, "platformapi.kubeplus", "v1alpha1", out, 4,
	    &n), -EINVAL);
	json_decref(l);
}

TEST(groups)
{
	char g[DISC_MAX_GROUPS][DISC_GROUP_MAX + 1];
	size_t n = 99;

	CHECK_INT(disc_parse_groups("platformapi.kubeplus", g, DISC_MAX_GROUPS,
	    &n), 0);
	CHECK_INT(n, 1);
	CHECK_STR(g[0], "platformapi.kubeplus");
	CHECK_INT(disc_parse_groups(" a.example.com,b.example.com ,", g,
	    DISC_MAX_GROUPS, &n), 0);
	CHECK_INT(n, 2);
	CHECK_STR(g[1], "b.example.com");
	CHECK_INT(disc_parse_groups("", g, DISC_MAX_GROUPS, &n), 0);
	CHECK_INT(n, 0);
	/* a core-like name without a dot, bad characters, too many */
	CHECK_INT(disc_parse_groups("apps", g, DISC_MAX_GROUPS, &n), -EINVAL);
	CHECK_INT(disc_parse_groups("a.Example.com", g, DISC_MAX_GROUPS, &n),
	    -EINVAL);
	CHECK_INT(disc_parse_groups("a.b,c.d,e.f", g, 2, &n), -E2BIG);
	CHECK(disc_gvr_in_group("platformapi.kubeplus/v1alpha1/x",
	    "platformapi.kubeplus"));
	CHECK(!disc_gvr_in_group("platformapi.kubeplus.evil/v1/x",
	    "platformapi.kubeplus"));
	CHECK(!disc_gvr_in_group("kubeplus.io/v1alpha1/agents",
	    "platformapi.kubeplus"));
}
