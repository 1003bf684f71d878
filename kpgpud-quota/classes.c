/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's DeviceClasses as kpgpud-quota reads them from the cache:
 * the GPU classes strict quota closes, the other classes the admission
 * policies' ConfigMap lists, and kpgpud's own classes the collector may
 * delete. Every reconcile asks for them, so they are kept between calls
 * and each class row is parsed once per read: a call reads the class rows
 * again only when one was created, changed or deleted since the last read
 * (rows and tombstones after its generation), the cache was reopened or
 * rebuilt, or its tombstones no longer reach back that far. A class
 * changed by anyone is therefore seen by the next reconcile that reads
 * the cache after sync wrote it, as when every reconcile read them all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache/cache.h"
#include "common/util.h"
#include "kpgpud-quota/quota.h"

/* Append a copy of name to a growing list; 0 or -ENOMEM. */
static int
list_add(char ***names, int *n, int *cap, const char *name)
{
	char **nn;

	if (*n == *cap) {
		if ((nn = realloc(*names, (size_t)(*cap ? *cap * 2 : 16) *
		    sizeof(*nn))) == NULL)
			return -ENOMEM;
		*names = nn;
		*cap = *cap ? *cap * 2 : 16;
	}
	if (((*names)[*n] = strdup(name)) == NULL)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Free a list of names. */
static void
list_free(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

struct read_ctx {
	struct quotad_classes	*s;
	const char		*drivers;
	int			 cap_gpu, cap_ours;
	struct buf		 non_gpu;
};

/*
 * One DeviceClass row: a GPU class (unparsable data counts as one: strict
 * then closes it), or one for the policies' list; and kpgpud's or not.
 */
static int
read_cb(const struct cache_owned *o, void *arg)
{
	struct read_ctx *x = arg;
	struct quotad_classes *s = x->s;
	json_t *data = json_loads(o->data ? o->data : "{}", 0, NULL);
	bool gpu = data == NULL || plan_class_is_gpu(data, x->drivers);
	const char *mb = json_string_value(json_object_get(json_object_get(
	    data, "labels"), PLAN_MANAGED_BY_KEY));
	bool ours = mb != NULL && strcmp(mb, PLAN_MANAGED_BY) == 0;
	int r = 0;

	json_decref(data);
	if (gpu)
		r = list_add(&s->gpu, &s->ngpu, &x->cap_gpu, o->name);
	else if (s->nnon_gpu >= QUOTAD_MAX_NON_GPU)
		s->non_gpu_over = true;
	else if (buf_printf(&x->non_gpu, "%s%s", s->nnon_gpu > 0 ? " " : "",
	    o->name) < 0)
		r = -ENOMEM;
	else
		s->nnon_gpu++;
	if (r == 0 && ours)
		r = list_add(&s->ours, &s->nours, &x->cap_ours, o->name);
	return r;
}

/* Forget what was read: the next call reads every class row. */
static void
classes_clear(struct quotad_classes *s)
{
	list_free(s->gpu, s->ngpu);
	list_free(s->ours, s->nours);
	free(s->non_gpu);
	s->gpu = s->ours = NULL;
	s->non_gpu = NULL;
	s->ngpu = s->nours = s->nnon_gpu = 0;
	s->non_gpu_over = false;
	s->gen = 0;
}

/* Read every class row of c at generation now. */
static int
classes_read(struct quotad_classes *s, struct cache *c, const char *drivers,
    uint64_t now)
{
	struct read_ctx x = { s, drivers, 0, 0, BUF_INIT(0) };
	int r;

	classes_clear(s);
	s->reads++;
	r = cache_owned_foreach(c, "", CACHE_KIND_DEVICECLASS, 0, read_cb, &x);
	if (r == 0 && (s->non_gpu = strdup(x.non_gpu.len > 0 ?
	    buf_str(&x.non_gpu) : "")) == NULL)
		r = -ENOMEM;
	buf_free(&x.non_gpu);
	if (r < 0) {
		classes_clear(s);
		return r;
	}
	s->c = c;
	s->gen = now;
	return 0;
}

/* A class row changed after the last read. */
static int
changed_row_cb(const struct cache_owned *o, void *arg)
{
	(void)o;
	*(bool *)arg = true;
	return 0;
}

/* A deletion after the last read: a class's? */
static int
changed_tomb_cb(const struct cache_tomb *t, void *arg)
{
	if (t->table == CACHE_T_OWNED &&
	    strcmp(t->kind, CACHE_KIND_DEVICECLASS) == 0)
		*(bool *)arg = true;
	return 0;
}

/*
 * Whether what s holds is still the cache's at generation now: same cache,
 * and no class row nor class deletion after the read (the tombstones must
 * reach back to it).
 */
static int
classes_current(const struct quotad_classes *s, struct cache *c,
    uint64_t now, bool *ret)
{
	uint64_t hz;
	bool changed = false;
	int r;

	*ret = false;
	if (s->c != c || s->gen == 0 || now < s->gen)
		return 0;
	if (now == s->gen) {
		*ret = true;
		return 0;
	}
	if ((r = cache_horizon(c, &hz)) < 0)
		return r;
	if (s->gen < hz)
		return 0;
	if ((r = cache_owned_foreach(c, "", CACHE_KIND_DEVICECLASS, s->gen,
	    changed_row_cb, &changed)) < 0 ||
	    (!changed && (r = cache_tomb_foreach(c, s->gen, changed_tomb_cb,
	    &changed)) < 0))
		return r;
	*ret = !changed;
	return 0;
}

/*
 * The DeviceClasses of cache c (drivers: the plan's GPU drivers, NULL for
 * its default), read again only when a class changed since the last call.
 * -EAGAIN while sync has not listed the DeviceClasses yet; 0 or -errno
 * (s then holds nothing and the next call reads every row).
 */
int
quotad_classes_get(struct quotad_classes *s, struct cache *c,
    const char *drivers)
{
	char rv[64];
	uint64_t now;
	bool current;
	int r;

	if ((r = cache_watch_get(c, CACHE_WATCH_DEVICECLASSES, rv,
	    sizeof(rv))) < 0)
		return r == -ENOENT ? -EAGAIN : r;
	if ((r = cache_generation(c, &now)) < 0 ||
	    (r = classes_current(s, c, now, &current)) < 0) {
		classes_clear(s);
		return r;
	}
	if (current) {
		s->gen = now;
		return 0;
	}
	return classes_read(s, c, drivers, now);
}

/* Free what s holds (a cache handle is not s's to close). */
void
quotad_classes_free(struct quotad_classes *s)
{
	classes_clear(s);
	s->c = NULL;
}
