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
 *    "legacyGPU": "reject" | "translate" | "allow"}      // default "reject"
 */
#ifndef KPGPUD_RESOLVED_H
#define KPGPUD_RESOLVED_H

#include <stdbool.h>
#include <stddef.h>

#define RESOLVED_ANNOTATION	"kubeplus.io/gpu-isolation-resolved"
#define RESOLVED_LABEL		"kubeplus.io/gpu-isolation-enabled"
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

struct resolved {
	/* exactly one of the two is non-empty */
	char			 claim_template[RESOLVED_NAME_MAX + 1];
	char			 claim[RESOLVED_NAME_MAX + 1];
	char			 sharing[32];
	char			 instance[RESOLVED_NAME_MAX + 64];
	enum resolved_init	 init;
	int			 ninit_names;
	char			 init_names[RESOLVED_MAX_NAMES][64];
	enum resolved_legacy	 legacy;
};

/*
 * Parse the annotation value. Returns 0, or -EINVAL with a human-readable
 * reason in err (errlen bytes). ret is untouched on failure.
 */
int	 resolved_parse(const char *json, size_t len, struct resolved *ret,
	    char *err, size_t errlen);
/* Format as compact JSON with sorted keys; caller frees. NULL on ENOMEM. */
char	*resolved_format(const struct resolved *r);

const char *resolved_legacy_name(enum resolved_legacy l);

/* Whether the init container called name gets the claim under r's policy. */
bool	 resolved_init_selected(const struct resolved *r, const char *name);
/* Whether a and b are the same spec (same patch, same policies). */
bool	 resolved_equal(const struct resolved *a, const struct resolved *b);
/* Kubernetes name checks: DNS-1123 label (<= 63) and subdomain (<= 253). */
bool	 resolved_is_dns_label(const char *s);
bool	 resolved_is_dns_subdomain(const char *s);

#endif
