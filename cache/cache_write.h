/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SQLite cache: the writer's API. Only kpgpud-sync (the one writer)
 * includes this header; readers use cache.h alone. The writer opens with
 * cache_open(path, 0, &c) and wraps each batch in cache_begin/cache_commit.
 */
#ifndef KPGPUD_CACHE_WRITE_H
#define KPGPUD_CACHE_WRITE_H

#include "cache/cache.h"

/* True when cache_open rebuilt a corrupt file: every watch must relist. */
bool	 cache_recovered(const struct cache *c);

/*
 * Writer: insert or update. *ret_gen (may be NULL) receives the row's new
 * generation, or 0 when the stored row already had this resourceVersion and
 * nothing changed. An owned row is compared by uid and data instead: a new
 * resourceVersion whose reduced data is the same (a status-only change)
 * leaves the row, its resourceVersion included, as it was and gives 0, so
 * no change is published for it. -EINVAL for a missing key field or an
 * oversized value.
 */
int	 cache_ns_put(struct cache *c, const struct cache_ns *ns,
	    uint64_t *ret_gen);
int	 cache_instance_put(struct cache *c, const struct cache_instance *in,
	    uint64_t *ret_gen);
int	 cache_owned_put(struct cache *c, const struct cache_owned *o,
	    uint64_t *ret_gen);

/* Writer: delete; *ret_gen receives the generation or 0 when absent. */
int	 cache_ns_delete(struct cache *c, const char *name, uint64_t *ret_gen);
int	 cache_instance_delete(struct cache *c, const char *gvr,
	    const char *ns, const char *name, uint64_t *ret_gen);
int	 cache_owned_delete(struct cache *c, const char *kind, const char *ns,
	    const char *name, uint64_t *ret_gen);

/* Writer: keep only the newest keep tombstones, raising the horizon. */
int	 cache_tomb_prune(struct cache *c, uint64_t keep);

/* Store the resourceVersion a watch reached; rv "" forgets it. */
int	 cache_watch_set(struct cache *c, const char *key, const char *rv);

#endif
