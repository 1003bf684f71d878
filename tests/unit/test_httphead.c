/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for kpgpud-admit/httphead.c, the webhook's HTTP/1.1 request
 * framing: the heads it accepts and what it reads from them, each way of
 * smuggling or bloating a request it refuses with its status (both
 * Content-Length and Transfer-Encoding, differing lengths, obs-fold, bare
 * CR/LF, too many fields, unknown codings and versions), the end of a head
 * found once when it arrives a byte at a time, chunked bodies decoded in
 * place under the body cap, and query parameters.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kpgpud-admit/httphead.h"
#include "tests/unit/test.h"

/* Parse s whole as a head; the status (0 when accepted). */
static int
parse(const char *s, struct httphead *h)
{
	int st = 0;

	if (httphead_parse(s, strlen(s), h, &st) == 0)
		return 0;
	return st;
}

TEST(httphead_accepts_a_review_post)
{
	static const char *s = "POST /mutate?timeout=10s HTTP/1.1\r\n"
	    "Host: x\r\nContent-Type: application/json\r\n"
	    "Content-Length: 1234\r\nAccept: */*\r\n\r\n";
	struct httphead h;

	REQUIRE(parse(s, &h) == 0);
	CHECK(h.method == HTTPHEAD_POST);
	CHECK_INT(h.minor, 1);
	CHECK(h.path_len == 7 && memcmp(s + h.path_off, "/mutate", 7) == 0);
	CHECK(h.query_len == 11 &&
	    memcmp(s + h.query_off, "timeout=10s", 11) == 0);
	CHECK(h.has_ctype && h.ctype_len == 16 &&
	    memcmp(s + h.ctype_off, "application/json", 16) == 0);
	CHECK(h.content_length == 1234);
	CHECK(!h.chunked && !h.close && !h.expect_continue);
	CHECK_INT(h.head_len, strlen(s));
}

TEST(httphead_reads_methods_connection_and_versions)
{
	struct httphead h;

	REQUIRE(parse("GET /healthz HTTP/1.1\r\n\r\n", &h) == 0);
	CHECK(h.method == HTTPHEAD_GET && h.content_length == -1);
	CHECK(h.query_len == 0 && !h.has_ctype);
	REQUIRE(parse("HEAD / HTTP/1.1\r\nConnection: keep-alive, Close\r\n"
	    "\r\n", &h) == 0);
	CHECK(h.method == HTTPHEAD_HEAD && h.close);
	REQUIRE(parse("DELETE /x HTTP/1.1\r\n\r\n", &h) == 0);
	CHECK(h.method == HTTPHEAD_OTHER);
	REQUIRE(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	    &h) == 0);
	CHECK(h.minor == 0 && h.close);
	REQUIRE(parse("POST /m HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n"
	    "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n", &h) == 400);
	REQUIRE(parse("POST /m HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Expect: 100-Continue\r\n\r\n", &h) == 0);
	CHECK(h.chunked && h.expect_continue && h.content_length == -1);
	/* the same length twice is one length */
	REQUIRE(parse("POST /m HTTP/1.1\r\nContent-Length: 7\r\n"
	    "content-length:7 \r\n\r\n", &h) == 0);
	CHECK(h.content_length == 7);
}

TEST(httphead_refuses_what_reads_two_ways)
{
	static const struct { const char *s; int st; } bad[] = {
		{ "POST /m HTTP/1.1\r\nContent-Length: 5\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nContent-Length: 5\r\n"
		    "Content-Length: 6\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nContent-Length: \r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nContent-Length: "
		    "1234567890123456789\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n", 400 },
		{ "POST /m HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n"
		    "\r\n", 501 },
		{ "POST /m HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
		    400 },
		{ "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\n: 5\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nX-A: a\nb\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nX-A: a\x01" "b\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nContent-Type: a\r\n"
		    "Content-Type: b\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", 417 },
		{ "GET / HTTP/2.0\r\n\r\n", 505 },
		{ "GET / HTTP/1.2\r\n\r\n", 505 },
		{ "GET / HTTP/1.1 \r\n\r\n", 400 },
		{ "GET  / HTTP/1.1\r\n\r\n", 400 },
		{ "GET http://x/ HTTP/1.1\r\n\r\n", 400 },
		{ "GET / x HTTP/1.1\r\n\r\n", 400 },
		{ "GET /\x80 HTTP/1.1\r\n\r\n", 400 },
		{ "G(T / HTTP/1.1\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\n\r\n", 400 },
		{ "\r\nGET / HTTP/1.1\r\n\r\n", 400 },
	};
	struct httphead h;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_CASE(parse(bad[i].s, &h) == bad[i].st, bad[i].s);
}

