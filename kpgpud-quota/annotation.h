/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubeplus.io/gpu-isolation annotation on a tenant instance: parsing and
 * validation only, pure. Every rejection comes with a precise, human-readable
 * reason that kpgpud-quota puts into a Warning Event on the instance.
 *
 * JSON form (unknown fields are rejected):
 *   {"sharing": "exclusive" | "mig" | "time-slicing" | "mps" | "hybrid",
 *    "migProfile": "1g.10gb",              // mig and hybrid only, required
 *    "maxDevices": 1,                      // 1..ANNOTATION_MAX_DEVICES, def 1
 *    "devicesPerPod": 1,                   // 1..maxDevices, default 1
 *    "productName": "NVIDIA A100 80GB PCIe",
 *    "minMemory": "40Gi",                  // device memory capacity
 *    "topology": "pcieRoot" | "parentUUID" | "none",
 *    "timeSlicing": {"interval": "Default" | "Short" | "Medium" | "Long"},
 *    "mps": {"defaultActiveThreadPercentage": 50,
 *            "defaultPinnedDeviceMemoryLimit": "10Gi"},
 *    "initContainers": "none" | "all" | ["name", ...],
 *    "sidecarContainers": "none" | ["name", ...],  // default: the
 *                                          // resolved_default_sidecars
 *    "legacyGPU": "reject" | "translate" | "allow",  // these three:
 *                                          // resolved_policy_member
 *    "isolation": "device" | "gpu" | "pcie-root"}   // default device
 */
#ifndef KPGPUD_QUOTA_ANNOTATION_H
#define KPGPUD_QUOTA_ANNOTATION_H

#include <stdbool.h>
#include <stddef.h>

#include "common/resolved.h"

#define ANNOTATION_KEY		"kubeplus.io/gpu-isolation"
#define ANNOTATION_MAX_LEN	4096	/* bytes of annotation value */
#define ANNOTATION_MAX_DEVICES	1024
#define ANNOTATION_MAX_PER_POD	32	/* a claim holds at most 32 results */
#define ANNOTATION_PROFILE_MAX	32
#define ANNOTATION_PRODUCT_MAX	64	/* attribute strings are <= 64 */
#define ANNOTATION_QTY_MAX	24

enum annotation_sharing {
	ANNOTATION_SHARING_EXCLUSIVE = 0,
	ANNOTATION_SHARING_MIG,
	ANNOTATION_SHARING_TIME_SLICING,
	ANNOTATION_SHARING_MPS,
	ANNOTATION_SHARING_HYBRID,
};

enum annotation_topology {
	ANNOTATION_TOPO_NONE = 0,
	ANNOTATION_TOPO_PCIE_ROOT,
	ANNOTATION_TOPO_PARENT_UUID,
};

/*
 * Topology isolation between tenants: device (the default: only devices
 * are exclusive), gpu (no other tenant on the physical GPUs this tenant
 * uses) or pcie-root (none under its resource.kubernetes.io/pcieRoot).
 */
enum annotation_isolation {
	ANNOTATION_ISOLATION_DEVICE = 0,
	ANNOTATION_ISOLATION_GPU,
	ANNOTATION_ISOLATION_PCIE_ROOT,
};

enum annotation_interval {
	ANNOTATION_INTERVAL_UNSET = 0,
	ANNOTATION_INTERVAL_DEFAULT,
	ANNOTATION_INTERVAL_SHORT,
	ANNOTATION_INTERVAL_MEDIUM,
	ANNOTATION_INTERVAL_LONG,
};

struct annotation {
	enum annotation_sharing	 sharing;
	char			 mig_profile[ANNOTATION_PROFILE_MAX + 1];
	int			 max_devices;
	int			 devices_per_pod;
	char			 product_name[ANNOTATION_PRODUCT_MAX + 1];
	char			 min_memory[ANNOTATION_QTY_MAX + 1];
	enum annotation_topology topology;
	enum annotation_interval interval;
	int			 mps_thread_pct;	/* 0: unset */
	char			 mps_pinned_mem[ANNOTATION_QTY_MAX + 1];
	struct resolved_policy	 pol;	/* default: the common sidecars */
	bool			 sidecars_set;	/* named, not the default */
	enum annotation_isolation isolation;
};

/*
 * Parse and validate an annotation value. Returns 0, or -EINVAL with the
 * reason in err (errlen bytes); ret is untouched on failure.
 */
int	 annotation_parse(const char *json, size_t len, struct annotation *ret,
	    char *err, size_t errlen);

/* The annotation's sharing word ("mig", ...). */
const char *annotation_sharing_name(enum annotation_sharing s);
/* True for the modes served by one shared ResourceClaim per tenant. */
bool	 annotation_sharing_shared(enum annotation_sharing s);
/* True for the modes that select a MIG device of a profile. */
bool	 annotation_sharing_mig(enum annotation_sharing s);
/* The interval word for the NVIDIA GpuConfig ("Default", ...). */
const char *annotation_interval_name(enum annotation_interval i);
/* The isolation word ("device", "gpu", "pcie-root"). */
const char *annotation_isolation_name(enum annotation_isolation i);
/* The fully qualified attribute for a topology constraint, or NULL. */
const char *annotation_topology_attr(enum annotation_topology t);

/* True when s is a Kubernetes quantity that kpgpud accepts ("40Gi"). */
bool	 annotation_quantity_valid(const char *s);
/* True when s looks like an NVIDIA MIG profile ("1g.10gb", "1g.10gb+me"). */
bool	 annotation_profile_valid(const char *s);

#endif
