/* SPDX-License-Identifier: Apache-2.0 */
/* The namespace's resolved isolation annotation: see resolved.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/jsonw.h"
#include "common/resolved.h"
#include "common/util.h"

#define RESOLVED_MAX_JSON	(64 * 1024)

/*
 * Containers that service meshes, database proxies and secret agents inject
 * by their own webhooks (several also as native sidecars, i.e. init
 * containers): none of them needs a GPU.
 */
const char *const resolved_default_sidecars[] = {
	"istio-proxy", "istio-init", "istio-validation",
	"linkerd-proxy", "linkerd-init", "linkerd-network-validator",
	"envoy", "envoy-sidecar", "consul-dataplane",
	"consul-connect-inject-init", "kuma-sidecar", "kuma-init", "daprd",
	"cloud-sql-proxy", "cloudsql-proxy", "vault-agent", "vault-agent-init",
	NULL,
};

/* Whether s holds only printable ASCII (informational fields). */
static bool
printable(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

/* Copy a string member into dst (cap bytes) after checking its type/size. */
static int
get_str(json_t *v, const char *key, char *dst, size_t cap, char *err,
    size_t errlen)
{
	const char *s;

	if (!json_is_string(v)) {
		seterr(err, errlen, "%s: must be a string", key);
		return -EINVAL;
	}
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || strlen(s) >= cap) {
		seterr(err, errlen, "%s: too long or contains NUL", key);
		return -EINVAL;
	}
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

/* User text for a message; see resolved.h. */
const char *
resolved_msg_str(char buf[RESOLVED_MSG_MAX + 4], const char *s)
{
	size_t i, o = 0;

	for (i = 0; s[i] != '\0' && o < RESOLVED_MSG_MAX; i++) {
		unsigned char ch = (unsigned char)s[i];

		buf[o++] = (ch >= 0x20 && ch < 0x7f && ch != '"') ? ch : '?';
	}
	if (s[i] != '\0') {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}

/*
 * The one rejection of a policy member that is not one of its words:
 * "unknown KEY "VALUE" (expected WORDS)" for a string, else "field "KEY"
 * must be WORDS". Returns -EINVAL.
 */
static int
bad_word(const char *key, const json_t *v, const char *words, char *err,
    size_t errlen)
{
	char b[RESOLVED_MSG_MAX + 4];

	if (json_is_string(v))
		return seterr(err, errlen, "unknown %s \"%s\" (expected %s)",
		    key, resolved_msg_str(b, json_string_value(v)), words);
	return seterr(err, errlen, "field \"%s\" must be %s", key, words);
}

/* Parse a container name list; see resolved.h. */
int
resolved_parse_names(const char *key, const json_t *v, bool all_ok,
    enum resolved_init *ret_mode, char names[RESOLVED_MAX_NAMES][64],
    int *ret_n, char *err, size_t errlen)
{
	const char *words = all_ok ? "\"none\", \"all\" or a list of names" :
	    "\"none\" or a list of names";
	char b[RESOLVED_MSG_MAX + 4], (*tmp)[64];
	const json_t *e;
	size_t i;
	int n = 0;

	if (json_is_string(v)) {
		const char *s = json_string_value(v);

		if (strcmp(s, "none") == 0)
			*ret_mode = RESOLVED_INIT_NONE;
		else if (all_ok && strcmp(s, "all") == 0)
			*ret_mode = RESOLVED_INIT_ALL;
		else
			return bad_word(key, v, words, err, errlen);
		*ret_n = 0;
		return 0;
	}
	if (!json_is_array(v))
		return bad_word(key, v, words, err, errlen);
	if (json_array_size(v) > RESOLVED_MAX_NAMES) {
		seterr(err, errlen, "%s lists more than %d names", key,
		    RESOLVED_MAX_NAMES);
		return -EINVAL;
	}
	if ((tmp = calloc(RESOLVED_MAX_NAMES, sizeof(*tmp))) == NULL)
		return -ENOMEM;
	for (i = 0; i < json_array_size(v); i++) {
		const char *s;

		e = json_array_get(v, i);
		if (!json_is_string(e) ||
		    strlen(json_string_value(e)) != json_string_length(e)) {
			seterr(err, errlen, "field \"%s[]\" must be a string "
			    "without NUL", key);
			goto fail;
		}
		s = json_string_value(e);
		if (!dns1123_label_valid(s)) {
			seterr(err, errlen, "%s name \"%s\" is not a valid "
			    "container name", key, resolved_msg_str(b, s));
			goto fail;
		}
		for (int j = 0; j < n; j++)
			if (strcmp(tmp[j], s) == 0) {
				seterr(err, errlen, "%s lists \"%s\" twice",
				    key, s);
				goto fail;
			}
		memcpy(tmp[n++], s, strlen(s) + 1);
	}
	memcpy(names, tmp, RESOLVED_MAX_NAMES * sizeof(*tmp));
	free(tmp);
	*ret_n = n;
	*ret_mode = RESOLVED_INIT_NAMED;
	return 0;
fail:
	free(tmp);
	return -EINVAL;
}

/* Parse the plain (comma) form of a name list; see resolved.h. */
int
resolved_parse_names_text(const char *key, const char *text, bool all_ok,
    enum resolved_init *ret_mode, char names[RESOLVED_MAX_NAMES][64],
    int *ret_n, char *err, size_t errlen)
{
	const char *p = text, *c;
	json_t *v;
	int r;

	if (strlen(text) > RESOLVED_MAX_NAMES * 64)
		return seterr(err, errlen, "%s: longer than %d bytes", key,
		    RESOLVED_MAX_NAMES * 64);
	if (strcmp(text, "none") == 0 || strcmp(text, "all") == 0)
		v = json_string(text);
	else if ((v = json_array()) != NULL)
		do {
			c = strchr(p, ',');
			if (json_array_append_new(v, json_stringn(p, c != NULL ?
			    (size_t)(c - p) : strlen(p))) < 0) {
				json_decref(v);
				return -ENOMEM;
			}
			p = c + 1;
		} while (c != NULL);
	if (v == NULL)
		return -ENOMEM;
	r = resolved_parse_names(key, v, all_ok, ret_mode, names, ret_n, err,
	    errlen);
	json_decref(v);
	return r;
}

/* The plain (comma) form of a name list; see resolved.h. */
char *
resolved_names_text(enum resolved_init mode, const char names[][64], int n)
{
	size_t len = 1, off = 0;
	char *s;

	if (mode != RESOLVED_INIT_NAMED || n == 0)
		return strdup(mode == RESOLVED_INIT_ALL ? "all" : "none");
	for (int i = 0; i < n; i++)
		len += strlen(names[i]) + 1;
	if ((s = malloc(len)) == NULL)
		return NULL;
	s[0] = '\0';
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(s + off, len - off, "%s%s",
		    i > 0 ? "," : "", names[i]);
	return s;
}

/* Parse the legacyGPU member into *ret. */
static int
parse_legacy(const json_t *v, enum resolved_legacy *ret, char *err,
    size_t errlen)
{
	static const enum resolved_legacy all[] = { RESOLVED_LEGACY_REJECT,
	    RESOLVED_LEGACY_TRANSLATE, RESOLVED_LEGACY_ALLOW };

	if (json_is_string(v))
		for (size_t i = 0; i < nitems(all); i++)
			if (strcmp(json_string_value(v),
			    resolved_legacy_name(all[i])) == 0) {
				*ret = all[i];
				return 0;
			}
	return bad_word("legacyGPU", v, "\"reject\", \"translate\" or "
	    "\"allow\"", err, errlen);
}

/* Apply a policy member to p; see resolved.h. */
int
resolved_policy_member(const char *key, const json_t *v,
    struct resolved_policy *p, char *err, size_t errlen)
{
	enum resolved_init mode;
	int r;

	if (strcmp(key, "initContainers") == 0)
		r = resolved_parse_names(key, v, true, &p->init, p->init_names,
		    &p->ninit_names, err, errlen);
	else if (strcmp(key, "sidecarContainers") == 0)
		r = resolved_parse_names(key, v, false, &mode,
		    p->sidecar_names, &p->nsidecar_names, err, errlen);
	else if (strcmp(key, "legacyGPU") == 0)
		r = parse_legacy(v, &p->legacy, err, errlen);
	else
		return 0;
	return r < 0 ? r : 1;
}

/* Apply one member of the annotation object to r. */
static int
parse_member(const char *key, json_t *v, struct resolved *r, char *err,
    size_t errlen)
{
	int rv;

	if (strcmp(key, "claimTemplateName") == 0 ||
	    strcmp(key, "claimName") == 0) {
		char *dst = key[5] == 'T' ? r->claim_template : r->claim;

		if (get_str(v, key, dst, RESOLVED_NAME_MAX + 1, err,
		    errlen) < 0)
			return -EINVAL;
		if (!dns1123_subdomain_valid(dst)) {
			seterr(err, errlen, "%s: \"%s\" is not a valid object "
			    "name", key, dst);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(key, "sharing") == 0 || strcmp(key, "instance") == 0) {
		bool sh = key[0] == 's';
		char *dst = sh ? r->sharing : r->instance;
		size_t cap = sh ? sizeof(r->sharing) : sizeof(r->instance);

		if (get_str(v, key, dst, cap, err, errlen) < 0)
			return -EINVAL;
		if (!printable(dst)) {
			seterr(err, errlen, "%s: not printable", key);
			return -EINVAL;
		}
		return 0;
	}
	if ((rv = resolved_policy_member(key, v, &r->pol, err, errlen)) != 0)
		return rv < 0 ? rv : 0;
	seterr(err, errlen, "unknown key \"%.64s\"", key);
	return -EINVAL;
}

/*
 * Parse the annotation value into a new struct resolved (*ret, the
 * caller's to free): what resolved_parse copies out and resolved_pack_parse
 * packs. 0, -EINVAL with the reason in err, or -ENOMEM.
 */
static int
parse_new(const char *json, size_t len, struct resolved **ret, char *err,
    size_t errlen)
{
	struct resolved *r = NULL;
	json_error_t jerr;
	json_t *root = NULL, *v;
	const char *key;
	int rv = -EINVAL;

	if (len > RESOLVED_MAX_JSON) {
		seterr(err, errlen, "annotation longer than %d bytes",
		    RESOLVED_MAX_JSON);
		return -EINVAL;
	}
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		seterr(err, errlen, "not JSON: %s", jerr.text);
		goto fail;
	}
	if (!json_is_object(root)) {
		seterr(err, errlen, "not a JSON object");
		goto fail;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL) {
		rv = -ENOMEM;
		goto fail;
	}
	json_object_foreach(root, key, v)
		if (parse_member(key, v, r, err, errlen) < 0)
			goto fail;
	if ((r->claim_template[0] == '\0') == (r->claim[0] == '\0')) {
		seterr(err, errlen, "exactly one of claimTemplateName and "
		    "claimName is required");
		goto fail;
	}
	*ret = r;
	r = NULL;
	rv = 0;
fail:
	free(r);
	json_decref(root);
	return rv;
}

/* Parse the annotation value into ret; see resolved.h. */
int
resolved_parse(const char *json, size_t len, struct resolved *ret,
    char *err, size_t errlen)
{
	struct resolved *r;
	int rv;

	if ((rv = parse_new(json, len, &r, err, errlen)) < 0)
		return rv;
	*ret = *r;
	free(r);
	return 0;
}

/* Build the JSON form of a name list ("none", "all" or a list). */
static json_t *
format_names(enum resolved_init mode, const char names[][64], int n)
{
	json_t *a;

	if (mode == RESOLVED_INIT_ALL)
		return json_string("all");
	if (mode != RESOLVED_INIT_NAMED)
		return json_string("none");
	if ((a = json_array()) == NULL)
		return NULL;
	for (int i = 0; i < n; i++)
		if (json_array_append_new(a, json_string(names[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* Format r as compact JSON with sorted keys; see resolved.h. */
char *
resolved_format(const struct resolved *r)
{
	json_t *o;
	char *s = NULL;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if (r->claim_template[0] != '\0')
		bad |= json_object_set_new(o, "claimTemplateName",
		    json_string(r->claim_template));
	else
		bad |= json_object_set_new(o, "claimName",
		    json_string(r->claim));
	if (r->sharing[0] != '\0')
		bad |= json_object_set_new(o, "sharing",
		    json_string(r->sharing));
	if (r->instance[0] != '\0')
		bad |= json_object_set_new(o, "instance",
		    json_string(r->instance));
	bad |= json_object_set_new(o, "initContainers",
	    format_names(r->pol.init, r->pol.init_names, r->pol.ninit_names));
	/* absent means none: annotations written before it existed agree */
	if (r->pol.nsidecar_names > 0)
		bad |= json_object_set_new(o, "sidecarContainers",
		    format_names(RESOLVED_INIT_NAMED, r->pol.sidecar_names,
		    r->pol.nsidecar_names));
	bad |= json_object_set_new(o, "legacyGPU",
	    json_string(resolved_legacy_name(r->pol.legacy)));
	if (bad == 0)
		s = jsonw_dump(o);
	json_decref(o);
	return s;
}

/* The annotation spelling of a legacy-request policy. */
const char *
resolved_legacy_name(enum resolved_legacy l)
{
	switch (l) {
	case RESOLVED_LEGACY_TRANSLATE:
		return "translate";
	case RESOLVED_LEGACY_ALLOW:
		return "allow";
	case RESOLVED_LEGACY_REJECT:
	default:
		return "reject";
	}
}

/*
 * A pack and its reference count in one allocation, the strings after it;
 * the count stays out of the public struct so holders see only const data.
 */
struct pack_box {
	atomic_uint		 refs;
	struct resolved_pack	 p;
	char			 buf[];
};

/* Whether the packed list run of n names holds name. */
static bool
packed_has(const char *run, int n, const char *name)
{
	if (name == NULL)
		return false;
	for (int i = 0; i < n; i++, run += strlen(run) + 1)
		if (strcmp(run, name) == 0)
			return true;
	return false;
}

/* Bytes of the packed form of n names. */
static size_t
packed_len(const char names[][64], int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += strlen(names[i]) + 1;
	return len;
}

/* Append s (and its NUL) at *pos; the copy's start. */
static const char *
pack_str(char **pos, const char *s)
{
	char *at = *pos;
	size_t n = strlen(s) + 1;

	memcpy(at, s, n);
	*pos += n;
	return at;
}

/* Append n names packed at *pos; the run's start. */
static const char *
pack_names(char **pos, const char names[][64], int n)
{
	char *at = *pos;

	for (int i = 0; i < n; i++)
		(void)pack_str(pos, names[i]);
	return at;
}

/* Pack r; see resolved.h. */
int
resolved_pack_new(const struct resolved *r, struct resolved_pack **ret)
{
	const struct resolved_policy *pol = &r->pol;
	struct pack_box *b;
	size_t len;
	char *pos;

	len = strlen(r->claim_template) + strlen(r->claim) +
	    strlen(r->sharing) + strlen(r->instance) + 4 +
	    packed_len(pol->init_names, pol->ninit_names) +
	    packed_len(pol->sidecar_names, pol->nsidecar_names);
	if ((b = malloc(sizeof(*b) + len)) == NULL)
		return -ENOMEM;
	atomic_init(&b->refs, 1);
	pos = b->buf;
	b->p.claim_template = pack_str(&pos, r->claim_template);
	b->p.claim = pack_str(&pos, r->claim);
	b->p.sharing = pack_str(&pos, r->sharing);
	b->p.instance = pack_str(&pos, r->instance);
	b->p.pol.init = pol->init;
	b->p.pol.legacy = pol->legacy;
	b->p.pol.ninit_names = pol->ninit_names;
	b->p.pol.nsidecar_names = pol->nsidecar_names;
	b->p.pol.init_names = pack_names(&pos, pol->init_names,
	    pol->ninit_names);
	b->p.pol.sidecar_names = pack_names(&pos, pol->sidecar_names,
	    pol->nsidecar_names);
	*ret = &b->p;
	return 0;
}

/* Parse and pack the annotation value; see resolved.h. */
int
resolved_pack_parse(const char *json, size_t len, struct resolved_pack **ret,
    char *err, size_t errlen)
{
	struct resolved *r;
	int rv;

	if ((rv = parse_new(json, len, &r, err, errlen)) < 0)
		return rv;
	rv = resolved_pack_new(r, ret);
	free(r);
	return rv;
}

/* The box a pack lives in. */
static struct pack_box *
box_of(const struct resolved_pack *p)
{
	return (struct pack_box *)(void *)((char *)(uintptr_t)p -
	    offsetof(struct pack_box, p));
}

/* Take one more reference; see resolved.h. */
const struct resolved_pack *
resolved_pack_ref(const struct resolved_pack *p)
{
	/* the caller holds one already: no ordering needed to add one */
	atomic_fetch_add_explicit(&box_of(p)->refs, 1, memory_order_relaxed);
	return p;
}

/* Drop one reference; see resolved.h. */
void
resolved_pack_unref(const struct resolved_pack *p)
{
	struct pack_box *b;

	if (p == NULL)
		return;
	b = box_of(p);
	/* release our reads; the last one acquires everyone's before free */
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		free(b);
}

/* Whether the init container called name gets the claim under p. */
bool
resolved_init_selected(const struct resolved_pack *p, const char *name)
{
	if (p->pol.init == RESOLVED_INIT_ALL)
		return true;
	if (p->pol.init != RESOLVED_INIT_NAMED)
		return false;
	return packed_has(p->pol.init_names, p->pol.ninit_names, name);
}

/* Whether the container called name is a sidecar under p. */
bool
resolved_sidecar(const struct resolved_pack *p, const char *name)
{
	return packed_has(p->pol.sidecar_names, p->pol.nsidecar_names, name);
}

/* Whether two policies are the same; see resolved.h. */
bool
resolved_policy_equal(const struct resolved_policy *a,
    const struct resolved_policy *b)
{
	if (a->init != b->init || a->legacy != b->legacy ||
	    a->ninit_names != b->ninit_names ||
	    a->nsidecar_names != b->nsidecar_names)
		return false;
	for (int i = 0; i < a->ninit_names; i++)
		if (strcmp(a->init_names[i], b->init_names[i]) != 0)
			return false;
	for (int i = 0; i < a->nsidecar_names; i++)
		if (strcmp(a->sidecar_names[i], b->sidecar_names[i]) != 0)
			return false;
	return true;
}

/* Whether two resolved specs would produce the same pod patch. */
bool
resolved_equal(const struct resolved *a, const struct resolved *b)
{
	return strcmp(a->claim_template, b->claim_template) == 0 &&
	    strcmp(a->claim, b->claim) == 0 &&
	    strcmp(a->sharing, b->sharing) == 0 &&
	    strcmp(a->instance, b->instance) == 0 &&
	    resolved_policy_equal(&a->pol, &b->pol);
}
