# SPDX-License-Identifier: Apache-2.0
"""Server-side printing: the meta.k8s.io/v1 Table kubectl get asks for."""

import calendar
import time

_NAME = {"name": "Name", "type": "string", "format": "name",
         "description": "Name must be unique within a namespace. More info: "
         "https://kubernetes.io/docs/concepts/overview/working-with-objects/"
         "names#names", "priority": 0}
_AGE = {"name": "Age", "type": "string", "format": "", "description":
        "CreationTimestamp is a timestamp representing the server time when "
        "this object was created.", "priority": 0}


def _col(name, desc="", priority=0, typ="string"):
    """One column definition."""
    return {"name": name, "type": typ, "format": "", "description": desc,
            "priority": priority}


# kubectl's HumanDuration, a row a range: (below this many seconds, the
# unit's seconds and letter, the finer unit shown with it when not zero).
_DURATIONS = (
    (120, 1, "s", None),
    (600, 60, "m", (1, "s")),
    (180 * 60, 60, "m", None),
    (8 * 3600, 3600, "h", (60, "m")),
    (48 * 3600, 3600, "h", None),
    (8 * 86400, 86400, "d", (3600, "h")),
    (2 * 365 * 86400, 86400, "d", None),
    (None, 365 * 86400, "y", None),
)


def human_duration(secs):
    """kubectl's HumanDuration (apimachinery/pkg/util/duration)."""
    secs = max(0, int(secs))
    for below, unit, letter, finer in _DURATIONS:
        if below is None or secs < below:
            break
    s = "%d%s" % (secs // unit, letter)
    if finer and secs % unit // finer[0]:
        s += "%d%s" % (secs % unit // finer[0], finer[1])
    return s


def age(obj):
    """Age column text of an object."""
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    try:
        t = calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "<unknown>"
    return human_duration(time.time() - t)


def _pod_cells(o):
    """READY, STATUS, RESTARTS of a pod."""
    spec, st = o.get("spec") or {}, o.get("status") or {}
    total = len(spec.get("containers") or [])
    cs = st.get("containerStatuses") or []
    ready = len([c for c in cs if c.get("ready")])
    restarts = sum(c.get("restartCount", 0) for c in cs)
    phase = st.get("reason") or st.get("phase") or "Pending"
    running = False
    for c in reversed(cs):  # printPod: the last reason found wins
        state = c.get("state") or {}
        w, t = state.get("waiting") or {}, state.get("terminated")
        if w.get("reason"):
            phase = w["reason"]
        elif t is not None:
            phase = t.get("reason") or "ExitCode:%d" % t.get("exitCode", 0)
        elif c.get("ready") and "running" in state:
            running = True
    if phase == "Completed" and running:
        phase = "Running"
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    return ["%d/%d" % (ready, total), phase, restarts]


def _claim_state(o):
    """STATE column of a ResourceClaim."""
    st = o.get("status") or {}
    parts = []
    if st.get("allocation"):
        parts.append("allocated")
    if st.get("reservedFor"):
        parts.append("reserved")
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        parts.append("deleted")
    return ",".join(parts) or "pending"


def _jsonpath(obj, path):
    """Evaluate a simple printer-column jsonPath such as .spec.a.b."""
    cur = obj
    for p in path.strip().lstrip(".").split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    return cur if isinstance(cur, (int, float)) else str(cur)


DEFAULT = ([_NAME, _AGE], lambda o: [o["metadata"]["name"], age(o)])


def columns(res, version):
    """(column definitions, row function) for a resource of VERSION: its
    kind's columns (Kind.columns, kinds.py), else a CRD's
    additionalPrinterColumns of the version, else NAME and AGE."""
    desc = res.desc
    if desc.columns is not None:
        return desc.columns
    extra = (desc.printer_columns or {}).get(version)
    if extra:
        return _printer_columns(extra)
    return DEFAULT


def _name(o):
    """The NAME cell."""
    return o["metadata"]["name"]


def _spec_get(o, field):
    """spec.FIELD of an object, or ""."""
    return (o.get("spec") or {}).get(field, "")


def _event_row(o):
    """Cells of an Event."""
    inv = o.get("involvedObject") or {}
    return [age(o), o.get("type", ""), o.get("reason", ""),
            "%s/%s" % (inv.get("kind", "").lower(), inv.get("name", "")),
            o.get("message", "")]


# Each kind's (column definitions, row function); kinds.py names them.
NAMESPACE = ([_NAME, _col("Status"), _AGE],
             lambda o: [_name(o), (o.get("status") or {}).get("phase", ""),
                        age(o)])
POD = ([_NAME, _col("Ready"), _col("Status"), _col("Restarts", typ="string"),
        _AGE, _col("IP", priority=1), _col("Node", priority=1)],
       lambda o: [_name(o)] + _pod_cells(o) + [
           age(o), (o.get("status") or {}).get("podIP", "<none>"),
           (o.get("spec") or {}).get("nodeName", "<none>")])
RESOURCE_CLAIM = ([_NAME, _col("State"), _AGE],
                  lambda o: [_name(o), _claim_state(o), age(o)])
RESOURCE_SLICE = ([_NAME, _col("Node"), _col("Driver"), _col("Pool"), _AGE],
                  lambda o: [_name(o), _spec_get(o, "nodeName"),
                             _spec_get(o, "driver"),
                             ((o.get("spec") or {}).get("pool") or {}).get(
                                 "name", ""), age(o)])
LEASE = ([_NAME, _col("Holder"), _AGE],
         lambda o: [_name(o), _spec_get(o, "holderIdentity"), age(o)])
EVENT = ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
          _col("Message")], _event_row)
