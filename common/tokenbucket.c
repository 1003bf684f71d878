/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The token bucket of common/tokenbucket.h, shared by the kube client's
 * request limiter and kpgpud-admit's read-through lookup limiter.
 */
#include "common/tokenbucket.h"

/* Fill the bucket and remember now_us as the last top-up. */
void
tokenbucket_init(struct tokenbucket *tb, double rate, double burst,
    uint64_t now_us)
{
	tb->rate = rate;
	tb->burst = burst < 1.0 ? 1.0 : burst;
	tb->tokens = tb->burst;
	tb->at_us = now_us;
}

/* Add the tokens earned since the last top-up, capped at burst. */
static void
refill(struct tokenbucket *tb, uint64_t now_us)
{
	/* a clock that went backwards earns nothing */
	if (now_us > tb->at_us)
		tb->tokens += (double)(now_us - tb->at_us) / 1e6 * tb->rate;
	tb->at_us = now_us;
	if (tb->tokens > tb->burst)
		tb->tokens = tb->burst;
}

/* Take one token at now_us; false (nothing taken) if none is there. */
bool
tokenbucket_take(struct tokenbucket *tb, uint64_t now_us)
{
	refill(tb, now_us);
	if (tb->tokens < 1.0)
		return false;
	tb->tokens -= 1.0;
	return true;
}

/* How long the next token takes to arrive. */
double
tokenbucket_wait_ms(const struct tokenbucket *tb)
{
	if (tb->tokens >= 1.0)
		return 0;
	return (1.0 - tb->tokens) / tb->rate * 1000.0;
}
