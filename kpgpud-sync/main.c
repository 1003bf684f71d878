/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-sync: lists and watches Namespaces, the configured instance custom
 * resources and the objects kpgpud owns with a read-only API token, keeps
 * them in the SQLite cache and serves sync.sock. See kpgpud-sync(8).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "common/config.h"
#include "common/daemon.h"
#include "kube/kube.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/metrics_http.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "kpgpud-sync/acct.h"
#include "kpgpud-sync/discovery.h"
#include "kpgpud-sync/syncd.h"

struct sync_conf {
	char			*runtime_dir;
	char			*socket;
	char			*cache;
	char			*instances;
	char			*instance_groups;
	int64_t			 discovery_interval_ms;
	struct config_uids	 peer_uids;
	struct config_uids	 admit_uids, quota_uids, ctl_uids;
	int64_t			 watch_timeout_ms;
	int64_t			 stall_timeout_ms;
	int64_t			 list_limit;
	int64_t			 backoff_base_ms;
	int64_t			 backoff_max_ms;
	int64_t			 max_subscriber_buffer;
	int64_t			 max_watch_line;
	int64_t			 usage_retention_ms;
	int64_t			 usage_hours_ms;
	struct kube_conf	 k;
	struct daemon_conf	 d;
};

#define SC struct sync_conf
static const struct config_opt sync_opts[] = {
	CONFIG_PATH(SC, runtime_dir, "runtime-dir", 0, "/run/kpgpud", "Files",
	    "Directory of the sockets.", 0),
	CONFIG_PATH(SC, socket, "socket", 0, NULL, "Files",
	    "sync.sock path (default RUNTIME-DIR/sync.sock).", 0),
	CONFIG_PATH(SC, cache, "cache", 0, "/var/lib/kpgpud/cache.db",
	    "Files", "The SQLite cache (sync is its only writer).", 0),
	KUBE_CONF_OPTS(SC, "Read-only bearer token file (re-read when it "
	    "changes).", "50", "Requests per second to the API server.", "100",
	    "auto"),
	CONFIG_STRING(SC, instance_groups, "instance-groups", 0,
	    "platformapi.kubeplus", "Watch",
	    "API groups whose every resource is an instance kind, found by "
	    "discovery (KubePlus: platformapi.kubeplus); \"\" for none.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(SC, discovery_interval_ms, "discovery-interval", 0,
	    "30s", 100, 3600000, "Watch",
	    "How often the instance groups are discovered again (kinds "
	    "added later are watched without a restart).", CONFIG_NORELOAD),
	CONFIG_STRING(SC, instances, "instances", 0, "", "Watch",
	    "More instance custom resources: group/version/resource[,...]; "
	    "one the API does not serve is an error (log, metric, /readyz).",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(SC, watch_timeout_ms, "watch-timeout", 0, "5m",
	    1000, 3600000, "Watch",
	    "Watch timeoutSeconds (randomised up to twice that).",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(SC, stall_timeout_ms, "stall-timeout", 0, "90s",
	    200, 3600000, "Watch",
	    "Restart a watch that brings no bytes for this long.",
	    CONFIG_NORELOAD),
	CONFIG_INT(SC, list_limit, "list-limit", 0, "500", 1, 10000, "Watch",
	    "Objects per list page.", CONFIG_NORELOAD),
	CONFIG_INT(SC, max_watch_line, "max-watch-line", 0, "16777216", 4096,
	    268435456, "Watch",
	    "Longest watch event line; a longer one restarts the watch.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(SC, backoff_base_ms, "backoff-base", 0, "500ms", 1,
	    600000, "Watch", "First retry delay after an error.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(SC, backoff_max_ms, "backoff-max", 0, "30s", 1,
	    3600000, "Watch", "Longest retry delay.", CONFIG_NORELOAD),
	CONFIG_UIDS(SC, peer_uids, "peer-uids", 0, NULL, "Socket",
	    "Uids allowed on sync.sock (default: our own; the role uids "
	    "below are allowed too).", CONFIG_NORELOAD),
	CONFIG_UIDS(SC, admit_uids, "admit-uids", 0, NULL, "Socket",
	    "Uids that may take the admit role (namespace lookups and "
	    "subscriptions only). Setting any of --admit-uids, --quota-uids, "
	    "--ctl-uids binds roles to uids: a peer may then take only a role "
	    "listed for its uid, whatever it says in HELLO.", CONFIG_NORELOAD),
	CONFIG_UIDS(SC, quota_uids, "quota-uids", 0, NULL, "Socket",
	    "Uids that may take the quota role.", CONFIG_NORELOAD),
	CONFIG_UIDS(SC, ctl_uids, "ctl-uids", 0, NULL, "Socket",
	    "Uids that may take the ctl role (kpgpuctl).", CONFIG_NORELOAD),
	CONFIG_INT(SC, max_subscriber_buffer, "max-subscriber-buffer", 0,
	    "67108864", 65536, 1073741824, "Socket",
	    "Bytes queued for one peer before it is dropped as too slow.",
	    CONFIG_NORELOAD),
	CONFIG_STRING(SC, d.metrics_listen, "metrics-listen", 0, NULL,
	    "Metrics", "Serve /metrics and /readyz on [HOST:]PORT ([V6]:PORT; "
	    "no HOST: 127.0.0.1).",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(SC, usage_retention_ms, "usage-retention", 0, "720h",
	    60000, INT64_C(87600) * 3600000, "Accounting",
	    "Keep raw usage intervals this long after they close, then roll "
	    "them up per tenant and hour.", CONFIG_NORELOAD),
	CONFIG_DURATION(SC, usage_hours_ms, "usage-hourly-retention", 0,
	    "9504h", 3600000, INT64_C(876000) * 3600000, "Accounting",
	    "Keep the rolled-up hours this long (396 days), then delete them.",
	    CONFIG_NORELOAD),
	DAEMON_CONF_OPTS(SC),
};
#undef SC

struct sync_main {
	struct sync_conf	 conf;
	struct daemon_run	*run;
	struct event_base	*base;
	struct kube_config	*kcfg;
	struct kube_client	*kc;
	struct cache		*cache;
	struct syncd		 sd;
	char			 sockpath[4096];
	uint64_t		 start_ms;
};

/* Every collection to watch: namespaces, instances, owned kinds. */
static int
sync_collections(const struct sync_conf *c, struct sync_res *res,
    size_t max, size_t *ret_n)
{
	/* the claims' allocations: acct_res_claims (one watch, two uses) */
	static const char *const owned[] = { CACHE_KIND_DEVICECLASS,
	    CACHE_KIND_CLAIMTEMPLATE, CACHE_KIND_CLAIM, CACHE_KIND_QUOTA,
	    CACHE_KIND_SLICE };
	char *list, *tok, *save = NULL;
	size_t n = 0, i;
	int r = 0;

	sync_res_namespaces(&res[n++]);
	for (i = 0; i < nitems(owned); i++)
		(void)sync_res_owned(owned[i], &res[n++]);
	acct_res_claims(&res[n++]);
	acct_res_pods(&res[n++]);
	acct_res_events(&res[n++]);
	acct_res_results(&res[n++]);
	if (c->instances == NULL || *c->instances == '\0') {
		*ret_n = n;
		return 0;
	}
	if ((list = strdup(c->instances)) == NULL)
		return -ENOMEM;
	for (tok = strtok_r(list, ", ", &save); tok != NULL;
	    tok = strtok_r(NULL, ", ", &save)) {
		if (n == max) {
			r = -E2BIG;
			break;
		}
		if ((r = sync_res_instance(tok, &res[n])) < 0) {
			fprintf(stderr, "kpgpud-sync: bad --instances entry "
			    "\"%s\": want group/version/resource\n", tok);
			break;
		}
		n++;
	}
	free(list);
	if (r == 0)
		*ret_n = n;
	return r;
}

/* /metrics on the optional listener: the registry, then the ledger's. */
static int
sync_metrics_render(void *arg, struct buf *out)
{
	struct sync_main *sm = arg;
	int r;

	syncd_update_gauges(&sm->sd);
	if ((r = metrics_render(sm->run->reg, out)) < 0)
		return r;
	return sm->sd.acct != NULL ? acct_metrics(sm->sd.acct, out) : 0;
}

/*
 * /readyz on the metrics listener: 200 once the first sync is complete,
 * else 503; the body lists the checks, each collection not synced yet
 * with why its last list failed, and a configured collection the API does
 * not serve as a warning line (it does not make sync unready).
 */
static void
sync_readyz_cb(struct evhttp_request *req, void *arg)
{
	struct sync_main *sm = arg;
	const char *keys[SYNCD_MAX_RES], *why[SYNCD_MAX_RES];
	struct evbuffer *out = evbuffer_new();
	size_t n, i;

	if (out == NULL) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	evbuffer_add_printf(out, "[%c]synced %s\n", sm->sd.synced ? '+' : '-',
	    sm->sd.synced ? "ok" : "the first full sync is not complete");
	n = syncd_unsynced(&sm->sd, keys, why, SYNCD_MAX_RES);
	for (i = 0; i < n && i < SYNCD_MAX_RES; i++)
		evbuffer_add_printf(out, "[-]resource %s: not synced: %s\n",
		    keys[i], *why[i] ? why[i] : "the first list is under way");
	n = syncd_unserved(&sm->sd, keys, SYNCD_MAX_RES);
	for (i = 0; i < n && i < SYNCD_MAX_RES; i++)
		evbuffer_add_printf(out, "[!]resource %s: not served by the "
		    "API server (configured; watched as empty)\n", keys[i]);
	evbuffer_add_printf(out, "readyz check %s\n", sm->sd.synced ?
	    "passed" : "failed");
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, sm->sd.synced ? 200 : 503, sm->sd.synced ?
	    "OK" : "Service Unavailable", out);
	evbuffer_free(out);
}

/* /readyz next to /metrics on --metrics-listen. */
static int
sync_readyz(struct sync_main *sm)
{
	int r;

	if (sm->run->http == NULL ||
	    (r = metrics_http_handle(sm->run->http, "/readyz", sync_readyz_cb,
	    sm)) == 0)
		return 0;
	log_err("metrics listener failed spec=%s error=%s",
	    log_q(sm->conf.d.metrics_listen), strerror(-r));
	return r;
}

/* All collections are in place: the socket is up, tell systemd. */
static void
sync_on_synced(struct syncd *sd)
{
	struct sync_main *sm = (struct sync_main *)((char *)sd -
	    offsetof(struct sync_main, sd));
	uint64_t gen = 0;

	(void)cache_generation(sd->cache, &gen);
	log_notice("initial sync complete ms=%llu generation=%llu",
	    (unsigned long long)(monotonic_ms() - sm->start_ms),
	    (unsigned long long)gen);
	(void)sdn_ready();
	(void)sdn_status("synced, generation %llu", (unsigned long long)gen);
}

/* Load the kubeconfig and create the API client. */
static int
sync_kube(struct sync_main *sm)
{
	struct kube_client_opts o;
	char err[600];
	int r;

	memset(&o, 0, sizeof(o));
	o.user_agent = "kpgpud-sync/" KPGPUD_VERSION;
	o.watch_stall_ms = (int)sm->conf.stall_timeout_ms;
	o.max_line = (size_t)sm->conf.max_watch_line;
	if ((r = kube_setup(sm->base, &sm->conf.k, &o, &sm->kcfg, &sm->kc,
	    err, sizeof(err))) < 0) {
		log_err("%s", err);
		return r;
	}
	log_info("api server=%s http_version=%s",
	    log_q(kube_config_server(sm->kcfg)),
	    kube_http_versions[sm->conf.k.http_version]);
	return 0;
}

/* The sync.sock path, and the socket passed by systemd if any. */
static int
sync_socket(struct sync_main *sm, int *ret_fd)
{
	struct sdn_fd fds[SDN_MAX_LISTEN_FDS];
	size_t n = 0;
	int r, fd = -1;

	if ((r = daemon_sync_socket(sm->conf.socket, sm->conf.runtime_dir,
	    sm->sockpath, sizeof(sm->sockpath))) < 0)
		return r;
	if ((r = sdn_listen_fds(fds, SDN_MAX_LISTEN_FDS, &n)) < 0)
		return r;
	if (n > 0) {
		fd = sdn_listen_fd_named(fds, n, "sync.sock");
		if (fd < 0 && n == 1)
			fd = fds[0].fd;
	}
	*ret_fd = fd;
	return 0;
}

/*
 * sync.sock's uid allowlist (--peer-uids and every role's uids) and the
 * roles bound to uids, into ic (uids is the allowlist's storage).
 */
static int
sync_peer_uids(struct sync_main *sm, struct syncd_ipc_config *ic,
    uid_t *uids)
{
	const struct config_uids *lists[] = { &sm->conf.peer_uids,
	    &sm->conf.admit_uids, &sm->conf.quota_uids, &sm->conf.ctl_uids };
	size_t n = 0;

	for (size_t l = 0; l < nitems(lists); l++)
		for (int i = 0; i < lists[l]->n; i++) {
			size_t k = 0;

			while (k < n && uids[k] != lists[l]->uid[i])
				k++;
			if (k < n)
				continue;
			if (n == IPC_UIDS_MAX) {
				log_err("sync.sock: more than %d distinct peer "
				    "uids", IPC_UIDS_MAX);
				return -E2BIG;
			}
			uids[n++] = lists[l]->uid[i];
		}
	/* none at all: our own uid only, as before */
	ic->uids = uids;
	ic->nuids = n;
	ic->role_uids[IPC_ROLE_ADMIT] = sm->conf.admit_uids.uid;
	ic->nrole_uids[IPC_ROLE_ADMIT] = (size_t)sm->conf.admit_uids.n;
	ic->role_uids[IPC_ROLE_QUOTA] = sm->conf.quota_uids.uid;
	ic->nrole_uids[IPC_ROLE_QUOTA] = (size_t)sm->conf.quota_uids.n;
	ic->role_uids[IPC_ROLE_CTL] = sm->conf.ctl_uids.uid;
	ic->nrole_uids[IPC_ROLE_CTL] = (size_t)sm->conf.ctl_uids.n;
	if (sm->conf.admit_uids.n + sm->conf.quota_uids.n +
	    sm->conf.ctl_uids.n > 0)
		log_info("sync.sock roles bound to uids admit=%d quota=%d "
		    "ctl=%d", sm->conf.admit_uids.n, sm->conf.quota_uids.n,
		    sm->conf.ctl_uids.n);
	return 0;
}

/* Everything after the common start-up: open, connect, serve, sync. */
static int
sync_setup(void *arg, struct daemon_run *run)
{
	struct sync_main *sm = arg;
	struct sync_res res[SYNCD_MAX_RES];
	struct reflector_config rc;
	struct syncd_ipc_config ic;
	uid_t uids[IPC_UIDS_MAX];
	size_t nres = 0;
	int r, fd;

	sm->run = run;
	sm->base = run->base;
	sm->start_ms = monotonic_ms();
	if ((r = sync_collections(&sm->conf, res, SYNCD_MAX_RES, &nres)) < 0)
		return r;
	if ((r = cache_open(sm->conf.cache, 0, &sm->cache)) < 0) {
		log_err("cache open failed path=%s error=%s",
		    log_q(sm->conf.cache), strerror(-r));
		return r;
	}
	if (cache_recovered(sm->cache))
		log_warn("cache was unreadable, moved aside and rebuilt "
		    "path=%s", log_q(sm->conf.cache));
	if ((r = sync_kube(sm)) < 0)
		return r;
	memset(&rc, 0, sizeof(rc));
	rc.list_limit = (unsigned)sm->conf.list_limit;
	rc.watch_timeout_s = (unsigned)((sm->conf.watch_timeout_ms + 999) /
	    1000);
	rc.backoff_base_ms = (uint64_t)sm->conf.backoff_base_ms;
	rc.backoff_max_ms = (uint64_t)sm->conf.backoff_max_ms;
	if ((r = syncd_init(&sm->sd, sm->base, sm->cache, sm->kc, run->reg,
	    res, nres, &rc)) < 0) {
		log_err("sync init failed: %s", strerror(-r));
		return r;
	}
	sm->sd.on_synced = sync_on_synced;
	if ((r = acct_new(&sm->sd, sm->conf.usage_retention_ms,
	    sm->conf.usage_hours_ms, sm->conf.cache, &sm->sd.acct)) < 0) {
		log_err("usage ledger failed path=%s error=%s",
		    log_q(sm->conf.cache), strerror(-r));
		return r;
	}
	if ((r = syncd_disc_start(&sm->sd, sm->conf.instance_groups != NULL ?
	    sm->conf.instance_groups : "",
	    (uint64_t)sm->conf.discovery_interval_ms)) < 0) {
		log_err("bad --instance-groups \"%s\": want API group names "
		    "(DNS subdomains), at most %d", sm->conf.instance_groups,
		    DISC_MAX_GROUPS);
		return r;
	}
	if ((r = sync_socket(sm, &fd)) < 0)
		return r;
	memset(&ic, 0, sizeof(ic));
	ic.path = sm->sockpath;
	ic.listen_fd = fd;
	if ((r = sync_peer_uids(sm, &ic, uids)) < 0)
		return r;
	ic.max_outbuf = (size_t)sm->conf.max_subscriber_buffer;
	if ((r = syncd_ipc_start(&sm->sd, &ic)) < 0) {
		log_err("sync.sock failed path=%s error=%s",
		    log_q(sm->sockpath), strerror(-r));
		return r;
	}
	if ((r = sync_readyz(sm)) < 0)
		return r;
	log_notice("started socket=%s cache=%s collections=%zu",
	    log_q(sm->sockpath), log_q(sm->conf.cache), nres);
	return syncd_start(&sm->sd);
}

/* Release what sync_setup made, in reverse order. */
static void
sync_teardown(void *arg)
{
	struct sync_main *sm = arg;

	syncd_ipc_stop(&sm->sd);
	syncd_fini(&sm->sd);
	acct_free(sm->sd.acct);
	sm->sd.acct = NULL;
	kube_client_free(sm->kc);
	kube_config_free(sm->kcfg);
	cache_free(sm->cache);
}

int
main(int argc, char **argv)
{
	static struct sync_main sm;
	static const struct daemon_spec spec = {
		.prog = "kpgpud-sync", .metrics_name = "sync",
		.opts = sync_opts, .nopts = nitems(sync_opts),
		.conf = &sm.conf, .conf_size = sizeof(sm.conf),
		.common = &sm.conf.d, .ready_later = true,
		.setup = sync_setup, .teardown = sync_teardown,
		.render = sync_metrics_render, .hooks = { .arg = &sm },
	};

	return daemon_main(&spec, argc, argv);
}
