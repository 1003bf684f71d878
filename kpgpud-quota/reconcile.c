/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reconcile, the pure half: plan + observed -> ordered writes. Nothing here
 * does I/O; work.c runs the writes one after another and stops at the
 * first failure, so a later step never runs before an earlier one is done
 * (the Namespace is labelled only once the claim and the quota exist).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/jsonw.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-quota/reconcile.h"

#define RES_API		"/apis/resource.k8s.io/v1"
#define CORE_API	"/api/v1"
#define KEYS_MAX	(PLAN_MAX_KEYS + 8)

/* Whether a member the server may have added is empty. */
static bool
json_empty(json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL:
	case JSON_FALSE:
		return true;
	case JSON_INTEGER:
		return json_integer_value(v) == 0;
	case JSON_STRING:
		return json_string_length(v) == 0;
	case JSON_ARRAY:
		return json_array_size(v) == 0;
	case JSON_OBJECT:
		return json_object_size(v) == 0;
	default:
		return false;
	}
}

/* Whether a member the server may have added is empty; see reconcile.h. */
bool
reconcile_json_empty(json_t *v)
{
	return json_empty(v);
}

/*
 * Whether want is contained in have (objects by member, arrays by index);
 * exact: also no member only have has that is not empty, nesting at most
 * 32 deep.
 */
static bool
json_match(json_t *want, json_t *have, bool exact, int depth)
{
	const char *k;
	json_t *v;
	size_t i;

	if (want == NULL || have == NULL || (exact && depth > 32))
		return exact ? want == have : want == NULL;
	if (json_is_object(want)) {
		if (!json_is_object(have))
			return false;
		json_object_foreach(want, k, v)
			if (!json_match(v, json_object_get(have, k), exact,
			    depth + 1))
				return false;
		if (!exact)
			return true;
		json_object_foreach(have, k, v)
			if (json_object_get(want, k) == NULL && !json_empty(v))
				return false;
		return true;
	}
	if (json_is_array(want)) {
		if (!json_is_array(have) ||
		    json_array_size(want) != json_array_size(have))
			return false;
		json_array_foreach(want, i, v)
			if (!json_match(v, json_array_get(have, i), exact,
			    depth + 1))
				return false;
		return true;
	}
	return json_equal(want, have);
}

/* Whether want is contained in have (objects by member, arrays by index). */
bool
reconcile_json_subset(json_t *want, json_t *have)
{
	return json_match(want, have, false, 0);
}

/* Append a reason to why ("a; b"). */
static void
why_add(char *why, size_t len, const char *reason)
{
	size_t o = strlen(why);

	if (o + 1 < len)
		snprintf(why + o, len - o, "%s%s", o ? "; " : "", reason);
}

/* Whether the owner references of have include want's controller. */
static bool
owner_matches(json_t *want_refs, json_t *have_refs)
{
	json_t *w = json_array_get(want_refs, 0), *h;
	const char *uid = json_string_value(json_object_get(w, "uid"));
	size_t i;

	if (uid == NULL)
		return true;
	json_array_foreach(have_refs, i, h)
		if (json_is_string(json_object_get(h, "uid")) &&
		    strcmp(json_string_value(json_object_get(h, "uid")),
		    uid) == 0 && json_is_true(json_object_get(h, "controller")))
			return true;
	return false;
}

/* A label of a cache row or object's metadata. */
static const char *
row_label(json_t *row, const char *key)
{
	return json_string_value(json_object_get(json_object_get(row,
	    "labels"), key));
}

/* The object reduced to the cache row form. */
json_t *
reconcile_row(json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata"), *row = json_object();
	static const char *const keys[] = { "labels", "annotations",
	    "ownerReferences", "deletionTimestamp" };
	json_t *v;

	if (row == NULL)
		return NULL;
	for (size_t i = 0; i < nitems(keys); i++)
		if ((v = json_object_get(md, keys[i])) != NULL &&
		    !json_is_null(v) && json_object_set(row, keys[i], v) < 0)
			goto fail;
	if ((v = json_object_get(obj, "spec")) != NULL &&
	    json_object_set(row, "spec", v) < 0)
		goto fail;
	return row;
fail:
	json_decref(row);
	return NULL;
}

