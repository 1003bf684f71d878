# SPDX-License-Identifier: Apache-2.0
"""Structured merge (the part of sigs.k8s.io/structured-merge-diff the
simulator needs): merging an apply configuration into an object by the
list types of its schema, the field sets of managedFields, comparing two
objects field by field and removing fields.

Used by MutatingAdmissionPolicy's ApplyConfiguration mutations
(mapolicy.py: merge with no field manager, atomic parts refused) and by
server-side apply (fieldmanager.py: field sets, conflicts, pruning).

Types.  Upstream merges by the OpenAPI schema of the kind: a list is
atomic (replaced whole), a set (listType=set, merged by value) or a map
(listType=map, merged by its listMapKeys); a map or struct is granular
(merged key by key) unless atomic (mapType/structType=atomic).  The
simulator has no OpenAPI schemas of built-in kinds, so TypeInfo knows
the list and map types of the fields kpgpud's objects and common
manifests use (LIST_RULES, ATOMIC_MAPS, by field-name suffix, from
k8s.io/api's +listType / +listMapKey / +mapType / +structType markers);
every other list of a built-in kind is atomic and every other object
granular, as SMD deduces for fields it has no schema for.  A custom
resource's types come from its CRD's openAPIV3Schema
(x-kubernetes-list-type, -list-map-keys, -map-type).

Paths are tuples of path elements, as fieldpath.Path:
  ("f", name)     a struct field or map key
  ("k", ((key, value), ...))  a map-list item by its keys (sorted)
  ("v", value)    a set-list item (JSON value)
  ("i", index)    an atomic-list item (only in error texts)
"""

import copy
import json

# listType by field-name suffix (the last names of the path, list
# indices left out), most specific first: ("map", keys) | "set".
# Unlisted lists are atomic.
LIST_RULES = (
    (("metadata", "finalizers"), "set"),
    (("metadata", "ownerReferences"), ("map", ("uid",))),
    (("containers", "ports"), ("map", ("containerPort", "protocol"))),
    (("initContainers", "ports"), ("map", ("containerPort", "protocol"))),
    (("containers", "env"), ("map", ("name",))),
    (("initContainers", "env"), ("map", ("name",))),
    (("ephemeralContainers", "env"), ("map", ("name",))),
    (("containers", "volumeMounts"), ("map", ("mountPath",))),
    (("initContainers", "volumeMounts"), ("map", ("mountPath",))),
    (("containers", "volumeDevices"), ("map", ("devicePath",))),
    (("resources", "claims"), ("map", ("name",))),
    (("spec", "containers"), ("map", ("name",))),
    (("spec", "initContainers"), ("map", ("name",))),
    (("spec", "ephemeralContainers"), ("map", ("name",))),
    (("spec", "volumes"), ("map", ("name",))),
    (("spec", "resourceClaims"), ("map", ("name",))),
    (("spec", "imagePullSecrets"), ("map", ("name",))),
    (("spec", "hostAliases"), ("map", ("ip",))),
    (("spec", "schedulingGates"), ("map", ("name",))),
    (("spec", "topologySpreadConstraints"),
     ("map", ("topologyKey", "whenUnsatisfiable"))),
    (("spec", "ports"), ("map", ("port", "protocol"))),
    (("status", "conditions"), ("map", ("type",))),
    (("status", "resourceClaimStatuses"), ("map", ("name",))),
    (("status", "containerStatuses"), "atomic"),
    (("status", "podIPs"), ("map", ("ip",))),
    (("status", "hostIPs"), ("map", ("ip",))),
)
# Defaults of list-map key fields that may be left out (their OpenAPI
# default, which SMD uses for a missing key).
KEY_DEFAULTS = {"protocol": "TCP"}

# Maps and structs that are atomic (+mapType=atomic / +structType=atomic)
# by field-name suffix.
ATOMIC_MAPS = (
    ("spec", "selector"),          # Deployment, PDB (LabelSelector) and
                                   # Service (mapType=atomic)
    ("nodeSelector",), ("labelSelector",), ("namespaceSelector",),
    ("objectSelector",), ("podSelector",), ("paramKind",),
    ("matchConstraints",), ("roleRef",),
)

