/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SQLite cache: upserts and generations, deletes, filters, transactions,
 * the read-only mode kpgpud-quota uses, watch state across reopen, and
 * recovery from a corrupt or foreign file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache_write.h"
#include "tests/unit/test.h"

static char tdir[64];
static uint64_t g0;		/* the generation of a fresh cache */
static char tpath[128];

/* Make a fresh directory and database path for one test. */
static const char *
fresh(void)
{
	snprintf(tdir, sizeof(tdir), "/tmp/kpgpud-cache.XXXXXX");
	if (mkdtemp(tdir) == NULL)
		return NULL;
	snprintf(tpath, sizeof(tpath), "%s/cache.db", tdir);
	return tpath;
}

/* Remove the test directory and everything in it. */
static void
cleanup(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	if (system(cmd) != 0)
		test_fail(__FILE__, __LINE__, "rm failed");
}

/* Open the test path as the writer and note its first generation. */
static int
open_rw(struct cache **c)
{
	int r = cache_open(tpath, 0, c);

	return r < 0 ? r : cache_generation(*c, &g0);
}

/* Put a namespace with the given rv. */
static int
put_ns(struct cache *c, const char *name, const char *rv, bool iso,
    uint64_t *gen)
{
	struct cache_ns ns = {
		.name = name, .uid = "u-1", .rv = rv, .phase = "Active",
		.isolated = iso,
		.resolved = iso ? "{\"claimTemplateName\":\"gpu\"}" : NULL,
		.labels = "{\"a\":\"b\"}",
	};

	return cache_ns_put(c, &ns, gen);
}

TEST(ns_put_get_generations)
{
	struct cache *c;
	struct cache_ns *ns = NULL;
	uint64_t g1 = 99, g2 = 99, g3 = 99, gen;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(!cache_recovered(c));
	CHECK(cache_generation(c, &gen) == 0 && gen == g0);
	CHECK(put_ns(c, "team-a", "10", true, &g1) == 0);
	CHECK_INT(g1, g0 + 1);
	/* same resourceVersion: nothing changes, no generation */
	CHECK(put_ns(c, "team-a", "10", true, &g2) == 0);
	CHECK_INT(g2, 0);
	CHECK(put_ns(c, "team-a", "11", false, &g3) == 0);
	CHECK_INT(g3, g0 + 2);
	REQUIRE(cache_ns_get(c, "team-a", &ns) == 0);
	CHECK_STR(ns->rv, "11");
	CHECK_STR(ns->uid, "u-1");
	CHECK_STR(ns->phase, "Active");
	CHECK_STR(ns->labels, "{\"a\":\"b\"}");
	CHECK_STR(ns->annotations, "{}");
	CHECK(!ns->isolated);
	CHECK(ns->resolved == NULL);
	CHECK_INT(ns->gen, g0 + 2);
	cache_ns_free(ns);
	CHECK(cache_ns_get(c, "nope", &ns) == -ENOENT);
	CHECK(cache_ns_delete(c, "team-a", &g1) == 0);
	CHECK_INT(g1, g0 + 3);
	CHECK(cache_ns_delete(c, "team-a", &g1) == 0);
	CHECK_INT(g1, 0);
	CHECK(cache_ns_get(c, "team-a", &ns) == -ENOENT);
	CHECK(cache_generation(c, &gen) == 0 && gen == g0 + 3);
	cache_free(c);
	cleanup();
}

TEST(put_rejects_bad_input)
{
	struct cache *c;
	char big[400];
	struct cache_ns ns = { .name = big };
	struct cache_owned o = { .kind = "DeviceClass", .name = "x" };

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_ns_put(c, &ns, NULL) == -EINVAL);
	ns.name = "";
	CHECK(cache_ns_put(c, &ns, NULL) == -EINVAL);
	/* ns NULL is not "cluster-scoped": it must be "" */
	CHECK(cache_owned_put(c, &o, NULL) == -EINVAL);
	o.ns = "";
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	cache_free(c);
	cleanup();
}

struct collect {
	int	 n;
	char	 names[16][64];
};

