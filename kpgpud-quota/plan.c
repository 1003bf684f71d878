/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan: instance + annotation + configuration -> desired objects, quota
 * keys and Namespace metadata. Pure; every name is deterministic and DNS
 * valid, every CEL expression guards the optional attributes it reads, and
 * every user string that reaches CEL has been restricted to a quote-free
 * character set by annotation.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-quota/plan.h"

#define CLASS_NAME_MAX	PLAN_CLASS_NAME_MAX	/* + ".deviceclass.resource..." */
#define ATTRS		"device.attributes['" PLAN_DRIVER "']"
#define CAPS		"device.capacity['" PLAN_DRIVER "']"

/* Copy src into dst of dstlen bytes, cut if need be. */
static void
scopy(char *dst, size_t dstlen, const char *src)
{
	size_t n = strlen(src);

	if (n >= dstlen)
		n = dstlen - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Keep names short: cut long ones and add a hash of the whole name. */
int
plan_name_fit(const char *name, size_t max, char *out, size_t outlen)
{
	size_t len = strlen(name), keep;

	if (len <= max) {
		if (outlen <= len)
			return -EINVAL;
		memcpy(out, name, len + 1);
		return 0;
	}
	if (max < 10 || outlen <= max)
		return -EINVAL;
	keep = max - 9;
	while (keep > 0 && (name[keep - 1] == '-' || name[keep - 1] == '.'))
		keep--;
	memcpy(out, name, keep);
	snprintf(out + keep, outlen - keep, "-%08x", fnv1a32(FNV1A32_INIT, name));
	return 0;
}

/* Lower-case s and turn anything outside [a-z0-9-] into a dash. */
static void
labelize(const char *s, char *out, size_t outlen)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < outlen; i++) {
		unsigned char ch = (unsigned char)tolower((unsigned char)s[i]);
		out[i] = (islower(ch) || isdigit(ch)) ? ch : '-';
	}
	out[i] = '\0';
}

/* Copy a string member of obj into buf; absent is "" unless required. */
static int
get_member(json_t *obj, const char *key, bool required, char *buf,
    size_t buflen, char *err, size_t errlen)
{
	json_t *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v)) {
		if (required)
			return seterr(err, errlen, "instance has no %s", key);
		buf[0] = '\0';
		return 0;
	}
	if (!json_is_string(v))
		return seterr(err, errlen, "instance %s is not a string", key);
	if (json_string_length(v) >= buflen ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return seterr(err, errlen, "instance %s is too long", key);
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/* Copy the gpu-isolation annotation, if any, into the instance. */
static int
get_annotation(json_t *meta, struct plan_instance *pi, char *err,
    size_t errlen)
{
	json_t *ann = json_object_get(meta, "annotations"), *v;
	size_t n;

	if (ann == NULL || json_is_null(ann))
		return 0;
	if (!json_is_object(ann))
		return seterr(err, errlen, "instance annotations are not a map");
	if ((v = json_object_get(ann, ANNOTATION_KEY)) == NULL)
		return 0;
	if (!json_is_string(v))
		return seterr(err, errlen, "annotation %s is not a string",
		    ANNOTATION_KEY);
	pi->has_annotation = true;
	pi->annotation_len = json_string_length(v);
	n = pi->annotation_len > ANNOTATION_MAX_LEN ? ANNOTATION_MAX_LEN :
	    pi->annotation_len;
	memcpy(pi->annotation, json_string_value(v), n);
	pi->annotation[n] = '\0';
	return 0;
}

/* Check that a kind is a CamelCase identifier. */
static bool
kind_valid(const char *s)
{
	if (!isalpha((unsigned char)s[0]))
		return false;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s))
			return false;
	return true;
}

/* Read the instance's identity and annotation from a decoded object. */
int
plan_instance_from_json(json_t *obj, struct plan_instance *ret, char *err,
    size_t errlen)
{
	struct plan_instance *pi;
	json_t *meta;
	int r = -EINVAL;

	if (!json_is_object(obj))
		return seterr(err, errlen, "instance is not a JSON object");
	meta = json_object_get(obj, "metadata");
	if (!json_is_object(meta))
		return seterr(err, errlen, "instance has no metadata");
	if ((pi = calloc(1, sizeof(*pi))) == NULL)
		return -ENOMEM;
	if (get_member(obj, "apiVersion", true, pi->api_version,
	    sizeof(pi->api_version), err, errlen) < 0 ||
	    get_member(obj, "kind", true, pi->kind, sizeof(pi->kind), err,
	    errlen) < 0 ||
	    get_member(meta, "name", true, pi->name, sizeof(pi->name), err,
	    errlen) < 0 ||
	    get_member(meta, "namespace", false, pi->namespace,
	    sizeof(pi->namespace), err, errlen) < 0 ||
	    get_member(meta, "uid", false, pi->uid, sizeof(pi->uid), err,
	    errlen) < 0 ||
	    get_member(meta, "creationTimestamp", false, pi->created,
	    sizeof(pi->created), err, errlen) < 0 ||
	    get_annotation(meta, pi, err, errlen) < 0)
		goto fail;
	if (!kind_valid(pi->kind)) {
		seterr(err, errlen, "instance kind is not an identifier");
		goto fail;
	}
	if (!dns1123_subdomain_valid(pi->name)) {
		seterr(err, errlen, "instance name is not a DNS subdomain");
		goto fail;
	}
	*ret = *pi;
	r = 0;
fail:
	free(pi);
	return r;
}

