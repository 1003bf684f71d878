/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology isolation from kpgpud-sync's cache (see topology_src.c).
 */
#ifndef KPGPUD_QUOTA_TOPOLOGY_SRC_H
#define KPGPUD_QUOTA_TOPOLOGY_SRC_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "kpgpud-quota/plan.h"

struct quotad;
struct metrics;
struct quotad_topo;

/* What the index did so far (counters, for metrics and tests). */
struct quotad_topo_stats {
	uint64_t	 passes;	/* quotad_topo_get calls that read */
	uint64_t	 full;		/* passes that read every row */
	uint64_t	 rows;		/* cache rows and tombstones read */
	uint64_t	 parsed;	/* instance annotations parsed */
	uint64_t	 assigned;	/* domain assignments computed */
};

/*
 * The index of topology's inputs, following one cache by generation;
 * ns_from_namespace: an instance's tenant is its namespace (else its
 * name). 0 or -ENOMEM.
 */
int	 quotad_topo_new(bool ns_from_namespace, struct quotad_topo **ret);
void	 quotad_topo_free(struct quotad_topo *s);
/*
 * The topology of tenant namespace ns for its plan, from the changes of
 * cache c since the last call: 0 with *ret set (NULL when ns is no
 * tenant), -EAGAIN while sync has not listed the ResourceSlices yet,
 * -ENOMEM, or a cache error. Free with quotad_topology_free.
 */
int	 quotad_topo_get(struct quotad_topo *s, struct cache *c,
	    const char *ns, struct plan_topology **ret);
/*
 * The live annotated instances of tenant ns as the last pass over c read
 * them, in the cache's key order: fn(gvr, ns, name, arg) for each until it
 * returns non-zero (returned). -ENOENT when the index cannot tell (read
 * the cache instead), -ENOMEM.
 */
int	 quotad_topo_instances(const struct quotad_topo *s, struct cache *c,
	    const char *ns, int (*fn)(const char *gvr, const char *ns,
	    const char *name, void *arg), void *arg);
void	 quotad_topo_stats(const struct quotad_topo *s,
	    struct quotad_topo_stats *ret);

/* kpgpud-quota's index and its metrics in reg (quotad_start). */
int	 quotad_topology_start(struct quotad *q, struct metrics *reg);
void	 quotad_topology_stop(struct quotad *q);
/* quotad_topo_get on q's index. */
int	 quotad_topology(struct quotad *q, struct cache *c, const char *ns,
	    struct plan_topology **ret);
void	 quotad_topology_free(struct plan_topology *pt);

#endif
