# SPDX-License-Identifier: Apache-2.0
"""Structured-parameters DRA allocation, as the scheduler's plugin does it.

The pure part (Inventory, allocate_claim) takes ResourceSlices,
DeviceClasses and claims as plain dicts and returns a v1
status.allocation. The controller part plays the scheduler for the
simulator: for every unscheduled Pod whose claims all exist it allocates
the unallocated ones on one node, reserves them for the Pod and records
PodScheduled; it frees devices by dropping reservations of Pods that are
gone (a claim nobody reserves is deallocated).

A CEL expression that fails to evaluate aborts allocation with an
explicit error, never a silent match.
"""

import uuid

from . import cel
from . import controllers
from . import quantity as qty
from . import release
from .hooks import ApiError

MAX_RESERVED_FOR = 256
SCHEDULER = "system:kube-scheduler"
ALL_MODE_LIMIT = 32
MAX_STEPS = 200000
RS = "resource.k8s.io"
# Taint effects that keep a device from new allocations (an unknown
# effect counts as None, as the API says consumers must treat it).
BLOCKING = ("NoSchedule", "NoExecute")


class AllocationError(Exception):
    """Allocation cannot even be attempted (CEL error, missing class ...)."""


class Unsatisfiable(Exception):
    """No free devices satisfy the claim on any candidate node."""


class Features:
    """The DRA feature gates the allocator obeys (release.py), read once
    per pass: device taints (slice taints and tolerations), taint rules
    (DeviceTaintRule), consumable capacity (allowMultipleAllocations with
    capacity bookkeeping, shareID, consumedCapacity), partitionable
    devices (shared counters), admin access."""

    __slots__ = ("taints", "rules", "consumable", "partitionable", "admin",
                 "extended")

    def __init__(self, taints=False, rules=False, consumable=False,
                 partitionable=False, admin=True, extended=False):
        self.taints = taints
        self.rules = rules
        self.consumable = consumable
        self.partitionable = partitionable
        self.admin = admin
        self.extended = extended

    @classmethod
    def of(cls, x=None):
        """The gates of simulator X (an Api, hooks Registry; None: the
        configured one)."""
        g = release.gate
        return cls(g(x, "DRADeviceTaints"), g(x, "DRADeviceTaintRules"),
                   g(x, "DRAConsumableCapacity"),
                   g(x, "DRAPartitionableDevices"), g(x, "DRAAdminAccess"),
                   g(x, "DRAExtendedResource"))


def _q(v):
    """A Quantity from an API value (garbage: None)."""
    try:
        return qty.parse(v)
    except (qty.QuantityError, TypeError):
        return None


class DeviceRef:
    """One published device with its CEL view."""

    __slots__ = ("driver", "pool", "name", "node", "all_nodes", "cel",
                 "raw", "multi", "taints", "consumes", "capacity")

    def __init__(self, driver, pool, name, node, all_nodes, dev):
        self.driver = driver
        self.pool = pool
        self.name = name
        self.node = node
        self.all_nodes = all_nodes
        self.raw = dev
        # allowMultipleAllocations: other claims may hold it at once
        self.multi = bool(dev.get("allowMultipleAllocations"))
        self.cel = cel.Device.from_slice(driver, dev)
        self.taints = []
        self.consumes = dev.get("consumesCounters") or []
        self.capacity = {}
        for n, c in (dev.get("capacity") or {}).items():
            val = _q(c.get("value") if isinstance(c, dict) else c)
            if val is not None:
                self.capacity[n] = (val, (c.get("requestPolicy")
                                          if isinstance(c, dict) else None))

    def key(self):
        """Identity used for 'in use' bookkeeping."""
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified):
        """Value of a fully qualified attribute 'domain/name', or None."""
        dom, _, name = qualified.rpartition("/")
        val = self.cel.attributes.get(dom or self.driver, {}).get(name)
        return val.text if isinstance(val, cel.Semver) else val


def rule_matches(rule, driver, pool, device):
    """ruleMatchesDevice: no selector matches nothing, an empty one
    everything, set fields must all equal."""
    sel = (rule.get("spec") or {}).get("deviceSelector")
    if not isinstance(sel, dict):
        return False
    return ((sel.get("driver") is None or sel["driver"] == driver) and
            (sel.get("pool") is None or sel["pool"] == pool) and
            (sel.get("device") is None or sel["device"] == device))


