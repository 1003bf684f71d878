# SPDX-License-Identifier: Apache-2.0
"""Steady admission load for scripts/faults (standard library only).

Two generators, each a thread that keeps a fixed request rate and records
every outcome with its time, so the driver can count what happened inside
one scenario's window:

  PodLoad     creates pods through the API simulator (the apiserver calls
              kpgpud-admit through the registered webhook), checks in the
              stored object that a pod in an isolated namespace carries the
              GPU claim in spec.resourceClaims and in every container, and
              deletes it again (the simulator stays small).
  ReviewLoad  posts AdmissionReviews straight to kpgpud-admit over TLS on a
              keep-alive connection and checks the answer the same way.

An outcome is "ok" (answered as required), "fail" (an error, a timeout, a
refusal: the cluster said no, nothing escaped) or "escape" (allowed in an
isolated namespace without the claim: the one thing that must never happen).

Run standalone for a quick look:
  python3 tests/faults/load.py DEVDIR SECONDS
"""

import base64
import http.client
import json
import os
import ssl
import sys
import threading
import time

CLAIM = "kubeplus-gpu"


def token_of(simdir, role="admin"):
    """The simulator's bearer token of role."""
    with open(os.path.join(simdir, "tokens")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0] == role:
                return parts[1]
    raise RuntimeError("no %s token in %s" % (role, simdir))


class Conn:
    """One keep-alive HTTPS connection to 127.0.0.1:PORT, opened on first
    use and again after a transport error."""

    def __init__(self, port, cafile, timeout):
        self.port = port
        self.ctx = ssl.create_default_context(cafile=cafile)
        self.timeout = timeout
        self.conn = None

    def exchange(self, method, path, data, hdrs):
        """(response, its body); on a transport error closes the connection
        and raises the error (OSError or http.client.HTTPException)."""
        try:
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.port, context=self.ctx,
                    timeout=self.timeout)
            self.conn.request(method, path, data, hdrs)
            r = self.conn.getresponse()
            return r, r.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None


class Api(Conn):
    """A small client of the simulator's REST API (one connection) as one
    identity: TOKEN, else the simulator's admin. With RETRY a request that
    fails in transport is sent once more on a new connection."""

    def __init__(self, simdir, timeout=15.0, token=None, retry=True):
        with open(os.path.join(simdir, "port")) as f:
            port = int(f.read().strip())
        super().__init__(port, os.path.join(simdir, "ca.crt"), timeout)
        self.token = token or token_of(simdir)
        self.tries = 2 if retry else 1
        self.error = ""             # the last transport error

    def request(self, method, path, body=None, ctype="application/json"):
        """(status, parsed body or None); status 0 on a transport error
        (then self.error says which)."""
        hdrs = {"Authorization": "Bearer " + self.token,
                "Accept": "application/json"}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else \
                json.dumps(body).encode()
            hdrs["Content-Type"] = ctype
        for _ in range(self.tries):
            try:
                r, raw = self.exchange(method, path, data, hdrs)
            except (OSError, http.client.HTTPException) as e:
                self.error = str(e)
                continue
            try:
                doc = json.loads(raw) if raw else None
            except ValueError:
                doc = None
            return r.status, doc
        return 0, None


def pod_body(name_prefix):
    """A chart-like pod: its own claim, an init container, two containers."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": name_prefix,
                     "labels": {"app": "faults-load"}},
        "spec": {
            "resourceClaims": [{"name": "scratch",
                                "resourceClaimTemplateName": "scratch"}],
            "initContainers": [{"name": "init", "image": "busybox:1"}],
            "containers": [
                {"name": "main", "image": "busybox:1",
                 "resources": {"claims": [{"name": "scratch"}]}},
                {"name": "side", "image": "busybox:1"},
            ],
        },
    }


def pod_has_claim(spec):
    """Whether a stored pod spec carries kpgpud's claim everywhere needed."""
    names = [c.get("name") for c in spec.get("resourceClaims") or []]
    if CLAIM not in names:
        return False
    for c in spec.get("containers") or []:
        refs = [x.get("name") for x in
                (c.get("resources") or {}).get("claims") or []]
        if CLAIM not in refs:
            return False
    return True


def review_body(ns, uid):
    """An AdmissionReview for a pod CREATE in ns."""
    pod = pod_body("rv-")
    pod["metadata"]["namespace"] = ns
    pod["metadata"]["name"] = "rv-" + uid
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid,
                        "kind": {"group": "", "version": "v1",
                                 "kind": "Pod"},
                        "resource": {"group": "", "version": "v1",
                                     "resource": "pods"},
                        "namespace": ns, "operation": "CREATE",
                        "userInfo": {"username": "faults-load"},
                        "object": pod, "oldObject": None, "dryRun": False}}


def review_verdict(resp, uid):
    """"patched", "nopatch", "denied" or "bad" for an AdmissionReview reply."""
    r = (resp or {}).get("response") or {}
    if r.get("uid") != uid:
        return "bad"
    if not r.get("allowed"):
        return "denied"
    if "patch" not in r:
        return "nopatch"
    try:
        ops = json.loads(base64.b64decode(r["patch"]))
    except ValueError:
        return "bad"
    for op in ops:
        v = op.get("value")
        for c in (v if isinstance(v, list) else [v]):
            if isinstance(c, dict) and c.get("name") == CLAIM:
                return "patched"
    return "nopatch"