/* Record each instance name. */
static int
collect_in(const struct cache_instance *in, void *arg)
{
	struct collect *k = arg;

	if (k->n < 16)
		snprintf(k->names[k->n++], 64, "%s/%s", in->ns, in->name);
	return 0;
}

/* Record each owned object as kind:ns/name. */
static int
collect_ow(const struct cache_owned *o, void *arg)
{
	struct collect *k = arg;

	if (k->n < 16)
		snprintf(k->names[k->n++], 64, "%s:%s/%s", o->kind, o->ns,
		    o->name);
	return 0;
}

/* Record each namespace name. */
static int
collect_ns(const struct cache_ns *ns, void *arg)
{
	struct collect *k = arg;

	if (k->n < 16)
		snprintf(k->names[k->n++], 64, "%s", ns->name);
	return 0;
}

/*
 * Rows changed since a generation (read through the gen indexes) come in
 * key order, whatever the order they changed in; rows of before are not
 * read.
 */
TEST(since_in_key_order)
{
	struct cache *c;
	struct cache_instance in = { .gvr = "kubeplus.io/v1/agents",
	    .kind = "Agent", .ns = "t", .uid = "u", .rv = "1",
	    .created = "2025-01-01T00:00:00Z" };
	struct cache_owned o = { .kind = CACHE_KIND_QUOTA, .uid = "u",
	    .rv = "1", .data = "{}" };
	const char *order[] = { "old", "c", "a", "b" };
	struct collect k = { 0 };
	uint64_t mark = 0;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	for (size_t i = 0; i < 4; i++) {
		in.name = o.ns = o.name = order[i];
		CHECK(put_ns(c, order[i], "1", false, NULL) == 0);
		CHECK(cache_instance_put(c, &in, NULL) == 0);
		CHECK(cache_owned_put(c, &o, NULL) == 0);
		if (i == 0)
			CHECK(cache_generation(c, &mark) == 0);
	}
	CHECK(cache_ns_foreach(c, mark, collect_ns, &k) == 0);
	CHECK(cache_instance_foreach(c, NULL, mark, collect_in, &k) == 0);
	CHECK(cache_owned_foreach(c, NULL, NULL, mark, collect_ow, &k) == 0);
	CHECK_INT(k.n, 9);
	CHECK_STR(k.names[0], "a");
	CHECK_STR(k.names[2], "c");
	CHECK_STR(k.names[3], "t/a");
	CHECK_STR(k.names[5], "t/c");
	CHECK_STR(k.names[6], "ResourceQuota:a/a");
	CHECK_STR(k.names[8], "ResourceQuota:c/c");
	cache_free(c);
	cleanup();
}

TEST(instances_filters_and_since)
{
	struct cache *c;
	struct cache_instance in = {
		.gvr = "kubeplus.io/v1/agents", .kind = "Agent", .ns = "",
		.name = "a1", .uid = "u", .rv = "5", .generation = 3,
		.created = "2025-01-01T00:00:00Z",
		.isolation = "{\"sharing\":\"mig\"}",
	};
	struct cache_instance *got;
	struct collect k = { 0 };
	uint64_t g, mark;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_instance_put(c, &in, &g) == 0 && g == g0 + 1);
	in.name = "a2";
	CHECK(cache_instance_put(c, &in, &g) == 0 && g == g0 + 2);
	in.gvr = "example.com/v1/things";
	in.ns = "t";
	in.name = "th";
	in.isolation = NULL;
	CHECK(cache_instance_put(c, &in, &g) == 0 && g == g0 + 3);
	mark = g;
	in.gvr = "kubeplus.io/v1/agents";
	in.ns = "";
	in.name = "a1";
	in.rv = "6";
	in.deleted = "2025-01-02T00:00:00Z";
	CHECK(cache_instance_put(c, &in, &g) == 0 && g == g0 + 4);

	CHECK(cache_instance_foreach(c, NULL, 0, collect_in, &k) == 0);
	CHECK_INT(k.n, 3);
	k.n = 0;
	CHECK(cache_instance_foreach(c, "kubeplus.io/v1/agents", 0,
	    collect_in, &k) == 0);
	CHECK_INT(k.n, 2);
	CHECK_STR(k.names[0], "/a1");
	CHECK_STR(k.names[1], "/a2");
	k.n = 0;
	CHECK(cache_instance_foreach(c, NULL, mark, collect_in, &k) == 0);
	CHECK_INT(k.n, 1);
	CHECK_STR(k.names[0], "/a1");

	REQUIRE(cache_instance_get(c, "kubeplus.io/v1/agents", "", "a1",
	    &got) == 0);
	CHECK_STR(got->kind, "Agent");
	CHECK_STR(got->rv, "6");
	CHECK_INT(got->generation, 3);
	CHECK_STR(got->deleted, "2025-01-02T00:00:00Z");
	CHECK(got->isolation == NULL);
	cache_instance_free(got);
	CHECK(cache_instance_delete(c, "kubeplus.io/v1/agents", "", "a1",
	    &g) == 0 && g == g0 + 5);
	CHECK(cache_instance_get(c, "kubeplus.io/v1/agents", "", "a1",
	    &got) == -ENOENT);
	cache_free(c);
	cleanup();
}

