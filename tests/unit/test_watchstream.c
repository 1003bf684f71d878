/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kube/watchstream.c: events split across reads at every
 * byte boundary, long lines up to the cap, oversized / malformed /
 * truncated lines as errors, bookmarks and the 410 ERROR event.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kube/watchstream.h"
#include "tests/unit/test.h"

static const char three[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":"
    "{\"name\":\"a\",\"resourceVersion\":\"10\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":"
    "{\"name\":\"b\",\"resourceVersion\":\"11\"}}}\r\n"
    "\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":"
    "{\"name\":\"c\",\"resourceVersion\":\"12\"}}}\n";

/* Feed buf in pieces of the given size, collect events; returns count or
 * the first error. names gets the concatenated object names. */
static int
run(struct watchstream *ws, const char *buf, size_t len, size_t piece,
    char *names, size_t nlen)
{
	struct watch_event ev;
	size_t off = 0;
	int n = 0, r;

	names[0] = '\0';
	while (off < len) {
		size_t k = len - off < piece ? len - off : piece;

		if ((r = watchstream_feed(ws, buf + off, k)) < 0)
			return r;
		off += k;
		while ((r = watchstream_next(ws, &ev)) == 1) {
			json_t *md = json_object_get(ev.object, "metadata");
			const char *nm = json_string_value(
			    json_object_get(md, "name"));

			strncat(names, nm ? nm : "?", nlen - strlen(names) - 1);
			n++;
			watch_event_clear(&ev);
		}
		if (r < 0)
			return r;
	}
	return n;
}

TEST(ws_split_at_every_boundary)
{
	size_t len = strlen(three);
	char names[64];

	for (size_t piece = 1; piece <= len; piece++) {
		struct watchstream *ws = watchstream_new(0);

		REQUIRE(ws != NULL);
		CHECK_INT(run(ws, three, len, piece, names, sizeof(names)), 3);
		CHECK_STR(names, "abc");
		CHECK_INT(watchstream_end(ws), 0);
		CHECK_INT(watchstream_count(ws), 3);
		watchstream_free(ws);
	}
}

TEST(ws_split_in_two_everywhere)
{
	size_t len = strlen(three);

	for (size_t cut = 0; cut <= len; cut++) {
		struct watchstream *ws = watchstream_new(0);
		struct watch_event ev;
		int n = 0, r;

		REQUIRE(ws != NULL);
		CHECK_INT(watchstream_feed(ws, three, cut), 0);
		while ((r = watchstream_next(ws, &ev)) == 1) {
			n++;
			watch_event_clear(&ev);
		}
		CHECK_INT(r, 0);
		CHECK_INT(watchstream_feed(ws, three + cut, len - cut), 0);
		while ((r = watchstream_next(ws, &ev)) == 1) {
			n++;
			watch_event_clear(&ev);
		}
		CHECK_INT(r, 0);
		CHECK_INT(n, 3);
		watchstream_free(ws);
	}
}

TEST(ws_event_fields)
{
	struct watch_event ev;
	char err[128];
	const char *l = "{\"type\":\"ADDED\",\"object\":{\"metadata\":"
	    "{\"resourceVersion\":\"77\"}}}";

	REQUIRE(watchstream_decode_line(l, strlen(l), &ev, err,
	    sizeof(err)) == 0);
	CHECK_INT(ev.type, WATCH_ADDED);
	CHECK_STR(ev.resource_version, "77");
	CHECK(!ev.expired);
	CHECK_STR(watch_type_name(ev.type), "ADDED");
	watch_event_clear(&ev);
	CHECK(ev.object == NULL);
}

/* A line whose object carries a string of n bytes. */
static char *
long_line(size_t n, size_t *ret_len)
{
	static const char pre[] = "{\"type\":\"ADDED\",\"object\":{\"d\":\"";
	static const char post[] = "\"}}\n";
	size_t len = strlen(pre) + n + strlen(post);
	char *s = malloc(len + 1);

	if (s == NULL)
		return NULL;
	memcpy(s, pre, strlen(pre));
	memset(s + strlen(pre), 'x', n);
	memcpy(s + strlen(pre) + n, post, strlen(post) + 1);
	*ret_len = len;
	return s;
}

TEST(ws_long_line_up_to_cap)
{
	size_t len;
	char *s = long_line(1 << 20, &len);
	char names[8];
	struct watchstream *ws;

	REQUIRE(s != NULL);
	/* exactly at the cap (the newline is not counted) */
	ws = watchstream_new(len - 1);
	REQUIRE(ws != NULL);
	CHECK_INT(run(ws, s, len, 4096, names, sizeof(names)), 1);
	watchstream_free(ws);
	/* one byte over */
	ws = watchstream_new(len - 2);
	REQUIRE(ws != NULL);
	CHECK_INT(run(ws, s, len, 4096, names, sizeof(names)), -EMSGSIZE);
	CHECK(strstr(watchstream_error(ws), "longer than") != NULL);
	/* errors stick */
	CHECK_INT(watchstream_feed(ws, "\n", 1), -EMSGSIZE);
	watchstream_free(ws);
	/* over the cap in one piece, newline included */
	ws = watchstream_new(1000);
	REQUIRE(ws != NULL);
	CHECK_INT(run(ws, s, len, len, names, sizeof(names)), -EMSGSIZE);
	watchstream_free(ws);
	free(s);
}

TEST(ws_oversized_without_newline_refused_early)
{
	struct watchstream *ws = watchstream_new(100);
	char buf[64];
	struct watch_event ev;
	int r = 0;

	REQUIRE(ws != NULL);
	memset(buf, ' ', sizeof(buf));
	buf[0] = '{';
	for (int i = 0; i < 100 && r == 0; i++) {
		r = watchstream_feed(ws, buf, sizeof(buf));
		if (r == 0 && watchstream_next(ws, &ev) < 0)
			r = -1;
	}
	CHECK_INT(r, -EMSGSIZE);
	watchstream_free(ws);
}

TEST(ws_malformed_is_error)
{
	static const char *bad[] = {
		"{not json}\n",
		"[1,2]\n",
		"{\"type\":\"ADDED\"}\n",
		"{\"type\":\"ADDED\",\"object\":[]}\n",
		"{\"type\":\"BOGUS\",\"object\":{}}\n",
		"{\"type\":7,\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"object\":{}} trailing\n",
		"{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"object\":{\"a\":\"\\u0000\"}}\n",
	};
	char names[8];

	for (size_t i = 0; i < nitems(bad); i++) {
		struct watchstream *ws = watchstream_new(0);

		REQUIRE(ws != NULL);
		CHECK_INT(run(ws, bad[i], strlen(bad[i]), 3, names,
		    sizeof(names)), -EBADMSG);
		CHECK(watchstream_error(ws)[0] != '\0');
		watchstream_free(ws);
	}
}

TEST(ws_deep_nesting_refused)
{
	char *s = malloc(20000);
	size_t o = 0;
	char err[128];
	struct watch_event ev;

	REQUIRE(s != NULL);
	o += (size_t)sprintf(s, "{\"type\":\"ADDED\",\"object\":{\"a\":");
	for (int i = 0; i < 5000; i++)
		s[o++] = '[';
	for (int i = 0; i < 5000; i++)
		s[o++] = ']';
	o += (size_t)sprintf(s + o, "}}");
	CHECK_INT(watchstream_decode_line(s, o, &ev, err, sizeof(err)),
	    -EBADMSG);
	CHECK(strstr(err, "nested") != NULL);
	free(s);
}

TEST(ws_truncated_last_line)
{
	struct watchstream *ws = watchstream_new(0);
	char names[8];
	const char *t = "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADD";

	REQUIRE(ws != NULL);
	CHECK_INT(run(ws, t, strlen(t), 5, names, sizeof(names)), 1);
	CHECK_INT(watchstream_end(ws), -EPROTO);
	watchstream_free(ws);
	/* trailing whitespace is not a truncated line */
	ws = watchstream_new(0);
	REQUIRE(ws != NULL);
	CHECK_INT(watchstream_feed(ws, " \r\n  ", 5), 0);
	CHECK_INT(watchstream_end(ws), 0);
	watchstream_free(ws);
}

TEST(ws_bookmark)
{
	struct watch_event ev;
	char err[128];
	const char *b = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\","
	    "\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"12746\","
	    "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}";
	const char *p = "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":"
	    "{\"resourceVersion\":\"5\"}}}";

	REQUIRE(watchstream_decode_line(b, strlen(b), &ev, err,
	    sizeof(err)) == 0);
	CHECK_INT(ev.type, WATCH_BOOKMARK);
	CHECK_STR(ev.resource_version, "12746");
	CHECK(ev.initial_events_end);
	watch_event_clear(&ev);
	REQUIRE(watchstream_decode_line(p, strlen(p), &ev, err,
	    sizeof(err)) == 0);
	CHECK(!ev.initial_events_end);
	watch_event_clear(&ev);
}

TEST(ws_error_410_expired)
{
	struct watch_event ev;
	char err[128];
	const char *e = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
	    "\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
	    "\"message\":\"too old resource version: 5 (120)\","
	    "\"reason\":\"Expired\",\"code\":410}}";
	const char *g = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
	    "\"reason\":\"Gone\"}}";
	const char *o = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
	    "\"message\":\"boom\",\"reason\":\"InternalError\",\"code\":500}}";

	REQUIRE(watchstream_decode_line(e, strlen(e), &ev, err,
	    sizeof(err)) == 0);
	CHECK_INT(ev.type, WATCH_ERROR);
	CHECK_INT(ev.code, 410);
	CHECK(ev.expired);
	CHECK_STR(ev.reason, "Expired");
	CHECK_STR(ev.message, "too old resource version: 5 (120)");
	watch_event_clear(&ev);
	REQUIRE(watchstream_decode_line(g, strlen(g), &ev, err,
	    sizeof(err)) == 0);
	CHECK(ev.expired);
	watch_event_clear(&ev);
	REQUIRE(watchstream_decode_line(o, strlen(o), &ev, err,
	    sizeof(err)) == 0);
	CHECK(!ev.expired);
	CHECK_INT(ev.code, 500);
	CHECK_STR(ev.message, "boom");
	watch_event_clear(&ev);
}
