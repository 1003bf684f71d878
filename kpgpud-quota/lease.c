/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lease-based leader election: the pure decision and its driver on the
 * event loop. The Lease's times are informational for other tools; expiry
 * is judged by our own monotonic clock from when we first saw the holder's
 * current record, as client-go does, so clock skew between replicas does
 * not matter.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "kube/kube.h"
#include "common/metrics.h"
#include "common/util.h"
#include "kpgpud-quota/lease.h"

#define LEASE_API	"/apis/coordination.k8s.io/v1/namespaces/"

/* Copy a bounded string; false when it does not fit. */
static bool
lcopy(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* Set up an elector from the configuration. */
int
lease_elector_init(struct lease_elector *e, const struct lease_config *cfg)
{
	memset(e, 0, sizeof(*e));
	if (cfg->duration_s == 0 || cfg->identity[0] == '\0' ||
	    !lcopy(e->ns, sizeof(e->ns), cfg->ns) ||
	    !lcopy(e->name, sizeof(e->name), cfg->name) ||
	    !lcopy(e->identity, sizeof(e->identity), cfg->identity))
		return -EINVAL;
	e->duration_s = cfg->duration_s;
	return 0;
}

/* Format a MicroTime. */
void
lease_microtime(uint64_t wall_ms, char out[LEASE_TIME_LEN])
{
	time_t t = (time_t)(wall_ms / 1000);
	char buf[96], frac[16];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(frac, sizeof(frac), ".%06uZ", (unsigned)(wall_ms % 1000) *
	    1000u);
	snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s", frac);
	lcopy(out, LEASE_TIME_LEN, buf);
}

/* A string member of the Lease spec, or "". */
static const char *
spec_str(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(
	    json_object_get(obj, "spec"), key));

	return s != NULL ? s : "";
}

/* The renew deadline: a leader stops writing this long after a renewal. */
uint64_t
lease_renew_deadline_ms(const struct lease_elector *e)
{
	return (uint64_t)e->duration_s * 2000 / 3;
}

/* Whether we hold the Lease and renewed it recently enough. */
bool
lease_is_leader(const struct lease_elector *e, uint64_t now_ms)
{
	return e->leader && now_ms - e->renewed_ms < lease_renew_deadline_ms(e);
}

/* Build the Lease we want: ours, renewed now; taking over if need be. */
static json_t *
lease_body(const struct lease_elector *e, json_t *observed, bool takeover,
    uint64_t wall_ms)
{
	char now[LEASE_TIME_LEN];
	json_t *obj, *spec;
	json_int_t trans;

	lease_microtime(wall_ms, now);
	if (observed == NULL)
		return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:i, s:s, "
		    "s:s, s:i}}", "apiVersion", "coordination.k8s.io/v1",
		    "kind", "Lease", "metadata", "name", e->name, "namespace",
		    e->ns, "spec", "holderIdentity", e->identity,
		    "leaseDurationSeconds", (int)e->duration_s, "acquireTime",
		    now, "renewTime", now, "leaseTransitions", 0);
	if ((obj = json_deep_copy(observed)) == NULL)
		return NULL;
	json_object_del(obj, "status");
	spec = json_object_get(obj, "spec");
	if (!json_is_object(spec)) {
		spec = json_object();
		if (json_object_set_new(obj, "spec", spec) < 0)
			goto fail;
	}
	trans = json_integer_value(json_object_get(spec, "leaseTransitions"));
	if (json_object_set_new(spec, "holderIdentity",
	    json_string(e->identity)) < 0 ||
	    json_object_set_new(spec, "leaseDurationSeconds",
	    json_integer(e->duration_s)) < 0 ||
	    json_object_set_new(spec, "renewTime", json_string(now)) < 0)
		goto fail;
	if (takeover && (json_object_set_new(spec, "acquireTime",
	    json_string(now)) < 0 || json_object_set_new(spec,
	    "leaseTransitions", json_integer(trans + 1)) < 0))
		goto fail;
	return obj;
fail:
	json_decref(obj);
	return NULL;
}

/* Whether the other holder's record is unchanged since we first saw it. */
static bool
record_expired(struct lease_elector *e, json_t *observed, uint64_t now_ms)
{
	const char *holder = spec_str(observed, "holderIdentity");
	const char *renew = spec_str(observed, "renewTime");
	const char *rv = json_string_value(json_object_get(json_object_get(
	    observed, "metadata"), "resourceVersion"));
	json_int_t d = json_integer_value(json_object_get(json_object_get(
	    observed, "spec"), "leaseDurationSeconds"));
	uint64_t dur_ms = (d > 0 && d < 86400 ? (uint64_t)d :
	    e->duration_s) * 1000;

	if (rv == NULL)
		rv = "";
	if (e->seen_ms == 0 || strcmp(e->seen_holder, holder) != 0 ||
	    strcmp(e->seen_renew, renew) != 0 ||
	    strcmp(e->seen_rv, rv) != 0) {
		lcopy(e->seen_holder, sizeof(e->seen_holder), holder);
		lcopy(e->seen_renew, sizeof(e->seen_renew), renew);
		lcopy(e->seen_rv, sizeof(e->seen_rv), rv);
		e->seen_ms = now_ms;
		return false;
	}
	return now_ms - e->seen_ms >= dur_ms;
}

