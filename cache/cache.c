/*
 * The SQLite cache: see cache.h (readers) and cache_write.h (the writer).
 * With usage.c (the usage ledger), the only files that include sqlite3.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache_write.h"
#include "cache/cache_sql.h"
#include "common/util.h"

#define CACHE_BUSY_MS	5000

struct cache {
	sqlite3		*db;
	sqlite3_stmt	*st[ST__COUNT];
	bool		 rdonly;
	bool		 recovered;
	bool		 in_tx;
	uint64_t	 gen;		/* newest generation handed out */
	uint64_t	 gen_at_begin;
};

/* The connection, for the other files of cache/. */
struct sqlite3 *
cache_handle(struct cache *c)
{
	return c->db;
}

/* Map an SQLite result code to a negative errno. */
static int
cache_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
		return -EINVAL;
	case SQLITE_TOOBIG:
		return -E2BIG;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	default:
		return -EIO;
	}
}

/* Reset a statement after use so it holds no read lock. */
static void
cache_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Run a statement that returns no rows. */
static int
cache_exec_st(struct cache *c, enum cache_stmt id)
{
	int rc = sqlite3_step(c->st[id]);

	cache_done(c->st[id]);
	return rc == SQLITE_DONE ? 0 : cache_errno(rc);
}

/* Bind text, NULL staying NULL. */
static int
cache_bind(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Bind text, NULL becoming "". */
static int
cache_bind_s(sqlite3_stmt *st, int i, const char *s)
{
	return sqlite3_bind_text(st, i, s != NULL ? s : "", -1, SQLITE_STATIC);
}

/* Whether a string is within max bytes (NULL counts as short). */
static bool
cache_fits(const char *s, size_t max)
{
	return s == NULL || strnlen(s, max + 1) <= max;
}

/* Read one integer from a one-row statement. */
static int
cache_scalar(struct cache *c, enum cache_stmt id, int64_t *ret)
{
	sqlite3_stmt *st = c->st[id];
	int rc = sqlite3_step(st);
	int r = 0;

	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		*ret = 0;
	else
		r = cache_errno(rc);
	cache_done(st);
	return r;
}

/* Apply connection settings that hold for readers and the writer. */
static int
cache_configure(struct cache *c)
{
	int on = 1, rc;

	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, CACHE_BUSY_MS);
	rc = sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, &on);
	if (rc != SQLITE_OK)
		return cache_errno(rc);
	rc = sqlite3_db_config(c->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, &on);
	if (rc != SQLITE_OK)
		return cache_errno(rc);
	if (c->rdonly)
		rc = sqlite3_exec(c->db, "PRAGMA query_only = 1", NULL, NULL,
		    NULL);
	else
		rc = sqlite3_exec(c->db, "PRAGMA journal_mode = WAL;"
		    "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
	return cache_errno(rc);
}

/* Read PRAGMA user_version. */
static int
cache_user_version(struct cache *c, int *ret)
{
	sqlite3_stmt *st;
	int rc, r = 0;

	rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return cache_errno(rc);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int(st, 0);
	else
		r = cache_errno(rc) ? cache_errno(rc) : -EIO;
	sqlite3_finalize(st);
	return r;
}

/*
 * Writer: bring the schema to CACHE_SCHEMA_VERSION in one transaction. A
 * new file starts its generations at the wall clock in microseconds, so a
 * rebuilt cache never reuses the generations of the one it replaced.
 */
