/* SPDX-License-Identifier: Apache-2.0 */
/* The usage ledger in the cache: see usage.h; its SQL is in cache_sql.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cache/cache_impl.h"
#include "cache/cache_sql.h"
#include "cache/usage.h"
#include "common/util.h"

struct usage_store {
	sqlite3		*db;
	sqlite3_stmt	*st[U__COUNT];
};

/* Prepare every statement. */
int
usage_store_open(struct cache *c, struct usage_store **ret)
{
	struct usage_store *s;
	int i, rc;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->db = cache_handle(c);
	for (i = 0; i < U__COUNT; i++) {
		rc = sqlite3_prepare_v3(s->db, usage_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
		if (rc != SQLITE_OK) {
			usage_store_free(s);
			return cache_errno(rc) ? cache_errno(rc) : -EIO;
		}
	}
	*ret = s;
	return 0;
}

/* Finalize the statements (before the cache is closed). */
void
usage_store_free(struct usage_store *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < U__COUNT; i++)
		sqlite3_finalize(s->st[i]);
	free(s);
}

/*
 * Bind the parameters of st from 1 on, one format letter an argument:
 * t a text (const char *, NULL as ""), u a time (uint64_t), i an int, d a
 * double. Returns st.
 */
static sqlite3_stmt *
bind_args(sqlite3_stmt *st, const char *fmt, ...)
{
	const char *v;
	va_list ap;

	va_start(ap, fmt);
	for (int i = 1; *fmt != '\0'; fmt++, i++)
		switch (*fmt) {
		case 't':
			v = va_arg(ap, const char *);
			sqlite3_bind_text(st, i, v != NULL ? v : "", -1,
			    SQLITE_STATIC);
			break;
		case 'u':
			sqlite3_bind_int64(st, i,
			    (sqlite3_int64)va_arg(ap, uint64_t));
			break;
		case 'i':
			sqlite3_bind_int(st, i, va_arg(ap, int));
			break;
		case 'd':
			sqlite3_bind_double(st, i, va_arg(ap, double));
			break;
		}
	va_end(ap);
	return st;
}

/* Reset a statement after stepping it to rc; 0 or a negative errno. */
static int
done(sqlite3_stmt *st, int rc)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : cache_errno(rc) ? cache_errno(rc) :
	    -EIO;
}

/* Step a bound statement that returns no rows, then reset it. */
static int
run(sqlite3_stmt *st)
{
	return done(st, sqlite3_step(st));
}

/*
 * Read the columns of st's current row from 0 on, one format letter a
 * pointer: t const char ** ("" for NULL), u uint64_t * (0 for NULL or
 * negative), i int *, d double *.
 */
static void
cols(sqlite3_stmt *st, const char *fmt, ...)
{
	const unsigned char *t;
	sqlite3_int64 v;
	va_list ap;

	va_start(ap, fmt);
	for (int i = 0; *fmt != '\0'; fmt++, i++)
		switch (*fmt) {
		case 't':
			t = sqlite3_column_text(st, i);
			*va_arg(ap, const char **) = t != NULL ?
			    (const char *)t : "";
			break;
		case 'u':
			v = sqlite3_column_int64(st, i);
			*va_arg(ap, uint64_t *) = v > 0 ? (uint64_t)v : 0;
			break;
		case 'i':
			*va_arg(ap, int *) = sqlite3_column_int(st, i);
			break;
		case 'd':
			*va_arg(ap, double *) = sqlite3_column_double(st, i);
			break;
		}
	va_end(ap);
}

/*
 * Step a bound statement to its rows; for each, row() reads it and hands
 * it on (nonzero stops the walk and is returned). Resets st.
 */
static int
each(sqlite3_stmt *st, int (*row)(sqlite3_stmt *, void *), void *arg)
{
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((r = row(st, arg)) != 0)
			break;
	rc = done(st, r != 0 ? SQLITE_DONE : rc);
	return r != 0 ? r : rc;
}

/* Read one row of two times (b may be NULL) from a bound statement. */
static int
two_times(sqlite3_stmt *st, uint64_t *a, uint64_t *b)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		if (b != NULL)
			cols(st, "uu", a, b);
		else
			cols(st, "u", a);
		rc = SQLITE_DONE;
	}
	return done(st, rc);
}

/* The open interval of a claim. */
int
usage_open_get(struct usage_store *s, const char *claim_uid,
    uint64_t *ret_start, char *sig, size_t siglen)
{
	sqlite3_stmt *st = bind_args(s->st[U_OPEN_GET], "t", claim_uid);
	const char *v;
	int rc;

	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cols(st, "ut", ret_start, &v);
		snprintf(sig, siglen, "%s", v);
		done(st, SQLITE_DONE);
		return 0;
	}
	return done(st, rc) < 0 ? done(st, rc) : -ENOENT;
}