/* Decide the next write from what the Lease looks like now. */
enum lease_action
lease_decide(struct lease_elector *e, json_t *observed, uint64_t now_ms,
    uint64_t wall_ms, json_t **ret_body)
{
	const char *holder;
	bool takeover;
	json_t *body;

	if (observed == NULL) {
		body = lease_body(e, NULL, true, wall_ms);
		if (body == NULL)
			return LEASE_WAIT;
		*ret_body = body;
		return LEASE_CREATE;
	}
	holder = spec_str(observed, "holderIdentity");
	takeover = strcmp(holder, e->identity) != 0;
	if (takeover) {
		e->leader = false;
		if (holder[0] != '\0' &&
		    !record_expired(e, observed, now_ms))
			return LEASE_WAIT;
	}
	if ((body = lease_body(e, observed, takeover, wall_ms)) == NULL)
		return LEASE_WAIT;
	*ret_body = body;
	return LEASE_UPDATE;
}

/*
 * The record that gives the Lease up, as client-go's release writes it: no
 * holder, leaseDurationSeconds 1, acquireTime and renewTime now, the
 * transitions kept; so any elector, ours or client-go's, whatever it makes
 * of an empty holder, sees a record that expires within a second.
 */
json_t *
lease_release_body(const json_t *ours, uint64_t wall_ms)
{
	char now[LEASE_TIME_LEN];
	json_t *obj, *spec;

	if ((obj = json_deep_copy(ours)) == NULL)
		return NULL;
	json_object_del(obj, "status");
	spec = json_object_get(obj, "spec");
	if (!json_is_object(spec))
		goto fail;
	lease_microtime(wall_ms, now);
	if (json_object_set_new(spec, "holderIdentity", json_string("")) < 0 ||
	    json_object_set_new(spec, "leaseDurationSeconds",
	    json_integer(1)) < 0 ||
	    json_object_set_new(spec, "acquireTime", json_string(now)) < 0 ||
	    json_object_set_new(spec, "renewTime", json_string(now)) < 0)
		goto fail;
	return obj;
fail:
	json_decref(obj);
	return NULL;
}

/* Note whether our write went through. */
void
lease_written(struct lease_elector *e, bool ok, uint64_t now_ms)
{
	if (!ok)
		return;
	if (!e->leader)
		e->transitions++;
	e->leader = true;
	e->renewed_ms = now_ms;
	e->seen_ms = 0;
}

/* ---- driver ---- */

struct lease {
	struct lease_elector	 e;
	struct kube_client	*client;
	struct event		*tick;
	struct kube_req		*req;
	struct metric		*writes;
	lease_change_cb		 cb;
	void			*arg;
	bool			 notified;	/* last leadership reported */
	json_t			*ours;		/* the Lease as we last wrote it */
};

/* Tell the owner when leadership changed. */
static void
lease_notify(struct lease *l)
{
	bool now = lease_is_leader(&l->e, monotonic_ms());

	if (now != l->notified) {
		l->notified = now;
		l->cb(now, l->arg);
	}
}

/* The answer to our POST or PUT. */
static void
lease_write_done(const struct kube_response *resp, void *arg)
{
	struct lease *l = arg;

	l->req = NULL;
	lease_written(&l->e, resp->status == 200 || resp->status == 201,
	    monotonic_ms());
	if ((resp->status == 200 || resp->status == 201) &&
	    json_is_object(resp->json)) {
		json_decref(l->ours);
		l->ours = json_incref(resp->json);
	}
	lease_notify(l);
}

/* Send the body decided on. */
static void
lease_send(struct lease *l, enum lease_action a, json_t *body)
{
	char path[512], *text;

	if (a == LEASE_CREATE)
		snprintf(path, sizeof(path), LEASE_API "%s/leases", l->e.ns);
	else
		snprintf(path, sizeof(path), LEASE_API "%s/leases/%s",
		    l->e.ns, l->e.name);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL)
		return;
	if (kube_request(l->client, a == LEASE_CREATE ? "POST" : "PUT", path,
	    "application/json", text, strlen(text), lease_write_done, l,
	    &l->req) == 0)
		metric_inc(l->writes, a == LEASE_CREATE ? "create" : "update",
		    NULL);
	free(text);
}

