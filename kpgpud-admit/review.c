/*
 * AdmissionReview in and out: see review.h. The body is validated whole by
 * jscan.c; jansson builds only the members listed in review_nodes, in a
 * region of the review's own (see struct region).
 */
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/util.h"
#include "kpgpud-admit/jscan.h"
#include "kpgpud-admit/patch.h"
#include "kpgpud-admit/reqhead.h"
#include "kpgpud-admit/review.h"

#define REVIEW_API	"admission.k8s.io/v1"
#define REVIEW_KIND	"AdmissionReview"

/*
 * The memory of a pruned tree: review_parse() builds it with jansson's
 * allocations on this thread carved from the review's region (jansson's
 * allocator is set once to region_malloc/region_free, which are malloc and
 * free whenever no region is being built on the thread), and review_free()
 * drops the region whole instead of freeing the tree node by node. Nothing
 * changes a built tree (readers get it const), so no node is freed later.
 */
#define REGION_CHUNK	16384	/* the first chunk: an agent pod's tree */
#define REGION_CHUNK_MAX (1u << 20)	/* chunks double up to this */

struct region_chunk {
	struct region_chunk	*next;
	size_t			 used;
	size_t			 cap;
	alignas(max_align_t) unsigned char data[];
};

struct region {
	struct region_chunk	*chunks;	/* newest first */
};

/* The region jansson allocates from on this thread, or NULL. */
static _Thread_local struct region *region_building;

struct review {
	json_t		*root;		/* in region when it has chunks */
	struct region	 region;
	const json_t	*object;	/* the Pod, inside root */
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
 * The members of a review that review_check() and patch_build() read: the
 * fast path builds nothing else, so a member either starts reading must be
 * added here (test_review_diff and fuzz_review_diff compare the two paths).
 */
enum {
	N_ROOT, N_API, N_KIND, N_REQ, N_UID, N_RKIND, N_OP, N_SUB, N_NS,
	N_OBJ, N_META, N_MNS, N_SPEC, N_CLAIMS, N_CTRS, N_CTR, N_CTR_NAME,
	N_CTR_RES, N_INITS, N_INIT, N_INIT_NAME, N_INIT_RES, N_COUNT
};
static const struct jscan_node review_nodes[N_COUNT] = {
	[N_ROOT] = { -1, NULL },
	[N_API] = { N_ROOT, "apiVersion" },
	[N_KIND] = { N_ROOT, "kind" },
	[N_REQ] = { N_ROOT, "request" },
	[N_UID] = { N_REQ, "uid" },
	[N_RKIND] = { N_REQ, "kind" },
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
	[N_INITS] = { N_SPEC, "initContainers" },
	[N_INIT] = { N_INITS, NULL },
	[N_INIT_NAME] = { N_INIT, "name" },
	[N_INIT_RES] = { N_INIT, "resources" },
};

/*
 * The members of one container that patch_build() reads, in the order of the
 * element nodes above (N_CTR, N_CTR_NAME, N_CTR_RES).
 */
enum { NC_ROOT, NC_NAME, NC_RESOURCES, NC_COUNT };
#define REVIEW_LIST_CAP	128	/* containers per list recorded by the scan;
				   longer lists are walked again */
static const struct jscan_node ctr_nodes[NC_COUNT] = {
	[NC_ROOT] = { -1, NULL },
	[NC_NAME] = { NC_ROOT, "name" },
	[NC_RESOURCES] = { NC_ROOT, "resources" },
};

/* A schema, and for the review the containers the scan recorded. */
struct schema {
	const struct jscan_node	*nodes;
	size_t			 n;
	struct jscan_list	*lists;		/* by element node, or NULL */
};
static const struct schema ctr_schema = { ctr_nodes, NC_COUNT, NULL };

/* jansson's allocator: from the region being built, else malloc. */
static void *
region_malloc(size_t n)
{
	struct region *r = region_building;
	struct region_chunk *c;
	const size_t align = alignof(max_align_t);
	void *p;

	if (r == NULL)
		return malloc(n);
	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + align - 1) & ~(align - 1);
	if ((c = r->chunks) == NULL || c->cap - c->used < n) {
		size_t cap = c == NULL ? REGION_CHUNK : c->cap >= REGION_CHUNK_MAX ?
		    REGION_CHUNK_MAX : c->cap * 2;

		if (cap < n)
			cap = n;
		if ((c = malloc(sizeof(*c) + cap)) == NULL)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = r->chunks;
		r->chunks = c;
	}
	p = c->data + c->used;
	c->used += n;
	return p;
}

