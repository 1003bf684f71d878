/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpuctl usage and kpgpuctl status: the usage ledger of kpgpud-sync over
 * sync.sock (USAGE, ctl role).
 *   usage [--sync-socket PATH] [--timeout MS] [--since T] [--until T]
 *         [--by tenant|claim|pod|device] [--format table|csv|json]
 *   status [--sync-socket PATH] [--timeout MS]
 * T is RFC 3339 (2026-12-01T00:00:00Z), unix seconds (@1796083200) or a
 * duration before now (24h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "common/opts.h"
#include "common/util.h"
#include "ipc/ipc.h"
#include "kpgpuctl/ctl.h"
#include "kpgpud-sync/ledger.h"

#define USAGE_DEFAULT_TIMEOUT	10000
#define USAGE_MAX_PAGES		10000	/* a million rows */

enum fmt { FMT_TABLE, FMT_CSV, FMT_JSON };

struct usagecmd {
	const char	*socket;
	unsigned	 timeout_ms;
	uint64_t	 since, until;
	uint32_t	 view;
	enum fmt	 fmt;
};

static const char *const views[] = { "tenant", "claim", "pod", "device" };

/* A time argument: RFC 3339, @unix seconds, or a duration ago. */
static int
parse_when(const char *s, uint64_t *ret)
{
	int64_t ms;
	uint64_t v;

	if (ledger_parse_time(s, ret) == 0)
		return 0;
	if (s[0] == '@' && parse_uint64(s + 1, UINT64_MAX / 1000000u, &v) ==
	    0) {
		*ret = v * 1000000u;
		return 0;
	}
	if (parse_duration_ms(s, &ms) == 0 && ms >= 0 &&
	    (uint64_t)ms * 1000u <= ledger_now_us()) {
		*ret = ledger_now_us() - (uint64_t)ms * 1000u;
		return 0;
	}
	return -EINVAL;
}

/* One USAGE page. */
static int
usagecmd_page(const struct usagecmd *o, struct ipc_call *s, uint32_t view,
    uint32_t offset, struct ipc_msg *rep)
{
	struct ipc_msg req;
	int r;

	memset(&req, 0, sizeof(req));
	req.type = IPC_USAGE;
	req.deadline_ms = o->timeout_ms;
	req.u.usage.view = view;
	req.u.usage.since_us = o->since;
	req.u.usage.until_us = o->until;
	req.u.usage.offset = offset;
	memset(rep, 0, sizeof(*rep));
	if ((r = ipc_call_request(s, &req, o->timeout_ms, rep)) < 0)
		return r;
	if (rep->type == IPC_ERROR) {
		fprintf(stderr, "kpgpuctl: sync refused: %s\n",
		    rep->u.error.message);
		r = -(int)rep->u.error.code;
		ipc_msg_clear(rep);
		return r < 0 ? r : -EIO;
	}
	if (rep->type != IPC_USAGE_RESULT) {
		ipc_msg_clear(rep);
		return -EBADMSG;
	}
	return 0;
}

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void
csv_field(const char *s, bool last)
{
	if (strpbrk(s, ",\"\r\n") != NULL) {
		putchar('"');
		for (; *s; s++) {
			if (*s == '"')
				putchar('"');
			putchar(*s);
		}
		putchar('"');
	} else
		fputs(s, stdout);
	putchar(last ? '\n' : ',');
}

/* Print one row in the chosen format (json: appended to arr). */
static void
usagecmd_row(const struct usagecmd *o, const struct ipc_usage_row *r,
    json_t *arr)
{
	char ds[32], gs[32], n[3][24];
	const char *key = o->view == IPC_USAGE_TENANT ? NULL : r->key;

	snprintf(ds, sizeof(ds), "%.3f", (double)r->device_ms / 1000.0);
	snprintf(gs, sizeof(gs), "%.3f", (double)r->gpu_ms / 1000.0);
	snprintf(n[0], sizeof(n[0]), "%llu", (unsigned long long)r->intervals);
	snprintf(n[1], sizeof(n[1]), "%llu", (unsigned long long)r->bounded);
	snprintf(n[2], sizeof(n[2]), "%llu", (unsigned long long)r->open);
	if (o->fmt == FMT_JSON) {
		json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:f,s:f,s:I,s:I,s:I}",
		    "namespace", r->ns, "instance", r->instance,
		    "device_class", r->device_class, "profile", r->profile,
		    "device_seconds", (double)r->device_ms / 1000.0,
		    "gpu_equivalent_seconds", (double)r->gpu_ms / 1000.0,
		    "intervals", (json_int_t)r->intervals,
		    "bounded_intervals", (json_int_t)r->bounded,
		    "open_intervals", (json_int_t)r->open);

		if (j != NULL && key != NULL)
			json_object_set_new(j, views[o->view],
			    json_string(key));
		json_array_append_new(arr, j);
	} else if (o->fmt == FMT_CSV) {
		csv_field(r->ns, false);
		csv_field(r->instance, false);
		if (key != NULL)
			csv_field(key, false);
		csv_field(r->device_class, false);
		csv_field(*r->profile ? r->profile : "", false);
		csv_field(ds, false);
		csv_field(gs, false);
		csv_field(n[0], false);
		csv_field(n[1], false);
		csv_field(n[2], true);
	} else {
		printf("%-16s %-24s ", r->ns, r->instance);
		if (key != NULL)
			printf("%-32s ", key);
		printf("%-24s %-10s %14s %14s %5s %5s %5s\n", r->device_class,
		    *r->profile ? r->profile : "-", ds, gs, n[0], n[1], n[2]);
	}
}

