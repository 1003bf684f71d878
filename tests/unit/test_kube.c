/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kube/kube.c against a real HTTPS server
 * (tests/tools/kube_testserver.py, TLS verified with its own CA): retries
 * with Retry-After and backoff, no retry of 4xx, the rate limiter, token
 * file re-reads, response caps, pagination and watches (events split across
 * chunks, long lines, 410 ERROR events, parse errors, stall detection).
 * Time is only ever checked as a lower bound (a wait that must have
 * happened), never as a deadline.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <event2/event.h>

#include "kube/kube.h"
#include "common/util.h"
#include "tests/unit/test.h"

static char	 srv_dir[256];
static int	 srv_port;
static pid_t	 srv_pid;

/* Kill the test server and remove its directory. */
static void
srv_stop(void)
{
	char cmd[300];

	if (srv_pid > 0) {
		kill(srv_pid, SIGTERM);
		waitpid(srv_pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", srv_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", srv_dir);
}

/* Start the server once; poll (bounded) for its port file. */
static bool
srv_start(void)
{
	char path[300];
	FILE *f;

	if (srv_port > 0)
		return true;
	snprintf(srv_dir, sizeof(srv_dir), "%s/kpgpud-kube.XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(srv_dir) == NULL)
		return false;
	if ((srv_pid = fork()) == 0) {
		execlp("python3", "python3",
		    test_srcpath("tests/tools/kube_testserver.py"), srv_dir,
		    (char *)NULL);
		_exit(127);
	}
	atexit(srv_stop);
	snprintf(path, sizeof(path), "%s/port", srv_dir);
	for (int i = 0; i < 1500 && (f = fopen(path, "r")) == NULL; i++)
		usleep(20000);
	if (f == NULL)
		return false;
	if (fscanf(f, "%d", &srv_port) != 1)
		srv_port = 0;
	fclose(f);
	return srv_port > 0;
}

/* Write a file under the server directory; returns its path. */
static const char *
srv_file(const char *name, const char *text)
{
	static char path[4][300];
	static int n;
	char *p = path[n++ % 4];
	FILE *f;

	snprintf(p, 300, "%s/%s", srv_dir, name);
	if ((f = fopen(p, "w")) == NULL)
		return p;
	fputs(text, f);
	fclose(f);
	return p;
}

/* A config for the server, trusting ca (a file in srv_dir). */
static struct kube_config *
srv_config(const char *ca, const char *user_yaml)
{
	struct kube_config *cfg = NULL;
	char text[2048], err[256];

	snprintf(text, sizeof(text),
	    "apiVersion: v1\nkind: Config\n"
	    "clusters:\n- name: c\n  cluster:\n"
	    "    server: https://127.0.0.1:%d/\n"
	    "    certificate-authority: %s\n"
	    "users:\n- name: u\n  user:\n%s"
	    "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
	    "current-context: x\n", srv_port, ca, user_yaml);
	if (kube_config_parse(text, strlen(text), srv_dir, NULL, 0, &cfg,
	    err, sizeof(err)) < 0)
		fprintf(stderr, "config: %s\n", err);
	return cfg;
}

/* One client on a private loop, with a safety bound on every wait. */
struct fx {
	struct event_base	*base;
	struct kube_config	*cfg;
	struct kube_client	*c;
	struct event		*guard;
	bool			 guard_hit;
};

/* The safety bound fired: stop the loop so the test fails, not hangs. */
static void
guard_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fx *f = arg;

	(void)fd;
	(void)what;
	f->guard_hit = true;
	event_base_loopbreak(f->base);
}

/* Set up a fixture; false if the server or client cannot start. */
static bool
fx_init(struct fx *f, const struct kube_client_opts *o, const char *user)
{
	memset(f, 0, sizeof(*f));
	if (!srv_start())
		return false;
	f->base = event_base_new();
	f->cfg = srv_config("ca.crt", user ? user : "    token: t0ken-1\n");
	if (f->base == NULL || f->cfg == NULL)
		return false;
	f->c = kube_client_new(f->base, f->cfg, o);
	f->guard = evtimer_new(f->base, guard_cb, f);
	return f->c != NULL && f->guard != NULL;
}

/* Run the loop until *flag is set (bounded by the guard). */
static void
fx_run(struct fx *f, const bool *flag)
{
	struct timeval tv = { 30, 0 };

	evtimer_add(f->guard, &tv);
	while (!*flag && !f->guard_hit &&
	    event_base_loop(f->base, EVLOOP_ONCE) == 0)
		;
	evtimer_del(f->guard);
}

/* Tear a fixture down. */
static void
fx_done(struct fx *f)
{
	kube_client_free(f->c);
	kube_config_free(f->cfg);
	if (f->guard != NULL)
		event_free(f->guard);
	if (f->base != NULL)
		event_base_free(f->base);
}

/* What a request callback saw. */
struct res {
	bool		 done;
	long		 status;
	int		 error;
	int		 attempts;
	json_t		*json;
	char		 message[256];
	char		 reason[64];
};

/* Record a response. */
static void
res_cb(const struct kube_response *r, void *arg)
{
	struct res *s = arg;

	s->done = true;
	s->status = r->status;
	s->error = r->error;
	s->attempts = r->attempts;
	s->json = json_incref(r->json);
	snprintf(s->message, sizeof(s->message), "%s", r->message);
	snprintf(s->reason, sizeof(s->reason), "%s", r->reason);
}

/* Issue one GET and wait for it. */
static void
get(struct fx *f, const char *path, struct res *s)
{
	memset(s, 0, sizeof(*s));
	if (kube_request(f->c, "GET", path, NULL, NULL, 0, res_cb, s,
	    NULL) < 0)
		return;
	fx_run(f, &s->done);
}

/*
 * GET path and check the answer: its status, error and attempts, and its
 * message and reason unless NULL. s keeps the JSON (to json_decref).
 */
static void
get_check(struct fx *f, const char *path, struct res *s, long status,
    int error, int attempts, const char *message, const char *reason)
{
	get(f, path, s);
	if (!s->done || s->status != status || s->error != error ||
	    s->attempts != attempts ||
	    (message != NULL && strcmp(s->message, message) != 0) ||
	    (reason != NULL && strcmp(s->reason, reason) != 0))
		test_fail(__FILE__, __LINE__, "GET %s: done %d status %ld "
		    "error %d attempts %d message \"%s\" reason \"%s\"", path,
		    s->done, s->status, s->error, s->attempts, s->message,
		    s->reason);
}

/* Server-side arrival times (seconds) of requests for key. */
static int
hits(struct fx *f, const char *key, double *t, int max)
{
	char path[128];
	struct res s;
	json_t *a;
	size_t i;
	int n = 0;

	snprintf(path, sizeof(path), "/hits/%s", key);
	get(f, path, &s);
	a = json_object_get(s.json, "t");
	for (i = 0; i < json_array_size(a) && n < max; i++)
		t[n++] = json_real_value(json_array_get(a, i));
	json_decref(s.json);
	return n;
}

TEST(kube_get_ok_tls_verified)
{
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, NULL, NULL));
	get_check(&f, "/ok", &s, 200, 0, 1, NULL, NULL);
	CHECK(json_is_true(json_object_get(s.json, "ok")));
	CHECK_INT(kube_client_metrics(f.c)->status[200], 1);
	CHECK_INT(kube_client_metrics(f.c)->requests, 1);
	json_decref(s.json);
	fx_done(&f);
}

