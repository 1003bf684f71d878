/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-admit: the mutating admission webhook. It holds the TLS key and
 * nothing else: no API token, no cache.db. Namespace state comes from
 * kpgpud-sync over sync.sock; see kpgpud-admit(8).
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "common/config.h"
#include "common/daemon.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/hostport.h"
#include "common/metrics.h"
#include "common/metrics_http.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "kpgpud-admit/bufcap.h"
#include "kpgpud-admit/nscache.h"
#include "kpgpud-admit/server.h"
#include "kpgpud-admit/syncconn.h"
#include "kpgpud-admit/tls.h"

struct admit_conf {
	char	*listen;
	int64_t	 listen_fd;
	char	*tls_cert;
	char	*tls_key;
	char	*client_ca;
	char	*runtime_dir;
	char	*sync_socket;
	struct config_uids sync_uids;
	int	 miss_policy;
	int64_t	 lookup_timeout_ms;
	int64_t	 max_body;
	int64_t	 max_headers;
	int64_t	 max_buffered;
	int64_t	 max_connections;
	int64_t	 max_conns_per_addr;
	int64_t	 first_request_ms;
	int64_t	 max_patch;
	int64_t	 negative_ttl_ms;
	int64_t	 lookup_rate;
	int64_t	 lookup_burst;
	int64_t	 idle_timeout_ms;
	int64_t	 threads;
	int64_t	 reload_interval_ms;
	int64_t	 grace_ms;
	int64_t	 max_namespaces;
	struct daemon_conf d;
};

static const char *const miss_policies[] = { "allow", "deny", NULL };