/* Read an instance from JSON text. */
int
plan_instance_parse(const char *json, size_t len, struct plan_instance *ret,
    char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *obj;
	int r;

	obj = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (obj == NULL)
		return seterr(err, errlen, "instance is not JSON: line %d "
		    "column %d: %s", jerr.line, jerr.column, jerr.text);
	r = plan_instance_from_json(obj, ret, err, errlen);
	json_decref(obj);
	return r;
}

/* Older creationTimestamp first (RFC 3339 UTC sorts as text), then names. */
int
plan_instance_cmp(const struct plan_instance *a,
    const struct plan_instance *b)
{
	int r;

	if (a->created[0] != '\0' && b->created[0] == '\0')
		return -1;
	if (a->created[0] == '\0' && b->created[0] != '\0')
		return 1;
	if ((r = strcmp(a->created, b->created)) != 0)
		return r;
	if ((r = strcmp(a->kind, b->kind)) != 0 ||
	    (r = strcmp(a->name, b->name)) != 0 ||
	    (r = strcmp(a->namespace, b->namespace)) != 0)
		return r;
	return strcmp(a->uid, b->uid);
}

/* Expand {kind} and {name} in the quota name template. */
static int
quota_name(const char *tmpl, const char *kind_lc, const char *name,
    char *out, size_t outlen, char *err, size_t errlen)
{
	char buf[1024];
	size_t o = 0, n;
	const char *s, *sub;

	for (s = tmpl; *s != '\0';) {
		sub = NULL;
		if (strncmp(s, "{kind}", 6) == 0)
			sub = kind_lc, n = 6;
		else if (strncmp(s, "{name}", 6) == 0)
			sub = name, n = 6;
		if (sub != NULL) {
			if (o + strlen(sub) >= sizeof(buf))
				goto toolong;
			memcpy(buf + o, sub, strlen(sub));
			o += strlen(sub);
			s += n;
		} else {
			if (o + 1 >= sizeof(buf))
				goto toolong;
			buf[o++] = *s++;
		}
	}
	buf[o] = '\0';
	if (plan_name_fit(buf, PLAN_NAME_MAX, out, outlen) < 0 ||
	    !dns1123_subdomain_valid(out))
		return seterr(err, errlen, "quota name template \"%s\" gives "
		    "an invalid name", tmpl);
	return 0;
toolong:
	return seterr(err, errlen, "quota name template gives a name that is "
	    "too long");
}

/* Metadata for an object in the tenant namespace, with owner reference. */
static json_t *
ns_metadata(const struct plan_instance *in, const struct plan_config *cfg,
    const struct plan *p, const char *name, const char *inst_label)
{
	json_t *m, *ref;

	m = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "name", name,
	    "namespace", p->namespace, "labels", PLAN_MANAGED_BY_KEY,
	    PLAN_MANAGED_BY, PLAN_INSTANCE_LABEL, inst_label, "annotations",
	    PLAN_INSTANCE_ANNOT, p->instance_ref);
	if (m == NULL)
		return NULL;
	/* a namespaced owner must live in the same namespace */
	if (!cfg->owner_refs || in->uid[0] == '\0' ||
	    (in->namespace[0] != '\0' &&
	    strcmp(in->namespace, p->namespace) != 0))
		return m;
	ref = json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion",
	    in->api_version, "kind", in->kind, "name", in->name, "uid",
	    in->uid, "controller", 1);
	if (ref == NULL || json_object_set_new(m, "ownerReferences", ref)) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/* Append one CEL selector to an array. */