MUTATING_WEBHOOK_CONFIGURATION = (
    [_NAME, _col("Webhooks", typ="integer"), _AGE],
    lambda o: [_name(o), len(o.get("webhooks") or []), age(o)])
VALIDATING_ADMISSION_POLICY = (
    [_NAME, _col("Validations", typ="integer"), _col("ParamKind"), _AGE],
    lambda o: [_name(o), len((o.get("spec") or {}).get("validations") or []),
               _param_kind(o), age(o)])
VALIDATING_ADMISSION_POLICY_BINDING = (
    [_NAME, _col("PolicyName"), _col("ParamRef"), _AGE],
    lambda o: [_name(o), _spec_get(o, "policyName"), _param_ref(o), age(o)])
MUTATING_ADMISSION_POLICY = (
    [_NAME, _col("Mutations", typ="integer"), _col("ParamKind"), _AGE],
    lambda o: [_name(o), len((o.get("spec") or {}).get("mutations") or []),
               _param_kind(o), age(o)])
MUTATING_ADMISSION_POLICY_BINDING = VALIDATING_ADMISSION_POLICY_BINDING


def _spec(o):
    """The spec of an object (a dict)."""
    return o.get("spec") if isinstance(o.get("spec"), dict) else {}


def _svc_ports(spec):
    """PORT(S) of a Service: 443/TCP,30080:80/TCP style."""
    out = []
    for p in spec.get("ports") or []:
        proto = p.get("protocol") or "TCP"
        if p.get("nodePort"):
            out.append("%s:%s/%s" % (p.get("port"), p["nodePort"], proto))
        else:
            out.append("%s/%s" % (p.get("port"), proto))
    return ",".join(out) or "<none>"


def _labels_text(m):
    """labels.FormatLabels: a=b,c=d or <none>."""
    return ",".join("%s=%s" % (k, m[k]) for k in sorted(m or {})) or \
        "<none>"


def _service_row(o):
    """Cells of a Service."""
    spec = _spec(o)
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if
                                     spec.get("clusterIP") else [])
    ext = ",".join(spec.get("externalIPs") or []) or (
        spec.get("externalName") or "<none>")
    return [o["metadata"]["name"], spec.get("type", "ClusterIP"),
            ips[0] if ips else "<none>", ext, _svc_ports(spec), age(o),
            _labels_text(spec.get("selector"))]


def _deploy_row(o):
    """Cells of a Deployment."""
    spec, st = _spec(o), o.get("status") or {}
    tmpl = ((spec.get("template") or {}).get("spec") or {}).get(
        "containers") or []
    sel = spec.get("selector") or {}
    return [o["metadata"]["name"], "%d/%d" % (st.get("readyReplicas", 0),
                                              spec.get("replicas", 0)),
            st.get("updatedReplicas", 0), st.get("availableReplicas", 0),
            age(o), ",".join(c.get("name", "") for c in tmpl),
            ",".join(c.get("image", "") for c in tmpl),
            _labels_text(sel.get("matchLabels"))]


def _binding_row(o):
    """Cells of a RoleBinding or ClusterRoleBinding."""
    ref = o.get("roleRef") or {}
    subs = o.get("subjects") or []

    def of(kind):
        return ",".join((s.get("namespace", "") + ":" if kind ==
                         "ServiceAccount" else "") + s.get("name", "")
                        for s in subs if s.get("kind") == kind)
    return [o["metadata"]["name"], "%s/%s" % (ref.get("kind", ""),
                                              ref.get("name", "")),
            age(o), of("User"), of("Group"), of("ServiceAccount")]


