/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery of the instance kinds of the configured API groups. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "kube/kube.h"
#include "common/log.h"
#include "kpgpud-sync/discovery.h"
#include "kpgpud-sync/syncd.h"

#define DISC_RETRY_MIN_MS	500

struct syncd_disc {
	struct syncd	*sd;
	char		 groups[DISC_MAX_GROUPS][DISC_GROUP_MAX + 1];
	size_t		 ngroups;
	uint64_t	 interval_ms;
	struct event	*timer;
	struct kube_req	*req;
	size_t		 gi;		/* the group of this pass */
	char		 version[64];	/* its preferred version */
	bool		 pass_failed;
	bool		 done;		/* a first complete pass */
	uint64_t	 retry_ms;
	/* what was last logged per group: -1 unknown, 0 absent, n kinds */
	long		 seen[DISC_MAX_GROUPS];
};

/* Whether s is a non-empty [a-z0-9.-] run of at most max bytes. */
static bool
name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' &&
		    s[i] <= '9') || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

int
disc_preferred_version(json_t *doc, char *out, size_t len)
{
	const char *v = json_string_value(json_object_get(json_object_get(doc,
	    "preferredVersion"), "version"));
	const char *k = json_string_value(json_object_get(doc, "kind"));

	if (k == NULL || strcmp(k, "APIGroup") != 0 || v == NULL ||
	    !name_ok(v, 63) || strlen(v) >= len)
		return -EINVAL;
	snprintf(out, len, "%s", v);
	return 0;
}

/* Whether the verbs array holds verb. */
static bool
has_verb(json_t *verbs, const char *verb)
{
	size_t i;
	json_t *v;

	json_array_foreach(verbs, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), verb) ==
		    0)
			return true;
	return false;
}

int
disc_resources(json_t *doc, const char *group, const char *version,
    char (*out)[CACHE_GVR_MAX + 1], size_t max, size_t *ret_n)
{
	const char *k = json_string_value(json_object_get(doc, "kind"));
	const char *gv = json_string_value(json_object_get(doc,
	    "groupVersion"));
	json_t *list = json_object_get(doc, "resources"), *r;
	char want[DISC_GROUP_MAX + 80];
	size_t i, n = 0;
	int ret = 0;

	snprintf(want, sizeof(want), "%s/%s", group, version);
	if (k == NULL || strcmp(k, "APIResourceList") != 0 || gv == NULL ||
	    strcmp(gv, want) != 0 || !json_is_array(list))
		return -EINVAL;
	json_array_foreach(list, i, r) {
		const char *name = json_string_value(json_object_get(r,
		    "name"));
		json_t *verbs = json_object_get(r, "verbs");

		if (name == NULL || !name_ok(name, 63) ||
		    !has_verb(verbs, "list") || !has_verb(verbs, "watch"))
			continue;	/* subresources have a '/' */
		if (n == max) {
			ret = -E2BIG;
			break;
		}
		if (strlen(want) + 1 + strlen(name) > CACHE_GVR_MAX)
			continue;
		memcpy(out[n], want, strlen(want));
		out[n][strlen(want)] = '/';
		memcpy(out[n] + strlen(want) + 1, name, strlen(name) + 1);
		n++;
	}
	*ret_n = n;
	return ret;
}

int
disc_parse_groups(const char *list, char (*out)[DISC_GROUP_MAX + 1],
    size_t max, size_t *ret_n)
{
	const char *s = list, *e;
	size_t n = 0, len;

	while (s != NULL && *s != '\0') {
		while (*s == ',' || *s == ' ')
			s++;
		if (*s == '\0')
			break;
		for (e = s; *e != '\0' && *e != ',' && *e != ' '; e++)
			;
		len = (size_t)(e - s);
		if (n == max)
			return -E2BIG;
		if (len > DISC_GROUP_MAX)
			return -EINVAL;
		memcpy(out[n], s, len);
		out[n][len] = '\0';
		/* a group of its own: a DNS subdomain with a dot */
		if (!name_ok(out[n], DISC_GROUP_MAX) ||
		    strchr(out[n], '.') == NULL)
			return -EINVAL;
		n++;
		s = e;
	}
	*ret_n = n;
	return 0;
}

bool
disc_gvr_in_group(const char *gvr, const char *group)
{
	size_t n = strlen(group);

	return strncmp(gvr, group, n) == 0 && gvr[n] == '/';
}

static void disc_step(struct syncd_disc *d);

/* The pass is over: note it, and schedule the next one. */
static void
disc_pass_end(struct syncd_disc *d)
{
	uint64_t ms = d->interval_ms;
	struct timeval tv;

	if (!d->pass_failed) {
		d->retry_ms = 0;
		if (!d->done) {
			d->done = true;
			log_info("instance discovery complete groups=%zu",
			    d->ngroups);
			syncd_disc_complete(d->sd);
		}
	} else {
		d->retry_ms = d->retry_ms ? d->retry_ms * 2 :
		    DISC_RETRY_MIN_MS;
		if (d->retry_ms < ms)
			ms = d->retry_ms;
	}
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(d->timer, &tv);
}

/* A discovery request failed: warn, count, go on with the next group. */
static void
disc_failed(struct syncd_disc *d, const char *path,
    const struct kube_response *resp)
{
	log_warn("instance discovery failed path=%s status=%ld message=%s",
	    log_q(path), resp->status, log_q(resp->message));
	syncd_disc_api_error(d->sd, resp->status);
	d->pass_failed = true;
	d->gi++;
	d->version[0] = '\0';
	disc_step(d);
}

