/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The facts of a Pod the patch reads (struct patch_pod), taken straight
 * from a review body that jscan_run() accepted: from the spans it recorded
 * and short walks of the few small members it did not (resource maps,
 * claim lists). What patch_pod_from_json() reads from jansson's tree of
 * the same body, without the tree. Pure: no I/O.
 */
#ifndef KPGPUD_ADMIT_PODSCAN_H
#define KPGPUD_ADMIT_PODSCAN_H

#include "common/jscan.h"
#include "kpgpud-admit/patch.h"
#include "common/region.h"

/*
 * The members of a container list entry the scan records, in this order
 * after the element node (a schema holds them as podscan_ctr_nodes does).
 */
enum {
	PODSCAN_C_ROOT, PODSCAN_C_NAME, PODSCAN_C_RES, PODSCAN_C_LIMITS,
	PODSCAN_C_REQUESTS, PODSCAN_C_CLAIMS, PODSCAN_C_COUNT
};
extern const struct jscan_node podscan_ctr_nodes[PODSCAN_C_COUNT];

/* Where the scan found the Pod's members (len 0: absent). */
struct podscan_in {
	struct jscan_span	 pod;		/* request.object */
	struct jscan_span	 spec;
	struct jscan_span	 claims;	/* spec.resourceClaims */
	struct jscan_span	 lists[2];	/* containers, initContainers */
	const struct jscan_list	*recs[2];	/* their entries' members
						   (PODSCAN_C_COUNT wide) */
};

/*
 * Read the facts of the Pod in body into ret; its strings are copied into
 * rg. 0 or -ENOMEM.
 */
int	 podscan_read(const char *body, const struct podscan_in *in,
	    struct region *rg, struct patch_pod *ret);

#endif
