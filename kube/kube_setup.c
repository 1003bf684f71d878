/* SPDX-License-Identifier: Apache-2.0 */
/* A daemon's API client set up from its configuration (sync, quota). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube/kube.h"

/* Load the configuration, switch to the token file, create the client. */
int
kube_setup(struct event_base *base, const struct kube_conf *conf,
    struct kube_client_opts *opts, struct kube_config **ret_cfg,
    struct kube_client **ret_client, char *err, size_t errlen)
{
	struct kube_config *cfg = NULL;
	struct kube_client *kc;
	char why[512];
	int r;

	opts->qps = (double)conf->qps;
	opts->burst = (int)conf->burst;
	opts->http_version = conf->http_version;
	if ((r = kube_config_load(conf->kubeconfig, conf->context, 0, &cfg, why,
	    sizeof(why))) < 0) {
		snprintf(err, errlen, "kubeconfig: %s", why);
		return r;
	}
	if (conf->token_file != NULL && (r = kube_config_set_token_file(cfg,
	    conf->token_file, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "token file: %s", why);
		goto fail;
	}
	if ((kc = kube_client_new(base, cfg, opts)) == NULL) {
		r = errno != 0 ? -errno : -ENOMEM;
		snprintf(err, errlen, "kube client: %s", strerror(-r));
		goto fail;
	}
	*ret_cfg = cfg;
	*ret_client = kc;
	return 0;
fail:
	kube_config_free(cfg);
	return r;
}
