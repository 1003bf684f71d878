/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The usage ledger: the pure interval logic of kpgpud-sync/ledger.c (time
 * parsing, MIG shares and profiles, claim and pod reduction, the decision
 * an observation makes, with duplicates, reorders, gaps and clock steps,
 * refinements, window overlap) and the store in cache/usage.c
 * (idempotent adds, closing, queries by tenant/claim/pod/device, rollup
 * keeping totals, the closed-interval count behind loss detection, no
 * end written before its start, rows an older sync wrote so), and
 * the tenant counters kpgpud-sync keeps from it (acct_totals.c).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache_sql.h"
#include "cache/cache_write.h"
#include "cache/usage.h"
#include "kpgpud-sync/acct_totals.h"
#include "kpgpud-sync/ledger.h"
#include "tests/unit/test.h"

#define S 1000000ull	/* one second in microseconds */

TEST(ledger_parse_time)
{
	uint64_t t = 0;

	CHECK_INT(ledger_parse_time("1970-01-01T00:00:01Z", &t), 0);
	CHECK_INT(t, S);
	CHECK_INT(ledger_parse_time("2026-12-01T16:51:35.584134Z", &t), 0);
	CHECK_INT(t % S, 584134);
	CHECK_INT(ledger_parse_time("2026-12-01T17:51:35+01:00", &t), 0);
	CHECK_INT(t / S, 1796143895);
	CHECK_INT(ledger_parse_time("2026-12-01 16:51:35Z", &t), -EINVAL);
	CHECK_INT(ledger_parse_time("2026-13-01T16:51:35Z", &t), -EINVAL);
	CHECK_INT(ledger_parse_time("2026-12-01T16:51:35", &t), -EINVAL);
	CHECK_INT(ledger_parse_time("2026-12-01T16:51:35Zjunk", &t), -EINVAL);
	CHECK_INT(ledger_parse_time(NULL, &t), -EINVAL);
}

TEST(ledger_profile_share)
{
	double d = 0;

	CHECK_INT(ledger_profile_share("", &d), 0);
	CHECK(d == 1.0);
	CHECK_INT(ledger_profile_share("1g.10gb", &d), 0);
	CHECK(d > 0.1428 && d < 0.1429);
	CHECK_INT(ledger_profile_share("3g.40gb", &d), 0);
	CHECK(d > 0.428 && d < 0.429);
	CHECK_INT(ledger_profile_share("7g.80gb", &d), 0);
	CHECK(d == 1.0);
	CHECK_INT(ledger_profile_share("1g.10gb+me", &d), 0);
	CHECK(d > 0.1428 && d < 0.1429);
	/* A30: four compute slices */
	CHECK_INT(ledger_profile_share("1g.6gb", &d), 0);
	CHECK(d == 0.25);
	CHECK_INT(ledger_profile_share("2g.12gb", &d), 0);
	CHECK(d == 0.5);
	CHECK_INT(ledger_profile_share("8g.90gb", &d), -EINVAL);
	CHECK_INT(ledger_profile_share("big", &d), -EINVAL);
}

TEST(ledger_profile_of)
{
	char p[LEDGER_PROFILE_MAX + 1];

	ledger_profile_of("device.attributes['gpu.nvidia.com'].type == 'mig' "
	    "&& device.attributes['gpu.nvidia.com'].profile == '2g.20gb'",
	    "gpu-0-mig-1g10gb-19-0", p);
	CHECK_STR(p, "2g.20gb");
	ledger_profile_of(NULL, "gpu-0-mig-1g10gb-19-0", p);
	CHECK_STR(p, "1g.10gb");
	ledger_profile_of("", "gpu-3-mig-3g40gb-9-4", p);
	CHECK_STR(p, "3g.40gb");
	ledger_profile_of(NULL, "gpu-0", p);
	CHECK_STR(p, "");
	ledger_profile_of(NULL, "gpu-0-mig-19-0-1", p);	/* v25.8 names */
	CHECK_STR(p, "");
}

static const char claim_json[] =
    "{\"metadata\":{\"namespace\":\"ta\",\"name\":\"c1\",\"uid\":\"u1\"},"
    "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":"
    "{\"deviceClassName\":\"kpgpud-mig\"}},{\"name\":\"alt\","
    "\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"gpu.nvidia.com\"}]}]}},"
    "\"status\":{\"allocation\":{\"devices\":{\"results\":["
    "{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"n1\","
    "\"device\":\"gpu-0-mig-1g10gb-19-0\"},"
    "{\"request\":\"alt/big\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"n1\","
    "\"device\":\"gpu-1\"}]}},"
    "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p1\",\"uid\":\"pu1\"},"
    "{\"resource\":\"other\",\"name\":\"x\",\"uid\":\"x\"}]}}";

