/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The quota work queue: keys are deduplicated, a key added while in
 * process comes back once after done, failures back off exponentially per
 * key up to the cap, forget resets the backoff, and the token bucket
 * limits the hand-out rate; the key cap holds (keys with nothing left to
 * remember make room) at 100,000 keys. Time is passed in, so nothing sleeps.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-quota/workqueue.h"
#include "tests/unit/test.h"

TEST(dedup_and_fifo)
{
	struct wq *q;
	const char *k;

	REQUIRE(wq_new(NULL, 0, &q) == 0);
	CHECK(wq_add(q, "a", 0) == 0);
	CHECK(wq_add(q, "b", 0) == 0);
	CHECK(wq_add(q, "a", 0) == 0);
	CHECK_INT(wq_len(q), 2);
	REQUIRE(wq_get(q, 0, &k) == 0);
	CHECK_STR(k, "a");
	wq_done(q, "a", 0);
	REQUIRE(wq_get(q, 0, &k) == 0);
	CHECK_STR(k, "b");
	wq_done(q, "b", 0);
	CHECK(wq_get(q, 0, &k) == -EAGAIN);
	CHECK(wq_next_ms(q, 0) == WQ_NEVER);
	CHECK(wq_add(q, "", 0) == -EINVAL);
	wq_free(q);
}

TEST(readd_while_processing)
{
	struct wq *q;
	const char *k;

	REQUIRE(wq_new(NULL, 0, &q) == 0);
	REQUIRE(wq_add(q, "ns1", 0) == 0);
	REQUIRE(wq_get(q, 0, &k) == 0);
	CHECK_INT(wq_processing(q), 1);
	/* added twice while in process: not handed out concurrently */
	CHECK(wq_add(q, "ns1", 0) == 0);
	CHECK(wq_add(q, "ns1", 0) == 0);
	CHECK(wq_get(q, 0, &k) == -EAGAIN);
	wq_done(q, "ns1", 1);
	CHECK_INT(wq_len(q), 1);
	REQUIRE(wq_get(q, 1, &k) == 0);
	CHECK_STR(k, "ns1");
	wq_done(q, "ns1", 1);
	CHECK(wq_get(q, 1, &k) == -EAGAIN);
	wq_free(q);
}

TEST(exponential_backoff_per_key)
{
	struct wq_config cfg = { .base_ms = 10, .max_ms = 100 };
	uint64_t d, expect[] = { 10, 20, 40, 80, 100, 100 };
	struct wq *q;
	const char *k;

	REQUIRE(wq_new(&cfg, 0, &q) == 0);
	for (size_t i = 0; i < nitems(expect); i++) {
		REQUIRE(wq_add_rate_limited(q, "x", 1000, &d) == 0);
		CHECK_INT(d, expect[i]);
	}
	CHECK_INT(wq_failures(q, "x"), 6);
	/* the first scheduling wins: ready at 1010 */
	CHECK_INT(wq_next_ms(q, 1000), 10);
	CHECK(wq_get(q, 1009, &k) == -EAGAIN);
	REQUIRE(wq_get(q, 1010, &k) == 0);
	wq_done(q, "x", 1010);
	/* another key is unaffected */
	REQUIRE(wq_add_rate_limited(q, "y", 2000, &d) == 0);
	CHECK_INT(d, 10);
	wq_forget(q, "x");
	CHECK_INT(wq_failures(q, "x"), 0);
	REQUIRE(wq_add_rate_limited(q, "x", 2000, &d) == 0);
	CHECK_INT(d, 10);
	wq_free(q);
}

TEST(delayed_add_sooner_wins)
{
	struct wq *q;
	const char *k;

	REQUIRE(wq_new(NULL, 0, &q) == 0);
	REQUIRE(wq_add_after(q, "r", 500, 0) == 0);
	REQUIRE(wq_add_after(q, "r", 200, 0) == 0);
	CHECK_INT(wq_next_ms(q, 0), 200);
	CHECK_INT(wq_len(q), 1);
	CHECK(wq_get(q, 199, &k) == -EAGAIN);
	/* an immediate add overrides the delay */
	REQUIRE(wq_add(q, "r", 100) == 0);
	REQUIRE(wq_get(q, 100, &k) == 0);
	CHECK_STR(k, "r");
	wq_done(q, "r", 100);
	CHECK(wq_get(q, 1000, &k) == -EAGAIN);
	wq_free(q);
}

