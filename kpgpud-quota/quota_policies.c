/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One pass over the admission policies of --admission-policies, as the
 * work of the key QUOTAD_POLICIES_KEY (queued when this replica becomes
 * leader and on every resync): each object is read; absent, it is created;
 * different from the file (someone edited it), it is put back with a
 * resourceVersion precondition. Putting back one that this replica had in
 * place, or any edited one, is a repair: a log line, a Warning Event on the
 * object and kpgpud_quota_admission_policy_repairs_total{kind}.
 *
 * Then the mutating policy and binding of --mutating-policy, in the same
 * way while claims are injected by policy; while by webhook, each that
 * carries our managed-by label is deleted instead (one made before, when
 * the mode or the API server was another). --injection auto asks the API
 * server's discovery first, on every pass, so an upgrade to 1.36 (or a
 * downgrade) switches at the next resync; while discovery has never
 * answered, the mutating objects are left as they are.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "kpgpud-quota/policies.h"
#include "kpgpud-quota/quota.h"
#include "kpgpud-quota/reconcile.h"

enum { QP_GET, QP_WRITE, QP_EVENT, QP_DISCOVER, QP_DELETE };

struct qpol {
	struct quotad		*q;
	const struct policies	*p;		/* validating; or NULL */
	const struct policies	*mp;		/* mutating; or NULL */
	bool			 by_policy;	/* keep mp (else remove it) */
	bool			 undecided;	/* auto, never answered: leave mp */
	int			 i;		/* the object in process: p's,
						   then mp's */
	int			 step;
	bool			 repair;	/* the write in flight repairs */
	bool			 requeue;
	int			 in_place;
	char			 why[POLICIES_WHY_MAX];
	char			 uid[PLAN_UID_MAX + 1];
	char			*body;
	struct kube_req		*req;
	qpol_done_cb		 done;
	void			*arg;
};

static void qpol_cb(const struct kube_response *resp, void *arg);

/* The number of objects of the pass. */
static int
qpol_count(const struct qpol *s)
{
	return (s->p != NULL ? s->p->n : 0) +
	    (s->mp != NULL && !s->undecided ? s->mp->n : 0);
}

/* Object i of the pass. */
static const struct policy_obj *
qpol_obj(const struct qpol *s, int i)
{
	size_t n = s->p != NULL ? (size_t)s->p->n : 0, u = (size_t)i;

	return u < n ? &s->p->o[u] : &s->mp->o[u - n];
}

/* Whether object i of the pass is one to remove rather than keep. */
static bool
qpol_removing(const struct qpol *s, int i)
{
	return qpol_obj(s, i)->mutating && !s->by_policy;
}

/* End the pass: report and hand back (the caller frees). */
static void
qpol_end(struct qpol *s, int r)
{
	metric_set(s->q->m.pol_in_place, NULL, NULL, (double)s->in_place);
	s->done(r, s->requeue, s->arg);
}

/* Send one request of the pass. */
static int
qpol_send(struct qpol *s, int step, const char *method, const char *path,
    const char *body)
{
	s->step = step;
	if (strcmp(method, "GET") != 0)
		metric_inc(s->q->m.writes, strcmp(method, "POST") == 0 ?
		    "create" : "update", NULL);
	return kube_request(s->q->kc, method, path, body ? RC_JSON : NULL,
	    body, body ? strlen(body) : 0, qpol_cb, s, &s->req);
}

/* Read the next object, or end the pass. */
static void
qpol_next(struct qpol *s)
{
	int r;

	free(s->body);
	s->body = NULL;
	if (s->i >= qpol_count(s)) {
		qpol_end(s, 0);
		return;
	}
	if ((r = qpol_send(s, QP_GET, "GET", qpol_obj(s, s->i)->item,
	    NULL)) < 0)
		qpol_end(s, r);
}

/* Write the file's object (POST when absent, PUT over have). */
static void
qpol_write(struct qpol *s, const json_t *have)
{
	const struct policy_obj *o = qpol_obj(s, s->i);
	int r;

	if (!quotad_may_write(s->q)) {
		qpol_end(s, -EPERM);
		return;
	}
	s->body = have == NULL ? policies_create_body(o->obj) :
	    policies_update_body(o->obj, have);
	if (s->body == NULL) {
		qpol_end(s, -ENOMEM);
		return;
	}
	r = have == NULL ? qpol_send(s, QP_WRITE, "POST", o->collection,
	    s->body) : qpol_send(s, QP_WRITE, "PUT", o->item, s->body);
	if (r < 0)
		qpol_end(s, r);
}

