/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for kpgpud-quota's annotation parser and planner: the
 * input is the value of an instance's kubeplus.io/gpu-isolation annotation.
 * It is planned without driver gates and with both declared: a rejection
 * must come with a message, a gate refusal only without the gates, and an
 * accepted annotation must plan to DNS-valid names and a resolved
 * annotation that kpgpud-admit parses.
 * fuzz-sources: common/resolved.c common/jsonw.c common/util.c kpgpud-quota/annotation.c kpgpud-quota/plan.c kpgpud-quota/plan_checks.c
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/resolved.h"
#include "common/util.h"
#include "kpgpud-quota/plan.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Plan one annotation under one configuration; check what comes out. */
static void
plan_one(const struct plan_instance *in, unsigned gates)
{
	struct plan_config cfg = { .owner_refs = true, .strict = true,
	    .driver_gates = gates };
	struct resolved *r;
	struct plan *p = NULL;
	char err[512];
	json_t *j;
	int rc;

	err[0] = '\0';
	if ((rc = plan_build(in, &cfg, &p, err, sizeof(err))) < 0) {
		if (err[0] == '\0' || (rc == PLAN_EGATE && gates != 0))
			abort();
		return;
	}
	if (!dns1123_label_valid(p->claim_name) ||
	    !dns1123_subdomain_valid(p->class_name) ||
	    !dns1123_subdomain_valid(p->quota_name))
		abort();
	if ((r = calloc(1, sizeof(*r))) == NULL)
		abort();
	if (resolved_parse(p->resolved, strlen(p->resolved), r, err,
	    sizeof(err)) < 0)
		abort();
	free(r);
	if ((j = plan_to_json(p)) == NULL)
		abort();
	json_decref(j);
	plan_free(p);
}

/* Plan one annotation without and with the driver gates. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct plan_instance in;
	size_t n = size > ANNOTATION_MAX_LEN ? ANNOTATION_MAX_LEN : size;

	memset(&in, 0, sizeof(in));
	snprintf(in.api_version, sizeof(in.api_version), "kubeplus.io/v1");
	snprintf(in.kind, sizeof(in.kind), "Agent");
	snprintf(in.name, sizeof(in.name), "tenant-a");
	snprintf(in.uid, sizeof(in.uid), "u");
	in.has_annotation = true;
	memcpy(in.annotation, data, n);
	in.annotation_len = n;
	plan_one(&in, 0);
	plan_one(&in, PLAN_GATE_TIME_SLICING | PLAN_GATE_MPS);
	return 0;
}
