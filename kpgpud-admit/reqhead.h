/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The head of an AdmissionReview: the members before request.object
 * (apiVersion, kind, request.uid, request.kind, request.operation,
 * request.subResource, request.namespace), read from a body that will not
 * be parsed whole (nested deeper than the JSON parser goes). The apiserver
 * writes these members first, so the head is enough to answer the request
 * with its uid. Lenient: it stops at the first byte it does not understand
 * and reports what it found up to there. Pure: no I/O, no allocation.
 */
#ifndef KPGPUD_ADMIT_REQHEAD_H
#define KPGPUD_ADMIT_REQHEAD_H

#include <stdbool.h>
#include <stddef.h>

#define REQHEAD_STR_MAX	256	/* longest member value kept */

/* One string member: set when seen with a value kept verbatim. */
struct reqhead_str {
	bool	 seen;		/* the member was present */
	bool	 ok;		/* its value is a plain printable ASCII string
				   of at most REQHEAD_STR_MAX bytes */
	char	 v[REQHEAD_STR_MAX + 1];
};

struct reqhead {
	struct reqhead_str	 api;		/* apiVersion */
	struct reqhead_str	 kind;		/* kind */
	struct reqhead_str	 uid;		/* request.uid */
	struct reqhead_str	 group;		/* request.kind.group */
	struct reqhead_str	 rkind;		/* request.kind.kind */
	struct reqhead_str	 op;		/* request.operation */
	struct reqhead_str	 sub;		/* request.subResource */
	struct reqhead_str	 ns;		/* request.namespace */
};

/* Read the head of the review in buf (any prefix of it will do). */
void	 reqhead_scan(const char *buf, size_t len, struct reqhead *ret);

#endif