#define C struct admit_conf
static const struct config_opt admit_opts[] = {
	CONFIG_STRING(C, listen, "listen", 'l', ":8443", "Serving",
	    "Address and port to serve HTTPS on ([ADDR:]PORT, [V6]:PORT).",
	    CONFIG_NORELOAD),
	CONFIG_INT(C, listen_fd, "listen-fd", 0, "-1", -1, 65535, "Serving",
	    "Serve on this already listening socket instead (LISTEN_FDS "
	    "wins).", CONFIG_NORELOAD),
	CONFIG_PATH(C, tls_cert, "tls-cert", 0, NULL, "Serving",
	    "PEM certificate chain; reloaded when the file changes.",
	    CONFIG_REQUIRED | CONFIG_NORELOAD),
	CONFIG_PATH(C, tls_key, "tls-key", 0, NULL, "Serving",
	    "PEM private key; reloaded when the file changes.",
	    CONFIG_REQUIRED | CONFIG_NORELOAD),
	CONFIG_PATH(C, client_ca, "client-ca", 0, NULL, "Serving",
	    "Require client certificates signed by this CA (mutual TLS).",
	    CONFIG_NORELOAD),
	CONFIG_INT(C, threads, "threads", 't', "0", 0, 64, "Serving",
	    "HTTP worker threads; 0 = one per online CPU.", CONFIG_NORELOAD),
	CONFIG_INT(C, max_body, "max-body", 0, "33554432", 1024, 256 << 20,
	    "Serving", "Largest request body in bytes (larger: 413, which "
	    "failurePolicy: Ignore admits); above any review of a pod etcd "
	    "can store.", CONFIG_NORELOAD),
	CONFIG_INT(C, max_patch, "max-patch", 0, "67108864", 4096, 64 << 20,
	    "Serving", "Largest JSON patch in bytes; a pod of an isolated "
	    "namespace that needs more is denied.", CONFIG_NORELOAD),
	CONFIG_INT(C, max_headers, "max-headers", 0, "65536", 1024, 1 << 20,
	    "Serving", "Largest request head in bytes (larger: 431).",
	    CONFIG_NORELOAD),
	CONFIG_INT(C, max_buffered, "max-buffered", 0, "0", 0, INT64_C(1) << 40,
	    "Serving", "Request bytes held across all connections at most "
	    "(a request that needs more: 503, its connection closed); 0: "
	    "--threads x (--max-headers + --max-body), at least what one "
	    "largest request needs.", CONFIG_NORELOAD),
	CONFIG_INT(C, max_connections, "max-connections", 0, "4096", 1,
	    1000000, "Serving", "Open connections at most; more are closed "
	    "at once (the apiserver keeps a small pool).", CONFIG_NORELOAD),
	CONFIG_INT(C, max_conns_per_addr, "max-connections-per-address", 0,
	    "256", 0, 1000000, "Serving", "Open connections from one peer "
	    "address at most (0: no cap); more are closed at once.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(C, first_request_ms, "first-request-timeout", 0,
	    "5s", 100, 600000, "Serving", "A new connection must finish the "
	    "TLS handshake and send its first whole request within this, or "
	    "it is closed.", CONFIG_NORELOAD),
	CONFIG_DURATION(C, idle_timeout_ms, "idle-timeout", 0, "90s", 1000,
	    3600000, "Serving", "After each answer, the time a connection has to "
	    "send its next whole request.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(C, reload_interval_ms, "tls-reload-interval", 0, "1s",
	    100, 3600000, "Serving", "How often to check the TLS files.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(C, grace_ms, "shutdown-grace", 0, "5s", 0, 60000,
	    "Serving", "How long requests in flight may finish at shutdown.",
	    0),
	CONFIG_PATH(C, runtime_dir, "runtime-dir", 0, "/run/kpgpud", "Sync",
	    "Directory of the sockets.", CONFIG_NORELOAD),
	CONFIG_PATH(C, sync_socket, "sync-socket", 's', NULL, "Sync",
	    "sync.sock path (default RUNTIME-DIR/sync.sock).",
	    CONFIG_NORELOAD),
	CONFIG_UIDS(C, sync_uids, "sync-uids", 0, NULL, "Sync",
	    "Uids kpgpud-sync may run as (checked with SO_PEERCRED); default: "
	    "any.", CONFIG_NORELOAD),
	CONFIG_ENUM(C, miss_policy, "miss-policy", 0, "deny", miss_policies,
	    "Sync", "Unknown namespace with sync unavailable: allow (no "
	    "patch) or deny; SIGHUP applies a change.", 0),
	CONFIG_DURATION(C, lookup_timeout_ms, "lookup-timeout", 0, "2s", 10,
	    30000, "Sync", "Bound on a read-through namespace lookup (also "
	    "bounded by the review's ?timeout=); SIGHUP applies a change.", 0),
	CONFIG_DURATION(C, negative_ttl_ms, "negative-ttl", 0, "5s", 0,
	    600000, "Sync", "How long sync's \"no such namespace\" answers "
	    "a review without another lookup (0: not kept); a namespace "
	    "that appears ends it.", CONFIG_NORELOAD),
	CONFIG_INT(C, lookup_rate, "lookup-rate", 0, "100", 0, 1000000,
	    "Sync", "Read-through lookups per second at most (0: no limit); "
	    "over it a review gets the miss policy without a lookup.",
	    CONFIG_NORELOAD),
	CONFIG_INT(C, lookup_burst, "lookup-burst", 0, "200", 1, 1000000,
	    "Sync", "Lookups allowed at once above --lookup-rate.",
	    CONFIG_NORELOAD),
	CONFIG_INT(C, max_namespaces, "max-namespaces", 0, "100000", 1,
	    10000000, "Sync", "Most namespaces kept in the local map.",
	    CONFIG_NORELOAD),
	CONFIG_STRING(C, d.metrics_listen, "metrics-listen", 0, NULL, "General",
	    "Also serve /metrics over plain HTTP on [HOST:]PORT ([V6]:PORT; "
	    "no HOST: 127.0.0.1); /metrics on the HTTPS port is always there.",
	    CONFIG_NORELOAD),
	DAEMON_CONF_OPTS(C),
};
#undef C

/*
 * The pieces live in the workers' configuration (srv: TLS, map, sync
 * link, registry, the metrics they count), made in place by setup.
 */
struct admit {
	struct admit_conf	 conf;
	struct event_base	*base;
	struct event		*tick;
	struct server_config	 srv;
	struct server		*server;
	struct metric		*m_connected, *m_namespaces, *m_reloads;
	char			 sockpath[4096];	/* sync.sock */
};

