/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The USAGE request on sync.sock (ctl role only): sums of the usage ledger
 * over a window by tenant, claim, pod or device, and the per-tenant status
 * view of kpgpuctl status. One page of at most IPC_USAGE_ROWS_MAX rows
 * from the request's offset.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cache/usage.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/acct_pending.h"
#include "kpgpud-sync/acct_result.h"
#include "kpgpud-sync/ledger.h"
#include "kpgpud-sync/syncd.h"

/* A page being filled. */
struct page {
	struct ipc_usage_result	*res;
	size_t			 bytes;	/* encoded size of the rows, about */
	uint32_t		 skip;	/* rows before the offset left */
	struct syncd		*sd;
	const char		*ns;	/* status: the tenant's namespace */
	json_t			*held;	/* status: its devices */
	const char		*device_class;
	const char		*profile;
};

/* Copy s into a fixed field, cut to its size. */
static void
put(char *dst, size_t len, const char *s)
{
	snprintf(dst, len, "%s", s != NULL ? s : "");
}

/* Whether the page is full (rows or bytes); then more rows follow. */
static bool
page_full(struct page *p)
{
	if (p->res->nrows < IPC_USAGE_ROWS_MAX &&
	    p->bytes < IPC_USAGE_PAGE_BYTES)
		return false;
	p->res->more = true;
	return true;
}

/* The encoded size of a row, about (its strings and the keys). */
static size_t
row_bytes(const struct ipc_usage_row *r)
{
	return strlen(r->ns) + strlen(r->instance) + strlen(r->key) +
	    strlen(r->device_class) + strlen(r->profile) +
	    (r->detail != NULL ? strlen(r->detail) : 0) + 160;
}

/*
 * The next row of the page, cleared: 1 and *ret, 0 for a row skipped
 * before the offset, -ECANCELED when the page is full.
 */
static int
page_next(struct page *p, struct ipc_usage_row **ret)
{
	struct ipc_usage_row *r;

	if (p->skip > 0) {
		p->skip--;
		return 0;
	}
	if (page_full(p))
		return -ECANCELED;
	r = &p->res->rows[p->res->nrows++];
	memset(r, 0, sizeof(*r));
	*ret = r;
	return 1;
}

/* One aggregated row into the page (or skipped before the offset). */
static int
page_add(const struct usage_sum *u, void *arg)
{
	struct page *p = arg;
	struct ipc_usage_row *r;
	int n;

	if ((n = page_next(p, &r)) <= 0)
		return n;
	put(r->ns, sizeof(r->ns), u->ns);
	put(r->instance, sizeof(r->instance), u->instance);
	put(r->key, sizeof(r->key), u->key);
	put(r->device_class, sizeof(r->device_class), u->device_class);
	put(r->profile, sizeof(r->profile), u->profile);
	r->device_ms = u->device_us / 1000;
	r->gpu_ms = (uint64_t)(u->gpu_us / 1000.0 + 0.5);
	r->intervals = u->intervals;
	r->bounded = u->bounded;
	r->open = u->open;
	p->bytes += row_bytes(r);
	return 0;
}

/* Status: collect the devices a namespace holds now. */
static int
held_of(const struct usage_sum *u, void *arg)
{
	struct page *p = arg;
	char *s, *tok, *save = NULL;

	if (strcmp(u->ns, p->ns) != 0 || (s = strdup(u->key)) == NULL)
		return 0;
	for (tok = strtok_r(s, " ", &save); tok != NULL;
	    tok = strtok_r(NULL, " ", &save))
		json_array_append_new(p->held, json_string(tok));
	free(s);
	return 0;
}

/*
 * Status: the tenant's topology domains and state, from its Namespace's
 * annotations (at most TOPO_SHOWN ids, then how many more).
 */
#define TOPO_SHOWN	4
static void
topo_detail(json_t *d, const char *annotations)
{
	json_t *a = json_loads(annotations, 0, NULL);
	const char *st = json_string_value(json_object_get(a,
	    RESOLVED_TOPO_STATE));
	const char *dom = json_string_value(json_object_get(a,
	    RESOLVED_TOPO_DOMAINS));
	char buf[1024];
	int n = 0, shown = 0, off;

	if (st != NULL) {
		off = snprintf(buf, sizeof(buf), "%s; domains:", st);
		for (const char *s = dom; s != NULL && *s != '\0'; n++) {
			size_t len = strcspn(s, ",");

			if (shown < TOPO_SHOWN && off + (int)len + 2 <
			    (int)sizeof(buf)) {
				off += snprintf(buf + off, sizeof(buf) -
				    (size_t)off, " %.*s", (int)len, s);
				shown++;
			}
			s += len + (s[len] == ',');
		}
		if (n > shown)
			snprintf(buf + off, sizeof(buf) - (size_t)off,
			    " (%d more)", n - shown);
		json_object_set_new(d, "topology", json_string(buf));
	}
	json_decref(a);
}

