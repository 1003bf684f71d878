/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache's SQL text: schema migrations and the tables of every statement
 * of the cache and of its usage ledger, prepared once at open (see
 * cache_sql.h). No SQLite API here.
 */
#include "cache/cache.h"
#include "cache/cache_sql.h"

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
	/*
	 * 1 -> 2: the usage ledger (cache/usage.c).
	 *
	 * usage_intervals: one row per device of one allocation interval of a
	 * claim, keyed (claim uid, start, device index) so that re-observing
	 * an allocation never adds a row. end_us NULL while open.
	 * start_how/end_how are enum ledger_how; lo_us is the earliest the
	 * start can be (the last moment sync was alive before a gap; = start
	 * when observed), hi_us the latest the end can be (the relist time
	 * after a gap; = end when observed). usage_consumers: the Pods that
	 * reserved the claim during the interval, with their start and finish
	 * once known. usage_hourly: closed intervals past retention, rolled up
	 * per tenant, class, profile and hour. usage_lost: what a rebuilt
	 * cache could not carry over. usage_pods (3): the start and finish of
	 * every Pod that uses claims, whichever of a claim and its Pods is
	 * seen first.
	 */
	"CREATE TABLE usage_intervals(claim_uid TEXT NOT NULL,"
	" start_us INTEGER NOT NULL, dev INTEGER NOT NULL, ns TEXT NOT NULL,"
	" instance TEXT NOT NULL, claim TEXT NOT NULL, driver TEXT NOT NULL,"
	" pool TEXT NOT NULL, device TEXT NOT NULL,"
	" device_class TEXT NOT NULL, profile TEXT NOT NULL,"
	" share REAL NOT NULL, sig TEXT NOT NULL, end_us INTEGER,"
	" start_how INTEGER NOT NULL, end_how INTEGER,"
	" lo_us INTEGER NOT NULL, hi_us INTEGER,"
	" PRIMARY KEY(claim_uid, start_us, dev)) WITHOUT ROWID;"
	"CREATE INDEX usage_open ON usage_intervals(claim_uid)"
	" WHERE end_us IS NULL;"
	"CREATE INDEX usage_dev ON usage_intervals(driver, pool, device);"
	"CREATE INDEX usage_end ON usage_intervals(end_us);"
	"CREATE TABLE usage_consumers(claim_uid TEXT NOT NULL,"
	" start_us INTEGER NOT NULL, pod_uid TEXT NOT NULL,"
	" pod_name TEXT NOT NULL, pod_start_us INTEGER NOT NULL,"
	" pod_finish_us INTEGER NOT NULL,"
	" PRIMARY KEY(claim_uid, start_us, pod_uid)) WITHOUT ROWID;"
	"CREATE INDEX usage_consumers_pod ON usage_consumers(pod_uid);"
	"CREATE TABLE usage_hourly(ns TEXT NOT NULL, instance TEXT NOT NULL,"
	" device_class TEXT NOT NULL, profile TEXT NOT NULL,"
	" hour_us INTEGER NOT NULL, device_us INTEGER NOT NULL,"
	" gpu_us REAL NOT NULL, PRIMARY KEY(ns, instance, device_class,"
	" profile, hour_us)) WITHOUT ROWID;"
	"CREATE TABLE usage_lost(at_us INTEGER PRIMARY KEY,"
	" intervals INTEGER NOT NULL, note TEXT NOT NULL);",
	/* 2 -> 3: the ledger's intervals by claim name */
	"CREATE INDEX usage_claim ON usage_intervals(ns, claim);"
	"CREATE TABLE usage_pods(uid TEXT PRIMARY KEY, ns TEXT NOT NULL,"
	" name TEXT NOT NULL, start_us INTEGER NOT NULL,"
	" finish_us INTEGER NOT NULL) WITHOUT ROWID;",
};

#define NS_COLS "name, uid, rv, phase, isolated, resolved, labels," \
	" annotations, gen"
#define IN_COLS "gvr, kind, ns, name, uid, rv, generation, created," \
	" isolation, deleted, gen"
#define OW_COLS "kind, ns, name, uid, rv, data, gen"
#define TB_COLS "tbl, key, kind, ns, name, gen"
/* One row of instances / owned by its key. */
#define IN_KEY " FROM instances WHERE gvr = ?1 AND ns = ?2 AND name = ?3"
#define OW_KEY " FROM owned WHERE kind = ?1 AND ns = ?2 AND name = ?3"
/* The rows of tbl changed since generation ?1 where cond, in order. */
#define SINCE(cols, tbl, cond, order) "SELECT " cols " FROM " tbl \
	" WHERE " cond "gen > ?1 ORDER BY " order