static int
add_cel(json_t *arr, const char *fmt, ...)
{
	char expr[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(expr, sizeof(expr), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(expr))
		return -EINVAL;
	return json_array_append_new(arr, json_pack("{s:{s:s}}", "cel",
	    "expression", expr)) ? -ENOMEM : 0;
}

/* Request selectors for the optional productName and minMemory. */
static json_t *
request_selectors(const struct annotation *a)
{
	json_t *sel = json_array();

	if (sel == NULL)
		return NULL;
	if (a->product_name[0] != '\0' && add_cel(sel,
	    "'productName' in " ATTRS " && " ATTRS ".productName == '%s'",
	    a->product_name) < 0)
		goto fail;
	if (a->min_memory[0] != '\0' && add_cel(sel,
	    "'memory' in " CAPS " && " CAPS ".memory.compareTo("
	    "quantity('%s')) >= 0", a->min_memory) < 0)
		goto fail;
	return sel;
fail:
	json_decref(sel);
	return NULL;
}

/* The NVIDIA GpuConfig sharing settings of time-slicing and mps. */
static json_t *
gpu_sharing(const struct annotation *a)
{
	json_t *sh, *cfg;
	const char *iv;

	if (a->sharing == ANNOTATION_SHARING_TIME_SLICING) {
		sh = json_pack("{s:s}", "strategy", "TimeSlicing");
		iv = annotation_interval_name(a->interval);
		if (sh != NULL && iv != NULL && json_object_set_new(sh,
		    "timeSlicingConfig", json_pack("{s:s}", "interval", iv)))
			goto fail;
		return sh;
	}
	sh = json_pack("{s:s}", "strategy", "MPS");
	if (sh == NULL || (a->mps_thread_pct == 0 && !a->mps_pinned_mem[0]))
		return sh;
	if ((cfg = json_object()) == NULL ||
	    json_object_set_new(sh, "mpsConfig", cfg))
		goto fail;
	if (a->mps_thread_pct != 0 && json_object_set_new(cfg,
	    "defaultActiveThreadPercentage",
	    json_integer(a->mps_thread_pct)))
		goto fail;
	if (a->mps_pinned_mem[0] != '\0' && json_object_set_new(cfg,
	    "defaultPinnedDeviceMemoryLimit",
	    json_string(a->mps_pinned_mem)))
		goto fail;
	return sh;
fail:
	json_decref(sh);
	return NULL;
}

/* The opaque config entry carrying a GpuConfig for the request. */
static json_t *
opaque_config(const struct annotation *a)
{
	json_t *sh = gpu_sharing(a);

	if (sh == NULL)
		return NULL;
	return json_pack("[{s:[s], s:{s:s, s:{s:s, s:s, s:o}}}]", "requests",
	    PLAN_REQUEST, "opaque", "driver", PLAN_DRIVER, "parameters",
	    "apiVersion", "resource.nvidia.com/v1beta1", "kind", "GpuConfig",
	    "sharing", sh);
}

/* The ResourceClaimSpec: one request, optional constraint and config. */
static json_t *
claim_spec(const struct plan *p)
{
	const struct annotation *a = &p->annot;
	json_t *exactly, *devices, *sel;
	const char *attr = annotation_topology_attr(a->topology);

	if ((sel = request_selectors(a)) == NULL)
		return NULL;
	exactly = json_pack("{s:s, s:s, s:i}", "deviceClassName",
	    p->class_name, "allocationMode", "ExactCount", "count",
	    a->devices_per_pod);
	if (exactly == NULL || (json_array_size(sel) > 0 &&
	    json_object_set(exactly, "selectors", sel))) {
		json_decref(sel);
		json_decref(exactly);
		return NULL;
	}
	json_decref(sel);
	devices = json_pack("{s:[{s:s, s:o}]}", "requests", "name",
	    PLAN_REQUEST, "exactly", exactly);
	if (devices == NULL)
		return NULL;
	if (attr != NULL && a->devices_per_pod > 1 && json_object_set_new(
	    devices, "constraints", json_pack("[{s:[s], s:s}]", "requests",
	    PLAN_REQUEST, "matchAttribute", attr)))
		goto fail;
	/*
	 * A GpuConfig only where a setting needs one (plan_check_gates let
	 * it through): a shared claim without config is time-shared by a
	 * default driver, and a sharing config needs a driver gate.
	 */
	if ((a->sharing == ANNOTATION_SHARING_MPS ||
	    (a->sharing == ANNOTATION_SHARING_TIME_SLICING &&
	    a->interval != ANNOTATION_INTERVAL_UNSET)) &&
	    json_object_set_new(devices, "config", opaque_config(a)))
		goto fail;
	return json_pack("{s:o}", "devices", devices);
fail:
	json_decref(devices);
	return NULL;
}

/*
 * The shared claim's name: its base and a hash of the canonical spec
 * (compact JSON, sorted keys), so equal specs give equal names.
 */
static int
shared_claim_name(struct plan *p, json_t *spec)
{
	char *canon = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);

	if (canon == NULL)
		return -ENOMEM;
	snprintf(p->claim_name, sizeof(p->claim_name), "%s-%08x",
	    p->claim_base, fnv1a32(FNV1A32_INIT, canon));
	free(canon);
	return 0;
}

/* Whether name is one of the tenant's other shared-claim names. */
bool
plan_claim_old_name(const struct plan *p, const char *name)
{
	size_t n = strlen(p->claim_base);

	if (strcmp(name, p->claim_name) == 0)
		return false;
	if (strcmp(name, p->claim_legacy) == 0)
		return true;
	if (strncmp(name, p->claim_base, n) != 0 || name[n] != '-' ||
	    strlen(name + n + 1) != 8)
		return false;
	for (const char *c = name + n + 1; *c != '\0'; c++)
		if (!isdigit((unsigned char)*c) && (*c < 'a' || *c > 'f'))
			return false;
	return true;
}

/* The ResourceClaimTemplate (per-pod modes) or shared ResourceClaim. */
static json_t *
claim_object(const struct plan_instance *in, const struct plan_config *cfg,
    struct plan *p, const char *inst_label)
{
	json_t *meta, *spec;

