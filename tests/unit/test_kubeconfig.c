/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kube/kubeconfig.c: every field form (data vs path,
 * token, tokenFile, client certificates), contexts, $KUBECONFIG, the
 * in-cluster service account, token re-reads, errors, and the refusal of
 * insecure-skip-tls-verify and plain http. Secrets never show up in errors.
 * kube_setup(): a daemon's client from its configuration, each failing
 * step named, nothing returned on failure.
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "tests/unit/test.h"
#include "common/util.h"

/* Path of a kubeconfig fixture (static buffer per call site use). */
static const char *
fx(const char *name)
{
	static char buf[4][1024];
	static int n;
	char rel[256], *b = buf[n++ % 4];

	snprintf(rel, sizeof(rel), "tests/fixtures/kubeconfig/%s", name);
	snprintf(b, 1024, "%s", test_srcpath(rel));
	return b;
}

/* Load a fixture with a context; returns the error code. */
static int
load(const char *name, const char *ctx, unsigned flags,
    struct kube_config **ret, char *err, size_t errlen)
{
	*ret = NULL;
	err[0] = '\0';
	return kube_config_load(fx(name), ctx, flags, ret, err, errlen);
}

TEST(kc_current_context_data_fields)
{
	struct kube_config *c;
	char err[256];

	REQUIRE(load("full.yaml", NULL, 0, &c, err, sizeof(err)) == 0);
	CHECK_STR(kube_config_server(c), "https://prod.example.com:6443");
	CHECK_STR(kube_config_namespace(c), "kpgpud-system");
	CHECK(c->ca_file == NULL);
	REQUIRE(c->ca_data != NULL);
	CHECK(strstr(c->ca_data, "FAKECA") != NULL);
	CHECK_INT(c->ca_len, strlen(c->ca_data));
	CHECK(c->cert_data != NULL && strstr(c->cert_data, "FAKECLIENT"));
	CHECK(c->key_data != NULL && strstr(c->key_data, "FAKEKEY"));
	CHECK(c->token == NULL);
	CHECK(!c->insecure);
	kube_config_free(c);
}

TEST(kc_token_and_relative_ca_path)
{
	struct kube_config *c;
	char err[256];

	REQUIRE(load("full.yaml", "edge-reader", 0, &c, err,
	    sizeof(err)) == 0);
	CHECK_STR(kube_config_server(c), "https://[fd00::1]:443");
	CHECK(kube_config_namespace(c) == NULL);
	CHECK_STR(c->ca_file, fx("ca.pem"));
	CHECK_STR(c->token, "reader-secret-token");
	CHECK(c->token_file == NULL);
	CHECK(c->cert_file == NULL && c->key_data == NULL);
	kube_config_free(c);
}

TEST(kc_token_file)
{
	struct kube_config *c;
	char err[256];

	REQUIRE(load("full.yaml", "edge-file", 0, &c, err, sizeof(err)) == 0);
	CHECK_STR(c->token_file, fx("token"));
	CHECK_STR(c->token, "file-token-value");
	CHECK_INT(kube_config_refresh_token(c), 0);
	kube_config_free(c);
}

TEST(kc_client_cert_files)
{
	struct kube_config *c;
	char err[256];

	REQUIRE(load("full.yaml", "edge-certs", 0, &c, err, sizeof(err)) == 0);
	CHECK_STR(c->cert_file, fx("client.crt"));
	CHECK_STR(c->key_file, fx("client.key"));
	CHECK(c->token == NULL);
	kube_config_free(c);
}

TEST(kc_context_without_user)
{
	struct kube_config *c;
	char err[256];

	REQUIRE(load("full.yaml", "nouser", 0, &c, err, sizeof(err)) == 0);
	CHECK(c->token == NULL && c->cert_data == NULL);
	kube_config_free(c);
}

TEST(kc_unknown_context)
{
	struct kube_config *c;
	char err[256];

	CHECK_INT(load("full.yaml", "nope", 0, &c, err, sizeof(err)),
	    -EINVAL);
	CHECK(c == NULL);
	CHECK(strstr(err, "nope") != NULL);
}