/*
 * The same through tbl's gen index: a caller following the cache since a
 * recent generation reads the rows changed, not the whole table.
 */
#define SINCE_GEN(cols, tbl, order) "SELECT " cols " FROM " tbl \
	" INDEXED BY " tbl "_gen WHERE gen > ?1 ORDER BY " order
/* Insert a row into tbl or, when key is taken, update that row by set. */
#define UPSERT(tbl, cols, vals, key, set) "INSERT INTO " tbl "(" cols ")" \
	" VALUES(" vals ") ON CONFLICT(" key ") DO UPDATE SET " set
#define TB_UPSERT " ON CONFLICT(tbl, key, ns, name) DO UPDATE" \
	" SET kind = excluded.kind, gen = excluded.gen"
/* A counter of the meta table by key: read it, set it to ?1. */
#define META_GET(key) "SELECT value FROM meta WHERE key = '" key "'"
#define META_SET(key) UPSERT("meta", "key, value", "'" key "', ?1", "key", \
	"value = excluded.value")

/* Every statement, prepared once at open. */
const char *const cache_sql[ST__COUNT] = {
	[ST_BEGIN] = "BEGIN",
	[ST_BEGIN_W] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_GEN_GET] = META_GET("generation"),
	[ST_GEN_SET] = META_SET("generation"),
	[ST_NS_PUT] = UPSERT("namespaces", NS_COLS,
	    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9", "name", "uid = excluded.uid,"
	    " rv = excluded.rv, phase = excluded.phase,"
	    " isolated = excluded.isolated, resolved = excluded.resolved,"
	    " labels = excluded.labels, annotations = excluded.annotations,"
	    " gen = excluded.gen")
	    " WHERE rv IS NOT excluded.rv OR uid IS NOT excluded.uid",
	[ST_NS_DEL] = "DELETE FROM namespaces WHERE name = ?1",
	[ST_NS_GET] = "SELECT " NS_COLS " FROM namespaces WHERE name = ?1",
	[ST_NS_ALL] = SINCE(NS_COLS, "namespaces", "", "name"),
	[ST_NS_RANGE] = "SELECT " NS_COLS " FROM namespaces WHERE name > ?1"
	    " AND name >= ?2 ORDER BY name LIMIT ?3",
	[ST_IN_PUT] = UPSERT("instances", IN_COLS,
	    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11", "gvr, ns, name",
	    "kind = excluded.kind, uid = excluded.uid, rv = excluded.rv,"
	    " generation = excluded.generation, created = excluded.created,"
	    " isolation = excluded.isolation, deleted = excluded.deleted,"
	    " gen = excluded.gen")
	    " WHERE rv IS NOT excluded.rv OR uid IS NOT excluded.uid",
	[ST_IN_DEL] = "DELETE" IN_KEY,
	[ST_IN_GET] = "SELECT " IN_COLS IN_KEY,
	[ST_IN_ALL] = SINCE(IN_COLS, "instances", "", "gvr, ns, name"),
	[ST_IN_GVR] = SINCE(IN_COLS, "instances", "gvr = ?2 AND ",
	    "gvr, ns, name"),
	[ST_OW_PUT] = UPSERT("owned", OW_COLS, "?1, ?2, ?3, ?4, ?5, ?6, ?7",
	    "kind, ns, name", "uid = excluded.uid, rv = excluded.rv,"
	    " data = excluded.data, gen = excluded.gen")
	    " WHERE data IS NOT excluded.data OR uid IS NOT excluded.uid",
	[ST_OW_DEL] = "DELETE" OW_KEY,
	[ST_OW_GET] = "SELECT " OW_COLS OW_KEY,
	[ST_OW_ALL] = SINCE(OW_COLS, "owned", "", "ns, kind, name"),
	[ST_OW_NS] = SINCE(OW_COLS, "owned", "ns = ?2 AND ", "ns, kind, name"),
	[ST_OW_KIND] = SINCE(OW_COLS, "owned", "kind = ?3 AND ",
	    "ns, kind, name"),
	[ST_OW_NSKIND] = SINCE(OW_COLS, "owned", "ns = ?2 AND kind = ?3 AND ",
	    "ns, kind, name"),
	[ST_CNT_NS] = "SELECT count(*) FROM namespaces",
	[ST_CNT_IN] = "SELECT count(*) FROM instances",
	[ST_CNT_OW] = "SELECT kind, count(*) FROM owned GROUP BY kind",
	[ST_WS_GET] = "SELECT rv FROM watch_state WHERE key = ?1",
	[ST_WS_SET] = UPSERT("watch_state", "key, rv", "?1, ?2", "key",
	    "rv = excluded.rv"),
	[ST_WS_DEL] = "DELETE FROM watch_state WHERE key = ?1",
	[ST_TB_NS] = "INSERT INTO tombstones(" TB_COLS ") SELECT 1, '',"
	    " 'Namespace', name, name, ?2 FROM namespaces WHERE name = ?1"
	    TB_UPSERT,
	[ST_TB_IN] = "INSERT INTO tombstones(" TB_COLS ") SELECT 2, gvr,"
	    " kind, ns, name, ?4" IN_KEY TB_UPSERT,
	[ST_TB_OW] = "INSERT INTO tombstones(" TB_COLS ") SELECT 4, kind,"
	    " kind, ns, name, ?4" OW_KEY TB_UPSERT,
	[ST_TB_CLR] = "DELETE FROM tombstones WHERE tbl = ?1 AND key = ?2"
	    " AND ns = ?3 AND name = ?4",
	[ST_TB_ALL] = SINCE(TB_COLS, "tombstones", "", "gen"),
	[ST_TB_NTH] = "SELECT gen FROM tombstones ORDER BY gen DESC"
	    " LIMIT 1 OFFSET ?1",
	[ST_TB_PRUNE] = "DELETE FROM tombstones WHERE gen <= ?1",
	[ST_HZ_GET] = META_GET("horizon"),
	[ST_HZ_SET] = META_SET("horizon"),
	[ST_NS_SINCE] = SINCE_GEN(NS_COLS, "namespaces", "name"),
	[ST_IN_SINCE] = SINCE_GEN(IN_COLS, "instances", "gvr, ns, name"),
	[ST_OW_SINCE] = SINCE_GEN(OW_COLS, "owned", "ns, kind, name"),
};

