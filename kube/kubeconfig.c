/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes client configuration: kubeconfig files (libyaml document API)
 * and the in-cluster service account. Reads files, never logs; secrets are
 * wiped on free and kept out of error messages.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "kube/kubeconfig.h"

#define KC_MAX_DEPTH_NAME	253

/* The parsed YAML document plus the base directory for relative paths. */
struct kc_doc {
	yaml_document_t	 doc;
	const char	*base_dir;
	unsigned	 flags;
	char		*err;
	size_t		 errlen;
};

/* Wipe and free a secret buffer; NULL-safe. */
static void
secret_free(char *s, size_t len)
{
	if (s == NULL)
		return;
	explicit_bzero(s, len);
	free(s);
}

/* Free a configuration, wiping the token and client key first. */
void
kube_config_free(struct kube_config *cfg)
{
	if (cfg == NULL)
		return;
	free(cfg->server);
	free(cfg->namespace);
	free(cfg->ca_file);
	free(cfg->ca_data);
	free(cfg->cert_file);
	free(cfg->cert_data);
	free(cfg->key_file);
	secret_free(cfg->key_data, cfg->key_len);
	if (cfg->token != NULL)
		secret_free(cfg->token, strlen(cfg->token));
	free(cfg->token_file);
	free(cfg->tls_server_name);
	free(cfg->proxy_url);
	free(cfg);
}

/* The server URL. */
const char *
kube_config_server(const struct kube_config *cfg)
{
	return cfg->server;
}

/* The default namespace, or NULL. */
const char *
kube_config_namespace(const struct kube_config *cfg)
{
	return cfg->namespace;
}

/* Read a whole file of at most max bytes into a NUL-terminated buffer. */
static int
read_file(const char *path, size_t max, char **ret, size_t *ret_len,
    struct stat *ret_st)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
		return -errno;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		r = S_ISREG(st.st_mode) ? -errno : -EINVAL;
		goto fail;
	}
	r = -EFBIG;
	if ((size_t)st.st_size > max)
		goto fail;
	r = -ENOMEM;
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL)
		goto fail;
	while (len < (size_t)st.st_size) {
		n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n == -1 && errno == EINTR)
			continue;
		r = n == -1 ? -errno : -EIO;
		if (n <= 0)
			goto fail;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	*ret = buf;
	if (ret_len != NULL)
		*ret_len = len;
	if (ret_st != NULL)
		*ret_st = st;
	return 0;
fail:
	if (buf != NULL)
		secret_free(buf, (size_t)st.st_size + 1);
	close(fd);
	return r;
}

/* Read a token file: trimmed, non-empty, capped. */
static int
read_token(const char *path, char **ret, struct stat *ret_st)
{
	char *buf;
	size_t len;
	int r;

	if ((r = read_file(path, KUBE_CONFIG_MAX_TOKEN, &buf, &len,
	    ret_st)) < 0)
		return r;
	while (len > 0 && strchr(" \t\r\n", buf[len - 1]) != NULL)
		buf[--len] = '\0';
	if (len == 0 || strlen(buf) != len || strpbrk(buf, "\r\n") != NULL) {
		secret_free(buf, len);
		return -EINVAL;
	}
	*ret = buf;
	return 0;
}

/* Remember which version of the token file the token came from. */
static void
token_stamp(struct kube_config *cfg, const struct stat *st)
{
	cfg->token_mtime = st->st_mtim;
	cfg->token_ino = (long long)st->st_ino;
	cfg->token_size = (long long)st->st_size;
}

/* Re-read the token file when it changed since the last read. */
int
kube_config_refresh_token(struct kube_config *cfg)
{
	struct stat st;
	char *tok;
	int r;

	if (cfg->token_file == NULL)
		return 0;
	if (stat(cfg->token_file, &st) == -1)
		return -errno;
	if (st.st_mtim.tv_sec == cfg->token_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == cfg->token_mtime.tv_nsec &&
	    (long long)st.st_ino == cfg->token_ino &&
	    (long long)st.st_size == cfg->token_size)
		return 0;
	if ((r = read_token(cfg->token_file, &tok, &st)) < 0)
		return r;
	token_stamp(cfg, &st);
	if (cfg->token != NULL && strcmp(cfg->token, tok) == 0) {
		secret_free(tok, strlen(tok));
		return 0;
	}
	if (cfg->token != NULL)
		secret_free(cfg->token, strlen(cfg->token));
	cfg->token = tok;
	return 1;
}

