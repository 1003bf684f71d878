/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Asynchronous Kubernetes API client: libcurl's multi interface driven by
 * libevent, a token-bucket rate limiter, retries with jittered exponential
 * backoff, paginated lists and streaming watches. User callbacks never run
 * inside a libcurl callback: curl only fills buffers, and the results are
 * handed out after curl_multi_socket_action() returns.
 */
#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <curl/curl.h>
#include <event2/event.h>

#include "common/jscan.h"
#include "kube/kube_impl.h"
#include "common/util.h"

#ifndef KPGPUD_VERSION
#define KPGPUD_VERSION "0"
#endif

#define KUBE_MAX_PATH	8192

const char *const kube_http_versions[] = { "auto", "1.1", "2", NULL };

static void	 kx_attempt(struct kube_req *x);
static void	 client_pump(struct kube_client *c);

/* Monotonic now in milliseconds. */
static double
now_ms(void)
{
	return (double)monotonic_usec() / 1e3;
}

/* Milliseconds since *t. */
static double
since_ms(const struct timespec *t)
{
	return now_ms() - (t->tv_sec * 1e3 + t->tv_nsec / 1e6);
}

/* A timeval for ms milliseconds. */
static struct timeval
ms_tv(double ms)
{
	struct timeval tv;

	if (ms < 0)
		ms = 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)((ms - tv.tv_sec * 1000.0) * 1000);
	return tv;
}

/* Map a curl result to a negative errno. */
int
kube_curl_errno(const struct kube_req *x)
{
	if (x->overflow)
		return -EMSGSIZE;
	if (x->not_h2)
		return -EPROTO;
	switch (x->result) {
	case CURLE_OK:
		return 0;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:		/* GOAWAY, connection-level error */
	case CURLE_HTTP2_STREAM:	/* RST_STREAM */
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return -EPROTO;
	default:
		return -EIO;
	}
}

/* curl's error text of a finished attempt, or ours. */
const char *
kube_errtext(const struct kube_req *x)
{
	if (x->not_h2)
		return "the server did not negotiate HTTP/2 (HTTP/2 required)";
	return x->errbuf;
}

/* Wipe header strings (they may hold the token) and free the list. */
static void
hdrs_free(struct curl_slist *h)
{
	for (struct curl_slist *p = h; p != NULL; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(h);
}

/* Detach from curl and free everything a transfer holds. */
static void
kx_free(struct kube_req *x)
{
	if (x->easy != NULL) {
		if (x->state == KX_RUNNING)
			curl_multi_remove_handle(x->c->multi, x->easy);
		curl_easy_cleanup(x->easy);
	}
	hdrs_free(x->hdrs);
	if (x->timer != NULL)
		event_free(x->timer);
	watchstream_free(x->ws);
	free(x->method);
	free(x->url);
	free(x->ctype);
	if (x->body != NULL)
		explicit_bzero(x->body, x->blen);
	free(x->body);
	free(x->rbuf);
	free(x);
}

/* Stop a transfer now; it is freed at the next reap (or now if idle). */
void
kube_kx_kill(struct kube_req *x)
{
	struct kube_client *c = x->c;

	if (x->state == KX_DEAD)
		return;
	if (x->state == KX_RUNNING)
		curl_multi_remove_handle(c->multi, x->easy);
	if (x->state == KX_QUEUED)
		TAILQ_REMOVE(&c->rlq, x, queue);
	if (x->timer != NULL)
		event_del(x->timer);
	x->state = KX_DEAD;
	if (c->depth == 0) {
		TAILQ_REMOVE(&c->all, x, all);
		kx_free(x);
	}
}

/* Free transfers killed while callbacks were running. */
void
kube_client_reap(struct kube_client *c)
{
	struct kube_req *x, *nx;

	if (c->depth != 0)
		return;
	for (x = TAILQ_FIRST(&c->all); x != NULL; x = nx) {
		nx = TAILQ_NEXT(x, all);
		if (x->state == KX_DEAD) {
			TAILQ_REMOVE(&c->all, x, all);
			kx_free(x);
		}
	}
}

/* curl write callback: buffer the body (capped) or feed the watch. */
static size_t
on_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct kube_req *x = arg;
	size_t n = size * nmemb, ncap;
	long code = 0;
	char *nb;

	x->c->delivered = true;
	if (x->watch && !x->http_checked) {
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
		x->http_checked = true;
		x->stream = code == 200;
	}
	if (x->watch && x->timer != NULL && x->c->o.watch_stall_ms > 0) {
		struct timeval tv = ms_tv(x->c->o.watch_stall_ms);

		event_add(x->timer, &tv);
	}
	if (x->stream) {
		x->data = true;
		return watchstream_feed(x->ws, ptr, n) < 0 ? 0 : n;
	}
	if (x->rlen + n > x->c->o.max_response) {
		x->overflow = true;
		return 0;
	}
	if (x->rlen + n + 1 > x->rcap) {
		ncap = x->rcap ? x->rcap : 4096;
		while (ncap < x->rlen + n + 1)
			ncap *= 2;
		if ((nb = realloc(x->rbuf, ncap)) == NULL)
			return 0;
		x->rbuf = nb;
		x->rcap = ncap;
	}
	memcpy(x->rbuf + x->rlen, ptr, n);
	x->rlen += n;
	x->rbuf[x->rlen] = '\0';
	return n;
}

