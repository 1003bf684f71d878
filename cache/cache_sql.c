/*
 * The cache's SQL text: schema migrations and the table of every statement,
 * prepared once at open (see cache_sql.h). No SQLite API here.
 */
#include "cache/cache.h"
#include "cache/cache_sql.h"
#include "cache/usage_sql.h"

/* Schema migrations: entry i takes user_version i to i + 1. */
const char *const cache_migrations[CACHE_SCHEMA_VERSION] = {
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)"
	" WITHOUT ROWID;"
	"CREATE TABLE namespaces(name TEXT PRIMARY KEY, uid TEXT NOT NULL,"
	" rv TEXT NOT NULL, phase TEXT NOT NULL, isolated INTEGER NOT NULL,"
	" resolved TEXT, labels TEXT NOT NULL, annotations TEXT NOT NULL,"
	" gen INTEGER NOT NULL) WITHOUT ROWID;"
	"CREATE INDEX namespaces_gen ON namespaces(gen);"
	"CREATE TABLE instances(gvr TEXT NOT NULL, ns TEXT NOT NULL,"
	" name TEXT NOT NULL, kind TEXT NOT NULL, uid TEXT NOT NULL,"
	" rv TEXT NOT NULL, generation INTEGER NOT NULL,"
	" created TEXT NOT NULL, isolation TEXT, deleted TEXT,"
	" gen INTEGER NOT NULL, PRIMARY KEY(gvr, ns, name)) WITHOUT ROWID;"
	"CREATE INDEX instances_gen ON instances(gen);"
	"CREATE TABLE owned(kind TEXT NOT NULL, ns TEXT NOT NULL,"
	" name TEXT NOT NULL, uid TEXT NOT NULL, rv TEXT NOT NULL,"
	" data TEXT NOT NULL, gen INTEGER NOT NULL,"
	" PRIMARY KEY(kind, ns, name)) WITHOUT ROWID;"
	"CREATE INDEX owned_ns ON owned(ns, kind, name);"
	"CREATE INDEX owned_gen ON owned(gen);"
	"CREATE TABLE watch_state(key TEXT PRIMARY KEY, rv TEXT NOT NULL)"
	" WITHOUT ROWID;"
	"CREATE TABLE tombstones(tbl INTEGER NOT NULL, key TEXT NOT NULL,"
	" kind TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,"
	" gen INTEGER NOT NULL, PRIMARY KEY(tbl, key, ns, name))"
	" WITHOUT ROWID;"
	"CREATE INDEX tombstones_gen ON tombstones(gen);",
	/* 1 -> 2: the usage ledger (cache/usage.c) */
	USAGE_SCHEMA,
	/* 2 -> 3: the ledger's intervals by claim name */
	USAGE_SCHEMA_3,
};

#define NS_COLS "name, uid, rv, phase, isolated, resolved, labels," \
	" annotations, gen"
#define IN_COLS "gvr, kind, ns, name, uid, rv, generation, created," \
	" isolation, deleted, gen"
#define OW_COLS "kind, ns, name, uid, rv, data, gen"
#define TB_COLS "tbl, key, kind, ns, name, gen"
#define TB_UPSERT " ON CONFLICT(tbl, key, ns, name) DO UPDATE" \
	" SET kind = excluded.kind, gen = excluded.gen"

