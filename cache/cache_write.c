/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SQLite cache, the writer's half (see cache_write.h): puts and deletes
 * with their tombstones, watch state, tombstone pruning.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache_impl.h"
#include "common/util.h"

/* Start a private transaction unless the caller has one open. */
static int
cache_tx_enter(struct cache *c, bool *own)
{
	*own = !c->in_tx;
	if (c->rdonly)
		return -EROFS;
	return *own ? cache_begin(c) : 0;
}

/* End what cache_tx_enter started: commit on success, else roll back. */
static int
cache_tx_leave(struct cache *c, bool own, int r)
{
	if (own && r == 0)
		r = cache_commit(c);
	if (own && r < 0)
		cache_rollback(c);
	return r;
}

/* Step a bound write statement; 1 when it changed a row, 0 if not. */
static int
cache_step_write(struct cache *c, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st), r;

	r = rc == SQLITE_DONE ? (sqlite3_changes(c->db) > 0) : cache_errno(rc);
	cache_done(st);
	return r < 0 || rc == SQLITE_DONE ? r : -EIO;
}

/* Bind a row key (table, key, ns, name) as parameters 1..4 of st. */
static void
cache_bind_key(sqlite3_stmt *st, const struct cache_tomb *k)
{
	sqlite3_bind_int(st, 1, (int)k->table);
	cache_bind(st, 2, k->key);
	cache_bind(st, 3, k->ns);
	cache_bind(st, 4, k->name);
}

/*
 * Run a bound upsert (parameter genidx takes the generation); when it
 * changed the row, the row's tombstone goes and *ret_gen gets the new
 * generation, else 0.
 */
static int
cache_put(struct cache *c, enum cache_stmt id, int genidx,
    const struct cache_tomb *k, uint64_t *ret_gen)
{
	uint64_t gen = 0;
	bool own;
	int r;

	if ((r = cache_tx_enter(c, &own)) < 0) {
		cache_done(c->st[id]);
		return r;
	}
	sqlite3_bind_int64(c->st[id], genidx, (sqlite3_int64)(c->gen + 1));
	if ((r = cache_step_write(c, c->st[id])) == 1) {
		gen = ++c->gen;
		cache_bind_key(c->st[ST_TB_CLR], k);
		r = cache_step_write(c, c->st[ST_TB_CLR]);
	}
	if ((r = cache_tx_leave(c, own, r < 0 ? r : 0)) < 0)
		return r;
	if (ret_gen != NULL)
		*ret_gen = gen;
	return 0;
}

/*
 * Delete the row of key k: its tombstone statement tomb (bound here: the
 * row key as 1..3 or 1 for namespaces, the generation last) copies it into
 * tombstones first, then statement del (already bound) removes it.
 */
static int
cache_del(struct cache *c, enum cache_stmt tomb, int genidx,
    enum cache_stmt del, uint64_t *ret_gen)
{
	uint64_t gen = 0;
	bool own;
	int r;

	if ((r = cache_tx_enter(c, &own)) < 0) {
		cache_done(c->st[tomb]);
		cache_done(c->st[del]);
		return r;
	}
	sqlite3_bind_int64(c->st[tomb], genidx, (sqlite3_int64)(c->gen + 1));
	if ((r = cache_step_write(c, c->st[tomb])) == 1) {
		gen = ++c->gen;
		r = cache_step_write(c, c->st[del]);
	} else
		cache_done(c->st[del]);
	if ((r = cache_tx_leave(c, own, r < 0 ? r : 0)) < 0)
		return r;
	if (ret_gen != NULL)
		*ret_gen = gen;
	return 0;
}

/* Insert or update a Namespace. */
int
cache_ns_put(struct cache *c, const struct cache_ns *ns, uint64_t *ret_gen)
{
	sqlite3_stmt *st = c->st[ST_NS_PUT];
	struct cache_tomb k = { CACHE_T_NS, "", "", ns->name, ns->name, 0 };

	if (ns->name == NULL || *ns->name == '\0' ||
	    !cache_fits(ns->name, CACHE_KEY_MAX) ||
	    !cache_fits(ns->uid, CACHE_KEY_MAX) ||
	    !cache_fits(ns->rv, CACHE_RV_MAX) ||
	    !cache_fits(ns->phase, CACHE_KEY_MAX) ||
	    !cache_fits(ns->resolved, CACHE_JSON_MAX) ||
	    !cache_fits(ns->labels, CACHE_JSON_MAX) ||
	    !cache_fits(ns->annotations, CACHE_JSON_MAX))
		return -EINVAL;
	cache_bind(st, 1, ns->name);
	cache_bind_s(st, 2, ns->uid);
	cache_bind_s(st, 3, ns->rv);
	cache_bind_s(st, 4, ns->phase);
	sqlite3_bind_int(st, 5, ns->isolated ? 1 : 0);
	cache_bind(st, 6, ns->resolved);
	cache_bind(st, 7, ns->labels != NULL ? ns->labels : "{}");
	cache_bind(st, 8, ns->annotations != NULL ? ns->annotations : "{}");
	return cache_put(c, ST_NS_PUT, 9, &k, ret_gen);
}