#define M(m)	offsetof(struct admit, m)
/* The metrics in /metrics order: kind, name, help, label, series, where. */
static const struct admit_metric {
	enum metric_kind kind;
	const char	*name, *help, *label;
	size_t		 max, off;
} admit_metrics[] = {
	{ METRIC_COUNTER, "kpgpud_admit_requests_total",
	    "AdmissionReview requests by result.", "result", 32,
	    M(srv.requests) },
	{ METRIC_HISTOGRAM, "kpgpud_admit_request_duration_seconds",
	    "Time from request to response.", NULL, 0, M(srv.duration) },
	{ METRIC_COUNTER, "kpgpud_admit_fallbacks_total",
	    "Answers not backed by a live sync, by kind.", "kind", 16,
	    M(srv.fallbacks) },
	{ METRIC_GAUGE, "kpgpud_admit_sync_connected",
	    "1 while connected to kpgpud-sync.", NULL, 0, M(m_connected) },
	{ METRIC_GAUGE, "kpgpud_admit_cached_namespaces",
	    "Namespaces in the local map.", NULL, 0, M(m_namespaces) },
	{ METRIC_COUNTER, "kpgpud_admit_connections_total",
	    "Connections accepted, by worker thread.", "worker", 64,
	    M(srv.connections) },
	{ METRIC_COUNTER, "kpgpud_admit_connections_refused_total",
	    "Connections closed at once: over --max-connections.", NULL, 0,
	    M(srv.refused) },
	{ METRIC_COUNTER, "kpgpud_admit_lookups_merged_total",
	    "Requests that waited on a lookup of the same namespace already "
	    "in flight instead of asking sync again.", NULL, 0,
	    M(srv.merged) },
	{ METRIC_COUNTER, "kpgpud_admit_connections_refused_per_address_total",
	    "Connections closed at once: their address had "
	    "--max-connections-per-address open.", NULL, 0,
	    M(srv.refused_addr) },
	{ METRIC_COUNTER, "kpgpud_admit_connections_deadline_total",
	    "Connections closed for no complete first request within "
	    "--first-request-timeout.", NULL, 0, M(srv.deadline_closed) },
	{ METRIC_COUNTER, "kpgpud_admit_lookups_total",
	    "Namespaces the map did not know: sent (asked sync), "
	    "negative_cached (sync said recently it does not exist), "
	    "rate_limited (over --lookup-rate: miss policy).", "result", 4,
	    M(srv.lookups) },
	{ METRIC_GAUGE, "kpgpud_admit_open_connections",
	    "Connections open now.", NULL, 0, M(srv.open) },
	{ METRIC_GAUGE, "kpgpud_admit_buffered_bytes",
	    "Request bytes held in connections' buffers now (under "
	    "--max-buffered).", NULL, 0, M(srv.buffered) },
	{ METRIC_COUNTER, "kpgpud_admit_tls_reloads_total",
	    "Certificate reloads by result.", "result", 4, M(m_reloads) },
};
#undef M

/*
 * --max-buffered as it applies: 0 sizes it to the workers and the
 * per-request caps; below what one largest request needs is an error.
 */
static size_t
max_buffered(const struct admit_conf *c, int nthreads)
{
	size_t one = (size_t)(c->max_headers + c->max_body);
	size_t need = bufcap_min(SERVER_REQUEST_BUFFER(one));
	size_t v = (size_t)c->max_buffered;

	if (v == 0)
		return (size_t)nthreads * one > need ? (size_t)nthreads * one :
		    need;
	if (v < need)
		fatal("--max-buffered %zu is less than one largest request "
		    "needs: %zu (--max-headers + --max-body, with room to read, "
		    "of which a body may use three quarters)", v, need);
	return v;
}

/* Check the TLS files and reload them when they changed. */
static void
check_tls(struct admit *a)
{
	char err[512];
	int rv = tls_reload_if_changed(a->srv.tls, err, sizeof(err));

	if (rv == 1) {
		metric_inc(a->m_reloads, "ok", NULL);
		log_notice("tls certificate reloaded generation=%lu",
		    tls_generation(a->srv.tls));
	} else if (rv < 0) {
		metric_inc(a->m_reloads, "error", NULL);
		log_warn("tls reload failed, keeping the current certificate: "
		    "%s", err);
	}
}

/* Housekeeping: TLS files, sync status, gauges. */
static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct admit *a = arg;

	(void)fd;
	(void)what;
	check_tls(a);
	syncconn_tick(a->srv.sync);
	metric_set(a->m_namespaces, NULL, NULL,
	    (double)nscache_count(a->srv.cache));
}

