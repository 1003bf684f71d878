/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SQLite cache, the readers' half (see cache.h): lookups, iteration in
 * key or generation order, counts, watch state and the horizon.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_impl.h"
#include "common/util.h"

/* A column as text, NULL kept NULL. */
static const char *
col(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* A column as text, NULL becoming "". */
static const char *
col_s(sqlite3_stmt *st, int i)
{
	const char *s = col(st, i);

	return s != NULL ? s : "";
}

/* Fill a namespace view from the current row. */
static void
cache_row_ns(sqlite3_stmt *st, struct cache_ns *ns)
{
	ns->name = col_s(st, 0);
	ns->uid = col_s(st, 1);
	ns->rv = col_s(st, 2);
	ns->phase = col_s(st, 3);
	ns->isolated = sqlite3_column_int(st, 4) != 0;
	ns->resolved = col(st, 5);
	ns->labels = col_s(st, 6);
	ns->annotations = col_s(st, 7);
	ns->gen = (uint64_t)sqlite3_column_int64(st, 8);
}

/* Fill an instance view from the current row. */
static void
cache_row_instance(sqlite3_stmt *st, struct cache_instance *in)
{
	in->gvr = col_s(st, 0);
	in->kind = col_s(st, 1);
	in->ns = col_s(st, 2);
	in->name = col_s(st, 3);
	in->uid = col_s(st, 4);
	in->rv = col_s(st, 5);
	in->generation = sqlite3_column_int64(st, 6);
	in->created = col_s(st, 7);
	in->isolation = col(st, 8);
	in->deleted = col(st, 9);
	in->gen = (uint64_t)sqlite3_column_int64(st, 10);
}

/* Fill an owned-object view from the current row. */
static void
cache_row_owned(sqlite3_stmt *st, struct cache_owned *o)
{
	o->kind = col_s(st, 0);
	o->ns = col_s(st, 1);
	o->name = col_s(st, 2);
	o->uid = col_s(st, 3);
	o->rv = col_s(st, 4);
	o->data = col_s(st, 5);
	o->gen = (uint64_t)sqlite3_column_int64(st, 6);
}

/*
 * Copy n borrowed strings into one allocation that starts with a struct of
 * size sz; each *fields[i] is repointed into the copy (NULL stays NULL).
 */
static void *
cache_dup(const void *view, size_t sz, const size_t *offs, size_t n)
{
	size_t total = sz, i, len;
	char *p, *w;

	for (i = 0; i < n; i++) {
		const char *s = *(const char *const *)((const char *)view +
		    offs[i]);
		if (s != NULL)
			total += strlen(s) + 1;
	}
	if ((p = malloc(total)) == NULL)
		return NULL;
	memcpy(p, view, sz);
	w = p + sz;
	for (i = 0; i < n; i++) {
		const char **f = (const char **)(p + offs[i]);
		if (*f == NULL)
			continue;
		len = strlen(*f) + 1;
		memcpy(w, *f, len);
		*f = w;
		w += len;
	}
	return p;
}

/* Step a lookup statement to its row; -ENOENT when there is none. */
static int
cache_step_one(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 0;
	cache_done(st);
	return rc == SQLITE_DONE ? -ENOENT : cache_errno(rc);
}

#define OFF(t, f)	offsetof(struct t, f)
static const size_t ns_offs[] = { OFF(cache_ns, name), OFF(cache_ns, uid),
	OFF(cache_ns, rv), OFF(cache_ns, phase), OFF(cache_ns, resolved),
	OFF(cache_ns, labels), OFF(cache_ns, annotations) };
static const size_t in_offs[] = { OFF(cache_instance, gvr),
	OFF(cache_instance, kind), OFF(cache_instance, ns),
	OFF(cache_instance, name), OFF(cache_instance, uid),
	OFF(cache_instance, rv), OFF(cache_instance, created),
	OFF(cache_instance, isolation), OFF(cache_instance, deleted) };
static const size_t ow_offs[] = { OFF(cache_owned, kind),
	OFF(cache_owned, ns), OFF(cache_owned, name), OFF(cache_owned, uid),
	OFF(cache_owned, rv), OFF(cache_owned, data) };
#undef OFF

/* Run the bound lookup id and copy its row (a view of table t) to the heap. */
static int
cache_get_row(struct cache *c, enum cache_stmt id, enum cache_table t,
    void **ret)
{
	sqlite3_stmt *st = c->st[id];
	union {
		struct cache_ns		 ns;
		struct cache_instance	 in;
		struct cache_owned	 ow;
	} v;
	void *p;
	int r;

	if ((r = cache_step_one(st)) < 0)
		return r;
	if (t == CACHE_T_NS) {
		cache_row_ns(st, &v.ns);
		p = cache_dup(&v, sizeof(v.ns), ns_offs, nitems(ns_offs));
	} else if (t == CACHE_T_INSTANCE) {
		cache_row_instance(st, &v.in);
		p = cache_dup(&v, sizeof(v.in), in_offs, nitems(in_offs));
	} else {
		cache_row_owned(st, &v.ow);
		p = cache_dup(&v, sizeof(v.ow), ow_offs, nitems(ow_offs));
	}
	cache_done(st);
	if (p == NULL)
		return -ENOMEM;
	*ret = p;
	return 0;
}

/* Look up a Namespace by name. */
int
cache_ns_get(struct cache *c, const char *name, struct cache_ns **ret)
{
	void *p;
	int r;

	cache_bind(c->st[ST_NS_GET], 1, name);
	r = cache_get_row(c, ST_NS_GET, CACHE_T_NS, &p);
	if (r == 0)
		*ret = p;
	return r;
}

/* Look up an instance by its key. */
int
cache_instance_get(struct cache *c, const char *gvr, const char *ns,
    const char *name, struct cache_instance **ret)
{
	void *p;
	int r;

	cache_bind3(c, ST_IN_GET, gvr, ns, name);
	r = cache_get_row(c, ST_IN_GET, CACHE_T_INSTANCE, &p);
	if (r == 0)
		*ret = p;
	return r;
}

/* Look up an owned object by its key. */
int
cache_owned_get(struct cache *c, const char *kind, const char *ns,
    const char *name, struct cache_owned **ret)
{
	void *p;
	int r;

	cache_bind3(c, ST_OW_GET, kind, ns, name);
	r = cache_get_row(c, ST_OW_GET, CACHE_T_OWNED, &p);
	if (r == 0)
		*ret = p;
	return r;
}

/* Free a cache_ns_get result. */
void
cache_ns_free(struct cache_ns *ns)
{
	free(ns);
}

/* Free a cache_instance_get result. */
void
cache_instance_free(struct cache_instance *in)
{
	free(in);
}

/* Free a cache_owned_get result. */
void
cache_owned_free(struct cache_owned *o)
{
	free(o);
}

enum cache_row { ROW_NS, ROW_INSTANCE, ROW_OWNED, ROW_TOMB };

/* Fill a tombstone view from the current row. */
static void
cache_row_tomb(sqlite3_stmt *st, struct cache_tomb *t)
{
	t->table = (enum cache_table)sqlite3_column_int(st, 0);
	t->key = col_s(st, 1);
	t->kind = col_s(st, 2);
	t->ns = col_s(st, 3);
	t->name = col_s(st, 4);
	t->gen = (uint64_t)sqlite3_column_int64(st, 5);
}

/* Step a bound query, handing each row to the typed callback. */
static int
cache_iterate(sqlite3_stmt *st, enum cache_row kind, void *cb, void *arg)
{
	union {
		struct cache_ns ns;
		struct cache_instance in;
		struct cache_owned ow;
		struct cache_tomb tb;
	} v;
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		switch (kind) {
		case ROW_NS:
			cache_row_ns(st, &v.ns);
			r = ((cache_ns_cb)cb)(&v.ns, arg);
			break;
		case ROW_INSTANCE:
			cache_row_instance(st, &v.in);
			r = ((cache_instance_cb)cb)(&v.in, arg);
			break;
		case ROW_OWNED:
			cache_row_owned(st, &v.ow);
			r = ((cache_owned_cb)cb)(&v.ow, arg);
			break;
		case ROW_TOMB:
			cache_row_tomb(st, &v.tb);
			r = ((cache_tomb_cb)cb)(&v.tb, arg);
			break;
		}
		if (r < 0)
			break;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = cache_errno(rc) ? cache_errno(rc) : -EIO;
	cache_done(st);
	return r;
}

/* Iterate Namespaces changed after since. */
int
cache_ns_foreach(struct cache *c, uint64_t since, cache_ns_cb cb, void *arg)
{
	sqlite3_stmt *st = c->st[since > 0 ? ST_NS_SINCE : ST_NS_ALL];

	if (sqlite3_stmt_busy(st))
		return -EBUSY;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)since);
	return cache_iterate(st, ROW_NS, (void *)cb, arg);
}