/* Switch to bearer-token auth from this file. */
int
kube_config_set_token_file(struct kube_config *cfg, const char *path,
    char *err, size_t errlen)
{
	struct stat st;
	char *tok, *p;
	int r;

	if ((r = read_token(path, &tok, &st)) < 0) {
		snprintf(err, errlen, "token file \"%s\": %s", path,
		    r == -EINVAL ? "empty or not one line" : strerror(-r));
		return r;
	}
	if ((p = strdup(path)) == NULL) {
		secret_free(tok, strlen(tok));
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (cfg->token != NULL)
		secret_free(cfg->token, strlen(cfg->token));
	free(cfg->token_file);
	free(cfg->cert_file);
	free(cfg->cert_data);
	free(cfg->key_file);
	secret_free(cfg->key_data, cfg->key_len);
	cfg->cert_file = cfg->cert_data = cfg->key_file = cfg->key_data = NULL;
	cfg->cert_len = cfg->key_len = 0;
	cfg->token = tok;
	cfg->token_file = p;
	token_stamp(cfg, &st);
	return 0;
}

/* Strict base64 decode (whitespace ignored); NUL-terminated result. */
static int
b64_decode(const char *in, char **ret, size_t *ret_len)
{
	static const char al[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), o = 0;
	uint32_t acc = 0;
	int bits = 0, pad = 0;
	char *out;

	if ((out = malloc(n / 4 * 3 + 4)) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *p;
		char ch = in[i];

		if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		if (ch == '=') {
			pad++;
			continue;
		}
		if (pad || (p = strchr(al, ch)) == NULL || ch == '\0')
			goto fail;
		acc = (acc << 6) | (uint32_t)(p - al);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	if (pad > 2 || bits >= 6 || (acc & ((1u << bits) - 1)) != 0)
		goto fail;
	out[o] = '\0';
	*ret = out;
	*ret_len = o;
	return 0;
fail:
	secret_free(out, n / 4 * 3 + 4);
	return -EINVAL;
}

/* Node by index, NULL if out of range. */
static yaml_node_t *
node_at(struct kc_doc *d, int idx)
{
	return yaml_document_get_node(&d->doc, idx);
}

/* Value of a scalar node as a C string, NULL if not a clean scalar. */
static const char *
scalar(yaml_node_t *n)
{
	const char *s;

	if (n == NULL || n->type != YAML_SCALAR_NODE)
		return NULL;
	s = (const char *)n->data.scalar.value;
	if (strlen(s) != n->data.scalar.length)
		return NULL;	/* embedded NUL */
	return s;
}

/* The value under key in a mapping node, or NULL. */
static yaml_node_t *
map_get(struct kc_doc *d, yaml_node_t *map, const char *key)
{
	yaml_node_pair_t *p;
	const char *k;

	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start;
	    p < map->data.mapping.pairs.top; p++) {
		k = scalar(node_at(d, p->key));
		if (k != NULL && strcmp(k, key) == 0)
			return node_at(d, p->value);
	}
	return NULL;
}

/* Scalar string under key, or NULL. */
static const char *
map_str(struct kc_doc *d, yaml_node_t *map, const char *key)
{
	const char *s = scalar(map_get(d, map, key));

	return (s != NULL && *s != '\0') ? s : NULL;
}

/* In a list of {name, <field>: map}, the map of the entry called name. */
static yaml_node_t *
find_named(struct kc_doc *d, const char *list, const char *field,
    const char *name)
{
	yaml_node_t *seq, *ent;
	yaml_node_item_t *it;
	const char *n;

	seq = map_get(d, yaml_document_get_root_node(&d->doc), list);
	if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (it = seq->data.sequence.items.start;
	    it < seq->data.sequence.items.top; it++) {
		ent = node_at(d, *it);
		n = map_str(d, ent, "name");
		if (n != NULL && strcmp(n, name) == 0)
			return map_get(d, ent, field);
	}
	return NULL;
}

/* A path relative to the kubeconfig's directory, made absolute. */
static char *
resolve_path(struct kc_doc *d, const char *p)
{
	char *out;

	if (p[0] == '/' || d->base_dir == NULL)
		return strdup(p);
	if (asprintf(&out, "%s/%s", d->base_dir, p) == -1)
		return NULL;
	return out;
}

/* Format an error message into the caller's buffer and return r. */
static int
kc_err(struct kc_doc *d, int r, const char *what, const char *name)
{
	if (name != NULL)
		snprintf(d->err, d->errlen, "%s \"%.*s\"", what,
		    KC_MAX_DEPTH_NAME, name);
	else
		snprintf(d->err, d->errlen, "%s", what);
	return r;
}

/*
 * PEM material from key-data (base64) or key (a path, checked readable).
 * Sets *ret_file or *ret_data/len; neither if absent.
 */
static int
load_pem(struct kc_doc *d, yaml_node_t *m, const char *key, char **ret_file,
    char **ret_data, size_t *ret_len)
{
	char dkey[64];
	const char *v;
	char *p;

	snprintf(dkey, sizeof(dkey), "%s-data", key);
	if ((v = map_str(d, m, dkey)) != NULL) {
		if (strlen(v) > KUBE_CONFIG_MAX_FILE * 2)
			return kc_err(d, -EINVAL, "too long:", dkey);
		if (b64_decode(v, ret_data, ret_len) < 0)
			return kc_err(d, -EINVAL, "not valid base64:", dkey);
		return 0;
	}
	if ((v = map_str(d, m, key)) == NULL)
		return 0;
	if ((p = resolve_path(d, v)) == NULL)
		return kc_err(d, -ENOMEM, "out of memory", NULL);
	if (access(p, R_OK) == -1) {
		int r = -errno;

		snprintf(d->err, d->errlen, "%s \"%s\": %s", key, p,
		    strerror(-r));
		free(p);
		return r;
	}
	*ret_file = p;
	return 0;
}

/* Whether a YAML scalar says true. */
static int
yaml_true(const char *s)
{
	return s != NULL && (strcasecmp(s, "true") == 0 ||
	    strcasecmp(s, "yes") == 0 || strcasecmp(s, "on") == 0);
}

/* Whether s can be a TLS server name: 1 to 253 of [A-Za-z0-9.-]. */
static bool
host_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 253 && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == n;
}

