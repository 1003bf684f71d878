#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Records and the final report of scripts/bench.

    report.py rec FILE JSON [KEY=VALUE...]   append JSON + fields to FILE
    report.py last FILE                      one line about the last record
    report.py final FILE OUT.json [KEY=VALUE...]
        the table and the targets on stdout, everything in OUT.json

Figures are reported, never asserted: a missed target is printed as
"missed", and the exit status stays 0.
"""

import json
import sys
import time


def value(v):
    """A KEY=VALUE value as a number when it reads as one."""
    for f in (int, float):
        try:
            return f(v)
        except ValueError:
            pass
    return v


def load(path):
    """Every record of FILE."""
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def derive(r):
    """Add per-request server CPU to a wrk record."""
    if "server_cpu_s" in r and r.get("requests"):
        r["server_cpu_us_per_req"] = round(
            r["server_cpu_s"] * 1e6 / r["requests"], 1)
    return r


def line(r):
    """A one-line summary of a record."""
    if "rps" in r:
        # the machine around the run: CPU seconds the simulator and sync
        # used, that stayed idle, and that the hypervisor took
        around = "".join("  %s %.2fs" % (k[:-2], r[k]) for k in (
            "sim_s", "sync_s", "idle_s", "steal_s") if k in r)
        return ("%-28s %9.0f req/s  p50 %7.3f ms  p99 %7.3f ms  "
                "%6.1f us CPU/req%s%s" % (
                    r["name"], r["rps"], r["p50_ms"], r["p99_ms"],
                    r.get("server_cpu_us_per_req", 0), around,
                    "  ERRORS %s" % r["errors"] if any(
                        r["errors"].values()) else ""))
    keys = [k for k in r if k not in ("name", "section")]
    return "%-28s %s" % (r.get("name", "?"), "  ".join(
        "%s=%s" % (k, r[k]) for k in keys))


def median(xs):
    """The median of a non-empty list."""
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


def combine(recs):
    """One record per name, in first-seen order: repeated wrk runs become
    their medians (rps, latencies, CPU per request) with every round's
    requests per second kept in rps_rounds."""
    order, groups = [], {}
    for r in recs:
        n = r.get("name")
        if n not in groups:
            order.append(n)
            groups[n] = []
        groups[n].append(r)
    out = []
    for n in order:
        g = groups[n]
        if len(g) == 1 or "rps" not in g[0]:
            out.append(g[-1])
            continue
        c = dict(g[-1])
        for k in ("rps", "p50_ms", "p90_ms", "p99_ms", "mean_ms",
                  "server_cpu_us_per_req", "sim_s", "sync_s", "idle_s",
                  "steal_s"):
            if all(k in x for x in g):
                c[k] = round(median([x[k] for x in g]), 3)
        if all("idle_s" in x for x in g):
            c["idle_s_rounds"] = [x["idle_s"] for x in g]
        c["max_ms"] = max(x["max_ms"] for x in g)
        c["requests"] = sum(x["requests"] for x in g)
        c["errors"] = {k: sum(x["errors"][k] for x in g)
                       for k in g[0]["errors"]}
        c["rounds"] = len(g)
        c["rps_rounds"] = [x["rps"] for x in g]
        c.pop("rep", None)
        out.append(c)
    return out


def by_name(recs):
    """Records keyed by name (the last one wins)."""
    return {r.get("name"): r for r in recs}


def scaled(d, prefix):
    """Records whose name starts with prefix, by their namespace count."""
    out = []
    for name, r in d.items():
        if name and name.startswith(prefix):
            out.append((int(name[len(prefix):]), r))
    return sorted(out, key=lambda x: x[0])


def ratio(a, b):
    """a / b rounded, None when either is missing."""
    if a is None or b in (None, 0):
        return None
    return round(a / b, 3)


def get(d, name, key):
    """d[name][key] or None."""
    return d.get(name, {}).get(key)


def ceiling(d):
    """admit / nginx for every pair of runs with the same load."""
    out = []
    for name, r in d.items():
        if not (name or "").startswith("admit ") or "rps" not in r:
            continue
        n = d.get("nginx " + name[len("admit "):])
        if n is None:
            continue
        out.append({"name": name + " / nginx",
                    "rps": ratio(r["rps"], n["rps"]),
                    "p50": ratio(r["p50_ms"], n["p50_ms"]),
                    "p99": ratio(r["p99_ms"], n["p99_ms"]),
                    "cpu": ratio(r["server_cpu_us_per_req"],
                                 n["server_cpu_us_per_req"])})
    return out


def targets(d):
    """Each target: (what, figure, goal, met or None when not measured)."""
    out = []

    def add(what, fig, goal, ok):
        out.append({"target": what, "figure": fig, "goal": goal,
                    "met": None if fig is None else ok(fig)})

    add("admit rps / nginx rps at 32 connections",
        ratio(get(d, "admit c=32", "rps"), get(d, "nginx c=32", "rps")),
        ">= 0.6", lambda x: x >= 0.6)
    add("  same, from CPU: nginx CPU/request / admit CPU/request at 32",
        ratio(get(d, "nginx c=32", "server_cpu_us_per_req"),
              get(d, "admit c=32", "server_cpu_us_per_req")),
        ">= 0.5", lambda x: x >= 0.5)
    for c in (4, 32):
        add("admit p99 / nginx p99 at %d connections" % c,
            ratio(get(d, "admit c=%d" % c, "p99_ms"),
                  get(d, "nginx c=%d" % c, "p99_ms")),
            "<= 1.5", lambda x: x <= 1.5)
    lo = get(d, "admit c=32", "rps")
    lo_cpu = get(d, "admit c=32", "server_cpu_us_per_req")
    for n, r in scaled(d, "admit ns="):
        add("admit rps with %d namespaces / with 10" % n,
            ratio(r.get("rps"), lo), "within 0.9..1.1",
            lambda x: 0.9 <= x <= 1.1)
        add("admit CPU/request with %d namespaces / with 10" % n,
            ratio(r.get("server_cpu_us_per_req"), lo_cpu),
            "within 0.9..1.1", lambda x: 0.9 <= x <= 1.1)
    cpu = ratio(get(d, "admit 100 containers", "server_cpu_us_per_req"),
                get(d, "admit 1 container", "server_cpu_us_per_req"))
    body = ratio(get(d, "admit 100 containers", "body_bytes"),
                 get(d, "admit 1 container", "body_bytes"))
    add("CPU/request growth 1->100 containers vs body growth (%s)" % body,
        cpu, "<= body growth", lambda x: body is not None and x <= body)
    ing = scaled(d, "sync ingest ns=")
    for n, r in ing:
        add("sync ingest objects/s (wall) at %d namespaces" % n,
            r.get("objects_per_s"), ">= 50000", lambda x: x >= 50000)
        add("sync ingest objects per CPU second at %d namespaces" % n,
            r.get("objects_per_cpu_s"), ">= 50000", lambda x: x >= 50000)
    if ing:
        add("sync peak RSS at %d namespaces (MB)" % ing[-1][0],
            ing[-1][1].get("peak_rss_mb"), "< 64", lambda x: x < 64)
    add("propagation p99 (ms)", get(d, "propagation", "p99_ms"), "< 100",
        lambda x: x < 100)
    q = d.get("quota converge", {})
    add("quota API requests/s / configured qps", q.get("rate_vs_qps"),
        ">= 0.8 (rate-bound)", lambda x: x >= 0.8)
    add("quota CPU / wall while converging", q.get("cpu_fraction"),
        "< 0.5 (not CPU-bound)", lambda x: x < 0.5)
    return out


def final(path, outpath, meta):
    """Print the table and the targets; write OUT.json."""
    recs = combine([derive(r) for r in load(path)])
    d = by_name(recs)
    tg = targets(d)
    print()
    print("== kpgpud benchmark (%s) ==" % meta.get("mode", "full"))
    sections = []
    for r in recs:
        if r.get("section") not in sections:
            sections.append(r.get("section"))
    for sec in sections:
        print("-- %s" % sec)
        for r in recs:
            if r.get("section") == sec:
                print("  " + line(r))
    cmp = ceiling(d)
    if cmp:
        print("-- admit as a ratio of the nginx ceiling (same run)")
        for c in cmp:
            print("  %-28s req/s %.3f  p50 %.2f  p99 %.2f  CPU/req %.1f" % (
                c["name"], c["rps"], c["p50"], c["p99"], c["cpu"]))
    a32, n32 = d.get("admit c=32", {}), d.get("nginx c=32", {})
    if "rps" in a32 and "rps" in n32:
        # rounds alternate admit and nginx: round k of each is a pair
        rounds = [ratio(a, n) for a, n in zip(
            a32.get("rps_rounds", [a32["rps"]]),
            n32.get("rps_rounds", [n32["rps"]]))]
        print("-- the admission path at 32 connections: %.3f of the nginx "
              "ceiling (medians; each round %s; goal >= 0.6)" % (
                  ratio(a32["rps"], n32["rps"]),
                  " ".join("%.3f" % x for x in rounds)))
    print("-- targets (reported, not asserted)")
    for t in tg:
        st = "n/a" if t["met"] is None else ("met" if t["met"] else
                                             "MISSED")
        print("  %-58s %-10s %-22s %s" % (
            t["target"], "-" if t["figure"] is None else t["figure"],
            t["goal"], st))
    doc = dict(meta, generated=time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                             time.gmtime()),
               results=recs, ceiling=cmp, targets=tg)
    with open(outpath, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("written: %s" % outpath)


def main():
    """Dispatch."""
    a = sys.argv[1:]
    if a[0] == "rec":
        r = json.loads(a[2])
        for kv in a[3:]:
            k, _, v = kv.partition("=")
            r[k] = value(v)
        with open(a[1], "a") as f:
            f.write(json.dumps(r) + "\n")
    elif a[0] == "last":
        print("  " + line(derive(load(a[1])[-1])), flush=True)
    elif a[0] == "final":
        final(a[1], a[2], dict(kv.partition("=")[::2] for kv in a[3:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