TEST(ledger_claim_from_json)
{
	json_t *o = json_loads(claim_json, 0, NULL);
	struct ledger_claim *c = malloc(sizeof(*c));
	char sig[LEDGER_SIG_MAX], sig2[LEDGER_SIG_MAX];
	const struct ledger_device *t;

	REQUIRE(o != NULL && c != NULL);
	CHECK_INT(ledger_claim_from_json(o, c, NULL), 0);
	CHECK(c->allocated);
	CHECK_INT(c->ndevices, 2);
	CHECK_STR(c->dev[0].device_class, "kpgpud-mig");
	CHECK_STR(c->dev[0].profile, "1g.10gb");
	CHECK_STR(c->dev[1].device_class, "gpu.nvidia.com");
	CHECK_STR(c->dev[1].profile, "");
	CHECK_INT(c->nconsumers, 1);
	CHECK_STR(c->consumers[0].uid, "pu1");
	CHECK_INT(ledger_signature(c, sig, sizeof(sig)), 0);
	CHECK_STR(sig, "gpu.nvidia.com/n1/gpu-0-mig-1g10gb-19-0,"
	    "gpu.nvidia.com/n1/gpu-1,");
	/* the signature does not depend on the order of results */
	t = &c->dev[0];
	{
		struct ledger_device tmp = *t;
		c->dev[0] = c->dev[1];
		c->dev[1] = tmp;
	}
	CHECK_INT(ledger_signature(c, sig2, sizeof(sig2)), 0);
	CHECK_STR(sig, sig2);
	CHECK_INT(ledger_signature(c, sig2, 10), -ENAMETOOLONG);
	/* unallocated */
	json_object_del(json_object_get(o, "status"), "allocation");
	CHECK_INT(ledger_claim_from_json(o, c, NULL), 0);
	CHECK(!c->allocated);
	CHECK_INT(c->ndevices, 0);
	json_decref(o);
	/* caps and bad metadata */
	o = json_loads("{\"metadata\":{\"namespace\":\"ta\",\"name\":\"c\"}}", 0,
	    NULL);
	CHECK_INT(ledger_claim_from_json(o, c, NULL), -EINVAL);
	json_decref(o);
	o = json_loads("{\"metadata\":{\"namespace\":\"ta\",\"name\":\"c\","
	    "\"uid\":\"u\"},\"status\":{\"allocation\":{\"devices\":"
	    "{\"results\":[]}}}}", 0, NULL);
	for (int i = 0; i < 33; i++)
		json_array_append_new(json_object_get(json_object_get(
		    json_object_get(json_object_get(o, "status"), "allocation"),
		    "devices"), "results"), json_pack("{s:s,s:s,s:s,s:s}",
		    "request", "r", "driver", "d", "pool", "p", "device", "x"));
	CHECK_INT(ledger_claim_from_json(o, c, NULL), -EINVAL);
	json_decref(o);
	free(c);
}

TEST(ledger_pod_from_json)
{
	json_t *o = json_loads("{\"metadata\":{\"namespace\":\"ta\",\"name\":"
	    "\"p\",\"uid\":\"pu\"},\"spec\":{\"resourceClaims\":[{\"name\":"
	    "\"g\",\"resourceClaimTemplateName\":\"t\"}]},\"status\":{"
	    "\"phase\":\"Failed\",\"startTime\":\"1970-01-01T00:00:10Z\","
	    "\"containerStatuses\":[{\"state\":{\"terminated\":{\"finishedAt\":"
	    "\"1970-01-01T00:00:20Z\"}}},{\"state\":{\"terminated\":{"
	    "\"finishedAt\":\"1970-01-01T00:00:25Z\"}}}]}}", 0, NULL);
	struct ledger_pod p;
	bool uses = false;

	REQUIRE(o != NULL);
	CHECK_INT(ledger_pod_from_json(o, &p, &uses, NULL), 0);
	CHECK(uses);
	CHECK_INT(p.start_us, 10 * S);
	CHECK_INT(p.finish_us, 25 * S);	/* the last container */
	/* a running pod has no finish even with a terminated container */
	json_object_set_new(json_object_get(o, "status"), "phase",
	    json_string("Running"));
	CHECK_INT(ledger_pod_from_json(o, &p, &uses, NULL), 0);
	CHECK_INT(p.finish_us, 0);
	json_object_del(o, "spec");
	CHECK_INT(ledger_pod_from_json(o, &p, &uses, NULL), 0);
	CHECK(!uses);
	json_decref(o);
}

TEST(ledger_pod_gap)
{
	json_t *o = json_loads("{\"spec\":{\"resourceClaims\":["
	    "{\"name\":\"g\",\"resourceClaimTemplateName\":\"t\"},"
	    "{\"name\":\"s\",\"resourceClaimName\":\"shared\"},"
	    "{\"name\":\"h\",\"resourceClaimTemplateName\":\"t2\"}]},"
	    "\"status\":{\"resourceClaimStatuses\":[{\"name\":\"g\","
	    "\"resourceClaimName\":\"p-g-abcde\"}]}}", 0, NULL);
	struct ledger_pod_claim pc[4];
	struct ledger_pod p = { .start_us = 160 * S, .finish_us = 170 * S };

	REQUIRE(o != NULL);
	/* only template claims whose generated name is recorded */
	CHECK_INT(ledger_pod_claims(o, pc, 4), 1);
	CHECK_STR(pc[0].template_name, "t");
	CHECK_STR(pc[0].claim, "p-g-abcde");
	CHECK_INT(ledger_pod_claims(o, pc, 0), 0);
	json_decref(o);
	/* ran between the last heartbeat (150 s) and this start (200 s) */
	CHECK(ledger_pod_in_gap(&p, 150 * S, 200 * S));
	CHECK(!ledger_pod_in_gap(&p, 165 * S, 200 * S));	/* began before */
	CHECK(!ledger_pod_in_gap(&p, 150 * S, 168 * S));	/* ended after */
	CHECK(!ledger_pod_in_gap(&p, 0, 200 * S));	/* no earlier run */
	p.finish_us = 0;
	CHECK(!ledger_pod_in_gap(&p, 150 * S, 200 * S));	/* still runs */
}

/* Allocated while sync was down: nothing open, heartbeat 150 s, pod 160 s. */
static void
obs_down(struct ledger_obs *o)
{
	memset(o, 0, sizeof(*o));
	o->allocated = true;
	o->sig = "A";
	o->now_us = 200 * S;
	o->alive_us = 150 * S;
	o->pods_start_us = 160 * S;
}

/* A base observation: sig A stored open from 100 s, now 200 s. */
static void
obs(struct ledger_obs *o)
{
	obs_down(o);
	o->pods_start_us = 0;
	o->have_open = true;
	o->open_sig = "A";
	o->open_start_us = 100 * S;
	o->live = true;
}

/*
 * Decide o: the action is act (LEDGER_OPEN or LEDGER_CLOSE) and the
 * interval opens or closes at us, known as how.
 */
static void
decides(const struct ledger_obs *o, enum ledger_act act, uint64_t us,
    enum ledger_how how)
{
	struct ledger_decision d;
	bool open = act == LEDGER_OPEN;

	ledger_decide(o, &d);
	CHECK_INT(d.act, act);
	CHECK_INT(open ? d.open_us : d.close_us, us);
	CHECK_INT(open ? d.open_how : d.close_how, how);
}

