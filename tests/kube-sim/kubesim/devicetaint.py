# SPDX-License-Identifier: Apache-2.0
"""kube-controller-manager's device-taint-eviction-controller.

As kubernetes/kubernetes pkg/controller/devicetainteviction/
device_taint_eviction.go does it: a Pod that is scheduled and uses an
allocated ResourceClaim (reserved for it) whose device carries a NoExecute
taint (in its ResourceSlice, with DRADeviceTaints on, or from a matching
DeviceTaintRule, with DRADeviceTaintRules on) is evicted once
timeAdded + tolerationSeconds has passed, unless the allocation result's
tolerations tolerate the taint with effect NoExecute and no
tolerationSeconds (tolerated forever). Evicting: a Normal
DeviceTaintManagerEviction Event "Marking for deletion", the Pod
condition DisruptionTarget=True (DeletionByDeviceTaintManager, "Device
Taint manager: deleting due to NoExecute taint") and a delete with a uid
precondition; the resourceclaim controller then unreserves and
deallocates the claim.

From 1.36 (the v1beta2 DeviceTaintRule with its status) each rule gets
the EvictionInProgress condition in status.conditions: PodsPendingEviction
/ Completed / NotStarted for NoExecute, NoEffect (with what NoExecute
would do) for None, OtherEffect for NoSchedule, with upstream's messages.
Upstream holds status updates back for ruleStatusPeriod (10 s) after the
first one; here each pass writes a changed condition at once.
"""

import datetime
import time

from . import allocator, controllers, release
from .hooks import ApiError

NAME = "device-taint-eviction-controller"
USER = "system:serviceaccount:kube-system:" + NAME
RS = "resource.k8s.io"
CLAIMS = "resourceclaims." + RS
RULES = "devicetaintrules." + RS
CONDITION = "EvictionInProgress"
WATCHED = ("pods", CLAIMS, "resourceslices." + RS, RULES)


def parse_time(text):
    """Seconds since the epoch of an RFC 3339 time, or None."""
    if not isinstance(text, str):
        return None
    t = text.replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(t).timestamp()
    except ValueError:
        return None


def _plural(n, one, many):
    return one if n == 1 else many % n


