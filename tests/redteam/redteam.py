#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The red-team suite: a tenant with namespace edit rights attacks kpgpud.

  tests/redteam/redteam.py OUTDIR [--config NAME[,NAME...]] [--short]
      [--only PREFIX[,PREFIX...]] [--expect CONFIG] [--markdown FILE]
      [--dir DIR]

OUTDIR is a test build (build/test). For each configuration it brings up
the dev stack (scripts/kpgpud-dev, the real daemons and the API simulator)
with two tenants sharing the simulator's fake nodes -- team-m (MIG 1g.10gb,
its own template, maxDevices 2) and team-s (time-slicing, one shared claim,
maxDevices 1) -- and runs each scenario acting ONLY through the tenants'
own identities (simctl DIR tenant NS: namespace edit rights). Faults of
kpgpud itself (admit stopped, killed) are the operator's side, done to the
processes. After each scenario it reads the ground truth -- the
simulator's allocation log (simctl DIR allocations), the ResourceSlices
and DeviceClasses, and the tenants' pods with their claims -- and prints,
per tenant, the devices obtained against the devices allowed. A finding is
  other-class   a device allocated in a tenant's namespace that its own
                DeviceClass does not select
  over-max      more devices held at once than its maxDevices
  other-tenant  a device held by two tenants' namespaces at once
  unpatched     a pod admitted in an isolated namespace without kpgpud's
                claim (no device by itself, but the webhook was bypassed)
The first three are escapes. Each scenario states, per configuration, the
findings it must produce (EXPECT below); the run fails unless the observed
kinds equal the expected ones for every scenario (--expect CONFIG checks a
run against another configuration's expectations: with the policies off,
--expect default must fail, which proves the suite can fail).

Configurations (admit runs with --max-body 1 MiB and --max-patch 64 KiB in
all of them, so that pods through the simulator's 3 MiB request limit can
go over every cap of admit):
  default               policies applied, failurePolicy Ignore, strict on
  fail-policy           policies applied, failurePolicy Fail (overlay)
  strict-off            policies applied, kpgpud-quota --strict=false
  no-policy             no policies, Ignore, strict on
  fail-policy-no-policy no policies, Fail, strict on
  strict-off-no-policy  no policies, Ignore, --strict=false

