/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rate-limited work queue: a map of known keys, a FIFO of ready keys,
 * a list of delayed keys and a token bucket. Delayed keys are few (retries
 * and deferred work), so they are scanned linearly.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "kpgpud-quota/workqueue.h"

/* Slots for this many keys from the start; the map grows past it. */
#define WQ_HINT		256

struct item {
	struct item	*qnext;		/* ready FIFO */
	struct item	*dnext;		/* delayed list */
	uint64_t	 ready_at;	/* when delayed */
	uint64_t	 dirty_at;	/* when re-added during processing */
	unsigned	 failures;
	bool		 queued, delayed, processing, dirty;
	char		 key[];		/* the map's key */
};

struct wq {
	struct wq_config cfg;
	struct strmap	*items;		/* key -> item */
	struct item	*head, *tail;
	struct item	*delayed;
	size_t		 nready, ndelayed, nprocessing;
	double		 tokens;
	uint64_t	 refilled;
};

/* Create a queue with defaults filled in. */
int
wq_new(const struct wq_config *cfg, uint64_t now_ms, struct wq **ret)
{
	struct wq *q;
	int r;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return -ENOMEM;
	if (cfg != NULL)
		q->cfg = *cfg;
	if (q->cfg.base_ms == 0)
		q->cfg.base_ms = 50;
	if (q->cfg.max_ms == 0)
		q->cfg.max_ms = 60000;
	if (q->cfg.max_ms < q->cfg.base_ms)
		q->cfg.max_ms = q->cfg.base_ms;
	if (q->cfg.qps <= 0)
		q->cfg.qps = 20;
	if (q->cfg.burst == 0)
		q->cfg.burst = 50;
	if (q->cfg.max_items == 0)
		q->cfg.max_items = 65536;
	if ((r = strmap_new(WQ_HINT, q->cfg.max_items, &q->items)) < 0) {
		free(q);
		return r;
	}
	q->tokens = q->cfg.burst;
	q->refilled = now_ms;
	*ret = q;
	return 0;
}

/* Free every key and the queue. */
void
wq_free(struct wq *q)
{
	if (q == NULL)
		return;
	strmap_free(q->items, free);
	free(q);
}

/* Find a known key. */
static struct item *
find(const struct wq *q, const char *key)
{
	return strmap_get(q->items, key);
}

/* Find or create the item of key. */
static int
lookup(struct wq *q, const char *key, struct item **ret)
{
	struct item *it;
	size_t len = strlen(key);
	int r;

	if (len == 0 || len > WQ_KEY_MAX)
		return -EINVAL;
	if ((it = find(q, key)) != NULL) {
		*ret = it;
		return 0;
	}
	if ((it = calloc(1, sizeof(*it) + len + 1)) == NULL)
		return -ENOMEM;
	memcpy(it->key, key, len + 1);
	if ((r = strmap_put(q->items, it->key, it, NULL)) < 0) {
		free(it);
		return r == -E2BIG ? -ENOSPC : r;
	}
	*ret = it;
	return 0;
}

/* Drop an idle item that has nothing left to remember. */
static void
maybe_release(struct wq *q, struct item *it)
{
	if (it->queued || it->delayed || it->processing || it->failures > 0)
		return;
	(void)strmap_remove(q->items, it->key, NULL);
	free(it);
}

/* Take an item off the delayed list. */
static void
undelay(struct wq *q, struct item *it)
{
	struct item **pp;

	if (!it->delayed)
		return;
	for (pp = &q->delayed; *pp != it; pp = &(*pp)->dnext)
		;
	*pp = it->dnext;
	it->dnext = NULL;
	it->delayed = false;
	q->ndelayed--;
}

/* Append an item to the ready FIFO. */
static void
enqueue(struct wq *q, struct item *it)
{
	undelay(q, it);
	if (it->queued)
		return;
	it->queued = true;
	it->qnext = NULL;
	if (q->tail != NULL)
		q->tail->qnext = it;
	else
		q->head = it;
	q->tail = it;
	q->nready++;
}

/* Place an item for readiness at a time, now or later. */
static void
schedule(struct wq *q, struct item *it, uint64_t at, uint64_t now_ms)
{
	if (it->processing) {
		if (!it->dirty || at < it->dirty_at)
			it->dirty_at = at;
		it->dirty = true;
		return;
	}
	if (it->queued)
		return;
	if (at <= now_ms) {
		enqueue(q, it);
		return;
	}
	if (it->delayed) {
		if (it->ready_at > at)
			it->ready_at = at;
		return;
	}
	it->delayed = true;
	it->ready_at = at;
	it->dnext = q->delayed;
	q->delayed = it;
	q->ndelayed++;
}

