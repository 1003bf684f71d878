/* AdmissionReview in and out: see review.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kpgpud-admit/patch.h"
#include "kpgpud-admit/review.h"

#define REVIEW_API	"admission.k8s.io/v1"
#define REVIEW_KIND	"AdmissionReview"

struct review {
	json_t		*root;
	const json_t	*object;	/* the Pod, inside root */
	char		 uid[REVIEW_UID_MAX + 1];
	char		 ns[64];	/* "" when the request just passes */
};

/* Write a formatted reason into err when the caller gave a buffer. */
__attribute__((format(printf, 3, 4)))
static int
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* A string member of o, or NULL when absent or not a string. */
static const char *
str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* Whether the request is a Pod CREATE (the only thing we patch). */
static bool
is_pod_create(const json_t *req)
{
	const json_t *kind = json_object_get(req, "kind");
	const char *group = str(kind, "group"), *k = str(kind, "kind");
	const char *op = str(req, "operation"), *sub = str(req, "subResource");

	return k != NULL && strcmp(k, "Pod") == 0 &&
	    (group == NULL || group[0] == '\0') &&
	    op != NULL && strcmp(op, "CREATE") == 0 &&
	    (sub == NULL || sub[0] == '\0');
}

/* Check the Pod part of a request and fill in rv's object and namespace. */
static int
parse_pod(struct review *rv, const json_t *req, char *err, size_t errlen)
{
	const json_t *obj = json_object_get(req, "object");
	const char *ns = str(req, "namespace");

	if (!json_is_object(obj))
		return seterr(err, errlen, "request.object is not a Pod "
		    "object");
	if (ns == NULL || ns[0] == '\0')
		ns = str(json_object_get(obj, "metadata"), "namespace");
	if (ns == NULL || ns[0] == '\0')
		return seterr(err, errlen, "request has no namespace");
	if (!resolved_is_dns_label(ns))
		return seterr(err, errlen, "request.namespace is not a valid "
		    "namespace name");
	rv->object = obj;
	snprintf(rv->ns, sizeof(rv->ns), "%s", ns);
	return 0;
}

/* Parse and check an AdmissionReview request body; see review.h. */
int
review_parse(const char *body, size_t len, struct review **ret, char *err,
    size_t errlen)
{
	struct review *rv;
	const json_t *req;
	const char *s;
	json_error_t jerr;
	int e = -EINVAL;

	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return -ENOMEM;
	rv->root = json_loadb(body, len, 0, &jerr);
	if (rv->root == NULL) {
		seterr(err, errlen, "body is not JSON: %s (line %d, column "
		    "%d)", jerr.text, jerr.line, jerr.column);
		goto fail;
	}
	if (!json_is_object(rv->root)) {
		seterr(err, errlen, "body is not a JSON object");
		goto fail;
	}
	s = str(rv->root, "apiVersion");
	if (s == NULL || strcmp(s, REVIEW_API) != 0) {
		seterr(err, errlen, "apiVersion must be %s", REVIEW_API);
		goto fail;
	}
	s = str(rv->root, "kind");
	if (s == NULL || strcmp(s, REVIEW_KIND) != 0) {
		seterr(err, errlen, "kind must be %s", REVIEW_KIND);
		goto fail;
	}
	req = json_object_get(rv->root, "request");
	if (!json_is_object(req)) {
		seterr(err, errlen, "request is missing");
		goto fail;
	}
	s = str(req, "uid");
	if (s == NULL || s[0] == '\0' || strlen(s) > REVIEW_UID_MAX) {
		seterr(err, errlen, "request.uid is missing or too long");
		goto fail;
	}
	memcpy(rv->uid, s, strlen(s) + 1);
	if (is_pod_create(req) && (e = parse_pod(rv, req, err, errlen)) < 0)
		goto fail;
	*ret = rv;
	return 0;
fail:
	review_free(rv);
	return -EINVAL;
}

