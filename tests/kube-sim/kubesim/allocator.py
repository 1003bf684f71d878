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

from . import cel
from . import controllers
from .hooks import ApiError

MAX_RESERVED_FOR = 256
SCHEDULER = "system:kube-scheduler"
ALL_MODE_LIMIT = 32
MAX_STEPS = 200000
RS = "resource.k8s.io"


class AllocationError(Exception):
    """Allocation cannot even be attempted (CEL error, missing class ...)."""


class Unsatisfiable(Exception):
    """No free devices satisfy the claim on any candidate node."""


class DeviceRef:
    """One published device with its CEL view."""

    __slots__ = ("driver", "pool", "name", "node", "all_nodes", "cel",
                 "raw", "multi")

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

    def key(self):
        """Identity used for 'in use' bookkeeping."""
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified):
        """Value of a fully qualified attribute 'domain/name', or None."""
        dom, _, name = qualified.rpartition("/")
        val = self.cel.attributes.get(dom or self.driver, {}).get(name)
        return val.text if isinstance(val, cel.Semver) else val


class Inventory:
    """Every device of the newest generation of each pool."""

    def __init__(self, slices):
        newest = {}
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            k = (spec.get("driver"), pool.get("name"))
            gen = pool.get("generation", 0)
            newest[k] = max(newest.get(k, gen), gen)
        self.devices = []
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            k = (spec.get("driver"), pool.get("name"))
            if pool.get("generation", 0) != newest[k]:
                continue
            for dev in spec.get("devices") or []:
                try:
                    ref = DeviceRef(k[0], k[1], dev.get("name"),
                                    dev.get("nodeName") or
                                    spec.get("nodeName"),
                                    bool(dev.get("allNodes") or
                                         spec.get("allNodes")), dev)
                except (cel.CelError, ValueError):
                    continue
                self.devices.append(ref)
        self.devices.sort(key=lambda d: (d.node or "", d.driver, d.pool,
                                         d.name))

    def nodes(self):
        """Names of the nodes that have node-local devices."""
        return sorted({d.node for d in self.devices if d.node})

    def on_node(self, node):
        """Devices usable on NODE (node-local ones plus allNodes ones)."""
        return [d for d in self.devices if d.all_nodes or d.node == node]


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