/* Queue a key for now. */
int
wq_add(struct wq *q, const char *key, uint64_t now_ms)
{
	return wq_add_after(q, key, 0, now_ms);
}

/* Queue a key for later. */
int
wq_add_after(struct wq *q, const char *key, uint64_t delay_ms,
    uint64_t now_ms)
{
	struct item *it;
	int r;

	if ((r = lookup(q, key, &it)) < 0)
		return r;
	schedule(q, it, now_ms + delay_ms, now_ms);
	return 0;
}

/* Queue a key after its exponential backoff. */
int
wq_add_rate_limited(struct wq *q, const char *key, uint64_t now_ms,
    uint64_t *ret_delay_ms)
{
	struct item *it;
	uint64_t d;
	int r;

	if ((r = lookup(q, key, &it)) < 0)
		return r;
	d = q->cfg.base_ms;
	for (unsigned i = 0; i < it->failures && d < q->cfg.max_ms; i++)
		d *= 2;
	if (d > q->cfg.max_ms)
		d = q->cfg.max_ms;
	it->failures++;
	schedule(q, it, now_ms + d, now_ms);
	if (ret_delay_ms != NULL)
		*ret_delay_ms = d;
	return 0;
}

/* Reset a key's failure count. */
void
wq_forget(struct wq *q, const char *key)
{
	struct item *it = find(q, key);

	if (it == NULL)
		return;
	it->failures = 0;
	maybe_release(q, it);
}

/* The failure count of a key. */
unsigned
wq_failures(const struct wq *q, const char *key)
{
	struct item *it = find(q, key);

	return it != NULL ? it->failures : 0;
}

/* Move delayed keys whose time has come to the ready FIFO. */
static void
promote(struct wq *q, uint64_t now_ms)
{
	struct item *it, *next;

	for (it = q->delayed; it != NULL; it = next) {
		next = it->dnext;
		if (it->ready_at <= now_ms)
			enqueue(q, it);
	}
}

/* Add the tokens earned since the last refill. */
static void
refill(struct wq *q, uint64_t now_ms)
{
	if (now_ms > q->refilled) {
		q->tokens += (double)(now_ms - q->refilled) * q->cfg.qps /
		    1000.0;
		if (q->tokens > q->cfg.burst)
			q->tokens = q->cfg.burst;
	}
	q->refilled = now_ms;
}

/* Hand out the next ready key if the rate limit allows. */
int
wq_get(struct wq *q, uint64_t now_ms, const char **ret_key)
{
	struct item *it;

	promote(q, now_ms);
	refill(q, now_ms);
	if ((it = q->head) == NULL || q->tokens < 1.0)
		return -EAGAIN;
	q->tokens -= 1.0;
	q->head = it->qnext;
	if (q->head == NULL)
		q->tail = NULL;
	it->qnext = NULL;
	it->queued = false;
	q->nready--;
	it->processing = true;
	q->nprocessing++;
	*ret_key = it->key;
	return 0;
}

/* Finish a key; a key added meanwhile goes back into the queue. */
void
wq_done(struct wq *q, const char *key, uint64_t now_ms)
{
	struct item *it = find(q, key);

	if (it == NULL || !it->processing)
		return;
	it->processing = false;
	q->nprocessing--;
	if (it->dirty) {
		it->dirty = false;
		schedule(q, it, it->dirty_at, now_ms);
	}
	maybe_release(q, it);
}

/* Time until a key can be handed out. */
uint64_t
wq_next_ms(struct wq *q, uint64_t now_ms)
{
	uint64_t at = WQ_NEVER, wait;
	struct item *it;

	promote(q, now_ms);
	if (q->head != NULL)
		at = now_ms;
	for (it = q->delayed; it != NULL; it = it->dnext)
		if (it->ready_at < at)
			at = it->ready_at;
	if (at == WQ_NEVER)
		return WQ_NEVER;
	refill(q, now_ms);
	wait = at - now_ms;
	if (q->tokens < 1.0) {
		uint64_t t = (uint64_t)((1.0 - q->tokens) * 1000.0 /
		    q->cfg.qps) + 1;
		if (t > wait)
			wait = t;
	}
	return wait;
}

/* Keys waiting. */
size_t
wq_len(const struct wq *q)
{
	return q->nready + q->ndelayed;
}

/* Keys in process. */
size_t
wq_processing(const struct wq *q)
{
	return q->nprocessing;
}