/* The header line (csv, table). */
static void
usagecmd_header(const struct usagecmd *o)
{
	const char *key = o->view == IPC_USAGE_TENANT ? NULL : views[o->view];

	if (o->fmt == FMT_CSV)
		printf("namespace,instance,%s%sdevice_class,profile,"
		    "device_seconds,gpu_equivalent_seconds,intervals,"
		    "bounded_intervals,open_intervals\n", key ? key : "",
		    key ? "," : "");
	else if (o->fmt == FMT_TABLE) {
		printf("%-16s %-24s ", "NAMESPACE", "INSTANCE");
		if (key != NULL)
			printf("%-32s ", key[0] == 'c' ? "CLAIM" : key[0] == 'p' ?
			    "POD" : "DEVICE");
		printf("%-24s %-10s %14s %14s %5s %5s %5s\n", "DEVICE_CLASS",
		    "PROFILE", "DEVICE_SECONDS", "GPU_EQ_SECONDS", "INTV",
		    "BOUND", "OPEN");
	}
}

/* usage: every page, printed as it comes. */
static int
usagecmd_run(const struct usagecmd *o, struct ipc_call *s)
{
	struct ipc_msg rep;
	json_t *arr = json_array(), *doc;
	uint64_t lost = 0;
	uint32_t offset = 0;
	bool more = true;
	int pages = 0, r = 0;

	usagecmd_header(o);
	while (more && pages++ < USAGE_MAX_PAGES) {
		if ((r = usagecmd_page(o, s, o->view, offset, &rep)) < 0)
			break;
		for (size_t i = 0; i < rep.u.usage_result.nrows; i++)
			usagecmd_row(o, &rep.u.usage_result.rows[i], arr);
		offset += (uint32_t)rep.u.usage_result.nrows;
		more = rep.u.usage_result.more && rep.u.usage_result.nrows > 0;
		lost = rep.u.usage_result.lost;
		ipc_msg_clear(&rep);
	}
	if (r == 0 && o->fmt == FMT_JSON) {
		doc = json_pack("{s:s,s:I,s:I,s:I,s:o}", "by", views[o->view],
		    "since_us", (json_int_t)o->since, "until_us",
		    (json_int_t)(o->until > INT64_MAX ? INT64_MAX : o->until),
		    "lost_intervals", (json_int_t)lost, "rows", arr);
		arr = NULL;
		if (doc != NULL)
			json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS);
		putchar('\n');
		json_decref(doc);
	}
	json_decref(arr);
	if (r < 0) {
		fprintf(stderr, "kpgpuctl usage: %s\n", strerror(-r));
		return 1;
	}
	if (lost > 0)
		fprintf(stderr, "kpgpuctl usage: warning: %llu closed "
		    "intervals were lost when sync's cache was rebuilt; these "
		    "totals miss them\n", (unsigned long long)lost);
	return 0;
}

/* A double-quoted value with its quotes and backslashes escaped. */
static void
put_quoted(const char *key, const char *v)
{
	printf(" %s=\"", key);
	for (; v != NULL && *v; v++) {
		if (*v == '"' || *v == '\\')
			putchar('\\');
		putchar(*v == '\n' ? ' ' : *v);
	}
	putchar('"');
}

