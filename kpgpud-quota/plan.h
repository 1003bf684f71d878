/* SPDX-License-Identifier: Apache-2.0 */
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

#include <errno.h>
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
/*
 * Plain Namespace annotations next to RESOLVED_ANNOTATION, for the
 * ValidatingAdmissionPolicies (CEL cannot parse the JSON one): the name of
 * the tenant's template or shared claim (exactly one of the two), its
 * DeviceClass, the devices it may hold (decimal), the init containers
 * that get the claim ("none", "all" or a comma list), the sidecar
 * containers that never get it ("none" or a comma list) and what a
 * device-plugin GPU request gets ("reject", "translate" or "allow": the
 * pod policy refuses one unless "allow"; absent reads as "reject").
 */
#define PLAN_NS_TEMPLATE_ANNOT	"kubeplus.io/gpu-claim-template"
#define PLAN_NS_CLAIM_ANNOT	"kubeplus.io/gpu-claim"
#define PLAN_NS_CLASS_ANNOT	"kubeplus.io/gpu-device-class"
#define PLAN_NS_MAX_ANNOT	"kubeplus.io/gpu-max-devices"
#define PLAN_NS_INIT_ANNOT	"kubeplus.io/gpu-init-containers"
#define PLAN_NS_SIDECAR_ANNOT	"kubeplus.io/gpu-sidecar-containers"
#define PLAN_NS_LEGACY_ANNOT	"kubeplus.io/gpu-legacy-gpu"
/*
 * Topology isolation (kpgpud-quota/topology.h): the tenant's domains
 * (comma-separated ids, the durable record of the assignment) and their
 * state ("ok", or "exhausted: H of W devices").
 */
#define PLAN_NS_TOPO_ANNOT	RESOLVED_TOPO_DOMAINS
#define PLAN_NS_TOPO_STATE_ANNOT RESOLVED_TOPO_STATE

#define PLAN_DEFAULT_GPU_CLASS	"gpu.nvidia.com"
#define PLAN_DEFAULT_CLASS_PREFIX "kpgpud-mig-"
/*
 * kpgpud's own ResourceQuota in the tenant namespace (every quota of a
 * namespace is enforced). Never the name KubePlus gives the quota of the
 * instance's Helm release, lower(kind)-<name>: KubePlus creates that one
 * with a plain create after helm install and gives up on a 409.
 */
#define PLAN_DEFAULT_QUOTA_NAME	"kpgpud-gpu"
/*
 * A tenant with topology selectors gets a class of its own, holding them:
 * claims the tenant writes itself against its class (all the admission
 * policy lets it use) are bound by them too.
 */
#define PLAN_TOPO_CLASS_PREFIX	"kpgpud-topo-"
#define PLAN_DEFAULT_STRICT	"gpu.nvidia.com,mig.nvidia.com,vfio.gpu.nvidia.com"
#define PLAN_DEFAULT_GPU_DRIVERS "gpu.nvidia.com"

#define PLAN_NAME_MAX		253	/* DNS subdomain */
#define PLAN_LABEL_MAX		63	/* DNS label, label value */
#define PLAN_KIND_MAX		63
#define PLAN_UID_MAX		63
#define PLAN_KEY_MAX		(PLAN_NAME_MAX + 40)
#define PLAN_MAX_STRICT		16
/*
 * GPU DeviceClasses keyed in one quota. Past it (or for a class whose key
 * would not be a valid resource name) the plan fails closed: the claim
 * count key becomes 0, and a Warning Event says why. 256 keys of at most
 * PLAN_KEY_MAX bytes keep the quota (and its key record annotation) under
 * 80 KiB each, well inside the 256 KiB annotation and 1.5 MiB object caps.
 */
#define PLAN_MAX_CLASSES	256
#define PLAN_CLASS_NAME_MAX	(PLAN_NAME_MAX - 28)	/* keyable class */
#define PLAN_MAX_KEYS		(2 + PLAN_MAX_STRICT + PLAN_MAX_CLASSES)
#define PLAN_MAX_EVENTS		5

/*
 * The NVIDIA DRA driver's alpha feature gates (off as the driver ships)
 * that change what kpgpud may compose: a GpuConfig with sharing strategy
 * TimeSlicing needs TimeSlicingSettings, one with MPS needs MPSSupport;
 * with the gate off the driver refuses to prepare the claim and every pod
 * using it stays ContainerCreating. The operator declares the gates that
 * are on (kpgpud-quota --driver-gates); a default driver has none.
 */
#define PLAN_GATE_TIME_SLICING	0x1u	/* TimeSlicingSettings */
#define PLAN_GATE_MPS		0x2u	/* MPSSupport */
#define PLAN_GATES_MAX_LEN	512	/* bytes of a --driver-gates list */