/* curl header callback: remember Retry-After (seconds or HTTP date). */
static size_t
on_header(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct kube_req *x = arg;
	size_t n = size * nmemb;
	char val[64], *end;
	long secs;
	time_t t;

	x->c->delivered = true;
	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
		if (strncmp(ptr, "HTTP/2", 6) == 0)
			x->c->m.http2++;
		else
			x->c->m.http1++;
		if (x->c->o.http_version == KUBE_HTTP_2 &&
		    strncmp(ptr, "HTTP/2", 6) != 0) {
			x->not_h2 = true;
			return 0;	/* aborts the transfer */
		}
		return n;
	}
	if (n < 12 || n > 200 || strncasecmp(ptr, "Retry-After:", 12) != 0)
		return n;
	snprintf(val, sizeof(val), "%.*s", (int)(n - 12), ptr + 12);
	val[strcspn(val, "\r\n")] = '\0';
	secs = strtol(val, &end, 10);
	if (end != val && *end == '\0' && secs >= 0 && secs < 86400) {
		x->retry_after_ms = secs * 1000;
	} else if ((t = curl_getdate(val, NULL)) != -1) {
		secs = (long)(t - time(NULL));
		x->retry_after_ms = secs > 0 ? secs * 1000 : 0;
	}
	return n;
}

/* Create sockets close-on-exec. */
static curl_socket_t
on_opensocket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	(void)arg;
	(void)purpose;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* TLS material and auth from the configuration. */
static int
easy_tls(struct kube_req *x, CURL *e)
{
	struct kube_config *cfg = x->c->cfg;
	struct curl_blob b;
	int r = 0;

	r |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, cfg->insecure ? 0L : 1L);
	r |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, cfg->insecure ? 0L : 2L);
	if (cfg->ca_file != NULL)
		r |= curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file);
	if (cfg->ca_data != NULL) {
		b = (struct curl_blob){ cfg->ca_data, cfg->ca_len,
		    CURL_BLOB_COPY };
		r |= curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	}
	if (cfg->cert_file != NULL)
		r |= curl_easy_setopt(e, CURLOPT_SSLCERT, cfg->cert_file);
	if (cfg->cert_data != NULL) {
		b = (struct curl_blob){ cfg->cert_data, cfg->cert_len,
		    CURL_BLOB_COPY };
		r |= curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
	}
	if (cfg->key_file != NULL)
		r |= curl_easy_setopt(e, CURLOPT_SSLKEY, cfg->key_file);
	if (cfg->key_data != NULL) {
		b = (struct curl_blob){ cfg->key_data, cfg->key_len,
		    CURL_BLOB_COPY };
		r |= curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
	}
	return r == 0 ? 0 : -EINVAL;
}

