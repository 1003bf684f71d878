# SPDX-License-Identifier: Apache-2.0
"""Create-time checks of resource.k8s.io/v1 objects that a default 1.34
kube-apiserver makes beyond the shapes in checks.py:

- CEL selectors compiled and cost-checked
  (pkg/apis/resource/validation/validation.go validateCELExpression);
- opaque parameters: a JSON object of at most 10 KiB (validateRawExtension)
  and a driver name that is a valid CSI driver name (ValidateCSIDriverName);
- the adminAccess namespace-label gate (pkg/registry/resource
  AuthorizedForAdmin, run by the claim and template strategies on create);
- gated fields dropped on write (the strategies' dropDisabledFields) when
  their feature gate is off in the release played (release.py):
  DRADeviceTaints, DRAConsumableCapacity and DRAExtendedResource are off
  in 1.34 and 1.35, on from 1.36; DRAAdminAccess can be turned off
  before 1.36.
"""

import json
import math
import re

from . import cel, release
from .validation import FieldError, dns_subdomain

# resource.CELSelectorExpressionMaxCost: "roughly 0.1 second for each
# expression evaluation" (pkg/apis/resource/types.go).
CEL_MAX_COST = 1000000
# resource.OpaqueParametersMaxLength.
OPAQUE_MAX = 10 * 1024
# ResourceSliceMaxAttributesAndCapacitiesPerDevice and
# DeviceAttributeMaxValueLength: what bounds the sizes the DRA CEL
# environment declares for device.attributes / device.capacity.
MAX_ENTRIES = 32
MAX_STRING = 64
# The size assumed for a collection whose size is not known: cel-go
# estimates an unbounded size, which puts any comprehension over it above
# every limit.
UNBOUNDED = 10 ** 9
# cel-go's parser.MaxRecursionDepth default.
MAX_RECURSION = 250
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_MSG = ("admin access to devices requires the `%s: true` label on the "
             "containing namespace" % ADMIN_LABEL)
MACROS = ("all", "exists", "exists_one", "filter", "map")
STRING_SCAN = ("contains", "startsWith", "endsWith", "lowerAscii",
               "upperAscii", "trim", "indexOf", "lastIndexOf", "split",
               "replace")
REGEX = ("matches", "find", "findAll")


# ------------------------------------------------------------ CEL selectors

def _syntax_detail(expr, exc):
    """cel-go's 'compilation failed: ERROR: <input>:L:C: msg' rendering."""
    msg = str(exc)
    m = re.search(r"\(?(?:at )?offset (\d+)\)?", msg)
    off = int(m.group(1)) if m else 0
    if m:
        msg = (msg[:m.start()] + msg[m.end():]).replace(" ,", ",").strip()
    line = expr.count("\n", 0, off) + 1
    col = off - (expr.rfind("\n", 0, off) + 1) + 1
    text = expr.split("\n")[line - 1] if expr else ""
    return ("compilation failed: ERROR: <input>:%d:%d: %s\n | %s\n | %s^" %
            (line, col, msg, text, "." * (col - 1)))