/*
 * plan_build's refusals besides -EINVAL (an invalid annotation): a valid
 * annotation that needs a driver gate not declared on, and one whose
 * devices can never be allocated (e.g. minMemory above what the MIG
 * profile reports). Both leave the tenant as it was, like -EINVAL.
 */
#define PLAN_EGATE		(-ENOTSUP)
#define PLAN_ENEVER		(-EDOM)

/* Whether s is a valid --sidecar-containers value; the reason in err. */
bool	 plan_sidecars_valid(const char *s, char *err, size_t errlen);

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

struct plan_event {
	const char	*type;		/* "Normal" for a notice; NULL: "Warning" */
	const char	*reason;	/* static */
	char		 message[256];
};

/*
 * What the topology assignment gives one tenant (kpgpud-quota computes it
 * per reconcile; NULL in kpgpuctl render): selectors appended to its
 * request, and for a tenant of level gpu or pcie-root the Namespace
 * annotations and up to two Warning Events.
 */
struct plan_topology {
	json_t		*selectors;	/* array of {"cel":{"expression"}} */
	char		*domains;	/* NULL: not an isolated tenant */
	char		 state[96];
	int		 nevents;
	struct plan_event events[2];
};

struct plan_config {
	const char	*quota_name;	/* NULL: PLAN_DEFAULT_QUOTA_NAME */
	const char	*class_prefix;	/* NULL: PLAN_DEFAULT_CLASS_PREFIX */
	const char	*gpu_class;	/* NULL: PLAN_DEFAULT_GPU_CLASS */
	const char	*strict_classes; /* NULL: PLAN_DEFAULT_STRICT */
	bool		 strict;	/* zero the other GPU classes' keys */
	/*
	 * The cluster's GPU DeviceClasses (those plan_class_is_gpu keeps),
	 * each zeroed under strict unless it is the tenant's own; set per
	 * reconcile by kpgpud-quota, NULL in kpgpuctl render (the
	 * strict_classes list alone).
	 */
	const char *const *classes;
	int		 nclasses;
	bool		 owner_refs;	/* owner references where scope allows */
	bool		 ns_from_namespace; /* tenant ns = the instance's ns */
	unsigned	 driver_gates;	/* PLAN_GATE_* declared on */
	/*
	 * The sidecar containers of an instance that names none: "none" or a
	 * comma list (kpgpud-quota --sidecar-containers, checked at start
	 * with plan_sidecars_valid); NULL: resolved_default_sidecars.
	 */
	const char	*sidecars;
	const struct plan_topology *topology;	/* NULL: none */
};

struct plan_key {
	char		 name[PLAN_KEY_MAX + 1];
	int		 value;
};

struct plan {
	struct annotation annot;
	char		 namespace[PLAN_LABEL_MAX + 1];	/* the tenant's */
	char		 instance_ref[PLAN_KIND_MAX + PLAN_NAME_MAX + 2];
	json_t		*device_class;	/* NULL unless mig, hybrid or
					   topology selectors */
	json_t		*claim;		/* ResourceClaimTemplate or -Claim */
	bool		 claim_is_template;
	/*
	 * The claim or template name. A template keeps the fixed name
	 * claim_legacy (its spec can be replaced in place: nothing pins it);
	 * a shared claim is named claim_base + "-" + 8 hex of a hash of its
	 * canonical spec, so a changed spec is a new claim and the old one
	 * can drain while its pods run (the scheduler's delete-protection
	 * finalizer keeps an allocated claim until its last pod ends).
	 */
	char		 claim_name[PLAN_LABEL_MAX + 1];
	char		 claim_legacy[PLAN_LABEL_MAX + 1];	/* "<kind>-<name>-gpu" */
	char		 claim_base[PLAN_LABEL_MAX - 8];
	char		 class_name[PLAN_NAME_MAX + 1];	/* the class in use */
	char		 quota_name[PLAN_NAME_MAX + 1];
	bool		 closed;	/* GPU classes not keyed: claims 0 */
	/*
	 * The quota keys, as many as there are (most plans have a handful:
	 * a plan of PLAN_MAX_KEYS inline made each plan a 93 KB block), and
	 * their record for PLAN_QUOTA_KEYS_ANNOT ("k1,k2,...").
	 */
	int		 nkeys;
	int		 keys_cap;
	struct plan_key	*keys;
	char		*keys_text;
	char		*resolved;	/* the Namespace annotation value */
	json_t		*topo_sel;	/* topology selectors, or NULL */
	char		*topo_domains;	/* PLAN_NS_TOPO_ANNOT, or NULL */
	char		 topo_state[96];
	int		 nevents;
	struct plan_event events[PLAN_MAX_EVENTS];
	/* what the plan was built from (plan_serves), inputs_len bytes */
	char		*inputs;
	size_t		 inputs_len;
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
 * names), PLAN_EGATE or PLAN_ENEVER with the reason in err (see above), or
 * -ENOMEM. ret untouched on failure.
 */