/* Headers for one attempt: Accept, Content-Type, bearer token. */
static int
build_headers(struct kube_req *x)
{
	struct kube_client *c = x->c;
	struct curl_slist *h = NULL, *t;
	char line[128];
	char *auth;
	int r;

	if ((r = kube_config_refresh_token(c->cfg)) == 1)
		c->m.token_reloads++;
	/* an unreadable token file keeps the previous token */
	h = curl_slist_append(h, "Accept: application/json");
	if (h != NULL && x->ctype != NULL) {
		snprintf(line, sizeof(line), "Content-Type: %s", x->ctype);
		h = (t = curl_slist_append(h, line)) ? t : (hdrs_free(h), NULL);
	}
	/* no "Expect: 100-continue" round trip before a body */
	if (h != NULL && x->body != NULL)
		h = (t = curl_slist_append(h, "Expect:")) ? t :
		    (hdrs_free(h), NULL);
	if (h != NULL && c->cfg->token != NULL) {
		if (asprintf(&auth, "Authorization: Bearer %s",
		    c->cfg->token) == -1)
			auth = NULL;
		t = auth ? curl_slist_append(h, auth) : NULL;
		if (auth != NULL) {
			explicit_bzero(auth, strlen(auth));
			free(auth);
		}
		h = t ? t : (hdrs_free(h), NULL);
	}
	if (h == NULL)
		return -ENOMEM;
	hdrs_free(x->hdrs);
	x->hdrs = h;
	return 0;
}

/*
 * The URL base requests are made under. With tls-server-name the URL's host
 * is that name (libcurl sends it as SNI and verifies the certificate
 * against it) and CURLOPT_CONNECT_TO sends the connection to the server's
 * real host and port, as client-go's ServerName does.
 */
static int
api_server_names(struct kube_client *c)
{
	const char *name = c->cfg->tls_server_name;
	char *host = NULL, *port = NULL, *url = NULL, *ct = NULL;
	CURLU *u;
	int r = -ENOMEM;

	if (name == NULL)
		return 0;
	if ((u = curl_url()) == NULL)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, c->cfg->server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) !=
	    CURLUE_OK || curl_url_set(u, CURLUPART_HOST, name, 0) !=
	    CURLUE_OK || curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
		r = -EINVAL;
		goto out;
	}
	/* curl adds a '/' path; the base has none (paths start with '/') */
	if (strlen(url) > 0 && url[strlen(url) - 1] == '/' &&
	    c->cfg->server[strlen(c->cfg->server) - 1] != '/')
		url[strlen(url) - 1] = '\0';
	if (asprintf(&ct, "%s:%s:%s:%s", name, port, host, port) == -1)
		ct = NULL;
	if (ct == NULL || (c->url_base = strdup(url)) == NULL ||
	    (c->connect_to = curl_slist_append(NULL, ct)) == NULL)
		goto out;
	r = 0;
out:
	free(ct);
	curl_free(host);
	curl_free(port);
	curl_free(url);
	curl_url_cleanup(u);
	return r;
}

/* Set every option of the easy handle for the next attempt. */
static int
easy_setup(struct kube_req *x)
{
	struct kube_client *c = x->c;
	CURL *e = x->easy;
	int r = 0;

	if (build_headers(x) < 0)
		return -ENOMEM;
	r |= curl_easy_setopt(e, CURLOPT_URL, x->url);
	if (c->connect_to != NULL)
		r |= curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
	if (c->cfg->proxy_url != NULL)
		r |= curl_easy_setopt(e, CURLOPT_PROXY, c->cfg->proxy_url);
	r |= curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	r |= curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	r |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	r |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR,
	    c->cfg->insecure ? "http,https" : "https");
	r |= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	r |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	if (c->o.http_version == KUBE_HTTP_1_1)
		r |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
		    (long)CURL_HTTP_VERSION_1_1);
	else {
		/* offer h2 by ALPN; wait for a connection being set up
		 * rather than open another, so streams share one */
		r |= curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
		    (long)CURL_HTTP_VERSION_2TLS);
		r |= curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	}
	r |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	r |= curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
	r |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	r |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	r |= curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	r |= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	r |= curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	r |= curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_opensocket);
	r |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)c->o.connect_timeout_ms);
	r |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
	    x->watch ? 0L : (long)c->o.timeout_ms);
	r |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
	if (x->body != NULL) {
		r |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)x->blen);
		r |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
	} else if (strcmp(x->method, "HEAD") == 0)
		r |= curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	if (r != 0 || easy_tls(x, e) < 0)
		return -EINVAL;
	return 0;
}

