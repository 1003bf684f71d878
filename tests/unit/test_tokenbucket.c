/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/tokenbucket.c, driven by a made-up clock: how many
 * events a bucket admits over a given time, the burst cap after idling, and
 * the wait it announces. No real time passes, so load cannot change them.
 */
#include <stdint.h>

#include "common/tokenbucket.h"
#include "tests/unit/test.h"

#define MS	1000ull		/* microseconds */

/* Take as often as asked (every step_us over span_us); count what passes. */
static int
admitted(struct tokenbucket *tb, uint64_t from, uint64_t span_us,
    uint64_t step_us)
{
	int n = 0;

	for (uint64_t t = from; t <= from + span_us; t += step_us)
		if (tokenbucket_take(tb, t))
			n++;
	return n;
}

TEST(tokenbucket_rate_over_time)
{
	struct tokenbucket tb;

	/* 20/s, burst 1: the full token, then one per 50 ms */
	tokenbucket_init(&tb, 20, 1, 0);
	CHECK(tokenbucket_take(&tb, 0));
	CHECK(!tokenbucket_take(&tb, 0));
	CHECK(!tokenbucket_take(&tb, 49 * MS));
	CHECK(tokenbucket_take(&tb, 51 * MS));
	CHECK(!tokenbucket_take(&tb, 60 * MS));
	/* asked every millisecond for 10 s: 20 a second, no more */
	tokenbucket_init(&tb, 20, 1, 0);
	int n = admitted(&tb, 0, 10000 * MS, 1 * MS);
	CHECK(n >= 200 && n <= 201);
	/* asked every 10 s for 100 s: burst 1 caps what idling earns */
	tokenbucket_init(&tb, 20, 1, 0);
	CHECK_INT(admitted(&tb, 0, 100000 * MS, 10000 * MS), 11);
}

TEST(tokenbucket_burst_cap)
{
	struct tokenbucket tb;

	/* 5/s, burst 3: three at once, then empty */
	tokenbucket_init(&tb, 5, 3, 1000 * MS);
	for (int i = 0; i < 3; i++)
		CHECK(tokenbucket_take(&tb, 1000 * MS));
	CHECK(!tokenbucket_take(&tb, 1000 * MS));
	/* a long idle earns at most burst */
	for (int i = 0; i < 3; i++)
		CHECK(tokenbucket_take(&tb, 3600000 * MS));
	CHECK(!tokenbucket_take(&tb, 3600000 * MS));
	/* a burst below 1 still admits one */
	tokenbucket_init(&tb, 5, 0, 0);
	CHECK(tokenbucket_take(&tb, 0));
	CHECK(!tokenbucket_take(&tb, 0));
}

TEST(tokenbucket_wait)
{
	struct tokenbucket tb;
	double w;

	tokenbucket_init(&tb, 20, 1, 0);
	CHECK(tokenbucket_wait_ms(&tb) == 0);
	CHECK(tokenbucket_take(&tb, 0));
	w = tokenbucket_wait_ms(&tb);
	CHECK(w > 49.9 && w < 50.1);
	CHECK(!tokenbucket_take(&tb, 25 * MS));
	w = tokenbucket_wait_ms(&tb);
	CHECK(w > 24.9 && w < 25.1);
	/* the announced wait is enough */
	CHECK(tokenbucket_take(&tb, 25 * MS + (uint64_t)(w * 1000) + 1));
	/* a clock that steps back earns nothing and takes nothing away */
	tokenbucket_init(&tb, 20, 1, 100 * MS);
	CHECK(tokenbucket_take(&tb, 100 * MS));
	CHECK(!tokenbucket_take(&tb, 10 * MS));
	CHECK(tokenbucket_take(&tb, 61 * MS));
}