/* Ours, an older plan's, or an impostor; why lists what differs. */
enum rc_verdict
reconcile_verdict(json_t *want, json_t *have, char *why, size_t whylen)
{
	json_t *wmd = json_object_get(want, "metadata");
	const char *mb, *inst, *winst;
	bool labelled, owned, same;

	if (json_object_get(have, "metadata") != NULL)
		have = reconcile_row(have);
	else
		json_incref(have);
	if (have == NULL) {
		snprintf(why, whylen, "unreadable");
		return RC_IMPOSTOR;
	}
	why[0] = '\0';
	mb = row_label(have, PLAN_MANAGED_BY_KEY);
	labelled = mb != NULL && strcmp(mb, PLAN_MANAGED_BY) == 0;
	owned = owner_matches(json_object_get(wmd, "ownerReferences"),
	    json_object_get(have, "ownerReferences"));
	same = json_match(json_object_get(want, "spec"),
	    json_object_get(have, "spec"), true, 0);
	winst = json_string_value(json_object_get(json_object_get(wmd,
	    "labels"), PLAN_INSTANCE_LABEL));
	inst = row_label(have, PLAN_INSTANCE_LABEL);
	if (!labelled)
		why_add(why, whylen, "no " PLAN_MANAGED_BY_KEY "="
		    PLAN_MANAGED_BY " label");
	if (!owned)
		why_add(why, whylen, "no controller owner reference to the "
		    "instance");
	if (!same)
		why_add(why, whylen, "spec differs from the plan's");
	json_decref(have);
	if (labelled && owned && same)
		return RC_OURS;
	/* kpgpud's own object of an earlier plan: labels and owner agree */
	if (labelled && owned && (winst == NULL ||
	    (inst != NULL && strcmp(inst, winst) == 0)))
		return RC_OUTDATED;
	return RC_IMPOSTOR;
}

/* DeleteOptions with a uid precondition. */
char *
reconcile_delete_body(const char *uid)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1",
	    "kind", "DeleteOptions", "preconditions", "uid", uid);
	char *s = jsonw_dump(o);

	json_decref(o);
	return s;
}

