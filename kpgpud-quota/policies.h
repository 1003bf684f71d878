/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admission policies kpgpud-quota applies and keeps (--admission-
 * policies FILE): the ValidatingAdmissionPolicies and their bindings of a
 * YAML or JSON file (deploy/base/admission-policy.yaml as shipped). Pure:
 * reading the file, checking it, and deciding whether an object the API
 * holds is still the file's; quota_policies.c does the requests.
 *
 * Only admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and
 * ValidatingAdmissionPolicyBinding are applied; ConfigMaps in the file
 * are skipped (the parameter ConfigMap is kept by --policy-params), any
 * other kind is an error.
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

/* One object of the file. */
struct policy_obj {
	json_t		*obj;		/* as the file says, metadata reduced to
					   name, labels and annotations */
	const char	*kind;		/* "ValidatingAdmissionPolicy" or
					   "ValidatingAdmissionPolicyBinding" */
	char		 name[254];
	char		 collection[160];	/* POST here */
	char		 item[420];		/* GET / PUT here */
};

struct policies {
	int		 n;
	struct policy_obj o[POLICIES_MAX];
	int		 nskipped;	/* ConfigMaps left to --policy-params */
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
