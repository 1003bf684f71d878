/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Pod's facts from a scanned body: see podscan.h. Each reader below
 * answers what its jansson counterpart in patch.c answers for the same
 * text: the last of duplicate members wins, an object's keys are distinct
 * in the order they first appear, strings are compared unescaped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/resolved.h"
#include "kpgpud-admit/podscan.h"

const struct jscan_node podscan_ctr_nodes[PODSCAN_C_COUNT] = {
	[PODSCAN_C_ROOT] = { -1, NULL },
	[PODSCAN_C_NAME] = { PODSCAN_C_ROOT, "name" },
	[PODSCAN_C_RES] = { PODSCAN_C_ROOT, "resources" },
	[PODSCAN_C_LIMITS] = { PODSCAN_C_RES, "limits" },
	[PODSCAN_C_REQUESTS] = { PODSCAN_C_RES, "requests" },
	[PODSCAN_C_CLAIMS] = { PODSCAN_C_RES, "claims" },
};

/* The shape of the value at sp where a list (list) or an object is due. */
static enum patch_shape
shape_at(const char *body, struct jscan_span sp, bool list)
{
	if (sp.len == 0 || body[sp.off] == 'n')
		return PATCH_ABSENT;
	return body[sp.off] == (list ? '[' : '{') ? PATCH_PRESENT :
	    PATCH_WRONG;
}

/*
 * The string between the quotes of the n raw bytes at raw, unescaped and
 * NUL-terminated in rg, or NULL (ENOMEM).
 */
static char *
copy_raw(const char *raw, size_t n, struct region *rg)
{
	char *s = region_alloc(rg, n + 1);

	if (s == NULL)
		return NULL;
	if (memchr(raw, '\\', n) == NULL)
		memcpy(s, raw, n);
	else
		n = jscan_unescape(raw, n, s);
	s[n] = '\0';
	return s;
}

/*
 * The string value at sp copied into rg in *ret (NULL when it is not a
 * string). 0 or -ENOMEM.
 */
static int
copy_str(const char *body, struct jscan_span sp, struct region *rg,
    const char **ret)
{
	*ret = NULL;
	if (sp.len < 2 || body[sp.off] != '"')
		return 0;
	*ret = copy_raw(body + sp.off + 1, sp.len - 2, rg);
	return *ret != NULL ? 0 : -ENOMEM;
}

/* The value of the last member named key of the object at o (len 0: none). */
static struct jscan_span
member(const char *body, struct jscan_span o, const char *key)
{
	struct jscan_span k, v, found = { 0, 0 };
	size_t pos = o.off;

	while (jscan_next_member(body, o.off + o.len, &pos, &k, &v) == 1)
		if (jscan_str_is(body, k, key))
			found = v;
	return found;
}

/* Whether the value at e is an object whose "name" is name. */
static bool
named(const char *body, struct jscan_span e, const char *name)
{
	return body[e.off] == '{' && jscan_str_is(body, member(body, e, "name"),
	    name);
}

/* Whether any entry of the list at a is an object named name. */
static bool
list_names(const char *body, struct jscan_span a, const char *name)
{
	struct jscan_span e;
	size_t pos = a.off;

	while (jscan_next_elem(body, a.off + a.len, &pos, &e) == 1)
		if (named(body, e, name))
			return true;
	return false;
}

/* Order keys by text, then by position (pointers into one array). */
static int
key_cmp(const void *a, const void *b)
{
	const char *const *x = *(const char *const *const *)a;
	const char *const *y = *(const char *const *const *)b;
	int c = strcmp(*x, *y);

	return c != 0 ? c : x < y ? -1 : x > y;
}

/*
 * Keep the first of equal keys among the n at keys, in order; the number
 * kept. Sorted by a copy of pointers, so many keys cost n log n.
 */
static size_t
distinct(const char **keys, size_t n, struct region *rg)
{
	const char ***by;
	size_t k = 0;

	if (n < 2)
		return n;
	if ((by = region_alloc(rg, n * sizeof(*by))) == NULL)
		return 0;
	for (size_t i = 0; i < n; i++)
		by[i] = &keys[i];
	qsort(by, n, sizeof(*by), key_cmp);
	/* The first of a run of equal keys came first in the map. */
	for (size_t i = 1, first = 0; i < n; i++)
		if (strcmp(*by[i], *by[first]) == 0)
			*by[i] = NULL;
		else
			first = i;
	for (size_t i = 0; i < n; i++)
		if (keys[i] != NULL)
			keys[k++] = keys[i];
	return k;
}

