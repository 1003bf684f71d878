# SPDX-License-Identifier: Apache-2.0
"""Decoding of the Kubernetes protobuf encoding for the kinds typed clients
(kubectl create namespace / quota / configmap / secret / serviceaccount /
role / rolebinding / clusterrole / clusterrolebinding) send as protobuf:
the messages below, which kinds.py names in their kinds' descriptors.

Envelope: b"k8s\\x00" + runtime.Unknown{typeMeta=1{apiVersion=1, kind=2},
raw=2, contentEncoding=3, contentType=4}; raw is the kind's message."""

import base64

from .hooks import err_bad_request

MAGIC = b"k8s\x00"
MAX_DEPTH = 32

# Message schemas: field number -> (json name, type) where type is "str",
# "int", "bool", "bytes", a schema dict (message), ("rep", t) for repeated
# fields and ("map", t) for map<string, t>.
QUANTITY = {1: ("string", "str")}
TIME = {1: ("seconds", "int"), 2: ("nanos", "int")}
OWNER = {1: ("kind", "str"), 3: ("name", "str"), 4: ("uid", "str"),
         5: ("apiVersion", "str"), 6: ("controller", "bool"),
         7: ("blockOwnerDeletion", "bool")}
META = {1: ("name", "str"), 2: ("generateName", "str"),
        3: ("namespace", "str"), 5: ("uid", "str"),
        6: ("resourceVersion", "str"), 7: ("generation", "int"),
        8: ("creationTimestamp", TIME), 9: ("deletionTimestamp", TIME),
        10: ("deletionGracePeriodSeconds", "int"),
        11: ("labels", ("map", "str")), 12: ("annotations", ("map", "str")),
        13: ("ownerReferences", ("rep", OWNER)),
        14: ("finalizers", ("rep", "str"))}
NAMESPACE = {1: ("metadata", META),
             2: ("spec", {1: ("finalizers", ("rep", "str"))}),
             3: ("status", {1: ("phase", "str")})}
SCOPE_REQ = {1: ("scopeName", "str"), 2: ("operator", "str"),
             3: ("values", ("rep", "str"))}
QUOTA_SPEC = {1: ("hard", ("map", QUANTITY)), 2: ("scopes", ("rep", "str")),
              3: ("scopeSelector", {1: ("matchExpressions",
                                        ("rep", SCOPE_REQ))})}
QUOTA = {1: ("metadata", META), 2: ("spec", QUOTA_SPEC),
         3: ("status", {1: ("hard", ("map", QUANTITY)),
                        2: ("used", ("map", QUANTITY))})}
CONFIGMAP = {1: ("metadata", META), 2: ("data", ("map", "str")),
             3: ("binaryData", ("map", "b64")), 4: ("immutable", "bool")}
SECRET = {1: ("metadata", META), 2: ("data", ("map", "b64")),
          3: ("type", "str"), 4: ("stringData", ("map", "str")),
          5: ("immutable", "bool")}
OBJREF = {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"),
          4: ("uid", "str"), 5: ("apiVersion", "str"),
          6: ("resourceVersion", "str"), 7: ("fieldPath", "str")}
SERVICEACCOUNT = {1: ("metadata", META), 2: ("secrets", ("rep", OBJREF)),
                  3: ("imagePullSecrets", ("rep", {1: ("name", "str")})),
                  4: ("automountServiceAccountToken", "bool")}
RULE = {1: ("verbs", ("rep", "str")), 2: ("apiGroups", ("rep", "str")),
        3: ("resources", ("rep", "str")),
        4: ("resourceNames", ("rep", "str")),
        5: ("nonResourceURLs", ("rep", "str"))}
SELECTOR = {1: ("matchLabels", ("map", "str")),
            2: ("matchExpressions", ("rep", {
                1: ("key", "str"), 2: ("operator", "str"),
                3: ("values", ("rep", "str"))}))}
