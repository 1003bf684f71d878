/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SQLite cache of the Kubernetes objects kpgpud watches: the read API.
 * kpgpud-sync is the only writer (cache_open(..., 0) and cache_write.h, which
 * no other program includes); kpgpud-quota opens it read-only
 * (CACHE_OPEN_RDONLY, query_only) and uses the read functions below.
 * cache/cache.c is the only file that includes sqlite3.h.
 *
 * Every row change (insert, update with a different resourceVersion, delete)
 * takes the next value of one monotonically increasing cache generation and
 * stores it in the row (field gen); cache_generation() returns the newest.
 * A new (or rebuilt) cache starts its generations at the wall-clock time in
 * microseconds, so generations never repeat across a rebuild. A deletion
 * leaves a tombstone with its generation (pruned to the newest ones; the
 * horizon says from which generation on "changes since G" is complete).
 *
 * Strings in the structs below are borrowed. In a put they belong to the
 * caller. In a foreach callback they belong to the cache and are valid only
 * during the call. A cache_*_get returns a heap copy freed with the matching
 * cache_*_free. Empty string means "not set" for the optional text fields,
 * except resolved/isolation/deleted which are NULL when absent.
 */
#ifndef KPGPUD_CACHE_H
#define KPGPUD_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CACHE_SCHEMA_VERSION	3
#define CACHE_KEY_MAX		253	/* names, namespaces */
#define CACHE_GVR_MAX		300	/* "group/version/resource" */
#define CACHE_RV_MAX		64	/* resourceVersion */
#define CACHE_JSON_MAX		(256 * 1024) /* any stored JSON text */

/* Owned kinds (struct cache_owned.kind). */
#define CACHE_KIND_DEVICECLASS		"DeviceClass"
#define CACHE_KIND_CLAIMTEMPLATE	"ResourceClaimTemplate"
#define CACHE_KIND_CLAIM		"ResourceClaim"
#define CACHE_KIND_QUOTA		"ResourceQuota"
/* Every ResourceSlice (the fleet's devices), reduced to their topology. */
#define CACHE_KIND_SLICE		"ResourceSlice"
/*
 * Every ResourceClaim, reduced to the devices it is allocated
 * ({"devices":[{"driver","pool","device"}]}; [] while unallocated).
 */
#define CACHE_KIND_ALLOC		"ClaimAllocation"
#define CACHE_WATCH_ALLOCS	"resource.k8s.io/v1/resourceclaims/allocations"
/* The watch key of every ResourceSlice (set once the first list is in). */
#define CACHE_WATCH_SLICES	"resource.k8s.io/v1/resourceslices/all"
/* The watch key of every DeviceClass (set once the first list is in). */
#define CACHE_WATCH_DEVICECLASSES	"resource.k8s.io/v1/deviceclasses/all"

/* cache_open flags */
#define CACHE_OPEN_RDONLY	0x1	/* reader: read-only, query_only */

struct cache;

/* One Namespace. */
struct cache_ns {
	const char	*name;
	const char	*uid;
	const char	*rv;
	const char	*phase;		/* "Active", "Terminating" or "" */
	bool		 isolated;	/* label RESOLVED_LABEL == "true" */
	const char	*resolved;	/* RESOLVED_ANNOTATION value, or NULL */
	const char	*labels;	/* compact JSON object of all labels */
	const char	*annotations;	/* compact JSON object, kubeplus.io/
					   keys only */
	uint64_t	 gen;		/* out only: generation of last change */
};

/* One instance custom resource of a configured group/version/resource. */
struct cache_instance {
	const char	*gvr;		/* the configured key, e.g.
					   "kubeplus.io/v1alpha1/agents" */
	const char	*kind;		/* e.g. "Agent" */
	const char	*ns;		/* "" when cluster-scoped */
	const char	*name;
	const char	*uid;
	const char	*rv;
	int64_t		 generation;	/* metadata.generation */
	const char	*created;	/* creationTimestamp (RFC 3339) */
	const char	*isolation;	/* kubeplus.io/gpu-isolation annotation
					   value, or NULL */
	const char	*deleted;	/* deletionTimestamp, or NULL */
	uint64_t	 gen;		/* out only */
};

/*
 * One object kpgpud owns (label app.kubernetes.io/managed-by=kpgpud), or
 * any DeviceClass (every class is kept, labelled or not).
 * data is compact JSON with sorted keys holding what quota needs to detect
 * drift and verify ownership: {"annotations":{...},"labels":{...},
 * "ownerReferences":[...],"deletionTimestamp":"...","spec":...} (absent
 * members omitted; a DeviceClass over the size cap is {"oversize":true}); for a
 * ResourceQuota "spec":{"hard":{...}} plus "status":{"hard":{...},
 * "used":{...}} (status omitted while empty).
 */
