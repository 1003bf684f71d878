/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kpgpud-admit/nscache.c, the namespace map: put, get,
 * delete, unusable annotations, the cap, full snapshots, concurrent
 * readers, 100,000 namespaces (read all along while the map grows), and
 * a looked-up spec that stays valid while its namespace is replaced,
 * deleted or the map freed, until the holder releases it (alone and with
 * readers holding specs while a writer churns; run under ASan too).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "kpgpud-admit/nscache.h"
#include "tests/unit/test.h"

#define TMPL	"{\"claimTemplateName\":\"gpu-1g10gb\"}"

TEST(put_get_delete)
{
	struct nscache *c;
	const struct resolved_pack *r = NULL;

	REQUIRE(nscache_new(0, &c) == 0);
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_MISSING);
	CHECK(r == NULL);
	CHECK_INT(nscache_put(c, "a", true, TMPL, NULL, 0), 0);
	CHECK_INT(nscache_put(c, "b", false, NULL, NULL, 0), 0);
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_ISOLATED);
	REQUIRE(r != NULL);
	CHECK_STR(r->claim_template, "gpu-1g10gb");
	resolved_pack_unref(r);
	r = NULL;
	CHECK_INT(nscache_get(c, "b", &r), NSCACHE_OPEN);
	CHECK(r == NULL);
	CHECK_INT(nscache_count(c), 2);
	/* A put replaces. */
	CHECK_INT(nscache_put(c, "a", false, NULL, NULL, 0), 0);
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_OPEN);
	CHECK(r == NULL);
	CHECK_INT(nscache_count(c), 2);
	CHECK_INT(nscache_delete(c, "a"), 0);
	CHECK_INT(nscache_delete(c, "a"), -ENOENT);
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_MISSING);
	CHECK_INT(nscache_count(c), 1);
	nscache_free(c);
}

TEST(unusable_annotation_is_unresolved)
{
	struct nscache *c;
	char err[128] = "";

	REQUIRE(nscache_new(0, &c) == 0);
	CHECK_INT(nscache_put(c, "x", true, NULL, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "missing") != NULL);
	CHECK_INT(nscache_get(c, "x", NULL), NSCACHE_UNRESOLVED);
	CHECK_INT(nscache_put(c, "y", true, "{\"claimName\":1}", err,
	    sizeof(err)), -EINVAL);
	CHECK_INT(nscache_get(c, "y", NULL), NSCACHE_UNRESOLVED);
	/* A later good annotation fixes it. */
	CHECK_INT(nscache_put(c, "y", true, TMPL, NULL, 0), 0);
	CHECK_INT(nscache_get(c, "y", NULL), NSCACHE_ISOLATED);
	CHECK_INT(nscache_put(c, "Bad_Name", false, NULL, NULL, 0), -EINVAL);
	nscache_free(c);
}

TEST(capacity)
{
	struct nscache *c;

	REQUIRE(nscache_new(2, &c) == 0);
	CHECK_INT(nscache_put(c, "a", false, NULL, NULL, 0), 0);
	CHECK_INT(nscache_put(c, "b", false, NULL, NULL, 0), 0);
	CHECK_INT(nscache_put(c, "c", false, NULL, NULL, 0), -E2BIG);
	CHECK_INT(nscache_put(c, "a", true, TMPL, NULL, 0), 0);
	CHECK_INT(nscache_count(c), 2);
	nscache_free(c);
}

TEST(full_snapshot_drops_the_unmentioned)
{
	struct nscache *c;

	REQUIRE(nscache_new(0, &c) == 0);
	for (int i = 0; i < 50; i++) {
		char n[16];

		snprintf(n, sizeof(n), "ns-%d", i);
		CHECK_INT(nscache_put(c, n, i % 2 == 0, TMPL, NULL, 0), 0);
	}
	nscache_begin_full(c);
	/* Old entries still answer during the snapshot. */
	CHECK_INT(nscache_get(c, "ns-10", NULL), NSCACHE_ISOLATED);
	CHECK_INT(nscache_put(c, "ns-10", true, TMPL, NULL, 0), 0);
	CHECK_INT(nscache_put(c, "fresh", false, NULL, NULL, 0), 0);
	CHECK_INT(nscache_end_full(c), 49);
	CHECK_INT(nscache_count(c), 2);
	CHECK_INT(nscache_get(c, "ns-10", NULL), NSCACHE_ISOLATED);
	CHECK_INT(nscache_get(c, "ns-11", NULL), NSCACHE_MISSING);
	/* An aborted snapshot drops nothing, and end without begin is a no-op. */
	nscache_begin_full(c);
	nscache_abort_full(c);
	CHECK_INT(nscache_end_full(c), 0);
	CHECK_INT(nscache_count(c), 2);
	nscache_free(c);
}

struct reader_arg {
	struct nscache	*c;
	int		 bad;
};

/* Read concurrently with a writer; every answer must be consistent. */
static void *
reader(void *p)
{
	struct reader_arg *a = p;
	const struct resolved_pack *r;

	for (int i = 0; i < 20000; i++) {
		enum nscache_state st;

		r = NULL;
		st = nscache_get(a->c, "hot", &r);
		if (st == NSCACHE_ISOLATED && (r == NULL ||
		    strcmp(r->claim_template, "gpu-1g10gb") != 0))
			a->bad++;
		resolved_pack_unref(r);
	}
	return NULL;
}