/* Start one attempt now (the rate limiter has let it through). */
static void
kx_attempt(struct kube_req *x)
{
	struct kube_client *c = x->c;

	x->rlen = 0;
	x->overflow = false;
	x->not_h2 = false;
	x->retry_after_ms = -1;
	x->errbuf[0] = '\0';
	x->result = CURLE_OK;
	if (x->attempts++ > 0)
		c->m.retries++;
	c->m.requests++;
	if (easy_setup(x) < 0 ||
	    curl_multi_add_handle(c->multi, x->easy) != CURLM_OK) {
		x->result = CURLE_OUT_OF_MEMORY;
		x->state = KX_DONE;
		event_active(c->pump_ev, EV_TIMEOUT, 0);
		return;
	}
	x->state = KX_RUNNING;
	if (x->watch && x->timer != NULL && c->o.watch_stall_ms > 0) {
		struct timeval tv = ms_tv(c->o.watch_stall_ms);

		event_add(x->timer, &tv);
	}
}

/* Let queued transfers through as tokens allow; re-arm the timer. */
static void
rl_drain(struct kube_client *c)
{
	uint64_t now = monotonic_usec();
	struct kube_req *x;
	struct timeval tv;

	while ((x = TAILQ_FIRST(&c->rlq)) != NULL &&
	    tokenbucket_take(&c->rl, now)) {
		TAILQ_REMOVE(&c->rlq, x, queue);
		c->m.throttled_ms += (uint64_t)since_ms(&x->queued_at);
		kx_attempt(x);
	}
	if (!TAILQ_EMPTY(&c->rlq)) {
		tv = ms_tv(tokenbucket_wait_ms(&c->rl) + 1);
		evtimer_add(c->rl_timer, &tv);
	}
}

/* Rate-limiter timer. */
static void
rl_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kube_client *c = arg;

	(void)fd;
	(void)what;
	c->depth++;
	rl_drain(c);
	c->depth--;
	client_pump(c);
}

/* Run an attempt through the rate limiter. */
void
kube_kx_submit(struct kube_req *x)
{
	struct kube_client *c = x->c;

	if (c->o.qps > 0) {
		if (!TAILQ_EMPTY(&c->rlq) ||
		    !tokenbucket_take(&c->rl, monotonic_usec())) {
			x->state = KX_QUEUED;
			clock_gettime(CLOCK_MONOTONIC, &x->queued_at);
			TAILQ_INSERT_TAIL(&c->rlq, x, queue);
			c->m.throttled++;
			rl_drain(c);
			return;
		}
	}
	kx_attempt(x);
}

/* Backoff timer: the retry is due. */
static void
backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kube_req *x = arg;
	struct kube_client *c = x->c;

	(void)fd;
	(void)what;
	c->depth++;
	if (x->state == KX_BACKOFF)
		kube_kx_submit(x);
	c->depth--;
	client_pump(c);
}

/* Whether this finished attempt should be tried again. */
static bool
kx_should_retry(const struct kube_req *x, long status)
{
	int e = kube_curl_errno(x);

	if (x->watch || x->attempts > x->c->o.max_retries)
		return false;
	if (e != 0)
		return e == -ECONNREFUSED || e == -ETIMEDOUT ||
		    e == -ECONNRESET || e == -EHOSTUNREACH;
	if (status == 429)
		return true;
	return status >= 500 && status != 501 && status != 505;
}

/* Delay before the next attempt: Retry-After, else jittered backoff. */
static double
kx_backoff_ms(struct kube_req *x)
{
	struct kube_client *c = x->c;
	double d;
	int n = x->attempts - 1;

	if (x->retry_after_ms >= 0)
		d = (double)x->retry_after_ms;
	else
		d = backoff_delay_ms((unsigned)c->o.backoff_base_ms,
		    (unsigned)c->o.backoff_max_ms, n < 0 ? 0 : (unsigned)n,
		    &c->rng);
	return d > c->o.backoff_max_ms ? c->o.backoff_max_ms : d;
}

/*
 * The members a kube_request_meta() answer keeps (kube.h): the Status
 * members kube_status_text() reads and who the object is.
 */
static const struct jscan_node meta_nodes[] = {
	{ -1, NULL },
	{ 0, "kind" },
	{ 0, "apiVersion" },
	{ 0, "message" },
	{ 0, "reason" },
	{ 0, "metadata" },
	{ 5, "name" },
	{ 5, "namespace" },
	{ 5, "uid" },
	{ 5, "resourceVersion" },
};
#define META_MD	5	/* meta_nodes' "metadata" */

/*
 * Set the string at sp of an accepted document as member key of o; other
 * values are left out. 0, or -1 when out of memory.
 */
