/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A string-keyed hash map: open addressing with linear probing over a
 * power-of-two index that doubles when three quarters full, its slots
 * pointing into the entries, which grow by blocks and are never copied to
 * grow (about 34 bytes per entry at 100,000; 26 for a set, whose values
 * are all NULL: see strmap.c). Keys and values are the caller's: the map
 * stores both pointers and never copies or frees a key, so a key must stay
 * valid and unchanged while its entry is in the map. The natural way is to
 * keep the key in the value (a struct holding its own name, put as
 * strmap_put(m, e->name, e, ...)), or, for a set of strings, to keep the
 * keys in memory the caller frees as a whole and put them with NULL
 * values. No allocation per entry, and a lookup touches the index slot,
 * the entry and then the key's memory only.
 *
 * Every map has a hard cap on its entries, because peers (tenants creating
 * namespaces and objects) control how many keys arrive: a put over the cap
 * fails with -E2BIG and changes nothing. The hash is keyed with a random
 * seed per map, so a tenant cannot choose names that pile up in one probe
 * run (see strmap.c). Pure: no locking, no logging, no event loop; readers
 * (get, has, count, next) never write, so a reader-writer lock around the
 * map is enough to share it between threads.
 */
#ifndef KPGPUD_STRMAP_H
#define KPGPUD_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest cap a map accepts, and the cap of max = 0. */
#define STRMAP_MAX	(16u * 1024 * 1024)

struct strmap;

/*
 * A map expected to hold about hint entries (its table is sized so they fit
 * without growing; 0 for a small one) and never more than max (0:
 * STRMAP_MAX). 0, -EINVAL (max above STRMAP_MAX) or -ENOMEM.
 */
int	 strmap_new(size_t hint, size_t max, struct strmap **ret);
/* Free the map, calling free_val (may be NULL) on each value. */
void	 strmap_free(struct strmap *m, void (*free_val)(void *));

/*
 * Map key to val. 1 when key is new; 0 when it was present: the entry then
 * takes this key pointer and value, and the old value is stored in *ret_old
 * (may be NULL). -E2BIG when key is new and the map holds max entries,
 * -ENOMEM; nothing changes then. A put may move entries: an iteration in
 * progress must start again.
 */
int	 strmap_put(struct strmap *m, const char *key, void *val,
	    void **ret_old);
/*
 * Remove key, storing its value in *ret_val (may be NULL). 0 or -ENOENT.
 * Never moves other entries, so removing during an iteration is safe, and
 * key may be the entry's own key (freed by the caller afterwards).
 */
int	 strmap_remove(struct strmap *m, const char *key, void **ret_val);
/* The value of key; NULL when absent (or when the value is NULL). */
void	*strmap_get(const struct strmap *m, const char *key);
/* Whether key is present. */
bool	 strmap_has(const struct strmap *m, const char *key);
/* Entries held. */
size_t	 strmap_count(const struct strmap *m);

/*
 * Iterate: start with *pos = 0; each call stores the next entry's key and
 * value and returns true, then false once every entry was seen. Order is
 * unspecified.
 */
bool	 strmap_next(const struct strmap *m, size_t *pos,
	    const char **ret_key, void **ret_val);

/* The keyed hash of key in m (for tests: where collisions land). */
uint64_t strmap_hash(const struct strmap *m, const char *key);
/* Slots in m's index (a power of two; for tests and figures). */
size_t	 strmap_slots(const struct strmap *m);
/* Bytes m holds itself: its index and entry blocks (tests and figures). */
size_t	 strmap_bytes(const struct strmap *m);

#endif