/*
 * The HTTP version asked for against the HTTP/1.1-only test server: 1.1
 * and auto (falling back) work over HTTP/1.1; HTTP/2 required is refused
 * and not retried. Metrics of -1 are not checked.
 */
static const struct {
	enum kube_http_version	 version;
	long			 status;
	int			 error;
	const char		*says;		/* in the message */
	int			 http1;
	int			 http2;
} http_versions[] = {
	{ KUBE_HTTP_1_1, 200, 0, "", 1, 0 },
	{ KUBE_HTTP_AUTO, 200, 0, "", 1, -1 },
	{ KUBE_HTTP_2, 0, -EPROTO, "HTTP/2", -1, -1 },
};

TEST(kube_http_versions)
{
	for (size_t i = 0; i < nitems(http_versions); i++) {
		struct kube_client_opts o = {
		    .http_version = http_versions[i].version };
		const struct kube_metrics *m;
		struct fx f;
		struct res s;

		REQUIRE(fx_init(&f, &o, NULL));
		get_check(&f, "/ok", &s, http_versions[i].status,
		    http_versions[i].error, 1, NULL, NULL);
		CHECK(strstr(s.message, http_versions[i].says) != NULL);
		m = kube_client_metrics(f.c);
		if (http_versions[i].http1 >= 0)
			CHECK_INT(m->http1, http_versions[i].http1);
		if (http_versions[i].http2 >= 0)
			CHECK_INT(m->http2, http_versions[i].http2);
		json_decref(s.json);
		fx_done(&f);
	}
}

TEST(kube_wrong_ca_refused_not_retried)
{
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, NULL, NULL));
	kube_client_free(f.c);
	kube_config_free(f.cfg);
	f.cfg = srv_config("otherca.crt", "    token: t0ken-1\n");
	REQUIRE(f.cfg != NULL);
	f.c = kube_client_new(f.base, f.cfg, NULL);
	get_check(&f, "/ok", &s, 0, -EPROTO, 1, NULL, NULL);
	CHECK(s.message[0] != '\0');
	fx_done(&f);
}