/* A mutating object while injection is by webhook: delete it if ours. */
static void
qpol_remove(struct qpol *s, const struct kube_response *resp)
{
	const struct policy_obj *o = qpol_obj(s, s->i);
	const char *uid;
	int r;

	s->q->pol_seen[s->i] = false;
	if (resp->status == 200 && !policies_managed(resp->json))
		log_warn("%s %s is not kpgpud's (label %s): left in place "
		    "although injection is by webhook", o->kind, o->name,
		    POLICIES_MANAGED_LABEL);
	if (resp->status != 200 || !policies_managed(resp->json)) {
		if (resp->status != 200 && resp->status != 404)
			log_warn("reading %s %s failed status=%ld message=%s",
			    o->kind, o->name, resp->status,
			    log_q(resp->message));
		s->i++;
		qpol_next(s);
		return;
	}
	if (!quotad_may_write(s->q)) {
		qpol_end(s, -EPERM);
		return;
	}
	/* exactly the object read: one made again meanwhile stays */
	uid = json_string_value(json_object_get(json_object_get(resp->json,
	    "metadata"), "uid"));
	free(s->body);
	if ((s->body = reconcile_delete_body(uid != NULL ? uid : "")) ==
	    NULL) {
		qpol_end(s, -ENOMEM);
		return;
	}
	metric_inc(s->q->m.writes, "delete", NULL);
	s->step = QP_DELETE;
	if ((r = kube_request(s->q->kc, "DELETE", o->item, RC_JSON, s->body,
	    strlen(s->body), qpol_cb, s, &s->req)) < 0)
		qpol_end(s, r);
}

/* The answer to a deletion. */
static void
qpol_removed(struct qpol *s, const struct kube_response *resp)
{
	const struct policy_obj *o = qpol_obj(s, s->i);

	if (resp->status >= 200 && resp->status < 300)
		log_info("removed %s %s: claims are injected by webhook",
		    o->kind, o->name);
	else if (resp->status == 409)
		s->requeue = true;	/* replaced meanwhile: look again */
	else if (resp->status != 404)
		log_warn("removing %s %s failed status=%ld message=%s",
		    o->kind, o->name, resp->status, log_q(resp->message));
	s->i++;
	qpol_next(s);
}

/* The discovery of POLICIES_API: whether --injection auto uses policy. */
static void
qpol_discovered(struct qpol *s, const struct kube_response *resp)
{
	bool serves;

	if (resp->status != 200 && resp->status != 404) {
		/*
		 * Unknown: keep the last answer; before any, touch no mutating
		 * object (deleting a policy that injects would refuse pods)
		 * and look again after a backoff.
		 */
		log_warn("discovery of %s failed status=%ld; injection %s%s",
		    POLICIES_API, resp->status, s->q->inject_by_policy < 0 ?
		    "undecided" : "stays by ", s->q->inject_by_policy < 0 ? "" :
		    s->q->inject_by_policy == 1 ? "policy" : "webhook");
		s->undecided = s->q->inject_by_policy < 0;
		s->requeue = s->undecided;
		s->by_policy = s->q->inject_by_policy == 1;
		qpol_next(s);
		return;
	}
	serves = resp->status == 200 && policies_serves_map(resp->json);
	if (s->q->inject_by_policy != (int)serves)
		log_info("injection=auto: claims injected by %s (the API "
		    "server %s " POLICIES_MAP_RESOURCE ")", serves ? "policy" :
		    "webhook", serves ? "serves" : "does not serve");
	s->q->inject_by_policy = serves;
	s->by_policy = serves;
	qpol_next(s);
}

/* The object as read: in place, absent or changed. */
static void
qpol_read(struct qpol *s, const struct kube_response *resp)
{
	const struct policy_obj *o = qpol_obj(s, s->i);
	const char *uid;

	if (qpol_removing(s, s->i)) {
		qpol_remove(s, resp);
		return;
	}
	if (resp->status == 404) {
		s->repair = s->q->pol_seen[s->i];
		snprintf(s->why, sizeof(s->why), "it was deleted");
		s->uid[0] = '\0';
		qpol_write(s, NULL);
		return;
	}
	if (resp->status != 200 || !json_is_object(resp->json)) {
		log_warn("reading %s %s failed status=%ld message=%s", o->kind,
		    o->name, resp->status, log_q(resp->message));
		qpol_end(s, resp->status == 0 && resp->error < 0 ?
		    resp->error : -EIO);
		return;
	}
	uid = json_string_value(json_object_get(json_object_get(resp->json,
	    "metadata"), "uid"));
	snprintf(s->uid, sizeof(s->uid), "%s", uid ? uid : "");
	if (policies_same(o->obj, resp->json, s->why, sizeof(s->why))) {
		s->q->pol_seen[s->i] = true;
		s->in_place++;
		s->i++;
		qpol_next(s);
		return;
	}
	s->repair = true;
	qpol_write(s, resp->json);
}

