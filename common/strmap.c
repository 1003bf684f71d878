/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The string-keyed hash map: see strmap.h. Two parts, so that a big map
 * costs little more than its entries:
 *
 *   - the entries ({hash, key}, 16 bytes) in the order they were added,
 *     in blocks that double in size (16, 32, 64, ... entries): the map
 *     grows by adding a block, never by copying the entries, and a block's
 *     pages are touched only as it fills. The values sit beside them in
 *     blocks of the same sizes, made only once a value other than NULL is
 *     put: a set (every value NULL) holds no value at all;
 *   - the index: a power-of-two table of 4-byte entry positions (0: empty),
 *     probed linearly from the key's hash; a probe compares the entry's full
 *     hash before its key, so it rarely touches key memory.
 *
 * 100,000 keys take 1.6 MB of entries (2.4 MB with values) and a 1 MB
 * index, and growing to them never held more: the index grows in place
 * (rehash). Removal leaves a hole in the entries (key NULL) that its index
 * slot still points at: a tombstone, reused by the next put that probes
 * past it; no other entry moves outside a put. Holes and tombstones count
 * towards the load and are swept by the next rebuild (which doubles the
 * index only when the live entries need it, else rebuilds it at the same
 * size).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "common/util.h"

#define STRMAP_MIN_SLOTS	16
/* Entries in the first block (a power of two); block k holds this << k. */
#define ENT_FIRST_SHIFT		4
#define ENT_FIRST		((size_t)1 << ENT_FIRST_SHIFT)
/* Blocks enough for the most entries a map at STRMAP_MAX can have. */
#define ENT_BLOCKS		24

struct ent {
	uint64_t	 hash;
	const char	*key;	/* NULL: removed (a hole) */
};

struct strmap {
	uint32_t	*idx;		/* cap slots: entry position + 1, 0 */
	size_t		 cap;		/* index slots, a power of two */
	size_t		 min_cap;	/* from the hint: never rebuilt smaller */
	struct ent	*blk[ENT_BLOCKS];
	void		**vblk[ENT_BLOCKS];	/* blk[k]'s values, if has_vals */
	bool		 has_vals;	/* a value other than NULL was put */
	size_t		 nent;		/* entries and holes (slots in use) */
	size_t		 n;		/* live entries */
	size_t		 max;
	uint64_t	 seed;
};

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

/* The block holding entry position pos, and pos's offset in it. */
static unsigned
ent_block(size_t pos, size_t *ret_off)
{
	size_t p = pos + ENT_FIRST;
	unsigned k = (unsigned)(63 - __builtin_clzll((unsigned long long)p)) -
	    ENT_FIRST_SHIFT;

	*ret_off = p - (ENT_FIRST << k);
	return k;
}

/* The entry at position pos (its block exists). */
static struct ent *
ent_at(const struct strmap *m, size_t pos)
{
	size_t off;
	unsigned k = ent_block(pos, &off);

	return &m->blk[k][off];
}

/* The value at entry position pos: NULL in a map that holds none. */
static void *
val_at(const struct strmap *m, size_t pos)
{
	size_t off;
	unsigned k;

	if (!m->has_vals)
		return NULL;
	k = ent_block(pos, &off);
	return m->vblk[k][off];
}

/* Store the value at entry position pos (NULL needs no value blocks). */
static void
val_set(struct strmap *m, size_t pos, void *val)
{
	size_t off;
	unsigned k;

	if (!m->has_vals)
		return;
	k = ent_block(pos, &off);
	m->vblk[k][off] = val;
}

/* Free entry block k and its values. */
static void
blk_drop(struct strmap *m, unsigned k)
{
	free(m->blk[k]);
	free(m->vblk[k]);
	m->blk[k] = NULL;
	m->vblk[k] = NULL;
}

/*
 * Give every entry block its value block (all NULL), the first time a map
 * is to hold a value: 0 or -ENOMEM, when none was made.
 */
static int
vals_on(struct strmap *m)
{
	unsigned k;

	for (k = 0; k < ENT_BLOCKS && m->blk[k] != NULL; k++)
		if ((m->vblk[k] = calloc(ENT_FIRST << k, sizeof(void *))) ==
		    NULL) {
			while (k-- > 0) {
				free(m->vblk[k]);
				m->vblk[k] = NULL;
			}
			return -ENOMEM;
		}
	m->has_vals = true;
	return 0;
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
	return (m->nent + 1) * 4 > m->cap * 3;
}

/*
 * Probe for key: the position of its entry, or SIZE_MAX when absent, with
 * the index slot where it would go (the first tombstone or the empty slot
 * that ends the run) in *ret_free when that is not NULL.
 */
static size_t
probe(const struct strmap *m, const char *key, uint64_t h, size_t *ret_free)
{
	size_t mask = m->cap - 1, i = (size_t)h & mask, freeat = SIZE_MAX;
	const struct ent *e;

	for (;; i = (i + 1) & mask) {
		if (m->idx[i] == 0)
			break;
		e = ent_at(m, m->idx[i] - 1);
		if (e->key == NULL) {
			if (freeat == SIZE_MAX)
				freeat = i;
		} else if (e->hash == h && strcmp(e->key, key) == 0)
			return m->idx[i] - 1;
	}
	if (ret_free != NULL)
		*ret_free = freeat != SIZE_MAX ? freeat : i;
	return SIZE_MAX;
}

