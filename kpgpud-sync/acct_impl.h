/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-sync's accounting internals, shared by the files of acct (acct.c:
 * the claims and Pods that feed the ledger; acct_tick.c: the heartbeat,
 * retention and the tally of closed intervals; acct_metrics.c: the tenant
 * metrics). Nothing else includes this header; see acct.h.
 */
#ifndef KPGPUD_SYNC_ACCT_IMPL_H
#define KPGPUD_SYNC_ACCT_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "kpgpud-sync/acct_pending.h"
#include "kpgpud-sync/acct_result.h"
#include "kpgpud-sync/acct_totals.h"
#include "kpgpud-sync/ledger.h"

#define ACCT_RETRY_MAX	64	/* refused closes waiting for a heartbeat */

/*
 * A close the ledger refused, of a claim no longer allocated (released,
 * deleted, gone from a list or no longer isolated): the next heartbeat
 * observes it again as it was seen, unless the claim is observed before.
 */
struct acct_retry {
	char		 uid[LEDGER_FIELD_MAX + 1];
	char		 ns[LEDGER_FIELD_MAX + 1];
	char		 name[LEDGER_FIELD_MAX + 1];
	uint64_t	 start_us;	/* the open interval's start */
	uint64_t	 seen_us;	/* when the claim was observed */
	bool		 live;		/* observed live */
};

struct acct {
	struct syncd		*sd;
	struct usage_store	*st;
	struct event		*tick;
	struct event		*relist;
	struct reflector	*claims_rf;
	uint64_t		 prev_alive;	/* heartbeat before this start */
	uint64_t		 started_us;	/* this start */
	bool			 live;		/* a full claims list is in */
	bool			 missed;	/* a claim's namespace unknown */
	int64_t			 retention_ms;
	int64_t			 hours_ms;	/* rolled-up hours kept */
	uint64_t		 last_rollup_ms;
	struct acct_pending	 pending;
	struct acct_results	 results;	/* last reconcile results */
	char			*tally;		/* closed-interval tally file */
	uint64_t		 tally_written;
	struct acct_totals	 totals;	/* tenant counters, closed */
	struct acct_retry	 retry[ACCT_RETRY_MAX];
	size_t			 nretry;
};

/* A write failed: log it, fail the batch (relisted); returns r. */
int	 acct_failed(struct acct *a, const char *what, int r);
/* The tenant instance of an isolated namespace; -ENOENT, -EPERM. */
int	 acct_instance(struct acct *a, const char *ns, char *out,
	    size_t len);

/* Observe the refused closes again (the heartbeat); 0 or a write error. */
int	 acct_retry_closes(struct acct *a);

/* acct_tick.c: the heartbeat timer's callback (arg: the acct). */
void	 acct_tick_cb(evutil_socket_t fd, short what, void *arg);
/* acct_tick.c: record what a rebuilt or replaced cache lost. */
int	 acct_check_lost(struct acct *a);

#endif