/* Copy src into dst of len bytes, cut if need be. */
static void
scopy(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Append one action; body is stolen (may be NULL). */
static int
push(struct rc_actions *r, const char *method, const char *verb,
    json_t *body, long also_ok, const char *path, const char *what)
{
	struct rc_action *a;

	if (r->n >= RC_MAX_ACTIONS) {
		json_decref(body);
		return -E2BIG;
	}
	a = &r->a[r->n];
	memset(a, 0, sizeof(*a));
	if (body != NULL) {
		a->body = jsonw_dump(body);
		json_decref(body);
		if (a->body == NULL)
			return -ENOMEM;
		a->content_type = strcmp(method, "PATCH") == 0 ? RC_MERGE :
		    RC_JSON;
	}
	a->method = method;
	a->verb = verb;
	a->also_ok = also_ok;
	scopy(a->path, sizeof(a->path), path);
	scopy(a->what, sizeof(a->what), what);
	r->n++;
	return 0;
}

/* The collection path of an owned kind in a namespace. */
static const char *
plural(const char *kind)
{
	return strcmp(kind, "ResourceClaimTemplate") == 0 ?
	    "resourceclaimtemplates" : "resourceclaims";
}

/* A create of kpgpud's object at coll, verified by reading item on 409. */
static int
push_create(struct rc_actions *r, json_t *obj, const char *kind,
    const char *coll, const char *item, const char *what)
{
	int ret;

	if ((ret = push(r, "POST", "create", json_incref(obj), 0, coll,
	    what)) < 0)
		return ret;
	r->a[r->n - 1].verify_kind = kind;
	scopy(r->a[r->n - 1].item, sizeof(r->a[0].item), item);
	return 0;
}

/* A delete of exactly the object of that uid (an impostor or outdated). */
static int
push_replace_delete(struct rc_actions *r, const char *item, const char *uid,
    const char *impostor_kind, const char *what)
{
	struct rc_action *a;
	int ret;

	if (uid == NULL || uid[0] == '\0')
		return push(r, "DELETE", "delete", NULL, 404, item, what);
	if ((ret = push(r, "DELETE", "delete", NULL, 404, item, what)) < 0)
		return ret;
	a = &r->a[r->n - 1];
	a->impostor_kind = impostor_kind;
	if ((a->body = reconcile_delete_body(uid)) == NULL)
		return -ENOMEM;
	a->content_type = RC_JSON;
	return 0;
}

/* Record an impostor: what it is and why it is not kpgpud's. */
static void
note_impostor(struct rc_actions *r, const char *what, const char *uid,
    const char *why, bool deleting)
{
	if (r->nimpostors >= RC_MAX_IMPOSTORS)
		return;
	snprintf(r->impostor[r->nimpostors++], sizeof(r->impostor[0]),
	    "%.200s (uid %.64s) is not kpgpud's: %.300s; %s", what,
	    uid && *uid ? uid : "unknown", why,
	    deleting ? "it is being deleted, replaced once gone" :
	    "replaced");
}

/* Create the DeviceClass; patch it back or replace it when not ours. */
static int
ensure_class(const struct plan *p, const struct rc_observed *obs,
    struct rc_actions *r)
{
	char path[RC_PATH_MAX], what[384], why[RC_WHY_MAX];
	json_t *labels, *spec;
	enum rc_verdict v;
	int ret;

	if (p->device_class == NULL)
		return 0;
	snprintf(what, sizeof(what), "DeviceClass %s", p->class_name);
	snprintf(path, sizeof(path), RES_API "/deviceclasses/%s",
	    p->class_name);
	if (obs->device_class == NULL)
		return push_create(r, p->device_class, "DeviceClass",
		    RES_API "/deviceclasses", path, what);
	v = reconcile_verdict(p->device_class, obs->device_class, why,
	    sizeof(why));
	if (v == RC_IMPOSTOR) {
		note_impostor(r, what, obs->device_class_uid, why, false);
		if ((ret = push_replace_delete(r, path, obs->device_class_uid,
		    "DeviceClass", what)) < 0)
			return ret;
		return push_create(r, p->device_class, "DeviceClass",
		    RES_API "/deviceclasses", path, what);
	}
	/* ours: labels or spec edited by hand are patched back */
	labels = json_object_get(json_object_get(p->device_class, "metadata"),
	    "labels");
	spec = json_object_get(p->device_class, "spec");
	if (v == RC_OURS && reconcile_json_subset(labels, json_object_get(
	    obs->device_class, "labels")))
		return 0;
	return push(r, "PATCH", "patch", json_pack("{s:{s:O}, s:O}",
	    "metadata", "labels", labels, "spec", spec), 0, path, what);
}

/*
 * Create the claim or template; replace it when it is not kpgpud's or its
 * spec is an older plan's (the spec is immutable).
 */
static int
ensure_claim(const struct plan *p, const struct rc_observed *obs,
    struct rc_actions *r, bool *usable)
{
	const char *kind = json_string_value(json_object_get(p->claim,
	    "kind"));
	json_t *meta = json_object_get(p->claim, "metadata");
	const struct rc_owned *o = obs->has_planned &&
	    strcmp(obs->planned.kind, kind) == 0 ? &obs->planned : NULL;
	char coll[RC_PATH_MAX], item[RC_PATH_MAX + 80], what[384];
	char why[RC_WHY_MAX];
	bool deleting;
	enum rc_verdict v;
	int ret;

	snprintf(coll, sizeof(coll), RES_API "/namespaces/%s/%s",
	    p->namespace, plural(kind));
	snprintf(item, sizeof(item), "%s/%s", coll, p->claim_name);
	snprintf(what, sizeof(what), "%s %s/%s", kind, p->namespace,
	    p->claim_name);
	*usable = true;
	if (o == NULL)
		return push_create(r, p->claim, kind, coll, item, what);
	deleting = json_object_get(o->data, "deletionTimestamp") != NULL;
	v = reconcile_verdict(p->claim, o->data, why, sizeof(why));
	if (v == RC_IMPOSTOR)
		note_impostor(r, what, o->uid, why, deleting);
	if (deleting) {
		/*
		 * In use: it goes when its last pod does; then ours comes.
		 * Meanwhile the Namespace keeps pointing at what it has (a
		 * terminating claim would leave new pods unscheduled).
		 */
		r->wait = true;
		*usable = false;
		return 0;
	}
	if (v != RC_OURS) {
		if ((ret = push_replace_delete(r, item, o->uid,
		    v == RC_IMPOSTOR ? kind : NULL, what)) < 0)
			return ret;
		return push_create(r, p->claim, kind, coll, item, what);
	}
	if (reconcile_json_subset(json_object_get(meta, "labels"),
	    json_object_get(o->data, "labels")) &&
	    reconcile_json_subset(json_object_get(meta, "annotations"),
	    json_object_get(o->data, "annotations")))
		return 0;
	return push(r, "PATCH", "patch", json_pack("{s:{s:O, s:O}}",
	    "metadata", "labels", json_object_get(meta, "labels"),
	    "annotations", json_object_get(meta, "annotations")), 0, item,
	    what);
}

/* Whether an owned object carries both of kpgpud's labels. */
bool
reconcile_owned_ours(json_t *data)
{
	const char *mb = row_label(data, PLAN_MANAGED_BY_KEY);

	return mb != NULL && strcmp(mb, PLAN_MANAGED_BY) == 0 &&
	    row_label(data, PLAN_INSTANCE_LABEL) != NULL;
}

/*
 * Delete kpgpud's claims and templates the plan (or NULL) does not want.
 * Objects with only the managed-by label (a tenant's decoys) are left
 * alone; the plan's own name is never one of these.
 */
static int
remove_stale(const struct plan *p, const struct rc_observed *obs,
    struct rc_actions *r)
{
	const char *kind = p ? json_string_value(json_object_get(p->claim,
	    "kind")) : "";
	char path[RC_PATH_MAX], what[384];
	int ret;

	for (int i = 0; i < obs->nowned; i++) {
		const struct rc_owned *o = &obs->owned[i];

		if (p != NULL && strcmp(o->kind, kind) == 0 &&
		    strcmp(o->name, p->claim_name) == 0)
			continue;
		if (!reconcile_owned_ours(o->data))
			continue;
		/* already deleted: it goes when its last pod does */
		if (json_object_get(o->data, "deletionTimestamp") != NULL)
			continue;
		snprintf(path, sizeof(path), RES_API "/namespaces/%s/%s/%s",
		    obs->ns, plural(o->kind), o->name);
		snprintf(what, sizeof(what), "%s %s/%s", o->kind, obs->ns,
		    o->name);
		if ((ret = push(r, "DELETE", "delete", NULL, 404, path,
		    what)) < 0)
			return ret;
	}
	return 0;
}

struct keylist {
	int	 n;
	char	 k[KEYS_MAX][PLAN_KEY_MAX + 1];
};

/* Split the quota's record of our keys ("a,b") into a list. */
static void
keys_parse(const char *s, struct keylist *kl)
{
	const char *e;
	size_t len;

	kl->n = 0;
	while (s != NULL && *s != '\0' && kl->n < KEYS_MAX) {
		e = strchr(s, ',');
		len = e ? (size_t)(e - s) : strlen(s);
		if (len > 0 && len <= PLAN_KEY_MAX) {
			memcpy(kl->k[kl->n], s, len);
			kl->k[kl->n++][len] = '\0';
		}
		s = e ? e + 1 : NULL;
	}
}

/* Whether the plan wants key. */
static bool
wanted_key(const struct plan *p, const char *key)
{
	for (int i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].name, key) == 0)
			return true;
	return false;
}

