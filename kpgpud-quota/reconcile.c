/*
 * Reconcile, the pure half: plan + observed -> ordered writes. Nothing here
 * does I/O; quota.c runs the writes one after another and stops at the
 * first failure, so a later step never runs before an earlier one is done
 * (the Namespace is labelled only once the claim and the quota exist).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-quota/reconcile.h"

#define RES_API		"/apis/resource.k8s.io/v1"
#define CORE_API	"/api/v1"
#define KEYS_MAX	(PLAN_MAX_KEYS + 8)
#define KEYS_LEN	(KEYS_MAX * (PLAN_KEY_MAX + 1))

/* Whether want is contained in have (objects by member, arrays by index). */
bool
reconcile_json_subset(json_t *want, json_t *have)
{
	const char *k;
	json_t *v;
	size_t i;

	if (want == NULL)
		return true;
	if (have == NULL)
		return false;
	if (json_is_object(want)) {
		if (!json_is_object(have))
			return false;
		json_object_foreach(want, k, v)
			if (!reconcile_json_subset(v, json_object_get(have, k)))
				return false;
		return true;
	}
	if (json_is_array(want)) {
		if (!json_is_array(have) ||
		    json_array_size(want) != json_array_size(have))
			return false;
		json_array_foreach(want, i, v)
			if (!reconcile_json_subset(v, json_array_get(have, i)))
				return false;
		return true;
	}
	return json_equal(want, have);
}

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

/* want and have equal, but for empty members only have has. */
static bool
spec_equal(json_t *want, json_t *have, int depth)
{
	const char *k;
	json_t *v;
	size_t i;

	if (want == NULL || have == NULL || depth > 32)
		return want == have;
	if (json_is_object(want)) {
		if (!json_is_object(have))
			return false;
		json_object_foreach(want, k, v)
			if (!spec_equal(v, json_object_get(have, k), depth + 1))
				return false;
		json_object_foreach(have, k, v)
			if (json_object_get(want, k) == NULL &&
			    !json_empty(v))
				return false;
		return true;
	}
	if (json_is_array(want)) {
		if (!json_is_array(have) ||
		    json_array_size(want) != json_array_size(have))
			return false;
		json_array_foreach(want, i, v)
			if (!spec_equal(v, json_array_get(have, i), depth + 1))
				return false;
		return true;
	}
	return json_equal(want, have);
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
	same = spec_equal(json_object_get(want, "spec"),
	    json_object_get(have, "spec"), 0);
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
	char *s;

	if (o == NULL)
		return NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
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
		a->body = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
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
    struct rc_actions *r)
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
	if (o == NULL)
		return push_create(r, p->claim, kind, coll, item, what);
	deleting = json_object_get(o->data, "deletionTimestamp") != NULL;
	v = reconcile_verdict(p->claim, o->data, why, sizeof(why));
	if (v == RC_IMPOSTOR)
		note_impostor(r, what, o->uid, why, deleting);
	if (deleting) {
		/* in use: it goes when its last pod does; then ours comes */
		r->wait = true;
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

/* The record of the plan's keys: "k1,k2,...". */
static void
keys_join(const struct plan *p, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (int i = 0; i < p->nkeys; i++)
		o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s",
		    i ? "," : "", p->keys[i].name);
}

/* A string member of metadata.<map> of obj, or NULL. */
static const char *
meta_str(json_t *obj, const char *map, const char *key)
{
	return json_string_value(json_object_get(json_object_get(
	    json_object_get(obj, "metadata"), map), key));
}

/* Bring the plan's quota to the plan's keys, removing our old ones. */
static int
quota_update(const struct plan *p, json_t *q, const struct keylist *ours,
    struct rc_actions *r)
{
	char v[16], path[RC_PATH_MAX], what[384], *want;
	json_t *hard = json_object_get(json_object_get(q, "spec"), "hard");
	json_t *hp, *patch;
	const char *have, *rec = meta_str(q, "annotations",
	    PLAN_QUOTA_KEYS_ANNOT);
	int ret;

