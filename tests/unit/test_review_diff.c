/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fast review parse (common/jscan.c + review_parse) against the
 * reference (review_parse_full, jansson on the whole body): every fixture,
 * truncations and byte mutations of a real review, and crafted edge cases
 * (escaped and duplicate keys, nesting depth, UTF-8, numbers, huge strings,
 * odd key order, wrong types) must give the same verdict and the same reply
 * byte for byte. A few cases also check what the answer is, so that the two
 * paths cannot agree on something wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kpgpud-admit/patch.h"
#include "tests/unit/test.h"

#define LLVMFuzzerTestOneInput fuzz_review_diff_one
#include "tests/fuzz/fuzz_review_diff.c"
#undef LLVMFuzzerTestOneInput

#define FILE_MAX	(4 * 1024 * 1024)
#define TMPL		"{\"claimTemplateName\":\"gpu\"}"
#define GPU		"{\"name\":\"a\",\"resources\":{\"limits\":" \
			    "{\"nvidia.com/gpu\":1}}}"
#define PLAIN		"{\"name\":\"a\"}"

/* A review of a Pod CREATE in team-a around the pod text; caller frees. */
static char *
review_around(const char *pod)
{
	char *s;

	if (asprintf(&s, "{\"apiVersion\":\"admission.k8s.io/v1\","
	    "\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u1\","
	    "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
	    "\"operation\":\"CREATE\",\"namespace\":\"team-a\","
	    "\"object\":%s}}", pod) < 0)
		return NULL;
	return s;
}

/* Read a whole file; NULL on error. */
static char *
slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(FILE_MAX);
	size_t n;

	if (f == NULL || buf == NULL) {
		if (f != NULL)
			fclose(f);
		free(buf);
		return NULL;
	}
	n = fread(buf, 1, FILE_MAX, f);
	fclose(f);
	*ret_len = n;
	return buf;
}

/* Run every file of a source directory through both paths; count them. */
static int
diff_dir(const char *rel, bool wrap, bool must_parse)
{
	DIR *d = opendir(test_srcpath(rel));
	struct dirent *de;
	char path[1024];
	int count = 0;

	CHECK(d != NULL);
	while (d != NULL && (de = readdir(d)) != NULL) {
		struct review *rv = NULL;
		char *buf, *body;
		size_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", test_srcpath(rel),
		    de->d_name);
		CHECK((buf = slurp(path, &len)) != NULL);
		if (buf == NULL)
			continue;
		body = buf;
		if (wrap) {
			buf[len] = '\0';
			body = review_around(buf);
			len = strlen(body);
		}
		CHECK_INT(review_diff((const uint8_t *)body, len), 0);
		/* nonparse-*: seeds only the head of a review answers */
		if (must_parse && strncmp(de->d_name, "nonparse-", 9) != 0) {
			CHECK_INT(review_parse(body, len, &rv, NULL, 0), 0);
			review_free(rv);
		}
		if (body != buf)
			free(body);
		free(buf);
		count++;
	}
	if (d != NULL)
		closedir(d);
	return count;
}

TEST(every_fixture_agrees)
{
	CHECK(diff_dir("tests/fixtures/pods", false, false) >= 8);
	CHECK(diff_dir("tests/fixtures/pods", true, true) >= 8);
	CHECK(diff_dir("tests/fixtures/bench", false, true) >= 4);
	CHECK(diff_dir("tests/fuzz/seed-review", false, true) >= 6);
	/* Also inputs fuzz_review_diff once found (nul-after-number). */
	CHECK(diff_dir("tests/fuzz/seed-review_diff", false, false) >= 14);
}