/*
 * Fill server, CA, the insecure flag, tls-server-name and proxy-url from a
 * cluster entry.
 */
static int
load_cluster(struct kc_doc *d, yaml_node_t *cl, struct kube_config *cfg)
{
	const char *server, *tsn, *proxy;
	size_t n;
	int r;

	if ((server = map_str(d, cl, "server")) == NULL)
		return kc_err(d, -EINVAL, "cluster has no server", NULL);
	cfg->insecure = yaml_true(scalar(map_get(d, cl,
	    "insecure-skip-tls-verify")));
	if (strncmp(server, "https://", 8) != 0 &&
	    !(strncmp(server, "http://", 7) == 0 &&
	    (d->flags & KUBE_CONFIG_ALLOW_INSECURE)))
		return kc_err(d, -EPERM, "server is not https://", server);
	if (cfg->insecure && !(d->flags & KUBE_CONFIG_ALLOW_INSECURE))
		return kc_err(d, -EPERM, "insecure-skip-tls-verify refused "
		    "(TLS verification is always on)", NULL);
	if ((cfg->server = strdup(server)) == NULL)
		return kc_err(d, -ENOMEM, "out of memory", NULL);
	n = strlen(cfg->server);
	while (n > 8 && cfg->server[n - 1] == '/')
		cfg->server[--n] = '\0';
	if ((r = load_pem(d, cl, "certificate-authority", &cfg->ca_file,
	    &cfg->ca_data, &cfg->ca_len)) < 0)
		return r;
	if ((tsn = map_str(d, cl, "tls-server-name")) != NULL && *tsn != '\0') {
		if (!host_name_ok(tsn))
			return kc_err(d, -EINVAL, "tls-server-name is not a DNS "
			    "name", tsn);
		if ((cfg->tls_server_name = strdup(tsn)) == NULL)
			return kc_err(d, -ENOMEM, "out of memory", NULL);
	}
	if ((proxy = map_str(d, cl, "proxy-url")) != NULL && *proxy != '\0') {
		if (strncmp(proxy, "http://", 7) != 0 &&
		    strncmp(proxy, "https://", 8) != 0 &&
		    strncmp(proxy, "socks5://", 9) != 0)
			return kc_err(d, -EINVAL, "proxy-url is not http://, "
			    "https:// or socks5://", proxy);
		if ((cfg->proxy_url = strdup(proxy)) == NULL)
			return kc_err(d, -ENOMEM, "out of memory", NULL);
	}
	return 0;
}

