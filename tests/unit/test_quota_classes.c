/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-quota's DeviceClasses kept between reconciles
 * (kpgpud-quota/classes.c), against a real cache written the way sync
 * writes it (one transaction per batch): the class rows are read again
 * exactly when a class was created, changed or deleted by anyone since
 * the last read, when the tombstones no longer reach back to it, or from
 * another cache handle; any other change of the cache reads none. Each
 * answer equals a fresh read of every class row. Nothing is answered
 * before sync has listed the DeviceClasses.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_write.h"
#include "kpgpud-quota/quota.h"
#include "tests/unit/test.h"

#define GPU_SEL	"device.driver == 'gpu.nvidia.com'"
#define NET_SEL	"device.driver == 'net.example.com'"

/* Write DeviceClass name (sel: its CEL selector; ours: kpgpud's label). */
static void
put_class(struct cache *c, const char *name, const char *sel, bool ours)
{
	char data[256];
	struct cache_owned o = { .kind = CACHE_KIND_DEVICECLASS, .ns = "",
	    .name = name, .uid = name, .rv = "1", .data = data };

	snprintf(data, sizeof(data), "{\"labels\":{%s},\"spec\":{\"selectors\":"
	    "[{\"cel\":{\"expression\":\"%s\"}}]}}", ours ?
	    "\"" PLAN_MANAGED_BY_KEY "\":\"" PLAN_MANAGED_BY "\"" : "", sel);
	CHECK(cache_begin(c) == 0);
	CHECK(cache_owned_put(c, &o, NULL) == 0);
	CHECK(cache_commit(c) == 0);
}

/* Delete DeviceClass name. */
static void
del_class(struct cache *c, const char *name)
{
	CHECK(cache_begin(c) == 0);
	CHECK(cache_owned_delete(c, CACHE_KIND_DEVICECLASS, "", name,
	    NULL) == 0);
	CHECK(cache_commit(c) == 0);
}

/* A change of something else: Namespace name. */
static void
put_other(struct cache *c, const char *name)
{
	struct cache_ns ns = { .name = name, .uid = name, .rv = "1",
	    .phase = "Active", .labels = "{}", .annotations = "{}" };

	CHECK(cache_begin(c) == 0);
	CHECK(cache_ns_put(c, &ns, NULL) == 0);
	CHECK(cache_commit(c) == 0);
}

/* s as one line: "gpu a,b | non c | ours d". */
static void
render(const struct quotad_classes *s, char *buf, size_t len)
{
	size_t n;

	n = (size_t)snprintf(buf, len, "gpu");
	for (int i = 0; i < s->ngpu && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : " ",
		    s->gpu[i]);
	if (n < len)
		n += (size_t)snprintf(buf + n, len - n, " | non %s | ours",
		    s->non_gpu ? s->non_gpu : "(null)");
	for (int i = 0; i < s->nours && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : " ",
		    s->ours[i]);
}

/*
 * Get the classes through s; CHECK that reads moved by want_reads and
 * that the answer is what a fresh index reads, and is want.
 */
static void
expect(struct quotad_classes *s, struct cache *rd, uint64_t want_reads,
    const char *want)
{
	struct quotad_classes fresh;
	char got[512], exp[512];
	uint64_t before = s->reads;

	memset(&fresh, 0, sizeof(fresh));
	CHECK(quotad_classes_get(s, rd, NULL) == 0);
	CHECK_CASE(s->reads - before == want_reads, want);
	CHECK(quotad_classes_get(&fresh, rd, NULL) == 0);
	render(s, got, sizeof(got));
	render(&fresh, exp, sizeof(exp));
	CHECK_CASE(strcmp(got, exp) == 0, got);
	CHECK_CASE(strcmp(got, want) == 0, got);
	quotad_classes_free(&fresh);
}

TEST(classes_read_again_exactly_when_a_class_changed)
{
	struct quotad_classes s;
	struct cache *c, *rd = NULL;

	memset(&s, 0, sizeof(s));
	REQUIRE((c = test_cache_new(&rd)) != NULL);

	/* not listed by sync yet: nothing, wait */
	put_class(c, "b-gpu", GPU_SEL, false);
	CHECK(quotad_classes_get(&s, rd, NULL) == -EAGAIN);
	CHECK(s.reads == 0);
	CHECK(cache_watch_set(c, CACHE_WATCH_DEVICECLASSES, "5") == 0);

	/* the first call reads them, the next reads none */
	put_class(c, "kpgpud-mig", GPU_SEL, true);
	put_class(c, "net", NET_SEL, false);
	expect(&s, rd, 1, "gpu b-gpu,kpgpud-mig | non net | ours kpgpud-mig");
	expect(&s, rd, 0, "gpu b-gpu,kpgpud-mig | non net | ours kpgpud-mig");

	/* other rows changing: the classes are not read again */
	put_other(c, "t1");
	expect(&s, rd, 0, "gpu b-gpu,kpgpud-mig | non net | ours kpgpud-mig");
	put_other(c, "t2");
	put_other(c, "t3");
	expect(&s, rd, 0, "gpu b-gpu,kpgpud-mig | non net | ours kpgpud-mig");

	/* someone else creates a class; then changes one; deletes one */
	put_class(c, "a-gpu", GPU_SEL, false);
	expect(&s, rd, 1,
	    "gpu a-gpu,b-gpu,kpgpud-mig | non net | ours kpgpud-mig");
	put_other(c, "t4");
	put_class(c, "b-gpu", NET_SEL, false);
	put_other(c, "t5");
	expect(&s, rd, 1, "gpu a-gpu,kpgpud-mig | non b-gpu net | ours "
	    "kpgpud-mig");
	put_class(c, "kpgpud-mig", GPU_SEL, false);
	expect(&s, rd, 1, "gpu a-gpu,kpgpud-mig | non b-gpu net | ours");
	del_class(c, "a-gpu");
	put_other(c, "t6");
	expect(&s, rd, 1, "gpu kpgpud-mig | non b-gpu net | ours");
	expect(&s, rd, 0, "gpu kpgpud-mig | non b-gpu net | ours");

	/* tombstones that no longer reach back: read again */
	CHECK(cache_begin(c) == 0);
	CHECK(cache_ns_delete(c, "t1", NULL) == 0);
	CHECK(cache_commit(c) == 0);
	CHECK(cache_tomb_prune(c, 0) == 0);
	expect(&s, rd, 1, "gpu kpgpud-mig | non b-gpu net | ours");
	expect(&s, rd, 0, "gpu kpgpud-mig | non b-gpu net | ours");

	/* a deletion whose tombstone was pruned is still seen */
	del_class(c, "net");
	CHECK(cache_tomb_prune(c, 0) == 0);
	expect(&s, rd, 1, "gpu kpgpud-mig | non b-gpu | ours");

	/* another handle (a reopened cache): read again */
	expect(&s, c, 1, "gpu kpgpud-mig | non b-gpu | ours");

	quotad_classes_free(&s);
	CHECK(s.ngpu == 0 && s.gpu == NULL && s.gen == 0);
	test_cache_remove(c, rd);
}