int	 plan_build(const struct plan_instance *inst,
	    const struct plan_config *cfg, struct plan **ret, char *err,
	    size_t errlen);
void	 plan_free(struct plan *p);
/*
 * Whether p is what plan_build gives for in and cfg now: every input it
 * was built from (the instance, each member of the configuration, the
 * GPU classes and the topology) is the same, compared by value. A plan
 * kept between reconciles of a tenant serves again only then. False on
 * ENOMEM.
 */
bool	 plan_serves(const struct plan *p, const struct plan_instance *in,
	    const struct plan_config *cfg);
/* The Warning Event reason of a plan_build refusal (-EINVAL, PLAN_E*). */
const char *plan_refusal_reason(int r);

/*
 * Parse a driver gate list ("TimeSlicingSettings,MPSSupport"; "" or
 * "none": no gate) into PLAN_GATE_* bits. Every gate name of the NVIDIA
 * driver is accepted (only the two above change the plan); an unknown
 * name is -EINVAL with the reason in err.
 */
int	 plan_gates_parse(const char *list, unsigned *ret, char *err,
	    size_t errlen);
/*
 * Whether annotation a may be composed with the gates declared: 0, or
 * PLAN_EGATE with a message for the instance's Warning Event in err.
 */
int	 plan_check_gates(const struct annotation *a, unsigned gates,
	    char *err, size_t errlen);
/*
 * The most memory (MiB) any known GPU reports for a MIG profile's devices
 * ("1g.10gb+me" as "1g.10gb"), with the reported values as text for a
 * message; 0 for a profile kpgpud does not know.
 */
long	 plan_profile_memory_mib(const char *profile, const char **text);
/*
 * Whether a's devices can ever be allocated: 0, or PLAN_ENEVER with a
 * message naming the profile's real memory in err.
 */
int	 plan_check_allocatable(const struct annotation *a, char *err,
	    size_t errlen);

/*
 * Whether a DeviceClass (its spec, or a cache row holding "spec") counts as
 * a GPU class: true unless one of its CEL selectors provably restricts it
 * to a driver outside drivers (comma-separated; NULL:
 * PLAN_DEFAULT_GPU_DRIVERS). Fails closed: no selectors, a selector that is
 * not CEL, or an expression this cannot analyse count as GPU. Proof is a
 * top-level conjunct `device.driver == '<name>'` (either side, any
 * parentheses around conjunctions); an expression with a top-level || or
 * ?: proves nothing.
 */
bool	 plan_class_is_gpu(json_t *class_or_row, const char *drivers);
/* Whether every name of a driver list is a DNS subdomain. */
bool	 plan_drivers_valid(const char *drivers);

/*
 * The name KubePlus gives the ResourceQuota of the instance's Helm release,
 * lower(kind)-<name>, into out. False when it does not fit.
 */
bool	 plan_kubeplus_quota(const struct plan_instance *in, char *out,
	    size_t len);

/* The whole plan as one JSON document (what kpgpuctl render prints). */
json_t	*plan_to_json(const struct plan *p);
/*
 * The Namespace annotations of the plan: RESOLVED_ANNOTATION and the
 * PLAN_NS_* ones (one of the two claim keys). NULL on ENOMEM.
 */
json_t	*plan_ns_annotations(const struct plan *p);
/* Every Namespace annotation key kpgpud-quota may write (NULL-terminated). */
extern const char *const plan_ns_annotation_keys[];
/* The ResourceQuota "hard" map of the plan: key -> quantity string. */
json_t	*plan_quota_hard(const struct plan *p);

/*
 * Fit a name into max characters: unchanged when short enough, otherwise
 * cut and given a "-<8 hex>" suffix hashed from the whole name. Returns 0 or
 * -EINVAL when out is too small.
 */
int	 plan_name_fit(const char *name, size_t max, char *out,
	    size_t outlen);
/*
 * Whether name is one of the tenant's shared-claim names other than the
 * plan's own: the fixed name of kpgpud before spec-derived names, or
 * claim_base + "-" + 8 lower-case hex digits. Only such claims (with both
 * of kpgpud's labels) earn quota room while they drain.
 */
bool	 plan_claim_old_name(const struct plan *p, const char *name);
/* The name of the topology class of tenant namespace ns (0 or -EINVAL). */
int	 plan_topo_class(const char *ns, char *out, size_t outlen);
/* Which of two instances wins a namespace: < 0 when a is older than b. */
int	 plan_instance_cmp(const struct plan_instance *a,
	    const struct plan_instance *b);

#endif
