# SPDX-License-Identifier: Apache-2.0
"""ResourceQuota for the simulator: the quota controller that keeps
status.hard / status.used current, and the admission check that refuses
a ResourceClaim over quota with the apiserver's 403 texts.

Usage of a ResourceClaim (pkg/quota/v1/evaluator/core/resource_claims.go):
count/resourceclaims.resource.k8s.io = 1, and per device class
<class>.deviceclass.resource.k8s.io/devices = the devices it may get
(ExactCount: count; All: 32; adminAccess counted; consumable capacity
not charged beyond the device count; firstAvailable: per class the
largest subrequest from 1.36 (the stored 1.36+ evaluator), before that a
subrequest larger than the running value is added to it, as 1.34's Add
does). Pods are not charged for claims.

With DRAExtendedResource on (1.36+; release.py), the extended-resource
keys too: a claim's device count per class is also charged to
requests.deviceclass.resource.kubernetes.io/<class> (matched only for a
class with an explicit extendedResourceName, as the stored evaluator's
MatchingResources does) and requests.<extendedResourceName>, less what
the owning Pod already charged when the claim is that Pod's verified
extended-resource claim (getVerifiedPodUsage: the five conditions of
facts section 3.3 from 1.36; before 1.36 the loophole of
kubernetes/kubernetes#135404: annotation, Pod owner and uid suffice).
The Pod evaluator charges requests.<extended resource> (and, with the
gate, the implicit deviceclass.resource.kubernetes.io/<class> names) for
its containers' requests; Pod creation is checked against those keys
only (pkg/quota/v1/evaluator/core/pods.go).

Admission (staging/src/k8s.io/apiserver/pkg/admission/plugin/
resourcequota/controller.go checkRequest) enforces only the keys in a
quota's status.hard against its status.used and charges status.used
itself; the quota controller copies spec.hard to status.hard and
recomputes status.used asynchronously, QUOTA_SYNC_DELAY after it notices
a difference (--set quota-sync-delay=DURATION, default 10ms).
"""

import re
import time

from . import quantity as qty
from . import release
from .controllers import (BACKOFF_BASE, BACKOFF_MAX, QUOTA_USER, each,
                          count, event_loop, private, write_status)
from .hooks import ApiError, err_forbidden

RS = "resource.k8s.io"
CLAIMS = "resourceclaims." + RS
CLAIM_COUNT = "count/resourceclaims." + RS
CLASS_SUFFIX = ".deviceclass." + RS + "/devices"
ALL_MODE_COUNT = 32
# The quota controller's delay before writing a changed status: never zero
# (a real controller is always asynchronous), settable per simulator. On a
# real cluster it is short: kube-controller-manager's quota controller puts
# a quota whose spec.hard differs from status.hard on its priority queue at
# once, from its informer's event (pkg/controller/resourcequota/
# resource_quota_controller.go: addQuota -> missingUsageQueue, no delay),
# and writes status.hard with one UpdateStatus (syncResourceQuota): tens of
# milliseconds. Here too an event is taken at once (no debounce) and queues
# its namespace; the write follows DELAY later.
# Tests that need the fail-open window widen it (e.g. 2s, 3s).
DEFAULT_SYNC_DELAY = 0.01
ERC_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT = "deviceclass.resource.kubernetes.io/"
REQUESTS = "requests."
POD_RESOURCES = ("cpu", "memory", "requests.cpu", "requests.memory",
                 "limits.cpu", "limits.memory", "ephemeral-storage",
                 "requests.ephemeral-storage", "limits.ephemeral-storage")