class Inventory:
    """Every device of the newest generation of each pool, with the
    taints that apply to it (its own and those of DeviceTaintRules) and
    the pools' shared counters, as FEATS allow."""

    def __init__(self, slices, rules=(), feats=None):
        feats = feats or Features.of()
        self.feats = feats
        newest = {}
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            k = (spec.get("driver"), pool.get("name"))
            gen = pool.get("generation", 0)
            newest[k] = max(newest.get(k, gen), gen)
        self.devices = []
        self.counters = {}
        self.by_key = {}
        live_rules = [r for r in rules or ()
                      if not r["metadata"].get("deletionTimestamp")]
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            k = (spec.get("driver"), pool.get("name"))
            if pool.get("generation", 0) != newest[k]:
                continue
            if feats.partitionable:
                for cs in spec.get("sharedCounters") or []:
                    if not isinstance(cs, dict):
                        continue
                    got = self.counters.setdefault(
                        (k[0], k[1], cs.get("name")), {})
                    for cn, c in (cs.get("counters") or {}).items():
                        v = _q((c or {}).get("value"))
                        if v is not None:
                            got[cn] = v.value
            for dev in spec.get("devices") or []:
                try:
                    ref = DeviceRef(k[0], k[1], dev.get("name"),
                                    dev.get("nodeName") or
                                    spec.get("nodeName"),
                                    bool(dev.get("allNodes") or
                                         spec.get("allNodes")), dev)
                except (cel.CelError, ValueError):
                    continue
                if feats.taints:
                    ref.taints = [t for t in dev.get("taints") or []
                                  if isinstance(t, dict)]
                if feats.rules:
                    ref.taints = ref.taints + [
                        (r.get("spec") or {}).get("taint") or {}
                        for r in live_rules
                        if rule_matches(r, k[0], k[1], ref.name)]
                self.devices.append(ref)
                self.by_key[ref.key()] = ref
        self.devices.sort(key=lambda d: (d.node or "", d.driver, d.pool,
                                         d.name))

    def nodes(self):
        """Names of the nodes that have node-local devices."""
        return sorted({d.node for d in self.devices if d.node})

    def on_node(self, node):
        """Devices usable on NODE (node-local ones plus allNodes ones)."""
        return [d for d in self.devices if d.all_nodes or d.node == node]

    def counters_fit(self, dev):
        """True when every counter DEV consumes exists in its pool."""
        for cc in dev.consumes:
            have = self.counters.get((dev.driver, dev.pool,
                                      (cc or {}).get("counterSet")))
            if have is None:
                return False
            for cn in ((cc or {}).get("counters") or {}):
                if cn not in have:
                    return False
        return True


def consumption(dev):
    """{counterSet: {counter: Fraction}} DEV consumes."""
    out = {}
    for cc in dev.consumes:
        got = out.setdefault((cc or {}).get("counterSet"), {})
        for cn, c in ((cc or {}).get("counters") or {}).items():
            v = _q((c or {}).get("value"))
            if v is not None:
                got[cn] = got.get(cn, 0) + v.value
    return out


class Usage:
    """What allocated claims hold: devices held exclusively, the
    capacity consumed on multi-allocatable devices (DRAConsumableCapacity)
    and the shared counters consumed (DRAPartitionableDevices). Results
    with adminAccess hold nothing."""

    def __init__(self, exclusive=()):
        self.exclusive = set(exclusive)
        self.capacity = {}
        self.counters = {}
        self.counted = set()

    def copy(self):
        u = Usage(self.exclusive)
        u.capacity = {k: dict(v) for k, v in self.capacity.items()}
        u.counters = {k: dict(v) for k, v in self.counters.items()}
        u.counted = set(self.counted)
        return u

    def add_results(self, results, inv):
        """Charge allocation RESULTS against INV's devices."""
        feats = inv.feats
        for r in results or []:
            if r.get("adminAccess"):
                continue
            key = (r.get("driver"), r.get("pool"), r.get("device"))
            dev = inv.by_key.get(key)
            shared = r.get("shareID") is not None or \
                r.get("consumedCapacity") is not None
            if shared or (dev is not None and dev.multi and
                          feats.consumable):
                got = self.capacity.setdefault(key, {})
                for n, v in (r.get("consumedCapacity") or {}).items():
                    q = _q(v)
                    if q is not None:
                        got[n] = got.get(n, 0) + q.value
            elif not (dev is not None and dev.multi):
                self.exclusive.add(key)
            if feats.partitionable and dev is not None and \
                    key not in self.counted:
                self.counted.add(key)
                self.charge_counters(dev)

    def charge_counters(self, dev):
        for cs, cns in consumption(dev).items():
            got = self.counters.setdefault((dev.driver, dev.pool, cs), {})
            for cn, v in cns.items():
                got[cn] = got.get(cn, 0) + v

    @classmethod
    def of_claims(cls, claims, inv):
        """The usage of every allocated claim."""
        u = cls()
        for c in claims:
            alloc = (c.get("status") or {}).get("allocation") or {}
            u.add_results((alloc.get("devices") or {}).get("results"), inv)
        return u