TEST(concurrent_readers)
{
	struct reader_arg a = { NULL, 0 };
	pthread_t t[2];

	REQUIRE(nscache_new(0, &a.c) == 0);
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, reader, &a) == 0);
	for (int i = 0; i < 5000; i++) {
		nscache_put(a.c, "hot", i % 2 == 0, TMPL, NULL, 0);
		if (i % 7 == 0)
			nscache_delete(a.c, "hot");
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_INT(a.bad, 0);
	nscache_free(a.c);
}

struct grow_arg {
	struct nscache	*c;
	atomic_bool	 stop;
	int		 bad;
	atomic_long	 reads;
};

/* Read one namespace while the map grows around it: always there. */
static void *
anchor_reader(void *p)
{
	struct grow_arg *a = p;
	const struct resolved_pack *r;

	while (!a->stop) {
		r = NULL;
		if (nscache_get(a->c, "anchor", &r) != NSCACHE_ISOLATED ||
		    strcmp(r->claim_template, "gpu-1g10gb") != 0)
			a->bad++;
		resolved_pack_unref(r);
		a->reads++;
	}
	return NULL;
}

TEST(hundred_thousand_namespaces)
{
	struct grow_arg a = { .c = NULL };
	char n[32];
	pthread_t t;
	int i, bad = 0;

	/* the default cap: 100,000 */
	REQUIRE(nscache_new(0, &a.c) == 0);
	REQUIRE(nscache_put(a.c, "anchor", true, TMPL, NULL, 0) == 0);
	REQUIRE(pthread_create(&t, NULL, anchor_reader, &a) == 0);
	/* bounded: let the reader start before the map grows */
	for (i = 0; a.reads == 0 && i < 10000000; i++)
		sched_yield();
	for (i = 1; i < 100000; i++) {
		snprintf(n, sizeof(n), "tenant-%d", i);
		bad += nscache_put(a.c, n, i % 1000 == 0, TMPL, NULL, 0) != 0;
	}
	a.stop = true;
	pthread_join(t, NULL);
	CHECK_INT(bad, 0);
	CHECK_INT(a.bad, 0);
	CHECK(a.reads > 0);
	CHECK_INT(nscache_count(a.c), 100000);
	CHECK_INT(nscache_put(a.c, "one-more", false, NULL, NULL, 0), -E2BIG);
	for (i = 1; i < 100000; i++) {
		snprintf(n, sizeof(n), "tenant-%d", i);
		bad += nscache_get(a.c, n, NULL) != (i % 1000 == 0 ?
		    NSCACHE_ISOLATED : NSCACHE_OPEN);
	}
	CHECK_INT(bad, 0);
	/* a snapshot that mentions the even ones drops the odd ones */
	nscache_begin_full(a.c);
	for (i = 2; i < 100000; i += 2) {
		snprintf(n, sizeof(n), "tenant-%d", i);
		bad += nscache_put(a.c, n, false, NULL, NULL, 0) != 0;
	}
	CHECK_INT(bad, 0);
	/* the cap holds during a snapshot too: the old entries still count */
	CHECK_INT(nscache_put(a.c, "tenant-0", false, NULL, NULL, 0), -E2BIG);
	/* anchor and the 50,000 odd ones go */
	CHECK_INT(nscache_end_full(a.c), 50001);
	CHECK_INT(nscache_count(a.c), 49999);
	CHECK_INT(nscache_get(a.c, "tenant-99999", NULL), NSCACHE_MISSING);
	CHECK_INT(nscache_get(a.c, "tenant-99998", NULL), NSCACHE_OPEN);
	CHECK_INT(nscache_put(a.c, "one-more", false, NULL, NULL, 0), 0);
	nscache_free(a.c);
}

/* Two specs a churning writer alternates: a holder must see one, whole. */
#define SPEC_A	"{\"claimTemplateName\":\"gpu-a\",\"instance\":\"Agent/a\"," \
		"\"sidecarContainers\":[\"side-a\",\"envoy\"]," \
		"\"initContainers\":[\"init-a\"]}"
#define SPEC_B	"{\"claimName\":\"claim-b\",\"instance\":\"Agent/b\"," \
		"\"sidecarContainers\":[\"side-b\"],\"legacyGPU\":\"allow\"}"

/* Whether p is SPEC_A or SPEC_B entirely (not freed, not mixed). */
static bool
spec_whole(const struct resolved_pack *p)
{
	if (strcmp(p->claim_template, "gpu-a") == 0)
		return p->claim[0] == '\0' &&
		    strcmp(p->instance, "Agent/a") == 0 &&
		    resolved_sidecar(p, "side-a") &&
		    resolved_sidecar(p, "envoy") &&
		    !resolved_sidecar(p, "side-b") &&
		    resolved_init_selected(p, "init-a") &&
		    p->pol.legacy == RESOLVED_LEGACY_REJECT;
	return strcmp(p->claim, "claim-b") == 0 &&
	    p->claim_template[0] == '\0' &&
	    strcmp(p->instance, "Agent/b") == 0 &&
	    resolved_sidecar(p, "side-b") && !resolved_sidecar(p, "envoy") &&
	    !resolved_init_selected(p, "init-a") &&
	    p->pol.legacy == RESOLVED_LEGACY_ALLOW;
}

