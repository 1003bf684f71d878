/* SPDX-License-Identifier: Apache-2.0 */
/* The admission policies of --admission-policies: see policies.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kube/yamljson.h"
#include "kpgpud-quota/policies.h"
#include "kpgpud-quota/reconcile.h"

/* The kinds applied, with their collections under POLICIES_API. */
static const struct {
	const char	*kind;
	const char	*resource;
	bool		 mutating;
} kinds[] = {
	{ "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false },
	{ "ValidatingAdmissionPolicyBinding",
	    "validatingadmissionpolicybindings", false },
	{ "MutatingAdmissionPolicy", POLICIES_MAP_RESOURCE, true },
	{ "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings",
	    true },
};

/*
 * Members the API server sets when absent, with the value it sets: an
 * observed member of that name with that value is not a change.
 */
static const struct {
	const char	*name;
	const char	*value;
} server_defaults[] = {
	{ "matchPolicy", "Equivalent" },	/* matchConstraints */
	{ "scope", "*" },			/* resourceRules[] */
	{ "failurePolicy", "Fail" },
	{ "parameterNotFoundAction", "Deny" },
};

/* Append a reason to why ("a; b"), as far as it fits. */
__attribute__((format(printf, 3, 4)))
static void
why_add(char *why, size_t len, const char *fmt, ...)
{
	size_t used;
	va_list ap;

	if (why == NULL || len == 0)
		return;
	used = strlen(why);
	if (used + 3 >= len)
		return;
	if (used > 0) {
		memcpy(why + used, "; ", 3);
		used += 2;
	}
	va_start(ap, fmt);
	vsnprintf(why + used, len - used, fmt, ap);
	va_end(ap);
}

/* Whether an observed member want lacks is the server's and harmless. */
static bool
added_by_server(const char *name, json_t *v)
{
	if (reconcile_json_empty(v))
		return true;
	if (!json_is_string(v))
		return false;
	for (size_t i = 0; i < nitems(server_defaults); i++)
		if (strcmp(name, server_defaults[i].name) == 0 &&
		    strcmp(json_string_value(v), server_defaults[i].value) == 0)
			return true;
	return false;
}

/* want and have equal but for what the server adds; where in why. */
static bool
same_value(json_t *want, json_t *have, const char *at, int depth,
    char *why, size_t whylen)
{
	char sub[160];
	const char *k;
	json_t *v;
	size_t i;

	if (depth > 32 || have == NULL || want == NULL ||
	    json_typeof(want) != json_typeof(have)) {
		why_add(why, whylen, "%s differs", at);
		return false;
	}
	if (json_is_object(want)) {
		bool same = true;

		json_object_foreach(want, k, v) {
			snprintf(sub, sizeof(sub), "%s.%s", at, k);
			if (!same_value(v, json_object_get(have, k), sub,
			    depth + 1, why, whylen))
				same = false;
		}
		json_object_foreach(have, k, v)
			if (json_object_get(want, k) == NULL &&
			    !added_by_server(k, v)) {
				why_add(why, whylen, "%s.%s added", at, k);
				same = false;
			}
		return same;
	}
	if (json_is_array(want)) {
		if (json_array_size(want) != json_array_size(have)) {
			why_add(why, whylen, "%s has %zu entries, not %zu", at,
			    json_array_size(have), json_array_size(want));
			return false;
		}
		json_array_foreach(want, i, v) {
			snprintf(sub, sizeof(sub), "%s[%zu]", at, i);
			if (!same_value(v, json_array_get(have, i), sub,
			    depth + 1, why, whylen))
				return false;
		}
		return true;
	}
	if (!json_equal(want, have)) {
		why_add(why, whylen, "%s differs", at);
		return false;
	}
	return true;
}

/* Whether every member of map want is in have with the same value. */
static bool
same_map(json_t *want, json_t *have, const char *what, char *why,
    size_t whylen)
{
	const char *k;
	json_t *v;
	bool same = true;

	json_object_foreach(want, k, v)
		if (!json_equal(v, json_object_get(have, k))) {
			why_add(why, whylen, "%s %s differs", what, k);
			same = false;
		}
	return same;
}

/* Whether have is still want; see policies.h. */
bool
policies_same(const json_t *want, const json_t *have, char *why,
    size_t whylen)
{
	json_t *wm = json_object_get(want, "metadata");
	json_t *hm = json_object_get(have, "metadata");
	bool same;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	same = same_value(json_object_get(want, "spec"),
	    json_object_get(have, "spec"), "spec", 0, why, whylen);
	if (!same_map(json_object_get(wm, "labels"), json_object_get(hm,
	    "labels"), "label", why, whylen))
		same = false;
	if (!same_map(json_object_get(wm, "annotations"), json_object_get(hm,
	    "annotations"), "annotation", why, whylen))
		same = false;
	return same;
}

/* The body of a PUT restoring want over have; see policies.h. */
char *
policies_update_body(const json_t *want, const json_t *have)
{
	const char *rv = json_string_value(json_object_get(json_object_get(
	    have, "metadata"), "resourceVersion"));
	json_t *o = json_deep_copy(want), *md;
	char *s = NULL;

	if (o == NULL)
		return NULL;
	md = json_object_get(o, "metadata");
	if (rv != NULL && json_object_set_new(md, "resourceVersion",
	    json_string(rv)) < 0)
		goto out;
	s = json_dumps(o, JSON_COMPACT);
out:
	json_decref(o);
	return s;
}

/* The body of a POST of want; see policies.h. */
char *
policies_create_body(const json_t *want)
{
	return json_dumps(want, JSON_COMPACT);
}

/* Whether a map (labels, annotations) is absent or holds only strings. */
static bool
string_map(json_t *m)
{
	const char *k;
	json_t *v;

	if (m == NULL)
		return true;
	if (!json_is_object(m))
		return false;
	json_object_foreach(m, k, v)
		if (!json_is_string(v))
			return false;
	return true;
}

/* Check one document and add it to p (or skip it). */
static int
add_doc(struct policies *p, json_t *doc, int i, char *err, size_t errlen)
{
	const char *av = json_string_value(json_object_get(doc, "apiVersion"));
	const char *kind = json_string_value(json_object_get(doc, "kind"));
	json_t *md = json_object_get(doc, "metadata"), *spec, *obj;
	const char *name = json_string_value(json_object_get(md, "name"));
	struct policy_obj *o;
	char b[RESOLVED_MSG_MAX + 4], bk[RESOLVED_MSG_MAX + 4];
	size_t ki;

	if (!json_is_object(doc) || kind == NULL || av == NULL) {
		seterr(err, errlen, "document %d: not a Kubernetes object "
		    "(apiVersion and kind)", i + 1);
		return -EINVAL;
	}
	if (strcmp(av, "v1") == 0 && strcmp(kind, "ConfigMap") == 0) {
		p->nskipped++;
		return 0;
	}
	for (ki = 0; ki < nitems(kinds); ki++)
		if (strcmp(kind, kinds[ki].kind) == 0)
			break;
	if (strcmp(av, POLICIES_API_VERSION) != 0 || ki == nitems(kinds)) {
		seterr(err, errlen, "document %d: %s %s is not an admission "
		    "policy or binding of " POLICIES_API_VERSION, i + 1,
		    resolved_msg_str(b, av), resolved_msg_str(bk, kind));
		return -EINVAL;
	}
	if (name == NULL || !dns1123_subdomain_valid(name)) {
		seterr(err, errlen, "document %d: %s without a valid "
		    "metadata.name", i + 1, kind);
		return -EINVAL;
	}
	if (!json_is_object(spec = json_object_get(doc, "spec"))) {
		seterr(err, errlen, "%s %s: no spec", kind, name);
		return -EINVAL;
	}
	if (!string_map(json_object_get(md, "labels")) ||
	    !string_map(json_object_get(md, "annotations"))) {
		seterr(err, errlen, "%s %s: labels and annotations must be "
		    "strings", kind, name);
		return -EINVAL;
	}
	for (int j = 0; j < p->n; j++)
		if (strcmp(p->o[j].kind, kind) == 0 &&
		    strcmp(p->o[j].name, name) == 0) {
			seterr(err, errlen, "%s %s appears twice", kind, name);
			return -EINVAL;
		}
	if (p->n >= POLICIES_MAX) {
		seterr(err, errlen, "more than %d policies and bindings",
		    POLICIES_MAX);
		return -EINVAL;
	}
	obj = json_pack("{s:s, s:s, s:{s:s}, s:O}", "apiVersion", av, "kind",
	    kind, "metadata", "name", name, "spec", spec);
	if (obj == NULL)
		return -ENOMEM;
	if (json_object_get(md, "labels") != NULL)
		json_object_set(json_object_get(obj, "metadata"), "labels",
		    json_object_get(md, "labels"));
	if (json_object_get(md, "annotations") != NULL)
		json_object_set(json_object_get(obj, "metadata"), "annotations",
		    json_object_get(md, "annotations"));
	o = &p->o[p->n++];
	o->obj = obj;
	o->kind = kinds[ki].kind;
	o->mutating = kinds[ki].mutating;
	p->nmutating += o->mutating;
	snprintf(o->name, sizeof(o->name), "%s", name);
	snprintf(o->collection, sizeof(o->collection), POLICIES_API "/%s",
	    kinds[ki].resource);
	snprintf(o->item, sizeof(o->item), POLICIES_API "/%s/%s",
	    kinds[ki].resource, name);
	return 0;
}

/* Parse and check a policy file's text; see policies.h. */
int
policies_parse(const char *buf, size_t len, struct policies **ret,
    char *err, size_t errlen)
{
	struct policies *p;
	json_t *docs, *d;
	size_t i;
	int r;

	if ((r = yamljson_parse(buf, len, &docs, err, errlen)) < 0)
		return r;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		json_decref(docs);
		return -ENOMEM;
	}
	json_array_foreach(docs, i, d) {
		/* a List (kubectl get -o yaml) holds its objects in items */
		json_t *items = json_object_get(d, "items"), *e;
		size_t j;

		if (json_is_array(items) && json_object_get(d, "spec") == NULL) {
			json_array_foreach(items, j, e)
				if ((r = add_doc(p, e, (int)i, err,
				    errlen)) < 0)
					goto fail;
			continue;
		}
		if ((r = add_doc(p, d, (int)i, err, errlen)) < 0)
			goto fail;
	}
	json_decref(docs);
	if (p->n == 0) {
		seterr(err, errlen, "no admission policy or binding in it");
		policies_free(p);
		return -EINVAL;
	}
	*ret = p;
	return 0;
fail:
	json_decref(docs);
	policies_free(p);
	return r;
}

