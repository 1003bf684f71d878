/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook's TLS context (OpenSSL 3): TLS 1.2 or later, ALPN http/1.1,
 * optional verification of the apiserver's client certificate, and reload of
 * the certificate and key when their files change. A reload swaps the
 * SSL_CTX that new connections use; connections already open keep the one
 * they started with, so a rotation drops nothing.
 */
#ifndef KPGPUD_ADMIT_TLS_H
#define KPGPUD_ADMIT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

struct tls;

/*
 * Load cert (a PEM chain), key and, when client_ca is not NULL, the CA that
 * client certificates must chain to. 0, or -EINVAL/-errno with the reason in
 * err; ret untouched on failure.
 */
int	 tls_new(const char *cert, const char *key, const char *client_ca,
	    struct tls **ret, char *err, size_t errlen);
void	 tls_free(struct tls *t);

/* A new server-side SSL on the current context; any thread. NULL on error. */
SSL	*tls_ssl_new(struct tls *t);

/*
 * Reload when any of the files changed since the last successful load.
 * Returns 1 when the context was replaced, 0 when nothing changed, or
 * -errno with the reason in err (the old context stays in use and the
 * next call tries again).
 */
int	 tls_reload_if_changed(struct tls *t, char *err, size_t errlen);

/* How many times the context was replaced. */
unsigned long tls_generation(struct tls *t);

#endif
