/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-quota's own writes coming back (kpgpud-quota/own.c), against a
 * real cache: a change is taken as ours only when the cache row is at the
 * change's generation and holds the resourceVersion our write returned.
 * Someone else's version, a change older than the row (an edit by someone
 * else may lie between it and our write), a delete, a write never
 * remembered, a kind whose changes concern every tenant, a write forgotten
 * by a DELETE or by a snapshot, and a full set all wake the tenant; each
 * write is recognised once. A change that may be ours is held and looked
 * at when settled, from the cache as it is then (a row moved on since
 * wakes the tenant); a snapshot settles the held ones before forgetting
 * the writes; past the cap a change is looked at at once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_write.h"
#include "common/strmap.h"
#include "common/util.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/workqueue.h"
#include "tests/unit/test.h"

/* The quota row of t at rv with spec.hard x=n; its generation. */
static uint64_t
put_quota(struct cache *c, const char *rv, int n)
{
	char data[128];
	struct cache_owned o = { .kind = CACHE_KIND_QUOTA, .ns = "t",
	    .name = "kpgpud-gpu", .uid = "u1", .rv = rv, .data = data };
	uint64_t gen = 0;

	snprintf(data, sizeof(data), "{\"spec\":{\"hard\":{\"x\":\"%d\"}}}",
	    n);
	CHECK(cache_owned_put(c, &o, &gen) == 0);
	CHECK(gen > 0);
	return gen;
}

/* Namespace t at rv; its generation. */
static uint64_t
put_ns(struct cache *c, const char *rv, const char *team)
{
	char labels[64];
	struct cache_ns ns = { .name = "t", .uid = "u2", .rv = rv,
	    .phase = "Active", .labels = labels, .annotations = "{}" };
	uint64_t gen = 0;

	snprintf(labels, sizeof(labels), "{\"team\":\"%s\"}", team);
	CHECK(cache_ns_put(c, &ns, &gen) == 0);
	CHECK(gen > 0);
	return gen;
}

/* What a write of kind/name in t answered with, at rv. */
static void
wrote(struct quotad *q, const char *method, const char *kind,
    const char *name, const char *rv)
{
	json_t *o = json_pack("{s:s, s:{s:s, s:s, s:s}}", "kind", kind,
	    "metadata", "namespace", "t", "name", name, "resourceVersion", rv);

	quotad_own_wrote(q, method, o);
	json_decref(o);
}

/* A change of the quota, or of Namespace t, at gen. */
static struct ipc_change
change(bool ns, uint64_t gen, bool deleted)
{
	struct ipc_change ch;

	memset(&ch, 0, sizeof(ch));
	ch.generation = gen;
	ch.topic = ns ? IPC_TOPIC_NAMESPACES : IPC_TOPIC_OWNED;
	snprintf(ch.kind, sizeof(ch.kind), "%s", ns ? "Namespace" :
	    CACHE_KIND_QUOTA);
	snprintf(ch.ns, sizeof(ch.ns), "t");
	snprintf(ch.name, sizeof(ch.name), "%s", ns ? "t" : "kpgpud-gpu");
	ch.deleted = deleted;
	return ch;
}

TEST(own_echo_only_our_own_version_at_the_rows_generation)
{
	struct quotad q;
	struct cache *c, *rd = NULL;
	struct ipc_change ch;
	uint64_t g1, g2, g3;

	memset(&q, 0, sizeof(q));
	REQUIRE((c = test_cache_new(&rd)) != NULL);
	REQUIRE(strmap_new(0, 4, &q.own) == 0);

	/* our create comes back: ours, once */
	wrote(&q, "POST", CACHE_KIND_QUOTA, "kpgpud-gpu", "5");
	g1 = put_quota(c, "5", 1);
	ch = change(false, g1, false);
	CHECK(quotad_own_echo(&q, rd, &ch));
	CHECK(!quotad_own_echo(&q, rd, &ch));

	/* someone else's version after ours */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "6");
	g2 = put_quota(c, "7", 7);
	ch = change(false, g2, false);
	CHECK(!quotad_own_echo(&q, rd, &ch));

	/* an edit by someone else (g2), then ours (g3) in the row: the
	   older change is not ours, nor is ours once it was forgotten */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "9");
	g2 = put_quota(c, "8", 3);
	g3 = put_quota(c, "9", 1);
	CHECK(g3 > g2);
	ch = change(false, g2, false);
	CHECK(!quotad_own_echo(&q, rd, &ch));
	ch = change(false, g3, false);
	CHECK(!quotad_own_echo(&q, rd, &ch));

	/* a delete is never ours to ignore */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "9");
	ch = change(false, g3, true);
	CHECK(!quotad_own_echo(&q, rd, &ch));
	/* a write never remembered */
	ch = change(false, g3, false);
	CHECK(!quotad_own_echo(&q, rd, &ch));
	/* a DELETE of ours forgets the object */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "9");
	wrote(&q, "DELETE", CACHE_KIND_QUOTA, "kpgpud-gpu", "9");
	CHECK(!quotad_own_echo(&q, rd, &ch));
	/* so does a snapshot */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "9");
	quotad_own_reset(&q);
	CHECK(strmap_count(q.own) == 0);
	CHECK(!quotad_own_echo(&q, rd, &ch));
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "9");
	CHECK(quotad_own_echo(&q, rd, &ch));

	/* the Namespace: ours, then someone else's label */
	wrote(&q, "PATCH", "Namespace", "t", "11");
	g1 = put_ns(c, "11", "a");
	ch = change(true, g1, false);
	CHECK(quotad_own_echo(&q, rd, &ch));
	wrote(&q, "PATCH", "Namespace", "t", "11");
	g2 = put_ns(c, "12", "b");
	ch = change(true, g2, false);
	CHECK(!quotad_own_echo(&q, rd, &ch));

	/* a DeviceClass wakes every tenant: never remembered */
	wrote(&q, "POST", CACHE_KIND_DEVICECLASS, "kpgpud-gpu", "13");
	CHECK(strmap_count(q.own) == 0);

	/* past the cap a write is not remembered (and logged once) */
	for (int i = 0; i < 5; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c%d", i);
		wrote(&q, "POST", CACHE_KIND_CLAIMTEMPLATE, name, "20");
	}
	CHECK(strmap_count(q.own) == 4);
	CHECK(q.own_full);

	quotad_own_reset(&q);
	CHECK(strmap_count(q.own) == 0);
	strmap_free(q.own, free);
	test_cache_remove(c, rd);
}