/*
 * Retried answers: a 429 waits its Retry-After (1 s, far above the 10 ms
 * backoff); 500s back off with equal jitter (at least half of 200 ms, then
 * half of 400 ms). Each ends in a 200 on the last attempt, every failure
 * counted once.
 */
static const struct {
	int		 backoff_ms;
	const char	*path;
	const char	*key;		/* of the server's hit log */
	int		 code;
	int		 attempts;
	double		 gap[2];	/* at least, between arrivals */
} retried[] = {
	{ 10, "/flaky/ra?code=429&n=1&ra=1", "ra", 429, 2, { 0.95 } },
	{ 200, "/flaky/b500?code=500&n=2", "b500", 500, 3, { 0.095, 0.195 } },
};

TEST(kube_retried_with_retry_after_or_backoff)
{
	for (size_t i = 0; i < nitems(retried); i++) {
		struct kube_client_opts o = {
		    .backoff_base_ms = retried[i].backoff_ms };
		int n = retried[i].attempts;
		struct fx f;
		struct res s;
		double t[4];

		REQUIRE(fx_init(&f, &o, NULL));
		get_check(&f, retried[i].path, &s, 200, 0, n, NULL, NULL);
		CHECK_INT(json_integer_value(json_object_get(s.json,
		    "attempt")), n);
		CHECK_INT(kube_client_metrics(f.c)->status[retried[i].code],
		    n - 1);
		CHECK_INT(kube_client_metrics(f.c)->retries, n - 1);
		REQUIRE(hits(&f, retried[i].key, t, 4) == n);
		for (int k = 0; k + 1 < n; k++)
			if (t[k + 1] - t[k] < retried[i].gap[k])
				test_fail(__FILE__, __LINE__, "%s: attempt %d "
				    "after %.3f s", retried[i].path, k + 2,
				    t[k + 1] - t[k]);
		json_decref(s.json);
		fx_done(&f);
	}
}

TEST(kube_retries_exhausted)
{
	struct kube_client_opts o = { .backoff_base_ms = 5,
	    .max_retries = 2 };
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, &o, NULL));
	get_check(&f, "/flaky/ex?code=503&n=100", &s, 503, 0, 3, "flaky",
	    "InternalError");
	json_decref(s.json);
	fx_done(&f);
}

TEST(kube_4xx_not_retried)
{
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, NULL, NULL));
	get_check(&f, "/status/404", &s, 404, 0, 1, "status 404", "Test");
	json_decref(s.json);
	get_check(&f, "/status/409", &s, 409, 0, 1, NULL, NULL);
	json_decref(s.json);
	get_check(&f, "/plain404", &s, 404, 0, 1, "404 page not found", NULL);
	CHECK(s.json == NULL);
	CHECK_INT(kube_client_metrics(f.c)->retries, 0);
	fx_done(&f);
}

TEST(kube_qps_limit)
{
	struct kube_client_opts o = { .qps = 20, .burst = 1 };
	struct res s[5];
	struct fx f;
	double t[8] = { 0 };
	bool all = false;

	REQUIRE(fx_init(&f, &o, NULL));
	memset(s, 0, sizeof(s));
	for (int i = 0; i < 5; i++)
		REQUIRE(kube_request(f.c, "GET", "/ok/qps", NULL, NULL, 0,
		    res_cb, &s[i], NULL) == 0);
	/* each one: on a loaded machine a later one may finish first */
	for (int i = 0; i < 5; i++)
		fx_run(&f, &s[i].done);
	for (int i = 0; i < 5; i++) {
		CHECK_INT(s[i].status, 200);
		json_decref(s[i].json);
	}
	all = true;
	CHECK(all);
	/*
	 * Behaviour, not time: requests beyond the burst waited for the
	 * limiter (how long is test_tokenbucket's business, on a made-up
	 * clock), and every one reached the server once.
	 */
	CHECK(kube_client_metrics(f.c)->throttled >= 1);
	CHECK_INT(hits(&f, "qps", t, 8), 5);
	printf("# 5 requests at 20/s burst 1: throttled=%llu waited_ms=%llu "
	    "server_span_ms=%.0f\n",
	    (unsigned long long)kube_client_metrics(f.c)->throttled,
	    (unsigned long long)kube_client_metrics(f.c)->throttled_ms,
	    (t[4] - t[0]) * 1000);
	fx_done(&f);
}