/* A caller's callback and its argument, for the row readers below. */
struct walk {
	union {
		usage_open_cb	 open;
		usage_sum_cb	 sum;
		usage_key_cb	 key;
	}		 cb;
	void		*arg;
};

/* One open interval's row: the interval's fields of a usage_row. */
static int
open_row(sqlite3_stmt *st, void *arg)
{
	const struct walk *w = arg;
	struct usage_row o;

	memset(&o, 0, sizeof(o));
	cols(st, "ttttu", &o.claim_uid, &o.ns, &o.claim, &o.sig, &o.start_us);
	return w->cb.open(&o, w->arg);
}

/* Every open interval. */
int
usage_open_foreach(struct usage_store *s, usage_open_cb cb, void *arg)
{
	struct walk w = { .cb.open = cb, .arg = arg };

	return each(s->st[U_OPEN_ALL], open_row, &w);
}

/* Add one device row. */
int
usage_row_add(struct usage_store *s, const struct usage_row *r)
{
	return run(bind_args(s->st[U_ADD], "tuittttttttdtiu", r->claim_uid,
	    r->start_us, (int)r->dev, r->ns, r->instance, r->claim, r->driver,
	    r->pool, r->device, r->device_class, r->profile, r->share, r->sig,
	    r->start_how, r->lo_us));
}

/* Why a close would be refused: start <= end <= hi is the rule. */
const char *
usage_close_refused(uint64_t start_us, uint64_t end_us, uint64_t hi_us)
{
	if (end_us < start_us)
		return "end before start";
	if (hi_us < end_us)
		return "latest end before end";
	return NULL;
}

/* Close an open interval; never with an end before its start or bound. */
int
usage_close(struct usage_store *s, const char *claim_uid, uint64_t start_us,
    uint64_t end_us, int how, uint64_t hi_us)
{
	int r;

	if (usage_close_refused(start_us, end_us, hi_us) != NULL)
		return -EINVAL;
	if ((r = run(bind_args(s->st[U_CLOSE], "tuuiu", claim_uid, start_us,
	    end_us, how, hi_us))) < 0 || sqlite3_changes(s->db) == 0)
		return r;
	return run(s->st[U_CLOSED_INC]);
}

/* The latest end on a device. */
int
usage_prev_end(struct usage_store *s, const char *driver, const char *pool,
    const char *device, uint64_t *ret)
{
	*ret = 0;
	return two_times(bind_args(s->st[U_PREV_END], "ttt", driver, pool, device),
	    ret, NULL);
}

/* Record a consumer. */
int
usage_consumer_add(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, const char *pod_uid, const char *pod_name)
{
	return run(bind_args(s->st[U_CONS_ADD], "tutt", claim_uid, start_us,
	    pod_uid, pod_name));
}

/* The consumers' times of an interval. */
int
usage_consumer_times(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, uint64_t *ret_start, uint64_t *ret_finish)
{
	*ret_start = *ret_finish = 0;
	return two_times(bind_args(s->st[U_CONS_TIMES], "tu", claim_uid, start_us),
	    ret_start, ret_finish);
}

/* Store a Pod's times. */
int
usage_pod_set(struct usage_store *s, const char *pod_uid, uint64_t start_us,
    uint64_t finish_us)
{
	return run(bind_args(s->st[U_POD_SET], "tuu", pod_uid, start_us,
	    finish_us));
}

/* The intervals a Pod consumed. */
int
usage_pod_spans(struct usage_store *s, const char *pod_uid,
    usage_span_cb cb, void *arg)
{
	sqlite3_stmt *st = bind_args(s->st[U_POD_SPANS], "t", pod_uid);
	struct usage_span sp[8];
	char uid[8][256];
	const char *v;
	size_t n = 0, i;
	int rc, r = 0;

	/* copied out first: the callback writes to the same rows */
	while (n < 8 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		cols(st, "tuiuuiu", &v, &sp[n].start_us, &sp[n].start_how,
		    &sp[n].lo_us, &sp[n].end_us, &sp[n].end_how, &sp[n].hi_us);
		snprintf(uid[n], sizeof(uid[n]), "%s", v);
		sp[n].claim_uid = uid[n];
		n++;
	}
	if ((rc = done(st, n == 8 ? SQLITE_DONE : rc)) < 0)
		return rc;
	for (i = 0; i < n && r == 0; i++)
		r = cb(&sp[i], arg);
	return r;
}

