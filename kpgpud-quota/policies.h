/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admission policies kpgpud-quota applies and keeps (--admission-
 * policies FILE): the ValidatingAdmissionPolicies and their bindings of a
 * YAML or JSON file (deploy/base/admission-policy.yaml as shipped). Pure:
 * reading the file, checking it, and deciding whether an object the API
 * holds is still the file's; quota_policies.c does the requests.
 *
 * Only admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy,
 * MutatingAdmissionPolicy and their bindings are applied; ConfigMaps in
 * the file are skipped (the parameter ConfigMap is kept by
 * --policy-params), any other kind is an error. The mutating ones come
 * from their own file (--mutating-policy,
 * deploy/components/policy-injection/mutating-policy.yaml)
 * and are kept only while claims are injected by policy (--injection).
 */
#ifndef KPGPUD_QUOTA_POLICIES_H
#define KPGPUD_QUOTA_POLICIES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define POLICIES_MAX_FILE	(1u << 20)	/* bytes */
#define POLICIES_MAX		32		/* objects applied */
#define POLICIES_API		"/apis/admissionregistration.k8s.io/v1"
#define POLICIES_API_VERSION	"admissionregistration.k8s.io/v1"
#define POLICIES_WHY_MAX	320
#define POLICIES_MAP_RESOURCE	"mutatingadmissionpolicies"
#define POLICIES_MANAGED_LABEL	"app.kubernetes.io/managed-by"
#define POLICIES_MANAGED_VALUE	"kpgpud"

/* Who adds the GPU claim to a Pod (--injection). */
enum policies_injection {
	POLICIES_INJECT_WEBHOOK = 0,	/* kpgpud-admit; no mutating policy */
	POLICIES_INJECT_POLICY,		/* the MutatingAdmissionPolicy */
	POLICIES_INJECT_AUTO,		/* policy where the API serves it */
};

/* One object of the file. */
struct policy_obj {
	json_t		*obj;		/* as the file says, metadata reduced to
					   name, labels and annotations */
	const char	*kind;		/* "ValidatingAdmissionPolicy", ... */
	bool		 mutating;	/* a MutatingAdmissionPolicy or its
					   binding */
	char		 name[254];
	char		 collection[160];	/* POST here */
	char		 item[420];		/* GET / PUT here */
};

struct policies {
	int		 n;
	struct policy_obj o[POLICIES_MAX];
	int		 nskipped;	/* ConfigMaps left to --policy-params */
	int		 nmutating;	/* of n, mutating ones */
};

/*
 * Parse and check the text of a policy file. 0, or -EINVAL with the reason
 * in err, or -ENOMEM; *ret (policies_free) only on success.
 */
int	 policies_parse(const char *buf, size_t len, struct policies **ret,
	    char *err, size_t errlen);
/* The same from a file of at most POLICIES_MAX_FILE bytes. */
int	 policies_load(const char *path, struct policies **ret, char *err,
	    size_t errlen);
void	 policies_free(struct policies *p);

/* Parse "webhook", "policy" or "auto"; 0 or -EINVAL. */
int	 policies_injection_parse(const char *s,
	    enum policies_injection *ret);
const char *policies_injection_name(enum policies_injection m);
/*
 * Whether an API group version's discovery document (the APIResourceList
 * of GET POLICIES_API) lists mutatingadmissionpolicies: whether --injection
 * auto injects by policy.
 */
bool	 policies_serves_map(const json_t *discovery);
/*
 * Whether an object the API holds is one kpgpud-quota made (the label
 * POLICIES_MANAGED_LABEL=POLICIES_MANAGED_VALUE): only such a mutating
 * policy or binding is removed when injection is by webhook.
 */
bool	 policies_managed(const json_t *have);

/*
 * Whether have (the object the API holds) is still want: its spec equal
 * (members the API server adds count only when empty or at their
 * documented default) and want's labels and annotations present. When
 * not, why gets the first differences.
 */
bool	 policies_same(const json_t *want, const json_t *have, char *why,
	    size_t whylen);
/* The body of a PUT that restores want over have (its resourceVersion). */
char	*policies_update_body(const json_t *want, const json_t *have);
/* The body of a POST of want. */
char	*policies_create_body(const json_t *want);

#endif