TEST(kube_post_body_headers_token)
{
	struct kube_client_opts o = { .user_agent = "kpgpud-test/1" };
	const char *b = "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}";
	struct fx f;
	struct res s = { 0 };

	REQUIRE(fx_init(&f, &o, NULL));
	REQUIRE(kube_request(f.c, "PATCH", "/echo",
	    "application/merge-patch+json", b, strlen(b), res_cb, &s,
	    NULL) == 0);
	fx_run(&f, &s.done);
	CHECK_INT(s.status, 200);
	CHECK_STR(json_string_value(json_object_get(s.json, "method")),
	    "PATCH");
	CHECK_STR(json_string_value(json_object_get(s.json, "body")), b);
	CHECK_STR(json_string_value(json_object_get(s.json, "ctype")),
	    "application/merge-patch+json");
	CHECK_STR(json_string_value(json_object_get(s.json, "auth")),
	    "Bearer t0ken-1");
	CHECK_STR(json_string_value(json_object_get(s.json, "ua")),
	    "kpgpud-test/1");
	json_decref(s.json);
	fx_done(&f);
}

/* The Authorization header the server saw for one request. */
static void
auth_seen(struct fx *f, char *buf, size_t len)
{
	struct res s;

	get(f, "/echo", &s);
	snprintf(buf, len, "%s",
	    json_string_value(json_object_get(s.json, "auth")) ?
	    json_string_value(json_object_get(s.json, "auth")) : "");
	json_decref(s.json);
}

TEST(kube_token_file_reread_on_change)
{
	struct timespec ts[2] = { { 1000000, 0 }, { 1000000, 0 } };
	const char *tf;
	char user[400], a[128];
	struct fx f;

	tf = srv_file("token", "first-token\n");
	utimensat(AT_FDCWD, tf, ts, 0);
	snprintf(user, sizeof(user), "    tokenFile: %s\n", tf);
	REQUIRE(fx_init(&f, NULL, user));
	auth_seen(&f, a, sizeof(a));
	CHECK_STR(a, "Bearer first-token");
	/* same size, new mtime: still noticed */
	srv_file("token", "other-token\n");
	auth_seen(&f, a, sizeof(a));
	CHECK_STR(a, "Bearer other-token");
	CHECK_INT(kube_client_metrics(f.c)->token_reloads, 1);
	auth_seen(&f, a, sizeof(a));
	CHECK_STR(a, "Bearer other-token");
	CHECK_INT(kube_client_metrics(f.c)->token_reloads, 1);
	fx_done(&f);
}

TEST(kube_response_cap)
{
	struct kube_client_opts o = { .max_response = 1000 };
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, &o, NULL));
	get_check(&f, "/big?n=5000", &s, 200, -EMSGSIZE, 1,
	    "response body over the size cap", NULL);
	CHECK(s.json == NULL);
	get_check(&f, "/big?n=500", &s, 200, 0, 1, NULL, NULL);
	json_decref(s.json);
	fx_done(&f);
}

