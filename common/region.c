/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory regions: see region.h. The first chunk holds what an agent pod's
 * review keeps; later chunks double up to a cap, so a large review (or a
 * key set of 100,000 names) takes a few mallocs, not one per allocation.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/region.h"

#define REGION_CHUNK	4096	/* the first chunk: an agent pod's facts */
#define REGION_CHUNK_MAX (1u << 20)	/* chunks double up to this */

struct region_chunk {
	struct region_chunk	*next;
	size_t			 used;
	size_t			 cap;
	alignas(max_align_t) unsigned char data[];
};

/*
 * n bytes at the next multiple of align (a power of two) in the newest
 * chunk, or at the start of a new one when they do not fit.
 */
static void *
region_carve(struct region *r, size_t n, size_t align)
{
	struct region_chunk *c = r->chunks;
	size_t at = 0;

	if (n > SIZE_MAX / 2)
		return NULL;
	if (c != NULL)
		at = (c->used + align - 1) & ~(align - 1);
	if (c == NULL || at > c->cap || c->cap - at < n) {
		size_t cap = c == NULL ? REGION_CHUNK : c->cap >=
		    REGION_CHUNK_MAX ? REGION_CHUNK_MAX : c->cap * 2;

		if (cap < n)
			cap = n;
		if ((c = malloc(sizeof(*c) + cap)) == NULL)
			return NULL;
		c->cap = cap;
		c->next = r->chunks;
		r->chunks = c;
		at = 0;
	}
	c->used = at + n;
	return c->data + at;
}

/* n bytes aligned for any type. */
void *
region_alloc(struct region *r, size_t n)
{
	return region_carve(r, n, alignof(max_align_t));
}

/* A packed copy of s. */
char *
region_strdup(struct region *r, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = region_carve(r, n, 1);

	if (p != NULL)
		memcpy(p, s, n);
	return p;
}

/* Drop a region and everything in it. */
void
region_drop(struct region *r)
{
	struct region_chunk *c;

	while ((c = r->chunks) != NULL) {
		r->chunks = c->next;
		free(c);
	}
}