/* Report a repair on the object (best effort). */
static void
qpol_report(struct qpol *s)
{
	const struct policy_obj *o = qpol_obj(s, s->i);
	struct plan_instance in;
	struct rc_action ev = { .body = NULL };
	char msg[POLICIES_WHY_MAX + 64];

	memset(&in, 0, sizeof(in));
	snprintf(in.api_version, sizeof(in.api_version), "%s",
	    POLICIES_API_VERSION);
	snprintf(in.kind, sizeof(in.kind), "%s", o->kind);
	snprintf(in.name, sizeof(in.name), "%s", o->name);
	snprintf(in.uid, sizeof(in.uid), "%s", s->uid);
	snprintf(msg, sizeof(msg), "%s; restored from the policy file",
	    s->why);
	if (reconcile_event(&in, s->uid, NULL, "AdmissionPolicyRestored", msg,
	    realtime_ms(), &ev) < 0 || qpol_send(s, QP_EVENT, ev.method,
	    ev.path, ev.body) < 0) {
		free(ev.body);
		s->i++;
		qpol_next(s);
		return;
	}
	free(s->body);
	s->body = ev.body;	/* freed with the pass */
}

/* The answer to the write of one object. */
static void
qpol_wrote(struct qpol *s, const struct kube_response *resp)
{
	const struct policy_obj *o = qpol_obj(s, s->i);

	if (resp->status == 409) {
		/* changed or created meanwhile: look again after a backoff */
		log_info("%s %s changed while being applied; again later",
		    o->kind, o->name);
		s->requeue = true;
		s->i++;
		qpol_next(s);
		return;
	}
	if (resp->status < 200 || resp->status >= 300) {
		log_warn("applying %s %s failed status=%ld message=%s",
		    o->kind, o->name, resp->status, log_q(resp->message));
		qpol_end(s, resp->status == 0 && resp->error < 0 ?
		    resp->error : -EIO);
		return;
	}
	s->q->pol_seen[s->i] = true;
	s->in_place++;
	if (s->uid[0] == '\0') {
		const char *uid = json_string_value(json_object_get(
		    json_object_get(resp->json, "metadata"), "uid"));

		snprintf(s->uid, sizeof(s->uid), "%s", uid ? uid : "");
	}
	if (!s->repair) {
		log_info("applied %s %s", o->kind, o->name);
		s->i++;
		qpol_next(s);
		return;
	}
	log_warn("restored %s %s: %s", o->kind, o->name, log_q(s->why));
	metric_inc(s->q->m.pol_repairs, o->kind, NULL);
	qpol_report(s);
}

/* Every answer of the pass. */
static void
qpol_cb(const struct kube_response *resp, void *arg)
{
	struct qpol *s = arg;

	s->req = NULL;
	switch (s->step) {
	case QP_GET:
		qpol_read(s, resp);
		return;
	case QP_WRITE:
		qpol_wrote(s, resp);
		return;
	case QP_DISCOVER:
		qpol_discovered(s, resp);
		return;
	case QP_DELETE:
		qpol_removed(s, resp);
		return;
	case QP_EVENT:
	default:
		if (resp->status < 200 || (resp->status >= 300 &&
		    resp->status != 409))
			log_warn("reporting the repair of %s failed status=%ld",
			    qpol_obj(s, s->i)->name, resp->status);
		s->i++;
		qpol_next(s);
		return;
	}
}

/* Start a pass; see quota.h. */
int
qpol_start(struct quotad *q, qpol_done_cb done, void *arg,
    struct qpol **ret)
{
	struct qpol *s;
	int r;

	if (q->cfg.policies == NULL && q->cfg.mpolicies == NULL)
		return -EINVAL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->q = q;
	s->p = q->cfg.policies;
	s->mp = q->cfg.mpolicies;
	s->by_policy = q->cfg.injection == POLICIES_INJECT_POLICY;
	s->done = done;
	s->arg = arg;
	*ret = s;
	if (s->mp != NULL && q->cfg.injection == POLICIES_INJECT_AUTO) {
		if ((r = qpol_send(s, QP_DISCOVER, "GET", POLICIES_API,
		    NULL)) < 0) {
			*ret = NULL;
			free(s);
			return r;
		}
		return 0;
	}
	qpol_next(s);
	return 0;
}

/* Cancel a pass (its callback does not run) and free it; NULL is fine. */
void
qpol_free(struct qpol *s)
{
	if (s == NULL)
		return;
	kube_request_cancel(s->req);
	free(s->body);
	free(s);
}