class Load(threading.Thread):
    """A rate-keeping load thread; subclasses define one()."""

    def __init__(self, rate, isolated, plain):
        super().__init__(daemon=True)
        self.interval = 1.0 / rate
        self.isolated = list(isolated)
        self.plain = list(plain)
        self.records = []          # (t_start, t_end, ns, outcome, detail)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.paused = threading.Event()
        self.idle = threading.Event()
        self.n = 0

    def targets(self):
        return self.isolated + self.plain

    def run(self):
        nxt = time.monotonic()
        while not self.stopping.is_set():
            if self.paused.is_set():
                self.idle.set()
                time.sleep(0.02)
                nxt = time.monotonic()
                continue
            self.idle.clear()
            tg = self.targets()
            ns = tg[self.n % len(tg)]
            self.n += 1
            t0 = time.monotonic()
            try:
                outcome, detail = self.one(ns, ns in self.isolated)
            except Exception as e:  # a load thread must not die
                outcome, detail = "fail", "exception %r" % (e,)
            with self.lock:
                self.records.append((t0, time.monotonic(), ns, outcome,
                                     detail))
            nxt += self.interval
            delay = nxt - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)
            else:
                nxt = time.monotonic()
        self.idle.set()

    def pause(self, timeout=30.0):
        """Stop issuing requests; wait until the one in flight is done."""
        self.paused.set()
        self.idle.wait(timeout)

    def resume(self):
        self.idle.clear()
        self.paused.clear()

    def stop(self):
        self.stopping.set()
        self.join(30)

    def window(self, t0, t1):
        """Records that started inside [t0, t1)."""
        with self.lock:
            return [r for r in self.records if t0 <= r[0] < t1]


class PodLoad(Load):
    """Pods created (then deleted) through the simulator."""

    def __init__(self, simdir, rate, isolated, plain):
        super().__init__(rate, isolated, plain)
        self.api = Api(simdir, timeout=20.0)
        self.deleter = Api(simdir, timeout=20.0)

    def one(self, ns, isolated):
        st, doc = self.api.request(
            "POST", "/api/v1/namespaces/%s/pods" % ns, pod_body("load-"))
        if st != 201 or not isinstance(doc, dict):
            msg = (doc or {}).get("message", "") if isinstance(doc, dict) \
                else ""
            return "fail", "HTTP %d %s" % (st, msg[:120])
        name = doc["metadata"]["name"]
        has = pod_has_claim(doc.get("spec") or {})
        self.deleter.request(
            "DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
            {"kind": "DeleteOptions", "apiVersion": "v1",
             "gracePeriodSeconds": 0})
        if isolated and not has:
            return "escape", "pod %s/%s stored without %s" % (ns, name,
                                                             CLAIM)
        if not isolated and has:
            return "fail", "pod %s/%s got a claim it should not" % (ns,
                                                                    name)
        return "ok", ""


class ReviewLoad(Load):
    """AdmissionReviews posted straight to kpgpud-admit."""

    def __init__(self, port, cafile, rate, isolated, plain):
        super().__init__(rate, isolated, plain)
        self.conn = Conn(port, cafile, 12)
        self.seq = 0

    def one(self, ns, isolated):
        self.seq += 1
        uid = "load-%d-%d" % (os.getpid(), self.seq)
        body = json.dumps(review_body(ns, uid)).encode()
        try:
            r, raw = self.conn.exchange("POST", "/mutate?timeout=10s", body,
                                        {"Content-Type": "application/json"})
        except (OSError, http.client.HTTPException) as e:
            return "fail", "transport %s" % (type(e).__name__,)
        if r.getheader("Connection", "").lower() == "close":
            self.conn.close()
        if r.status != 200:
            return "fail", "HTTP %d" % r.status
        try:
            v = review_verdict(json.loads(raw), uid)
        except ValueError:
            v = "bad"
        if isolated:
            if v == "patched":
                return "ok", ""
            if v == "nopatch":
                return "escape", "review in %s allowed without %s" % (
                    ns, CLAIM)
            return "fail", "verdict " + v
        return ("ok", "") if v == "nopatch" else ("fail", "verdict " + v)


def summarise(records):
    """{"ok": n, "fail": n, "escape": n} of a list of records."""
    out = {"ok": 0, "fail": 0, "escape": 0}
    for r in records:
        out[r[3]] = out.get(r[3], 0) + 1
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: load.py DEVDIR SECONDS")
    d, secs = sys.argv[1], float(sys.argv[2])
    with open(os.path.join(d, "admit.port")) as f:
        port = int(f.read().strip())
    iso, plain = ["team-a"], ["default"]
    loads = [PodLoad(os.path.join(d, "sim"), 4, iso, plain),
             ReviewLoad(port, os.path.join(d, "tls", "ca.pem"), 20, iso,
                        plain)]
    for ld in loads:
        ld.start()
    time.sleep(secs)
    for ld in loads:
        ld.stop()
        print(type(ld).__name__, summarise(ld.records))


if __name__ == "__main__":
    main()