static int
meta_set(json_t *o, const char *key, const char *body, struct jscan_span sp)
{
	json_t *v;
	char *s;
	size_t n;

	if (sp.len < 2 || body[sp.off] != '"')
		return 0;
	if ((s = malloc(sp.len)) == NULL)
		return -1;
	n = jscan_unescape(body + sp.off + 1, sp.len - 2, s);
	v = json_stringn(s, n);
	free(s);
	return v != NULL && json_object_set_new(o, key, v) == 0 ? 0 : -1;
}

/*
 * A body as kube_request_meta() hands it out (kube.h): an object scanned
 * without building its tree, keeping the string members of meta_nodes. What
 * the scanner refuses, or a top-level array, is parsed whole, so what is
 * not JSON to jansson is NULL as from jscan_load().
 */
json_t *
kube_body_meta(const char *body, size_t len)
{
	struct jscan_span sp[nitems(meta_nodes)];
	json_t *o, *md;
	size_t i = jscan_skip_ws(body, 0, len);
	int r = 0;

	if (i == len || body[i] != '{' || jscan_run(body, len, meta_nodes,
	    nitems(meta_nodes), sp, NULL) < 0)
		return jscan_load(body, len);
	o = json_object();
	md = json_object();
	for (i = 1; o != NULL && md != NULL && i < nitems(meta_nodes); i++)
		if (i != META_MD)
			r |= meta_set(meta_nodes[i].parent == META_MD ? md : o,
			    meta_nodes[i].key, body, sp[i]);
	if (o == NULL || md == NULL || r != 0 ||
	    (sp[META_MD].len > 0 && body[sp[META_MD].off] == '{' &&
	    json_object_set(o, "metadata", md) < 0)) {
		json_decref(md);
		json_decref(o);
		return NULL;
	}
	json_decref(md);
	return o;
}

/* Fill message/reason from a Status body, else from the body or status. */
void
kube_status_text(struct kube_response *r, char *buf, size_t buflen,
    const char *errbuf)
{
	json_t *v;
	size_t n;

	r->message = "";
	r->reason = "";
	if (json_is_object(r->json)) {
		v = json_object_get(r->json, "kind");
		if (json_is_string(v) &&
		    strcmp(json_string_value(v), "Status") == 0) {
			v = json_object_get(r->json, "message");
			if (json_is_string(v))
				r->message = json_string_value(v);
			v = json_object_get(r->json, "reason");
			if (json_is_string(v))
				r->reason = json_string_value(v);
		}
	}
	if (*r->message != '\0')
		return;
	if (r->error == -EMSGSIZE) {
		snprintf(buf, buflen, "response body over the size cap");
	} else if (r->error != 0) {
		snprintf(buf, buflen, "%s", *errbuf ? errbuf :
		    strerror(-r->error));
	} else if (r->status >= 300 && r->body_len > 0 && r->json == NULL) {
		n = strcspn(r->body, "\r\n");
		snprintf(buf, buflen, "%.*s", (int)(n > 200 ? 200 : n),
		    r->body);
	} else
		snprintf(buf, buflen, "HTTP %ld", r->status);
	r->message = buf;
}

/* Hand a finished request to its callback, then drop it. */
static void
kx_respond(struct kube_req *x, long status)
{
	struct kube_response r;
	char msg[256];
	kube_response_cb cb = x->cb;
	void *arg = x->arg;

	memset(&r, 0, sizeof(r));
	r.status = status;
	r.error = kube_curl_errno(x);
	r.body = x->rbuf != NULL ? x->rbuf : "";
	r.body_len = x->rlen;
	r.attempts = x->attempts;
	if (r.error == 0 && r.body_len > 0)
		r.json = x->meta ? kube_body_meta(r.body, r.body_len) :
		    jscan_load(r.body, r.body_len);
	kube_status_text(&r, msg, sizeof(msg), kube_errtext(x));
	kube_kx_kill(x);
	if (cb != NULL)
		cb(&r, arg);
	json_decref(r.json);
}

/* A finished attempt: retry, or hand the result out. */
static void
kx_finish(struct kube_req *x)
{
	struct kube_client *c = x->c;
	long status = 0;
	struct timeval tv;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status < 0 || status >= 600 || x->not_h2)
		status = 0;	/* not_h2: a reply we refused to read */
	c->m.status[x->result == CURLE_OK ? status : 0]++;
	if (x->watch) {
		kube_watch_finish(x, status);
		return;
	}
	if (kx_should_retry(x, status)) {
		x->state = KX_BACKOFF;
		tv = ms_tv(kx_backoff_ms(x));
		evtimer_add(x->timer, &tv);
		return;
	}
	kx_respond(x, status);
}

