/* Pods waiting for their generated claim: see acct_pending.h. */
#include <stdlib.h>
#include <string.h>

#include "kpgpud-sync/acct_pending.h"

/* Whether status.resourceClaimStatuses names a claim for podClaim name. */
static bool
has_claim(json_t *statuses, const char *name)
{
	json_t *e, *n, *c;
	size_t i;

	json_array_foreach(statuses, i, e) {
		n = json_object_get(e, "name");
		c = json_object_get(e, "resourceClaimName");
		if (json_is_string(n) && strcmp(json_string_value(n), name) ==
		    0 && json_is_string(c))
			return true;
	}
	return false;
}

/* Whether a Pod waits for a claim from one of its templates. */
bool
acct_pending_waits(json_t *pod)
{
	json_t *st = json_object_get(pod, "status"), *ph, *rc, *n;
	size_t i;

	ph = json_object_get(st, "phase");
	if (!json_is_string(ph) || strcmp(json_string_value(ph), "Pending"))
		return false;
	if (json_is_string(json_object_get(json_object_get(pod, "metadata"),
	    "deletionTimestamp")))
		return false;
	json_array_foreach(json_object_get(json_object_get(pod, "spec"),
	    "resourceClaims"), i, rc) {
		n = json_object_get(rc, "name");
		if (json_is_string(json_object_get(rc,
		    "resourceClaimTemplateName")) && json_is_string(n) &&
		    !has_claim(json_object_get(st, "resourceClaimStatuses"),
		    json_string_value(n)))
			return true;
	}
	return false;
}

/* The index of a Pod, or n. */
static size_t
find(const struct acct_pending *p, const char *ns, const char *name)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->pods[i].ns, ns) == 0 &&
		    strcmp(p->pods[i].name, name) == 0)
			return i;
	return p->n;
}

/* Remove entry i (order does not matter). */
static void
drop(struct acct_pending *p, size_t i)
{
	p->pods[i] = p->pods[--p->n];
}

/* Track or untrack a Pod. */
void
acct_pending_pod(struct acct_pending *p, json_t *obj, const char *ns,
    const char *name)
{
	size_t i = find(p, ns, name), n;
	void *q;

	if (!acct_pending_waits(obj)) {
		if (i < p->n)
			drop(p, i);
		return;
	}
	if (i < p->n || p->n >= ACCT_PENDING_MAX || strlen(ns) > 63 ||
	    strlen(name) > 253)
		return;
	if (p->n == p->alloc) {
		n = p->alloc ? p->alloc * 2 : 16;
		if ((q = reallocarray(p->pods, n, sizeof(*p->pods))) == NULL)
			return;
		p->pods = q;
		p->alloc = n;
	}
	strcpy(p->pods[p->n].ns, ns);
	strcpy(p->pods[p->n].name, name);
	p->n++;
}

/* A Pod was deleted. */
void
acct_pending_forget(struct acct_pending *p, json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *ns = json_object_get(md, "namespace");
	json_t *name = json_object_get(md, "name");
	size_t i;

	if (!json_is_string(ns) || !json_is_string(name))
		return;
	i = find(p, json_string_value(ns), json_string_value(name));
	if (i < p->n)
		drop(p, i);
}

/* Drop what a relist no longer has. */
void
acct_pending_prune(struct acct_pending *p, const struct strset *seen)
{
	char key[64 + 254 + 2];
	size_t i = 0;

	while (i < p->n) {
		if (strset_key(key, sizeof(key), p->pods[i].ns,
		    p->pods[i].name) == 0 && !strset_has(seen, key))
			drop(p, i);
		else
			i++;
	}
}

/* How many wait in a namespace. */
size_t
acct_pending_count(const struct acct_pending *p, const char *ns)
{
	size_t i, n = 0;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->pods[i].ns, ns) == 0)
			n++;
	return n;
}

void
acct_pending_free(struct acct_pending *p)
{
	free(p->pods);
	memset(p, 0, sizeof(*p));
}
