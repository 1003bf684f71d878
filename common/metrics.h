/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus metrics: a registry of counters, gauges and histograms (fixed
 * buckets), each with zero, one or two label dimensions, rendered in the
 * text exposition format (version 0.0.4).
 *
 * Names must be kpgpud_<process>_<what>_<unit> (lower case, digits, '_'),
 * where <process> is the one given to metrics_new(); counters end in
 * _total. A labelled metric holds at most max_series label combinations;
 * values beyond that are refused and counted in the series whose label
 * values are all METRICS_OVERFLOW (not a valid Kubernetes name, so it
 * cannot collide with one).
 *
 * Thread-safe: updates and rendering may run on any thread. Metric handles
 * stay valid until metrics_free().
 */
#ifndef KPGPUD_METRICS_H
#define KPGPUD_METRICS_H

#include <stddef.h>

#include "common/util.h"

#define METRICS_OVERFLOW	"_overflow"
#define METRICS_MAX_BUCKETS	32
#define METRICS_MAX_SERIES	1024	/* per metric, upper bound of caps */
#define METRICS_LABEL_MAX	253	/* bytes of one label value */
#define METRICS_DEFAULT_SERIES	64

struct metrics;
struct metric;

/* A registry for one process ("sync", "admit", "quota", "ctl"). */
struct metrics	*metrics_new(const char *process);
void		 metrics_free(struct metrics *m);

enum metric_kind {
	METRIC_COUNTER,
	METRIC_GAUGE,
	METRIC_HISTOGRAM,
};

/*
 * Register a metric. bounds (histograms only, else NULL and 0): strictly
 * increasing upper bounds; +Inf is implicit. label1/label2: label names,
 * NULL for fewer dimensions (label2 needs label1). max_series: 0 for
 * METRICS_DEFAULT_SERIES. -EINVAL for a bad name or label, -EEXIST for a
 * duplicate name, -ENOMEM. ret untouched on failure.
 */
int	 metrics_register(struct metrics *m, enum metric_kind kind,
	    const char *name, const char *help, const double *bounds,
	    size_t nbounds, const char *label1, const char *label2,
	    size_t max_series, struct metric **ret);
/* The same by kind: metrics_counter(m, name, help, l1, l2, max, ret). */
#define metrics_counter(m, name, help, l1, l2, max, ret)		\
	metrics_register((m), METRIC_COUNTER, (name), (help), NULL, 0,	\
	    (l1), (l2), (max), (ret))
#define metrics_gauge(m, name, help, l1, l2, max, ret)			\
	metrics_register((m), METRIC_GAUGE, (name), (help), NULL, 0,	\
	    (l1), (l2), (max), (ret))
#define metrics_histogram(m, name, help, b, nb, l1, l2, max, ret)	\
	metrics_register((m), METRIC_HISTOGRAM, (name), (help), (b),	\
	    (nb), (l1), (l2), (max), (ret))

/*
 * Update one series; lv1/lv2 are the label values (NULL for unused
 * dimensions). Return 0, 1 when the value went to the overflow series, or
 * -EINVAL (wrong kind, negative counter increment, missing label value).
 * A NULL metric is ignored (returns 0), so optional metrics need no checks.
 */
int	 metric_inc(struct metric *mt, const char *lv1, const char *lv2);
int	 metric_add(struct metric *mt, const char *lv1, const char *lv2,
	    double v);
int	 metric_set(struct metric *mt, const char *lv1, const char *lv2,
	    double v);
int	 metric_observe(struct metric *mt, const char *lv1, const char *lv2,
	    double v);
/* Drop one series (e.g. a deleted namespace); 0 or -ENOENT. */
int	 metric_remove(struct metric *mt, const char *lv1, const char *lv2);
/* Current value of a counter/gauge series, or the count of a histogram. */
int	 metric_get(struct metric *mt, const char *lv1, const char *lv2,
	    double *ret);

/* Append every metric in registration order in the text format. */
int	 metrics_render(struct metrics *m, struct buf *out);

#endif