TEST(truncations_and_mutations_agree)
{
	static const unsigned char subst[] = { '"', '\\', '}', ']', ',', 0x80,
	    0xc3, ' ', '0', 'e', '\0' };
	char path[1024];
	size_t len;
	char *buf;

	snprintf(path, sizeof(path), "%s",
	    test_srcpath("tests/fixtures/bench/review-agent.json"));
	CHECK((buf = slurp(path, &len)) != NULL);
	if (buf == NULL)
		return;
	for (size_t n = 0; n < len; n += 13)
		CHECK_INT(review_diff((const uint8_t *)buf, n), 0);
	for (size_t i = 0; i < len; i += 29) {
		unsigned char keep = (unsigned char)buf[i];

		buf[i] = (char)subst[i % sizeof(subst)];
		CHECK_INT(review_diff((const uint8_t *)buf, len), 0);
		buf[i] = (char)keep;
	}
	free(buf);
}

/* Both paths on s must agree, and jansson must accept it iff valid. */
static void
agree(const char *s, size_t len, bool valid, int line)
{
	json_t *j = json_loadb(s, len, 0, NULL);

	if ((j != NULL) != valid)
		test_fail(__FILE__, line, "jansson %s a %s case",
		    j != NULL ? "accepts" : "refuses", valid ? "valid" :
		    "invalid");
	json_decref(j);
	if (review_diff((const uint8_t *)s, len) != 0)
		test_fail(__FILE__, line, "paths differ on %.200s", s);
}
#define AGREE(s, valid)	agree((s), strlen(s), (valid), __LINE__)

/* The same, with the fragment inside an untracked member of the pod. */
static void
agree_in_pod(const char *frag, bool valid, int line)
{
	char *pod, *s;

	if (asprintf(&pod, "{\"metadata\":{\"x\":%s},\"spec\":"
	    "{\"containers\":[{\"name\":\"a\"}]}}", frag) < 0)
		return;
	s = review_around(pod);
	agree(s, strlen(s), valid, line);
	free(s);
	free(pod);
}
#define AGREE_POD(f, valid)	agree_in_pod((f), (valid), __LINE__)

TEST(strings_numbers_literals_agree)
{
	static const struct { const char *frag; bool valid; } c[] = {
		{ "\"\\ud83d\\ude00 \\u00e9 \\/\\b\\f\\n\\r\\t\\\"\\\\\"", true },
		{ "\"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\"", true },
		{ "\"\\u0000\"", false }, { "\"\\ud800\"", false },
		{ "\"\\udc00\"", false }, { "\"\\ud800\\u0041\"", false },
		{ "\"\\ud800x\"", false }, { "\"\\u12G4\"", false },
		{ "\"\\x\"", false }, { "\"\\'\"", false },
		{ "\"\x80\"", false }, { "\"\xc0\xaf\"", false },
		{ "\"\xc3\"", false }, { "\"\xed\xa0\x80\"", false },
		{ "\"\xf4\x90\x80\x80\"", false }, { "\"\xf5\x80\x80\x80\"", false },
		{ "\"\xe0\x80\xaf\"", false }, { "\"\xf0\x8f\xbf\xbf\"", false },
		{ "\"\xef\xbf\xbf\"", true }, { "\"\xf4\x8f\xbf\xbf\"", true },
		{ "\"a\tb\"", false }, { "\"a\nb\"", false }, { "\"\x7f\"", true },
		{ "0", true }, { "-0", true }, { "1e5", true }, { "1E+5", true },
		{ "-1.5e-10", true }, { "1e-400", true }, { "1e400", false },
		{ "-1e400", false }, { "1.7976931348623157e308", true },
		{ "1.7976931348623159e308", false },
		{ "9223372036854775807", true }, { "9223372036854775808", false },
		{ "-9223372036854775808", true }, { "-9223372036854775809", false },
		{ "12345678901234567890", false }, { "01", false }, { "-01", false },
		{ "1.", false }, { ".5", false }, { "+1", false }, { "1e", false },
		{ "1e+", false }, { "-", false }, { "0x10", false }, { "NaN", false },
		{ "Infinity", false }, { "1.5.2", false },
		{ "true", true }, { "false", true }, { "null", true },
		{ "tru", false }, { "nulll", false }, { "True", false },
		{ "[1,]", false }, { "{\"a\":1,}", false }, { "[,1]", false },
		{ "{,}", false }, { "{\"a\"}", false }, { "{\"a\" 1}", false },
		{ "{1:2}", false }, { "[1 2]", false }, { "[ ]", true },
		{ "{ }", true }, { "\"\\u0041\"", true },
		{ "[\f1]", false }, { "[\xc2\xa0" "1]", false },
	};

	for (size_t i = 0; i < nitems(c); i++)
		AGREE_POD(c[i].frag, c[i].valid);
}