TEST(httphead_caps_the_field_count)
{
	char buf[8192];
	size_t n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
	struct httphead h;

	for (int i = 0; i < HTTPHEAD_MAX_FIELDS; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-%d: y\r\n",
		    i);
	memcpy(buf + n, "\r\n", 3);
	CHECK_INT(parse(buf, &h), 0);
	memcpy(buf + n, "X-Z: y\r\n\r\n", 11);
	CHECK_INT(parse(buf, &h), 431);
}

TEST(httphead_end_is_found_once_a_byte_at_a_time)
{
	static const char s[] = "GET / HTTP/1.1\r\nA: b\r\n\r\nNEXT";
	size_t scan = 0, end = 0, calls = 0;

	for (size_t len = 1; len <= sizeof(s) - 1 && end == 0; len++) {
		end = httphead_end(s, len, &scan);
		calls++;
		CHECK(end != 0 || scan == len);
	}
	CHECK_INT(end, sizeof(s) - 1 - 4);
	CHECK_INT(calls, end);
	scan = 0;
	CHECK_INT(httphead_end("GET / HTTP/1.1\n\n", 16, &scan), 0);
	scan = 0;
	CHECK_INT(httphead_end("\r\n\r\n", 4, &scan), 4);
}

/* Decode s fed in pieces of step bytes; the verdict, body in out. */
static int
chunked(const char *s, size_t step, size_t max, char *out, size_t *outlen,
    size_t *ret_pos)
{
	struct httpchunk st = { 0 };
	char buf[512];
	size_t len = strlen(s), have = 0, pos = 0, o = 0;
	int rv = 0;

	while (rv == 0 && have < len) {
		size_t n = len - have < step ? len - have : step;

		memcpy(buf + have, s + have, n);
		have += n;
		rv = httphead_chunked(&st, buf, have, &pos, &o, max);
	}
	memcpy(out, buf, o);
	*outlen = o;
	*ret_pos = pos;
	return rv;
}

TEST(httphead_chunked_decodes_in_place)
{
	static const char s[] = "5\r\nhello\r\n1;ext=\"a b\"\r\n \r\n"
	    "b\r\n0123456789a\r\n0\r\nX-T: 1\r\n\r\nNEXT";
	char out[512];
	size_t n, pos;

	for (size_t step = 1; step <= sizeof(s); step++) {
		REQUIRE(chunked(s, step, 1000, out, &n, &pos) == 1);
		CHECK_INT(n, 17);
		CHECK(memcmp(out, "hello 0123456789a", 17) == 0);
		CHECK_INT(pos, sizeof(s) - 1 - 4);
	}
	CHECK_INT(chunked("0\r\n\r\n", 1, 0, out, &n, &pos), 1);
	CHECK_INT(n, 0);
	CHECK_INT(chunked("3\r\nabc\r\n", 2, 10, out, &n, &pos), 0);
}

TEST(httphead_chunked_refuses_bad_framing_and_big_bodies)
{
	static const char *bad[] = {
		"\r\n", "x\r\n", "5\nhello\r\n0\r\n\r\n", "5\r\nhelloX\r\n",
		"5\r\nhello\r\n0\r\n\n", "5\r\nhello\r\n0\r\nA: b\nC\r\n\r\n",
		"1000000000000000\r\n", "-1\r\n", "5 \r\n", "5;\x01\r\n",
	};
	char out[512];
	size_t n, pos;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_CASE(chunked(bad[i], 1, 1000, out, &n, &pos) ==
		    -EPROTO, bad[i]);
	CHECK_INT(chunked("b\r\n0123456789a\r\n0\r\n\r\n", 64, 10, out, &n,
	    &pos), -EFBIG);
	CHECK_INT(chunked("5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n", 64, 10,
	    out, &n, &pos), -EFBIG);
	CHECK_INT(chunked("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 64, 10,
	    out, &n, &pos), 1);
}

TEST(httphead_query_finds_a_parameter)
{
	static const char q[] = "a=1&timeout=10s&timeoutx=2&b";
	char v[8];

	CHECK(httphead_query(q, sizeof(q) - 1, "timeout", v, sizeof(v)) &&
	    strcmp(v, "10s") == 0);
	CHECK(httphead_query(q, sizeof(q) - 1, "a", v, sizeof(v)) &&
	    strcmp(v, "1") == 0);
	CHECK(!httphead_query(q, sizeof(q) - 1, "b", v, sizeof(v)));
	CHECK(!httphead_query(q, sizeof(q) - 1, "time", v, sizeof(v)));
	CHECK(!httphead_query("timeout=123456789", 17, "timeout", v,
	    sizeof(v)));
	CHECK(!httphead_query("", 0, "timeout", v, sizeof(v)));
}
