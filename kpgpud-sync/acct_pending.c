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

/* The index of an entry by namespace and name, or s->n. */
static size_t
find(const struct acct_pod_set *s, const char *ns, const char *name)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->e[i].ns, ns) == 0 &&
		    strcmp(s->e[i].name, name) == 0)
			return i;
	return s->n;
}

/* Remove entry i (order does not matter). */
static void
drop(struct acct_pod_set *s, size_t i)
{
	s->e[i] = s->e[--s->n];
}

/* A new entry (NULL when full or out of memory). */
static struct acct_pending_pod *
add(struct acct_pod_set *s, const char *ns, const char *name)
{
	void *q;
	size_t n;

	if (s->n >= ACCT_PENDING_MAX || strlen(ns) > 63 || strlen(name) > 253)
		return NULL;
	if (s->n == s->alloc) {
		n = s->alloc ? s->alloc * 2 : 16;
		if ((q = reallocarray(s->e, n, sizeof(*s->e))) == NULL)
			return NULL;
		s->e = q;
		s->alloc = n;
	}
	memset(&s->e[s->n], 0, sizeof(s->e[0]));
	strcpy(s->e[s->n].ns, ns);
	strcpy(s->e[s->n].name, name);
	return &s->e[s->n++];
}

/* Track or untrack a Pod. */
void
acct_pending_pod(struct acct_pending *p, json_t *obj, const char *ns,
    const char *name)
{
	size_t i = find(&p->waiting, ns, name);

	if (!acct_pending_waits(obj)) {
		if (i < p->waiting.n)
			drop(&p->waiting, i);
	} else if (i == p->waiting.n)
		(void)add(&p->waiting, ns, name);
}

/* The namespace and name of an object, or false. */
static bool
key_of(json_t *obj, const char **ns, const char **name)
{
	json_t *md = json_object_get(obj, "metadata");

	*ns = json_string_value(json_object_get(md, "namespace"));
	*name = json_string_value(json_object_get(md, "name"));
	return *ns != NULL && *name != NULL;
}

/* A Pod was deleted. */
void
acct_pending_forget(struct acct_pending *p, json_t *obj)
{
	const char *ns, *name;
	size_t i;

	if (!key_of(obj, &ns, &name))
		return;
	if ((i = find(&p->waiting, ns, name)) < p->waiting.n)
		drop(&p->waiting, i);
}

/* Drop the entries a relist no longer has. */
static void
prune(struct acct_pod_set *s, const struct strset *seen)
{
	char key[64 + 254 + 2];
	size_t i = 0;

	while (i < s->n) {
		if (strset_key(key, sizeof(key), s->e[i].ns, s->e[i].name) ==
		    0 && !strset_has(seen, key))
			drop(s, i);
		else
			i++;
	}
}

void
acct_pending_prune(struct acct_pending *p, const struct strset *seen)
{
	prune(&p->waiting, seen);
}

void
acct_pending_event_prune(struct acct_pending *p, const struct strset *seen)
{
	prune(&p->refused, seen);
}

/* A FailedResourceClaimCreation Event of a Pod. */
void
acct_pending_event(struct acct_pending *p, json_t *ev, bool deleted)
{
	json_t *io = json_object_get(ev, "involvedObject");
	const char *ns, *name, *kind, *pod, *msg, *reason;
	struct acct_pending_pod *e;
	size_t i;

	if (!key_of(ev, &ns, &name))
		return;
	i = find(&p->refused, ns, name);
	if (deleted) {
		if (i < p->refused.n)
			drop(&p->refused, i);
		return;
	}
	kind = json_string_value(json_object_get(io, "kind"));
	pod = json_string_value(json_object_get(io, "name"));
	msg = json_string_value(json_object_get(ev, "message"));
	reason = json_string_value(json_object_get(ev, "reason"));
	if (kind == NULL || strcmp(kind, "Pod") != 0 || pod == NULL ||
	    strlen(pod) > 253 || msg == NULL || reason == NULL ||
	    strcmp(reason, ACCT_CLAIM_EVENT) != 0)
		return;
	if (i < p->refused.n)
		e = &p->refused.e[i];
	else if ((e = add(&p->refused, ns, name)) == NULL)
		return;
	strcpy(e->pod, pod);
	/* cut to the cap before a UTF-8 character that does not fit */
	i = strlen(msg);
	if (i > ACCT_MESSAGE_MAX)
		for (i = ACCT_MESSAGE_MAX; i > 0 &&
		    ((unsigned char)msg[i] & 0xc0) == 0x80; i--)
			;
	memcpy(e->msg, msg, i);
	e->msg[i] = '\0';
}

/* The quota message of a waiting Pod, or NULL. */
const char *
acct_pending_quota_msg(const struct acct_pending *p, const char *ns,
    const char *name)
{
	size_t i;

	if (find(&p->waiting, ns, name) == p->waiting.n)
		return NULL;
	for (i = 0; i < p->refused.n; i++)
		if (strcmp(p->refused.e[i].ns, ns) == 0 &&
		    strcmp(p->refused.e[i].pod, name) == 0 &&
		    strstr(p->refused.e[i].msg, "exceeded quota") != NULL)
			return p->refused.e[i].msg;
	return NULL;
}

/* How many wait on quota in a namespace. */
size_t
acct_pending_count(const struct acct_pending *p, const char *ns)
{
	size_t i, n = 0;

	for (i = 0; i < p->waiting.n; i++)
		if (strcmp(p->waiting.e[i].ns, ns) == 0 &&
		    acct_pending_quota_msg(p, ns, p->waiting.e[i].name) != NULL)
			n++;
	return n;
}

/* The i-th waiting Pod. */
const struct acct_pending_pod *
acct_pending_at(const struct acct_pending *p, size_t i)
{
	return &p->waiting.e[i];
}

void
acct_pending_free(struct acct_pending *p)
{
	free(p->waiting.e);
	free(p->refused.e);
	memset(p, 0, sizeof(*p));
}
