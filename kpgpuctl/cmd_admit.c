/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpuctl patch / review: run kpgpud-admit's patch and AdmissionReview code
 * on a file, offline, so an operator sees exactly what the webhook would
 * answer for a pod in a namespace with a given resolved annotation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/opts.h"
#include "common/resolved.h"
#include "common/util.h"
#include "kpgpuctl/ctl.h"
#include "kpgpud-admit/patch.h"
#include "kpgpud-admit/review.h"

#define CTL_MAX_INPUT	(3 * 1024 * 1024)

struct admit_opts {
	const char	*resolved;	/* --resolved JSON */
	enum review_ns	 ns;		/* review: how the namespace looks */
	bool		 pretty;
};

/* Read all of stdin up to the webhook's body cap; caller frees. */
static int
read_stdin(char **ret, size_t *ret_len)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap), *nb;
	size_t n;

	if (buf == NULL)
		return -ENOMEM;
	while ((n = fread(buf + len, 1, cap - len, stdin)) > 0) {
		len += n;
		if (len > CTL_MAX_INPUT) {
			free(buf);
			return -EFBIG;
		}
		if (len == cap) {
			if ((nb = realloc(buf, cap * 2)) == NULL) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (ferror(stdin)) {
		free(buf);
		return -EIO;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* Parse the common flags (the one argv walker, getopt_long's rules);
   returns 0 or 2 (usage). */
static int
parse_opts(int argc, char **argv, struct admit_opts *o, const char *usage)
{
	static const struct opts_long tab[] = {
		{ "resolved=", 'r' },
		{ "open", 'o' },
		{ "miss=", 'm' },
		{ "unresolved=", 'u' },
		{ "pretty", 'p' },
		{ "help", 'h' },
	};
	struct opts w;
	int c;

	o->ns = REVIEW_NS_ISOLATED;
	opts_init(&w, argc, argv, "", tab, nitems(tab));
	while ((c = opts_next(&w)) != OPTS_END) {
		switch (c) {
		case 'r': o->resolved = w.arg; break;
		case 'o': o->ns = REVIEW_NS_OPEN; break;
		case 'm':
		case 'u':
			if (strcmp(w.arg, "allow") == 0)
				o->ns = c == 'm' ? REVIEW_NS_MISS_ALLOW :
				    REVIEW_NS_UNRESOLVED_ALLOW;
			else if (strcmp(w.arg, "deny") == 0)
				o->ns = c == 'm' ? REVIEW_NS_MISS_DENY :
				    REVIEW_NS_UNRESOLVED_DENY;
			else
				goto bad;
			break;
		case 'p': o->pretty = true; break;
		case 'h':
			printf("usage: %s\n", usage);
			exit(0);
		default:
			fprintf(stderr, "%s\n", w.err);	/* OPTS_ERR */
			goto bad;
		}
	}
	if (w.ind == argc)
		return 0;
bad:
	fprintf(stderr, "usage: %s\n", usage);
	return 2;
}

/* Parse --resolved into *ret, saying what is wrong. */
static int
load_resolved(const char *json, struct resolved_pack **ret)
{
	char err[256];

	if (json == NULL) {
		fprintf(stderr, "kpgpuctl: --resolved JSON is required\n");
		return 2;
	}
	if (resolved_pack_parse(json, strlen(json), ret, err,
	    sizeof(err)) < 0) {
		fprintf(stderr, "kpgpuctl: --resolved: %s\n", err);
		return 2;
	}
	return 0;
}

/* Print the RFC 6902 patch kpgpud-admit would return for a pod on stdin. */
int
ctl_cmd_patch(int argc, char **argv)
{
	static const char usage[] = "kpgpuctl patch --resolved JSON [--pretty] "
	    "< pod.json";
	struct admit_opts o = { 0 };
	struct resolved_pack *r = NULL;
	struct patch_out *p = NULL;
	json_t *pod = NULL;
	json_error_t jerr;
	char *in = NULL, *s, err[256];
	size_t len;
	int rc;

	if ((rc = parse_opts(argc, argv, &o, usage)) != 0 ||
	    (rc = load_resolved(o.resolved, &r)) != 0)
		return rc;
	rc = 2;
	if (read_stdin(&in, &len) < 0) {
		fprintf(stderr, "kpgpuctl: cannot read the pod (over 3 MiB?)\n");
		goto fail;
	}
	if ((pod = json_loadb(in, len, 0, &jerr)) == NULL) {
		fprintf(stderr, "kpgpuctl: pod: %s\n", jerr.text);
		goto fail;
	}
	if (patch_build(pod, r, &p, err, sizeof(err)) < 0) {
		fprintf(stderr, "kpgpuctl: pod: %s\n", err);
		goto fail;
	}
	for (int i = 0; i < p->nwarnings; i++)
		fprintf(stderr, "warning: %s\n", p->warnings[i]);
	rc = 1;
	if (p->deny) {
		fprintf(stderr, "denied: %s\n", p->message);
		goto fail;
	}
	if (!o.pretty)
		printf("%s\n", p->ops);
	else {
		json_t *ops = json_loadb(p->ops, p->ops_len, 0, &jerr);

		s = json_dumps(ops, JSON_INDENT(2));
		json_decref(ops);
		if (s == NULL)
			goto fail;
		printf("%s\n", s);
		free(s);
	}
	rc = 0;
fail:
	patch_out_free(p);
	json_decref(pod);
	resolved_pack_unref(r);
	free(in);
	return rc;
}

/* Print the AdmissionReview response for a review on stdin. */
int
ctl_cmd_review(int argc, char **argv)
{
	static const char usage[] = "kpgpuctl review --resolved JSON | --open "
	    "| --miss allow|deny | --unresolved allow|deny < review.json";
	struct admit_opts o = { 0 };
	struct resolved_pack *r = NULL;
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	char *in = NULL, err[256];
	size_t len;
	int rc;

	if ((rc = parse_opts(argc, argv, &o, usage)) != 0)
		return rc;
	if (o.ns == REVIEW_NS_ISOLATED &&
	    (rc = load_resolved(o.resolved, &r)) != 0)
		return rc;
	rc = 2;
	if (read_stdin(&in, &len) < 0) {
		fprintf(stderr, "kpgpuctl: cannot read the review (over 3 MiB?)"
		    "\n");
		goto fail;
	}
	if (review_parse(in, len, &rv, err, sizeof(err)) < 0 ||
	    review_answer(rv, o.ns, r, &rep, err, sizeof(err)) < 0) {
		fprintf(stderr, "kpgpuctl: malformed review (the server "
		    "answers 400): %s\n", err);
		goto fail;
	}
	printf("%s\n", rep->body);
	if (rep->patch != NULL)
		fprintf(stderr, "patch: %s\n", rep->patch);
	rc = 0;
fail:
	review_reply_free(rep);
	review_free(rv);
	resolved_pack_unref(r);
	free(in);
	return rc;
}
