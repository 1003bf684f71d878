/* SPDX-License-Identifier: Apache-2.0 */
/* The usage ledger's pure logic: see ledger.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kpgpud-sync/ledger.h"

/* Parse n decimal digits at s; -1 when one is not a digit. */
static int
digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/* RFC 3339 to microseconds since the epoch. */
int
ledger_parse_time(const char *s, uint64_t *ret_us)
{
	struct tm tm;
	int64_t t, frac = 0, scale = 100000, off = 0;
	const char *p;
	int sign;

	if (s == NULL || strlen(s) < 20 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':')
		return -EINVAL;
	memset(&tm, 0, sizeof(tm));
	if ((tm.tm_year = digits(s, 4)) < 1970 ||
	    (tm.tm_mon = digits(s + 5, 2)) < 1 || tm.tm_mon > 12 ||
	    (tm.tm_mday = digits(s + 8, 2)) < 1 || tm.tm_mday > 31 ||
	    (tm.tm_hour = digits(s + 11, 2)) < 0 || tm.tm_hour > 23 ||
	    (tm.tm_min = digits(s + 14, 2)) < 0 || tm.tm_min > 59 ||
	    (tm.tm_sec = digits(s + 17, 2)) < 0 || tm.tm_sec > 60)
		return -EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	p = s + 19;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += scale * (*p - '0');
			scale /= 10;
		}
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		sign = *p == '-' ? -1 : 1;
		if (strlen(p) != 6 || p[3] != ':' || digits(p + 1, 2) < 0 ||
		    digits(p + 4, 2) < 0)
			return -EINVAL;
		off = sign * (digits(p + 1, 2) * 3600 + digits(p + 4, 2) * 60);
		p += 6;
	} else
		return -EINVAL;
	if (*p != '\0' || (t = timegm(&tm)) == (time_t)-1 || t - off < 0)
		return -EINVAL;
	*ret_us = (uint64_t)(t - off) * 1000000u + (uint64_t)frac;
	return 0;
}

/* The compute share of a MIG profile. */
int
ledger_profile_share(const char *profile, double *ret)
{
	const char *g;
	long n, mem;
	char *end;

	if (profile == NULL || *profile == '\0') {
		*ret = 1.0;
		return 0;
	}
	n = strtol(profile, &end, 10);
	g = end;
	if (end == profile || n < 1 || n > LEDGER_GPU_SLICES || g[0] != 'g' ||
	    g[1] != '.')
		return -EINVAL;
	mem = strtol(g + 2, &end, 10);
	/*
	 * A30 (24 GB) has 4 compute slices of 6 GB each: its profiles are
	 * 1g.6gb, 2g.12gb and 4g.24gb. Every other MIG GPU has 7.
	 */
	if (end != g + 2 && strncmp(end, "gb", 2) == 0 && mem == 6 * n &&
	    (n == 1 || n == 2 || n == 4))
		*ret = (double)n / 4.0;
	else
		*ret = (double)n / LEDGER_GPU_SLICES;
	return 0;
}

/* Copy the profile in a CEL selector ("profile == '1g.10gb'") to out. */
static bool
profile_from_cel(const char *cel, char out[LEDGER_PROFILE_MAX + 1])
{
	static const char key[] = ".profile == '";
	const char *p, *q;

	if (cel == NULL || (p = strstr(cel, key)) == NULL)
		return false;
	p += sizeof(key) - 1;
	if ((q = strchr(p, '\'')) == NULL || q == p ||
	    (size_t)(q - p) > LEDGER_PROFILE_MAX)
		return false;
	memcpy(out, p, (size_t)(q - p));
	out[q - p] = '\0';
	return true;
}

/* The MIG profile of a device. */
void
ledger_profile_of(const char *class_cel, const char *device,
    char out[LEDGER_PROFILE_MAX + 1])
{
	const char *p, *q;
	size_t o = 0;
	bool dot = false;

	out[0] = '\0';
	if (profile_from_cel(class_cel, out))
		return;
	/* gpu-<minor>-mig-<profile without dots>-<id>-<start> */
	if (device == NULL || (p = strstr(device, "-mig-")) == NULL)
		return;
	p += 5;
	if ((q = strchr(p, '-')) == NULL)
		return;
	/* a v25.8 name (gpu-0-mig-19-0-1) has no profile: digits only */
	if (strchr(p, 'g') == NULL || strchr(p, 'g') > q)
		return;
	for (; p < q && o + 2 < LEDGER_PROFILE_MAX; p++) {
		out[o++] = *p;
		if (*p == 'g' && p + 1 < q && p[1] >= '0' && p[1] <= '9' &&
		    !dot) {
			out[o++] = '.';
			dot = true;
		}
	}
	out[o] = '\0';
}

