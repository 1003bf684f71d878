/*
 * A memory region: many small allocations carved from a few chunks and
 * dropped whole, for what a review keeps from its body (the facts the
 * patch reads). Nothing in a region is freed on its own. Pure: no I/O.
 */
#ifndef KPGPUD_ADMIT_REGION_H
#define KPGPUD_ADMIT_REGION_H

#include <stddef.h>

struct region_chunk;

/* Zero-initialised is an empty region. */
struct region {
	struct region_chunk	*chunks;	/* newest first */
};

/* n bytes aligned for any type, or NULL (ENOMEM). */
void	*region_alloc(struct region *r, size_t n);
/* Drop every allocation of r; r is empty (and usable) afterwards. */
void	 region_drop(struct region *r);

#endif
