/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/metrics.c: naming rules, the exact text exposition
 * of counters, gauges and histograms with labels, escaping, the series cap
 * with its overflow series, and concurrent updates.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/metrics.h"
#include "tests/unit/test.h"

/* Render m and check that the text is want (a failure names line). */
static void
check_render(struct metrics *m, int line, const char *want)
{
	struct buf b = BUF_INIT(0);

	if (metrics_render(m, &b) != 0)
		test_fail(__FILE__, line, "metrics_render failed");
	else if (strcmp(buf_str(&b), want) != 0)
		test_fail(__FILE__, line, "rendered:\n%s\nwant:\n%s",
		    buf_str(&b), want);
	buf_free(&b);
}

TEST(names_follow_convention)
{
	struct metrics *m = metrics_new("sync");
	struct metric *a = NULL, *b = NULL;
	static const double bk[] = { 1 };

	REQUIRE(m != NULL);
	CHECK_INT(metrics_counter(m, "kpgpud_sync_events_total", "h", NULL,
	    NULL, 0, &a), 0);
	CHECK(a != NULL);
	CHECK_INT(metrics_counter(m, "kpgpud_sync_events_total", "h", NULL,
	    NULL, 0, &b), -EEXIST);
	CHECK(b == NULL);
	CHECK_INT(metrics_counter(m, "kpgpud_admit_events_total", "h", NULL,
	    NULL, 0, &b), -EINVAL);
	CHECK_INT(metrics_counter(m, "kpgpud_sync_events", "h", NULL, NULL, 0,
	    &b), -EINVAL);
	CHECK_INT(metrics_counter(m, "kpgpud_sync_total", "h", NULL, NULL, 0,
	    &b), -EINVAL);	/* no <what> */
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_ops_count", "h", NULL, NULL,
	    0, &b), -EINVAL);	/* histogram suffix */
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_Up_bool", "h", NULL, NULL, 0,
	    &b), -EINVAL);
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_up", "h", NULL, NULL, 0, &b),
	    -EINVAL);
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_x_total", "h", NULL, NULL, 0,
	    &b), -EINVAL);
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_a__b", "h", NULL, NULL, 0,
	    &b), -EINVAL);
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_watch_streams", "h", NULL,
	    "x", 0, &b), -EINVAL);	/* label2 without label1 */
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_watch_streams", "h", "__x",
	    NULL, 0, &b), -EINVAL);
	CHECK_INT(metrics_gauge(m, "kpgpud_sync_watch_streams", "h", "a",
	    "a", 0, &b), -EINVAL);
	CHECK_INT(metrics_histogram(m, "kpgpud_sync_lat_seconds", "h", bk, 1,
	    "le", NULL, 0, &b), -EINVAL);
	CHECK(metrics_new("Sync") == NULL);
	CHECK(metrics_new("") == NULL);
	metrics_free(m);
	metrics_free(NULL);
}

