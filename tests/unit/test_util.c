/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/util.c: buffers, parsing, files, time, names. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/unit/test.h"

TEST(buf_append_printf_reset)
{
	struct buf b = BUF_INIT(0);

	CHECK_STR(buf_str(&b), "");
	CHECK_INT(buf_puts(&b, "ab"), 0);
	CHECK_INT(buf_putc(&b, 'c'), 0);
	CHECK_INT(buf_printf(&b, "-%d-%s", 42, "x"), 0);
	CHECK_STR(buf_str(&b), "abc-42-x");
	CHECK_INT(b.len, 8);
	buf_reset(&b);
	CHECK_INT(b.len, 0);
	CHECK_STR(buf_str(&b), "");
	for (int i = 0; i < 1000; i++)
		CHECK_INT(buf_printf(&b, "%04d", i), 0);
	CHECK_INT(b.len, 4000);
	CHECK(memcmp(b.data + 3996, "0999", 4) == 0);
	CHECK_INT(b.data[b.len], '\0');
	buf_free(&b);
	CHECK(b.data == NULL);
	buf_free(NULL);
}

TEST(buf_cap_is_hard)
{
	struct buf b;

	buf_init(&b, 8);
	CHECK_INT(buf_puts(&b, "12345678"), 0);
	CHECK_INT(buf_putc(&b, '9'), -E2BIG);
	CHECK_INT(buf_printf(&b, "%s", "x"), -E2BIG);
	CHECK_STR(buf_str(&b), "12345678");	/* unchanged on failure */
	buf_reset(&b);
	CHECK_INT(buf_printf(&b, "%s", "123456789"), -E2BIG);
	CHECK_INT(b.len, 0);
	CHECK_INT(buf_append(&b, "1234", 4), 0);
	CHECK_INT(buf_append(&b, "12345", 5), -E2BIG);
	CHECK_INT(b.len, 4);
	buf_free(&b);
}

TEST(buf_steal)
{
	struct buf b = BUF_INIT(0);
	size_t n = 99;
	char *p;

	p = buf_steal(&b, &n);
	REQUIRE(p != NULL);
	CHECK_STR(p, "");
	CHECK_INT(n, 0);
	free(p);
	buf_puts(&b, "secret");
	p = buf_steal(&b, &n);
	CHECK_STR(p, "secret");
	CHECK_INT(n, 6);
	CHECK(b.data == NULL && b.len == 0);
	free(p);
	buf_puts(&b, "token");
	buf_free_secret(&b);
	CHECK(b.data == NULL);
}

TEST(parse_int64_edges)
{
	int64_t v = 7;

	CHECK_INT(parse_int64("0", -10, 10, &v), 0);
	CHECK_INT(v, 0);
	CHECK_INT(parse_int64("-10", -10, 10, &v), 0);
	CHECK_INT(v, -10);
	CHECK_INT(parse_int64("+10", -10, 10, &v), 0);
	CHECK_INT(v, 10);
	CHECK_INT(parse_int64("0x1f", 0, 100, &v), 0);
	CHECK_INT(v, 31);
	CHECK_INT(parse_int64("9223372036854775807", INT64_MIN, INT64_MAX, &v),
	    0);
	CHECK(v == INT64_MAX);
	v = 7;
	CHECK_INT(parse_int64("11", -10, 10, &v), -ERANGE);
	CHECK_INT(parse_int64("-11", -10, 10, &v), -ERANGE);
	CHECK_INT(parse_int64("9223372036854775808", INT64_MIN, INT64_MAX,
	    &v), -ERANGE);
	CHECK_INT(parse_int64("", 0, 10, &v), -EINVAL);
	CHECK_INT(parse_int64(NULL, 0, 10, &v), -EINVAL);
	CHECK_INT(parse_int64(" 1", 0, 10, &v), -EINVAL);
	CHECK_INT(parse_int64("1 ", 0, 10, &v), -EINVAL);
	CHECK_INT(parse_int64("1x", 0, 10, &v), -EINVAL);
	CHECK_INT(parse_int64("010", 0, 10, &v), -EINVAL);	/* no octal */
	CHECK_INT(parse_int64("-", 0, 10, &v), -EINVAL);
	CHECK_INT(parse_int64("0x", 0, 10, &v), -EINVAL);
	CHECK_INT(v, 7);	/* untouched on failure */
}

TEST(parse_uint64_and_int)
{
	uint64_t u = 5;
	int i = 5;

	CHECK_INT(parse_uint64("18446744073709551615", UINT64_MAX, &u), 0);
	CHECK(u == UINT64_MAX);
	CHECK_INT(parse_uint64("18446744073709551616", UINT64_MAX, &u),
	    -ERANGE);
	CHECK_INT(parse_uint64("-1", UINT64_MAX, &u), -EINVAL);
	CHECK_INT(parse_uint64("+1", UINT64_MAX, &u), -EINVAL);
	CHECK_INT(parse_uint64("5", 4, &u), -ERANGE);
	CHECK_INT(parse_int("2147483648", 0, 2147483647, &i), -ERANGE);
	CHECK_INT(parse_int("-3", -5, 5, &i), 0);
	CHECK_INT(i, -3);
}

