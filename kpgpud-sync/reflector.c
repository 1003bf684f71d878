/* SPDX-License-Identifier: Apache-2.0 */
/* List-then-watch for one collection: see reflector.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/region.h"
#include "common/strmap.h"
#include "common/util.h"
#include "kpgpud-sync/reflector.h"

/* ---- strset: a set of copied keys in a common/strmap ---- */

/*
 * The keys are packed in a region (17 bytes for a namespace's key, not a
 * malloc chunk's 32: a list of 100,000 namespaces keeps 1.5 MB less). A
 * removed key's bytes stay there until removed ones outweigh the live ones
 * (and STRSET_DEAD_MIN), when the set is copied afresh: a long-lived set
 * with churn holds at most about twice its keys. The map's values are all
 * NULL, so it keeps no value blocks (16 bytes an entry, not 24: 0.8 MB
 * less at 100,000 keys).
 */
#define STRSET_DEAD_MIN	4096

struct strset {
	struct strmap	*map;	/* the keys (in keys), values all NULL */
	struct region	 keys;
	size_t		 live;	/* bytes of the keys in the set */
	size_t		 dead;	/* bytes of removed keys still in the region */
};

/* An empty set. */
struct strset *
strset_new(void)
{
	struct strset *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	if (strmap_new(512, STRSET_MAX, &s->map) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* Free the set and its keys. */
void
strset_free(struct strset *s)
{
	if (s == NULL)
		return;
	strmap_free(s->map, NULL);
	region_drop(&s->keys);
	free(s);
}

/* Add a copy of key. */
int
strset_add(struct strset *s, const char *key)
{
	char *copy;
	int r;

	if (strmap_has(s->map, key))
		return 0;
	if ((copy = region_strdup(&s->keys, key)) == NULL)
		return -ENOMEM;
	if ((r = strmap_put(s->map, copy, NULL, NULL)) < 0)
		s->dead += strlen(copy) + 1;
	else
		s->live += strlen(copy) + 1;
	return r;
}

/* Copy the live keys into a fresh region and map (no memory: as it was). */
static void
strset_repack(struct strset *s)
{
	struct strset *t = strset_new();
	const char *k;
	size_t pos = 0;

	while (t != NULL && strmap_next(s->map, &pos, &k, NULL))
		if (strset_add(t, k) < 0) {
			strset_free(t);
			t = NULL;
		}
	if (t == NULL)
		return;
	strmap_free(s->map, NULL);
	region_drop(&s->keys);
	*s = *t;
	free(t);
}

/* Remove key (absent: nothing). */
void
strset_del(struct strset *s, const char *key)
{
	size_t len = strlen(key) + 1;	/* the stored copy's, equal to it */

	if (strmap_remove(s->map, key, NULL) != 0)
		return;
	s->live -= len;
	s->dead += len;
	if (s->dead > STRSET_DEAD_MIN && s->dead > s->live)
		strset_repack(s);
}

/* Bytes the region holds for removed keys (for tests). */
size_t
strset_dead_bytes(const struct strset *s)
{
	return s->dead;
}

/* Whether key is in the set. */
bool
strset_has(const struct strset *s, const char *key)
{
	return strmap_has(s->map, key);
}

/* Number of keys. */
size_t
strset_count(const struct strset *s)
{
	return strmap_count(s->map);
}

/* Format the key of an object. */
int
strset_key(char *buf, size_t len, const char *ns, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", ns != NULL ? ns : "", name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- decisions ---- */

/* What to do after a watch ended. */
enum reflector_next
reflector_after_watch(const struct kube_watch_end *end, uint64_t ran_ms)
{
	switch (end->reason) {
	case KUBE_WATCH_EXPIRED:
		return REFL_NEXT_RELIST;
	case KUBE_WATCH_HTTP_ERROR:
		return end->status == 410 ? REFL_NEXT_RELIST :
		    REFL_NEXT_WATCH_LATER;
	case KUBE_WATCH_CLOSED:
		/* client-go: a very short watch with nothing in it is an error */
		return end->events == 0 && ran_ms < 1000 ?
		    REFL_NEXT_WATCH_LATER : REFL_NEXT_WATCH;
	case KUBE_WATCH_STALLED:
		return REFL_NEXT_WATCH;
	case KUBE_WATCH_ERROR_EVENT:
	case KUBE_WATCH_PARSE_ERROR:
	case KUBE_WATCH_TRANSPORT:
	default:
		return REFL_NEXT_WATCH_LATER;
	}
}

/* Exponential backoff with jitter. */
uint64_t
reflector_backoff_ms(unsigned failures, uint64_t base_ms, uint64_t max_ms,
    double jitter)
{
	uint64_t d = base_ms;
	unsigned i;

	for (i = 1; i < failures && d < max_ms; i++)
		d *= 2;
	if (d > max_ms)
		d = max_ms;
	if (jitter < 0.5)
		jitter = 0.5;
	if (jitter > 1.0)
		jitter = 1.0;
	return (uint64_t)((double)d * jitter);
}

/* ---- the reflector ---- */

enum rf_state { RF_IDLE, RF_LISTING, RF_WATCHING, RF_WAITING };

struct reflector {
	struct event_base	*base;
	struct kube_client	*kc;
	struct sync_res		 res;
	struct reflector_config	 cfg;
	struct reflector_ops	 ops;
	void			*arg;
	enum rf_state		 state;
	enum reflector_next	 pending;	/* what the timer does */
	char			 rv[CACHE_RV_MAX + 1];
	struct kube_list	*list;
	struct kube_watch	*watch;
	struct event		*timer;
	struct strset		*seen;
	size_t			 listed;
	unsigned		 failures;
	bool			 synced;
	bool			 keep_rv;	/* start_list: until a list ends */
	uint64_t		 watch_start_ms;
};

static void	rf_list(struct reflector *rf, bool forget);
static void	rf_watch(struct reflector *rf);

/* Report something through ops->note. */
static void
rf_note(struct reflector *rf, const struct reflector_note *n)
{
	if (rf->ops.note != NULL)
		rf->ops.note(rf->arg, rf, n);
}

/* Uniform jitter in [0.5, 1.0]. */
static double
rf_jitter(void)
{
	return 0.5 + (double)(random() % 1000) / 2000.0;
}

/* Run next after delay_ms (0: on the next loop turn). */
static void
rf_schedule(struct reflector *rf, enum reflector_next next,
    uint64_t delay_ms)
{
	struct timeval tv = { (time_t)(delay_ms / 1000),
	    (suseconds_t)(delay_ms % 1000) * 1000 };

	rf->state = RF_WAITING;
	rf->pending = next;
	evtimer_add(rf->timer, &tv);
}

/* The delay for a *_LATER decision, counting the failure. */
static uint64_t
rf_delay(struct reflector *rf, enum reflector_next next)
{
	if (next != REFL_NEXT_WATCH_LATER && next != REFL_NEXT_RELIST_LATER)
		return 0;
	rf->failures++;
	return reflector_backoff_ms(rf->failures, rf->cfg.backoff_base_ms,
	    rf->cfg.backoff_max_ms, rf_jitter());
}

/* Report n with what comes next, counting a failure, then schedule it. */
static void
rf_next(struct reflector *rf, struct reflector_note *n,
    enum reflector_next next)
{
	n->next = next;
	n->delay_ms = rf_delay(rf, next);
	rf_note(rf, n);
	rf_schedule(rf, next, n->delay_ms);
}

/* Mark the collection synced once and tell the owner. */
static void
rf_set_synced(struct reflector *rf)
{
	if (rf->synced)
		return;
	rf->synced = true;
	if (rf->ops.synced != NULL)
		rf->ops.synced(rf->arg, rf);
}

/* The timer: do what was scheduled. */
static void
rf_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct reflector *rf = arg;

	(void)fd;
	(void)what;
	if (rf->pending == REFL_NEXT_RELIST ||
	    rf->pending == REFL_NEXT_RELIST_LATER)
		rf_list(rf, !rf->keep_rv);
	else
		rf_watch(rf);
}

/* Hand one list item to the owner and remember its key. */
static void
rf_list_item(struct reflector *rf, json_t *item)
{
	struct reflector_note n = { .event = REFL_EV_BAD_OBJECT };
	const char *ns, *name;
	char key[CACHE_KEY_MAX * 2 + 2];
	int r;

	if (sync_obj_key(item, &ns, &name) < 0) {
		n.message = "list item without a usable name";
		rf_note(rf, &n);
		return;
	}
	if (rf->ops.put(rf->arg, rf, item) < 0)
		return;	/* the owner reported it */
	rf->listed++;
	if (strset_key(key, sizeof(key), ns, name) == 0 &&
	    (r = strset_add(rf->seen, key)) < 0) {
		n.error = r;
		n.message = "list key set full";
		rf_note(rf, &n);
	}
}

/* One list page. */
static void
rf_list_page(json_t *items, void *arg)
{
	struct reflector *rf = arg;
	json_t *item;
	size_t i;

	if (rf->seen == NULL)
		return;
	json_array_foreach(items, i, item)
		rf_list_item(rf, item);
}

/* The list ended: prune, then watch from its resourceVersion. */
static void
rf_list_end(const struct kube_response *resp, const char *rv, void *arg)
{
	struct reflector *rf = arg;
	struct reflector_note n = { 0 };
	bool missing = resp->status == 404;

	rf->list = NULL;
	n.status = resp->status;
	n.error = resp->error;
	n.message = resp->message;
	if ((rv == NULL || strlen(rv) > CACHE_RV_MAX) && !missing) {
		n.event = REFL_EV_LIST_FAILED;
		rf_next(rf, &n, resp->status == 410 ? REFL_NEXT_RELIST :
		    REFL_NEXT_RELIST_LATER);
		return;
	}
	n.event = REFL_EV_LIST_DONE;
	n.items = rf->listed;
	if (rf->ops.prune(rf->arg, rf, rf->seen) < 0) {
		n.event = REFL_EV_LIST_FAILED;
		n.message = "pruning the cache failed";
		rf_next(rf, &n, REFL_NEXT_RELIST_LATER);
		return;
	}
	strset_free(rf->seen);
	rf->seen = NULL;
	if (missing) {
		/* the collection does not exist (yet): empty; look again */
		if (rf->keep_rv)
			rf->ops.set_rv(rf->arg, rf, "");
		rf->keep_rv = false;
		n.next = REFL_NEXT_RELIST_LATER;
		n.delay_ms = rf->cfg.backoff_max_ms;
		rf_note(rf, &n);
		rf_set_synced(rf);
		rf_schedule(rf, n.next, n.delay_ms);
		return;
	}
	snprintf(rf->rv, sizeof(rf->rv), "%s", rv);
	rf->ops.set_rv(rf->arg, rf, rf->rv);
	rf->keep_rv = false;
	rf->failures = 0;
	n.next = REFL_NEXT_WATCH;
	rf_note(rf, &n);
	rf_set_synced(rf);
	rf_watch(rf);
}

/*
 * Start a list; on failure to start, retry later. forget: tell the owner
 * the stored resourceVersion is void while the list runs (a relist);
 * otherwise the stored one stays until the list ends (a list at start that
 * could have resumed, whose rows are as good as a resumed watch's).
 */
static void
rf_list(struct reflector *rf, bool forget)
{
	struct reflector_note n = { .event = REFL_EV_LIST_FAILED };
	char *q = NULL;
	int r;

	kube_watch_stop(rf->watch);
	rf->watch = NULL;
	kube_list_cancel(rf->list);
	rf->list = NULL;
	strset_free(rf->seen);
	rf->listed = 0;
	rf->rv[0] = '\0';
	if (forget)
		rf->ops.set_rv(rf->arg, rf, "");
	if ((rf->seen = strset_new()) == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	if ((rf->res.selector != NULL || rf->res.field_selector != NULL) &&
	    (r = kube_path(&q, "", "labelSelector", rf->res.selector,
	    "fieldSelector", rf->res.field_selector, (char *)NULL)) < 0)
		goto fail;
	r = kube_list_start(rf->kc, rf->res.path, q != NULL ? q + 1 : NULL,
	    rf->cfg.list_limit, NULL, rf_list_page, rf_list_end, rf,
	    &rf->list);
	free(q);
	if (r < 0)
		goto fail;
	rf->state = RF_LISTING;
	return;
fail:
	n.error = r;
	n.message = "cannot start the list";
	rf_next(rf, &n, REFL_NEXT_RELIST_LATER);
}

/* One watch event: hand it over, remember how far we are. */
static void
rf_watch_event(const struct watch_event *ev, void *arg)
{
	struct reflector *rf = arg;
	const char *rv = ev->resource_version;

	rf->failures = 0;
	/*
	 * A failed put/del still moves the resourceVersion on: a malformed
	 * object is skipped for good (a restart would only replay it), and a
	 * failed cache write loses the whole batch, which is relisted.
	 */
	if (ev->type == WATCH_ADDED || ev->type == WATCH_MODIFIED)
		(void)rf->ops.put(rf->arg, rf, ev->object);
	else if (ev->type == WATCH_DELETED)
		(void)rf->ops.del(rf->arg, rf, ev->object);
	else if (ev->type != WATCH_BOOKMARK)
		return;
	if (rv != NULL && *rv != '\0' && strlen(rv) <= CACHE_RV_MAX &&
	    strcmp(rv, rf->rv) != 0) {
		snprintf(rf->rv, sizeof(rf->rv), "%s", rv);
		rf->ops.set_rv(rf->arg, rf, rf->rv);
	}
}

/* The watch ended by itself: decide what comes next. */
static void
rf_watch_end(const struct kube_watch_end *end, void *arg)
{
	struct reflector *rf = arg;
	struct reflector_note n = { .event = REFL_EV_WATCH_ENDED };
	uint64_t ran = monotonic_ms() - rf->watch_start_ms;

	rf->watch = NULL;
	n.end = end;
	n.status = end->status;
	n.error = end->error;
	n.message = end->message;
	rf_next(rf, &n, reflector_after_watch(end, ran));
}

/* Start a watch from rf->rv. */
static void
rf_watch(struct reflector *rf)
{
	struct reflector_note n = { .event = REFL_EV_WATCH_FAILED };
	char tos[16], *p = NULL;
	unsigned t = rf->cfg.watch_timeout_s;
	int r;

	snprintf(tos, sizeof(tos), "%u", t + (unsigned)(random() % (t ? t : 1)));
	r = kube_path(&p, rf->res.path, "watch", "true",
	    "allowWatchBookmarks", "true", "resourceVersion", rf->rv,
	    "timeoutSeconds", tos, "labelSelector", rf->res.selector,
	    "fieldSelector", rf->res.field_selector, (char *)NULL);
	if (r == 0)
		r = kube_watch_start(rf->kc, p, rf_watch_event, rf_watch_end,
		    rf, &rf->watch);
	free(p);
	if (r < 0) {
		n.error = r;
		n.message = "cannot start the watch";
		rf_next(rf, &n, REFL_NEXT_WATCH_LATER);
		return;
	}
	rf->state = RF_WATCHING;
	rf->watch_start_ms = monotonic_ms();
}

/* Create a reflector. */
int
reflector_new(struct event_base *base, struct kube_client *kc,
    const struct sync_res *res, const struct reflector_config *cfg,
    const struct reflector_ops *ops, void *arg, struct reflector **ret)
{
	struct reflector *rf;

	if (ops->put == NULL || ops->del == NULL || ops->set_rv == NULL ||
	    ops->prune == NULL)
		return -EINVAL;
	if ((rf = calloc(1, sizeof(*rf))) == NULL)
		return -ENOMEM;
	rf->base = base;
	rf->kc = kc;
	rf->res = *res;
	rf->cfg = *cfg;
	if (rf->cfg.list_limit == 0)
		rf->cfg.list_limit = 500;
	if (rf->cfg.watch_timeout_s == 0)
		rf->cfg.watch_timeout_s = 300;
	if (rf->cfg.backoff_base_ms == 0)
		rf->cfg.backoff_base_ms = 500;
	if (rf->cfg.backoff_max_ms == 0)
		rf->cfg.backoff_max_ms = 30000;
	rf->ops = *ops;
	rf->arg = arg;
	if ((rf->timer = evtimer_new(base, rf_timer_cb, rf)) == NULL) {
		free(rf);
		return -ENOMEM;
	}
	*ret = rf;
	return 0;
}

/* Stop everything and free. */
void
reflector_free(struct reflector *rf)
{
	if (rf == NULL)
		return;
	kube_watch_stop(rf->watch);
	kube_list_cancel(rf->list);
	strset_free(rf->seen);
	if (rf->timer != NULL)
		event_free(rf->timer);
	free(rf);
}

/* Start by resuming from rv or by listing. */
int
reflector_start(struct reflector *rf, const char *rv)
{
	if (rf->state != RF_IDLE)
		return -EALREADY;
	if (rv != NULL && *rv != '\0' && strlen(rv) <= CACHE_RV_MAX) {
		snprintf(rf->rv, sizeof(rf->rv), "%s", rv);
		rf_set_synced(rf);
		rf_watch(rf);
	} else
		rf_list(rf, true);
	return 0;
}

/* Start by listing, keeping the stored resourceVersion until it ends. */
int
reflector_start_list(struct reflector *rf)
{
	if (rf->state != RF_IDLE)
		return -EALREADY;
	rf->keep_rv = true;
	rf_list(rf, false);
	return 0;
}

/* Drop the watch or list in progress and list again. */
void
reflector_relist(struct reflector *rf)
{
	evtimer_del(rf->timer);
	rf->keep_rv = false;
	rf_list(rf, true);
}

/* The collection this reflector follows. */
const struct sync_res *
reflector_res(const struct reflector *rf)
{
	return &rf->res;
}

/* Whether the first list (or a resume) completed. */
bool
reflector_synced(const struct reflector *rf)
{
	return rf->synced;
}

/* The last resourceVersion reached ("" while listing). */
const char *
reflector_rv(const struct reflector *rf)
{
	return rf->rv;
}
