/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kpgpud-quota: composes each GPU-isolated tenant's DRA objects, quota keys
 * and Namespace label/annotation with the write API token, reading state
 * from kpgpud-sync's cache and change stream; one replica writes, elected
 * through a Lease. It serves nothing on the network but, when asked,
 * /metrics (--metrics-listen); metrics can also go to a file.
 * See kpgpud-quota(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/config.h"
#include "common/daemon.h"
#include "kube/kube.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "kpgpud-quota/quota.h"

struct quota_conf {
	char			*runtime_dir;
	char			*sync_socket;
	struct config_uids	 sync_uids;
	char			*cache;
	int			 tenant_ns;
	char			*quota_name;
	char			*class_prefix;
	char			*gpu_class;
	bool			 strict;
	char			*strict_classes;
	char			*gpu_drivers;
	char			*driver_gates;
	char			*sidecar_containers;
	char			*policy_params;
	char			*policy_user;
	char			*admission_policies;
	char			*mutating_policy;
	int			 injection;
	bool			 owner_refs;
	int64_t			 resync_ms;
	int64_t			 backoff_base_ms;
	int64_t			 backoff_max_ms;
	bool			 leader_elect;
	char			*lease_namespace;
	char			*lease_name;
	int64_t			 lease_duration_ms;
	char			*identity;
	char			*metrics_file;
	int64_t			 metrics_interval_ms;
	struct kube_conf	 k;
	struct daemon_conf	 d;
};

static const char *const tenant_ns_names[] = { "name", "namespace", NULL };
/* In enum policies_injection's order. */
static const char *const injection_names[] = { "webhook", "policy", "auto",
    NULL };

#define QC struct quota_conf
static const struct config_opt quota_opts[] = {
	CONFIG_PATH(QC, runtime_dir, "runtime-dir", 0, "/run/kpgpud", "Files",
	    "Directory of the sockets.", CONFIG_NORELOAD),
	CONFIG_PATH(QC, sync_socket, "sync-socket", 0, NULL, "Files",
	    "sync.sock path (default RUNTIME-DIR/sync.sock).", CONFIG_NORELOAD),
	CONFIG_UIDS(QC, sync_uids, "sync-uids", 0, NULL, "Files",
	    "Uids sync.sock may belong to (default: any).", CONFIG_NORELOAD),
	CONFIG_PATH(QC, cache, "cache", 0, "/var/lib/kpgpud/cache.db", "Files",
	    "kpgpud-sync's SQLite cache, opened read-only.", CONFIG_NORELOAD),
	KUBE_CONF_OPTS(QC, "The write bearer token file (re-read when it "
	    "changes).", "20", "Requests per second to the API server; "
	    "reconciles are started at the same rate.", "40", "1.1"),
	CONFIG_ENUM(QC, tenant_ns, "tenant-namespace", 0, "name",
	    tenant_ns_names, "Plan", "The tenant namespace of an instance: "
	    "its name (KubePlus) or its own namespace.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, quota_name, "quota-name", 0, "kpgpud-gpu",
	    "Plan", "Name (template: {kind} lower-cased, {name}) of "
	    "kpgpud's own ResourceQuota; never KubePlus's {kind}-{name}.",
	    CONFIG_NORELOAD),
	CONFIG_STRING(QC, class_prefix, "class-prefix", 0, "kpgpud-mig-",
	    "Plan", "Name prefix of the per-profile MIG DeviceClasses.",
	    CONFIG_NORELOAD),
	CONFIG_STRING(QC, gpu_class, "gpu-class", 0, "gpu.nvidia.com", "Plan",
	    "DeviceClass of whole GPUs.", CONFIG_NORELOAD),
	CONFIG_BOOL(QC, strict, "strict", 0, "true", "Plan",
	    "Set every other GPU DeviceClass's device key to 0 in each "
	    "tenant's quota (every class in the cluster, watched, and "
	    "--strict-classes). --strict=false is UNSAFE: a tenant may then "
	    "claim devices of any other GPU class.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, strict_classes, "strict-classes", 0,
	    "gpu.nvidia.com,mig.nvidia.com,vfio.gpu.nvidia.com", "Plan",
	    "GPU classes closed even before they exist (at most 16).",
	    CONFIG_NORELOAD),
	CONFIG_STRING(QC, gpu_drivers, "gpu-drivers", 0, "gpu.nvidia.com",
	    "Plan", "DRA drivers whose devices are GPUs: a DeviceClass counts "
	    "as a GPU class unless its selectors provably restrict it to a "
	    "driver not listed.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, driver_gates, "driver-gates", 0, "none", "Plan",
	    "The NVIDIA DRA driver's feature gates that are on (comma list, "
	    "or \"none\", as the driver ships): TimeSlicingSettings lets a "
	    "time-slicing tenant set timeSlicing.interval, MPSSupport lets "
	    "a tenant use sharing mps. Without them such an instance gets a "
	    "Warning Event and nothing is composed for it.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, sidecar_containers, "sidecar-containers", 0, NULL,
	    "Plan", "Containers that never get the GPU claim (injected "
	    "proxies), for instances whose annotation names none: \"none\" or "
	    "a comma list; unset: istio-proxy, linkerd-proxy, envoy, "
	    "cloud-sql-proxy, vault-agent and the other names of "
	    "kpgpud-quota(8).", CONFIG_NORELOAD),
	CONFIG_STRING(QC, policy_params, "policy-params", 0, "none", "Plan",
	    "NAMESPACE/NAME of the ConfigMap the admission policies read "
	    "(deploy/: kpgpud/kpgpud-device-classes): key non-gpu-classes, "
	    "the DeviceClasses that are not GPU classes, kept current; "
	    "\"none\": not maintained.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, policy_user, "policy-user", 0, NULL, "Plan",
	    "Also write this user name (kpgpud-quota's own, as the API server "
	    "sees it) as quota-user into that ConfigMap; unset: left as "
	    "deployed.", CONFIG_NORELOAD),
	CONFIG_PATH(QC, admission_policies, "admission-policies", 0, NULL,
	    "Plan", "YAML or JSON file of ValidatingAdmissionPolicies and "
	    "bindings (the shipped admission-policy.yaml) to create when "
	    "absent and restore when changed, as leader, at start and every "
	    "--resync; ConfigMaps in it are left to --policy-params; unset: "
	    "not applied.", CONFIG_NORELOAD),
	CONFIG_PATH(QC, mutating_policy, "mutating-policy", 0, NULL, "Plan",
	    "YAML or JSON file of the MutatingAdmissionPolicy and binding that "
	    "inject the GPU claim without kpgpud-admit (the shipped "
	    "mutating-policy.yaml): kept like --admission-policies while "
	    "--injection resolves to policy, deleted (when labelled "
	    "app.kubernetes.io/managed-by=kpgpud) while it resolves to "
	    "webhook.", CONFIG_NORELOAD),
	CONFIG_ENUM(QC, injection, "injection", 0, "webhook", injection_names,
	    "Plan", "Who adds the GPU claim to pods: webhook (kpgpud-admit), "
	    "policy (the --mutating-policy MutatingAdmissionPolicy, Kubernetes "
	    "1.36+), or auto (policy where the API server serves "
	    "admissionregistration.k8s.io/v1 mutatingadmissionpolicies, asked "
	    "on every resync, else webhook). policy and auto need "
	    "--mutating-policy.", CONFIG_NORELOAD),
	CONFIG_BOOL(QC, owner_refs, "owner-refs", 0, "true", "Plan",
	    "Owner references to the instance where scope allows.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(QC, resync_ms, "resync", 0, "5m", 100, 86400000,
	    "Reconcile", "Reconcile everything this often (drift repair).",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(QC, backoff_base_ms, "backoff-base", 0, "200ms", 1,
	    600000, "Reconcile", "First retry delay of a failed key.",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(QC, backoff_max_ms, "backoff-max", 0, "5m", 1,
	    3600000, "Reconcile", "Longest retry delay.", CONFIG_NORELOAD),
	CONFIG_BOOL(QC, leader_elect, "leader-elect", 0, "true", "Lease",
	    "Write only while holding the Lease.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, lease_namespace, "lease-namespace", 0, "kube-system",
	    "Lease", "Namespace of the Lease.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, lease_name, "lease-name", 0, "kpgpud-quota", "Lease",
	    "Name of the Lease.", CONFIG_NORELOAD),
	CONFIG_DURATION(QC, lease_duration_ms, "lease-duration", 0, "15s",
	    1000, 3600000, "Lease", "leaseDurationSeconds.", CONFIG_NORELOAD),
	CONFIG_STRING(QC, identity, "identity", 0, NULL, "Lease",
	    "This replica's holder identity (default HOSTNAME-PID).",
	    CONFIG_NORELOAD),
	CONFIG_STRING(QC, d.metrics_listen, "metrics-listen", 0, NULL,
	    "Metrics", "Serve /metrics over plain HTTP on [HOST:]PORT "
	    "([V6]:PORT; no HOST: 127.0.0.1): the metrics of --metrics-file.",
	    CONFIG_NORELOAD),
	CONFIG_PATH(QC, metrics_file, "metrics-file", 0, NULL, "Metrics",
	    "Write Prometheus text metrics to this file (atomically).",
	    CONFIG_NORELOAD),
	CONFIG_DURATION(QC, metrics_interval_ms, "metrics-interval", 0, "5s",
	    100, 3600000, "Metrics", "How often to write the metrics file.",
	    CONFIG_NORELOAD),
	DAEMON_CONF_OPTS(QC),
};
#undef QC

struct quota_main {
	struct quota_conf	 conf;
	struct event_base	*base;
	struct metrics		*reg;
	struct kube_config	*kcfg;
	struct kube_client	*kc;
	struct event		*metrics_ev;
	struct quotad		 q;
	struct policies		*pol;		/* --admission-policies */
	struct policies		*mpol;		/* --mutating-policy */
	char			 sockpath[4096];
	char			 identity[LEASE_ID_MAX + 1];
};

/* The metrics, for the file and for GET /metrics alike. */
static int
quota_render(void *arg, struct buf *out)
{
	struct quota_main *qm = arg;

	quotad_update_gauges(&qm->q);
	return metrics_render(qm->reg, out);
}

/* Write the metrics file: render, write a temporary file, rename. */
static void
quota_write_metrics(struct quota_main *qm)
{
	struct buf b = BUF_INIT(0);
	char tmp[4200];
	int fd;

	if (qm->conf.metrics_file == NULL)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", qm->conf.metrics_file);
	if (quota_render(qm, &b) < 0)
		goto out;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto out;
	if (write(fd, buf_str(&b), b.len) != (ssize_t)b.len) {
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	if (rename(tmp, qm->conf.metrics_file) < 0)
		unlink(tmp);
out:
	buf_free(&b);
}

/* The metrics timer. */
static void
quota_metrics_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	quota_write_metrics(arg);
}

/* Say loudly that strict quota is off: tenants may use any GPU class. */
static void
quota_warn_strict(const struct quota_main *qm)
{
	if (!qm->conf.strict)
		log_warn("UNSAFE: --strict=false: tenants' quotas limit only "
		    "their own DeviceClass; a tenant may claim devices of "
		    "every other GPU class, without limit");
}

/* SIGHUP: only debug logging reloads; say again if strict is off. */
static int
quota_reload(void *arg)
{
	quota_warn_strict(arg);
	return 0;
}

/* Load the kubeconfig, switch to the write token, create the client. */
static int
quota_kube(struct quota_main *qm)
{
	struct kube_client_opts o;
	char err[600];
	int r;

	memset(&o, 0, sizeof(o));
	o.user_agent = "kpgpud-quota/" KPGPUD_VERSION;
	o.max_retries = 2;
	o.max_response = 16u << 20;
	if ((r = kube_setup(qm->base, &qm->conf.k, &o, &qm->kcfg, &qm->kc,
	    err, sizeof(err))) < 0) {
		log_err("%s", err);
		return r;
	}
	log_info("api server=%s http_version=%s",
	    log_q(kube_config_server(qm->kcfg)),
	    kube_http_versions[qm->conf.k.http_version]);
	return 0;
}

/* Fill the core's configuration from ours. */
static int
quota_core_config(struct quota_main *qm, struct quotad_config *c)
{
	const struct quota_conf *f = &qm->conf;
	char host[96] = "kpgpud", gerr[256];

	memset(c, 0, sizeof(*c));
	c->plan.quota_name = f->quota_name;
	c->plan.class_prefix = f->class_prefix;
	c->plan.gpu_class = f->gpu_class;
	c->plan.strict_classes = f->strict_classes;
	c->plan.strict = f->strict;
	if (!plan_drivers_valid(f->gpu_drivers)) {
		log_err("--gpu-drivers \"%s\" is not a list of driver names",
		    f->gpu_drivers);
		return -EINVAL;
	}
	c->gpu_drivers = f->gpu_drivers;
	if (plan_gates_parse(f->driver_gates, &c->plan.driver_gates, gerr,
	    sizeof(gerr)) < 0) {
		log_err("--driver-gates \"%s\": %s", f->driver_gates, gerr);
		return -EINVAL;
	}
	if (f->sidecar_containers != NULL &&
	    !plan_sidecars_valid(f->sidecar_containers, gerr, sizeof(gerr))) {
		log_err("--sidecar-containers: %s", gerr);
		return -EINVAL;
	}
	c->plan.sidecars = f->sidecar_containers;
	if (strcmp(f->policy_params, "none") != 0) {
		const char *sl = strchr(f->policy_params, '/');
		size_t nl = sl != NULL ? (size_t)(sl - f->policy_params) : 0;

		if (sl == NULL || nl >= sizeof(c->params_ns) ||
		    strlen(sl + 1) >= sizeof(c->params_name)) {
			log_err("--policy-params \"%s\" is not NAMESPACE/NAME",
			    f->policy_params);
			return -EINVAL;
		}
		memcpy(c->params_ns, f->policy_params, nl);
		c->params_ns[nl] = '\0';
		snprintf(c->params_name, sizeof(c->params_name), "%s", sl + 1);
		if (!dns1123_label_valid(c->params_ns) ||
		    !dns1123_subdomain_valid(c->params_name)) {
			log_err("--policy-params \"%s\" is not NAMESPACE/NAME",
			    f->policy_params);
			return -EINVAL;
		}
	}
	if (f->policy_user != NULL && (f->policy_user[0] == '\0' ||
	    strlen(f->policy_user) > 512)) {
		log_err("--policy-user must be a user name of 1 to 512 bytes");
		return -EINVAL;
	}
	c->params_user = f->policy_user;
	if (f->admission_policies != NULL) {
		char err[512];
		int r;

		if ((r = policies_load(f->admission_policies, &qm->pol, err,
		    sizeof(err))) < 0) {
			log_err("--admission-policies %s: %s",
			    log_q(f->admission_policies), err);
			return r;
		}
		c->policies = qm->pol;
		log_info("admission policies file=%s objects=%d "
		    "configmaps_skipped=%d", log_q(f->admission_policies),
		    qm->pol->n, qm->pol->nskipped);
	}
	c->injection = (enum policies_injection)f->injection;
	if (f->mutating_policy != NULL) {
		char err[512];
		int r;

		if ((r = policies_load(f->mutating_policy, &qm->mpol, err,
		    sizeof(err))) < 0) {
			log_err("--mutating-policy %s: %s",
			    log_q(f->mutating_policy), err);
			return r;
		}
		if (qm->mpol->nmutating != qm->mpol->n) {
			log_err("--mutating-policy %s: holds a validating "
			    "policy or binding (those belong to "
			    "--admission-policies)", log_q(f->mutating_policy));
			return -EINVAL;
		}
		c->mpolicies = qm->mpol;
	} else if (c->injection != POLICIES_INJECT_WEBHOOK) {
		log_err("--injection %s needs --mutating-policy",
		    policies_injection_name(c->injection));
		return -EINVAL;
	}
	if (c->policies != NULL && c->policies->nmutating > 0) {
		log_err("--admission-policies %s: a mutating policy belongs to "
		    "--mutating-policy", log_q(f->admission_policies));
		return -EINVAL;
	}
	log_info("injection=%s mutating_policy=%s",
	    policies_injection_name(c->injection),
	    log_q(f->mutating_policy != NULL ? f->mutating_policy : ""));
	c->plan.owner_refs = f->owner_refs;
	c->plan.ns_from_namespace = f->tenant_ns == 1;
	c->cache_path = f->cache;
	if (daemon_sync_socket(f->sync_socket, f->runtime_dir, qm->sockpath,
	    sizeof(qm->sockpath)) < 0)
		return -ENAMETOOLONG;
	c->sync_socket = qm->sockpath;
	for (int i = 0; i < f->sync_uids.n && i < IPC_UIDS_MAX; i++)
		c->sync_uids[c->nsync_uids++] = f->sync_uids.uid[i];
	c->resync_ms = (uint64_t)f->resync_ms;
	c->wq.base_ms = (uint64_t)f->backoff_base_ms;
	c->wq.max_ms = (uint64_t)f->backoff_max_ms;
	/* the API limiter bounds the writes; the queue must not be slower */
	c->wq.qps = (double)f->k.qps;
	c->wq.burst = (unsigned)f->k.burst;
	c->leader_elect = f->leader_elect;
	if (f->identity != NULL)
		snprintf(qm->identity, sizeof(qm->identity), "%s", f->identity);
	else {
		(void)gethostname(host, sizeof(host) - 1);
		snprintf(qm->identity, sizeof(qm->identity), "%s-%ld", host,
		    (long)getpid());
	}
	c->lease.ns = f->lease_namespace;
	c->lease.name = f->lease_name;
	c->lease.identity = qm->identity;
	c->lease.duration_s = (unsigned)((f->lease_duration_ms + 999) / 1000);
	return 0;
}

/* Everything after the common start-up. */
static int
quota_setup(void *arg, struct daemon_run *run)
{
	struct quota_main *qm = arg;
	struct quotad_config c;
	struct timeval tv;
	int r;

	qm->base = run->base;
	qm->reg = run->reg;
	if ((r = quota_core_config(qm, &c)) < 0)
		return r;
	if ((r = quota_kube(qm)) < 0)
		return r;
	if ((r = quotad_start(&qm->q, qm->base, qm->kc, qm->reg, &c)) < 0) {
		log_err("start failed: %s", strerror(-r));
		return r;
	}
	if (qm->conf.metrics_file != NULL) {
		qm->metrics_ev = event_new(qm->base, -1, EV_PERSIST,
		    quota_metrics_cb, qm);
		if (qm->metrics_ev == NULL)
			return -ENOMEM;
		tv.tv_sec = (time_t)(qm->conf.metrics_interval_ms / 1000);
		tv.tv_usec = (suseconds_t)(qm->conf.metrics_interval_ms %
		    1000) * 1000;
		event_add(qm->metrics_ev, &tv);
	}
	log_notice("started sync=%s cache=%s identity=%s leader_elect=%d "
	    "strict=%d", log_q(qm->sockpath), log_q(qm->conf.cache),
	    log_q(qm->identity), qm->conf.leader_elect, qm->conf.strict);
	quota_warn_strict(qm);
	return 0;
}

/* Release what quota_setup made, in reverse order. */
static void
quota_teardown(void *arg)
{
	struct quota_main *qm = arg;
	int r;

	if (qm->kcfg != NULL && (r = quotad_release(&qm->q, qm->kcfg)) < 0)
		log_warn("lease not released error=%s", strerror(-r));
	quota_write_metrics(qm);
	quotad_stop(&qm->q);
	policies_free(qm->pol);
	policies_free(qm->mpol);
	if (qm->metrics_ev != NULL)
		event_free(qm->metrics_ev);
	kube_client_free(qm->kc);
	kube_config_free(qm->kcfg);
}

/* Configure, start, run the event loop until a stop signal. */
int
main(int argc, char **argv)
{
	static struct quota_main qm;
	static const struct daemon_spec spec = {
		.prog = "kpgpud-quota", .metrics_name = "quota",
		.opts = quota_opts, .nopts = nitems(quota_opts),
		.conf = &qm.conf, .conf_size = sizeof(qm.conf),
		.common = &qm.conf.d,
		.setup = quota_setup, .teardown = quota_teardown,
		.render = quota_render,
		.hooks = { .reload = quota_reload, .arg = &qm },
	};

	return daemon_main(&spec, argc, argv);
}