/* Free a parsed review; NULL is fine. */
void
review_free(struct review *rv)
{
	if (rv == NULL)
		return;
	json_decref(rv->root);
	free(rv);
}

/* The namespace whose isolation decides, or NULL. */
const char *
review_namespace(const struct review *rv)
{
	return rv->ns[0] != '\0' ? rv->ns : NULL;
}

/* The request uid (echoed in the response). */
const char *
review_uid(const struct review *rv)
{
	return rv->uid;
}

/* Standard base64 of len bytes of src; caller frees. */
static char *
base64(const char *src, size_t len)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = (const unsigned char *)src;
	char *out, *o;
	size_t i;

	if ((out = malloc((len + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	o = out;
	for (i = 0; i + 2 < len; i += 3) {
		*o++ = tab[s[i] >> 2];
		*o++ = tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
		*o++ = tab[((s[i + 1] & 15) << 2) | (s[i + 2] >> 6)];
		*o++ = tab[s[i + 2] & 63];
	}
	if (i < len) {
		*o++ = tab[s[i] >> 2];
		if (i + 1 < len) {
			*o++ = tab[((s[i] & 3) << 4) | (s[i + 1] >> 4)];
			*o++ = tab[(s[i + 1] & 15) << 2];
		} else
			*o++ = tab[(s[i] & 3) << 4];
		while ((o - out) % 4 != 0)
			*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* Put the denial status into the response object. */
static int
set_denial(json_t *resp, struct review_reply *rep, int code,
    const char *reason)
{
	rep->allowed = false;
	return json_object_set_new(resp, "allowed", json_false()) |
	    json_object_set_new(resp, "status", json_pack("{s:i, s:s, s:s}",
	    "code", code, "reason", reason, "message", rep->message));
}

/* Put a non-empty patch into the response object. */
static int
set_patch(json_t *resp, struct review_reply *rep, const json_t *ops)
{
	char *b64;
	int bad;

	if ((rep->patch = json_dumps(ops, JSON_COMPACT)) == NULL)
		return -1;
	if ((b64 = base64(rep->patch, strlen(rep->patch))) == NULL)
		return -1;
	bad = json_object_set_new(resp, "patchType", json_string("JSONPatch"))
	    | json_object_set_new(resp, "patch", json_string(b64));
	free(b64);
	return bad;
}

/* Fill resp for an isolated namespace from the patch result. */
static int
answer_isolated(const struct review *rv, const struct resolved *r,
    json_t *resp, json_t *warnings, struct review_reply *rep, char *err,
    size_t errlen)
{
	struct patch_out *p = NULL;
	int e, bad = 0;

	if ((e = patch_build(rv->object, r, &p, err, errlen)) < 0)
		return e;
	for (int i = 0; i < p->nwarnings; i++)
		bad |= json_array_append_new(warnings,
		    json_string(p->warnings[i]));
	if (p->deny) {
		rep->result = REVIEW_DENIED;
		snprintf(rep->message, sizeof(rep->message), "%s", p->message);
		bad |= set_denial(resp, rep, 403, "Forbidden");
	} else if (json_array_size(p->ops) == 0)
		rep->result = REVIEW_UNCHANGED;
	else {
		rep->result = REVIEW_PATCHED;
		bad |= set_patch(resp, rep, p->ops);
	}
	patch_out_free(p);
	return bad ? -ENOMEM : 0;
}

/* Fill resp for the cases that need no patch. */
static int
answer_plain(const struct review *rv, enum review_ns ns, json_t *resp,
    json_t *warnings, struct review_reply *rep)
{
	if (rv->ns[0] == '\0') {
		rep->result = REVIEW_SKIPPED;
		return 0;
	}
	switch (ns) {
	case REVIEW_NS_MISS_ALLOW:
		rep->result = REVIEW_MISS_ALLOWED;
		return json_array_append_new(warnings, json_sprintf(
		    "kpgpud: namespace %s not known yet; pod admitted "
		    "without its GPU claim", rv->ns));
	case REVIEW_NS_MISS_DENY:
		rep->result = REVIEW_MISS_DENIED;
		snprintf(rep->message, sizeof(rep->message), "kpgpud cannot "
		    "tell whether namespace \"%s\" is GPU-isolated (its cache "
		    "is unavailable and the namespace is not known yet); "
		    "retry shortly", rv->ns);
		return set_denial(resp, rep, 503, "ServiceUnavailable");
	case REVIEW_NS_UNRESOLVED_ALLOW:
		rep->result = REVIEW_MISS_ALLOWED;
		return json_array_append_new(warnings, json_sprintf(
		    "kpgpud: namespace %s is labelled for GPU isolation but "
		    "kpgpud has not (yet) resolved its claim (no or an invalid "
		    RESOLVED_ANNOTATION " annotation); pod admitted "
		    "without its GPU claim; check kpgpud-quota", rv->ns));
	case REVIEW_NS_UNRESOLVED_DENY:
		rep->result = REVIEW_MISS_DENIED;
		snprintf(rep->message, sizeof(rep->message), "namespace \"%s\" "
		    "is labelled for GPU isolation but kpgpud has not (yet) "
		    "resolved its claim (no or an invalid "
		    RESOLVED_ANNOTATION " annotation); retry shortly, "
		    "and check kpgpud-quota if this persists", rv->ns);
		return set_denial(resp, rep, 503, "ServiceUnavailable");
	case REVIEW_NS_OPEN:
	default:
		rep->result = REVIEW_OPEN;
		return 0;
	}
}

/* Build the AdmissionReview response; see review.h. */
int
review_answer(const struct review *rv, enum review_ns ns,
    const struct resolved *r, struct review_reply **ret, char *err,
    size_t errlen)
{
	struct review_reply *rep;
	json_t *root = NULL, *resp, *warnings;
	int e = -ENOMEM, bad = 0;

	if ((rep = calloc(1, sizeof(*rep))) == NULL)
		return -ENOMEM;
	rep->allowed = true;
	root = json_pack("{s:s, s:s, s:{s:s, s:b}}", "apiVersion", REVIEW_API,
	    "kind", REVIEW_KIND, "response", "uid", rv->uid, "allowed", 1);
	warnings = json_array();
	if (root == NULL || warnings == NULL)
		goto fail;
	resp = json_object_get(root, "response");
	if (rv->ns[0] != '\0' && ns == REVIEW_NS_ISOLATED)
		e = answer_isolated(rv, r, resp, warnings, rep, err, errlen);
	else
		e = answer_plain(rv, ns, resp, warnings, rep) ? -ENOMEM : 0;
	if (e < 0)
		goto fail;
	e = -ENOMEM;
	if (json_array_size(warnings) > 0)
		bad |= json_object_set(resp, "warnings", warnings);
	if (bad || (rep->body = json_dumps(root, JSON_COMPACT)) == NULL)
		goto fail;
	rep->len = strlen(rep->body);
	*ret = rep;
	rep = NULL;
	e = 0;
fail:
	json_decref(warnings);
	json_decref(root);
	review_reply_free(rep);
	return e;
}

/* Free a reply; NULL is fine. */
void
review_reply_free(struct review_reply *rep)
{
	if (rep == NULL)
		return;
	free(rep->body);
	free(rep->patch);
	free(rep);
}

/* Metric label of a result. */
const char *
review_result_name(enum review_result res)
{
	static const char *const names[REVIEW_NRESULTS] = {
		[REVIEW_SKIPPED] = "skipped",
		[REVIEW_OPEN] = "open",
		[REVIEW_PATCHED] = "patched",
		[REVIEW_UNCHANGED] = "unchanged",
		[REVIEW_DENIED] = "denied",
		[REVIEW_MISS_ALLOWED] = "miss_allowed",
		[REVIEW_MISS_DENIED] = "miss_denied",
	};

	return (unsigned)res < REVIEW_NRESULTS ? names[res] : "unknown";
}