def _selectors(sels, what):
    """Compile a selector list; errors name the selector."""
    progs = []
    for i, s in enumerate(sels or []):
        expr = ((s or {}).get("cel") or {}).get("expression")
        try:
            progs.append(cel.compile_expr(expr))
        except cel.CelError as e:
            raise AllocationError("%s: selector #%d: CEL compile error: %s"
                                  % (what, i, e))
    return progs


def _match(progs, dev, what):
    """True when DEV satisfies every selector; errors abort allocation."""
    for i, p in enumerate(progs):
        try:
            if not p.matches(dev.cel):
                return False
        except cel.CelError as e:
            raise AllocationError("%s: selector #%d: CEL runtime error: %s"
                                  % (what, i, e))
    return True


def tolerates(tol, taint):
    """core ToleratesTaint for a DeviceToleration and a DeviceTaint."""
    eff = tol.get("effect") or ""
    if eff and eff != taint.get("effect"):
        return False
    key = tol.get("key") or ""
    if key and key != taint.get("key"):
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (tol.get("value") or "") == (taint.get("value") or "")
    return False


def taints_tolerated(taints, tolerations):
    """Every NoSchedule/NoExecute taint is tolerated by a toleration."""
    for t in taints:
        if t.get("effect") not in BLOCKING:
            continue
        if not any(tolerates(tol, t) for tol in tolerations
                   if isinstance(tol, dict)):
            return False
    return True


def _policy_q(policy, field):
    return _q(policy.get(field)) if isinstance(policy, dict) and \
        policy.get(field) is not None else None