/* A page of Namespaces in name order. */
int
cache_ns_range(struct cache *c, const char *after, const char *from,
    unsigned limit, cache_ns_cb cb, void *arg)
{
	sqlite3_stmt *st = c->st[ST_NS_RANGE];

	if (sqlite3_stmt_busy(st))
		return -EBUSY;
	cache_bind_s(st, 1, after);
	cache_bind_s(st, 2, from);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)limit);
	return cache_iterate(st, ROW_NS, (void *)cb, arg);
}

/* Iterate instances (of one gvr, or all) changed after since. */
int
cache_instance_foreach(struct cache *c, const char *gvr, uint64_t since,
    cache_instance_cb cb, void *arg)
{
	sqlite3_stmt *st = c->st[gvr != NULL ? ST_IN_GVR : since > 0 ?
	    ST_IN_SINCE : ST_IN_ALL];

	if (sqlite3_stmt_busy(st))
		return -EBUSY;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)since);
	if (gvr != NULL)
		cache_bind(st, 2, gvr);
	return cache_iterate(st, ROW_INSTANCE, (void *)cb, arg);
}

/* Iterate owned objects, filtered by namespace and kind, after since. */
int
cache_owned_foreach(struct cache *c, const char *ns, const char *kind,
    uint64_t since, cache_owned_cb cb, void *arg)
{
	enum cache_stmt id;
	sqlite3_stmt *st;

	if (ns != NULL && kind != NULL)
		id = ST_OW_NSKIND;
	else if (ns != NULL)
		id = ST_OW_NS;
	else if (kind != NULL)
		id = ST_OW_KIND;
	else
		id = since > 0 ? ST_OW_SINCE : ST_OW_ALL;
	st = c->st[id];
	if (sqlite3_stmt_busy(st))
		return -EBUSY;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)since);
	if (ns != NULL)
		cache_bind(st, 2, ns);
	if (kind != NULL)
		cache_bind(st, 3, kind);
	return cache_iterate(st, ROW_OWNED, (void *)cb, arg);
}

