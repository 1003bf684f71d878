/* SPDX-License-Identifier: Apache-2.0 */
/* Named fault points for test builds: see fault.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/fault.h"
#include "common/util.h"

#ifdef KPGPUD_FAULTS

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#define FAULT_ITEM_MAX	128

struct fault_point {
	char	 name[FAULT_NAME_MAX + 1];
	char	 spec[FAULT_ITEM_MAX];
	int	 err;		/* positive errno; 0: no error */
	long	 delay_ms;	/* 0: none */
	bool	 do_abort;
	long	 count;		/* fires left; -1: unlimited */
	long	 after;		/* hits still to let pass */
	double	 prob;		/* 1.0: always */
	unsigned long hits, fired;
	bool	 spent;
};

static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static struct fault_point fault_pts[FAULT_MAX];
static int fault_npts;
static atomic_int fault_live;	/* armed points not yet spent */
static int fault_env_result;
static uint64_t fault_rng;

static const struct {
	const char	*name;
	int		 err;
} fault_errnos[] = {
	{ "EIO", EIO }, { "ECONNRESET", ECONNRESET },
	{ "ECONNREFUSED", ECONNREFUSED }, { "ETIMEDOUT", ETIMEDOUT },
	{ "ENOMEM", ENOMEM }, { "ENOSPC", ENOSPC }, { "EAGAIN", EAGAIN },
	{ "EPIPE", EPIPE }, { "EINTR", EINTR }, { "EACCES", EACCES },
	{ "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EBUSY", EBUSY },
	{ "EPROTO", EPROTO }, { "EINVAL", EINVAL }, { "E2BIG", E2BIG },
	{ "EMSGSIZE", EMSGSIZE }, { "EHOSTUNREACH", EHOSTUNREACH },
	{ "ENETUNREACH", ENETUNREACH }, { "ECANCELED", ECANCELED },
	{ "ESHUTDOWN", ESHUTDOWN }, { "EEXIST", EEXIST },
	{ "EBADMSG", EBADMSG }, { "ENOTCONN", ENOTCONN },
	{ "EADDRINUSE", EADDRINUSE }, { "EROFS", EROFS },
};

/* Translate an errno name or number; 0 on failure. */
static int
fault_errno(const char *s)
{
	int v;

	for (size_t i = 0; i < nitems(fault_errnos); i++)
		if (strcmp(s, fault_errnos[i].name) == 0)
			return fault_errnos[i].err;
	if (parse_int(s, 1, 4095, &v) == 0)
		return v;
	return 0;
}

/* Whether s is a usable point name. */
static bool
fault_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > FAULT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		    s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* Apply one "keyword[:arg]" item to p; 1 for "off", 0 ok, -EINVAL. */
static int
fault_item(struct fault_point *p, char *item)
{
	char *arg = strchr(item, ':');
	int64_t v;

	if (arg != NULL)
		*arg++ = '\0';
	if (strcmp(item, "error") == 0) {
		p->err = arg ? fault_errno(arg) : EIO;
		return p->err ? 0 : -EINVAL;
	}
	if (strcmp(item, "abort") == 0 || strcmp(item, "off") == 0) {
		p->do_abort = item[0] == 'a';
		return arg ? -EINVAL : item[0] == 'o';
	}
	if (arg == NULL)
		return -EINVAL;
	if (strcmp(item, "prob") == 0) {
		char *end;

		p->prob = strtod(arg, &end);
		return *arg && !*end && p->prob >= 0 && p->prob <= 1 ?
		    0 : -EINVAL;
	}
	if (parse_int64(arg, 0, 86400000, &v) < 0)
		return -EINVAL;
	if (strcmp(item, "delay") == 0)
		p->delay_ms = (long)v;
	else if (strcmp(item, "count") == 0 && v > 0)
		p->count = (long)v;
	else if (strcmp(item, "after") == 0)
		p->after = (long)v;
	else
		return -EINVAL;
	return 0;
}

/* Parse "name=item+item" into p; 1 for a disarm, 0 ok, -EINVAL. */
static int
fault_entry(char *e, struct fault_point *p)
{
	char *eq = strchr(e, '='), *item, *save = NULL;
	bool off = false, act = false;
	int r;

	if (eq == NULL || !fault_name_ok(e, (size_t)(eq - e)))
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	memcpy(p->name, e, (size_t)(eq - e));
	p->count = -1;
	p->prob = 1.0;
	if (strlen(eq + 1) >= sizeof(p->spec) || eq[1] == '\0')
		return -EINVAL;
	memcpy(p->spec, eq + 1, strlen(eq + 1) + 1);
	for (item = strtok_r(eq + 1, "+", &save); item != NULL;
	    item = strtok_r(NULL, "+", &save)) {
		if ((r = fault_item(p, item)) < 0)
			return r;
		off |= r == 1;
		act |= r == 1 || p->err || p->delay_ms || p->do_abort;
	}
	if (!act)
		return -EINVAL;	/* modifiers alone do nothing */
	return off ? 1 : 0;
}

/* Index of the point named name, or -1; fault_mu held. */
static int
fault_find(const char *name)
{
	for (int i = 0; i < fault_npts; i++)
		if (strcmp(fault_pts[i].name, name) == 0)
			return i;
	return -1;
}

/* Recount live points after a change; fault_mu held. */
static void
fault_recount(void)
{
	int live = 0;

	for (int i = 0; i < fault_npts; i++)
		live += !fault_pts[i].spent;
	atomic_store(&fault_live, live);
}