TEST(render_counter_and_gauge)
{
	struct metrics *m = metrics_new("admit");
	struct metric *req = NULL, *up = NULL, *ns = NULL;

	REQUIRE(m != NULL);
	REQUIRE(metrics_counter(m, "kpgpud_admit_reviews_total",
	    "Admission reviews answered.", "namespace", "result", 0, &req) ==
	    0);
	REQUIRE(metrics_gauge(m, "kpgpud_admit_sync_connected_bool",
	    "Whether sync is reachable.", NULL, NULL, 0, &up) == 0);
	REQUIRE(metrics_gauge(m, "kpgpud_admit_cache_entries",
	    "Namespaces cached.", "state", NULL, 0, &ns) == 0);
	CHECK_INT(metric_inc(req, "team-a", "patched"), 0);
	CHECK_INT(metric_add(req, "team-a", "patched", 2), 0);
	CHECK_INT(metric_inc(req, "team-b", "allowed"), 0);
	CHECK_INT(metric_add(req, "team-b", "allowed", -1), -EINVAL);
	CHECK_INT(metric_set(up, NULL, NULL, 1), 0);
	CHECK_INT(metric_set(ns, "fresh", NULL, 0.25), 0);
	CHECK_INT(metric_add(ns, "fresh", NULL, -0.5), 0);
	CHECK_INT(metric_inc(NULL, "ignored", NULL), 0);
	CHECK_INT(metric_inc(req, "team-a", NULL), -EINVAL);
	CHECK_INT(metric_observe(req, "team-a", "x", 1), -EINVAL);
	check_render(m, __LINE__,
	    "# HELP kpgpud_admit_reviews_total Admission reviews answered.\n"
	    "# TYPE kpgpud_admit_reviews_total counter\n"
	    "kpgpud_admit_reviews_total{namespace=\"team-a\",result=\"patched\"}"
	    " 3\n"
	    "kpgpud_admit_reviews_total{namespace=\"team-b\",result=\"allowed\"}"
	    " 1\n"
	    "# HELP kpgpud_admit_sync_connected_bool Whether sync is "
	    "reachable.\n"
	    "# TYPE kpgpud_admit_sync_connected_bool gauge\n"
	    "kpgpud_admit_sync_connected_bool 1\n"
	    "# HELP kpgpud_admit_cache_entries Namespaces cached.\n"
	    "# TYPE kpgpud_admit_cache_entries gauge\n"
	    "kpgpud_admit_cache_entries{state=\"fresh\"} -0.25\n");
	metrics_free(m);
}

TEST(render_histogram_buckets)
{
	static const double bounds[] = { 0.005, 0.1, 1 };
	struct metrics *m = metrics_new("quota");
	struct metric *h = NULL, *u = NULL;
	double count = 0;

	REQUIRE(m != NULL);
	REQUIRE(metrics_histogram(m, "kpgpud_quota_reconcile_seconds",
	    "Time per reconcile.", bounds, 3, "mode", NULL, 0, &h) == 0);
	REQUIRE(metrics_histogram(m, "kpgpud_quota_apply_seconds",
	    "Time per apply.", bounds, 3, NULL, NULL, 0, &u) == 0);
	CHECK_INT(metric_observe(h, "mig", NULL, 0.005), 0);	/* le is <= */
	CHECK_INT(metric_observe(h, "mig", NULL, 0.05), 0);
	CHECK_INT(metric_observe(h, "mig", NULL, 0.5), 0);
	CHECK_INT(metric_observe(h, "mig", NULL, 7), 0);
	CHECK_INT(metric_inc(h, "mig", NULL), -EINVAL);
	CHECK_INT(metric_get(h, "mig", NULL, &count), 0);
	CHECK(count == 4);
	check_render(m, __LINE__,
	    "# HELP kpgpud_quota_reconcile_seconds Time per reconcile.\n"
	    "# TYPE kpgpud_quota_reconcile_seconds histogram\n"
	    "kpgpud_quota_reconcile_seconds_bucket{mode=\"mig\",le=\"0.005\"} 1\n"
	    "kpgpud_quota_reconcile_seconds_bucket{mode=\"mig\",le=\"0.1\"} 2\n"
	    "kpgpud_quota_reconcile_seconds_bucket{mode=\"mig\",le=\"1\"} 3\n"
	    "kpgpud_quota_reconcile_seconds_bucket{mode=\"mig\",le=\"+Inf\"} 4\n"
	    "kpgpud_quota_reconcile_seconds_sum{mode=\"mig\"} 7.555\n"
	    "kpgpud_quota_reconcile_seconds_count{mode=\"mig\"} 4\n"
	    "# HELP kpgpud_quota_apply_seconds Time per apply.\n"
	    "# TYPE kpgpud_quota_apply_seconds histogram\n"
	    "kpgpud_quota_apply_seconds_bucket{le=\"0.005\"} 0\n"
	    "kpgpud_quota_apply_seconds_bucket{le=\"0.1\"} 0\n"
	    "kpgpud_quota_apply_seconds_bucket{le=\"1\"} 0\n"
	    "kpgpud_quota_apply_seconds_bucket{le=\"+Inf\"} 0\n"
	    "kpgpud_quota_apply_seconds_sum 0\n"
	    "kpgpud_quota_apply_seconds_count 0\n");
	metrics_free(m);
}

