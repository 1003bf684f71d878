/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for common/strmap.c, the string-keyed hash map: insert,
 * replace, lookup, remove, iteration (also while removing), growth and the
 * capacity hint, the entry cap, 100,000 namespace names, the bytes a grown
 * map holds (and gives back), growing its index without holding the old
 * one beside it (resident memory), a set holding no values, keys that
 * collide in the table, tombstone sweeping under churn and the per-map
 * hash seed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "tests/unit/test.h"

static int freed;

/* Put a copy of the formatted key into m, the copy as its own value. */
static int __attribute__((format(printf, 2, 3)))
put_copy(struct strmap *m, const char *fmt, ...)
{
	char buf[64], *k;
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if ((k = strdup(buf)) == NULL)
		return -ENOMEM;
	if ((r = strmap_put(m, k, k, NULL)) != 1)
		free(k);
	return r;
}

/* A free_val that counts its calls. */
static void
count_free(void *v)
{
	(void)v;
	freed++;
}

TEST(put_get_replace_remove)
{
	struct strmap *m;
	int a = 1, b = 2, c = 3;
	void *old = NULL, *v = NULL;

	REQUIRE(strmap_new(0, 0, &m) == 0);
	CHECK(strmap_get(m, "a") == NULL);
	CHECK(!strmap_has(m, "a"));
	CHECK_INT(strmap_put(m, "a", &a, NULL), 1);
	CHECK_INT(strmap_put(m, "b", &b, NULL), 1);
	CHECK(strmap_get(m, "a") == &a);
	CHECK(strmap_get(m, "b") == &b);
	CHECK(strmap_get(m, "c") == NULL);
	CHECK(strmap_get(m, "") == NULL);
	CHECK_INT(strmap_count(m), 2);
	CHECK_INT(strmap_put(m, "a", &c, &old), 0);
	CHECK(old == &a);
	CHECK(strmap_get(m, "a") == &c);
	CHECK_INT(strmap_count(m), 2);
	CHECK_INT(strmap_remove(m, "a", &v), 0);
	CHECK(v == &c);
	CHECK_INT(strmap_remove(m, "a", &v), -ENOENT);
	CHECK(!strmap_has(m, "a"));
	CHECK_INT(strmap_count(m), 1);
	/* The empty string is a key like any other. */
	CHECK_INT(strmap_put(m, "", &a, NULL), 1);
	CHECK(strmap_get(m, "") == &a);
	freed = 0;
	strmap_free(m, count_free);
	CHECK_INT(freed, 2);
	strmap_free(NULL, count_free);
}

TEST(null_values_make_a_set)
{
	struct strmap *m;

	REQUIRE(strmap_new(0, 0, &m) == 0);
	CHECK_INT(strmap_put(m, "ns/x", NULL, NULL), 1);
	CHECK_INT(strmap_put(m, "ns/x", NULL, NULL), 0);
	CHECK(strmap_has(m, "ns/x"));
	CHECK(strmap_get(m, "ns/x") == NULL);
	CHECK(!strmap_has(m, "ns/y"));
	CHECK_INT(strmap_count(m), 1);
	strmap_free(m, NULL);
}

TEST(keys_are_borrowed)
{
	struct strmap *m;
	char k1[16] = "team-a", k2[16] = "team-a";
	const char *k = NULL;
	size_t pos = 0;
	int v = 7, w = 8;

	REQUIRE(strmap_new(0, 0, &m) == 0);
	CHECK_INT(strmap_put(m, k1, &v, NULL), 1);
	pos = 0;
	CHECK(strmap_next(m, &pos, &k, NULL));
	CHECK(k == k1);
	/* A replacing put takes the new key pointer with the new value. */
	CHECK_INT(strmap_put(m, k2, &w, NULL), 0);
	pos = 0;
	CHECK(strmap_next(m, &pos, &k, NULL));
	CHECK(k == k2);
	memset(k1, 'x', sizeof(k1) - 1);
	CHECK(strmap_get(m, "team-a") == &w);
	strmap_free(m, NULL);
}

