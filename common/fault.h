/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named fault points for tests. Code marks a place that may fail:
 *
 *	if ((r = FAULT("ipc.write")) < 0)
 *		return r;
 *
 * In builds without KPGPUD_FAULTS (release), FAULT() is the constant 0 and
 * the code vanishes. In test builds a point does nothing until armed, from
 * the environment at start-up (KPGPUD_FAULT) or at run time (fault_arm):
 *
 *	KPGPUD_FAULT="name=action[+modifier...][,name2=...]"
 *
 * actions (may be combined, e.g. delay:100+error):
 *	error		FAULT returns -EIO
 *	error:ENAME	... or that errno (name like ECONNRESET, or a number)
 *	delay:MS	sleep MS milliseconds, then return 0 (or the error)
 *	abort		abort() the process
 *	off		disarm the point
 * modifiers:
 *	count:N		fire only N times, then disarm
 *	after:N		let the first N hits pass
 *	prob:P		fire with probability P (0..1) per eligible hit
 *
 * Thread-safe. A point name is up to FAULT_NAME_MAX of [a-z0-9._-].
 */
#ifndef KPGPUD_FAULT_H
#define KPGPUD_FAULT_H

#include "common/util.h"

#define FAULT_NAME_MAX	63
#define FAULT_MAX	64	/* armed points at a time */
#define FAULT_SPEC_MAX	4096

#ifdef KPGPUD_FAULTS
#define FAULT(name)	fault_hit(name)
#define FAULTS_ENABLED	1
#else
#define FAULT(name)	0
#define FAULTS_ENABLED	0
#endif

/* Arm the points in $KPGPUD_FAULT; -EINVAL on a bad spec (none armed). */
int	 fault_init(void);
/* Evaluate the point name: 0, or the armed -errno (may sleep or abort). */
int	 fault_hit(const char *name);
/*
 * Arm (or with "off" disarm) the points in spec, replacing any earlier
 * setting of the same point. All-or-nothing: -EINVAL if any entry is
 * malformed, -ENOSPC if too many points; nothing changes then.
 */
int	 fault_arm(const char *spec);
/* Disarm every point. */
void	 fault_clear(void);
/*
 * Describe the armed points, one line each:
 *	name=spec hits=N fired=N
 * In release builds appends nothing.
 */
int	 fault_list(struct buf *out);
/* How many times the point fired since armed (-ENOENT if not armed). */
long	 fault_fired(const char *name);

#endif
