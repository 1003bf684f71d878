/* The namespace map of kpgpud-admit: see nscache.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-admit/nscache.h"

#define NSCACHE_BUCKETS	4096

struct nscache_entry {
	struct nscache_entry	*next;
	char			 name[64];
	enum nscache_state	 state;
	struct resolved		*r;	/* NSCACHE_ISOLATED only */
	uint64_t		 epoch;
};

struct nscache {
	pthread_rwlock_t	 lock;
	struct nscache_entry	*buckets[NSCACHE_BUCKETS];
	size_t			 n;
	size_t			 max;
	uint64_t		 epoch;
	bool			 full;	/* a full snapshot is being received */
};

/* FNV-1a of a name, reduced to a bucket index. */
static size_t
bucket(const char *s)
{
	return fnv1a32(FNV1A32_INIT, s) % NSCACHE_BUCKETS;
}

/* Free one entry. */
static void
entry_free(struct nscache_entry *e)
{
	free(e->r);
	free(e);
}

/* Create an empty map; see nscache.h. */
int
nscache_new(size_t max, struct nscache **ret)
{
	struct nscache *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	if (pthread_rwlock_init(&c->lock, NULL) != 0) {
		free(c);
		return -ENOMEM;
	}
	c->max = max ? max : NSCACHE_DEFAULT_MAX;
	*ret = c;
	return 0;
}

/* Free the map and every entry (NULL ok). */
void
nscache_free(struct nscache *c)
{
	struct nscache_entry *e, *next;

	if (c == NULL)
		return;
	for (size_t i = 0; i < NSCACHE_BUCKETS; i++)
		for (e = c->buckets[i]; e != NULL; e = next) {
			next = e->next;
			entry_free(e);
		}
	pthread_rwlock_destroy(&c->lock);
	free(c);
}

/* The link that points at ns's entry (or at the NULL ending its chain). */
static struct nscache_entry **
find(struct nscache *c, const char *ns)
{
	struct nscache_entry **pp = &c->buckets[bucket(ns)];

	while (*pp != NULL && strcmp((*pp)->name, ns) != 0)
		pp = &(*pp)->next;
	return pp;
}

/* Build the new entry for a put, outside the lock. */
static int
make_entry(const char *ns, bool isolated, const char *json,
    struct nscache_entry **ret, char *err, size_t errlen)
{
	struct nscache_entry *e;
	int rv = 0;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return -ENOMEM;
	memcpy(e->name, ns, strlen(ns) + 1);
	e->state = isolated ? NSCACHE_ISOLATED : NSCACHE_OPEN;
	if (isolated && json == NULL) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "labelled isolated but the %s "
			    "annotation is missing", RESOLVED_ANNOTATION);
		rv = -EINVAL;
	} else if (isolated) {
		if ((e->r = malloc(sizeof(*e->r))) == NULL) {
			free(e);
			return -ENOMEM;
		}
		rv = resolved_parse(json, strlen(json), e->r, err, errlen);
	}
	if (rv < 0) {
		free(e->r);
		e->r = NULL;
		e->state = NSCACHE_UNRESOLVED;
	}
	*ret = e;
	return rv;
}

/* Record what sync says about ns; see nscache.h. */
int
nscache_put(struct nscache *c, const char *ns, bool isolated,
    const char *resolved_json, char *err, size_t errlen)
{
	struct nscache_entry *e, **pp;
	int rv;

	if (!dns1123_label_valid(ns))
		return -EINVAL;
	rv = make_entry(ns, isolated, resolved_json, &e, err, errlen);
	if (rv == -ENOMEM)
		return rv;
	pthread_rwlock_wrlock(&c->lock);
	e->epoch = c->epoch;
	pp = find(c, ns);
	if (*pp != NULL) {
		e->next = (*pp)->next;
		entry_free(*pp);
		*pp = e;
	} else if (c->n >= c->max) {
		pthread_rwlock_unlock(&c->lock);
		entry_free(e);
		return -E2BIG;
	} else {
		*pp = e;
		c->n++;
	}
	pthread_rwlock_unlock(&c->lock);
	return rv;
}

/* Forget ns. */
int
nscache_delete(struct nscache *c, const char *ns)
{
	struct nscache_entry *e, **pp;

	pthread_rwlock_wrlock(&c->lock);
	pp = find(c, ns);
	if ((e = *pp) != NULL) {
		*pp = e->next;
		c->n--;
	}
	pthread_rwlock_unlock(&c->lock);
	if (e == NULL)
		return -ENOENT;
	entry_free(e);
	return 0;
}

/* What is known about ns. */
enum nscache_state
nscache_get(struct nscache *c, const char *ns, struct resolved *ret)
{
	struct nscache_entry *e;
	enum nscache_state st = NSCACHE_MISSING;

	pthread_rwlock_rdlock(&c->lock);
	if ((e = *find(c, ns)) != NULL) {
		st = e->state;
		if (st == NSCACHE_ISOLATED && ret != NULL)
			*ret = *e->r;
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
	struct nscache_entry *e, **pp;
	size_t dropped = 0;

	pthread_rwlock_wrlock(&c->lock);
	for (size_t i = 0; c->full && i < NSCACHE_BUCKETS; i++)
		for (pp = &c->buckets[i]; (e = *pp) != NULL;) {
			if (e->epoch == c->epoch) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			entry_free(e);
			c->n--;
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
	n = c->n;
	pthread_rwlock_unlock(&c->lock);
	return n;
}