def _pdb_row(o):
    """Cells of a PodDisruptionBudget."""
    spec, st = _spec(o), o.get("status") or {}
    return [o["metadata"]["name"], str(spec.get("minAvailable", "N/A")),
            str(spec.get("maxUnavailable", "N/A")),
            st.get("disruptionsAllowed", 0), age(o)]


def _count(o, *fields):
    """Number of keys in the given map fields of an object."""
    return sum(len(o.get(f) or {}) for f in fields)


_CREATED = _col("Created At", typ="date")
_INT = "integer"
# Kinds whose only column is their creation time.
CREATED = ([_NAME, _CREATED],
           lambda o: [_name(o), o["metadata"].get("creationTimestamp", "")])
CUSTOM_RESOURCE_DEFINITION = ROLE = CLUSTER_ROLE = CREATED
CONFIG_MAP = ([_NAME, _col("Data", typ=_INT), _AGE],
              lambda o: [_name(o), _count(o, "data", "binaryData"), age(o)])
SECRET = ([_NAME, _col("Type"), _col("Data", typ=_INT), _AGE],
          lambda o: [_name(o), o.get("type", ""), _count(o, "data"), age(o)])
SERVICE_ACCOUNT = ([_NAME, _col("Secrets", typ=_INT), _AGE],
                   lambda o: [_name(o), len(o.get("secrets") or []), age(o)])
SERVICE = ([_NAME, _col("Type"), _col("Cluster-IP"), _col("External-IP"),
            _col("Port(s)"), _AGE, _col("Selector", priority=1)],
           _service_row)
DEPLOYMENT = ([_NAME, _col("Ready"), _col("Up-to-date", typ=_INT),
               _col("Available", typ=_INT), _AGE,
               _col("Containers", priority=1), _col("Images", priority=1),
               _col("Selector", priority=1)], _deploy_row)
POD_DISRUPTION_BUDGET = ([_NAME, _col("Min Available"),
                          _col("Max Unavailable"),
                          _col("Allowed Disruptions", typ=_INT), _AGE],
                         _pdb_row)
ROLE_BINDING = CLUSTER_ROLE_BINDING = (
    [_NAME, _col("Role"), _AGE, _col("Users", priority=1),
     _col("Groups", priority=1), _col("ServiceAccounts", priority=1)],
    _binding_row)


def _printer_columns(extra):
    """Columns of a CRD version's additionalPrinterColumns."""
    cols = [_NAME] + [_col(c.get("name", ""), c.get("description", ""),
                           c.get("priority", 0), c.get("type", "string"))
                      for c in extra]

    def row(o):
        """Cells of one custom resource."""
        cells = [o["metadata"]["name"]]
        for c in extra:
            if c.get("jsonPath") == ".metadata.creationTimestamp":
                cells.append(age(o))
            else:
                cells.append(_jsonpath(o, c.get("jsonPath", "")))
        return cells
    return cols, row


def table(res, version, objs, rv, cont=None, remaining=None,
          include="Metadata"):
    """A Table for objects (dicts) of one resource."""
    cols, row = columns(res, version)
    rows = []
    for o in objs:
        r = {"cells": row(o)}
        if include == "Object":
            r["object"] = o
        elif include != "None":
            r["object"] = {"kind": "PartialObjectMetadata",
                           "apiVersion": "meta.k8s.io/v1",
                           "metadata": o.get("metadata") or {}}
        rows.append(r)
    md = {"resourceVersion": str(rv)}
    if cont:
        md["continue"] = cont
    if remaining:
        md["remainingItemCount"] = remaining
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md,
            "columnDefinitions": cols, "rows": rows}


def _param_kind(o):
    """The PARAMKIND column of a ValidatingAdmissionPolicy."""
    pk = (o.get("spec") or {}).get("paramKind")
    if not isinstance(pk, dict):
        return "<unset>"
    return "%s/%s" % (pk.get("apiVersion", ""), pk.get("kind", ""))


def _param_ref(o):
    """The PARAMREF column of a ValidatingAdmissionPolicyBinding."""
    pr = (o.get("spec") or {}).get("paramRef")
    if not isinstance(pr, dict):
        return "<unset>"
    if pr.get("name"):
        ns = pr.get("namespace")
        return "%s/%s" % (ns, pr["name"]) if ns else "*/" + pr["name"]
    return "*/*"