TEST(document_level_cases_agree)
{
	static const char nul[] = "{\"a\":1}\0";

	AGREE("", false);
	AGREE(" ", false);
	AGREE("1", false);
	AGREE("\"s\"", false);
	AGREE("null", false);
	AGREE("[]", true);
	AGREE("{}", true);
	AGREE(" \t\r\n{} \t\r\n", true);
	AGREE("{}x", false);
	AGREE("{}{}", false);
	AGREE("{} 1", false);
	AGREE("\xef\xbb\xbf{}", false);
	AGREE("[1", false);
	AGREE("{\"a\":", false);
	AGREE("{\"a", false);
	agree(nul, sizeof(nul) - 1, false, __LINE__);
	agree("{\"a\":\"\0\"}", 9, false, __LINE__);
	/* jansson drops one NUL after a number or literal; the scanner
	   refuses it and the review takes the full parse. */
	agree("[15\0,0]", 7, true, __LINE__);
	agree("[true\0]", 7, true, __LINE__);
	agree("[1\0\0]", 6, false, __LINE__);
	agree("[\"a\"\0]", 6, false, __LINE__);
	CHECK(jscan_validate("[15\0,0]", 7) < 0);
}

TEST(nul_after_a_number_takes_the_full_parse)
{
	static const char pod[] = "{\"metadata\":{\"x\":1\0},\"spec\":"
	    "{\"containers\":[" GPU "]}}";
	char *s = review_around("POD");
	char *body, *at;
	size_t len;

	CHECK(s != NULL);
	if (s == NULL || (body = malloc(strlen(s) + sizeof(pod))) == NULL) {
		free(s);
		return;
	}
	at = strstr(s, "POD");
	len = (size_t)(at - s);
	memcpy(body, s, len);
	memcpy(body + len, pod, sizeof(pod) - 1);
	len += sizeof(pod) - 1;
	memcpy(body + len, at + 3, strlen(at + 3));
	len += strlen(at + 3);
	agree(body, len, true, __LINE__);
	CHECK(jscan_validate(body, len) < 0);
	free(body);
	free(s);
}

/* A body of n nested openers around mid, closed again. */
static char *
nested(int n, const char *open, const char *mid, const char *close)
{
	size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close), k = 0;
	char *s = malloc((size_t)n * (lo + lc) + lm + 1);

	if (s == NULL)
		return NULL;
	for (int i = 0; i < n; i++, k += lo)
		memcpy(s + k, open, lo);
	memcpy(s + k, mid, lm);
	k += lm;
	for (int i = 0; i < n; i++, k += lc)
		memcpy(s + k, close, lc);
	s[k] = '\0';
	return s;
}

TEST(nesting_depth_agrees)
{
	static const struct { int n; const char *mid; bool valid; } c[] = {
		{ 2048, "", true }, { 2049, "", false }, { 2047, "1", true },
		{ 2048, "1", false }, { 2048, "{}", false }, { 100000, "", false },
	};
	char *s, *frag;

	for (size_t i = 0; i < nitems(c); i++) {
		s = nested(c[i].n, "[", c[i].mid, "]");
		AGREE(s, c[i].valid);
		free(s);
		s = nested(c[i].n, "{\"k\":[", c[i].mid, "]}");
		AGREE(s, false);
		free(s);
	}
	/* Deep inside the pod: the review envelope adds 4 levels. */
	frag = nested(2040, "[", "", "]");
	AGREE_POD(frag, true);
	free(frag);
	frag = nested(2045, "[", "", "]");
	AGREE_POD(frag, false);
	free(frag);
}

