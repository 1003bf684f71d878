# SPDX-License-Identifier: Apache-2.0
"""A kubelet stand-in for every node of the ResourceSlice fixtures.

A Pod bound to a node (spec.nodeName, set by the scheduler in allocator.py)
is acknowledged (status.startTime, hostIP, conditions), its claims are
prepared (the NVIDIA driver's NodePrepareResources step, nvidia.py) and its
containers start (phase Running, containerStatuses[].state.running.
startedAt).  A failed prepare keeps the Pod Pending with its containers
waiting in ContainerCreating and a Warning FailedPrepareDynamicResources
Event, retried every PREPARE_RETRY seconds as the kubelet's pod worker
does.

Containers end
  - after the run time declared in the annotation sim.kpgpud.io/run-seconds
    (seconds, a decimal number), with the exit code of sim.kpgpud.io/
    exit-code (default 0); the Pod's restartPolicy then applies as on a
    node: Never ends the Pod (Succeeded on 0, else Failed), OnFailure ends
    it on 0 and restarts otherwise, Always restarts (the first restart at
    once, later ones after a CrashLoopBackOff of 10 s doubling to 300 s);
  - or through POST /sim/kubelet/finish {"namespace","name","exitCode"}
    (simctl DIR finish NS POD [--failed]): every container terminates with
    that code and the Pod ends (Succeeded on 0, else Failed), as when the
    kubelet terminates a Pod, whatever its restartPolicy.

Every timestamp is the wall clock at the moment of the write, so the
ground truth of alloclog.py, the claims and the Pods agree.
Options: --set nvidia-gates=TimeSlicingSettings,MPSSupport (NVIDIA driver
feature gates, all off by default as the chart ships them).
"""

import hashlib
import os
import threading
import time

from . import allocator
from . import controllers
from . import nvidia
from .hooks import ApiError, err_bad_request, err_not_found

RS = "resource.k8s.io"
RUN_SECONDS = "sim.kpgpud.io/run-seconds"
EXIT_CODE = "sim.kpgpud.io/exit-code"
PREPARE_RETRY = 10.0
BACKOFF_FIRST = 10.0
BACKOFF_MAX = 300.0
MAX_RUN_SECONDS = 10 ** 7
KUBELET = "system:node:%s"


def _cid():
    """A containerd container ID."""
    return "containerd://" + os.urandom(32).hex()


def _image_id(image):
    """A stable image digest for an image reference."""
    ref = image if "/" in image else "docker.io/library/" + image
    ref = ref.split(":")[0] if "@" not in ref else ref.split("@")[0]
    return "%s@sha256:%s" % (ref, hashlib.sha256(image.encode()).hexdigest())


def _ann(pod, key):
    """An annotation of POD or None."""
    return (pod["metadata"].get("annotations") or {}).get(key)


def run_seconds(pod):
    """The declared run time (float) or None; bad values are ignored with
    a Warning event by the caller (returns 'bad')."""
    v = _ann(pod, RUN_SECONDS)
    if v is None:
        return None
    try:
        f = float(v)
    except ValueError:
        return "bad"
    if not (0 <= f <= MAX_RUN_SECONDS):
        return "bad"
    return f


def exit_code(pod):
    """The declared exit code (0-255), default 0; 'bad' if invalid."""
    v = _ann(pod, EXIT_CODE)
    if v is None:
        return 0
    try:
        n = int(v)
    except ValueError:
        return "bad"
    return n if 0 <= n <= 255 else "bad"


def _cond(ctype, status, t, reason=None, message=None, old=None):
    """A pod condition; keeps lastTransitionTime when nothing changed."""
    c = {"type": ctype, "status": status, "lastProbeTime": None,
         "lastTransitionTime": controllers.now(t)}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    if old and old.get("status") == status and old.get("reason") == reason:
        c["lastTransitionTime"] = old.get("lastTransitionTime",
                                          c["lastTransitionTime"])
    return c


