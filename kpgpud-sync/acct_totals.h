/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tenant usage counters of /metrics without summing every interval on
 * each scrape: per (namespace, instance, class, profile), the device- and
 * GPU-equivalent microseconds of the closed intervals and rolled-up hours,
 * loaded once from the ledger and kept up to date as intervals change;
 * the open intervals are added at the scrape. The values are those of
 * usage_query(USAGE_BY_TENANT) over all time (GPU-equivalents up to the
 * rounding of a different order of additions).
 */
#ifndef KPGPUD_SYNC_ACCT_TOTALS_H
#define KPGPUD_SYNC_ACCT_TOTALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/usage.h"

struct acct_total {
	char		*ns, *instance, *device_class, *profile;
	uint64_t	 device_us;
	double		 gpu_us;
};

struct acct_totals {
	struct acct_total	*t;	/* sorted by the four keys */
	size_t			 n, alloc;
	bool			 loaded;
	uint64_t		 loads;	/* times summed from the ledger */
};

/*
 * Before (sign -1) and after (sign 1) a write that changes the interval
 * (claim uid, start): take out and put back its closed rows. A failure
 * drops the totals, which the next scrape loads again.
 */
void	 acct_totals_interval(struct acct_totals *t, struct usage_store *s,
	    const char *claim_uid, uint64_t start_us, int sign);
/* Forget the totals (a rolled-back batch, deleted hours): load again. */
void	 acct_totals_drop(struct acct_totals *t);
/*
 * After usage_rollup moved intervals into hours and perhaps deleted hours:
 * keep the totals (the same sums under the same keys: every interval adds
 * at least a zero to its start's hour, so a tenant whose intervals had no
 * length keeps its row), or drop them when hours went.
 */
void	 acct_totals_rolled_up(struct acct_totals *t, bool hours_deleted);
/*
 * Every tenant row at now, in usage_query's order: the totals (loaded
 * first when they are not) plus the open intervals.
 */
int	 acct_totals_query(struct acct_totals *t, struct usage_store *s,
	    uint64_t now, usage_sum_cb cb, void *arg);
void	 acct_totals_free(struct acct_totals *t);

#endif