TEST(owned_filters_and_counts)
{
	struct cache *c;
	struct cache_owned o = { .uid = "u", .rv = "1", .data = "{}" };
	struct cache_counts n;
	struct collect k = { 0 };

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	REQUIRE(cache_begin(c) == 0);
	o.kind = CACHE_KIND_DEVICECLASS; o.ns = ""; o.name = "dc1";
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	o.kind = CACHE_KIND_CLAIMTEMPLATE; o.ns = "a"; o.name = "gpu";
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	o.kind = CACHE_KIND_QUOTA; o.ns = "a"; o.name = "q";
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	o.kind = CACHE_KIND_QUOTA; o.ns = "b"; o.name = "q";
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	CHECK(cache_commit(c) == 0);

	CHECK(cache_owned_foreach(c, "a", NULL, 0, collect_ow, &k) == 0);
	CHECK_INT(k.n, 2);
	CHECK_STR(k.names[0], "ResourceClaimTemplate:a/gpu");
	CHECK_STR(k.names[1], "ResourceQuota:a/q");
	k.n = 0;
	CHECK(cache_owned_foreach(c, NULL, CACHE_KIND_QUOTA, 0, collect_ow,
	    &k) == 0);
	CHECK_INT(k.n, 2);
	k.n = 0;
	CHECK(cache_owned_foreach(c, "", CACHE_KIND_DEVICECLASS, 0,
	    collect_ow, &k) == 0);
	CHECK_INT(k.n, 1);
	CHECK_STR(k.names[0], "DeviceClass:/dc1");
	k.n = 0;
	CHECK(cache_owned_foreach(c, NULL, NULL, 0, collect_ow, &k) == 0);
	CHECK_INT(k.n, 4);

	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	REQUIRE(cache_counts(c, &n) == 0);
	CHECK_INT(n.namespaces, 1);
	CHECK_INT(n.instances, 0);
	CHECK_INT(n.deviceclasses, 1);
	CHECK_INT(n.claimtemplates, 1);
	CHECK_INT(n.claims, 0);
	CHECK_INT(n.quotas, 2);
	cache_free(c);
	cleanup();
}

TEST(owned_status_only_change_is_no_change)
{
	struct cache *c;
	struct cache_owned o = { .kind = CACHE_KIND_CLAIM, .ns = "a",
	    .name = "shared", .uid = "u", .rv = "1",
	    .data = "{\"spec\":{\"x\":1}}" };
	struct cache_owned *got = NULL;
	uint64_t g = 0;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_owned_put(c, &o, &g) == 0 && g == g0 + 1);
	/* a new resourceVersion, same reduced data: nothing to publish */
	o.rv = "2";
	CHECK(cache_owned_put(c, &o, &g) == 0);
	CHECK_INT(g, 0);
	REQUIRE(cache_owned_get(c, CACHE_KIND_CLAIM, "a", "shared",
	    &got) == 0);
	CHECK_STR(got->rv, "1");
	cache_owned_free(got);
	/* the data changed: a new generation, the new resourceVersion */
	o.rv = "3";
	o.data = "{\"spec\":{\"x\":2}}";
	CHECK(cache_owned_put(c, &o, &g) == 0 && g == g0 + 2);
	/* recreated under the same name: a new uid is a change too */
	o.rv = "4";
	o.uid = "u2";
	CHECK(cache_owned_put(c, &o, &g) == 0 && g == g0 + 3);
	REQUIRE(cache_owned_get(c, CACHE_KIND_CLAIM, "a", "shared",
	    &got) == 0);
	CHECK_STR(got->rv, "4");
	cache_owned_free(got);
	cache_free(c);
	cleanup();
}

