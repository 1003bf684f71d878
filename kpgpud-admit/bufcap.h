/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The total of request bytes held by the webhook's connections
 * (--max-buffered), shared by the worker threads: a connection's input
 * buffer takes its bytes here before it is allocated or grows and gives
 * them back when it is released, so the total never passes the cap. A
 * buffer of at most BUFCAP_SMALL bytes (where an ordinary review fits) may
 * fill the total to the cap; a larger one only to three quarters of it, so
 * large bodies arriving slowly on many connections cannot keep ordinary
 * reviews out. Lock-free, no allocation, no I/O.
 */
#ifndef KPGPUD_ADMIT_BUFCAP_H
#define KPGPUD_ADMIT_BUFCAP_H

#include <stdatomic.h>
#include <stddef.h>

#define BUFCAP_SMALL	(64 * 1024)	/* buffers that may use the reserve */

struct bufcap {
	atomic_size_t	 used;		/* bytes taken now */
	size_t		 max;		/* the cap */
};

/* Start counting under max bytes, nothing taken. */
void	 bufcap_init(struct bufcap *b, size_t max);
/*
 * A buffer of have bytes is to become want bytes (have < want): take the
 * difference. 0, or -EBUSY (nothing taken) when the total would pass the
 * cap, or three quarters of it for a buffer larger than BUFCAP_SMALL.
 */
int	 bufcap_take(struct bufcap *b, size_t have, size_t want);
/* A buffer of n bytes was released (or shrank by n). */
void	 bufcap_give(struct bufcap *b, size_t n);
/* The bytes taken now. */
size_t	 bufcap_used(const struct bufcap *b);
/* The smallest cap under which a single buffer of n bytes can be taken. */
size_t	 bufcap_min(size_t n);

#endif