--short runs a subset (make check); --markdown writes the table of
RELIABILITY.md. Exit status 0 when every configuration matched its
expectations, 1 when not, 2 when a stack could not be set up.
"""

import argparse
import http.client
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "faults"))
sys.path.insert(0, os.path.join(SRC, "tests", "kube-sim"))
from load import Api, token_of  # noqa: E402
from stack import Stack  # noqa: E402
from kubesim import cel  # noqa: E402

RES = "/apis/resource.k8s.io/v1"
CLAIM = "kubeplus-gpu"
MANAGED_KEY = "app.kubernetes.io/managed-by"
# the tenants: namespace -> (isolation annotation, own class, max devices)
TENANTS = {
    "team-m": ({"sharing": "mig", "migProfile": "1g.10gb", "maxDevices": 2},
               "kpgpud-mig-1g.10gb", 2),
    "team-s": ({"sharing": "time-slicing", "maxDevices": 1},
               "gpu.nvidia.com", 1),
}
ADMIT_CAPS = "--max-body 1048576 --max-patch 65536"
CONFIGS = {
    "default": {"policy": "on", "deploy": "", "quota": ""},
    "fail-policy": {"policy": "on", "deploy": "overlays/fail-policy",
                    "quota": ""},
    "strict-off": {"policy": "on", "deploy": "", "quota": "--strict=false"},
    "no-policy": {"policy": "off", "deploy": "", "quota": ""},
    "fail-policy-no-policy": {"policy": "off",
                              "deploy": "overlays/fail-policy", "quota": ""},
    "strict-off-no-policy": {"policy": "off", "deploy": "",
                             "quota": "--strict=false"},
}
ESCAPES = ("other-class", "over-max", "other-tenant")

# What each scenario must find, per configuration (a configuration not
# named: nothing). "racy" kinds may or may not show (a race with kpgpud's
# repair decides), every other kind must. Why:
# - With the policies applied nothing escapes and no pod is admitted
#   unpatched: the pod policy refuses every pod admit did not patch, the
#   tenant-claims policy refuses claims of other classes, All and counts
#   above maxDevices, the owned-claims policy refuses any write to kpgpud's
#   template or claim (whatever failurePolicy, whatever --strict).
# - Without them, strict quota (0 devices of every other GPU class, the
#   own class capped at maxDevices, All charged as 32) still stops every
#   device escape; but under failurePolicy Ignore a pod the webhook could
#   not patch (admit stopped, killed, a body over --max-body: non-2xx) is
#   admitted without kpgpud's claim: "unpatched". Fail refuses them.
# - Without the policies and with --strict=false the tenant's own claims
#   and templates of other GPU classes get devices ("other-class"; with
#   All, more than maxDevices at once: "over-max"), and so do pods made
#   from an impostor template or claim before kpgpud replaces it (racy),
#   and labelled decoys of other classes.
EXPECT = {
    "own-claims": {"strict-off-no-policy": {
        "must": {"other-class", "over-max"}}},
    "replace-owned": {"strict-off-no-policy": {
        "racy": {"other-class", "over-max"}}},
    "decoys": {"strict-off-no-policy": {"must": {"other-class"}}},
    "admit-stopped": {"no-policy": {"must": {"unpatched"}},
                      "strict-off-no-policy": {"must": {"unpatched"}}},
    "admit-killed": {"no-policy": {"must": {"unpatched"}},
                     "strict-off-no-policy": {"must": {"unpatched"}}},
    "admit-overloaded": {"no-policy": {"racy": {"unpatched"}},
                         "strict-off-no-policy": {"racy": {"unpatched"}}},
    "over-caps": {"no-policy": {"must": {"unpatched"}},
                  "strict-off-no-policy": {"must": {"unpatched"}}},
    "conn-exhaust": {"no-policy": {"racy": {"unpatched"}},
                     "strict-off-no-policy": {"racy": {"unpatched"}}},
    "ns-flood": {"no-policy": {"racy": {"unpatched"}},
                 "strict-off-no-policy": {"racy": {"unpatched"}}},
}
# replace-owned: without the policies the tenant deletes kpgpud's object
# and writes an impostor of another class; whether a pod's claim is made
# from (or is) the impostor before kpgpud replaces it is a race, hence
# racy. with strict on the quota refuses the impostor's claims (0 devices
# of that class). admit-overloaded, conn-exhaust, ns-flood: a webhook call
# that times out under the load would be ignored (racy "unpatched"); with
# the policies such a pod is refused.


def log(*a):
    print(*a, flush=True)


def now():
    return time.time()


def wait_for(limit, fn, step=0.1):
    """Poll FN (bounded by LIMIT times KPGPUD_TIMEOUT_SCALE); its last
    value."""
    try:
        limit *= float(os.environ.get("KPGPUD_TIMEOUT_SCALE", "1"))
    except ValueError:
        pass
    end = time.monotonic() + limit
    while True:
        v = fn()
        if v or time.monotonic() >= end:
            return v
        time.sleep(step)


class Client(Api):
    """One HTTPS connection to the simulator as one identity (keep-alive:
    requests in sequence go over the same connection; a request that fails
    in transport is not sent again)."""

    def __init__(self, simdir, token, timeout=30.0):
        super().__init__(simdir, timeout, token=token, retry=False)

    def req(self, method, path, body=None, ctype="application/json"):
        """(status, doc); on a transport error (0, {"message": error})."""
        st, doc = self.request(method, path, body, ctype)
        return (st, doc) if st else (0, {"message": self.error})


def tenant_token(simdir, ns):
    """Create (simctl DIR tenant NS) and return the tenant's token."""
    subprocess.run([os.path.join(SRC, "tests", "kube-sim", "simctl"), simdir,
                    "tenant", ns], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(simdir, "tenants")) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] == ns and p[2] == "tenant":
                return p[0]
    raise RuntimeError("no tenant token for %s" % ns)


# ---- objects -------------------------------------------------------------

def pod(name, claims=None, containers=1, init=0, extra=None):
    """A Pod; CLAIMS: [(pod claim name, {"resourceClaimName"|
    "resourceClaimTemplateName": x})] referenced by every container."""
    refs = [dict(v, name=n) for n, v in (claims or [])]
    res = {"claims": [{"name": n} for n, _ in (claims or [])]} \
        if claims else {}

    def c(i, prefix):
        d = {"name": "%s%d" % (prefix, i), "image": "registry.example.com/x"}
        if res:
            d["resources"] = dict(res)
        return d
    spec = {"containers": [c(i, "c") for i in range(containers)]}
    if init:
        spec["initContainers"] = [c(i, "i") for i in range(init)]
    if refs:
        spec["resourceClaims"] = refs
    if extra:
        extra(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"redteam": "1"}},
            "spec": spec}


def request(cls, mode="one", count=2):
    r = {"name": "gpu", "exactly": {"deviceClassName": cls}}
    if cls == "mig.nvidia.com":
        # the stock MIG class, for a bigger slice than the tenant's own
        r["exactly"]["selectors"] = [{"cel": {"expression": (
            "device.attributes['gpu.nvidia.com'].profile != '1g.10gb'")}}]
    if mode == "all":
        r["exactly"]["allocationMode"] = "All"
    elif mode == "count":
        r["exactly"]["allocationMode"] = "ExactCount"
        r["exactly"]["count"] = count
    return r


def claim(name, cls, mode="one", count=2, labels=None):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": dict(labels or {},
                                                      redteam="1")},
            "spec": {"devices": {"requests": [request(cls, mode, count)]}}}


def template(name, cls, mode="one", count=2, labels=None):
    c = claim(name, cls, mode, count, labels)
    return {"apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate", "metadata": c["metadata"],
            "spec": {"spec": c["spec"]}}