TEST(cap_and_bad_max)
{
	struct strmap *m;
	int v;

	CHECK_INT(strmap_new(0, STRMAP_MAX + 1, &m), -EINVAL);
	REQUIRE(strmap_new(0, 3, &m) == 0);
	CHECK_INT(strmap_put(m, "a", &v, NULL), 1);
	CHECK_INT(strmap_put(m, "b", &v, NULL), 1);
	CHECK_INT(strmap_put(m, "c", &v, NULL), 1);
	CHECK_INT(strmap_put(m, "d", &v, NULL), -E2BIG);
	CHECK(!strmap_has(m, "d"));
	CHECK_INT(strmap_count(m), 3);
	/* Replacing is not adding. */
	CHECK_INT(strmap_put(m, "c", NULL, NULL), 0);
	CHECK_INT(strmap_remove(m, "a", NULL), 0);
	CHECK_INT(strmap_put(m, "d", &v, NULL), 1);
	CHECK_INT(strmap_count(m), 3);
	strmap_free(m, NULL);
}

TEST(iterate_and_remove_while_iterating)
{
	struct strmap *m;
	char seen[200] = { 0 };
	const char *k;
	void *v;
	size_t pos = 0, n = 0;
	int i;

	REQUIRE(strmap_new(0, 0, &m) == 0);
	CHECK(!strmap_next(m, &pos, &k, &v));
	for (i = 0; i < 200; i++)
		REQUIRE(put_copy(m, "k%d", i) == 1);
	pos = 0;
	while (strmap_next(m, &pos, &k, &v)) {
		CHECK(k == v);
		REQUIRE(sscanf(k, "k%d", &i) == 1 && i >= 0 && i < 200);
		seen[i]++;
		n++;
		/* drop the odd ones as we go, by the entry's own key */
		if (i % 2 == 1) {
			CHECK_INT(strmap_remove(m, k, NULL), 0);
			free(v);
		}
	}
	CHECK_INT(n, 200);
	for (i = 0; i < 200; i++)
		CHECK_INT(seen[i], 1);
	CHECK_INT(strmap_count(m), 100);
	for (pos = 0, n = 0; strmap_next(m, &pos, &k, NULL); n++)
		CHECK(sscanf(k, "k%d", &i) == 1 && i % 2 == 0);
	CHECK_INT(n, 100);
	CHECK(strmap_has(m, "k0") && !strmap_has(m, "k1"));
	strmap_free(m, free);
}

TEST(grow_and_hint)
{
	struct strmap *m;
	char key[32];
	size_t slots;
	int i;

	REQUIRE(strmap_new(0, 0, &m) == 0);
	slots = strmap_slots(m);
	CHECK(slots >= 4 && (slots & (slots - 1)) == 0);
	for (i = 0; i < (int)slots; i++)
		REQUIRE(put_copy(m, "g%d", i) == 1);
	/* never more than three quarters full */
	CHECK(strmap_slots(m) >= slots * 2);
	CHECK(strmap_count(m) * 4 <= strmap_slots(m) * 3);
	for (i = 0; i < (int)slots; i++) {
		snprintf(key, sizeof(key), "g%d", i);
		CHECK(strmap_has(m, key));
	}
	strmap_free(m, free);

	/* A hint sizes the table once: 1,000 entries, no growth. */
	REQUIRE(strmap_new(1000, 0, &m) == 0);
	slots = strmap_slots(m);
	CHECK(slots * 3 >= 1000 * 4);
	for (i = 0; i < 1000; i++)
		REQUIRE(put_copy(m, "h%d", i) == 1);
	CHECK_INT(strmap_slots(m), slots);
	strmap_free(m, free);
}

