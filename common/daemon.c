/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemons' skeleton (daemon_main) and its signal handling, watchdog
 * and pidfile glue: see daemon.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/config.h"
#include "common/daemon.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sdnotify.h"

#define DAEMON_NSIG	4

struct daemon {
	struct event_base	*base;
	struct daemon_hooks	 hooks;
	struct event		*sig[DAEMON_NSIG];
	struct event		*wd;
	struct daemon_state	 st;
};

/* SIGTERM/SIGINT: announce, let the daemon wind down, leave the loop. */
static void
daemon_on_stop(evutil_socket_t signo, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	if (d->st.stopping) {
		/* a second signal: do not wait for pending work */
		event_base_loopbreak(d->base);
		return;
	}
	d->st.stopping = true;
	sdn_stopping();
	if (d->hooks.stop != NULL)
		d->hooks.stop(d->hooks.arg, (int)signo);
	event_base_loopexit(d->base, NULL);
}

/* SIGHUP: reload inside RELOADING=1 ... READY=1. */
static void
daemon_on_hup(evutil_socket_t signo, short what, void *arg)
{
	struct daemon *d = arg;

	(void)signo;
	(void)what;
	if (d->st.stopping)
		return;
	sdn_reloading();
	d->st.last_reload = d->hooks.reload != NULL ?
	    d->hooks.reload(d->hooks.arg) : 0;
	if (d->st.last_reload < 0)
		sdn_status("reload failed: %s; running with the old "
		    "configuration", strerror(-d->st.last_reload));
	sdn_ready();
}

/* SIGUSR1: flip debug logging. */
static void
daemon_on_usr1(evutil_socket_t signo, short what, void *arg)
{
	(void)signo;
	(void)what;
	(void)arg;
	log_toggle_debug();
}

/* Watchdog tick: ping only when the loop runs and the daemon is alive. */
static void
daemon_on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	if (d->hooks.alive == NULL || d->hooks.alive(d->hooks.arg))
		sdn_watchdog();
}

/* Start the watchdog timer at half of WATCHDOG_USEC, if configured. */
static int
daemon_watchdog_start(struct daemon *d)
{
	struct timeval tv;
	uint64_t usec;
	int r;

	if ((r = sdn_watchdog_usec(&usec)) == -ENODATA)
		return 0;
	if (r < 0)
		return r;
	usec /= 2;
	if (usec < 1000)
		usec = 1000;
	d->st.wd_ms = usec / 1000;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	d->wd = event_new(d->base, -1, EV_PERSIST, daemon_on_watchdog, d);
	if (d->wd == NULL || event_add(d->wd, &tv) < 0)
		return -ENOMEM;
	return 0;
}

/* Install signal handlers and the watchdog timer. */
int
daemon_new(struct event_base *base, const struct daemon_hooks *hooks,
    struct daemon **ret)
{
	static const int sigs[DAEMON_NSIG] = { SIGTERM, SIGINT, SIGHUP,
	    SIGUSR1 };
	static event_callback_fn const cbs[DAEMON_NSIG] = { daemon_on_stop,
	    daemon_on_stop, daemon_on_hup, daemon_on_usr1 };
	struct daemon *d;
	int r = -ENOMEM;

	if ((d = calloc(1, sizeof(*d))) == NULL)
		return -ENOMEM;
	d->base = base;
	if (hooks != NULL)
		d->hooks = *hooks;
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < DAEMON_NSIG; i++) {
		d->sig[i] = evsignal_new(base, sigs[i], cbs[i], d);
		if (d->sig[i] == NULL || evsignal_add(d->sig[i], NULL) < 0)
			goto fail;
	}
	if ((r = daemon_watchdog_start(d)) < 0)
		goto fail;
	*ret = d;
	return 0;
fail:
	daemon_free(d);
	return r;
}

/* Remove handlers and the timer. */
void
daemon_free(struct daemon *d)
{
	if (d == NULL)
		return;
	for (int i = 0; i < DAEMON_NSIG; i++)
		if (d->sig[i] != NULL)
			event_free(d->sig[i]);
	if (d->wd != NULL)
		event_free(d->wd);
	free(d);
}

/* What the glue has seen. */
const struct daemon_state *
daemon_state(const struct daemon *d)
{
	return &d->st;
}

/* Refuse to run as root unless explicitly allowed. */
int
daemon_check_root(bool allow_root)
{
	if (!allow_root && (getuid() == 0 || geteuid() == 0))
		return -EPERM;
	return 0;
}

/* Create and lock a pidfile holding our pid. */
int
daemon_pidfile_write(const char *path, int *ret_fd)
{
	char pid[32];
	int fd, n, r;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
	    0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	errno = 0;
	if (ftruncate(fd, 0) < 0) {
		r = -errno;
		goto fail;
	}
	if (pwrite(fd, pid, (size_t)n, 0) != n) {
		r = errno ? -errno : -EIO;
		goto fail;
	}
	*ret_fd = fd;
	return 0;
fail:
	close(fd);
	return r;
}

/* Remove the pidfile and drop its lock. */
void
daemon_pidfile_remove(const char *path, int fd)
{
	if (path != NULL)
		unlink(path);
	if (fd >= 0)
		close(fd);
}

/* The address a socket is bound to, numerically. */
void
daemon_sockname(int fd, char host[static 128], char port[static 16])
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	snprintf(host, 128, "?");
	snprintf(port, 16, "?");
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, 128, port, 16,
		    NI_NUMERICHOST | NI_NUMERICSERV);
}