/* Durations parse_duration_ms takes, with their milliseconds. */
static const struct {
	const char *in;
	int64_t ms;
} durations_good[] = {
	{ "250ms", 250 }, { "5s", 5000 }, { "2m", 120000 }, { "1h", 3600000 },
	{ "1m30s", 90000 }, { "1.5s", 1500 }, { "100", 100 },
};

/* Durations it refuses as malformed. */
static const char *const durations_bad[] = {
	"5x", "-1s", "", "s", "5s10", "1 s",
};

TEST(durations)
{
	struct buf b = BUF_INIT(0);
	int64_t ms = -1;

	for (size_t i = 0; i < nitems(durations_good); i++) {
		CHECK_CASE(parse_duration_ms(durations_good[i].in, &ms) == 0,
		    durations_good[i].in);
		CHECK_INT(ms, durations_good[i].ms);
	}
	ms = -1;
	for (size_t i = 0; i < nitems(durations_bad); i++) {
		CHECK_CASE(parse_duration_ms(durations_bad[i], &ms) == -EINVAL,
		    durations_bad[i]);
		CHECK_CASE(ms == -1, durations_bad[i]);
	}
	CHECK_INT(parse_duration_ms("99999999999999h", &ms), -ERANGE);
	CHECK_INT(ms, -1);
	format_duration_ms(250, &b);
	buf_putc(&b, ' ');
	format_duration_ms(5000, &b);
	buf_putc(&b, ' ');
	format_duration_ms(120000, &b);
	buf_putc(&b, ' ');
	format_duration_ms(7200000, &b);
	buf_putc(&b, ' ');
	format_duration_ms(0, &b);
	CHECK_STR(buf_str(&b), "250ms 5s 2m 2h 0ms");
	buf_free(&b);
}

TEST(bools)
{
	bool v = false;

	CHECK_INT(parse_bool("YES", &v), 0);
	CHECK(v);
	CHECK_INT(parse_bool("off", &v), 0);
	CHECK(!v);
	CHECK_INT(parse_bool("1", &v), 0);
	CHECK(v);
	CHECK_INT(parse_bool("maybe", &v), -EINVAL);
	CHECK_INT(parse_bool("", &v), -EINVAL);
}

TEST(fd_flags)
{
	int sp[2];

	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	CHECK((fcntl(sp[0], F_GETFD) & FD_CLOEXEC) == 0);
	CHECK_INT(fd_cloexec(sp[0]), 0);
	CHECK((fcntl(sp[0], F_GETFD) & FD_CLOEXEC) != 0);
	CHECK((fcntl(sp[0], F_GETFL) & O_NONBLOCK) == 0);
	CHECK_INT(fd_nonblock(sp[0]), 0);
	CHECK((fcntl(sp[0], F_GETFL) & O_NONBLOCK) != 0);
	close(sp[0]);
	close(sp[1]);
	CHECK_INT(fd_cloexec(sp[0]), -EBADF);
	CHECK_INT(fd_nonblock(sp[0]), -EBADF);
}

/* Write len bytes of 'a' to a fresh temp file; returns its path. */
static char *
tmpfile_of(size_t len)
{
	static char path[64];
	char chunk[1000];
	int fd;

	snprintf(path, sizeof(path), "/tmp/kpgpud-util-XXXXXX");
	if ((fd = mkstemp(path)) < 0)
		return NULL;
	memset(chunk, 'a', sizeof(chunk));
	while (len > 0) {
		size_t n = len < sizeof(chunk) ? len : sizeof(chunk);

		if (write(fd, chunk, n) != (ssize_t)n)
			break;
		len -= n;
	}
	close(fd);
	return path;
}

TEST(read_file_capped)
{
	char *path = tmpfile_of(20000), *data = NULL;
	size_t len = 0;

	REQUIRE(path != NULL);
	CHECK_INT(read_file_capped(path, 20000, &data, &len), 0);
	CHECK_INT(len, 20000);
	REQUIRE(data != NULL);
	CHECK_INT(data[len], '\0');
	CHECK(data[0] == 'a' && data[19999] == 'a');
	free(data);
	data = NULL;
	CHECK_INT(read_file_capped(path, 19999, &data, &len), -EFBIG);
	CHECK(data == NULL);
	unlink(path);
	CHECK_INT(read_file_capped(path, 100, &data, &len), -ENOENT);
	path = tmpfile_of(0);
	CHECK_INT(read_file_capped(path, 100, &data, &len), 0);
	CHECK_INT(len, 0);
	CHECK_STR(data, "");
	free(data);
	unlink(path);
}