class TaintEviction:
    """One pass evicts what is due and writes rule conditions."""

    def __init__(self, api):
        self.api = api
        self.evicted = {}   # rule uid -> pods evicted since start
        self.gone = set()   # uids of pods already evicted (uidCache)
        self.wake = None    # epoch of the next pending eviction

    # -------------------------------------------------- eviction times

    def _taints(self, inv, rules, r):
        """(taint, rule or None) of the NoExecute taints on result R's
        device: its slice's (DRADeviceTaints) and the rules' (given only
        with DRADeviceTaintRules)."""
        key = (r.get("driver"), r.get("pool"), r.get("device"))
        dev = inv.by_key.get(key)
        out = []
        if dev is not None and inv.feats.taints:
            out += [(t, None) for t in dev.raw.get("taints") or []
                    if isinstance(t, dict) and t.get("effect") ==
                    "NoExecute"]
        for rule in rules:
            t = (rule.get("spec") or {}).get("taint") or {}
            if t.get("effect") == "NoExecute" and \
                    allocator.rule_matches(rule, *key):
                out.append((t, rule))
        return out

    def claim_eviction(self, claim, inv, rules, now):
        """(when, set of rule names) of CLAIM, or None: the earliest
        timeAdded (+ the smallest tolerationSeconds of NoExecute
        tolerations that match) of an untolerated NoExecute taint."""
        alloc = (claim.get("status") or {}).get("allocation") or {}
        when, why = None, set()
        for r in (alloc.get("devices") or {}).get("results") or []:
            tols = [t for t in r.get("tolerations") or []
                    if isinstance(t, dict)]
            for taint, rule in self._taints(inv, rules, r):
                t0 = parse_time(taint.get("timeAdded")) or now
                secs, forever, have = None, False, False
                for tol in tols:
                    if tol.get("effect") != "NoExecute" or \
                            not allocator.tolerates(tol, taint):
                        continue
                    if tol.get("tolerationSeconds") is None:
                        forever = True
                        break
                    s = max(0, int(tol["tolerationSeconds"]))
                    secs = s if secs is None else min(secs, s)
                    have = True
                if forever:
                    continue
                at = t0 + (secs if have else 0)
                why.add(rule["metadata"]["name"] if rule else "")
                when = at if when is None else min(when, at)
        return None if when is None else (when, why)

    def pod_eviction(self, pod, by_name, evict):
        """(when, rule names) for POD from its claims' eviction, or
        None."""
        md = pod["metadata"]
        if not (pod.get("spec") or {}).get("nodeName"):
            return None
        best = None
        for cname in allocator.pod_claim_names(pod).values():
            c = by_name.get((md["namespace"], cname)) if cname else None
            if c is None:
                continue
            reserved = (c.get("status") or {}).get("reservedFor") or []
            if not any(r.get("uid") == md["uid"] for r in reserved):
                continue
            ev = evict.get((md["namespace"], cname))
            if ev is None:
                continue
            if best is None:
                best = (ev[0], set(ev[1]))
            else:
                best = (min(best[0], ev[0]), best[1] | ev[1])
        return best

    # ------------------------------------------------------------ pass

    def pass_once(self):
        api = self.api
        feats = allocator.Features.of(api)
        if not feats.taints:
            return
        slices, _ = api.list("resourceslices." + RS, copy=False)
        rules = allocator.taint_rules(api) if feats.rules else []
        if not rules and not any(
                t.get("effect") == "NoExecute"
                for s in slices for d in (s.get("spec") or {}).get(
                    "devices") or [] if isinstance(d, dict)
                for t in d.get("taints") or [] if isinstance(t, dict)):
            self.wake = None
            return  # nothing can evict: no pass over pods and claims
        pods, _ = api.list("pods", copy=False)
        claims, _ = api.list(CLAIMS, copy=False)
        inv = allocator.Inventory(slices, rules, feats)
        now = time.time()
        by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c
                   for c in claims}
        evict = {}
        for k, c in by_name.items():
            if (c.get("status") or {}).get("allocation"):
                ev = self.claim_eviction(c, inv, rules, now)
                if ev is not None:
                    evict[k] = ev
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")
                and not controllers.pod_done(p)]
        pending = []
        for p in live:
            ev = self.pod_eviction(p, by_name, evict)
            if ev is not None and p["metadata"]["uid"] not in self.gone:
                pending.append((p, ev))
        self.wake = None
        for p, (when, why) in pending:
            if when > now:
                self.wake = when if self.wake is None else min(self.wake,
                                                               when)
                continue
            if self._evict(p):
                for r in rules:
                    if r["metadata"]["name"] in why:
                        uid = r["metadata"]["uid"]
                        self.evicted[uid] = self.evicted.get(uid, 0) + 1
        if rules and release.at_least(api, "1.36"):
            left = [(p, ev) for p, ev in pending if ev[0] > now]
            self._rule_status(rules, left, inv, claims, by_name, now)

    def next_due(self):
        """Seconds until the next pending eviction, or None."""
        if self.wake is None:
            return None
        return max(0.0, self.wake - time.time())

    def _evict(self, pod):
        """addConditionAndDeletePod; True when the Pod was deleted."""
        md = pod["metadata"]
        controllers.emit_event(self.api, pod, "Normal",
                               "DeviceTaintManagerEviction",
                               "Marking for deletion", NAME)
        p = controllers.private(pod)
        st = p.setdefault("status", {})
        conds = [c for c in st.get("conditions") or []
                 if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True",
                      "lastProbeTime": None,
                      "lastTransitionTime": controllers.now(),
                      "reason": "DeletionByDeviceTaintManager",
                      "message": "Device Taint manager: deleting due to "
                                 "NoExecute taint"})
        st["conditions"] = conds
        controllers.write_status(self.api, "pods", p, USER)
        try:
            self.api.delete("pods", md["namespace"], md["name"], user=USER,
                            preconditions={"uid": md["uid"]})
        except ApiError as e:
            if e.code != 404:
                return False
        self.gone.add(md["uid"])
        if len(self.gone) > 500:
            self.gone.pop()
        controllers.LOG[0]("%s: evicted pod %s/%s" % (NAME, md["namespace"],
                                                      md["name"]))
        return True

    # ---------------------------------------------------- rule status

    def _rule_status(self, rules, pending, inv, claims, by_name, now):
        """Write each rule's EvictionInProgress condition when it changed
        (PENDING: the pods still to evict, with their reasons)."""
        for rule in rules:
            if rule["metadata"].get("deletionTimestamp"):
                continue
            cond = self._condition(rule, pending, inv, claims, by_name, now)
            st = (rule.get("status") or {}).get("conditions") or []
            old = [c for c in st if c.get("type") == CONDITION]
            fields = ("status", "reason", "message", "observedGeneration")
            if old and all(old[0].get(f) == cond.get(f) for f in fields):
                continue
            eff = ((rule.get("spec") or {}).get("taint") or {}).get("effect")
            if old and eff != "NoExecute" and old[0].get(
                    "observedGeneration") == cond["observedGeneration"]:
                # Written once per generation ("will not be updated
                # again"): only evictions queue another update upstream.
                continue
            r = controllers.private(rule)
            cond["lastTransitionTime"] = controllers.now()
            r["status"] = {"conditions": [c for c in st if c.get("type") !=
                                          CONDITION] + [cond]}
            controllers.write_status(self.api, RULES, r, USER)

    def _condition(self, rule, pending, inv, claims, by_name, now):
        """maybeUpdateRuleStatus's condition for RULE."""
        name = rule["metadata"]["name"]
        taint = (rule.get("spec") or {}).get("taint") or {}
        eff = taint.get("effect")
        cond = {"type": CONDITION, "status": "False",
                "reason": "Effect%s" % eff, "message": "",
                "observedGeneration": rule["metadata"].get("generation", 1)}
        if eff == "NoExecute":
            mine = [p for p, (_, why) in pending if name in why]
            n = len(mine)
            nss = len({p["metadata"]["namespace"] for p in mine})
            if n:
                cond["status"] = "True"
                cond["reason"] = "PodsPendingEviction"
                cond["message"] = (
                    _plural(n, "1 pod needs to be evicted in ",
                            "%d pods need to be evicted in ") +
                    _plural(nss, "1 namespace.", "%d different namespaces."))
            elif self.evicted.get(rule["metadata"]["uid"]):
                cond["reason"] = "Completed"
            else:
                cond["reason"] = "NotStarted"
        elif eff == "None":
            sim = dict(rule, spec=dict(rule.get("spec") or {},
                                       taint=dict(taint,
                                                  effect="NoExecute")))
            key = (lambda d: allocator.rule_matches(rule, *d))
            n_slice = sum(1 for d in inv.devices if key(d.key()))
            n_alloc = 0
            evict = {}
            for c in claims:
                alloc = (c.get("status") or {}).get("allocation") or {}
                res = (alloc.get("devices") or {}).get("results") or []
                n_alloc += sum(1 for r in res if key(
                    (r.get("driver"), r.get("pool"), r.get("device"))))
                if alloc:
                    ev = self.claim_eviction(c, _NoSlices(inv), [sim], now)
                    if ev is not None:
                        evict[(c["metadata"]["namespace"],
                               c["metadata"]["name"])] = ev
            pods, _ = self.api.list("pods", copy=False)
            mine = [p for p in pods if not p["metadata"].get(
                "deletionTimestamp") and self.pod_eviction(p, by_name, evict)]
            n, nss = len(mine), len({p["metadata"]["namespace"]
                                     for p in mine})
            cond["reason"] = "NoEffect"
            cond["message"] = (
                _plural(n_slice, "1 published device selected. ",
                        "%d published devices selected. ") +
                _plural(n_alloc, "1 allocated device selected. ",
                        "%d allocated devices selected. ") +
                _plural(n, "1 pod would be evicted in ",
                        "%d pods would be evicted in ") +
                _plural(nss, "1 namespace ", "%d different namespaces ") +
                "if the effect was NoExecute. This information will not be "
                "updated again. Recreate the DeviceTaintRule to trigger an "
                "update.")
        else:
            cond["reason"] = "OtherEffect"
            cond["message"] = "Eviction only happens for the NoExecute " \
                "effect."
        done = self.evicted.get(rule["metadata"]["uid"], 0)
        if done:
            if cond["message"]:
                cond["message"] += " "
            cond["message"] += _plural(done, "1 pod ", "%d pods ") + \
                "evicted since starting the controller."
        return cond


class _NoSlices:
    """An inventory view without slice taints (a rule simulated alone)."""

    def __init__(self, inv):
        self.by_key = inv.by_key
        self.feats = allocator.Features(taints=False)


def run(api, stop):
    """Controller thread."""
    ctl = TaintEviction(api)
    controllers.event_loop(api, stop, WATCHED, ctl.pass_once,
                           due=ctl.next_due)


def register(reg):
    """Start the controller (it does nothing while DRADeviceTaints is
    off, as kube-controller-manager does not start it then)."""
    reg.add_controller(NAME, run)
