/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nscache_bench [N] [LOOKUPS]: kpgpud-admit's namespace map with N
 * namespaces (half isolated with a resolved annotation, half open), one
 * thread: ns per insert while filling it, ns per lookup of a present
 * namespace (in a scattered order) and of an absent one, and ns per
 * namespace for a full snapshot (begin, put every namespace again, end),
 * and the heap the map holds per namespace (mallinfo2: bytes allocated
 * after filling it, less before) and per isolated one (the same filled
 * with open namespaces only, the difference over N/2). The annotation is
 * what kpgpud-quota writes by default (the common sidecars listed).
 * Prints one JSON object. Figures, no asserts.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kpgpud-admit/nscache.h"

#define RES_HEAD	"{\"claimTemplateName\":\"agent-bench-agent-gpu\"," \
		"\"initContainers\":\"none\",\"instance\":" \
		"\"Agent/bench-agent\",\"legacyGPU\":\"reject\"," \
		"\"sharing\":\"mig\",\"sidecarContainers\":["

static char	res[2048];

/* CPU time of this process in nanoseconds. */
static double
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef char name_t[32];

/* n names PREFIX-i (bench-ns-* as scripts/bench makes them). */
static name_t *
names(unsigned long n, const char *prefix)
{
	name_t *v = calloc(n, sizeof(*v));

	for (unsigned long i = 0; v != NULL && i < n; i++)
		snprintf(v[i], sizeof(v[i]), "%s-%lu", prefix, i);
	return v;
}

/* The annotation quota writes by default: the common sidecars listed. */
static void
make_res(void)
{
	size_t o = (size_t)snprintf(res, sizeof(res), "%s", RES_HEAD);

	for (int i = 0; resolved_default_sidecars[i] != NULL; i++)
		o += (size_t)snprintf(res + o, sizeof(res) - o, "%s\"%s\"",
		    i > 0 ? "," : "", resolved_default_sidecars[i]);
	snprintf(res + o, sizeof(res) - o, "]}");
}

/* Bytes of heap in use now. */
static double
heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (double)mi.uordblks + (double)mi.hblkhd;
}

/* Put every namespace of v (every other one isolated when iso); failures. */
static unsigned long
fill_some(struct nscache *c, name_t *v, unsigned long n, int iso)
{
	unsigned long bad = 0;

	for (unsigned long i = 0; i < n; i++)
		if (nscache_put(c, v[i], iso && i % 2 == 0,
		    iso && i % 2 == 0 ? res : NULL, NULL, 0) < 0)
			bad++;
	return bad;
}

/* Put every namespace of v, every other one isolated; failures. */
static unsigned long
fill(struct nscache *c, name_t *v, unsigned long n)
{
	return fill_some(c, v, n, 1);
}

/* Heap bytes a map of n open namespaces holds. */
static double
open_bytes(name_t *v, unsigned long n)
{
	struct nscache *c;
	double h0 = heap_bytes(), h;

	if (nscache_new(n, &c) < 0)
		return 0;
	fill_some(c, v, n, 0);
	h = heap_bytes() - h0;
	nscache_free(c);
	return h;
}

/* Look up k names of v in a scattered order; the number found. */
static unsigned long
look(struct nscache *c, name_t *v, unsigned long n, unsigned long k)
{
	const struct resolved_pack *r;
	unsigned long found = 0;

	for (unsigned long j = 0; j < k; j++) {
		r = NULL;
		found += nscache_get(c, v[(j * 2654435761ul) % n], &r) !=
		    NSCACHE_MISSING;
		resolved_pack_unref(r);
	}
	return found;
}

int
main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	unsigned long k = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000;
	unsigned long bad, hits, misses;
	double t0, t_fill, t_hit, t_miss, t_full, h_open, h0, h_all;
	struct nscache *c;
	name_t *in = names(n, "bench-ns"), *out = names(n, "other-ns");

	if (n == 0 || k == 0 || in == NULL || out == NULL ||
	    nscache_new(n, &c) < 0) {
		fprintf(stderr, "usage: nscache_bench [N] [LOOKUPS]\n");
		return 2;
	}
	make_res();
	h_open = open_bytes(in, n);
	h0 = heap_bytes();
	t0 = cpu_ns();
	bad = fill(c, in, n);
	t_fill = cpu_ns() - t0;
	h_all = heap_bytes() - h0;
	t0 = cpu_ns();
	hits = look(c, in, n, k);
	t_hit = cpu_ns() - t0;
	t0 = cpu_ns();
	misses = k - look(c, out, n, k);
	t_miss = cpu_ns() - t0;
	t0 = cpu_ns();
	nscache_begin_full(c);
	bad += fill(c, in, n);
	bad += nscache_end_full(c);
	t_full = cpu_ns() - t0;
	printf("{\"namespaces\":%lu,\"lookups\":%lu,\"failed\":%lu,"
	    "\"hits\":%lu,\"misses\":%lu,\"ns_per_insert\":%.1f,"
	    "\"ns_per_lookup_hit\":%.1f,\"ns_per_lookup_miss\":%.1f,"
	    "\"ns_per_snapshot_ns\":%.1f,\"heap_bytes_per_ns\":%.0f,"
	    "\"heap_bytes_per_isolated_ns\":%.0f}\n", n, k, bad, hits,
	    misses, t_fill / (double)n, t_hit / (double)k, t_miss / (double)k,
	    t_full / (double)n, h_all / (double)n,
	    (h_all - h_open) / (double)(n / 2 > 0 ? n / 2 : 1));
	nscache_free(c);
	free(in);
	free(out);
	return bad != 0 || hits != k || misses != k;
}
