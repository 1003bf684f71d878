/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Discovery of instance kinds: every resource of the configured API groups
 * (--instance-groups, default platformapi.kubeplus, where KubePlus serves
 * one kind per ResourceComposition) is watched as an instance collection.
 * A pass reads GET /apis/GROUP (the preferred version) and GET
 * /apis/GROUP/VERSION (its resources) for each group and adds a reflector
 * for every listable, watchable top-level resource not yet watched; passes
 * repeat every --discovery-interval, so kinds added later are picked up
 * without a restart. sync reports synced only after a first complete pass
 * (a group the API does not serve counts as complete: no kinds yet).
 */
#ifndef KPGPUD_SYNC_DISCOVERY_H
#define KPGPUD_SYNC_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cache/cache.h"

#define DISC_MAX_GROUPS		8
#define DISC_MAX_RESOURCES	24	/* per group, per pass */
#define DISC_GROUP_MAX		253

struct syncd;

/*
 * The preferred version of an APIGroup document into out. 0, or -EINVAL
 * when doc is not an APIGroup with a usable preferredVersion.version.
 */
int	 disc_preferred_version(json_t *doc, char *out, size_t len);
/*
 * The "group/version/resource" of every resource of an APIResourceList
 * that can be listed and watched and is not a subresource, into out
 * (at most max). 0 with *ret_n set, -EINVAL for a document that is not an
 * APIResourceList of group/version, -E2BIG when more than max (the first
 * max are kept).
 */
int	 disc_resources(json_t *doc, const char *group, const char *version,
	    char (*out)[CACHE_GVR_MAX + 1], size_t max, size_t *ret_n);
/* Split "a,b c" into groups (DNS subdomains). -EINVAL / -E2BIG. */
int	 disc_parse_groups(const char *list, char (*out)[DISC_GROUP_MAX + 1],
	    size_t max, size_t *ret_n);
/* Whether gvr ("group/version/resource") belongs to group. */
bool	 disc_gvr_in_group(const char *gvr, const char *group);

/*
 * Start discovery for sd: groups (comma- or space-separated), one pass
 * now and every interval_ms after. 0, -EINVAL, -ENOMEM.
 */
int	 syncd_disc_start(struct syncd *sd, const char *groups,
	    uint64_t interval_ms);
void	 syncd_disc_stop(struct syncd *sd);
/* Whether the first complete pass is done (true without discovery). */
bool	 syncd_disc_done(const struct syncd *sd);
/* Whether gvr is in one of the discovered groups. */
bool	 syncd_disc_owns(const struct syncd *sd, const char *gvr);

#endif
