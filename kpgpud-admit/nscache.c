/* SPDX-License-Identifier: Apache-2.0 */
/* The namespace map of kpgpud-admit: see nscache.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "common/util.h"
#include "kpgpud-admit/nscache.h"

/*
 * Index slots for this many namespaces from the start (32 KB); the map
 * grows past it by doubling its index, each time rebuilding the index under
 * the write lock while reviews wait (once per doubling; the entries are
 * never copied, see common/strmap.c) rather than sizing every daemon's
 * index for the cap.
 */
#define NSCACHE_HINT	4096

/*
 * What is known about one namespace: the value of its name in the map.
 * Never changed once in the map (a put replaces the entry); its pack is
 * shared with the reviews that looked it up and outlives the entry until
 * they let go.
 */
struct nscache_entry {
	enum nscache_state		 state;
	const struct resolved_pack	*r;	/* NSCACHE_ISOLATED only */
	uint64_t			 epoch;
	char				 name[];	/* the map's key */
};

struct nscache {
	pthread_rwlock_t	 lock;
	struct strmap		*map;	/* entry->name -> entry */
	uint64_t		 epoch;
	bool			 full;	/* a full snapshot is being received */
};

/* Free one entry (a strmap value). */
static void
entry_free(void *p)
{
	struct nscache_entry *e = p;

	if (e == NULL)
		return;
	resolved_pack_unref(e->r);
	free(e);
}

/* Create an empty map; see nscache.h. */
int
nscache_new(size_t max, struct nscache **ret)
{
	struct nscache *c;
	int r;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	if ((r = strmap_new(NSCACHE_HINT, max ? max : NSCACHE_DEFAULT_MAX,
	    &c->map)) < 0) {
		free(c);
		return r;
	}
	if (pthread_rwlock_init(&c->lock, NULL) != 0) {
		strmap_free(c->map, NULL);
		free(c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

/* Free the map and every entry (NULL ok). */
void
nscache_free(struct nscache *c)
{
	if (c == NULL)
		return;
	strmap_free(c->map, entry_free);
	pthread_rwlock_destroy(&c->lock);
	free(c);
}

/* Build the new entry for a put, outside the lock. */
static int
make_entry(const char *ns, bool isolated, const char *json,
    struct nscache_entry **ret, char *err, size_t errlen)
{
	struct nscache_entry *e;
	struct resolved_pack *p = NULL;
	size_t len = strlen(ns) + 1;
	int rv = 0;

	if ((e = calloc(1, sizeof(*e) + len)) == NULL)
		return -ENOMEM;
	memcpy(e->name, ns, len);
	e->state = isolated ? NSCACHE_ISOLATED : NSCACHE_OPEN;
	if (isolated && json == NULL) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "labelled isolated but the %s "
			    "annotation is missing", RESOLVED_ANNOTATION);
		rv = -EINVAL;
	} else if (isolated) {
		rv = resolved_pack_parse(json, strlen(json), &p, err, errlen);
		if (rv == -ENOMEM) {
			free(e);
			return rv;
		}
		e->r = p;
	}
	if (rv < 0)
		e->state = NSCACHE_UNRESOLVED;
	*ret = e;
	return rv;
}

/* Record what sync says about ns; see nscache.h. */
int
nscache_put(struct nscache *c, const char *ns, bool isolated,
    const char *resolved_json, char *err, size_t errlen)
{
	struct nscache_entry *e;
	void *old = NULL;
	int rv, r;

	if (!dns1123_label_valid(ns))
		return -EINVAL;
	rv = make_entry(ns, isolated, resolved_json, &e, err, errlen);
	if (rv == -ENOMEM)
		return rv;
	pthread_rwlock_wrlock(&c->lock);
	e->epoch = c->epoch;
	r = strmap_put(c->map, e->name, e, &old);
	pthread_rwlock_unlock(&c->lock);
	entry_free(r < 0 ? e : old);
	return r < 0 ? r : rv;
}

/* Forget ns. */
int
nscache_delete(struct nscache *c, const char *ns)
{
	void *e = NULL;
	int r;

	pthread_rwlock_wrlock(&c->lock);
	r = strmap_remove(c->map, ns, &e);
	pthread_rwlock_unlock(&c->lock);
	entry_free(e);
	return r;
}

/*
 * What is known about ns. The reference is taken under the read lock, so
 * a writer that replaces or drops the entry (under the write lock) frees
 * the pack only after the caller's release.
 */
enum nscache_state
nscache_get(struct nscache *c, const char *ns,
    const struct resolved_pack **ret)
{
	const struct nscache_entry *e;
	enum nscache_state st = NSCACHE_MISSING;

	pthread_rwlock_rdlock(&c->lock);
	if ((e = strmap_get(c->map, ns)) != NULL) {
		st = e->state;
		if (st == NSCACHE_ISOLATED && ret != NULL)
			*ret = resolved_pack_ref(e->r);
	}
	pthread_rwlock_unlock(&c->lock);
	return st;
}

/* Start a full snapshot: later puts carry a new epoch. */
void
nscache_begin_full(struct nscache *c)
{
	pthread_rwlock_wrlock(&c->lock);
	c->epoch++;
	c->full = true;
	pthread_rwlock_unlock(&c->lock);
}

/* End a full snapshot: drop what it did not mention. */
size_t
nscache_end_full(struct nscache *c)
{
	struct nscache_entry *e;
	void *v;
	size_t pos = 0, dropped = 0;

	pthread_rwlock_wrlock(&c->lock);
	while (c->full && strmap_next(c->map, &pos, NULL, &v)) {
		e = v;
		if (e->epoch == c->epoch)
			continue;
		/* removing never moves the other entries: pos stays good */
		(void)strmap_remove(c->map, e->name, NULL);
		entry_free(e);
		dropped++;
	}
	c->full = false;
	pthread_rwlock_unlock(&c->lock);
	return dropped;
}

/* Give up on an unfinished snapshot without dropping anything. */
void
nscache_abort_full(struct nscache *c)
{
	pthread_rwlock_wrlock(&c->lock);
	c->full = false;
	pthread_rwlock_unlock(&c->lock);
}

/* Number of namespaces held. */
size_t
nscache_count(struct nscache *c)
{
	size_t n;

	pthread_rwlock_rdlock(&c->lock);
	n = strmap_count(c->map);
	pthread_rwlock_unlock(&c->lock);
	return n;
}