/* A string member of metadata.<map> of obj, or NULL. */
static const char *
meta_str(json_t *obj, const char *map, const char *key)
{
	return json_string_value(json_object_get(json_object_get(
	    json_object_get(obj, "metadata"), map), key));
}

/*
 * Quota room for the tenant's old shared claims: while one drains (deleted,
 * kept by its pods) it still counts against the quota, so each key of the
 * plan is raised by exactly what such claims are charged for it: 1 claim
 * each, and their devices for the class keys. Only claims with both of
 * kpgpud's labels and one of the tenant's claim names count (a tenant
 * cannot write those: the kpgpud-owned-claims admission policy); when the
 * last is gone the keys are back at the plan's values.
 */
static void
quota_room(const struct plan *p, const struct rc_observed *obs, int *extra)
{
	char key[PLAN_KEY_MAX + 1];
	json_t *req, *ex;
	const char *cls, *mode;
	size_t j;
	int n;

	memset(extra, 0, sizeof(int) * PLAN_MAX_KEYS);
	for (int i = 0; i < obs->nowned; i++) {
		const struct rc_owned *o = &obs->owned[i];

		if (strcmp(o->kind, "ResourceClaim") != 0 ||
		    !reconcile_owned_ours(o->data) ||
		    !plan_claim_old_name(p, o->name))
			continue;
		for (int k = 0; k < p->nkeys; k++)
			if (strcmp(p->keys[k].name, PLAN_CLAIMS_KEY) == 0)
				extra[k]++;
		json_array_foreach(json_object_get(json_object_get(
		    json_object_get(o->data, "spec"), "devices"), "requests"),
		    j, req) {
			ex = json_object_get(req, "exactly");
			cls = json_string_value(json_object_get(ex,
			    "deviceClassName"));
			mode = json_string_value(json_object_get(ex,
			    "allocationMode"));
			if (cls == NULL)
				continue;
			n = mode != NULL && strcmp(mode, "All") == 0 ? 32 :
			    json_is_integer(json_object_get(ex, "count")) ?
			    (int)json_integer_value(json_object_get(ex,
			    "count")) : 1;
			if (n < 0 || n > 32)
				n = 32;
			snprintf(key, sizeof(key), "%s%s", cls,
			    PLAN_CLASS_KEY_SUFFIX);
			for (int k = 0; k < p->nkeys; k++)
				if (strcmp(p->keys[k].name, key) == 0)
					extra[k] += n;
		}
	}
}

