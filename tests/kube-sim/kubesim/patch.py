# SPDX-License-Identifier: Apache-2.0
"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the
subset of strategic merge patch that clients send for built-in types."""

import copy

from .hooks import ApiError


def merge_patch(target, patch):
    """Apply an RFC 7386 merge patch and return the result."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _unescape(tok):
    """Decode one JSON pointer reference token."""
    return tok.replace("~1", "/").replace("~0", "~")


def _parse_pointer(path):
    """Split a JSON pointer into tokens."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise _missing("add", path)
    return [_unescape(t) for t in path[1:].split("/")]


def _missing(op, path):
    """The 422 the server returns for a JSON patch path that is missing."""
    return _rejected("%s operation does not apply: doc is missing path: "
                     "\"%s\": missing value" % (op, path))


def _rejected(why):
    """The 422 the server returns for a JSON patch that does not apply."""
    return ApiError(422, "Invalid", "the server rejected our request due "
                    "to an error in our request",
                    {"causes": [{"reason": "UnexpectedServerResponse",
                                 "message": why}]})


def _walk(doc, toks, op, path):
    """The container holding the last token of a pointer."""
    cur = doc
    for t in toks[:-1]:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        else:
            raise _missing(op, path)
    return cur


def _index(cont, tok, op, path, adding):
    """A list index from a token, '-' allowed when adding."""
    if tok == "-" and adding:
        return len(cont)
    if not tok.isdigit():
        raise _missing(op, path)
    i = int(tok)
    if i > len(cont) or (i == len(cont) and not adding):
        raise _missing(op, path)
    return i


def _get(doc, path, op):
    """Value at a pointer."""
    toks = _parse_pointer(path)
    if not toks:
        return doc
    cont = _walk(doc, toks, op, path)
    t = toks[-1]
    if isinstance(cont, dict) and t in cont:
        return cont[t]
    if isinstance(cont, list):
        return cont[_index(cont, t, op, path, False)]
    raise _missing(op, path)


def _add(doc, path, value, op="add"):
    """RFC 6902 add; returns the new document."""
    toks = _parse_pointer(path)
    if not toks:
        return value
    cont = _walk(doc, toks, op, path)
    t = toks[-1]
    if isinstance(cont, dict):
        cont[t] = value
    elif isinstance(cont, list):
        cont.insert(_index(cont, t, op, path, True), value)
    else:
        raise _missing(op, path)
    return doc


def _remove(doc, path, op="remove"):
    """RFC 6902 remove; returns (doc, removed value)."""
    toks = _parse_pointer(path)
    cont = _walk(doc, toks, op, path)
    t = toks[-1] if toks else None
    if isinstance(cont, dict) and t in cont:
        return doc, cont.pop(t)
    if isinstance(cont, list):
        return doc, cont.pop(_index(cont, t, op, path, False))
    raise _missing(op, path)


def json_patch(doc, ops):
    """Apply an RFC 6902 JSON patch and return the result."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object "
                       "into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for o in ops:
        if not isinstance(o, dict) or "op" not in o or "path" not in o:
            raise ApiError(400, "BadRequest", "the server rejected our "
                           "request due to an error in our request")
        op, path = o["op"], o["path"]
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(o.get("value")))
        elif op == "remove":
            doc, _ = _remove(doc, path)
        elif op == "replace":
            _get(doc, path, op)
            doc, _ = _remove(doc, path, op)
            doc = _add(doc, path, copy.deepcopy(o.get("value")), op)
        elif op == "move":
            doc, v = _remove(doc, o.get("from", ""), op)
            doc = _add(doc, path, v, op)
        elif op == "copy":
            v = copy.deepcopy(_get(doc, o.get("from", ""), op))
            doc = _add(doc, path, v, op)
        elif op == "test":
            if _get(doc, path, op) != o.get("value"):
                raise _rejected("testing value %s failed: test failed" % path)
        else:
            raise _rejected("Unexpected kind: %s" % op)
    return doc


# Lists of built-in types that strategic merge patch merges by a key.
_MERGE_KEYS = {
    "containers": "name", "initContainers": "name",
    "ephemeralContainers": "name", "env": "name", "volumes": "name",
    "volumeMounts": "mountPath", "ports": "containerPort",
    "resourceClaims": "name", "claims": "name",
    "ownerReferences": "uid", "imagePullSecrets": "name",
    "conditions": "type", "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
# Primitive lists that strategic merge patch unions.
_MERGE_PRIMITIVE = {"finalizers"}


def _smp_list(field, target, patch):
    """Merge one list under strategic merge patch rules."""
    key = _MERGE_KEYS.get(field)
    if field == "ports" and not any(isinstance(x, dict) and "containerPort"
                                    in x for x in list(patch) +
                                    list(target or [])):
        key = "port"    # a Service's ports (ServicePort merges by port)
    if field in _MERGE_PRIMITIVE:
        out = list(target or [])
        for v in patch:
            if v not in out:
                out.append(v)
        return out
    if key is None or not all(isinstance(x, dict) for x in patch):
        return [x for x in copy.deepcopy(patch)
                if not (isinstance(x, dict) and "$patch" in x)]
    if any(isinstance(x, dict) and x.get("$patch") == "replace"
           for x in patch):
        return [x for x in copy.deepcopy(patch) if "$patch" not in x]
    out = [copy.deepcopy(x) for x in (target or [])]
    for item in patch:
        idx = next((i for i, x in enumerate(out)
                    if isinstance(x, dict) and x.get(key) == item.get(key)),
                   None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
        elif idx is None:
            out.append(strategic_merge(None, item))
        else:
            out[idx] = strategic_merge(out[idx], item)
    return out


def strategic_merge(target, patch):
    """Apply a strategic merge patch to a built-in object."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items()
                if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k == "$patch" or \
                k == "$retainKeys":
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            out[f] = [x for x in out.get(f) or [] if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list):
            out[k] = _smp_list(k, out.get(k), v)
        elif isinstance(v, dict):
            r = strategic_merge(out.get(k), v)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
        else:
            out[k] = v
    return out
