/* The namespace's resolved isolation annotation: see resolved.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/resolved.h"

#define RESOLVED_MAX_JSON	(64 * 1024)

/* Write a formatted reason into err when the caller gave a buffer. */
__attribute__((format(printf, 3, 4)))
static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Whether s is a DNS-1123 label (container names): [a-z0-9-], <= 63. */
bool
resolved_is_dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && (c != '-' || i == 0 || i == n - 1))
			return false;
	}
	return true;
}

/* Whether s is a DNS-1123 subdomain (object names): labels joined by '.'. */
bool
resolved_is_dns_subdomain(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > RESOLVED_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (alnum)
			continue;
		if (c != '-' && c != '.')
			return false;
		if (i == 0 || i == n - 1)
			return false;
		if (c == '.' && (s[i - 1] == '.' || s[i - 1] == '-' ||
		    s[i + 1] == '-'))
			return false;
	}
	return true;
}

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

/* Parse the initContainers member: "none", "all" or a list of names. */
static int
parse_init(json_t *v, struct resolved *r, char *err, size_t errlen)
{
	size_t i;
	json_t *e;

	if (json_is_string(v)) {
		if (strcmp(json_string_value(v), "none") == 0)
			r->init = RESOLVED_INIT_NONE;
		else if (strcmp(json_string_value(v), "all") == 0)
			r->init = RESOLVED_INIT_ALL;
		else {
			seterr(err, errlen, "initContainers: must be \"none\", "
			    "\"all\" or a list of container names");
			return -EINVAL;
		}
		return 0;
	}
	if (!json_is_array(v)) {
		seterr(err, errlen, "initContainers: must be a string or list");
		return -EINVAL;
	}
	if (json_array_size(v) > RESOLVED_MAX_NAMES) {
		seterr(err, errlen, "initContainers: more than %d names",
		    RESOLVED_MAX_NAMES);
		return -EINVAL;
	}
	r->init = RESOLVED_INIT_NAMED;
	json_array_foreach(v, i, e) {
		char *dst = r->init_names[r->ninit_names];

		if (get_str(e, "initContainers[]", dst, 64, err, errlen) < 0)
			return -EINVAL;
		if (!resolved_is_dns_label(dst)) {
			seterr(err, errlen, "initContainers: \"%s\" is not a "
			    "valid container name", dst);
			return -EINVAL;
		}
		r->ninit_names++;
	}
	return 0;
}

/* Parse the legacyGPU member. */
static int
parse_legacy(json_t *v, struct resolved *r, char *err, size_t errlen)
{
	static const enum resolved_legacy all[] = { RESOLVED_LEGACY_REJECT,
	    RESOLVED_LEGACY_TRANSLATE, RESOLVED_LEGACY_ALLOW };

	if (json_is_string(v))
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			if (strcmp(json_string_value(v),
			    resolved_legacy_name(all[i])) == 0) {
				r->legacy = all[i];
				return 0;
			}
	seterr(err, errlen, "legacyGPU: must be \"reject\", \"translate\" or "
	    "\"allow\"");
	return -EINVAL;
}

/* Apply one member of the annotation object to r. */
static int
parse_member(const char *key, json_t *v, struct resolved *r, char *err,
    size_t errlen)
{
	if (strcmp(key, "claimTemplateName") == 0 ||
	    strcmp(key, "claimName") == 0) {
		char *dst = key[5] == 'T' ? r->claim_template : r->claim;

		if (get_str(v, key, dst, RESOLVED_NAME_MAX + 1, err,
		    errlen) < 0)
			return -EINVAL;
		if (!resolved_is_dns_subdomain(dst)) {
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
	if (strcmp(key, "initContainers") == 0)
		return parse_init(v, r, err, errlen);
	if (strcmp(key, "legacyGPU") == 0)
		return parse_legacy(v, r, err, errlen);
	seterr(err, errlen, "unknown key \"%.64s\"", key);
	return -EINVAL;
}

/* Parse the annotation value into ret; see resolved.h. */
int
resolved_parse(const char *json, size_t len, struct resolved *ret,
    char *err, size_t errlen)
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
	*ret = *r;
	rv = 0;
fail:
	free(r);
	json_decref(root);
	return rv;
}

/* Build the JSON form of initContainers. */
static json_t *
format_init(const struct resolved *r)
{
	json_t *a;

	if (r->init == RESOLVED_INIT_ALL)
		return json_string("all");
	if (r->init != RESOLVED_INIT_NAMED)
		return json_string("none");
	if ((a = json_array()) == NULL)
		return NULL;
	for (int i = 0; i < r->ninit_names; i++)
		if (json_array_append_new(a,
		    json_string(r->init_names[i])) < 0) {
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
	bad |= json_object_set_new(o, "initContainers", format_init(r));
	bad |= json_object_set_new(o, "legacyGPU",
	    json_string(resolved_legacy_name(r->legacy)));
	if (bad == 0)
		s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
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

/* Whether the init container called name gets the claim under r. */
bool
resolved_init_selected(const struct resolved *r, const char *name)
{
	if (r->init == RESOLVED_INIT_ALL)
		return true;
	if (r->init != RESOLVED_INIT_NAMED || name == NULL)
		return false;
	for (int i = 0; i < r->ninit_names; i++)
		if (strcmp(r->init_names[i], name) == 0)
			return true;
	return false;
}

/* Whether two resolved specs would produce the same pod patch. */
bool
resolved_equal(const struct resolved *a, const struct resolved *b)
{
	if (strcmp(a->claim_template, b->claim_template) != 0 ||
	    strcmp(a->claim, b->claim) != 0 || a->init != b->init ||
	    a->legacy != b->legacy || a->ninit_names != b->ninit_names ||
	    strcmp(a->sharing, b->sharing) != 0 ||
	    strcmp(a->instance, b->instance) != 0)
		return false;
	for (int i = 0; i < a->ninit_names; i++)
		if (strcmp(a->init_names[i], b->init_names[i]) != 0)
			return false;
	return true;
}