/*
 * Move an interval's start, its consumers' key along. The statement leaves
 * a closed interval whose end lies before the new start as it is; that the
 * interval exists then tells a refusal from a move of nothing.
 */
int
usage_set_start(struct usage_store *s, const char *claim_uid,
    uint64_t old_start, uint64_t new_start, int how)
{
	uint64_t n = 0;
	int r;

	if ((r = run(bind_args(s->st[U_SET_START], "tuui", claim_uid, old_start,
	    new_start, how))) < 0)
		return r;
	if (sqlite3_changes(s->db) == 0) {
		if ((r = two_times(bind_args(s->st[U_IV_HAS], "tu", claim_uid,
		    old_start), &n, NULL)) < 0)
			return r;
		if (n > 0)
			return -EINVAL;
	}
	return run(bind_args(s->st[U_SET_START_C], "tuu", claim_uid, old_start,
	    new_start));
}

/* Move a closed interval's end; never before its start. */
int
usage_set_end(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, uint64_t end_us, int how)
{
	if (end_us < start_us)
		return -EINVAL;
	return run(bind_args(s->st[U_SET_END], "tuui", claim_uid, start_us, end_us,
	    how));
}

/* The last moment sync was alive. */
int
usage_alive_get(struct usage_store *s, uint64_t *ret)
{
	*ret = 0;
	return two_times(s->st[U_ALIVE_GET], ret, NULL);
}

int
usage_alive_set(struct usage_store *s, uint64_t us)
{
	return run(bind_args(s->st[U_ALIVE_SET], "u", us));
}

/* One row of an aggregating statement. */
static int
sum_row(sqlite3_stmt *st, void *arg)
{
	const struct walk *w = arg;
	struct usage_sum u;

	cols(st, "tttttuduuu", &u.ns, &u.instance, &u.key, &u.device_class,
	    &u.profile, &u.device_us, &u.gpu_us, &u.intervals, &u.bounded,
	    &u.open);
	return w->cb.sum(&u, w->arg);
}

/* Sums over a window. */
int
usage_query(struct usage_store *s, enum usage_by by, uint64_t since,
    uint64_t until, uint64_t now, usage_sum_cb cb, void *arg)
{
	static const enum usage_stmt ids[] = { U_Q_TENANT, U_Q_CLAIM,
	    U_Q_POD, U_Q_DEVICE };
	struct walk w = { .cb.sum = cb, .arg = arg };

	if ((unsigned)by >= nitems(ids) || since >= until)
		return -EINVAL;
	return each(bind_args(s->st[ids[by]], "uuu", since, until, now), sum_row,
	    &w);
}

/* Devices held now. */
int
usage_held(struct usage_store *s, usage_sum_cb cb, void *arg)
{
	struct walk w = { .cb.sum = cb, .arg = arg };

	return each(s->st[U_HELD], sum_row, &w);
}

/* The closed rows of one interval, as usage_query by tenant counts them. */
int
usage_interval_sums(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, usage_sum_cb cb, void *arg)
{
	struct walk w = { .cb.sum = cb, .arg = arg };

	return each(bind_args(s->st[U_IV_SUMS], "tu", claim_uid, start_us),
	    sum_row, &w);
}

/* The open rows up to now, as usage_query by tenant counts them. */
int
usage_open_sums(struct usage_store *s, uint64_t now, usage_sum_cb cb,
    void *arg)
{
	struct walk w = { .cb.sum = cb, .arg = arg };

	return each(bind_args(s->st[U_OPEN_SUMS], "u", now), sum_row, &w);
}

/*
 * Add one closed interval's hours to usage_hourly: its part of every hour
 * it overlaps, and at least its start's hour, so the tenant keeps its row.
 * An end before the start (a clock step back) counts as no length, as the
 * ledger's queries count it: a zero, never a negative, hourly part.
 */
static int
rollup_one(struct usage_store *s, sqlite3_stmt *row)
{
	const char *ns, *instance, *device_class, *profile;
	uint64_t a, e, h, b, part;
	double share;
	int r;

	cols(row, "ttttuud", &ns, &instance, &device_class, &profile, &a, &e,
	    &share);
	if (e < a)
		e = a;
	h = a - a % USAGE_HOUR_US;
	do {
		b = h + USAGE_HOUR_US < e ? h + USAGE_HOUR_US : e;
		part = b - (a > h ? a : h);
		if ((r = run(bind_args(s->st[U_HOUR_ADD], "ttttuud", ns, instance,
		    device_class, profile, h, part,
		    share * (double)part))) < 0)
			return r;
		h += USAGE_HOUR_US;
	} while (h < e);
	return 0;
}