/* SIGHUP, after the configuration was re-read: policy and TLS files. */
static int
reload_hook(void *arg)
{
	struct admit *a = arg;

	if (a->server != NULL)
		server_set_policy(a->server, a->conf.miss_policy == 1,
		    (unsigned)a->conf.lookup_timeout_ms);
	check_tls(a);
	return 0;
}

/* GET /metrics on --metrics-listen: the gauges read now, the registry. */
static int
admit_render(void *arg, struct buf *out)
{
	struct admit *a = arg;

	if (a->server != NULL)
		server_update_gauges(a->server);
	return metrics_render(a->srv.registry, out);
}

/* Watchdog gate: every worker loop must still be turning. */
static bool
alive_hook(void *arg)
{
	struct admit *a = arg;

	return server_alive(a->server);
}

/* Register admit_metrics in the registry, each where the table says. */
static int
setup_metrics(struct admit *a)
{
	static const double bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01,
	    0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
	int rv;

	for (size_t i = 0; i < nitems(admit_metrics); i++) {
		const struct admit_metric *t = &admit_metrics[i];
		bool h = t->kind == METRIC_HISTOGRAM;

		if ((rv = metrics_register(a->srv.registry, t->kind, t->name,
		    t->help, h ? bounds : NULL, h ? nitems(bounds) : 0,
		    t->label, NULL, t->max, (struct metric **)(void *)
		    ((char *)a + t->off))) < 0)
			return rv;
	}
	return 0;
}

/*
 * Replies leave in more than one TLS record; without TCP_NODELAY (inherited
 * by accepted sockets) Nagle holds the last one for the client's delayed
 * ACK, some 40 ms per request.
 */
static int
nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Bind and listen on --listen; the fd, or -errno with err set. */
static int
open_listener(const char *spec, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL;
	struct hostport hp;
	char why[128], port[8];
	int fd = -1, one = 1, rv;

	if ((rv = hostport_parse(spec, "", HOSTPORT_PORT0, &hp, why,
	    sizeof(why))) < 0) {
		snprintf(err, errlen, "--listen %s: %s", spec, why);
		return rv;
	}
	snprintf(port, sizeof(port), "%u", (unsigned)hp.port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rv = getaddrinfo(hp.host[0] ? hp.host : NULL, port, &hints, &res)) != 0) {
		snprintf(err, errlen, "--listen %s: %s", spec, gai_strerror(rv));
		return -EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	/* SO_REUSEPORT: each worker binds its own socket (server.c) */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)) < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
	    sizeof(one)) < 0 || nodelay(fd) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(fd, 1024) < 0) {
		rv = -errno;
		snprintf(err, errlen, "--listen %s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return rv;
	}
	freeaddrinfo(res);
	return fd;
}

/* The socket to serve on: socket activation, --listen-fd or --listen. */
static int
listener(struct admit *a)
{
	struct sdn_fd fds[SDN_MAX_LISTEN_FDS];
	size_t n = 0;
	char err[512];
	int fd;

	if (sdn_listen_fds(fds, SDN_MAX_LISTEN_FDS, &n) == 0 && n > 0) {
		for (size_t i = 1; i < n; i++)
			close(fds[i].fd);
		fd_nonblock(fds[0].fd);
		nodelay(fds[0].fd);
		return fds[0].fd;
	}
	if (a->conf.listen_fd >= 0) {
		fd_cloexec((int)a->conf.listen_fd);
		fd_nonblock((int)a->conf.listen_fd);
		nodelay((int)a->conf.listen_fd);
		return (int)a->conf.listen_fd;
	}
	if ((fd = open_listener(a->conf.listen, err, sizeof(err))) < 0)
		fatal("%s", err);
	return fd;
}

/* Log where we serve (the real port when :0 was asked for). */
static void
say_listening(struct admit *a, int nthreads)
{
	char host[128], port[16];

	daemon_sockname(a->srv.listen_fd, host, port);
	log_notice("listening address=%s port=%s threads=%d sync=%s "
	    "miss_policy=%s mtls=%s max_buffered=%zu", host, port, nthreads,
	    log_q(a->sockpath), miss_policies[a->conf.miss_policy],
	    a->conf.client_ca ? "on" : "off", a->srv.max_buffered);
}

