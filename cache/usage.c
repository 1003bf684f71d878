/* The usage ledger in the cache: see usage.h; its SQL is in cache_sql.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cache/cache_impl.h"
#include "cache/cache_sql.h"
#include "cache/usage.h"

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

/* Bind a text (NULL as ""). */
static void
bt(sqlite3_stmt *st, int i, const char *v)
{
	sqlite3_bind_text(st, i, v != NULL ? v : "", -1, SQLITE_STATIC);
}

/* Bind a time. */
static void
bi(sqlite3_stmt *st, int i, uint64_t v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* Step a statement that returns no rows, then reset it. */
static int
run(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : cache_errno(rc) ? cache_errno(rc) :
	    -EIO;
}

/* Reset a statement after reading. */
static int
done(sqlite3_stmt *st, int rc)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : cache_errno(rc) ? cache_errno(rc) :
	    -EIO;
}

/* A text column ("" for NULL). */
static const char *
ct(sqlite3_stmt *st, int i)
{
	const unsigned char *v = sqlite3_column_text(st, i);

	return v != NULL ? (const char *)v : "";
}

/* A time column (0 for NULL or negative). */
static uint64_t
cu(sqlite3_stmt *st, int i)
{
	sqlite3_int64 v = sqlite3_column_int64(st, i);

	return v > 0 ? (uint64_t)v : 0;
}

/* The open interval of a claim. */
int
usage_open_get(struct usage_store *s, const char *claim_uid,
    uint64_t *ret_start, char *sig, size_t siglen)
{
	sqlite3_stmt *st = s->st[U_OPEN_GET];
	int rc;

	bt(st, 1, claim_uid);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*ret_start = cu(st, 0);
		snprintf(sig, siglen, "%s", ct(st, 1));
		done(st, SQLITE_DONE);
		return 0;
	}
	return done(st, rc) < 0 ? done(st, rc) : -ENOENT;
}

/* Every open interval. */
int
usage_open_foreach(struct usage_store *s, usage_open_cb cb, void *arg)
{
	sqlite3_stmt *st = s->st[U_OPEN_ALL];
	struct usage_open o;
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		o.claim_uid = ct(st, 0);
		o.ns = ct(st, 1);
		o.claim = ct(st, 2);
		o.sig = ct(st, 3);
		o.start_us = cu(st, 4);
		if ((r = cb(&o, arg)) != 0)
			break;
	}
	rc = done(st, r != 0 ? SQLITE_DONE : rc);
	return r != 0 ? r : rc;
}

/* Add one device row. */
int
usage_row_add(struct usage_store *s, const struct usage_row *r)
{
	sqlite3_stmt *st = s->st[U_ADD];

	bt(st, 1, r->claim_uid);
	bi(st, 2, r->start_us);
	sqlite3_bind_int(st, 3, (int)r->dev);
	bt(st, 4, r->ns);
	bt(st, 5, r->instance);
	bt(st, 6, r->claim);
	bt(st, 7, r->driver);
	bt(st, 8, r->pool);
	bt(st, 9, r->device);
	bt(st, 10, r->device_class);
	bt(st, 11, r->profile);
	sqlite3_bind_double(st, 12, r->share);
	bt(st, 13, r->sig);
	sqlite3_bind_int(st, 14, r->start_how);
	bi(st, 15, r->lo_us);
	return run(st);
}

/* Close an open interval. */
int
usage_close(struct usage_store *s, const char *claim_uid, uint64_t start_us,
    uint64_t end_us, int how, uint64_t hi_us)
{
	sqlite3_stmt *st = s->st[U_CLOSE];
	int r;

	bt(st, 1, claim_uid);
	bi(st, 2, start_us);
	bi(st, 3, end_us);
	sqlite3_bind_int(st, 4, how);
	bi(st, 5, hi_us);
	if ((r = run(st)) < 0 || sqlite3_changes(s->db) == 0)
		return r;
	return run(s->st[U_CLOSED_INC]);
}

/* Read one row of two times from a prepared, bound statement. */
static int
two_times(sqlite3_stmt *st, uint64_t *a, uint64_t *b)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*a = cu(st, 0);
		if (b != NULL)
			*b = cu(st, 1);
		rc = SQLITE_DONE;
	}
	return done(st, rc);
}

/* The latest end on a device. */
int
usage_prev_end(struct usage_store *s, const char *driver, const char *pool,
    const char *device, uint64_t *ret)
{
	sqlite3_stmt *st = s->st[U_PREV_END];

	*ret = 0;
	bt(st, 1, driver);
	bt(st, 2, pool);
	bt(st, 3, device);
	return two_times(st, ret, NULL);
}

