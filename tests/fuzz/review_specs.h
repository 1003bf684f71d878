/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The namespace resolutions a review is answered under when two ways of
 * answering it are compared (fuzz_review_diff.c: the scanner against the
 * full parse; tests/unit/test_review_sidecars.c: without and with the
 * default sidecar list): a claim template, a shared claim with every init
 * container and legacy GPU requests translated, a shared claim with named
 * init containers and legacy GPU requests allowed.
 */
#ifndef KPGPUD_TESTS_REVIEW_SPECS_H
#define KPGPUD_TESTS_REVIEW_SPECS_H

static const char *const review_specs[] = {
	"{\"claimTemplateName\":\"gpu\"}",
	"{\"claimName\":\"shared\",\"initContainers\":\"all\","
	    "\"legacyGPU\":\"translate\"}",
	"{\"claimName\":\"shared\",\"initContainers\":[\"a\",\"init\"],"
	    "\"legacyGPU\":\"allow\"}",
};

#endif