	if ((hp = json_object()) == NULL)
		return -ENOMEM;
	if ((want = malloc(KEYS_LEN)) == NULL) {
		json_decref(hp);
		return -ENOMEM;
	}
	for (int i = 0; i < p->nkeys; i++) {
		snprintf(v, sizeof(v), "%d", p->keys[i].value);
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
	keys_join(p, want, KEYS_LEN);
	if (json_object_size(hp) == 0 && rec != NULL &&
	    strcmp(rec, want) == 0) {
		json_decref(hp);
		free(want);
		return 0;
	}
	patch = json_pack("{s:{s:{s:s}}, s:{s:o}}", "metadata", "annotations",
	    PLAN_QUOTA_KEYS_ANNOT, want, "spec", "hard", hp);
	free(want);
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

/* Create the plan's quota with only our keys. */
static int
quota_create(const struct plan *p, struct rc_actions *r)
{
	char path[RC_PATH_MAX], what[384], *want;
	json_t *hard = plan_quota_hard(p);
	int ret;

	if (hard == NULL || (want = malloc(KEYS_LEN)) == NULL) {
		json_decref(hard);
		return -ENOMEM;
	}
	keys_join(p, want, KEYS_LEN);
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/resourcequotas",
	    p->namespace);
	snprintf(what, sizeof(what), "ResourceQuota %s/%s", p->namespace,
	    p->quota_name);
	ret = push(r, "POST", "create", json_pack("{s:s, s:s, s:{s:s, s:s, "
	    "s:{s:s}, s:{s:s}}, s:{s:o}}", "apiVersion", "v1", "kind",
	    "ResourceQuota", "metadata", "name", p->quota_name, "namespace",
	    p->namespace, "labels", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY,
	    "annotations", PLAN_QUOTA_KEYS_ANNOT, want, "spec", "hard", hard),
	    0, path, what);
	free(want);
	return ret;
}

/* Whether q's status.hard holds every key of the plan at its value. */
bool
reconcile_quota_in_force(const struct plan *p, json_t *q)
{
	json_t *hard = json_object_get(json_object_get(q, "status"), "hard");
	const char *have;
	char v[16];

	for (int i = 0; i < p->nkeys; i++) {
		snprintf(v, sizeof(v), "%d", p->keys[i].value);
		have = json_string_value(json_object_get(hard,
		    p->keys[i].name));
		if (have == NULL || strcmp(have, v) != 0)
			return false;
	}
	return true;
}

/* The observed quota of the given name, or NULL. */
static json_t *
quota_named(const struct rc_observed *obs, const char *name)
{
	const char *n;
	size_t i;
	json_t *q;

	json_array_foreach(obs->quotas, i, q) {
		n = json_string_value(json_object_get(json_object_get(q,
		    "metadata"), "name"));
		if (n != NULL && strcmp(n, name) == 0)
			return q;
	}
	return NULL;
}

/*
 * Quota writes for the namespace: ours updated, our keys released from
 * every other quota (KubePlus's, or ours of an older name). With a plan,
 * keys move: the other quotas keep them until the quota controller shows
 * ours in force (status.hard at the planned values), so no moment is
 * left without a limit; until then the namespace is looked at again.
 */
static int
quota_diff(const struct plan *p, const struct rc_observed *obs,
    struct rc_actions *r)
{
	struct keylist *ours;
	json_t *q, *own = NULL;
	bool in_force = true;
	const char *name;
	size_t i;
	int ret = 0;

	if (json_array_size(obs->quotas) > RC_MAX_QUOTAS)
		return -E2BIG;
	if ((ours = calloc(1, sizeof(*ours))) == NULL)
		return -ENOMEM;
	if (p != NULL) {
		own = quota_named(obs, p->quota_name);
		in_force = own != NULL && reconcile_quota_in_force(p, own);
	}
	json_array_foreach(obs->quotas, i, q) {
		name = json_string_value(json_object_get(json_object_get(q,
		    "metadata"), "name"));
		if (name == NULL)
			continue;
		keys_parse(meta_str(q, "annotations", PLAN_QUOTA_KEYS_ANNOT),
		    ours);
		if (q == own)
			ret = quota_update(p, q, ours, r);
		else if (meta_str(q, "annotations",
		    PLAN_QUOTA_KEYS_ANNOT) == NULL)
			continue;
		else if (in_force)
			ret = quota_release(obs->ns, q, ours, r);
		else
			r->wait = true;
		if (ret < 0)
			break;
	}
	free(ours);
	if (ret == 0 && p != NULL && own == NULL)
		ret = quota_create(p, r);
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
	int r = 0;

	ret->n = 0;
	ret->nimpostors = 0;
	ret->wait = false;
	if (!obs->ns_exists || obs->ns_terminating)
		return 0;
	if (p != NULL) {
		if ((r = ensure_class(p, obs, ret)) < 0 ||
		    (r = ensure_claim(p, obs, ret)) < 0 ||
		    (r = remove_stale(p, obs, ret)) < 0 ||
		    (r = quota_diff(p, obs, ret)) < 0 ||
		    (r = ns_diff(p, obs, ret)) < 0)
			goto fail;
	} else {
		if ((r = ns_diff(NULL, obs, ret)) < 0 ||
		    (r = quota_diff(NULL, obs, ret)) < 0 ||
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
    const char *reason, const char *message, uint64_t wall_ms,
    struct rc_action *ret)
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
	    message, "type", "Warning", "source", "component", "kpgpud-quota",
	    "firstTimestamp", ts, "lastTimestamp", ts, "count", 1,
	    "reportingComponent", "kpgpud-quota");
	if (ev != NULL && in->namespace[0] != '\0')
		json_object_set_new(json_object_get(ev, "involvedObject"),
		    "namespace", json_string(in->namespace));
	snprintf(path, sizeof(path), CORE_API "/namespaces/%s/events", ns);
	snprintf(what, sizeof(what), "Warning %s on %s/%s: %s", reason,
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