/* Record a consumer. */
int
usage_consumer_add(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, const char *pod_uid, const char *pod_name)
{
	sqlite3_stmt *st = s->st[U_CONS_ADD];

	bt(st, 1, claim_uid);
	bi(st, 2, start_us);
	bt(st, 3, pod_uid);
	bt(st, 4, pod_name);
	return run(st);
}

/* The consumers' times of an interval. */
int
usage_consumer_times(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, uint64_t *ret_start, uint64_t *ret_finish)
{
	sqlite3_stmt *st = s->st[U_CONS_TIMES];

	*ret_start = *ret_finish = 0;
	bt(st, 1, claim_uid);
	bi(st, 2, start_us);
	return two_times(st, ret_start, ret_finish);
}

/* Store a Pod's times. */
int
usage_pod_set(struct usage_store *s, const char *pod_uid, uint64_t start_us,
    uint64_t finish_us)
{
	sqlite3_stmt *st = s->st[U_POD_SET];

	bt(st, 1, pod_uid);
	bi(st, 2, start_us);
	bi(st, 3, finish_us);
	return run(st);
}

/* The intervals a Pod consumed. */
int
usage_pod_spans(struct usage_store *s, const char *pod_uid,
    usage_span_cb cb, void *arg)
{
	sqlite3_stmt *st = s->st[U_POD_SPANS];
	struct usage_span sp[8];
	char uid[8][256];
	size_t n = 0, i;
	int rc, r = 0;

	/* copied out first: the callback writes to the same rows */
	bt(st, 1, pod_uid);
	while (n < 8 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(uid[n], sizeof(uid[n]), "%s", ct(st, 0));
		sp[n].claim_uid = uid[n];
		sp[n].start_us = cu(st, 1);
		sp[n].start_how = sqlite3_column_int(st, 2);
		sp[n].lo_us = cu(st, 3);
		sp[n].end_us = cu(st, 4);
		sp[n].end_how = sqlite3_column_int(st, 5);
		sp[n].hi_us = cu(st, 6);
		n++;
	}
	if ((rc = done(st, n == 8 ? SQLITE_DONE : rc)) < 0)
		return rc;
	for (i = 0; i < n && r == 0; i++)
		r = cb(&sp[i], arg);
	return r;
}

/* Move an interval's start, its consumers' key along. */
int
usage_set_start(struct usage_store *s, const char *claim_uid,
    uint64_t old_start, uint64_t new_start, int how)
{
	sqlite3_stmt *st = s->st[U_SET_START];
	int r;

	bt(st, 1, claim_uid);
	bi(st, 2, old_start);
	bi(st, 3, new_start);
	sqlite3_bind_int(st, 4, how);
	if ((r = run(st)) < 0)
		return r;
	st = s->st[U_SET_START_C];
	bt(st, 1, claim_uid);
	bi(st, 2, old_start);
	bi(st, 3, new_start);
	return run(st);
}

/* Move a closed interval's end. */
int
usage_set_end(struct usage_store *s, const char *claim_uid,
    uint64_t start_us, uint64_t end_us, int how)
{
	sqlite3_stmt *st = s->st[U_SET_END];

	bt(st, 1, claim_uid);
	bi(st, 2, start_us);
	bi(st, 3, end_us);
	sqlite3_bind_int(st, 4, how);
	return run(st);
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
	bi(s->st[U_ALIVE_SET], 1, us);
	return run(s->st[U_ALIVE_SET]);
}

/* Walk the rows of an aggregating statement. */
static int
sums(sqlite3_stmt *st, usage_sum_cb cb, void *arg)
{
	struct usage_sum u;
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		u.ns = ct(st, 0);
		u.instance = ct(st, 1);
		u.key = ct(st, 2);
		u.device_class = ct(st, 3);
		u.profile = ct(st, 4);
		u.device_us = cu(st, 5);
		u.gpu_us = sqlite3_column_double(st, 6);
		u.intervals = cu(st, 7);
		u.bounded = cu(st, 8);
		u.open = cu(st, 9);
		if ((r = cb(&u, arg)) != 0)
			break;
	}
	rc = done(st, r != 0 ? SQLITE_DONE : rc);
	return r != 0 ? r : rc;
}

/* Sums over a window. */
int
usage_query(struct usage_store *s, enum usage_by by, uint64_t since,
    uint64_t until, uint64_t now, usage_sum_cb cb, void *arg)
{
	static const enum usage_stmt ids[] = { U_Q_TENANT, U_Q_CLAIM,
	    U_Q_POD, U_Q_DEVICE };
	sqlite3_stmt *st;

	if ((unsigned)by >= sizeof(ids) / sizeof(ids[0]) || since >= until)
		return -EINVAL;
	st = s->st[ids[by]];
	bi(st, 1, since);
	bi(st, 2, until);
	bi(st, 3, now);
	return sums(st, cb, arg);
}

