/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The namespace map of kpgpud-admit: the last state sync reported for each
 * namespace (isolated or not, and the parsed resolved annotation), fed by
 * the SUBSCRIBE stream and by read-through lookups, read by every HTTP
 * worker on the hot path. Thread-safe (a rwlock: many readers, one writer).
 * It survives sync going away, which is the point: known namespaces keep
 * getting their claim.
 */
#ifndef KPGPUD_ADMIT_NSCACHE_H
#define KPGPUD_ADMIT_NSCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/resolved.h"

#define NSCACHE_DEFAULT_MAX	100000

enum nscache_state {
	NSCACHE_MISSING = 0,	/* never heard of it */
	NSCACHE_OPEN,		/* known, not isolated */
	NSCACHE_ISOLATED,	/* known, isolated, resolved usable */
	NSCACHE_UNRESOLVED,	/* labelled isolated but no usable annotation */
};

struct nscache;

/* A map holding at most max namespaces (0: NSCACHE_DEFAULT_MAX). */
int	 nscache_new(size_t max, struct nscache **ret);
void	 nscache_free(struct nscache *c);

/*
 * Record what sync says about ns. An isolated namespace whose annotation is
 * missing or invalid is stored as NSCACHE_UNRESOLVED and -EINVAL returned
 * with the reason in err. -E2BIG when the map is full (nothing stored),
 * -EINVAL for an invalid namespace name, -ENOMEM.
 */
int	 nscache_put(struct nscache *c, const char *ns, bool isolated,
	    const char *resolved_json, char *err, size_t errlen);
/* Forget ns; 0 or -ENOENT. */
int	 nscache_delete(struct nscache *c, const char *ns);
/*
 * What is known about ns. For NSCACHE_ISOLATED only, *ret (when ret is
 * not NULL) gets a reference to the namespace's resolved spec: read-only,
 * valid until the caller's resolved_pack_unref() even if ns is put again
 * or deleted meanwhile. Nothing is copied.
 */
enum nscache_state nscache_get(struct nscache *c, const char *ns,
	    const struct resolved_pack **ret);

/*
 * A full snapshot replaces the map: entries not put again between begin
 * and end are dropped at end (the number dropped is returned). Until end
 * the old entries keep answering.
 */
void	 nscache_begin_full(struct nscache *c);
size_t	 nscache_end_full(struct nscache *c);
/* Give up on an unfinished snapshot: nothing is dropped. */
void	 nscache_abort_full(struct nscache *c);

/* Number of namespaces held. */
size_t	 nscache_count(struct nscache *c);

#endif