TEST(histogram_bounds_checked)
{
	static const double bad[] = { 1, 1 }, nan_b[] = { 0.0 / 0.0 };
	struct metrics *m = metrics_new("quota");
	struct metric *h = NULL;

	REQUIRE(m != NULL);
	CHECK_INT(metrics_histogram(m, "kpgpud_quota_a_seconds", "h", bad, 2,
	    NULL, NULL, 0, &h), -EINVAL);
	CHECK_INT(metrics_histogram(m, "kpgpud_quota_a_seconds", "h", nan_b,
	    1, NULL, NULL, 0, &h), -EINVAL);
	CHECK_INT(metrics_histogram(m, "kpgpud_quota_a_seconds", "h", bad, 0,
	    NULL, NULL, 0, &h), -EINVAL);
	CHECK(h == NULL);
	metrics_free(m);
}

TEST(escaping)
{
	struct metrics *m = metrics_new("ctl");
	struct metric *c = NULL;

	REQUIRE(m != NULL);
	REQUIRE(metrics_counter(m, "kpgpud_ctl_errors_total",
	    "Errors \\ with\nnewline \"quoted\".", "reason", NULL, 0, &c) == 0);
	CHECK_INT(metric_inc(c, "a\"b\\c\nd", NULL), 0);
	check_render(m, __LINE__,
	    "# HELP kpgpud_ctl_errors_total Errors \\\\ with\\nnewline "
	    "\"quoted\".\n"
	    "# TYPE kpgpud_ctl_errors_total counter\n"
	    "kpgpud_ctl_errors_total{reason=\"a\\\"b\\\\c\\nd\"} 1\n");
	metrics_free(m);
}

TEST(series_cap_and_overflow)
{
	struct metrics *m = metrics_new("sync");
	struct metric *c = NULL, *g = NULL;
	double v = 0;

	REQUIRE(m != NULL);
	REQUIRE(metrics_counter(m, "kpgpud_sync_objects_total", "Objects.",
	    "namespace", "kind", 2, &c) == 0);
	REQUIRE(metrics_gauge(m, "kpgpud_sync_lag_seconds", "Lag.",
	    "namespace", NULL, 1, &g) == 0);
	CHECK_INT(metric_inc(c, "a", "Pod"), 0);
	CHECK_INT(metric_inc(c, "b", "Pod"), 0);
	CHECK_INT(metric_add(c, "c", "Pod", 5), 1);
	CHECK_INT(metric_inc(c, "d", "Pod"), 1);
	CHECK_INT(metric_inc(c, "a", "Pod"), 0);	/* existing still fine */
	CHECK_INT(metric_get(c, "c", "Pod", &v), -ENOENT);
	CHECK_INT(metric_get(c, METRICS_OVERFLOW, METRICS_OVERFLOW, &v), 0);
	CHECK(v == 6);
	CHECK_INT(metric_set(g, "x", NULL, 10), 0);
	CHECK_INT(metric_set(g, "y", NULL, 20), 1);
	CHECK_INT(metric_set(g, "z", NULL, 30), 1);
	check_render(m, __LINE__,
	    "# HELP kpgpud_sync_objects_total Objects.\n"
	    "# TYPE kpgpud_sync_objects_total counter\n"
	    "kpgpud_sync_objects_total{namespace=\"a\",kind=\"Pod\"} 2\n"
	    "kpgpud_sync_objects_total{namespace=\"b\",kind=\"Pod\"} 1\n"
	    "kpgpud_sync_objects_total{namespace=\"_overflow\","
	    "kind=\"_overflow\"} 6\n"
	    "# HELP kpgpud_sync_lag_seconds Lag.\n"
	    "# TYPE kpgpud_sync_lag_seconds gauge\n"
	    "kpgpud_sync_lag_seconds{namespace=\"x\"} 10\n"
	    "kpgpud_sync_lag_seconds{namespace=\"_overflow\"} 2\n");
	/* removing a series frees a slot */
	CHECK_INT(metric_remove(c, "a", "Pod"), 0);
	CHECK_INT(metric_remove(c, "a", "Pod"), -ENOENT);
	CHECK_INT(metric_inc(c, "e", "Pod"), 0);
	CHECK_INT(metric_get(c, "e", "Pod", &v), 0);
	CHECK(v == 1);
	metrics_free(m);
}

