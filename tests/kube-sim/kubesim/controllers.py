# SPDX-License-Identifier: Apache-2.0
"""kube-controller-manager for the simulator: the resourceclaim
controller, the namespace controller and the garbage collector, plus the
helpers (event loop, Events, timestamps) the other part-2 modules share.

Every controller is level-triggered: a pass looks at the whole current
state and converges it, and runs again after any relevant change (and
every RESYNC seconds, so a dropped watch only delays it). That periodic
pass is skipped unless something was written since the last full pass
and either a write was refused (one the controller may have tried) or
its watch brought a relevant event: writes it saw and found irrelevant
would show it the same state to act on. An idle simulator with 100,000
objects, or one that just stored 100,000 namespaces, then makes no full
pass competing for the GIL. Controllers read the stored objects shared,
never copied (as from an informer's cache), and copy only what they
change and write (private()).
"""

import datetime
import json
import os
import threading
import time

from .hooks import ApiError

# Passes are event-driven and dropped watches are re-opened, so the
# periodic full pass is only a safety net.
RESYNC = 30.0
DEBOUNCE = 0.02
MIN_GAP = 0.02
RS = "resource.k8s.io"
CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
CLAIM_BASE_MAX = 57
# The scheduler's finalizer on every claim it allocates (resourceapi.Finalizer).
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0
MAX_DRAIN = 1000
KCM = "system:kube-controller-manager"
CLAIM_USER = "system:serviceaccount:kube-system:resource-claim-controller"
# kube-controller-manager runs each controller with its own service account
# (--use-service-account-credentials, as kubeadm sets it).
NS_USER = "system:serviceaccount:kube-system:namespace-controller"
GC_USER = "system:serviceaccount:kube-system:generic-garbage-collector"
QUOTA_USER = "system:serviceaccount:kube-system:resourcequota-controller"


