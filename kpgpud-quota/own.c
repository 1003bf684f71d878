/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-quota's own writes as they stream back. Every object a write of
 * ours returned (its resourceVersion) is remembered by kind, namespace and
 * name until sync streams its change. A change whose cache row is that very
 * write (same resourceVersion) and whose generation is the row's current
 * one wakes no reconcile: the state is what the reconcile that wrote it
 * planned. Anything else queues the tenant as before: another writer's
 * version, a change older than the row (an edit by someone else may lie
 * between the change and our write), a delete, a write whose answer we
 * never read, one not remembered because the set was full, or any
 * change of a snapshot (every write is forgotten when one begins).
 *
 * A change that may be ours is looked at when the worker is free, just
 * before the next key starts and in the same read transaction (SQLite
 * reads again every page it needs after each commit of sync, once per
 * transaction): a change looked at alone costs a snapshot of its own.
 * Its tenant could not start sooner anyway, as one key is in process at
 * a time and no key starts before the changes held are looked at.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/strmap.h"
#include "kpgpud-quota/quota.h"

/* One object we wrote: its version as our write left it. */
struct own {
	char	 rv[CACHE_RV_MAX + 1];
	char	 key[];		/* "Kind/ns/name" */
};

/* The map key of an object; -E2BIG when it cannot be one of ours. */
static int
own_key(char *buf, size_t len, const char *kind, const char *ns,
    const char *name)
{
	int n = snprintf(buf, len, "%s/%s/%s", kind, ns, name);

	return n < 0 || (size_t)n >= len ? -E2BIG : 0;
}

/* Whether kind is one whose changes only wake the tenant it is in. */
static bool
own_kind(const char *kind)
{
	return strcmp(kind, "Namespace") == 0 ||
	    strcmp(kind, CACHE_KIND_QUOTA) == 0 ||
	    strcmp(kind, CACHE_KIND_CLAIMTEMPLATE) == 0 ||
	    strcmp(kind, CACHE_KIND_CLAIM) == 0;
}

/* Forget one object. */
static void
own_forget(struct quotad *q, const char *key)
{
	void *v = NULL;

	if (strmap_remove(q->own, key, &v) == 0)
		free(v);
}

/*
 * A write of ours answered 2xx with obj (the object as the server left it,
 * or a Status for a delete): remember its version, or forget the object.
 */
void
quotad_own_wrote(struct quotad *q, const char *method, json_t *obj)
{
	json_t *md = json_object_get(obj, "metadata");
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	const char *name = json_string_value(json_object_get(md, "name"));
	const char *rv = json_string_value(json_object_get(md,
	    "resourceVersion"));
	char key[IPC_KIND_MAX + IPC_NS_MAX + IPC_NAME_MAX + 3];
	struct own *o;
	void *old = NULL;
	int r;

	if (q->own == NULL || kind == NULL || name == NULL || !own_kind(kind))
		return;
	if (strcmp(kind, "Namespace") == 0)
		ns = name;
	if (ns == NULL || own_key(key, sizeof(key), kind, ns, name) < 0)
		return;
	if (strcmp(method, "DELETE") == 0 || rv == NULL ||
	    strlen(rv) > CACHE_RV_MAX) {
		own_forget(q, key);
		return;
	}
	if ((o = malloc(sizeof(*o) + strlen(key) + 1)) == NULL) {
		own_forget(q, key);
		return;
	}
	strcpy(o->rv, rv);
	strcpy(o->key, key);
	if ((r = strmap_put(q->own, o->key, o, &old)) < 0) {
		free(o);
		if (!q->own_full)
			log_warn("own writes not remembered error=%s: their "
			    "changes from sync queue reconciles",
			    strerror(-r));
		q->own_full = true;
		return;
	}
	free(old);
}

/*
 * Forget every write: a snapshot from sync (after a reconnect, or a
 * rebuilt cache) gives each row once at its newest generation, so an edit
 * by someone else before our write would not show as a change of its own.
 */
