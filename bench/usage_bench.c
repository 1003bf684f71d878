/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usage_bench N [TENANTS]: the usage ledger with N closed intervals (one
 * device each, spread over TENANTS tenants, 100 s apart over the last
 * N * 100 s / 50 ... so about an hour per 36 intervals per device): time
 * to record them (one transaction per 1000, as batches), to answer
 * kpgpuctl usage by tenant and by claim, to render the tenant metrics
 * (kpgpud-sync's counters kept in memory, with N / 100 intervals open
 * then: the first scrape loads them, later ones add the open intervals), to roll everything older than a day
 * up per hour, and the cache file size before and after. Prints one JSON
 * object. Figures, no asserts.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_write.h"
#include "cache/usage.h"
#include "kpgpud-sync/acct_totals.h"

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
count_row(const struct usage_sum *u, void *arg)
{
	(void)u;
	(*(unsigned long *)arg)++;
	return 0;
}

static long
file_size(const char *path)
{
	struct stat st;
	char wal[512];
	long n = 0;

	if (stat(path, &st) == 0)
		n += (long)st.st_size;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (stat(wal, &st) == 0)
		n += (long)st.st_size;
	return n;
}

/*
 * Record interval i (uid, claim) of tenant i % tenants on MIG slice "slot"
 * of GPU i % 64 from start; closed: a minute long, with its consumer.
 */
static int
add_interval(struct usage_store *s, const char *uid, const char *claim,
    unsigned long i, unsigned long tenants, int slot, uint64_t start,
    bool closed)
{
	char ns[32], inst[48], dev[48];
	struct usage_row r;

	snprintf(ns, sizeof(ns), "tenant-%lu", i % tenants);
	snprintf(inst, sizeof(inst), "Agent/tenant-%lu", i % tenants);
	snprintf(dev, sizeof(dev), "gpu-%lu-mig-1g10gb-%d-0", i % 64, slot);
	memset(&r, 0, sizeof(r));
	r.claim_uid = uid;
	r.start_us = start;
	r.ns = ns;
	r.instance = inst;
	r.claim = claim;
	r.driver = "gpu.nvidia.com";
	r.pool = "node-1";
	r.device = dev;
	r.device_class = "kpgpud-mig-1g.10gb";
	r.profile = "1g.10gb";
	r.share = 1.0 / 7;
	r.sig = dev;
	r.lo_us = start;
	if (usage_row_add(s, &r) < 0)
		return -1;
	if (closed && (usage_consumer_add(s, uid, start, uid, claim) < 0 ||
	    usage_close(s, uid, start, start + 60000000u, 0, start +
	    60000000u) < 0))
		return -1;
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	unsigned long tenants = argc > 2 ? strtoul(argv[2], NULL, 10) : 50;
	char dir[] = "/tmp/kpgpud-usage-bench.XXXXXX", path[512], cmd[600];
	char uid[64], claim[64];
	struct cache *c;
	struct usage_store *s;
	uint64_t base = 1700000000ull * 1000000u, start, rows = 0, hourly = 0;
	unsigned long i, q1 = 0, q2 = 0, q3 = 0;
	double t0, t_ins, t_ten, t_claim, t_roll, t_first, t_kept;
	struct acct_totals tot = { 0 };
	long size0, size1;

	if (n == 0 || tenants == 0 || mkdtemp(dir) == NULL)
		return 2;
	snprintf(path, sizeof(path), "%s/cache.db", dir);
	if (cache_open(path, 0, &c) < 0 || usage_store_open(c, &s) < 0)
		return 1;
	t0 = now_s();
	for (i = 0; i < n; i++) {
		if (i % 1000 == 0 && (i == 0 ? 0 : cache_commit(c)) < 0)
			return 1;
		if (i % 1000 == 0 && cache_begin(c) < 0)
			return 1;
		snprintf(uid, sizeof(uid), "uid-%lu", i);
		snprintf(claim, sizeof(claim), "pod-%lu-gpu-abcde", i);
		start = base + (uint64_t)i * 100000000u / 50;
		if (add_interval(s, uid, claim, i, tenants, 19, start, true) < 0)
			return 1;
	}
	if (cache_commit(c) < 0)
		return 1;
	t_ins = now_s() - t0;
	size0 = file_size(path);
	t0 = now_s();
	if (usage_query(s, USAGE_BY_TENANT, 0, UINT64_MAX >> 1, base +
	    (uint64_t)n * 2000000u, count_row, &q1) < 0)
		return 1;
	t_ten = now_s() - t0;
	t0 = now_s();
	if (usage_query(s, USAGE_BY_CLAIM, 0, UINT64_MAX >> 1, base +
	    (uint64_t)n * 2000000u, count_row, &q2) < 0)
		return 1;
	t_claim = now_s() - t0;
	if (cache_begin(c) < 0)
		return 1;
	for (i = 0; i < n / 100; i++) {
		snprintf(uid, sizeof(uid), "open-%lu", i);
		if (add_interval(s, uid, uid, i, tenants, 20, base + (uint64_t)n *
		    2000000u - 3600000000u, false) < 0)
			return 1;
	}
	if (cache_commit(c) < 0)
		return 1;
	t0 = now_s();
	if (acct_totals_query(&tot, s, base + (uint64_t)n * 2000000u,
	    count_row, &q3) < 0)
		return 1;
	t_first = now_s() - t0;
	t0 = now_s();
	if (acct_totals_query(&tot, s, base + (uint64_t)n * 2000000u,
	    count_row, &q3) < 0)
		return 1;
	t_kept = now_s() - t0;
	acct_totals_free(&tot);
	t0 = now_s();
	if (cache_begin(c) < 0 || usage_rollup(s, base + (uint64_t)n *
	    2000000u, 0, &rows) < 0 || cache_commit(c) < 0)
		return 1;
	t_roll = now_s() - t0;
	(void)usage_counts(s, &rows, &hourly);
	usage_store_free(s);
	cache_free(c);
	size1 = file_size(path);
	printf("{\"intervals\": %lu, \"tenants\": %lu, \"insert_s\": %.3f, "
	    "\"query_by_tenant_s\": %.4f, \"tenant_rows\": %lu, "
	    "\"query_by_claim_s\": %.4f, \"claim_rows\": %lu, "
	    "\"open_intervals\": %lu, \"scrape_first_s\": %.4f, "
	    "\"scrape_kept_s\": %.6f, "
	    "\"rollup_s\": %.3f, \"rows_after_rollup\": %llu, "
	    "\"hourly_rows\": %llu, \"bytes_before\": %ld, "
	    "\"bytes_after\": %ld}\n", n, tenants, t_ins, t_ten, q1, t_claim,
	    q2, n / 100, t_first, t_kept, t_roll, (unsigned long long)rows, (unsigned long long)hourly,
	    size0, size1);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
