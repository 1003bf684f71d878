/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where and how to reach the Kubernetes API server: a kubeconfig file
 * (libyaml; clusters, users, contexts, current-context, certificate-authority
 * and -data, client-certificate/-key and -data, token, tokenFile) or the
 * in-cluster service account (token file re-read when it changes, ca.crt,
 * KUBERNETES_SERVICE_HOST/PORT). No I/O beyond reading those files, no
 * logging. Secrets (token, client key) are wiped on free and never appear in
 * error messages. TLS verification is always on:
 * insecure-skip-tls-verify: true is refused unless KUBE_CONFIG_ALLOW_INSECURE.
 */
#ifndef KPGPUD_KUBECONFIG_H
#define KPGPUD_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define KUBE_CONFIG_MAX_FILE	(1u << 20)	/* kubeconfig, CA, cert, key */
#define KUBE_CONFIG_MAX_TOKEN	(64u << 10)
#define KUBE_INCLUSTER_DIR	"/var/run/secrets/kubernetes.io/serviceaccount"

/* Flags for kube_config_load*(). */
#define KUBE_CONFIG_ALLOW_INSECURE	0x1	/* accept skip-tls-verify */

/*
 * A loaded configuration. Plain struct so the client can read it; treat as
 * read-only and change it only through the functions below. PEM material is
 * either a file path (*_file) or in-memory data (*_data), never both.
 */
struct kube_config {
	char		*server;	/* "https://host:port[/prefix]", no '/' at end */
	char		*namespace;	/* context / in-cluster namespace, or NULL */
	char		*ca_file;
	char		*ca_data;	/* PEM */
	size_t		 ca_len;
	char		*cert_file;
	char		*cert_data;
	size_t		 cert_len;
	char		*key_file;
	char		*key_data;	/* secret */
	size_t		 key_len;
	char		*token;		/* secret: static, or last read from token_file */
	char		*token_file;
	struct timespec	 token_mtime;	/* of token_file when last read */
	long long	 token_ino;
	long long	 token_size;
	bool		 insecure;	/* only with KUBE_CONFIG_ALLOW_INSECURE */
	char		*tls_server_name;	/* verify and send SNI for this
						   name instead of the server's
						   host (tls-server-name) */
	char		*proxy_url;	/* http://, https:// or socks5:// proxy
					   (proxy-url); NULL: the environment's */
};

/*
 * Load a configuration. path NULL: $KUBECONFIG (first existing entry of a
 * ':' list), else in-cluster when KUBERNETES_SERVICE_HOST is set, else
 * ~/.kube/config. context NULL: current-context. Relative file paths in a
 * kubeconfig are relative to its directory. Returns 0 or -errno (-ENOENT,
 * -EINVAL for bad content, -EPERM for refused insecure, -ENOTSUP for exec /
 * auth-provider users) with a reason in err.
 */
int	 kube_config_load(const char *path, const char *context,
	    unsigned flags, struct kube_config **ret, char *err, size_t errlen);
/* Parse kubeconfig text; base_dir resolves relative paths (NULL: cwd). */
int	 kube_config_parse(const char *text, size_t len, const char *base_dir,
	    const char *context, unsigned flags, struct kube_config **ret,
	    char *err, size_t errlen);
/*
 * In-cluster configuration: dir holds token, ca.crt and namespace
 * (NULL: KUBE_INCLUSTER_DIR); the server comes from
 * KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT.
 */
int	 kube_config_load_incluster(const char *dir, struct kube_config **ret,
	    char *err, size_t errlen);
/* Wipe secrets and free; NULL-safe. */
void	 kube_config_free(struct kube_config *cfg);

/* The server URL, e.g. "https://10.0.0.1:443". */
const char *kube_config_server(const struct kube_config *cfg);
/* The default namespace of the context or service account, or NULL. */
const char *kube_config_namespace(const struct kube_config *cfg);

/*
 * Use the bearer token in this file from now on (e.g. a systemd credential),
 * replacing any token or client certificate auth. Read now; 0 or -errno.
 */
int	 kube_config_set_token_file(struct kube_config *cfg, const char *path,
	    char *err, size_t errlen);
/*
 * Re-read token_file if its mtime, size or inode changed (cheap stat
 * otherwise). Returns 1 if the token changed, 0 if not (or no token file),
 * -errno when it cannot be read (the old token is kept).
 */
int	 kube_config_refresh_token(struct kube_config *cfg);

#endif