def _depth(ast):
    """Nesting depth of an AST (iterative: left-deep operator chains are
    not limited by the parser)."""
    best, stack = 0, [(ast, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        if isinstance(node, tuple):
            kids = node[1:]
        elif isinstance(node, list):
            kids, d = node, d - 1
        else:
            continue
        stack.extend((k, d + 1) for k in kids
                     if isinstance(k, (tuple, list)))
    return best


def _undeclared(node, scope):
    """The first identifier not in SCOPE (macro variables extend it)."""
    if not isinstance(node, tuple) or not node:
        return None
    kind = node[0]
    if kind == "ident":
        return None if node[1] in scope else node[1]
    if kind == "macro":
        # cel._Parser: ("macro", name, target, variable, [bodies])
        bad = _undeclared(node[2], scope)
        for body in node[4]:
            bad = bad or _undeclared(body, scope | {node[3]})
        return bad
    if kind == "map":
        for k, v in node[1]:
            bad = _undeclared(k, scope) or _undeclared(v, scope)
            if bad:
                return bad
        return None
    if kind == "call" and node[1] in MACROS and len(node) > 3 and \
            node[2] is not None and len(node[3]) == 2 and \
            isinstance(node[3][0], tuple) and node[3][0][0] == "ident":
        bad = _undeclared(node[2], scope)
        return bad or _undeclared(node[3][1], scope | {node[3][0][1]})
    for child in node[1:]:
        items = child if isinstance(child, list) else [child]
        for c in items:
            bad = _undeclared(c, scope)
            if bad:
                return bad
    return None


def _cost(node):
    """(cost, size) upper bounds of NODE, after cel-go's static estimator
    (checker/cost.go): 1 per call, select and index, 10 per list literal,
    string scans at 0.1 per byte, regular expressions at 0.25 per byte of
    input per byte of pattern, and a comprehension costing its body (plus
    2 for the loop step) once per element of the iterated collection.
    SIZE is the largest length of a string, list or map result (None when
    it has no length)."""
    if not isinstance(node, tuple) or not node:
        return 0, None
    kind = node[0]
    if kind == "lit":
        v = node[1]
        return 0, (len(v) if isinstance(v, str) else None)
    if kind == "ident":
        return 1, (None if node[1] == "device" else MAX_STRING)
    if kind == "list":
        costs = [_cost(x)[0] for x in node[1]]
        return 10 + sum(costs), len(node[1])
    if kind == "select":
        c, _ = _cost(node[1])
        sized = node[2] in ("attributes", "capacity")
        return 1 + c, (MAX_ENTRIES if sized else MAX_STRING)
    if kind == "index":
        c1, s1 = _cost(node[1])
        c2, _ = _cost(node[2])
        return 1 + c1 + c2, (MAX_ENTRIES if s1 == MAX_ENTRIES and
                             node[1][0] == "select" else MAX_STRING)
    if kind in ("and", "or"):
        return _cost(node[1])[0] + _cost(node[2])[0], None
    if kind == "cond":
        return _cost(node[1])[0] + max(_cost(node[2])[0],
                                       _cost(node[3])[0]), None
    if kind in ("not", "neg"):
        return 1 + _cost(node[1])[0], None
    if kind == "bin":
        (ca, sa), (cb, sb) = _cost(node[2]), _cost(node[3])
        extra = math.ceil(min(sa or 0, sb or 0) * 0.1)
        return 1 + ca + cb + extra, None
    if kind == "call":
        return _call_cost(node)
    if kind == "macro":
        tc, ts = _cost(node[2])
        n = ts if ts is not None else UNBOUNDED
        body = sum(_cost(b)[0] for b in node[4])
        return tc + n * (body + 2), (ts if node[1] in ("map", "filter")
                                     else None)
    if kind == "map":
        return 30 + sum(_cost(k)[0] + _cost(v)[0] for k, v in node[1]), \
            len(node[1])
    total = 1
    for child in node[1:]:
        for c in (child if isinstance(child, list) else [child]):
            total += _cost(c)[0]
    return total, None


def _call_cost(node):
    """Cost of a function, method or macro call."""
    name, target, args = node[1], node[2], node[3] if len(node) > 3 else []
    tc, ts = _cost(target) if target is not None else (0, None)
    if name in MACROS and target is not None and len(args) == 2:
        n = ts if ts is not None else UNBOUNDED
        body, _ = _cost(args[1])
        return tc + n * (body + 2), (ts if name in ("map", "filter")
                                     else None)
    arg = [_cost(a) for a in args]
    c = 1 + tc + sum(x[0] for x in arg)
    if name in STRING_SCAN:
        c += math.ceil((ts or 0) * 0.1)
        return c, (ts if name not in ("indexOf", "lastIndexOf") else None)
    if name in REGEX:
        pat = (arg[0][1] if arg else None) or MAX_STRING
        c += math.ceil((ts or 0) * pat * 0.25)
    return c, None


def selector_errors(expr, path):
    """Errors of one CEL selector expression at PATH (a new expression:
    stored ones are not checked again)."""
    try:
        ast = cel._Parser(expr).parse()
    except cel.CelError as e:
        return [FieldError("Invalid", path, expr, _syntax_detail(expr, e))]
    except RecursionError:
        return [FieldError("Invalid", path, expr, "compilation failed: "
                           "ERROR: <input>:1:1: expression nested too "
                           "deeply")]
    if _depth(ast) > MAX_RECURSION:
        return [FieldError("Invalid", path, expr, "compilation failed: "
                           "ERROR: <input>:-1:0: expression recursion "
                           "limit exceeded: %d" % MAX_RECURSION)]
    bad = _undeclared(ast, {"device"})
    if bad:
        return [FieldError("Invalid", path, expr, "compilation failed: "
                           "ERROR: <input>:1:1: undeclared reference to "
                           "'%s' (in container '')" % bad)]
    if _cost(ast)[0] > CEL_MAX_COST:
        return [FieldError("Forbidden", path, None,
                           "too complex, exceeds cost limit")]
    return []


def estimated_cost(expr):
    """The static cost estimate of EXPR (for tests and figures)."""
    return _cost(cel._Parser(expr).parse())[0]


# ------------------------------------------------------- opaque parameters

def csi_driver_name(name, path, errs):
    """corevalidation.ValidateCSIDriverName."""
    if not name:
        errs.append(FieldError("Required", path))
        return
    if len(name) > 63:
        errs.append(FieldError("TooLong", path, None,
                               "may not be more than 63 bytes"))
    dns_subdomain(name.lower(), path, errs, value=name)


def raw_parameters(params, path, errs):
    """validateRawExtension for new opaque parameters: present, at most
    10 KiB of JSON, a JSON object (the size is that of the compact JSON
    encoding of what was decoded)."""
    if params is None:
        errs.append(FieldError("Required", path))
        return
    size = len(json.dumps(params, separators=(",", ":")).encode())
    if size > OPAQUE_MAX:
        errs.append(FieldError("TooLong", path, None,
                               "may not be more than %d bytes" % OPAQUE_MAX))
    elif not isinstance(params, dict):
        errs.append(FieldError("Invalid", path, "<value omitted>",
                               "must be a valid JSON object"))


# ------------------------------------------------------------ admin access

def claim_spec(obj):
    """The ResourceClaimSpec of a ResourceClaim, or None."""
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else None


def template_claim_spec(obj):
    """The ResourceClaimSpec of a ResourceClaimTemplate, or None."""
    spec = (obj.get("spec") or {}).get("spec")
    return spec if isinstance(spec, dict) else None


def admin_access_errors(spec_of, obj, ns_labels):
    """AuthorizedForAdmin: adminAccess on a request of the claim spec
    SPEC_OF(obj) needs the namespace label
    resource.kubernetes.io/admin-access=true (checked on create; the spec
    is immutable afterwards). Not checked with DRAAdminAccess off (the
    field is dropped then)."""
    spec = spec_of(obj)
    if spec is None or not release.gate(None, "DRAAdminAccess"):
        return []
    reqs = (spec.get("devices") or {}).get("requests") or []
    for i, r in enumerate(reqs if isinstance(reqs, list) else []):
        ex = r.get("exactly") if isinstance(r, dict) else None
        if isinstance(ex, dict) and ex.get("adminAccess") is True:
            if (ns_labels or {}).get(ADMIN_LABEL) == "true":
                return []
            return [FieldError("Forbidden", "spec.devices.requests[%d]."
                               "adminAccess" % i, None, ADMIN_MSG)]
    return []


# ------------------------------------------------- alpha-gated fields dropped

def _uses(spec, test):
    """True when any request or constraint of SPEC satisfies TEST."""
    return any(test(x) for x in _gated_items(spec))


def _gated_items(spec):
    """(kind, dict) of every request body and constraint of a claim spec."""
    dev = (spec or {}).get("devices") if isinstance(spec, dict) else None
    if not isinstance(dev, dict):
        return []
    out = []
    for r in dev.get("requests") or []:
        if not isinstance(r, dict):
            continue
        if isinstance(r.get("exactly"), dict):
            out.append(("request", r["exactly"]))
        for s in r.get("firstAvailable") or []:
            if isinstance(s, dict):
                out.append(("request", s))
    for c in dev.get("constraints") or []:
        if isinstance(c, dict):
            out.append(("constraint", c))
    return out


# field -> (where it lives, the feature gate that guards it)
GATED = (("tolerations", "request", "DRADeviceTaints"),
         ("capacity", "request", "DRAConsumableCapacity"),
         ("distinctAttribute", "constraint", "DRAConsumableCapacity"),
         ("adminAccess", "request", "DRAAdminAccess"))


def drop_disabled_class(obj, old):
    """Drop a DeviceClass's extendedResourceName while DRAExtendedResource
    is off (alpha in 1.34 and 1.35) unless the stored object already uses
    it."""
    spec = obj.get("spec")
    was = (old or {}).get("spec") or {}
    if isinstance(spec, dict) and "extendedResourceName" in spec and \
            not was.get("extendedResourceName") and \
            not release.gate(None, "DRAExtendedResource"):
        del spec["extendedResourceName"]


def drop_disabled(spec_of, obj, old):
    """Drop the fields of features that are off in the release played
    from the claim spec SPEC_OF(obj), unless the stored object already
    uses them."""
    spec = spec_of(obj)
    if spec is None:
        return
    old_spec = spec_of(old) if old else None
    for field, where, gate in GATED:
        if release.gate(None, gate):
            continue
        if old_spec is not None and _uses(old_spec, lambda x: x[0] == where
                                          and x[1].get(field) is not None):
            continue
        for kind, item in _gated_items(spec):
            if kind == where:
                item.pop(field, None)
