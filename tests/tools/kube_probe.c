/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small command-line driver of the kube/kube.c client for integration
 * tests against the API simulator:
 *   kube_probe [-k KUBECONFIG] [-x CONTEXT] [-s STALL_MS] CMD ARGS
 *   request METHOD PATH [BODY]   "STATUS <code> attempts=<n> error=<e>"
 *                                then the body (or message) on one line
 *   list PATH LIMIT              "LIST status=<c> pages=<p> items=<n> rv=<rv>"
 *   watch PATH_AND_QUERY MAX     "EVENT <TYPE> <name> <rv>" per event, then
 *                                "END <reason> status=<c> <message>"
 *   lists PATH LIMIT N ROUNDS [W WATCHPATH]
 *                                N paged lists at once on one client, each
 *                                started again ROUNDS times, beside W quiet
 *                                watches of WATCHPATH: "LISTS done=<lists>
 *                                pages=<p> items=<n> failed=<f>"
 * -d MS blocks the loop for MS after each page, as a slow consumer would.
 * -q N sets the rate limit to N requests a second (burst N).
 * -T MS sets the connect and request timeouts (a transfer that waits for a
 * timer to hand over data it has then hangs for that long).
 * The last line is always "METRICS requests=.. retries=.. throttled=..
 * s429=.. s5xx=.. h2=.. kicks=.. kicks_turn_max=.." (h2: responses over
 * HTTP/2; kicks: rounds of curl acting again on its sockets, see
 * kube/kube.c; kicks_turn_max: the most rounds in one turn of the event
 * loop).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>

#include "kube/kube.h"

struct probe {
	struct event_base	*base;
	struct kube_client	*c;
	struct kube_watch	*w;
	bool			 done;
	int			 rc;
	int			 pages;
	int			 items;
	int			 max;
	int			 events;
	const char		*path;		/* lists */
	unsigned		 limit;
	int			 running;	/* lists going on */
	int			 rounds;	/* lists still to start */
	int			 lists;		/* lists finished */
	int			 failed;
	int			 page_delay_ms;	/* -d: busy with each page */
};

static const char *const reasons[] = {
	[KUBE_WATCH_CLOSED] = "CLOSED",
	[KUBE_WATCH_HTTP_ERROR] = "HTTP_ERROR",
	[KUBE_WATCH_EXPIRED] = "EXPIRED",
	[KUBE_WATCH_ERROR_EVENT] = "ERROR_EVENT",
	[KUBE_WATCH_PARSE_ERROR] = "PARSE_ERROR",
	[KUBE_WATCH_STALLED] = "STALLED",
	[KUBE_WATCH_TRANSPORT] = "TRANSPORT",
};

/* Print the response of a plain request. */
static void
req_cb(const struct kube_response *r, void *arg)
{
	struct probe *p = arg;
	char *s = r->json ? json_dumps(r->json, JSON_COMPACT) : NULL;

	printf("STATUS %ld attempts=%d error=%d\n%s\n", r->status,
	    r->attempts, r->error, s ? s : r->message);
	free(s);
	p->rc = r->status >= 200 && r->status < 300 ? 0 : 1;
	p->done = true;
}

/* Count a page of a list. */
static void
page_cb(json_t *items, void *arg)
{
	struct probe *p = arg;

	p->pages++;
	p->items += (int)json_array_size(items);
	if (p->page_delay_ms > 0)
		usleep((useconds_t)p->page_delay_ms * 1000);
}

/* Print the outcome of a list. */
static void
list_end_cb(const struct kube_response *r, const char *rv, void *arg)
{
	struct probe *p = arg;

	printf("LIST status=%ld pages=%d items=%d rv=%s message=%s\n",
	    r->status, p->pages, p->items, rv ? rv : "-", r->message);
	p->rc = rv != NULL ? 0 : 1;
	p->done = true;
}

static void	 lists_end_cb(const struct kube_response *, const char *,
		    void *);

/* Start one more list of the lists command; false when it cannot. */
static bool
lists_next(struct probe *p)
{
	if (kube_list_start(p->c, p->path, NULL, p->limit, NULL, page_cb,
	    lists_end_cb, p, NULL) < 0)
		return false;
	p->rounds--;
	p->running++;
	return true;
}

/* One list of the lists command ended: start the next or finish. */
static void
lists_end_cb(const struct kube_response *r, const char *rv, void *arg)
{
	struct probe *p = arg;

	(void)r;
	p->running--;
	p->lists++;
	if (rv == NULL)
		p->failed++;
	if (p->rounds > 0 && lists_next(p))
		return;
	if (p->running > 0)
		return;
	printf("LISTS done=%d pages=%d items=%d failed=%d\n", p->lists,
	    p->pages, p->items, p->failed);
	p->rc = p->failed > 0 || p->rounds > 0 ? 1 : 0;
	p->done = true;
}