def claim_usage(claim, env=None):
    """{resource name: int} a ResourceClaim consumes. ENV (an Env)
    adds the extended-resource keys when DRAExtendedResource is on."""
    use = {CLAIM_COUNT: 1}
    reqs = (((claim.get("spec") or {}).get("devices") or {})
            .get("requests") or [])
    add_quirk = not release.at_least(env.api if env else None, "1.36")
    for r in reqs:
        if r.get("exactly") is not None:
            ex = r["exactly"]
            n = _devices(ex)
            if n is None:
                continue
            key = ex.get("deviceClassName", "") + CLASS_SUFFIX
            use[key] = use.get(key, 0) + n
        elif r.get("firstAvailable"):
            # Per class the worst case: from 1.36 the largest subrequest;
            # 1.34's Add *adds* a subrequest larger than the running value
            # (ascending 1, 2 charge 3; descending 2, 1 charge 2).
            worst = {}
            for s in r["firstAvailable"]:
                n = _devices(s)
                if n is None:
                    continue
                c = s.get("deviceClassName", "")
                if c not in worst:
                    worst[c] = n
                elif n > worst[c]:
                    worst[c] = worst[c] + n if add_quirk else n
            for c, n in worst.items():
                key = c + CLASS_SUFFIX
                use[key] = use.get(key, 0) + n
    if env is not None and env.extended():
        _add_extended(use, env.verified_pod_usage(claim), env)
    return use


def _add_extended(use, pod_use, env):
    """addExtendedResourceQuota: each class's device count also goes to
    requests.deviceclass.resource.kubernetes.io/<class> and, for a class
    with an explicit name, requests.<name>; what the owning pod already
    charged is subtracted and only a positive rest is charged."""
    ext = {}
    for key, n in use.items():
        if not key.endswith(CLASS_SUFFIX) or key == CLASS_SUFFIX:
            continue
        cls = key[:-len(CLASS_SUFFIX)]
        ext[REQUESTS + IMPLICIT + cls] = n
        name = env.ext_name(cls)
        if name:
            ext[REQUESTS + name] = n
    for key, n in ext.items():
        n -= (pod_use or {}).get(key, 0)
        if n > 0:
            use[key] = n


def is_extended_resource_name(name):
    """v1helper.IsExtendedResourceName."""
    from .drafeat import is_extended_resource_name as ext
    return ext(name)


def pod_usage(pod, implicit=False):
    """PodUsageFunc's extended-resource part: {requests.<name>: int} of
    POD's containers (init containers: the largest), nothing for a
    terminal pod. IMPLICIT: deviceclass.resource.kubernetes.io/<class>
    names count too (DRAExtendedResource)."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return {}
    spec = pod.get("spec") or {}

    def want(c):
        res = c.get("resources") or {}
        got = dict(res.get("limits") or {})
        got.update(res.get("requests") or {})
        out = {}
        for n, v in got.items():
            if is_extended_resource_name(n) or \
                    (implicit and n.startswith(IMPLICIT)):
                out[REQUESTS + n] = _q(v).value
        return out
    total = {}
    for c in spec.get("containers") or []:
        for k, v in want(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in want(c).items():
            total[k] = max(total.get(k, 0), v)
    return {k: int(v) if v == int(v) else v for k, v in total.items()
            if v}


def pod_matches(name, implicit=False):
    """The pod evaluator's extended-resource keys."""
    if not name.startswith(REQUESTS):
        return False
    rest = name[len(REQUESTS):]
    return is_extended_resource_name(rest) or \
        (implicit and rest.startswith(IMPLICIT))


