# SPDX-License-Identifier: Apache-2.0
"""Validation of custom resources against their CRD's structural schema
(type, required, enum, bounds, lengths), worded as apiextensions does."""

from .schema import type_name
from .validation import FieldError

_TYPES = {"string": (str,), "boolean": (bool,), "object": (dict,),
          "array": (list,), "integer": (int,), "number": (int, float)}
MAX_ERRORS = 50


# the JSON type names the OpenAPI validator reports, bool before int
_TYPE_NAMES = ((bool, "boolean"), (int, "integer"), (float, "number"),
               (str, "string"), (list, "array"), (dict, "object"))


def _type_ok(v, t):
    """True when v has the schema type t."""
    if t is None:
        return True
    if isinstance(v, bool) and t in ("integer", "number"):
        return False
    return isinstance(v, _TYPES.get(t, (object,)))


def _scalar_checks(s, v, path, errs):
    """enum, bounds and lengths of one value."""
    if "enum" in s and v not in s["enum"]:
        errs.append(FieldError("NotSupported", path, v, "supported values: " +
                               ", ".join('"%s"' % e if isinstance(e, str)
                                         else str(e) for e in s["enum"])))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            errs.append(FieldError("Invalid", path, v, "%s in body should be "
                                   "greater than or equal to %s" %
                                   (path, s["minimum"])))
        if "maximum" in s and v > s["maximum"]:
            errs.append(FieldError("Invalid", path, v, "%s in body should be "
                                   "less than or equal to %s" %
                                   (path, s["maximum"])))
    if isinstance(v, str):
        if "maxLength" in s and len(v) > s["maxLength"]:
            errs.append(FieldError("TooLong", path, None, "may not be more "
                                   "than %d bytes" % s["maxLength"]))
        if "minLength" in s and len(v) < s["minLength"]:
            errs.append(FieldError("Invalid", path, v, "%s in body should be "
                                   "at least %d chars long" %
                                   (path, s["minLength"])))
    if isinstance(v, list) and "maxItems" in s and len(v) > s["maxItems"]:
        errs.append(FieldError("TooMany", path, len(v), "must have at most "
                               "%d items" % s["maxItems"]))


def check(s, v, path, errs):
    """Append the schema errors of value v at path."""
    if not isinstance(s, dict) or len(errs) >= MAX_ERRORS:
        return
    if v is None:
        if not s.get("nullable"):
            errs.append(FieldError("Invalid", path, "null", "%s in body must "
                                   "be of type %s: \"null\"" %
                                   (path, s.get("type", "object"))))
        return
    t = s.get("type")
    if s.get("x-kubernetes-int-or-string"):
        t = None if isinstance(v, (int, str)) and not isinstance(
            v, bool) else "integer"
    if not _type_ok(v, t):
        got = type_name(v, _TYPE_NAMES)
        errs.append(FieldError("Invalid", path, got, "%s in body must be of "
                               "type %s: \"%s\"" % (path, t, got)))
        return
    _scalar_checks(s, v, path, errs)
    if isinstance(v, dict):
        for r in s.get("required") or []:
            if r not in v:
                errs.append(FieldError("Required", path + "." + r))
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        for k, x in v.items():
            if k in props:
                check(props[k], x, path + "." + k, errs)
            elif isinstance(extra, dict):
                check(extra, x, path + "[" + k + "]", errs)
    elif isinstance(v, list) and isinstance(s.get("items"), dict):
        for i, x in enumerate(v):
            check(s["items"], x, "%s[%d]" % (path, i), errs)


def validate(schemas, obj, old, errs):
    """Schema errors of a custom resource (metadata is checked elsewhere)
    against SCHEMAS, its CRD's openAPIV3Schema by version; on a create
    and an update (OLD) alike."""
    ver = obj.get("apiVersion", "").rpartition("/")[2]
    sch = (schemas or {}).get(ver)
    if not isinstance(sch, dict):
        return
    props = sch.get("properties") or {}
    for r in sch.get("required") or []:
        if r not in obj and r not in ("apiVersion", "kind", "metadata"):
            errs.append(FieldError("Required", r))
    for k, v in obj.items():
        if k in ("apiVersion", "kind", "metadata"):
            continue
        if k in props:
            check(props[k], v, k, errs)
