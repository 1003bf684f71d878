/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resolved isolation of one namespace: what kpgpud-quota writes into the
 * Namespace annotation kubeplus.io/gpu-isolation-resolved once every object
 * exists, and what kpgpud-admit needs to patch a Pod. Pure: parse and format
 * only, no I/O.
 *
 * JSON form (keys other than these are rejected; exactly one of
 * claimTemplateName / claimName):
 *   {"claimTemplateName": "gpu-1g10gb",          // or "claimName": "..."
 *    "sharing": "mig",                           // informational
 *    "instance": "Agent/team-a-agent-instance",  // informational
 *    "initContainers": "none" | "all" | ["name", ...],   // default "none"
 *    "sidecarContainers": "none" | ["name", ...],        // default "none"
 *    "legacyGPU": "reject" | "translate" | "allow"}      // default "reject"
 *
 * sidecarContainers names containers (in either list) that never get the
 * claim reference: proxies other webhooks inject. Without the reference a
 * container gets no DRA device; a legacy GPU request in one is handled by
 * legacyGPU as in any other container.
 */
#ifndef KPGPUD_RESOLVED_H
#define KPGPUD_RESOLVED_H

#include <stdbool.h>
#include <stddef.h>

#define RESOLVED_ANNOTATION	"kubeplus.io/gpu-isolation-resolved"
#define RESOLVED_LABEL		"kubeplus.io/gpu-isolation-enabled"
/*
 * Topology isolation on the tenant Namespace (written by kpgpud-quota, shown
 * by kpgpuctl status): the tenant's domains, comma-separated, and their
 * state ("ok: ..." or "exhausted: H of W devices").
 */
#define RESOLVED_TOPO_DOMAINS	"kubeplus.io/gpu-topology-domains"
#define RESOLVED_TOPO_STATE	"kubeplus.io/gpu-topology-state"
#define RESOLVED_POD_CLAIM	"kubeplus-gpu"	/* pod-level claim name */
#define RESOLVED_MAX_NAMES	64
#define RESOLVED_NAME_MAX	253

enum resolved_init {
	RESOLVED_INIT_NONE = 0,
	RESOLVED_INIT_ALL,
	RESOLVED_INIT_NAMED,
};

enum resolved_legacy {
	RESOLVED_LEGACY_REJECT = 0,
	RESOLVED_LEGACY_TRANSLATE,
	RESOLVED_LEGACY_ALLOW,
};

/*
 * The container policies, one grammar in both annotations (the tenant's
 * kubeplus.io/gpu-isolation that kpgpud-quota reads and the resolved one
 * that kpgpud-admit reads):
 *   "initContainers": "none" | "all" | ["name", ...]
 *   "sidecarContainers": "none" | ["name", ...]
 *   "legacyGPU": "reject" | "translate" | "allow"
 * All zero is "none", no sidecars, "reject".
 */
struct resolved_policy {
	enum resolved_init	 init;
	int			 ninit_names;
	char			 init_names[RESOLVED_MAX_NAMES][64];
	int			 nsidecar_names;
	char			 sidecar_names[RESOLVED_MAX_NAMES][64];
	enum resolved_legacy	 legacy;
};

struct resolved {
	/* exactly one of the two is non-empty */
	char			 claim_template[RESOLVED_NAME_MAX + 1];
	char			 claim[RESOLVED_NAME_MAX + 1];
	char			 sharing[32];
	char			 instance[RESOLVED_NAME_MAX + 64];
	struct resolved_policy	 pol;
};

/*
 * The sidecar names kpgpud-quota uses when an instance does not say: the
 * containers common service meshes and agents inject. NULL-terminated.
 */
extern const char *const resolved_default_sidecars[];

/*
 * Parse the annotation value. Returns 0, or -EINVAL with a human-readable
 * reason in err (errlen bytes). ret is untouched on failure.
 */
int	 resolved_parse(const char *json, size_t len, struct resolved *ret,
	    char *err, size_t errlen);
/* Format as compact JSON with sorted keys; caller frees. NULL on ENOMEM. */
char	*resolved_format(const struct resolved *r);