/* Note a group's kinds when they changed. */
static void
disc_seen(struct syncd_disc *d, long n)
{
	if (d->seen[d->gi] == n)
		return;
	d->seen[d->gi] = n;
	if (n < 0)
		log_info("instance group not served (no kinds yet) group=%s",
		    log_q(d->groups[d->gi]));
	else
		log_info("instance group discovered group=%s version=%s "
		    "resources=%ld", log_q(d->groups[d->gi]),
		    log_q(d->version), n);
}

/* GET /apis/GROUP/VERSION answered. */
static void
disc_resources_cb(const struct kube_response *resp, void *arg)
{
	struct syncd_disc *d = arg;
	char (*gvr)[CACHE_GVR_MAX + 1];
	char path[DISC_GROUP_MAX + 80];
	size_t n = 0;
	int r;

	d->req = NULL;
	snprintf(path, sizeof(path), "/apis/%s/%s", d->groups[d->gi],
	    d->version);
	if (resp->status == 404) {
		/* gone between the two requests: look again next pass */
		disc_seen(d, -1);
		d->gi++;
		d->version[0] = '\0';
		disc_step(d);
		return;
	}
	if (resp->status != 200) {
		disc_failed(d, path, resp);
		return;
	}
	if ((gvr = calloc(DISC_MAX_RESOURCES, sizeof(*gvr))) == NULL) {
		d->pass_failed = true;
		d->gi++;
		disc_step(d);
		return;
	}
	r = disc_resources(resp->json, d->groups[d->gi], d->version, gvr,
	    DISC_MAX_RESOURCES, &n);
	if (r == -EINVAL) {
		free(gvr);
		log_warn("instance discovery: not an APIResourceList path=%s",
		    log_q(path));
		d->pass_failed = true;
		d->gi++;
		d->version[0] = '\0';
		disc_step(d);
		return;
	}
	if (r == -E2BIG)
		log_warn("instance discovery: more than %d resources in "
		    "group=%s, the rest ignored", DISC_MAX_RESOURCES,
		    log_q(d->groups[d->gi]));
	disc_seen(d, (long)n);
	for (size_t i = 0; i < n; i++)
		if (syncd_add_instance(d->sd, gvr[i], true) < 0)
			d->pass_failed = true;
	free(gvr);
	d->gi++;
	d->version[0] = '\0';
	disc_step(d);
}

/* GET /apis/GROUP answered. */
static void
disc_group_cb(const struct kube_response *resp, void *arg)
{
	struct syncd_disc *d = arg;
	char path[DISC_GROUP_MAX + 80];
	int r;

	d->req = NULL;
	snprintf(path, sizeof(path), "/apis/%s", d->groups[d->gi]);
	if (resp->status == 404) {
		/* the group is not served (yet): no kinds, complete */
		disc_seen(d, -1);
		d->gi++;
		disc_step(d);
		return;
	}
	if (resp->status != 200) {
		disc_failed(d, path, resp);
		return;
	}
	if (disc_preferred_version(resp->json, d->version,
	    sizeof(d->version)) < 0) {
		log_warn("instance discovery: not an APIGroup path=%s",
		    log_q(path));
		d->pass_failed = true;
		d->gi++;
		disc_step(d);
		return;
	}
	snprintf(path, sizeof(path), "/apis/%s/%s", d->groups[d->gi],
	    d->version);
	if ((r = kube_request(d->sd->kc, "GET", path, NULL, NULL, 0,
	    disc_resources_cb, d, &d->req)) < 0) {
		d->pass_failed = true;
		d->gi++;
		disc_step(d);
	}
}

/* The next request of the pass, or its end. */
static void
disc_step(struct syncd_disc *d)
{
	char path[DISC_GROUP_MAX + 8];

	while (d->gi < d->ngroups) {
		snprintf(path, sizeof(path), "/apis/%s", d->groups[d->gi]);
		if (kube_request(d->sd->kc, "GET", path, NULL, NULL, 0,
		    disc_group_cb, d, &d->req) == 0)
			return;
		d->pass_failed = true;
		d->gi++;
	}
	disc_pass_end(d);
}

/* The timer: a new pass. */
static void
disc_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct syncd_disc *d = arg;

	(void)fd;
	(void)what;
	d->gi = 0;
	d->pass_failed = false;
	d->version[0] = '\0';
	disc_step(d);
}

int
syncd_disc_start(struct syncd *sd, const char *groups, uint64_t interval_ms)
{
	static const struct timeval now = { 0, 0 };
	struct syncd_disc *d;
	int r;

	if ((d = calloc(1, sizeof(*d))) == NULL)
		return -ENOMEM;
	if ((r = disc_parse_groups(groups, d->groups, DISC_MAX_GROUPS,
	    &d->ngroups)) < 0) {
		free(d);
		return r;
	}
	if (d->ngroups == 0) {
		free(d);
		return 0;
	}
	for (size_t i = 0; i < DISC_MAX_GROUPS; i++)
		d->seen[i] = -2;
	d->sd = sd;
	d->interval_ms = interval_ms;
	if ((d->timer = evtimer_new(sd->base, disc_timer_cb, d)) ==
	    NULL) {
		free(d);
		return -ENOMEM;
	}
	sd->disc = d;
	evtimer_add(d->timer, &now);
	return 0;
}

void
syncd_disc_stop(struct syncd *sd)
{
	struct syncd_disc *d = sd->disc;

	if (d == NULL)
		return;
	kube_request_cancel(d->req);
	event_free(d->timer);
	free(d);
	sd->disc = NULL;
}

bool
syncd_disc_done(const struct syncd *sd)
{
	return sd->disc == NULL || sd->disc->done;
}

bool
syncd_disc_owns(const struct syncd *sd, const char *gvr)
{
	if (sd->disc == NULL)
		return false;
	for (size_t i = 0; i < sd->disc->ngroups; i++)
		if (disc_gvr_in_group(gvr, sd->disc->groups[i]))
			return true;
	return false;
}