ROLE = {1: ("metadata", META), 2: ("rules", ("rep", RULE))}
CLUSTERROLE = dict(ROLE)
CLUSTERROLE[3] = ("aggregationRule", {1: ("clusterRoleSelectors",
                                          ("rep", SELECTOR))})
BINDING = {1: ("metadata", META),
           2: ("subjects", ("rep", {1: ("kind", "str"), 2: ("apiGroup", "str"),
                                    3: ("name", "str"),
                                    4: ("namespace", "str")})),
           3: ("roleRef", {1: ("apiGroup", "str"), 2: ("kind", "str"),
                           3: ("name", "str")})}
# Options typed clients send as protobuf with a DELETE (helm uninstall):
# meta.k8s.io/v1 DeleteOptions.
DELETE_OPTIONS = {1: ("gracePeriodSeconds", "int"),
                  2: ("preconditions", {1: ("uid", "str"),
                                        2: ("resourceVersion", "str")}),
                  3: ("orphanDependents", "bool"),
                  4: ("propagationPolicy", "str"),
                  5: ("dryRun", ("rep", "str"))}
OPTIONS = {"DeleteOptions": DELETE_OPTIONS}


def _varint(buf, i):
    """Read a varint at i; returns (value, next index)."""
    shift = val = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        val |= (b & 0x7f) << shift
        if not b & 0x80:
            return val, i
        shift += 7


def fields(buf):
    """Yield (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("truncated field")
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        yield num, wt, v


def _scalar(t, v, depth):
    """Convert one field value."""
    if t == "str":
        return bytes(v).decode("utf-8")
    if t == "int":
        return v - (1 << 64) if v >= 1 << 63 else v
    if t == "bool":
        return bool(v)
    if t == "bytes":
        return bytes(v)
    if t == "b64":
        return base64.b64encode(bytes(v)).decode()
    return decode(v, t, depth + 1)


def _time(d):
    """A metav1.Time message as RFC 3339."""
    import time
    return time.strftime("%Y-%m-%dT%H:%M:%SZ",
                         time.gmtime(d.get("seconds", 0)))


def decode(buf, schema, depth=0):
    """Decode a message into a JSON-like dict following schema."""
    if depth > MAX_DEPTH:
        raise ValueError("nesting too deep")
    out = {}
    for num, _, v in fields(buf):
        if num not in schema:
            continue
        name, t = schema[num]
        if isinstance(t, tuple) and t[0] == "rep":
            out.setdefault(name, []).append(_scalar(t[1], v, depth))
        elif isinstance(t, tuple) and t[0] == "map":
            k, val = "", None
            for n2, _, v2 in fields(v):
                if n2 == 1:
                    k = bytes(v2).decode("utf-8")
                elif n2 == 2:
                    val = _scalar(t[1], v2, depth)
            if t[1] is QUANTITY:
                val = (val or {}).get("string", "0")
            out.setdefault(name, {})[k] = val if val is not None else ""
        else:
            val = _scalar(t, v, depth)
            if t is TIME:
                val = _time(val)
            if val != "" and not (t == "int" and val == 0):
                out[name] = val
    return out


def decode_object(body):
    """A protobuf-encoded object as a JSON dict (400 if unsupported)."""
    if not body.startswith(MAGIC):
        raise err_bad_request("the object provided is unrecognized: missing "
                              "protobuf envelope")
    from .kinds import proto_message  # kinds.py imports this module
    try:
        env = {n: v for n, _, v in fields(body[len(MAGIC):])}
        tm = {n: bytes(v).decode() for n, _, v in fields(env.get(1, b""))}
        av, kind = tm.get(1, ""), tm.get(2, "")
        schema = proto_message(kind) or OPTIONS.get(kind)
        if schema is None:
            raise err_bad_request("protobuf encoding of %s is not supported "
                                  "by the simulator; send JSON" % kind)
        obj = decode(env.get(2, b""), schema)
    except (ValueError, UnicodeDecodeError) as e:
        raise err_bad_request("the object provided is unrecognized: %s" % e)
    out = {"apiVersion": av, "kind": kind}
    out.update(obj)
    return out
