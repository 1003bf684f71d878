/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The subscriber of kpgpud-sync's change stream, on top of the libevent
 * client: HELLO, SUBSCRIBE since the last generation it holds, the
 * snapshot, live changes, and a new SUBSCRIBE after a failure on a live
 * connection or after a reconnect. It logs one line per state change; the
 * daemon's callbacks apply what arrives.
 *
 * The generation it resumes from advances only with SNAPSHOT_END and with
 * the live changes after it: a snapshot's rows come table by table, not in
 * generation order, so a snapshot cut short is asked for again from where
 * the last complete one ended.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "ipc/ipc.h"

#define SUB_DEF_TIMEOUT_MS	10000
#define SUB_RETRY_MIN_MS	100
#define SUB_RETRY_MAX_MS	5000

struct ipc_sub {
	struct ipc_sub_config	 cfg;
	char			*name;
	struct ipc_client	*client;
	struct event		*retry;		/* resubscribe timer */
	enum ipc_sub_state	 state;
	uint64_t		 generation;	/* resume point */
	unsigned		 failures;	/* SUBSCRIBEs failed in a row */
	uint64_t		 rng;
};

static const char *const state_names[] = {
	[IPC_SUB_DOWN] = "down",
	[IPC_SUB_SUBSCRIBING] = "subscribing",
	[IPC_SUB_SNAPSHOT] = "snapshot",
	[IPC_SUB_LIVE] = "live",
	[IPC_SUB_RETRY] = "retry",
};

static void sub_send(struct ipc_sub *s);

/* The name of a state, for logs and tests. */
const char *
ipc_sub_state_name(enum ipc_sub_state st)
{
	return (unsigned)st < nitems(state_names) ? state_names[st] : "?";
}

/* Wait, then send SUBSCRIBE again on the same connection. */
static void
sub_retry_later(struct ipc_sub *s, int err)
{
	unsigned ms = backoff_delay_ms(SUB_RETRY_MIN_MS, SUB_RETRY_MAX_MS,
	    s->failures, &s->rng);
	struct timeval tv = { .tv_sec = ms / 1000,
	    .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	if (s->failures < 32)
		s->failures++;
	s->state = IPC_SUB_RETRY;
	log_warn("%s subscription failed error=%s; resubscribing in %u ms",
	    s->name, strerror(err < 0 ? -err : EPROTO), ms);
	evtimer_add(s->retry, &tv);
}

/* The answer to SUBSCRIBE: SNAPSHOT_BEGIN, or a failure. */
static void
on_subscribed(struct ipc_client *c, int err, const struct ipc_msg *reply,
    void *arg)
{
	struct ipc_sub *s = arg;

	if (err == -ECANCELED || err == -ECONNRESET)
		return;		/* freed, or the disconnect handles it */
	if (err == 0 && (reply == NULL || reply->type != IPC_SNAPSHOT_BEGIN))
		err = -EPROTO;
	if (err == -ETIMEDOUT || err == -EBUSY) {
		/* sync may hold a subscription we do not know: start afresh */
		log_warn("%s subscription failed error=%s; reconnecting",
		    s->name, strerror(-err));
		ipc_client_reset(c);
		return;
	}
	if (err < 0) {
		sub_retry_later(s, err);
		return;
	}
	s->state = IPC_SUB_SNAPSHOT;
	s->failures = 0;
	log_info("subscribed to %s generation=%llu since=%llu full=%s",
	    s->name, (unsigned long long)reply->u.snapshot.generation,
	    (unsigned long long)s->generation,
	    reply->u.snapshot.full ? "true" : "false");
	if (s->cfg.on_begin != NULL)
		s->cfg.on_begin(s, reply->u.snapshot.full,
		    reply->u.snapshot.generation, s->cfg.arg);
}

/* Send SUBSCRIBE since the resume point. */
static void
sub_send(struct ipc_sub *s)
{
	struct ipc_msg m;
	int r;

	memset(&m, 0, sizeof(m));
	m.type = IPC_SUBSCRIBE;
	m.u.subscribe.topics = s->cfg.topics;
	m.u.subscribe.since_generation = s->generation;
	s->state = IPC_SUB_SUBSCRIBING;
	r = ipc_client_request(s->client, &m, s->cfg.timeout_ms,
	    on_subscribed, s, NULL);
	if (r < 0)
		sub_retry_later(s, r);
}

/* Resubscribe timer. */
static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ipc_sub *s = arg;

	(void)fd;
	(void)what;
	if (s->state == IPC_SUB_RETRY && ipc_client_connected(s->client))
		sub_send(s);
}