TEST(hundred_thousand_namespaces)
{
	struct strmap *m;
	char key[64];
	const char *k;
	size_t pos = 0, n = 0;
	void *v;
	int i, bad = 0;

	REQUIRE(strmap_new(0, 100000, &m) == 0);
	for (i = 0; i < 100000; i++)
		if (put_copy(m, "tenant-%d-ns", i) != 1)
			bad++;
	CHECK_INT(bad, 0);
	CHECK_INT(strmap_count(m), 100000);
	CHECK_INT(strmap_put(m, "one-too-many", NULL, NULL), -E2BIG);
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "tenant-%d-ns", i);
		if ((k = strmap_get(m, key)) == NULL || strcmp(k, key) != 0)
			bad++;
		snprintf(key, sizeof(key), "tenant-%d-nt", i);
		if (strmap_has(m, key))
			bad++;
	}
	CHECK_INT(bad, 0);
	for (i = 0; i < 100000; i += 2) {
		snprintf(key, sizeof(key), "tenant-%d-ns", i);
		v = NULL;
		if (strmap_remove(m, key, &v) != 0)
			bad++;
		free(v);
	}
	CHECK_INT(bad, 0);
	CHECK_INT(strmap_count(m), 50000);
	while (strmap_next(m, &pos, &k, NULL)) {
		if (sscanf(k, "tenant-%d-ns", &i) != 1 || i % 2 != 1)
			bad++;
		n++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(n, 50000);
	strmap_free(m, free);
}

/* A /proc/self/status field in kB, or -1. */
static long
status_kb(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, field, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/*
 * The growth from 131,072 to 262,144 index slots (at 98,305 keys: sync's
 * list key set at a 100,000-namespace list, admit's namespace map) holds
 * the new 1 MB index only, not the old 0.5 MB one beside it: the peak
 * resident size of the process (VmHWM, reset just before by clear_refs)
 * is no higher than what it holds afterwards, give or take 128 kB. Before,
 * the new index was allocated and filled first: 512 kB above.
 */
TEST(growing_holds_one_index)
{
	enum { N = 98304, KEYLEN = 16 };
	struct strmap *m;
	char *keys;
	long hwm, rss;
	int i, bad = 0;
	FILE *f;

#if defined(__SANITIZE_ADDRESS__)
	test_skip("ASan's allocator copies and quarantines what realloc "
	    "moves: resident memory says nothing here");
	return;
#endif
	REQUIRE((keys = calloc(N + 1, KEYLEN)) != NULL);
	REQUIRE(strmap_new(0, 0, &m) == 0);
	for (i = 0; i <= N; i++) {
		snprintf(keys + (size_t)i * KEYLEN, KEYLEN, "ns-%d", i);
		if (i < N && strmap_put(m, keys + (size_t)i * KEYLEN, NULL,
		    NULL) != 1)
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(strmap_slots(m), 131072);	/* the next put grows it */
	if ((f = fopen("/proc/self/clear_refs", "w")) == NULL ||
	    fputs("5", f) < 0 || fclose(f) != 0) {
		test_skip("/proc/self/clear_refs cannot reset the peak RSS");
		strmap_free(m, NULL);
		free(keys);
		return;
	}
	CHECK_INT(strmap_put(m, keys + (size_t)N * KEYLEN, NULL, NULL), 1);
	CHECK_INT(strmap_slots(m), 262144);
	hwm = status_kb("VmHWM");
	rss = status_kb("VmRSS");
	CHECK(hwm > 0 && rss > 0);
	if (hwm - rss > 128)
		test_fail(__FILE__, __LINE__, "peak %ld kB, after %ld kB",
		    hwm, rss);
	strmap_free(m, NULL);
	free(keys);
}

TEST(bytes_held)
{
	struct strmap *m;
	char key[32];
	void *v;
	int i, bad = 0;

	/*
	 * 100,000 keys put one by one into a map sized for none: the entries
	 * grow by blocks (never copied) and the index by 4-byte slots, about
	 * 42 bytes an entry here; a table of 24-byte slots at most three
	 * quarters full held 63 (6 MB), and 9 MB while doubling.
	 */
	REQUIRE(strmap_new(0, 0, &m) == 0);
	for (i = 0; i < 100000; i++)
		if (put_copy(m, "bench-ns-%06d", i) != 1)
			bad++;
	CHECK_INT(bad, 0);
	CHECK(strmap_bytes(m) <= (size_t)100000 * 44);
	CHECK(strmap_bytes(m) >= strmap_slots(m) * 4 + (size_t)100000 * 24);
	strmap_free(m, free);

	/*
	 * A map that held 1,000 and keeps 8: once churn makes it rebuild, its
	 * index shrinks and the entry blocks past the 8 are given back.
	 */
	REQUIRE(strmap_new(0, 0, &m) == 0);
	for (i = 0; i < 1000; i++)
		REQUIRE(put_copy(m, "big-%d", i) == 1);
	for (i = 8; i < 1000; i++) {
		snprintf(key, sizeof(key), "big-%d", i);
		v = NULL;
		REQUIRE(strmap_remove(m, key, &v) == 0);
		free(v);
	}
	for (i = 0; i < 100000 && strmap_slots(m) > 32; i++) {
		if (put_copy(m, "churn-%d", i) != 1)
			bad++;
		snprintf(key, sizeof(key), "churn-%d", i);
		v = NULL;
		if (strmap_remove(m, key, &v) != 0)
			bad++;
		free(v);
	}
	CHECK_INT(bad, 0);
	CHECK(strmap_slots(m) <= 32);
	CHECK(strmap_bytes(m) <= 32 * 4 + (16 + 32) * 24);
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "big-%d", i);
		CHECK(strmap_has(m, key));
	}
	strmap_free(m, free);
}

