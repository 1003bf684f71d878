/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-sync's accounting: the tenant metrics of /metrics (device- and
 * GPU-equivalent seconds from the counters kept in memory, devices held,
 * Pods pending on quota, lost intervals).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cache/usage.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/acct_impl.h"
#include "kpgpud-sync/ledger.h"
#include "kpgpud-sync/syncd.h"

#define ACCT_PENDING_METRIC	"kpgpud_tenant_claims_pending_quota"
#define ACCT_LOST_METRIC	"kpgpud_sync_usage_lost_intervals_total"

/* A Prometheus label value, escaped. */
static void
acct_label(struct buf *b, const char *name, const char *v, bool last)
{
	buf_printf(b, "%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			buf_puts(b, "\\n");
		else
			buf_putc(b, *v);
	}
	buf_puts(b, last ? "\"" : "\",");
}

struct acct_render {
	struct buf	*b;
	const char	*name;
	int		 what;	/* 0 device s, 1 gpu s, 2 held, 3 pending */
	struct acct	*a;
};

/* One sample of a tenant metric. */
static int
acct_sample(const struct usage_sum *u, void *arg)
{
	struct acct_render *m = arg;

	buf_printf(m->b, "%s{", m->name);
	acct_label(m->b, "namespace", u->ns, false);
	acct_label(m->b, "instance", u->instance, false);
	acct_label(m->b, "device_class", u->device_class, false);
	acct_label(m->b, "profile", u->profile, true);
	if (m->what == 0)
		buf_printf(m->b, "} %.6f\n", (double)u->device_us / 1e6);
	else if (m->what == 1)
		buf_printf(m->b, "} %.6f\n", u->gpu_us / 1e6);
	else
		buf_printf(m->b, "} %llu\n", (unsigned long long)u->open);
	return 0;
}

/* Pending-on-quota per isolated namespace. */
static int
acct_pending_ns(const struct cache_ns *ns, void *arg)
{
	struct acct_render *m = arg;
	char instance[RESOLVED_NAME_MAX + 64] = "";

	if (!ns->isolated)
		return 0;
	(void)acct_instance(m->a, ns->name, instance, sizeof(instance));
	buf_puts(m->b, ACCT_PENDING_METRIC "{");
	acct_label(m->b, "namespace", ns->name, false);
	acct_label(m->b, "instance", instance, true);
	buf_printf(m->b, "} %zu\n", acct_pending_count(&m->a->pending,
	    ns->name));
	return 0;
}

/* Append the tenant metrics. */
int
acct_metrics(struct acct *a, struct buf *out)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
		{ "kpgpud_tenant_device_seconds_total", "counter",
		  "Seconds devices were allocated to a tenant's claims." },
		{ "kpgpud_tenant_gpu_equivalent_seconds_total", "counter",
		  "Device-seconds weighted by each device's share of a GPU's "
		  "compute (a MIG slice: its compute slices / 7)." },
		{ "kpgpud_tenant_devices_allocated", "gauge",
		  "Devices allocated to a tenant's claims now." },
	};
	struct acct_render m = { .b = out, .a = a };
	uint64_t now = ledger_now_us(), lost = 0, ev = 0;
	int r = 0, i;

	for (i = 0; i < 3 && r == 0; i++) {
		buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", fam[i].name,
		    fam[i].help, fam[i].name, fam[i].type);
		m.name = fam[i].name;
		m.what = i;
		r = i < 2 ? acct_totals_query(&a->totals, a->st, now,
		    acct_sample, &m) : usage_held(a->st, acct_sample, &m);
	}
	buf_puts(out, "# HELP " ACCT_PENDING_METRIC " Pods Pending without "
	    "their generated claim while the tenant's quota is used up.\n"
	    "# TYPE " ACCT_PENDING_METRIC " gauge\n");
	if (r == 0)
		r = cache_ns_foreach(a->sd->cache, 0, acct_pending_ns, &m);
	if (r == 0)
		r = usage_lost_total(a->st, &lost, &ev);
	buf_printf(out, "# HELP " ACCT_LOST_METRIC " Closed usage intervals "
	    "a rebuilt or replaced cache lost.\n# TYPE " ACCT_LOST_METRIC
	    " counter\n" ACCT_LOST_METRIC " %llu\n", (unsigned long long)lost);
	return r;
}
