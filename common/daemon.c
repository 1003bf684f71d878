/* Signal handling, watchdog and pidfile glue for the daemons: see daemon.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/sdnotify.h"

#define DAEMON_NSIG	4

struct daemon {
	struct event_base	*base;
	struct daemon_hooks	 hooks;
	struct event		*sig[DAEMON_NSIG];
	struct event		*wd;
	uint64_t		 wd_ms;
	bool			 stopping;
	int			 last_reload;
};

/* SIGTERM/SIGINT: announce, let the daemon wind down, leave the loop. */
static void
daemon_on_stop(evutil_socket_t signo, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	if (d->stopping) {
		/* a second signal: do not wait for pending work */
		event_base_loopbreak(d->base);
		return;
	}
	d->stopping = true;
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
	if (d->stopping)
		return;
	sdn_reloading();
	d->last_reload = d->hooks.reload ? d->hooks.reload(d->hooks.arg) : 0;
	if (d->last_reload < 0)
		sdn_status("reload failed: %s; running with the old "
		    "configuration", strerror(-d->last_reload));
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
	d->wd_ms = usec / 1000;
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

/* Watchdog ping interval in ms (0: none). */
uint64_t
daemon_watchdog_interval_ms(const struct daemon *d)
{
	return d->wd_ms;
}

/* Whether a stop signal arrived. */
bool
daemon_stopping(const struct daemon *d)
{
	return d->stopping;
}

/* Result of the last reload hook. */
int
daemon_last_reload(const struct daemon *d)
{
	return d->last_reload;
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