TEST(huge_strings_agree)
{
	size_t n = 2 * 1024 * 1024;
	char *frag = malloc(n + 3);

	CHECK(frag != NULL);
	if (frag == NULL)
		return;
	frag[0] = '"';
	for (size_t i = 1; i <= n; i++)
		frag[i] = (char)('a' + i % 26);
	frag[n + 1] = '"';
	frag[n + 2] = '\0';
	AGREE_POD(frag, true);
	memcpy(frag + n - 6, "\\u00e9", 6);
	AGREE_POD(frag, true);
	frag[n / 2] = '\x01';
	AGREE_POD(frag, false);
	free(frag);
}

/*
 * The fast path's answer for a review body under a template namespace with
 * legacy "reject": the result, -1 when the body does not parse, -2 when the
 * Pod is malformed (refused). The reference must give the same.
 */
static int
result_of(const char *body, int line)
{
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	struct resolved_pack *r = NULL;
	int res;
	json_t *j = json_loadb(body, strlen(body), 0, NULL);

	agree(body, strlen(body), j != NULL, line);
	json_decref(j);
	if (resolved_pack_parse(TMPL, strlen(TMPL), &r, NULL, 0) < 0)
		return -3;
	if (review_parse(body, strlen(body), &rv, NULL, 0) < 0) {
		resolved_pack_unref(r);
		return -1;
	}
	/* A malformed Pod is refused (denied), never an error. */
	res = review_answer(rv, REVIEW_NS_ISOLATED, r, &rep, NULL, 0) < 0 ?
	    -3 : rep->result == REVIEW_REFUSED ? -2 : (int)rep->result;
	review_reply_free(rep);
	review_free(rv);
	resolved_pack_unref(r);
	return res;
}

/* result_of() a Pod in the standard review. */
static int
pod_result(const char *pod, int line)
{
	char *s = review_around(pod);
	int res = s != NULL ? result_of(s, line) : -3;

	free(s);
	return res;
}
#define POD(p)	pod_result((p), __LINE__)


TEST(escaped_and_duplicate_keys_read_like_jansson)
{
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "]}}"),
	    REVIEW_PATCHED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" GPU "]}}"),
	    REVIEW_DENIED);
	CHECK_INT(POD("{\"spe\\u0063\":{\"contain\\u0065rs\":[" GPU "]}}"),
	    REVIEW_DENIED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[{\"n\\u0061me\":\"a\","
	    "\"r\\u0065sources\":{\"limits\":{\"nvidia.com/gpu\":1}}}]}}"),
	    REVIEW_DENIED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "]},"
	    "\"spe\\u0063\":{\"containers\":[" GPU "]}}"), REVIEW_DENIED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" GPU "]},"
	    "\"spec\":{\"containers\":[" PLAIN "]}}"), REVIEW_PATCHED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" GPU "],"
	    "\"containers\":[" PLAIN "]}}"), REVIEW_PATCHED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "],"
	    "\"containers\":[" GPU "]}}"), REVIEW_DENIED);
	/* A later non-object spec drops everything the first one had. */
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "]},\"spec\":1}"),
	    -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"limits\":{\"nvidia.com/gpu\":1}},"
	    "\"resources\":{}}]}}"), REVIEW_PATCHED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{},\"resources\":{\"limits\":{\"nvidia.com/gpu\""
	    ":1}}}]}}"), REVIEW_DENIED);
	/* Keys that only look alike are other keys. */
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "]},"
	    "\"spec \":{\"containers\":[" GPU "]},\"Spec\":1}"), REVIEW_PATCHED);
}

/* The envelope and a Pod CREATE request's head, as the cases below share. */
#define ENVELOPE	"{\"kind\":\"AdmissionReview\"," \
			    "\"apiVersion\":\"admission.k8s.io/v1\","
#define CREATE_POD	"\"request\":{\"uid\":\"u\",\"operation\":" \
			    "\"CREATE\",\"kind\":{\"kind\":\"Pod\"},"