/*
 * Whether the n raw bytes at raw (a member name, or a whole map) may hold
 * a legacy GPU key: every one starts "nvidia.com/", unless written with an
 * escape.
 */
static bool
maybe_legacy(const char *raw, size_t n)
{
	const char *end = raw + n, *p = raw;

	if (memchr(raw, '\\', n) != NULL)
		return true;
	while ((p = memchr(p, 'n', (size_t)(end - p))) != NULL) {
		if (end - p >= 11 && memcmp(p, "nvidia.com/", 11) == 0)
			return true;
		p++;
	}
	return false;
}

/*
 * The legacy GPU keys of the map at m (an object, else none): with keys,
 * copied there (room for as many as counting found) and made distinct;
 * without, only counted (an upper bound). The number in *ret_n.
 */
static int
legacy_keys(const char *body, struct jscan_span m, const char **keys,
    size_t *ret_n, struct region *rg)
{
	struct jscan_span k, v;
	size_t pos = m.off, n = 0;

	*ret_n = 0;
	if (m.len == 0 || body[m.off] != '{' || !maybe_legacy(body + m.off,
	    m.len))
		return 0;	/* no key there can be one */
	while (jscan_next_member(body, m.off + m.len, &pos, &k, &v) == 1) {
		const char *raw = body + k.off + 1;
		char *key;

		if (memchr(raw, '\\', k.len - 2) == NULL &&
		    !patch_is_legacy_gpu_n(raw, k.len - 2))
			continue;
		if (keys == NULL) {
			n++;
			continue;
		}
		if ((key = copy_raw(raw, k.len - 2, rg)) == NULL)
			return -ENOMEM;
		if (patch_is_legacy_gpu(key))
			keys[n++] = key;
	}
	/* Several: jansson keeps one of equal keys, where it came first. */
	if (keys != NULL && n > 1 && (n = distinct(keys, n, rg)) == 0)
		return -ENOMEM;
	*ret_n = n;
	return 0;
}

/* The legacy GPU keys of resources (rec: a container's spans) into ctr. */
static int
ctr_legacy(const char *body, const struct jscan_span *rec,
    struct region *rg, struct patch_ctr *ctr)
{
	struct jscan_span lim = rec[PODSCAN_C_LIMITS];
	struct jscan_span req = rec[PODSCAN_C_REQUESTS];
	size_t nlim, nreq;
	const char **keys;

	ctr->legacy = NULL;
	legacy_keys(body, lim, NULL, &nlim, rg);
	legacy_keys(body, req, NULL, &nreq, rg);
	if (nlim + nreq == 0)
		return 0;
	if ((keys = region_alloc(rg, (nlim + nreq) * sizeof(*keys))) ==
	    NULL || legacy_keys(body, lim, keys, &ctr->nlegacy[0], rg) < 0 ||
	    legacy_keys(body, req, keys + ctr->nlegacy[0], &ctr->nlegacy[1],
	    rg) < 0)
		return -ENOMEM;
	ctr->legacy = keys;
	return 0;
}

/* The facts of one container from the spans the scan recorded. */
static int
ctr_read(const char *body, const struct jscan_span *rec, struct region *rg,
    struct patch_ctr *ctr)
{
	memset(ctr, 0, sizeof(*ctr));
	if (!(ctr->object = body[rec[PODSCAN_C_ROOT].off] == '{'))
		return 0;
	if (copy_str(body, rec[PODSCAN_C_NAME], rg, &ctr->name) < 0)
		return -ENOMEM;
	ctr->resources = shape_at(body, rec[PODSCAN_C_RES], false);
	if (ctr->resources != PATCH_PRESENT)
		return 0;
	ctr->claims = shape_at(body, rec[PODSCAN_C_CLAIMS], true);
	ctr->has_ref = ctr->claims == PATCH_PRESENT &&
	    list_names(body, rec[PODSCAN_C_CLAIMS], RESOLVED_POD_CLAIM);
	return ctr_legacy(body, rec, rg, ctr);
}