# Granular maps (map[string]T rather than structs): their own path is a
# member of a field set when they are added (the "." of managedFields).
MAP_FIELDS = frozenset((
    "labels", "annotations", "data", "binaryData", "stringData",
    "requests", "limits", "hard", "used", "capacity", "allocatable",
    "attributes", "matchLabels", "overhead", "parameters"))

# Fields managedFields never track (fieldmanager's stripped fields).
STRIPPED = frozenset((
    ("f", "apiVersion"), ("f", "kind")))
STRIPPED_META = frozenset((
    "name", "namespace", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "selfLink", "managedFields"))


_MISSING = object()


class SmdError(Exception):
    """A value that does not fit its schema (duplicate keys, a key
    missing, a field not declared)."""


def _suffix(names, rules):
    """The first rule whose pattern ends NAMES, or None."""
    for pat, val in rules:
        n = len(pat)
        if len(names) >= n and tuple(names[-n:]) == pat:
            return val
    return None


_ATOMIC_RULES = tuple((p, True) for p in ATOMIC_MAPS)


class TypeInfo:
    """The list and map types of one kind (built-in rules, or a CRD's
    openAPIV3Schema of one version), memoised by field path."""

    MEMO = 4096

    def __init__(self, openapi=None):
        self.openapi = openapi
        self._memo = {}

    def _cached(self, what, names, fn):
        """fn(names), memoised (the paths of a kind repeat)."""
        key = (what, names)
        v = self._memo.get(key, _MISSING)
        if v is _MISSING:
            if len(self._memo) > self.MEMO:
                self._memo.clear()
            v = self._memo[key] = fn(names)
        return v

    # -- CRD schemas
    def _node(self, names):
        """The openAPIV3Schema node of field path NAMES, or None."""
        s = self.openapi
        for n in names:
            if not isinstance(s, dict):
                return None
            if s.get("type") == "array":
                s = s.get("items")
                if not isinstance(s, dict):
                    return None
            props = s.get("properties")
            if isinstance(props, dict) and n in props:
                s = props[n]
            elif isinstance(s.get("additionalProperties"), dict):
                s = s["additionalProperties"]
            else:
                return None
        return s

    def list_type(self, names):
        """"atomic", "set" or ("map", keys) of the list at NAMES."""
        return self._cached("l", names, self._list_type)

    def map_atomic(self, names):
        """True when the map or struct at NAMES is atomic."""
        return self._cached("a", names, self._map_atomic)

    def is_map(self, names):
        """True when NAMES is a map (not a struct)."""
        return self._cached("m", names, self._is_map)

    def _list_type(self, names):
        if self.openapi is not None:
            node = self._node(names)
            if isinstance(node, dict):
                lt = node.get("x-kubernetes-list-type")
                if lt == "set":
                    return "set"
                if lt == "map":
                    return ("map", tuple(node.get(
                        "x-kubernetes-list-map-keys") or ()))
                if lt == "atomic" or "x-kubernetes-list-type" not in node:
                    return "atomic"
            if names and names[0] != "metadata":
                return "atomic"
        return _suffix(names, LIST_RULES) or "atomic"

    def _map_atomic(self, names):
        if self.openapi is not None and names and names[0] != "metadata":
            node = self._node(names)
            return isinstance(node, dict) and node.get(
                "x-kubernetes-map-type") == "atomic"
        return _suffix(names, _ATOMIC_RULES) is True

    def _is_map(self, names):
        if self.openapi is not None and names and names[0] != "metadata":
            node = self._node(names)
            return isinstance(node, dict) and "additionalProperties" in node \
                and "properties" not in node
        return bool(names) and names[-1] in MAP_FIELDS


_TYPES = {}