TEST(ledger_decide_live)
{
	struct ledger_obs o;
	struct ledger_decision d;

	obs(&o);			/* a duplicate: same allocation */
	ledger_decide(&o, &d);
	CHECK_INT(d.act, LEDGER_KEEP);
	o.allocated = false;		/* deallocated, seen live */
	decides(&o, LEDGER_CLOSE, 200 * S, LEDGER_OBSERVED);
	o.have_open = false;		/* a late duplicate of the close */
	ledger_decide(&o, &d);
	CHECK_INT(d.act, LEDGER_IGNORE);
	o.allocated = true;		/* newly allocated */
	decides(&o, LEDGER_OPEN, 200 * S, LEDGER_OBSERVED);
	obs(&o);			/* other devices: a new interval */
	o.sig = "B";
	ledger_decide(&o, &d);
	CHECK_INT(d.act, LEDGER_REOPEN);
	CHECK_INT(d.close_us, 200 * S);
	CHECK_INT(d.open_us, 200 * S);
}

TEST(ledger_decide_gap)
{
	struct ledger_obs o;
	struct ledger_decision d;

	/* gone while sync was down; consumers finished at 170 s */
	obs(&o);
	o.live = false;
	o.allocated = false;
	o.pods_finish_us = 170 * S;
	decides(&o, LEDGER_CLOSE, 170 * S, LEDGER_RECONSTRUCTED);
	/* a finish before the last moment it was seen open says nothing */
	o.pods_finish_us = 120 * S;
	decides(&o, LEDGER_CLOSE, 150 * S, LEDGER_BOUNDED);
	/* no consumer finish known: bounded by the last heartbeat */
	o.pods_finish_us = 0;
	decides(&o, LEDGER_CLOSE, 150 * S, LEDGER_BOUNDED);
	/* allocated while down: the consumer's start */
	obs_down(&o);
	decides(&o, LEDGER_OPEN, 160 * S, LEDGER_RECONSTRUCTED);
	/* a consumer that started before the gap: bounded at the relist */
	o.pods_start_us = 140 * S;
	decides(&o, LEDGER_OPEN, 200 * S, LEDGER_BOUNDED);
	/* reallocated while down: bounded close and open, no overlap */
	obs(&o);
	o.live = false;
	o.sig = "B";
	ledger_decide(&o, &d);
	CHECK_INT(d.act, LEDGER_REOPEN);
	CHECK(d.open_us >= d.close_us);
}

TEST(ledger_decide_overlap_and_clock)
{
	struct ledger_obs o;
	struct ledger_decision d;

	/* never start before an earlier interval on the devices ended */
	obs_down(&o);
	o.prev_end_us = 180 * S;
	ledger_decide(&o, &d);
	CHECK_INT(d.open_us, 200 * S);
	/* live start behind a clock step back is clamped too */
	o.live = true;
	o.now_us = 170 * S;
	ledger_decide(&o, &d);
	CHECK_INT(d.open_us, 180 * S);
	/* a close behind a clock step back: zero length, never negative */
	obs(&o);
	o.allocated = false;
	o.now_us = 90 * S;
	ledger_decide(&o, &d);
	CHECK_INT(d.act, LEDGER_CLOSE);
	CHECK_INT(d.close_us, 100 * S);
	CHECK_INT(d.close_hi_us, 100 * S);
	/* and a bounded one with a heartbeat before the start */
	obs(&o);
	o.live = false;
	o.allocated = false;
	o.alive_us = 50 * S;
	ledger_decide(&o, &d);
	CHECK_INT(d.close_us, 100 * S);
	CHECK_INT(d.close_hi_us, 200 * S);	/* the latest it can be: now */
	/*
	 * a bounded close behind a clock step back (now before the start):
	 * its latest end is the end, never before it (the ledger refuses a
	 * latest end before the end)
	 */
	o.now_us = 90 * S;
	ledger_decide(&o, &d);
	CHECK_INT(d.act, LEDGER_CLOSE);
	CHECK_INT(d.close_us, 100 * S);
	CHECK_INT(d.close_hi_us, 100 * S);
	CHECK(usage_close_refused(o.open_start_us, d.close_us,
	    d.close_hi_us) == NULL);
	/* ...and a heartbeat after now */
	o.alive_us = 120 * S;
	o.now_us = 110 * S;
	ledger_decide(&o, &d);
	CHECK_INT(d.close_us, 120 * S);
	CHECK_INT(d.close_hi_us, 120 * S);
	/* an observed close is known exactly */
	obs(&o);
	o.allocated = false;
	ledger_decide(&o, &d);
	CHECK_INT(d.close_hi_us, d.close_us);
}

TEST(ledger_refine)
{
	uint64_t v = 0;

	/* a consumer's finish after the bounded end moves it */
	CHECK(ledger_refine_end(100 * S, 150 * S, LEDGER_BOUNDED, 200 * S,
	    170 * S, &v));
	CHECK_INT(v, 170 * S);
	/* ...but not past the relist, not before, not an observed end */
	CHECK(!ledger_refine_end(100 * S, 150 * S, LEDGER_BOUNDED, 200 * S,
	    210 * S, &v));
	CHECK(!ledger_refine_end(100 * S, 150 * S, LEDGER_BOUNDED, 200 * S,
	    140 * S, &v));
	CHECK(!ledger_refine_end(100 * S, 150 * S, LEDGER_OBSERVED, 200 * S,
	    170 * S, &v));
	/* reordered facts: the latest consumer finish wins, once */
	CHECK(ledger_refine_end(100 * S, 170 * S, LEDGER_RECONSTRUCTED,
	    200 * S, 180 * S, &v));
	CHECK(!ledger_refine_end(100 * S, 180 * S, LEDGER_RECONSTRUCTED,
	    200 * S, 175 * S, &v));
	CHECK(!ledger_refine_end(100 * S, 180 * S, LEDGER_RECONSTRUCTED,
	    200 * S, 180 * S, &v));
	/* a bounded start moves back to a consumer's start inside the gap */
	CHECK(ledger_refine_start(200 * S, LEDGER_BOUNDED, 150 * S, 160 * S,
	    &v));
	CHECK_INT(v, 160 * S);
	CHECK(!ledger_refine_start(200 * S, LEDGER_BOUNDED, 150 * S, 140 * S,
	    &v));
	CHECK(!ledger_refine_start(200 * S, LEDGER_OBSERVED, 150 * S, 160 * S,
	    &v));
	CHECK(!ledger_refine_start(200 * S, LEDGER_BOUNDED, 150 * S, 0, &v));
}