TEST(rollback_discards_batch)
{
	struct cache *c;
	struct cache_ns *ns;
	uint64_t g;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(put_ns(c, "keep", "1", false, NULL) == 0);
	REQUIRE(cache_begin(c) == 0);
	CHECK(cache_begin(c) == -EBUSY);
	CHECK(put_ns(c, "gone", "2", false, &g) == 0 && g == g0 + 2);
	CHECK(cache_ns_delete(c, "keep", &g) == 0 && g == g0 + 3);
	cache_rollback(c);
	CHECK(cache_generation(c, &g) == 0 && g == g0 + 1);
	CHECK(cache_ns_get(c, "gone", &ns) == -ENOENT);
	REQUIRE(cache_ns_get(c, "keep", &ns) == 0);
	cache_ns_free(ns);
	/* the next change reuses the discarded generation */
	CHECK(put_ns(c, "new", "3", false, &g) == 0 && g == g0 + 2);
	cache_free(c);
	cleanup();
}

/* Stop iteration at the second row. */
static int
stop_at_two(const struct cache_ns *ns, void *arg)
{
	int *n = arg;

	(void)ns;
	return ++*n == 2 ? -ECANCELED : 0;
}

/* Try to start the same iteration again from inside the callback. */
static int
nested(const struct cache_ns *ns, void *arg)
{
	struct cache *c = arg;
	int n = 0;

	(void)ns;
	return cache_ns_foreach(c, 0, stop_at_two, &n) == -EBUSY ? 0 : -EIO;
}

TEST(foreach_stop_and_nesting)
{
	struct cache *c;
	int n = 0;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	CHECK(put_ns(c, "b", "2", false, NULL) == 0);
	CHECK(put_ns(c, "c", "3", false, NULL) == 0);
	CHECK(cache_ns_foreach(c, 0, stop_at_two, &n) == -ECANCELED);
	CHECK_INT(n, 2);
	CHECK(cache_ns_foreach(c, 0, nested, c) == 0);
	/* the statement was reset: a new iteration sees all three */
	n = -10;
	CHECK(cache_ns_foreach(c, 0, stop_at_two, &n) == 0);
	CHECK_INT(n, -7);
	cache_free(c);
	cleanup();
}

TEST(reader_sees_writer_and_cannot_write)
{
	struct cache *w, *r;
	struct cache_ns *ns;
	uint64_t g;

	REQUIRE(fresh() != NULL);
	CHECK(cache_open(tpath, CACHE_OPEN_RDONLY, &r) < 0);
	REQUIRE(open_rw(&w) == 0);
	CHECK(put_ns(w, "a", "1", true, NULL) == 0);
	REQUIRE(cache_open(tpath, CACHE_OPEN_RDONLY, &r) == 0);
	REQUIRE(cache_ns_get(r, "a", &ns) == 0);
	CHECK(ns->isolated);
	CHECK_STR(ns->resolved, "{\"claimTemplateName\":\"gpu\"}");
	cache_ns_free(ns);
	CHECK(cache_generation(r, &g) == 0 && g == g0 + 1);
	CHECK(put_ns(r, "b", "1", false, NULL) == -EROFS);
	CHECK(cache_watch_set(r, "v1/namespaces", "5") == -EROFS);
	/* a snapshot: the writer's later commit is invisible until commit */
	REQUIRE(cache_begin(r) == 0);
	CHECK(cache_generation(r, &g) == 0 && g == g0 + 1);
	CHECK(put_ns(w, "b", "2", false, NULL) == 0);
	CHECK(cache_generation(r, &g) == 0 && g == g0 + 1);
	CHECK(cache_ns_get(r, "b", &ns) == -ENOENT);
	CHECK(cache_commit(r) == 0);
	CHECK(cache_generation(r, &g) == 0 && g == g0 + 2);
	REQUIRE(cache_ns_get(r, "b", &ns) == 0);
	cache_ns_free(ns);
	cache_free(r);
	cache_free(w);
	cleanup();
}