def type_info(res, version=None):
    """The TypeInfo of a ResourceInfo (custom resources by version)."""
    openapi = getattr(res.desc, "openapi", None)
    if openapi is None:
        return _BUILTIN
    spec = openapi.get(version or res.version) or \
        openapi.get(res.version)
    key = id(spec)
    ti = _TYPES.get(key)
    if ti is None or ti.openapi is not spec:
        ti = TypeInfo(spec if isinstance(spec, dict) else {})
        if len(_TYPES) > 256:
            _TYPES.clear()
        _TYPES[key] = ti
    return ti


_BUILTIN = TypeInfo()


# ------------------------------------------------------------ list items

def _item_key(item, keys, names):
    """The ("k", ...) element of a map-list item (key defaults applied);
    SmdError when a key is missing."""
    if not isinstance(item, dict):
        raise SmdError("%s: element is not an object" % _dotted(names))
    out = []
    for k in sorted(keys):
        if k in item and item[k] is not None:
            out.append((k, item[k]))
        elif k in KEY_DEFAULTS:
            out.append((k, KEY_DEFAULTS[k]))
        else:
            raise SmdError('%s: associative list with keys has an element '
                           'that omits key field "%s" (and doesn\'t have '
                           'default value)' % (_dotted(names), k))
    return ("k", tuple((k, _freeze(v)) for k, v in out))


def _freeze(v):
    """A hashable form of a JSON value."""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return v


def _elements(items, lt, names):
    """[(element, item)] of a non-atomic list; SmdError on duplicates."""
    out, seen = [], set()
    for x in items:
        pe = ("v", _freeze(x)) if lt == "set" else \
            _item_key(x, lt[1], names)
        if pe in seen:
            if lt == "set":
                raise SmdError("%s: duplicate entries for key %s" % (
                    _dotted(names), _value_text(x)))
            raise SmdError("%s: duplicate entries for key %s" % (
                _dotted(names), _element_text(pe)))
        seen.add(pe)
        out.append((pe, x))
    return out


def _dotted(names):
    """.spec.containers for error texts."""
    return "".join("." + n for n in names)


# ------------------------------------------------------------------ merge

def merge(live, config, ti, names=()):
    """LIVE with CONFIG merged in (SMD Merge): scalars and atomic parts
    from CONFIG, granular maps key by key, map and set lists item by
    item, keeping LIVE's order with CONFIG's items placed as SMD places
    them.  Neither argument is changed."""
    if isinstance(config, dict) and isinstance(live, dict) and \
            not ti.map_atomic(names):
        out = dict(live)
        for k, v in config.items():
            out[k] = merge(live.get(k), v, ti, names + (k,)) \
                if k in live else copy.deepcopy(v)
        return out
    if isinstance(config, list) and isinstance(live, list):
        lt = ti.list_type(names)
        if lt != "atomic":
            return _merge_list(live, config, lt, ti, names)
    return copy.deepcopy(config)


def _merge_list(live, config, lt, ti, names):
    """Merge two map or set lists (SMD's interleaving of the two orders:
    a live item not in CONFIG keeps its place, CONFIG's items follow
    CONFIG's order)."""
    lhs = _elements(live, lt, names)
    rhs = _elements(config, lt, names)
    rkeys = {pe for pe, _ in rhs}
    lmap = {pe: x for pe, x in lhs}
    out, merged = [], set()
    li = ri = 0
    while li < len(lhs) or ri < len(rhs):
        if li < len(lhs) and ri < len(rhs) and lhs[li][0] == rhs[ri][0]:
            pe = lhs[li][0]
            out.append(_merge_item(lhs[li][1], rhs[ri][1], lt, ti, names))
            merged.add(pe)
            li += 1
            ri += 1
            continue
        if li < len(lhs):
            pe = lhs[li][0]
            if pe not in rkeys:
                out.append(copy.deepcopy(lhs[li][1]))
                li += 1
                continue
            if pe in merged:
                li += 1
                continue
        pe, x = rhs[ri]
        merged.add(pe)
        out.append(_merge_item(lmap.get(pe), x, lt, ti, names))
        ri += 1
    return out