TEST(kc_insecure_refused_unless_allowed)
{
	struct kube_config *c;
	char err[256];

	CHECK_INT(load("full.yaml", "lab", 0, &c, err, sizeof(err)), -EPERM);
	CHECK(c == NULL);
	CHECK(strstr(err, "insecure") != NULL);
	REQUIRE(load("full.yaml", "lab", KUBE_CONFIG_ALLOW_INSECURE, &c, err,
	    sizeof(err)) == 0);
	CHECK(c->insecure);
	kube_config_free(c);
}

TEST(kc_http_refused_unless_allowed)
{
	struct kube_config *c;
	char err[256];

	CHECK_INT(load("http.yaml", NULL, 0, &c, err, sizeof(err)), -EPERM);
	REQUIRE(load("http.yaml", NULL, KUBE_CONFIG_ALLOW_INSECURE, &c, err,
	    sizeof(err)) == 0);
	CHECK_STR(kube_config_server(c), "http://127.0.0.1:8080");
	kube_config_free(c);
}

TEST(kc_errors)
{
	static const struct {
		const char	*file;
		int		 err;
		const char	*text;
	} cases[] = {
		{ "exec.yaml", -ENOTSUP, "exec" },
		{ "bad-yaml.yaml", -EINVAL, "YAML error" },
		{ "bad-base64.yaml", -EINVAL, "base64" },
		{ "bad-noserver.yaml", -EINVAL, "no server" },
		{ "bad-certnokey.yaml", -EINVAL, "together" },
		{ "bad-missingfile.yaml", -ENOENT, "does-not-exist.pem" },
		{ "bad-badtoken.yaml", -EINVAL, "token" },
		{ "no-such-file.yaml", -ENOENT, "no-such-file" },
	};
	struct kube_config *c;
	char err[256];

	for (size_t i = 0; i < nitems(cases); i++) {
		CHECK_INT(load(cases[i].file, NULL, 0, &c, err, sizeof(err)),
		    cases[i].err);
		CHECK(c == NULL);
		if (strstr(err, cases[i].text) == NULL)
			test_fail(__FILE__, __LINE__, "%s: \"%s\" lacks %s",
			    cases[i].file, err, cases[i].text);
		CHECK(strstr(err, "secret") == NULL);
	}
}

TEST(kc_parse_text_and_caps)
{
	struct kube_config *c = NULL;
	char err[256], *big;
	const char *t = "clusters:\n- name: c\n  cluster: {server: "
	    "'https://h'}\ncontexts:\n- {name: x, context: {cluster: c}}\n";

	CHECK_INT(kube_config_parse(t, strlen(t), NULL, NULL, 0, &c, err,
	    sizeof(err)), -EINVAL);	/* no current-context */
	REQUIRE(kube_config_parse(t, strlen(t), NULL, "x", 0, &c, err,
	    sizeof(err)) == 0);
	CHECK_STR(kube_config_server(c), "https://h");
	kube_config_free(c);
	CHECK_INT(kube_config_parse("", 0, NULL, NULL, 0, &c, err,
	    sizeof(err)), -EINVAL);
	CHECK_INT(kube_config_parse("- a\n- b\n", 8, NULL, NULL, 0, &c, err,
	    sizeof(err)), -EINVAL);
	big = calloc(1, KUBE_CONFIG_MAX_FILE + 2);
	REQUIRE(big != NULL);
	memset(big, '#', KUBE_CONFIG_MAX_FILE + 1);
	CHECK_INT(kube_config_parse(big, KUBE_CONFIG_MAX_FILE + 1, NULL, NULL,
	    0, &c, err, sizeof(err)), -EFBIG);
	free(big);
}