/* Put parsed entries into the table all at once; fault_mu held. */
static int
fault_commit(struct fault_point *pts, const bool *off, int n)
{
	int extra = 0;

	for (int i = 0; i < n; i++)
		extra += !off[i] && fault_find(pts[i].name) < 0;
	if (fault_npts + extra > FAULT_MAX)
		return -ENOSPC;
	for (int i = 0; i < n; i++) {
		int j = fault_find(pts[i].name);

		if (off[i]) {
			if (j >= 0)
				fault_pts[j] = fault_pts[--fault_npts];
			continue;
		}
		if (j < 0)
			j = fault_npts++;
		fault_pts[j] = pts[i];
	}
	fault_recount();
	return 0;
}

/* Arm the points of spec, all or nothing; no once-init. */
static int
fault_arm_spec(const char *spec)
{
	struct fault_point *pts = NULL;
	bool off[FAULT_MAX];
	char *copy = NULL, *e, *save = NULL;
	int n = 0, r;

	if (spec == NULL || strlen(spec) > FAULT_SPEC_MAX)
		return -EINVAL;
	if ((copy = strdup(spec)) == NULL ||
	    (pts = calloc(FAULT_MAX, sizeof(*pts))) == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	for (e = strtok_r(copy, ",", &save); e != NULL;
	    e = strtok_r(NULL, ",", &save)) {
		if (n == FAULT_MAX) {
			r = -ENOSPC;
			goto fail;
		}
		if ((r = fault_entry(e, &pts[n])) < 0)
			goto fail;
		off[n++] = r == 1;
	}
	pthread_mutex_lock(&fault_mu);
	r = fault_commit(pts, off, n);
	pthread_mutex_unlock(&fault_mu);
fail:
	free(pts);
	free(copy);
	return r;
}

/* Seed the generator and arm $KPGPUD_FAULT, once per process. */
static void
fault_once_init(void)
{
	const char *env = getenv("KPGPUD_FAULT");
	fault_rng = prng_seed();
	if (env != NULL && *env != '\0')
		fault_env_result = fault_arm_spec(env);
}

/* Arm the points named in the environment. */
int
fault_init(void)
{
	pthread_once(&fault_once, fault_once_init);
	return fault_env_result;
}

/* Arm points at run time. */
int
fault_arm(const char *spec)
{
	pthread_once(&fault_once, fault_once_init);
	return fault_arm_spec(spec);
}

/* Disarm every point. */
void
fault_clear(void)
{
	pthread_once(&fault_once, fault_once_init);
	pthread_mutex_lock(&fault_mu);
	fault_npts = 0;
	fault_recount();
	pthread_mutex_unlock(&fault_mu);
}

/* A uniform double in [0, 1); fault_mu held. */
static double
fault_random(void)
{
	return (double)(prng_next(&fault_rng) >> 11) / 9007199254740992.0;
}

/* Decide whether point i fires on this hit; fault_mu held. */
static bool
fault_fires(struct fault_point *p)
{
	p->hits++;
	if (p->spent)
		return false;
	if (p->after > 0) {
		p->after--;
		return false;
	}
	if (p->prob < 1.0 && fault_random() >= p->prob)
		return false;
	p->fired++;
	if (p->count > 0 && --p->count == 0) {
		p->spent = true;
		fault_recount();
	}
	return true;
}

/* Evaluate one fault point. */
int
fault_hit(const char *name)
{
	struct fault_point act;
	bool fire = false;
	int i;

	pthread_once(&fault_once, fault_once_init);
	if (atomic_load_explicit(&fault_live, memory_order_relaxed) == 0)
		return 0;
	pthread_mutex_lock(&fault_mu);
	if ((i = fault_find(name)) >= 0 && (fire = fault_fires(&fault_pts[i])))
		act = fault_pts[i];
	pthread_mutex_unlock(&fault_mu);
	if (!fire)
		return 0;
	if (act.delay_ms > 0) {
		struct timespec ts = { act.delay_ms / 1000,
		    (act.delay_ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (act.do_abort)
		abort();
	return -act.err;
}

/* Describe the armed points. */
int
fault_list(struct buf *out)
{
	int r = 0;

	pthread_once(&fault_once, fault_once_init);
	pthread_mutex_lock(&fault_mu);
	for (int i = 0; i < fault_npts && r == 0; i++)
		r = buf_printf(out, "%s=%s hits=%lu fired=%lu%s\n",
		    fault_pts[i].name, fault_pts[i].spec, fault_pts[i].hits,
		    fault_pts[i].fired, fault_pts[i].spent ? " spent" : "");
	pthread_mutex_unlock(&fault_mu);
	return r;
}

/* How often the point fired. */
long
fault_fired(const char *name)
{
	long n = -ENOENT;
	int i;

	pthread_once(&fault_once, fault_once_init);
	pthread_mutex_lock(&fault_mu);
	if ((i = fault_find(name)) >= 0)
		n = (long)fault_pts[i].fired;
	pthread_mutex_unlock(&fault_mu);
	return n;
}

#else /* !KPGPUD_FAULTS: release builds have no fault points */

/* Fault points are compiled out; a spec in the environment is an error. */
int
fault_init(void)
{
	const char *env = getenv("KPGPUD_FAULT");

	return env != NULL && *env != '\0' ? -ENOTSUP : 0;
}

/* Never fails in release builds. */
int
fault_hit(const char *name)
{
	(void)name;
	return 0;
}

/* Arming is not supported in release builds. */
int
fault_arm(const char *spec)
{
	(void)spec;
	return -ENOTSUP;
}

/* Nothing to disarm. */
void
fault_clear(void)
{
}

/* Nothing armed. */
int
fault_list(struct buf *out)
{
	(void)out;
	return 0;
}

/* Nothing armed. */
long
fault_fired(const char *name)
{
	(void)name;
	return -ENOENT;
}

#endif
