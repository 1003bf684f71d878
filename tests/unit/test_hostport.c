/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/hostport.c (the one HOST:PORT grammar of every
 * listener) and common/metrics_http.c (the /metrics listener): good forms
 * parse to the right host and port, bad ones fail with a reason and leave
 * the result untouched, and the listener serves /metrics and added paths.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/buffer.h>

#include "common/hostport.h"
#include "common/metrics_http.h"
#include "common/util.h"
#include "tests/unit/test.h"

/* Parse spec with the metrics default; the result, or -errno. */
static int
parse(const char *spec, int flags, struct hostport *hp)
{
	char err[128] = "";
	int r = hostport_parse(spec, "127.0.0.1", flags, hp, err,
	    sizeof(err));

	if (r < 0 && err[0] == '\0')
		test_fail(__FILE__, __LINE__, "%s: no reason", spec);
	return r;
}

TEST(hostport_good_forms)
{
	struct hostport hp;
	char err[64];

	CHECK_INT(parse("9461", 0, &hp), 0);
	CHECK_STR(hp.host, "127.0.0.1");
	CHECK_INT(hp.port, 9461);
	CHECK_INT(parse(":1", 0, &hp), 0);
	CHECK_STR(hp.host, "127.0.0.1");
	CHECK_INT(hp.port, 1);
	CHECK_INT(parse("0.0.0.0:65535", 0, &hp), 0);
	CHECK_STR(hp.host, "0.0.0.0");
	CHECK_INT(hp.port, 65535);
	CHECK_INT(parse("metrics.example.org:80", 0, &hp), 0);
	CHECK_STR(hp.host, "metrics.example.org");
	CHECK_INT(parse("[::1]:9462", 0, &hp), 0);
	CHECK_STR(hp.host, "::1");
	CHECK_INT(hp.port, 9462);
	CHECK_INT(parse("[fe80::1%eth0]:8443", 0, &hp), 0);
	CHECK_STR(hp.host, "fe80::1%eth0");
	CHECK_INT(parse("127.0.0.1:0", HOSTPORT_PORT0, &hp), 0);
	CHECK_INT(hp.port, 0);
	/* an empty default stays empty: "any address" for --listen */
	CHECK_INT(hostport_parse(":8443", "", 0, &hp, err, sizeof(err)), 0);
	CHECK_STR(hp.host, "");
	CHECK_INT(hp.port, 8443);
}

TEST(hostport_bad_inputs)
{
	static const struct {
		const char	*spec;
		int		 r;
	} bad[] = {
		{ "", -EINVAL },		/* no port */
		{ ":", -EINVAL },
		{ "host:", -EINVAL },
		{ "0", -ERANGE },		/* 0 not allowed here */
		{ ":0", -ERANGE },
		{ "65536", -ERANGE },
		{ "99999", -ERANGE },
		{ "123456", -ERANGE },
		{ "00000000009461", -ERANGE },
		{ "-1", -EINVAL },
		{ "+80", -EINVAL },
		{ " 80", -EINVAL },
		{ "80 ", -EINVAL },
		{ "0x50", -EINVAL },
		{ "http", -EINVAL },
		{ "::1:9462", -EINVAL },	/* IPv6 without brackets */
		{ "::1", -EINVAL },
		{ "[::1]", -EINVAL },		/* no :PORT */
		{ "[::1]9462", -EINVAL },
		{ "[::1:9462", -EINVAL },	/* no ']' */
		{ "[]:9462", -EINVAL },		/* empty host */
		{ "a b:80", -EINVAL },
		{ "a/b:80", -EINVAL },
		{ "host\n:80", -EINVAL },
		{ "]:80", -EINVAL },
	};
	struct hostport hp;
	char longspec[300];
	size_t i;

	for (i = 0; i < nitems(bad); i++) {
		memset(&hp, 0x5a, sizeof(hp));
		if (parse(bad[i].spec, 0, &hp) != bad[i].r)
			test_fail(__FILE__, __LINE__, "\"%s\": not %d",
			    bad[i].spec, bad[i].r);
		CHECK_INT(hp.port, 0x5a5a);	/* untouched */
	}
	CHECK_INT(parse("70000", HOSTPORT_PORT0, &hp), -ERANGE);
	memset(longspec, 'h', sizeof(longspec));
	snprintf(longspec + HOSTPORT_HOST_MAX, 10, ":80");
	CHECK_INT(parse(longspec, 0, &hp), 0);		/* 255 bytes: fits */
	snprintf(longspec + HOSTPORT_HOST_MAX + 1, 10, ":80");
	longspec[HOSTPORT_HOST_MAX] = 'h';
	CHECK_INT(parse(longspec, 0, &hp), -EINVAL);	/* 256: too long */
}