	if ((spec = claim_spec(p)) == NULL)
		return NULL;
	if (!p->claim_is_template && shared_claim_name(p, spec) < 0) {
		json_decref(spec);
		return NULL;
	}
	if ((meta = ns_metadata(in, cfg, p, p->claim_name, inst_label)) ==
	    NULL) {
		json_decref(spec);
		return NULL;
	}
	if (!p->claim_is_template)
		return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion",
		    "resource.k8s.io/v1", "kind", "ResourceClaim", "metadata",
		    meta, "spec", spec);
	/* claims generated from the template carry the instance label */
	return json_pack("{s:s, s:s, s:o, s:{s:{s:{s:s}}, s:o}}",
	    "apiVersion", "resource.k8s.io/v1", "kind",
	    "ResourceClaimTemplate", "metadata", meta, "spec", "metadata",
	    "labels", PLAN_INSTANCE_LABEL, inst_label, "spec", spec);
}

/*
 * The shared per-profile DeviceClass selecting MIG devices or, for a
 * tenant with topology selectors, its own class: MIG devices of its
 * profile or whole GPUs, within its topology.
 */
static json_t *
device_class(const struct plan *p)
{
	char expr[512], prof[PLAN_LABEL_MAX + 1];
	json_t *c;

	if (!annotation_sharing_mig(p->annot.sharing))
		snprintf(expr, sizeof(expr), "device.driver == '%s' && "
		    "'type' in " ATTRS " && " ATTRS ".type == 'gpu'",
		    PLAN_DRIVER);
	else
		snprintf(expr, sizeof(expr), "device.driver == '%s' && "
		    "'type' in " ATTRS " && " ATTRS ".type == 'mig' && "
		    "'profile' in " ATTRS " && " ATTRS ".profile == '%s'",
		    PLAN_DRIVER, p->annot.mig_profile);
	if (p->topo_sel != NULL) {
		c = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, "
		    "s:{s:[{s:{s:s}}]}}", "apiVersion", "resource.k8s.io/v1",
		    "kind", "DeviceClass", "metadata", "name", p->class_name,
		    "labels", PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, "spec",
		    "selectors",
		    "cel", "expression", expr);
		if (c != NULL && json_array_extend(json_object_get(
		    json_object_get(c, "spec"), "selectors"), p->topo_sel)) {
			json_decref(c);
			return NULL;
		}
		return c;
	}
	labelize(p->annot.mig_profile, prof, sizeof(prof));
	/* label values may hold dots: keep them */
	for (size_t i = 0; prof[i] != '\0'; i++)
		if (p->annot.mig_profile[i] == '.')
			prof[i] = '.';
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s}}, "
	    "s:{s:[{s:{s:s}}]}}", "apiVersion", "resource.k8s.io/v1", "kind",
	    "DeviceClass", "metadata", "name", p->class_name, "labels",
	    PLAN_MANAGED_BY_KEY, PLAN_MANAGED_BY, PLAN_PROFILE_LABEL, prof,
	    "spec", "selectors", "cel", "expression", expr);
}

/* The name of the topology class of tenant namespace ns. */
int
plan_topo_class(const char *ns, char *out, size_t outlen)
{
	char buf[PLAN_NAME_MAX + 1];

	snprintf(buf, sizeof(buf), "%s%s", PLAN_TOPO_CLASS_PREFIX, ns);
	return plan_name_fit(buf, CLASS_NAME_MAX, out, outlen);
}

/* Name the class in use: the configured GPU class or a MIG class. */
static int
class_name(const struct plan_config *cfg, struct plan *p, char *err,
    size_t errlen)
{
	char buf[PLAN_NAME_MAX * 2 + 2];
	const char *prefix = cfg->class_prefix ? cfg->class_prefix :
	    PLAN_DEFAULT_CLASS_PREFIX;
	const char *gpu = cfg->gpu_class ? cfg->gpu_class :
	    PLAN_DEFAULT_GPU_CLASS;

	if (p->topo_sel != NULL) {
		if (plan_topo_class(p->namespace, p->class_name,
		    sizeof(p->class_name)) < 0)
			return seterr(err, errlen, "no topology class name for "
			    "\"%s\"", p->namespace);
		return 0;
	}
	if (!annotation_sharing_mig(p->annot.sharing)) {
		if (strlen(gpu) > CLASS_NAME_MAX || !dns1123_subdomain_valid(gpu))
			return seterr(err, errlen, "GPU class \"%s\" is not a "
			    "valid DeviceClass name", gpu);
		snprintf(p->class_name, sizeof(p->class_name), "%s", gpu);
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s%s", prefix, p->annot.mig_profile);
	for (char *s = buf; *s != '\0'; s++)
		if (*s == '+')
			*s = '-';
	if (plan_name_fit(buf, CLASS_NAME_MAX, p->class_name,
	    sizeof(p->class_name)) < 0 || !dns1123_subdomain_valid(p->class_name))
		return seterr(err, errlen, "class prefix \"%s\" gives an "
		    "invalid DeviceClass name", prefix);
	return 0;
}

/* Append one quota key unless already present; 0 or -ENOMEM. */
static int
add_key(struct plan *p, const char *cls, int value)
{
	char name[PLAN_KEY_MAX + 1];
	struct plan_key *k;
	int cap;

	if (cls == NULL)
		snprintf(name, sizeof(name), "%s", PLAN_CLAIMS_KEY);
	else
		snprintf(name, sizeof(name), "%s%s", cls,
		    PLAN_CLASS_KEY_SUFFIX);
	for (int i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].name, name) == 0)
			return 0;
	if (p->nkeys >= PLAN_MAX_KEYS)
		return 0;
	if (p->nkeys == p->keys_cap) {
		cap = p->keys_cap ? p->keys_cap * 2 : 8;
		if (cap > PLAN_MAX_KEYS)
			cap = PLAN_MAX_KEYS;
		if ((k = realloc(p->keys, (size_t)cap * sizeof(*k))) == NULL)
			return -ENOMEM;
		p->keys = k;
		p->keys_cap = cap;
	}
	memcpy(p->keys[p->nkeys].name, name, sizeof(name));
	p->keys[p->nkeys++].value = value;
	return 0;
}

