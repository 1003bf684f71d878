/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the two annotation parsers on their own: the
 * Namespace's kubeplus.io/gpu-isolation-resolved value (common/resolved.c,
 * what kpgpud-admit reads through sync; fuzz_review only feeds it fixed
 * values) and the instance's kubeplus.io/gpu-isolation value
 * (kpgpud-quota/annotation.c, reached through the planner in fuzz_plan).
 * The first byte picks the parser, the rest is the value. A rejection must
 * say why; an accepted resolved value must keep its invariants and survive
 * format -> parse unchanged; an accepted annotation must be within its caps.
 * fuzz-sources: common/resolved.c common/jsonw.c common/util.c kpgpud-quota/annotation.c
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/resolved.h"
#include "kpgpud-quota/annotation.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a parsed policy keeps its name counts within the caps. */
static int
policy_ok(const struct resolved_policy *p)
{
	return p->ninit_names >= 0 && p->ninit_names <= RESOLVED_MAX_NAMES &&
	    p->nsidecar_names >= 0 && p->nsidecar_names <= RESOLVED_MAX_NAMES;
}

/* A resolved value: invariants and a format/parse round trip. */
static void
one_resolved(const char *s, size_t n)
{
	static struct resolved r, back;
	char err[256], *txt;

	err[0] = '\0';
	if (resolved_parse(s, n, &r, err, sizeof(err)) < 0) {
		if (err[0] == '\0')
			abort();
		return;
	}
	if ((r.claim_template[0] == '\0') == (r.claim[0] == '\0'))
		abort();
	if (!policy_ok(&r.pol))
		abort();
	if ((txt = resolved_format(&r)) == NULL)
		abort();
	if (resolved_parse(txt, strlen(txt), &back, err, sizeof(err)) < 0 ||
	    !resolved_equal(&r, &back))
		abort();
	free(txt);
}

/* An instance annotation: a reason on rejection, caps on acceptance. */
static void
one_annotation(const char *s, size_t n)
{
	static struct annotation a;
	char err[512];

	err[0] = '\0';
	if (annotation_parse(s, n, &a, err, sizeof(err)) < 0) {
		if (err[0] == '\0')
			abort();
		return;
	}
	if (a.max_devices < 1 || a.max_devices > ANNOTATION_MAX_DEVICES ||
	    a.devices_per_pod < 1 || a.devices_per_pod > a.max_devices ||
	    !policy_ok(&a.pol))
		abort();
	if (annotation_sharing_name(a.sharing) == NULL)
		abort();
	if (annotation_sharing_mig(a.sharing) &&
	    !annotation_profile_valid(a.mig_profile))
		abort();
}

/* Dispatch on the first byte. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		one_annotation((const char *)data + 1, size - 1);
	else
		one_resolved((const char *)data + 1, size - 1);
	return 0;
}
