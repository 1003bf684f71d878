/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The systemd service protocol without libsystemd: sd_notify datagrams to
 * $NOTIFY_SOCKET (a path or an abstract "@name"), the watchdog interval
 * from $WATCHDOG_USEC/$WATCHDOG_PID, and socket activation through
 * $LISTEN_FDS/$LISTEN_PID/$LISTEN_FDNAMES.
 *
 * The notify calls return 1 when the message was sent, 0 when there is no
 * $NOTIFY_SOCKET (not under systemd: nothing to do), or -errno.
 */
#ifndef KPGPUD_SDNOTIFY_H
#define KPGPUD_SDNOTIFY_H

#include <stddef.h>
#include <stdint.h>

#define SDN_LISTEN_FDS_START	3
#define SDN_MAX_LISTEN_FDS	64
#define SDN_FDNAME_MAX		255

/* Send one raw state string ("READY=1\nSTATUS=..."). */
int	 sdn_notify(const char *state);
/* READY=1 */
int	 sdn_ready(void);
/* WATCHDOG=1 */
int	 sdn_watchdog(void);
/* STOPPING=1 */
int	 sdn_stopping(void);
/* RELOADING=1 with MONOTONIC_USEC=<now>, as Type=notify-reload wants. */
int	 sdn_reloading(void);
/* STATUS=<formatted text> (newlines are replaced by spaces). */
int	 sdn_status(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));

/*
 * The watchdog interval in microseconds if systemd expects pings from this
 * process (WATCHDOG_USEC set and WATCHDOG_PID absent or ours): 0 and
 * *ret_usec set; -ENODATA when no watchdog is configured; -EINVAL if the
 * variables are malformed.
 */
int	 sdn_watchdog_usec(uint64_t *ret_usec);

/* One socket passed by the service manager. */
struct sdn_fd {
	int	fd;
	char	name[SDN_FDNAME_MAX + 1];	/* "unknown" when unnamed */
};

/*
 * Take the sockets passed by socket activation: fills up to max entries
 * (fds from 3 on), sets close-on-exec on each, and unsets LISTEN_FDS,
 * LISTEN_PID and LISTEN_FDNAMES. *ret_n is 0 when nothing was passed or
 * LISTEN_PID is another process. -EINVAL on malformed variables, -E2BIG if
 * more than max fds were passed.
 */
int	 sdn_listen_fds(struct sdn_fd *ret_fds, size_t max, size_t *ret_n);
/* The fd named name among fds, or -ENOENT. */
int	 sdn_listen_fd_named(const struct sdn_fd *fds, size_t n,
	    const char *name);

#endif
