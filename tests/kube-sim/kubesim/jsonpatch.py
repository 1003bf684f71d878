# SPDX-License-Identifier: Apache-2.0
"""RFC 6902 JSON Patch (with RFC 6901 JSON Pointer) over plain JSON values.

apply(doc, ops) returns a new document and never modifies DOC; any
problem raises PatchError with a message in the style of the apiserver's
json-patch library.
"""

import copy

MAX_OPS = 10000


class PatchError(ValueError):
    """The patch is malformed or cannot be applied."""


class TestFailed(PatchError):
    """A test operation did not hold (jsonpatch.ErrTestFailed)."""


def parse_pointer(ptr):
    """Split a JSON Pointer into unescaped reference tokens."""
    if not isinstance(ptr, str):
        raise PatchError("path must be a string")
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise PatchError("JSON pointer must be empty or start with '/': %r"
                         % ptr)
    out = []
    for tok in ptr[1:].split("/"):
        i = 0
        while True:
            i = tok.find("~", i)
            if i < 0:
                break
            if tok[i + 1:i + 2] not in ("0", "1"):
                raise PatchError("invalid escape in JSON pointer %r" % ptr)
            i += 2
        out.append(tok.replace("~1", "/").replace("~0", "~"))
    return out


def _list_index(container, tok, allow_end, ptr):
    """Array index of TOK; '-' means the end when ALLOW_END."""
    if tok == "-" and allow_end:
        return len(container)
    if not tok.isdigit() or (len(tok) > 1 and tok[0] == "0"):
        raise PatchError("invalid array index %r in %s" % (tok, ptr))
    idx = int(tok)
    limit = len(container) + (1 if allow_end else 0)
    if idx >= limit:
        raise PatchError("index out of range: %d in %s" % (idx, ptr))
    return idx


def _parent(doc, toks, ptr):
    """The container that holds the last token of TOKS."""
    cur = doc
    for tok in toks[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError("doc is missing path: %s" % ptr)
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_list_index(cur, tok, False, ptr)]
        else:
            raise PatchError("doc is missing path: %s" % ptr)
    if not isinstance(cur, (dict, list)):
        raise PatchError("doc is missing path: %s" % ptr)
    return cur


def get(doc, ptr):
    """The value at PTR, or raise PatchError."""
    toks = parse_pointer(ptr)
    if not toks:
        return doc
    cont = _parent(doc, toks, ptr)
    last = toks[-1]
    if isinstance(cont, dict):
        if last not in cont:
            raise PatchError("doc is missing key: %s" % ptr)
        return cont[last]
    return cont[_list_index(cont, last, False, ptr)]


def _add(doc, ptr, value):
    """RFC 6902 add; returns the (possibly replaced) root."""
    toks = parse_pointer(ptr)
    if not toks:
        return value
    cont = _parent(doc, toks, ptr)
    if isinstance(cont, dict):
        cont[toks[-1]] = value
    else:
        cont.insert(_list_index(cont, toks[-1], True, ptr), value)
    return doc


def _remove(doc, ptr):
    """RFC 6902 remove; returns (root, removed value)."""
    toks = parse_pointer(ptr)
    if not toks:
        raise PatchError("unable to remove the document root")
    cont = _parent(doc, toks, ptr)
    if isinstance(cont, dict):
        if toks[-1] not in cont:
            raise PatchError("unable to remove nonexistent key: %s: "
                             "missing value" % toks[-1])
        return doc, cont.pop(toks[-1])
    return doc, cont.pop(_list_index(cont, toks[-1], False, ptr))


def _equal(a, b):
    """JSON equality: 1 == 1.0 but True != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float))
        and a == b)


def _need(op, key):
    """A required member of an operation object."""
    if key not in op:
        raise PatchError("operation %s missing '%s' parameter"
                         % (op.get("op"), key))
    return op[key]


def _apply_one(doc, op):
    """Apply a single operation object."""
    if not isinstance(op, dict):
        raise PatchError("patch operation must be an object")
    kind = op.get("op")
    path = _need(op, "path")
    if kind == "add":
        return _add(doc, path, copy.deepcopy(_need(op, "value")))
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        value = copy.deepcopy(_need(op, "value"))
        get(doc, path)
        if parse_pointer(path) == []:
            return value
        doc, _ = _remove(doc, path)
        return _add(doc, path, value)
    if kind in ("move", "copy"):
        src = _need(op, "from")
        if not isinstance(src, str):
            raise PatchError("'from' must be a string")
        if kind == "move":
            if path != src and path.startswith(src + "/"):
                raise PatchError("cannot move %s into its own child %s"
                                 % (src, path))
            doc, value = _remove(doc, src)
        else:
            value = copy.deepcopy(get(doc, src))
        return _add(doc, path, value)
    if kind == "test":
        if not _equal(get(doc, path), _need(op, "value")):
            raise TestFailed("testing value %s failed: test failed" % path)
        return doc
    raise PatchError("Unexpected kind: %s" % (kind,))


def apply(doc, ops):
    """Apply the list of operations OPS to a copy of DOC."""
    if not isinstance(ops, list):
        raise PatchError("json: cannot unmarshal object into Go value of "
                         "type jsonpatch.Patch")
    if len(ops) > MAX_OPS:
        raise PatchError("patch has too many operations (%d > %d)"
                         % (len(ops), MAX_OPS))
    out = copy.deepcopy(doc)
    for op in ops:
        out = _apply_one(out, op)
    return out