#define OK_TAIL		"\"request\":{\"object\":{\"spec\":" \
			    "{\"containers\":[" PLAIN "]}},\"namespace\":" \
			    "\"team-a\",\"operation\":\"CREATE\",\"kind\":" \
			    "{\"kind\":\"Pod\"},\"uid\":\"u\"}}"

TEST(envelope_duplicates_and_order_read_like_jansson)
{
	static const struct { int line; const char *body; int want; } c[] = {
		{ __LINE__, ENVELOPE OK_TAIL, REVIEW_PATCHED },
		{ __LINE__, "{\"kind\":\"Nope\",\"kind\":\"AdmissionReview\","
		    "\"apiVersion\":\"admission.k8s.io/v1\"," OK_TAIL,
		    REVIEW_PATCHED },
		/* of duplicate keys the last counts: a second request */
		{ __LINE__, ENVELOPE CREATE_POD "\"namespace\":\"team-a\","
		    "\"object\":{\"spec\":{\"containers\":[" GPU "]}}},"
		    "\"request\":{\"uid\":\"u\",\"operation\":\"UPDATE\"}}",
		    REVIEW_SKIPPED },
		/* a second (escaped) operation */
		{ __LINE__, ENVELOPE "\"request\":{\"uid\":\"u\",\"operation\":"
		    "\"UPDATE\",\"operation\":\"CRE\\u0041TE\",\"kind\":{"
		    "\"kind\":\"Pod\"},\"namespace\":\"team-a\",\"object\":{"
		    "\"spec\":{\"containers\":[" GPU "]}}}}", REVIEW_DENIED },
		/* a second metadata, with its namespace */
		{ __LINE__, ENVELOPE CREATE_POD "\"object\":{\"metadata\":"
		    "{\"namespace\":\"a\"},\"metadata\":{\"namespace\":"
		    "\"Bad!\"},\"spec\":{\"containers\":[" PLAIN "]}}}}", -1 },
		{ __LINE__, ENVELOPE CREATE_POD "\"object\":{\"metadata\":"
		    "{\"namespace\":\"Bad!\"},\"metadata\":{\"namespace\":"
		    "\"a\"},\"spec\":{\"containers\":[" PLAIN "]}}}}",
		    REVIEW_PATCHED },
	};

	for (size_t i = 0; i < nitems(c); i++) {
		int got = result_of(c[i].body, c[i].line);

		if (got != c[i].want)
			test_fail(__FILE__, c[i].line, "result %d, want %d",
			    got, c[i].want);
	}
}

TEST(wrong_types_read_like_jansson)
{
	char *many, *pod;
	size_t n = 0, cap = (PATCH_MAX_CONTAINERS + 1) * 16 + 64;

	CHECK_INT(POD("{\"spec\":{\"containers\":{}}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":\"a\"}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":null}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":[1]}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":[[" GPU "]]}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":[{\"name\":1,"
	    "\"resources\":[]}]}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "],"
	    "\"initContainers\":{}}}"), -2);
	CHECK_INT(POD("{\"spec\":{\"containers\":[" PLAIN "],"
	    "\"resourceClaims\":{}}}"), -2);
	CHECK_INT(POD("{\"spec\":[]}"), -2);
	CHECK_INT(POD("[]"), -1);
	CHECK_INT(POD("{\"metadata\":[],\"spec\":{\"containers\":[" PLAIN
	    "]}}"), REVIEW_PATCHED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[ " PLAIN " , " GPU
	    " ]}}"), REVIEW_DENIED);
	CHECK_INT(POD("{\"spec\":{\"containers\":[\"x,]}\"," PLAIN
	    "]}}"), -2);
	/* One more container than the patch allows. */
	CHECK((many = malloc(cap)) != NULL);
	if (many == NULL)
		return;
	n += (size_t)snprintf(many, cap, "{\"spec\":{\"containers\":[");
	for (int i = 0; i <= PATCH_MAX_CONTAINERS; i++)
		n += (size_t)snprintf(many + n, cap - n, "%s" PLAIN,
		    i > 0 ? "," : "");
	snprintf(many + n, cap - n, "]}}");
	CHECK_INT(POD(many), -2);
	pod = strstr(many, "{\"name\"");
	memmove(pod, pod + strlen(PLAIN) + 1, strlen(pod + strlen(PLAIN)));
	CHECK_INT(POD(many), REVIEW_PATCHED);
	free(many);
}

