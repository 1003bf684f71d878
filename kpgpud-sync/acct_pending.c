/* SPDX-License-Identifier: Apache-2.0 */
/* Pods waiting for their generated claim: see acct_pending.h. */
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
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

/* One namespace's waiting Pods (name -> the name, its own key) and
   refusals (Event name -> struct refusal), each map capped. */
struct pend_ns {
	struct strmap	*waiting;
	struct strmap	*refused;
	char		 ns[];
};

/* A FailedResourceClaimCreation Event: the Pod it names and its message. */
struct refusal {
	char	 pod[254];
	char	 msg[ACCT_MESSAGE_MAX + 1];
	char	 ev[];		/* the Event's name: the map's key */
};

/* Free a namespace's entries and itself. */
static void
ns_free(void *v)
{
	struct pend_ns *pn = v;

	if (pn == NULL)
		return;
	strmap_free(pn->waiting, free);
	strmap_free(pn->refused, free);
	free(pn);
}

/* A namespace's entry; made when create is set (NULL when absent, out of
   memory or the name is too long). */
static struct pend_ns *
ns_get(struct acct_pending *p, const char *ns, bool create)
{
	struct pend_ns *pn;
	size_t len = strlen(ns);

	if (p->by_ns != NULL && (pn = strmap_get(p->by_ns, ns)) != NULL)
		return pn;
	if (!create || len > 63 || (p->by_ns == NULL &&
	    strmap_new(0, 0, &p->by_ns) < 0))
		return NULL;
	if ((pn = calloc(1, sizeof(*pn) + len + 1)) == NULL)
		return NULL;
	memcpy(pn->ns, ns, len + 1);
	if (strmap_new(0, ACCT_PENDING_NS_MAX, &pn->waiting) < 0 ||
	    strmap_new(0, ACCT_PENDING_NS_MAX, &pn->refused) < 0 ||
	    strmap_put(p->by_ns, pn->ns, pn, NULL) < 0) {
		ns_free(pn);
		return NULL;
	}
	return pn;
}

/* Drop a namespace that holds nothing any more. */
static void
ns_release(struct acct_pending *p, struct pend_ns *pn)
{
	if (pn == NULL || strmap_count(pn->waiting) != 0 ||
	    strmap_count(pn->refused) != 0)
		return;
	(void)strmap_remove(p->by_ns, pn->ns, NULL);
	ns_free(pn);
}

/* Remove key from map m, freeing its value. */
static void
map_drop(struct strmap *m, const char *key)
{
	void *v;

	if (strmap_remove(m, key, &v) == 0)
		free(v);
}

/* Track or untrack a Pod. */
void
acct_pending_pod(struct acct_pending *p, json_t *obj, const char *ns,
    const char *name)
{
	struct pend_ns *pn;
	char *k;

	if (!acct_pending_waits(obj)) {
		if ((pn = ns_get(p, ns, false)) != NULL) {
			map_drop(pn->waiting, name);
			ns_release(p, pn);
		}
		return;
	}
	if (strlen(name) > 253 || (pn = ns_get(p, ns, true)) == NULL ||
	    strmap_has(pn->waiting, name))
		return;
	/* over the namespace's cap: that namespace's count stops growing */
	if ((k = strdup(name)) != NULL && strmap_put(pn->waiting, k, k,
	    NULL) < 0)
		free(k);
	ns_release(p, pn);
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
	struct pend_ns *pn;

	if (!key_of(obj, &ns, &name) || (pn = ns_get(p, ns, false)) == NULL)
		return;
	map_drop(pn->waiting, name);
	ns_release(p, pn);
}

/* Drop the entries of one kind (refused or waiting) a relist no longer
   has. */
static void
prune(struct acct_pending *p, const struct strset *seen, bool refused)
{
	char key[64 + 254 + 2];
	struct pend_ns *pn;
	struct strmap *m;
	const char *k, *name;
	size_t pos = 0, i;
	void *v;

	if (p->by_ns == NULL)
		return;
	while (strmap_next(p->by_ns, &pos, &k, &v)) {
		pn = v;
		m = refused ? pn->refused : pn->waiting;
		i = 0;
		while (strmap_next(m, &i, &name, &v))
			if (strset_key(key, sizeof(key), pn->ns, name) == 0 &&
			    !strset_has(seen, key)) {
				(void)strmap_remove(m, name, NULL);
				free(v);
			}
		ns_release(p, pn);
	}
}

