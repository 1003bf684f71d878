/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SQLite cache, opening and migrating it, transactions and the helpers
 * of cache/ (see cache_impl.h); the writer's functions are in cache_write.c,
 * the readers' in cache_read.c. Public API: cache.h (readers) and
 * cache_write.h (the writer). Only the files of cache/ include sqlite3.h.
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

#include "cache/cache_impl.h"
#include "common/util.h"

/* The connection, for the other files of cache/. */
struct sqlite3 *
cache_handle(struct cache *c)
{
	return c->db;
}

/* Map an SQLite result code to a negative errno. */
int
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
void
cache_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Run a statement that returns no rows. */
int
cache_exec_st(struct cache *c, enum cache_stmt id)
{
	int rc = sqlite3_step(c->st[id]);

	cache_done(c->st[id]);
	return rc == SQLITE_DONE ? 0 : cache_errno(rc);
}

/* Bind text, NULL staying NULL. */
int
cache_bind(sqlite3_stmt *st, int i, const char *s)
{
	if (s == NULL)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Bind text, NULL becoming "". */
int
cache_bind_s(sqlite3_stmt *st, int i, const char *s)
{
	return sqlite3_bind_text(st, i, s != NULL ? s : "", -1, SQLITE_STATIC);
}

/* Bind (a, b, c) as parameters 1..3 of statement id. */
void
cache_bind3(struct cache *c, enum cache_stmt id, const char *a,
    const char *b, const char *d)
{
	cache_bind(c->st[id], 1, a);
	cache_bind(c->st[id], 2, b);
	cache_bind(c->st[id], 3, d);
}

/* Whether a string is within max bytes (NULL counts as short). */
bool
cache_fits(const char *s, size_t max)
{
	return s == NULL || strnlen(s, max + 1) <= max;
}

/* Read one integer from a one-row statement. */
int
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
