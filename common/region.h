/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A memory region: many small allocations carved from a few chunks and
 * dropped whole: what a review keeps from its body (the facts the patch
 * reads; kpgpud-admit) and the keys of a list's key set (kpgpud-sync).
 * Nothing in a region is freed on its own. Pure: no I/O.
 */
#ifndef KPGPUD_REGION_H
#define KPGPUD_REGION_H

#include <stddef.h>

struct region_chunk;

/* Zero-initialised is an empty region. */
struct region {
	struct region_chunk	*chunks;	/* newest first */
};

/* n bytes aligned for any type, or NULL (ENOMEM). */
void	*region_alloc(struct region *r, size_t n);
/*
 * A copy of the string s, packed right after the previous allocation (no
 * alignment: strlen(s) + 1 bytes, not a malloc chunk's 32 for a namespace
 * name), or NULL (ENOMEM).
 */
char	*region_strdup(struct region *r, const char *s);
/* Drop every allocation of r; r is empty (and usable) afterwards. */
void	 region_drop(struct region *r);

#endif