TEST(kc_env_kubeconfig_list)
{
	struct kube_config *c;
	char err[256], list[2200];
	char *old = getenv("KUBECONFIG") ? strdup(getenv("KUBECONFIG")) : NULL;

	snprintf(list, sizeof(list), "/nonexistent/a:%s", fx("full.yaml"));
	setenv("KUBECONFIG", list, 1);
	REQUIRE(kube_config_load(NULL, "edge-reader", 0, &c, err,
	    sizeof(err)) == 0);
	CHECK_STR(c->token, "reader-secret-token");
	kube_config_free(c);
	setenv("KUBECONFIG", "/nonexistent/a:/nonexistent/b", 1);
	CHECK_INT(kube_config_load(NULL, NULL, 0, &c, err, sizeof(err)),
	    -ENOENT);
	if (old != NULL)
		setenv("KUBECONFIG", old, 1);
	else
		unsetenv("KUBECONFIG");
	free(old);
}

/* Write text to dir/name. */
static void
put(const char *dir, const char *name, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if ((f = fopen(p, "w")) != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

/* Set a file's mtime to a fixed second so a rewrite is always seen. */
static void
age(const char *dir, const char *name, time_t sec)
{
	struct timespec ts[2] = { { sec, 0 }, { sec, 0 } };
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	utimensat(AT_FDCWD, p, ts, 0);
}

TEST(kc_incluster_and_token_refresh)
{
	char dir[] = "/tmp/kpgpud-kc.XXXXXX", err[256], cmd[300];
	struct kube_config *c = NULL;

	REQUIRE(mkdtemp(dir) != NULL);
	put(dir, "ca.crt", "-----BEGIN CERTIFICATE-----\n");
	put(dir, "token", "sa-token-1\n");
	put(dir, "namespace", "kpgpud\n");
	age(dir, "token", 1000);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	REQUIRE(kube_config_load_incluster(dir, &c, err, sizeof(err)) == 0);
	CHECK_STR(kube_config_server(c), "https://10.96.0.1:443");
	CHECK_STR(kube_config_namespace(c), "kpgpud");
	CHECK_STR(c->token, "sa-token-1");
	CHECK(strstr(c->ca_file, "/ca.crt") != NULL);
	CHECK_INT(kube_config_refresh_token(c), 0);
	put(dir, "token", "sa-token-2\n");	/* same size */
	age(dir, "token", 2000);
	CHECK_INT(kube_config_refresh_token(c), 1);
	CHECK_STR(c->token, "sa-token-2");
	put(dir, "token", "\n");		/* unreadable: keep old */
	age(dir, "token", 3000);
	CHECK_INT(kube_config_refresh_token(c), -EINVAL);
	CHECK_STR(c->token, "sa-token-2");
	kube_config_free(c);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::10", 1);
	put(dir, "token", "t\n");
	REQUIRE(kube_config_load_incluster(dir, &c, err, sizeof(err)) == 0);
	CHECK_STR(kube_config_server(c), "https://[fd00::10]:443");
	kube_config_free(c);
	setenv("KUBERNETES_SERVICE_PORT", "44x", 1);
	CHECK_INT(kube_config_load_incluster(dir, &c, err, sizeof(err)),
	    -EINVAL);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

TEST(kc_set_token_file_replaces_certs)
{
	struct kube_config *c;
	char err[256];

	REQUIRE(load("full.yaml", NULL, 0, &c, err, sizeof(err)) == 0);
	CHECK(c->key_data != NULL);
	REQUIRE(kube_config_set_token_file(c, fx("token"), err,
	    sizeof(err)) == 0);
	CHECK_STR(c->token, "file-token-value");
	CHECK(c->key_data == NULL && c->cert_data == NULL);
	CHECK_INT(kube_config_set_token_file(c, fx("nope"), err,
	    sizeof(err)), -ENOENT);
	CHECK_STR(c->token, "file-token-value");
	kube_config_free(c);
}

/* tls-server-name and proxy-url are read; bad values are refused. */
TEST(kc_server_name_and_proxy)
{
	struct kube_config *c = NULL;
	char err[256], t[512];
#define KC_FMT "clusters:\n- name: c\n  cluster: {server: " \
	    "'https://10.0.0.1:6443', %s: '%s'}\ncontexts:\n" \
	    "- {name: x, context: {cluster: c}}\ncurrent-context: x\n"

	snprintf(t, sizeof(t), KC_FMT, "tls-server-name", "api.example.com");
	REQUIRE(kube_config_parse(t, strlen(t), NULL, NULL, 0, &c, err,
	    sizeof(err)) == 0);
	CHECK_STR(c->tls_server_name, "api.example.com");
	CHECK(c->proxy_url == NULL);
	kube_config_free(c);
	snprintf(t, sizeof(t), KC_FMT, "proxy-url", "socks5://127.0.0.1:1080");
	REQUIRE(kube_config_parse(t, strlen(t), NULL, NULL, 0, &c, err,
	    sizeof(err)) == 0);
	CHECK_STR(c->proxy_url, "socks5://127.0.0.1:1080");
	CHECK(c->tls_server_name == NULL);
	kube_config_free(c);
	c = NULL;
	snprintf(t, sizeof(t), KC_FMT, "tls-server-name", "bad name/x");
	CHECK_INT(kube_config_parse(t, strlen(t), NULL, NULL, 0, &c, err,
	    sizeof(err)), -EINVAL);
	CHECK(strstr(err, "tls-server-name") != NULL);
	snprintf(t, sizeof(t), KC_FMT, "proxy-url", "ftp://p:21");
	CHECK_INT(kube_config_parse(t, strlen(t), NULL, NULL, 0, &c, err,
	    sizeof(err)), -EINVAL);
	CHECK(strstr(err, "proxy-url") != NULL);
}
#undef KC_FMT

/* kube_setup with these in its struct kube_conf (NULL: unset). */
static int
setup(struct event_base *base, const char *kubeconfig, const char *context,
    const char *token_file, struct kube_client_opts *o,
    struct kube_config **cfg, struct kube_client **kc, char *err,
    size_t errlen)
{
	char path[1024], ctx[256], tok[1024];
	struct kube_conf conf = { .kubeconfig = path };

	snprintf(path, sizeof(path), "%s", kubeconfig);
	snprintf(ctx, sizeof(ctx), "%s", context != NULL ? context : "");
	snprintf(tok, sizeof(tok), "%s", token_file != NULL ? token_file : "");
	conf.context = context != NULL ? ctx : NULL;
	conf.token_file = token_file != NULL ? tok : NULL;
	return kube_setup(base, &conf, o, cfg, kc, err, errlen);
}

TEST(kube_setup_steps)
{
	struct event_base *base = event_base_new();
	struct kube_config *cfg = (struct kube_config *)&base;
	struct kube_client *kc = (struct kube_client *)&base;
	struct kube_client_opts o;
	char err[600];

	REQUIRE(base != NULL);
	memset(&o, 0, sizeof(o));
	CHECK_INT(setup(base, fx("missing.yaml"), NULL, NULL, &o, &cfg,
	    &kc, err, sizeof(err)), -ENOENT);
	CHECK(strncmp(err, "kubeconfig: ", 12) == 0);
	CHECK_INT(setup(base, fx("full.yaml"), "no-such-context", NULL,
	    &o, &cfg, &kc, err, sizeof(err)) < 0, 1);
	CHECK(strncmp(err, "kubeconfig: ", 12) == 0);
	CHECK_INT(setup(base, fx("full.yaml"), "edge-reader",
	    fx("no-such-token"), &o, &cfg, &kc, err, sizeof(err)), -ENOENT);
	CHECK(strncmp(err, "token file: ", 12) == 0);
	CHECK(strstr(err, "reader-secret-token") == NULL);
	/* untouched on failure */
	CHECK(cfg == (struct kube_config *)&base);
	CHECK(kc == (struct kube_client *)&base);
	REQUIRE(setup(base, fx("full.yaml"), "edge-reader", fx("token"),
	    &o, &cfg, &kc, err, sizeof(err)) == 0);
	CHECK_STR(kube_config_server(cfg), "https://[fd00::1]:443");
	CHECK_STR(cfg->token, "file-token-value");
	CHECK_STR(cfg->token_file, fx("token"));
	CHECK(kc != NULL);
	kube_client_free(kc);
	kube_config_free(cfg);
	event_base_free(base);
}