static int
cache_migrate(struct cache *c)
{
	struct timespec ts;
	char sql[160];
	int64_t base;
	bool fresh;
	int v, rc, r;

	if ((r = cache_user_version(c, &v)) < 0)
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	base = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	fresh = v == 0;
	if (v == CACHE_SCHEMA_VERSION)
		return 0;
	if (v < 0 || v > CACHE_SCHEMA_VERSION)
		return -EPROTO;
	rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return cache_errno(rc);
	for (; v < CACHE_SCHEMA_VERSION; v++) {
		rc = sqlite3_exec(c->db, cache_migrations[v], NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			goto fail;
	}
	if (fresh) {
		snprintf(sql, sizeof(sql), "INSERT INTO meta(key, value)"
		    " VALUES('generation', %lld), ('horizon', %lld)",
		    (long long)base, (long long)base);
		rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			goto fail;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v);
	rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto fail;
	rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto fail;
	return 0;
fail:
	r = (rc & 0xff) == SQLITE_ERROR ? -EPROTO : cache_errno(rc);
	sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
	return r < 0 ? r : -EIO;
}

/* Writer: PRAGMA quick_check must answer exactly "ok". */
static int
cache_quick_check(struct cache *c)
{
	sqlite3_stmt *st;
	int rc, r = -EBADMSG;

	rc = sqlite3_prepare_v2(c->db, "PRAGMA quick_check(1)", -1, &st,
	    NULL);
	if (rc != SQLITE_OK)
		return cache_errno(rc);
	if (sqlite3_step(st) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		if (s != NULL && strcmp(s, "ok") == 0)
			r = 0;
	}
	sqlite3_finalize(st);
	return r;
}

/* Prepare every statement of the table; failing means a foreign schema. */
static int
cache_prepare(struct cache *c)
{
	int i, rc;

	for (i = 0; i < ST__COUNT; i++) {
		rc = sqlite3_prepare_v3(c->db, cache_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &c->st[i], NULL);
		if (rc == SQLITE_NOMEM)
			return -ENOMEM;
		if (rc != SQLITE_OK)
			return (rc & 0xff) == SQLITE_ERROR ? -EPROTO :
			    cache_errno(rc) ? cache_errno(rc) : -EIO;
	}
	return 0;
}

/* Close the connection and finalize its statements. */
static void
cache_close(struct cache *c)
{
	int i;

	for (i = 0; i < ST__COUNT; i++) {
		sqlite3_finalize(c->st[i]);
		c->st[i] = NULL;
	}
	sqlite3_close(c->db);
	c->db = NULL;
}

/* Open, configure, migrate and prepare; the generation is loaded too. */
static int
cache_try_open(struct cache *c, const char *path)
{
	int flags, rc, r, v;
	int64_t gen;

	flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE |
	    SQLITE_OPEN_NOFOLLOW;
	flags |= c->rdonly ? SQLITE_OPEN_READONLY :
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(path, &c->db, flags, NULL);
	if (rc != SQLITE_OK)
		return cache_errno(rc) ? cache_errno(rc) : -EIO;
	if ((r = cache_configure(c)) < 0)
		return r;
	if (c->rdonly) {
		if ((r = cache_user_version(c, &v)) < 0)
			return r;
		if (v == 0)
			return -EAGAIN;
		if (v != CACHE_SCHEMA_VERSION)
			return -EPROTO;
	} else {
		if ((r = cache_quick_check(c)) < 0)
			return r;
		if ((r = cache_migrate(c)) < 0)
			return r;
	}
	if ((r = cache_prepare(c)) < 0)
		return r;
	if ((r = cache_scalar(c, ST_GEN_GET, &gen)) < 0)
		return r;
	c->gen = (uint64_t)gen;
	return 0;
}

/* Move a bad cache file aside and drop its WAL and shared-memory files. */
static int
cache_move_aside(const char *path)
{
	char aside[4096], side[4096];

	if (snprintf(aside, sizeof(aside), "%s.corrupt.%lld", path,
	    (long long)time(NULL)) >= (int)sizeof(aside))
		return -ENAMETOOLONG;
	if (rename(path, aside) < 0 && errno != ENOENT)
		return -errno;
	snprintf(side, sizeof(side), "%s-wal", path);
	if (unlink(side) < 0 && errno != ENOENT)
		return -errno;
	snprintf(side, sizeof(side), "%s-shm", path);
	if (unlink(side) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Open the cache; see cache.h. */
int
cache_open(const char *path, int flags, struct cache **ret)
{
	struct cache *c;
	int r;

	if (path == NULL || *path == '\0')
		return -EINVAL;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	c->rdonly = (flags & CACHE_OPEN_RDONLY) != 0;
	r = cache_try_open(c, path);
	if (!c->rdonly && (r == -EBADMSG || r == -EPROTO)) {
		cache_close(c);
		if ((r = cache_move_aside(path)) < 0)
			goto fail;
		c->recovered = true;
		r = cache_try_open(c, path);
	}
	if (r < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	cache_close(c);
	free(c);
	return r;
}

/* Close the cache; a transaction still open is rolled back. */
void
cache_free(struct cache *c)
{
	if (c == NULL)
		return;
	if (c->in_tx)
		cache_rollback(c);
	cache_close(c);
	free(c);
}

/* Whether cache_open rebuilt a corrupt file. */
bool
cache_recovered(const struct cache *c)
{
	return c->recovered;
}

/* Start a transaction: a write lock for the writer, a snapshot for readers. */
int
cache_begin(struct cache *c)
{
	int r;

	if (c->in_tx)
		return -EBUSY;
	r = cache_exec_st(c, c->rdonly ? ST_BEGIN : ST_BEGIN_W);
	if (r < 0)
		return r;
	c->in_tx = true;
	c->gen_at_begin = c->gen;
	return 0;
}

/* Store the generation (writer) and commit. */
int
cache_commit(struct cache *c)
{
	sqlite3_stmt *st = c->st[ST_GEN_SET];
	int r;

	if (!c->in_tx)
		return -EINVAL;
	if (!c->rdonly && c->gen != c->gen_at_begin) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)c->gen);
		if ((r = cache_exec_st(c, ST_GEN_SET)) < 0)
			return r;
	}
	if ((r = cache_exec_st(c, ST_COMMIT)) < 0)
		return r;
	c->in_tx = false;
	return 0;
}

/* Roll back the open transaction and the generations it handed out. */
void
cache_rollback(struct cache *c)
{
	if (!c->in_tx)
		return;
	(void)cache_exec_st(c, ST_ROLLBACK);
	c->in_tx = false;
	c->gen = c->gen_at_begin;
}

/* The newest generation; readers read it from the file. */
int
cache_generation(struct cache *c, uint64_t *ret_gen)
{
	int64_t v;
	int r;

	if (!c->rdonly) {
		*ret_gen = c->gen;
		return 0;
	}
	if ((r = cache_scalar(c, ST_GEN_GET, &v)) < 0)
		return r;
	*ret_gen = (uint64_t)v;
	return 0;
}

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

/* Bind (a, b, c) as parameters 1..3 of statement id. */
static void
cache_bind3(struct cache *c, enum cache_stmt id, const char *a,
    const char *b, const char *d)
{
	cache_bind(c->st[id], 1, a);
	cache_bind(c->st[id], 2, b);
	cache_bind(c->st[id], 3, d);
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
	sqlite3_stmt *st = c->st[ST_NS_ALL];

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
	sqlite3_stmt *st = c->st[gvr != NULL ? ST_IN_GVR : ST_IN_ALL];

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
		id = ST_OW_ALL;
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