class Env:
    """What the claim evaluator reads besides the claim: the device
    classes (the extended-resource cache), the namespace's pods and
    claims (verified pod usage). Built lazily from API."""

    def __init__(self, api, namespace):
        self.api = api
        self.ns = namespace
        self._classes = None
        self._gate = None

    def extended(self):
        if self._gate is None:
            self._gate = release.gate(self.api, "DRAExtendedResource")
        return self._gate

    def classes(self):
        if self._classes is None:
            try:
                got, _ = self.api.list("deviceclasses." + RS, copy=False)
            except (ApiError, TypeError):
                got, _ = self.api.list("deviceclasses." + RS)
            self._classes = {c["metadata"]["name"]: c for c in got}
        return self._classes

    def ext_name(self, cls):
        """GetExtendedResource(class): its explicit extendedResourceName."""
        c = self.classes().get(cls)
        return ((c or {}).get("spec") or {}).get("extendedResourceName") \
            or ""

    def class_of(self, name):
        """GetDeviceClass(extended resource name) for an explicit name."""
        from .allocator import extended_resource_map
        if name.startswith(IMPLICIT):
            return None
        return extended_resource_map(self.classes()).get(name)

    def claim_matches(self, name):
        """The claim evaluator's MatchingResources for one key."""
        if name == CLAIM_COUNT or name.endswith(CLASS_SUFFIX):
            return True
        if not self.extended() or not name.startswith(REQUESTS):
            return False
        rest = name[len(REQUESTS):]
        if rest.startswith(IMPLICIT):
            return bool(self.ext_name(rest[len(IMPLICIT):]))
        return is_extended_resource_name(rest) and \
            self.class_of(rest) is not None

    def verified_pod_usage(self, claim):
        """getVerifiedPodUsage: the owning Pod's usage when CLAIM is its
        extended-resource claim, else None."""
        md = claim.get("metadata") or {}
        if (md.get("annotations") or {}).get(ERC_ANNOTATION) != "true":
            return None
        owner = [r for r in md.get("ownerReferences") or []
                 if r.get("controller")]
        if not owner or owner[0].get("kind") != "Pod" or \
                owner[0].get("apiVersion") != "v1":
            return None
        try:
            pod = self.api.get("pods", md.get("namespace") or self.ns,
                               owner[0].get("name"))
        except ApiError:
            return None
        if owner[0].get("uid") != pod["metadata"].get("uid"):
            return None
        if release.at_least(self.api, "1.36"):
            # kubernetes/kubernetes#135434 (1.36): the pod must point at
            # this claim, or it must be the pod's earliest such claim.
            st = (pod.get("status") or {}).get("extendedResourceClaimStatus")
            if st is not None:
                if st.get("resourceClaimName") != md.get("name"):
                    return None
            else:
                mine = (md.get("creationTimestamp") or "", md.get("name"))
                claims, _ = self.api.list(CLAIMS, namespace=md.get(
                    "namespace") or self.ns)
                for c in claims:
                    cm = c["metadata"]
                    if (cm.get("annotations") or {}).get(
                            ERC_ANNOTATION) != "true":
                        continue
                    o = [r for r in cm.get("ownerReferences") or []
                         if r.get("controller")]
                    if not o or o[0].get("uid") != pod["metadata"]["uid"] \
                            or o[0].get("kind") != "Pod" or \
                            o[0].get("apiVersion") != "v1":
                        continue
                    if (cm.get("creationTimestamp") or "",
                            cm.get("name")) < mine:
                        return None
        return pod_usage(pod, self.extended())


def _devices(req):
    """Devices one (sub)request may get; None for unknown modes."""
    mode = req.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        try:
            return int(req.get("count") or 1)
        except (TypeError, ValueError):
            return None
    if mode == "All":
        return ALL_MODE_COUNT
    return None


def is_claim_resource(name):
    """True for the quota resource names the claim evaluator tracks."""
    return name == CLAIM_COUNT or name.endswith(CLASS_SUFFIX)


def _applies(quota):
    """Scoped quotas never match ResourceClaims (no claim scopes)."""
    spec = quota.get("spec") or {}
    return not spec.get("scopes") and not spec.get("scopeSelector")


def _claims_usage(claims, env=None):
    """Summed usage of a list of claims."""
    total = {}
    for c in claims:
        for k, v in claim_usage(c, env).items():
            total[k] = total.get(k, 0) + v
    return total


def _pretty(d):
    """Sorted 'name=qty' pairs joined by ',' (quota prettyPrint)."""
    return ",".join("%s=%s" % (k, d[k]) for k in sorted(d))


def _q(text):
    """Parse a quantity, treating garbage as zero."""
    try:
        return qty.parse(text)
    except qty.QuantityError:
        return qty.Quantity(0)


