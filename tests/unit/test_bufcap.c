/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kpgpud-admit/bufcap.c, the total of request bytes the
 * webhook's connections hold (--max-buffered): takes up to the cap succeed
 * and the one past it is refused without taking anything; a buffer larger
 * than BUFCAP_SMALL stops at three quarters while small ones still get the
 * last quarter; what is given back can be taken again; bufcap_min() is the
 * least cap a single buffer fits under; and threads taking and giving at
 * once end at exactly zero, never having passed the cap.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "kpgpud-admit/bufcap.h"
#include "tests/unit/test.h"

#define KB	1024u
#define MB	(1024u * 1024u)

TEST(bufcap_small_buffers_fill_to_the_cap)
{
	struct bufcap b;

	bufcap_init(&b, 64 * KB);
	CHECK_INT(bufcap_used(&b), 0);
	for (int i = 0; i < 4; i++)
		CHECK_INT(bufcap_take(&b, 0, 16 * KB), 0);
	CHECK_INT(bufcap_used(&b), 64 * KB);
	/* one byte more is refused, and nothing is taken */
	CHECK_INT(bufcap_take(&b, 0, 1), -EBUSY);
	CHECK_INT(bufcap_used(&b), 64 * KB);
	bufcap_give(&b, 16 * KB);
	CHECK_INT(bufcap_take(&b, 16 * KB, 32 * KB), 0);
	CHECK_INT(bufcap_used(&b), 64 * KB);
	bufcap_give(&b, 32 * KB);
	bufcap_give(&b, 32 * KB);
	CHECK_INT(bufcap_used(&b), 0);
}

TEST(bufcap_large_buffers_leave_a_quarter)
{
	struct bufcap b;

	bufcap_init(&b, 8 * MB);
	/* growing buffers: 64 KiB -> 2 MiB on three connections */
	CHECK_INT(bufcap_take(&b, 0, 64 * KB), 0);
	CHECK_INT(bufcap_take(&b, 64 * KB, 2 * MB), 0);
	CHECK_INT(bufcap_take(&b, 0, 2 * MB), 0);
	CHECK_INT(bufcap_take(&b, 0, 2 * MB), 0);
	CHECK_INT(bufcap_used(&b), 6 * MB);
	/* a fourth large one would pass three quarters of 8 MiB */
	CHECK_INT(bufcap_take(&b, 0, 128 * KB), -EBUSY);
	CHECK_INT(bufcap_take(&b, 64 * KB, 128 * KB), -EBUSY);
	CHECK_INT(bufcap_used(&b), 6 * MB);
	/* ordinary requests still get the last quarter, up to the cap */
	for (int i = 0; i < 32; i++)
		CHECK_INT(bufcap_take(&b, 0, 64 * KB), 0);
	CHECK_INT(bufcap_used(&b), 8 * MB);
	CHECK_INT(bufcap_take(&b, 0, 16 * KB), -EBUSY);
	/* a large one fits again once enough is given back */
	bufcap_give(&b, 2 * MB + 64 * KB);
	CHECK_INT(bufcap_take(&b, 0, 128 * KB), -EBUSY);
	bufcap_give(&b, 2 * MB);
	CHECK_INT(bufcap_take(&b, 0, 128 * KB), 0);
}

TEST(bufcap_no_wrap_near_the_limits)
{
	struct bufcap b;

	bufcap_init(&b, SIZE_MAX);
	CHECK_INT(bufcap_take(&b, 0, SIZE_MAX / 2), 0);
	CHECK_INT(bufcap_take(&b, 0, SIZE_MAX / 2), -EBUSY);
	bufcap_init(&b, 100);
	CHECK_INT(bufcap_take(&b, 0, 101), -EBUSY);
	CHECK_INT(bufcap_take(&b, 0, 100), 0);
	CHECK_INT(bufcap_take(&b, 0, SIZE_MAX), -EBUSY);
	CHECK_INT(bufcap_used(&b), 100);
}

TEST(bufcap_min_is_the_least_cap_that_fits)
{
	static const size_t ns[] = { 1, 16 * KB, 64 * KB, 64 * KB + 1,
	    96 * KB, 3 * MB + 7, 32 * MB + 96 * KB, 256 * MB + 1 * MB };
	struct bufcap b;

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		size_t m = bufcap_min(ns[i]);

		bufcap_init(&b, m);
		CHECK(bufcap_take(&b, 0, ns[i]) == 0);
		bufcap_init(&b, m - 1);
		CHECK(bufcap_take(&b, 0, ns[i]) == -EBUSY);
	}
}

struct churn {
	struct bufcap	*b;
	int		 refused;
	size_t		 peak;
};

/* Grow a buffer 16 KiB -> 1 MiB and release it, many times over. */
static void *
churn(void *arg)
{
	struct churn *c = arg;

	for (int i = 0; i < 2000; i++) {
		size_t have = 0;

		for (size_t want = 16 * KB; want <= MB; want *= 2) {
			if (bufcap_take(c->b, have, want) < 0) {
				c->refused++;
				break;
			}
			have = want;
			if (bufcap_used(c->b) > c->peak)
				c->peak = bufcap_used(c->b);
		}
		bufcap_give(c->b, have);
	}
	return NULL;
}

TEST(bufcap_threads_never_pass_the_cap)
{
	struct bufcap b;
	struct churn c[4];
	pthread_t t[4];

	bufcap_init(&b, 2 * MB);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){ &b, 0, 0 };
		REQUIRE(pthread_create(&t[i], NULL, churn, &c[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(c[i].peak <= 2 * MB);
	}
	CHECK_INT(bufcap_used(&b), 0);
}
