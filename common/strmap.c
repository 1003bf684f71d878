/*
 * The string-keyed hash map: see strmap.h. A slot holds the key's full
 * hash (compared before the key, so a probe rarely touches key memory), the
 * key pointer and the value. Removal leaves a tombstone, so no
 * entry ever moves outside a put; tombstones count towards the load and
 * are swept by the next rehash (which doubles only when live entries need
 * it, else rebuilds at the same size).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "common/util.h"

#define STRMAP_MIN_SLOTS	16

struct slot {
	uint64_t	 hash;
	const char	*key;	/* NULL: empty; tomb: removed */
	void		*val;
};

struct strmap {
	struct slot	*slot;
	size_t		 cap;		/* slots, a power of two */
	size_t		 min_cap;	/* from the hint: never rebuilt smaller */
	size_t		 n;		/* live entries */
	size_t		 used;		/* live entries and tombstones */
	size_t		 max;
	uint64_t	 seed;
};

/* The key pointer of a removed slot: not NULL, never a real key. */
static char tomb[1];

/* Whether a slot holds an entry. */
static bool
live(const struct slot *s)
{
	return s->key != NULL && s->key != tomb;
}

/*
 * The keyed hash of a key. FNV-1a (common/util.c) started from the map's
 * random seed, then a multiply-xorshift finaliser so that the low bits
 * (the table index) depend on all 64 bits of the state and so on the whole
 * seed; without it they would depend only on the seed's low bits, which a
 * tenant could search. This is not a MAC: it keeps names a tenant creates
 * from being chosen to collide (turning every lookup into a scan of the
 * table) without having to learn the seed, which never leaves the process;
 * SipHash would be the choice if the seed could be observed. The entry cap
 * bounds the worst case either way.
 */
static uint64_t
hash_key(uint64_t seed, const char *key)
{
	uint64_t h = fnv1a64(seed, key);

	h ^= h >> 32;
	h *= 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	return h;
}

/* The smallest table that holds n entries at most half full. */
static size_t
slots_for(size_t n, size_t min)
{
	size_t cap = min;

	while (cap / 2 < n)
		cap *= 2;
	return cap;
}

/* Whether one more slot in use would take the table past 3/4. */
static bool
too_full(const struct strmap *m)
{
	return (m->used + 1) * 4 > m->cap * 3;
}

/*
 * Probe for key: the index of its slot, or SIZE_MAX when absent, with the
 * slot where it would go (the first tombstone or the empty slot that ends
 * the run) in *ret_free when that is not NULL.
 */
static size_t
probe(const struct strmap *m, const char *key, uint64_t h, size_t *ret_free)
{
	size_t mask = m->cap - 1, i = (size_t)h & mask, freeat = SIZE_MAX;
	const struct slot *s;

	for (;; i = (i + 1) & mask) {
		s = &m->slot[i];
		if (s->key == NULL)
			break;
		if (s->key == tomb) {
			if (freeat == SIZE_MAX)
				freeat = i;
		} else if (s->hash == h && strcmp(s->key, key) == 0)
			return i;
	}
	if (ret_free != NULL)
		*ret_free = freeat != SIZE_MAX ? freeat : i;
	return SIZE_MAX;
}

/* Move every entry into a fresh table of cap slots, dropping tombstones. */
static int
rehash(struct strmap *m, size_t cap)
{
	struct slot *ns, *old = m->slot;
	size_t mask = cap - 1, i, j;

	if ((ns = calloc(cap, sizeof(*ns))) == NULL)
		return -ENOMEM;
	for (i = 0; i < m->cap; i++) {
		if (!live(&old[i]))
			continue;
		for (j = (size_t)old[i].hash & mask; ns[j].key != NULL;
		    j = (j + 1) & mask)
			;
		ns[j] = old[i];
	}
	free(old);
	m->slot = ns;
	m->cap = cap;
	m->used = m->n;
	return 0;
}

/* Create a map; see strmap.h. */
int
strmap_new(size_t hint, size_t max, struct strmap **ret)
{
	struct strmap *m;
	size_t cap = STRMAP_MIN_SLOTS;

	if (max == 0)
		max = STRMAP_MAX;
	if (max > STRMAP_MAX)
		return -EINVAL;
	if (hint > max)
		hint = max;
	while (hint * 4 > cap * 3)
		cap *= 2;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return -ENOMEM;
	if ((m->slot = calloc(cap, sizeof(*m->slot))) == NULL) {
		free(m);
		return -ENOMEM;
	}
	m->cap = m->min_cap = cap;
	m->max = max;
	m->seed = prng_seed();
	*ret = m;
	return 0;
}

/* Free the map and (through free_val) its values. */
void
strmap_free(struct strmap *m, void (*free_val)(void *))
{
	if (m == NULL)
		return;
	for (size_t i = 0; free_val != NULL && i < m->cap; i++)
		if (live(&m->slot[i]))
			free_val(m->slot[i].val);
	free(m->slot);
	free(m);
}

/* Insert or replace; see strmap.h. */
int
strmap_put(struct strmap *m, const char *key, void *val, void **ret_old)
{
	uint64_t h = hash_key(m->seed, key);
	size_t i, at;
	int r;

	if ((i = probe(m, key, h, &at)) != SIZE_MAX) {
		if (ret_old != NULL)
			*ret_old = m->slot[i].val;
		m->slot[i].key = key;
		m->slot[i].val = val;
		return 0;
	}
	if (m->n >= m->max)
		return -E2BIG;
	if (m->slot[at].key == NULL && too_full(m)) {
		if ((r = rehash(m, slots_for(m->n + 1, m->min_cap))) < 0)
			return r;
		(void)probe(m, key, h, &at);
	}
	if (m->slot[at].key == NULL)
		m->used++;
	m->slot[at] = (struct slot){ h, key, val };
	m->n++;
	return 1;
}

/* Remove key, leaving a tombstone; see strmap.h. */
int
strmap_remove(struct strmap *m, const char *key, void **ret_val)
{
	size_t i = probe(m, key, hash_key(m->seed, key), NULL);

	if (i == SIZE_MAX)
		return -ENOENT;
	if (ret_val != NULL)
		*ret_val = m->slot[i].val;
	m->slot[i].key = tomb;
	m->slot[i].val = NULL;
	m->n--;
	return 0;
}

/* The value of key, or NULL. */
void *
strmap_get(const struct strmap *m, const char *key)
{
	size_t i = probe(m, key, hash_key(m->seed, key), NULL);

	return i != SIZE_MAX ? m->slot[i].val : NULL;
}

/* Whether key is present. */
bool
strmap_has(const struct strmap *m, const char *key)
{
	return probe(m, key, hash_key(m->seed, key), NULL) != SIZE_MAX;
}

/* Entries held. */
size_t
strmap_count(const struct strmap *m)
{
	return m->n;
}

/* The next entry at or after *pos; see strmap.h. */
bool
strmap_next(const struct strmap *m, size_t *pos, const char **ret_key,
    void **ret_val)
{
	for (size_t i = *pos; i < m->cap; i++) {
		if (!live(&m->slot[i]))
			continue;
		if (ret_key != NULL)
			*ret_key = m->slot[i].key;
		if (ret_val != NULL)
			*ret_val = m->slot[i].val;
		*pos = i + 1;
		return true;
	}
	*pos = m->cap;
	return false;
}

/* The keyed hash of key in m. */
uint64_t
strmap_hash(const struct strmap *m, const char *key)
{
	return hash_key(m->seed, key);
}

/* Slots in the table. */
size_t
strmap_slots(const struct strmap *m)
{
	return m->cap;
}