def _restricted(quota, matches=is_claim_resource):
    """The keys of QUOTA's status.hard the evaluator matches (what
    admission enforces)."""
    hard = (quota.get("status") or {}).get("hard") or {}
    return sorted(k for k in hard if matches(k))


def check_claim(ctx):
    """Quota admission for a ResourceClaim (or, for its extended-resource
    keys, a Pod) CREATE, as the apiserver's ResourceQuota plug-in
    (checkRequest) does it.

    Only keys in a quota's status.hard are enforced, against its
    status.used: a quota the controller has not synced yet, a key only in
    spec.hard or a limit lowered in spec.hard alone are not enforced (fails
    open). Returns [(quota, new status.used)] for every quota the object is
    charged to and whose usage changes; raises the 403.
    """
    if ctx.operation != "CREATE" or ctx.subresource:
        return []
    env = Env(ctx.api, ctx.namespace)
    if ctx.resource.key == CLAIMS:
        def matches(k):
            if k == CLAIM_COUNT or k.endswith(CLASS_SUFFIX):
                return True
            return k.startswith(REQUESTS) and env.claim_matches(k)

        def usage():
            # The extended-resource keys (and the reads they need) only
            # matter when a quota enforces one.
            ext = any(k.startswith(REQUESTS) for q in interesting
                      for k in _restricted(q, matches))
            return claim_usage(ctx.object, env if ext else None)
    elif ctx.resource.key == "pods":
        implicit = release.gate(ctx.api, "DRAExtendedResource")

        def matches(k):
            return pod_matches(k, implicit)

        def usage():
            return pod_usage(ctx.object, implicit)
    else:
        return []
    quotas, _ = ctx.api.list("resourcequotas", namespace=ctx.namespace)
    interesting = []
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        if not _applies(quota):
            continue
        restricted = _restricted(quota, matches)
        if not restricted:
            continue
        used = (quota.get("status") or {}).get("used") or {}
        if any(k not in used for k in restricted):
            raise err_forbidden(ctx.resource, ctx.name,
                                "status unknown for quota: %s, resources: %s"
                                % (quota["metadata"]["name"],
                                   ",".join(restricted)))
        interesting.append(quota)
    if not interesting:
        return []
    requested = {k: v for k, v in usage().items() if v and matches(k)}
    charges = []
    for quota in interesting:
        st = quota["status"]
        hard, used = st["hard"], st["used"]
        req = {k: requested[k] for k in hard if k in requested}
        if not req:
            continue
        new_used = dict(used)
        for k, v in req.items():
            new_used[k] = str(_q(used.get(k, "0")) + qty.Quantity(v))
        exceeded = sorted(k for k in req
                          if _q(new_used[k]).compare(_q(hard[k])) > 0)
        if exceeded:
            raise err_forbidden(
                ctx.resource, ctx.name,
                "exceeded quota: %s, requested: %s, used: %s, limited: %s"
                % (quota["metadata"]["name"],
                   _pretty({k: req[k] for k in exceeded}),
                   _pretty({k: used[k] for k in exceeded}),
                   _pretty({k: hard[k] for k in exceeded})))
        charges.append((quota, new_used))
    return charges


def admit_claim(ctx):
    """Validating hook: check_claim, then charge status.used of every
    matching quota in the same critical section as the claim's persist
    (the apiserver writes the quota status before it stores the claim; a
    later refusal leaves the charge until the quota controller recomputes
    usage, as on a real cluster)."""
    charges = check_claim(ctx)
    if ctx.dry_run or not charges:
        return
    store = ctx.api.store
    res = ctx.api.resource("resourcequotas")
    with store.lock:
        for quota, new_used in charges:
            cur = store.get(res, ctx.namespace, quota["metadata"]["name"])
            if cur is None:
                continue
            obj = cur.copy()
            obj.setdefault("status", {})["used"] = new_used
            obj["metadata"]["resourceVersion"] = str(store.next_rv())
            store.commit("MODIFIED", res, obj, cur.obj)