/* A quota value that is a plain decimal integer, else -1. */
static long
quota_int(json_t *v)
{
	const char *s = json_string_value(v);
	char *end;
	long n;

	if (s == NULL || *s == '\0')
		return -1;
	n = strtol(s, &end, 10);
	return *end == '\0' && n >= 0 ? n : -1;
}

/*
 * Whether the quota controller has made the wanted values the enforced
 * ones: admission checks only the keys of status.hard, so a key missing
 * there (a quota just created, a key just added) is unlimited, and a
 * lowered value only holds once it is there.
 */
static bool
quota_enforced(const struct plan *p, const int *extra, json_t *q)
{
	json_t *hard = json_object_get(json_object_get(q, "status"), "hard");

	for (int i = 0; i < p->nkeys; i++)
		if (quota_int(json_object_get(hard, p->keys[i].name)) !=
		    (long)p->keys[i].value + extra[i])
			return false;
	return true;
}

/* Bring the plan's quota to the plan's keys, removing our old ones. */
static int
quota_update(const struct plan *p, const int *extra, json_t *q,
    const struct keylist *ours, struct rc_actions *r)
{
	char v[16], path[RC_PATH_MAX], what[384];
	json_t *hard = json_object_get(json_object_get(q, "spec"), "hard");
	json_t *hp, *patch;
	const char *have, *rec = meta_str(q, "annotations",
	    PLAN_QUOTA_KEYS_ANNOT), *want = p->keys_text;
	int ret;

	if ((hp = json_object()) == NULL)
		return -ENOMEM;
	for (int i = 0; i < p->nkeys; i++) {
		snprintf(v, sizeof(v), "%d", p->keys[i].value + extra[i]);
		have = json_string_value(json_object_get(hard,
		    p->keys[i].name));
		if (have == NULL || strcmp(have, v) != 0)
			json_object_set_new(hp, p->keys[i].name,
			    json_string(v));
	}
	for (int i = 0; i < ours->n; i++)
		if (!wanted_key(p, ours->k[i]) &&
		    json_object_get(hard, ours->k[i]) != NULL)
			json_object_set_new(hp, ours->k[i], json_null());
	if (json_object_size(hp) == 0 && rec != NULL &&
	    strcmp(rec, want) == 0) {
		json_decref(hp);
		return 0;
	}
	patch = json_pack("{s:{s:{s:s}}, s:{s:o}}", "metadata", "annotations",
	    PLAN_QUOTA_KEYS_ANNOT, want, "spec", "hard", hp);
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/resourcequotas/"
	    "%s", p->namespace, p->quota_name);
	snprintf(what, sizeof(what), "ResourceQuota %s/%s keys",
	    p->namespace, p->quota_name);
	ret = push(r, "PATCH", "patch", patch, 0, path, what);
	return ret;
}