/* The overlap of a row (alias i) with the window ?1 since, ?2 until, ?3 now. */
#define OVL "max(0, min(coalesce(i.end_us, ?3), ?2) - max(i.start_us, ?1))"
#define QSEL(key) "SELECT ns, instance, k, device_class, profile," \
	" sum(d), sum(g), sum(n), sum(b), sum(o) FROM (" \
	"SELECT i.ns AS ns, i.instance AS instance, " key " AS k," \
	" i.device_class AS device_class, i.profile AS profile," \
	" sum(" OVL ") AS d, sum(i.share * " OVL ") AS g," \
	" sum(i.dev = 0) AS n," \
	" sum(i.dev = 0 AND (i.end_how = 2 OR i.start_how = 2)) AS b," \
	" sum(i.dev = 0 AND i.end_us IS NULL) AS o" \
	" FROM usage_intervals i"
#define QWHERE " WHERE i.start_us < ?2 AND coalesce(i.end_us, ?3) > ?1"
#define QHOURS " UNION ALL SELECT ns, instance, '', device_class, profile," \
	" sum(device_us), sum(gpu_us), 0, 0, 0 FROM usage_hourly" \
	" WHERE hour_us >= ?1 AND hour_us < ?2" \
	" GROUP BY ns, instance, device_class, profile"
#define QEND " GROUP BY 1, 2, 3, 4, 5"
/* The rows of one interval (claim uid ?1, start ?2). */
#define IV_KEY " WHERE claim_uid = ?1 AND start_us = ?2"
#define QORDER ") GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"