TEST(label_value_capped)
{
	struct metrics *m = metrics_new("sync");
	struct metric *c = NULL;
	char big[METRICS_LABEL_MAX + 2];

	REQUIRE(m != NULL);
	REQUIRE(metrics_counter(m, "kpgpud_sync_x_total", "X.", "ns", NULL, 0,
	    &c) == 0);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(metric_inc(c, big, NULL), -EINVAL);
	big[METRICS_LABEL_MAX] = '\0';
	CHECK_INT(metric_inc(c, big, NULL), 0);
	metrics_free(m);
}

struct incr {
	struct metric	*c;
	struct metric	*h;
};

/* Update a counter and a histogram many times from one thread. */
static void *
incr_run(void *arg)
{
	struct incr *x = arg;

	for (int i = 0; i < 20000; i++) {
		metric_inc(x->c, i % 2 ? "odd" : "even", NULL);
		metric_observe(x->h, NULL, NULL, 0.5);
	}
	return NULL;
}

TEST(concurrent_updates)
{
	static const double bk[] = { 1 };
	struct metrics *m = metrics_new("admit");
	struct incr x;
	pthread_t t[4];
	double odd = 0, even = 0, n = 0;

	REQUIRE(m != NULL);
	REQUIRE(metrics_counter(m, "kpgpud_admit_ops_total", "Ops.", "parity",
	    NULL, 0, &x.c) == 0);
	REQUIRE(metrics_histogram(m, "kpgpud_admit_op_seconds", "Op time.",
	    bk, 1, NULL, NULL, 0, &x.h) == 0);
	for (int i = 0; i < 4; i++)
		REQUIRE(pthread_create(&t[i], NULL, incr_run, &x) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_INT(metric_get(x.c, "odd", NULL, &odd), 0);
	CHECK_INT(metric_get(x.c, "even", NULL, &even), 0);
	CHECK_INT(metric_get(x.h, NULL, NULL, &n), 0);
	CHECK(odd == 40000 && even == 40000 && n == 80000);
	metrics_free(m);
}

TEST(register_by_kind)
{
	static const double bk[] = { 1 };
	struct metrics *m = metrics_new("admit");
	struct metric *mt = NULL;

	REQUIRE(m != NULL);
	/* an unknown kind, and buckets on a counter or a gauge, are refused */
	CHECK_INT(metrics_register(m, (enum metric_kind)7,
	    "kpgpud_admit_x_total", "X.", NULL, 0, NULL, NULL, 0, &mt),
	    -EINVAL);
	CHECK_INT(metrics_register(m, METRIC_COUNTER, "kpgpud_admit_x_total",
	    "X.", bk, 1, NULL, NULL, 0, &mt), -EINVAL);
	CHECK_INT(metrics_register(m, METRIC_GAUGE, "kpgpud_admit_x_bytes",
	    "X.", bk, 1, NULL, NULL, 0, &mt), -EINVAL);
	CHECK(mt == NULL);
	CHECK_INT(metrics_register(m, METRIC_GAUGE, "kpgpud_admit_x_bytes",
	    "X.", NULL, 0, NULL, NULL, 0, &mt), 0);
	CHECK(mt != NULL && metric_set(mt, NULL, NULL, 2) == 0);
	metrics_free(m);
}