/* Take our keys out of a quota the plan does not use (or delete ours). */
static int
quota_release(const char *ns, json_t *q, const struct keylist *ours,
    struct rc_actions *r)
{
	const char *name = json_string_value(json_object_get(json_object_get(
	    q, "metadata"), "name")), *k;
	const char *mb = meta_str(q, "labels", PLAN_MANAGED_BY_KEY);
	json_t *hard = json_object_get(json_object_get(q, "spec"), "hard");
	bool mine = mb != NULL && strcmp(mb, PLAN_MANAGED_BY) == 0;
	bool only_ours = true;
	char path[RC_PATH_MAX], what[384];
	json_t *hp, *v, *patch;

	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/resourcequotas/"
	    "%s", ns, name);
	snprintf(what, sizeof(what), "ResourceQuota %s/%s keys", ns, name);
	json_object_foreach(hard, k, v) {
		bool found = false;

		for (int i = 0; i < ours->n && !found; i++)
			found = strcmp(ours->k[i], k) == 0;
		only_ours = only_ours && found;
	}
	if (mine && only_ours)
		return push(r, "DELETE", "delete", NULL, 404, path, what);
	if ((hp = json_object()) == NULL)
		return -ENOMEM;
	for (int i = 0; i < ours->n; i++)
		if (json_object_get(hard, ours->k[i]) != NULL)
			json_object_set_new(hp, ours->k[i], json_null());
	patch = json_pack("{s:{s:{s:n}}, s:{s:o}}", "metadata", "annotations",
	    PLAN_QUOTA_KEYS_ANNOT, "spec", "hard", hp);
	if (patch != NULL && mine)
		json_object_set_new(json_object_get(patch, "metadata"),
		    "labels", json_pack("{s:n}", PLAN_MANAGED_BY_KEY));
	return push(r, "PATCH", "patch", patch, 0, path, what);
}

/* Create the plan's quota with only our keys (and the room). */
static int
quota_create(const struct plan *p, const int *extra, struct rc_actions *r)
{
	char path[RC_PATH_MAX], what[384], v[16];
	json_t *hard = plan_quota_hard(p);

	for (int i = 0; hard != NULL && i < p->nkeys; i++) {
		snprintf(v, sizeof(v), "%d", p->keys[i].value + extra[i]);
		if (json_object_set_new(hard, p->keys[i].name,
		    json_string(v))) {
			json_decref(hard);
			hard = NULL;
		}
	}
	if (hard == NULL)
		return -ENOMEM;
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/resourcequotas",
	    p->namespace);
	snprintf(what, sizeof(what), "ResourceQuota %s/%s", p->namespace,
	    p->quota_name);
	return push(r, "POST", "create", json_pack("{s:s, s:s, s:{s:s, s:s, "
	    "s:{s:s}, s:{s:s}}, s:{s:o}}", "apiVersion", "v1", "kind",
	    "ResourceQuota", "metadata", "name", p->quota_name, "namespace",
	    p->namespace, "labels", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY,
	    "annotations", PLAN_QUOTA_KEYS_ANNOT, p->keys_text, "spec", "hard",
	    hard), 0, path, what);
}

/* Whether q's status.hard holds every key of the plan at its value. */
bool
reconcile_quota_in_force(const struct plan *p, json_t *q)
{
	int none[PLAN_MAX_KEYS] = { 0 };

	return quota_enforced(p, none, q);
}

/*
 * Quota writes for the namespace. ours_only: bring the plan's quota to the
 * plan (and the room), *enforced telling whether its status.hard already
 * shows that. Otherwise: release our keys from every other quota
 * (KubePlus's, or ours of an older name); with a plan this runs only once
 * ours is enforced, so no moment is left without a limit.
 */
static int
quota_diff(const struct plan *p, const struct rc_observed *obs, bool ours_only,
    bool *enforced, struct rc_actions *r)
{
	struct keylist ours;	/* keys_parse sets the first n it counts:
				   no allocation per diff (83 KB) */
	int extra[PLAN_MAX_KEYS];
	bool found = false;
	const char *name;
	size_t i;
	json_t *q;
	int ret = 0;

	if (json_array_size(obs->quotas) > RC_MAX_QUOTAS)
		return -E2BIG;
	if (p != NULL)
		quota_room(p, obs, extra);
	if (enforced != NULL)
		*enforced = false;
	json_array_foreach(obs->quotas, i, q) {
		name = json_string_value(json_object_get(json_object_get(q,
		    "metadata"), "name"));
		if (name == NULL)
			continue;
		keys_parse(meta_str(q, "annotations", PLAN_QUOTA_KEYS_ANNOT),
		    &ours);
		if (p != NULL && strcmp(name, p->quota_name) == 0) {
			found = true;
			if (!ours_only)
				continue;
			ret = quota_update(p, extra, q, &ours, r);
			if (enforced != NULL)
				*enforced = quota_enforced(p, extra, q);
		} else if (!ours_only && meta_str(q, "annotations",
		    PLAN_QUOTA_KEYS_ANNOT) != NULL)
			ret = quota_release(obs->ns, q, &ours, r);
		if (ret < 0)
			break;
	}
	if (ret == 0 && p != NULL && ours_only && !found)
		ret = quota_create(p, extra, r);
	return ret;
}