struct cache_owned {
	const char	*kind;		/* CACHE_KIND_* */
	const char	*ns;		/* "" for DeviceClass */
	const char	*name;
	const char	*uid;
	const char	*rv;
	const char	*data;
	uint64_t	 gen;		/* out only */
};

/* Row counts for metrics. */
struct cache_counts {
	uint64_t	 namespaces;
	uint64_t	 instances;
	uint64_t	 deviceclasses;
	uint64_t	 claimtemplates;
	uint64_t	 claims;
	uint64_t	 quotas;
};

/* Which table a tombstone belongs to. */
enum cache_table {
	CACHE_T_NS = 1,
	CACHE_T_INSTANCE = 2,
	CACHE_T_OWNED = 4,
};

/* A deleted row, kept so subscribers can catch up since a generation. */
struct cache_tomb {
	enum cache_table table;
	const char	*key;		/* gvr (instances), kind (owned), ""
					   (namespaces) */
	const char	*kind;		/* "Namespace", instance or owned kind */
	const char	*ns;		/* "" when cluster-scoped; the name
					   itself for a Namespace */
	const char	*name;
	uint64_t	 gen;
};

/* Callbacks return 0 to go on or a negative errno to stop (returned). */
typedef int (*cache_tomb_cb)(const struct cache_tomb *t, void *arg);
typedef int (*cache_ns_cb)(const struct cache_ns *ns, void *arg);
typedef int (*cache_instance_cb)(const struct cache_instance *in, void *arg);
typedef int (*cache_owned_cb)(const struct cache_owned *o, void *arg);

/*
 * Open (and for the writer create or migrate) the cache at path. The writer
 * moves a corrupt or unreadable file aside (path.corrupt.<unix time>) and
 * starts an empty cache; cache_recovered() then says so. Returns 0, -EIO,
 * -ENOENT (reader, no file), -EPROTO (reader, schema newer or older than
 * this build), -ENOMEM. The writer's functions are in cache_write.h.
 */
int	 cache_open(const char *path, int flags, struct cache **ret);
void	 cache_free(struct cache *c);

/*
 * Transactions. The writer wraps each batch of events (one event-loop turn)
 * in begin/commit; a put or delete outside one runs in its own transaction.
 * A reader may use begin/commit for a consistent snapshot across several
 * reads. rollback discards a failed batch, including its generations.
 */
int	 cache_begin(struct cache *c);
int	 cache_commit(struct cache *c);
void	 cache_rollback(struct cache *c);

/* The newest generation (0 for an empty cache). */
int	 cache_generation(struct cache *c, uint64_t *ret_gen);

/* Lookups: 0, -ENOENT, -EIO, -ENOMEM. Free the result with *_free. */
int	 cache_ns_get(struct cache *c, const char *name,
	    struct cache_ns **ret);
int	 cache_instance_get(struct cache *c, const char *gvr, const char *ns,
	    const char *name, struct cache_instance **ret);
int	 cache_owned_get(struct cache *c, const char *kind, const char *ns,
	    const char *name, struct cache_owned **ret);
void	 cache_ns_free(struct cache_ns *ns);
void	 cache_instance_free(struct cache_instance *in);
void	 cache_owned_free(struct cache_owned *o);

/*
 * Iteration in key order over rows whose gen > since (0: all rows).
 * gvr/kind/ns filters: NULL matches anything ("" matches cluster-scoped).
 */
int	 cache_ns_foreach(struct cache *c, uint64_t since, cache_ns_cb cb,
	    void *arg);
/*
 * Namespaces with name > after and name >= from (either may be ""), in
 * name order, at most limit of them: a page of a listing.
 */
int	 cache_ns_range(struct cache *c, const char *after, const char *from,
	    unsigned limit, cache_ns_cb cb, void *arg);
int	 cache_instance_foreach(struct cache *c, const char *gvr,
	    uint64_t since, cache_instance_cb cb, void *arg);
int	 cache_owned_foreach(struct cache *c, const char *ns,
	    const char *kind, uint64_t since, cache_owned_cb cb, void *arg);

int	 cache_counts(struct cache *c, struct cache_counts *ret);

/* Tombstones with gen > since, in generation order. */
int	 cache_tomb_foreach(struct cache *c, uint64_t since, cache_tomb_cb cb,
	    void *arg);
/*
 * The horizon H: for any G >= H, the rows with gen > G plus the tombstones
 * with gen > G are exactly the changes after G. A G below H (or above the
 * current generation) needs a full snapshot.
 */
int	 cache_horizon(struct cache *c, uint64_t *ret);

/*
 * Watch state: the resourceVersion each watch (key e.g. "v1/namespaces")
 * last reached, so a restarted sync resumes without a relist. get gives
 * -ENOENT when never stored (cache_watch_set in cache_write.h stores it).
 */
int	 cache_watch_get(struct cache *c, const char *key, char *buf,
	    size_t len);

#endif
