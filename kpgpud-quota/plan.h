/*
 * The plan: a pure function from a tenant instance, its kubeplus.io/
 * gpu-isolation annotation and the configuration to the objects kpgpud-quota
 * wants to exist (resource.k8s.io/v1 shapes, the NVIDIA driver's attribute
 * names), the keys it wants in the instance's ResourceQuota, and the
 * Namespace label and annotation it sets last. No I/O; kpgpuctl render and
 * the reconciler share it.
 */
#ifndef KPGPUD_QUOTA_PLAN_H
#define KPGPUD_QUOTA_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kpgpud-quota/annotation.h"

#define PLAN_MANAGED_BY_KEY	"app.kubernetes.io/managed-by"
#define PLAN_MANAGED_BY		"kpgpud"
#define PLAN_INSTANCE_LABEL	"kubeplus.io/gpu-isolation-instance"
#define PLAN_INSTANCE_ANNOT	"kubeplus.io/gpu-isolation-instance"
#define PLAN_PROFILE_LABEL	"kubeplus.io/mig-profile"
/* On the ResourceQuota: the comma-separated keys kpgpud wrote there. */
#define PLAN_QUOTA_KEYS_ANNOT	"kubeplus.io/gpu-isolation-quota-keys"
#define PLAN_CLAIMS_KEY		"count/resourceclaims.resource.k8s.io"
#define PLAN_CLASS_KEY_SUFFIX	".deviceclass.resource.k8s.io/devices"
#define PLAN_DRIVER		"gpu.nvidia.com"
#define PLAN_REQUEST		"gpu"	/* the request name in every claim */

#define PLAN_DEFAULT_GPU_CLASS	"gpu.nvidia.com"
#define PLAN_DEFAULT_CLASS_PREFIX "kpgpud-mig-"
#define PLAN_DEFAULT_QUOTA_NAME	"{kind}-{name}"
#define PLAN_DEFAULT_STRICT	"gpu.nvidia.com,mig.nvidia.com,vfio.gpu.nvidia.com"

#define PLAN_NAME_MAX		253	/* DNS subdomain */
#define PLAN_LABEL_MAX		63	/* DNS label, label value */
#define PLAN_KIND_MAX		63
#define PLAN_UID_MAX		63
#define PLAN_KEY_MAX		(PLAN_NAME_MAX + 40)
#define PLAN_MAX_STRICT		16
#define PLAN_MAX_KEYS		(2 + PLAN_MAX_STRICT)
#define PLAN_MAX_EVENTS		2

/* The parts of an instance (a KubePlus custom resource) the plan reads. */
struct plan_instance {
	char		 api_version[PLAN_NAME_MAX + 1];
	char		 kind[PLAN_KIND_MAX + 1];
	char		 name[PLAN_NAME_MAX + 1];
	char		 namespace[PLAN_LABEL_MAX + 1];	/* "": cluster-scoped */
	char		 uid[PLAN_UID_MAX + 1];
	char		 created[40];	/* metadata.creationTimestamp */
	bool		 has_annotation;
	size_t		 annotation_len;	/* may exceed the copy */
	char		 annotation[ANNOTATION_MAX_LEN + 1];
};

struct plan_config {
	const char	*quota_name;	/* NULL: PLAN_DEFAULT_QUOTA_NAME */
	const char	*class_prefix;	/* NULL: PLAN_DEFAULT_CLASS_PREFIX */
	const char	*gpu_class;	/* NULL: PLAN_DEFAULT_GPU_CLASS */
	const char	*strict_classes; /* NULL: PLAN_DEFAULT_STRICT */
	bool		 strict;	/* zero the other GPU classes' keys */
	bool		 owner_refs;	/* owner references where scope allows */
	bool		 ns_from_namespace; /* tenant ns = the instance's ns */
};

struct plan_key {
	char		 name[PLAN_KEY_MAX + 1];
	int		 value;
};

struct plan_event {
	const char	*reason;	/* static */
	char		 message[256];
};

struct plan {
	struct annotation annot;
	char		 namespace[PLAN_LABEL_MAX + 1];	/* the tenant's */
	char		 instance_ref[PLAN_KIND_MAX + PLAN_NAME_MAX + 2];
	json_t		*device_class;	/* NULL unless mig or hybrid */
	json_t		*claim;		/* ResourceClaimTemplate or -Claim */
	bool		 claim_is_template;
	char		 claim_name[PLAN_LABEL_MAX + 1];
	char		 class_name[PLAN_NAME_MAX + 1];	/* the class in use */
	char		 quota_name[PLAN_NAME_MAX + 1];
	int		 nkeys;
	struct plan_key	 keys[PLAN_MAX_KEYS];
	char		*resolved;	/* the Namespace annotation value */
	int		 nevents;
	struct plan_event events[PLAN_MAX_EVENTS];
};

/*
 * Read an instance object (JSON text of a custom resource). Returns 0, or
 * -EINVAL with the reason in err; ret untouched on failure.
 */
int	 plan_instance_parse(const char *json, size_t len,
	    struct plan_instance *ret, char *err, size_t errlen);
/* Same, from a decoded object. */
int	 plan_instance_from_json(json_t *obj, struct plan_instance *ret,
	    char *err, size_t errlen);

/*
 * Compose the plan. Returns 0, -EINVAL with the reason in err (an invalid
 * annotation, a missing annotation, or a configuration that yields invalid
 * names), or -ENOMEM. ret untouched on failure.
 */
int	 plan_build(const struct plan_instance *inst,
	    const struct plan_config *cfg, struct plan **ret, char *err,
	    size_t errlen);
void	 plan_free(struct plan *p);

/* The whole plan as one JSON document (what kpgpuctl render prints). */
json_t	*plan_to_json(const struct plan *p);
/* The ResourceQuota "hard" map of the plan: key -> quantity string. */
json_t	*plan_quota_hard(const struct plan *p);

/*
 * Fit a name into max characters: unchanged when short enough, otherwise
 * cut and given a "-<8 hex>" suffix hashed from the whole name. Returns 0 or
 * -EINVAL when out is too small.
 */
int	 plan_name_fit(const char *name, size_t max, char *out,
	    size_t outlen);
/* True when s is a DNS-1123 label. */
bool	 plan_dns_label(const char *s);
/* True when s is a DNS-1123 subdomain. */
bool	 plan_dns_subdomain(const char *s);
/* Which of two instances wins a namespace: < 0 when a is older than b. */
int	 plan_instance_cmp(const struct plan_instance *a,
	    const struct plan_instance *b);

#endif