/* jansson's free: nothing inside the region being built, else free. */
static void
region_free(void *p)
{
	struct region *r = region_building;

	if (r != NULL)
		for (struct region_chunk *c = r->chunks; c != NULL;
		    c = c->next)
			if ((unsigned char *)p >= c->data &&
			    (unsigned char *)p < c->data + c->cap)
				return;
	free(p);
}

/* Drop a region and everything in it. */
static void
region_drop(struct region *r)
{
	struct region_chunk *c;

	while ((c = r->chunks) != NULL) {
		r->chunks = c->next;
		free(c);
	}
}

static void
review_init_once(void)
{
	json_set_alloc_funcs(region_malloc, region_free);
}

/* Set jansson's allocator up for the regions; see review.h. */
void
review_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, review_init_once);
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
	if (!dns1123_label_valid(ns))
		return seterr(err, errlen, "request.namespace is not a valid "
		    "namespace name");
	rv->object = obj;
	snprintf(rv->ns, sizeof(rv->ns), "%s", ns);
	return 0;
}

/* Check a parsed body (rv->root) and fill in rv's uid and namespace. */
static int
review_check(struct review *rv, char *err, size_t errlen)
{
	const json_t *req;
	const char *s;

	if (!json_is_object(rv->root))
		return seterr(err, errlen, "body is not a JSON object");
	s = str(rv->root, "apiVersion");
	if (s == NULL || strcmp(s, REVIEW_API) != 0)
		return seterr(err, errlen, "apiVersion must be %s", REVIEW_API);
	s = str(rv->root, "kind");
	if (s == NULL || strcmp(s, REVIEW_KIND) != 0)
		return seterr(err, errlen, "kind must be %s", REVIEW_KIND);
	req = json_object_get(rv->root, "request");
	if (!json_is_object(req))
		return seterr(err, errlen, "request is missing");
	s = str(req, "uid");
	if (s == NULL || s[0] == '\0' || strlen(s) > REVIEW_UID_MAX)
		return seterr(err, errlen, "request.uid is missing or too "
		    "long");
	memcpy(rv->uid, s, strlen(s) + 1);
	if (is_pod_create(req))
		return parse_pod(rv, req, err, errlen);
	return 0;
}

/* Parse and check a body with jansson reading all of it; see review.h. */
int
review_parse_full(const char *body, size_t len, struct review **ret,
    char *err, size_t errlen)
{
	struct review *rv;
	json_error_t jerr;

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
	if (review_check(rv, err, errlen) < 0)
		goto fail;
	*ret = rv;
	return 0;
fail:
	review_free(rv);
	return -EINVAL;
}

/*
 * Building jansson values from text jscan has validated: no syntax, UTF-8,
 * range or depth checks are left to make, so this is a plain descent that
 * builds what json_loadb() would (integers as json_int_t, anything with a
 * fraction or exponent as a real, the last of duplicate members winning in
 * the first one's place). *p is advanced past the value; NULL is ENOMEM.
 */
static json_t *load_value(const char **p);

/* Skip JSON white space (the body is valid JSON: a value follows). */
static const char *
skip_ws(const char *p)
{
	return p + jscan_skip_ws(p, 0, SIZE_MAX);
}

/*
 * The string at *p (its '"'): *ret and *ret_len are its bytes, in the body
 * when it has no escape, else unescaped into b. *p moves past it.
 */
static int
load_string(const char **p, struct buf *b, const char **ret, size_t *ret_len)
{
	const char *s = *p + 1, *e = s;
	bool esc = false;

	while (*e != '"')
		if (*e == '\\') {
			esc = true;
			e += 2;
		} else
			e++;
	*p = e + 1;
	if (!esc) {
		*ret = s;
		*ret_len = (size_t)(e - s);
		return 0;
	}
	buf_reset(b);
	if (buf_append(b, s, (size_t)(e - s)) < 0)
		return -ENOMEM;
	b->len = jscan_unescape(b->data, b->len, b->data);
	b->data[b->len] = '\0';
	*ret = b->data;
	*ret_len = b->len;
	return 0;
}

