/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Pod patch: a pure function from (Pod JSON, the namespace's resolved
 * isolation) to an RFC 6902 JSON Patch that adds the pod-level GPU claim and
 * a reference to it in each selected container, keeping everything the chart
 * declared. Running it on its own output yields an empty patch, so webhook
 * reinvocation is safe. The patch reads only a few facts of the Pod (struct
 * patch_pod): patch_pod_from_json() reads them from a jansson tree, and
 * kpgpud-admit's review path reads them from the scanned body (podscan.h).
 * No I/O, no logging.
 */
#ifndef KPGPUD_PATCH_H
#define KPGPUD_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "common/resolved.h"
#include "common/util.h"
#include "common/region.h"

#define PATCH_MAX_WARNINGS	8
#define PATCH_WARNING_MAX	128
#define PATCH_MESSAGE_MAX	640
#define PATCH_MAX_CONTAINERS	4096	/* per list; far above any real pod */
#define PATCH_OPS_MAX		(64u << 20)	/* patch text; never reached:
						   about 40 x a 3 MiB body */

struct patch_out {
	char		*ops;		/* RFC 6902 array, compact JSON text as
					   jansson writes it; "[]" when
					   nothing to do */
	size_t		 ops_len;
	size_t		 nops;
	bool		 deny;		/* policy refuses the pod */
	char		 message[PATCH_MESSAGE_MAX];	/* why, when deny */
	int		 nwarnings;
	char		 warnings[PATCH_MAX_WARNINGS][PATCH_WARNING_MAX];
};

/* What a member of the Pod is, as far as the patch cares. */
enum patch_shape {
	PATCH_ABSENT = 0,	/* absent or null */
	PATCH_WRONG,		/* present with another type than expected */
	PATCH_PRESENT,		/* the expected type (an object or a list) */
};

/* One entry of a container list, as the patch reads it. */
struct patch_ctr {
	bool		 object;	/* false: not an object, nothing else
					   is set */
	const char	*name;		/* "name", NULL when not a string */
	enum patch_shape resources;	/* "resources", an object */
	enum patch_shape claims;	/* resources.claims, a list */
	bool		 has_ref;	/* claims has an entry whose "name" is
					   RESOLVED_POD_CLAIM */
	/*
	 * The legacy GPU keys (patch_is_legacy_gpu) of resources.limits, then
	 * of resources.requests, each map's distinct keys in the order they
	 * first appear (as jansson iterates an object).
	 */
	const char *const *legacy;
	size_t		 nlegacy[2];
};

/* spec.containers or spec.initContainers. */
struct patch_list {
	enum patch_shape	 shape;		/* a list */
	size_t			 n;		/* entries */
	const struct patch_ctr	*ctrs;		/* n of them; NULL when n is
						   over PATCH_MAX_CONTAINERS */
};

/* The facts of a Pod the patch reads; strings stay the reader's. */
struct patch_pod {
	bool			 spec;		/* the Pod and its spec are
						   objects (nothing else is
						   set when not) */
	enum patch_shape	 claims;	/* spec.resourceClaims, a list */
	long			 claim_at;	/* its first entry that is an
						   object whose "name" is
						   RESOLVED_POD_CLAIM; -1 */
	/* that entry: its distinct members (2 or 3: 3 or more), and */
	size_t			 claim_members;
	const char		*claim_tmpl;	/* resourceClaimTemplateName */
	const char		*claim_name;	/* resourceClaimName (NULL
						   when not strings) */
	struct patch_list	 lists[2];	/* containers, initContainers */
};

/*
 * Read the facts of pod (a jansson tree, kept alive as long as ret is
 * used) into ret, allocating in rg. 0 or -ENOMEM.
 */
int	 patch_pod_from_json(const json_t *pod, struct region *rg,
	    struct patch_pod *ret);

/*
 * Compute the patch for a Pod from its facts, with the patch text capped at
 * max_ops bytes; as patch_build() otherwise.
 */
int	 patch_build_pod(const struct patch_pod *pod,
	    const struct resolved_pack *r,
	    size_t max_ops, struct patch_out **ret, char *err, size_t errlen);

/*
 * Compute the patch for pod (the Pod object) under r. Returns 0 with a new
 * result in *ret (also when the policy denies the pod), -EINVAL when the pod
 * does not have the shape of a Pod or has more than PATCH_MAX_CONTAINERS
 * containers in a list (reason in err), -E2BIG when the patch text would
 * pass PATCH_OPS_MAX (reason in err), -ENOMEM.
 */
int	 patch_build(const json_t *pod, const struct resolved_pack *r,
	    struct patch_out **ret, char *err, size_t errlen);
/* The same with the patch text capped at max_ops bytes instead. */
int	 patch_build_max(const json_t *pod, const struct resolved_pack *r,
	    size_t max_ops, struct patch_out **ret, char *err, size_t errlen);
void	 patch_out_free(struct patch_out *p);

/* Whether a resource name is a device-plugin GPU (nvidia.com/gpu, ...). */
bool	 patch_is_legacy_gpu(const char *resource);
/* The same for the n bytes at resource (no NUL among them). */
bool	 patch_is_legacy_gpu_n(const char *resource, size_t n);

#endif
