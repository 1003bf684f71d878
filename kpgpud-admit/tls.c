/* SPDX-License-Identifier: Apache-2.0 */
/* The webhook's TLS context and its reload: see tls.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "kpgpud-admit/tls.h"

#define TLS_NFILES	3

/* What identifies one version of a file. */
struct tls_stamp {
	bool		 present;
	dev_t		 dev;
	ino_t		 ino;
	off_t		 size;
	struct timespec	 mtime;
	struct timespec	 ctime;
};

struct tls {
	pthread_mutex_t	 lock;		/* guards ctx */
	SSL_CTX		*ctx;
	char		*path[TLS_NFILES];	/* cert, key, client CA */
	struct tls_stamp stamp[TLS_NFILES];
	unsigned long	 generation;
};

static const unsigned char tls_alpn[] = "\x08http/1.1";

/* Put OpenSSL's last error (or what) into err and clear the queue. */
static int
ssl_err(char *err, size_t errlen, const char *what, const char *path)
{
	unsigned long e = ERR_peek_last_error();
	char buf[256] = "";

	if (e != 0)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	snprintf(err, errlen, "%s %s: %s", what, path ? path : "",
	    buf[0] ? buf : "failed");
	return -EINVAL;
}

/* ALPN: only http/1.1 (what the apiserver offers); refuse anything else. */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned char *sel;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&sel, outlen, tls_alpn, sizeof(tls_alpn) - 1,
	    in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

/* Build a fresh server context from the files. */
static int
build_ctx(struct tls *t, SSL_CTX **ret, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	int rv;

	if (ctx == NULL)
		return ssl_err(err, errlen, "SSL_CTX_new", NULL);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
	/*
	 * A write OpenSSL asks to retry resumes from the connection's reply
	 * buffer (conn.c), which is not promised to stay where it was; an
	 * idle connection holds no TLS buffers.
	 */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, t->path[0]) != 1) {
		rv = ssl_err(err, errlen, "certificate", t->path[0]);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, t->path[1], SSL_FILETYPE_PEM)
	    != 1) {
		rv = ssl_err(err, errlen, "key", t->path[1]);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		rv = ssl_err(err, errlen, "key does not match certificate",
		    t->path[1]);
		goto fail;
	}
	if (t->path[2] != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, t->path[2], NULL) != 1) {
			rv = ssl_err(err, errlen, "client CA", t->path[2]);
			goto fail;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
		    SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	*ret = ctx;
	return 0;
fail:
	SSL_CTX_free(ctx);
	return rv;
}

/* Stat the files into st; whether any differs from the stored stamps. */
static bool
changed(struct tls *t, struct tls_stamp *st)
{
	bool diff = false;

	memset(st, 0, sizeof(*st) * TLS_NFILES);
	for (int i = 0; i < TLS_NFILES; i++) {
		struct stat sb;

		if (t->path[i] != NULL && stat(t->path[i], &sb) == 0) {
			st[i].present = true;
			st[i].dev = sb.st_dev;
			st[i].ino = sb.st_ino;
			st[i].size = sb.st_size;
			st[i].mtime = sb.st_mtim;
			st[i].ctime = sb.st_ctim;
		}
		if (memcmp(&st[i], &t->stamp[i], sizeof(st[i])) != 0)
			diff = true;
	}
	return diff;
}

/* Load the files once; see tls.h. */
int
tls_new(const char *cert, const char *key, const char *client_ca,
    struct tls **ret, char *err, size_t errlen)
{
	struct tls *t;
	int rv = -ENOMEM;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->path[0] = strdup(cert);
	t->path[1] = strdup(key);
	t->path[2] = client_ca != NULL ? strdup(client_ca) : NULL;
	if (t->path[0] == NULL || t->path[1] == NULL ||
	    (client_ca != NULL && t->path[2] == NULL))
		goto fail;
	changed(t, t->stamp);
	if ((rv = build_ctx(t, &t->ctx, err, errlen)) < 0)
		goto fail;
	*ret = t;
	return 0;
fail:
	if (rv == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	tls_free(t);
	return rv;
}

/* Free the context and paths (NULL ok). */
void
tls_free(struct tls *t)
{
	if (t == NULL)
		return;
	SSL_CTX_free(t->ctx);
	for (int i = 0; i < TLS_NFILES; i++)
		free(t->path[i]);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* A new SSL for one accepted connection, on the current context. */
SSL *
tls_ssl_new(struct tls *t)
{
	SSL *ssl;

	pthread_mutex_lock(&t->lock);
	ssl = SSL_new(t->ctx);
	pthread_mutex_unlock(&t->lock);
	return ssl;
}

/* Reload when a file changed; see tls.h. */
int
tls_reload_if_changed(struct tls *t, char *err, size_t errlen)
{
	struct tls_stamp st[TLS_NFILES];
	SSL_CTX *ctx, *old;
	int rv;

	if (!changed(t, st))
		return 0;
	if ((rv = build_ctx(t, &ctx, err, errlen)) < 0)
		return rv;
	pthread_mutex_lock(&t->lock);
	old = t->ctx;
	t->ctx = ctx;
	t->generation++;
	pthread_mutex_unlock(&t->lock);
	/* Open connections hold their own references to the old context. */
	SSL_CTX_free(old);
	memcpy(t->stamp, st, sizeof(st));
	return 1;
}

/* How many times the context was replaced. */
unsigned long
tls_generation(struct tls *t)
{
	unsigned long g;

	pthread_mutex_lock(&t->lock);
	g = t->generation;
	pthread_mutex_unlock(&t->lock);
	return g;
}