TEST(wipe_clears)
{
	char s[] = "hunter2";

	wipe(s, sizeof(s));
	for (size_t i = 0; i < sizeof(s); i++)
		CHECK_INT(s[i], 0);
	wipe(NULL, 5);
	wipe_free_str(NULL);
	wipe_free_str(strdup("token"));
}

TEST(time_format)
{
	char out[TIME_RFC3339_MS_LEN];

	CHECK_INT(time_rfc3339(0, out, sizeof(out)), 0);
	CHECK_STR(out, "1970-01-01T00:00:00Z");
	CHECK_INT(time_rfc3339(1700000000, out, sizeof(out)), 0);
	CHECK_STR(out, "2023-11-14T22:13:20Z");
	CHECK_INT(time_rfc3339(1700000000, out, 5), -ENOSPC);
	CHECK_INT(time_rfc3339_ms(1700000000042ull, out, sizeof(out)), 0);
	CHECK_STR(out, "2023-11-14T22:13:20.042Z");
	CHECK_INT(time_rfc3339_ms(1, out, sizeof(out) - 1), -ENOSPC);
	CHECK_INT(time_rfc3339((time_t)400000000000LL, out, sizeof(out)),
	    -EOVERFLOW);
}

TEST(clocks_advance)
{
	uint64_t a = monotonic_usec(), b;

	CHECK(a > 0);
	b = monotonic_usec();
	CHECK(b >= a);
	CHECK(monotonic_ms() >= a / 1000);
	/* after 2020-01-01 */
	CHECK(realtime_ms() > 1577836800000ull);
}

TEST(nitems_counts_elements)
{
	static const char *const five[] = { "a", "b", "c", "d", "e" };
	struct { int x; char pad[7]; } three[3];
	uint64_t one[1];

	CHECK_INT(nitems(five), 5);
	CHECK_INT(nitems(three), 3);
	CHECK_INT(nitems(one), 1);
	(void)three;
	(void)one;
}

TEST(seterr_formats_cuts_and_returns_einval)
{
	char buf[8];

	CHECK_INT(seterr(NULL, 0, "x %d", 1), -EINVAL);
	memset(buf, 'z', sizeof(buf));
	CHECK_INT(seterr(buf, 0, "x %d", 1), -EINVAL);
	CHECK(buf[0] == 'z');
	CHECK_INT(seterr(buf, sizeof(buf), "a=%d", 42), -EINVAL);
	CHECK_STR(buf, "a=42");
	CHECK_INT(seterr(buf, sizeof(buf), "%s", "0123456789"), -EINVAL);
	CHECK_STR(buf, "0123456");
}

TEST(fnv1a_reference_values)
{
	CHECK(fnv1a32(FNV1A32_INIT, "") == 0x811c9dc5u);
	CHECK(fnv1a32(FNV1A32_INIT, "a") == 0xe40c292cu);
	CHECK(fnv1a32(FNV1A32_INIT, "foobar") == 0xbf9cf968u);
	CHECK(fnv1a32(fnv1a32(FNV1A32_INIT, "foo"), "bar") == 0xbf9cf968u);
	CHECK(fnv1a64(FNV1A64_INIT, "a") == 0xaf63dc4c8601ec8cull);
	CHECK(fnv1a64(FNV1A64_INIT, "foobar") == 0x85944171f73967e8ull);
}

TEST(prng_xorshift64_sequence)
{
	uint64_t st = 1;

	CHECK(prng_seed() != 0);
	CHECK(prng_next(&st) == 1082269761ull);
	CHECK(st == 1082269761ull);
	CHECK(prng_next(&st) == 1152992998833853505ull);
}

TEST(backoff_doubles_caps_and_jitters_half)
{
	uint64_t rng = prng_seed();
	bool low = false, high = false;

	for (unsigned a = 0; a < 40; a++) {
		uint64_t d = (uint64_t)100 << (a > 20 ? 20 : a);

		if (d > 5000)
			d = 5000;
		for (int i = 0; i < 200; i++) {
			unsigned v = backoff_delay_ms(100, 5000, a, &rng);

			CHECK(v >= d / 2 && v <= d);
			if (a == 0 && v < 75)
				low = true;
			if (a == 0 && v > 75)
				high = true;
		}
	}
	CHECK(low && high);	/* the random half is used */
	CHECK_INT(backoff_delay_ms(0, 0, 3, &rng), 0);
	CHECK(backoff_delay_ms(4000000000u, 4000000000u, 30, &rng) <=
	    4000000000u);
}