class _Need:
    """One (sub)request to fill: candidates and how many devices."""

    def __init__(self, name, spec, classes, devices, claim_name):
        self.name = name
        self.spec = spec
        cname = spec.get("deviceClassName")
        cls = classes.get(cname)
        if cls is None:
            raise AllocationError("request %s: device class %s does not "
                                  "exist" % (name, cname))
        self.cls = cls
        cprogs = _selectors((cls.get("spec") or {}).get("selectors"),
                            "class %s" % cname)
        rprogs = _selectors(spec.get("selectors"),
                            "claim %s, request %s" % (claim_name, name))
        self.candidates = [d for d in devices
                           if _match(cprogs, d, "class %s" % cname) and
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


def _alternatives(req, classes, devices, claim_name):
    """The _Need choices of one request (several for firstAvailable)."""
    if req.get("exactly") is not None:
        return [_Need(req["name"], req["exactly"], classes, devices,
                      claim_name)]
    subs = req.get("firstAvailable") or []
    if not subs:
        raise AllocationError("request %s: neither exactly nor "
                              "firstAvailable is set" % req.get("name"))
    return [_Need("%s/%s" % (req["name"], s.get("name")), s, classes,
                  devices, claim_name) for s in subs]


class _Search:
    """Backtracking assignment of devices to requests under constraints."""

    def __init__(self, needs, constraints, in_use):
        self.needs = needs
        self.constraints = constraints
        self.in_use = in_use
        self.steps = 0

    def _ok(self, picked):
        """Every matchAttribute constraint holds for the picked devices."""
        for c in self.constraints:
            attr = c.get("matchAttribute")
            if not attr:
                continue
            reqs = set(c.get("requests") or [])
            vals = set()
            for need, dev in picked:
                if reqs and need.name.split("/")[0] not in reqs:
                    continue
                v = dev.attribute(attr)
                if v is None:
                    return False
                vals.add(repr(v))
            if len(vals) > 1:
                return False
        return True

    def run(self, i=0, picked=None, used=None):
        """Return [(need, device)] or None."""
        picked = picked if picked is not None else []
        used = used if used is not None else set()
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise AllocationError("allocation search gave up after %d steps"
                                  % MAX_STEPS)
        if i == len(self.needs):
            return list(picked)
        for need in self.needs[i]:
            free = [d for d in need.candidates
                    if (d.key() not in self.in_use or d.multi) and
                    d.key() not in used]
            if need.count is None:
                if (not need.candidates or
                        len(free) != len(need.candidates) or
                        len(free) > ALL_MODE_LIMIT):
                    continue
                got = self._take_all(need, free, i, picked, used)
            else:
                got = self._take(need, free, need.count, 0, i, picked,
                                 used)
            if got is not None:
                return got
        return None

    def _take_all(self, need, free, i, picked, used):
        """allocationMode All: every candidate, then the next request."""
        add = [(need, d) for d in free]
        if not self._ok(picked + add):
            return None
        return self.run(i + 1, picked + add, used | {d.key() for d in free})

    def _take(self, need, free, left, start, i, picked, used):
        """Choose LEFT more devices of FREE[start:] for NEED."""
        if left == 0:
            return self.run(i + 1, picked, used)
        for j in range(start, len(free)):
            d = free[j]
            if d.key() in used:
                continue
            picked.append((need, d))
            if self._ok(picked):
                used.add(d.key())
                got = self._take(need, free, left - 1, j + 1, i, picked,
                                 used)
                if got is not None:
                    return got
                used.discard(d.key())
            picked.pop()
        return None


def _config(claim_spec, classes, picked):
    """status.allocation.devices.config: class configs, then the claim's."""
    out = []
    seen = set()
    for need, _ in picked:
        cname = need.cls["metadata"]["name"]
        if cname in seen:
            continue
        seen.add(cname)
        reqs = sorted({n.name for n, _ in picked
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


def allocate_claim(claim, classes, inventory, in_use, node=None):
    """Allocate CLAIM on NODE (or the first node that fits).

    classes: {name: DeviceClass}; in_use: set of (driver, pool, device)
    already allocated. Returns the v1 status.allocation dict. Raises
    AllocationError when the claim cannot be evaluated at all and
    Unsatisfiable when no node has enough free matching devices.
    """
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
        needs = [_alternatives(r, classes, devices, name) for r in reqs]
        picked = _Search(needs, devs.get("constraints") or [],
                         in_use).run()
        if picked is None:
            continue
        results = [{"request": need.name, "driver": d.driver,
                    "pool": d.pool, "device": d.name}
                   for need, d in picked]
        for (need, _), r in zip(picked, results):
            if need.spec.get("adminAccess"):
                r["adminAccess"] = True
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
    """Keys of every device held by an allocated claim."""
    used = set()
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            used.add((r.get("driver"), r.get("pool"), r.get("device")))
    return used


def pod_claim_names(pod):
    """{podClaimName: claim name or None (not generated yet)}."""
    out = {}
    statuses = {s.get("name"): s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get(
                    "resourceClaimStatuses") or []}
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        if pc.get("resourceClaimName"):
            out[pc["name"]] = pc["resourceClaimName"]
        else:
            out[pc["name"]] = statuses.get(pc.get("name"))
    return out


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
        pods, _ = api.list("pods", copy=False)
        claims, _ = api.list("resourceclaims." + RS, copy=False)
        live = {p["metadata"]["uid"] for p in pods}
        by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c
                   for c in claims}
        slices, _ = api.list("resourceslices." + RS, copy=False)
        classes = {c["metadata"]["name"]: c
                   for c in api.list("deviceclasses." + RS, copy=False)[0]}
        inv = Inventory(slices)
        in_use = devices_in_use(claims)
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
            p, by_name, classes, inv, in_use, load))

    def _schedule(self, pod, by_name, classes, inv, in_use, load):
        """Allocate and reserve every claim of POD on one node, then bind."""
        md = pod["metadata"]
        ns = md["namespace"]
        claims = []
        for cname in pod_claim_names(pod).values():
            c = by_name.get((ns, cname)) if cname else None
            # PreEnqueue: a claim that does not exist yet or is being
            # deleted keeps the pod out of the scheduling queue (no event).
            if c is None or c["metadata"].get("deletionTimestamp"):
                return
            claims.append(c)
        if not claims:
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
        nodes = [node] if node else inv.nodes()
        err = None
        done = None
        for n in nodes:
            used = set(in_use)
            allocs = []
            try:
                for c in todo:
                    a = allocate_claim(c, classes, inv, used, n)
                    used |= devices_in_use([{"status": {"allocation": a}}])
                    allocs.append(a)
            except Unsatisfiable:
                continue
            except AllocationError as e:
                err = (c, str(e))
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
        for c in claims:
            c = self._reserve(c, allocs.get(id(c)), md)
            if c is None:
                return
            by_name[(ns, c["metadata"]["name"])] = c
        in_use |= done[1]
        self._bind(pod, done[2], load)

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
           "deviceclasses." + RS)


def run(api, stop):
    """Controller thread: reconcile on every relevant change."""
    sched = Scheduler(api)
    controllers.event_loop(api, stop, WATCHED, sched.pass_once)


def register(reg):
    """Plug the scheduler into the simulator."""
    reg.add_controller("dra-scheduler", run)
