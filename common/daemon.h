/*
 * The event-loop glue every daemon shares, on libevent:
 *   SIGTERM/SIGINT	STOPPING=1, the stop hook, then event_base_loopexit
 *   SIGHUP		RELOADING=1, the reload hook, then READY=1
 *   SIGUSR1		toggle debug logging
 *   SIGPIPE		ignored
 * and a housekeeping timer that sends WATCHDOG=1 at half of WATCHDOG_USEC
 * from the loop itself (a stuck loop stops the pings), optionally gated by
 * an alive hook. Plus the refuse-root check and a locked pidfile.
 */
#ifndef KPGPUD_DAEMON_H
#define KPGPUD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct daemon;

struct daemon_hooks {
	/* graceful stop requested (signal name given); may be NULL */
	void	(*stop)(void *arg, int signo);
	/* SIGHUP: re-read configuration; return 0 or -errno; may be NULL */
	int	(*reload)(void *arg);
	/* watchdog gate: false suppresses the ping (e.g. a worker is stuck) */
	bool	(*alive)(void *arg);
	void	*arg;
};

/*
 * Install the signal handlers and the watchdog timer on base. hooks is
 * copied. 0 or -errno; ret untouched on failure.
 */
int	 daemon_new(struct event_base *base, const struct daemon_hooks *hooks,
	    struct daemon **ret);
/* Remove handlers and timer (NULL ok). */
void	 daemon_free(struct daemon *d);
/* Watchdog ping interval in ms, 0 when no watchdog is configured. */
uint64_t daemon_watchdog_interval_ms(const struct daemon *d);
/* Whether a stop signal was received. */
bool	 daemon_stopping(const struct daemon *d);
/* Result of the last reload hook (0 before any). */
int	 daemon_last_reload(const struct daemon *d);

/* -EPERM when running as uid 0 (real or effective) and !allow_root. */
int	 daemon_check_root(bool allow_root);

/*
 * Create path (0644, O_CLOEXEC), take an exclusive lock (-EBUSY when
 * another live process holds it) and write our pid. The fd is kept open to
 * hold the lock; pass it to daemon_pidfile_remove at exit.
 */
int	 daemon_pidfile_write(const char *path, int *ret_fd);
/* Unlink path and close fd (fd < 0 ok). */
void	 daemon_pidfile_remove(const char *path, int fd);

#endif
