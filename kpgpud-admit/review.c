/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AdmissionReview in and out: see review.h. The body is validated whole by
 * jscan.c, which records where the members the check and the patch read
 * are; the check reads the review's head from those spans, and podscan.c
 * the facts of the Pod the patch needs (kept in the review's region). The
 * reference path (review_parse_full) reads the same from jansson's tree of
 * the whole body.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/util.h"
#include "common/jscan.h"
#include "common/jsonw.h"
#include "kpgpud-admit/patch.h"
#include "kpgpud-admit/podscan.h"
#include "common/region.h"
#include "kpgpud-admit/reqhead.h"
#include "kpgpud-admit/review.h"

#define REVIEW_API	"admission.k8s.io/v1"
#define REVIEW_KIND	"AdmissionReview"
#define REVIEW_REPLY_RESERVE	256	/* a reply besides uid and patch */

struct review {
	json_t		*root;		/* the reference path's tree, or NULL */
	struct region	 region;	/* the fast path's copies */
	bool		 pod;		/* a Pod CREATE: pod holds its facts */
	struct patch_pod pod_facts;	/* strings in region or in root */
	char		 uid[REVIEW_UID_MAX + 1];
	char		 ns[64];	/* "" when the request just passes */
	size_t		 max_patch;	/* 0: PATCH_OPS_MAX */
	/*
	 * Read from its head only (review_parse_head): why, and whether no
	 * namespace decides (the pod is refused wherever it is).
	 */
	char		 capped[REVIEW_MESSAGE_MAX / 2];
	bool		 refuse_always;
};

/*
 * The members of a review that review_check() and the patch read: the fast
 * path reads nothing else, so a member either starts reading must be added
 * here (test_review_diff and fuzz_review_diff compare the two paths). The
 * nodes under each element node are podscan.h's PODSCAN_C_* in order.
 */
enum {
	N_ROOT, N_API, N_KIND, N_REQ, N_UID, N_RKIND, N_GROUP, N_RKIND_KIND,
	N_OP, N_SUB, N_NS, N_OBJ, N_META, N_MNS, N_SPEC, N_CLAIMS,
	N_CTRS, N_CTR, N_CTR_NAME, N_CTR_RES, N_CTR_LIM, N_CTR_REQ, N_CTR_CL,
	N_INITS, N_INIT, N_INIT_NAME, N_INIT_RES, N_INIT_LIM, N_INIT_REQ,
	N_INIT_CL, N_COUNT
};
static const struct jscan_node review_nodes[N_COUNT] = {
	[N_ROOT] = { -1, NULL },
	[N_API] = { N_ROOT, "apiVersion" },
	[N_KIND] = { N_ROOT, "kind" },
	[N_REQ] = { N_ROOT, "request" },
	[N_UID] = { N_REQ, "uid" },
	[N_RKIND] = { N_REQ, "kind" },
	[N_GROUP] = { N_RKIND, "group" },
	[N_RKIND_KIND] = { N_RKIND, "kind" },
	[N_OP] = { N_REQ, "operation" },
	[N_SUB] = { N_REQ, "subResource" },
	[N_NS] = { N_REQ, "namespace" },
	[N_OBJ] = { N_REQ, "object" },
	[N_META] = { N_OBJ, "metadata" },
	[N_MNS] = { N_META, "namespace" },
	[N_SPEC] = { N_OBJ, "spec" },
	[N_CLAIMS] = { N_SPEC, "resourceClaims" },
	[N_CTRS] = { N_SPEC, "containers" },
	[N_CTR] = { N_CTRS, NULL },
	[N_CTR_NAME] = { N_CTR, "name" },
	[N_CTR_RES] = { N_CTR, "resources" },
	[N_CTR_LIM] = { N_CTR_RES, "limits" },
	[N_CTR_REQ] = { N_CTR_RES, "requests" },
	[N_CTR_CL] = { N_CTR_RES, "claims" },
	[N_INITS] = { N_SPEC, "initContainers" },
	[N_INIT] = { N_INITS, NULL },
	[N_INIT_NAME] = { N_INIT, "name" },
	[N_INIT_RES] = { N_INIT, "resources" },
	[N_INIT_LIM] = { N_INIT_RES, "limits" },
	[N_INIT_REQ] = { N_INIT_RES, "requests" },
	[N_INIT_CL] = { N_INIT_RES, "claims" },
};
_Static_assert(N_CTR_CL - N_CTR == PODSCAN_C_CLAIMS &&
    N_INIT_CL - N_INIT == PODSCAN_C_CLAIMS, "container nodes as podscan's");

#define REVIEW_LIST_CAP	128	/* containers per list recorded by the scan;
				   longer lists are walked again */

/* A string member: its bytes (not NUL-terminated), s NULL when absent. */
struct hstr {
	const char	*s;
	size_t		 len;
};

/*
 * The members of a review's head that review_check() reads, from either
 * path: strings NULL when absent or not strings, objects false when absent
 * or not objects (and then nothing under them is set).
 */
struct head {
	bool		 root, req, obj;
	struct hstr	 api, kind, uid, group, rkind, op, sub, ns, mns;
};

/* Whether a head string is present and exactly want. */
static bool
hstr_is(struct hstr h, const char *want)
{
	return h.s != NULL && h.len == strlen(want) &&
	    memcmp(h.s, want, h.len) == 0;
}

/* Whether a head string is absent or empty. */
static bool
hstr_empty(struct hstr h)
{
	return h.s == NULL || h.len == 0;
}

/* Whether the request is a Pod CREATE (the only thing we patch). */
static bool
is_pod_create(const struct head *h)
{
	return hstr_is(h->rkind, "Pod") && hstr_empty(h->group) &&
	    hstr_is(h->op, "CREATE") && hstr_empty(h->sub);
}

/* Check the Pod part of a request and fill in rv's namespace. */
static int
parse_pod(struct review *rv, const struct head *h, char *err, size_t errlen)
{
	struct hstr ns = h->ns;

	if (!h->obj)
		return seterr(err, errlen, "request.object is not a Pod "
		    "object");
	if (hstr_empty(ns))
		ns = h->mns;
	if (hstr_empty(ns))
		return seterr(err, errlen, "request has no namespace");
	if (ns.len >= sizeof(rv->ns))
		return seterr(err, errlen, "request.namespace is not a valid "
		    "namespace name");
	memcpy(rv->ns, ns.s, ns.len);
	rv->ns[ns.len] = '\0';
	if (!dns1123_label_valid(rv->ns)) {
		rv->ns[0] = '\0';
		return seterr(err, errlen, "request.namespace is not a valid "
		    "namespace name");
	}
	rv->pod = true;
	return 0;
}

/* Check a review's head and fill in rv's uid and namespace. */
static int
review_check(struct review *rv, const struct head *h, char *err,
    size_t errlen)
{
	if (!h->root)
		return seterr(err, errlen, "body is not a JSON object");
	if (!hstr_is(h->api, REVIEW_API))
		return seterr(err, errlen, "apiVersion must be %s", REVIEW_API);
	if (!hstr_is(h->kind, REVIEW_KIND))
		return seterr(err, errlen, "kind must be %s", REVIEW_KIND);
	if (!h->req)
		return seterr(err, errlen, "request is missing");
	if (hstr_empty(h->uid) || h->uid.len > REVIEW_UID_MAX)
		return seterr(err, errlen, "request.uid is missing or too "
		    "long");
	memcpy(rv->uid, h->uid.s, h->uid.len);
	rv->uid[h->uid.len] = '\0';
	if (is_pod_create(h))
		return parse_pod(rv, h, err, errlen);
	return 0;
}

/* A string member of o, from jansson. */
static struct hstr
hstr_json(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	struct hstr h = { json_string_value(v), json_string_length(v) };

	return h;
}

/* The head of a review from jansson's tree of it. */
static void
head_from_json(const json_t *root, struct head *h)
{
	const json_t *req = json_object_get(root, "request");
	const json_t *kind = json_object_get(req, "kind");
	const json_t *obj = json_object_get(req, "object");

	h->root = json_is_object(root);
	h->req = json_is_object(req);
	h->obj = json_is_object(obj);
	h->api = hstr_json(root, "apiVersion");
	h->kind = hstr_json(root, "kind");
	h->uid = hstr_json(req, "uid");
	h->group = hstr_json(kind, "group");
	h->rkind = hstr_json(kind, "kind");
	h->op = hstr_json(req, "operation");
	h->sub = hstr_json(req, "subResource");
	h->ns = hstr_json(req, "namespace");
	h->mns = hstr_json(json_object_get(obj, "metadata"), "namespace");
}

/* Parse and check a body with jansson reading all of it; see review.h. */
int
review_parse_full(const char *body, size_t len, struct review **ret,
    char *err, size_t errlen)
{
	struct review *rv;
	json_error_t jerr;
	struct head h;
	int e = -EINVAL;

	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return -ENOMEM;
	rv->root = json_loadb(body, len, 0, &jerr);
	if (rv->root == NULL) {
		seterr(err, errlen, "body is not JSON: %s (line %d, column "
		    "%d)", jerr.text, jerr.line, jerr.column);
		review_free(rv);
		/* Valid JSON nested past the parser's depth: a cap, not junk. */
		return json_error_code(&jerr) == json_error_stack_overflow ?
		    -E2BIG : -EINVAL;
	}
	head_from_json(rv->root, &h);
	if (review_check(rv, &h, err, errlen) < 0)
		goto fail;
	if (rv->pod && (e = patch_pod_from_json(json_object_get(
	    json_object_get(rv->root, "request"), "object"), &rv->region,
	    &rv->pod_facts)) < 0)
		goto fail;
	*ret = rv;
	return 0;
fail:
	review_free(rv);
	return e;
}

/*
 * The string at span sp of body (its quotes included), unescaped into rg
 * when it has escapes; s NULL when it is not a string. 0 or -ENOMEM.
 */
static int
hstr_span(const char *body, struct jscan_span sp, struct region *rg,
    struct hstr *ret)
{
	const char *raw = body + sp.off + 1;
	size_t n;
	char *s;

	ret->s = NULL;
	ret->len = 0;
	if (sp.len < 2 || body[sp.off] != '"')
		return 0;
	n = sp.len - 2;
	if (memchr(raw, '\\', n) == NULL) {
		ret->s = raw;
		ret->len = n;
		return 0;
	}
	if ((s = region_alloc(rg, n)) == NULL)
		return -ENOMEM;
	ret->s = s;
	ret->len = jscan_unescape(raw, n, s);
	return 0;
}

/* Whether the value at sp is an object. */
static bool
is_object_at(const char *body, struct jscan_span sp)
{
	return sp.len > 0 && body[sp.off] == '{';
}

/*
 * The head of a review from the spans the scan recorded (a member under one
 * that is not an object has none). 0 or -ENOMEM.
 */
static int
head_from_scan(const char *body, const struct jscan_span *sp,
    struct region *rg, struct head *h)
{
	const struct { struct hstr *h; int node; } strs[] = {
		{ &h->api, N_API }, { &h->kind, N_KIND }, { &h->uid, N_UID },
		{ &h->group, N_GROUP }, { &h->rkind, N_RKIND_KIND },
		{ &h->op, N_OP }, { &h->sub, N_SUB }, { &h->ns, N_NS },
		{ &h->mns, N_MNS },
	};

	h->root = is_object_at(body, sp[N_ROOT]);
	h->req = is_object_at(body, sp[N_REQ]);
	h->obj = is_object_at(body, sp[N_OBJ]);
	for (size_t i = 0; i < nitems(strs); i++)
		if (hstr_span(body, sp[strs[i].node], rg, strs[i].h) < 0)
			return -ENOMEM;
	return 0;
}

/*
 * Parse and check a request body; see review.h. The scanner validates the
 * whole body and records the members the check and the patch read. A body
 * the scanner refuses goes through the full parse, for jansson's own error
 * message and its verdict (see jscan.h on NUL bytes).
 */
int
review_parse(const char *body, size_t len, struct review **ret, char *err,
    size_t errlen)
{
	struct jscan_span sp[N_COUNT];
	struct jscan_span recs[2][REVIEW_LIST_CAP * PODSCAN_C_COUNT];
	struct jscan_list lists[N_COUNT] = {
		[N_CTR] = { recs[0], REVIEW_LIST_CAP, PODSCAN_C_COUNT, 0 },
		[N_INIT] = { recs[1], REVIEW_LIST_CAP, PODSCAN_C_COUNT, 0 },
	};
	struct podscan_in in;
	struct review *rv;
	struct head h;
	int e;

	if (jscan_run(body, len, review_nodes, N_COUNT, sp, lists) < 0)
		return review_parse_full(body, len, ret, err, errlen);
	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return -ENOMEM;
	if ((e = head_from_scan(body, sp, &rv->region, &h)) < 0 ||
	    (e = review_check(rv, &h, err, errlen)) < 0)
		goto fail;
	if (rv->pod) {
		in = (struct podscan_in){ .pod = sp[N_OBJ], .spec = sp[N_SPEC],
		    .claims = sp[N_CLAIMS], .lists = { sp[N_CTRS],
		    sp[N_INITS] }, .recs = { &lists[N_CTR], &lists[N_INIT] } };
		if ((e = podscan_read(body, &in, &rv->region,
		    &rv->pod_facts)) < 0)
			goto fail;
	}
	*ret = rv;
	return 0;
fail:
	review_free(rv);
	return e;
}

/* A head member that is present, kept, and equal to want. */
static bool
head_is(const struct reqhead_str *m, const char *want)
{
	return m->seen && m->ok && strcmp(m->v, want) == 0;
}

/* Whether the head shows a Pod CREATE for certain, or not one for certain. */
static int
head_pod_create(const struct reqhead *h)
{
	if (!h->rkind.seen || !h->op.seen)
		return -1;	/* cannot tell */
	return head_is(&h->rkind, "Pod") && (!h->group.seen ||
	    head_is(&h->group, "")) && head_is(&h->op, "CREATE") &&
	    (!h->sub.seen || head_is(&h->sub, "")) ? 1 : 0;
}

/* Read a review from its head only; see review.h. */
int
review_parse_head(const char *body, size_t len, const char *why,
    struct review **ret, char *err, size_t errlen)
{
	struct reqhead h;
	struct review *rv;
	int pod;

	reqhead_scan(body, len, &h);
	if (!head_is(&h.api, REVIEW_API) || !head_is(&h.kind, REVIEW_KIND))
		return seterr(err, errlen, "apiVersion %s and kind %s not "
		    "found before the cap", REVIEW_API, REVIEW_KIND);
	if (!h.uid.ok || h.uid.v[0] == '\0')
		return seterr(err, errlen, "request.uid not found before the "
		    "cap");
	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return -ENOMEM;
	memcpy(rv->uid, h.uid.v, strlen(h.uid.v) + 1);
	snprintf(rv->capped, sizeof(rv->capped), "%s", why);
	if ((pod = head_pod_create(&h)) != 0) {
		if (h.ns.ok && strlen(h.ns.v) < sizeof(rv->ns) &&
		    dns1123_label_valid(h.ns.v))
			memcpy(rv->ns, h.ns.v, strlen(h.ns.v) + 1);
		else
			rv->refuse_always = true;
	}
	*ret = rv;
	return 0;
}

/* Cap the JSON patch this review may produce (0: PATCH_OPS_MAX). */
void
review_set_max_patch(struct review *rv, size_t max)
{
	rv->max_patch = max;
}

/* Free a parsed review; NULL is fine. */
void
review_free(struct review *rv)
{
	if (rv == NULL)
		return;
	region_drop(&rv->region);
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

/*
 * Append standard base64 (padded, no line breaks) of len bytes of src,
 * encoded by OpenSSL straight into b (len is capped far below INT_MAX).
 */
static int
put_base64(struct buf *b, const void *src, size_t len)
{
	size_t n = (len + 2) / 3 * 4;
	int o;

	if (len > INT_MAX / 2 || buf_reserve(b, n) < 0)
		return -ENOMEM;
	/* EVP_EncodeBlock adds a NUL, which buf_reserve() made room for. */
	o = EVP_EncodeBlock((unsigned char *)b->data + b->len, src, (int)len);
	if (o < 0)
		return -ENOMEM;
	b->len += (size_t)o;
	return 0;
}

/* What goes into the response besides uid and the verdict. */
struct answer {
	int		 code;		/* denials: status code and reason */
	const char	*reason;
	const char	*warnings[PATCH_MAX_WARNINGS];
	int		 nwarnings;
	char		 warning[REVIEW_MESSAGE_MAX];	/* answer_plain's */
};

/*
 * Refuse a pod kpgpud cannot give its claim (a cap, a malformed object):
 * answered, never a failed call, which failurePolicy: Ignore would admit.
 */
static void
answer_refused(const struct review *rv, const char *why, int code,
    struct answer *an, struct review_reply *rep)
{
	rep->result = REVIEW_REFUSED;
	rep->allowed = false;
	if (rv->ns[0] != '\0')
		snprintf(rep->message, sizeof(rep->message), "kpgpud cannot "
		    "add the GPU claim of namespace \"%s\" to this pod: %s; "
		    "a pod in a GPU-isolated namespace is refused without it",
		    rv->ns, why);
	else
		snprintf(rep->message, sizeof(rep->message), "kpgpud cannot "
		    "tell the namespace of this pod: %s; refused, as it may "
		    "be GPU-isolated", why);
	an->code = code;
	an->reason = code == 503 ? "ServiceUnavailable" : "Forbidden";
}

/* Decide for an isolated namespace from the patch result. */
static int
answer_isolated(const struct review *rv, const struct resolved_pack *r,
    struct answer *an, struct patch_out **pp, struct review_reply *rep,
    char *err, size_t errlen)
{
	struct patch_out *p;
	char why[256] = "";
	int e;

	if (rv->capped[0] != '\0') {
		answer_refused(rv, rv->capped, 403, an, rep);
		return 0;
	}
	if ((e = patch_build_pod(&rv->pod_facts, r, rv->max_patch ?
	    rv->max_patch : PATCH_OPS_MAX, pp, why, sizeof(why))) < 0) {
		if (e == -ENOMEM)
			snprintf(why, sizeof(why), "out of memory");
		answer_refused(rv, why, e == -ENOMEM ? 503 : 403, an, rep);
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s", why);
		return 0;
	}
	p = *pp;
	for (int i = 0; i < p->nwarnings; i++)
		an->warnings[an->nwarnings++] = p->warnings[i];
	if (p->deny) {
		rep->result = REVIEW_DENIED;
		rep->allowed = false;
		snprintf(rep->message, sizeof(rep->message), "%s", p->message);
		an->code = 403;
		an->reason = "Forbidden";
	} else if (p->nops == 0)
		rep->result = REVIEW_UNCHANGED;
	else {
		rep->result = REVIEW_PATCHED;
		rep->patch = p->ops;
		p->ops = NULL;
	}
	return 0;
}

/*
 * What a namespace state that needs no patch answers: its result, and a
 * warning (the pod is admitted) or a denial message, the namespace between
 * pre and post. States without an entry pass (REVIEW_OPEN).
 */
static const struct {
	enum review_result	 result;
	bool			 deny;
	const char		*pre;
	const char		*post;
} plain_says[] = {
	[REVIEW_NS_MISS_ALLOW] = { REVIEW_MISS_ALLOWED, false,
	    "kpgpud: namespace ", " not known yet; pod admitted without its "
	    "GPU claim" },
	[REVIEW_NS_MISS_DENY] = { REVIEW_MISS_DENIED, true,
	    "kpgpud cannot tell whether namespace \"", "\" is GPU-isolated "
	    "(its cache is unavailable and the namespace is not known yet); "
	    "retry shortly" },
	[REVIEW_NS_UNRESOLVED_ALLOW] = { REVIEW_MISS_ALLOWED, false,
	    "kpgpud: namespace ", " is labelled for GPU isolation but kpgpud "
	    "has not (yet) resolved its claim (no or an invalid "
	    RESOLVED_ANNOTATION " annotation); pod admitted without its GPU "
	    "claim; check kpgpud-quota" },
	[REVIEW_NS_UNRESOLVED_DENY] = { REVIEW_MISS_DENIED, true,
	    "namespace \"", "\" is labelled for GPU isolation but kpgpud has "
	    "not (yet) resolved its claim (no or an invalid "
	    RESOLVED_ANNOTATION " annotation); retry shortly, and check "
	    "kpgpud-quota if this persists" },
};

/* Decide the cases that need no patch. */
static void
answer_plain(const struct review *rv, enum review_ns ns, struct answer *an,
    struct review_reply *rep)
{
	if (rv->ns[0] == '\0') {
		rep->result = REVIEW_SKIPPED;
		return;
	}
	if ((size_t)ns >= nitems(plain_says) || plain_says[ns].pre == NULL) {
		rep->result = REVIEW_OPEN;
		return;
	}
	rep->result = plain_says[ns].result;
	if (!plain_says[ns].deny) {
		snprintf(an->warning, sizeof(an->warning), "%s%s%s",
		    plain_says[ns].pre, rv->ns, plain_says[ns].post);
		an->warnings[an->nwarnings++] = an->warning;
		return;
	}
	snprintf(rep->message, sizeof(rep->message), "%s%s%s",
	    plain_says[ns].pre, rv->ns, plain_says[ns].post);
	rep->allowed = false;
	an->code = 503;
	an->reason = "ServiceUnavailable";
}

/* Append a C string as a JSON string. */
static int
put_str(struct buf *b, const char *s)
{
	return jsonw_put_str(b, s, strlen(s));
}

/*
 * Write the AdmissionReview response: the members in the order and form
 * jansson's compact dump of the same object gives (tests compare).
 */
static int
write_body(struct buf *b, const struct review *rv, const struct answer *an,
    const struct review_reply *rep)
{
	int bad;

	/* The usual reply at once: the frame, the uid, the patch's base64. */
	bad = buf_reserve(b, REVIEW_REPLY_RESERVE + strlen(rv->uid) +
	    (rep->patch != NULL ? (strlen(rep->patch) + 2) / 3 * 4 : 0)) |
	    buf_puts(b, "{\"apiVersion\":\"" REVIEW_API "\",\"kind\":\""
	    REVIEW_KIND "\",\"response\":{\"uid\":") | put_str(b, rv->uid) |
	    buf_puts(b, rep->allowed ? ",\"allowed\":true" :
	    ",\"allowed\":false");
	if (!rep->allowed)
		bad |= buf_printf(b, ",\"status\":{\"code\":%d,\"reason\":",
		    an->code) | put_str(b, an->reason) |
		    buf_puts(b, ",\"message\":") | put_str(b, rep->message) |
		    buf_putc(b, '}');
	if (rep->patch != NULL)
		bad |= buf_puts(b, ",\"patchType\":\"JSONPatch\",\"patch\":\"") |
		    put_base64(b, rep->patch, strlen(rep->patch)) |
		    buf_putc(b, '"');
	for (int i = 0; i < an->nwarnings; i++)
		bad |= buf_puts(b, i == 0 ? ",\"warnings\":[" : ",") |
		    put_str(b, an->warnings[i]);
	if (an->nwarnings > 0)
		bad |= buf_putc(b, ']');
	return bad | buf_puts(b, "}}") ? -ENOMEM : 0;
}

/* Build the AdmissionReview response; see review.h. */
int
review_answer(const struct review *rv, enum review_ns ns,
    const struct resolved_pack *r, struct review_reply **ret, char *err,
    size_t errlen)
{
	struct review_reply *rep;
	struct patch_out *p = NULL;
	struct answer an = { 0 };
	/* The patch is capped; its base64 in the body needs 4/3 of it. */
	struct buf b = BUF_INIT(PATCH_OPS_MAX / 3 * 4 + (1u << 20));
	int e = 0;

	if ((rep = calloc(1, sizeof(*rep))) == NULL)
		return -ENOMEM;
	rep->allowed = true;
	if (rv->refuse_always)
		answer_refused(rv, rv->capped, 403, &an, rep);
	else if (rv->ns[0] != '\0' && ns == REVIEW_NS_ISOLATED)
		e = answer_isolated(rv, r, &an, &p, rep, err, errlen);
	else
		answer_plain(rv, ns, &an, rep);
	if (e == 0 && (e = write_body(&b, rv, &an, rep)) == 0 &&
	    (rep->body = buf_steal(&b, &rep->len)) == NULL)
		e = -ENOMEM;
	patch_out_free(p);
	buf_free(&b);
	if (e < 0) {
		review_reply_free(rep);
		return e;
	}
	*ret = rep;
	return 0;
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
		[REVIEW_REFUSED] = "refused",
	};

	return (unsigned)res < REVIEW_NRESULTS ? names[res] : "unknown";
}