/* After curl ran: collect finished transfers, then run user callbacks. */
static void
client_pump(struct kube_client *c)
{
	struct kube_req *x;
	struct CURLMsg *msg;
	int left;

	c->depth++;
	while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
		    (char **)&x);
		if (x == NULL || x->state != KX_RUNNING)
			continue;
		x->result = msg->data.result;
		curl_multi_remove_handle(c->multi, x->easy);
		x->state = KX_DONE;
	}
	TAILQ_FOREACH(x, &c->all, all)
		if (x->watch && x->data && x->state == KX_RUNNING)
			kube_watch_dispatch(x);
	TAILQ_FOREACH(x, &c->all, all)
		if (x->state == KX_DONE)
			kx_finish(x);
	c->depth--;
	kube_client_reap(c);
}

/* Deferred work: results that arrived outside curl's callbacks. */
static void
pump_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	client_pump(arg);
}

/*
 * libcurl 7.88 (Debian 12) over HTTP/2 can leave bytes it has read from a
 * connection unprocessed with no timer armed and nothing left on the socket
 * to wake us. When a transfer reads the connection for another stream (a
 * quiet watch while a list page arrives), the page's DATA goes into the
 * page's 16 KiB buffer; when that fills, the h2 session pauses, and once
 * the page's transfer has taken the paused bytes the rest of what was read
 * waits for the next read of any transfer on the connection: the last
 * bytes of a list page waited for its connect-timeout expiry (10 s), or
 * forever without one, and a watch event for the next byte on the
 * connection. So after every action in which curl handed us bytes, curl
 * acts once more on each of its sockets as if readable, until a round hands
 * over nothing; the first transfer to read then processes what was left.
 * Each further round delivered bytes, so this ends. A round with nothing
 * left costs a read that would block. The next round waits for the event
 * loop's next turn (a zero timer): an activated event would run in the
 * same turn, and while pages kept arriving one turn chained rounds through
 * dozens of pages with nothing else run meanwhile (kpgpud-sync's batch
 * commit, IPC lookups, timers). HTTP/1.1 has one connection per
 * transfer and no such buffer. (t_kube_h2_pages)
 */
static void
kick_schedule(struct kube_client *c)
{
	static const struct timeval next_turn = { 0, 0 };

	if (c->delivered && c->o.http_version != KUBE_HTTP_1_1)
		evtimer_add(c->kick_ev, &next_turn);
}

/*
 * Let curl act on every socket it watches as if readable (see above). curl
 * adds and removes sockets as it acts: while the kick walks the list, a
 * removed socket's slot is only marked (socks_track) and the list is
 * compacted after the walk, so the walk needs no copy (no allocation that
 * could fail and leave the kick to be retried in a loop); sockets added
 * meanwhile are past the end of the walk.
 */
static void
kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kube_client *c = arg;
	size_t n = c->nsocks, i, j;
	int running;

	(void)fd;
	(void)what;
	c->delivered = false;
	if (n == 0)
		return;
	c->m.kicks++;
	c->kicking = true;
	for (i = 0; i < n; i++)
		if (c->socks[i] != CURL_SOCKET_BAD)
			curl_multi_socket_action(c->multi, c->socks[i],
			    CURL_CSELECT_IN, &running);
	c->kicking = false;
	for (i = j = 0; i < c->nsocks; i++)
		if (c->socks[i] != CURL_SOCKET_BAD)
			c->socks[j++] = c->socks[i];
	c->nsocks = j;
	client_pump(c);
	kick_schedule(c);
}

/* Socket activity: let curl act, then hand out results. */
static void
sock_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kube_client *c = arg;
	int flags = 0, running;

	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(c->multi, fd, flags, &running);
	client_pump(c);
	kick_schedule(c);
}

/* curl's timer expired. */
static void
curl_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct kube_client *c = arg;
	int running;

	(void)fd;
	(void)what;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	client_pump(c);
	kick_schedule(c);
}

