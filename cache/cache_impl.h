/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache's internals, shared by the files of cache/ only: the handle and
 * the small helpers over SQLite that cache.c defines.
 */
#ifndef KPGPUD_CACHE_IMPL_H
#define KPGPUD_CACHE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "cache/cache_sql.h"
#include "cache/cache_write.h"

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

/* Map an SQLite result code to a negative errno. */
int	 cache_errno(int rc);
/* Reset a statement after use so it holds no read lock. */
void	 cache_done(sqlite3_stmt *st);
/* Run a statement that returns no rows. */
int	 cache_exec_st(struct cache *c, enum cache_stmt id);
/* Bind text, NULL staying NULL. */
int	 cache_bind(sqlite3_stmt *st, int i, const char *s);
/* Bind text, NULL becoming "". */
int	 cache_bind_s(sqlite3_stmt *st, int i, const char *s);
/* Bind (a, b, c) as parameters 1..3 of statement id. */
void	 cache_bind3(struct cache *c, enum cache_stmt id, const char *a,
	    const char *b, const char *d);
/* Whether a string is within max bytes (NULL counts as short). */
bool	 cache_fits(const char *s, size_t max);
/* Read one integer from a one-row statement. */
int	 cache_scalar(struct cache *c, enum cache_stmt id, int64_t *ret);

#endif
