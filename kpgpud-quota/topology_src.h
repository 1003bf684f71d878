/*
 * Topology isolation from kpgpud-sync's cache (see topology_src.c).
 */
#ifndef KPGPUD_QUOTA_TOPOLOGY_SRC_H
#define KPGPUD_QUOTA_TOPOLOGY_SRC_H

#include "cache/cache.h"
#include "kpgpud-quota/plan.h"

struct quotad;

/*
 * The topology of tenant namespace ns for its plan: 0 with *ret set (NULL
 * when ns is no tenant), -EAGAIN while sync has not listed the
 * ResourceSlices yet, -ENOMEM, or a cache error. Free with
 * quotad_topology_free.
 */
int	 quotad_topology(struct quotad *q, struct cache *c, const char *ns,
	    struct plan_topology **ret);
void	 quotad_topology_free(struct plan_topology *pt);

#endif