/* The answer to our GET: decide and maybe write. */
static void
lease_got(const struct kube_response *resp, void *arg)
{
	struct lease *l = arg;
	json_t *body = NULL;
	enum lease_action a;

	l->req = NULL;
	if (resp->status != 200 && resp->status != 404) {
		lease_notify(l);
		return;
	}
	a = lease_decide(&l->e, resp->status == 200 ? resp->json : NULL,
	    monotonic_ms(), realtime_ms(), &body);
	lease_notify(l);
	if (a != LEASE_WAIT)
		lease_send(l, a, body);
}

/* Every retry period: read the Lease. */
static void
lease_tick(evutil_socket_t fd, short what, void *arg)
{
	struct lease *l = arg;
	char path[512];

	(void)fd;
	(void)what;
	lease_notify(l);
	if (l->req != NULL)
		return;
	snprintf(path, sizeof(path), LEASE_API "%s/leases/%s", l->e.ns,
	    l->e.name);
	kube_request(l->client, "GET", path, NULL, NULL, 0, lease_got, l,
	    &l->req);
}

/* Start the elector's timer; the first attempt runs at once. */
int
lease_new(struct event_base *base, struct kube_client *client,
    const struct lease_config *cfg, unsigned retry_ms,
    struct metric *writes, lease_change_cb cb, void *arg,
    struct lease **ret)
{
	struct timeval tv;
	struct lease *l;
	int r;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return -ENOMEM;
	if ((r = lease_elector_init(&l->e, cfg)) < 0) {
		free(l);
		return r;
	}
	if (retry_ms == 0)
		retry_ms = cfg->duration_s * 100;
	l->client = client;
	l->writes = writes;
	l->cb = cb;
	l->arg = arg;
	if ((l->tick = event_new(base, -1, EV_PERSIST, lease_tick, l)) ==
	    NULL) {
		free(l);
		return -ENOMEM;
	}
	tv.tv_sec = retry_ms / 1000;
	tv.tv_usec = (retry_ms % 1000) * 1000;
	event_add(l->tick, &tv);
	event_active(l->tick, EV_TIMEOUT, 0);
	*ret = l;
	return 0;
}

/* Stop electing. */
void
lease_free(struct lease *l)
{
	if (l == NULL)
		return;
	kube_request_cancel(l->req);
	if (l->tick != NULL)
		event_free(l->tick);
	json_decref(l->ours);
	free(l);
}

/* Whether we may write. */
bool
lease_leader(const struct lease *l)
{
	return l != NULL && lease_is_leader(&l->e, monotonic_ms());
}

/* The elector's state. */
const struct lease_elector *
lease_state(const struct lease *l)
{
	return &l->e;
}

/* PUT the release of the Lease written as base (ours, or as just read). */
static int
lease_put_release(struct kube_config *cfg, const struct kube_client_opts *o,
    const char *path, const json_t *base, long *status)
{
	char err[256], *text;
	json_t *body, *resp = NULL;
	int r;

	if ((body = lease_release_body(base, realtime_ms())) == NULL)
		return -ENOMEM;
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL)
		return -ENOMEM;
	r = kube_request_sync(cfg, o, "PUT", path, "application/json", text,
	    strlen(text), status, &resp, err, sizeof(err));
	free(text);
	json_decref(resp);
	return r;
}

/* Give the Lease up on a graceful stop so another replica need not wait. */
int
lease_release(struct lease *l, struct kube_config *cfg, unsigned timeout_ms)
{
	struct kube_client_opts o = { .timeout_ms = (int)timeout_ms,
	    .max_retries = -1 };
	char path[512], err[256];
	json_t *cur = NULL;
	const char *holder;
	long status = 0;
	int r;

	if (l == NULL || l->ours == NULL || !lease_leader(l))
		return 0;
	o.http_version = kube_client_http_version(l->client);
	snprintf(path, sizeof(path), LEASE_API "%s/leases/%s", l->e.ns,
	    l->e.name);
	kube_request_cancel(l->req);
	l->req = NULL;
	r = lease_put_release(cfg, &o, path, l->ours, &status);
	/*
	 * 409: the Lease changed since our last write we saw answered (the
	 * renew just cancelled may have landed all the same): read it and,
	 * when it is still ours, release what was read.
	 */
	if (r >= 0 && status == 409) {
		r = kube_request_sync(cfg, &o, "GET", path, NULL, NULL, 0,
		    &status, &cur, err, sizeof(err));
		holder = json_string_value(json_object_get(json_object_get(cur,
		    "spec"), "holderIdentity"));
		if (r >= 0 && status == 200 && holder != NULL &&
		    strcmp(holder, l->e.identity) == 0)
			r = lease_put_release(cfg, &o, path, cur, &status);
		json_decref(cur);
	}
	l->e.leader = false;
	if (r < 0)
		return r;
	return status == 200 ? 0 : -EIO;
}