/* A number: an integer unless it has a fraction or an exponent. */
static json_t *
load_number(const char **p)
{
	const char *s = *p;
	bool real = false;
	char *end;

	if (*s == '-')
		s++;
	for (; (*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' ||
	    *s == 'E' || *s == '+' || *s == '-'; s++)
		real |= *s == '.' || *s == 'e' || *s == 'E';
	if (real) {
		double d = strtod(*p, &end);

		*p = end;
		return json_real(d);
	}
	long long v = strtoll(*p, &end, 10);

	*p = end;
	return json_integer((json_int_t)v);
}

/* An object or an array at *p. */
static json_t *
load_container(const char **p)
{
	bool obj = **p == '{';
	json_t *c = obj ? json_object() : json_array(), *v;
	struct buf kb = BUF_INIT(0);
	const char *s = skip_ws(*p + 1), *key = NULL;
	size_t klen = 0;

	if (*s == (obj ? '}' : ']')) {
		*p = s + 1;
		return c;
	}
	while (c != NULL) {
		if (obj) {
			if (load_string(&s, &kb, &key, &klen) < 0)
				goto fail;
			s = skip_ws(s) + 1;	/* the ':' */
		}
		if ((v = load_value(&s)) == NULL || (obj ?
		    json_object_setn_new_nocheck(c, key, klen, v) :
		    json_array_append_new(c, v)) < 0)
			goto fail;
		s = skip_ws(s);
		if (*s++ != ',')
			break;
		s = skip_ws(s);
	}
	buf_free(&kb);
	*p = s;
	return c;
fail:
	buf_free(&kb);
	json_decref(c);
	return NULL;
}

static json_t *
load_value(const char **p)
{
	struct buf b = BUF_INIT(0);
	const char *str;
	size_t len;
	json_t *v;

	*p = skip_ws(*p);
	switch (**p) {
	case '{':
	case '[':
		return load_container(p);
	case '"':
		v = load_string(p, &b, &str, &len) < 0 ? NULL :
		    json_stringn_nocheck(len > 0 ? str : "", len);
		buf_free(&b);
		return v;
	case 't':
		*p += 4;
		return json_true();
	case 'f':
		*p += 5;
		return json_false();
	case 'n':
		*p += 4;
		return json_null();
	default:
		return load_number(p);
	}
}

/*
 * jansson's value of the span sp of body (already validated). A string
 * without escapes is its bytes, already checked as UTF-8 without NUL.
 */
static json_t *
load_span(const char *body, struct jscan_span sp)
{
	const char *v = body + sp.off;

	if (v[0] == '"' && memchr(v + 1, '\\', sp.len - 2) == NULL)
		return json_stringn_nocheck(v + 1, sp.len - 2);
	return load_value(&v);
}

static json_t *build_value(const char *body, const struct schema *sc,
    const struct jscan_span *sp, int n);

/* An object of the present schema children of node p. */
static json_t *
build_object(const char *body, const struct schema *sc,
    const struct jscan_span *sp, int p)
{
	json_t *o = json_object(), *v;

	for (size_t i = (size_t)p + 1; o != NULL && i < sc->n; i++) {
		if (sc->nodes[i].parent != p || sp[i].len == 0)
			continue;
		v = build_value(body, sc, sp, (int)i);
		if (v == NULL || json_object_set_new(o, sc->nodes[i].key, v) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	return o;
}

/* One container of a list: only its name and resources. */
static json_t *
build_container(const char *body, struct jscan_span el)
{
	struct jscan_span sp[NC_COUNT];

	if (body[el.off] != '{')
		return load_span(body, el);
	if (jscan_run(body + el.off, el.len, ctr_schema.nodes, ctr_schema.n,
	    sp, NULL) < 0)
		return NULL;
	return build_object(body + el.off, &ctr_schema, sp, NC_ROOT);
}

/* A list longer than the scan recorded: walk its elements again. */
static json_t *
build_long_list(const char *body, struct jscan_span sp)
{
	json_t *a = json_array(), *e;
	struct jscan_span el;
	size_t pos = sp.off;

	while (a != NULL &&
	    jscan_next_elem(body, sp.off + sp.len, &pos, &el) == 1) {
		e = build_container(body, el);
		if (e == NULL || json_array_append_new(a, e) < 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/* A list of containers, each object reduced to what the patch reads. */
static json_t *
build_list(const char *body, struct jscan_span sp, const struct jscan_list *l)
{
	json_t *a, *e;

	if (l->n > l->cap)
		return build_long_list(body, sp);
	a = json_array();
	for (size_t k = 0; a != NULL && k < l->n; k++) {
		const struct jscan_span *rec = l->rec + k * l->width;

		if (body[rec[0].off] == '{')
			e = build_object(body, &ctr_schema, rec, NC_ROOT);
		else
			e = load_span(body, rec[0]);
		if (e == NULL || json_array_append_new(a, e) < 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/*
 * The value of node n as jansson would build it, keeping only the members
 * in the schema of the objects that have schema children.
 */
static json_t *
build_value(const char *body, const struct schema *sc,
    const struct jscan_span *sp, int n)
{
	char c = body[sp[n].off];

	for (size_t i = (size_t)n + 1; i < sc->n; i++) {
		if (sc->nodes[i].parent != n)
			continue;
		if (c == '[' && sc->nodes[i].key == NULL)
			return build_list(body, sp[n], &sc->lists[i]);
		if (c == '{' && sc->nodes[i].key != NULL)
			return build_object(body, sc, sp, n);
	}
	return load_span(body, sp[n]);
}

/*
 * Parse and check a request body; see review.h. The scanner validates the
 * whole body and jansson builds only the members review_check() and the
 * patch read. A body the scanner refuses goes through the full parse, for
 * jansson's own error message and its verdict (see jscan.h on NUL bytes).
 */
int
review_parse(const char *body, size_t len, struct review **ret, char *err,
    size_t errlen)
{
	struct jscan_span sp[N_COUNT], recs[2][REVIEW_LIST_CAP * NC_COUNT];
	struct jscan_list lists[N_COUNT] = {
		[N_CTR] = { recs[0], REVIEW_LIST_CAP, NC_COUNT, 0 },
		[N_INIT] = { recs[1], REVIEW_LIST_CAP, NC_COUNT, 0 },
	};
	const struct schema sc = { review_nodes, N_COUNT, lists };
	struct review *rv;

	review_init();
	if (jscan_run(body, len, review_nodes, N_COUNT, sp, lists) < 0)
		return review_parse_full(body, len, ret, err, errlen);
	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return -ENOMEM;
	region_building = &rv->region;
	rv->root = build_value(body, &sc, sp, N_ROOT);
	region_building = NULL;
	if (rv->root == NULL) {
		review_free(rv);
		return review_parse_full(body, len, ret, err, errlen);
	}
	if (review_check(rv, err, errlen) < 0) {
		review_free(rv);
		return -EINVAL;
	}
	*ret = rv;
	return 0;
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
	if (rv->region.chunks != NULL)
		region_drop(&rv->region);
	else
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

/* Append standard base64 (padded, no line breaks) of len bytes of src. */
static int
put_base64(struct buf *b, const void *src, size_t len)
{
	const unsigned char *s = src;
	unsigned char chunk[4 * 256 + 1];	/* EVP_EncodeBlock adds a NUL */
	size_t step = 3 * 256;

	for (size_t i = 0; i < len; i += step) {
		size_t n = len - i < step ? len - i : step;
		int o = EVP_EncodeBlock(chunk, s + i, (int)n);

		if (o < 0 || buf_append(b, chunk, (size_t)o) < 0)
			return -ENOMEM;
	}
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
answer_isolated(const struct review *rv, const struct resolved *r,
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
	if ((e = patch_build_max(rv->object, r, rv->max_patch ?
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
	return buf_put_json(b, s, strlen(s));
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

	bad = buf_puts(b, "{\"apiVersion\":\"" REVIEW_API "\",\"kind\":\""
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
    const struct resolved *r, struct review_reply **ret, char *err,
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
