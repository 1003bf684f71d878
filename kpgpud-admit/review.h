/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AdmissionReview (admission.k8s.io/v1) in and out. Two steps so the server
 * can look the namespace up between them without blocking: review_parse()
 * checks the request and says which namespace matters (if any), and
 * review_answer() builds the response for what the lookup found. Pure: no
 * I/O, no logging.
 */
#ifndef KPGPUD_REVIEW_H
#define KPGPUD_REVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "common/resolved.h"

#define REVIEW_UID_MAX		256
#define REVIEW_MESSAGE_MAX	640

/* What the namespace lookup found. */
enum review_ns {
	REVIEW_NS_ISOLATED = 0,	/* known and isolated: patch under r */
	REVIEW_NS_OPEN,		/* known, not isolated: pass */
	REVIEW_NS_MISS_ALLOW,	/* unknown, miss policy allow: pass, warn */
	REVIEW_NS_MISS_DENY,	/* unknown, miss policy deny */
	REVIEW_NS_UNRESOLVED_ALLOW,	/* labelled isolated, no usable
					   resolved annotation; policy allow */
	REVIEW_NS_UNRESOLVED_DENY,	/* the same, miss policy deny */
};

/* How a review ended, for metrics and logs. */
enum review_result {
	REVIEW_SKIPPED = 0,	/* not a Pod CREATE */
	REVIEW_OPEN,		/* namespace not isolated */
	REVIEW_PATCHED,
	REVIEW_UNCHANGED,	/* already carries the claim */
	REVIEW_DENIED,		/* policy (legacy GPU request) */
	REVIEW_MISS_ALLOWED,
	REVIEW_MISS_DENIED,
	REVIEW_REFUSED,		/* isolated, but no patch could be built
				   (a cap, a malformed Pod): denied */
	REVIEW_NRESULTS
};

struct review;

struct review_reply {
	char			*body;		/* AdmissionReview JSON */
	size_t			 len;
	bool			 allowed;
	enum review_result	 result;
	char			*patch;		/* JSON patch text, or NULL */
	char			 message[REVIEW_MESSAGE_MAX];	/* denials */
};

/*
 * Parse and check a request body. Returns 0, -EINVAL for a malformed review
 * (reason in err, to be sent with a 400), -E2BIG for valid JSON nested
 * deeper than the parser goes (JSCAN_MAX_DEPTH; reason in err: read the
 * review with review_parse_head), -ENOMEM.
 */
int	 review_parse(const char *body, size_t len, struct review **ret,
	    char *err, size_t errlen);
/*
 * The same with jansson parsing the whole body: the reference the default
 * path (a validating scanner recording the few members read, no tree) must
 * agree with byte for byte.
 */
int	 review_parse_full(const char *body, size_t len, struct review **ret,
	    char *err, size_t errlen);
/*
 * Read a review that will not be parsed whole from its head (the members
 * before request.object; see reqhead.h), for the reason why (a cap). A Pod
 * CREATE read so is refused in an isolated namespace, and wherever it is
 * when the head does not name a valid namespace; anything else is answered
 * as a whole review would be. Returns 0, -EINVAL when the head does not
 * show an AdmissionReview with a uid (reason in err), -ENOMEM.
 */
int	 review_parse_head(const char *body, size_t len, const char *why,
	    struct review **ret, char *err, size_t errlen);
/* Cap the JSON patch of this review at max bytes (0: PATCH_OPS_MAX). */
void	 review_set_max_patch(struct review *rv, size_t max);
void	 review_free(struct review *rv);
/* The namespace whose isolation decides, or NULL when none is needed. */
const char *review_namespace(const struct review *rv);
const char *review_uid(const struct review *rv);

/*
 * Build the response for what the namespace lookup found (r is used only
 * for REVIEW_NS_ISOLATED). A pod that cannot be patched (malformed, over a
 * cap, out of memory) in an isolated namespace gets a denial
 * (REVIEW_REFUSED, the reason also in err), never an error. Returns 0 or
 * -ENOMEM.
 */
int	 review_answer(const struct review *rv, enum review_ns ns,
	    const struct resolved_pack *r, struct review_reply **ret,
	    char *err, size_t errlen);
void	 review_reply_free(struct review_reply *rep);

/* Metric label of a result ("patched", "denied", ...). */
const char *review_result_name(enum review_result res);

#endif
