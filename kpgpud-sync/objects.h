/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resources kpgpud-sync watches and the fields it keeps of each object.
 * Pure: JSON in, cache rows out; no I/O, no logging.
 */
#ifndef KPGPUD_SYNC_OBJECTS_H
#define KPGPUD_SYNC_OBJECTS_H

#include <stdbool.h>
#include <jansson.h>

#include "cache/cache.h"

#define SYNC_MANAGED_SELECTOR	"app.kubernetes.io/managed-by=kpgpud"
#define SYNC_ISOLATION_ANNOTATION "kubeplus.io/gpu-isolation"
#define SYNC_ANNOTATION_PREFIX	"kubeplus.io/"
#define SYNC_PATH_MAX		(CACHE_GVR_MAX + 16)

/* One watched collection. */
struct sync_res {
	enum cache_table table;
	char		 key[CACHE_GVR_MAX + 1];	/* watch state key; the
						   gvr of instances */
	char		 path[SYNC_PATH_MAX];	/* "/api/v1/namespaces" */
	const char	*selector;	/* labelSelector or NULL */
	const char	*field_selector; /* fieldSelector or NULL */
	const char	*kind;		/* owned kind, or NULL */
	bool		 usage;		/* for the usage ledger (usage.c),
					   not a cache table */
	bool		 usage_claims;	/* a cache table whose objects (every
					   ResourceClaim) also feed the
					   ledger: one watch for both */
};

/* The Namespaces collection. */
void	 sync_res_namespaces(struct sync_res *ret);
/*
 * An instance collection from "group/version/resource" (a custom resource:
 * the group is required). -EINVAL for anything else.
 */
int	 sync_res_instance(const char *gvr, struct sync_res *ret);
/* An owned collection by CACHE_KIND_*; -EINVAL for another kind. */
int	 sync_res_owned(const char *kind, struct sync_res *ret);

/*
 * One object reduced to its cache row. Text fields borrow from the JSON
 * object (keep it alive while the row is used) except the JSON documents
 * built here, which the row owns (sync_row_clear).
 */
struct sync_row {
	enum cache_table table;
	union {
		struct cache_ns		 ns;
		struct cache_instance	 in;
		struct cache_owned	 ow;
	} u;
	char		*json[3];	/* owned documents */
};

/*
 * Reduce obj (an item of a list or a watch event's object) of collection
 * res. -EINVAL (why says which field) for an object without a usable name,
 * namespace or resourceVersion, or with a field over its cap; -ENOMEM.
 */
int	 sync_row_from_json(const struct sync_res *res, json_t *obj,
	    struct sync_row *ret, const char **ret_why);
void	 sync_row_clear(struct sync_row *row);

/* The (namespace, name) key of obj; namespace "" when absent. */
int	 sync_obj_key(json_t *obj, const char **ret_ns, const char **ret_name);

#endif
