/* SPDX-License-Identifier: Apache-2.0 */
/*
 * List-then-watch for one collection, as client-go's reflector does it: a
 * paginated list (limit, continue), then a watch from the list's
 * resourceVersion with bookmarks and a randomised timeoutSeconds, renewed
 * when it ends; 410 Gone relists and the objects missing from the new list
 * are deleted; errors back off exponentially with jitter. The reflector
 * does not touch the cache itself: it hands objects, deletions and
 * resourceVersions to its owner through struct reflector_ops, and reports
 * what happened (for logs and metrics) through ops->note.
 *
 * The pure parts (key set, decisions, backoff) are exposed for tests.
 */
#ifndef KPGPUD_SYNC_REFLECTOR_H
#define KPGPUD_SYNC_REFLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "kube/kube.h"
#include "kpgpud-sync/objects.h"

struct event_base;
struct reflector;

/* ---- a set of "namespace/name" keys (pure) ---- */

#define STRSET_MAX	(16u * 1024 * 1024)	/* entries */

struct strset;

struct strset	*strset_new(void);
void		 strset_free(struct strset *s);
/* Add a key (copied): 1 if new, 0 if present, -ENOMEM, -E2BIG (cap). */
int		 strset_add(struct strset *s, const char *key);
/* Remove key if present (its bytes are reused once removed ones pile up). */
void		 strset_del(struct strset *s, const char *key);
/* Bytes of removed keys the set still holds (for tests). */
size_t		 strset_dead_bytes(const struct strset *s);
bool		 strset_has(const struct strset *s, const char *key);
size_t		 strset_count(const struct strset *s);
/* "ns/name" into buf; -ENAMETOOLONG if it does not fit. */
int		 strset_key(char *buf, size_t len, const char *ns,
		    const char *name);

/* ---- decisions (pure) ---- */

enum reflector_next {
	REFL_NEXT_WATCH = 1,	/* watch again from the last resourceVersion */
	REFL_NEXT_WATCH_LATER,	/* the same after a backoff */
	REFL_NEXT_RELIST,	/* list again (410 Gone / Expired) */
	REFL_NEXT_RELIST_LATER,	/* list again after a backoff */
};

/* What to do after a watch ended that had run for ran_ms. */
enum reflector_next reflector_after_watch(const struct kube_watch_end *end,
	    uint64_t ran_ms);
/*
 * Backoff before attempt number failures (1 = the first retry): base *
 * 2^(failures-1), capped at max, then scaled by jitter in [0.5, 1.0].
 */
uint64_t	 reflector_backoff_ms(unsigned failures, uint64_t base_ms,
		    uint64_t max_ms, double jitter);

/* ---- the reflector (I/O on libevent through kube/kube.h) ---- */

struct reflector_config {
	unsigned	 list_limit;		/* page size [500] */
	unsigned	 watch_timeout_s;	/* timeoutSeconds in [t, 2t) [300] */
	uint64_t	 backoff_base_ms;	/* [500] */
	uint64_t	 backoff_max_ms;	/* [30000] */
};

enum reflector_event {
	REFL_EV_LIST_DONE = 1,	/* a list completed (items = objects) */
	REFL_EV_LIST_FAILED,	/* a list failed (status/error/message) */
	REFL_EV_WATCH_ENDED,	/* a watch ended (end is set) */
	REFL_EV_WATCH_FAILED,	/* a watch could not be started (error) */
	REFL_EV_BAD_OBJECT,	/* an object was skipped (message says why) */
};

/* What ops->note reports; strings valid only during the call. */
struct reflector_note {
	enum reflector_event	 event;
	long			 status;	/* HTTP status or 0 */
	int			 error;		/* -errno or 0 */
	const char		*message;	/* never NULL */
	const struct kube_watch_end *end;	/* WATCH_ENDED only */
	enum reflector_next	 next;		/* what happens now */
	uint64_t		 delay_ms;	/* before next */
	size_t			 items;		/* LIST_DONE: objects listed */
};

struct reflector_ops {
	/* an object from a list page or an ADDED/MODIFIED event */
	int	(*put)(void *arg, struct reflector *rf, json_t *obj);
	/* a DELETED event */
	int	(*del)(void *arg, struct reflector *rf, json_t *obj);
	/* the resourceVersion reached ("" = forget: a relist started) */
	int	(*set_rv)(void *arg, struct reflector *rf, const char *rv);
	/* a list ended: delete every cached row whose key is not in seen */
	int	(*prune)(void *arg, struct reflector *rf,
		    const struct strset *seen);
	/* the first list (or the resumed watch) is in place */
	void	(*synced)(void *arg, struct reflector *rf);
	/* something worth a log line or a metric */
	void	(*note)(void *arg, struct reflector *rf,
		    const struct reflector_note *n);
};

/* A reflector for res on kc; cfg and ops are copied. */
int	 reflector_new(struct event_base *base, struct kube_client *kc,
	    const struct sync_res *res, const struct reflector_config *cfg,
	    const struct reflector_ops *ops, void *arg,
	    struct reflector **ret);
void	 reflector_free(struct reflector *rf);
/* Start: watch from rv when given (a resumed cache), else list first. */
int	 reflector_start(struct reflector *rf, const char *rv);
/*
 * Start with a list even if the owner could resume, without voiding the
 * resourceVersion it stored (set_rv is called once a list is done; lists
 * retried after a failure keep it too): for a collection whose list also
 * feeds a consumer that needs every object.
 */
int	 reflector_start_list(struct reflector *rf);
/* Drop what is running and list again (e.g. a cache write failed). */
void	 reflector_relist(struct reflector *rf);
const struct sync_res *reflector_res(const struct reflector *rf);
bool	 reflector_synced(const struct reflector *rf);
const char *reflector_rv(const struct reflector *rf);

#endif