class Kubelet:
    """Every node's kubelet (one thread, one lock)."""

    def __init__(self, api, gates):
        self.api = api
        self.gates = gates
        self.lock = threading.Lock()
        self.due = {}         # pod uid -> monotonic time of its next step
        self.warned = {}      # pod uid -> monotonic time of the last event
        self.ips = {}         # pod uid -> pod IP
        self.armed = {}       # pod uid -> True once its run time was read

    # ------------------------------------------------------------ passes

    def pass_once(self):
        """Sync every bound Pod that has not ended."""
        with self.lock:
            pods, _ = self.api.list("pods", copy=False)
            slices, _ = self.api.list("resourceslices." + RS, copy=False)
            nodes = allocator.Inventory(slices).nodes()
            types = {}
            for s in slices:
                spec = s.get("spec") or {}
                pool = (spec.get("pool") or {}).get("name")
                for d in spec.get("devices") or []:
                    a = ((d.get("attributes") or {}).get("type") or {})
                    types[(pool, d.get("name"))] = a.get("string", "")
            live = set()
            for p in pods:
                node = (p.get("spec") or {}).get("nodeName")
                if not node or node not in nodes or controllers.pod_done(p):
                    continue  # unbound, ended, or on a node with no kubelet
                live.add(p["metadata"]["uid"])
                try:
                    self.sync(p, nodes, types)
                except ApiError:
                    self.due[p["metadata"]["uid"]] = time.monotonic() + 0.05
                except controllers.BAD_OBJECT:
                    continue
            for d in (self.due, self.warned, self.ips, self.armed):
                for uid in list(d):
                    if uid not in live:
                        del d[uid]

    def next_deadline(self):
        """Seconds until the earliest timer, or None."""
        with self.lock:
            if not self.due:
                return None
            return max(0.0, min(self.due.values()) - time.monotonic())

    # -------------------------------------------------------------- sync

    def sync(self, pod, nodes, types):
        """One step of one Pod."""
        md = pod["metadata"]
        uid = md["uid"]
        st = pod.get("status") or {}
        if st.get("phase") == "Running":
            return self._running(pod)
        d = self.due.get(uid)
        if d is not None and d > time.monotonic():
            return
        self.due.pop(uid, None)
        node = pod["spec"]["nodeName"]
        err = self._prepare(pod, types)
        t = time.time()
        if err is None:
            return self._start(controllers.private(pod), node, nodes, t)
        if err == "":
            return  # a claim is not reserved yet: the next change retries
        pod = controllers.private(pod)
        self._acknowledge(pod, node, nodes, t)
        last = self.warned.get(uid)
        if last is None or time.monotonic() - last >= PREPARE_RETRY:
            self.warned[uid] = time.monotonic()
            controllers.emit_event(
                self.api, pod, "Warning", "FailedPrepareDynamicResources",
                "Failed to prepare dynamic resources: prepare dynamic "
                "resources: " + err, "kubelet")
        self.due[uid] = time.monotonic() + PREPARE_RETRY

    def _prepare(self, pod, types):
        """None when every claim prepared, '' when one is not ready for
        this Pod, else the kubelet's error text."""
        md = pod["metadata"]
        for cname in allocator.pod_claim_names(pod).values():
            if not cname:
                return ""
            try:
                c = self.api.get("resourceclaims." + RS, md["namespace"],
                                 cname)
            except ApiError:
                return ""
            st = c.get("status") or {}
            if not st.get("allocation") or not any(
                    r.get("uid") == md["uid"]
                    for r in st.get("reservedFor") or []):
                return ""
            try:
                nvidia.prepare_claim(c, types, self.gates)
            except nvidia.PrepareError as e:
                return "NodePrepareResources failed for ResourceClaim %s: " \
                    "%s" % (cname, e)
        return None

    def _addresses(self, pod, node, nodes, st):
        """hostIP/hostIPs (and the pod IP once running)."""
        idx = nodes.index(node) if node in nodes else len(nodes)
        host = "10.0.0.%d" % (10 + idx % 240)
        st["hostIP"] = host
        st["hostIPs"] = [{"ip": host}]
        return idx

    def _container_base(self, c):
        """The fields every container status has."""
        image = c.get("image") or ""
        return {"name": c.get("name"), "image": image,
                "imageID": "", "ready": False, "restartCount": 0,
                "started": False, "lastState": {}}

    def _acknowledge(self, pod, node, nodes, t):
        """Pending: startTime, conditions, containers ContainerCreating."""
        st = pod.setdefault("status", {})
        old = {c.get("type"): c for c in st.get("conditions") or []}
        self._addresses(pod, node, nodes, st)
        st.setdefault("startTime", controllers.now(t))
        names = [c.get("name") for c in pod["spec"].get("containers") or []]
        st["conditions"] = [
            _cond("PodReadyToStartContainers", "False", t,
                  old=old.get("PodReadyToStartContainers")),
            _cond("Initialized", "True", t, old=old.get("Initialized")),
            _cond("Ready", "False", t, "ContainersNotReady",
                  "containers with unready status: [%s]" % " ".join(names),
                  old=old.get("Ready")),
            _cond("ContainersReady", "False", t, "ContainersNotReady",
                  "containers with unready status: [%s]" % " ".join(names),
                  old=old.get("ContainersReady")),
        ] + [c for c in st.get("conditions") or []
             if c.get("type") == "PodScheduled"]
        cs = []
        for c in pod["spec"].get("containers") or []:
            s = self._container_base(c)
            s["state"] = {"waiting": {"reason": "ContainerCreating"}}
            cs.append(s)
        st["containerStatuses"] = cs
        self._write(pod)

    def _start(self, pod, node, nodes, t):
        """Running: every container started at T."""
        md = pod["metadata"]
        st = pod.setdefault("status", {})
        old = {c.get("type"): c for c in st.get("conditions") or []}
        idx = self._addresses(pod, node, nodes, st)
        ip = self.ips.get(md["uid"])
        if ip is None:
            n = int.from_bytes(os.urandom(2), "big") % 250 + 2
            ip = self.ips[md["uid"]] = "10.244.%d.%d" % (idx % 250, n)
        st["podIP"] = ip
        st["podIPs"] = [{"ip": ip}]
        st.setdefault("startTime", controllers.now(t))
        st["phase"] = "Running"
        st["conditions"] = [
            _cond("PodReadyToStartContainers", "True", t,
                  old=old.get("PodReadyToStartContainers")),
            _cond("Initialized", "True", t, old=old.get("Initialized")),
            _cond("Ready", "True", t, old=old.get("Ready")),
            _cond("ContainersReady", "True", t,
                  old=old.get("ContainersReady")),
        ] + [c for c in st.get("conditions") or []
             if c.get("type") == "PodScheduled"]
        ics = []
        for c in pod["spec"].get("initContainers") or []:
            s = self._container_base(c)
            s.update(imageID=_image_id(s["image"]), containerID=_cid())
            s["state"] = {"terminated": {
                "exitCode": 0, "reason": "Completed",
                "startedAt": controllers.now(t),
                "finishedAt": controllers.now(t), "containerID":
                s["containerID"]}}
            ics.append(s)
        if ics:
            st["initContainerStatuses"] = ics
        cs = []
        for c in pod["spec"].get("containers") or []:
            s = self._container_base(c)
            s.update(imageID=_image_id(s["image"]), containerID=_cid(),
                     ready=True, started=True)
            s["state"] = {"running": {"startedAt": controllers.now(t)}}
            cs.append(s)
        st["containerStatuses"] = cs
        pod = self._write(pod)
        self._arm(pod, t)

    def _arm(self, pod, started):
        """Timer for the declared run time (from STARTED, a time.time())."""
        rs = run_seconds(pod)
        uid = pod["metadata"]["uid"]
        self.armed[uid] = True
        if rs == "bad" or exit_code(pod) == "bad":
            # Not a kubelet behaviour: the annotations are the simulator's.
            controllers.emit_event(
                self.api, pod, "Warning", "InvalidSimAnnotation",
                "annotations %s / %s must be seconds in [0, %d] and an exit "
                "code in [0, 255]; the pod runs until it is deleted or "
                "finished" % (RUN_SECONDS, EXIT_CODE, MAX_RUN_SECONDS),
                "kube-sim")
            return
        if rs is not None:
            self.due[uid] = time.monotonic() + max(
                0.0, started + rs - time.time())

    def _running(self, pod):
        """A running Pod whose run time or back-off may have expired."""
        uid = pod["metadata"]["uid"]
        d = self.due.get(uid)
        if d is None:
            if uid not in self.armed and not any(
                    "waiting" in (s.get("state") or {}) for s in
                    (pod.get("status") or {}).get("containerStatuses")
                    or []):
                # After a restart of the kubelet thread: re-arm.
                started = self._started_at(pod)
                if started is not None:
                    self._arm(pod, started)
            return
        if d > time.monotonic():
            return
        del self.due[uid]
        pod = controllers.private(pod)
        cs = pod["status"].get("containerStatuses") or []
        if any("waiting" in (s.get("state") or {}) for s in cs):
            return self._restart(pod, time.time())
        code = exit_code(pod)
        policy = pod["spec"].get("restartPolicy") or "Always"
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            return self._end(pod, code, time.time())
        self._exit_and_restart(pod, code, time.time())

    def _started_at(self, pod):
        """time.time() of the containers' start, from the status."""
        import calendar
        for s in (pod.get("status") or {}).get("containerStatuses") or []:
            r = (s.get("state") or {}).get("running")
            if r and r.get("startedAt"):
                return calendar.timegm(time.strptime(
                    r["startedAt"], "%Y-%m-%dT%H:%M:%SZ"))
        return None

    def _terminated(self, s, code, t):
        """state.terminated for container status S at T."""
        run = (s.get("state") or {}).get("running") or {}
        term = {"exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": run.get("startedAt") or controllers.now(t),
                "finishedAt": controllers.now(t)}
        if s.get("containerID"):
            term["containerID"] = s["containerID"]
        return {"terminated": term}

    def _exit_and_restart(self, pod, code, t):
        """Containers exited; restartPolicy says restart them."""
        st = pod["status"]
        uid = pod["metadata"]["uid"]
        first = all(int(s.get("restartCount") or 0) == 0
                    for s in st.get("containerStatuses") or [])
        for s in st.get("containerStatuses") or []:
            s["lastState"] = self._terminated(s, code, t)
            s["ready"] = False
            s["started"] = False
            if first:
                continue
            n = int(s.get("restartCount") or 0)
            delay = min(BACKOFF_FIRST * 2 ** (n - 1), BACKOFF_MAX)
            s["state"] = {"waiting": {
                "reason": "CrashLoopBackOff",
                "message": "back-off %ds restarting failed container=%s "
                           "pod=%s_%s(%s)" % (delay, s.get("name"),
                                              pod["metadata"]["name"],
                                              pod["metadata"]["namespace"],
                                              uid)}}
            self.due[uid] = time.monotonic() + delay
        if first:
            return self._restart(pod, t)
        old = {c.get("type"): c for c in st.get("conditions") or []}
        names = [s.get("name") for s in st.get("containerStatuses") or []]
        msg = "containers with unready status: [%s]" % " ".join(names)
        st["conditions"] = [
            c if c.get("type") not in ("Ready", "ContainersReady") else
            _cond(c["type"], "False", t, "ContainersNotReady", msg,
                  old=old.get(c["type"]))
            for c in st.get("conditions") or []]
        self._write(pod)

    def _restart(self, pod, t):
        """Start the containers again (restartCount + 1)."""
        st = pod["status"]
        for s in st.get("containerStatuses") or []:
            s["restartCount"] = int(s.get("restartCount") or 0) + 1
            s["containerID"] = _cid()
            s["state"] = {"running": {"startedAt": controllers.now(t)}}
            s["ready"] = True
            s["started"] = True
        old = {c.get("type"): c for c in st.get("conditions") or []}
        st["conditions"] = [
            c if c.get("type") not in ("Ready", "ContainersReady") else
            _cond(c["type"], "True", t, old=old.get(c["type"]))
            for c in st.get("conditions") or []]
        pod = self._write(pod)
        self._arm(pod, t)

    def _end(self, pod, code, t):
        """Every container terminated with CODE: Succeeded or Failed."""
        st = pod["status"]
        for s in st.get("containerStatuses") or []:
            if "running" in (s.get("state") or {}) or \
                    "waiting" in (s.get("state") or {}):
                s["state"] = self._terminated(s, code, t)
            s["ready"] = False
            s["started"] = False
        st["phase"] = "Succeeded" if code == 0 else "Failed"
        old = {c.get("type"): c for c in st.get("conditions") or []}
        new = []
        for c in st.get("conditions") or []:
            if c.get("type") in ("Ready", "ContainersReady"):
                c = _cond(c["type"], "False", t, "PodCompleted",
                          old=old.get(c["type"]))
            elif c.get("type") == "PodReadyToStartContainers":
                c = _cond(c["type"], "False", t, old=old.get(c["type"]))
            new.append(c)
        st["conditions"] = new
        self.due.pop(pod["metadata"]["uid"], None)
        self._write(pod)

    def _write(self, pod):
        """Status update as the node's kubelet."""
        md = pod["metadata"]
        return self.api.update("pods", md["namespace"], pod,
                               subresource="status",
                               user=KUBELET % pod["spec"].get("nodeName"))

    # -------------------------------------------------------- /sim/ API

    def finish(self, body):
        """POST /sim/kubelet/finish: end a running Pod now."""
        if not isinstance(body, dict) or not isinstance(
                body.get("namespace"), str) or not isinstance(
                    body.get("name"), str):
            raise err_bad_request('expected {"namespace": NS, "name": POD, '
                                  '"exitCode": N}')
        code = body.get("exitCode", 0)
        if not isinstance(code, int) or isinstance(code, bool) or \
                not 0 <= code <= 255:
            raise err_bad_request("exitCode must be an integer in [0, 255]")
        with self.lock:
            for _ in range(20):
                try:
                    pod = self.api.get("pods", body["namespace"],
                                       body["name"])
                except ApiError:
                    raise err_not_found("pods", body["name"])
                if (pod.get("status") or {}).get("phase") != "Running":
                    raise ApiError(409, "Conflict", 'pod "%s" is not '
                                   'running (phase %s)' % (
                                       body["name"], (pod.get("status") or
                                                      {}).get("phase")))
                try:
                    self._end(pod, code, time.time())
                except ApiError as e:
                    if e.code == 409:
                        continue
                    raise
                return 200, self.api.get("pods", body["namespace"],
                                         body["name"])
        raise ApiError(409, "Conflict", "pod kept changing")


def register(reg):
    """Plug the kubelet stand-in into the simulator."""
    gates = nvidia.parse_gates(reg.options.get("nvidia-gates", ""))
    box = {}

    def run(api, stop):
        kl = Kubelet(api, gates)
        box["kubelet"] = kl
        controllers.event_loop(
            api, stop, ("pods", "resourceclaims." + RS,
                        "resourceslices." + RS),
            kl.pass_once, due=kl.next_deadline)

    def finish(body):
        kl = box.get("kubelet")
        if kl is None:
            raise ApiError(503, "ServiceUnavailable", "kubelet not started")
        return kl.finish(body)

    reg.add_controller("kubelet", run)
    reg.add_sim_endpoint("POST", "/sim/kubelet/finish", finish)
