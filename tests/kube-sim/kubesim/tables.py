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


def human_duration(secs):
    """kubectl's HumanDuration (apimachinery/pkg/util/duration)."""
    secs = max(0, int(secs))
    if secs < 120:
        return "%ds" % secs
    mins = secs // 60
    if mins < 10:
        s = secs % 60
        return "%dm%ds" % (mins, s) if s else "%dm" % mins
    if mins < 180:
        return "%dm" % mins
    hours = secs // 3600
    if hours < 8:
        m = mins % 60
        return "%dh%dm" % (hours, m) if m else "%dh" % hours
    if hours < 48:
        return "%dh" % hours
    if hours < 24 * 8:
        h = hours % 24
        return "%dd%dh" % (hours // 24, h) if h else "%dd" % (hours // 24)
    if hours < 24 * 365 * 2:
        return "%dd" % (hours // 24)
    return "%dy" % (hours // (24 * 365))


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
    phase = st.get("phase") or "Pending"
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


def columns(res, version):
    """(column definitions, row function) for a resource."""
    k = res.key
    if k == "namespaces":
        return ([_NAME, _col("Status"), _AGE],
                lambda o: [o["metadata"]["name"],
                           (o.get("status") or {}).get("phase", ""), age(o)])
    if k == "pods":
        return ([_NAME, _col("Ready"), _col("Status"),
                 _col("Restarts", typ="string"), _AGE,
                 _col("IP", priority=1), _col("Node", priority=1)],
                lambda o: [o["metadata"]["name"]] + _pod_cells(o) +
                [age(o), (o.get("status") or {}).get("podIP", "<none>"),
                 (o.get("spec") or {}).get("nodeName", "<none>")])
    if k == "resourceclaims.resource.k8s.io":
        return ([_NAME, _col("State"), _AGE],
                lambda o: [o["metadata"]["name"], _claim_state(o), age(o)])
    if k == "resourceslices.resource.k8s.io":
        return ([_NAME, _col("Node"), _col("Driver"), _col("Pool"), _AGE],
                lambda o: [o["metadata"]["name"],
                           (o.get("spec") or {}).get("nodeName", ""),
                           (o.get("spec") or {}).get("driver", ""),
                           ((o.get("spec") or {}).get("pool") or {}).get(
                               "name", ""), age(o)])
    if k == "leases.coordination.k8s.io":
        return ([_NAME, _col("Holder"), _AGE],
                lambda o: [o["metadata"]["name"],
                           (o.get("spec") or {}).get("holderIdentity", ""),
                           age(o)])
    if k == "events":
        return ([_col("Last Seen"), _col("Type"), _col("Reason"),
                 _col("Object"), _col("Message")],
                lambda o: [age(o), o.get("type", ""), o.get("reason", ""),
                           "%s/%s" % ((o.get("involvedObject") or {}).get(
                               "kind", "").lower(),
                               (o.get("involvedObject") or {}).get(
                                   "name", "")), o.get("message", "")])
    if k.startswith("mutatingwebhookconfigurations."):
        return ([_NAME, _col("Webhooks", typ="integer"), _AGE],
                lambda o: [o["metadata"]["name"],
                           len(o.get("webhooks") or []), age(o)])
    if k.startswith("customresourcedefinitions."):
        return ([_NAME, _col("Created At", typ="date")],
                lambda o: [o["metadata"]["name"],
                           o["metadata"].get("creationTimestamp", "")])
    extra = getattr(res, "printer_columns", {}).get(version) or []
    if extra:
        return _printer_columns(extra)
    return [_NAME, _AGE], lambda o: [o["metadata"]["name"], age(o)]


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
