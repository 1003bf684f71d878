/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A create of ours refused because the name is taken (409), or because
 * an object under our name fills the quota (403): see quota_int.h. What
 * holds the name is read and verified (label, owner, spec); ours as
 * planned, the writes go on; not ours, exactly it is deleted (uid
 * precondition), reported on the instance (ImpostorReplaced) and ours
 * created again; being deleted, the key looks again later.
 */
#include "kpgpud-quota/quota_int.h"

/* The steps, in w->vstep. */
enum {
	VS_NONE, VS_READ, VS_DELETE, VS_EVENT, VS_CREATE,
};

/* The write in process (the one a verify step belongs to). */
static const struct rc_action *
cur_action(const struct qwork *w)
{
	int i = w->next - 1;

	return i < w->ev.n ? &w->ev.a[i] : &w->acts.a[i - w->ev.n];
}

static void verify_cb(const struct kube_response *resp, void *arg);

/* Send one request of the verify steps; on failure end the key. */
static void
verify_send(struct qwork *w, int step, const char *method, const char *path,
    const char *body)
{
	int r;

	w->vstep = step;
	r = kube_request(w->q->kc, method, path, body ? RC_JSON : NULL, body,
	    body ? strlen(body) : 0, verify_cb, w, &w->req);
	if (r < 0) {
		w->vstep = VS_NONE;
		queue_finish(w, r);
		return;
	}
	/* a read is judged whole; of a write only who it is about is read */
	if (strcmp(method, "GET") != 0) {
		kube_request_meta(w->req);
		metric_inc(w->q->m.writes, strcmp(method, "POST") == 0 ?
		    "create" : "delete", NULL);
	}
}

/* Report the impostor found on the instance, then go on with next. */
static void
verify_report(struct qwork *w, const struct rc_action *a, int next)
{
	struct rc_action ev;
	char msg[RC_WHY_MAX + 400];

	snprintf(msg, sizeof(msg), "%.200s (uid %s) is not kpgpud's: %.300s; "
	    "%s", a->what, w->vuid, w->vwhy, w->vdeleting ? "it is being "
	    "deleted, replaced once gone" : "replaced");
	log_warn("impostor %s key=%s", msg, log_q(w->key));
	if (!w->has_inst || reconcile_event(&w->inst, w->inst_rv,
	    NULL, "ImpostorReplaced", msg, realtime_ms(), &ev) < 0) {
		w->vstep = next;
		verify_cb(NULL, w);
		return;
	}
	free(w->vbody);
	w->vbody = ev.body;
	/* the answer does not matter: the report is best effort */
	w->vstep = VS_EVENT;
	w->vnext = next;
	if (kube_request(w->q->kc, ev.method, ev.path, ev.content_type,
	    ev.body, strlen(ev.body), verify_cb, w, &w->req) < 0) {
		w->vstep = next;
		verify_cb(NULL, w);
	}
}

/* What was read under our name: ours, or replace it. */
static void
verify_read(struct qwork *w, const struct rc_action *a,
    const struct kube_response *resp)
{
	json_t *want = strcmp(a->verify_kind, "DeviceClass") == 0 ?
	    w->plan->device_class : w->plan->claim;
	json_t *md = json_object_get(resp->json, "metadata");
	const char *uid = json_string_value(json_object_get(md, "uid"));
	enum rc_verdict v;

	if (resp->status == 404) {
		verify_send(w, VS_CREATE, "POST", a->path, a->body);
		return;
	}
	if (resp->status != 200 || !json_is_object(md)) {
		work_read_failed(w, a->item, resp);
		return;
	}
	v = reconcile_verdict(want, resp->json, w->vwhy, sizeof(w->vwhy));
	snprintf(w->vuid, sizeof(w->vuid), "%s", uid ? uid : "");
	w->vimpostor = v == RC_IMPOSTOR;
	w->vdeleting = json_object_get(md, "deletionTimestamp") != NULL;
	if (v == RC_OURS && !w->vdeleting) {
		w->vstep = VS_NONE;
		work_next(w);
		return;
	}
	if (w->vdeleting) {
		/* in use: it goes with its last pod; ours comes then */
		w->requeue = true;
		if (w->vimpostor) {
			verify_report(w, a, VS_NONE);
			return;
		}
		w->vstep = VS_NONE;
		work_next(w);
		return;
	}
	free(w->vbody);
	if ((w->vbody = reconcile_delete_body(w->vuid)) == NULL) {
		queue_finish(w, -ENOMEM);
		return;
	}
	verify_send(w, VS_DELETE, "DELETE", a->item, w->vbody);
}

/* What held the name is deleted (or gone): report it, create ours. */
static void
verify_deleted(struct qwork *w, const struct rc_action *a,
    const struct kube_response *resp)
{
	if (resp->status < 200 || (resp->status >= 300 &&
	    resp->status != 404)) {
		log_warn("replacing %s failed status=%ld message=%s",
		    a->what, resp->status, log_q(resp->message));
		queue_finish(w, -EAGAIN);
		return;
	}
	if (w->vimpostor && resp->status != 404)
		metric_inc(w->q->m.impostors, a->verify_kind, NULL);
	if (w->vimpostor) {
		verify_report(w, a, VS_CREATE);
		return;
	}
	verify_send(w, VS_CREATE, "POST", a->path, a->body);
}

/* Our create after the delete answered (resp NULL: send it now). */
static void
verify_created(struct qwork *w, const struct rc_action *a,
    const struct kube_response *resp)
{
	if (resp == NULL) {
		verify_send(w, VS_CREATE, "POST", a->path, a->body);
		return;
	}
	w->vstep = VS_NONE;
	if (resp->status == 409) {
		/* deleted but still there (in use): look again later */
		log_info("%s still terminating key=%s", a->what,
		    log_q(w->key));
		w->requeue = true;
	} else if (resp->status < 200 || resp->status >= 300) {
		log_warn("create failed %s status=%ld message=%s",
		    a->what, resp->status, log_q(resp->message));
		queue_finish(w, -EIO);
		return;
	} else {
		log_notice("replaced %s key=%s", a->what, log_q(w->key));
		quotad_own_wrote(w->q, "POST", resp->json);
	}
	work_next(w);
}

/*
 * The steps after a 409 on a create of ours: read the object of that
 * name; if it is not ours as planned, delete exactly it (uid
 * precondition), report an impostor, create ours again.
 */
static void
verify_cb(const struct kube_response *resp, void *arg)
{
	struct qwork *w = arg;
	const struct rc_action *a = cur_action(w);

	w->req = NULL;
	switch (w->vstep) {
	case VS_READ:
		verify_read(w, a, resp);
		return;
	case VS_DELETE:
		verify_deleted(w, a, resp);
		return;
	case VS_EVENT:
		if (resp != NULL && (resp->status < 200 || resp->status >= 300) &&
		    resp->status != 409)
			log_warn("impostor report failed status=%ld",
			    resp->status);
		if (w->vnext == VS_NONE) {
			w->vstep = VS_NONE;
			work_next(w);
			return;
		}
		verify_send(w, VS_CREATE, "POST", a->path, a->body);
		return;
	case VS_CREATE:
		verify_created(w, a, resp);
		return;
	case VS_NONE:	/* from verify_report without an event */
		work_next(w);
		return;
	default:
		queue_finish(w, -EINVAL);
		return;
	}
}

/* A create of ours answered 409: read what holds the name. */
void
verify_start(struct qwork *w, const struct rc_action *a)
{
	if (w->plan == NULL) {
		queue_finish(w, -EINVAL);
		return;
	}
	verify_send(w, VS_READ, "GET", a->item, NULL);
}