TEST(watch_state_survives_reopen)
{
	struct cache *c;
	char rv[CACHE_RV_MAX + 1], tiny[2];
	uint64_t g;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_watch_get(c, "v1/namespaces", rv, sizeof(rv)) == -ENOENT);
	CHECK(cache_watch_set(c, "v1/namespaces", "1234") == 0);
	CHECK(cache_watch_set(c, "v1/namespaces", "1240") == 0);
	CHECK(cache_watch_set(c, "x/v1/y", "7") == 0);
	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	/* watch state takes no generation */
	CHECK(cache_generation(c, &g) == 0 && g == g0 + 1);
	cache_free(c);

	REQUIRE(cache_open(tpath, 0, &c) == 0);
	CHECK(!cache_recovered(c));
	CHECK(cache_generation(c, &g) == 0 && g == g0 + 1);
	CHECK(cache_watch_get(c, "v1/namespaces", rv, sizeof(rv)) == 0);
	CHECK_STR(rv, "1240");
	CHECK(cache_watch_get(c, "v1/namespaces", tiny, sizeof(tiny)) ==
	    -ENOSPC);
	CHECK(cache_watch_set(c, "x/v1/y", "") == 0);
	CHECK(cache_watch_get(c, "x/v1/y", rv, sizeof(rv)) == -ENOENT);
	CHECK(put_ns(c, "b", "1", false, &g) == 0 && g == g0 + 2);
	cache_free(c);
	cleanup();
}

/* Write bytes to the test path, replacing it. */
static int
write_file(const char *data, size_t len)
{
	int fd = open(tpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, data, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* Count files in the test dir whose name contains s. */
static int
count_files(const char *s)
{
	char cmd[200], buf[32];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c '%s'", tdir, s);
	if ((f = popen(cmd, "r")) == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), f) != NULL)
		n = atoi(buf);
	pclose(f);
	return n;
}

TEST(corrupt_file_moved_aside)
{
	struct cache *c;
	struct cache_ns *ns;
	char junk[8192];

	REQUIRE(fresh() != NULL);
	memset(junk, 'Z', sizeof(junk));
	REQUIRE(write_file(junk, sizeof(junk)) == 0);
	CHECK(cache_open(tpath, CACHE_OPEN_RDONLY, &c) < 0);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_recovered(c));
	CHECK_INT(count_files("corrupt"), 1);
	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	REQUIRE(cache_ns_get(c, "a", &ns) == 0);
	cache_ns_free(ns);
	cache_free(c);
	cleanup();
}

TEST(damaged_pages_moved_aside)
{
	struct cache *c;
	char name[32], buf[4096];
	int i, fd;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	REQUIRE(cache_begin(c) == 0);
	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "ns-%05d", i);
		CHECK(put_ns(c, name, "1", false, NULL) == 0);
	}
	REQUIRE(cache_commit(c) == 0);
	cache_free(c);	/* checkpoints the WAL into the file */
	/* scribble over the middle of the b-tree */
	memset(buf, 0x5a, sizeof(buf));
	fd = open(tpath, O_WRONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK(pwrite(fd, buf, sizeof(buf), 8192) == (ssize_t)sizeof(buf));
	CHECK(pwrite(fd, buf, sizeof(buf), 3 * 4096) == (ssize_t)sizeof(buf));
	close(fd);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_recovered(c));
	cache_free(c);
	cleanup();
}