/* The record of the plan's keys: "k1,k2,...". */
static int
keys_join(struct plan *p)
{
	size_t len = 1, o = 0;

	for (int i = 0; i < p->nkeys; i++)
		len += strlen(p->keys[i].name) + 1;
	if ((p->keys_text = malloc(len)) == NULL)
		return -ENOMEM;
	p->keys_text[0] = '\0';
	for (int i = 0; i < p->nkeys; i++)
		o += (size_t)snprintf(p->keys_text + o, len - o, "%s%s",
		    i ? "," : "", p->keys[i].name);
	return 0;
}

/* The configured strict classes, each zeroed unless it is the tenant's. */
static int
strict_keys(const struct plan_config *cfg, struct plan *p, char *err,
    size_t errlen)
{
	char buf[PLAN_MAX_STRICT * (PLAN_NAME_MAX + 1)], *tok, *save;
	const char *list = cfg->strict_classes ? cfg->strict_classes :
	    PLAN_DEFAULT_STRICT;
	int n = 0;

	if (strlen(list) >= sizeof(buf))
		return seterr(err, errlen, "strict class list is too long");
	memcpy(buf, list, strlen(list) + 1);
	for (tok = strtok_r(buf, ", ", &save); tok != NULL;
	    tok = strtok_r(NULL, ", ", &save)) {
		if (strlen(tok) > CLASS_NAME_MAX || !dns1123_subdomain_valid(tok))
			return seterr(err, errlen, "strict class \"%s\" is not "
			    "a valid DeviceClass name", tok);
		if (++n > PLAN_MAX_STRICT)
			return seterr(err, errlen, "more than %d strict classes",
			    PLAN_MAX_STRICT);
		if (strcmp(tok, p->class_name) != 0 &&
		    add_key(p, tok, 0) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Report that the plan failed closed because of GPU classes. */
static void
closed_event(struct plan *p, const char *why)
{
	struct plan_event *e;

	if (p->closed || p->nevents >= PLAN_MAX_EVENTS) {
		p->closed = true;
		return;
	}
	p->closed = true;
	e = &p->events[p->nevents++];
	e->reason = "GPUClassesNotLimited";
	snprintf(e->message, sizeof(e->message), "%.150s: the tenant's claim "
	    "count is held at 0 (no claim can be created) until this is "
	    "resolved", why);
}

/*
 * The quota keys: claim count, the tenant's class, and under strict a 0
 * for every other GPU class (configured and observed). A GPU class that
 * cannot be keyed closes the namespace instead of leaving it unlimited.
 */
static int
quota_keys(const struct plan_config *cfg, struct plan *p, char *err,
    size_t errlen)
{
	char why[200];
	int r;

	if (add_key(p, NULL, p->annot.max_devices) < 0 ||
	    add_key(p, p->class_name, p->annot.max_devices) < 0)
		return -ENOMEM;
	if (!cfg->strict)
		return 0;
	if ((r = strict_keys(cfg, p, err, errlen)) < 0)
		return r;
	for (int i = 0; cfg->classes != NULL && i < cfg->nclasses; i++) {
		const char *c = cfg->classes[i];

		if (i >= PLAN_MAX_CLASSES) {
			snprintf(why, sizeof(why), "the cluster has %d GPU "
			    "DeviceClasses, more than the %d one quota keys",
			    cfg->nclasses, PLAN_MAX_CLASSES);
			closed_event(p, why);
			break;
		}
		if (strlen(c) > CLASS_NAME_MAX || !dns1123_subdomain_valid(c)) {
			snprintf(why, sizeof(why), "GPU DeviceClass \"%.80s\" "
			    "has a name too long to be a quota key", c);
			closed_event(p, why);
			continue;
		}
		if (strcmp(c, p->class_name) != 0 && add_key(p, c, 0) < 0)
			return -ENOMEM;
	}
	if (p->closed)
		p->keys[0].value = 0;
	return 0;
}

/* The Namespace annotation admit reads. */
static int
build_resolved(struct plan *p)
{
	struct resolved r;	/* 9 KB: no heap block per plan */

	memset(&r, 0, sizeof(r));
	if (p->claim_is_template)
		snprintf(r.claim_template, sizeof(r.claim_template), "%s",
		    p->claim_name);
	else
		snprintf(r.claim, sizeof(r.claim), "%s", p->claim_name);
	snprintf(r.sharing, sizeof(r.sharing), "%s",
	    annotation_sharing_name(p->annot.sharing));
	scopy(r.instance, sizeof(r.instance), p->instance_ref);
	r.pol = p->annot.pol;
	p->resolved = resolved_format(&r);
	return p->resolved == NULL ? -ENOMEM : 0;
}

/* The Warning events a valid plan still deserves. */
static void
plan_events(struct plan *p)
{
	const struct annotation *a = &p->annot;
	struct plan_event *e;

	if (p->nevents >= PLAN_MAX_EVENTS)
		return;
	e = &p->events[p->nevents];
	if (a->sharing == ANNOTATION_SHARING_HYBRID) {
		e->type = "Normal";	/* a notice: the plan is applied */
		e->reason = "ExperimentalHybridSharing";
		snprintf(e->message, sizeof(e->message), "sharing \"hybrid\" "
		    "is experimental: the tenant's pods time-share one "
		    "ResourceClaim of a MIG device of profile %s",
		    a->mig_profile);
		p->nevents++;
	}
}

/* Names of the tenant namespace, the instance and the claim. */
static int
plan_names(const struct plan_instance *in, const struct plan_config *cfg,
    struct plan *p, char *inst_label, char *err, size_t errlen)
{
	char kind_lc[PLAN_KIND_MAX + 1], name_lc[PLAN_NAME_MAX + 1];
	char buf[PLAN_KIND_MAX + PLAN_NAME_MAX + 8];
	const char *ns = cfg->ns_from_namespace ? in->namespace : in->name;

	if (!dns1123_label_valid(ns))
		return seterr(err, errlen, "tenant namespace \"%s\" of %s/%s "
		    "is not a valid namespace name", ns, in->kind, in->name);
	scopy(p->namespace, sizeof(p->namespace), ns);
	snprintf(p->instance_ref, sizeof(p->instance_ref), "%s/%s", in->kind,
	    in->name);
	labelize(in->kind, kind_lc, sizeof(kind_lc));
	labelize(in->name, name_lc, sizeof(name_lc));
	snprintf(buf, sizeof(buf), "%s-%s", kind_lc, name_lc);
	if (plan_name_fit(buf, PLAN_LABEL_MAX, inst_label,
	    PLAN_LABEL_MAX + 1) < 0)
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s-%s-gpu", kind_lc, name_lc);
	if (plan_name_fit(buf, PLAN_LABEL_MAX, p->claim_name,
	    sizeof(p->claim_name)) < 0 ||
	    plan_name_fit(buf, sizeof(p->claim_base) - 1, p->claim_base,
	    sizeof(p->claim_base)) < 0)
		return -EINVAL;
	scopy(p->claim_legacy, sizeof(p->claim_legacy), p->claim_name);
	for (char *s = kind_lc; *s != '\0'; s++)
		*s = (char)tolower((unsigned char)*s);
	if (quota_name(cfg->quota_name ? cfg->quota_name :
	    PLAN_DEFAULT_QUOTA_NAME, kind_lc, in->name, p->quota_name,
	    sizeof(p->quota_name), err, errlen) < 0)
		return -EINVAL;
	if (plan_kubeplus_quota(in, buf, sizeof(buf)) &&
	    strcmp(p->quota_name, buf) == 0)
		return seterr(err, errlen, "quota name \"%s\" is the one KubePlus "
		    "creates for the Helm release of %s/%s; kpgpud keeps its "
		    "keys in a quota of its own", p->quota_name, in->kind,
		    in->name);
	return 0;
}

/* The name of KubePlus's quota for the instance: lower(kind)-<name>. */
bool
plan_kubeplus_quota(const struct plan_instance *in, char *out, size_t len)
{
	size_t o;

	if ((size_t)snprintf(out, len, "%s-%s", in->kind, in->name) >= len)
		return false;
	for (o = 0; out[o] != '\0' && o < strlen(in->kind); o++)
		out[o] = (char)tolower((unsigned char)out[o]);
	return true;
}

/* Whether s is a valid --sidecar-containers value; see plan.h. */
bool
plan_sidecars_valid(const char *s, char *err, size_t errlen)
{
	char names[RESOLVED_MAX_NAMES][64];
	enum resolved_init mode;
	int n;

	return resolved_parse_names_text("sidecar-containers", s, false,
	    &mode, names, &n, err, errlen) == 0;
}

/* Parse the instance's annotation into a; the operator's sidecars. */
static int
plan_annotation(const struct plan_instance *in, const struct plan_config *cfg,
    struct annotation *a, char *err, size_t errlen)
{
	enum resolved_init mode;
	int r;

	if (!in->has_annotation)
		return seterr(err, errlen, "%s/%s has no %s annotation",
		    in->kind, in->name, ANNOTATION_KEY);
	if (in->annotation_len > ANNOTATION_MAX_LEN)
		return seterr(err, errlen, "annotation is %zu bytes, more than "
		    "the limit of %d", in->annotation_len, ANNOTATION_MAX_LEN);
	if ((r = annotation_parse(in->annotation, in->annotation_len, a, err,
	    errlen)) < 0 || a->sidecars_set || cfg->sidecars == NULL)
		return r;
	return resolved_parse_names_text("sidecar-containers", cfg->sidecars,
	    false, &mode, a->pol.sidecar_names, &a->pol.nsidecar_names, err,
	    errlen);
}

/* Take the tenant's topology: selectors, domains, events. */
static int
plan_topology(struct plan *p, const struct plan_topology *t)
{
	if (t->selectors != NULL && json_array_size(t->selectors) > 0)
		p->topo_sel = json_incref(t->selectors);
	if (t->domains != NULL && (p->topo_domains = strdup(t->domains)) ==
	    NULL)
		return -ENOMEM;
	snprintf(p->topo_state, sizeof(p->topo_state), "%s", t->state);
	for (int i = 0; i < t->nevents && p->nevents < PLAN_MAX_EVENTS; i++)
		p->events[p->nevents++] = t->events[i];
	return 0;
}

/* A byte string growing as inputs are appended to it. */
struct inbuf {
	char	*b;
	size_t	 len, cap;
	bool	 failed;
};

/* Append n bytes. */
static void
in_put(struct inbuf *f, const void *s, size_t n)
{
	size_t cap = f->cap ? f->cap : 1024;
	char *b;

	if (f->failed)
		return;
	if (f->len + n > f->cap) {
		while (cap < f->len + n)
			cap *= 2;
		if ((b = realloc(f->b, cap)) == NULL) {
			f->failed = true;
			return;
		}
		f->b = b;
		f->cap = cap;
	}
	memcpy(f->b + f->len, s, n);
	f->len += n;
}

/* Append a number. */
static void
in_num(struct inbuf *f, unsigned long long v)
{
	in_put(f, &v, sizeof(v));
}

/* Append a string or NULL: each told apart from the other and the next. */
static void
in_str(struct inbuf *f, const char *s)
{
	if (s == NULL) {
		in_put(f, "N", 1);
		return;
	}
	in_put(f, "S", 1);
	in_put(f, s, strlen(s) + 1);
}

/*
 * Everything plan_build reads, as one byte string: the instance, every
 * member of cfg, its classes and its topology. Equal strings, equal plans.
 * 0 or -ENOMEM; *ret (malloc'd) holds *ret_len bytes.
 */
static int
plan_inputs(const struct plan_instance *in, const struct plan_config *cfg,
    char **ret, size_t *ret_len)
{
	const struct plan_topology *t = cfg->topology;
	struct inbuf f = { NULL, 0, 0, false };
	char *sel;

	in_str(&f, in->api_version);
	in_str(&f, in->kind);
	in_str(&f, in->name);
	in_str(&f, in->namespace);
	in_str(&f, in->uid);
	in_str(&f, in->created);
	in_num(&f, in->has_annotation);
	in_num(&f, in->annotation_len);
	if (in->annotation_len <= ANNOTATION_MAX_LEN)
		in_put(&f, in->annotation, in->annotation_len);
	in_str(&f, cfg->quota_name);
	in_str(&f, cfg->class_prefix);
	in_str(&f, cfg->gpu_class);
	in_str(&f, cfg->strict_classes);
	in_num(&f, cfg->strict);
	in_num(&f, cfg->classes != NULL);
	in_num(&f, cfg->classes != NULL ? (unsigned)cfg->nclasses : 0);
	for (int i = 0; cfg->classes != NULL && i < cfg->nclasses; i++)
		in_str(&f, cfg->classes[i]);
	in_num(&f, cfg->owner_refs);
	in_num(&f, cfg->ns_from_namespace);
	in_num(&f, cfg->driver_gates);
	in_str(&f, cfg->sidecars);
	in_num(&f, t != NULL);
	if (t != NULL) {
		sel = t->selectors != NULL ? json_dumps(t->selectors,
		    JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		if (t->selectors != NULL && sel == NULL)
			f.failed = true;
		in_str(&f, sel);
		free(sel);
		in_str(&f, t->domains);
		in_str(&f, t->state);
		in_num(&f, (unsigned)t->nevents);
		for (int i = 0; i < t->nevents && i < 2; i++) {
			in_str(&f, t->events[i].type);
			in_str(&f, t->events[i].reason);
			in_str(&f, t->events[i].message);
		}
	}
	if (f.failed) {
		free(f.b);
		return -ENOMEM;
	}
	*ret = f.b;
	*ret_len = f.len;
	return 0;
}

/* Compose the whole plan for one instance. */
int
plan_build(const struct plan_instance *in, const struct plan_config *cfg,
    struct plan **ret, char *err, size_t errlen)
{
	char inst_label[PLAN_LABEL_MAX + 1];
	struct plan *p;
	int r;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return -ENOMEM;
	if ((r = plan_inputs(in, cfg, &p->inputs, &p->inputs_len)) < 0 ||
	    (r = plan_annotation(in, cfg, &p->annot, err, errlen)) < 0 ||
	    (r = plan_check_gates(&p->annot, cfg->driver_gates, err,
	    errlen)) < 0 ||
	    (r = plan_check_allocatable(&p->annot, err, errlen)) < 0 ||
	    (r = plan_names(in, cfg, p, inst_label, err, errlen)) < 0 ||
	    (cfg->topology != NULL &&
	    (r = plan_topology(p, cfg->topology)) < 0) ||
	    (r = class_name(cfg, p, err, errlen)) < 0 ||
	    (r = quota_keys(cfg, p, err, errlen)) < 0 ||
	    (r = keys_join(p)) < 0)
		goto fail;
	p->claim_is_template = !annotation_sharing_shared(p->annot.sharing);
	r = -ENOMEM;
	if ((annotation_sharing_mig(p->annot.sharing) || p->topo_sel != NULL)
	    && (p->device_class = device_class(p)) == NULL)
		goto fail;
	if ((p->claim = claim_object(in, cfg, p, inst_label)) == NULL)
		goto fail;
	if ((r = build_resolved(p)) < 0)
		goto fail;
	plan_events(p);
	*ret = p;
	return 0;
fail:
	plan_free(p);
	return r;
}

/* Free a plan and the objects it holds. */
void
plan_free(struct plan *p)
{
	if (p == NULL)
		return;
	json_decref(p->device_class);
	json_decref(p->claim);
	json_decref(p->topo_sel);
	free(p->topo_domains);
	free(p->resolved);
	free(p->keys);
	free(p->keys_text);
	free(p->inputs);
	free(p);
}

/* Whether p was built from exactly these inputs. */
bool
plan_serves(const struct plan *p, const struct plan_instance *in,
    const struct plan_config *cfg)
{
	char *b;
	size_t len;
	bool same;

	if (p == NULL || plan_inputs(in, cfg, &b, &len) < 0)
		return false;
	same = len == p->inputs_len && memcmp(b, p->inputs, len) == 0;
	free(b);
	return same;
}

/* The quota keys as a ResourceQuota spec.hard map. */
json_t *
plan_quota_hard(const struct plan *p)
{
	json_t *hard = json_object();
	char v[16];

	if (hard == NULL)
		return NULL;
	for (int i = 0; i < p->nkeys; i++) {
		snprintf(v, sizeof(v), "%d", p->keys[i].value);
		if (json_object_set_new(hard, p->keys[i].name,
		    json_string(v))) {
			json_decref(hard);
			return NULL;
		}
	}
	return hard;
}

/* The events of the plan as a JSON list. */
static json_t *
events_json(const struct plan *p)
{
	json_t *ev = json_array();

	for (int i = 0; ev != NULL && i < p->nevents; i++)
		if (json_array_append_new(ev, json_pack("{s:s, s:s, s:s}",
		    "type", p->events[i].type != NULL ? p->events[i].type :
		    "Warning", "reason", p->events[i].reason,
		    "message", p->events[i].message))) {
			json_decref(ev);
			return NULL;
		}
	return ev;
}

const char *const plan_ns_annotation_keys[] = {
	RESOLVED_ANNOTATION, PLAN_NS_TEMPLATE_ANNOT, PLAN_NS_CLAIM_ANNOT,
	PLAN_NS_CLASS_ANNOT, PLAN_NS_MAX_ANNOT, PLAN_NS_INIT_ANNOT,
	PLAN_NS_SIDECAR_ANNOT, PLAN_NS_LEGACY_ANNOT, PLAN_NS_TOPO_ANNOT,
	PLAN_NS_TOPO_STATE_ANNOT, NULL,
};

/* The Namespace annotations of the plan. */
json_t *
plan_ns_annotations(const struct plan *p)
{
	const struct annotation *a = &p->annot;
	char max[16], *init, *side;
	json_t *m = NULL;

	init = resolved_names_text(a->pol.init, a->pol.init_names,
	    a->pol.ninit_names);
	side = resolved_names_text(RESOLVED_INIT_NAMED, a->pol.sidecar_names,
	    a->pol.nsidecar_names);
	snprintf(max, sizeof(max), "%d", a->max_devices);
	if (init != NULL && side != NULL)
		m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
		    RESOLVED_ANNOTATION, p->resolved, p->claim_is_template ?
		    PLAN_NS_TEMPLATE_ANNOT : PLAN_NS_CLAIM_ANNOT,
		    p->claim_name, PLAN_NS_CLASS_ANNOT, p->class_name,
		    PLAN_NS_MAX_ANNOT, max, PLAN_NS_INIT_ANNOT, init,
		    PLAN_NS_SIDECAR_ANNOT, side, PLAN_NS_LEGACY_ANNOT,
		    resolved_legacy_name(a->pol.legacy));
	free(init);
	free(side);
	if (m != NULL && p->topo_domains != NULL && (json_object_set_new(m,
	    PLAN_NS_TOPO_ANNOT, json_string(p->topo_domains)) ||
	    json_object_set_new(m, PLAN_NS_TOPO_STATE_ANNOT,
	    json_string(p->topo_state)))) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/* Render the plan: objects, quota keys, Namespace metadata, events. */
json_t *
plan_to_json(const struct plan *p)
{
	json_t *objs = json_array();

	if (objs == NULL || (p->device_class != NULL &&
	    json_array_append(objs, p->device_class)) ||
	    json_array_append(objs, p->claim)) {
		json_decref(objs);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:o}, "
	    "s:{s:s, s:{s:s}, s:o}, s:o}", "instance", p->instance_ref,
	    "sharing", annotation_sharing_name(p->annot.sharing), "objects",
	    objs, "quota", "name", p->quota_name, "namespace", p->namespace,
	    "hard", plan_quota_hard(p), "namespace", "name", p->namespace,
	    "labels", RESOLVED_LABEL, "true", "annotations",
	    plan_ns_annotations(p), "events", events_json(p));
}