def _pod_usage(pods, name):
    """Usage of one compute resource name summed over live pods."""
    if name == "pods":
        return qty.Quantity(len(pods))
    kind, _, res = name.rpartition(".")
    kind = kind or "requests"
    total = qty.Quantity(0, "BinarySI" if "memory" in res or
                         "storage" in res else "DecimalSI")
    for p in pods:
        spec = p.get("spec") or {}
        s = qty.Quantity(0)
        for c in spec.get("containers") or []:
            v = ((c.get("resources") or {}).get(kind) or {}).get(res)
            if v is not None:
                s = s + _q(v)
        for c in spec.get("initContainers") or []:
            v = ((c.get("resources") or {}).get(kind) or {}).get(res)
            if v is not None and _q(v).compare(s) > 0:
                s = _q(v)
        total = total + s
    return total


class QuotaController:
    """kube-controller-manager's quota controller: copies spec.hard to
    status.hard and recomputes status.used from the live objects, DELAY
    seconds after it first sees a quota's status differ from that (so
    tests can widen the window in which a real cluster fails open)."""

    def __init__(self, api, delay=DEFAULT_SYNC_DELAY):
        self.api = api
        self.delay = delay
        self.namespaces = set()
        self.since = {}     # uid -> (monotonic time first seen due, ns)
        self.failures = {}  # uid -> refused status writes in a row

    def relevant(self, ev):
        """Quota objects and anything in a namespace that has a quota."""
        if ev.resource.key == "resourcequotas":
            return True
        return ev.object["metadata"].get("namespace") in self.namespaces

    @staticmethod
    def key_of(ev):
        """The work-queue key of a relevant event: its namespace (every
        quota there is synced)."""
        return (ev.object["metadata"].get("namespace") or "",)

    def _count(self, name, ns):
        """count/<resource>[.<group>] usage, or None if unknown."""
        try:
            res = self.api.resource(name[len("count/"):])
        except ApiError:
            return None
        if not res.namespaced:
            return None
        items, _ = self.api.list(res.key, namespace=ns, copy=False)
        return len(items)

    def usage(self, ns, hard):
        """{name: str} used amounts for every resource name in HARD."""
        claims, _ = self.api.list(CLAIMS, namespace=ns, copy=False)
        env = Env(self.api, ns)
        ext = any(n.startswith(REQUESTS) for n in hard)
        cu = _claims_usage(claims, env if ext else None)
        implicit = release.gate(self.api, "DRAExtendedResource")
        pods = None
        used = {}
        for name in hard:
            if is_claim_resource(name):
                used[name] = str(cu.get(name, 0))
            elif pod_matches(name, implicit) or (
                    name.startswith(REQUESTS) and env.claim_matches(name)):
                # Both evaluators add to the key (CalculateUsage sums
                # every evaluator's usage).
                total = cu.get(name, 0) if env.claim_matches(name) else 0
                if pod_matches(name, implicit):
                    for p in self.api.list("pods", namespace=ns,
                                           copy=False)[0]:
                        total += pod_usage(p, implicit).get(name, 0)
                used[name] = str(qty.Quantity(total))
            elif name.startswith("count/"):
                n = self._count(name, ns)
                used[name] = str(n or 0)
            elif name == "pods" or name in POD_RESOURCES:
                if pods is None:
                    pods = [p for p in self.api.list(
                                "pods", namespace=ns, copy=False)[0]
                            if (p.get("status") or {}).get("phase") not in
                            ("Succeeded", "Failed")]
                used[name] = str(_pod_usage(pods, name))
            else:
                used[name] = "0"
        return used

    def pass_once(self, namespaces=None):
        """Sync the quotas of NAMESPACES (the keys queued by events) and
        those whose status write is due; every quota when None."""
        if namespaces is None:
            quotas, _ = self.api.list("resourcequotas", copy=False)
            self.namespaces = {q["metadata"]["namespace"] for q in quotas}
            live = {q["metadata"].get("uid") for q in quotas}
            for uid in list(self.since):
                if uid not in live:
                    self._forget(uid)
        else:
            quotas = []
            t = time.monotonic()
            due = {n for f, n in self.since.values() if f + self.delay <= t}
            for ns in (set(namespaces) | due) - {""}:
                got, _ = self.api.list("resourcequotas", namespace=ns,
                                       copy=False)
                if got:
                    self.namespaces.add(ns)
                else:
                    self.namespaces.discard(ns)
                live = {q["metadata"].get("uid") for q in got}
                for uid, (_, n) in list(self.since.items()):
                    if n == ns and uid not in live:
                        self._forget(uid)
                quotas += got
        each([q for q in quotas if not q["metadata"].get(
            "deletionTimestamp")], self.sync)

    def next_due(self):
        """Seconds until the earliest pending status write, or None."""
        if not self.since:
            return None
        return max(0.0, min(t for t, _ in self.since.values()) +
                   self.delay - time.monotonic())

    def sync(self, q):
        """Write the status of one quota once it has differed for DELAY.

        The update carries the quota's resourceVersion, so a charge made
        by admission meanwhile makes it conflict and the next pass
        recomputes (the usage is listed after the quota was read)."""
        md = q["metadata"]
        count("synced")
        hard = dict((q.get("spec") or {}).get("hard") or {})
        status = {"hard": hard, "used": self.usage(md["namespace"], hard)}
        uid = md["uid"]
        if (q.get("status") or {}) == status:
            self._forget(uid)
            return
        t = time.monotonic()
        first, ns = self.since.setdefault(uid, (t, md["namespace"]))
        if t - first < self.delay:
            return
        q = private(q)
        q["status"] = status
        if write_status(self.api, "resourcequotas", q, QUOTA_USER) is None:
            # Retried after the work queue's per-item backoff (5 ms,
            # doubling), as upstream requeues a failed sync rate-limited.
            n = self.failures.get(uid, 0)
            self.failures[uid] = n + 1
            self.since[uid] = (t - self.delay + min(
                BACKOFF_BASE * 2 ** min(n, 40), BACKOFF_MAX), ns)
            return
        self._forget(uid)

    def _forget(self, uid):
        """Drop the pending write and failure count of quota UID."""
        self.since.pop(uid, None)
        self.failures.pop(uid, None)