/* Print one watch event; stop after max. */
static void
ev_cb(const struct watch_event *ev, void *arg)
{
	struct probe *p = arg;
	json_t *md = json_object_get(ev->object, "metadata");
	const char *nm = json_string_value(json_object_get(md, "name"));

	printf("EVENT %s %s %s\n", watch_type_name(ev->type), nm ? nm : "-",
	    ev->resource_version ? ev->resource_version : "-");
	fflush(stdout);
	if (++p->events >= p->max) {
		kube_watch_stop(p->w);
		printf("END STOPPED status=0 after %d events\n", p->events);
		p->done = true;
	}
}

/* Print why the watch ended. */
static void
end_cb(const struct kube_watch_end *e, void *arg)
{
	struct probe *p = arg;

	printf("END %s status=%ld %s\n", reasons[e->reason], e->status,
	    e->message);
	p->done = true;
}

/* A quiet watch of the lists command saw an event: ignore it. */
static void
quiet_ev_cb(const struct watch_event *ev, void *arg)
{
	(void)ev;
	(void)arg;
}

/* A quiet watch of the lists command ended. */
static void
quiet_end_cb(const struct kube_watch_end *e, void *arg)
{
	(void)e;
	(void)arg;
}

/* Start the command; 0 or -errno. */
static int
start(struct probe *p, int argc, char **argv)
{
	const char *cmd = argv[0];

	if (strcmp(cmd, "request") == 0 && argc >= 3)
		return kube_request(p->c, argv[1], argv[2],
		    argc > 3 ? "application/json" : NULL,
		    argc > 3 ? argv[3] : NULL, argc > 3 ? strlen(argv[3]) : 0,
		    req_cb, p, NULL);
	if (strcmp(cmd, "list") == 0 && argc >= 3)
		return kube_list_start(p->c, argv[1], NULL,
		    (unsigned)atoi(argv[2]), NULL, page_cb, list_end_cb, p,
		    NULL);
	if (strcmp(cmd, "lists") == 0 && argc >= 5) {
		int n = atoi(argv[3]);

		p->path = argv[1];
		p->limit = (unsigned)atoi(argv[2]);
		p->rounds = n * atoi(argv[4]);
		if (n < 1 || p->rounds < 1)
			return -EINVAL;
		for (int w = argc > 6 ? atoi(argv[5]) : 0; w > 0; w--)
			if (kube_watch_start(p->c, argv[6], quiet_ev_cb,
			    quiet_end_cb, p, NULL) < 0)
				return -ENOMEM;
		while (n-- > 0)
			if (!lists_next(p))
				return -ENOMEM;
		return 0;
	}
	if (strcmp(cmd, "watch") == 0 && argc >= 3) {
		p->max = atoi(argv[2]);
		return kube_watch_start(p->c, argv[1], ev_cb, end_cb, p, &p->w);
	}
	return -EINVAL;
}

int
main(int argc, char **argv)
{
	struct kube_client_opts o = { .backoff_base_ms = 50 };
	struct probe p = { .rc = 2 };
	struct kube_config *cfg;
	const struct kube_metrics *m;
	uint64_t kicks, turn_max = 0;
	const char *kc = NULL, *ctx = NULL;
	char err[256];
	int ch, r;

	while ((ch = getopt(argc, argv, "k:x:s:T:q:d:")) != -1) {
		if (ch == 'k')
			kc = optarg;
		else if (ch == 'x')
			ctx = optarg;
		else if (ch == 's')
			o.watch_stall_ms = atoi(optarg);
		else if (ch == 'd')
			p.page_delay_ms = atoi(optarg);
		else if (ch == 'q')
			o.qps = o.burst = atoi(optarg);
		else if (ch == 'T')
			o.connect_timeout_ms = o.timeout_ms = atoi(optarg);
		else
			return 2;
	}
	argc -= optind;
	argv += optind;
	if (argc < 1 || kube_config_load(kc, ctx, 0, &cfg, err,
	    sizeof(err)) < 0) {
		fprintf(stderr, "kube_probe: %s\n", argc < 1 ? "usage" : err);
		return 2;
	}
	if ((p.base = event_base_new()) == NULL ||
	    (p.c = kube_client_new(p.base, cfg, &o)) == NULL)
		return 2;
	if ((r = start(&p, argc, argv)) < 0) {
		fprintf(stderr, "kube_probe: %s\n", strerror(-r));
		return 2;
	}
	m = kube_client_metrics(p.c);
	while (!p.done) {
		kicks = m->kicks;
		if (event_base_loop(p.base, EVLOOP_ONCE) != 0)
			break;
		if (m->kicks - kicks > turn_max)
			turn_max = m->kicks - kicks;
	}
	printf("METRICS requests=%llu retries=%llu throttled=%llu "
	    "s429=%llu s5xx=%llu h2=%llu kicks=%llu kicks_turn_max=%llu\n",
	    (unsigned long long)m->requests,
	    (unsigned long long)m->retries, (unsigned long long)m->throttled,
	    (unsigned long long)m->status[429],
	    (unsigned long long)(m->status[500] + m->status[503]),
	    (unsigned long long)m->http2, (unsigned long long)m->kicks,
	    (unsigned long long)turn_max);
	kube_client_free(p.c);
	kube_config_free(cfg);
	event_base_free(p.base);
	return p.rc == 2 ? 0 : p.rc;
}
