# SPDX-License-Identifier: Apache-2.0
"""Field managers: metadata.managedFields and server-side apply, as
k8s.io/apimachinery/pkg/util/managedfields (its internal fieldmanager,
structuredmerge, managedfieldsupdater, conflict.go) and
sigs.k8s.io/structured-merge-diff's merge.Updater do it, over the list
types smd.py knows.

Every write but /sim/bulk's is recorded: a create, update or non-apply
patch gives its manager (the fieldManager query parameter, else the
User-Agent's first word, as managerOrUserAgent; internal controllers
their component's name) an `Update` entry owning what it added or
changed (Compare of the old and new object); fields it changed are taken
from other managers, removed fields from everyone.  A server-side apply
(PATCH application/apply-patch+yaml, fieldManager required) merges the
configuration into the live object (or creates it), removes what the
manager applied last time and no longer does (unless another manager
owns it), and refuses with 409 a change to a field another manager owns
(`Apply failed with N conflict(s): ...`) unless force=true, which takes
them over.  The manager's `Apply` entry owns exactly the configuration's
fields.
"""

import time

from . import smd
from .hooks import ApiError

APPLY, UPDATE = "Apply", "Update"


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def manager_of(who):
    """The field manager of a write: fieldManager, else the User-Agent's
    product (prefixFromUserAgent), else the internal component."""
    m = (who.options or {}).get("fieldManager")
    if m:
        return m
    ua = getattr(who, "user_agent", "") or ""
    if ua:
        return ua.split("/")[0]
    user = who.user or ""
    if user == "system:kube-scheduler":
        return "kube-scheduler"
    if user.startswith("system:node:"):
        return "kubelet"
    return "kube-controller-manager"


class Managers:
    """The decoded managedFields of one object: {key: entry} where key is
    (manager, operation, apiVersion (Update only), subresource) and entry
    is {"set", "apiVersion", "time"}."""

    def __init__(self, entries=None):
        self.m = {}
        for e in entries or []:
            if not isinstance(e, dict) or not e.get("manager"):
                continue
            op = e.get("operation") or UPDATE
            key = (e["manager"], op,
                   e.get("apiVersion", "") if op == UPDATE else "",
                   e.get("subresource", ""))
            self.m[key] = {"set": smd.from_fields_v1(e.get("fieldsV1")),
                           "apiVersion": e.get("apiVersion", ""),
                           "time": e.get("time")}

    def encode(self):
        """managedFields as upstream orders them (operation, time,
        manager, apiVersion, subresource)."""
        out = []
        for key, e in self.m.items():
            if not e["set"]:
                continue
            ent = {"manager": key[0], "operation": key[1],
                   "apiVersion": e["apiVersion"]}
            if e.get("time"):
                ent["time"] = e["time"]
            ent["fieldsType"] = "FieldsV1"
            ent["fieldsV1"] = smd.fields_v1(e["set"])
            if key[3]:
                ent["subresource"] = key[3]
            out.append(ent)
        out.sort(key=lambda x: (x["operation"], x.get("time") or "",
                                x["manager"], x["apiVersion"],
                                x.get("subresource", "")))
        return out


def _base(old, new):
    """The managers a write starts from: the request's managedFields when
    it sends some (a single empty entry resets them), else the stored
    object's (decodeLiveOrNew)."""
    mf = ((new or {}).get("metadata") or {}).get("managedFields")
    if isinstance(mf, list) and mf:
        if all(isinstance(e, dict) and not e for e in mf):
            return Managers()
        got = Managers(mf)
        if got.m:
            return got
    return Managers(((old or {}).get("metadata") or {}).get(
        "managedFields"))


def _status_mode(res, sub):
    """strip()'s status mode for a write of subresource SUB of RES (the
    status subresource owns status, the main resource the rest when the
    kind has a status subresource)."""
    if sub == "status":
        return "only"
    return "drop" if "status" in res.subresources else "all"


def _tracked(paths, res, sub):
    """The paths managedFields record for a write of SUB of RES."""
    return smd.strip(paths, _status_mode(res, sub))


def _without_mf(obj):
    """OBJ without metadata.managedFields (a shallow copy)."""
    if obj is None:
        return None
    md = obj.get("metadata")
    if not isinstance(md, dict) or "managedFields" not in md:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in md.items() if k != "managedFields"}
    return out


def _store(obj, managers):
    """Write MANAGERS into OBJ's metadata (none: the field removed)."""
    enc = managers.encode()
    md = obj.setdefault("metadata", {})
    if enc:
        md["managedFields"] = enc
    else:
        md.pop("managedFields", None)


