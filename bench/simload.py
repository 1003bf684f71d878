#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Load and latency probes against the API simulator, for scripts/bench.

    simload.py crd SIMDIR
    simload.py ns SIMDIR PREFIX START END [RESOLVED-JSON]
        namespaces PREFIX-%06d, START <= i < END, through /sim/bulk; with
        RESOLVED-JSON they carry kpgpud's label and resolved annotation
    simload.py isolate SIMDIR NAME RESOLVED-JSON
        one namespace NAME, labelled and annotated as kpgpud-quota would
    simload.py agents SIMDIR PREFIX START END
        Agents PREFIX-%06d (annotated, sharing mig) in namespace default,
        as KubePlus keeps them (each names its tenant namespace)
    simload.py tenants SIMDIR PREFIX START END
        namespaces PREFIX-%06d with KubePlus's own ResourceQuota
        agent-PREFIX-%06d in each (what kpgpud-quota expects to find)
    simload.py listrate SIMDIR LIMIT
        list every Namespace and Agent in pages of LIMIT: the simulator's
        own serving rate (the ceiling of a sync ingest here)
    simload.py e2v SIMDIR KPGPUCTL SYNC-SOCK N
        event-to-visible: create a namespace, time until a sync.sock
        subscriber (kpgpuctl cache watch) prints its CHANGE; N times
    simload.py prop SIMDIR ADMIT-URL ADMIT-CA REVIEW N
        propagation: annotate an instance (create an Agent for a prepared
        tenant), time until kpgpud-admit patches a pod in its namespace
    simload.py quota SIMDIR N TIMEOUT-S
        N instances created at once (one bulk request), time until every
        tenant namespace is labelled and annotated; API writes per instance

Latencies run from just before the API request that makes the change is
sent (p50_ms, p99_ms) and, for reference, from when its answer came back
(after_create_*: often near zero, as the simulator emits the watch event
before it answers). Every probe prints one JSON object on stdout. Loops are bounded in count
and time; polling sleeps a millisecond or more between tries.
"""

import http.client
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.parse

ISOLATION = '{"sharing":"mig","migProfile":"1g.10gb","maxDevices":1}'
CHUNK = 5000


class Api:
    """A keep-alive admin client of the simulator in SIMDIR."""

    def __init__(self, simdir):
        with open(os.path.join(simdir, "url")) as f:
            u = urllib.parse.urlparse(f.read().strip())
        with open(os.path.join(simdir, "kubeconfig-admin")) as f:
            self.token = [ln.split()[1] for ln in f
                          if ln.strip().startswith("token:")][0]
        self.ctx = ssl.create_default_context(
            cafile=os.path.join(simdir, "ca.crt"))
        self.host, self.port = u.hostname, u.port
        self.conn = None

    def req(self, method, path, body=None):
        """One request; returns (status, decoded JSON or None)."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(
                    self.host, self.port, context=self.ctx, timeout=120)
            data = None if body is None else json.dumps(body).encode()
            hdr = {"Authorization": "Bearer " + self.token}
            if data is not None:
                hdr["Content-Type"] = "application/json"
            try:
                self.conn.request(method, path, data, hdr)
                r = self.conn.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
                continue
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, None

    def bulk(self, items):
        """Create items through /sim/bulk in chunks; returns the count."""
        made = 0
        for i in range(0, len(items), CHUNK):
            st, out = self.req("POST", "/sim/bulk",
                               {"items": items[i:i + CHUNK]})
            if st != 200:
                sys.exit("bulk create failed: %d %s" % (st, out))
            made += out["created"]
            if out["errors"]:
                sys.exit("bulk create errors: %s" % out["errors"][:3])
        return made


def ns_obj(name, resolved=None):
    """A Namespace, isolated by kpgpud when resolved is given."""
    md = {"name": name, "labels": {"team": "t" + name[-2:].strip("-")}}
    if resolved:
        md["labels"]["kubeplus.io/gpu-isolation-enabled"] = "true"
        md["annotations"] = {"kubeplus.io/gpu-isolation-resolved": resolved}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": md}


def agent_obj(ns, name):
    """An annotated Agent instance."""
    return {"apiVersion": "kubeplus.io/v1alpha1", "kind": "Agent",
            "metadata": {"namespace": ns, "name": name, "annotations": {
                "kubeplus.io/gpu-isolation": ISOLATION}},
            "spec": {"model": "llama-3-8b", "replicas": 1}}


