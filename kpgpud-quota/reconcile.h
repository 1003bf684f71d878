/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reconcile, the pure half: compare a plan (kpgpud-quota/plan.h) with what
 * is observed (the cache's owned objects and Namespace row, the API's
 * ResourceQuotas of the namespace) and produce the ordered writes that make
 * them agree. Creating: DeviceClass, the plan's quota keys (raised by the
 * room old shared claims still take while they drain), and only once the
 * quota's status.hard shows them: the claim or template, the Namespace
 * label and annotations, our keys out of other quotas, stale owned objects
 * deleted. Cleaning up: Namespace, quotas, owned objects. Only kpgpud's
 * quota keys (recorded in the quota annotation PLAN_QUOTA_KEYS_ANNOT) are
 * ever written or removed, with JSON merge patches that name no other key.
 */
#ifndef KPGPUD_QUOTA_RECONCILE_H
#define KPGPUD_QUOTA_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kpgpud-quota/plan.h"

#define RC_MAX_OWNED	32	/* owned objects considered per namespace */
#define RC_MAX_QUOTAS	16	/* ResourceQuotas considered per namespace */
#define RC_MAX_ACTIONS	(6 + RC_MAX_OWNED + RC_MAX_QUOTAS)
#define RC_MAX_IMPOSTORS 2	/* the class and the claim or template */
#define RC_WHY_MAX	320
#define RC_PATH_MAX	600

#define RC_MERGE	"application/merge-patch+json"
#define RC_JSON		"application/json"

/* One write. */
struct rc_action {
	const char	*method;	/* "POST", "PATCH", "PUT", "DELETE" */
	const char	*verb;		/* metric label: create/patch/delete */
	char		 path[RC_PATH_MAX];
	const char	*content_type;	/* NULL without body */
	char		*body;		/* owned; NULL for none */
	long		 also_ok;	/* a status that counts as done:
					   409 on create, 404 on delete, 0 */
	/*
	 * A create of kpgpud's object of this kind: on 409 (or 403: quota
	 * admission runs before the name check) the object of that name
	 * (item) is read and verified, never taken as done.
	 */
	const char	*verify_kind;
	char		 item[RC_PATH_MAX];
	const char	*impostor_kind;	/* a delete replacing an impostor */
	char		 what[384];	/* "create ResourceClaim ns/name" */
};

struct rc_actions {
	int		 n;
	struct rc_action a[RC_MAX_ACTIONS];
	/* objects of kpgpud's names found not to be kpgpud's: what and why */
	int		 nimpostors;
	char		 impostor[RC_MAX_IMPOSTORS][RC_WHY_MAX + 400];
	bool		 wait;		/* an object of ours is terminating,
					   or the quota is not enforced yet:
					   look again after a backoff */
	bool		 quota_pending;	/* status.hard does not show the
					   plan yet: nothing after the quota
					   was written */
};

/* An owned object of the namespace as the cache holds it. */
struct rc_owned {
	char		 kind[32];
	char		 name[PLAN_NAME_MAX + 1];
	char		 uid[PLAN_UID_MAX + 1];
	json_t		*data;		/* {"labels","annotations",
					   "ownerReferences","spec",...} */
};

/* What an object of one of kpgpud's names is. */
enum rc_verdict {
	RC_OURS,	/* kpgpud's, as planned */
	RC_OUTDATED,	/* kpgpud's (labels, owner), an older plan's spec */
	RC_IMPOSTOR,	/* not kpgpud's: replaced and reported */
};

/* What is known of one tenant namespace. */
struct rc_observed {
	char		 ns[PLAN_LABEL_MAX + 1];
	bool		 ns_exists;
	bool		 ns_terminating;
	bool		 ns_isolated;	/* the label is "true" */
	const char	*ns_resolved;	/* annotation value or NULL */
	json_t		*ns_annots;	/* its kubeplus.io/ annotations or
					   NULL (none) */
	/*
	 * The object of the plan's claim name, looked up by name (never
	 * hidden by other objects); has_planned false when there is none.
	 */
	bool		 has_planned;
	struct rc_owned	 planned;
	/* kpgpud's other claims and templates (its two labels), up to a cap */
	int		 nowned;
	struct rc_owned	 owned[RC_MAX_OWNED];
	bool		 more_owned;	/* some left for the next pass */
	json_t		*device_class;	/* cached data of the plan's class */
	char		 device_class_uid[PLAN_UID_MAX + 1];
	json_t		*quotas;	/* items of the namespace's quota list */
};

/*
 * The writes that take obs to plan p, or with p NULL the writes that remove
 * everything kpgpud put into obs->ns. 0 or -ENOMEM / -E2BIG; on failure
 * ret holds no actions.
 */
int	 reconcile_diff(const struct plan *p, const struct rc_observed *obs,
	    struct rc_actions *ret);

/*
 * Deletes of the kpgpud DeviceClasses (names[n]) that no plan uses
 * (used[nused]). 0 or -E2BIG.
 */
int	 reconcile_gc_classes(const char *const *names, int n,
	    const char *const *used, int nused, struct rc_actions *ret);

/*
 * The admission policies' parameter ConfigMap ns/name: created when absent
 * (a 409 is fine) and its keys set with a merge patch that names no
 * other: non-gpu-classes (space-separated) and, when user is not NULL,
 * quota-user. 0 or -ENOMEM / -E2BIG.
 */
#define RC_PARAMS_CLASSES	"non-gpu-classes"
#define RC_PARAMS_USER		"quota-user"
int	 reconcile_params(const char *ns, const char *name,
	    const char *non_gpu, const char *user, struct rc_actions *ret);

/*
 * An Event about the instance, of type (NULL: "Warning"; "Normal" for a
 * notice that does not stand for a failed reconcile). Its name is derived
 * from the instance, its resourceVersion, the reason and the message, so
 * a repeat of the same report is refused (409) instead of piling up.
 */
int	 reconcile_event(const struct plan_instance *in, const char *rv,
	    const char *type, const char *reason, const char *message,
	    uint64_t wall_ms, struct rc_action *ret);

/*
 * Whether have (a cache row {"labels","ownerReferences","spec",...} or a
 * whole object) is kpgpud's version of want (the plan's object): the
 * managed-by label, the controller owner reference when want has one, and
 * a spec equal to want's (members the server may add are accepted only
 * when empty: null, false, 0, "", [] or {}). why gets the differences.
 */
enum rc_verdict reconcile_verdict(json_t *want, json_t *have, char *why,
	    size_t whylen);
/* Whether a cache row carries both of kpgpud's labels (stale removal). */
bool	 reconcile_owned_ours(json_t *data);
/* A whole object reduced to the cache row form reconcile_verdict reads. */
json_t	*reconcile_row(json_t *obj);
/* The DeleteOptions body of a delete that must hit exactly uid. */
char	*reconcile_delete_body(const char *uid);
/* Free the bodies; leaves no actions. */
void	 reconcile_actions_clear(struct rc_actions *a);

/*
 * Whether a ResourceQuota object q enforces the plan: its status.hard (what
 * quota admission reads) holds every key of p at the planned value.
 */
bool	 reconcile_quota_in_force(const struct plan *p, json_t *q);

/* Whether a value is empty: null, false, 0, "", [] or {}. */
bool	 reconcile_json_empty(json_t *v);
/* Whether every member of want is in have with the same value. */
bool	 reconcile_json_subset(json_t *want, json_t *have);

#endif