def _merge_item(old, new, lt, ti, names):
    """One list item: a set item is its value; a map item merges."""
    if lt == "set" or old is None:
        return copy.deepcopy(new)
    return merge(old, new, ti, names)


# ------------------------------------------------------------ field sets

def field_set(obj, ti, names=(), path=(), out=None, maps=False):
    """The field set of an apply configuration (SMD ToFieldSet): every
    leaf, atomic list or map, set item and map-list item (with its
    fields); MAPS: granular maps too (a subtree Compare finds added)."""
    if out is None:
        out = set()
    if isinstance(obj, dict) and not (path and ti.map_atomic(names)):
        if maps and path and ti.is_map(names):
            out.add(path)
        for k, v in obj.items():
            field_set(v, ti, names + (k,), path + (("f", k),), out, maps)
        return out
    if isinstance(obj, list):
        lt = ti.list_type(names)
        if lt != "atomic":
            for pe, x in _elements(obj, lt, names):
                out.add(path + (pe,))
                if lt != "set":
                    field_set(x, ti, names, path + (pe,), out, maps)
            return out
    if path:
        out.add(path)
    return out


def strip(paths, status="all"):
    """PATHS less what managedFields never track (apiVersion, kind, the
    server's metadata); STATUS "only": keep only status (a write of the
    status subresource), "drop": no status (the main resource of a kind
    with a status subresource), "all": keep it."""
    out = set()
    if not paths:
        return out
    for p in paths:
        if not p or p[0] in STRIPPED:
            continue
        if p[0] == ("f", "metadata") and len(p) > 1 and \
                p[1][0] == "f" and p[1][1] in STRIPPED_META:
            continue
        if p == (("f", "metadata"),):
            continue
        in_status = p[0] == ("f", "status")
        if (status == "only" and not in_status) or \
                (status == "drop" and in_status):
            continue
        out.add(p)
    return out


def compare(old, new, ti, names=(), path=(), acc=None):
    """(added, modified, removed) paths between two objects (SMD Compare):
    changed leaves, added or removed subtrees (their maps and list items
    with every field under them)."""
    if acc is None:
        acc = (set(), set(), set())
    added, modified, removed = acc
    if old is None and new is None:
        return acc
    if old is None or new is None:
        target, v = (added, new) if old is None else (removed, old)
        if isinstance(v, dict) and not (path and ti.map_atomic(names)):
            field_set(v, ti, names, path, target, True)
        elif isinstance(v, list) and ti.list_type(names) != "atomic":
            try:
                field_set(v, ti, names, path, target, True)
            except SmdError:
                target.add(path)
        elif path:
            target.add(path)
        return acc
    if isinstance(old, dict) and isinstance(new, dict) and \
            not (path and ti.map_atomic(names)):
        for k in set(old) | set(new):
            compare(old.get(k), new.get(k), ti, names + (k,),
                    path + (("f", k),), acc)
        return acc
    if isinstance(old, list) and isinstance(new, list):
        lt = ti.list_type(names)
        if lt != "atomic":
            try:
                lo = dict(_elements(old, lt, names))
                ne = dict(_elements(new, lt, names))
            except SmdError:
                lo = ne = None
            if lo is not None:
                for pe in set(lo) | set(ne):
                    if lt == "set":
                        if pe not in lo:
                            added.add(path + (pe,))
                        elif pe not in ne:
                            removed.add(path + (pe,))
                        continue
                    if pe not in lo:
                        added.add(path + (pe,))
                    elif pe not in ne:
                        removed.add(path + (pe,))
                    compare(lo.get(pe), ne.get(pe), ti, names,
                            path + (pe,), acc)
                return acc
    if old != new or type(old) is not type(new):
        if path:
            modified.add(path)
    return acc