def quota_obj(ns, name):
    """KubePlus's own ResourceQuota of a tenant."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"hard": {"requests.cpu": "4", "limits.memory": "8Gi"}}}


def cmd_crd(api):
    """Install the Agent CRD."""
    st, out = api.req("POST",
                      "/apis/apiextensions.k8s.io/v1/"
                      "customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "agents.kubeplus.io"},
        "spec": {"group": "kubeplus.io", "scope": "Namespaced",
                 "names": {"plural": "agents", "singular": "agent",
                           "kind": "Agent"},
                 "versions": [{"name": "v1alpha1", "served": True,
                               "storage": True, "schema": {
                                   "openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-"
                                       "fields": True}}}]}})
    if st not in (200, 201, 409):
        sys.exit("CRD: %d %s" % (st, out))
    print(json.dumps({"crd": st}))


def names(prefix, a, b):
    """PREFIX-%06d for a <= i < b."""
    return ["%s-%06d" % (prefix, i) for i in range(a, b)]


def watch_lines(proc, want, deadline):
    """Read the subscriber's lines until one contains want."""
    while time.monotonic() < deadline:
        ln = proc.stdout.readline()
        if not ln:
            return False
        if want in ln:
            return True
    return False


def pct(xs, p):
    """The p-th percentile (nearest rank) of xs, in ms."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return round(s[k] * 1000, 3)


def summary(xs):
    """p50, p99 and max of a list of seconds."""
    return {"n": len(xs), "p50_ms": pct(xs, 50), "p99_ms": pct(xs, 99),
            "max_ms": round(max(xs) * 1000, 3)}


def cmd_e2v(api, ctl, sock, n):
    """Event-to-visible latency through sync.sock."""
    p = subprocess.Popen([ctl, "cache", "--socket", sock, "watch"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, bufsize=1)
    try:
        if not watch_lines(p, "SNAPSHOT_END", time.monotonic() + 120):
            sys.exit("e2v: no snapshot from sync")
        lat, whole = [], []
        tag = "e2v-%d" % os.getpid()
        for k in range(n):
            name = "%s-%d" % (tag, k)
            t0 = time.monotonic()
            st, _ = api.req("POST", "/api/v1/namespaces", ns_obj(name))
            t1 = time.monotonic()
            if st != 201:
                sys.exit("e2v: create %s: %d" % (name, st))
            if not watch_lines(p, " Namespace %s %s " % (name, name),
                               t1 + 30):
                sys.exit("e2v: %s never became visible" % name)
            t2 = time.monotonic()
            lat.append(t2 - t1)
            whole.append(t2 - t0)
    finally:
        p.kill()
        p.wait()
    out = summary(whole)
    out["after_create_p50_ms"] = pct(lat, 50)
    out["after_create_p99_ms"] = pct(lat, 99)
    print(json.dumps(out))


def review_for(path, ns):
    """The review in path, retargeted at namespace ns."""
    with open(path) as f:
        r = json.load(f)
    r["request"]["namespace"] = ns
    r["request"]["object"]["metadata"]["namespace"] = ns
    return json.dumps(r).encode()


def patched(conn, body):
    """Whether admit answers body with a patch (allowed, claim added)."""
    conn.request("POST", "/mutate?timeout=10s", body,
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    out = json.loads(r.read())
    return r.status == 200 and "patch" in out["response"]


def cmd_prop(api, url, ca, review, n):
    """Instance annotated -> a pod in its namespace admitted with the claim."""
    u = urllib.parse.urlparse(url)
    ctx = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx,
                                       timeout=30)
    tag = "prop%d" % (os.getpid() % 100000)
    tenants = names(tag, 0, n)
    api.bulk([ns_obj(t) for t in tenants])
    api.bulk([quota_obj(t, "agent-" + t) for t in tenants])
    lat, whole = [], []
    _, before = api.req("GET", "/sim/stats")
    for t in tenants:
        body = review_for(review, t)
        end = time.monotonic() + 30
        while not (time.monotonic() > end or _known_open(conn, body)):
            time.sleep(0.005)
        t0 = time.monotonic()
        st, out = api.req("POST", "/apis/kubeplus.io/v1alpha1/namespaces/"
                          "default/agents", agent_obj("default", t))
        t1 = time.monotonic()
        if st != 201:
            sys.exit("prop: create agent %s: %d %s" % (t, st, out))
        end = t1 + 30
        while not patched(conn, body):
            if time.monotonic() > end:
                sys.exit("prop: %s never admitted with its claim" % t)
            time.sleep(0.001)
        t2 = time.monotonic()
        lat.append(t2 - t1)
        whole.append(t2 - t0)
    _, after = api.req("GET", "/sim/stats")
    out = summary(whole)
    out["after_create_p50_ms"] = pct(lat, 50)
    out["after_create_p99_ms"] = pct(lat, 99)
    out["quota_requests_per_instance"] = round(
        (writes_of(after, "writer")[2] - writes_of(before, "writer")[2]) /
        float(n), 2)
    print(json.dumps(out))


def _known_open(conn, body):
    """Admit answers without a patch (the tenant is known, not isolated)."""
    return not patched(conn, body)


def writes_of(stats, role):
    """Object writes of role (Events and Leases apart), all its writes and
    all its requests (reads too: they share the client's rate limit)."""
    r = stats.get("resources", {}).get(role, {})
    objs = alls = reqs = 0
    for verb, res in r.items():
        for k, v in res.items():
            reqs += v
            if verb not in ("create", "update", "patch", "delete",
                            "deletecollection"):
                continue
            alls += v
            if k not in ("events", "leases.coordination.k8s.io"):
                objs += v
    return objs, alls, reqs


def converged(api, prefix, n):
    """How many PREFIX- namespaces carry the label and the annotation."""
    st, out = api.req("GET", "/api/v1/namespaces?labelSelector=kubeplus.io"
                      "%2Fgpu-isolation-enabled%3Dtrue")
    if st != 200:
        return 0
    return sum(1 for o in out["items"]
               if o["metadata"]["name"].startswith(prefix + "-") and
               "kubeplus.io/gpu-isolation-resolved" in
               o["metadata"].get("annotations", {}))


def cmd_quota(api, n, timeout):
    """N instances at once -> all converged; writes per instance."""
    tag = "q%d" % (os.getpid() % 100000)
    tenants = names(tag, 0, n)
    api.bulk([ns_obj(t) for t in tenants])
    api.bulk([quota_obj(t, "agent-" + t) for t in tenants])
    _, before = api.req("GET", "/sim/stats")
    t0 = time.monotonic()
    api.bulk([agent_obj("default", t) for t in tenants])
    t1 = time.monotonic()
    done = 0
    while time.monotonic() < t0 + timeout:
        done = converged(api, tag, n)
        if done >= n:
            break
        time.sleep(0.25)
    t2 = time.monotonic()
    _, after = api.req("GET", "/sim/stats")
    ob, ab, rb = writes_of(before, "writer")
    oa, aa, ra = writes_of(after, "writer")
    print(json.dumps({"instances": n, "converged": done,
                      "create_s": round(t1 - t0, 3),
                      "seconds": round(t2 - t0, 3),
                      "object_writes_per_instance": round((oa - ob) / n, 2),
                      "writes_per_instance": round((aa - ab) / n, 2),
                      "requests_per_instance": round((ra - rb) / n, 2),
                      "writes": aa - ab, "requests": ra - rb}))


def cmd_listrate(api, limit):
    """How fast the simulator serves the lists sync makes at start: every
    Namespace and Agent page by page (the ceiling of an ingest's wall time
    here, since the simulator is Python)."""
    n = 0
    t0 = time.monotonic()
    for path in ("/api/v1/namespaces",
                 "/apis/kubeplus.io/v1alpha1/agents"):
        cont = ""
        for _ in range(100000):
            st, out = api.req("GET", "%s?limit=%d%s" % (
                path, limit, "&continue=" + urllib.parse.quote(cont)
                if cont else ""))
            if st != 200:
                sys.exit("listrate: %s: %d" % (path, st))
            n += len(out["items"])
            cont = out["metadata"].get("continue", "")
            if not cont:
                break
    dt = time.monotonic() - t0
    print(json.dumps({"objects": n, "ms": round(dt * 1000),
                      "objects_per_s": int(n / dt)}))


def main():
    """Dispatch the subcommand."""
    a = sys.argv[1:]
    if len(a) < 2:
        sys.exit(__doc__)
    api = Api(a[1])
    if a[0] == "crd":
        cmd_crd(api)
    elif a[0] == "ns":
        res = a[5] if len(a) > 5 else None
        print(json.dumps({"created": api.bulk(
            [ns_obj(x, res) for x in names(a[2], int(a[3]), int(a[4]))])}))
    elif a[0] == "isolate":
        st, out = api.req("POST", "/api/v1/namespaces", ns_obj(a[2], a[3]))
        if st != 201:
            sys.exit("isolate %s: %d %s" % (a[2], st, out))
        print(json.dumps({"created": 1}))
    elif a[0] == "agents":
        print(json.dumps({"created": api.bulk(
            [agent_obj("default", x) for x in names(a[2], int(a[3]),
                                                      int(a[4]))])}))
    elif a[0] == "tenants":
        ts = names(a[2], int(a[3]), int(a[4]))
        api.bulk([ns_obj(t) for t in ts])
        print(json.dumps({"created": api.bulk(
            [quota_obj(t, "agent-" + t) for t in ts])}))
    elif a[0] == "e2v":
        cmd_e2v(api, a[2], a[3], int(a[4]))
    elif a[0] == "listrate":
        cmd_listrate(api, int(a[2]))
    elif a[0] == "prop":
        cmd_prop(api, a[2], a[3], a[4], int(a[5]))
    elif a[0] == "quota":
        cmd_quota(api, int(a[2]), float(a[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