/* Every statement, prepared once at open. */
const char *const cache_sql[ST__COUNT] = {
	[ST_BEGIN] = "BEGIN",
	[ST_BEGIN_W] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_GEN_GET] = "SELECT value FROM meta WHERE key = 'generation'",
	[ST_GEN_SET] = "INSERT INTO meta(key, value) VALUES('generation', ?1)"
	    " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
	[ST_NS_PUT] = "INSERT INTO namespaces(" NS_COLS ")"
	    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
	    " ON CONFLICT(name) DO UPDATE SET uid = excluded.uid,"
	    " rv = excluded.rv, phase = excluded.phase,"
	    " isolated = excluded.isolated, resolved = excluded.resolved,"
	    " labels = excluded.labels, annotations = excluded.annotations,"
	    " gen = excluded.gen"
	    " WHERE rv IS NOT excluded.rv OR uid IS NOT excluded.uid",
	[ST_NS_DEL] = "DELETE FROM namespaces WHERE name = ?1",
	[ST_NS_GET] = "SELECT " NS_COLS " FROM namespaces WHERE name = ?1",
	[ST_NS_ALL] = "SELECT " NS_COLS " FROM namespaces WHERE gen > ?1"
	    " ORDER BY name",
	[ST_NS_RANGE] = "SELECT " NS_COLS " FROM namespaces WHERE name > ?1"
	    " AND name >= ?2 ORDER BY name LIMIT ?3",
	[ST_IN_PUT] = "INSERT INTO instances(" IN_COLS ")"
	    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
	    " ON CONFLICT(gvr, ns, name) DO UPDATE SET kind = excluded.kind,"
	    " uid = excluded.uid, rv = excluded.rv,"
	    " generation = excluded.generation, created = excluded.created,"
	    " isolation = excluded.isolation, deleted = excluded.deleted,"
	    " gen = excluded.gen"
	    " WHERE rv IS NOT excluded.rv OR uid IS NOT excluded.uid",
	[ST_IN_DEL] = "DELETE FROM instances WHERE gvr = ?1 AND ns = ?2"
	    " AND name = ?3",
	[ST_IN_GET] = "SELECT " IN_COLS " FROM instances WHERE gvr = ?1"
	    " AND ns = ?2 AND name = ?3",
	[ST_IN_ALL] = "SELECT " IN_COLS " FROM instances WHERE gen > ?1"
	    " ORDER BY gvr, ns, name",
	[ST_IN_GVR] = "SELECT " IN_COLS " FROM instances WHERE gvr = ?2"
	    " AND gen > ?1 ORDER BY gvr, ns, name",
	[ST_OW_PUT] = "INSERT INTO owned(" OW_COLS ")"
	    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"
	    " ON CONFLICT(kind, ns, name) DO UPDATE SET uid = excluded.uid,"
	    " rv = excluded.rv, data = excluded.data, gen = excluded.gen"
	    " WHERE data IS NOT excluded.data OR uid IS NOT excluded.uid",
	[ST_OW_DEL] = "DELETE FROM owned WHERE kind = ?1 AND ns = ?2"
	    " AND name = ?3",
	[ST_OW_GET] = "SELECT " OW_COLS " FROM owned WHERE kind = ?1"
	    " AND ns = ?2 AND name = ?3",
	[ST_OW_ALL] = "SELECT " OW_COLS " FROM owned WHERE gen > ?1"
	    " ORDER BY ns, kind, name",
	[ST_OW_NS] = "SELECT " OW_COLS " FROM owned WHERE ns = ?2"
	    " AND gen > ?1 ORDER BY ns, kind, name",
	[ST_OW_KIND] = "SELECT " OW_COLS " FROM owned WHERE kind = ?3"
	    " AND gen > ?1 ORDER BY ns, kind, name",
	[ST_OW_NSKIND] = "SELECT " OW_COLS " FROM owned WHERE ns = ?2"
	    " AND kind = ?3 AND gen > ?1 ORDER BY ns, kind, name",
	[ST_CNT_NS] = "SELECT count(*) FROM namespaces",
	[ST_CNT_IN] = "SELECT count(*) FROM instances",
	[ST_CNT_OW] = "SELECT kind, count(*) FROM owned GROUP BY kind",
	[ST_WS_GET] = "SELECT rv FROM watch_state WHERE key = ?1",
	[ST_WS_SET] = "INSERT INTO watch_state(key, rv) VALUES(?1, ?2)"
	    " ON CONFLICT(key) DO UPDATE SET rv = excluded.rv",
	[ST_WS_DEL] = "DELETE FROM watch_state WHERE key = ?1",
	[ST_TB_NS] = "INSERT INTO tombstones(" TB_COLS ") SELECT 1, '',"
	    " 'Namespace', name, name, ?2 FROM namespaces WHERE name = ?1"
	    TB_UPSERT,
	[ST_TB_IN] = "INSERT INTO tombstones(" TB_COLS ") SELECT 2, gvr,"
	    " kind, ns, name, ?4 FROM instances WHERE gvr = ?1 AND ns = ?2"
	    " AND name = ?3" TB_UPSERT,
	[ST_TB_OW] = "INSERT INTO tombstones(" TB_COLS ") SELECT 4, kind,"
	    " kind, ns, name, ?4 FROM owned WHERE kind = ?1 AND ns = ?2"
	    " AND name = ?3" TB_UPSERT,
	[ST_TB_CLR] = "DELETE FROM tombstones WHERE tbl = ?1 AND key = ?2"
	    " AND ns = ?3 AND name = ?4",
	[ST_TB_ALL] = "SELECT " TB_COLS " FROM tombstones WHERE gen > ?1"
	    " ORDER BY gen",
	[ST_TB_NTH] = "SELECT gen FROM tombstones ORDER BY gen DESC"
	    " LIMIT 1 OFFSET ?1",
	[ST_TB_PRUNE] = "DELETE FROM tombstones WHERE gen <= ?1",
	[ST_HZ_GET] = "SELECT value FROM meta WHERE key = 'horizon'",
	[ST_HZ_SET] = "INSERT INTO meta(key, value) VALUES('horizon', ?1)"
	    " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
};