/* One entry of a list longer than the scan recorded: scan it again. */
static int
ctr_rescan(const char *body, struct jscan_span el, struct region *rg,
    struct patch_ctr *ctr)
{
	struct jscan_span rec[PODSCAN_C_COUNT];

	if (body[el.off] != '{') {
		memset(ctr, 0, sizeof(*ctr));
		return 0;
	}
	if (jscan_run(body + el.off, el.len, podscan_ctr_nodes,
	    PODSCAN_C_COUNT, rec, NULL) < 0)
		return -ENOMEM;	/* cannot be: the body was accepted */
	return ctr_read(body + el.off, rec, rg, ctr);
}

/* A container list at sp, l what the scan recorded of it. */
static int
list_read(const char *body, struct jscan_span sp, const struct jscan_list *l,
    struct region *rg, struct patch_list *ret)
{
	struct patch_ctr *ctrs;
	struct jscan_span el;
	size_t pos = sp.off, k = 0;

	if ((ret->shape = shape_at(body, sp, true)) != PATCH_PRESENT)
		return 0;
	if ((ret->n = l->n) > PATCH_MAX_CONTAINERS)
		return 0;
	if ((ctrs = region_alloc(rg, ret->n * sizeof(*ctrs) + 1)) == NULL)
		return -ENOMEM;
	if (l->n <= l->cap) {
		for (k = 0; k < l->n; k++)
			if (ctr_read(body, l->rec + k * l->width, rg,
			    &ctrs[k]) < 0)
				return -ENOMEM;
	} else
		while (k < ret->n &&
		    jscan_next_elem(body, sp.off + sp.len, &pos, &el) == 1)
			if (ctr_rescan(body, el, rg, &ctrs[k++]) < 0)
				return -ENOMEM;
	ret->ctrs = ctrs;
	return 0;
}

/* Whether the member key at k was already seen among the n in seen. */
static bool
seen_key(const char *key, const char *const *seen, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(seen[i], key) == 0)
			return true;
	return false;
}

/*
 * The pod claim entry at e (named RESOLVED_POD_CLAIM) into pod: its
 * distinct members up to 3, and the two claim references.
 */
static int
claim_entry(const char *body, struct jscan_span e, struct region *rg,
    struct patch_pod *pod)
{
	const char *seen[3];
	struct jscan_span k, v;
	size_t pos = e.off;

	pod->claim_members = 0;
	while (pod->claim_members < 3 &&
	    jscan_next_member(body, e.off + e.len, &pos, &k, &v) == 1) {
		const char *key = copy_raw(body + k.off + 1, k.len - 2, rg);

		if (key == NULL)
			return -ENOMEM;
		if (!seen_key(key, seen, pod->claim_members))
			seen[pod->claim_members++] = key;
	}
	if (copy_str(body, member(body, e, "resourceClaimTemplateName"), rg,
	    &pod->claim_tmpl) < 0 || copy_str(body, member(body, e,
	    "resourceClaimName"), rg, &pod->claim_name) < 0)
		return -ENOMEM;
	return 0;
}

/* spec.resourceClaims at sp into pod. */
static int
claims_read(const char *body, struct jscan_span sp, struct region *rg,
    struct patch_pod *pod)
{
	struct jscan_span e;
	size_t pos = sp.off;
	long i = 0;

	if ((pod->claims = shape_at(body, sp, true)) != PATCH_PRESENT)
		return 0;
	for (; jscan_next_elem(body, sp.off + sp.len, &pos, &e) == 1; i++)
		if (named(body, e, RESOLVED_POD_CLAIM)) {
			pod->claim_at = i;
			return claim_entry(body, e, rg, pod);
		}
	return 0;
}

/* Read the facts of a scanned Pod; see podscan.h. */
int
podscan_read(const char *body, const struct podscan_in *in,
    struct region *rg, struct patch_pod *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->claim_at = -1;
	if (in->pod.len == 0 || body[in->pod.off] != '{' ||
	    in->spec.len == 0 || body[in->spec.off] != '{')
		return 0;
	ret->spec = true;
	if (claims_read(body, in->claims, rg, ret) < 0)
		return -ENOMEM;
	for (size_t l = 0; l < 2; l++)
		if (list_read(body, in->lists[l], in->recs[l], rg,
		    &ret->lists[l]) < 0)
			return -ENOMEM;
	return 0;
}