/* Reuse freed heap: allocate and scribble blocks of every small size. */
static void
scribble_heap(void)
{
	void *v[64];

	for (int i = 0; i < 64; i++)
		if ((v[i] = malloc((size_t)(i + 1) * 16)) != NULL)
			memset(v[i], 'X', (size_t)(i + 1) * 16);
	for (int i = 0; i < 64; i++)
		free(v[i]);
}

TEST(held_spec_outlives_replace_delete_and_free)
{
	const struct resolved_pack *a = NULL, *b = NULL, *again = NULL;
	struct nscache *c;

	REQUIRE(nscache_new(0, &c) == 0);
	REQUIRE(nscache_put(c, "t", true, SPEC_A, NULL, 0) == 0);
	REQUIRE(nscache_get(c, "t", &a) == NSCACHE_ISOLATED);
	/* Replaced while held: the holder keeps the old spec, whole. */
	REQUIRE(nscache_put(c, "t", true, SPEC_B, NULL, 0) == 0);
	REQUIRE(nscache_get(c, "t", &b) == NSCACHE_ISOLATED);
	CHECK(a != b);
	scribble_heap();
	CHECK(spec_whole(a) && strcmp(a->claim_template, "gpu-a") == 0);
	CHECK(spec_whole(b) && strcmp(b->claim, "claim-b") == 0);
	/* Two lookups of the same entry share one spec. */
	REQUIRE(nscache_get(c, "t", &again) == NSCACHE_ISOLATED);
	CHECK(again == b);
	resolved_pack_unref(again);
	/* Made open, deleted, the map freed: still valid until released. */
	REQUIRE(nscache_put(c, "t", false, NULL, NULL, 0) == 0);
	scribble_heap();
	CHECK(spec_whole(b) && strcmp(b->claim, "claim-b") == 0);
	REQUIRE(nscache_put(c, "t", true, SPEC_A, NULL, 0) == 0);
	REQUIRE(nscache_get(c, "t", &again) == NSCACHE_ISOLATED);
	CHECK_INT(nscache_delete(c, "t"), 0);
	nscache_free(c);
	scribble_heap();
	CHECK(spec_whole(a) && strcmp(a->claim_template, "gpu-a") == 0);
	CHECK(spec_whole(b) && strcmp(b->claim, "claim-b") == 0);
	CHECK(spec_whole(again) && strcmp(again->instance, "Agent/a") == 0);
	resolved_pack_unref(a);
	resolved_pack_unref(b);
	resolved_pack_unref(again);
}

struct churn_arg {
	struct nscache	*c;
	atomic_bool	 stop;
	atomic_long	 held;	/* lookups that got a spec */
	atomic_int	 bad;
};

/*
 * Look "hot" up and hold what it gives across a run of other lookups (so
 * the writer replaces and deletes it meanwhile), checking it whole before
 * and after; release, repeat until the writer is done.
 */
static void *
churn_reader(void *p)
{
	struct churn_arg *a = p;
	const struct resolved_pack *hold[8];

	while (!atomic_load(&a->stop)) {
		int n = 0;

		for (int i = 0; i < 8; i++) {
			hold[n] = NULL;
			if (nscache_get(a->c, "hot", &hold[n]) ==
			    NSCACHE_ISOLATED) {
				if (!spec_whole(hold[n]))
					a->bad++;
				n++;
			}
		}
		for (int i = 0; i < n; i++) {
			if (!spec_whole(hold[i]))
				a->bad++;
			resolved_pack_unref(hold[i]);
		}
		a->held += n;
	}
	return NULL;
}

TEST(readers_hold_specs_while_writer_churns)
{
	struct churn_arg a = { .c = NULL };
	pthread_t t[3];
	long i;

	REQUIRE(nscache_new(0, &a.c) == 0);
	REQUIRE(nscache_put(a.c, "hot", true, SPEC_A, NULL, 0) == 0);
	for (int k = 0; k < 3; k++)
		REQUIRE(pthread_create(&t[k], NULL, churn_reader, &a) == 0);
	/* bounded: let the readers start holding before the churn */
	for (i = 0; a.held == 0 && i < 10000000; i++)
		sched_yield();
	for (i = 0; i < 20000; i++) {
		nscache_put(a.c, "hot", true, i % 2 ? SPEC_A : SPEC_B, NULL, 0);
		if (i % 5 == 0)
			nscache_delete(a.c, "hot");
		if (i % 11 == 0)
			nscache_put(a.c, "hot", false, NULL, NULL, 0);
	}
	atomic_store(&a.stop, true);
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	CHECK_INT(a.bad, 0);
	CHECK(a.held > 0);
	printf("# held %ld specs across the churn\n", (long)a.held);
	nscache_free(a.c);
}