TEST(ledger_overlap)
{
	CHECK_INT(ledger_overlap_us(10, 20, 100, 0, 1000), 10);
	CHECK_INT(ledger_overlap_us(10, 20, 100, 15, 1000), 5);
	CHECK_INT(ledger_overlap_us(10, 20, 100, 0, 12), 2);
	CHECK_INT(ledger_overlap_us(10, 20, 100, 30, 40), 0);
	CHECK_INT(ledger_overlap_us(10, 0, 100, 0, 1000), 90);	/* open */
	CHECK_INT(ledger_overlap_us(20, 10, 100, 0, 1000), 0);	/* reversed */
}

/* ---- the store ---- */

static char udir[64], upath[128];

/* A writer cache and a store in a fresh directory. */
static int
ustore(struct cache **c, struct usage_store **s)
{
	snprintf(udir, sizeof(udir), "/tmp/kpgpud-usage.XXXXXX");
	if (mkdtemp(udir) == NULL)
		return -errno;
	snprintf(upath, sizeof(upath), "%s/cache.db", udir);
	if (cache_open(upath, 0, c) < 0)
		return -EIO;
	return usage_store_open(*c, s);
}

static void
uclean(struct cache *c, struct usage_store *s)
{
	char cmd[160];

	usage_store_free(s);
	cache_free(c);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", udir);
	if (system(cmd) != 0)
		test_fail(__FILE__, __LINE__, "rm failed");
}

/* Add a one-device interval. */
static int
add(struct usage_store *s, const char *uid, const char *claim,
    const char *dev, const char *profile, double share, uint64_t start)
{
	struct usage_row r = {
		.claim_uid = uid, .start_us = start, .dev = 0, .ns = "ta",
		.instance = "Agent/a", .claim = claim, .driver = "gpu.nvidia.com",
		.pool = "n1", .device = dev, .device_class = "kpgpud-mig",
		.profile = profile, .share = share, .sig = dev,
		.start_how = LEDGER_OBSERVED, .lo_us = start,
	};

	return usage_row_add(s, &r);
}

/* Add a one-device interval and close it at end. */
static int
add_closed(struct usage_store *s, const char *uid, const char *claim,
    const char *profile, double share, uint64_t start, uint64_t end)
{
	int r;

	if ((r = add(s, uid, claim, claim, profile, share, start)) < 0)
		return r;
	return usage_close(s, uid, start, end, 0, end);
}

/*
 * Add a one-device interval ending at end, before its start, stored past
 * usage_close's check: the rows an older kpgpud-sync wrote before the
 * store refused an end before a start.
 */
static int
add_backwards(struct cache *c, struct usage_store *s, const char *uid,
    const char *profile, double share, uint64_t start, uint64_t end)
{
	char sql[160];
	int r;

	if ((r = add_closed(s, uid, uid, profile, share, start, start)) < 0)
		return r;
	snprintf(sql, sizeof(sql), "UPDATE usage_intervals SET end_us = %llu"
	    " WHERE claim_uid = '%s'", (unsigned long long)end, uid);
	return sqlite3_exec(cache_handle(c), sql, NULL, NULL, NULL) ==
	    SQLITE_OK ? 0 : -EIO;
}

struct sums {
	int		 n;
	char		 key[8][64];
	uint64_t	 us[8];
	double		 gpu[8];
	uint64_t	 open[8];
};

static int
collect(const struct usage_sum *u, void *arg)
{
	struct sums *x = arg;

	if (x->n < 8) {
		snprintf(x->key[x->n], sizeof(x->key[0]), "%s", u->key);
		x->us[x->n] = u->device_us;
		x->gpu[x->n] = u->gpu_us;
		x->open[x->n] = u->open;
		x->n++;
	}
	return 0;
}