void
quotad_own_reset(struct quotad *q)
{
	const char *k;
	size_t pos = 0;
	void *v;

	quotad_own_settle(q);	/* as they would have been: before it */
	if (q->own == NULL)
		return;
	while (strmap_next(q->own, &pos, &k, &v)) {
		(void)strmap_remove(q->own, k, NULL);
		free(v);
	}
}

/* The write of ours a change is of (its map key in key), or NULL. */
static struct own *
own_of(struct quotad *q, const struct ipc_change *ch, char *key, size_t len)
{
	bool ns = ch->topic == IPC_TOPIC_NAMESPACES;

	if (q->own == NULL || !own_kind(ns ? "Namespace" : ch->kind) ||
	    own_key(key, len, ns ? "Namespace" : ch->kind,
	    ns ? ch->name : ch->ns, ch->name) < 0)
		return NULL;
	return strmap_get(q->own, key);
}

/*
 * Whether a change sync streamed is our own last write of the object and
 * nothing after it: the cache row is at the change's generation and holds
 * the version our write returned. The object is forgotten either way (a
 * delete is never ours to ignore).
 */
bool
quotad_own_echo(struct quotad *q, struct cache *c,
    const struct ipc_change *ch)
{
	char key[IPC_KIND_MAX + IPC_NS_MAX + IPC_NAME_MAX + 3];
	bool ns = ch->topic == IPC_TOPIC_NAMESPACES, echo = false;
	struct cache_owned *o = NULL;
	struct cache_ns *row = NULL;
	struct own *w;

	if ((w = own_of(q, ch, key, sizeof(key))) == NULL)
		return false;
	if (ch->deleted || c == NULL)
		;	/* gone, or nothing to compare with */
	else if (ns && cache_ns_get(c, ch->name, &row) == 0) {
		echo = row->gen == ch->generation && row->rv != NULL &&
		    strcmp(row->rv, w->rv) == 0;
		cache_ns_free(row);
	} else if (!ns && cache_owned_get(c, ch->kind, ch->ns, ch->name,
	    &o) == 0) {
		echo = o->gen == ch->generation && o->rv != NULL &&
		    strcmp(o->rv, w->rv) == 0;
		cache_owned_free(o);
	}
	own_forget(q, key);
	return echo;
}

/*
 * Hold a change that may be our write coming back, to be looked at by
 * quotad_own_settle; false (look at it now) when it is of no write of
 * ours or QUOTAD_LATER_MAX changes are held already.
 */
bool
quotad_own_later(struct quotad *q, const struct ipc_change *ch)
{
	char key[IPC_KIND_MAX + IPC_NS_MAX + IPC_NAME_MAX + 3];

	if (q->nlater >= QUOTAD_LATER_MAX ||
	    own_of(q, ch, key, sizeof(key)) == NULL)
		return false;
	if (q->later == NULL &&
	    (q->later = calloc(QUOTAD_LATER_MAX, sizeof(*q->later))) == NULL)
		return false;
	q->later[q->nlater] = *ch;
	q->later[q->nlater++].resolved = NULL;	/* not ours to keep */
	return true;
}

/*
 * Look at the changes held, in the order they came, from the cache's
 * snapshot of the caller's read transaction: queue the tenant of each one
 * that is not our own write.
 */
void
quotad_own_settle(struct quotad *q)
{
	struct cache *c;
	int n = q->nlater;

	if (n == 0)
		return;
	c = quotad_cache(q);
	q->nlater = 0;
	for (int i = 0; i < n; i++) {
		const struct ipc_change *ch = &q->later[i];

		if (quotad_own_echo(q, c, ch))
			metric_inc(q->m.own, NULL, NULL);
		else
			queue_enqueue_ns(q, ch->topic == IPC_TOPIC_NAMESPACES ?
			    ch->name : ch->ns);
	}
}

/* Forget the changes held (quotad_stop). */
void
quotad_own_free(struct quotad *q)
{
	free(q->later);
	q->later = NULL;
	q->nlater = 0;
}
