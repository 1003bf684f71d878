/*
 * The usage ledger's SQL, private to cache/: the schema (migration 1 -> 2,
 * in cache_sql.c's table) and the statements usage.c prepares.
 *
 * usage_intervals: one row per device of one allocation interval of a
 * claim, keyed (claim uid, start, device index) so that re-observing an
 * allocation never adds a row. end_us NULL while open. start_how/end_how
 * are enum ledger_how; lo_us is the earliest the start can be (the last
 * moment sync was alive before a gap; = start when observed), hi_us the
 * latest the end can be (the relist time after a gap; = end when observed).
 * usage_consumers: the Pods that reserved the claim during the interval,
 * with their start and finish once known. usage_hourly: closed intervals
 * past retention, rolled up per tenant, class, profile and hour.
 * usage_lost: what a rebuilt cache could not carry over. usage_pods (3):
 * the start and finish of every Pod that uses claims, whichever of a claim
 * and its Pods is seen first.
 */
#ifndef KPGPUD_CACHE_USAGE_SQL_H
#define KPGPUD_CACHE_USAGE_SQL_H

#define USAGE_SCHEMA \
	"CREATE TABLE usage_intervals(claim_uid TEXT NOT NULL," \
	" start_us INTEGER NOT NULL, dev INTEGER NOT NULL, ns TEXT NOT NULL," \
	" instance TEXT NOT NULL, claim TEXT NOT NULL, driver TEXT NOT NULL," \
	" pool TEXT NOT NULL, device TEXT NOT NULL," \
	" device_class TEXT NOT NULL, profile TEXT NOT NULL," \
	" share REAL NOT NULL, sig TEXT NOT NULL, end_us INTEGER," \
	" start_how INTEGER NOT NULL, end_how INTEGER," \
	" lo_us INTEGER NOT NULL, hi_us INTEGER," \
	" PRIMARY KEY(claim_uid, start_us, dev)) WITHOUT ROWID;" \
	"CREATE INDEX usage_open ON usage_intervals(claim_uid)" \
	" WHERE end_us IS NULL;" \
	"CREATE INDEX usage_dev ON usage_intervals(driver, pool, device);" \
	"CREATE INDEX usage_end ON usage_intervals(end_us);" \
	"CREATE TABLE usage_consumers(claim_uid TEXT NOT NULL," \
	" start_us INTEGER NOT NULL, pod_uid TEXT NOT NULL," \
	" pod_name TEXT NOT NULL, pod_start_us INTEGER NOT NULL," \
	" pod_finish_us INTEGER NOT NULL," \
	" PRIMARY KEY(claim_uid, start_us, pod_uid)) WITHOUT ROWID;" \
	"CREATE INDEX usage_consumers_pod ON usage_consumers(pod_uid);" \
	"CREATE TABLE usage_hourly(ns TEXT NOT NULL, instance TEXT NOT NULL," \
	" device_class TEXT NOT NULL, profile TEXT NOT NULL," \
	" hour_us INTEGER NOT NULL, device_us INTEGER NOT NULL," \
	" gpu_us REAL NOT NULL, PRIMARY KEY(ns, instance, device_class," \
	" profile, hour_us)) WITHOUT ROWID;" \
	"CREATE TABLE usage_lost(at_us INTEGER PRIMARY KEY," \
	" intervals INTEGER NOT NULL, note TEXT NOT NULL);"

#define USAGE_SCHEMA_3 \
	"CREATE INDEX usage_claim ON usage_intervals(ns, claim);" \
	"CREATE TABLE usage_pods(uid TEXT PRIMARY KEY, ns TEXT NOT NULL," \
	" name TEXT NOT NULL, start_us INTEGER NOT NULL," \
	" finish_us INTEGER NOT NULL) WITHOUT ROWID;"

#endif