/* A string member within LEDGER_FIELD_MAX, "" when absent; NULL if over. */
static const char *
fstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	const char *s;

	if (!json_is_string(v))
		return "";
	s = json_string_value(v);
	return strlen(s) <= LEDGER_FIELD_MAX ? s : NULL;
}

/* The device class of request name req ("r" or "r/sub") of a claim spec. */
static const char *
class_of(json_t *spec, const char *req)
{
	json_t *reqs = json_object_get(json_object_get(spec, "devices"),
	    "requests"), *r, *sub;
	const char *slash = strchr(req, '/'), *n;
	size_t i, j, len = slash ? (size_t)(slash - req) : strlen(req);

	json_array_foreach(reqs, i, r) {
		n = fstr(r, "name");
		if (n == NULL || strlen(n) != len || strncmp(n, req, len) != 0)
			continue;
		if (slash == NULL)
			return fstr(json_object_get(r, "exactly"),
			    "deviceClassName");
		json_array_foreach(json_object_get(r, "firstAvailable"), j,
		    sub) {
			n = fstr(sub, "name");
			if (n != NULL && strcmp(n, slash + 1) == 0)
				return fstr(sub, "deviceClassName");
		}
	}
	return "";
}

/* Reduce the allocation results of a claim. */
static int
claim_devices(json_t *obj, json_t *alloc, struct ledger_claim *c,
    const char **why)
{
	json_t *res = json_object_get(json_object_get(alloc, "devices"),
	    "results"), *r;
	struct ledger_device *d;
	size_t i;

	if (json_array_size(res) > LEDGER_DEVICES_MAX) {
		*why = "more than 32 allocation results";
		return -EINVAL;
	}
	json_array_foreach(res, i, r) {
		d = &c->dev[c->ndevices];
		d->request = fstr(r, "request");
		d->driver = fstr(r, "driver");
		d->pool = fstr(r, "pool");
		d->device = fstr(r, "device");
		if (d->request == NULL || d->driver == NULL || d->pool == NULL ||
		    d->device == NULL || *d->device == '\0') {
			*why = "bad allocation result";
			return -EINVAL;
		}
		if ((d->device_class = class_of(json_object_get(obj, "spec"),
		    d->request)) == NULL)
			d->device_class = "";
		ledger_profile_of(NULL, d->device, d->profile);
		c->ndevices++;
	}
	return 0;
}

/* Reduce a ResourceClaim. */
int
ledger_claim_from_json(json_t *obj, struct ledger_claim *ret,
    const char **ret_why)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *st = json_object_get(obj, "status"), *alloc, *rf, *e;
	struct ledger_claim *c = ret;
	const char *why = "bad metadata";
	size_t i;
	int r;

	memset(c, 0, sizeof(*c));
	c->ns = fstr(md, "namespace");
	c->name = fstr(md, "name");
	c->uid = fstr(md, "uid");
	if (c->ns == NULL || c->name == NULL || c->uid == NULL ||
	    *c->name == '\0' || *c->uid == '\0' || strlen(c->ns) > 63)
		goto bad;
	alloc = json_object_get(st, "allocation");
	c->allocated = json_is_object(alloc);
	if (c->allocated && (r = claim_devices(obj, alloc, c, &why)) < 0)
		goto bad;
	rf = json_object_get(st, "reservedFor");
	if (json_array_size(rf) > LEDGER_CONSUMERS_MAX) {
		why = "more than 256 reservedFor entries";
		goto bad;
	}
	json_array_foreach(rf, i, e) {
		const char *res = fstr(e, "resource");

		if (res == NULL || strcmp(res, "pods") != 0)
			continue;
		c->consumers[c->nconsumers].name = fstr(e, "name");
		c->consumers[c->nconsumers].uid = fstr(e, "uid");
		if (c->consumers[c->nconsumers].name == NULL ||
		    c->consumers[c->nconsumers].uid == NULL) {
			why = "bad reservedFor entry";
			goto bad;
		}
		c->nconsumers++;
	}
	return 0;
bad:
	if (ret_why != NULL)
		*ret_why = why;
	memset(c, 0, sizeof(*c));
	return -EINVAL;
}

