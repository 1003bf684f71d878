/*
 * The Pod patch: see patch.h. Every operation is an "add", "replace" or
 * "remove" whose target is known to exist (or whose parent is known to
 * exist, for "add"), so the apiserver can always apply it; the result keeps
 * every claim and reference the chart declared.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kpgpud-admit/patch.h"

struct patch_ctx {
	const struct resolved	*r;
	struct patch_out	*out;
	char			*err;
	size_t			 errlen;
};

/* Record why the pod does not look like a Pod. */
__attribute__((format(printf, 2, 3)))
static int
bad_pod(struct patch_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->err != NULL && c->errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Add one warning for the AdmissionReview response; extra ones are dropped. */
__attribute__((format(printf, 2, 3)))
static void
warn(struct patch_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->out->nwarnings >= PATCH_MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	vsnprintf(c->out->warnings[c->out->nwarnings++], PATCH_WARNING_MAX,
	    fmt, ap);
	va_end(ap);
}

/* Whether a resource name is a device-plugin GPU (nvidia.com/gpu, ...). */
bool
patch_is_legacy_gpu(const char *resource)
{
	return strcmp(resource, "nvidia.com/gpu") == 0 ||
	    strncmp(resource, "nvidia.com/gpu.", 15) == 0 ||
	    strncmp(resource, "nvidia.com/mig-", 15) == 0;
}

/* Append {"op": op, "path": path[, "value": value]} (value is stolen). */
static int
add_op(struct patch_ctx *c, const char *op, const char *path, json_t *value)
{
	json_t *o = json_object();
	int bad = o == NULL || (value == NULL && strcmp(op, "remove") != 0);

	if (o != NULL) {
		bad |= json_object_set_new(o, "op", json_string(op));
		bad |= json_object_set_new(o, "path", json_string(path));
		if (value != NULL) {
			bad |= json_object_set_new(o, "value", value);
			value = NULL;
		}
		if (!bad)
			bad = json_array_append(c->out->ops, o);
	}
	json_decref(value);
	json_decref(o);
	return bad ? -ENOMEM : 0;
}

/* The pod-level claim this namespace's pods must carry. */
static json_t *
pod_claim(const struct resolved *r)
{
	if (r->claim_template[0] != '\0')
		return json_pack("{s:s, s:s}", "name", RESOLVED_POD_CLAIM,
		    "resourceClaimTemplateName", r->claim_template);
	return json_pack("{s:s, s:s}", "name", RESOLVED_POD_CLAIM,
	    "resourceClaimName", r->claim);
}

/* Whether a list entry is an object whose "name" is name. */
static bool
named(const json_t *e, const char *name)
{
	const char *n = json_string_value(json_object_get(e, "name"));

	return n != NULL && strcmp(n, name) == 0;
}

/* Make spec.resourceClaims carry our claim, creating or appending. */
static int
pod_claims(struct patch_ctx *c, const json_t *spec)
{
	json_t *rc = json_object_get(spec, "resourceClaims");
	json_t *want, *e;
	char path[64];
	size_t i;

	if ((want = pod_claim(c->r)) == NULL)
		return -ENOMEM;
	if (rc == NULL || json_is_null(rc))
		return add_op(c, "add", "/spec/resourceClaims",
		    json_pack("[o]", want));
	if (!json_is_array(rc)) {
		json_decref(want);
		return bad_pod(c, "spec.resourceClaims is not a list");
	}
	json_array_foreach(rc, i, e) {
		if (!named(e, RESOLVED_POD_CLAIM))
			continue;
		if (json_equal(e, want)) {
			json_decref(want);
			return 0;
		}
		/* Same name, other source: the isolated claim must win. */
		warn(c, "pod claim \"%s\" replaced by the namespace's GPU claim",
		    RESOLVED_POD_CLAIM);
		snprintf(path, sizeof(path), "/spec/resourceClaims/%zu", i);
		return add_op(c, "replace", path, want);
	}
	return add_op(c, "add", "/spec/resourceClaims/-", want);
}

/* Escape a map key as one JSON Pointer token (RFC 6901). */
static void
ptr_token(char *dst, size_t cap, const char *key)
{
	size_t n = 0;

	for (; *key != '\0' && n + 3 < cap; key++) {
		if (*key == '~' || *key == '/') {
			dst[n++] = '~';
			dst[n++] = *key == '~' ? '0' : '1';
		} else
			dst[n++] = *key;
	}
	dst[n] = '\0';
}

/* Drop the legacy GPU keys from resources.limits/requests of a container. */
static int
drop_legacy(struct patch_ctx *c, const char *base, const json_t *res)
{
	static const char *const maps[] = { "limits", "requests" };
	char path[512], tok[300];
	const char *key;
	json_t *v;

	for (size_t m = 0; m < 2; m++) {
		json_t *map = json_object_get(res, maps[m]);

		if (!json_is_object(map))
			continue;
		json_object_foreach(map, key, v) {
			if (!patch_is_legacy_gpu(key))
				continue;
			ptr_token(tok, sizeof(tok), key);
			snprintf(path, sizeof(path), "%s/resources/%s/%s",
			    base, maps[m], tok);
			if (add_op(c, "remove", path, NULL) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

/* The first legacy GPU resource a container asks for, or NULL. */
static const char *
legacy_request(const json_t *res)
{
	static const char *const maps[] = { "limits", "requests" };
	const char *key;
	json_t *v;

	for (size_t m = 0; m < 2; m++) {
		json_t *map = json_object_get(res, maps[m]);

		if (!json_is_object(map))
			continue;
		json_object_foreach(map, key, v)
			if (patch_is_legacy_gpu(key))
				return key;
	}
	return NULL;
}

/* Make one container reference our claim, creating what is missing. */
static int
container_ref(struct patch_ctx *c, const char *base, const json_t *ctr)
{
	json_t *res = json_object_get(ctr, "resources");
	json_t *claims, *e;
	char path[128];
	size_t i;

	if (res == NULL || json_is_null(res)) {
		snprintf(path, sizeof(path), "%s/resources", base);
		return add_op(c, "add", path, json_pack("{s:[{s:s}]}",
		    "claims", "name", RESOLVED_POD_CLAIM));
	}
	if (!json_is_object(res))
		return bad_pod(c, "%s/resources is not an object", base);
	claims = json_object_get(res, "claims");
	if (claims == NULL || json_is_null(claims)) {
		snprintf(path, sizeof(path), "%s/resources/claims", base);
		return add_op(c, "add", path, json_pack("[{s:s}]",
		    "name", RESOLVED_POD_CLAIM));
	}
	if (!json_is_array(claims))
		return bad_pod(c, "%s/resources/claims is not a list", base);
	json_array_foreach(claims, i, e)
		if (named(e, RESOLVED_POD_CLAIM))
			return 0;
	snprintf(path, sizeof(path), "%s/resources/claims/-", base);
	return add_op(c, "add", path, json_pack("{s:s}", "name",
	    RESOLVED_POD_CLAIM));
}

/* Apply the legacy-GPU policy to one container; *grab: give it the claim. */
static int
container_legacy(struct patch_ctx *c, const char *base, const json_t *ctr,
    bool *grab)
{
	const json_t *res = json_object_get(ctr, "resources");
	const char *name = json_string_value(json_object_get(ctr, "name"));
	const char *legacy = json_is_object(res) ? legacy_request(res) : NULL;

	if (legacy == NULL)
		return 0;
	if (name == NULL)
		name = "";
	switch (c->r->legacy) {
	case RESOLVED_LEGACY_ALLOW:
		warn(c, "container \"%.63s\" uses %.40s besides the DRA claim",
		    name, legacy);
		return 0;
	case RESOLVED_LEGACY_TRANSLATE:
		warn(c, "container \"%.63s\": %.40s dropped; GPU comes from "
		    "claim \"%s\"", name, legacy, RESOLVED_POD_CLAIM);
		*grab = true;
		return drop_legacy(c, base, res);
	case RESOLVED_LEGACY_REJECT:
	default:
		c->out->deny = true;
		snprintf(c->out->message, sizeof(c->out->message),
		    "container \"%.63s\" requests %.40s, which this "
		    "GPU-isolated namespace does not allow: GPUs come from the "
		    "DRA resource claim \"%s\" (%s \"%s\") that kpgpud adds to "
		    "every pod; remove the %.40s request", name, legacy,
		    RESOLVED_POD_CLAIM, c->r->claim_template[0] != '\0' ?
		    "ResourceClaimTemplate" : "ResourceClaim",
		    c->r->claim_template[0] != '\0' ? c->r->claim_template :
		    c->r->claim, legacy);
		return 0;
	}
}

/* Patch one list of containers; init selects by the init-container policy. */
static int
container_list(struct patch_ctx *c, const json_t *spec, const char *field,
    bool init)
{
	json_t *list = json_object_get(spec, field), *ctr;
	char base[64];
	size_t i;
	int rv;

	if (list == NULL || json_is_null(list))
		return init ? 0 : bad_pod(c, "spec.%s is missing", field);
	if (!json_is_array(list))
		return bad_pod(c, "spec.%s is not a list", field);
	if (json_array_size(list) > PATCH_MAX_CONTAINERS)
		return bad_pod(c, "spec.%s has more than %d entries", field,
		    PATCH_MAX_CONTAINERS);
	json_array_foreach(list, i, ctr) {
		const char *name;
		bool grab;

		if (!json_is_object(ctr))
			return bad_pod(c, "spec.%s[%zu] is not an object",
			    field, i);
		name = json_string_value(json_object_get(ctr, "name"));
		grab = !init || resolved_init_selected(c->r, name);
		snprintf(base, sizeof(base), "/spec/%s/%zu", field, i);
		if ((rv = container_legacy(c, base, ctr, &grab)) < 0)
			return rv;
		if (c->out->deny)
			return 0;
		if (grab && (rv = container_ref(c, base, ctr)) < 0)
			return rv;
	}
	return 0;
}

/* Compute the patch for pod under r; see patch.h. */
int
patch_build(const json_t *pod, const struct resolved *r,
    struct patch_out **ret, char *err, size_t errlen)
{
	struct patch_ctx c = { .r = r, .err = err, .errlen = errlen };
	const json_t *spec = json_object_get(pod, "spec");
	int rv = -ENOMEM;

	if ((c.out = calloc(1, sizeof(*c.out))) == NULL)
		return -ENOMEM;
	if ((c.out->ops = json_array()) == NULL)
		goto fail;
	if (!json_is_object(pod) || !json_is_object(spec)) {
		rv = bad_pod(&c, "object has no spec");
		goto fail;
	}
	if ((rv = pod_claims(&c, spec)) < 0)
		goto fail;
	if ((rv = container_list(&c, spec, "containers", false)) < 0)
		goto fail;
	if (!c.out->deny &&
	    (rv = container_list(&c, spec, "initContainers", true)) < 0)
		goto fail;
	if (c.out->deny)
		json_array_clear(c.out->ops);
	*ret = c.out;
	return 0;
fail:
	patch_out_free(c.out);
	return rv;
}

/* Free a patch result; NULL is fine. */
void
patch_out_free(struct patch_out *p)
{
	if (p == NULL)
		return;
	json_decref(p->ops);
	free(p);
}