TEST(hostport_reasons_are_clear)
{
	struct hostport hp;
	char err[128];

	CHECK_INT(hostport_parse("::1:80", "", 0, &hp, err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, "brackets") != NULL);
	CHECK_INT(hostport_parse("x:70000", "", 0, &hp, err, sizeof(err)),
	    -ERANGE);
	CHECK_STR(err, "port out of range 1..65535");
	CHECK_INT(hostport_parse("x:y", "", 0, &hp, err, sizeof(err)),
	    -EINVAL);
	CHECK_STR(err, "port is not a decimal number");
}

static int render_calls;

/* A fixed rendering for the listener test. */
static int
render(void *arg, struct buf *out)
{
	render_calls++;
	return buf_puts(out, arg);
}

/* An extra path. */
static void
extra_cb(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_reply(req, 204, "No Content", NULL);
}

struct fetch {
	struct event_base *base;
	int		 code;
	struct buf	 body;
};

/* Collect one reply and stop the loop. */
static void
fetch_done(struct evhttp_request *req, void *arg)
{
	struct fetch *f = arg;
	struct evbuffer *in;
	char chunk[256];
	int n;

	if (req != NULL) {
		f->code = evhttp_request_get_response_code(req);
		in = evhttp_request_get_input_buffer(req);
		while ((n = evbuffer_remove(in, chunk, sizeof(chunk))) > 0)
			buf_append(&f->body, chunk, (size_t)n);
	}
	event_base_loopbreak(f->base);
}

/* GET path from the listener's port on base; the status code. */
static int
fetch(struct event_base *base, int port, const char *path, struct buf *body)
{
	struct evhttp_connection *c = evhttp_connection_base_new(base, NULL,
	    "127.0.0.1", (unsigned short)port);
	struct fetch f = { .base = base, .code = -1, .body = BUF_INIT(0) };
	struct evhttp_request *req = evhttp_request_new(fetch_done, &f);

	evhttp_connection_set_timeout(c, 5);
	evhttp_make_request(c, req, EVHTTP_REQ_GET, path);
	event_base_dispatch(base);
	evhttp_connection_free(c);
	if (body != NULL)
		*body = f.body;
	else
		buf_free(&f.body);
	return f.code;
}

TEST(metrics_http_serves)
{
	struct event_base *base = event_base_new();
	struct metrics_http *mh = NULL;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct buf body;
	char err[128];

	REQUIRE(base != NULL);
	CHECK_INT(metrics_http_new(base, "[::1", render, "x 1\n", &mh, err,
	    sizeof(err)), -EINVAL);
	CHECK(mh == NULL);
	REQUIRE(metrics_http_new(base, "127.0.0.1:0", render, "x_total 1\n",
	    &mh, err, sizeof(err)) == 0);
	CHECK_INT(metrics_http_handle(mh, "/readyz", extra_cb, NULL), 0);
	CHECK_INT(metrics_http_handle(mh, "/readyz", extra_cb, NULL), -EEXIST);
	REQUIRE(getsockname(metrics_http_fd(mh), (struct sockaddr *)&sin,
	    &sl) == 0);
	CHECK_INT(fetch(base, ntohs(sin.sin_port), "/metrics", &body), 200);
	CHECK_STR(buf_str(&body), "x_total 1\n");
	CHECK_INT(render_calls, 1);
	buf_free(&body);
	CHECK_INT(fetch(base, ntohs(sin.sin_port), "/readyz", NULL), 204);
	/* the liveness path: answered without rendering the metrics */
	CHECK_INT(fetch(base, ntohs(sin.sin_port), "/healthz", &body), 200);
	CHECK_STR(buf_str(&body), "ok\n");
	CHECK_INT(render_calls, 1);
	buf_free(&body);
	CHECK_INT(fetch(base, ntohs(sin.sin_port), "/other", NULL), 404);
	metrics_http_free(mh);
	metrics_http_free(NULL);
	event_base_free(base);
}