void
acct_pending_prune(struct acct_pending *p, const struct strset *seen)
{
	prune(p, seen, false);
}

void
acct_pending_event_prune(struct acct_pending *p, const struct strset *seen)
{
	prune(p, seen, true);
}

/* A FailedResourceClaimCreation Event of a Pod. */
void
acct_pending_event(struct acct_pending *p, json_t *ev, bool deleted)
{
	json_t *io = json_object_get(ev, "involvedObject");
	const char *ns, *name, *kind, *pod, *msg, *reason;
	struct pend_ns *pn;
	struct refusal *e;
	size_t i, len;

	if (!key_of(ev, &ns, &name))
		return;
	if (deleted) {
		if ((pn = ns_get(p, ns, false)) != NULL) {
			map_drop(pn->refused, name);
			ns_release(p, pn);
		}
		return;
	}
	kind = json_string_value(json_object_get(io, "kind"));
	pod = json_string_value(json_object_get(io, "name"));
	msg = json_string_value(json_object_get(ev, "message"));
	reason = json_string_value(json_object_get(ev, "reason"));
	if (kind == NULL || strcmp(kind, "Pod") != 0 || pod == NULL ||
	    strlen(pod) > 253 || msg == NULL || reason == NULL ||
	    strcmp(reason, ACCT_CLAIM_EVENT) != 0 ||
	    (len = strlen(name)) > 253 || (pn = ns_get(p, ns, true)) == NULL)
		return;
	if ((e = strmap_get(pn->refused, name)) == NULL) {
		if ((e = calloc(1, sizeof(*e) + len + 1)) == NULL)
			return;
		memcpy(e->ev, name, len + 1);
		if (strmap_put(pn->refused, e->ev, e, NULL) < 0) {
			free(e);	/* the namespace's cap */
			ns_release(p, pn);
			return;
		}
	}
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

/* The quota refusal of Pod name in a namespace, or NULL. */
static const char *
ns_quota_msg(const struct pend_ns *pn, const char *name)
{
	const struct refusal *e;
	const char *k;
	size_t pos = 0;
	void *v;

	while (strmap_next(pn->refused, &pos, &k, &v)) {
		e = v;
		if (strcmp(e->pod, name) == 0 &&
		    strstr(e->msg, "exceeded quota") != NULL)
			return e->msg;
	}
	return NULL;
}

/* The quota message of a waiting Pod, or NULL. */
const char *
acct_pending_quota_msg(const struct acct_pending *p, const char *ns,
    const char *name)
{
	const struct pend_ns *pn;

	if (p->by_ns == NULL || (pn = strmap_get(p->by_ns, ns)) == NULL ||
	    !strmap_has(pn->waiting, name))
		return NULL;
	return ns_quota_msg(pn, name);
}

/* The Pods of a namespace that wait on quota: their count, some names. */
size_t
acct_pending_quota_pods(const struct acct_pending *p, const char *ns,
    const char **ret_names, size_t max, const char **ret_msg)
{
	const struct pend_ns *pn;
	const char *name, *msg;
	size_t pos = 0, n = 0;
	void *v;

	if (p->by_ns == NULL || (pn = strmap_get(p->by_ns, ns)) == NULL)
		return 0;
	while (strmap_next(pn->waiting, &pos, &name, &v)) {
		if ((msg = ns_quota_msg(pn, name)) == NULL)
			continue;
		if (n < max)
			ret_names[n] = name;
		if (n++ == 0 && ret_msg != NULL)
			*ret_msg = msg;
	}
	return n;
}

/* How many wait on quota in a namespace. */
size_t
acct_pending_count(const struct acct_pending *p, const char *ns)
{
	return acct_pending_quota_pods(p, ns, NULL, 0, NULL);
}

/* Entries held for a namespace. */
size_t
acct_pending_held(const struct acct_pending *p, const char *ns)
{
	const struct pend_ns *pn;

	if (p->by_ns == NULL || (pn = strmap_get(p->by_ns, ns)) == NULL)
		return 0;
	return strmap_count(pn->waiting) + strmap_count(pn->refused);
}

void
acct_pending_free(struct acct_pending *p)
{
	strmap_free(p->by_ns, ns_free);
	memset(p, 0, sizeof(*p));
}