/* Every statement of the usage ledger, prepared by usage_store_open. */
const char *const usage_sql[U__COUNT] = {
	[U_OPEN_GET] = "SELECT start_us, sig FROM usage_intervals"
	    " WHERE claim_uid = ?1 AND end_us IS NULL LIMIT 1",
	[U_OPEN_ALL] = "SELECT claim_uid, ns, claim, sig, start_us"
	    " FROM usage_intervals WHERE end_us IS NULL AND dev = 0"
	    " ORDER BY claim_uid",
	[U_ADD] = "INSERT INTO usage_intervals(claim_uid, start_us, dev, ns,"
	    " instance, claim, driver, pool, device, device_class, profile,"
	    " share, sig, start_how, lo_us) VALUES(?1, ?2, ?3, ?4, ?5, ?6,"
	    " ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
	    " ON CONFLICT(claim_uid, start_us, dev) DO NOTHING",
	[U_CLOSE] = "UPDATE usage_intervals SET end_us = ?3, end_how = ?4,"
	    " hi_us = ?5" IV_KEY " AND end_us IS NULL",
	[U_PREV_END] = "SELECT max(end_us) FROM usage_intervals"
	    " WHERE driver = ?1 AND pool = ?2 AND device = ?3",
	[U_CONS_ADD] = "INSERT INTO usage_consumers(claim_uid, start_us,"
	    " pod_uid, pod_name, pod_start_us, pod_finish_us)"
	    " VALUES(?1, ?2, ?3, ?4, coalesce((SELECT start_us FROM usage_pods"
	    " WHERE uid = ?3), 0), coalesce((SELECT finish_us FROM usage_pods"
	    " WHERE uid = ?3), 0))"
	    " ON CONFLICT(claim_uid, start_us, pod_uid) DO NOTHING",
	[U_POD_PUT] = UPSERT("usage_pods", "uid, ns, name, start_us, finish_us",
	    "?1, ?2, ?3, ?4, ?5", "uid", "start_us = excluded.start_us,"
	    " finish_us = excluded.finish_us")
	    " WHERE start_us != excluded.start_us OR"
	    " finish_us != excluded.finish_us",
	[U_POD_GET] = "SELECT start_us, finish_us FROM usage_pods"
	    " WHERE uid = ?1",
	[U_POD_DEL] = "DELETE FROM usage_pods WHERE ns = ?1 AND name = ?2",
	[U_POD_ALL] = "SELECT ns, name FROM usage_pods",
	[U_CONS_TIMES] = "SELECT min(nullif(pod_start_us, 0)),"
	    " CASE WHEN sum(pod_finish_us = 0) > 0 THEN 0"
	    " ELSE max(pod_finish_us) END FROM usage_consumers" IV_KEY,
	[U_POD_SET] = "UPDATE usage_consumers SET pod_start_us = ?2,"
	    " pod_finish_us = ?3 WHERE pod_uid = ?1 AND"
	    " (pod_start_us != ?2 OR pod_finish_us != ?3)",
	[U_POD_SPANS] = "SELECT i.claim_uid, i.start_us, i.start_how,"
	    " i.lo_us, coalesce(i.end_us, 0), coalesce(i.end_how, 0),"
	    " coalesce(i.hi_us, 0) FROM usage_consumers c"
	    " JOIN usage_intervals i ON i.claim_uid = c.claim_uid"
	    " AND i.start_us = c.start_us AND i.dev = 0"
	    " WHERE c.pod_uid = ?1",
	/* never past the end: usage_set_start refuses that (U_IV_HAS) */
	[U_SET_START] = "UPDATE usage_intervals SET start_us = ?3,"
	    " start_how = ?4" IV_KEY " AND (end_us IS NULL OR end_us >= ?3)",
	[U_SET_START_C] = "UPDATE usage_consumers SET start_us = ?3" IV_KEY,
	[U_SET_END] = "UPDATE usage_intervals SET end_us = ?3, end_how = ?4"
	    IV_KEY " AND end_us IS NOT NULL",
	[U_ALIVE_GET] = META_GET("usage_alive"),
	[U_ALIVE_SET] = META_SET("usage_alive"),
	[U_Q_TENANT] = QSEL("''") QWHERE QEND QHOURS QORDER,
	[U_Q_CLAIM] = QSEL("i.claim") QWHERE QEND QHOURS QORDER,
	[U_Q_DEVICE] = QSEL("i.driver || '/' || i.pool || '/' || i.device")
	    QWHERE QEND QHOURS QORDER,
	/* a Pod's share: its own run inside the interval of its claim */
	[U_Q_POD] = "SELECT ns, instance, k, device_class, profile, sum(d),"
	    " sum(g), sum(n), sum(b), sum(o) FROM ("
	    "SELECT i.ns AS ns, i.instance AS instance, c.pod_name AS k,"
	    " i.device_class AS device_class,"
	    " i.profile AS profile, sum(max(0, min(coalesce(i.end_us, ?3), ?2,"
	    " CASE WHEN c.pod_finish_us > 0 THEN c.pod_finish_us"
	    " ELSE coalesce(i.end_us, ?3) END) - max(i.start_us, ?1,"
	    " c.pod_start_us))) AS d, sum(i.share * max(0, min(coalesce(i.end_us,"
	    " ?3), ?2, CASE WHEN c.pod_finish_us > 0 THEN c.pod_finish_us"
	    " ELSE coalesce(i.end_us, ?3) END) - max(i.start_us, ?1,"
	    " c.pod_start_us))) AS g, sum(i.dev = 0) AS n,"
	    " sum(i.dev = 0 AND (i.end_how = 2 OR i.start_how = 2)) AS b,"
	    " sum(i.dev = 0 AND i.end_us IS NULL) AS o FROM usage_intervals i"
	    " JOIN usage_consumers c ON c.claim_uid = i.claim_uid"
	    " AND c.start_us = i.start_us" QWHERE QEND QORDER,
	[U_HELD] = "SELECT ns, instance, group_concat(pool || '/' || device,"
	    " ' '), device_class, profile, 0, 0, count(DISTINCT claim_uid),"
	    " 0, count(*) FROM usage_intervals WHERE end_us IS NULL"
	    " GROUP BY ns, instance, device_class, profile"
	    " ORDER BY 1, 2, 4, 5",
	[U_OLD] = "SELECT ns, instance, device_class, profile, start_us,"
	    " end_us, share FROM usage_intervals WHERE end_us < ?1",
	[U_HOUR_ADD] = UPSERT("usage_hourly", "ns, instance, device_class,"
	    " profile, hour_us, device_us, gpu_us",
	    "?1, ?2, ?3, ?4, ?5, ?6, ?7",
	    "ns, instance, device_class, profile, hour_us", "device_us ="
	    " device_us + excluded.device_us, gpu_us = gpu_us +"
	    " excluded.gpu_us"),
	[U_DEL_OLD] = "DELETE FROM usage_intervals WHERE end_us < ?1",
	[U_DEL_OLD_C] = "DELETE FROM usage_consumers WHERE NOT EXISTS"
	    " (SELECT 1 FROM usage_intervals i WHERE i.claim_uid ="
	    " usage_consumers.claim_uid AND i.start_us ="
	    " usage_consumers.start_us)",
	[U_DEL_HOURS] = "DELETE FROM usage_hourly WHERE hour_us < ?1",
	[U_HAS_CLAIM] = "SELECT count(*) FROM (SELECT 1 FROM usage_intervals"
	    " WHERE ns = ?1 AND claim = ?2 LIMIT 1)",
	[U_CNT] = "SELECT count(*) FROM usage_intervals",
	[U_CNT_H] = "SELECT count(*) FROM usage_hourly",
	[U_LOST_ADD] = UPSERT("usage_lost", "at_us, intervals, note",
	    "?1, ?2, ?3", "at_us",
	    "intervals = intervals + excluded.intervals"),
	[U_LOST_SUM] = "SELECT coalesce(sum(intervals), 0), count(*)"
	    " FROM usage_lost",
	[U_CLOSED_INC] = UPSERT("meta", "key, value", "'usage_closed', 1",
	    "key", "value = value + 1"),
	[U_CLOSED_GET] = META_GET("usage_closed"),
	[U_CLOSED_SET] = META_SET("usage_closed"),
	/* U_Q_TENANT's closed rows of one interval (since 0, now 0) */
	[U_IV_SUMS] = "SELECT ns, instance, '', device_class, profile,"
	    " sum(max(0, end_us - start_us)),"
	    " sum(share * max(0, end_us - start_us)), 0, 0, 0"
	    " FROM usage_intervals" IV_KEY " AND end_us > 0"
	    " GROUP BY 1, 2, 4, 5 ORDER BY 1, 2, 4, 5",
	/* U_Q_TENANT's open rows (since 0, now ?1) */
	[U_OPEN_SUMS] = "SELECT ns, instance, '', device_class, profile,"
	    " sum(max(0, ?1 - start_us)), sum(share * max(0, ?1 - start_us)),"
	    " 0, 0, 0 FROM usage_intervals WHERE end_us IS NULL"
	    " GROUP BY 1, 2, 4, 5 ORDER BY 1, 2, 4, 5",
	[U_HOURS_BEFORE] = "SELECT count(*) FROM usage_hourly"
	    " WHERE hour_us < ?1",
	[U_IV_HAS] = "SELECT count(*) FROM usage_intervals" IV_KEY,
};
