/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology isolation, the pure half: the fleet's GPUs (from ResourceSlices),
 * the assignment of isolation domains to the tenants that ask for them, and
 * the CEL selectors that keep every tenant's claims inside its domains and
 * out of everyone else's. No I/O.
 *
 * A domain is a physical GPU ("gpu/<uuid>", a whole GPU's uuid or the
 * parentUUID of its MIG devices) for isolation gpu, or a PCIe root
 * ("root/<node>/<pcieRoot>": root names repeat across nodes) for isolation
 * pcie-root. A domain is assigned only when none of its GPUs is in another
 * tenant's domain or holds a device allocated to another namespace's
 * claim. The assignment is stable: a tenant keeps every domain
 * it had (its previous domains, read back from where kpgpud-quota stored
 * them) while the domain exists and the tenant's level is unchanged; only
 * then are new domains handed out, to the tenants in priority order (the
 * caller's order: oldest instance first), each free domain in id order,
 * until the tenant's domains hold maxDevices devices it can use. The same
 * inputs give the same assignment, whoever computes it.
 *
 * Enforcement is by GPU uuid, because CEL sees device attributes only (not
 * the node): a tenant of level gpu or pcie-root gets a selector admitting
 * only its domains' GPUs; every tenant gets selectors excluding the GPUs of
 * other tenants' domains and every GPU with a device that can be allocated
 * to several claims (allowMultipleAllocations) outside its own domains.
 */
#ifndef KPGPUD_QUOTA_TOPOLOGY_H
#define KPGPUD_QUOTA_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kpgpud-quota/annotation.h"

#define TOPO_DRIVER		"gpu.nvidia.com"
#define TOPO_ROOT_ATTR		"resource.kubernetes.io/pcieRoot"
#define TOPO_MAX_DEVICES	16384	/* devices of the fleet considered */
#define TOPO_MAX_DOMAINS	1024	/* domains of one tenant */
#define TOPO_STR_MAX		64	/* attribute strings */
#define TOPO_NODE_MAX		253
#define TOPO_ID_MAX		(5 + TOPO_NODE_MAX + 1 + TOPO_STR_MAX)
/* GPU uuids in one selector (each ~45 bytes: under the 10 KiB CEL cap). */
#define TOPO_UUIDS_PER_SEL	150
/* Selectors topology may add to a request (of the 32 a request has). */
#define TOPO_MAX_SELECTORS	28

/* One device of the fleet (the NVIDIA driver's, with a GPU identity). */
struct topo_device {
	char	 node[TOPO_NODE_MAX + 1];
	char	 pool[TOPO_NODE_MAX + 1];
	char	 name[TOPO_NODE_MAX + 1];
	char	 busy[64];		/* namespace of a claim holding it, "*"
					   for several, "" for none */
	char	 gpu[TOPO_STR_MAX + 1];	/* uuid, or parentUUID of a MIG */
	char	 root[TOPO_STR_MAX + 1];	/* pcieRoot, "" when unknown */
	bool	 mig;
	char	 profile[TOPO_STR_MAX + 1];
	char	 product[TOPO_STR_MAX + 1];
	bool	 multi;			/* allowMultipleAllocations */
};

struct topo_fleet {
	int			 n;
	int			 cap;
	struct topo_device	*d;
	int			 skipped;	/* devices without uuid, or
						   past TOPO_MAX_DEVICES */
	struct topo_device	**by_name;	/* sorted by pool, name */
	int			 nby_name;
};

/* One tenant: what it asks (in) and what it gets (out). */
struct topo_tenant {
	/* in */
	char			 ns[64];
	enum annotation_isolation level;
	int			 want;		/* maxDevices */
	bool			 mig;		/* selects MIG devices */
	char			 profile[TOPO_STR_MAX + 1];
	char			 product[TOPO_STR_MAX + 1];
	const char		*prev;		/* stored domains or NULL */
	/* out */
	int			 ndomains;
	char			**domains;	/* ids, in assignment order */
	int			 have;		/* usable devices in them */
	bool			 exhausted;	/* have < want */
	int			 nlost;		/* previous domains gone */
	char			 lost[TOPO_ID_MAX + 1];	/* the first */
};

/*
 * Record that a claim of namespace ns is allocated device (pool, name) of
 * TOPO_DRIVER (call after the last topo_fleet_add). A domain with a GPU
 * busy with another namespace's claim is not handed out. 0 or -ENOMEM.
 */
int	 topo_fleet_busy(struct topo_fleet *f, const char *pool,
	    const char *name, const char *ns);

/*
 * Add the devices of a ResourceSlice (its spec, or a cache row holding
 * "spec") of driver TOPO_DRIVER; other drivers add nothing. 0 or -ENOMEM.
 */
int	 topo_fleet_add(struct topo_fleet *f, json_t *slice);
void	 topo_fleet_free(struct topo_fleet *f);

/* Fill a tenant's "in" part from its annotation (level, want, match). */
void	 topo_tenant_init(struct topo_tenant *t, const char *ns,
	    const struct annotation *a, const char *prev);
void	 topo_tenant_clear(struct topo_tenant *t);

/*
 * Assign domains to the n tenants, in their order of priority. 0 or
 * -ENOMEM (then no tenant has domains).
 */
int	 topo_assign(const struct topo_fleet *f, struct topo_tenant *t, int n);

/*
 * The selectors of tenant self (JSON array of {"cel":{"expression"}}),
 * appended to sel. -E2BIG when they would need more than
 * TOPO_MAX_SELECTORS (the caller fails closed), -ENOMEM.
 */
int	 topo_selectors(const struct topo_fleet *f, const struct topo_tenant *t,
	    int n, int self, json_t *sel);

/* A tenant's domains as the annotation value ("" for none); free(). */
char	*topo_domains_value(const struct topo_tenant *t);

#endif
