/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The total of request bytes held by the webhook's connections; see
 * bufcap.h.
 */
#include <errno.h>

#include "kpgpud-admit/bufcap.h"

/* Start counting under max bytes, nothing taken. */
void
bufcap_init(struct bufcap *b, size_t max)
{
	atomic_init(&b->used, 0);
	b->max = max;
}

/* Take want - have bytes unless the total would pass its limit. */
int
bufcap_take(struct bufcap *b, size_t have, size_t want)
{
	size_t limit = want <= BUFCAP_SMALL ? b->max : b->max - b->max / 4;
	size_t n = want - have;
	size_t cur = atomic_load_explicit(&b->used, memory_order_relaxed);

	do {
		if (n > limit || cur > limit - n)
			return -EBUSY;
	} while (!atomic_compare_exchange_weak_explicit(&b->used, &cur,
	    cur + n, memory_order_relaxed, memory_order_relaxed));
	return 0;
}

/* A buffer of n bytes was released. */
void
bufcap_give(struct bufcap *b, size_t n)
{
	atomic_fetch_sub_explicit(&b->used, n, memory_order_relaxed);
}

/* The bytes taken now. */
size_t
bufcap_used(const struct bufcap *b)
{
	return atomic_load_explicit(&b->used, memory_order_relaxed);
}

/*
 * The smallest cap m whose limit for n holds n: n itself for a small
 * buffer, else the least m with m - m / 4 (that is, ceil(3m / 4)) >= n.
 */
size_t
bufcap_min(size_t n)
{
	if (n <= BUFCAP_SMALL)
		return n;
	return (4 * n - 4) / 3 + 1;
}