const char *resolved_legacy_name(enum resolved_legacy l);

/*
 * User text quoted in a message (an Event, a denial): printable ASCII but
 * '"' only, at most RESOLVED_MSG_MAX bytes and "..." when cut. Returns buf.
 */
#define RESOLVED_MSG_MAX	64
const char *resolved_msg_str(char buf[RESOLVED_MSG_MAX + 4], const char *s);

struct json_t;
/*
 * Apply member key of an annotation object to p when it is one of the
 * policy members (initContainers, sidecarContainers, legacyGPU): 1 when
 * applied, 0 when key is none of them (the caller's to parse), -EINVAL
 * with the reason in err (p's member untouched). Both annotations parse
 * their policies here, so they share one grammar and one set of messages.
 */
int	 resolved_policy_member(const char *key, const struct json_t *v,
	    struct resolved_policy *p, char *err, size_t errlen);
/* Whether two policies are the same. */
bool	 resolved_policy_equal(const struct resolved_policy *a,
	    const struct resolved_policy *b);
/*
 * Parse a container name list ("none", "all" when all_ok, or a JSON list
 * of at most RESOLVED_MAX_NAMES distinct container names) for member key;
 * "none" and "all" have no names (*ret_n = 0). 0, or -EINVAL with the
 * reason in err; names[] / *ret_n / *ret_mode are written only on success.
 */
int	 resolved_parse_names(const char *key, const struct json_t *v,
	    bool all_ok, enum resolved_init *ret_mode,
	    char names[RESOLVED_MAX_NAMES][64], int *ret_n, char *err,
	    size_t errlen);
/* The same from the plain (comma) form: "none", "all" or "a,b". */
int	 resolved_parse_names_text(const char *key, const char *text,
	    bool all_ok, enum resolved_init *ret_mode,
	    char names[RESOLVED_MAX_NAMES][64], int *ret_n, char *err,
	    size_t errlen);
/* The plain (comma) form of a name list: "none", "all" or "a,b". */
char	*resolved_names_text(enum resolved_init mode,
	    const char names[][64], int n);
/* Whether a and b are the same spec (same patch, same policies). */
bool	 resolved_equal(const struct resolved *a, const struct resolved *b);

/*
 * The read-only form of a struct resolved that kpgpud-admit caches per
 * namespace and patches pods from: every string stored once at its real
 * length in one allocation (a few hundred bytes where struct resolved
 * takes about 9 KB for its fixed name arrays). Immutable once built and
 * shared by an atomic reference count, so a lookup hands out a pointer
 * rather than a copy, and an entry replaced in the cache stays valid
 * until its last holder lets go. The name lists are packed: n strings,
 * each NUL-terminated, back to back.
 */
struct resolved_pack {
	const char		*claim_template;	/* "" when claim is set */
	const char		*claim;	/* "" when claim_template is set */
	const char		*sharing;
	const char		*instance;
	struct {
		enum resolved_init	 init;
		enum resolved_legacy	 legacy;
		int			 ninit_names;
		int			 nsidecar_names;
		const char		*init_names;	/* packed */
		const char		*sidecar_names;	/* packed */
	} pol;
};

/* Pack r (one reference, the caller's). 0 or -ENOMEM. */
int	 resolved_pack_new(const struct resolved *r,
	    struct resolved_pack **ret);
/* resolved_parse, then resolved_pack_new; the same errors. */
int	 resolved_pack_parse(const char *json, size_t len,
	    struct resolved_pack **ret, char *err, size_t errlen);
/* Take one more reference to p (not NULL); returns p. */
const struct resolved_pack *resolved_pack_ref(const struct resolved_pack *p);
/* Drop one reference; the last one frees p. NULL is fine. */
void	 resolved_pack_unref(const struct resolved_pack *p);
/* Whether the container called name is a sidecar under p (no claim). */
bool	 resolved_sidecar(const struct resolved_pack *p, const char *name);
/* Whether the init container called name gets the claim under p's policy. */
bool	 resolved_init_selected(const struct resolved_pack *p,
	    const char *name);

#endif