/*
 * A set (every value NULL) keeps no values: 100,000 keys take their 16-byte
 * entries and the index, not the 24 bytes an entry of a map with values
 * (0.8 MB more at 100,000). The first value other than NULL gives every
 * entry a value, NULL for those there before; the set then reads and
 * iterates as any map, also across a rebuild that moves the entries.
 */
TEST(set_holds_no_values)
{
	enum { N = 100000, KEYLEN = 24 };
	struct strmap *m;
	char *keys, *k;
	const char *key;
	size_t pos = 0, seen = 0, withval = 0, set_bytes;
	void *v;
	int i, bad = 0, one = 1;

	REQUIRE((keys = calloc(N, KEYLEN)) != NULL);
	REQUIRE(strmap_new(0, 0, &m) == 0);
	for (i = 0; i < N; i++) {
		k = keys + (size_t)i * KEYLEN;
		snprintf(k, KEYLEN, "tenant-%d-ns", i);
		if (strmap_put(m, k, NULL, NULL) != 1)
			bad++;
	}
	CHECK_INT(bad, 0);
	set_bytes = strmap_bytes(m);
	/* blocks of 16 << k entries for k = 0..12 hold 131,056 entries */
	CHECK_INT(set_bytes, strmap_slots(m) * 4 + (size_t)131056 * 16);

	CHECK_INT(strmap_put(m, keys, &one, &v), 0);
	CHECK(v == NULL);
	CHECK_INT(strmap_bytes(m), set_bytes + (size_t)131056 * 8);
	CHECK(strmap_get(m, keys) == &one);
	CHECK(strmap_get(m, keys + KEYLEN) == NULL);
	CHECK(strmap_has(m, keys + KEYLEN));

	/* remove all but every 1,000th key, then churn until a rebuild */
	for (i = 1; i < N; i++)
		if (i % 1000 != 0 &&
		    strmap_remove(m, keys + (size_t)i * KEYLEN, NULL) != 0)
			bad++;
	for (i = 0; i < N; i += 1000)
		if (i > 0 && strmap_put(m, keys + (size_t)i * KEYLEN, keys +
		    (size_t)i * KEYLEN, NULL) != 0)
			bad++;
	CHECK_INT(bad, 0);
	for (i = 0; i < 2000000 && strmap_slots(m) > 256; i++) {
		char tmp[32];

		snprintf(tmp, sizeof(tmp), "churn-%d", i);
		if (strmap_put(m, tmp, NULL, NULL) != 1 ||
		    strmap_remove(m, tmp, NULL) != 0)
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK(strmap_slots(m) <= 256);
	CHECK_INT(strmap_count(m), 100);
	while (strmap_next(m, &pos, &key, &v)) {
		seen++;
		if (key == keys)
			bad += v != &one;
		else if (v != key)
			bad++;
		else
			withval++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(seen, 100);
	CHECK_INT(withval, 99);
	CHECK(strmap_get(m, keys) == &one);
	CHECK(strmap_get(m, keys + (size_t)5000 * KEYLEN) ==
	    keys + (size_t)5000 * KEYLEN);
	strmap_free(m, NULL);
	free(keys);
}

TEST(colliding_keys)
{
	struct strmap *m;
	char keys[6][32], key[32];
	size_t slots, mask, found = 0;
	uint64_t want;
	int i;

	/* Six keys that start probing at the same slot of a small table. */
	REQUIRE(strmap_new(0, 0, &m) == 0);
	slots = strmap_slots(m);
	mask = slots - 1;
	want = strmap_hash(m, "c0") & mask;
	for (i = 0; found < 6 && i < 100000; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		if ((strmap_hash(m, key) & mask) == want)
			memcpy(keys[found++], key, sizeof(key));
	}
	REQUIRE(found == 6);
	for (i = 0; i < 6; i++)
		REQUIRE(strmap_put(m, keys[i], keys[i], NULL) == 1);
	CHECK_INT(strmap_slots(m), slots);	/* still one run, no growth */
	for (i = 0; i < 6; i++)
		CHECK(strmap_get(m, keys[i]) == keys[i]);
	/* Removing from the middle of the run keeps the rest reachable. */
	CHECK_INT(strmap_remove(m, keys[2], NULL), 0);
	CHECK_INT(strmap_remove(m, keys[0], NULL), 0);
	CHECK(!strmap_has(m, keys[2]));
	for (i = 3; i < 6; i++)
		CHECK(strmap_get(m, keys[i]) == keys[i]);
	CHECK(strmap_get(m, keys[1]) == keys[1]);
	/* A put of a key further down the run finds it, not a tombstone. */
	CHECK_INT(strmap_put(m, keys[5], NULL, NULL), 0);
	CHECK_INT(strmap_count(m), 4);
	CHECK_INT(strmap_put(m, keys[2], keys[2], NULL), 1);
	CHECK_INT(strmap_put(m, keys[0], keys[0], NULL), 1);
	CHECK_INT(strmap_count(m), 6);
	for (i = 0; i < 5; i++)
		CHECK(strmap_get(m, keys[i]) == keys[i]);
	strmap_free(m, NULL);
}

TEST(churn_sweeps_tombstones)
{
	struct strmap *m;
	char key[32];
	void *v;
	int i, bad = 0;

	/* 100,000 distinct keys, never more than 8 at once. */
	REQUIRE(strmap_new(0, 0, &m) == 0);
	for (i = 0; i < 100000; i++) {
		if (put_copy(m, "pod-%d", i) != 1)
			bad++;
		if (i >= 8) {
			snprintf(key, sizeof(key), "pod-%d", i - 8);
			v = NULL;
			if (strmap_remove(m, key, &v) != 0)
				bad++;
			free(v);
		}
	}
	CHECK_INT(bad, 0);
	CHECK_INT(strmap_count(m), 8);
	CHECK(strmap_slots(m) <= 32);
	CHECK(strmap_has(m, "pod-99999"));
	CHECK(!strmap_has(m, "pod-99991"));
	strmap_free(m, free);
}

TEST(seed_differs_per_map)
{
	struct strmap *a, *b;
	char key[32];
	int differ = 0;

	REQUIRE(strmap_new(0, 0, &a) == 0);
	REQUIRE(strmap_new(0, 0, &b) == 0);
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "ns-%d", i);
		CHECK(strmap_hash(a, key) == strmap_hash(a, key));
		differ += strmap_hash(a, key) != strmap_hash(b, key);
	}
	CHECK_INT(differ, 8);
	strmap_free(a, NULL);
	strmap_free(b, NULL);
}