/* Remember (add) or forget a socket curl watches; 0 or -1 (no memory). */
static int
socks_track(struct kube_client *c, curl_socket_t s, bool add)
{
	curl_socket_t *nv;
	size_t i;

	for (i = 0; i < c->nsocks && c->socks[i] != s; i++)
		;
	if (!add) {
		/* during a kick only mark it: kick_cb compacts the list */
		if (i < c->nsocks && c->kicking)
			c->socks[i] = CURL_SOCKET_BAD;
		else if (i < c->nsocks)
			c->socks[i] = c->socks[--c->nsocks];
		return 0;
	}
	if (i < c->nsocks)
		return 0;
	if (c->nsocks == c->socks_cap) {
		size_t cap = c->socks_cap ? c->socks_cap * 2 : 8;

		if ((nv = reallocarray(c->socks, cap, sizeof(*nv))) == NULL)
			return -1;
		c->socks = nv;
		c->socks_cap = cap;
	}
	c->socks[c->nsocks++] = s;
	return 0;
}

/* CURLMOPT_SOCKETFUNCTION: (re)register a socket with libevent. */
static int
curl_sock_fn(CURL *e, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct kube_client *c = arg;
	struct event *ev = sockp;
	short flags = EV_PERSIST;

	(void)e;
	if (ev != NULL) {
		event_free(ev);
		curl_multi_assign(c->multi, s, NULL);
	}
	if (what == CURL_POLL_REMOVE)
		return socks_track(c, s, false);
	if (what & CURL_POLL_IN)
		flags |= EV_READ;
	if (what & CURL_POLL_OUT)
		flags |= EV_WRITE;
	if (socks_track(c, s, true) < 0 ||
	    (ev = event_new(c->base, s, flags, sock_cb, c)) == NULL)
		return -1;
	event_add(ev, NULL);
	curl_multi_assign(c->multi, s, ev);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: arm or disarm the one curl timer. */
static int
curl_timer_fn(CURLM *m, long timeout_ms, void *arg)
{
	struct kube_client *c = arg;
	struct timeval tv;

	(void)m;
	if (timeout_ms < 0) {
		evtimer_del(c->curl_timer);
		return 0;
	}
	tv = ms_tv((double)timeout_ms);
	evtimer_add(c->curl_timer, &tv);
	return 0;
}

/* Apply defaults to zero option fields. */
static void
client_opts_defaults(struct kube_client_opts *o)
{
	if (o->qps == 0)
		o->qps = 5;
	if (o->burst <= 0)
		o->burst = 10;
	if (o->timeout_ms <= 0)
		o->timeout_ms = 30000;
	if (o->connect_timeout_ms <= 0)
		o->connect_timeout_ms = 10000;
	if (o->max_retries == 0)
		o->max_retries = 5;
	if (o->max_retries < 0)
		o->max_retries = 0;
	if (o->backoff_base_ms <= 0)
		o->backoff_base_ms = 200;
	if (o->backoff_max_ms <= 0)
		o->backoff_max_ms = 30000;
	if (o->max_response == 0)
		o->max_response = 64u << 20;
	if (o->max_line == 0)
		o->max_line = WATCHSTREAM_DEFAULT_MAX_LINE;
	if (o->watch_stall_ms == 0)
		o->watch_stall_ms = 120000;
	if (o->http_version < KUBE_HTTP_AUTO || o->http_version > KUBE_HTTP_2)
		o->http_version = KUBE_HTTP_AUTO;
}

/* New client on an event base. */
struct kube_client *
kube_client_new(struct event_base *base, struct kube_config *cfg,
    const struct kube_client_opts *opts)
{
	struct kube_client *c;
	int e = ENOMEM;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (c = calloc(1, sizeof(*c))) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	c->base = base;
	c->cfg = cfg;
	if (opts != NULL)
		c->o = *opts;
	client_opts_defaults(&c->o);
	tokenbucket_init(&c->rl, c->o.qps, c->o.burst, monotonic_usec());
	TAILQ_INIT(&c->all);
	TAILQ_INIT(&c->rlq);
	c->rng = prng_seed();
	if (c->o.user_agent != NULL)
		c->user_agent = strdup(c->o.user_agent);
	else
		c->user_agent = strdup("kpgpud/" KPGPUD_VERSION);
	c->o.user_agent = NULL;
	if (c->user_agent == NULL || api_server_names(c) < 0 ||
	    (c->multi = curl_multi_init()) == NULL ||
	    (c->curl_timer = evtimer_new(base, curl_timer_cb, c)) == NULL ||
	    (c->rl_timer = evtimer_new(base, rl_timer_cb, c)) == NULL ||
	    (c->pump_ev = event_new(base, -1, 0, pump_cb, c)) == NULL ||
	    (c->kick_ev = event_new(base, -1, 0, kick_cb, c)) == NULL)
		goto fail;
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, curl_sock_fn);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, curl_timer_fn);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	return c;
fail:
	kube_client_free(c);
	errno = e;
	return NULL;
}

