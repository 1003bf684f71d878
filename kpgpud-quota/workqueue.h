/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A rate-limited work queue of string keys, in the manner of client-go's:
 * a key is queued at most once, a key being processed that is added again
 * is queued once more when it is done, failures back off exponentially per
 * key, and a token bucket limits how fast keys are handed out overall.
 * Pure: the caller passes the time in, so tests need no clock; the daemon
 * arms one timer for wq_next_ms().
 */
#ifndef KPGPUD_QUOTA_WORKQUEUE_H
#define KPGPUD_QUOTA_WORKQUEUE_H

#include <stddef.h>
#include <stdint.h>

#define WQ_KEY_MAX	300
#define WQ_NEVER	UINT64_MAX

struct wq;

/* Zero fields take the defaults in brackets. */
struct wq_config {
	uint64_t	 base_ms;	/* first retry delay [50] */
	uint64_t	 max_ms;	/* backoff cap [60000] */
	double		 qps;		/* keys handed out per second [20] */
	unsigned	 burst;		/* bucket size [50] */
	size_t		 max_items;	/* known keys at most [65536], <= 16M */
};

/* A new queue; the config is copied. 0, -EINVAL (max_items) or -ENOMEM. */
int	 wq_new(const struct wq_config *cfg, uint64_t now_ms, struct wq **ret);
void	 wq_free(struct wq *q);

/*
 * Queue key now. Returns 0, -EINVAL (key empty or longer than WQ_KEY_MAX),
 * -ENOSPC (max_items keys known) or -ENOMEM.
 */
int	 wq_add(struct wq *q, const char *key, uint64_t now_ms);
/* Queue key once delay_ms have passed (sooner if added sooner). */
int	 wq_add_after(struct wq *q, const char *key, uint64_t delay_ms,
	    uint64_t now_ms);
/*
 * Queue key after its backoff, base_ms * 2^failures capped at max_ms, and
 * count one more failure. *ret_delay_ms (may be NULL) gets the delay.
 */
int	 wq_add_rate_limited(struct wq *q, const char *key, uint64_t now_ms,
	    uint64_t *ret_delay_ms);
/* Forget key's failures (it succeeded). */
void	 wq_forget(struct wq *q, const char *key);
/* How many times key failed in a row. */
unsigned wq_failures(const struct wq *q, const char *key);

/*
 * Take the next ready key, marking it in process; the returned pointer is
 * valid until wq_done(). -EAGAIN when nothing is ready or the rate limit
 * says wait (see wq_next_ms).
 */
int	 wq_get(struct wq *q, uint64_t now_ms, const char **ret_key);
/* Finish processing key; re-queue it if it was added meanwhile. */
void	 wq_done(struct wq *q, const char *key, uint64_t now_ms);

/* Milliseconds until wq_get may succeed: 0 now, WQ_NEVER when empty. */
uint64_t wq_next_ms(struct wq *q, uint64_t now_ms);
/* Keys waiting (ready or delayed), not counting those in process. */
size_t	 wq_len(const struct wq *q);
/* Keys in process. */
size_t	 wq_processing(const struct wq *q);

#endif