int
daemon_sync_socket(const char *path, const char *dir, char *buf, size_t len)
{
	int n = path != NULL ? snprintf(buf, len, "%s", path) :
	    snprintf(buf, len, "%s/sync.sock", dir);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* SIGHUP: re-read the configuration, then the daemon's own reload hook. */
static int
daemon_main_reload(void *arg)
{
	struct daemon_run *run = arg;
	const struct daemon_spec *spec = run->spec;
	struct config_change ch[CONFIG_MAX_OPTS];
	char err[512];
	size_t n = 0;
	int r;

	if ((r = config_reload(run->cfg, ch, CONFIG_MAX_OPTS, &n, err,
	    sizeof(err))) < 0) {
		log_err("reload failed: %s", err);
		return r;
	}
	for (size_t i = 0; i < n; i++)
		log_notice("config %s %s", ch[i].opt->name, ch[i].applied ?
		    "changed" : "changed; needs a restart");
	log_set_debug(spec->common->debug);
	log_notice("configuration reloaded changed=%zu", n);
	if (spec->hooks.reload == NULL)
		return 0;
	return spec->hooks.reload(spec->hooks.arg);
}

/* The watchdog gate: the daemon's alive hook. */
static bool
daemon_main_alive(void *arg)
{
	const struct daemon_spec *spec = ((struct daemon_run *)arg)->spec;

	return spec->hooks.alive(spec->hooks.arg);
}

/* A stop signal: the daemon's stop hook. */
static void
daemon_main_stop(void *arg, int signo)
{
	const struct daemon_spec *spec = ((struct daemon_run *)arg)->spec;

	spec->hooks.stop(spec->hooks.arg, signo);
}

/* GET /metrics without a render hook: the registry. */
static int
daemon_main_render(void *arg, struct buf *out)
{
	return metrics_render(((struct daemon_run *)arg)->reg, out);
}

/* Serve /metrics on --metrics-listen and say where. */
static int
daemon_main_metrics(struct daemon_run *run)
{
	const struct daemon_spec *spec = run->spec;
	const char *listen = spec->common->metrics_listen;
	char err[128], host[128], port[16];
	int r;

	if (spec->render != NULL)
		r = metrics_http_new(run->base, listen, spec->render,
		    spec->hooks.arg, &run->http, err, sizeof(err));
	else
		r = metrics_http_new(run->base, listen, daemon_main_render,
		    run, &run->http, err, sizeof(err));
	if (r < 0) {
		log_err("--metrics-listen %s: %s", listen, err);
		return r;
	}
	daemon_sockname(metrics_http_fd(run->http), host, port);
	log_notice("metrics address=%s port=%s", host, port);
	return 0;
}

/* Release the daemon's part (if set up), then the skeleton's. */
static void
daemon_main_teardown(struct daemon_run *run, bool set_up)
{
	const struct daemon_spec *spec = run->spec;

	if (set_up && spec->teardown != NULL)
		spec->teardown(spec->hooks.arg);
	metrics_http_free(run->http);
	metrics_free(run->reg);
	daemon_free(run->daemon);
	if (run->pidfd >= 0)
		daemon_pidfile_remove(spec->common->pidfile, run->pidfd);
	event_base_free(run->base);
	config_free(run->cfg);
}

/* The start-up and shutdown sequence every daemon shares. */
int
daemon_main(const struct daemon_spec *spec, int argc, char **argv)
{
	struct daemon_run run = { .spec = spec, .pidfd = -1 };
	struct daemon_conf *dc = spec->common;
	struct daemon_hooks hooks = { .reload = daemon_main_reload,
	    .arg = &run };
	bool set_up = false;
	int r;

	/* before any thread can write to a closed connection */
	signal(SIGPIPE, SIG_IGN);
	log_init(spec->prog, false);
	if ((run.cfg = config_new(spec->prog, spec->opts, spec->nopts,
	    spec->conf, spec->conf_size, 0)) == NULL)
		fatal("config: invalid option table");
	config_main(run.cfg, argc, argv);
	log_set_debug(dc->debug);
	if (daemon_check_root(dc->allow_root) < 0)
		fatal("refusing to run as root (see --allow-root)");
	if (fault_init() < 0)
		fatal("bad KPGPUD_FAULT");
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	if (dc->pidfile != NULL &&
	    (r = daemon_pidfile_write(dc->pidfile, &run.pidfd)) < 0)
		fatal("pidfile %s: %s", dc->pidfile, strerror(-r));
	if ((spec->threads != NULL && spec->threads() < 0) ||
	    (run.base = event_base_new()) == NULL)
		fatal("libevent setup failed");
	if ((run.reg = metrics_new(spec->metrics_name)) == NULL)
		fatal("out of memory");
	if (spec->hooks.alive != NULL)
		hooks.alive = daemon_main_alive;
	if (spec->hooks.stop != NULL)
		hooks.stop = daemon_main_stop;
	if ((r = daemon_new(run.base, &hooks, &run.daemon)) < 0)
		fatal("signals: %s", strerror(-r));
	r = dc->metrics_listen != NULL ? daemon_main_metrics(&run) : 0;
	if (r == 0) {
		set_up = true;
		r = spec->setup(spec->hooks.arg, &run);
	}
	if (r == 0) {
		if (!spec->ready_later)
			(void)sdn_ready();
		event_base_dispatch(run.base);
		log_notice("stopping");
	}
	daemon_main_teardown(&run, set_up);
	return r < 0 ? 1 : 0;
}
