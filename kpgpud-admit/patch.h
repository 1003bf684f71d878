/*
 * The Pod patch: a pure function from (Pod JSON, the namespace's resolved
 * isolation) to an RFC 6902 JSON Patch that adds the pod-level GPU claim and
 * a reference to it in each selected container, keeping everything the chart
 * declared. Running it on its own output yields an empty patch, so webhook
 * reinvocation is safe. No I/O, no logging.
 */
#ifndef KPGPUD_PATCH_H
#define KPGPUD_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "common/resolved.h"
#include "common/util.h"

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

/*
 * Compute the patch for pod (the Pod object) under r. Returns 0 with a new
 * result in *ret (also when the policy denies the pod), -EINVAL when the pod
 * does not have the shape of a Pod or has more than PATCH_MAX_CONTAINERS
 * containers in a list (reason in err), -E2BIG when the patch text would
 * pass PATCH_OPS_MAX (reason in err), -ENOMEM.
 */
int	 patch_build(const json_t *pod, const struct resolved *r,
	    struct patch_out **ret, char *err, size_t errlen);
/* The same with the patch text capped at max_ops bytes instead. */
int	 patch_build_max(const json_t *pod, const struct resolved *r,
	    size_t max_ops, struct patch_out **ret, char *err, size_t errlen);
void	 patch_out_free(struct patch_out *p);

/* Whether a resource name is a device-plugin GPU (nvidia.com/gpu, ...). */
bool	 patch_is_legacy_gpu(const char *resource);

#endif
