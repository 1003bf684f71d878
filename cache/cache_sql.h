/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache's SQL, private to cache/: the statement ids of the cache and of
 * its usage ledger; the text of the migrations and statements is in
 * cache_sql.c. Included by the files of cache/ only.
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
	ST_NS_SINCE, ST_IN_SINCE, ST_OW_SINCE,
	ST__COUNT
};

/* The usage ledger's statements (usage.c). */
enum usage_stmt {
	U_OPEN_GET, U_OPEN_ALL, U_ADD, U_CLOSE, U_PREV_END,
	U_CONS_ADD, U_CONS_TIMES, U_POD_SET, U_POD_SPANS,
	U_SET_START, U_SET_START_C, U_SET_END,
	U_ALIVE_GET, U_ALIVE_SET,
	U_Q_TENANT, U_Q_CLAIM, U_Q_POD, U_Q_DEVICE, U_HELD,
	U_OLD, U_HOUR_ADD, U_DEL_OLD, U_DEL_OLD_C, U_CNT, U_CNT_H,
	U_LOST_ADD, U_LOST_SUM, U_CLOSED_INC, U_CLOSED_GET, U_CLOSED_SET,
	U_DEL_HOURS, U_HAS_CLAIM, U_POD_PUT, U_POD_GET, U_POD_DEL, U_POD_ALL,
	U_IV_SUMS, U_OPEN_SUMS, U_HOURS_BEFORE, U_IV_HAS,
	U__COUNT
};

/* Schema migrations: entry i takes user_version i to i + 1. */
extern const char *const cache_migrations[CACHE_SCHEMA_VERSION];
/* Every statement, by id, prepared once at open. */
extern const char *const cache_sql[ST__COUNT];
/* Every statement of the usage ledger, by id, prepared by usage.c. */
extern const char *const usage_sql[U__COUNT];

/* The connection, for the other files of cache/ (usage.c). */
struct sqlite3;
struct sqlite3	*cache_handle(struct cache *c);

#endif
