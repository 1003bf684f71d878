/*
 * The cache's SQL, private to cache/: the statement ids and the text of the
 * migrations and statements (cache_sql.c). Included by the files of cache/ only.
 */
#ifndef KPGPUD_CACHE_SQL_H
#define KPGPUD_CACHE_SQL_H

#include "cache/cache.h"

enum cache_stmt {
	ST_BEGIN, ST_BEGIN_W, ST_COMMIT, ST_ROLLBACK,
	ST_GEN_GET, ST_GEN_SET,
	ST_NS_PUT, ST_NS_DEL, ST_NS_GET, ST_NS_ALL, ST_NS_RANGE,
	ST_IN_PUT, ST_IN_DEL, ST_IN_GET, ST_IN_ALL, ST_IN_GVR,
	ST_OW_PUT, ST_OW_DEL, ST_OW_GET, ST_OW_ALL, ST_OW_NS, ST_OW_KIND,
	ST_OW_NSKIND,
	ST_CNT_NS, ST_CNT_IN, ST_CNT_OW,
	ST_WS_GET, ST_WS_SET, ST_WS_DEL,
	ST_TB_NS, ST_TB_IN, ST_TB_OW, ST_TB_CLR, ST_TB_ALL, ST_TB_NTH,
	ST_TB_PRUNE, ST_HZ_GET, ST_HZ_SET,
	ST__COUNT
};

/* Schema migrations: entry i takes user_version i to i + 1. */
extern const char *const cache_migrations[CACHE_SCHEMA_VERSION];
/* Every statement, by id, prepared once at open. */
extern const char *const cache_sql[ST__COUNT];

/* The connection, for the other files of cache/ (usage.c). */
struct sqlite3;
struct sqlite3	*cache_handle(struct cache *c);

#endif