TEST(token_bucket_limits_rate)
{
	struct wq_config cfg = { .qps = 10, .burst = 2 };
	struct wq *q;
	const char *k;
	char key[16];
	int got = 0;

	REQUIRE(wq_new(&cfg, 0, &q) == 0);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		REQUIRE(wq_add(q, key, 0) == 0);
	}
	while (wq_get(q, 0, &k) == 0) {
		wq_done(q, k, 0);
		got++;
	}
	CHECK_INT(got, 2);
	CHECK(wq_next_ms(q, 0) >= 100);
	CHECK(wq_get(q, 99, &k) == -EAGAIN);
	REQUIRE(wq_get(q, 100, &k) == 0);
	wq_done(q, k, 100);
	CHECK_INT(wq_len(q), 2);
	wq_free(q);
}

TEST(caps)
{
	struct wq_config cfg = { .max_items = 2 };
	char big[WQ_KEY_MAX + 2];
	struct wq *q;

	REQUIRE(wq_new(&cfg, 0, &q) == 0);
	CHECK(wq_add(q, "a", 0) == 0);
	CHECK(wq_add(q, "b", 0) == 0);
	CHECK(wq_add(q, "c", 0) == -ENOSPC);
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(wq_add(q, big, 0) == -EINVAL);
	wq_free(q);
}

TEST(released_keys_make_room)
{
	struct wq_config cfg = { .max_items = 2, .qps = 1e9, .burst = 1000 };
	const char *k;
	struct wq *q;

	REQUIRE(wq_new(&cfg, 0, &q) == 0);
	CHECK(wq_add(q, "a", 0) == 0);
	CHECK(wq_add(q, "b", 0) == 0);
	REQUIRE(wq_get(q, 0, &k) == 0);
	CHECK_STR(k, "a");
	CHECK(wq_add(q, "c", 0) == -ENOSPC);
	/* a is done with no failure: nothing left to remember */
	wq_done(q, k, 0);
	CHECK(wq_add(q, "c", 0) == 0);
	CHECK_INT(wq_len(q), 2);
	/* a failing key is remembered (its backoff) until forgotten */
	REQUIRE(wq_get(q, 0, &k) == 0);
	CHECK_STR(k, "b");
	CHECK(wq_add_rate_limited(q, k, 0, NULL) == 0);
	wq_done(q, "b", 0);
	CHECK_INT(wq_failures(q, "b"), 1);
	CHECK(wq_add(q, "d", 0) == -ENOSPC);
	wq_free(q);
	cfg.max_items = 17u * 1024 * 1024;
	CHECK(wq_new(&cfg, 0, &q) == -EINVAL);
}

TEST(hundred_thousand_keys)
{
	struct wq_config cfg = { .max_items = 100000, .qps = 1e9,
	    .burst = 1000000 };
	char key[64];
	const char *k;
	struct wq *q;
	int i, bad = 0;

	REQUIRE(wq_new(&cfg, 0, &q) == 0);
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "Agent/tenant-%d", i);
		bad += wq_add(q, key, 0) != 0;
	}
	CHECK_INT(bad, 0);
	CHECK(wq_add(q, "Agent/one-more", 0) == -ENOSPC);
	/* adding again dedups */
	CHECK(wq_add(q, "Agent/tenant-99999", 0) == 0);
	CHECK_INT(wq_len(q), 100000);
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "Agent/tenant-%d", i);
		if (wq_get(q, 0, &k) != 0 || strcmp(k, key) != 0)
			bad++;
		else
			wq_done(q, k, 0);
	}
	CHECK_INT(bad, 0);
	CHECK_INT(wq_len(q), 0);
	CHECK_INT(wq_processing(q), 0);
	CHECK(wq_add(q, "Agent/one-more", 0) == 0);
	wq_free(q);
}
