/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Lease decision (kpgpud-quota/lease.c): create when absent, renew our
 * own, wait while another holder's record keeps changing, take over only
 * once it stayed unchanged for the lease duration (by our clock), keep the
 * resourceVersion as precondition, and stop counting as leader at the renew
 * deadline or when someone else holds the Lease; give it up as client-go
 * does (no holder, leaseDurationSeconds 1).
 */
#include <string.h>

#include <jansson.h>

#include "kpgpud-quota/lease.h"
#include "tests/unit/test.h"

static const struct lease_config cfg = {
	.ns = "kube-system", .name = "kpgpud-quota", .identity = "me-1",
	.duration_s = 15,
};

/* A Lease held by holder, renewed at renew, at resourceVersion rv. */
static json_t *
lease_obj(const char *holder, const char *renew, const char *rv)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s, s:i, s:s, "
	    "s:i}}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
	    "metadata", "name", "kpgpud-quota", "namespace", "kube-system",
	    "resourceVersion", rv, "spec", "holderIdentity", holder,
	    "leaseDurationSeconds", 10, "renewTime", renew,
	    "leaseTransitions", 3);
}

/* A string at spec.key of a body. */
static const char *
spec(json_t *b, const char *key)
{
	return json_string_value(json_object_get(json_object_get(b, "spec"),
	    key));
}

TEST(create_when_absent)
{
	struct lease_elector e;
	json_t *body = NULL;

	REQUIRE(lease_elector_init(&e, &cfg) == 0);
	CHECK_INT(lease_decide(&e, NULL, 1000, 1700000000123ull, &body),
	    LEASE_CREATE);
	REQUIRE(body != NULL);
	CHECK_STR(json_string_value(json_object_get(body, "kind")), "Lease");
	CHECK_STR(spec(body, "holderIdentity"), "me-1");
	CHECK_STR(spec(body, "renewTime"), "2023-11-14T22:13:20.123000Z");
	CHECK_STR(spec(body, "acquireTime"), "2023-11-14T22:13:20.123000Z");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(body,
	    "spec"), "leaseDurationSeconds")), 15);
	json_decref(body);
	CHECK(!lease_is_leader(&e, 1000));
	lease_written(&e, true, 1000);
	CHECK(lease_is_leader(&e, 1000));
	CHECK(lease_is_leader(&e, 10999));
	CHECK(!lease_is_leader(&e, 11000));	/* 2/3 of 15 s */
	CHECK_INT(e.transitions, 1);
}

TEST(wait_then_take_over_unchanged_record)
{
	struct lease_elector e;
	json_t *o, *body = NULL;

	REQUIRE(lease_elector_init(&e, &cfg) == 0);
	o = lease_obj("other", "2026-01-01T00:00:00.000000Z", "7");
	CHECK_INT(lease_decide(&e, o, 1000, 0, &body), LEASE_WAIT);
	CHECK_INT(lease_decide(&e, o, 10999, 0, &body), LEASE_WAIT);
	json_decref(o);
	/* the holder renewed: the clock starts again */
	o = lease_obj("other", "2026-01-01T00:00:05.000000Z", "8");
	CHECK_INT(lease_decide(&e, o, 11000, 0, &body), LEASE_WAIT);
	CHECK_INT(lease_decide(&e, o, 20999, 0, &body), LEASE_WAIT);
	CHECK(body == NULL);
	/* unchanged for the holder's 10 s: take over */
	CHECK_INT(lease_decide(&e, o, 21000, 1700000000000ull, &body),
	    LEASE_UPDATE);
	REQUIRE(body != NULL);
	CHECK_STR(spec(body, "holderIdentity"), "me-1");
	CHECK_STR(json_string_value(json_object_get(json_object_get(body,
	    "metadata"), "resourceVersion")), "8");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(body,
	    "spec"), "leaseTransitions")), 4);
	CHECK(spec(body, "acquireTime") != NULL);
	json_decref(body);
	json_decref(o);
}

TEST(renew_own_lease)
{
	struct lease_elector e;
	json_t *o, *body = NULL;

	REQUIRE(lease_elector_init(&e, &cfg) == 0);
	lease_written(&e, true, 0);
	o = lease_obj("me-1", "2026-01-01T00:00:00.000000Z", "9");
	CHECK_INT(lease_decide(&e, o, 5000, 1700000000000ull, &body),
	    LEASE_UPDATE);
	REQUIRE(body != NULL);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(body,
	    "spec"), "leaseTransitions")), 3);
	CHECK(spec(body, "acquireTime") == NULL);
	CHECK_STR(spec(body, "renewTime"), "2023-11-14T22:13:20.000000Z");
	json_decref(body);
	json_decref(o);
	/* a failed renewal keeps the old deadline */
	lease_written(&e, false, 5000);
	CHECK(lease_is_leader(&e, 9999));
	CHECK(!lease_is_leader(&e, 10000));
}

TEST(lose_to_another_holder)
{
	struct lease_elector e;
	json_t *o, *body = NULL;

	REQUIRE(lease_elector_init(&e, &cfg) == 0);
	lease_written(&e, true, 0);
	REQUIRE(lease_is_leader(&e, 1));
	o = lease_obj("other", "2026-01-01T00:00:00.000000Z", "10");
	CHECK_INT(lease_decide(&e, o, 2, 0, &body), LEASE_WAIT);
	CHECK(!lease_is_leader(&e, 3));
	json_decref(o);
	/* released (empty holder): take it at once */
	o = lease_obj("", "2026-01-01T00:00:00.000000Z", "11");
	CHECK_INT(lease_decide(&e, o, 4, 0, &body), LEASE_UPDATE);
	json_decref(body);
	json_decref(o);
}

TEST(release_like_client_go)
{
	json_t *o, *body, *bad;

	o = lease_obj("me-1", "2026-01-01T00:00:00.000000Z", "12");
	body = lease_release_body(o, 1700000000000ull);
	REQUIRE(body != NULL);
	CHECK_STR(spec(body, "holderIdentity"), "");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(body,
	    "spec"), "leaseDurationSeconds")), 1);
	CHECK_STR(spec(body, "renewTime"), "2023-11-14T22:13:20.000000Z");
	CHECK_STR(spec(body, "acquireTime"), "2023-11-14T22:13:20.000000Z");
	CHECK_INT(json_integer_value(json_object_get(json_object_get(body,
	    "spec"), "leaseTransitions")), 3);
	/* the precondition stays: a Lease taken meanwhile is not cleared */
	CHECK_STR(json_string_value(json_object_get(json_object_get(body,
	    "metadata"), "resourceVersion")), "12");
	/* ours is not changed */
	CHECK_STR(spec(o, "holderIdentity"), "me-1");
	json_decref(body);
	json_decref(o);
	bad = json_pack("{s:s}", "kind", "Lease");
	CHECK(lease_release_body(bad, 0) == NULL);
	json_decref(bad);
}

TEST(bad_config)
{
	struct lease_elector e;
	struct lease_config c = cfg;

	c.duration_s = 0;
	CHECK(lease_elector_init(&e, &c) < 0);
	c = cfg;
	c.identity = "";
	CHECK(lease_elector_init(&e, &c) < 0);
}