/* Fill token / token file / client certificate from a user entry. */
static int
load_user(struct kc_doc *d, yaml_node_t *u, struct kube_config *cfg)
{
	const char *tok, *tf;
	struct stat st;
	int r;

	if (map_get(d, u, "exec") != NULL ||
	    map_get(d, u, "auth-provider") != NULL)
		return kc_err(d, -ENOTSUP, "exec / auth-provider credential "
		    "plugins are not supported", NULL);
	if (map_get(d, u, "username") != NULL)
		return kc_err(d, -ENOTSUP, "basic auth is not supported", NULL);
	if ((r = load_pem(d, u, "client-certificate", &cfg->cert_file,
	    &cfg->cert_data, &cfg->cert_len)) < 0 ||
	    (r = load_pem(d, u, "client-key", &cfg->key_file,
	    &cfg->key_data, &cfg->key_len)) < 0)
		return r;
	if ((cfg->cert_file || cfg->cert_data) !=
	    (cfg->key_file || cfg->key_data))
		return kc_err(d, -EINVAL, "client certificate and key must "
		    "come together", NULL);
	if ((tok = map_str(d, u, "token")) != NULL) {
		if (strlen(tok) > KUBE_CONFIG_MAX_TOKEN ||
		    strpbrk(tok, "\r\n") != NULL)
			return kc_err(d, -EINVAL, "bad token", NULL);
		if ((cfg->token = strdup(tok)) == NULL)
			return kc_err(d, -ENOMEM, "out of memory", NULL);
		return 0;
	}
	if ((tf = map_str(d, u, "tokenFile")) == NULL)
		return 0;
	if ((cfg->token_file = resolve_path(d, tf)) == NULL)
		return kc_err(d, -ENOMEM, "out of memory", NULL);
	if ((r = read_token(cfg->token_file, &cfg->token, &st)) < 0) {
		snprintf(d->err, d->errlen, "tokenFile \"%s\": %s",
		    cfg->token_file, r == -EINVAL ?
		    "empty or not one line" : strerror(-r));
		return r;
	}
	token_stamp(cfg, &st);
	return 0;
}

/* Resolve the context and load its cluster and user into cfg. */
static int
load_context(struct kc_doc *d, const char *context, struct kube_config *cfg)
{
	yaml_node_t *root, *ctx, *cl, *u = NULL;
	const char *cname, *uname, *ns;
	int r;

	root = yaml_document_get_root_node(&d->doc);
	if (root == NULL || root->type != YAML_MAPPING_NODE)
		return kc_err(d, -EINVAL, "kubeconfig is not a YAML mapping",
		    NULL);
	if (context == NULL &&
	    (context = map_str(d, root, "current-context")) == NULL)
		return kc_err(d, -EINVAL, "no context given and no "
		    "current-context", NULL);
	if ((ctx = find_named(d, "contexts", "context", context)) == NULL)
		return kc_err(d, -EINVAL, "no such context", context);
	if ((cname = map_str(d, ctx, "cluster")) == NULL ||
	    (cl = find_named(d, "clusters", "cluster", cname)) == NULL)
		return kc_err(d, -EINVAL, "context names no known cluster:",
		    context);
	if ((uname = map_str(d, ctx, "user")) != NULL &&
	    (u = find_named(d, "users", "user", uname)) == NULL)
		return kc_err(d, -EINVAL, "no such user", uname);
	if ((ns = map_str(d, ctx, "namespace")) != NULL &&
	    (cfg->namespace = strdup(ns)) == NULL)
		return kc_err(d, -ENOMEM, "out of memory", NULL);
	if ((r = load_cluster(d, cl, cfg)) < 0)
		return r;
	if (u != NULL && (r = load_user(d, u, cfg)) < 0)
		return r;
	return 0;
}

