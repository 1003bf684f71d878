/* SPDX-License-Identifier: Apache-2.0 */
/* The tenant usage counters kept in memory: see acct_totals.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-sync/acct_totals.h"

/* usage_query's order: namespace, instance, class, profile. */
static int
total_cmp(const struct usage_sum *u, const struct acct_total *e)
{
	int c;

	if ((c = strcmp(u->ns, e->ns)) != 0 ||
	    (c = strcmp(u->instance, e->instance)) != 0 ||
	    (c = strcmp(u->device_class, e->device_class)) != 0)
		return c;
	return strcmp(u->profile, e->profile);
}

/* The entry of u's key, inserted (zero) when absent; NULL on ENOMEM. */
static struct acct_total *
total_slot(struct acct_totals *t, const struct usage_sum *u)
{
	size_t lo = 0, hi = t->n, mid, l[4];
	struct acct_total *e;
	char *p;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((c = total_cmp(u, &t->t[mid])) == 0)
			return &t->t[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (t->n == t->alloc) {
		size_t n = t->alloc ? t->alloc * 2 : 64;

		if ((e = reallocarray(t->t, n, sizeof(*e))) == NULL)
			return NULL;
		t->t = e;
		t->alloc = n;
	}
	l[0] = strlen(u->ns) + 1;
	l[1] = strlen(u->instance) + 1;
	l[2] = strlen(u->device_class) + 1;
	l[3] = strlen(u->profile) + 1;
	if ((p = malloc(l[0] + l[1] + l[2] + l[3])) == NULL)
		return NULL;
	memmove(&t->t[lo + 1], &t->t[lo], (t->n - lo) * sizeof(*e));
	t->n++;
	e = &t->t[lo];
	memset(e, 0, sizeof(*e));
	e->ns = memcpy(p, u->ns, l[0]);
	e->instance = memcpy(p + l[0], u->instance, l[1]);
	e->device_class = memcpy(p + l[0] + l[1], u->device_class, l[2]);
	e->profile = memcpy(p + l[0] + l[1] + l[2], u->profile, l[3]);
	return e;
}

/* A usage_sum_cb adding (or taking out) one row of sums. */
struct total_op {
	struct acct_totals	*t;
	int			 sign;
};

static int
total_add(const struct usage_sum *u, void *arg)
{
	struct total_op *op = arg;
	struct acct_total *e;

	if ((e = total_slot(op->t, u)) == NULL)
		return -ENOMEM;
	if (op->sign > 0) {
		e->device_us += u->device_us;
		e->gpu_us += u->gpu_us;
		return 0;
	}
	if (e->device_us < u->device_us)
		return -EINVAL;		/* not what was added: load again */
	e->device_us -= u->device_us;
	e->gpu_us -= u->gpu_us;
	return 0;
}

/* Empty the table. */
static void
totals_clear(struct acct_totals *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->t[i].ns);
	t->n = 0;
	t->loaded = false;
}

/* Load the closed intervals and the hours (usage_query with now 0). */
static int
totals_load(struct acct_totals *t, struct usage_store *s)
{
	struct total_op op = { t, 1 };
	int r;

	totals_clear(t);
	if ((r = usage_query(s, USAGE_BY_TENANT, 0, UINT64_MAX >> 1, 0,
	    total_add, &op)) < 0) {
		totals_clear(t);
		return r;
	}
	t->loaded = true;
	t->loads++;
	return 0;
}

/* Take out or put back an interval's closed rows. */
void
acct_totals_interval(struct acct_totals *t, struct usage_store *s,
    const char *claim_uid, uint64_t start_us, int sign)
{
	struct total_op op = { t, sign };

	if (t->loaded && usage_interval_sums(s, claim_uid, start_us,
	    total_add, &op) < 0)
		totals_clear(t);
}

/* Load again at the next scrape. */
void
acct_totals_drop(struct acct_totals *t)
{
	totals_clear(t);
}

/* After a roll-up: keep the totals unless hours were deleted. */
void
acct_totals_rolled_up(struct acct_totals *t, bool hours_deleted)
{
	if (hours_deleted)
		totals_clear(t);
}

/* Emit one row: a total, an open sum or both. */
static int
totals_emit(const struct acct_total *c, const struct acct_total *o,
    usage_sum_cb cb, void *arg)
{
	const struct acct_total *k = c != NULL ? c : o;
	struct usage_sum u;

	memset(&u, 0, sizeof(u));
	u.ns = k->ns;
	u.instance = k->instance;
	u.key = "";
	u.device_class = k->device_class;
	u.profile = k->profile;
	u.device_us = (c ? c->device_us : 0) + (o ? o->device_us : 0);
	u.gpu_us = (c ? c->gpu_us : 0) + (o ? o->gpu_us : 0);
	return cb(&u, arg);
}

/* The totals plus the open intervals, merged in order. */
int
acct_totals_query(struct acct_totals *t, struct usage_store *s,
    uint64_t now, usage_sum_cb cb, void *arg)
{
	struct acct_totals open = { 0 };
	struct total_op op = { &open, 1 };
	struct usage_sum k;
	size_t i = 0, j = 0;
	int r, c;

	if (!t->loaded && totals_load(t, s) < 0)
		return usage_query(s, USAGE_BY_TENANT, 0, UINT64_MAX >> 1, now,
		    cb, arg);
	if ((r = usage_open_sums(s, now, total_add, &op)) < 0)
		goto out;
	while (r == 0 && (i < t->n || j < open.n)) {
		if (i == t->n)
			c = 1;
		else if (j == open.n)
			c = -1;
		else {
			k.ns = t->t[i].ns;
			k.instance = t->t[i].instance;
			k.device_class = t->t[i].device_class;
			k.profile = t->t[i].profile;
			c = total_cmp(&k, &open.t[j]);
		}
		r = totals_emit(c <= 0 ? &t->t[i] : NULL, c >= 0 ? &open.t[j] :
		    NULL, cb, arg);
		i += c <= 0;
		j += c >= 0;
	}
out:
	acct_totals_free(&open);
	return r;
}

/* Free the table. */
void
acct_totals_free(struct acct_totals *t)
{
	totals_clear(t);
	free(t->t);
	t->t = NULL;
	t->alloc = 0;
}