/* Count rows per table and owned kind. */
int
cache_counts(struct cache *c, struct cache_counts *ret)
{
	struct cache_counts n = { 0 };
	sqlite3_stmt *st = c->st[ST_CNT_OW];
	int64_t v;
	int rc, r;

	if ((r = cache_scalar(c, ST_CNT_NS, &v)) < 0)
		return r;
	n.namespaces = (uint64_t)v;
	if ((r = cache_scalar(c, ST_CNT_IN, &v)) < 0)
		return r;
	n.instances = (uint64_t)v;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *k = col_s(st, 0);
		uint64_t cnt = (uint64_t)sqlite3_column_int64(st, 1);

		if (strcmp(k, CACHE_KIND_DEVICECLASS) == 0)
			n.deviceclasses = cnt;
		else if (strcmp(k, CACHE_KIND_CLAIMTEMPLATE) == 0)
			n.claimtemplates = cnt;
		else if (strcmp(k, CACHE_KIND_CLAIM) == 0)
			n.claims = cnt;
		else if (strcmp(k, CACHE_KIND_QUOTA) == 0)
			n.quotas = cnt;
	}
	cache_done(st);
	if (rc != SQLITE_DONE)
		return cache_errno(rc) ? cache_errno(rc) : -EIO;
	*ret = n;
	return 0;
}

/* Read the stored resourceVersion of one watch. */
int
cache_watch_get(struct cache *c, const char *key, char *buf, size_t len)
{
	sqlite3_stmt *st = c->st[ST_WS_GET];
	const char *rv;
	int r;

	cache_bind(st, 1, key);
	if ((r = cache_step_one(st)) < 0)
		return r;
	rv = col_s(st, 0);
	if (strlen(rv) >= len)
		r = -ENOSPC;
	else
		memcpy(buf, rv, strlen(rv) + 1);
	cache_done(st);
	return r;
}

/* Iterate tombstones newer than since. */
int
cache_tomb_foreach(struct cache *c, uint64_t since, cache_tomb_cb cb,
    void *arg)
{
	sqlite3_stmt *st = c->st[ST_TB_ALL];

	if (sqlite3_stmt_busy(st))
		return -EBUSY;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)since);
	return cache_iterate(st, ROW_TOMB, (void *)cb, arg);
}

/* The generation from which on deltas are complete. */
int
cache_horizon(struct cache *c, uint64_t *ret)
{
	int64_t v;
	int r;

	if ((r = cache_scalar(c, ST_HZ_GET, &v)) < 0)
		return r;
	*ret = (uint64_t)v;
	return 0;
}