/* Reduce a Pod. */
int
ledger_pod_from_json(json_t *obj, struct ledger_pod *ret, bool *ret_uses,
    const char **ret_why)
{
	json_t *md = json_object_get(obj, "metadata");
	json_t *st = json_object_get(obj, "status"), *cs, *term;
	const char *ts, *lists[] = { "containerStatuses",
	    "initContainerStatuses" };
	struct ledger_pod p;
	uint64_t t;
	size_t i, k;

	memset(&p, 0, sizeof(p));
	p.ns = fstr(md, "namespace");
	p.name = fstr(md, "name");
	p.uid = fstr(md, "uid");
	p.phase = fstr(st, "phase");
	if (p.ns == NULL || p.name == NULL || p.uid == NULL || p.phase == NULL ||
	    *p.name == '\0' || *p.uid == '\0' || strlen(p.ns) > 63) {
		if (ret_why != NULL)
			*ret_why = "bad metadata or status.phase";
		return -EINVAL;
	}
	ts = fstr(st, "startTime");
	if (ts != NULL && *ts != '\0' && ledger_parse_time(ts, &t) == 0)
		p.start_us = t;
	if (strcmp(p.phase, "Succeeded") == 0 || strcmp(p.phase, "Failed") ==
	    0) {
		for (k = 0; k < 2; k++)
			json_array_foreach(json_object_get(st, lists[k]), i, cs) {
				term = json_object_get(json_object_get(cs,
				    "state"), "terminated");
				ts = fstr(term, "finishedAt");
				if (ts != NULL && *ts != '\0' &&
				    ledger_parse_time(ts, &t) == 0 &&
				    t > p.finish_us)
					p.finish_us = t;
			}
	}
	*ret_uses = json_array_size(json_object_get(json_object_get(obj,
	    "spec"), "resourceClaims")) > 0;
	*ret = p;
	return 0;
}

/* The generated claims of a Pod. */
size_t
ledger_pod_claims(json_t *pod, struct ledger_pod_claim *ret, size_t max)
{
	json_t *st = json_object_get(json_object_get(pod, "status"),
	    "resourceClaimStatuses"), *rc, *e;
	const char *name, *tmpl, *claim;
	size_t i, j, n = 0;

	json_array_foreach(json_object_get(json_object_get(pod, "spec"),
	    "resourceClaims"), i, rc) {
		name = fstr(rc, "name");
		tmpl = fstr(rc, "resourceClaimTemplateName");
		if (name == NULL || tmpl == NULL || *name == '\0' ||
		    *tmpl == '\0' || n == max)
			continue;
		json_array_foreach(st, j, e) {
			claim = fstr(e, "resourceClaimName");
			if (fstr(e, "name") != NULL && strcmp(fstr(e, "name"),
			    name) == 0 && claim != NULL && *claim != '\0') {
				ret[n].template_name = tmpl;
				ret[n].claim = claim;
				n++;
				break;
			}
		}
	}
	return n;
}

/* Whether a finished Pod ran entirely while sync was away. */
bool
ledger_pod_in_gap(const struct ledger_pod *p, uint64_t alive_us,
    uint64_t now_us)
{
	return alive_us != 0 && p->start_us != 0 && p->finish_us != 0 &&
	    p->start_us >= alive_us && p->finish_us >= p->start_us &&
	    p->finish_us <= now_us;
}

/* qsort comparator of device triples. */
static int
dev_cmp(const void *a, const void *b)
{
	const struct ledger_device *x = *(const struct ledger_device *const *)a;
	const struct ledger_device *y = *(const struct ledger_device *const *)b;
	int r;

	if ((r = strcmp(x->driver, y->driver)) != 0)
		return r;
	if ((r = strcmp(x->pool, y->pool)) != 0)
		return r;
	return strcmp(x->device, y->device);
}

/* The sorted device signature of a claim's allocation. */
int
ledger_signature(const struct ledger_claim *c, char *buf, size_t len)
{
	const struct ledger_device *d[LEDGER_DEVICES_MAX];
	size_t i, o = 0;
	int n;

	for (i = 0; i < c->ndevices; i++)
		d[i] = &c->dev[i];
	qsort(d, c->ndevices, sizeof(d[0]), dev_cmp);
	if (len == 0)
		return -ENAMETOOLONG;
	buf[0] = '\0';
	for (i = 0; i < c->ndevices; i++) {
		n = snprintf(buf + o, len - o, "%s/%s/%s,", d[i]->driver,
		    d[i]->pool, d[i]->device);
		if (n < 0 || (size_t)n >= len - o)
			return -ENAMETOOLONG;
		o += (size_t)n;
	}
	return 0;
}