TEST(usage_store_intervals)
{
	struct cache *c = NULL;
	struct usage_store *s = NULL;
	struct sums x;
	uint64_t st = 0, n = 0, h = 0;
	char sig[64];

	REQUIRE(ustore(&c, &s) == 0);
	REQUIRE(cache_begin(c) == 0);
	CHECK_INT(add(s, "u1", "c1", "d1", "1g.10gb", 1.0 / 7, 10 * S), 0);
	CHECK_INT(add(s, "u1", "c1", "d1", "1g.10gb", 1.0 / 7, 10 * S), 0);
	CHECK_INT(usage_consumer_add(s, "u1", 10 * S, "pu1", "p1"), 0);
	CHECK_INT(usage_consumer_add(s, "u1", 10 * S, "pu1", "p1"), 0);
	CHECK_INT(usage_open_get(s, "u1", &st, sig, sizeof(sig)), 0);
	CHECK_INT(st, 10 * S);
	CHECK_STR(sig, "d1");
	CHECK_INT(usage_close(s, "u1", 10 * S, 24 * S, LEDGER_OBSERVED,
	    24 * S), 0);
	/* closing twice changes nothing and counts once */
	CHECK_INT(usage_close(s, "u1", 10 * S, 30 * S, LEDGER_OBSERVED,
	    30 * S), 0);
	CHECK_INT(usage_open_get(s, "u1", &st, sig, sizeof(sig)), -ENOENT);
	CHECK_INT(add(s, "u2", "c2", "d2", "", 1.0, 20 * S), 0);
	CHECK_INT(usage_prev_end(s, "gpu.nvidia.com", "n1", "d1", &st), 0);
	CHECK_INT(st, 24 * S);
	CHECK_INT(cache_commit(c), 0);
	CHECK_INT(usage_closed_get(s, &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(usage_counts(s, &n, &h), 0);
	CHECK_INT(n, 2);	/* the duplicate add added nothing */
	memset(&x, 0, sizeof(x));
	CHECK_INT(usage_query(s, USAGE_BY_CLAIM, 0, 1000 * S, 30 * S,
	    collect, &x), 0);
	REQUIRE(x.n == 2);
	CHECK_STR(x.key[0], "c1");
	CHECK_INT(x.us[0], 14 * S);
	CHECK(x.gpu[0] > 1.99 * S && x.gpu[0] < 2.01 * S);
	CHECK_STR(x.key[1], "c2");
	CHECK_INT(x.us[1], 10 * S);	/* open: counted up to now */
	CHECK_INT(x.open[1], 1);
	/* a window cuts intervals */
	memset(&x, 0, sizeof(x));
	CHECK_INT(usage_query(s, USAGE_BY_TENANT, 15 * S, 22 * S, 30 * S,
	    collect, &x), 0);
	REQUIRE(x.n == 2);	/* one row per profile */
	CHECK_INT(x.us[0], 2 * S);	/* whole GPU, profile "" */
	CHECK_INT(x.us[1], 7 * S);
	/* by pod: the pod's own run inside the interval */
	CHECK_INT(usage_pod_set(s, "pu1", 12 * S, 20 * S), 0);
	memset(&x, 0, sizeof(x));
	CHECK_INT(usage_query(s, USAGE_BY_POD, 0, 1000 * S, 30 * S, collect,
	    &x), 0);
	REQUIRE(x.n == 1);
	CHECK_STR(x.key[0], "p1");
	CHECK_INT(x.us[0], 8 * S);
	CHECK_INT(usage_query(s, USAGE_BY_TENANT, 5, 5, 6, collect, &x),
	    -EINVAL);
	uclean(c, s);
}

/* The claim's (by USAGE_BY_CLAIM) and the pod's seconds over all time. */
static void
claim_pod_us(struct usage_store *s, uint64_t now, uint64_t *ret_claim,
    uint64_t *ret_pod)
{
	struct sums x;

	memset(&x, 0, sizeof(x));
	CHECK_INT(usage_query(s, USAGE_BY_CLAIM, 0, 1000 * S, now, collect,
	    &x), 0);
	*ret_claim = x.n == 1 ? x.us[0] : ~0ull;
	memset(&x, 0, sizeof(x));
	CHECK_INT(usage_query(s, USAGE_BY_POD, 0, 1000 * S, now, collect,
	    &x), 0);
	*ret_pod = x.n == 1 ? x.us[0] : ~0ull;
}

/*
 * The store holds its own invariant: a close or a moved end before the
 * start, a close whose latest end (hi_us) lies before its end, or a
 * start moved past the end, is refused with -EINVAL and
 * writes nothing (the interval stays open, not counted as closed; the end,
 * start and consumers' key stay); an end equal to the start is allowed
 * (no length), and so are moves that keep the order.
 */
TEST(usage_store_refuses_backwards)
{
	struct cache *c = NULL;
	struct usage_store *s = NULL;
	uint64_t st = 0, n = 0, cl = 0, pod = 0;
	char sig[64];

	REQUIRE(ustore(&c, &s) == 0);
	REQUIRE(cache_begin(c) == 0);
	CHECK_INT(add(s, "u1", "c1", "d1", "", 1.0, 100 * S), 0);
	CHECK_INT(usage_consumer_add(s, "u1", 100 * S, "pu1", "p1"), 0);
	CHECK_INT(usage_close(s, "u1", 100 * S, 99 * S, LEDGER_OBSERVED,
	    99 * S), -EINVAL);
	CHECK_INT(usage_close(s, "u1", 100 * S, 0, LEDGER_BOUNDED, 0),
	    -EINVAL);
	/* a latest end before the end, or before the start, likewise */
	CHECK_INT(usage_close(s, "u1", 100 * S, 120 * S, LEDGER_BOUNDED,
	    119 * S), -EINVAL);
	CHECK_INT(usage_close(s, "u1", 100 * S, 100 * S, LEDGER_BOUNDED,
	    99 * S), -EINVAL);
	CHECK_INT(usage_close(s, "u1", 100 * S, 100 * S, LEDGER_BOUNDED, 0),
	    -EINVAL);
	CHECK_STR(usage_close_refused(100 * S, 99 * S, 99 * S),
	    "end before start");
	CHECK_STR(usage_close_refused(100 * S, 120 * S, 119 * S),
	    "latest end before end");
	CHECK(usage_close_refused(100 * S, 100 * S, 100 * S) == NULL);
	CHECK(usage_close_refused(100 * S, 120 * S, 130 * S) == NULL);
	CHECK_INT(usage_open_get(s, "u1", &st, sig, sizeof(sig)), 0);
	CHECK_INT(st, 100 * S);
	CHECK_INT(usage_closed_get(s, &n), 0);
	CHECK_INT(n, 0);
	claim_pod_us(s, 130 * S, &cl, &pod);
	CHECK_INT(cl, 30 * S);		/* still open: counted up to now */
	CHECK_INT(pod, 30 * S);
	/* an open interval's start may move later than any end */
	CHECK_INT(usage_set_start(s, "u1", 100 * S, 110 * S, 1), 0);
	CHECK_INT(usage_set_start(s, "u1", 110 * S, 100 * S, 1), 0);
	CHECK_INT(usage_close(s, "u1", 100 * S, 160 * S, LEDGER_OBSERVED,
	    160 * S), 0);
	CHECK_INT(usage_closed_get(s, &n), 0);
	CHECK_INT(n, 1);
	/* refused moves of a closed interval leave it as it was */
	CHECK_INT(usage_set_end(s, "u1", 100 * S, 99 * S, 1), -EINVAL);
	CHECK_INT(usage_set_start(s, "u1", 100 * S, 161 * S, 1), -EINVAL);
	claim_pod_us(s, 200 * S, &cl, &pod);
	CHECK_INT(cl, 60 * S);
	CHECK_INT(pod, 60 * S);		/* the consumer kept its key */
	/* the same moves in order are made */
	CHECK_INT(usage_set_end(s, "u1", 100 * S, 100 * S, 1), 0);
	claim_pod_us(s, 200 * S, &cl, &pod);
	CHECK_INT(cl, 0);
	CHECK_INT(usage_set_end(s, "u1", 100 * S, 150 * S, 1), 0);
	CHECK_INT(usage_set_start(s, "u1", 100 * S, 150 * S, 1), 0);
	CHECK_INT(usage_set_start(s, "u1", 150 * S, 120 * S, 1), 0);
	claim_pod_us(s, 200 * S, &cl, &pod);
	CHECK_INT(cl, 30 * S);
	CHECK_INT(pod, 30 * S);
	/* an interval that is not there: nothing to move, as before */
	CHECK_INT(usage_set_start(s, "nope", 100 * S, 200 * S, 1), 0);
	CHECK_INT(cache_commit(c), 0);
	uclean(c, s);
}

/*
 * Roll up the intervals closed before cutoff and check the tenant's rows
 * over all time at now are the same before and after (one per class and
 * profile, keys tenant rows); want: intervals rolled up, left, hours.
 */
static void
rollup_keeps(struct usage_store *s, uint64_t cutoff, uint64_t now,
    const uint64_t want[3], int keys, struct sums *after)
{
	struct sums before;
	uint64_t rows = 0, n = 0, h = 0;

	memset(&before, 0, sizeof(before));
	memset(after, 0, sizeof(*after));
	CHECK_INT(usage_query(s, USAGE_BY_TENANT, 0, 10 * USAGE_HOUR_US, now,
	    collect, &before), 0);
	CHECK_INT(usage_rollup(s, cutoff, 0, &rows), 0);
	CHECK_INT(rows, want[0]);
	CHECK_INT(usage_counts(s, &n, &h), 0);
	CHECK_INT(n, want[1]);
	CHECK_INT(h, want[2]);
	CHECK_INT(usage_query(s, USAGE_BY_TENANT, 0, 10 * USAGE_HOUR_US, now,
	    collect, after), 0);
	CHECK_INT(before.n, keys);
	CHECK_INT(after->n, keys);
	for (int i = 0; i < before.n && i < after->n; i++) {
		CHECK_INT(before.us[i], after->us[i]);
		CHECK(before.gpu[i] - after->gpu[i] < 1 &&
		    after->gpu[i] - before.gpu[i] < 1);
	}
}

TEST(usage_store_rollup)
{
	struct cache *c = NULL;
	struct usage_store *s = NULL;
	static const uint64_t want[3] = { 2, 1, 3 };	/* hours 0 and 1 of
							   c1, hour 2 of c2 */
	struct sums after;
	uint64_t rows = 0, n = 0, h = 0, lost = 0, ev = 0;
	const uint64_t H = USAGE_HOUR_US;

	REQUIRE(ustore(&c, &s) == 0);
	REQUIRE(cache_begin(c) == 0);
	/* 30 min across an hour boundary, and one in the next hour */
	CHECK_INT(add_closed(s, "u1", "c1", "1g.10gb", 1.0 / 7, H - H / 4,
	    H + H / 4), 0);
	CHECK_INT(add_closed(s, "u2", "c2", "", 1.0, 2 * H, 2 * H + 60 * S),
	    0);
	CHECK_INT(add(s, "u3", "c3", "d3", "", 1.0, 3 * H), 0);	/* open */
	/* totals kept: the tenant's rows (one per class/profile) match */
	rollup_keeps(s, 3 * H, 4 * H, want, 2, &after);
	/* hours past their own retention go */
	CHECK_INT(usage_rollup(s, 3 * H, 2 * H, &rows), 0);
	CHECK_INT(usage_counts(s, &n, &h), 0);
	CHECK_INT(h, 1);
	CHECK_INT(usage_lost_add(s, 5, 3, "test"), 0);
	CHECK_INT(usage_lost_total(s, &lost, &ev), 0);
	CHECK_INT(lost, 3);
	CHECK_INT(ev, 1);
	CHECK_INT(cache_commit(c), 0);
	uclean(c, s);
}

/*
 * An interval whose end is before its start (stored by an older sync,
 * before the store refused it) counts zero, as the queries count it:
 * rolled up it adds nothing to its hour but keeps its tenant's row, like a
 * zero-length one.
 */
TEST(usage_store_rollup_backwards)
{
	struct cache *c = NULL;
	struct usage_store *s = NULL;
	static const uint64_t want[3] = { 4, 0, 3 };	/* an hour a key */
	struct sums after;
	const uint64_t H = USAGE_HOUR_US, M = 60 * S;

	REQUIRE(ustore(&c, &s) == 0);
	REQUIRE(cache_begin(c) == 0);
	/* 30 min, then one ending 30 min before its start, in one hour */
	CHECK_INT(add_closed(s, "u1", "c1", "1g.10gb", 1.0 / 7, H + 10 * M,
	    H + 40 * M), 0);
	CHECK_INT(add_backwards(c, s, "u2", "1g.10gb", 1.0 / 7, H + 50 * M,
	    H + 20 * M), 0);
	/* no length on an hour boundary; backwards across an hour */
	CHECK_INT(add_closed(s, "u3", "c3", "", 1.0, 2 * H, 2 * H), 0);
	CHECK_INT(add_backwards(c, s, "u4", "3g.40gb", 3.0 / 7, 3 * H + M,
	    3 * H - M), 0);
	rollup_keeps(s, 5 * H, 10 * H, want, 3, &after);
	REQUIRE(after.n == 3);
	CHECK_INT(after.us[0], 0);		/* profile "" */
	CHECK_INT(after.us[1], 30 * M);		/* 1g.10gb: u1 alone */
	CHECK_INT(after.us[2], 0);		/* 3g.40gb */
	CHECK_INT(cache_commit(c), 0);
	uclean(c, s);
}

static int
count_keys(const char *ns, const char *name, void *arg)
{
	(void)ns;
	(void)name;
	(*(int *)arg)++;
	return 0;
}

TEST(usage_store_pods)
{
	struct cache *c = NULL;
	struct usage_store *s = NULL;
	uint64_t st = 0, fin = 0;
	bool known = true;
	int n = 0;

	REQUIRE(ustore(&c, &s) == 0);
	REQUIRE(cache_begin(c) == 0);
	/* the Pod is seen before the claim that it reserves */
	CHECK_INT(usage_pod_put(s, "pu1", "ta", "p1", 12 * S, 0), 0);
	CHECK_INT(usage_pod_get(s, "pu1", &st, &fin), 0);
	CHECK_INT(st, 12 * S);
	CHECK_INT(add(s, "u1", "c1", "d1", "", 1.0, 10 * S), 0);
	CHECK_INT(usage_consumer_add(s, "u1", 10 * S, "pu1", "p1"), 0);
	CHECK_INT(usage_consumer_times(s, "u1", 10 * S, &st, &fin), 0);
	CHECK_INT(st, 12 * S);	/* taken from usage_pods */
	CHECK_INT(fin, 0);
	CHECK_INT(usage_claim_known(s, "ta", "c1", &known), 0);
	CHECK(known);
	CHECK_INT(usage_claim_known(s, "ta", "c2", &known), 0);
	CHECK(!known);
	CHECK_INT(usage_pod_foreach(s, count_keys, &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(usage_pod_del(s, "ta", "p1"), 0);
	CHECK_INT(usage_pod_get(s, "pu1", &st, &fin), 0);
	CHECK_INT(st, 0);
	CHECK_INT(cache_commit(c), 0);
	uclean(c, s);
}

/*
 * ---- the tenant counters kept in memory (kpgpud-sync/acct_totals.c) ----
 * After each step of a sequence of opens, closes, moved ends and starts, a
 * reconstructed interval, roll-ups (with and without deleted hours), a
 * rolled-back batch and a restart, acct_totals_query at "now" lists the
 * same rows in the same order as usage_query by tenant over all time,
 * device-seconds equal and GPU-equivalents equal up to rounding, while the
 * totals stay loaded (kept, not summed again: the loads are counted; only
 * deleted hours, a rolled-back batch and a restart load them again).
 */
#define BASE	(1700000000ull * S)

/* Open an interval of ndev devices of one tenant, class and profile. */
static int
open_iv(struct usage_store *s, const char *uid, const char *ns,
    const char *profile, double share, unsigned ndev, uint64_t start)
{
	char inst[64], dev[32];
	int r = 0;

	snprintf(inst, sizeof(inst), "Agent/%s", ns);
	for (unsigned i = 0; i < ndev && r == 0; i++) {
		struct usage_row row = {
			.claim_uid = uid, .start_us = start, .dev = i,
			.ns = ns, .instance = inst, .claim = uid,
			.driver = "gpu.nvidia.com", .pool = "n1",
			.device = dev, .device_class = "kpgpud-mig",
			.profile = profile, .share = share, .sig = "",
			.lo_us = start,
		};

		snprintf(dev, sizeof(dev), "%s-gpu-%u", uid, i);
		r = usage_row_add(s, &row);
	}
	return r;
}

/* Close an interval as acct.c does: out, write, back in. */
static int
close_iv(struct acct_totals *t, struct usage_store *s, const char *uid,
    uint64_t start, uint64_t end)
{
	int r;

	acct_totals_interval(t, s, uid, start, -1);
	r = usage_close(s, uid, start, end, 0, end);
	acct_totals_interval(t, s, uid, start, 1);
	return r;
}

struct trows {
	int		 n;
	char		 key[16][160];
	uint64_t	 dev[16];
	double		 gpu[16];
};

/* Collect the rows of a query with their full keys. */
static int
tcollect(const struct usage_sum *u, void *arg)
{
	struct trows *r = arg;

	if (r->n == 16)
		return -E2BIG;
	snprintf(r->key[r->n], sizeof(r->key[0]), "%s|%s|%s|%s", u->ns,
	    u->instance, u->device_class, u->profile);
	r->dev[r->n] = u->device_us;
	r->gpu[r->n] = u->gpu_us;
	r->n++;
	return 0;
}

/* The counters equal the sums of every interval at now; how many rows. */
static int
totals_same(struct acct_totals *t, struct usage_store *s, uint64_t now,
    const char *step)
{
	struct trows a, b;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	CHECK_CASE(acct_totals_query(t, s, now, tcollect, &a) == 0, step);
	CHECK_CASE(usage_query(s, USAGE_BY_TENANT, 0, UINT64_MAX >> 1, now,
	    tcollect, &b) == 0, step);
	CHECK_CASE(a.n == b.n, step);
	for (int i = 0; i < a.n && i < b.n; i++) {
		CHECK_CASE(strcmp(a.key[i], b.key[i]) == 0, step);
		CHECK_CASE(a.dev[i] == b.dev[i], step);
		CHECK_CASE(fabs(a.gpu[i] - b.gpu[i]) <= 1e-9 * fabs(b.gpu[i]) +
		    1e-6, step);
	}
	CHECK_CASE(t->loaded, step);
	return b.n;
}

TEST(totals_follow_the_ledger)
{
	struct acct_totals t = { 0 };
	struct cache *c;
	struct usage_store *s;
	uint64_t rows = 0, n = 0, now = BASE + 20 * 3600 * S;

	REQUIRE(ustore(&c, &s) == 0);
	CHECK_INT(totals_same(&t, s, now, "empty"), 0);
	/* opens: two tenants, two profiles, a two-device interval */
	CHECK(open_iv(s, "a", "ta", "1g.10gb", 1.0 / 7, 2, BASE) == 0);
	CHECK(open_iv(s, "b", "tb", "", 1.0, 1, BASE + 1800 * S) == 0);
	CHECK(open_iv(s, "c", "ta", "3g.40gb", 3.0 / 7, 1, BASE + 60 * S) ==
	    0);
	CHECK_INT(totals_same(&t, s, now, "opened"), 3);
	/* closes, over hour boundaries */
	CHECK(close_iv(&t, s, "a", BASE, BASE + 7300 * S) == 0);
	CHECK_INT(totals_same(&t, s, now, "a closed"), 3);
	CHECK(close_iv(&t, s, "c", BASE + 60 * S, BASE + 3 * 3600 * S) == 0);
	CHECK_INT(totals_same(&t, s, now, "c closed"), 3);
	/* a refined end and start of a closed interval, a moved open start */
	acct_totals_interval(&t, s, "a", BASE, -1);
	CHECK(usage_set_end(s, "a", BASE, BASE + 7000 * S, 2) == 0);
	acct_totals_interval(&t, s, "a", BASE, 1);
	CHECK_INT(totals_same(&t, s, now, "a end moved"), 3);
	acct_totals_interval(&t, s, "a", BASE, -1);
	CHECK(usage_set_start(s, "a", BASE, BASE + 100 * S, 2) == 0);
	acct_totals_interval(&t, s, "a", BASE + 100 * S, 1);
	CHECK_INT(totals_same(&t, s, now, "a start moved"), 3);
	acct_totals_interval(&t, s, "b", BASE + 1800 * S, -1);
	CHECK(usage_set_start(s, "b", BASE + 1800 * S, BASE + 1700 * S, 2) ==
	    0);
	acct_totals_interval(&t, s, "b", BASE + 1700 * S, 1);
	CHECK(close_iv(&t, s, "b", BASE + 1700 * S, BASE + 9 * 3600 * S) ==
	    0);
	CHECK_INT(totals_same(&t, s, now, "b closed"), 3);
	/* a reconstructed interval of a new tenant, sorted between two */
	CHECK(open_iv(s, "d", "tab", "1g.10gb", 1.0 / 7, 1, BASE + 5 * S) ==
	    0);
	CHECK(close_iv(&t, s, "d", BASE + 5 * S, BASE + 4000 * S) == 0);
	CHECK(open_iv(s, "e", "ta", "1g.10gb", 1.0 / 7, 1, BASE + 10 * 3600 *
	    S) == 0);
	CHECK_INT(totals_same(&t, s, now, "d reconstructed, e open"), 4);
	/* roll-up: the same seconds as hours, the totals kept */
	CHECK(usage_hours_before(s, BASE, &n) == 0 && n == 0);
	CHECK(usage_rollup(s, BASE + 5 * 3600 * S, 0, &rows) == 0);
	CHECK_INT(rows, 4);
	acct_totals_rolled_up(&t, false);
	CHECK(t.loaded);
	CHECK_INT(totals_same(&t, s, now, "rolled up"), 4);
	CHECK(close_iv(&t, s, "e", BASE + 10 * 3600 * S, BASE + 11 * 3600 *
	    S) == 0);
	CHECK_INT(totals_same(&t, s, now, "e closed after the roll-up"), 4);
	CHECK_INT(t.loads, 1);		/* summed once, at the first query */
	/* hours deleted: the documented drop, loaded again */
	CHECK(usage_hours_before(s, BASE + 2 * 3600 * S, &n) == 0 && n > 0);
	CHECK(usage_rollup(s, BASE + 5 * 3600 * S, BASE + 2 * 3600 * S,
	    &rows) == 0);
	acct_totals_rolled_up(&t, n > 0);
	CHECK(!t.loaded);
	CHECK_INT(totals_same(&t, s, now, "hours deleted"), 3);	/* tab's went */
	CHECK_INT(t.loads, 2);
	/* a restart: loaded once from the ledger */
	acct_totals_free(&t);
	CHECK_INT(totals_same(&t, s, now + 3600 * S, "restarted"), 3);
	acct_totals_free(&t);
	uclean(c, s);
}

/*
 * Tenants whose every interval has no length (one mid-hour, one on an hour
 * boundary, one stored backwards by an older sync) keep their zero rows
 * through a roll-up without the totals being summed again; a rolled-back
 * batch drops them, and they are summed once more.
 */
TEST(totals_rollback_and_zero_keys)
{
	struct acct_totals t = { 0 };
	struct cache *c;
	struct usage_store *s;
	const uint64_t H = USAGE_HOUR_US, H0 = (BASE / H + 1) * H;
	uint64_t rows = 0, now = BASE + 10 * H;

	REQUIRE(ustore(&c, &s) == 0);
	CHECK(open_iv(s, "z", "tz", "", 1.0, 1, BASE + 100 * S) == 0);
	CHECK(close_iv(&t, s, "z", BASE + 100 * S, BASE + 100 * S) == 0);
	CHECK(open_iv(s, "w", "tw", "", 1.0, 1, H0) == 0);
	CHECK(close_iv(&t, s, "w", H0, H0) == 0);
	CHECK(add_backwards(c, s, "v", "1g.10gb", 1.0 / 7, BASE + 200 * S,
	    BASE + 150 * S) == 0);
	CHECK_INT(totals_same(&t, s, now, "zero-length intervals"), 3);
	CHECK_INT(t.loads, 1);
	/* rolled up: a zero hour keeps each key, the totals are kept */
	CHECK(usage_rollup(s, BASE + 2 * H, 0, &rows) == 0);
	CHECK_INT(rows, 3);
	acct_totals_rolled_up(&t, false);
	CHECK(t.loaded);
	CHECK_INT(totals_same(&t, s, now, "zero keys rolled up"), 3);
	CHECK_INT(t.loads, 1);		/* not summed again */
	/* a rolled-back batch: the totals are dropped and loaded again */
	CHECK(cache_begin(c) == 0);
	CHECK(open_iv(s, "y", "ty", "", 1.0, 1, BASE) == 0);
	CHECK(close_iv(&t, s, "y", BASE, BASE + 50 * S) == 0);
	CHECK_INT(totals_same(&t, s, now, "in the batch"), 4);
	cache_rollback(c);
	acct_totals_drop(&t);
	CHECK_INT(totals_same(&t, s, now, "rolled back"), 3);
	CHECK_INT(t.loads, 2);
	acct_totals_free(&t);
	uclean(c, s);
}