/* Free the parser after wiping its copies of the text (tokens, keys). */
static void
parser_wipe_delete(yaml_parser_t *p)
{
	if (p->buffer.start != NULL)
		explicit_bzero(p->buffer.start,
		    (size_t)(p->buffer.end - p->buffer.start));
	if (p->raw_buffer.start != NULL)
		explicit_bzero(p->raw_buffer.start,
		    (size_t)(p->raw_buffer.end - p->raw_buffer.start));
	yaml_parser_delete(p);
}

/* Free the document after wiping every scalar (tokens, key data). */
static void
doc_wipe_delete(yaml_document_t *doc)
{
	for (yaml_node_t *n = doc->nodes.start; n < doc->nodes.top; n++)
		if (n->type == YAML_SCALAR_NODE && n->data.scalar.value)
			explicit_bzero(n->data.scalar.value,
			    n->data.scalar.length);
	yaml_document_delete(doc);
}

/* Parse kubeconfig text into a configuration. */
int
kube_config_parse(const char *text, size_t len, const char *base_dir,
    const char *context, unsigned flags, struct kube_config **ret,
    char *err, size_t errlen)
{
	struct kc_doc d = { .base_dir = base_dir, .flags = flags,
	    .err = err, .errlen = errlen };
	struct kube_config *cfg = NULL;
	yaml_parser_t parser;
	int r;

	if (len > KUBE_CONFIG_MAX_FILE) {
		snprintf(err, errlen, "kubeconfig larger than %u bytes",
		    KUBE_CONFIG_MAX_FILE);
		return -EFBIG;
	}
	if (!yaml_parser_initialize(&parser)) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text,
	    len);
	if (!yaml_parser_load(&parser, &d.doc)) {
		snprintf(err, errlen, "YAML error at line %zu: %s",
		    parser.problem_mark.line + 1,
		    parser.problem ? parser.problem : "unknown");
		parser_wipe_delete(&parser);
		return -EINVAL;
	}
	parser_wipe_delete(&parser);
	r = -ENOMEM;
	if ((cfg = calloc(1, sizeof(*cfg))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if ((r = load_context(&d, context, cfg)) < 0)
		goto fail;
	doc_wipe_delete(&d.doc);
	*ret = cfg;
	return 0;
fail:
	kube_config_free(cfg);
	doc_wipe_delete(&d.doc);
	return r;
}

/* Load a kubeconfig file; relative paths inside are relative to its dir. */
static int
load_file(const char *path, const char *context, unsigned flags,
    struct kube_config **ret, char *err, size_t errlen)
{
	char *text, *dir, *slash;
	size_t len;
	int r;

	if ((r = read_file(path, KUBE_CONFIG_MAX_FILE, &text, &len,
	    NULL)) < 0) {
		snprintf(err, errlen, "kubeconfig \"%s\": %s", path,
		    r == -EFBIG ? "too large" : strerror(-r));
		return r;
	}
	if ((dir = strdup(path)) == NULL) {
		secret_free(text, len);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((slash = strrchr(dir, '/')) == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	r = kube_config_parse(text, len, dir, context, flags, ret, err,
	    errlen);
	secret_free(text, len);
	free(dir);
	return r;
}

/* The first existing file of a ':'-separated $KUBECONFIG list. */
static char *
kubeconfig_from_env(const char *list)
{
	char *copy, *save = NULL, *p, *found = NULL;

	if ((copy = strdup(list)) == NULL)
		return NULL;
	for (p = strtok_r(copy, ":", &save); p != NULL;
	    p = strtok_r(NULL, ":", &save)) {
		if (access(p, F_OK) == 0) {
			found = strdup(p);
			break;
		}
	}
	free(copy);
	return found;
}

/* Load from path, $KUBECONFIG, in-cluster or ~/.kube/config. */
int
kube_config_load(const char *path, const char *context, unsigned flags,
    struct kube_config **ret, char *err, size_t errlen)
{
	const char *env, *home;
	char *p = NULL;
	int r;

	if (path != NULL)
		return load_file(path, context, flags, ret, err, errlen);
	if ((env = getenv("KUBECONFIG")) != NULL && *env != '\0') {
		if ((p = kubeconfig_from_env(env)) == NULL) {
			snprintf(err, errlen, "no file of $KUBECONFIG exists");
			return -ENOENT;
		}
	} else if (getenv("KUBERNETES_SERVICE_HOST") != NULL) {
		return kube_config_load_incluster(NULL, ret, err, errlen);
	} else if ((home = getenv("HOME")) != NULL) {
		if (asprintf(&p, "%s/.kube/config", home) == -1) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	} else {
		snprintf(err, errlen, "no kubeconfig: set $KUBECONFIG");
		return -ENOENT;
	}
	r = load_file(p, context, flags, ret, err, errlen);
	free(p);
	return r;
}

/* "https://host:port", bracketing an IPv6 host. */
static int
incluster_server(char **ret, char *err, size_t errlen)
{
	const char *host, *port;
	int n;

	host = getenv("KUBERNETES_SERVICE_HOST");
	port = getenv("KUBERNETES_SERVICE_PORT");
	if (host == NULL || *host == '\0' || port == NULL || *port == '\0' ||
	    strlen(host) > 255 || strspn(port, "0123456789") != strlen(port) ||
	    strlen(port) > 5 || strpbrk(host, "/@?# ") != NULL) {
		snprintf(err, errlen, "KUBERNETES_SERVICE_HOST/PORT missing "
		    "or invalid");
		return -EINVAL;
	}
	n = strchr(host, ':') != NULL ?
	    asprintf(ret, "https://[%s]:%s", host, port) :
	    asprintf(ret, "https://%s:%s", host, port);
	if (n == -1) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* Read the optional namespace file of the service account. */
static int
incluster_namespace(const char *dir, struct kube_config *cfg)
{
	char *p, *ns;
	size_t len;
	int r;

	if (asprintf(&p, "%s/namespace", dir) == -1)
		return -ENOMEM;
	r = read_file(p, 4096, &ns, &len, NULL);
	free(p);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	while (len > 0 && strchr(" \t\r\n", ns[len - 1]) != NULL)
		ns[--len] = '\0';
	if (len == 0) {
		free(ns);
		return 0;
	}
	cfg->namespace = ns;
	return 0;
}

/* In-cluster configuration from the service account directory. */
int
kube_config_load_incluster(const char *dir, struct kube_config **ret,
    char *err, size_t errlen)
{
	struct kube_config *cfg;
	char *tok = NULL;
	int r;

	if (dir == NULL)
		dir = KUBE_INCLUSTER_DIR;
	if ((cfg = calloc(1, sizeof(*cfg))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((r = incluster_server(&cfg->server, err, errlen)) < 0)
		goto fail;
	r = -ENOMEM;
	if (asprintf(&cfg->ca_file, "%s/ca.crt", dir) == -1 ||
	    asprintf(&tok, "%s/token", dir) == -1) {
		cfg->ca_file = NULL;
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (access(cfg->ca_file, R_OK) == -1) {
		r = -errno;
		snprintf(err, errlen, "CA \"%s\": %s", cfg->ca_file,
		    strerror(-r));
		goto fail;
	}
	if ((r = kube_config_set_token_file(cfg, tok, err, errlen)) < 0)
		goto fail;
	if ((r = incluster_namespace(dir, cfg)) < 0) {
		snprintf(err, errlen, "namespace file: %s", strerror(-r));
		goto fail;
	}
	free(tok);
	*ret = cfg;
	return 0;
fail:
	free(tok);
	kube_config_free(cfg);
	return r;
}