/* Create everything that serves: TLS, map, sync link, workers. */
static int
setup(void *arg, struct daemon_run *run)
{
	struct admit *a = arg;
	struct syncconn_config sc = { 0 };
	struct server_config *srv = &a->srv;
	struct timeval tv;
	char err[512];
	int rv, nthreads = (int)a->conf.threads;

	a->base = run->base;
	srv->registry = run->reg;
	if (nthreads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		nthreads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
	}
	if (tls_new(a->conf.tls_cert, a->conf.tls_key, a->conf.client_ca,
	    &srv->tls, err, sizeof(err)) < 0)
		fatal("tls: %s", err);
	if ((rv = nscache_new((size_t)a->conf.max_namespaces,
	    &srv->cache)) < 0 || (rv = setup_metrics(a)) < 0)
		fatal("setup: %s", strerror(-rv));
	if (daemon_sync_socket(a->conf.sync_socket, a->conf.runtime_dir,
	    a->sockpath, sizeof(a->sockpath)) < 0)
		fatal("sync.sock path too long (--runtime-dir, --sync-socket)");
	sc.path = a->sockpath;
	sc.nuids = (size_t)a->conf.sync_uids.n;
	for (int i = 0; i < a->conf.sync_uids.n; i++)
		sc.uids[i] = a->conf.sync_uids.uid[i];
	sc.connected_gauge = a->m_connected;
	if ((rv = syncconn_new(a->base, &sc, srv->cache, &srv->sync)) < 0)
		fatal("sync link: %s", strerror(-rv));
	srv->listen_fd = listener(a);
	srv->nthreads = nthreads;
	srv->max_body = (size_t)a->conf.max_body;
	srv->max_headers = (size_t)a->conf.max_headers;
	srv->max_buffered = max_buffered(&a->conf, nthreads);
	srv->idle_timeout_s = (unsigned)((a->conf.idle_timeout_ms + 999) /
	    1000);
	srv->lookup_timeout_ms = (unsigned)a->conf.lookup_timeout_ms;
	srv->miss_deny = a->conf.miss_policy == 1;
	srv->main_base = a->base;
	srv->max_connections = (unsigned)a->conf.max_connections;
	srv->max_conns_per_addr = (unsigned)a->conf.max_conns_per_addr;
	srv->first_request_ms = (unsigned)a->conf.first_request_ms;
	srv->max_patch = (size_t)a->conf.max_patch;
	srv->negative_ttl_ms = (unsigned)a->conf.negative_ttl_ms;
	srv->lookup_rate = (unsigned)a->conf.lookup_rate;
	srv->lookup_burst = (unsigned)a->conf.lookup_burst;
	if ((rv = server_new(srv, &a->server)) < 0 ||
	    (rv = server_start(a->server)) < 0)
		fatal("server: %s", strerror(-rv));
	if ((a->tick = event_new(a->base, -1, EV_PERSIST, tick_cb, a)) == NULL)
		fatal("out of memory");
	tv.tv_sec = a->conf.reload_interval_ms / 1000;
	tv.tv_usec = (a->conf.reload_interval_ms % 1000) * 1000;
	event_add(a->tick, &tv);
	say_listening(a, nthreads);
	return 0;
}

/* Tear down in dependency order: workers, sync link, the rest. */
static void
teardown(void *arg)
{
	struct admit *a = arg;

	server_stop(a->server, (unsigned)a->conf.grace_ms);
	syncconn_free(a->srv.sync);
	server_free(a->server);
	if (a->tick != NULL)
		event_free(a->tick);
	close(a->srv.listen_fd);
	tls_free(a->srv.tls);
	nscache_free(a->srv.cache);
}

int
main(int argc, char **argv)
{
	static struct admit a;
	static const struct daemon_spec spec = {
		.prog = "kpgpud-admit", .metrics_name = "admit",
		.opts = admit_opts, .nopts = nitems(admit_opts),
		.conf = &a.conf, .conf_size = sizeof(a.conf),
		.common = &a.conf.d, .threads = evthread_use_pthreads,
		.setup = setup, .teardown = teardown, .render = admit_render,
		.hooks = { .reload = reload_hook, .alive = alive_hook,
		    .arg = &a },
	};

	return daemon_main(&spec, argc, argv);
}
