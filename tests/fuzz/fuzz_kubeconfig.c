/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for kube/kubeconfig.c: the input is kubeconfig text,
 * parsed for the current context and for context "x", with and without
 * KUBE_CONFIG_ALLOW_INSECURE. Relative paths resolve under a directory
 * that does not exist.
 * fuzz-sources: kube/kubeconfig.c
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/kubeconfig.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parse one input a few ways; a result must be usable. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ctx[] = { NULL, "x" };
	struct kube_config *cfg;
	char err[256];

	for (int i = 0; i < 4; i++) {
		cfg = NULL;
		err[0] = '\0';
		if (kube_config_parse((const char *)data, size,
		    "/nonexistent-kpgpud-fuzz", ctx[i & 1],
		    (i & 2) ? KUBE_CONFIG_ALLOW_INSECURE : 0, &cfg, err,
		    sizeof(err)) < 0) {
			if (cfg != NULL || err[0] == '\0')
				__builtin_trap();
			continue;
		}
		if (cfg == NULL || kube_config_server(cfg) == NULL)
			__builtin_trap();
		(void)strlen(kube_config_server(cfg));
		if (cfg->insecure && !(i & 2))
			__builtin_trap();
		kube_config_free(cfg);
	}
	return 0;
}
