/* SPDX-License-Identifier: Apache-2.0 */
/* The last reconcile result of each instance: see acct_result.h. */
#include <stdlib.h>
#include <string.h>

#include "kpgpud-sync/acct_result.h"

/* A string field of an object, or "". */
static const char *
str_of(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s != NULL ? s : "";
}

/* Copy s into dst (len bytes), cut before a UTF-8 character that does not
   fit. */
static void
copy_cut(char *dst, size_t len, const char *s)
{
	size_t i = strlen(s);

	if (i >= len)
		for (i = len - 1; i > 0 && ((unsigned char)s[i] & 0xc0) ==
		    0x80; i--)
			;
	memcpy(dst, s, i);
	dst[i] = '\0';
}

/* How many entries came from Events of namespace ns. */
static size_t
ns_count(const struct acct_results *s, const char *ns)
{
	size_t i, n = 0;

	for (i = 0; i < s->n; i++)
		n += strcmp(s->e[i].ev_ns, ns) == 0;
	return n;
}

/* Remove entry i (order does not matter). */
static void
drop(struct acct_results *s, size_t i)
{
	s->e[i] = s->e[--s->n];
}

const struct acct_result *
acct_result_get(const struct acct_results *s, const char *kind,
    const char *ns, const char *name)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->e[i].kind, kind) == 0 &&
		    strcmp(s->e[i].ns, ns) == 0 &&
		    strcmp(s->e[i].name, name) == 0)
			return &s->e[i];
	return NULL;
}

void
acct_result_event(struct acct_results *s, json_t *ev, bool deleted)
{
	json_t *md = json_object_get(ev, "metadata");
	json_t *io = json_object_get(ev, "involvedObject");
	const char *evns = str_of(md, "namespace"), *evname = str_of(md,
	    "name"), *kind, *ns, *name, *rv, *reason, *ts;
	struct acct_result *e;
	size_t i;
	void *q;

	if (deleted) {
		for (i = 0; i < s->n; i++)
			if (strcmp(s->e[i].ev_ns, evns) == 0 &&
			    strcmp(s->e[i].ev_name, evname) == 0) {
				drop(s, i);
				break;
			}
		return;
	}
	kind = str_of(io, "kind");
	ns = str_of(io, "namespace");
	name = str_of(io, "name");
	rv = str_of(io, "resourceVersion");
	reason = str_of(ev, "reason");
	ts = str_of(ev, "lastTimestamp");
	if (*ts == '\0')
		ts = str_of(ev, "eventTime");
	if (strcmp(str_of(ev, "reportingComponent"), ACCT_RESULT_SOURCE) !=
	    0 || strcmp(str_of(ev, "type"), "Normal") == 0 ||
	    strcmp(evns, *ns != '\0' ? ns : "default") != 0 ||
	    *kind == '\0' || *name == '\0' || *reason == '\0' ||
	    strlen(evns) > 63 || strlen(evname) > 253 || strlen(kind) > 63 ||
	    strlen(ns) > 63 || strlen(name) > 253 || strlen(rv) > 63 ||
	    strlen(reason) > 127 || strlen(ts) > 39)
		return;
	if ((e = (struct acct_result *)acct_result_get(s, kind, ns, name)) !=
	    NULL) {
		if (strcmp(e->ts, ts) > 0)	/* an older Event */
			return;
	} else {
		if (ns_count(s, evns) >= ACCT_RESULTS_NS_MAX)
			return;
		if (s->n == s->alloc) {
			i = s->alloc ? s->alloc * 2 : 16;
			if ((q = reallocarray(s->e, i, sizeof(*s->e))) == NULL)
				return;
			s->e = q;
			s->alloc = i;
		}
		e = &s->e[s->n++];
	}
	memset(e, 0, sizeof(*e));
	strcpy(e->ev_ns, evns);
	strcpy(e->ev_name, evname);
	strcpy(e->kind, kind);
	strcpy(e->ns, ns);
	strcpy(e->name, name);
	strcpy(e->rv, rv);
	strcpy(e->reason, reason);
	strcpy(e->ts, ts);
	copy_cut(e->msg, sizeof(e->msg), str_of(ev, "message"));
}

void
acct_result_prune(struct acct_results *s, const struct strset *seen)
{
	char key[64 + 254 + 2];
	size_t i = 0;

	while (i < s->n) {
		if (strset_key(key, sizeof(key), s->e[i].ev_ns,
		    s->e[i].ev_name) == 0 && !strset_has(seen, key))
			drop(s, i);
		else
			i++;
	}
}

void
acct_result_free(struct acct_results *s)
{
	free(s->e);
	memset(s, 0, sizeof(*s));
}