/* Take the one queued key: tenant t's. */
static bool
queued_t(struct wq *wq)
{
	const char *key;
	bool ok;

	if (wq_len(wq) != 1 || wq_get(wq, monotonic_ms(), &key) < 0)
		return false;
	ok = strcmp(key, QUOTAD_NS_PREFIX "t") == 0;
	wq_done(wq, key, monotonic_ms());
	return ok;
}

TEST(own_later_held_changes_looked_at_when_settled)
{
	struct quotad q;
	struct cache *c, *rd = NULL;
	struct ipc_change ch;
	uint64_t g1, g2;
	int held = 0;

	memset(&q, 0, sizeof(q));
	REQUIRE((c = test_cache_new(&rd)) != NULL);
	REQUIRE(strmap_new(0, 4, &q.own) == 0);
	REQUIRE(wq_new(NULL, monotonic_ms(), &q.wq) == 0);
	q.cache = rd;

	/* a change of no write of ours is not held */
	ch = change(false, 1, false);
	CHECK(!quotad_own_later(&q, &ch));
	CHECK(q.nlater == 0);

	/* our create comes back: held, then ours (nothing queued) */
	wrote(&q, "POST", CACHE_KIND_QUOTA, "kpgpud-gpu", "5");
	g1 = put_quota(c, "5", 1);
	ch = change(false, g1, false);
	CHECK(quotad_own_later(&q, &ch));
	CHECK(q.nlater == 1);
	CHECK(strmap_count(q.own) == 1);
	quotad_own_settle(&q);
	CHECK(q.nlater == 0);
	CHECK(wq_len(q.wq) == 0);
	CHECK(strmap_count(q.own) == 0);

	/* held, and someone else wrote before it was looked at: queued */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "6");
	g1 = put_quota(c, "6", 2);
	ch = change(false, g1, false);
	CHECK(quotad_own_later(&q, &ch));
	g2 = put_quota(c, "7", 3);
	CHECK(wq_len(q.wq) == 0);
	quotad_own_settle(&q);
	CHECK(queued_t(q.wq));

	/* a snapshot looks at the held changes before forgetting writes */
	wrote(&q, "PATCH", "Namespace", "t", "11");
	g1 = put_ns(c, "11", "a");
	ch = change(true, g1, false);
	CHECK(quotad_own_later(&q, &ch));
	quotad_own_reset(&q);
	CHECK(q.nlater == 0);
	CHECK(wq_len(q.wq) == 0);

	/* past the cap a change is looked at at once; of those held, the
	   first is ours and the rest (the write forgotten) queue t once */
	wrote(&q, "PATCH", CACHE_KIND_QUOTA, "kpgpud-gpu", "7");
	ch = change(false, g2, false);
	for (int i = 0; i < QUOTAD_LATER_MAX; i++)
		held += quotad_own_later(&q, &ch);
	CHECK(held == QUOTAD_LATER_MAX);
	CHECK(!quotad_own_later(&q, &ch));
	quotad_own_settle(&q);
	CHECK(queued_t(q.wq));

	quotad_own_free(&q);
	CHECK(q.later == NULL && q.nlater == 0);
	q.cache = NULL;
	wq_free(q.wq);
	strmap_free(q.own, free);
	test_cache_remove(c, rd);
}