/* status: one line per tenant. */
static int
status_run(const struct usagecmd *o, struct ipc_call *s)
{
	struct ipc_msg rep;
	uint32_t offset = 0;
	bool more = true;
	int pages = 0, r = 0;

	while (more && pages++ < USAGE_MAX_PAGES) {
		if ((r = usagecmd_page(o, s, IPC_USAGE_STATUS, offset,
		    &rep)) < 0)
			break;
		for (size_t i = 0; i < rep.u.usage_result.nrows; i++) {
			const struct ipc_usage_row *w =
			    &rep.u.usage_result.rows[i];
			json_t *d = json_loads(w->detail ? w->detail : "{}", 0,
			    NULL), *v;
			char *held = NULL, *pend = NULL;
			size_t j;
			struct buf b = BUF_INIT(0);

			json_array_foreach(json_object_get(d, "held"), j, v)
				buf_printf(&b, "%s%s", j ? "," : "",
				    json_string_value(v));
			held = buf_steal(&b, NULL);
			json_array_foreach(json_object_get(d, "pending"), j, v)
				buf_printf(&b, "%s%s", j ? "," : "",
				    json_string_value(v));
			pend = buf_steal(&b, NULL);
			printf("namespace=%s instance=%s mode=%s profile=%s "
			    "maxDevices=%lld held=%llu devices=%s "
			    "pending=%llu pods=%s", w->ns, w->instance,
			    json_string_value(json_object_get(d, "mode")) ?:
			    "-", *w->profile ? w->profile : "-",
			    (long long)json_integer_value(json_object_get(d,
			    "maxDevices")), (unsigned long long)w->open,
			    held && *held ? held : "-",
			    (unsigned long long)w->intervals,
			    pend && *pend ? pend : "-");
			put_quoted("quota", json_string_value(
			    json_object_get(d, "quota")));
			put_quoted("last", json_string_value(
			    json_object_get(d, "last")));
			if (json_object_get(d, "topology") != NULL)
				put_quoted("topology", json_string_value(
				    json_object_get(d, "topology")));
			putchar('\n');
			free(held);
			free(pend);
			json_decref(d);
		}
		offset += (uint32_t)rep.u.usage_result.nrows;
		more = rep.u.usage_result.more && rep.u.usage_result.nrows > 0;
		ipc_msg_clear(&rep);
	}
	if (r < 0) {
		fprintf(stderr, "kpgpuctl status: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}

/* Parse the options; 0, or 2 after printing why. */
static int
usagecmd_opts(int argc, char **argv, bool status, struct usagecmd *o)
{
	static const struct opts_long lo[] = {
		{ "sync-socket=", 's' },
		{ "socket=", 's' },
		{ "timeout=", 't' },
		{ "since=", 'a' },
		{ "until=", 'b' },
		{ "by=", 'y' },
		{ "format=", 'f' },
	};
	struct opts op;
	uint64_t t;
	int c, i;

	opts_init(&op, argc, argv, "", lo, nitems(lo));
	while ((c = opts_next(&op)) != OPTS_END) {
		if (status && c != 's' && c != 't' && c != OPTS_ERR)
			c = '?';
		switch (c) {
		case 's':
			o->socket = op.arg;
			break;
		case 't':
			if (parse_uint64(op.arg, 600000, &t) < 0 || t == 0)
				goto bad;
			o->timeout_ms = (unsigned)t;
			break;
		case 'a':
		case 'b':
			if (parse_when(op.arg, c == 'a' ? &o->since :
			    &o->until) < 0) {
				fprintf(stderr, "kpgpuctl usage: bad time \"%s\": "
				    "want RFC 3339, @UNIX or a duration ago\n",
				    op.arg);
				return 2;
			}
			break;
		case 'y':
			for (i = 0; i < 4 && strcmp(op.arg, views[i]); i++)
				;
			if (i == 4)
				goto bad;
			o->view = (uint32_t)i;
			break;
		case 'f':
			if (strcmp(op.arg, "table") == 0)
				o->fmt = FMT_TABLE;
			else if (strcmp(op.arg, "csv") == 0)
				o->fmt = FMT_CSV;
			else if (strcmp(op.arg, "json") == 0)
				o->fmt = FMT_JSON;
			else
				goto bad;
			break;
		default:
			if (c == OPTS_ERR)
				fprintf(stderr, "%s\n", op.err);
			goto bad;
		}
	}
	if (op.ind != argc || o->since >= o->until) {
		if (o->since >= o->until)
			fprintf(stderr, "kpgpuctl usage: --since must be "
			    "before --until\n");
		goto bad;
	}
	return 0;
bad:
	fprintf(stderr, status ? "usage: kpgpuctl status [--sync-socket PATH] "
	    "[--timeout MS]\n" : "usage: kpgpuctl usage [--sync-socket PATH] "
	    "[--timeout MS] [--since T] [--until T]\n"
	    "    [--by tenant|claim|pod|device] [--format table|csv|json]\n");
	return 2;
}

/* Connect and run usage or status. */
static int
usagecmd_main(int argc, char **argv, bool status)
{
	struct usagecmd o = { NULL, USAGE_DEFAULT_TIMEOUT, 0, 0, 0,
	    FMT_TABLE };
	struct ipc_call *s;
	int r;

	o.until = (uint64_t)INT64_MAX;
	if ((r = usagecmd_opts(argc, argv, status, &o)) != 0)
		return r;
	o.socket = ctl_sync_socket(o.socket);
	if ((r = ipc_call_open(o.socket, IPC_ROLE_CTL, NULL, 0,
	    o.timeout_ms, &s)) < 0) {
		fprintf(stderr, "kpgpuctl %s: cannot reach %s: %s\n",
		    status ? "status" : "usage", o.socket, strerror(-r));
		return 1;
	}
	r = status ? status_run(&o, s) : usagecmd_run(&o, s);
	ipc_call_close(s);
	return r;
}

/* kpgpuctl usage ... */
int
ctl_cmd_usage(int argc, char **argv)
{
	return usagecmd_main(argc, argv, false);
}

/* kpgpuctl status ... */
int
ctl_cmd_status(int argc, char **argv)
{
	return usagecmd_main(argc, argv, true);
}
