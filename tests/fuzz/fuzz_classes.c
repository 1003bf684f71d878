/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for kpgpud-quota's DeviceClass classification: the input
 * is the CEL expression of a class's selector. It must never crash, and
 * must only ever call a class non-GPU when the expression names
 * device.driver; the same expression behind a top-level || (or with no
 * driver listed as non-GPU) is always a GPU class: it fails closed.
 * fuzz-sources: kpgpud-quota/plan_classes.c kpgpud-quota/plan.c kpgpud-quota/plan_checks.c kpgpud-quota/annotation.c common/resolved.c common/jsonw.c common/util.c
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kpgpud-quota/plan.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a class whose only selector is expr counts as GPU. */
static bool
is_gpu(const char *expr, size_t len, const char *drivers)
{
	json_t *c = json_pack("{s:{s:[{s:{s:s#}}]}}", "spec", "selectors",
	    "cel", "expression", expr, len);
	bool r;

	if (c == NULL)
		return true;	/* not UTF-8: the API would not have it */
	r = plan_class_is_gpu(c, drivers);
	json_decref(c);
	return r;
}

/* Classify one expression three ways and check they agree. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *alt;

	if (size > 16384)
		return 0;
	if (!is_gpu((const char *)data, size, NULL) &&
	    memmem(data, size, "device.driver", 13) == NULL)
		abort();
	if ((alt = malloc(size + 16)) == NULL)
		abort();
	memcpy(alt, data, size);
	memcpy(alt + size, " || true", 8);
	if (!is_gpu(alt, size + 8, NULL))
		abort();
	free(alt);
	return 0;
}