def now(t=None):
    """RFC 3339 UTC timestamp to the second, as the API server writes;
    T is a time.time() value (default: now)."""
    if t is None:
        t = time.time()
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim_generate_name(pod_name, pod_claim_name):
    """generateName of a generated claim, as the resourceclaim controller
    builds it: '<pod>-<claim>-', and when that is longer than 57 both parts
    cut in proportion to their length and joined without the trailing dash
    (pkg/controller/resourceclaim/controller.go handleClaim)."""
    gen = pod_name + "-" + pod_claim_name + "-"
    if len(gen) > CLAIM_BASE_MAX:
        n = len(gen)
        gen = (pod_name[:len(pod_name) * CLAIM_BASE_MAX // n] + "-" +
               pod_claim_name[:len(pod_claim_name) * CLAIM_BASE_MAX // n])
    return gen


def pod_done(pod):
    """isPodDone: terminal phase, or deleted before it was scheduled."""
    st = (pod.get("status") or {}).get("phase")
    return st in ("Succeeded", "Failed") or bool(
        pod["metadata"].get("deletionTimestamp") and
        not (pod.get("spec") or {}).get("nodeName"))


# Where controllers log (DIR/log once registered).
LOG = [lambda msg: None]

BAD_OBJECT = (KeyError, TypeError, ValueError, AttributeError, IndexError)


# Per controller thread (/sim/stats "controllers"): passes, full passes,
# keys handled by keyed passes, events read, objects synced (quota), the
# resourceVersion of the newest event read (seen_rv) and of the newest one
# a finished pass followed (handled_rv), whether a timed pass is pending.
_STATS = {}
_STATS_LOCK = threading.Lock()


def count(field, n=1, value=None):
    """Add N to FIELD of the calling controller thread's counters (set it
    to VALUE instead when given)."""
    name = threading.current_thread().name
    with _STATS_LOCK:
        st = _STATS.setdefault(name, {})
        st[field] = st.get(field, 0) + n if value is None else value


def stats_snapshot():
    """A copy of every controller's counters."""
    with _STATS_LOCK:
        return {k: dict(v) for k, v in _STATS.items()}


def private(obj):
    """A private deep copy of OBJ, read from a shared (stored) object that
    must not change: what a controller edits before it writes."""
    return json.loads(json.dumps(obj))


def each(items, fn):
    """Call fn(item) for every item; a malformed object is skipped so it
    cannot stall the controller for every other object."""
    for it in items:
        try:
            fn(it)
        except BAD_OBJECT:
            continue


def _watch_closed(w):
    """True when a watch can no longer deliver events."""
    for attr in ("closed", "_closed"):
        if getattr(w, attr, False):
            return True
    inner = getattr(w, "watcher", None) or getattr(w, "w", None)
    return bool(inner is not None and getattr(inner, "closed", False))


def write_status(api, key, obj, user):
    """Update the status subresource of OBJ as USER; the stored object, or
    None when the write was refused (a conflict, the object gone)."""
    md = obj["metadata"]
    try:
        return api.update(key, md.get("namespace", ""), obj,
                          subresource="status", user=user)
    except ApiError:
        return None


def event_loop(api, stop, keys, fn, due=None, resync=None,
               debounce=DEBOUNCE, min_gap=MIN_GAP, key_of=None):
    """Call fn() at start, after relevant changes and every RESYNC s.

    KEYS is a tuple of resource keys, None (any change) or a predicate
    taking a WatchEvent; the event's objects are the stored ones, shared
    (read them, never change them). After a relevant event the loop keeps
    draining events that follow within DEBOUNCE seconds (0: only those
    already queued) before the pass; passes start MIN_GAP s apart at least.
    KEY_OF, if given, maps a relevant event to the keys it concerns (a
    keyed work queue): fn(keys) then gets the set of keys queued since its
    last call, or None for a full pass (at start, after the watch was
    re-opened or a pass failed, and the periodic one).
    DUE, if given, returns the seconds until fn must run again (or None),
    for retry backoff. Errors from fn are retried on the next turn; the
    loop ends when STOP is set.
    """
    w = None
    last = last_full = 0.0
    dirty = full = True
    queued = set()
    touched = False  # a relevant event read since the last full pass
    refused = None
    mark = None
    wake = None
    seen = 0
    resync = resync or RESYNC
    if keys is None:
        relevant = lambda ev: True  # noqa: E731
    elif callable(keys):
        relevant = keys
    else:
        relevant = lambda ev: ev.resource.key in keys  # noqa: E731
    while not stop.is_set():
        if w is None or _watch_closed(w):
            if w is not None:
                w.close()
            try:
                w = api.watch(None, copy=False)
            except ApiError:
                w = None
            dirty = full = True
        t = time.monotonic()
        if t - last < min_gap:
            stop.wait(min_gap - (t - last))
            t = time.monotonic()
        if t - last_full >= resync:
            if full or (touched or api.refused != refused) and \
                    api.change_mark() != mark:
                dirty = full = True
            else:
                # Nothing written or tried, or only writes this
                # controller's watch saw and found irrelevant: same pass.
                last_full = t
        if dirty or (wake is not None and t >= wake):
            full = full or key_of is None  # an unkeyed pass sees it all
            arg = None if full else queued
            if full:
                last_full = t
                mark = api.change_mark()
                refused = api.refused
                touched = False
            count("passes")
            if full:
                count("full_passes")
            else:
                count("keys", len(arg))
            dirty = full = False
            queued = set()
            last = t
            upto = seen
            try:
                fn() if key_of is None else fn(arg)
                count("handled_rv", value=upto)
            except ApiError:
                dirty = full = True
                stop.wait(0.05)
            d = due() if due else None
            wake = time.monotonic() + d if d is not None else None
            count("wake", value=wake is not None)
        wait = 0.25
        if wake is not None:
            wait = max(0.0, min(wait, wake - time.monotonic()))
        if w is None:
            stop.wait(wait)
            continue
        ev = w.next(wait)
        n = 0
        while ev is not None and n < MAX_DRAIN and not stop.is_set():
            n += 1
            seen = ev.resource_version
            if key_of is not None:
                if relevant(ev):
                    queued.update(key_of(ev))
                    dirty = touched = True
            elif not dirty and relevant(ev):
                dirty = touched = True
            ev = w.next(debounce if dirty else 0.0)
        if n:
            count("events", n)
            count("seen_rv", value=seen)
            if not dirty:  # every event read so far needs no pass
                count("handled_rv", value=seen)
    if w is not None:
        w.close()


class EventRecorder:
    """Writes core/v1 Events, aggregating repeats into a count."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}

    def emit(self, api, obj, etype, reason, message, component):
        """Record one Event about OBJ; failures are ignored (best effort)."""
        md = obj.get("metadata") or {}
        ns = md.get("namespace") or "default"
        key = (md.get("uid"), etype, reason, message, component)
        ts = now()
        with self.lock:
            name = self.seen.get(key)
        if name:
            try:
                ev = api.get("events", ns, name)
                ev["count"] = int(ev.get("count") or 1) + 1
                ev["lastTimestamp"] = ts
                api.update("events", ns, ev, user=KCM)
                return
            except ApiError:
                pass
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "%s.%x" % (md.get("name", "unknown"),
                                              time.time_ns() +
                                              int.from_bytes(os.urandom(2),
                                                             "big")),
                           "namespace": ns},
              "involvedObject": {
                  "kind": obj.get("kind"), "namespace": md.get("namespace"),
                  "name": md.get("name"), "uid": md.get("uid"),
                  "apiVersion": obj.get("apiVersion"),
                  "resourceVersion": md.get("resourceVersion")},
              "reason": reason, "message": message,
              "source": {"component": component},
              "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
              "type": etype, "eventTime": None,
              "reportingComponent": component, "reportingInstance": ""}
        if not md.get("namespace"):
            del ev["involvedObject"]["namespace"]
        try:
            made = api.create("events", ns, ev, user=KCM)
        except ApiError:
            return
        with self.lock:
            if len(self.seen) > 10000:
                self.seen.clear()
            self.seen[key] = made["metadata"]["name"]


_RECORDER = EventRecorder()


def emit_event(api, obj, etype, reason, message, component):
    """Record an Event through the shared recorder."""
    _RECORDER.emit(api, obj, etype, reason, message, component)


# ------------------------------------------------------ resourceclaim ctrl

class ClaimController:
    """Creates claims from ResourceClaimTemplates for Pods."""

    def __init__(self, api):
        self.api = api
        self.failures = {}
        self.not_before = {}

    def pass_once(self):
        """Handle every Pod that still lacks a generated claim, then every
        claim (reservations, deallocation, finalizer, unused claims)."""
        pods, _ = self.api.list("pods", copy=False)
        t = time.monotonic()
        alive = {p["metadata"].get("uid") for p in pods}
        each([p for p in pods if not p["metadata"].get("deletionTimestamp")
              and not pod_done(p)
              and self.not_before.get(p["metadata"].get("uid"), 0) <= t],
             self.sync_pod)
        by_name = {(p["metadata"].get("namespace"), p["metadata"].get("name")):
                   p for p in pods}
        claims, _ = self.api.list("resourceclaims." + RS, copy=False)

        def sync(c):
            try:
                self.sync_claim(c, by_name)
            except ApiError:
                pass  # conflict or gone: the next pass sees the new state
        each(claims, sync)
        for uid in list(self.failures):
            if uid not in alive:
                self.failures.pop(uid, None)
                self.not_before.pop(uid, None)

    def next_deadline(self):
        """Seconds until the earliest retry, or None."""
        if not self.not_before:
            return None
        return max(0.0, min(self.not_before.values()) - time.monotonic())

    def sync_pod(self, pod):
        """Create missing claims of POD and record them in its status."""
        md = pod["metadata"]
        spec_claims = (pod.get("spec") or {}).get("resourceClaims") or []
        st = pod.get("status") or {}
        have = {s.get("name"): s for s in st.get("resourceClaimStatuses")
                or []}
        new = []
        for pc in spec_claims:
            if not pc.get("resourceClaimTemplateName") or \
                    pc.get("name") in have:
                continue
            try:
                new.append({"name": pc["name"],
                            "resourceClaimName": self._claim_for(pod, pc)})
            except ApiError as e:
                self._failed(pod, pc, e.message)
                break
        if not new:
            return
        pod = private(pod)
        st = pod.get("status") or {}
        have = {s.get("name"): s for s in st.get("resourceClaimStatuses")
                or []}
        st["resourceClaimStatuses"] = list(have.values()) + new
        pod["status"] = st
        if write_status(self.api, "pods", pod, CLAIM_USER) is None:
            return
        self.failures.pop(md["uid"], None)
        self.not_before.pop(md["uid"], None)

    def _claim_for(self, pod, pc):
        """The existing generated claim for PC, or a newly created one."""
        md = pod["metadata"]
        ns = md["namespace"]
        claims, _ = self.api.list("resourceclaims." + RS, namespace=ns,
                                  copy=False)
        for c in claims:
            cm = c["metadata"]
            owned = any(r.get("uid") == md["uid"] and r.get("controller")
                        for r in cm.get("ownerReferences") or [])
            if owned and (cm.get("annotations") or {}).get(
                    CLAIM_ANNOTATION) == pc["name"]:
                return cm["name"]
        tname = pc["resourceClaimTemplateName"]
        try:
            tmpl = self.api.get("resourceclaimtemplates." + RS, ns, tname)
        except ApiError as e:
            raise ApiError(e.code, e.reason, 'resource claim template '
                           '"%s": %s' % (tname, e.message))
        tspec = tmpl.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        base = claim_generate_name(md["name"], pc["name"])
        ann = dict(tmeta.get("annotations") or {})
        ann[CLAIM_ANNOTATION] = pc["name"]
        meta = {"generateName": base, "namespace": ns, "annotations": ann,
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Pod", "name": md["name"],
                    "uid": md["uid"], "controller": True,
                    "blockOwnerDeletion": True}]}
        if tmeta.get("labels"):
            meta["labels"] = dict(tmeta["labels"])
        claim = {"apiVersion": RS + "/v1", "kind": "ResourceClaim",
                 "metadata": meta, "spec": tspec.get("spec") or {}}
        try:
            made = self.api.create("resourceclaims." + RS, ns, claim,
                                   user=CLAIM_USER)
        except ApiError as e:
            # The name is generated by the server, so the real controller
            # prints an empty one here.
            raise ApiError(e.code, e.reason, "create ResourceClaim : %s"
                           % e.message)
        return made["metadata"]["name"]

    def _pod(self, ns, name, by_name):
        """The Pod NS/NAME from this pass's list, else from the store (it
        may be newer than the list), else None."""
        p = by_name.get((ns, name))
        if p is not None:
            return p
        try:
            return self.api.get("pods", ns, name)
        except ApiError:
            return None

    def sync_claim(self, claim, by_name):
        """syncClaim: drop reservations of Pods that are gone, replaced or
        done; deallocate when none is left and lift the scheduler's
        finalizer; delete a generated claim whose Pod will not run."""
        md = claim["metadata"]
        ns = md["namespace"]
        st = claim.get("status") or {}
        res = st.get("reservedFor") or []
        valid = []
        for r in res:
            if r.get("resource") != "pods" or r.get("apiGroup"):
                valid.append(r)
                continue
            p = self._pod(ns, r.get("name", ""), by_name)
            if p is not None and p["metadata"].get("uid") == r.get("uid") \
                    and not pod_done(p):
                valid.append(r)
        fin = CLAIM_FINALIZER in (md.get("finalizers") or [])
        key = "resourceclaims." + RS
        if len(valid) < len(res):
            claim = private(claim)
            st = claim.get("status") or {}
            if valid:
                st["reservedFor"] = valid
            else:
                st.pop("reservedFor", None)
                if fin:
                    st.pop("allocation", None)
            claim["status"] = st
            claim = self.api.update(key, ns, claim, subresource="status",
                                    user=CLAIM_USER)
            md = claim["metadata"]
            if fin and not (claim.get("status") or {}).get("allocation"):
                self._unfinalize(claim)
        elif fin and md.get("deletionTimestamp") and not valid:
            claim = private(claim)
            st = claim.get("status") or {}
            if st.get("allocation"):
                st.pop("allocation", None)
                claim["status"] = st
                claim = self.api.update(key, ns, claim, subresource="status",
                                        user=CLAIM_USER)
            self._unfinalize(claim)
        if valid or md.get("deletionTimestamp"):
            return
        owner = [r for r in md.get("ownerReferences") or []
                 if r.get("controller") and r.get("apiVersion") == "v1"
                 and r.get("kind") == "Pod"]
        if not owner:
            return
        pod = by_name.get((ns, owner[0].get("name")))
        if pod is None:
            return  # the garbage collector handles a Pod that is gone
        if pod["metadata"].get("uid") != owner[0].get("uid") or \
                pod_done(pod):
            LOG[0]("resourceclaim controller: deleting unused generated "
                   "claim %s/%s (pod %s)" % (ns, md["name"],
                                             pod["metadata"]["name"]))
            self.api.delete(key, ns, md["name"], user=CLAIM_USER,
                            preconditions={"uid": md["uid"]})

    def _unfinalize(self, claim):
        """Remove the delete-protection finalizer from CLAIM (a private
        copy)."""
        md = claim["metadata"]
        md["finalizers"] = [f for f in md.get("finalizers") or []
                            if f != CLAIM_FINALIZER]
        if not md["finalizers"]:
            del md["finalizers"]
        self.api.update("resourceclaims." + RS, md["namespace"], claim,
                        user=CLAIM_USER)

    def _failed(self, pod, pc, message):
        """Warning event on the Pod and exponential retry backoff."""
        uid = pod["metadata"]["uid"]
        n = self.failures.get(uid, 0)
        self.failures[uid] = n + 1
        delay = min(BACKOFF_BASE * (2 ** min(n, 40)), BACKOFF_MAX)
        self.not_before[uid] = time.monotonic() + delay
        emit_event(self.api, pod, "Warning", "FailedResourceClaimCreation",
                   "PodResourceClaim %s: %s" % (pc["name"], message),
                   "resource_claim")


def run_claims(api, stop):
    """Controller thread of the resourceclaim controller."""
    ctl = ClaimController(api)
    keys = ("pods", "resourceclaims." + RS, "resourceclaimtemplates." + RS)
    event_loop(api, stop, keys, ctl.pass_once, due=ctl.next_deadline)


# ------------------------------------------------------- namespace ctrl

_NS_OK = [
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered",
     "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved",
     "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentRemoved",
     "All content successfully removed"),
]


class NamespaceController:
    """Empties Terminating namespaces, then removes the kubernetes
    finalizer so the namespace goes away."""

    def __init__(self, api):
        self.api = api
        self.terminating = set()

    def relevant(self, ev):
        """Namespace changes and changes inside terminating namespaces."""
        if ev.resource.key == "namespaces":
            return bool(ev.object["metadata"].get("deletionTimestamp"))
        ns = ev.object["metadata"].get("namespace")
        return bool(ns) and ns in self.terminating

    def pass_once(self):
        """Work on every namespace that is being deleted."""
        nss, _ = self.api.list("namespaces", copy=False)
        term = set()
        for ns in nss:
            if ns["metadata"].get("deletionTimestamp") and \
                    "kubernetes" in ((ns.get("spec") or {}).get(
                        "finalizers") or []):
                term.add(ns["metadata"]["name"])
        self.terminating = term
        each([ns for ns in nss if ns["metadata"]["name"] in term], self.sync)

    def _delete_content(self, name):
        """Delete every namespaced object in NAME; return what remains."""
        remaining = {}
        finalizers = {}
        for res in self.api.resources():
            if not res.namespaced:
                continue
            try:
                items, _ = self.api.list(res.key, namespace=name,
                                         copy=False)
            except ApiError:
                continue
            for obj in items:
                md = obj["metadata"]
                if not md.get("deletionTimestamp"):
                    try:
                        self.api.delete(res.key, name, md["name"],
                                        user=NS_USER)
                    except ApiError:
                        pass
                    try:
                        obj = self.api.get(res.key, name, md["name"])
                    except ApiError:
                        continue
                rkey = res.resource + "." + res.group
                remaining[rkey] = remaining.get(rkey, 0) + 1
                for f in obj["metadata"].get("finalizers") or []:
                    finalizers[f] = finalizers.get(f, 0) + 1
        return remaining, finalizers

    def sync(self, ns):
        """One step of namespace deletion."""
        name = ns["metadata"]["name"]
        remaining, finalizers = self._delete_content(name)
        conds = []
        ts = now()
        for ctype, reason, msg in _NS_OK:
            status = "False"
            if ctype == "NamespaceContentRemaining" and remaining:
                status, reason = "True", "SomeResourcesRemain"
                msg = "Some resources are remaining: " + ", ".join(
                    "%s has %d resource instances" % (k, v)
                    for k, v in sorted(remaining.items()))
            if ctype == "NamespaceFinalizersRemaining" and finalizers:
                status, reason = "True", "SomeFinalizersRemain"
                msg = "Some content in the namespace has finalizers " \
                    "remaining: " + ", ".join(
                        "%s in %d resource instances" % (k, v)
                        for k, v in sorted(finalizers.items()))
            conds.append({"type": ctype, "status": status,
                          "lastTransitionTime": ts, "reason": reason,
                          "message": msg})
        try:
            cur = self.api.get("namespaces", "", name)
        except ApiError:
            return
        old = {c.get("type"): c for c in
               (cur.get("status") or {}).get("conditions") or []}
        for c in conds:
            o = old.get(c["type"])
            if o and all(o.get(k) == c[k] for k in ("status", "reason",
                                                     "message")):
                c["lastTransitionTime"] = o.get("lastTransitionTime", ts)
        if [old.get(c["type"]) for c in conds] != conds:
            cur.setdefault("status", {})["conditions"] = conds
            cur = write_status(self.api, "namespaces", cur, NS_USER)
            if cur is None:
                return
        if remaining:
            return
        cur.setdefault("spec", {})["finalizers"] = [
            f for f in cur["spec"].get("finalizers") or []
            if f != "kubernetes"]
        try:
            self.api.update("namespaces", "", cur, subresource="finalize",
                            user=NS_USER)
        except ApiError:
            pass


def run_namespaces(api, stop):
    """Controller thread of the namespace controller."""
    ctl = NamespaceController(api)
    event_loop(api, stop, ctl.relevant, ctl.pass_once)


# ------------------------------------------------------- garbage collector

class GarbageCollector:
    """ownerReferences-based garbage collection.

    Deletes an object once every owner is absent (Background; Foreground
    when an owner is itself waiting for its dependents), drops references
    to absent owners while others remain, and handles the owners' policy
    finalizers: "orphan" (strip the references, then release the owner)
    and "foregroundDeletion" (delete the dependents, release the owner
    when no blocking dependent is left).
    """

    def __init__(self, api):
        self.api = api
        self.referenced = set()

    def relevant(self, ev):
        """Objects with owners, deleted owners, policy finalizers and
        CRDs (new kinds an owner reference may name: upstream's collector
        re-syncs its monitors when discovery changes)."""
        if ev.resource.key == "customresourcedefinitions.apiextensions.k8s.io":
            return True
        md = ev.object["metadata"]
        if md.get("ownerReferences"):
            return True
        if ev.type == "DELETED":
            return md.get("uid") in self.referenced
        return bool(md.get("deletionTimestamp")) and bool(
            {"orphan", "foregroundDeletion"} & set(md.get("finalizers")
                                                    or []))

    def _index(self):
        """(objects by uid, dependents by owner uid)."""
        by_uid, deps = {}, {}
        for res in self.api.resources():
            try:
                items, _ = self.api.list(res.key, copy=False)
            except ApiError:
                continue
            for o in items:
                md = o["metadata"]
                by_uid[md.get("uid")] = (res, o)
                for r in md.get("ownerReferences") or []:
                    deps.setdefault(r.get("uid"), []).append((res, o))
        self.referenced = set(deps)
        return by_uid, deps

    def _owner_state(self, ref, dep_res, dep_ns, by_uid):
        """'present', 'waiting', 'absent' or 'unresolvable'.

        BY_UID None means ask the store (the final check before a
        delete, since the sweep's view may predate the owner).
        """
        try:
            ores = self.api.resource_for_kind(ref.get("apiVersion", ""),
                                              ref.get("kind", ""))
        except ApiError:
            return "unresolvable"
        if ores.namespaced and not dep_res.namespaced:
            return "unresolvable"
        ons = dep_ns if ores.namespaced else ""
        if by_uid is not None:
            hit = by_uid.get(ref.get("uid"))
            o = hit[1] if hit and hit[0].key == ores.key and \
                hit[1]["metadata"].get("namespace", "") == ons else None
        else:
            try:
                o = self.api.get(ores.key, ons, ref.get("name", ""))
            except ApiError as e:
                if e.code != 404:
                    return "present"
                o = None
            if o is not None and o["metadata"].get("uid") != ref.get("uid"):
                o = None
        if o is None:
            return "absent"
        md = o["metadata"]
        if md.get("deletionTimestamp") and "foregroundDeletion" in (
                md.get("finalizers") or []):
            return "waiting"
        return "present"

    def pass_once(self):
        """One sweep: owners' policy finalizers, then dependents."""
        by_uid, deps = self._index()

        def owner(item):
            uid, (res, o) = item
            md = o["metadata"]
            fins = md.get("finalizers") or []
            if not md.get("deletionTimestamp"):
                return
            if "orphan" in fins:
                self._orphan(res, o, deps.get(uid, []))
            elif "foregroundDeletion" in fins:
                self._foreground(res, o, deps.get(uid, []))
        each(list(by_uid.items()), owner)
        each([v for v in by_uid.values()
              if v[1]["metadata"].get("ownerReferences")],
             lambda v: self._collect(v[0], v[1], by_uid))

    def _release(self, res, owner, fin):
        """Remove finalizer FIN from a deleting owner."""
        owner = private(owner)
        md = owner["metadata"]
        md["finalizers"] = [f for f in md.get("finalizers") or []
                            if f != fin]
        try:
            self.api.update(res.key, md.get("namespace", ""), owner,
                            user=GC_USER)
        except ApiError:
            pass

    def _strip(self, res, obj, uids):
        """Remove owner references to UIDS from OBJ."""
        md = obj["metadata"]
        keep = [r for r in md.get("ownerReferences") or []
                if r.get("uid") not in uids]
        try:
            self.api.patch(res.key, md.get("namespace", ""), md["name"],
                           {"metadata": {"ownerReferences": keep or None}},
                           user=GC_USER)
            return True
        except ApiError as e:
            return e.code == 404

    def _orphan(self, res, owner, deps):
        """Orphan policy: strip references to OWNER, then release it."""
        uid = owner["metadata"]["uid"]
        if all(self._strip(dres, d, {uid}) for dres, d in deps):
            self._release(res, owner, "orphan")

    def _foreground(self, res, owner, deps):
        """Foreground policy: delete dependents, release when none block."""
        blocking = 0
        uid = owner["metadata"]["uid"]
        for dres, d in deps:
            md = d["metadata"]
            ref = [r for r in md.get("ownerReferences") or []
                   if r.get("uid") == uid]
            if ref and ref[0].get("blockOwnerDeletion"):
                blocking += 1
            if not md.get("deletionTimestamp"):
                try:
                    self.api.delete(dres.key, md.get("namespace", ""),
                                    md["name"], propagation="Foreground",
                                    preconditions={"uid": md["uid"]},
                                    user=GC_USER)
                except ApiError:
                    pass
        if blocking == 0:
            self._release(res, owner, "foregroundDeletion")

    def _collect(self, res, obj, by_uid):
        """Delete OBJ or drop dangling references, as its owners say."""
        md = obj["metadata"]
        if md.get("deletionTimestamp"):
            return
        ns = md.get("namespace", "")
        refs = md["ownerReferences"]
        states = [self._owner_state(r, res, ns, by_uid) for r in refs]
        if "absent" not in states:
            return
        # Verify with live reads: the sweep's view may predate the owners.
        states = [self._owner_state(r, res, ns, None) for r in refs]
        absent = {r.get("uid") for r, st in zip(refs, states)
                  if st == "absent"}
        if any(st in ("present", "unresolvable") for st in states):
            if absent:
                self._strip(res, obj, absent)
            return
        if not absent and "waiting" not in states:
            return
        pol = "Foreground" if "waiting" in states else "Background"
        try:
            self.api.delete(res.key, ns, md["name"], propagation=pol,
                            preconditions={"uid": md["uid"]}, user=GC_USER)
        except ApiError:
            pass


def run_gc(api, stop):
    """Controller thread of the garbage collector."""
    gc = GarbageCollector(api)
    event_loop(api, stop, gc.relevant, gc.pass_once)


def register(reg):
    """Plug the controllers into the simulator (--set controller-resync=
    DURATION: the periodic pass's interval, default 30s)."""
    global RESYNC
    from .quota import option_duration
    RESYNC = option_duration(reg, "controller-resync", RESYNC) or RESYNC
    LOG[0] = reg.log
    reg.add_controller("resourceclaim-controller", run_claims)
    reg.add_controller("namespace-controller", run_namespaces)
    reg.add_controller("garbage-collector", run_gc)