/* Insert or update an instance custom resource. */
int
cache_instance_put(struct cache *c, const struct cache_instance *in,
    uint64_t *ret_gen)
{
	sqlite3_stmt *st = c->st[ST_IN_PUT];
	struct cache_tomb k = { CACHE_T_INSTANCE, in->gvr, "", in->ns,
	    in->name, 0 };

	if (in->gvr == NULL || *in->gvr == '\0' || in->ns == NULL ||
	    in->name == NULL || *in->name == '\0' ||
	    !cache_fits(in->gvr, CACHE_GVR_MAX) ||
	    !cache_fits(in->kind, CACHE_KEY_MAX) ||
	    !cache_fits(in->ns, CACHE_KEY_MAX) ||
	    !cache_fits(in->name, CACHE_KEY_MAX) ||
	    !cache_fits(in->uid, CACHE_KEY_MAX) ||
	    !cache_fits(in->rv, CACHE_RV_MAX) ||
	    !cache_fits(in->created, CACHE_RV_MAX) ||
	    !cache_fits(in->isolation, CACHE_JSON_MAX) ||
	    !cache_fits(in->deleted, CACHE_RV_MAX))
		return -EINVAL;
	cache_bind(st, 1, in->gvr);
	cache_bind_s(st, 2, in->kind);
	cache_bind(st, 3, in->ns);
	cache_bind(st, 4, in->name);
	cache_bind_s(st, 5, in->uid);
	cache_bind_s(st, 6, in->rv);
	sqlite3_bind_int64(st, 7, in->generation);
	cache_bind_s(st, 8, in->created);
	cache_bind(st, 9, in->isolation);
	cache_bind(st, 10, in->deleted);
	return cache_put(c, ST_IN_PUT, 11, &k, ret_gen);
}

/* Insert or update an owned object. */
int
cache_owned_put(struct cache *c, const struct cache_owned *o,
    uint64_t *ret_gen)
{
	sqlite3_stmt *st = c->st[ST_OW_PUT];
	struct cache_tomb k = { CACHE_T_OWNED, o->kind, "", o->ns, o->name,
	    0 };

	if (o->kind == NULL || *o->kind == '\0' || o->ns == NULL ||
	    o->name == NULL || *o->name == '\0' ||
	    !cache_fits(o->kind, CACHE_KEY_MAX) ||
	    !cache_fits(o->ns, CACHE_KEY_MAX) ||
	    !cache_fits(o->name, CACHE_KEY_MAX) ||
	    !cache_fits(o->uid, CACHE_KEY_MAX) ||
	    !cache_fits(o->rv, CACHE_RV_MAX) ||
	    !cache_fits(o->data, CACHE_JSON_MAX))
		return -EINVAL;
	cache_bind(st, 1, o->kind);
	cache_bind(st, 2, o->ns);
	cache_bind(st, 3, o->name);
	cache_bind_s(st, 4, o->uid);
	cache_bind_s(st, 5, o->rv);
	cache_bind(st, 6, o->data != NULL ? o->data : "{}");
	return cache_put(c, ST_OW_PUT, 7, &k, ret_gen);
}

/* Delete a Namespace, leaving a tombstone. */
int
cache_ns_delete(struct cache *c, const char *name, uint64_t *ret_gen)
{
	if (name == NULL)
		return -EINVAL;
	cache_bind(c->st[ST_TB_NS], 1, name);
	cache_bind(c->st[ST_NS_DEL], 1, name);
	return cache_del(c, ST_TB_NS, 2, ST_NS_DEL, ret_gen);
}

/* Delete an instance, leaving a tombstone. */
int
cache_instance_delete(struct cache *c, const char *gvr, const char *ns,
    const char *name, uint64_t *ret_gen)
{
	if (gvr == NULL || ns == NULL || name == NULL)
		return -EINVAL;
	cache_bind3(c, ST_TB_IN, gvr, ns, name);
	cache_bind3(c, ST_IN_DEL, gvr, ns, name);
	return cache_del(c, ST_TB_IN, 4, ST_IN_DEL, ret_gen);
}

/* Delete an owned object, leaving a tombstone. */
int
cache_owned_delete(struct cache *c, const char *kind, const char *ns,
    const char *name, uint64_t *ret_gen)
{
	if (kind == NULL || ns == NULL || name == NULL)
		return -EINVAL;
	cache_bind3(c, ST_TB_OW, kind, ns, name);
	cache_bind3(c, ST_OW_DEL, kind, ns, name);
	return cache_del(c, ST_TB_OW, 4, ST_OW_DEL, ret_gen);
}

/* Store (or with "" forget) the resourceVersion of one watch. */
int
cache_watch_set(struct cache *c, const char *key, const char *rv)
{
	sqlite3_stmt *st;
	bool own;
	int r;

	if (key == NULL || rv == NULL || !cache_fits(key, CACHE_GVR_MAX + 16) ||
	    !cache_fits(rv, CACHE_RV_MAX))
		return -EINVAL;
	if ((r = cache_tx_enter(c, &own)) < 0)
		return r;
	st = c->st[*rv == '\0' ? ST_WS_DEL : ST_WS_SET];
	cache_bind(st, 1, key);
	if (*rv != '\0')
		cache_bind(st, 2, rv);
	r = cache_step_write(c, st);
	return cache_tx_leave(c, own, r < 0 ? r : 0);
}

/* Keep the newest keep tombstones; the horizon rises past the others. */
int
cache_tomb_prune(struct cache *c, uint64_t keep)
{
	sqlite3_stmt *st = c->st[ST_TB_NTH];
	int64_t cut = 0;
	bool own;
	int r;

	if ((r = cache_tx_enter(c, &own)) < 0)
		return r;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)keep);
	if ((r = cache_scalar(c, ST_TB_NTH, &cut)) == 0 && cut > 0) {
		sqlite3_bind_int64(c->st[ST_TB_PRUNE], 1, cut);
		r = cache_step_write(c, c->st[ST_TB_PRUNE]);
		if (r >= 0) {
			sqlite3_bind_int64(c->st[ST_HZ_SET], 1, cut);
			r = cache_step_write(c, c->st[ST_HZ_SET]);
		}
	}
	return cache_tx_leave(c, own, r < 0 ? r : 0);
}
