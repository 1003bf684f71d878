/* Unit tests for kpgpud-admit/nscache.c: the namespace map. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "kpgpud-admit/nscache.h"
#include "tests/unit/test.h"

#define TMPL	"{\"claimTemplateName\":\"gpu-1g10gb\"}"

TEST(put_get_delete)
{
	struct nscache *c;
	struct resolved r;

	REQUIRE(nscache_new(0, &c) == 0);
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_MISSING);
	CHECK_INT(nscache_put(c, "a", true, TMPL, NULL, 0), 0);
	CHECK_INT(nscache_put(c, "b", false, NULL, NULL, 0), 0);
	memset(&r, 0, sizeof(r));
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_ISOLATED);
	CHECK_STR(r.claim_template, "gpu-1g10gb");
	CHECK_INT(nscache_get(c, "b", NULL), NSCACHE_OPEN);
	CHECK_INT(nscache_count(c), 2);
	/* A put replaces. */
	CHECK_INT(nscache_put(c, "a", false, NULL, NULL, 0), 0);
	CHECK_INT(nscache_get(c, "a", &r), NSCACHE_OPEN);
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
	struct resolved r;

	for (int i = 0; i < 20000; i++) {
		enum nscache_state st = nscache_get(a->c, "hot", &r);

		if (st == NSCACHE_ISOLATED &&
		    strcmp(r.claim_template, "gpu-1g10gb") != 0)
			a->bad++;
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
