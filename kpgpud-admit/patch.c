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
	struct buf		 ops;	/* the array so far, without "]" */
	struct buf		 claim;	/* the pod claim entry, as JSON */
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

/* Record that the patch grew past its cap. */
static void
seterr_cap(struct patch_ctx *c, size_t max_ops)
{
	if (c->err != NULL && c->errlen > 0)
		snprintf(c->err, c->errlen, "the JSON patch would be larger "
		    "than %zu bytes (--max-patch)", max_ops);
}

/*
 * Cut a UTF-8 sequence that a bounded printf split at the end of s, so the
 * text stays valid UTF-8 (the rest of s came from a validated review).
 */
static void
utf8_trim(char *s)
{
	size_t n = strlen(s), i = n, need;
	unsigned char lead;

	while (i > 0 && n - i < 4 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0 || (lead = (unsigned char)s[i - 1]) < 0xc0)
		return;
	need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
	if (n - (i - 1) < need)
		s[i - 1] = '\0';
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
	vsnprintf(c->out->warnings[c->out->nwarnings], PATCH_WARNING_MAX,
	    fmt, ap);
	va_end(ap);
	utf8_trim(c->out->warnings[c->out->nwarnings++]);
}

/* Whether a resource name is a device-plugin GPU (nvidia.com/gpu, ...). */
bool
patch_is_legacy_gpu(const char *resource)
{
	return strcmp(resource, "nvidia.com/gpu") == 0 ||
	    strncmp(resource, "nvidia.com/gpu.", 15) == 0 ||
	    strncmp(resource, "nvidia.com/mig-", 15) == 0;
}

/*
 * Append {"op": op, "path": path[, "value": value]}; value is JSON text
 * (NULL for "remove"). Written as jansson's compact dump would write it.
 */
static int
add_op(struct patch_ctx *c, const char *op, const char *path,
    const char *value)
{
	struct buf *b = &c->ops;
	int rv;

	/* -E2BIG (the patch cap) is told apart from -ENOMEM. */
	if ((rv = buf_puts(b, c->out->nops++ == 0 ? "[{\"op\":\"" :
	    ",{\"op\":\"")) < 0 || (rv = buf_puts(b, op)) < 0 ||
	    (rv = buf_puts(b, "\",\"path\":")) < 0 ||
	    (rv = buf_put_json(b, path, strlen(path))) < 0)
		return rv;
	if (value != NULL && ((rv = buf_puts(b, ",\"value\":")) < 0 ||
	    (rv = buf_puts(b, value)) < 0))
		return rv;
	return buf_putc(b, '}');
}

/* The pod-level claim entry this namespace's pods must carry, as JSON. */
static int
pod_claim(struct patch_ctx *c)
{
	const struct resolved *r = c->r;
	bool tmpl = r->claim_template[0] != '\0';
	const char *v = tmpl ? r->claim_template : r->claim;

	return buf_puts(&c->claim, "{\"name\":\"" RESOLVED_POD_CLAIM "\",")
	    | buf_puts(&c->claim, tmpl ? "\"resourceClaimTemplateName\":" :
	    "\"resourceClaimName\":") | buf_put_json(&c->claim, v, strlen(v))
	    | buf_putc(&c->claim, '}') ? -ENOMEM : 0;
}

/* Whether a list entry is exactly the claim entry of pod_claim(). */
static bool
is_pod_claim(const json_t *e, const struct resolved *r)
{
	bool tmpl = r->claim_template[0] != '\0';
	const char *want = tmpl ? r->claim_template : r->claim;
	const json_t *v = json_object_get(e, tmpl ?
	    "resourceClaimTemplateName" : "resourceClaimName");

	return json_object_size(e) == 2 && json_string_length(json_object_get(
	    e, "name")) == strlen(RESOLVED_POD_CLAIM) && json_is_string(v) &&
	    json_string_length(v) == strlen(want) &&
	    strcmp(json_string_value(v), want) == 0;
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
	struct buf list = BUF_INIT(0);
	json_t *e;
	char path[64];
	size_t i;
	int rv;

	if (rc == NULL || json_is_null(rc)) {
		rv = buf_putc(&list, '[') | buf_puts(&list, buf_str(&c->claim))
		    | buf_putc(&list, ']') ? -ENOMEM :
		    add_op(c, "add", "/spec/resourceClaims", buf_str(&list));
		buf_free(&list);
		return rv;
	}
	if (!json_is_array(rc))
		return bad_pod(c, "spec.resourceClaims is not a list");
	json_array_foreach(rc, i, e) {
		if (!named(e, RESOLVED_POD_CLAIM))
			continue;
		if (is_pod_claim(e, c->r))
			return 0;
		/* Same name, other source: the isolated claim must win. */
		warn(c, "pod claim \"%s\" replaced by the namespace's GPU claim",
		    RESOLVED_POD_CLAIM);
		snprintf(path, sizeof(path), "/spec/resourceClaims/%zu", i);
		return add_op(c, "replace", path, buf_str(&c->claim));
	}
	return add_op(c, "add", "/spec/resourceClaims/-", buf_str(&c->claim));
}

