/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The skeleton every daemon shares: daemon_main() runs the start-up and
 * shutdown sequence (options, logging, refuse-root, fault points, pidfile,
 * event base, metrics registry, signals, watchdog, the /metrics listener,
 * READY=1, the loop, teardown) around the daemon's hooks. Below it, the
 * event-loop glue, on libevent:
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
#include <stddef.h>
#include <stdint.h>

#include "common/metrics_http.h"

struct config;
struct config_opt;
struct event_base;
struct daemon;
struct metrics;

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

/* What the loop glue has seen so far. */
struct daemon_state {
	uint64_t	 wd_ms;		/* watchdog ping interval, 0: none */
	bool		 stopping;	/* a stop signal was received */
	int		 last_reload;	/* the last reload hook's result */
};

/* The state above, valid until daemon_free. */
const struct daemon_state *daemon_state(const struct daemon *d);

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

/*
 * The numeric address and port a socket is bound to ("?" when unknown),
 * for a "listening" log line (the real port when 0 was asked for).
 */
void	 daemon_sockname(int fd, char host[static 128], char port[static 16]);

/*
 * Where sync.sock is, as all three daemons name it: path when given (a
 * --sync-socket or sync's --socket), else DIR/sync.sock (--runtime-dir).
 * 0, or -ENAMETOOLONG when it does not fit buf.
 */
int	 daemon_sync_socket(const char *path, const char *dir, char *buf,
	    size_t len);

/* The options every daemon has: a member of its options struct. */
struct daemon_conf {
	char	*pidfile;
	char	*metrics_listen;	/* [HOST:]PORT, or NULL: no listener */
	bool	 allow_root;
	bool	 debug;
};

/*
 * The entries of struct daemon_conf every daemon's options table ends
 * with (T: its options struct, whose member d is the struct daemon_conf;
 * --metrics-listen is the daemon's own entry: its help says what it
 * serves). Needs common/config.h.
 */
#define DAEMON_CONF_OPTS(T)						\
	CONFIG_PATH(T, d.pidfile, "pidfile", 0, NULL, "General",	\
	    "Write and lock a pid file.", CONFIG_NORELOAD),		\
	CONFIG_BOOL(T, d.allow_root, "allow-root", 0, "false", "General", \
	    "Run even as uid 0.", CONFIG_NORELOAD),			\
	CONFIG_BOOL(T, d.debug, "debug", 'd', "false", "General",	\
	    "Debug logging (SIGUSR1 toggles it).", 0)

/* What daemon_main() runs for; the set-up hook keeps a pointer to it. */
struct daemon_run {
	const struct daemon_spec *spec;
	struct config		*cfg;
	struct event_base	*base;
	struct metrics		*reg;		/* named spec->metrics_name */
	struct metrics_http	*http;		/* --metrics-listen, or NULL */
	struct daemon		*daemon;
	int			 pidfd;
};

/* A daemon, as its main() describes it to daemon_main(). */
struct daemon_spec {
	const char		*prog;		/* "kpgpud-sync" */
	const char		*metrics_name;	/* the registry's: "sync" */
	const struct config_opt	*opts;
	size_t			 nopts;
	void			*conf;		/* the struct opts fill */
	size_t			 conf_size;
	struct daemon_conf	*common;	/* inside conf */
	/* before the event base (admit: evthread_use_pthreads); may be NULL */
	int			(*threads)(void);
	/* the daemon sends READY=1 itself (sync: once synced) */
	bool			 ready_later;
	/* everything after the common start-up; 0 or -errno (exit 1) */
	int			(*setup)(void *arg, struct daemon_run *run);
	/* release what setup made, also after it failed; may be NULL */
	void			(*teardown)(void *arg);
	/* GET /metrics on --metrics-listen; NULL: the registry as is */
	metrics_http_render_fn	 render;
	/*
	 * stop, alive and arg as for daemon_new; reload runs after the
	 * configuration was re-read (and debug logging set from it).
	 */
	struct daemon_hooks	 hooks;
};

/*
 * Run the daemon: parse the options (exits 2 on a bad one, 0 after
 * --help/--version/--check-config), refuse root, arm fault points, write
 * the pidfile, make the event base, the registry and the signal glue,
 * serve --metrics-listen, set up, say READY=1, loop until a stop signal,
 * tear down. Returns the exit status (1 when set-up failed); start-up
 * errors before set-up exit 1 with a message.
 */
int	 daemon_main(const struct daemon_spec *spec, int argc, char **argv);

#endif