def get_path(obj, path, ti, names=()):
    """The value at PATH in OBJ, or None."""
    cur = obj
    for pe in path:
        if pe[0] == "f":
            if not isinstance(cur, dict):
                return None
            names = names + (pe[1],)
            cur = cur.get(pe[1])
        else:
            if not isinstance(cur, list):
                return None
            lt = ti.list_type(names)
            hit = None
            for x in cur:
                try:
                    if lt != "atomic" and (("v", _freeze(x)) if lt == "set"
                                           else _item_key(x, lt[1], names)) \
                            == pe:
                        hit = x
                        break
                except SmdError:
                    continue
            cur = hit
        if cur is None:
            return None
    return cur


def remove_paths(obj, paths, ti):
    """OBJ (changed in place) without the fields and list items PATHS
    name; a removed map-list item or leaf leaves its parent in place."""
    # list items before their fields (a removed item takes them along;
    # a field removed first would leave the item without its key)
    for path in sorted(paths, key=len):
        parent = get_path(obj, path[:-1], ti) if len(path) > 1 else obj
        names = tuple(pe[1] for pe in path[:-1] if pe[0] == "f")
        pe = path[-1]
        if pe[0] == "f":
            if isinstance(parent, dict):
                parent.pop(pe[1], None)
        elif isinstance(parent, list):
            lt = ti.list_type(names)
            for i, x in enumerate(parent):
                try:
                    k = ("v", _freeze(x)) if lt == "set" else \
                        _item_key(x, lt[1], names)
                except (SmdError, TypeError, IndexError):
                    continue
                if k == pe:
                    del parent[i]
                    break
    return obj


# ------------------------------------------------------ atomic and schema

def atomic_paths(config, ti, names=(), path="", out=None):
    """The atomic maps, structs and lists CONFIG sets (findAtomicMapsAnd
    Structs of the apply-configuration patcher): "may not mutate atomic
    arrays, maps or structs"."""
    if out is None:
        out = []
    if isinstance(config, dict):
        if names and ti.map_atomic(names):
            out.append(path)
        for k, v in config.items():
            atomic_paths(v, ti, names + (k,), path + "." + k, out)
    elif isinstance(config, list):
        lt = ti.list_type(names)
        if lt == "atomic":
            out.append(path)
        for i, x in enumerate(config):
            atomic_paths(x, ti, names, "%s[%d]" % (path, i), out)
    return out


def undeclared(config, known, path=""):
    """The first field of CONFIG its kind does not declare (schema.py
    form, None: anything goes), as ".spec.replicasx", or None."""
    if known is None or isinstance(known, str):
        return None
    if isinstance(known, list):
        if isinstance(config, list):
            for i, x in enumerate(config):
                bad = undeclared(x, known[0], path)
                if bad:
                    return bad
        return None
    if not isinstance(config, dict):
        return None
    if "*" in known:
        for k, v in config.items():
            bad = undeclared(v, known["*"], path + "." + k)
            if bad:
                return bad
        return None
    for k, v in config.items():
        if k not in known or k == "__go__":
            return path + "." + k
        bad = undeclared(v, known[k], path + "." + k)
        if bad:
            return bad
    return None


# ------------------------------------------------------------ rendering

def _value_text(v):
    """A value as fieldpath prints it (JSON)."""
    return json.dumps(v, separators=(",", ":"), sort_keys=True)


def _element_text(pe):
    """One path element as fieldpath.PathElement.String() prints it."""
    kind, v = pe
    if kind == "f":
        return "." + v
    if kind == "k":
        return "[" + ",".join("%s=%s" % (k, _value_text(
            json.loads(x) if isinstance(x, str) and x[:1] in "[{"
            else x)) for k, x in v) + "]"
    if kind == "v":
        return "[=" + _value_text(json.loads(v) if isinstance(v, str) and
                                  v[:1] in "[{" else v) + "]"
    return "[%d]" % v


def path_string(path):
    """fieldpath.Path.String(): .spec.containers[name="a"].image."""
    return "".join(_element_text(pe) for pe in path)