/* A fresh database that sqlite3 made: a foreign table, user_version v. */
static bool
foreign_db(int v)
{
	char cmd[256];

	if (fresh() == NULL)
		return false;
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA user_version=%d;"
	    " CREATE TABLE t(x);'", tpath, v);
	return system(cmd) == 0;
}

TEST(foreign_schema_moved_aside)
{
	struct cache *c;

	REQUIRE(foreign_db(77));
	CHECK(cache_open(tpath, CACHE_OPEN_RDONLY, &c) == -EPROTO);
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_recovered(c));
	CHECK_INT(count_files("corrupt"), 1);
	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	cache_free(c);
	cleanup();
}

TEST(same_version_foreign_tables_moved_aside)
{
	struct cache *c;

	REQUIRE(foreign_db(CACHE_SCHEMA_VERSION));
	REQUIRE(open_rw(&c) == 0);
	CHECK(cache_recovered(c));
	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	cache_free(c);
	cleanup();
}

/* Record each tombstone as table:kind:ns/name. */
static int
collect_tb(const struct cache_tomb *t, void *arg)
{
	struct collect *k = arg;

	if (k->n < 16)
		snprintf(k->names[k->n++], 64, "%d:%s:%s/%s", (int)t->table,
		    t->kind, t->ns, t->name);
	return 0;
}

/* The tombstones after generation since, oldest first, space-separated. */
static const char *
tombs(struct cache *c, uint64_t since)
{
	static char buf[1024];
	struct collect k = { 0 };
	size_t off = 0;

	buf[0] = '\0';
	if (cache_tomb_foreach(c, since, collect_tb, &k) != 0)
		return "(error)";
	for (int i = 0; i < k.n && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
		    i > 0 ? " " : "", k.names[i]);
	return buf;
}

TEST(tombstones_and_horizon)
{
	struct cache *c;
	struct cache_owned o = { .kind = CACHE_KIND_QUOTA, .ns = "a",
	    .name = "q", .uid = "u", .rv = "1" };
	struct cache_instance in = { .gvr = "g/v1/rs", .kind = "R",
	    .ns = "x", .name = "i" };
	uint64_t g, h, mark;

	REQUIRE(fresh() != NULL);
	REQUIRE(open_rw(&c) == 0);
	/* a fresh cache starts at the wall clock, the horizon with it */
	CHECK(g0 > 1700000000ull * 1000000);
	CHECK(cache_horizon(c, &h) == 0 && h == g0);
	CHECK(put_ns(c, "a", "1", false, NULL) == 0);
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	CHECK(cache_instance_put(c, &in, NULL) == 0);
	mark = g0 + 3;
	CHECK(cache_ns_delete(c, "a", &g) == 0 && g == g0 + 4);
	CHECK(cache_owned_delete(c, o.kind, "a", "q", &g) == 0 && g == g0 + 5);
	CHECK(cache_instance_delete(c, "g/v1/rs", "x", "i", &g) == 0 &&
	    g == g0 + 6);
	CHECK_STR(tombs(c, mark),
	    "1:Namespace:a/a 4:ResourceQuota:a/q 2:R:x/i");
	/* re-creating a deleted row removes its tombstone */
	CHECK(put_ns(c, "a", "9", false, &g) == 0 && g == g0 + 7);
	CHECK_STR(tombs(c, 0), "4:ResourceQuota:a/q 2:R:x/i");
	/* keep one tombstone: the horizon moves to the pruned one's gen */
	CHECK(cache_tomb_prune(c, 1) == 0);
	CHECK(cache_horizon(c, &h) == 0 && h == g0 + 5);
	CHECK_STR(tombs(c, 0), "2:R:x/i");
	CHECK(cache_tomb_prune(c, 5) == 0);
	CHECK(cache_horizon(c, &h) == 0 && h == g0 + 5);
	cache_free(c);
	/* a rebuilt cache starts past everything the old one handed out */
	REQUIRE(write_file("junk junk junk junk", 19) == 0);
	REQUIRE(cache_open(tpath, 0, &c) == 0);
	CHECK(cache_recovered(c));
	CHECK(cache_generation(c, &g) == 0 && g > g0 + 7);
	cache_free(c);
	cleanup();
}