/* Retention: roll old closed intervals up into hours, drop old hours. */
int
usage_rollup(struct usage_store *s, uint64_t cutoff_us, uint64_t hours_us,
    uint64_t *ret_rows)
{
	sqlite3_stmt *st;
	int rc, r = 0;

	*ret_rows = 0;
	if ((r = run(bind_args(s->st[U_DEL_HOURS], "u", hours_us))) < 0)
		return r;
	st = bind_args(s->st[U_OLD], "u", cutoff_us);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((r = rollup_one(s, st)) < 0)
			break;
		(*ret_rows)++;
	}
	rc = done(st, r < 0 ? SQLITE_DONE : rc);
	if (r < 0 || rc < 0)
		return r < 0 ? r : rc;
	if ((r = run(bind_args(s->st[U_DEL_OLD], "u", cutoff_us))) < 0)
		return r;
	return *ret_rows > 0 ? run(s->st[U_DEL_OLD_C]) : 0;
}

/* The rolled-up hours retention would delete. */
int
usage_hours_before(struct usage_store *s, uint64_t hours_us, uint64_t *ret)
{
	*ret = 0;
	return two_times(bind_args(s->st[U_HOURS_BEFORE], "u", hours_us), ret,
	    NULL);
}

/* Row counts. */
int
usage_counts(struct usage_store *s, uint64_t *ret_rows, uint64_t *ret_hourly)
{
	int r;

	if ((r = two_times(s->st[U_CNT], ret_rows, NULL)) < 0)
		return r;
	return two_times(s->st[U_CNT_H], ret_hourly, NULL);
}

/* Record lost intervals. */
int
usage_lost_add(struct usage_store *s, uint64_t at_us, uint64_t intervals,
    const char *note)
{
	return run(bind_args(s->st[U_LOST_ADD], "uut", at_us, intervals, note));
}

/* Sum of lost intervals and the number of losses. */
int
usage_lost_total(struct usage_store *s, uint64_t *ret, uint64_t *ret_events)
{
	*ret = *ret_events = 0;
	return two_times(s->st[U_LOST_SUM], ret, ret_events);
}

/* Intervals ever closed in this ledger. */
int
usage_closed_get(struct usage_store *s, uint64_t *ret)
{
	*ret = 0;
	return two_times(s->st[U_CLOSED_GET], ret, NULL);
}

int
usage_closed_set(struct usage_store *s, uint64_t n)
{
	return run(bind_args(s->st[U_CLOSED_SET], "u", n));
}

/* Whether the ledger has any interval of a claim (by namespace and name). */
int
usage_claim_known(struct usage_store *s, const char *ns, const char *claim,
    bool *ret)
{
	uint64_t n = 0;
	int r;

	if ((r = two_times(bind_args(s->st[U_HAS_CLAIM], "tt", ns, claim), &n,
	    NULL)) < 0)
		return r;
	*ret = n > 0;
	return 0;
}

/* Remember a Pod's times. */
int
usage_pod_put(struct usage_store *s, const char *uid, const char *ns,
    const char *name, uint64_t start_us, uint64_t finish_us)
{
	return run(bind_args(s->st[U_POD_PUT], "tttuu", uid, ns, name, start_us,
	    finish_us));
}

/* A Pod's times (0, 0 when unknown). */
int
usage_pod_get(struct usage_store *s, const char *uid, uint64_t *ret_start,
    uint64_t *ret_finish)
{
	*ret_start = *ret_finish = 0;
	return two_times(bind_args(s->st[U_POD_GET], "t", uid), ret_start,
	    ret_finish);
}

/* Forget a Pod. */
int
usage_pod_del(struct usage_store *s, const char *ns, const char *name)
{
	return run(bind_args(s->st[U_POD_DEL], "tt", ns, name));
}

/* One remembered Pod's namespace and name. */
static int
key_row(sqlite3_stmt *st, void *arg)
{
	const struct walk *w = arg;
	const char *ns, *name;

	cols(st, "tt", &ns, &name);
	return w->cb.key(ns, name, w->arg);
}

/* Every remembered Pod's namespace and name. */
int
usage_pod_foreach(struct usage_store *s, usage_key_cb cb, void *arg)
{
	struct walk w = { .cb.key = cb, .arg = arg };

	return each(s->st[U_POD_ALL], key_row, &w);
}