def record_update(res, old, new, who, sub="", api_version=None):
    """Record a create (OLD None), update or non-apply patch by WHO in
    NEW's managedFields (Updater.Update)."""
    ti = smd.type_info(res, (api_version or "").rpartition("/")[2] or None)
    md = new.get("metadata")
    if old is None and isinstance(md, dict) and not md.get("managedFields"):
        # a create without managedFields: its manager owns all it sent
        try:
            tree = smd.created_fields_v1(new, ti, _status_mode(res, sub))
        except smd.SmdError:
            return
        if tree:
            md["managedFields"] = [{
                "manager": manager_of(who), "operation": UPDATE,
                "apiVersion": api_version or new.get("apiVersion") or "",
                "time": now_rfc3339(), "fieldsType": "FieldsV1",
                "fieldsV1": tree}]
        return
    managers = _base(old, new)
    try:
        added, modified, removed = smd.compare(_without_mf(old),
                                               _without_mf(new), ti)
    except smd.SmdError:
        return
    added = _tracked(added, res, sub)
    modified = _tracked(modified, res, sub)
    removed = _tracked(removed, res, sub)
    av = api_version or new.get("apiVersion") or ""
    key = (manager_of(who), UPDATE, av, sub)
    taken = added | modified
    for k, e in managers.m.items():
        if k != key:
            e["set"] = e["set"] - taken - removed
    prev = managers.m.get(key)
    before = prev["set"] if prev else set()
    now_set = (before - removed) | taken
    if now_set != before or taken or removed:
        managers.m[key] = {"set": now_set, "apiVersion": av,
                           "time": now_rfc3339()}
    _store(new, managers)


def _manager_text(key):
    """printManager: "name" [with subresource "s"] [using apiVersion]."""
    out = '"%s"' % key[0]
    if key[3]:
        out += ' with subresource "%s"' % key[3]
    if key[1] == UPDATE:
        out += " using %s" % key[2]
    return out


def conflict_error(conflicts):
    """409 Conflict of an apply (NewConflictError): CONFLICTS is
    [(manager key, path)]."""
    causes = [{"reason": "FieldManagerConflict",
               "message": "conflict with %s" % _manager_text(k),
               "field": smd.path_string(p)} for k, p in conflicts]
    if len(conflicts) == 1:
        k, p = conflicts[0]
        msg = "Apply failed with 1 conflict: conflict with %s: %s" % (
            _manager_text(k), smd.path_string(p))
    else:
        by = {}
        for k, p in conflicts:
            by.setdefault(k, []).append(p)
        lines = []
        for k in sorted(by, key=lambda x: (x[0], x[1], x[2], x[3])):
            lines.append("conflicts with %s:" % _manager_text(k))
            lines.extend("- %s" % smd.path_string(p) for p in by[k])
        msg = "Apply failed with %d conflicts: %s" % (len(conflicts),
                                                      "\n".join(lines))
    return ApiError(409, "Conflict", msg, {"causes": causes})


def apply(res, live, config, manager, force, sub="", api_version=None):
    """The object a server-side apply of CONFIG by MANAGER makes of LIVE
    (None: it does not exist yet), with its managedFields; ApiError 409
    on conflicts unless FORCE."""
    version = (api_version or config.get("apiVersion") or "").rpartition(
        "/")[2]
    ti = smd.type_info(res, version or None)
    av = api_version or config.get("apiVersion") or ""
    managers = Managers(((live or {}).get("metadata") or {}).get(
        "managedFields"))
    key = (manager, APPLY, "", sub)
    prev = managers.m.get(key)
    last = prev["set"] if prev else set()
    try:
        applied = _tracked(smd.field_set(config, ti), res, sub)
        base = _without_mf(live) or {}
        merged = smd.merge(base, config, ti) if live is not None else \
            smd.merge({}, config, ti)
    except smd.SmdError as e:
        raise ApiError(500, "InternalError", "Internal error occurred: "
                       "failed to create typed patch object: %s" % e,
                       {"causes": [{"message": str(e)}]})
    others = set()
    for k, e in managers.m.items():
        if k != key:
            others |= e["set"]
    gone = last - applied - others
    if gone:
        smd.remove_paths(merged, gone, ti)
    added, modified, removed = smd.compare(base if live is not None
                                           else None, merged, ti)
    changed = _tracked(added | modified, res, sub)
    removed = _tracked(removed, res, sub)
    conflicts = []
    for k, e in sorted(managers.m.items()):
        if k == key:
            continue
        hit = e["set"] & changed
        for p in sorted(hit, key=smd.path_string):
            conflicts.append((k, p))
    if conflicts and not force:
        raise conflict_error(conflicts)
    for k, e in managers.m.items():
        if k != key:
            e["set"] = e["set"] - changed - removed
    if applied != last or changed or removed or prev is None:
        managers.m[key] = {"set": applied, "apiVersion": av,
                           "time": now_rfc3339()}
    else:
        managers.m[key] = prev
    _store(merged, managers)
    return merged
