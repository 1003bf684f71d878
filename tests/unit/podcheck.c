/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The apiserver's Pod claim validation (pkg/apis/core/validation, as in
 * reference/kube-api-wire-facts.md section 7), restated for the tests:
 * a patched Pod must pass it. Included by the unit tests
 * (#include "tests/unit/podcheck.c").
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#define PC_MAX_CLAIMS	256

/* Whether s is a DNS-1123 label, written without the code under test. */
static int
pc_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* validatePodResourceClaim over spec.resourceClaims; collects the names. */
static int
pc_pod_claims(const json_t *spec, const char **names, size_t *nnames,
    char *err, size_t errlen)
{
	const json_t *rc = json_object_get(spec, "resourceClaims"), *e;
	const char *key;
	json_t *v;
	size_t i;

	*nnames = 0;
	if (rc == NULL || json_is_null(rc))
		return 0;
	if (!json_is_array(rc) || json_array_size(rc) > PC_MAX_CLAIMS)
		return snprintf(err, errlen, "spec.resourceClaims: not a list"),
		    -1;
	json_array_foreach(rc, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));
		int tmpl = json_is_string(json_object_get(e,
		    "resourceClaimTemplateName"));
		int claim = json_is_string(json_object_get(e,
		    "resourceClaimName"));

		if (n == NULL || n[0] == '\0')
			return snprintf(err, errlen, "spec.resourceClaims[%zu]"
			    ".name: Required value", i), -1;
		if (!pc_label(n))
			return snprintf(err, errlen, "spec.resourceClaims[%zu]"
			    ".name: Invalid value", i), -1;
		for (size_t j = 0; j < *nnames; j++)
			if (strcmp(names[j], n) == 0)
				return snprintf(err, errlen, "spec."
				    "resourceClaims[%zu].name: Duplicate value:"
				    " \"%s\"", i, n), -1;
		/* Unknown fields (the old source: wrapper) are dropped. */
		if (tmpl + claim != 1)
			return snprintf(err, errlen, "spec.resourceClaims[%zu]:"
			    " must specify exactly one of resourceClaimName, "
			    "resourceClaimTemplateName", i), -1;
		json_object_foreach((json_t *)e, key, v)
			if (strcmp(key, "name") != 0 &&
			    strcmp(key, "resourceClaimName") != 0 &&
			    strcmp(key, "resourceClaimTemplateName") != 0)
				return snprintf(err, errlen, "spec."
				    "resourceClaims[%zu]: unknown field %s", i,
				    key), -1;
		names[(*nnames)++] = n;
	}
	return 0;
}

/* validateResourceClaimNames for one container. */
static int
pc_container(const json_t *c, const char *where, const char **names,
    size_t nnames, char *err, size_t errlen)
{
	const json_t *res = json_object_get(c, "resources");
	const json_t *claims = json_object_get(res, "claims"), *e;
	size_t i;

	if (res != NULL && !json_is_object(res))
		return snprintf(err, errlen, "%s.resources: not an object",
		    where), -1;
	if (claims == NULL || json_is_null(claims))
		return 0;
	if (!json_is_array(claims))
		return snprintf(err, errlen, "%s.resources.claims: not a list",
		    where), -1;
	json_array_foreach(claims, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));
		size_t j, k;

		if (n == NULL || n[0] == '\0')
			return snprintf(err, errlen, "%s.resources.claims[%zu]"
			    ".name: Required value", where, i), -1;
		/* The facts file: the name alone is unique in a container. */
		for (k = 0; k < i; k++) {
			const char *m = json_string_value(json_object_get(
			    json_array_get(claims, k), "name"));

			if (m != NULL && strcmp(m, n) == 0)
				return snprintf(err, errlen, "%s.resources."
				    "claims[%zu].name: Duplicate value", where,
				    i), -1;
		}
		for (j = 0; j < nnames; j++)
			if (strcmp(names[j], n) == 0)
				break;
		if (j == nnames)
			return snprintf(err, errlen, "%s.resources.claims[%zu]:"
			    " Not found: \"%s\": must be one of the names in "
			    "pod.spec.resourceClaims", where, i, n), -1;
	}
	return 0;
}

/* Check every container of one list; ephemeral ones may hold no claims. */
static int
pc_list(const json_t *spec, const char *field, const char **names,
    size_t nnames, char *err, size_t errlen)
{
	const json_t *l = json_object_get(spec, field), *c;
	char where[96];
	size_t i;

	json_array_foreach(l, i, c) {
		snprintf(where, sizeof(where), "spec.%s[%zu]", field, i);
		if (strcmp(field, "ephemeralContainers") == 0) {
			if (json_object_get(json_object_get(c, "resources"),
			    "claims") != NULL)
				return snprintf(err, errlen, "%s.resources: "
				    "Forbidden", where), -1;
			continue;
		}
		if (pc_container(c, where, names, nnames, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* Whether pod passes the apiserver's claim validation; reason in err. */
static int
pc_check(const json_t *pod, char *err, size_t errlen)
{
	const json_t *spec = json_object_get(pod, "spec");
	const char *names[PC_MAX_CLAIMS];
	size_t nnames;

	if (!json_is_object(spec) ||
	    json_array_size(json_object_get(spec, "containers")) == 0)
		return snprintf(err, errlen, "spec.containers: Required"), -1;
	if (pc_pod_claims(spec, names, &nnames, err, errlen) < 0 ||
	    pc_list(spec, "containers", names, nnames, err, errlen) < 0 ||
	    pc_list(spec, "initContainers", names, nnames, err, errlen) < 0 ||
	    pc_list(spec, "ephemeralContainers", names, nnames, err,
	    errlen) < 0)
		return -1;
	return 0;
}