/* Cancel everything and free the client. */
void
kube_client_free(struct kube_client *c)
{
	struct kube_req *x;

	if (c == NULL)
		return;
	while ((x = TAILQ_FIRST(&c->all)) != NULL) {
		TAILQ_REMOVE(&c->all, x, all);
		kx_free(x);
	}
	if (c->multi != NULL)
		curl_multi_cleanup(c->multi);
	if (c->curl_timer != NULL)
		event_free(c->curl_timer);
	if (c->rl_timer != NULL)
		event_free(c->rl_timer);
	if (c->pump_ev != NULL)
		event_free(c->pump_ev);
	if (c->kick_ev != NULL)
		event_free(c->kick_ev);
	free(c->socks);
	free(c->user_agent);
	free(c->url_base);
	curl_slist_free_all(c->connect_to);
	free(c);
}

/* The client's counters. */
const struct kube_metrics *
kube_client_metrics(const struct kube_client *c)
{
	return &c->m;
}

/* The client's HTTP version option. */
int
kube_client_http_version(const struct kube_client *c)
{
	return c->o.http_version;
}

/* Allocate a transfer with its URL, easy handle and timer. */
int
kube_kx_new(struct kube_client *c, const char *method, const char *pq,
    bool watch, struct kube_req **ret)
{
	struct kube_req *x;
	size_t n = pq ? strlen(pq) : 0;

	if (pq == NULL || pq[0] != '/' || n > KUBE_MAX_PATH ||
	    strpbrk(pq, " \r\n\t") != NULL || method == NULL ||
	    strlen(method) > 16 || strpbrk(method, " \r\n:") != NULL)
		return -EINVAL;
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return -ENOMEM;
	x->c = c;
	x->watch = watch;
	x->retry_after_ms = -1;
	if (asprintf(&x->url, "%s%s", c->url_base != NULL ? c->url_base :
	    c->cfg->server, pq) == -1)
		x->url = NULL;
	if (x->url == NULL || (x->method = strdup(method)) == NULL ||
	    (x->easy = curl_easy_init()) == NULL ||
	    (x->timer = evtimer_new(c->base, watch ? kube_watch_stall_cb : backoff_cb,
	    x)) == NULL ||
	    (watch && (x->ws = watchstream_new(c->o.max_line)) == NULL))
		goto fail;
	TAILQ_INSERT_TAIL(&c->all, x, all);
	*ret = x;
	return 0;
fail:
	kx_free(x);
	return -ENOMEM;
}

/* Start an asynchronous request. */
int
kube_request(struct kube_client *c, const char *method,
    const char *path_and_query, const char *content_type, const char *body,
    size_t len, kube_response_cb cb, void *arg, struct kube_req **ret)
{
	struct kube_req *x;
	int r;

	if (content_type != NULL && (strlen(content_type) > 100 ||
	    strpbrk(content_type, "\r\n") != NULL))
		return -EINVAL;
	if ((r = kube_kx_new(c, method, path_and_query, false, &x)) < 0)
		return r;
	if ((content_type && (x->ctype = strdup(content_type)) == NULL) ||
	    (body && (x->body = malloc(len + 1)) == NULL)) {
		TAILQ_REMOVE(&c->all, x, all);
		kx_free(x);
		return -ENOMEM;
	}
	if (body != NULL) {
		memcpy(x->body, body, len);
		x->body[len] = '\0';
		x->blen = len;
	}
	x->cb = cb;
	x->arg = arg;
	kube_kx_submit(x);
	if (ret != NULL)
		*ret = x;
	return 0;
}

/* Hand req's answer out as kube_body_meta() reads it (kube.h). */
void
kube_request_meta(struct kube_req *req)
{
	if (req != NULL && !req->watch)
		req->meta = true;
}

/* Cancel a request without calling back. */
void
kube_request_cancel(struct kube_req *req)
{
	if (req != NULL)
		kube_kx_kill(req);
}
