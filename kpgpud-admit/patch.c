/* SPDX-License-Identifier: Apache-2.0 */
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

#include "common/jsonw.h"
#include "kpgpud-admit/patch.h"

#define PATCH_OPS_RESERVE	1024	/* an agent pod's patch: 5 operations */

struct patch_ctx {
	const struct resolved_pack	*r;
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

/* Whether the n bytes at resource name a device-plugin GPU. */
bool
patch_is_legacy_gpu_n(const char *resource, size_t n)
{
	return (n == 14 && memcmp(resource, "nvidia.com/gpu", 14) == 0) ||
	    (n >= 15 && (memcmp(resource, "nvidia.com/gpu.", 15) == 0 ||
	    memcmp(resource, "nvidia.com/mig-", 15) == 0));
}

/* Whether a resource name is a device-plugin GPU (nvidia.com/gpu, ...). */
bool
patch_is_legacy_gpu(const char *resource)
{
	return patch_is_legacy_gpu_n(resource, strlen(resource));
}

/* Copy the n bytes at s to p; the byte after them. */
static char *
put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

/*
 * Append {"op": op, "path": path[, "value": value]}; value is JSON text
 * (NULL for "remove"). Written as jansson's compact dump would write it:
 * with one exact reservation and copies when the path needs no escape
 * (the cap is then reached exactly when appending piece by piece would
 * reach it), else piece by piece.
 */
static int
add_op(struct patch_ctx *c, const char *op, const char *path,
    const char *value)
{
	static const char first[] = "[{\"op\":\"", next[] = ",{\"op\":\"";
	static const char mid[] = "\",\"path\":", val[] = ",\"value\":";
	struct buf *b = &c->ops;
	size_t ol = strlen(op), pl = strlen(path);
	size_t vl = value != NULL ? strlen(value) : 0;
	const char *head = c->out->nops++ == 0 ? first : next;
	char *p;
	int rv;

	if (jsonw_plain(path, pl)) {
		/* -E2BIG (the patch cap) is told apart from -ENOMEM. */
		if ((rv = buf_reserve(b, sizeof(first) - 1 + ol +
		    sizeof(mid) - 1 + pl + 2 + (value != NULL ?
		    sizeof(val) - 1 + vl : 0) + 1)) < 0)
			return rv;
		p = put(b->data + b->len, head, sizeof(first) - 1);
		p = put(p, op, ol);
		p = put(p, mid, sizeof(mid) - 1);
		*p++ = '"';
		p = put(p, path, pl);
		*p++ = '"';
		if (value != NULL) {
			p = put(p, val, sizeof(val) - 1);
			p = put(p, value, vl);
		}
		*p++ = '}';
		*p = '\0';
		b->len = (size_t)(p - b->data);
		return 0;
	}
	if ((rv = buf_puts(b, head)) < 0 || (rv = buf_puts(b, op)) < 0 ||
	    (rv = buf_puts(b, mid)) < 0 ||
	    (rv = jsonw_put_str(b, path, pl)) < 0)
		return rv;
	if (value != NULL && ((rv = buf_puts(b, val)) < 0 ||
	    (rv = buf_puts(b, value)) < 0))
		return rv;
	return buf_putc(b, '}');
}

/* The pod-level claim entry this namespace's pods must carry, as JSON. */
static int
pod_claim(struct patch_ctx *c)
{
	const struct resolved_pack *r = c->r;
	bool tmpl = r->claim_template[0] != '\0';
	const char *v = tmpl ? r->claim_template : r->claim;

	return buf_reserve(&c->claim, 64 + strlen(v)) |
	    buf_puts(&c->claim, "{\"name\":\"" RESOLVED_POD_CLAIM "\",")
	    | buf_puts(&c->claim, tmpl ? "\"resourceClaimTemplateName\":" :
	    "\"resourceClaimName\":") | jsonw_put_str(&c->claim, v, strlen(v))
	    | buf_putc(&c->claim, '}') ? -ENOMEM : 0;
}

/* Whether the pod's entry named RESOLVED_POD_CLAIM is exactly pod_claim(). */
static bool
is_pod_claim(const struct patch_pod *pod, const struct resolved_pack *r)
{
	bool tmpl = r->claim_template[0] != '\0';
	const char *want = tmpl ? r->claim_template : r->claim;
	const char *v = tmpl ? pod->claim_tmpl : pod->claim_name;

	return pod->claim_members == 2 && v != NULL && strcmp(v, want) == 0;
}

/* Make spec.resourceClaims carry our claim, creating or appending. */
static int
pod_claims(struct patch_ctx *c, const struct patch_pod *pod)
{
	struct buf list = BUF_INIT(0);
	char path[64];
	int rv;

	if (pod->claims == PATCH_ABSENT) {
		rv = buf_putc(&list, '[') | buf_puts(&list, buf_str(&c->claim))
		    | buf_putc(&list, ']') ? -ENOMEM :
		    add_op(c, "add", "/spec/resourceClaims", buf_str(&list));
		buf_free(&list);
		return rv;
	}
	if (pod->claims == PATCH_WRONG)
		return bad_pod(c, "spec.resourceClaims is not a list");
	if (pod->claim_at < 0)
		return add_op(c, "add", "/spec/resourceClaims/-",
		    buf_str(&c->claim));
	if (is_pod_claim(pod, c->r))
		return 0;
	/* Same name, other source: the isolated claim must win. */
	warn(c, "pod claim \"%s\" replaced by the namespace's GPU claim",
	    RESOLVED_POD_CLAIM);
	snprintf(path, sizeof(path), "/spec/resourceClaims/%ld",
	    pod->claim_at);
	return add_op(c, "replace", path, buf_str(&c->claim));
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
drop_legacy(struct patch_ctx *c, const char *base, const struct patch_ctr *ctr)
{
	static const char *const maps[] = { "limits", "requests" };
	struct buf path = BUF_INIT(0);
	const char *const *key = ctr->legacy;
	int rv = 0;

	for (size_t m = 0; m < 2 && rv == 0; m++)
		for (size_t k = 0; k < ctr->nlegacy[m]; k++, key++) {
			buf_reset(&path);
			if (buf_printf(&path, "%s/resources/%s/", base,
			    maps[m]) < 0 || ptr_token(&path, *key) != 0) {
				rv = -ENOMEM;
				break;
			}
			if ((rv = add_op(c, "remove", buf_str(&path),
			    NULL)) < 0)
				break;
		}
	buf_free(&path);
	return rv;
}

/* Make one container reference our claim, creating what is missing. */
static int
container_ref(struct patch_ctx *c, const char *base,
    const struct patch_ctr *ctr)
{
	char path[128];

	if (ctr->resources == PATCH_ABSENT) {
		ptr_set(path, sizeof(path), base, "/resources");
		return add_op(c, "add", path,
		    "{\"claims\":[{\"name\":\"" RESOLVED_POD_CLAIM "\"}]}");
	}
	if (ctr->resources == PATCH_WRONG)
		return bad_pod(c, "%s/resources is not an object", base);
	if (ctr->claims == PATCH_ABSENT) {
		ptr_set(path, sizeof(path), base, "/resources/claims");
		return add_op(c, "add", path,
		    "[{\"name\":\"" RESOLVED_POD_CLAIM "\"}]");
	}
	if (ctr->claims == PATCH_WRONG)
		return bad_pod(c, "%s/resources/claims is not a list", base);
	if (ctr->has_ref)
		return 0;
	ptr_set(path, sizeof(path), base, "/resources/claims/-");
	return add_op(c, "add", path, "{\"name\":\"" RESOLVED_POD_CLAIM "\"}");
}

/* Apply the legacy-GPU policy to one container; *grab: give it the claim. */
static int
container_legacy(struct patch_ctx *c, const char *base,
    const struct patch_ctr *ctr, bool *grab)
{
	const char *name = ctr->name != NULL ? ctr->name : "";
	const char *legacy;

	if (ctr->resources != PATCH_PRESENT ||
	    ctr->nlegacy[0] + ctr->nlegacy[1] == 0)
		return 0;
	legacy = ctr->legacy[0];
	switch (c->r->pol.legacy) {
	case RESOLVED_LEGACY_ALLOW:
		warn(c, "container \"%.63s\" uses %.40s besides the DRA claim",
		    name, legacy);
		return 0;
	case RESOLVED_LEGACY_TRANSLATE:
		warn(c, "container \"%.63s\": %.40s dropped; GPU comes from "
		    "claim \"%s\"", name, legacy, RESOLVED_POD_CLAIM);
		*grab = true;
		return drop_legacy(c, base, ctr);
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
container_list(struct patch_ctx *c, const struct patch_list *list,
    const char *field, bool init)
{
	char base[64];
	int rv;

	if (list->shape == PATCH_ABSENT)
		return init ? 0 : bad_pod(c, "spec.%s is missing", field);
	if (list->shape == PATCH_WRONG)
		return bad_pod(c, "spec.%s is not a list", field);
	if (list->n > PATCH_MAX_CONTAINERS || list->ctrs == NULL)
		return bad_pod(c, "spec.%s has more than %d entries", field,
		    PATCH_MAX_CONTAINERS);
	for (size_t i = 0; i < list->n; i++) {
		const struct patch_ctr *ctr = &list->ctrs[i];
		bool grab;

		if (!ctr->object)
			return bad_pod(c, "spec.%s[%zu] is not an object",
			    field, i);
		grab = (!init || resolved_init_selected(c->r, ctr->name)) &&
		    !resolved_sidecar(c->r, ctr->name);
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

/* The shape of v where a list (list) or an object is expected. */
static enum patch_shape
shape_of(const json_t *v, bool list)
{
	if (v == NULL || json_is_null(v))
		return PATCH_ABSENT;
	return (list ? json_is_array(v) : json_is_object(v)) ? PATCH_PRESENT :
	    PATCH_WRONG;
}

/* Whether a list entry is an object whose "name" is name. */
static bool
named(const json_t *e, const char *name)
{
	const char *n = json_string_value(json_object_get(e, "name"));

	return n != NULL && strcmp(n, name) == 0;
}

/* The legacy GPU keys of limits and requests of res, into ctr. */
static int
legacy_from_json(const json_t *res, struct region *rg, struct patch_ctr *ctr)
{
	static const char *const maps[] = { "limits", "requests" };
	const char **keys;
	const char *key;
	json_t *v;
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++) {
		keys = pass == 0 ? NULL : region_alloc(rg, n * sizeof(*keys));
		if (pass == 1 && keys == NULL)
			return -ENOMEM;
		n = 0;
		for (size_t m = 0; m < 2; m++) {
			json_t *map = json_object_get(res, maps[m]);

			ctr->nlegacy[m] = 0;
			if (!json_is_object(map))
				continue;
			json_object_foreach(map, key, v)
				if (patch_is_legacy_gpu(key)) {
					if (keys != NULL)
						keys[n] = key;
					n++;
					ctr->nlegacy[m]++;
				}
		}
		ctr->legacy = keys;
		if (n == 0)
			return 0;
	}
	return 0;
}

/* The facts of one container list entry. */
static int
ctr_from_json(const json_t *e, struct region *rg, struct patch_ctr *ctr)
{
	const json_t *res = json_object_get(e, "resources"), *claims, *x;
	size_t i;

	memset(ctr, 0, sizeof(*ctr));
	if (!(ctr->object = json_is_object(e)))
		return 0;
	ctr->name = json_string_value(json_object_get(e, "name"));
	if ((ctr->resources = shape_of(res, false)) != PATCH_PRESENT)
		return 0;
	claims = json_object_get(res, "claims");
	if ((ctr->claims = shape_of(claims, true)) == PATCH_PRESENT)
		json_array_foreach(claims, i, x)
			if (named(x, RESOLVED_POD_CLAIM)) {
				ctr->has_ref = true;
				break;
			}
	return legacy_from_json(res, rg, ctr);
}

/* Read the facts of a Pod from a jansson tree; see patch.h. */
int
patch_pod_from_json(const json_t *pod, struct region *rg,
    struct patch_pod *ret)
{
	static const char *const fields[2] = { "containers", "initContainers" };
	const json_t *spec = json_object_get(pod, "spec"), *rc, *e;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	ret->claim_at = -1;
	if (!json_is_object(pod) || !json_is_object(spec))
		return 0;
	ret->spec = true;
	rc = json_object_get(spec, "resourceClaims");
	if ((ret->claims = shape_of(rc, true)) == PATCH_PRESENT)
		json_array_foreach(rc, i, e)
			if (named(e, RESOLVED_POD_CLAIM)) {
				ret->claim_at = (long)i;
				ret->claim_members = json_object_size(e);
				ret->claim_tmpl = json_string_value(
				    json_object_get(e,
				    "resourceClaimTemplateName"));
				ret->claim_name = json_string_value(
				    json_object_get(e, "resourceClaimName"));
				break;
			}
	for (size_t l = 0; l < 2; l++) {
		struct patch_list *list = &ret->lists[l];
		const json_t *a = json_object_get(spec, fields[l]);
		struct patch_ctr *ctrs;

		if ((list->shape = shape_of(a, true)) != PATCH_PRESENT)
			continue;
		list->n = json_array_size(a);
		if (list->n > PATCH_MAX_CONTAINERS)
			continue;
		if ((ctrs = region_alloc(rg, list->n * sizeof(*ctrs) + 1)) ==
		    NULL)
			return -ENOMEM;
		json_array_foreach(a, i, e)
			if (ctr_from_json(e, rg, &ctrs[i]) < 0)
				return -ENOMEM;
		list->ctrs = ctrs;
	}
	return 0;
}

/* Compute the patch for pod under r; see patch.h. */
int
patch_build(const json_t *pod, const struct resolved_pack *r,
    struct patch_out **ret, char *err, size_t errlen)
{
	return patch_build_max(pod, r, PATCH_OPS_MAX, ret, err, errlen);
}

/* The same with the patch text capped at max_ops bytes; see patch.h. */
int
patch_build_max(const json_t *pod, const struct resolved_pack *r,
    size_t max_ops, struct patch_out **ret, char *err, size_t errlen)
{
	struct region rg = { NULL };
	struct patch_pod facts;
	int rv;

	if ((rv = patch_pod_from_json(pod, &rg, &facts)) == 0)
		rv = patch_build_pod(&facts, r, max_ops, ret, err, errlen);
	region_drop(&rg);
	return rv;
}

/* Compute the patch from a Pod's facts; see patch.h. */
int
patch_build_pod(const struct patch_pod *pod, const struct resolved_pack *r,
    size_t max_ops, struct patch_out **ret, char *err, size_t errlen)
{
	struct patch_ctx c = { .r = r, .err = err, .errlen = errlen,
	    .ops = BUF_INIT(max_ops), .claim = BUF_INIT(0) };
	int rv = -ENOMEM;

	if ((c.out = calloc(1, sizeof(*c.out))) == NULL)
		return -ENOMEM;
	/* Room for a usual patch at once: no realloc per operation. */
	if (buf_reserve(&c.ops, max_ops < PATCH_OPS_RESERVE ? max_ops :
	    PATCH_OPS_RESERVE) < 0 || pod_claim(&c) < 0)
		goto fail;
	if (!pod->spec) {
		rv = bad_pod(&c, "object has no spec");
		goto fail;
	}
	if ((rv = pod_claims(&c, pod)) < 0)
		goto fail;
	if ((rv = container_list(&c, &pod->lists[0], "containers", false)) < 0)
		goto fail;
	if (!c.out->deny && (rv = container_list(&c, &pod->lists[1],
	    "initContainers", true)) < 0)
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
