/* SPDX-License-Identifier: Apache-2.0 */
/*
 * usage_fill CACHE N: the usage ledger of cache file CACHE gets N closed
 * one-device intervals written by the ledger's own writer (cache/usage.c),
 * claims fill-0 .. fill-(N-1) over tenants fill-a and fill-b, each 60 s
 * long, starting two days ago plus its index in seconds (inside the
 * default raw retention). For tests that need more rows than one USAGE
 * page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache_write.h"
#include "cache/usage.h"

int
main(int argc, char **argv)
{
	uint64_t base = ((uint64_t)time(NULL) - 2 * 86400) * 1000000u, start;
	char uid[64], claim[64];
	struct usage_store *s;
	struct usage_row r;
	struct cache *c;
	unsigned long i, n;
	char *end;

	if (argc != 3) {
		fprintf(stderr, "usage: usage_fill CACHE N\n");
		return 2;
	}
	n = strtoul(argv[2], &end, 10);
	if (*end != '\0' || n == 0 || n > 1000000) {
		fprintf(stderr, "usage_fill: N must be 1 .. 1000000\n");
		return 2;
	}
	if (cache_open(argv[1], 0, &c) < 0 || usage_store_open(c, &s) < 0) {
		fprintf(stderr, "usage_fill: cannot open %s\n", argv[1]);
		return 1;
	}
	for (i = 0; i < n; i++) {
		if (i % 1000 == 0 && ((i > 0 && cache_commit(c) < 0) ||
		    cache_begin(c) < 0))
			return 1;
		snprintf(uid, sizeof(uid), "fill-uid-%lu", i);
		snprintf(claim, sizeof(claim), "fill-%lu", i);
		start = base + (uint64_t)i * 1000000u;
		memset(&r, 0, sizeof(r));
		r.claim_uid = uid;
		r.start_us = start;
		r.ns = i % 2 ? "fill-b" : "fill-a";
		r.instance = i % 2 ? "Agent/fill-b" : "Agent/fill-a";
		r.claim = claim;
		r.driver = "gpu.nvidia.com";
		r.pool = "node-1";
		r.device = "gpu-0";
		r.device_class = "gpu.nvidia.com";
		r.profile = "";
		r.share = 1.0;
		r.sig = "gpu-0";
		r.lo_us = start;
		if (usage_row_add(s, &r) < 0 || usage_close(s, uid, start,
		    start + 60000000u, 0, start + 60000000u) < 0)
			return 1;
	}
	if (cache_commit(c) < 0)
		return 1;
	usage_store_free(s);
	cache_free(c);
	return 0;
}