/* Whether the Namespace already has every annotation of want, no other. */
static bool
ns_annots_equal(json_t *want, json_t *have)
{
	const char *k;

	for (int i = 0; (k = plan_ns_annotation_keys[i]) != NULL; i++) {
		json_t *w = json_object_get(want, k), *h = json_object_get(have,
		    k);

		if (w == NULL ? h != NULL : h == NULL || !json_equal(w, h))
			return false;
	}
	return true;
}

/*
 * Label and annotate the Namespace, or take both away (p NULL). The plain
 * annotations for the admission policy travel in the same patch as the
 * label, and the claim key of the other kind is removed.
 */
static int
ns_diff(const struct plan *p, const struct rc_observed *obs,
    struct rc_actions *r)
{
	char path[RC_PATH_MAX], what[384];
	json_t *patch, *want;
	const char *k;

	snprintf(path, sizeof(path), CORE_API "/namespaces/%s", obs->ns);
	snprintf(what, sizeof(what), "Namespace %s label and annotations",
	    obs->ns);
	if (p != NULL && (want = plan_ns_annotations(p)) == NULL)
		return -ENOMEM;
	if (p == NULL)
		want = json_object();
	if (want == NULL)
		return -ENOMEM;
	if (p != NULL ? obs->ns_isolated && ns_annots_equal(want,
	    obs->ns_annots) : !obs->ns_isolated && ns_annots_equal(want,
	    obs->ns_annots)) {
		json_decref(want);
		return 0;
	}
	for (int i = 0; (k = plan_ns_annotation_keys[i]) != NULL; i++)
		if (json_object_get(want, k) == NULL &&
		    json_object_set_new(want, k, json_null())) {
			json_decref(want);
			return -ENOMEM;
		}
	patch = json_pack("{s:{s:{s:o}, s:o}}", "metadata", "labels",
	    RESOLVED_LABEL, p != NULL ? json_string("true") : json_null(),
	    "annotations", want);
	if (patch == NULL)
		return -ENOMEM;
	return push(r, "PATCH", "patch", patch, 0, path, what);
}

/* The parameter ConfigMap of the admission policies. */
int
reconcile_params(const char *ns, const char *name, const char *non_gpu,
    const char *user, struct rc_actions *r)
{
	char path[RC_PATH_MAX], what[384];
	json_t *data, *obj;
	int ret;

	if ((data = json_pack("{s:s}", RC_PARAMS_CLASSES, non_gpu)) == NULL ||
	    (user != NULL && json_object_set_new(data, RC_PARAMS_USER,
	    json_string(user)))) {
		json_decref(data);
		return -ENOMEM;
	}
	snprintf(what, sizeof(what), "ConfigMap %s/%s", ns, name);
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/configmaps", ns);
	obj = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:O}", "apiVersion",
	    "v1", "kind", "ConfigMap", "metadata", "name", name, "namespace",
	    ns, "labels", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, "data", data);
	if (obj == NULL) {
		json_decref(data);
		return -ENOMEM;
	}
	if ((ret = push(r, "POST", "create", obj, 409, path, what)) < 0) {
		json_decref(data);
		return ret;
	}
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/configmaps/%s",
	    ns, name);
	if ((obj = json_pack("{s:o}", "data", data)) == NULL)
		return -ENOMEM;
	return push(r, "PATCH", "patch", obj, 0, path, what);
}

/* The writes from obs to p (or to nothing of ours), in order. */
int
reconcile_diff(const struct plan *p, const struct rc_observed *obs,
    struct rc_actions *ret)
{
	bool enforced = false, usable = false;
	int r = 0;

	ret->n = 0;
	ret->nimpostors = 0;
	ret->wait = false;
	ret->quota_pending = false;
	if (!obs->ns_exists || obs->ns_terminating)
		return 0;
	if (p != NULL) {
		/*
		 * Quota first, and nothing else until its status.hard shows
		 * it: the claim (which needs its room) and the Namespace
		 * (which lets pods use the claim and the policies' limits)
		 * come only once the quota controller enforces the plan.
		 */
		if ((r = ensure_class(p, obs, ret)) < 0 ||
		    (r = quota_diff(p, obs, true, &enforced, ret)) < 0)
			goto fail;
		if (!enforced) {
			ret->wait = true;
			ret->quota_pending = true;
			return 0;
		}
		/*
		 * A terminating object of the plan's name: an isolated
		 * Namespace keeps naming what it has until it is gone (new
		 * pods would not be scheduled on it); one not yet isolated is
		 * isolated at once (the policies fence it meanwhile).
		 */
		if ((r = ensure_claim(p, obs, ret, &usable)) < 0 ||
		    ((usable || !obs->ns_isolated) &&
		    (r = ns_diff(p, obs, ret)) < 0) ||
		    (r = quota_diff(p, obs, false, NULL, ret)) < 0 ||
		    (usable && (r = remove_stale(p, obs, ret)) < 0))
			goto fail;
	} else {
		if ((r = ns_diff(NULL, obs, ret)) < 0 ||
		    (r = quota_diff(NULL, obs, false, NULL, ret)) < 0 ||
		    (r = remove_stale(NULL, obs, ret)) < 0)
			goto fail;
	}
	return 0;
fail:
	reconcile_actions_clear(ret);
	return r;
}

