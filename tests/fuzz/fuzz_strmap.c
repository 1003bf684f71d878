/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for common/strmap.c, the string-keyed hash map: the
 * input is a program of operations (put, remove, get, iterate, iterate
 * while removing) over 48 keys, some sharing a long prefix, under a cap
 * and a capacity hint taken from the first byte. Every step is checked
 * against a plain array: a lost, stale or repeated entry, a wrong old
 * value, a count off by one or a cap not held aborts.
 * fuzz-sources: common/strmap.c common/util.c
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FS_KEYS	48

struct fs_model {
	struct strmap	*m;
	void		*val[FS_KEYS];
	bool		 in[FS_KEYS];
	size_t		 n, max;
};

static char fs_keys[FS_KEYS][64];

/* The key universe: short names, long shared prefixes, the empty key. */
static void
fs_init(void)
{
	for (int i = 1; i < FS_KEYS; i++)
		snprintf(fs_keys[i], sizeof(fs_keys[i]), i % 3 == 0 ? "ns-%d" :
		    i % 3 == 1 ? "tenant-with-a-long-shared-prefix-%d" : "%d", i);
}

/* Abort unless cond holds: the map and the model disagree. */
static void
fs_check(bool cond)
{
	if (!cond)
		abort();
}

/* The index of a key of the universe (by content). */
static int
fs_index(const char *key)
{
	for (int i = 0; i < FS_KEYS; i++)
		if (strcmp(fs_keys[i], key) == 0)
			return i;
	abort();
}

/* One put, checked. */
static void
fs_put(struct fs_model *s, int k, void *v)
{
	void *old = NULL;
	int r = strmap_put(s->m, fs_keys[k], v, &old);

	if (s->in[k])
		fs_check(r == 0 && old == s->val[k]);
	else if (s->n >= s->max)
		fs_check(r == -E2BIG);
	else {
		fs_check(r == 1);
		s->in[k] = true;
		s->n++;
	}
	if (r >= 0)
		s->val[k] = v;
}

/* One remove, by a copy of the key, checked. */
static void
fs_remove(struct fs_model *s, int k)
{
	char copy[64];
	void *v = NULL;
	int r;

	memcpy(copy, fs_keys[k], sizeof(copy));
	r = strmap_remove(s->m, copy, &v);
	if (!s->in[k]) {
		fs_check(r == -ENOENT);
		return;
	}
	fs_check(r == 0 && v == s->val[k]);
	s->in[k] = false;
	s->n--;
}

/* A whole iteration; entries whose index has bit `drop` set are removed. */
static void
fs_iterate(struct fs_model *s, int drop)
{
	bool seen[FS_KEYS] = { false };
	const char *key;
	size_t pos = 0, n = 0;
	void *v;
	int k;

	while (strmap_next(s->m, &pos, &key, &v)) {
		k = fs_index(key);
		fs_check(key == fs_keys[k] && s->in[k] && !seen[k] &&
		    v == s->val[k]);
		seen[k] = true;
		n++;
		if (drop >= 0 && (k >> drop) & 1)
			fs_remove(s, k);
	}
	fs_check(drop >= 0 || n == s->n);
	for (k = 0; drop < 0 && k < FS_KEYS; k++)
		fs_check(seen[k] == s->in[k]);
}

/* Run the program in data against a map and the model. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_model s = { 0 };
	int k;

	if (size == 0)
		return 0;
	if (fs_keys[1][0] == '\0')
		fs_init();
	s.max = data[0] % 40 + 1;
	if (strmap_new((size_t)(data[0] >> 6) * 12, s.max, &s.m) < 0)
		abort();
	for (size_t i = 1; i + 1 < size; i += 2) {
		k = data[i + 1] % FS_KEYS;
		switch (data[i] % 5) {
		case 0:
		case 1:
			fs_put(&s, k, (void *)(uintptr_t)(i + 1));
			break;
		case 2:
			fs_remove(&s, k);
			break;
		case 3:
			fs_check(strmap_get(s.m, fs_keys[k]) ==
			    (s.in[k] ? s.val[k] : NULL));
			fs_check(strmap_has(s.m, fs_keys[k]) == s.in[k]);
			break;
		default:
			fs_iterate(&s, data[i + 1] % 7 - 1);
			break;
		}
		fs_check(strmap_count(s.m) == s.n);
	}
	fs_iterate(&s, -1);
	strmap_free(s.m, NULL);
	return 0;
}