/* Read and parse a policy file; see policies.h. */
int
policies_load(const char *path, struct policies **ret, char *err,
    size_t errlen)
{
	char *buf;
	size_t len;
	int r;

	if ((r = read_file_capped(path, POLICIES_MAX_FILE, &buf, &len)) < 0) {
		seterr(err, errlen, "%s", r == -EFBIG ? "larger than 1 MiB" :
		    strerror(-r));
		return r == -EFBIG ? -EINVAL : r;
	}
	r = policies_parse(buf, len, ret, err, errlen);
	free(buf);
	return r;
}

/* Parse an --injection value; see policies.h. */
int
policies_injection_parse(const char *s, enum policies_injection *ret)
{
	static const char *const names[] = { "webhook", "policy", "auto" };

	for (size_t i = 0; s != NULL && i < nitems(names); i++)
		if (strcmp(s, names[i]) == 0) {
			*ret = (enum policies_injection)i;
			return 0;
		}
	return -EINVAL;
}

/* The name of an injection mode, as --injection spells it. */
const char *
policies_injection_name(enum policies_injection m)
{
	return m == POLICIES_INJECT_POLICY ? "policy" :
	    m == POLICIES_INJECT_AUTO ? "auto" : "webhook";
}

/* Whether discovery lists mutatingadmissionpolicies; see policies.h. */
bool
policies_serves_map(const json_t *discovery)
{
	json_t *res = json_object_get(discovery, "resources"), *r;
	size_t i;

	if (!json_is_array(res))
		return false;
	json_array_foreach(res, i, r) {
		const char *n = json_string_value(json_object_get(r, "name"));

		if (n != NULL && strcmp(n, POLICIES_MAP_RESOURCE) == 0)
			return true;
	}
	return false;
}

/* Whether kpgpud-quota made the object; see policies.h. */
bool
policies_managed(const json_t *have)
{
	const char *v = json_string_value(json_object_get(json_object_get(
	    json_object_get(have, "metadata"), "labels"),
	    POLICIES_MANAGED_LABEL));

	return v != NULL && strcmp(v, POLICIES_MANAGED_VALUE) == 0;
}

/* Free what policies_parse made; NULL is fine. */
void
policies_free(struct policies *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < p->n; i++)
		json_decref(p->o[i].obj);
	free(p);
}