/* Delete the kpgpud DeviceClasses nothing uses any more. */
int
reconcile_gc_classes(const char *const *names, int n, const char *const *used,
    int nused, struct rc_actions *ret)
{
	char path[RC_PATH_MAX], what[384];
	bool in_use;
	int r;

	ret->n = 0;
	for (int i = 0; i < n; i++) {
		in_use = false;
		for (int j = 0; j < nused && !in_use; j++)
			in_use = strcmp(names[i], used[j]) == 0;
		if (in_use)
			continue;
		snprintf(path, sizeof(path), RES_API "/deviceclasses/%s",
		    names[i]);
		snprintf(what, sizeof(what), "DeviceClass %s", names[i]);
		if ((r = push(ret, "DELETE", "delete", NULL, 404, path,
		    what)) < 0) {
			reconcile_actions_clear(ret);
			return r;
		}
	}
	return 0;
}

/* FNV-1a over several strings, for event names. */
static uint32_t
fnv_strs(const char *const *s, int n)
{
	uint32_t h = FNV1A32_INIT;

	for (int i = 0; i < n; i++)
		h = fnv1a32(fnv1a32(h, s[i]), "\xff");	/* 0xff ends each */
	return h;
}

/* A core/v1 Warning Event on the instance. */
int
reconcile_event(const struct plan_instance *in, const char *rv,
    const char *type, const char *reason, const char *message,
    uint64_t wall_ms, struct rc_action *ret)
{
	const char *parts[] = { in->kind, in->name, in->uid, rv, reason,
	    message };
	const char *ns = in->namespace[0] ? in->namespace : "default";
	char name[PLAN_NAME_MAX + 16], fitted[PLAN_NAME_MAX + 1];
	char ts[32], path[RC_PATH_MAX], what[384];
	struct rc_actions one;
	time_t t = (time_t)(wall_ms / 1000);
	struct tm tm;
	json_t *ev;
	int r;

	if (type == NULL)
		type = "Warning";
	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(name, sizeof(name), "%.230s.%08x", in->name,
	    fnv_strs(parts, 6));
	if (plan_name_fit(name, PLAN_NAME_MAX, fitted, sizeof(fitted)) < 0)
		return -EINVAL;
	ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s}, "
	    "s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:i, s:s}", "apiVersion", "v1",
	    "kind", "Event", "metadata", "name", fitted, "namespace", ns,
	    "involvedObject", "apiVersion", in->api_version, "kind", in->kind,
	    "name", in->name, "uid", in->uid, "reason", reason, "message",
	    message, "type", type, "source", "component", "kpgpud-quota",
	    "firstTimestamp", ts, "lastTimestamp", ts, "count", 1,
	    "reportingComponent", "kpgpud-quota");
	if (ev != NULL && in->namespace[0] != '\0')
		json_object_set_new(json_object_get(ev, "involvedObject"),
		    "namespace", json_string(in->namespace));
	/* the version reported on (kpgpuctl status tells a current result
	   from a stale one); the policies' reports seed with their uid */
	if (ev != NULL && *rv != '\0' && strcmp(rv, in->uid) != 0)
		json_object_set_new(json_object_get(ev, "involvedObject"),
		    "resourceVersion", json_string(rv));
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/events", ns);
	snprintf(what, sizeof(what), "%s %s on %s/%s: %s", type, reason,
	    in->kind, in->name, message);
	one.n = 0;
	if ((r = push(&one, "POST", "create", ev, 409, path, what)) < 0)
		return r;
	*ret = one.a[0];
	return 0;
}

/* Free every body. */
void
reconcile_actions_clear(struct rc_actions *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->a[i].body);
	a->n = 0;
}
