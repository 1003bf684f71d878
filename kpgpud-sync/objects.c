/* SPDX-License-Identifier: Apache-2.0 */
/* Watched collections and the reduction of objects to cache rows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonw.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-sync/objects.h"

/* The Namespaces collection. */
void
sync_res_namespaces(struct sync_res *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->table = CACHE_T_NS;
	snprintf(ret->key, sizeof(ret->key), "v1/namespaces");
	snprintf(ret->path, sizeof(ret->path), "/api/v1/namespaces");
}

/* Whether s is a non-empty run of [a-z0-9.-] of at most max bytes. */
static bool
res_part_valid(const char *s, size_t len, size_t max)
{
	size_t i;

	if (len == 0 || len > max)
		return false;
	for (i = 0; i < len; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		    ch == '-' || ch == '.'))
			return false;
	}
	return true;
}

/* An instance collection from "group/version/resource". */
int
sync_res_instance(const char *gvr, struct sync_res *ret)
{
	const char *s1, *s2;
	struct sync_res r;

	if (gvr == NULL || strlen(gvr) > CACHE_GVR_MAX)
		return -EINVAL;
	if ((s1 = strchr(gvr, '/')) == NULL ||
	    (s2 = strchr(s1 + 1, '/')) == NULL || strchr(s2 + 1, '/') != NULL)
		return -EINVAL;
	if (!res_part_valid(gvr, (size_t)(s1 - gvr), 253) ||
	    strchr(gvr, '.') == NULL || strchr(gvr, '.') > s1 ||
	    !res_part_valid(s1 + 1, (size_t)(s2 - s1 - 1), 63) ||
	    !res_part_valid(s2 + 1, strlen(s2 + 1), 63))
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.table = CACHE_T_INSTANCE;
	snprintf(r.key, sizeof(r.key), "%s", gvr);
	snprintf(r.path, sizeof(r.path), "/apis/%s", gvr);
	*ret = r;
	return 0;
}

/* An owned collection by kind. */
int
sync_res_owned(const char *kind, struct sync_res *ret)
{
	/*
	 * Every DeviceClass, not only kpgpud's: kpgpud-quota closes each GPU
	 * class in every isolated tenant's quota, including classes created
	 * later. Classes are few and cluster-scoped. The watch key differs
	 * from the one of the labelled watch of older versions, so a cache
	 * written by them is relisted instead of resumed.
	 */
	static const struct {
		const char *kind, *key, *path;
		bool all;
	} tab[] = {
		{ CACHE_KIND_DEVICECLASS, CACHE_WATCH_DEVICECLASSES,
		  "/apis/resource.k8s.io/v1/deviceclasses", true },
		{ CACHE_KIND_CLAIMTEMPLATE,
		  "resource.k8s.io/v1/resourceclaimtemplates",
		  "/apis/resource.k8s.io/v1/resourceclaimtemplates", false },
		{ CACHE_KIND_CLAIM, "resource.k8s.io/v1/resourceclaims",
		  "/apis/resource.k8s.io/v1/resourceclaims", false },
		{ CACHE_KIND_QUOTA, "v1/resourcequotas",
		  "/api/v1/resourcequotas", false },
		{ CACHE_KIND_SLICE, CACHE_WATCH_SLICES,
		  "/apis/resource.k8s.io/v1/resourceslices", true },
		{ CACHE_KIND_ALLOC, CACHE_WATCH_ALLOCS,
		  "/apis/resource.k8s.io/v1/resourceclaims", true },
	};
	size_t i;

	for (i = 0; kind != NULL && i < nitems(tab); i++) {
		if (strcmp(kind, tab[i].kind) != 0)
			continue;
		memset(ret, 0, sizeof(*ret));
		ret->table = CACHE_T_OWNED;
		ret->kind = tab[i].kind;
		ret->selector = tab[i].all ? NULL : SYNC_MANAGED_SELECTOR;
		snprintf(ret->key, sizeof(ret->key), "%s", tab[i].key);
		snprintf(ret->path, sizeof(ret->path), "%s", tab[i].path);
		return 0;
	}
	return -EINVAL;
}

