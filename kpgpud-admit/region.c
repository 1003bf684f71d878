/*
 * Memory regions: see region.h. The first chunk holds what an agent pod's
 * review keeps; later chunks double up to a cap, so a large review takes a
 * few mallocs, not one per allocation.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kpgpud-admit/region.h"

#define REGION_CHUNK	4096	/* the first chunk: an agent pod's facts */
#define REGION_CHUNK_MAX (1u << 20)	/* chunks double up to this */

struct region_chunk {
	struct region_chunk	*next;
	size_t			 used;
	size_t			 cap;
	alignas(max_align_t) unsigned char data[];
};

/* n bytes from the newest chunk, or from a new one when it is full. */
void *
region_alloc(struct region *r, size_t n)
{
	struct region_chunk *c;
	const size_t align = alignof(max_align_t);
	void *p;

	if (n > SIZE_MAX / 2)
		return NULL;
	n = (n + align - 1) & ~(align - 1);
	if ((c = r->chunks) == NULL || c->cap - c->used < n) {
		size_t cap = c == NULL ? REGION_CHUNK : c->cap >=
		    REGION_CHUNK_MAX ? REGION_CHUNK_MAX : c->cap * 2;

		if (cap < n)
			cap = n;
		if ((c = malloc(sizeof(*c) + cap)) == NULL)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = r->chunks;
		r->chunks = c;
	}
	p = c->data + c->used;
	c->used += n;
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