/* Where an interval that opened while sync was away starts. */
static void
decide_start(const struct ledger_obs *o, struct ledger_decision *d)
{
	uint64_t lo = o->alive_us > o->prev_end_us ? o->alive_us :
	    o->prev_end_us;

	if (o->live) {
		d->open_us = o->now_us;
		d->open_how = LEDGER_OBSERVED;
	} else if (o->pods_start_us != 0 && o->pods_start_us >= lo &&
	    o->pods_start_us <= o->now_us) {
		/* the kubelet starts a Pod only after its claim is allocated */
		d->open_us = o->pods_start_us;
		d->open_how = LEDGER_RECONSTRUCTED;
	} else {
		d->open_us = o->now_us;
		d->open_how = LEDGER_BOUNDED;
	}
	/* never overlap an earlier interval on the same devices */
	if (d->open_us < o->prev_end_us)
		d->open_us = o->prev_end_us;
}

/* Where the open interval ends when its end was not seen live. */
static void
decide_end(const struct ledger_obs *o, struct ledger_decision *d)
{
	if (o->live) {
		d->close_us = o->now_us;
		d->close_how = LEDGER_OBSERVED;
	} else if (o->pods_finish_us != 0 &&
	    o->pods_finish_us >= o->open_start_us &&
	    o->pods_finish_us >= o->alive_us &&
	    o->pods_finish_us <= o->now_us) {
		/* the claim is released once its last consumer is done */
		d->close_us = o->pods_finish_us;
		d->close_how = LEDGER_RECONSTRUCTED;
	} else {
		d->close_us = o->alive_us;
		d->close_how = LEDGER_BOUNDED;
	}
	/* a clock step back never makes a negative interval */
	if (d->close_us < o->open_start_us)
		d->close_us = o->open_start_us;
	/* nor a bound before the end it bounds */
	d->close_hi_us = d->close_how == LEDGER_OBSERVED ||
	    o->now_us < d->close_us ? d->close_us : o->now_us;
}

/* What an observation of a claim does to its interval. */
void
ledger_decide(const struct ledger_obs *o, struct ledger_decision *ret)
{
	struct ledger_decision d;

	memset(&d, 0, sizeof(d));
	if (o->have_open && o->allocated && o->sig != NULL &&
	    o->open_sig != NULL && strcmp(o->sig, o->open_sig) == 0)
		d.act = LEDGER_KEEP;
	else if (o->have_open) {
		decide_end(o, &d);
		d.act = LEDGER_CLOSE;
		if (o->allocated) {
			/* deallocated and allocated again unseen: a new one */
			d.act = LEDGER_REOPEN;
			if (o->live) {
				d.open_us = o->now_us;
				d.open_how = LEDGER_OBSERVED;
			} else {
				d.open_us = d.close_us;
				d.open_how = LEDGER_BOUNDED;
			}
			if (d.open_us < d.close_us)
				d.open_us = d.close_us;
		}
	} else if (o->allocated) {
		d.act = LEDGER_OPEN;
		decide_start(o, &d);
	} else
		d.act = LEDGER_IGNORE;
	*ret = d;
}

/* A consumer's finish moves a bounded end. */
bool
ledger_refine_end(uint64_t start_us, uint64_t end_us, enum ledger_how how,
    uint64_t upper_us, uint64_t finish_us, uint64_t *ret_end)
{
	if (how == LEDGER_OBSERVED || finish_us == 0 || finish_us < start_us ||
	    finish_us > upper_us)
		return false;
	/*
	 * The last consumer's finish is the release: the latest one wins. A
	 * bounded end is the last moment the claim was seen allocated, so a
	 * finish before it says nothing new.
	 */
	if (finish_us <= end_us)
		return false;
	*ret_end = finish_us;
	return true;
}

/* A consumer's start moves a bounded start. */
bool
ledger_refine_start(uint64_t start_us, enum ledger_how how,
    uint64_t lower_us, uint64_t pod_start_us, uint64_t *ret_start)
{
	if (how != LEDGER_BOUNDED || pod_start_us == 0 ||
	    pod_start_us < lower_us || pod_start_us >= start_us)
		return false;
	*ret_start = pod_start_us;
	return true;
}

/* Microseconds of an interval inside a window. */
uint64_t
ledger_overlap_us(uint64_t start_us, uint64_t end_us, uint64_t now_us,
    uint64_t since_us, uint64_t until_us)
{
	uint64_t e = end_us != 0 ? end_us : now_us;
	uint64_t a = start_us > since_us ? start_us : since_us;
	uint64_t b = e < until_us ? e : until_us;

	return b > a ? b - a : 0;
}

/* The name of how an end was established. */
const char *
ledger_how_name(enum ledger_how h)
{
	switch (h) {
	case LEDGER_OBSERVED:		return "observed";
	case LEDGER_RECONSTRUCTED:	return "reconstructed";
	case LEDGER_BOUNDED:		return "bounded";
	}
	return "?";
}

/* The wall clock in microseconds. */
uint64_t
ledger_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000;
}