def consumed_capacity(requested, value, policy):
    """calculateConsumedCapacity: what one allocation of a capacity
    consumes (a Quantity), or None when the request violates the
    requestPolicy (the device is not eligible)."""
    default = _policy_q(policy, "default")
    if requested is None:
        got = default if (policy and default is not None) else value
    elif not policy:
        got = requested
    else:
        rng = policy.get("validRange") if isinstance(policy, dict) else None
        vals = policy.get("validValues") if isinstance(policy, dict) \
            else None
        mn = _policy_q(rng, "min") if isinstance(rng, dict) else None
        if isinstance(rng, dict) and mn is not None:
            step = _policy_q(rng, "step")
            if requested.value < mn.value:
                got = mn
            elif step is None or step.value <= 0:
                got = requested
            else:
                # Quantity.Value() arithmetic, rounded up to a step.
                r = -((-requested.value) // 1)
                m, st = -((-mn.value) // 1), -((-step.value) // 1)
                n = -(-(r - m) // st)
                got = qty.Quantity(m + st * n, "BinarySI")
        elif vals:
            got = requested
            for v in vals:
                q = _q(v)
                if q is not None and requested.value <= q.value:
                    got = q
                    break
        else:
            got = requested
    if policy and _violates(got, policy):
        return None
    return got


def _violates(got, policy):
    """violatesPolicy."""
    default = _policy_q(policy, "default")
    if default is not None and default.value == got.value:
        return False
    rng = policy.get("validRange")
    if isinstance(rng, dict):
        mx, mn, step = (_policy_q(rng, "max"), _policy_q(rng, "min"),
                        _policy_q(rng, "step"))
        if mx is not None and got.value > mx.value:
            return True
        if step is not None and mn is not None and step.value > 0:
            r = -((-got.value) // 1)
            if (r - (-((-mn.value) // 1))) % (-((-step.value) // 1)):
                return True
        return False
    vals = policy.get("validValues")
    if vals:
        return not any((_q(v) or qty.Quantity(-1)).value == got.value
                       for v in vals)
    return False


class _Need:
    """One (sub)request to fill: candidates and how many devices."""

    def __init__(self, name, spec, classes, devices, claim_name, inv=None,
                 admin_ok=True):
        self.name = name
        self.spec = spec
        feats = inv.feats if inv is not None else Features.of()
        cname = spec.get("deviceClassName")
        cls = classes.get(cname)
        if cls is None:
            raise AllocationError("request %s: device class %s does not "
                                  "exist" % (name, cname))
        self.cls = cls
        self.admin = bool(spec.get("adminAccess")) and feats.admin and \
            admin_ok
        self.tolerations = [t for t in spec.get("tolerations") or []
                            if isinstance(t, dict)] if feats.taints else []
        caps = ((spec.get("capacity") or {}).get("requests") or {}) \
            if feats.consumable else {}
        self.capacity = {}
        for n, v in caps.items():
            q = _q(v)
            if q is not None:
                self.capacity[n] = q
        cprogs = _selectors((cls.get("spec") or {}).get("selectors"),
                            "class %s" % cname)
        rprogs = _selectors(spec.get("selectors"),
                            "claim %s, request %s" % (claim_name, name))
        self.candidates = [d for d in devices
                           if self._eligible(d, inv) and
                           _match(cprogs, d, "class %s" % cname) and
                           _match(rprogs, d, "claim %s, request %s"
                                  % (claim_name, name))]
        self.mode = spec.get("allocationMode") or "ExactCount"
        if self.mode == "ExactCount":
            self.count = int(spec.get("count") or 1)
        elif self.mode == "All":
            self.count = None
        else:
            raise AllocationError("request %s: unsupported allocationMode "
                                  "%s" % (name, self.mode))

    def _eligible(self, dev, inv):
        """Static checks: taints tolerated, requested capacities present
        (and within a single-allocation device's value), counters
        known."""
        if dev.taints and not taints_tolerated(dev.taints, self.tolerations):
            return False
        if inv is None:
            return True
        feats = inv.feats
        if feats.consumable and self.capacity:
            for n, q in self.capacity.items():
                if n not in dev.capacity:
                    return False
                if not dev.multi and q.value > dev.capacity[n][0].value:
                    return False
        if feats.partitionable and dev.consumes and \
                not inv.counters_fit(dev):
            return False
        return True

    def consumed(self, dev):
        """{capacity: Quantity} one shared allocation of DEV consumes, or
        None when a request violates a requestPolicy."""
        out = {}
        for n, (val, policy) in dev.capacity.items():
            got = consumed_capacity(self.capacity.get(n), val, policy)
            if got is None:
                return None
            out[n] = got
        return out


def _alternatives(req, classes, devices, claim_name, inv=None):
    """The _Need choices of one request (several for firstAvailable)."""
    if req.get("exactly") is not None:
        return [_Need(req["name"], req["exactly"], classes, devices,
                      claim_name, inv)]
    subs = req.get("firstAvailable") or []
    if not subs:
        raise AllocationError("request %s: neither exactly nor "
                              "firstAvailable is set" % req.get("name"))
    # adminAccess exists only on ExactDeviceRequest.
    return [_Need("%s/%s" % (req["name"], s.get("name")), s, classes,
                  devices, claim_name, inv, admin_ok=False) for s in subs]


class _Search:
    """Backtracking assignment of devices to requests under constraints,
    device exclusivity, consumable capacity and shared counters."""

    def __init__(self, needs, constraints, usage, inv):
        self.needs = needs
        self.constraints = constraints
        self.usage = usage
        self.inv = inv
        self.feats = inv.feats
        self.steps = 0

    def _ok(self, picked):
        """Every matchAttribute / distinctAttribute constraint holds."""
        for c in self.constraints:
            attr = c.get("matchAttribute")
            distinct = c.get("distinctAttribute") \
                if self.feats.consumable else None
            if not attr and not distinct:
                continue
            reqs = set(c.get("requests") or [])
            vals = []
            for need, dev, _ in picked:
                if reqs and need.name not in reqs and \
                        need.name.split("/")[0] not in reqs:
                    continue
                v = dev.attribute(attr or distinct)
                if v is None:
                    return False
                vals.append(repr(v))
            if attr and len(set(vals)) > 1:
                return False
            if distinct and len(set(vals)) != len(vals):
                return False
        return True

    def _fits(self, need, dev, picked):
        """Whether NEED may take DEV given the other claims' usage and
        the devices picked so far: the consumption (None: none, a dict
        of capacities for a shared allocation) or False."""
        key = dev.key()
        if any(d.key() == key and n is need for n, d, _ in picked):
            return False
        if need.admin:
            return None
        shared = dev.multi and self.feats.consumable
        if shared:
            use = need.consumed(dev)
            if use is None:
                return False
            held = dict(self.usage.capacity.get(key) or {})
            for _, d, c in picked:
                if d.key() == key and c:
                    for n, q in c.items():
                        held[n] = held.get(n, 0) + q.value
            for n, q in use.items():
                if held.get(n, 0) + q.value > dev.capacity[n][0].value:
                    return False
        elif not dev.multi:
            if key in self.usage.exclusive or any(
                    d.key() == key and not n.admin for n, d, _ in picked):
                return False
            use = None
        else:
            # Legacy sharing (DRAConsumableCapacity off): any number of
            # claims, one result per claim.
            if any(d.key() == key for _, d, _ in picked):
                return False
            use = None
        if self.feats.partitionable and dev.consumes and \
                key not in self.usage.counted and \
                not any(d.key() == key for _, d, _ in picked):
            want = consumption(dev)
            for cs, cns in want.items():
                ck = (dev.driver, dev.pool, cs)
                have = self.inv.counters.get(ck) or {}
                held = dict(self.usage.counters.get(ck) or {})
                seen = set()
                for n, d, _ in picked:
                    if d.key() in seen or n.admin:
                        continue
                    seen.add(d.key())
                    for cs2, cns2 in consumption(d).items():
                        if (d.driver, d.pool, cs2) == ck:
                            for cn, v in cns2.items():
                                held[cn] = held.get(cn, 0) + v
                for cn, v in cns.items():
                    if held.get(cn, 0) + v > have.get(cn, -1):
                        return False
        return use

    def run(self, i=0, picked=None):
        """Return [(need, device, consumption)] or None."""
        picked = picked if picked is not None else []
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise AllocationError("allocation search gave up after %d steps"
                                  % MAX_STEPS)
        if i == len(self.needs):
            return list(picked)
        for need in self.needs[i]:
            if need.count is None:
                got = self._take_all(need, i, picked)
            else:
                got = self._take(need, need.candidates, need.count, 0, i,
                                 picked)
            if got is not None:
                return got
        return None

    def _take_all(self, need, i, picked):
        """allocationMode All: every candidate, then the next request."""
        if not need.candidates or len(need.candidates) > ALL_MODE_LIMIT:
            return None
        add = []
        for d in need.candidates:
            use = self._fits(need, d, picked + add)
            if use is False:
                return None
            add.append((need, d, use))
        if not self._ok(picked + add):
            return None
        return self.run(i + 1, picked + add)

    def _take(self, need, free, left, start, i, picked):
        """Choose LEFT more devices of FREE[start:] for NEED."""
        if left == 0:
            return self.run(i + 1, picked)
        for j in range(start, len(free)):
            d = free[j]
            use = self._fits(need, d, picked)
            if use is False:
                continue
            picked.append((need, d, use))
            if self._ok(picked):
                got = self._take(need, free, left - 1, j + 1, i, picked)
                if got is not None:
                    return got
            picked.pop()
        return None


def _config(claim_spec, classes, picked):
    """status.allocation.devices.config: class configs, then the claim's."""
    out = []
    seen = set()
    for need, _, _ in picked:
        cname = need.cls["metadata"]["name"]
        if cname in seen:
            continue
        seen.add(cname)
        reqs = sorted({n.name for n, _, _ in picked
                       if n.cls["metadata"]["name"] == cname})
        for c in (need.cls.get("spec") or {}).get("config") or []:
            if c.get("opaque"):
                out.append({"source": "FromClass", "requests": reqs,
                            "opaque": c["opaque"]})
    for c in (claim_spec.get("devices") or {}).get("config") or []:
        if c.get("opaque"):
            # As given: no requests means every request of the claim.
            cfg = {"source": "FromClaim", "opaque": c["opaque"]}
            if c.get("requests"):
                cfg["requests"] = list(c["requests"])
            out.append(cfg)
    return out


def _result(need, d, use):
    """One status.allocation.devices.results entry."""
    r = {"request": need.name, "driver": d.driver, "pool": d.pool,
         "device": d.name}
    if need.admin:
        r["adminAccess"] = True
    if need.tolerations:
        r["tolerations"] = [dict(t) for t in need.tolerations]
    if use is not None:
        # GenerateShareID: uuid.NewUUID(), lower-case k8s-uuid form.
        r["shareID"] = str(uuid.uuid4())
        r["consumedCapacity"] = {n: str(q) for n, q in sorted(use.items())}
    return r


def allocate_claim(claim, classes, inventory, in_use, node=None):
    """Allocate CLAIM on NODE (or the first node that fits).

    classes: {name: DeviceClass}; in_use: a Usage (or a set of (driver,
    pool, device) held exclusively). Returns the v1 status.allocation
    dict. Raises AllocationError when the claim cannot be evaluated at
    all and Unsatisfiable when no node has enough free matching devices.
    """
    usage = in_use if isinstance(in_use, Usage) else Usage(in_use)
    spec = claim.get("spec") or {}
    devs = spec.get("devices") or {}
    name = "%s/%s" % (claim["metadata"].get("namespace", ""),
                      claim["metadata"].get("name", ""))
    reqs = devs.get("requests") or []
    if not reqs:
        return {"devices": {"results": []}}
    nodes = [node] if node else inventory.nodes()
    for n in nodes:
        devices = inventory.on_node(n)
        needs = [_alternatives(r, classes, devices, name, inventory)
                 for r in reqs]
        picked = _Search(needs, devs.get("constraints") or [], usage,
                         inventory).run()
        if picked is None:
            continue
        results = [_result(need, d, use) for need, d, use in picked]
        alloc = {"devices": {"results": results}}
        cfg = _config(spec, classes, picked)
        if cfg:
            alloc["devices"]["config"] = cfg
        alloc["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [n]}]}]}
        return alloc
    raise Unsatisfiable("cannot allocate all claims")


def allocated_node(claim):
    """The node an allocated claim is bound to, or None."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    for t in (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for f in t.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return f["values"][0]
    return None


def devices_in_use(claims):
    """Keys of every device held by an allocated claim (results with
    adminAccess hold none)."""
    used = set()
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            if not r.get("adminAccess"):
                used.add((r.get("driver"), r.get("pool"), r.get("device")))
    return used


def pod_claim_names(pod):
    """{podClaimName: claim name or None (not generated yet)}; the
    scheduler's extended-resource claim (status.extendedResourceClaimStatus)
    under the key None."""
    out = {}
    st = pod.get("status") or {}
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in st.get("resourceClaimStatuses") or []}
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        if pc.get("resourceClaimName"):
            out[pc["name"]] = pc["resourceClaimName"]
        else:
            out[pc["name"]] = statuses.get(pc.get("name"))
    ext = (st.get("extendedResourceClaimStatus") or {}).get(
        "resourceClaimName")
    if ext:
        out[None] = ext
    return out


# ------------------------------------------------ DRA extended resources

EXT_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resource_map(classes):
    """{extended resource name: DeviceClass name} as the scheduler's
    extended-resource cache holds it: the implicit
    deviceclass.resource.kubernetes.io/<class> of every class, and each
    explicit extendedResourceName (two classes naming one: the newer
    class wins, on a tie the lexicographically first name)."""
    out = {}
    best = {}
    for name, c in classes.items():
        out[IMPLICIT_PREFIX + name] = name
        ext = (c.get("spec") or {}).get("extendedResourceName")
        if not ext:
            continue
        key = (c["metadata"].get("creationTimestamp") or "", name)
        cur = best.get(ext)
        if cur is None or key[0] > cur[0] or (key[0] == cur[0] and
                                              key[1] < cur[1]):
            best[ext] = key
    for ext, (_, name) in best.items():
        out[ext] = name
    return out


def _effective_requests(c):
    """A container's requests after defaulting (limits fill requests)."""
    res = c.get("resources") or {}
    got = dict(res.get("limits") or {})
    got.update(res.get("requests") or {})
    return got


def extended_requests(pod, ext_map):
    """The device requests and requestMappings of the special claim for
    POD's extended resources that a DeviceClass backs (no device plugin
    exists in the simulator): per container of initContainers +
    containers and resource, request container-<i>-request-<j> (j: the
    resource's index in the container's sorted requests), ExactCount of
    the requested quantity."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + \
        list(spec.get("containers") or [])
    reqs, maps = [], []
    for i, c in enumerate(containers):
        want = _effective_requests(c)
        keys = sorted(want)
        for j, rname in enumerate(keys):
            cls = ext_map.get(rname)
            if cls is None:
                continue
            q = _q(want[rname])
            if q is None or not q.is_integer() or q.value <= 0:
                continue
            name = "container-%d-request-%d" % (i, j)
            reqs.append({"name": name, "exactly": {
                "deviceClassName": cls, "allocationMode": "ExactCount",
                "count": int(q.value)}})
            maps.append({"containerName": c.get("name"),
                         "resourceName": rname, "requestName": name})
    return reqs, maps


# ---------------------------------------------------------------- controller

class Scheduler:
    """The simulator's scheduler: allocates the claims of unscheduled Pods
    (DRA plug-in), then binds every schedulable Pod to a node."""

    def __init__(self, api):
        self.api = api
        self.reported = {}

    def pass_once(self):
        """One reconciliation pass over every Pod and claim."""
        api = self.api
        feats = Features.of(api)
        pods, _ = api.list("pods", copy=False)
        claims, _ = api.list("resourceclaims." + RS, copy=False)
        live = {p["metadata"]["uid"] for p in pods}
        by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c
                   for c in claims}
        slices, _ = api.list("resourceslices." + RS, copy=False)
        classes = {c["metadata"]["name"]: c
                   for c in api.list("deviceclasses." + RS, copy=False)[0]}
        inv = Inventory(slices, taint_rules(api) if feats.rules else (),
                        feats)
        state = {"usage": Usage.of_claims(claims, inv),
                 "ext": extended_resource_map(classes)
                 if feats.extended else {}}
        for uid in list(self.reported):
            if uid not in live:
                del self.reported[uid]
        load = {}
        for p in pods:
            n = (p.get("spec") or {}).get("nodeName")
            if n and not controllers.pod_done(p):
                load[n] = load.get(n, 0) + 1
        todo = [p for p in pods
                if not (p.get("spec") or {}).get("nodeName") and
                not p["metadata"].get("deletionTimestamp") and
                not controllers.pod_done(p)]
        controllers.each(todo, lambda p: self._schedule(
            p, by_name, classes, inv, state, load))

    def _extended_claim(self, pod, by_name, ext_map):
        """The special claim POD needs for its DRA extended resources:
        (existing claim or None, in-memory claim to create or None,
        requestMappings). No extended resource: (None, None, None)."""
        md = pod["metadata"]
        reqs, maps = extended_requests(pod, ext_map)
        if not reqs:
            return None, None, None
        st = (pod.get("status") or {}).get("extendedResourceClaimStatus") \
            or {}
        name = st.get("resourceClaimName")
        if name and (md["namespace"], name) in by_name:
            return by_name[(md["namespace"], name)], None, maps
        for (ns, _), c in sorted(by_name.items()):
            cm = c["metadata"]
            if ns == md["namespace"] and (cm.get("annotations") or {}).get(
                    EXT_ANNOTATION) == "true" and any(
                        r.get("uid") == md["uid"] and r.get("controller")
                        for r in cm.get("ownerReferences") or []):
                return c, None, maps
        claim = {"apiVersion": RS + "/v1", "kind": "ResourceClaim",
                 "metadata": {
                     "generateName": md["name"] + "-extended-resources-",
                     "name": md["name"] + "-extended-resources",
                     "namespace": md["namespace"],
                     "annotations": {EXT_ANNOTATION: "true"},
                     "ownerReferences": [{
                         "apiVersion": "v1", "kind": "Pod",
                         "name": md["name"], "uid": md["uid"],
                         "controller": True, "blockOwnerDeletion": True}]},
                 "spec": {"devices": {"requests": reqs}}}
        return None, claim, maps

    def _schedule(self, pod, by_name, classes, inv, state, load):
        """Allocate and reserve every claim of POD on one node, then bind."""
        md = pod["metadata"]
        ns = md["namespace"]
        claims = []
        for key, cname in pod_claim_names(pod).items():
            if key is None:
                continue  # the extended-resource claim, below
            c = by_name.get((ns, cname)) if cname else None
            # PreEnqueue: a claim that does not exist yet or is being
            # deleted keeps the pod out of the scheduling queue (no event).
            if c is None or c["metadata"].get("deletionTimestamp"):
                return
            claims.append(c)
        ext_have, ext_new, ext_maps = self._extended_claim(
            pod, by_name, state["ext"])
        if ext_have is not None:
            if ext_have["metadata"].get("deletionTimestamp"):
                return
            claims.append(ext_have)
        if not claims and ext_new is None:
            return self._bind_plain(pod, inv, load)
        node = None
        for c in claims:
            n = allocated_node(c)
            if n and node and n != node:
                return self._unschedulable(pod, "claims are allocated on "
                                           "different nodes", None)
            node = node or n
            st = c.get("status") or {}
            if st.get("allocation") and len(st.get("reservedFor") or []) \
                    >= MAX_RESERVED_FOR and not any(
                        r.get("uid") == md["uid"]
                        for r in st.get("reservedFor") or []):
                return self._unschedulable(
                    pod, "0/%d nodes are available: resourceclaim in use."
                    % len(inv.nodes()), None)
        todo = [c for c in claims
                if not (c.get("status") or {}).get("allocation")]
        if ext_new is not None:
            todo.append(ext_new)
        nodes = [node] if node else inv.nodes()
        err = None
        done = None
        for n in nodes:
            used = state["usage"].copy()
            allocs = []
            try:
                for c in todo:
                    a = allocate_claim(c, classes, inv, used, n)
                    used.add_results(a["devices"]["results"], inv)
                    allocs.append(a)
            except Unsatisfiable:
                continue
            except AllocationError as e:
                err = (c if c is not ext_new else None, str(e))
                break
            done = (allocs, used, n)
            break
        if err:
            return self._unschedulable(pod, err[1], err[0])
        if done is None:
            return self._unschedulable(
                pod, "%d/%d nodes are available: %d cannot allocate all "
                "claims." % (0, len(inv.nodes()), len(nodes)), None)
        allocs = {id(c): a for c, a in zip(todo, done[0])}
        if ext_new is not None:
            # PreBind: the special claim is created through the API (quota
            # and admission apply), then bound like any other claim.
            body = controllers.private(ext_new)
            del body["metadata"]["name"]
            try:
                made = self.api.create("resourceclaims." + RS, ns, body,
                                       user=SCHEDULER)
            except ApiError as e:
                return self._unschedulable(
                    pod, "running PreBind plugin \"DynamicResources\": "
                    "create ResourceClaim for extended resources: %s"
                    % e.message, None)
            allocs[id(made)] = allocs.pop(id(ext_new))
            claims.append(made)
        for c in claims:
            c = self._reserve(c, allocs.get(id(c)), md)
            if c is None:
                return
            by_name[(ns, c["metadata"]["name"])] = c
        state["usage"] = done[1]
        if ext_maps is not None:
            ext = [c for c in claims if (c["metadata"].get("annotations")
                                         or {}).get(EXT_ANNOTATION) ==
                   "true" and any(r.get("uid") == md["uid"] for r in
                                  c["metadata"].get("ownerReferences")
                                  or [])]
            if ext:
                pod = self._ext_status(pod, ext[-1]["metadata"]["name"],
                                       ext_maps)
                if pod is None:
                    return
        self._bind(pod, done[2], load)

    def _ext_status(self, pod, name, maps):
        """pod.status.extendedResourceClaimStatus; the Pod, or None."""
        st = (pod.get("status") or {}).get("extendedResourceClaimStatus")
        want = {"requestMappings": maps, "resourceClaimName": name}
        if st == want:
            return pod
        pod = controllers.private(pod)
        pod.setdefault("status", {})["extendedResourceClaimStatus"] = want
        return controllers.write_status(self.api, "pods", pod, SCHEDULER)

    def _reserve(self, claim, alloc, md):
        """bindClaim: the delete-protection finalizer (a normal update)
        before the allocation, then allocation and reservedFor in one
        status update. Returns the claim, or None when it failed."""
        key = "resourceclaims." + RS
        claim = controllers.private(claim)
        cmd = claim["metadata"]
        try:
            if alloc is not None:
                fins = cmd.get("finalizers") or []
                if controllers.CLAIM_FINALIZER not in fins:
                    cmd["finalizers"] = fins + [controllers.CLAIM_FINALIZER]
                    claim = self.api.update(key, cmd["namespace"], claim,
                                            user=SCHEDULER)
                claim.setdefault("status", {})["allocation"] = alloc
            st = claim.setdefault("status", {})
            res = st.setdefault("reservedFor", [])
            if not any(r.get("uid") == md["uid"] for r in res):
                res.append({"resource": "pods", "name": md["name"],
                            "uid": md["uid"]})
            return self.api.update(key, claim["metadata"]["namespace"], claim,
                                   subresource="status", user=SCHEDULER)
        except ApiError:
            return None

    def _bind_plain(self, pod, inv, load):
        """A Pod without claims goes to the least loaded node."""
        nodes = inv.nodes()
        if not nodes:
            return self._unschedulable(
                pod, "no nodes available to schedule pods", None)
        self._bind(pod, min(nodes, key=lambda n: (load.get(n, 0), n)), load)

    def _bind(self, pod, node, load):
        """Bind: spec.nodeName, PodScheduled=True, a Scheduled event."""
        pod = controllers.private(pod)
        md = pod["metadata"]
        pod["spec"]["nodeName"] = node
        try:
            pod = self.api.update("pods", md["namespace"], pod,
                                  user=SCHEDULER)
        except ApiError:
            return
        load[node] = load.get(node, 0) + 1
        self._pod_condition(pod, "True", None, None)
        self.reported.pop(md["uid"], None)
        controllers.emit_event(self.api, pod, "Normal", "Scheduled",
                               "Successfully assigned %s/%s to %s"
                               % (md["namespace"], md["name"], node),
                               "default-scheduler")

    def _unschedulable(self, pod, message, claim):
        """PodScheduled=False plus Warning events (once per message)."""
        uid = pod["metadata"]["uid"]
        if self.reported.get(uid) == message:
            return
        self.reported[uid] = message
        self._pod_condition(pod, "False", "Unschedulable", message)
        controllers.emit_event(self.api, pod, "Warning", "FailedScheduling",
                               message, "default-scheduler")
        if claim is not None:
            controllers.emit_event(self.api, claim, "Warning",
                                   "FailedAllocation", message,
                                   "default-scheduler")

    def _pod_condition(self, pod, status, reason, message):
        """Write the PodScheduled condition."""
        pod = controllers.private(pod)
        st = pod.setdefault("status", {})
        conds = [c for c in st.get("conditions") or []
                 if c.get("type") != "PodScheduled"]
        cond = {"type": "PodScheduled", "status": status,
                "lastProbeTime": None,
                "lastTransitionTime": controllers.now()}
        if reason:
            cond["reason"] = reason
            cond["message"] = message
        conds.append(cond)
        st["conditions"] = conds
        self._write_status("pods", pod)

    def _write_status(self, key, obj):
        """Update the status subresource; False on conflict/gone."""
        return controllers.write_status(self.api, key, obj,
                                        SCHEDULER) is not None


def _scheduled(pod):
    """True when the pod already has PodScheduled=True."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            return True
    return False


WATCHED = ("pods", "resourceclaims." + RS, "resourceslices." + RS,
           "deviceclasses." + RS, "devicetaintrules." + RS)


def taint_rules(api):
    """The stored DeviceTaintRules (none when the kind is not served)."""
    try:
        return api.list("devicetaintrules." + RS, copy=False)[0]
    except ApiError:
        return []


def run(api, stop):
    """Controller thread: reconcile on every relevant change."""
    sched = Scheduler(api)
    controllers.event_loop(api, stop, WATCHED, sched.pass_once)


def register(reg):
    """Plug the scheduler into the simulator."""
    reg.add_controller("dra-scheduler", run)