/* Devices held now. */
int
usage_held(struct usage_store *s, usage_sum_cb cb, void *arg)
{
	return sums(s->st[U_HELD], cb, arg);
}

/* Add one closed interval's hours to usage_hourly. */
static int
rollup_one(struct usage_store *s, sqlite3_stmt *row)
{
	sqlite3_stmt *st = s->st[U_HOUR_ADD];
	uint64_t a = cu(row, 4), e = cu(row, 5), h, b;
	double share = sqlite3_column_double(row, 6);
	int r;

	for (h = a - a % USAGE_HOUR_US; h < e; h += USAGE_HOUR_US) {
		b = h + USAGE_HOUR_US < e ? h + USAGE_HOUR_US : e;
		bt(st, 1, ct(row, 0));
		bt(st, 2, ct(row, 1));
		bt(st, 3, ct(row, 2));
		bt(st, 4, ct(row, 3));
		bi(st, 5, h);
		bi(st, 6, b - (a > h ? a : h));
		sqlite3_bind_double(st, 7, share * (double)(b - (a > h ? a :
		    h)));
		if ((r = run(st)) < 0)
			return r;
	}
	return 0;
}

/* Retention: roll old closed intervals up into hours, drop old hours. */
int
usage_rollup(struct usage_store *s, uint64_t cutoff_us, uint64_t hours_us,
    uint64_t *ret_rows)
{
	sqlite3_stmt *st = s->st[U_OLD];
	int rc, r = 0;

	*ret_rows = 0;
	bi(s->st[U_DEL_HOURS], 1, hours_us);
	if ((r = run(s->st[U_DEL_HOURS])) < 0)
		return r;
	bi(st, 1, cutoff_us);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((r = rollup_one(s, st)) < 0)
			break;
		(*ret_rows)++;
	}
	rc = done(st, r < 0 ? SQLITE_DONE : rc);
	if (r < 0 || rc < 0)
		return r < 0 ? r : rc;
	bi(s->st[U_DEL_OLD], 1, cutoff_us);
	if ((r = run(s->st[U_DEL_OLD])) < 0)
		return r;
	return *ret_rows > 0 ? run(s->st[U_DEL_OLD_C]) : 0;
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
	sqlite3_stmt *st = s->st[U_LOST_ADD];

	bi(st, 1, at_us);
	bi(st, 2, intervals);
	bt(st, 3, note);
	return run(st);
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
	bi(s->st[U_CLOSED_SET], 1, n);
	return run(s->st[U_CLOSED_SET]);
}

/* Whether the ledger has any interval of a claim (by namespace and name). */
int
usage_claim_known(struct usage_store *s, const char *ns, const char *claim,
    bool *ret)
{
	sqlite3_stmt *st = s->st[U_HAS_CLAIM];
	uint64_t n = 0;
	int r;

	bt(st, 1, ns);
	bt(st, 2, claim);
	if ((r = two_times(st, &n, NULL)) < 0)
		return r;
	*ret = n > 0;
	return 0;
}

/* Remember a Pod's times. */
int
usage_pod_put(struct usage_store *s, const char *uid, const char *ns,
    const char *name, uint64_t start_us, uint64_t finish_us)
{
	sqlite3_stmt *st = s->st[U_POD_PUT];

	bt(st, 1, uid);
	bt(st, 2, ns);
	bt(st, 3, name);
	bi(st, 4, start_us);
	bi(st, 5, finish_us);
	return run(st);
}

/* A Pod's times (0, 0 when unknown). */
int
usage_pod_get(struct usage_store *s, const char *uid, uint64_t *ret_start,
    uint64_t *ret_finish)
{
	*ret_start = *ret_finish = 0;
	bt(s->st[U_POD_GET], 1, uid);
	return two_times(s->st[U_POD_GET], ret_start, ret_finish);
}

/* Forget a Pod. */
int
usage_pod_del(struct usage_store *s, const char *ns, const char *name)
{
	bt(s->st[U_POD_DEL], 1, ns);
	bt(s->st[U_POD_DEL], 2, name);
	return run(s->st[U_POD_DEL]);
}

/* Every remembered Pod's namespace and name. */
int
usage_pod_foreach(struct usage_store *s, usage_key_cb cb, void *arg)
{
	sqlite3_stmt *st = s->st[U_POD_ALL];
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((r = cb(ct(st, 0), ct(st, 1), arg)) != 0)
			break;
	rc = done(st, r != 0 ? SQLITE_DONE : rc);
	return r != 0 ? r : rc;
}
