/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-sync's accounting: the heartbeat (the last moment sync is known
 * alive), retention (the roll-up into hours) and the tally of closed
 * intervals kept beside the cache, which shows what a rebuilt cache lost.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/usage.h"
#include "common/log.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/acct_impl.h"
#include "kpgpud-sync/ledger.h"
#include "kpgpud-sync/syncd.h"

static void	 acct_tally_write(struct acct *a, uint64_t closed);

/*
 * Roll old intervals up into hours: the tenant counters keep their sums
 * (the same seconds, now as hours) unless hours are deleted, which they
 * then drop (the documented fall of the counters), loaded again.
 */
static void
acct_rollup(struct acct *a, uint64_t *ret_rows, int *ret)
{
	uint64_t hours_us = a->hours_ms > 0 ? ledger_now_us() -
	    (uint64_t)a->hours_ms * 1000u : 0, deleted = 0;

	if (hours_us > 0 && usage_hours_before(a->st, hours_us, &deleted) < 0)
		deleted = 1;
	*ret = usage_rollup(a->st, ledger_now_us() -
	    (uint64_t)a->retention_ms * 1000u, hours_us, ret_rows);
	if (*ret == 0)
		acct_totals_rolled_up(&a->totals, deleted > 0);
}

/*
 * The heartbeat: the last moment sync is known alive; the refused closes
 * again; retention.
 */
void
acct_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct acct *a = arg;
	uint64_t ms = monotonic_ms(), rows = 0;
	int r;

	(void)fd;
	(void)what;
	if (!a->sd->in_batch && usage_closed_get(a->st, &rows) == 0)
		acct_tally_write(a, rows);	/* committed closes only */
	rows = 0;
	if ((r = syncd_begin(a->sd)) < 0 ||
	    (r = usage_alive_set(a->st, ledger_now_us())) < 0) {
		(void)acct_failed(a, "heartbeat", r);
		return;
	}
	if ((r = acct_retry_closes(a)) < 0) {
		(void)acct_failed(a, "retry", r);
		return;
	}
	if (a->retention_ms > 0 && ms - a->last_rollup_ms >=
	    ACCT_ROLLUP_EVERY_MS) {
		a->last_rollup_ms = ms;
		acct_rollup(a, &rows, &r);
		if (r < 0)
			(void)acct_failed(a, "rollup", r);
		else if (rows > 0)
			log_info("usage intervals rolled up per hour rows=%llu",
			    (unsigned long long)rows);
	}
}

/* Read the tally beside the cache: intervals ever closed (0 when none). */
static uint64_t
acct_tally_read(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	unsigned long long n = 0;

	if (read_file_capped(path, 256, &buf, &len) < 0)
		return 0;
	if (sscanf(buf, "kpgpud-usage-tally 1 closed %llu", &n) != 1)
		n = 0;
	free(buf);
	return (uint64_t)n;
}

/* Write the tally atomically (a temporary file renamed over it). */
static void
acct_tally_write(struct acct *a, uint64_t closed)
{
	char tmp[4096];
	FILE *f;

	if (a->tally == NULL || closed == a->tally_written ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp", a->tally) >= (int)sizeof(tmp))
		return;
	if ((f = fopen(tmp, "we")) == NULL)
		return;
	fprintf(f, "kpgpud-usage-tally 1 closed %llu\n",
	    (unsigned long long)closed);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		fclose(f);
		return;
	}
	fclose(f);
	if (rename(tmp, a->tally) == 0)
		a->tally_written = closed;
}

/*
 * A cache that knows fewer closed intervals than the tally beside it was
 * rebuilt or replaced: the difference is lost. Recorded in the ledger (and
 * so in kpgpuctl usage and the metrics), then the count is carried over so
 * it is reported once.
 */
int
acct_check_lost(struct acct *a)
{
	uint64_t tally = acct_tally_read(a->tally), have = 0;
	char note[160];
	int r;

	if ((r = usage_closed_get(a->st, &have)) < 0)
		return r;
	a->tally_written = tally;
	if (tally <= have)
		return 0;
	snprintf(note, sizeof(note), "cache rebuilt: %llu closed intervals "
	    "known before were not in it", (unsigned long long)(tally - have));
	log_err("usage ledger lost closed intervals count=%llu tally=%llu "
	    "cache=%llu", (unsigned long long)(tally - have),
	    (unsigned long long)tally, (unsigned long long)have);
	if ((r = syncd_begin(a->sd)) < 0 ||
	    (r = usage_lost_add(a->st, ledger_now_us(), tally - have, note)) < 0 ||
	    (r = usage_closed_set(a->st, tally)) < 0)
		return r;
	return 0;
}
