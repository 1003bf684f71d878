#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Simulator figures (not a test):

  1. watch events per second delivered to one watcher (HTTPS, chunked),
     with the events produced inside the server (POST /sim/bulk) and, for
     comparison, by HTTP creates from 4 client threads;
  2. time to list 100,000 namespaces with pagination (limit=500).

    bench/kubesim_bench.py [--events N] [--namespaces N] [--http2] [DIR]

The watcher and the lister use HTTP/1.1 (Python's http.client), or h2
streams on one connection with --http2 (kubesim/h2client.py).

Starts a private simulator (--plugins none) unless DIR of a running one is
given.  Prints one line per figure."""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

SIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                   "kube-sim")
sys.path.insert(0, SIM)
from kubesim.client import Client  # noqa: E402
from kubesim.h2client import H2Client  # noqa: E402


def bulk(c, items):
    """Create objects through POST /sim/bulk; returns how many."""
    st, o = c.req("POST", "/sim/bulk", {"items": items})
    if st != 200 or o.get("errors"):
        raise SystemExit("bulk failed: %s %s" % (st, o))
    return o["created"]


def lease(ns, i):
    """A small Lease object."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l-%06d" % i, "namespace": ns},
            "spec": {"holderIdentity": "bench-%d" % i}}


def h2_lines(c, url):
    """A line reader over an h2 watch stream (and its closer)."""
    sid = c.start("GET", url)
    buf = []

    def readline():
        while not buf:
            st = c.streams[sid]
            if st.ended or st.reset is not None or c.closed:
                return b""
            c.pump(5.0)
            buf.extend(c.lines(sid))
        return buf.pop(0)
    return readline, lambda: c.cancel(sid)


def watch_rate(c, ns, n, producer):
    """Events/s seen by one watcher while producer() creates n leases."""
    c.req("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    base = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % ns
    rv = c.req("GET", base)[1]["metadata"]["resourceVersion"]
    url = base + "?watch=1&resourceVersion=" + rv
    if isinstance(c, H2Client):
        readline, close = h2_lines(c, url)
    else:
        w = c.watch(url, timeout=120)
        readline, close = w.resp.readline, w.close
    got = 0
    t_first = None
    t0 = time.monotonic()
    th = threading.Thread(target=producer, daemon=True)
    th.start()
    while got < n:
        line = readline()
        if not line:
            break
        if t_first is None:
            t_first = time.monotonic()
        json.loads(line)
        got += 1
    t_end = time.monotonic()
    close()
    th.join()
    return got, t_end - t0, t_end - (t_first or t0)


def produce_bulk(d, ns, n, start):
    """A producer creating n leases through /sim/bulk batches."""
    def run():
        c = Client(d)
        for i in range(start, start + n, 1000):
            bulk(c, [lease(ns, j) for j in range(i, min(i + 1000,
                                                        start + n))])
    return run


def produce_http(d, ns, n, start, threads=4):
    """A producer creating n leases by individual HTTP POSTs."""
    def run():
        def worker(k):
            c = Client(d)
            path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % ns
            for i in range(start + k, start + n, threads):
                st, o = c.req("POST", path, lease(ns, i))
                if st != 201:
                    raise SystemExit("create failed: %s %s" % (st, o))
        ts = [threading.Thread(target=worker, args=(k,))
              for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    return run


def list_all(c, limit):
    """(items, pages, seconds) of a full paginated namespace list."""
    t0 = time.monotonic()
    items = pages = 0
    cont = None
    while True:
        q = "?limit=%d" % limit
        if cont:
            q += "&continue=" + urllib.parse.quote(cont)
        st, o = c.req("GET", "/api/v1/namespaces" + q)
        if st != 200:
            raise SystemExit("list failed: %s %s" % (st, o))
        items += len(o["items"])
        pages += 1
        cont = o["metadata"].get("continue")
        if not cont:
            return items, pages, time.monotonic() - t0


def main():
    """Run the benchmarks and print the figures."""
    p = argparse.ArgumentParser()
    p.add_argument("dir", nargs="?")
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--namespaces", type=int, default=100000)
    p.add_argument("--http2", action="store_true",
                   help="watch and list over h2 (default HTTP/1.1)")
    a = p.parse_args()
    tmp = None
    d = a.dir
    if d is None:
        tmp = tempfile.mkdtemp(prefix="kube-sim-bench.")
        d = os.path.join(tmp, "sim")
        subprocess.run([os.path.join(SIM, "run"), d, "--plugins", "none",
                        "--history", "20000"], check=True,
                       stdout=subprocess.DEVNULL)
    try:
        c = Client(d)
        n = a.events
        print("protocol: %s" % ("HTTP/2" if a.http2 else "HTTP/1.1"))
        if a.http2:
            c = H2Client(d)
        got, total, steady = watch_rate(c, "bench-w1", n,
                                        produce_bulk(d, "bench-w1", n, 0))
        print("watch, server-side producer: %d events to one watcher in "
              "%.2f s = %.0f events/s (%.0f/s after the first event)" %
              (got, total, got / total, got / max(steady, 1e-9)))
        m = max(1000, n // 4)
        got, total, _ = watch_rate(c, "bench-w2", m,
                                   produce_http(d, "bench-w2", m, n))
        print("watch, 4 HTTP writers: %d events in %.2f s = %.0f events/s "
              "(bounded by the creates)" % (got, total, got / total))
        t0 = time.monotonic()
        made = 0
        for i in range(0, a.namespaces, 5000):
            made += bulk(c, [{"apiVersion": "v1", "kind": "Namespace",
                              "metadata": {"name": "ns-%06d" % j,
                                           "labels": {"bench": "1"}}}
                             for j in range(i, min(i + 5000,
                                                   a.namespaces))])
        print("created %d namespaces via /sim/bulk in %.1f s" %
              (made, time.monotonic() - t0))
        items, pages, secs = list_all(c, 500)
        print("list %d namespaces, limit=500: %d pages in %.2f s "
              "(%.1f ms/page)" % (items, pages, secs, secs * 1000 / pages))
    finally:
        if tmp:
            with open(os.path.join(d, "pid")) as f:
                os.kill(int(f.read()), signal.SIGTERM)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