/* CHANGE and SNAPSHOT_END pushes. */
static void
on_push(struct ipc_client *c, const struct ipc_msg *m, void *arg)
{
	struct ipc_sub *s = arg;

	(void)c;
	if (s->state != IPC_SUB_SNAPSHOT && s->state != IPC_SUB_LIVE)
		return;		/* not ours: no subscription stands */
	if (m->type == IPC_CHANGE) {
		if (s->state == IPC_SUB_LIVE &&
		    m->u.change.generation > s->generation)
			s->generation = m->u.change.generation;
		if (s->cfg.on_change != NULL)
			s->cfg.on_change(s, &m->u.change, s->cfg.arg);
		return;
	}
	if (s->state != IPC_SUB_SNAPSHOT)
		return;
	if (m->u.snapshot.generation > s->generation)
		s->generation = m->u.snapshot.generation;
	s->state = IPC_SUB_LIVE;
	log_info("%s snapshot received generation=%llu; live", s->name,
	    (unsigned long long)s->generation);
	if (s->cfg.on_end != NULL)
		s->cfg.on_end(s, s->generation, s->cfg.arg);
}

/* HELLO_OK: subscribe from where we were. */
static void
on_connected(struct ipc_client *c, void *arg)
{
	struct ipc_sub *s = arg;

	(void)c;
	log_notice("%s connected generation=%llu", s->name,
	    (unsigned long long)s->generation);
	s->failures = 0;
	if (s->cfg.on_connected != NULL)
		s->cfg.on_connected(s, s->cfg.arg);
	if (ipc_client_connected(s->client))
		sub_send(s);
}

/* The connection is gone; the client reconnects. */
static void
on_disconnected(struct ipc_client *c, int err, void *arg)
{
	struct ipc_sub *s = arg;
	bool cut = s->state == IPC_SUB_SNAPSHOT;

	(void)c;
	evtimer_del(s->retry);
	s->state = IPC_SUB_DOWN;
	log_warn("%s disconnected error=%s%s; reconnecting", s->name,
	    strerror(err < 0 ? -err : EIO), cut ? " mid-snapshot" : "");
	if (s->cfg.on_disconnected != NULL)
		s->cfg.on_disconnected(s, err, cut, s->cfg.arg);
}

/* Create a subscriber; see ipc.h. */
int
ipc_sub_new(struct event_base *base, const struct ipc_sub_config *cfg,
    struct ipc_sub **ret)
{
	struct ipc_client_config cc = cfg->client;
	struct ipc_sub *s;
	int r;

	if (cfg->topics == 0 || (cfg->topics & ~IPC_TOPIC_ALL) != 0)
		return -EINVAL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->cfg = *cfg;
	if (s->cfg.timeout_ms == 0)
		s->cfg.timeout_ms = SUB_DEF_TIMEOUT_MS;
	s->name = strdup(cfg->name != NULL ? cfg->name : "sync");
	s->retry = evtimer_new(base, retry_cb, s);
	s->rng = prng_seed();
	s->state = IPC_SUB_DOWN;
	cc.on_connected = on_connected;
	cc.on_disconnected = on_disconnected;
	cc.on_push = on_push;
	cc.arg = s;
	if (s->name == NULL || s->retry == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = ipc_client_new(base, &cc, &s->client)) < 0)
		goto fail;
	s->cfg.name = s->name;
	*ret = s;
	return 0;
fail:
	ipc_sub_free(s);
	return r;
}

/* Start connecting. */
int
ipc_sub_start(struct ipc_sub *s)
{
	return ipc_client_start(s->client);
}

/* Disconnect and free; NULL ok. */
void
ipc_sub_free(struct ipc_sub *s)
{
	if (s == NULL)
		return;
	ipc_client_free(s->client);
	if (s->retry != NULL)
		event_free(s->retry);
	free(s->name);
	free(s);
}

/* The client under the subscription, for other requests on its link. */
struct ipc_client *
ipc_sub_client(const struct ipc_sub *s)
{
	return s->client;
}

/* Where the subscription stands. */
enum ipc_sub_state
ipc_sub_state(const struct ipc_sub *s)
{
	return s->state;
}

/* The generation a new SUBSCRIBE would start after. */
uint64_t
ipc_sub_generation(const struct ipc_sub *s)
{
	return s->generation;
}