TEST(kube_connection_refused_retried)
{
	struct kube_client_opts o = { .backoff_base_ms = 5,
	    .max_retries = 1 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct fx f;
	struct res s;
	int fd;

	REQUIRE(fx_init(&f, &o, NULL));
	/* a port that was free a moment ago and has no listener */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	close(fd);
	free(f.cfg->server);
	REQUIRE(asprintf(&f.cfg->server, "https://127.0.0.1:%d",
	    ntohs(sa.sin_port)) > 0);
	get_check(&f, "/ok", &s, 0, -ECONNREFUSED, 2, NULL, NULL);
	CHECK_INT(kube_client_metrics(f.c)->status[0], 2);
	fx_done(&f);
}

TEST(kube_cancel_no_callback)
{
	struct fx f;
	struct res s1 = { 0 }, s2 = { 0 }, s3;
	struct kube_req *r1, *r3;

	REQUIRE(fx_init(&f, NULL, NULL));
	REQUIRE(kube_request(f.c, "GET", "/ok", NULL, NULL, 0, res_cb, &s1,
	    &r1) == 0);
	kube_request_cancel(r1);
	/* cancelled while waiting for a retry */
	memset(&s3, 0, sizeof(s3));
	REQUIRE(kube_request(f.c, "GET", "/flaky/cx?code=500&n=100", NULL,
	    NULL, 0, res_cb, &s3, &r3) == 0);
	REQUIRE(kube_request(f.c, "GET", "/ok", NULL, NULL, 0, res_cb, &s2,
	    NULL) == 0);
	fx_run(&f, &s2.done);
	kube_request_cancel(r3);
	CHECK(!s1.done);
	CHECK(!s3.done);
	CHECK_INT(s2.status, 200);
	json_decref(s2.json);
	fx_done(&f);
}

/* Send body to /raw (answered as it is), meta: as kube_request_meta(). */
static void
raw(struct fx *f, bool meta, const char *body, size_t len, struct res *s)
{
	struct kube_req *req;

	memset(s, 0, sizeof(*s));
	if (kube_request(f->c, "POST", "/raw?code=409", "application/json",
	    body, len, res_cb, s, &req) < 0)
		return;
	if (meta)
		kube_request_meta(req);
	fx_run(f, &s->done);
}

/*
 * Answers as kube_request_meta() hands them out: of an object, only the
 * string members kind, apiVersion, message, reason and metadata's name,
 * namespace, uid and resourceVersion, each as the whole parse has it
 * (escapes, the last of duplicates); what is not JSON is NULL and a
 * top-level array or what only jansson accepts (a NUL byte after a
 * number) is parsed whole.
 */
static const struct {
	const char	*body;
	size_t		 len;		/* 0: strlen(body) */
	const char	*want;		/* the meta answer; NULL: no JSON */
} meta_cases[] = {
	{ "{\"kind\":\"ResourceQuota\",\"apiVersion\":\"v1\",\"metadata\":"
	  "{\"name\":\"q\",\"namespace\":\"ns\",\"uid\":\"u-1\","
	  "\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\"}},"
	  "\"spec\":{\"hard\":{\"x\":\"1\"}}}", 0,
	  "{\"kind\":\"ResourceQuota\",\"apiVersion\":\"v1\",\"metadata\":"
	  "{\"name\":\"q\",\"namespace\":\"ns\",\"uid\":\"u-1\","
	  "\"resourceVersion\":\"7\"}}" },
	{ " {\"metadata\":{\"name\":\"a\\u00e9\\\"b\\/\"},\"kind\":\"X\","
	  "\"metadata\":{\"name\":\"last\\ud83d\\ude00\"}} ", 0,
	  "{\"kind\":\"X\",\"metadata\":{\"name\":\"last\\ud83d\\ude00\"}}" },
	{ "{\"kind\":5,\"apiVersion\":null,\"metadata\":\"m\","
	  "\"message\":[\"x\"],\"reason\":\"R\"}", 0,
	  "{\"reason\":\"R\"}" },
	{ "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
	  "\"status\":\"Failure\",\"message\":\"taken\","
	  "\"reason\":\"AlreadyExists\",\"code\":409}", 0,
	  "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
	  "\"message\":\"taken\",\"reason\":\"AlreadyExists\"}" },
	{ "{\"kind\":\"X\",", 0, NULL },
	{ "{\"kind\":\"X\"} x", 0, NULL },
	{ "{\"kind\":\"\\u0000\"}", 0, NULL },
	{ "[{\"kind\":\"X\"}]", 0, "[{\"kind\":\"X\"}]" },
	{ "{\"kind\":\"X\",\"n\":1\0}", 19, "{\"kind\":\"X\",\"n\":1}" },
};

TEST(kube_request_meta_answer)
{
	struct fx f;
	struct res s, whole;
	json_t *want;

	REQUIRE(fx_init(&f, NULL, NULL));
	for (size_t i = 0; i < nitems(meta_cases); i++) {
		const char *b = meta_cases[i].body;
		size_t len = meta_cases[i].len ? meta_cases[i].len :
		    strlen(b);

		want = meta_cases[i].want ? json_loads(meta_cases[i].want, 0,
		    NULL) : NULL;
		REQUIRE(meta_cases[i].want == NULL || want != NULL);
		raw(&f, true, b, len, &s);
		raw(&f, false, b, len, &whole);
		CHECK_INT(s.status, 409);
		if (!json_equal(s.json, want) && (s.json != NULL ||
		    want != NULL)) {
			char *got = s.json ? json_dumps(s.json, 0) : NULL;

			test_fail(__FILE__, __LINE__, "case %zu: got %s", i,
			    got ? got : "NULL");
			free(got);
		}
		/* JSON exactly when the whole parse has JSON; same texts */
		CHECK((s.json == NULL) == (whole.json == NULL));
		CHECK_STR(s.message, whole.message);
		CHECK_STR(s.reason, whole.reason);
		json_decref(want);
		json_decref(s.json);
		json_decref(whole.json);
	}
	fx_done(&f);
}

/*
 * The tree of an answer is json_loadb()'s: same JSON or none, the same
 * members in the same order, the same numbers (dumped at 17 digits).
 * jscan_load() builds it (tests/unit/test_jscan.c: every edge of the
 * grammar); this checks the client hands out that tree for a body it
 * builds, one it leaves to jansson (a NUL after a number) and one that is
 * not JSON.
 */
TEST(kube_answer_tree_as_jansson)
{
	static const struct {
		const char	*body;
		size_t		 len;
	} cases[] = {
		{ "{\"a\":[1,-0.0,2.5e-400,\"\\u00e9\"],"
		  "\"a\":{\"b\":null}}", 0 },
		{ "{\"kind\":\"X\",\"n\":1\0}", 19 },
		{ "[1,]", 0 },
	};
	size_t fl = JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(17);
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, NULL, NULL));
	for (size_t i = 0; i < nitems(cases); i++) {
		const char *body = cases[i].body;
		size_t len = cases[i].len ? cases[i].len : strlen(body);
		json_t *want = json_loadb(body, len, 0, NULL);
		char *a, *b;

		memset(&s, 0, sizeof(s));
		if (kube_request(f.c, "POST", "/raw", "application/json", body,
		    len, res_cb, &s, NULL) == 0)
			fx_run(&f, &s.done);
		a = s.json ? json_dumps(s.json, fl) : NULL;
		b = want ? json_dumps(want, fl) : NULL;
		CHECK_CASE(s.done && (a == NULL) == (b == NULL) &&
		    (a == NULL || strcmp(a, b) == 0), body);
		CHECK_CASE((b == NULL) == (i == 2), body);
		free(a);
		free(b);
		json_decref(want);
		json_decref(s.json);
	}
	fx_done(&f);
}