/*
 * Append s to the JSON Pointer in out (cap bytes, cut as snprintf would
 * cut it): the pointers of every container are built without a printf.
 */
static void
ptr_add(char *out, size_t cap, const char *s)
{
	size_t n = strlen(out);

	while (*s != '\0' && n + 1 < cap)
		out[n++] = *s++;
	out[n] = '\0';
}

/* out = a followed by b (cut to cap bytes). */
static void
ptr_set(char *out, size_t cap, const char *a, const char *b)
{
	out[0] = '\0';
	ptr_add(out, cap, a);
	ptr_add(out, cap, b);
}

/* Append the decimal index i. */
static void
ptr_add_index(char *out, size_t cap, size_t i)
{
	char d[24], *p = d + sizeof(d) - 1;

	*p = '\0';
	do
		*--p = (char)('0' + i % 10);
	while ((i /= 10) != 0);
	ptr_add(out, cap, p);
}

/* Append a map key as one JSON Pointer token (RFC 6901). */
static int
ptr_token(struct buf *b, const char *key)
{
	int bad = 0;

	for (; *key != '\0'; key++)
		bad |= *key == '~' ? buf_puts(b, "~0") : *key == '/' ?
		    buf_puts(b, "~1") : buf_putc(b, *key);
	return bad;
}

/* Drop the legacy GPU keys from resources.limits/requests of a container. */
static int
drop_legacy(struct patch_ctx *c, const char *base, const json_t *res)
{
	static const char *const maps[] = { "limits", "requests" };
	struct buf path = BUF_INIT(0);
	const char *key;
	json_t *v;
	int rv = 0;

	for (size_t m = 0; m < 2 && rv == 0; m++) {
		json_t *map = json_object_get(res, maps[m]);

		if (!json_is_object(map))
			continue;
		json_object_foreach(map, key, v) {
			if (!patch_is_legacy_gpu(key))
				continue;
			buf_reset(&path);
			if (buf_printf(&path, "%s/resources/%s/", base,
			    maps[m]) < 0 || ptr_token(&path, key) != 0) {
				rv = -ENOMEM;
				break;
			}
			if ((rv = add_op(c, "remove", buf_str(&path),
			    NULL)) < 0)
				break;
		}
	}
	buf_free(&path);
	return rv;
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
		ptr_set(path, sizeof(path), base, "/resources");
		return add_op(c, "add", path,
		    "{\"claims\":[{\"name\":\"" RESOLVED_POD_CLAIM "\"}]}");
	}
	if (!json_is_object(res))
		return bad_pod(c, "%s/resources is not an object", base);
	claims = json_object_get(res, "claims");
	if (claims == NULL || json_is_null(claims)) {
		ptr_set(path, sizeof(path), base, "/resources/claims");
		return add_op(c, "add", path,
		    "[{\"name\":\"" RESOLVED_POD_CLAIM "\"}]");
	}
	if (!json_is_array(claims))
		return bad_pod(c, "%s/resources/claims is not a list", base);
	json_array_foreach(claims, i, e)
		if (named(e, RESOLVED_POD_CLAIM))
			return 0;
	ptr_set(path, sizeof(path), base, "/resources/claims/-");
	return add_op(c, "add", path, "{\"name\":\"" RESOLVED_POD_CLAIM "\"}");
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
	switch (c->r->pol.legacy) {
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
		utf8_trim(c->out->message);
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
		grab = (!init || resolved_init_selected(c->r, name)) &&
		    !resolved_sidecar(c->r, name);
		ptr_set(base, sizeof(base), "/spec/", field);
		ptr_add(base, sizeof(base), "/");
		ptr_add_index(base, sizeof(base), i);
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
	return patch_build_max(pod, r, PATCH_OPS_MAX, ret, err, errlen);
}

/* The same with the patch text capped at max_ops bytes; see patch.h. */
int
patch_build_max(const json_t *pod, const struct resolved *r, size_t max_ops,
    struct patch_out **ret, char *err, size_t errlen)
{
	struct patch_ctx c = { .r = r, .err = err, .errlen = errlen,
	    .ops = BUF_INIT(max_ops), .claim = BUF_INIT(0) };
	const json_t *spec = json_object_get(pod, "spec");
	int rv = -ENOMEM;

	if ((c.out = calloc(1, sizeof(*c.out))) == NULL)
		return -ENOMEM;
	if (pod_claim(&c) < 0)
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
	if (c.out->deny) {
		buf_reset(&c.ops);
		c.out->nops = 0;
	}
	if ((rv = buf_puts(&c.ops, c.out->nops == 0 ? "[]" : "]")) < 0)
		goto fail;
	c.out->ops = buf_steal(&c.ops, &c.out->ops_len);
	buf_free(&c.claim);
	*ret = c.out;
	return 0;
fail:
	if (rv == -E2BIG)
		seterr_cap(&c, max_ops);
	buf_free(&c.ops);
	buf_free(&c.claim);
	patch_out_free(c.out);
	return rv;
}

/* Free a patch result; NULL is fine. */
void
patch_out_free(struct patch_out *p)
{
	if (p == NULL)
		return;
	free(p->ops);
	free(p);
}