/* Names no DNS-1123 label or subdomain may take (NULL included). */
static const char *const dns1123_bad[] = {
	NULL, "", "-a", "a-", "Team", "GPU.com", "a_b", "_overflow", ".gpu",
	"gpu.", "gpu..com", "gpu.-a",
};

TEST(dns1123_label)
{
	char long63[64], long64[65];

	memset(long63, 'a', 63);
	long63[63] = '\0';
	memset(long64, 'a', 64);
	long64[64] = '\0';
	CHECK(dns1123_label_valid("team-a"));
	CHECK(dns1123_label_valid("a"));
	CHECK(dns1123_label_valid("0abc9"));
	CHECK(dns1123_label_valid(long63));
	CHECK(!dns1123_label_valid(long64));
	CHECK(!dns1123_label_valid("a.b"));
	for (size_t i = 0; i < nitems(dns1123_bad); i++)
		CHECK_CASE(!dns1123_label_valid(dns1123_bad[i]),
		    dns1123_bad[i]);
}

TEST(dns1123_subdomain)
{
	char big[300];

	CHECK(dns1123_subdomain_valid("gpu.nvidia.com"));
	CHECK(dns1123_subdomain_valid("gpu-1g10gb"));
	CHECK(dns1123_subdomain_valid("a.b"));
	for (size_t i = 0; i < nitems(dns1123_bad); i++)
		CHECK_CASE(!dns1123_subdomain_valid(dns1123_bad[i]),
		    dns1123_bad[i]);
	memset(big, 'a', sizeof(big));
	for (int i = 50; i < 253; i += 51)
		big[i] = '.';
	big[253] = '\0';
	CHECK(dns1123_subdomain_valid(big));
	big[253] = 'a';
	big[254] = '\0';
	CHECK(!dns1123_subdomain_valid(big));
}

TEST(uid_lists)
{
	uid_t u[4] = { 9, 9, 9, 9 };
	size_t n = 99;
	char bad[64];

	CHECK_INT(parse_uid_list(" 1000, 1001 ,root", u, 4, &n, bad,
	    sizeof(bad)), 0);
	CHECK_INT(n, 3);
	CHECK(u[0] == 1000 && u[1] == 1001 && u[2] == 0);
	CHECK_INT(parse_uid_list("", u, 4, &n, bad, sizeof(bad)), 0);
	CHECK_INT(n, 0);
	CHECK_INT(parse_uid_list("0,65534", u, 4, &n, bad, sizeof(bad)), 0);
	CHECK(n == 2 && u[0] == 0 && u[1] == 65534);
	u[0] = 9;
	CHECK_INT(parse_uid_list("1,2,3,4,5", u, 4, &n, bad, sizeof(bad)),
	    -E2BIG);
	CHECK_INT(parse_uid_list("1,2,3", u, 2, &n, bad, sizeof(bad)), -E2BIG);
	CHECK_STR(bad, "3");
	CHECK_INT(parse_uid_list("1,,2", u, 4, &n, bad, sizeof(bad)), -EINVAL);
	CHECK_INT(parse_uid_list("1,", u, 4, &n, bad, sizeof(bad)), -EINVAL);
	CHECK_INT(parse_uid_list("-1", u, 4, &n, bad, sizeof(bad)), -ENOENT);
	CHECK_INT(parse_uid_list("4294967295", u, 4, &n, bad, sizeof(bad)),
	    -EINVAL);	/* (uid_t)-1 means "no uid" */
	CHECK_INT(parse_uid_list("1, no-such-user-kp", u, 4, &n, bad,
	    sizeof(bad)), -ENOENT);
	CHECK_STR(bad, "no-such-user-kp");
	CHECK_INT(u[0], 9);	/* untouched on failure */
}

TEST(quoting_round_trip)
{
	struct buf b = BUF_INIT(0);
	char *s;

	CHECK_INT(buf_put_quoted(&b, "a \"b\" \\c\nd\te"), 0);
	CHECK_STR(buf_str(&b), "\"a \\\"b\\\" \\\\c\\nd\\te\"");
	s = buf_steal(&b, NULL);
	REQUIRE(s != NULL);
	CHECK_INT(str_unquote(s), 0);
	CHECK_STR(s, "a \"b\" \\c\nd\te");
	free(s);
	char bad1[] = "\"open", bad2[] = "\"x\" y", bad3[] = "\"\\q\"";
	char bad4[] = "plain", ok[] = "\"\"";
	CHECK_INT(str_unquote(bad1), -EINVAL);
	CHECK_INT(str_unquote(bad2), -EINVAL);
	CHECK_INT(str_unquote(bad3), -EINVAL);
	CHECK_INT(str_unquote(bad4), -EINVAL);
	CHECK_INT(str_unquote(ok), 0);
	CHECK_STR(ok, "");
}