TEST(kube_request_bad_args)
{
	struct fx f;
	struct res s;

	REQUIRE(fx_init(&f, NULL, NULL));
	CHECK_INT(kube_request(f.c, "GET", "no-slash", NULL, NULL, 0, res_cb,
	    &s, NULL), -EINVAL);
	CHECK_INT(kube_request(f.c, "GET", "/a b", NULL, NULL, 0, res_cb,
	    &s, NULL), -EINVAL);
	CHECK_INT(kube_request(f.c, "GET\r\nX: y", "/a", NULL, NULL, 0,
	    res_cb, &s, NULL), -EINVAL);
	CHECK_INT(kube_request(f.c, "POST", "/a", "x\r\ny", "{}", 2, res_cb,
	    &s, NULL), -EINVAL);
	fx_done(&f);
}

TEST(kube_sync_helper)
{
	struct kube_config *cfg;
	json_t *j = NULL;
	char err[256];
	long st = 0;

	REQUIRE(srv_start());
	REQUIRE((cfg = srv_config("ca.crt", "    token: t\n")) != NULL);
	CHECK_INT(kube_request_sync(cfg, NULL, "GET", "/ok", NULL, NULL, 0,
	    &st, &j, err, sizeof(err)), 0);
	CHECK_INT(st, 200);
	CHECK(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	kube_config_free(cfg);
}

TEST(kube_path_builder)
{
	char *p = NULL;

	REQUIRE(kube_path(&p, "/api/v1/namespaces", "watch", "true",
	    "resourceVersion", "", "labelSelector", "a=b,c in (d)",
	    "timeoutSeconds", "300", (char *)NULL) == 0);
	CHECK_STR(p, "/api/v1/namespaces?watch=true&labelSelector="
	    "a%3Db%2Cc%20in%20%28d%29&timeoutSeconds=300");
	free(p);
	REQUIRE(kube_path(&p, "/x?a=1", "b", "2", (char *)NULL) == 0);
	CHECK_STR(p, "/x?a=1&b=2");
	free(p);
}

/* What a list saw. */
struct lres {
	bool	 done;
	int	 pages;
	int	 items;
	int	 most;		/* items in the largest page */
	long	 status;
	int	 error;
	char	 rv[32];
	bool	 rv_null;
};

/* Count a page. */
static void
lpage_cb(json_t *items, void *arg)
{
	struct lres *l = arg;

	l->pages++;
	l->items += (int)json_array_size(items);
	if ((int)json_array_size(items) > l->most)
		l->most = (int)json_array_size(items);
}

/* Record the end of a list. */
static void
lend_cb(const struct kube_response *r, const char *rv, void *arg)
{
	struct lres *l = arg;

	l->done = true;
	l->status = r->status;
	l->error = r->error;
	l->rv_null = rv == NULL;
	snprintf(l->rv, sizeof(l->rv), "%s", rv ? rv : "");
}

TEST(kube_list_paginated)
{
	struct fx f;
	struct lres l = { 0 };

	REQUIRE(fx_init(&f, NULL, NULL));
	REQUIRE(kube_list_start(f.c, "/list", NULL, 3, "0", lpage_cb,
	    lend_cb, &l, NULL) == 0);
	fx_run(&f, &l.done);
	CHECK_INT(l.status, 200);
	CHECK_INT(l.pages, 3);
	CHECK_INT(l.items, 7);
	CHECK_STR(l.rv, "42");
	fx_done(&f);
}

/*
 * A page over the byte cap is asked for again with half the count, and the
 * list still ends with every item; one item over the cap fails the list.
 */
TEST(kube_list_page_over_cap_halved)
{
	struct kube_client_opts o = { .max_response = 5000 };
	struct fx f;
	struct lres l = { 0 }, one = { 0 };

	REQUIRE(fx_init(&f, &o, NULL));
	/* 7 items of ~1,550 bytes: at most 3 fit in 5,000 */
	REQUIRE(kube_list_start(f.c, "/list", "pad=1500", 7, NULL, lpage_cb,
	    lend_cb, &l, NULL) == 0);
	fx_run(&f, &l.done);
	CHECK_INT(l.status, 200);
	CHECK_INT(l.error, 0);
	CHECK_INT(l.items, 7);
	CHECK(l.most >= 1 && l.most <= 3);
	CHECK_STR(l.rv, "42");
	REQUIRE(kube_list_start(f.c, "/list", "pad=6000", 7, NULL, lpage_cb,
	    lend_cb, &one, NULL) == 0);
	fx_run(&f, &one.done);
	CHECK(one.done);
	CHECK_INT(one.error, -EMSGSIZE);
	CHECK_INT(one.items, 0);
	fx_done(&f);
}

TEST(kube_list_continue_expired)
{
	struct fx f;
	struct lres l = { 0 };

	REQUIRE(fx_init(&f, NULL, NULL));
	REQUIRE(kube_list_start(f.c, "/list", "expire=1", 3, NULL, lpage_cb,
	    lend_cb, &l, NULL) == 0);
	fx_run(&f, &l.done);
	CHECK_INT(l.status, 410);
	CHECK_INT(l.pages, 1);
	CHECK(l.rv_null);
	fx_done(&f);
}

/* What a watch saw. */
struct wres {
	bool			 ended;
	int			 n;
	enum watch_type		 types[8];
	char			 names[8][16];
	char			 rvs[8][16];
	size_t			 datalen[8];
	bool			 iee;
	enum kube_watch_reason	 reason;
	long			 status;
	int			 error;
	char			 message[256];
	struct kube_watch	*w;
	bool			 stop_after_first;
};

/* Record one event. */
static void
wev_cb(const struct watch_event *ev, void *arg)
{
	struct wres *w = arg;
	json_t *md = json_object_get(ev->object, "metadata");
	const char *nm = json_string_value(json_object_get(md, "name"));

	if (w->n < 8) {
		w->types[w->n] = ev->type;
		snprintf(w->names[w->n], 16, "%s", nm ? nm : "");
		snprintf(w->rvs[w->n], 16, "%s",
		    ev->resource_version ? ev->resource_version : "");
		w->datalen[w->n] = json_string_length(json_object_get(
		    ev->object, "data"));
	}
	if (ev->type == WATCH_BOOKMARK)
		w->iee = ev->initial_events_end;
	w->n++;
	if (w->stop_after_first) {
		kube_watch_stop(w->w);
		w->ended = true;
	}
}

/* Record the end of a watch. */
static void
wend_cb(const struct kube_watch_end *e, void *arg)
{
	struct wres *w = arg;

	w->ended = true;
	w->reason = e->reason;
	w->status = e->status;
	w->error = e->error;
	snprintf(w->message, sizeof(w->message), "%s", e->message);
}

/* Run one watch script to its end. */
static void
watch_run(struct fx *f, const char *path, struct wres *w)
{
	bool stop = w->stop_after_first;

	memset(w, 0, sizeof(*w));
	w->stop_after_first = stop;
	if (kube_watch_start(f->c, path, wev_cb, wend_cb, w, &w->w) < 0)
		return;
	fx_run(f, &w->ended);
}

/* More of what the split script delivers: the three kinds, in order. */
static void
split_more(struct fx *f, const struct wres *w)
{
	CHECK_INT(w->types[0], WATCH_ADDED);
	CHECK_INT(w->types[1], WATCH_MODIFIED);
	CHECK_INT(w->types[2], WATCH_DELETED);
	CHECK_STR(w->names[1], "b");
	CHECK_STR(w->rvs[2], "12");
	CHECK_INT(kube_client_metrics(f->c)->watch_events, 3);
}

/* A 300000-byte line under the default cap, and the event after it. */
static void
big_more(struct fx *f, const struct wres *w)
{
	(void)f;
	CHECK_INT(w->datalen[0], 300000);
	CHECK_STR(w->names[1], "after");
}

/* The BOOKMARK that ends the initial events. */
static void
bookmark_more(struct fx *f, const struct wres *w)
{
	(void)f;
	CHECK_INT(w->types[1], WATCH_BOOKMARK);
	CHECK_STR(w->rvs[1], "99");
	CHECK(w->iee);
}

/* The stall is counted. */
static void
stall_more(struct fx *f, const struct wres *w)
{
	(void)w;
	CHECK_INT(kube_client_metrics(f->c)->watch_stalls, 1);
}

/*
 * Watch scripts of the test server (with a line cap or a stall bound when
 * not 0): the events seen, how the watch ended (status -1: not checked;
 * message NULL: not checked) and what more to check.
 */
static const struct {
	const char		*path;
	size_t			 max_line;
	int			 stall_ms;
	int			 n;
	enum kube_watch_reason	 reason;
	long			 status;
	int			 error;
	const char		*message;
	void			(*more)(struct fx *, const struct wres *);
} watch_scripts[] = {
	/* events split across chunks */
	{ "/watch/split", 0, 0, 3, KUBE_WATCH_CLOSED, -1, 0, NULL,
	  split_more },
	/* a long line, and the same over a line cap */
	{ "/watch/big", 0, 0, 2, KUBE_WATCH_CLOSED, -1, 0, NULL, big_more },
	{ "/watch/big", 100000, 0, 0, KUBE_WATCH_PARSE_ERROR, -1, -EMSGSIZE,
	  NULL, NULL },
	/* the 410 ERROR event */
	{ "/watch/expired", 0, 0, 1, KUBE_WATCH_EXPIRED, 410, 0,
	  "too old resource version: 5 (120)", NULL },
	{ "/watch/bookmark", 0, 0, 2, KUBE_WATCH_CLOSED, -1, 0, NULL,
	  bookmark_more },
	/* parse errors */
	{ "/watch/garbage", 0, 0, 1, KUBE_WATCH_PARSE_ERROR, -1, -EBADMSG,
	  NULL, NULL },
	{ "/watch/truncated", 0, 0, 1, KUBE_WATCH_PARSE_ERROR, -1, -EPROTO,
	  NULL, NULL },
	{ "/watch/empty", 0, 0, 0, KUBE_WATCH_CLOSED, -1, 0, NULL, NULL },
	/* an HTTP error instead of a stream */
	{ "/status/403", 0, 0, 0, KUBE_WATCH_HTTP_ERROR, 403, 0, "status 403",
	  NULL },
	{ "/watch/stall", 0, 300, 1, KUBE_WATCH_STALLED, -1, -ETIMEDOUT, NULL,
	  stall_more },
};

TEST(kube_watch_scripts)
{
	for (size_t i = 0; i < nitems(watch_scripts); i++) {
		struct kube_client_opts o = {
		    .max_line = watch_scripts[i].max_line,
		    .watch_stall_ms = watch_scripts[i].stall_ms };
		struct fx f;
		struct wres w = { 0 };

		REQUIRE(fx_init(&f, &o, NULL));
		watch_run(&f, watch_scripts[i].path, &w);
		if (w.n != watch_scripts[i].n ||
		    w.reason != watch_scripts[i].reason ||
		    w.error != watch_scripts[i].error ||
		    (watch_scripts[i].status >= 0 &&
		    w.status != watch_scripts[i].status) ||
		    (watch_scripts[i].message != NULL &&
		    strcmp(w.message, watch_scripts[i].message) != 0))
			test_fail(__FILE__, __LINE__, "%s: %d events, end %d "
			    "status %ld error %d \"%s\"", watch_scripts[i].path,
			    w.n, (int)w.reason, w.status, w.error, w.message);
		if (watch_scripts[i].more != NULL)
			watch_scripts[i].more(&f, &w);
		fx_done(&f);
	}
}

TEST(kube_watch_stop_from_callback)
{
	struct fx f;
	struct wres w = { .stop_after_first = true };
	struct res s;

	REQUIRE(fx_init(&f, NULL, NULL));
	watch_run(&f, "/watch/split", &w);
	CHECK_INT(w.n, 1);
	CHECK_INT(w.reason, 0);	/* on_end not called */
	/* the client still works afterwards */
	get_check(&f, "/ok", &s, 200, 0, 1, NULL, NULL);
	json_decref(s.json);
	CHECK_INT(w.n, 1);
	fx_done(&f);
}

/* A list that cancels itself from its first page. */
struct lcancel {
	struct lres		 l;	/* first: lend_cb gets &lc->l */
	struct kube_list	*h;
	struct kube_client	*c;
	uint64_t		 requests_in_cb;
	bool			 paged;
};

/* Cancel the list from its first page. */
static void
lpage_cancel_cb(json_t *items, void *arg)
{
	struct lcancel *lc = arg;

	(void)items;
	lc->l.pages++;
	lc->paged = true;
	lc->requests_in_cb = kube_client_metrics(lc->c)->requests;
	kube_list_cancel(lc->h);
}

TEST(kube_list_cancel_from_page)
{
	struct lcancel lc;
	struct fx f;

	memset(&lc, 0, sizeof(lc));
	REQUIRE(fx_init(&f, NULL, NULL));
	lc.c = f.c;
	REQUIRE(kube_list_start(f.c, "/list", NULL, 3, NULL, lpage_cancel_cb,
	    lend_cb, &lc, &lc.h) == 0);
	fx_run(&f, &lc.paged);
	CHECK_INT(lc.l.pages, 1);
	/* page 2 was asked for before page 1 was handed out (pipelined)... */
	CHECK_INT(lc.requests_in_cb, 2);
	/* ...and the cancel dropped it: no page 2, no end */
	CHECK_INT(kube_client_metrics(f.c)->requests, 2);
	CHECK_INT(lc.l.pages, 1);
	CHECK(!lc.l.done);
	fx_done(&f);
}