/*
 * A fresh index of cap slots over the entries, the holes squeezed out
 * (the live entries keep their order); blocks left wholly past the last
 * entry are freed. The index is rebuilt from the entries alone, so it is
 * resized in place (realloc: a large one is remapped, not copied) and the
 * old and the new index are never held at once; on -ENOMEM nothing
 * changed.
 */
static int
rehash(struct strmap *m, size_t cap)
{
	uint32_t *ni;
	size_t mask = cap - 1, i, j, w = 0, off;
	struct ent *e;
	unsigned k;

	if ((ni = reallocarray(m->idx, cap, sizeof(*ni))) == NULL)
		return -ENOMEM;
	memset(ni, 0, cap * sizeof(*ni));
	for (i = 0; i < m->nent; i++) {
		e = ent_at(m, i);
		if (e->key == NULL)
			continue;
		if (w != i) {
			*ent_at(m, w) = *e;
			val_set(m, w, val_at(m, i));
		}
		for (j = (size_t)e->hash & mask; ni[j] != 0; j = (j + 1) & mask)
			;
		ni[j] = (uint32_t)(w + 1);
		w++;
	}
	m->idx = ni;
	m->cap = cap;
	m->nent = w;
	/* the block holding position w (the next put) stays */
	for (k = ent_block(w, &off) + 1; k < ENT_BLOCKS; k++)
		blk_drop(m, k);
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
	if ((m->idx = calloc(cap, sizeof(*m->idx))) == NULL) {
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
	for (size_t i = 0; free_val != NULL && m->has_vals && i < m->nent; i++)
		if (ent_at(m, i)->key != NULL)
			free_val(val_at(m, i));
	for (unsigned k = 0; k < ENT_BLOCKS; k++)
		blk_drop(m, k);
	free(m->idx);
	free(m);
}

/*
 * Make sure the block for the next appended entry exists, and its values'
 * block when the map holds values: 0 or -ENOMEM (no block made).
 */
static int
ent_reserve(struct strmap *m)
{
	size_t off;
	unsigned k = ent_block(m->nent, &off);

	if (m->blk[k] != NULL)
		return 0;
	if ((m->blk[k] = malloc((ENT_FIRST << k) * sizeof(struct ent))) ==
	    NULL)
		return -ENOMEM;
	if (m->has_vals && (m->vblk[k] = malloc((ENT_FIRST << k) *
	    sizeof(void *))) == NULL) {
		blk_drop(m, k);
		return -ENOMEM;
	}
	return 0;
}

/* Insert or replace; see strmap.h. */
int
strmap_put(struct strmap *m, const char *key, void *val, void **ret_old)
{
	uint64_t h = hash_key(m->seed, key);
	size_t pos, at;
	int r;

	pos = probe(m, key, h, &at);
	if (pos == SIZE_MAX && m->n >= m->max)
		return -E2BIG;
	if (val != NULL && !m->has_vals && (r = vals_on(m)) < 0)
		return r;
	if (pos != SIZE_MAX) {
		if (ret_old != NULL)
			*ret_old = val_at(m, pos);
		ent_at(m, pos)->key = key;
		val_set(m, pos, val);
		return 0;
	}
	if (m->idx[at] == 0 && too_full(m)) {
		if ((r = rehash(m, slots_for(m->n + 1, m->min_cap))) < 0)
			return r;
		(void)probe(m, key, h, &at);
	}
	if (m->idx[at] != 0)	/* a tombstone: its hole takes the entry */
		pos = m->idx[at] - 1;
	else {
		if ((r = ent_reserve(m)) < 0)
			return r;
		pos = m->nent++;
		m->idx[at] = (uint32_t)(pos + 1);
	}
	*ent_at(m, pos) = (struct ent){ h, key };
	val_set(m, pos, val);
	m->n++;
	return 1;
}

/* Remove key, leaving a hole; see strmap.h. */
int
strmap_remove(struct strmap *m, const char *key, void **ret_val)
{
	size_t pos = probe(m, key, hash_key(m->seed, key), NULL);

	if (pos == SIZE_MAX)
		return -ENOENT;
	if (ret_val != NULL)
		*ret_val = val_at(m, pos);
	ent_at(m, pos)->key = NULL;
	val_set(m, pos, NULL);
	m->n--;
	return 0;
}

/* The value of key, or NULL. */
void *
strmap_get(const struct strmap *m, const char *key)
{
	size_t pos = probe(m, key, hash_key(m->seed, key), NULL);

	return pos != SIZE_MAX ? val_at(m, pos) : NULL;
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

/* The next entry at or after *pos (an entry position); see strmap.h. */
bool
strmap_next(const struct strmap *m, size_t *pos, const char **ret_key,
    void **ret_val)
{
	const struct ent *e;

	for (size_t i = *pos; i < m->nent; i++) {
		if ((e = ent_at(m, i))->key == NULL)
			continue;
		if (ret_key != NULL)
			*ret_key = e->key;
		if (ret_val != NULL)
			*ret_val = val_at(m, i);
		*pos = i + 1;
		return true;
	}
	*pos = m->nent;
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

/* Bytes of the index and of the entry and value blocks allocated. */
size_t
strmap_bytes(const struct strmap *m)
{
	size_t b = m->cap * sizeof(*m->idx);

	for (size_t k = 0; k < ENT_BLOCKS; k++) {
		if (m->blk[k] != NULL)
			b += (ENT_FIRST << k) * sizeof(struct ent);
		if (m->vblk[k] != NULL)
			b += (ENT_FIRST << k) * sizeof(void *);
	}
	return b;
}
