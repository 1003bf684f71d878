/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus metrics registry and text exposition: see metrics.h. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"

#define METRICS_NAME_MAX	128
#define METRICS_LNAME_MAX	64
#define METRICS_HELP_MAX	1024

/* One label combination of a metric. */
struct series {
	char		*lv[2];
	double		 value;		/* counter, gauge */
	uint64_t	*buckets;	/* histogram: nbounds + 1, not cumulative */
	double		 sum;
	uint64_t	 count;
};

struct metric {
	struct metrics	*reg;
	enum metric_kind kind;
	char		 name[METRICS_NAME_MAX];
	char		*help;
	int		 nlabels;
	char		 label[2][METRICS_LNAME_MAX];
	double		 bounds[METRICS_MAX_BUCKETS];
	size_t		 nbounds;
	size_t		 max_series;
	struct series	*series;
	size_t		 nseries;
	struct series	*overflow;
	struct metric	*next;
};

struct metrics {
	char		 process[32];
	pthread_mutex_t	 mu;
	struct metric	*head, *tail;
};

/* Create an empty registry for process. */
struct metrics *
metrics_new(const char *process)
{
	struct metrics *m;
	size_t n = strlen(process);

	if (n == 0 || n >= sizeof(m->process) ||
	    strspn(process, "abcdefghijklmnopqrstuvwxyz0123456789") != n)
		return NULL;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	memcpy(m->process, process, n + 1);
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

/* Release one series' memory. */
static void
series_clear(struct series *s)
{
	free(s->lv[0]);
	free(s->lv[1]);
	free(s->buckets);
}

/* Free a registry and its metrics. */
void
metrics_free(struct metrics *m)
{
	struct metric *mt, *next;

	if (m == NULL)
		return;
	for (mt = m->head; mt != NULL; mt = next) {
		next = mt->next;
		for (size_t i = 0; i < mt->nseries; i++)
			series_clear(&mt->series[i]);
		if (mt->overflow != NULL)
			series_clear(mt->overflow);
		free(mt->overflow);
		free(mt->series);
		free(mt->help);
		free(mt);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* Whether s ends with suffix. */
static bool
ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Whether name follows kpgpud_<process>_<what>_<unit> for kind. */
static bool
metrics_name_ok(const struct metrics *m, const char *name,
    enum metric_kind kind)
{
	char prefix[64];
	const char *rest;
	size_t n = strlen(name);

	snprintf(prefix, sizeof(prefix), "kpgpud_%s_", m->process);
	if (n >= METRICS_NAME_MAX || strncmp(name, prefix, strlen(prefix)) != 0)
		return false;
	rest = name + strlen(prefix);
	if (strspn(rest, "abcdefghijklmnopqrstuvwxyz0123456789_") !=
	    strlen(rest) || strchr(rest, '_') == NULL || rest[0] == '_' ||
	    ends_with(rest, "_") || strstr(rest, "__") != NULL)
		return false;
	if (kind == METRIC_COUNTER)
		return ends_with(name, "_total");
	if (ends_with(name, "_total") || ends_with(name, "_bucket") ||
	    ends_with(name, "_count") || ends_with(name, "_sum"))
		return false;
	return true;
}

/* Whether a label name is valid (and not reserved). */
static bool
metrics_label_ok(const char *l, enum metric_kind kind)
{
	size_t n = strlen(l);

	if (n == 0 || n >= METRICS_LNAME_MAX || (l[0] >= '0' && l[0] <= '9') ||
	    strncmp(l, "__", 2) == 0 ||
	    strspn(l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_") != n)
		return false;
	return !(kind == METRIC_HISTOGRAM && strcmp(l, "le") == 0);
}

/* Check bucket bounds: finite, strictly increasing, within the cap. */
static bool
metrics_bounds_ok(const double *b, size_t n)
{
	if (n == 0 || n > METRICS_MAX_BUCKETS)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(b[i]) || (i > 0 && b[i] <= b[i - 1]))
			return false;
	return true;
}

/* Allocate an empty series (labels set by the caller). */
static struct series *
series_init(struct series *s, const struct metric *mt)
{
	memset(s, 0, sizeof(*s));
	if (mt->kind == METRIC_HISTOGRAM &&
	    (s->buckets = calloc(mt->nbounds + 1, sizeof(uint64_t))) == NULL)
		return NULL;
	return s;
}

/* Append mt to the registry unless the name is taken; -EEXIST then. */
static int
metrics_link(struct metrics *m, struct metric *mt)
{
	struct metric *it;
	int r = 0;

	pthread_mutex_lock(&m->mu);
	for (it = m->head; it != NULL && r == 0; it = it->next)
		if (strcmp(it->name, mt->name) == 0)
			r = -EEXIST;
	if (r == 0) {
		if (m->tail != NULL)
			m->tail->next = mt;
		else
			m->head = mt;
		m->tail = mt;
	}
	pthread_mutex_unlock(&m->mu);
	return r;
}

/* Free a metric that never made it into the registry. */
static void
metric_discard(struct metric *mt)
{
	if (mt == NULL)
		return;
	if (mt->series != NULL && mt->nseries == 1)
		series_clear(&mt->series[0]);
	free(mt->series);
	free(mt->help);
	free(mt);
}

/* Register a metric of any kind. */
int
metrics_register(struct metrics *m, enum metric_kind kind, const char *name,
    const char *help, const double *bounds, size_t nbounds,
    const char *l1, const char *l2, size_t max_series, struct metric **ret)
{
	struct metric *mt;
	int r = -ENOMEM;

	if ((kind != METRIC_COUNTER && kind != METRIC_GAUGE &&
	    kind != METRIC_HISTOGRAM) ||
	    (kind != METRIC_HISTOGRAM && (bounds != NULL || nbounds != 0)) ||
	    !metrics_name_ok(m, name, kind) || (l2 != NULL && l1 == NULL) ||
	    (l1 != NULL && !metrics_label_ok(l1, kind)) ||
	    (l2 != NULL && (!metrics_label_ok(l2, kind) ||
	    strcmp(l1, l2) == 0)) || max_series > METRICS_MAX_SERIES ||
	    help == NULL || strlen(help) > METRICS_HELP_MAX ||
	    (kind == METRIC_HISTOGRAM && !metrics_bounds_ok(bounds, nbounds)))
		return -EINVAL;
	if ((mt = calloc(1, sizeof(*mt))) == NULL ||
	    (mt->help = strdup(help)) == NULL)
		goto fail;
	mt->reg = m;
	mt->kind = kind;
	snprintf(mt->name, sizeof(mt->name), "%s", name);
	mt->nlabels = l2 ? 2 : l1 ? 1 : 0;
	if (l1 != NULL)
		snprintf(mt->label[0], METRICS_LNAME_MAX, "%s", l1);
	if (l2 != NULL)
		snprintf(mt->label[1], METRICS_LNAME_MAX, "%s", l2);
	if (kind == METRIC_HISTOGRAM)
		memcpy(mt->bounds, bounds, nbounds * sizeof(double));
	mt->nbounds = kind == METRIC_HISTOGRAM ? nbounds : 0;
	mt->max_series = mt->nlabels == 0 ? 1 :
	    max_series ? max_series : METRICS_DEFAULT_SERIES;
	if ((mt->series = calloc(mt->max_series, sizeof(*mt->series))) ==
	    NULL)
		goto fail;
	/* an unlabelled metric always has its one series */
	if (mt->nlabels == 0) {
		if (series_init(&mt->series[0], mt) == NULL)
			goto fail;
		mt->nseries = 1;
	}
	if ((r = metrics_link(m, mt)) < 0)
		goto fail;
	*ret = mt;
	return 0;
fail:
	metric_discard(mt);
	return r;
}

/* Check that exactly the metric's label values are given. */
static int
metric_labels_ok(const struct metric *mt, const char *lv1, const char *lv2)
{
	const char *lv[2] = { lv1, lv2 };

	for (int i = 0; i < 2; i++) {
		if ((i < mt->nlabels) != (lv[i] != NULL))
			return -EINVAL;
		if (lv[i] != NULL && strlen(lv[i]) > METRICS_LABEL_MAX)
			return -EINVAL;
	}
	return 0;
}

/* Index of the series with these label values, or -1; mu held. */
static int
metric_find(const struct metric *mt, const char *lv1, const char *lv2)
{
	for (size_t i = 0; i < mt->nseries; i++) {
		const struct series *s = &mt->series[i];

		if ((mt->nlabels < 1 || strcmp(s->lv[0], lv1) == 0) &&
		    (mt->nlabels < 2 || strcmp(s->lv[1], lv2) == 0))
			return (int)i;
	}
	return -1;
}

/* Create a series with the given label values; NULL on ENOMEM. */
static struct series *
metric_new_series(struct metric *mt, struct series *s, const char *lv1,
    const char *lv2)
{
	if (series_init(s, mt) == NULL)
		return NULL;
	if ((mt->nlabels > 0 && (s->lv[0] = strdup(lv1)) == NULL) ||
	    (mt->nlabels > 1 && (s->lv[1] = strdup(lv2)) == NULL)) {
		series_clear(s);
		return NULL;
	}
	return s;
}

/*
 * The series for the label values, created on first use, or the overflow
 * series when the cap is reached (*ret_over set); NULL on ENOMEM. mu held.
 */
static struct series *
metric_series(struct metric *mt, const char *lv1, const char *lv2,
    bool *ret_over)
{
	int i = metric_find(mt, lv1, lv2);

	*ret_over = false;
	if (i >= 0)
		return &mt->series[i];
	if (mt->nseries < mt->max_series) {
		if (metric_new_series(mt, &mt->series[mt->nseries], lv1, lv2)
		    == NULL)
			return NULL;
		return &mt->series[mt->nseries++];
	}
	*ret_over = true;
	if (mt->overflow == NULL) {
		struct series *s = malloc(sizeof(*s));

		if (s == NULL || metric_new_series(mt, s, METRICS_OVERFLOW,
		    METRICS_OVERFLOW) == NULL) {
			free(s);
			return NULL;
		}
		mt->overflow = s;
	}
	return mt->overflow;
}

/* Apply one update of the given kind to a series. */
static int
metric_update(struct metric *mt, const char *lv1, const char *lv2,
    enum metric_kind want, bool set, double v)
{
	struct series *s;
	bool over;
	size_t b;

	if (mt == NULL)
		return 0;
	if (mt->kind != want || metric_labels_ok(mt, lv1, lv2) < 0 ||
	    isnan(v) || (want == METRIC_COUNTER && v < 0))
		return -EINVAL;
	pthread_mutex_lock(&mt->reg->mu);
	if ((s = metric_series(mt, lv1, lv2, &over)) == NULL) {
		pthread_mutex_unlock(&mt->reg->mu);
		return -ENOMEM;
	}
	if (mt->kind == METRIC_HISTOGRAM) {
		for (b = 0; b < mt->nbounds && v > mt->bounds[b]; b++)
			;
		s->buckets[b]++;
		s->sum += v;
		s->count++;
	} else if (over && mt->kind == METRIC_GAUGE) {
		s->value += 1;	/* a gauge's overflow counts refused updates */
	} else if (set) {
		s->value = v;
	} else {
		s->value += v;
	}
	pthread_mutex_unlock(&mt->reg->mu);
	return over ? 1 : 0;
}

/* Add one to a counter or gauge. */
int
metric_inc(struct metric *mt, const char *lv1, const char *lv2)
{
	if (mt == NULL)
		return 0;
	return metric_update(mt, lv1, lv2, mt->kind == METRIC_GAUGE ?
	    METRIC_GAUGE : METRIC_COUNTER, false, 1);
}

/* Add v to a counter (v >= 0) or a gauge. */
int
metric_add(struct metric *mt, const char *lv1, const char *lv2, double v)
{
	if (mt == NULL)
		return 0;
	return metric_update(mt, lv1, lv2, mt->kind == METRIC_GAUGE ?
	    METRIC_GAUGE : METRIC_COUNTER, false, v);
}

/* Set a gauge. */
int
metric_set(struct metric *mt, const char *lv1, const char *lv2, double v)
{
	return metric_update(mt, lv1, lv2, METRIC_GAUGE, true, v);
}

/* Record one histogram observation. */
int
metric_observe(struct metric *mt, const char *lv1, const char *lv2, double v)
{
	return metric_update(mt, lv1, lv2, METRIC_HISTOGRAM, false, v);
}

/* Drop one series. */
int
metric_remove(struct metric *mt, const char *lv1, const char *lv2)
{
	int i;

	if (mt == NULL || metric_labels_ok(mt, lv1, lv2) < 0 ||
	    mt->nlabels == 0)
		return -EINVAL;
	pthread_mutex_lock(&mt->reg->mu);
	if ((i = metric_find(mt, lv1, lv2)) >= 0) {
		series_clear(&mt->series[i]);
		mt->series[i] = mt->series[--mt->nseries];
	}
	pthread_mutex_unlock(&mt->reg->mu);
	return i >= 0 ? 0 : -ENOENT;
}

/* Read one series' value (histograms: the observation count). */
int
metric_get(struct metric *mt, const char *lv1, const char *lv2, double *ret)
{
	const struct series *s = NULL;
	int i;

	if (mt == NULL || metric_labels_ok(mt, lv1, lv2) < 0)
		return -EINVAL;
	pthread_mutex_lock(&mt->reg->mu);
	if ((i = metric_find(mt, lv1, lv2)) >= 0)
		s = &mt->series[i];
	else if (mt->overflow != NULL && mt->nlabels > 0 &&
	    strcmp(lv1, METRICS_OVERFLOW) == 0 &&
	    (mt->nlabels < 2 || strcmp(lv2, METRICS_OVERFLOW) == 0))
		s = mt->overflow;
	if (s != NULL)
		*ret = mt->kind == METRIC_HISTOGRAM ? (double)s->count :
		    s->value;
	pthread_mutex_unlock(&mt->reg->mu);
	return s != NULL ? 0 : -ENOENT;
}

/* Append a sample value the way Prometheus writes floats. */
static int
render_value(struct buf *out, double v)
{
	char tmp[64];

	if (isnan(v))
		return buf_puts(out, "NaN");
	if (isinf(v))
		return buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		snprintf(tmp, sizeof(tmp), "%.17g", v);
	return buf_puts(out, tmp);
}

/* Append s escaped for a label value (quote, backslash, newline). */
static int
render_escaped(struct buf *out, const char *s, bool quotes)
{
	int r = 0;

	for (; *s != '\0' && r == 0; s++) {
		if (*s == '\\')
			r = buf_puts(out, "\\\\");
		else if (*s == '\n')
			r = buf_puts(out, "\\n");
		else if (*s == '"' && quotes)
			r = buf_puts(out, "\\\"");
		else
			r = buf_putc(out, *s);
	}
	return r;
}

/* Append "name{labels[,le=...]} value\n" for one sample. */
static int
render_sample(struct buf *out, const struct metric *mt, const char *suffix,
    const struct series *s, const char *le, double v)
{
	int r, n = 0;

	r = buf_printf(out, "%s%s", mt->name, suffix);
	if (mt->nlabels > 0 || le != NULL)
		r = r ? r : buf_putc(out, '{');
	for (int i = 0; i < mt->nlabels && r == 0; i++, n++) {
		r = buf_printf(out, "%s%s=\"", n ? "," : "", mt->label[i]);
		r = r ? r : render_escaped(out, s->lv[i], true);
		r = r ? r : buf_putc(out, '"');
	}
	if (le != NULL && r == 0)
		r = buf_printf(out, "%sle=\"%s\"", n ? "," : "", le);
	if ((mt->nlabels > 0 || le != NULL) && r == 0)
		r = buf_putc(out, '}');
	r = r ? r : buf_putc(out, ' ');
	r = r ? r : render_value(out, v);
	return r ? r : buf_putc(out, '\n');
}

/* Append the bucket, sum and count lines of one histogram series. */
static int
render_histogram(struct buf *out, const struct metric *mt,
    const struct series *s)
{
	struct buf le = BUF_INIT(64);
	uint64_t cum = 0;
	int r = 0;

	for (size_t b = 0; b <= mt->nbounds && r == 0; b++) {
		cum += s->buckets[b];
		buf_reset(&le);
		if (b == mt->nbounds)
			r = buf_puts(&le, "+Inf");
		else
			r = render_value(&le, mt->bounds[b]);
		r = r ? r : render_sample(out, mt, "_bucket", s, buf_str(&le),
		    (double)cum);
	}
	buf_free(&le);
	r = r ? r : render_sample(out, mt, "_sum", s, NULL, s->sum);
	return r ? r : render_sample(out, mt, "_count", s, NULL,
	    (double)s->count);
}

/* Append one metric family; mu held. */
static int
render_metric(struct buf *out, const struct metric *mt)
{
	static const char *const types[] = { "counter", "gauge", "histogram" };
	size_t n = mt->nseries + (mt->overflow != NULL);
	int r;

	r = buf_printf(out, "# HELP %s ", mt->name);
	r = r ? r : render_escaped(out, mt->help, false);
	r = r ? r : buf_printf(out, "\n# TYPE %s %s\n", mt->name,
	    types[mt->kind]);
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct series *s = i < mt->nseries ? &mt->series[i] :
		    mt->overflow;

		if (mt->kind == METRIC_HISTOGRAM)
			r = render_histogram(out, mt, s);
		else
			r = render_sample(out, mt, "", s, NULL, s->value);
	}
	return r;
}

/* Append all metrics in the text exposition format. */
int
metrics_render(struct metrics *m, struct buf *out)
{
	int r = 0;

	pthread_mutex_lock(&m->mu);
	for (struct metric *mt = m->head; mt != NULL && r == 0; mt = mt->next)
		r = render_metric(out, mt);
	pthread_mutex_unlock(&m->mu);
	return r;
}