def _encode_pe(pe):
    """A path element as a managedFields (FieldsV1) key."""
    kind, v = pe
    if kind == "f":
        return "f:" + v
    if kind == "k":
        return "k:" + json.dumps({k: (json.loads(x) if isinstance(x, str)
                                      and x[:1] in "[{" else x)
                                  for k, x in v}, separators=(",", ":"))
    if kind == "v":
        return "v:" + json.dumps(json.loads(v) if isinstance(v, str) and
                                 v[:1] in "[{" else v, separators=(",", ":"))
    return "i:%d" % v


def _decode_pe(text):
    """The path element of a FieldsV1 key (None: not understood)."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "f":
            return ("f", rest)
        if kind == "k":
            d = json.loads(rest)
            return ("k", tuple((k, _freeze(d[k])) for k in sorted(d)))
        if kind == "v":
            return ("v", _freeze(json.loads(rest)))
        if kind == "i":
            return ("i", int(rest))
    except (ValueError, TypeError, AttributeError):
        return None
    return None


def _created(v, ti, names):
    """The fieldsV1 tree of a value that is new as a whole (what
    fields_v1(strip(compare(None, obj))) gives for it, built in one
    walk), or None when it records nothing."""
    if isinstance(v, dict) and not (names and ti.map_atomic(names)):
        kids = {}
        for k in sorted(v):
            t = _created(v[k], ti, names + (k,))
            if t is not None:
                kids["f:" + k] = t
        if names and ti.is_map(names):
            return dict({".": {}}, **kids) if kids else {}
        return kids or None
    if isinstance(v, list):
        lt = ti.list_type(names)
        if lt == "set":
            return {"v:" + json.dumps(x, separators=(",", ":")): {}
                    for x in v} or None
        if lt != "atomic":
            out = {}
            for x in v:
                if not isinstance(x, dict):
                    raise SmdError("%s: element is not an object"
                                   % _dotted(names))
                key = {}
                for k in sorted(lt[1]):
                    if x.get(k) is not None:
                        key[k] = x[k]
                    elif k in KEY_DEFAULTS:
                        key[k] = KEY_DEFAULTS[k]
                    else:
                        raise SmdError("%s: key %s missing" % (
                            _dotted(names), k))
                kids = _created(x, ti, names) or {}
                out["k:" + json.dumps(key, separators=(",", ":"))] = \
                    dict({".": {}}, **kids) if kids else {}
            return {k: out[k] for k in sorted(out)} or None
    return {}


def created_fields_v1(obj, ti, status="all"):
    """fieldsV1 of a whole new object for its creator's Update entry (the
    fast path of a create: no other manager, nothing removed), with
    strip()'s rules; None when it records nothing."""
    top = {}
    for k in sorted(obj):
        if ("f", k) in STRIPPED:
            continue
        if (status == "only" and k != "status") or \
                (status == "drop" and k == "status"):
            continue
        v = obj[k]
        if k == "metadata" and isinstance(v, dict):
            v = {m: x for m, x in v.items() if m not in STRIPPED_META}
        t = _created(v, ti, (k,))
        if t is not None:
            top["f:" + k] = t
    return top or None


def fields_v1(paths):
    """A field set as managedFields' fieldsV1 tree ("." marks a member
    that also has members under it)."""
    root = {}
    for p in sorted(paths, key=len):
        node = root
        for pe in p:
            node = node.setdefault(_encode_pe(pe), {})
        node["."] = {}

    def fold(n):
        kids = {k: fold(n[k]) for k in sorted(n) if k != "."}
        if not kids:
            return {}
        if "." in n:
            return dict({".": {}}, **kids)
        return kids
    return fold(root)


def from_fields_v1(tree, prefix=()):
    """The field set of a fieldsV1 tree."""
    out = set()
    if not isinstance(tree, dict):
        return out
    for k, v in tree.items():
        if k == ".":
            if prefix:
                out.add(prefix)
            continue
        pe = _decode_pe(k)
        if pe is None:
            continue
        p = prefix + (pe,)
        if not v or v == {}:
            out.add(p)
        else:
            out |= from_fields_v1(v, p)
    return out