/* A string member of o, or NULL when absent or not a string. */
static const char *
str_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The (namespace, name) key of obj. */
int
sync_obj_key(json_t *obj, const char **ret_ns, const char **ret_name)
{
	json_t *md = json_object_get(obj, "metadata");
	const char *ns = str_of(md, "namespace"), *name = str_of(md, "name");

	if (name == NULL || *name == '\0' || strlen(name) > CACHE_KEY_MAX)
		return -EINVAL;
	if (ns != NULL && strlen(ns) > 63)
		return -EINVAL;
	*ret_ns = ns != NULL ? ns : "";
	*ret_name = name;
	return 0;
}

/* Compact JSON with sorted keys of v (NULL: "{}"); NULL on ENOMEM. */
static char *
dump(json_t *v)
{
	if (v == NULL || json_is_null(v))
		return strdup("{}");
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* The members of o whose key starts with prefix, as a new object. */
static json_t *
filter_prefix(json_t *o, const char *prefix)
{
	json_t *out = json_object(), *v;
	const char *k;
	size_t plen = strlen(prefix);

	if (out == NULL)
		return NULL;
	json_object_foreach(o, k, v) {
		if (strncmp(k, prefix, plen) == 0 &&
		    json_object_set(out, k, v) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/*
 * dump(filter_prefix(o, prefix)) (o NULL or not an object: no members),
 * written by jsonw without building that object or running jansson's
 * dumper (a Namespace's labels and annotations: every list item has them);
 * the general way when jsonw leaves it to jansson or the text is over
 * CACHE_JSON_MAX (the row is then refused as before). NULL on ENOMEM.
 */
static char *
dump_members(json_t *o, const char *prefix)
{
	struct buf b = BUF_INIT(CACHE_JSON_MAX);
	json_t *kp;
	char *out = NULL;
	int r = jsonw_members_to(&b, o, prefix);

	if (r == 0)
		out = buf_steal(&b, NULL);
	buf_free(&b);
	if (r != 1 && r != -E2BIG)
		return out;
	if ((kp = filter_prefix(o, prefix)) == NULL)
		return NULL;
	out = dump(kp);
	json_decref(kp);
	return out;
}

/* The metadata every row has: its key, uid and resourceVersion. */
struct row_meta {
	const char	*ns, *name, *uid, *rv;
};

/* Fill a Namespace row. */
static int
row_ns(json_t *obj, json_t *md, const struct row_meta *m,
    struct sync_row *row, const char **why)
{
	json_t *labels = json_object_get(md, "labels");
	json_t *ann = json_object_get(md, "annotations");
	const char *iso;

	row->u.ns = (struct cache_ns){ .name = m->name, .uid = m->uid,
	    .rv = m->rv };
	if (strlen(row->u.ns.name) > 63) {
		*why = "namespace name over 63 bytes";
		return -EINVAL;
	}
	row->u.ns.phase = str_of(json_object_get(obj, "status"), "phase");
	iso = str_of(labels, RESOLVED_LABEL);
	row->u.ns.isolated = iso != NULL && strcmp(iso, "true") == 0;
	row->u.ns.resolved = str_of(ann, RESOLVED_ANNOTATION);
	if ((row->json[0] = dump_members(labels, "")) == NULL ||
	    (row->json[1] = dump_members(ann, SYNC_ANNOTATION_PREFIX)) == NULL)
		return -ENOMEM;
	row->u.ns.labels = row->json[0];
	row->u.ns.annotations = row->json[1];
	return 0;
}

/* Fill an instance row. */
static int
row_instance(const struct sync_res *res, json_t *obj, json_t *md,
    const struct row_meta *m, struct sync_row *row)
{
	json_t *g = json_object_get(md, "generation");

	row->u.in = (struct cache_instance){
		.gvr = res->key,
		.kind = str_of(obj, "kind"),
		.ns = m->ns, .name = m->name, .uid = m->uid, .rv = m->rv,
		.generation = json_is_integer(g) ? json_integer_value(g) : 0,
		.created = str_of(md, "creationTimestamp"),
		.isolation = str_of(json_object_get(md, "annotations"),
		    SYNC_ISOLATION_ANNOTATION),
		.deleted = str_of(md, "deletionTimestamp"),
	};
	return 0;
}

/* Set key to a copy of v in o unless v is absent or null. */
static int
put_if(json_t *o, const char *key, json_t *v)
{
	if (v == NULL || json_is_null(v))
		return 0;
	return json_object_set(o, key, v) < 0 ? -ENOMEM : 0;
}

/*
 * The topology of a ResourceSlice: driver, node, pool and, per device, its
 * name, allowMultipleAllocations and the attributes kpgpud-quota assigns
 * domains by (each kept as the API's one-member value object).
 */
static json_t *
slice_spec(json_t *spec)
{
	static const char *const keep[] = { "type", "uuid", "parentUUID",
	    "profile", "productName", "resource.kubernetes.io/pcieRoot" };
	json_t *out, *devs, *d, *od, *attrs, *oa, *v;
	size_t i, k;

	out = json_pack("{s:O?, s:O?, s:O?, s:[]}", "driver",
	    json_object_get(spec, "driver"), "nodeName",
	    json_object_get(spec, "nodeName"), "pool",
	    json_object_get(spec, "pool"), "devices");
	if (out == NULL)
		return NULL;
	devs = json_object_get(out, "devices");
	json_array_foreach(json_object_get(spec, "devices"), i, d) {
		attrs = json_object_get(d, "attributes");
		od = json_pack("{s:O?, s:{}}", "name", json_object_get(d, "name"),
		    "attributes");
		if (od == NULL || json_array_append_new(devs, od) < 0)
			goto fail;
		if (json_is_true(json_object_get(d, "allowMultipleAllocations"))
		    && json_object_set_new(od, "allowMultipleAllocations",
		    json_true()) < 0)
			goto fail;
		oa = json_object_get(od, "attributes");
		for (k = 0; k < nitems(keep); k++)
			if ((v = json_object_get(attrs, keep[k])) != NULL &&
			    json_object_set(oa, keep[k], v) < 0)
				goto fail;
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

/* The devices a claim is allocated: [{"driver","pool","device"}]. */
static json_t *
claim_devices(json_t *status)
{
	json_t *out = json_array(), *r;
	size_t i;

	if (out == NULL)
		return NULL;
	json_array_foreach(json_object_get(json_object_get(json_object_get(
	    status, "allocation"), "devices"), "results"), i, r) {
		json_t *d = json_pack("{s:O?, s:O?, s:O?}", "driver",
		    json_object_get(r, "driver"), "pool", json_object_get(r,
		    "pool"), "device", json_object_get(r, "device"));

		if (d == NULL || json_array_append_new(out, d) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* Fill an owned row: the drift-relevant fields as one JSON document. */
static int
row_owned(const struct sync_res *res, json_t *obj, json_t *md,
    const struct row_meta *m, struct sync_row *row)
{
	json_t *d = json_object(), *spec = json_object_get(obj, "spec");
	json_t *status = json_object_get(obj, "status"), *sub;
	int r = 0;

	row->u.ow = (struct cache_owned){ .kind = res->kind, .ns = m->ns,
	    .name = m->name, .uid = m->uid, .rv = m->rv };
	if (d == NULL)
		return -ENOMEM;
	if (strcmp(res->kind, CACHE_KIND_ALLOC) == 0) {
		/* only the allocation: status churn stays out of the stream */
		if ((sub = claim_devices(status)) == NULL ||
		    json_object_set_new(d, "devices", sub) < 0 ||
		    (row->json[0] = dump(d)) == NULL)
			goto nomem;
		json_decref(d);
		row->u.ow.data = row->json[0];
		return 0;
	}
	r |= put_if(d, "labels", json_object_get(md, "labels"));
	r |= put_if(d, "annotations", json_object_get(md, "annotations"));
	/* kpgpud-quota verifies its objects: owner and pending deletion */
	r |= put_if(d, "ownerReferences", json_object_get(md,
	    "ownerReferences"));
	r |= put_if(d, "deletionTimestamp", json_object_get(md,
	    "deletionTimestamp"));
	if (strcmp(res->kind, CACHE_KIND_QUOTA) == 0) {
		if ((sub = json_object()) == NULL)
			goto nomem;
		r |= put_if(sub, "hard", json_object_get(spec, "hard"));
		r |= json_object_set_new(d, "spec", sub) < 0 ? -ENOMEM : 0;
		if ((sub = json_object()) == NULL)
			goto nomem;
		r |= put_if(sub, "hard", json_object_get(status, "hard"));
		r |= put_if(sub, "used", json_object_get(status, "used"));
		if (json_object_size(sub) > 0)
			r |= json_object_set(d, "status", sub) < 0 ? -ENOMEM : 0;
		json_decref(sub);
	} else if (strcmp(res->kind, CACHE_KIND_SLICE) == 0) {
		if ((sub = slice_spec(spec)) == NULL)
			goto nomem;
		r |= json_object_set_new(d, "spec", sub) < 0 ? -ENOMEM : 0;
	} else
		r |= put_if(d, "spec", spec);
	if (r != 0 || (row->json[0] = dump(d)) == NULL)
		goto nomem;
	json_decref(d);
	/*
	 * A DeviceClass too large to keep is kept without its spec: with no
	 * selectors kpgpud-quota counts it as a GPU class (fail closed)
	 * instead of never seeing it.
	 */
	if (strcmp(res->kind, CACHE_KIND_DEVICECLASS) == 0 &&
	    strlen(row->json[0]) > CACHE_JSON_MAX) {
		free(row->json[0]);
		if ((row->json[0] = strdup("{\"oversize\":true}")) == NULL)
			return -ENOMEM;
	}
	row->u.ow.data = row->json[0];
	return 0;
nomem:
	json_decref(d);
	return -ENOMEM;
}

/* Whether every text field of the row is within the cache's caps. */
static bool
row_fits(const struct sync_row *row)
{
	size_t i;

	for (i = 0; i < 3; i++)
		if (row->json[i] != NULL && strlen(row->json[i]) > CACHE_JSON_MAX)
			return false;
	if (row->table == CACHE_T_INSTANCE)
		return (row->u.in.kind == NULL ||
		    strlen(row->u.in.kind) <= CACHE_KEY_MAX) &&
		    (row->u.in.created == NULL ||
		    strlen(row->u.in.created) <= CACHE_RV_MAX) &&
		    (row->u.in.deleted == NULL ||
		    strlen(row->u.in.deleted) <= CACHE_RV_MAX) &&
		    (row->u.in.isolation == NULL ||
		    strlen(row->u.in.isolation) <= CACHE_JSON_MAX);
	if (row->table == CACHE_T_NS)
		return (row->u.ns.phase == NULL ||
		    strlen(row->u.ns.phase) <= CACHE_KEY_MAX) &&
		    (row->u.ns.resolved == NULL ||
		    strlen(row->u.ns.resolved) <= CACHE_JSON_MAX);
	return true;
}

/* Fill the common metadata of any row, then the table-specific part. */
int
sync_row_from_json(const struct sync_res *res, json_t *obj,
    struct sync_row *ret, const char **ret_why)
{
	struct sync_row row;
	struct row_meta m;
	json_t *md = json_object_get(obj, "metadata");
	const char *why = "bad object";
	int r;

	memset(&row, 0, sizeof(row));
	row.table = res->table;
	if (!json_is_object(md)) {
		why = "no metadata";
		r = -EINVAL;
		goto fail;
	}
	if ((r = sync_obj_key(obj, &m.ns, &m.name)) < 0) {
		why = "bad metadata.name or metadata.namespace";
		goto fail;
	}
	m.uid = str_of(md, "uid");
	m.rv = str_of(md, "resourceVersion");
	if (m.rv == NULL || *m.rv == '\0' || strlen(m.rv) > CACHE_RV_MAX ||
	    (m.uid != NULL && strlen(m.uid) > CACHE_KEY_MAX)) {
		why = "bad metadata.resourceVersion or metadata.uid";
		r = -EINVAL;
		goto fail;
	}
	switch (res->table) {
	case CACHE_T_NS:
		r = row_ns(obj, md, &m, &row, &why);
		break;
	case CACHE_T_INSTANCE:
		r = row_instance(res, obj, md, &m, &row);
		break;
	case CACHE_T_OWNED:
		r = row_owned(res, obj, md, &m, &row);
		break;
	}
	if (r == 0 && !row_fits(&row)) {
		why = "a field is over its size cap";
		r = -EINVAL;
	}
	if (r < 0)
		goto fail;
	*ret = row;
	return 0;
fail:
	if (r == -ENOMEM)
		why = "out of memory";
	sync_row_clear(&row);
	if (ret_why != NULL)
		*ret_why = why;
	return r;
}

/* Free the documents a row owns. */
void
sync_row_clear(struct sync_row *row)
{
	size_t i;

	if (row == NULL)
		return;
	for (i = 0; i < 3; i++) {
		free(row->json[i]);
		row->json[i] = NULL;
	}
}