/* A pod whose container list has n entries, entry k being odd (or none). */
static char *
long_list_pod(int n, int k, const char *odd)
{
	size_t cap = (size_t)n * 64 + 256, len = 0;
	char *s = malloc(cap);

	if (s == NULL)
		return NULL;
	len += (size_t)snprintf(s, cap, "{\"spec\":{\"containers\":[");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%s",
		    i > 0 ? " , " : "", i == k ? odd :
		    "{\"name\":\"c\",\"x\":[\"]},\\\"\"],\"resources\":{}}");
	snprintf(s + len, cap - len, " ]}}");
	return s;
}

TEST(lists_longer_than_the_scan_records_read_like_jansson)
{
	static const struct { int n, k; const char *odd; int res; } c[] = {
		{ 200, -1, "", REVIEW_PATCHED },
		{ 200, 199, GPU, REVIEW_DENIED },
		{ 129, 128, GPU, REVIEW_DENIED },
		{ 128, 127, GPU, REVIEW_DENIED },
		{ 200, 150, "\"x,]}\\\"[\"", -2 },
		{ 200, 160, "[" GPU "]", -2 },
		{ 200, 170, "{\"name\":\"a\",\"resources\":[]}", -2 },
		{ 200, 180, "{\"name\":\"a\",\"resources\":{\"limits\":"
		    "{\"nvidia.com/gpu\":1}},\"resources\":null}", REVIEW_PATCHED },
	};

	for (size_t i = 0; i < nitems(c); i++) {
		char *pod = long_list_pod(c[i].n, c[i].k, c[i].odd);

		CHECK(pod != NULL);
		if (pod != NULL && pod_result(pod, __LINE__) != c[i].res)
			test_fail(__FILE__, __LINE__, "case %zu: %d", i,
			    pod_result(pod, __LINE__));
		free(pod);
	}
}

/*
 * The patch of a Pod under legacy "translate" (fast path): how many times
 * needle is in it, -1 when the review is not patched.
 */
static int
translate_count(const char *pod, const char *needle, int line)
{
	static const char spec[] = "{\"claimName\":\"shared\","
	    "\"legacyGPU\":\"translate\"}";
	struct review *rv = NULL;
	struct review_reply *rep = NULL;
	struct resolved_pack *r = NULL;
	char *body = review_around(pod);
	const char *p;
	int n = -1;

	if (body == NULL)
		return -1;
	agree(body, strlen(body), true, line);
	if (resolved_pack_parse(spec, strlen(spec), &r, NULL, 0) == 0 &&
	    review_parse(body, strlen(body), &rv, NULL, 0) == 0 &&
	    review_answer(rv, REVIEW_NS_ISOLATED, r, &rep, NULL, 0) == 0 &&
	    rep->patch != NULL)
		for (n = 0, p = rep->patch; (p = strstr(p, needle)) != NULL;
		    p++)
			n++;
	review_reply_free(rep);
	review_free(rv);
	resolved_pack_unref(r);
	free(body);
	return n;
}
#define TRANSLATE(p, needle)	translate_count((p), (needle), __LINE__)