def review(ns, uid):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid, "operation": "CREATE", "namespace": ns,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1",
                             "resource": "pods"},
                "requestKind": {"group": "", "version": "v1",
                                "kind": "Pod"},
                "userInfo": {"username": "redteam"},
                "object": dict(pod("flood-" + uid[:8]),
                               metadata={"name": "flood-" + uid[:8],
                                         "namespace": ns}),
                "oldObject": None, "dryRun": False}}


# ---- the suite -------------------------------------------------------------

class Suite:
    def __init__(self, args, config):
        self.args, self.config = args, config
        self.cfg = CONFIGS[config]
        self.d = os.path.join(args.dir, config)
        self.stack = None
        self.rows = []
        self.seq = 0
        self.admin = None
        self.t = {}
        self.refused = 0
        self.attempts = 0
        self.classes = {}      # (pool, device) -> set of class names
        self.known = set()     # allocation interval keys seen before

    # -- setup --
    def up(self):
        os.makedirs(self.d, exist_ok=True)
        os.chmod(self.d, 0o711)
        os.environ["KPGPUD_DEV_POLICY"] = self.cfg["policy"]
        os.environ["KPGPUD_DEV_DEPLOY"] = self.cfg["deploy"]
        os.environ["KPGPUD_DEV_QUOTA_ARGS"] = self.cfg["quota"]
        os.environ["KPGPUD_DEV_ADMIT_ARGS"] = ADMIT_CAPS
        # the driver's gate for time-slicing (team-s's shared claim)
        os.environ["KPGPUD_DEV_SIM_ARGS"] = \
            "--set nvidia-gates=TimeSlicingSettings"
        out = os.path.dirname(self.args.bin.rstrip("/"))
        self.stack = Stack(SRC, self.args.bin, os.path.join(out, "tests"),
                           self.d)
        self.stack.up()
        self.sim = self.stack.path("sim")
        self.admin = Client(self.sim, token_of(self.sim, "admin"))
        for ns, (iso, cls, mx) in TENANTS.items():
            self.admin.req("POST", "/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns}})
            st, _ = self.admin.req(
                "POST", "/apis/platform.kubeplus.io/v1alpha1/namespaces/%s"
                "/agents" % ns, {
                    "apiVersion": "platform.kubeplus.io/v1alpha1",
                    "kind": "Agent", "metadata": {
                        "name": "agent", "namespace": ns, "annotations": {
                            "kubeplus.io/gpu-isolation": json.dumps(iso)}},
                    "spec": {"model": "llama-3-8b"}})
            if st != 201:
                raise RuntimeError("cannot create the Agent in %s: %d"
                                   % (ns, st))
            self.t[ns] = Client(self.sim, tenant_token(self.sim, ns))
        for ns in TENANTS:
            if not wait_for(60, lambda: self.isolated(ns)):
                raise RuntimeError("%s not isolated" % ns)
        if self.cfg["policy"] == "on" and not wait_for(
                30, self.params_ready):
            raise RuntimeError("the policies' parameter ConfigMap is not "
                               "kept by kpgpud-quota")
        self.load_classes()
        self.known = set(self.interval_keys())

    def params_ready(self):
        st, cm = self.admin.req(
            "GET", "/api/v1/namespaces/kpgpud/configmaps/"
            "kpgpud-device-classes")
        return st == 200 and (cm.get("data") or {}).get("quota-user") == \
            "writer"

    def nsobj(self, ns):
        st, o = self.admin.req("GET", "/api/v1/namespaces/" + ns)
        return o if st == 200 else None

    def isolated(self, ns):
        o = self.nsobj(ns)
        if not o:
            return False
        ann = o["metadata"].get("annotations") or {}
        lab = o["metadata"].get("labels") or {}
        st, q = self.admin.req("GET", "/api/v1/namespaces/%s/resourcequotas"
                               % ns)
        return lab.get("kubeplus.io/gpu-isolation-enabled") == "true" and \
            "kubeplus.io/gpu-max-devices" in ann and st == 200 and \
            q.get("items")

    def owned_name(self, ns):
        """('template'|'claim', name) of kpgpud's object in NS."""
        ann = self.nsobj(ns)["metadata"].get("annotations") or {}
        if ann.get("kubeplus.io/gpu-claim-template"):
            return "template", ann["kubeplus.io/gpu-claim-template"]
        return "claim", ann.get("kubeplus.io/gpu-claim", "")

    def load_classes(self):
        """Which DeviceClasses select each device of the fake nodes."""
        st, dcs = self.admin.req("GET", RES + "/deviceclasses")
        st2, rss = self.admin.req("GET", RES + "/resourceslices")
        self.classnames = sorted(d["metadata"]["name"]
                                 for d in dcs["items"])
        progs = {}
        for d in dcs["items"]:
            progs[d["metadata"]["name"]] = [
                cel.compile_expr(s["cel"]["expression"])
                for s in d["spec"].get("selectors") or [] if "cel" in s]
        for rs in rss["items"]:
            drv = rs["spec"]["driver"]
            pool = rs["spec"]["pool"]["name"]
            for dev in rs["spec"].get("devices") or []:
                devo = cel.Device.from_slice(drv, dev)
                sel = set()
                for name, ps in progs.items():
                    try:
                        if all(p.matches(devo) for p in ps):
                            sel.add(name)
                    except cel.CelError:
                        pass
                self.classes[(drv, pool, dev["name"])] = sel

    # -- ground truth --
    def intervals(self):
        st, out = self.admin.req("GET", "/sim/allocations")
        if st != 200:
            raise RuntimeError("no allocation log (%d)" % st)
        return out.get("intervals") or []

    @staticmethod
    def ikey(iv):
        return (iv["uid"], iv["allocatedAt"])

    def interval_keys(self):
        return [self.ikey(iv) for iv in self.intervals()]

    def findings(self, since):
        """Escapes among the intervals not in SINCE, and what each tenant
        obtained: {ns: (peak devices, classes seen)}, [(kind, text)]."""
        ivs = self.intervals()
        found, got = [], {}
        far = "9999"
        for ns, (_, own, mx) in TENANTS.items():
            mine = [iv for iv in ivs if iv["namespace"] == ns]
            fresh = [iv for iv in mine if self.ikey(iv) not in since]
            seen = set()
            for iv in fresh:
                for d in iv["devices"]:
                    cls = self.classes.get((d["driver"], d["pool"],
                                            d["device"]), set())
                    seen |= cls
                    if own not in cls:
                        found.append(("other-class", "%s: claim %s got "
                                      "%s/%s (classes %s; own %s)" % (
                                          ns, iv["name"], d["pool"],
                                          d["device"],
                                          ",".join(sorted(cls)) or "none",
                                          own)))
            # devices held at once: sweep over the interval bounds
            ev = []
            for iv in mine:
                devs = {(d["pool"], d["device"]) for d in iv["devices"]}
                ev.append((iv["allocatedAt"], 1, devs, iv))
                ev.append((iv["deallocatedAt"] or far, 0, devs, iv))
            held, peak, peak_fresh = {}, 0, False
            for _, kind, devs, iv in sorted(ev, key=lambda e: (e[0], e[1])):
                for dv in devs:
                    held[dv] = held.get(dv, 0) + (1 if kind else -1)
                    if not held[dv]:
                        del held[dv]
                n = len(held)
                if kind and n > peak:
                    peak = n
                if kind and n > mx and self.ikey(iv) not in since:
                    peak_fresh = True
            if peak_fresh:
                found.append(("over-max", "%s held %d devices at once "
                              "(max %d)" % (ns, peak, mx)))
            fresh_peak = peak_held(fresh)
            got[ns] = (fresh_peak, sorted(seen))
        # one device in two tenants' namespaces at once
        by_dev = {}
        for iv in ivs:
            for d in iv["devices"]:
                by_dev.setdefault((d["pool"], d["device"]), []).append(iv)
        for dv, lst in by_dev.items():
            for i, a in enumerate(lst):
                for b in lst[i + 1:]:
                    if a["namespace"] == b["namespace"]:
                        continue
                    if self.ikey(a) in since and self.ikey(b) in since:
                        continue
                    if a["allocatedAt"] < (b["deallocatedAt"] or far) and \
                            b["allocatedAt"] < (a["deallocatedAt"] or far):
                        found.append(("other-tenant", "%s/%s held by %s and "
                                      "%s at once" % (dv[0], dv[1],
                                                      a["namespace"],
                                                      b["namespace"])))
        return got, found

    def unpatched(self, prefix):
        """Pods of this scenario admitted without kpgpud's claim."""
        out = []
        for ns in TENANTS:
            kind, name = self.owned_name(ns)
            key = "resourceClaimTemplateName" if kind == "template" else \
                "resourceClaimName"
            st, pods = self.t[ns].req("GET", "/api/v1/namespaces/%s/pods"
                                      % ns)
            for p in (pods or {}).get("items") or []:
                if not p["metadata"]["name"].startswith(prefix):
                    continue
                refs = [r for r in p["spec"].get("resourceClaims") or []
                        if r.get("name") == CLAIM]
                ok = len(refs) == 1 and refs[0].get(key) == name and all(
                    any(c.get("name") == CLAIM for c in
                        (ct.get("resources") or {}).get("claims") or [])
                    for ct in p["spec"]["containers"])
                if not ok:
                    out.append(("unpatched", "%s/%s admitted without %s %s"
                                % (ns, p["metadata"]["name"], kind, name)))
        return out

    def settle(self, prefix, limit=15, quiet=True):
        """Wait (bounded) until the scenario's pods are scheduled or known
        unschedulable, then until the allocation log is quiet."""
        def done():
            for ns in TENANTS:
                st, pods = self.t[ns].req("GET", "/api/v1/namespaces/%s/pods"
                                          % ns)
                for p in (pods or {}).get("items") or []:
                    if not p["metadata"]["name"].startswith(prefix):
                        continue
                    if p.get("status", {}).get("phase") in (
                            "Running", "Succeeded", "Failed"):
                        continue
                    conds = p.get("status", {}).get("conditions") or []
                    if any(c.get("type") == "PodScheduled" and
                           c.get("status") == "False" for c in conds):
                        continue
                    return False
            return True
        wait_for(limit, done, 0.2)
        if not quiet:
            return
        last = [None]

        def quiet():
            k = len(self.intervals())
            same = k == last[0]
            last[0] = k
            return same
        wait_for(5, quiet, 0.5)

    # -- tenant actions --
    def create(self, ns, kind, body, conn=None):
        """POST as the tenant; (status, doc); counts refusals of pods."""
        path = {"pod": "/api/v1/namespaces/%s/pods",
                "claim": RES + "/namespaces/%s/resourceclaims",
                "template": RES + "/namespaces/%s/resourceclaimtemplates"}[
                    kind] % ns
        st, doc = (conn or self.t[ns]).req("POST", path, body)
        if kind == "pod":
            self.attempts += 1
            if not 200 <= st < 300:
                self.refused += 1
        return st, doc

    def name(self, prefix):
        self.seq += 1
        return "%s-%d" % (prefix, self.seq)

    def cleanup(self):
        """Delete (as the tenant) every pod and every claim and template
        of ours; wait until the tenants hold only kpgpud's devices."""
        for ns in TENANTS:
            c = self.t[ns]
            for path in ("/api/v1/namespaces/%s/pods",
                         RES + "/namespaces/%s/resourceclaims",
                         RES + "/namespaces/%s/resourceclaimtemplates"):
                c.req("DELETE", (path % ns) + "?labelSelector=redteam%3D1")
            st, pods = c.req("GET", "/api/v1/namespaces/%s/pods" % ns)
            for p in (pods or {}).get("items") or []:
                c.req("DELETE", "/api/v1/namespaces/%s/pods/%s"
                      % (ns, p["metadata"]["name"]))

        def released():
            for iv in self.intervals():
                if iv["namespace"] in TENANTS and not iv["deallocatedAt"] \
                        and any(not c["releasedAt"]
                                for c in iv["consumers"]):
                    return False
            return True
        wait_for(30, released, 0.2)

        def recounted():
            # the quota charges deleted claims until its controller
            # recounts: wait for that, or the next attempt is refused
            for ns in TENANTS:
                st, cl = self.t[ns].req(
                    "GET", RES + "/namespaces/%s/resourceclaims" % ns)
                st2, qs = self.t[ns].req(
                    "GET", "/api/v1/namespaces/%s/resourcequotas" % ns)
                if st != 200 or st2 != 200:
                    return False
                n = len(cl.get("items") or [])
                for q in qs.get("items") or []:
                    used = (q.get("status") or {}).get("used") or {}
                    u = used.get("count/resourceclaims.resource.k8s.io")
                    if u is not None and int(u) != n:
                        return False
            return True
        wait_for(30, recounted, 0.2)

    def probe(self):
        """Recovery: every tenant creates a plain pod; seconds until each
        has kpgpud's claim allocated with a device (None: not in 60 s)."""
        t0 = time.monotonic()
        names = {}
        for ns in TENANTS:
            n = self.name("probe")
            names[ns] = n
            wait_for(60, lambda: 200 <= self.t[ns].req(
                "POST", "/api/v1/namespaces/%s/pods" % ns,
                pod(n))[0] < 300, 0.5)

        def allocated():
            for ns, n in names.items():
                st, p = self.t[ns].req("GET", "/api/v1/namespaces/%s/pods/%s"
                                       % (ns, n))
                if st != 200 or p["status"].get("phase") != "Running":
                    return False
                if not any(r.get("name") == CLAIM for r in
                           p["spec"].get("resourceClaims") or []):
                    return False
            return True
        ok = wait_for(60, allocated, 0.2)
        return round(time.monotonic() - t0, 1) if ok else None

    # -- scenarios --
    def sc_own_claims(self, pfx):
        """The tenant's own claims and templates for every DeviceClass
        (kpgpud's per-profile classes included), count 1, maxDevices+1
        and All; a pod using each one that was created."""
        modes = ["one", "count", "all"]
        kinds = ["claim", "template"]
        if self.args.short:
            modes, kinds = ["one", "all"], ["claim"]
        # one attempt at a time, cleaned up after, so that the claim-count
        # quota of an earlier attempt does not mask a later one
        for ns, (_, own, mx) in TENANTS.items():
            for cls in self.classnames:
                for mode in modes:
                    for kind in kinds:
                        n = self.name(pfx)
                        mk = claim if kind == "claim" else template
                        st, doc = self.create(ns, kind, mk(
                            n, cls, mode, mx + 1))
                        self.note("%s: %s %s %s -> %d %s" % (
                            ns, kind, cls, mode, st,
                            ((doc or {}).get("message") or "")[:90]
                            if st >= 300 else ""))
                        if not 200 <= st < 300:
                            continue
                        ref = {"resourceClaimName": n} if kind == "claim" \
                            else {"resourceClaimTemplateName": n}
                        self.create(ns, "pod", pod(self.name(pfx),
                                                   [("mine", ref)]))
                        self.settle(pfx, quiet=False)
                        self.cleanup()
        self.settle(pfx)

    def sc_replace_owned(self, pfx):
        """Replace kpgpud's template (team-m) and shared claim (team-s):
        DELETE then POST an impostor of another class (All) and a pod, all
        in one connection, several times while kpgpud repairs."""
        rounds = 2 if self.args.short else 5
        for ns, (_, own, mx) in TENANTS.items():
            kind, owned = self.owned_name(ns)
            other = "mig.nvidia.com" if own == "gpu.nvidia.com" else \
                "gpu.nvidia.com"
            c = Client(self.sim, self.t[ns].token)
            base = RES + "/namespaces/%s/%s" % (
                ns, "resourceclaimtemplates" if kind == "template"
                else "resourceclaims")
            for _ in range(rounds):
                c.req("DELETE", base + "/" + owned)
                mk = template if kind == "template" else claim
                body = mk(owned, other, "all")
                body["metadata"]["labels"][MANAGED_KEY] = "kpgpud"
                self.create(ns, kind, body, conn=c)
                self.create(ns, "pod", pod(self.name(pfx)), conn=c)
                ref = {"resourceClaimTemplateName": owned} \
                    if kind == "template" else {"resourceClaimName": owned}
                self.create(ns, "pod", pod(self.name(pfx), [(CLAIM, ref)]),
                            conn=c)
            c.close()
            # kpgpud's object is kpgpud's again (bounded)
            path = base + "/" + owned

            def repaired():
                st, o = self.admin.req("GET", path)
                if st != 200:
                    return False
                spec = o["spec"]["spec"] if kind == "template" else o["spec"]
                reqs = spec["devices"]["requests"]
                return all((r.get("exactly") or {}).get("deviceClassName")
                           == own for r in reqs)
            self.note("%s: kpgpud's %s %s %s" % (
                ns, kind, owned, "repaired" if wait_for(30, repaired)
                else "NOT repaired within 30 s"))
        self.settle(pfx)

    def sc_decoys(self, pfx):
        """Objects labelled managed-by=kpgpud, of another class, with
        names next to kpgpud's (one claim, the rest templates); pods using
        them; kpgpud's own object must still be found (a plain pod gets
        its device)."""
        n_decoys = 6 if self.args.short else 30
        for ns, (_, own, mx) in TENANTS.items():
            _, owned = self.owned_name(ns)
            # on the tenant's own node: a pod that also has kpgpud's
            # claim can only be scheduled where both can be allocated
            other = "mig.nvidia.com" if own != "gpu.nvidia.com" else \
                "gpu.nvidia.com"
            # one decoy claim (the claim-count quota is maxDevices) used
            # by a pod, settled before the rest; then decoy templates,
            # some used by pods
            for i in range(n_decoys):
                kind = "template" if i else "claim"
                n = "%s-%s%d" % (owned, pfx, i)
                mk = template if kind == "template" else claim
                st, _ = self.create(ns, kind, mk(n, other, labels={
                    MANAGED_KEY: "kpgpud", "app.kubernetes.io/name":
                    "kpgpud"}))
                if 200 <= st < 300 and i < 3:
                    ref = {"resourceClaimName": n} if kind == "claim" else \
                        {"resourceClaimTemplateName": n}
                    self.create(ns, "pod", pod(self.name(pfx),
                                               [("mine", ref)]))
                    if not i:
                        self.settle(pfx, quiet=False)
            self.create(ns, "pod", pod(self.name(pfx)))
        self.settle(pfx)

    def plain_pods(self, pfx, n, threads=True):
        """N plain pods per tenant, in parallel (each may wait out the
        webhook's timeout)."""
        ths = []
        for ns in TENANTS:
            for _ in range(n):
                nm = self.name(pfx)
                c = Client(self.sim, self.t[ns].token)
                th = threading.Thread(target=lambda ns=ns, nm=nm, c=c: (
                    self.create(ns, "pod", pod(nm), conn=c), c.close()))
                th.start()
                ths.append(th)
        for th in ths:
            th.join()

    def sc_admit_stopped(self, pfx):
        """admit SIGSTOPped (answers nothing: the webhook times out)."""
        self.stack.send("admit", signal.SIGSTOP)
        try:
            self.plain_pods(pfx, 1 if self.args.short else 2)
        finally:
            self.stack.send("admit", signal.SIGCONT)
        self.settle(pfx)

    def sc_admit_killed(self, pfx):
        """admit SIGKILLed (connection refused), started again after."""
        self.stack.kill("admit")
        try:
            self.plain_pods(pfx, 1 if self.args.short else 2)
        finally:
            self.stack.start("admit")
        self.settle(pfx)

    def direct_reviews(self, stop, nsfn, counts, addr="127.0.0.2"):
        """Post AdmissionReviews straight to admit's port from ADDR until
        STOP is set (one keep-alive connection; counts[code] += 1)."""
        ctx = ssl.create_default_context(
            cafile=self.stack.path("tls", "ca.pem"))
        ctx.check_hostname = False
        conn = None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(
                        "127.0.0.1", self.stack.port, context=ctx,
                        timeout=10, source_address=(addr, 0))
                body = json.dumps(review(nsfn(), "%032x" % random.getrandbits(
                    128))).encode()
                conn.request("POST", "/mutate", body,
                             {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                counts[r.status] = counts.get(r.status, 0) + 1
            except (OSError, http.client.HTTPException):
                counts[0] = counts.get(0, 0) + 1
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def flood(self, pfx, nsfn, nthreads):
        stop = threading.Event()
        counts = {}
        ths = [threading.Thread(target=self.direct_reviews,
                                args=(stop, nsfn, counts))
               for _ in range(nthreads)]
        for th in ths:
            th.start()
        try:
            wait_for(10, lambda: sum(counts.values()) >= 50, 0.1)
            self.plain_pods(pfx, 2 if self.args.short else 4)
        finally:
            stop.set()
            for th in ths:
                th.join()
        self.note("direct reviews answered: %s" % ", ".join(
            "%s=%d" % (k or "error", v) for k, v in sorted(counts.items())))
        self.settle(pfx)

    def sc_admit_overloaded(self, pfx):
        """Reviews for the tenant's own namespace from 16 connections as
        fast as they go, while the tenants create pods."""
        names = list(TENANTS)
        self.flood(pfx, lambda: random.choice(names), 16)

    def sc_ns_flood(self, pfx):
        """Reviews for random unknown namespaces (each a lookup unless
        admit's negative cache and rate limit stop it), and pods the
        tenant tries to create in random namespaces through the API."""
        for _ in range(10):
            ns = "rnd-%08x" % random.getrandbits(32)
            st, _ = self.t["team-m"].req(
                "POST", "/api/v1/namespaces/%s/pods" % ns, pod("x"))
            self.note("pod in namespace %s: %d" % (ns, st)) if st < 400 \
                else None
        self.flood(pfx, lambda: "rnd-%08x" % random.getrandbits(32), 8)

    def sc_conn_exhaust(self, pfx):
        """300 connections from one address (127.0.0.2: over admit's
        per-address cap of 256) that never finish TLS, held while the
        tenants create pods."""
        socks = []
        for _ in range(300):
            try:
                s = socket.create_connection(
                    ("127.0.0.1", self.stack.port), timeout=2,
                    source_address=("127.0.0.2", 0))
                s.send(b"\x16\x03\x01")       # a TLS record header, no more
                socks.append(s)
            except OSError:
                break
        try:
            self.plain_pods(pfx, 2 if self.args.short else 4)
            alive = 0
            for s in socks:
                try:
                    s.setblocking(False)
                    alive += s.recv(1) != b""
                except BlockingIOError:
                    alive += 1
                except OSError:
                    pass
            self.note("held %d connections, %d still open when the pods "
                      "were done" % (len(socks), alive))
        finally:
            for s in socks:
                s.close()
        self.settle(pfx)

    def sc_over_caps(self, pfx):
        """Pods over each of admit's caps: more containers than it
        patches (4097), more init containers (4097), a patch over
        --max-patch (2000 containers), a body over --max-body (a 1.2 MiB
        argument), JSON deeper than its parser (managedFields)."""
        big = "x" * (1200 * 1024)
        cases = [
            ("containers", lambda n: pod(n, containers=4097)),
            ("init", lambda n: pod(n, init=4097)),
            ("patch", lambda n: pod(n, containers=2000)),
            ("body", lambda n: pod(n, extra=lambda s: s["containers"][0]
                                   .__setitem__("args", [big]))),
        ]
        nest = "{}"
        for _ in range(3000):
            nest = '{"f:x":%s}' % nest
        deep_pod = json.dumps(pod("DEEP")).replace(
            '"labels": {"redteam": "1"}',
            '"labels": {"redteam": "1"}, "managedFields": [{"manager": "x",'
            ' "operation": "Update", "apiVersion": "v1", "fieldsType": '
            '"FieldsV1", "fieldsV1": %s}]' % nest)
        if self.args.short:
            cases = cases[::2] + cases[3:]
        for ns in TENANTS:
            for what, mk in cases:
                st, doc = self.create(ns, "pod", mk(self.name(pfx)))
                self.note("%s: %s -> %d %s" % (ns, what, st, (
                    (doc or {}).get("message") or "")[:110]))
            n = self.name(pfx)
            st, doc = self.create(ns, "pod", deep_pod.replace(
                "DEEP", n).encode())
            self.note("%s: depth -> %d %s" % (ns, st, (
                (doc or {}).get("message") or "")[:110]))
        self.settle(pfx)

    def note(self, text):
        self.notes.append(text)
        log("    " + text)

    SCENARIOS = [
        ("own-claims", "sc_own_claims", True),
        ("replace-owned", "sc_replace_owned", True),
        ("decoys", "sc_decoys", False),
        ("admit-stopped", "sc_admit_stopped", True),
        ("admit-killed", "sc_admit_killed", False),
        ("admit-overloaded", "sc_admit_overloaded", False),
        ("over-caps", "sc_over_caps", True),
        ("conn-exhaust", "sc_conn_exhaust", False),
        ("ns-flood", "sc_ns_flood", True),
    ]

    def run(self, expect):
        ok = True
        for name, meth, short in self.SCENARIOS:
            if self.args.short and not short:
                continue
            if self.args.only and not any(name.startswith(p)
                                          for p in self.args.only):
                continue
            self.notes = []
            self.attempts = self.refused = 0
            since = set(self.interval_keys())
            pfx = "rt%s" % name.replace("-", "")[:10]
            log("--- %s [%s]: %s" % (name, self.config, " ".join(
                getattr(self, meth).__doc__.split())))
            getattr(self, meth)(pfx)
            got, found = self.findings(since)
            found += self.unpatched(pfx)
            for kind, text in found:
                log("    %s %s" % ("ESCAPE" if kind in ESCAPES
                                   else "finding", kind + ": " + text))
            for ns, (_, own, mx) in TENANTS.items():
                n, cls = got[ns]
                log("    %s: devices obtained %d (%s), allowed %d of %s" % (
                    ns, n, ",".join(cls) or "-", mx, own))
            self.cleanup()
            rec = self.probe()
            self.cleanup()
            kinds = {k for k, _ in found}
            exp = EXPECT.get(name, {}).get(expect, {})
            must, racy = exp.get("must", set()), exp.get("racy", set())
            match = must <= kinds <= (must | racy)
            ok &= match and rec is not None
            esc = sum(1 for k, _ in found if k in ESCAPES)
            unp = sum(1 for k, _ in found if k == "unpatched")
            line = ("%s config=%s escapes=%d unpatched=%d refused=%d/%d "
                    "recovery=%s kinds=%s expected=%s%s %s" % (
                        name, self.config, esc, unp, self.refused,
                        self.attempts, "%ss" % rec if rec is not None
                        else "NONE", ",".join(sorted(kinds)) or "none",
                        ",".join(sorted(must)) or "none",
                        ("(+racy %s)" % ",".join(sorted(racy)))
                        if racy else "", "ok" if match and rec is not None
                        else "MISMATCH"))
            log(line)
            self.rows.append({"scenario": name, "config": self.config,
                              "escapes": esc, "unpatched": unp,
                              "refused": self.refused,
                              "attempts": self.attempts,
                              "recovery": rec, "kinds": sorted(kinds),
                              "match": match and rec is not None})
        return ok

    def down(self):
        if self.admin:
            self.admin.close()
        for c in self.t.values():
            c.close()
        if self.stack and not self.args.keep:
            self.stack.down()
        # no sanitizer report in the daemon logs
        bad = []
        for n in ("sync", "quota", "admit"):
            try:
                with open(self.stack.path("log", n + ".log"),
                          errors="replace") as f:
                    text = f.read()
                if "Sanitizer" in text or "runtime error:" in text:
                    bad.append(n)
            except (OSError, AttributeError):
                pass
        return bad


def peak_held(ivs):
    """The most distinct devices the intervals IVS hold at one time."""
    ev = []
    for iv in ivs:
        devs = {(d["pool"], d["device"]) for d in iv["devices"]}
        ev.append((iv["allocatedAt"], 1, devs))
        ev.append((iv["deallocatedAt"] or "9999", 0, devs))
    held, peak = {}, 0
    for _, kind, devs in sorted(ev, key=lambda e: (e[0], e[1])):
        for dv in devs:
            held[dv] = held.get(dv, 0) + (1 if kind else -1)
            if not held[dv]:
                del held[dv]
        peak = max(peak, len(held))
    return peak


def markdown(rows):
    out = ["| scenario | configuration | escapes | pods admitted unpatched |"
           " pods refused / tried | recovery (s) | matches expectation |",
           "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append("| %s | %s | %d | %d | %d / %d | %s | %s |" % (
            r["scenario"], r["config"], r["escapes"], r["unpatched"],
            r["refused"], r["attempts"],
            r["recovery"] if r["recovery"] is not None else "none",
            "yes" if r["match"] else "NO"))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--config", default="default")
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--expect", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--dir", default="")
    ap.add_argument("--keep", action="store_true",
                    help="leave the last stack running (debugging)")
    a = ap.parse_args()
    a.bin = os.path.join(os.path.abspath(a.outdir), "bin")
    a.only = [p for p in a.only.split(",") if p]
    if not a.dir:
        import tempfile
        a.dir = tempfile.mkdtemp(prefix="redteam.")
    os.makedirs(a.dir, exist_ok=True)
    os.chmod(a.dir, 0o711)
    configs = [c for c in a.config.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            sys.exit("redteam: unknown configuration %s (%s)"
                     % (c, ", ".join(CONFIGS)))
    rows, ok = [], True
    for c in configs:
        s = Suite(a, c)
        log("=== configuration %s: %s" % (c, json.dumps(CONFIGS[c])))
        try:
            s.up()
        except Exception as e:  # noqa: BLE001 -- report and stop
            log("redteam: %s: stack setup failed: %s" % (c, e))
            s.down()
            return 2
        try:
            ok &= s.run(a.expect or c)
        finally:
            bad = s.down()
        if bad:
            log("redteam: sanitizer reports in %s" % ", ".join(bad))
            ok = False
        rows += s.rows
    log("")
    log(markdown(rows))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(rows))
    log("redteam: %s" % ("every scenario as expected" if ok
                         else "MISMATCH against the expectations"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