def parse_duration(text):
    """Seconds of a duration like 250ms, 2s, 1.5s, 1m (ValueError if not
    one, or negative, or over an hour)."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?)(ms|s|m)", (text or "").strip())
    if not m:
        raise ValueError("invalid duration %r (want e.g. 250ms, 2s, 1m)"
                         % text)
    v = float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2)]
    if v > 3600:
        raise ValueError("duration %r is over 1h" % text)
    return v


def option_duration(reg, key, default):
    """A duration option of --set KEY=DURATION (ValueError names KEY)."""
    text = reg.options.get(key)
    if text is None:
        return default
    try:
        return parse_duration(text)
    except ValueError as e:
        raise ValueError("--set %s: %s" % (key, e)) from None


def register(reg):
    """Plug quota admission and the quota controller into the simulator."""
    delay = option_duration(reg, "quota-sync-delay", DEFAULT_SYNC_DELAY)

    def run(api, stop):
        ctl = QuotaController(api, delay)
        # Upstream queues a quota straight from the informer's event
        # (no debounce); the keyed queue keeps each pass to the
        # namespaces that changed.
        event_loop(api, stop, ctl.relevant, ctl.pass_once, due=ctl.next_due,
                   debounce=0.0, min_gap=0.0, key_of=ctl.key_of)
    # The apiserver runs ResourceQuota as the last admission plug-in.
    reg.add_validating("ResourceQuota", admit_claim, order=1000)
    reg.add_controller("resourcequota-controller", run)
    reg.log("quota: status sync delay %gs" % delay)