/* Status: the detail object of one tenant. */
static char *
status_detail(struct page *p, const struct cache_instance *in,
    const char *ns, size_t *ret_pending, size_t *ret_held)
{
	struct cache_ns *row = NULL;
	json_t *d = json_object(), *iso, *pend = json_array();
	const struct acct_pending *pd;
	const char *names[32];
	struct resolved res;
	char err[128], *out, lastbuf[ACCT_RESULT_MSG_MAX + 256];
	const struct acct_result *rs;
	const char *last, *msg;
	size_t i, n = 0;

	iso = json_loads(in->isolation, 0, NULL);
	json_object_set(d, "mode", json_object_get(iso, "sharing"));
	json_object_set(d, "profile", json_object_get(iso, "migProfile"));
	json_object_set(d, "maxDevices", json_object_get(iso, "maxDevices"));
	json_decref(iso);
	p->ns = ns;
	p->held = json_array();
	(void)usage_held(acct_store(p->sd->acct), held_of, p);
	*ret_held = json_array_size(p->held);
	json_object_set_new(d, "held", p->held);
	pd = acct_pending(p->sd->acct);
	msg = NULL;
	n = acct_pending_quota_pods(pd, ns, names, nitems(names), &msg);
	for (i = 0; i < n && i < nitems(names); i++)
		json_array_append_new(pend, json_string(names[i]));
	if (msg != NULL)
		json_object_set_new(d, "quota", json_string(msg));
	*ret_pending = n;
	json_object_set_new(d, "pending", pend);
	/* kpgpud-quota's newest Warning about this very version of the
	   instance, else what the namespace shows */
	rs = acct_result_get(acct_results(p->sd->acct), in->kind, in->ns,
	    in->name);
	if (rs != NULL && in->rv != NULL && strcmp(rs->rv, in->rv) == 0) {
		snprintf(lastbuf, sizeof(lastbuf), "%s at %s: %s", rs->reason,
		    rs->ts, rs->msg);
		last = lastbuf;
	} else if (cache_ns_get(p->sd->cache, ns, &row) == 0 &&
	    row->isolated && row->resolved != NULL && resolved_parse(
	    row->resolved, strlen(row->resolved), &res, err, sizeof(err)) ==
	    0)
		last = "OK: isolated, namespace labelled and resolved";
	else if (in->deleted != NULL)
		last = "being removed";
	else
		last = "not isolated yet: see the Warning Events on the instance";
	if (row != NULL && row->annotations != NULL)
		topo_detail(d, row->annotations);
	cache_ns_free(row);
	json_object_set_new(d, "last", json_string(last));
	out = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(d);
	if (out != NULL && strlen(out) > IPC_DETAIL_MAX) {
		free(out);
		out = strdup("{\"error\":\"detail too long\"}");
	}
	return out;
}

/* Status: one row per instance that asks for isolation. */
static int
status_row(const struct cache_instance *in, void *arg)
{
	struct page *p = arg;
	struct ipc_usage_row *r;
	const char *ns = *in->ns != '\0' ? in->ns : in->name;
	size_t pending = 0, held = 0;
	json_t *iso;
	int n;

	if (in->isolation == NULL)
		return 0;
	if ((n = page_next(p, &r)) <= 0)
		return n;
	put(r->ns, sizeof(r->ns), ns);
	snprintf(r->instance, sizeof(r->instance), "%s/%s", in->kind,
	    in->name);
	iso = json_loads(in->isolation, 0, NULL);
	put(r->profile, sizeof(r->profile), json_string_value(
	    json_object_get(iso, "migProfile")));
	json_decref(iso);
	r->detail = status_detail(p, in, ns, &pending, &held);
	r->open = held;
	r->intervals = pending;
	if (r->detail == NULL)
		return -ENOMEM;
	p->bytes += row_bytes(r);
	return 0;
}

/* USAGE: one page of a view. */
void
acct_ipc_usage(struct ipc_req *req, const struct ipc_msg *msg, void *arg)
{
	struct syncd *sd = arg;
	const struct ipc_usage *q = &msg->u.usage;
	struct ipc_usage_row *rows;
	struct ipc_msg m;
	struct page p;
	size_t i;
	int r;

	if (sd->acct == NULL) {
		(void)ipc_req_error(req, ENOTSUP, "no usage ledger");
		return;
	}
	if ((rows = calloc(IPC_USAGE_ROWS_MAX, sizeof(*rows))) == NULL) {
		(void)ipc_req_error(req, ENOMEM, "out of memory");
		return;
	}
	memset(&m, 0, sizeof(m));
	m.type = IPC_USAGE_RESULT;
	m.u.usage_result.rows = rows;
	m.u.usage_result.now_us = ledger_now_us();
	m.u.usage_result.lost = acct_lost(sd->acct);
	memset(&p, 0, sizeof(p));
	p.res = &m.u.usage_result;
	p.skip = q->offset;
	p.sd = sd;
	if (q->view == IPC_USAGE_STATUS)
		r = cache_instance_foreach(sd->cache, NULL, 0, status_row, &p);
	else
		r = usage_query(acct_store(sd->acct), (enum usage_by)q->view,
		    q->since_us, q->until_us, m.u.usage_result.now_us, page_add,
		    &p);
	if (r < 0 && r != -ECANCELED)
		(void)ipc_req_error(req, -r, "usage ledger read failed");
	else
		(void)ipc_req_reply(req, &m);
	for (i = 0; i < m.u.usage_result.nrows; i++)
		free(rows[i].detail);
	free(rows);
}