TEST(patch_facts_read_like_jansson)
{
	char *pod;
	size_t cap = 64 * 1024, len = 0;

	/* Equal keys (one escaped) of a map are one key, where it came first. */
	CHECK_INT(TRANSLATE("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"limits\":{\"nvidia.com/gpu\":1,\"cpu\":1,"
	    "\"nvidia.com\\/gpu\":2,\"nvidia.com/mig-1g.5gb\":1,"
	    "\"nvidia.com/gpu\":3},\"requests\":{\"nvidia.com/gpu\":1}}}]}}",
	    "\"remove\""), 3);
	CHECK_INT(TRANSLATE("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"limits\":{\"nvidia.com/gpu.x\":1,\"cpu\":1,"
	    "\"nvidia.com/gpu\":2,\"nvidia.com/gpu.x\":1}}}]}}",
	    "limits/nvidia.com~1gpu.x\"},{\"op\":\"remove\",\"path\":"
	    "\"/spec/containers/0/resources/limits/nvidia.com~1gpu\""), 1);
	/* A key that needs escapes in the JSON Pointer and in JSON. */
	CHECK_INT(TRANSLATE("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"limits\":{\"nvidia.com/gpu.a\\\"b~\\u0001\":1}}}"
	    "]}}",
	    "\"path\":\"/spec/containers/0/resources/limits/"
	    "nvidia.com~1gpu.a\\\"b~0\\u0001\"}"), 1);
	/* A claim reference named with an escape, or by a later "name". */
	CHECK_INT(TRANSLATE("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"claims\":[1,\"kubeplus-gpu\",{\"name\":"
	    "\"kubeplus\\u002dgpu\"}]}}]}}", "/resources/claims"), 0);
	CHECK_INT(TRANSLATE("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"claims\":[{\"name\":\"x\",\"name\":"
	    "\"kubeplus-gpu\"}]}}]}}", "/resources/claims"), 0);
	CHECK_INT(TRANSLATE("{\"spec\":{\"containers\":[{\"name\":\"a\","
	    "\"resources\":{\"claims\":[{\"name\":\"kubeplus-gpu\",\"name\":"
	    "\"x\"}]}}]}}", "/resources/claims/-"), 1);
	/* The pod claim entry: its distinct members and its reference. */
	CHECK_INT(TRANSLATE("{\"spec\":{\"resourceClaims\":[{\"name\":"
	    "\"kubeplus-gpu\",\"resourceClaimName\":\"shared\",\"name\":"
	    "\"kubeplus-gpu\"}],\"containers\":[" PLAIN "]}}",
	    "resourceClaims"), 0);
	CHECK_INT(TRANSLATE("{\"spec\":{\"resourceClaims\":[1,{\"name\":"
	    "\"kubeplus-gpu\",\"resourceClaim\\u004eame\":\"shared\","
	    "\"x\":1}],\"containers\":[" PLAIN "]}}",
	    "\"replace\",\"path\":\"/spec/resourceClaims/1\""), 1);
	CHECK_INT(TRANSLATE("{\"spec\":{\"resourceClaims\":[{\"name\":"
	    "\"kubeplus-gpu\",\"resourceClaimName\":\"shared\","
	    "\"resourceClaimName\":\"other\"},{\"name\":\"kubeplus-gpu\"}],"
	    "\"containers\":[" PLAIN "]}}", "/spec/resourceClaims/0"), 1);
	/* Many legacy keys, each twice: one remove each, in first order. */
	CHECK((pod = malloc(cap)) != NULL);
	if (pod == NULL)
		return;
	len += (size_t)snprintf(pod, cap, "{\"spec\":{\"containers\":[{"
	    "\"name\":\"a\",\"resources\":{\"limits\":{");
	for (int i = 0; i < 600; i++)
		len += (size_t)snprintf(pod + len, cap - len, "%s\"nvidia.com/"
		    "gpu.%d\":1", i > 0 ? "," : "", (i * 7) % 300);
	snprintf(pod + len, cap - len, "}}}]}}");
	CHECK_INT(TRANSLATE(pod, "\"remove\""), 300);
	CHECK_INT(TRANSLATE(pod, "gpu.0\"},{\"op\":\"remove\",\"path\":"
	    "\"/spec/containers/0/resources/limits/nvidia.com~1gpu.7\""), 1);
	free(pod);
}
