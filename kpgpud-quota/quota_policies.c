/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One pass over the admission policies of --admission-policies, as the
 * work of the key QUOTAD_POLICIES_KEY (queued when this replica becomes
 * leader and on every resync): each object is read; absent, it is created;
 * different from the file (someone edited it), it is put back with a
 * resourceVersion precondition. Putting back one that this replica had in
 * place, or any edited one, is a repair: a log line, a Warning Event on the
 * object and kpgpud_quota_admission_policy_repairs_total{kind}.
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

enum { QP_GET, QP_WRITE, QP_EVENT };

struct qpol {
	struct quotad		*q;
	const struct policies	*p;
	int			 i;		/* the object in process */
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
	if (s->i >= s->p->n) {
		qpol_end(s, 0);
		return;
	}
	if ((r = qpol_send(s, QP_GET, "GET", s->p->o[s->i].item, NULL)) < 0)
		qpol_end(s, r);
}

/* Write the file's object (POST when absent, PUT over have). */
static void
qpol_write(struct qpol *s, const json_t *have)
{
	const struct policy_obj *o = &s->p->o[s->i];
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

/* The object as read: in place, absent or changed. */
static void
qpol_read(struct qpol *s, const struct kube_response *resp)
{
	const struct policy_obj *o = &s->p->o[s->i];
	const char *uid;

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
	const struct policy_obj *o = &s->p->o[s->i];
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
	const struct policy_obj *o = &s->p->o[s->i];

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
	case QP_EVENT:
	default:
		if (resp->status < 200 || (resp->status >= 300 &&
		    resp->status != 409))
			log_warn("reporting the repair of %s failed status=%ld",
			    s->p->o[s->i].name, resp->status);
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

	if (q->cfg.policies == NULL)
		return -EINVAL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->q = q;
	s->p = q->cfg.policies;
	s->done = done;
	s->arg = arg;
	*ret = s;
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
