/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A token bucket: rate tokens a second flow in, at most burst are held, and
 * each admitted event takes one. The caller passes the monotonic time in
 * microseconds, so the arithmetic is a pure function of the times given
 * (tests drive it with a made-up clock).
 */
#ifndef KPGPUD_TOKENBUCKET_H
#define KPGPUD_TOKENBUCKET_H

#include <stdbool.h>
#include <stdint.h>

struct tokenbucket {
	double		 rate;		/* tokens a second, > 0 */
	double		 burst;		/* most tokens held, >= 1 */
	double		 tokens;
	uint64_t	 at_us;		/* when tokens was last topped up */
};

/* Start full: burst tokens at now_us. */
void	 tokenbucket_init(struct tokenbucket *tb, double rate, double burst,
	    uint64_t now_us);
/* Top up for the time up to now_us and take one token if there is one. */
bool	 tokenbucket_take(struct tokenbucket *tb, uint64_t now_us);
/* Milliseconds until a token will be there (0 if one is there now). */
double	 tokenbucket_wait_ms(const struct tokenbucket *tb);

#endif
