/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-admit's link to kpgpud-sync (sync.sock): a SUBSCRIBE stream of
 * Namespace changes that keeps the nscache current, read-through NS_LOOKUPs
 * for namespaces the map does not know, and STATUS polls for readiness.
 * Lives on the main thread's event loop; the flags it publishes (connected,
 * ready) may be read from any thread.
 */
#ifndef KPGPUD_ADMIT_SYNCCONN_H
#define KPGPUD_ADMIT_SYNCCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kpgpud-admit/nscache.h"

struct event_base;
struct metric;
struct syncconn;

struct syncconn_config {
	const char	*path;		/* sync.sock */
	uid_t		 uids[16];	/* sync's allowed uids (SO_PEERCRED) */
	size_t		 nuids;		/* 0: any */
	unsigned	 backoff_max_ms;	/* reconnect at least this often */
	struct metric	*connected_gauge;	/* may be NULL */
};

/* What a read-through lookup found. */
struct syncconn_answer {
	int		 err;		/* 0, or -errno: lookup failed */
	bool		 found;		/* the namespace exists */
	bool		 isolated;
	char		*resolved;	/* annotation JSON or NULL; owned */
};

typedef void	(*syncconn_lookup_fn)(struct syncconn_answer *a, void *arg);

/* Create the link on base and start connecting. */
int	 syncconn_new(struct event_base *base, const struct syncconn_config *cfg,
	    struct nscache *cache, struct syncconn **ret);
/* Disconnect; pending lookups are answered with -ECANCELED. NULL ok. */
void	 syncconn_free(struct syncconn *s);

/* Whether sync is connected / connected with its cache synced. */
bool	 syncconn_connected(const struct syncconn *s);
bool	 syncconn_ready(const struct syncconn *s);

/*
 * Ask sync about ns within timeout_ms; cb runs on the main loop exactly
 * once (also on failure, with a->err set), and owns a->resolved. A found
 * namespace is also put into the cache.
 */
void	 syncconn_lookup(struct syncconn *s, const char *ns,
	    unsigned timeout_ms, syncconn_lookup_fn cb, void *arg);

/* Housekeeping from the main loop: STATUS polls for readiness. */
void	 syncconn_tick(struct syncconn *s);

#endif
