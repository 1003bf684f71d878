# SPDX-License-Identifier: Apache-2.0
"""Defaulting and validation of the built-in types, with the real server's
field paths and error texts (pkg/apis/*/validation)."""

import base64
import re

DNS1123_LABEL_RE = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
DNS1123_SUB_RE = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?'
                            r'(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')
LABEL_VALUE_RE = re.compile(r'^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')
DNS1035_RE = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric "
               "characters or '-', start with an alphabetic character, and "
               "end with an alphanumeric character (e.g. 'my-name',  or "
               "'abc-123', regex used for validation is "
               "'[a-z]([-a-z0-9]*[a-z0-9])?')")
QNAME_RE = re.compile(r'^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$')

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case "
             "alphanumeric characters or '-', and must start and end with an "
             "alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
             "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUB_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
           "alphanumeric characters, '-' or '.', and must start and end with "
           "an alphanumeric character (e.g. 'example.com', regex used for "
           "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
           "([-a-z0-9]*[a-z0-9])?)*')")
VALUE_MSG = ("a valid label must be an empty string or consist of "
             "alphanumeric characters, '-', '_' or '.', and must start and "
             "end with an alphanumeric character (e.g. 'MyValue',  or "
             "'my_value',  or '12345', regex used for validation is "
             "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
QNAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' "
             "or '.', and must start and end with an alphanumeric character "
             "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
             "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


class GoValue:
    """A value that prints verbatim in an error (a Go %#v rendering)."""

    def __init__(self, text):
        self.text = text


def go_repr(v):
    """Render a value as the Go field errors do."""
    if isinstance(v, GoValue):
        return v.text
    if isinstance(v, str):
        return '"' + v.replace('\\', '\\\\').replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


class FieldError:
    """One field.Error: type, field path, value, detail."""

    TYPES = {"Required": ("FieldValueRequired", "Required value"),
             "Invalid": ("FieldValueInvalid", "Invalid value"),
             "NotFound": ("FieldValueNotFound", "Not found"),
             "Duplicate": ("FieldValueDuplicate", "Duplicate value"),
             "Forbidden": ("FieldValueForbidden", "Forbidden"),
             "NotSupported": ("FieldValueNotSupported", "Unsupported value"),
             "TooMany": ("FieldValueTooMany", "Too many"),
             "TooLong": ("FieldValueTooLong", "Too long")}

    def __init__(self, kind, field, value=None, detail=""):
        self.kind = kind
        self.field = field
        self.value = value
        self.detail = detail

    def body(self):
        """The error text without the field path (Status cause message)."""
        label = self.TYPES[self.kind][1]
        if self.kind in ("Required", "Forbidden", "TooLong"):
            s = label
        else:
            s = label + ": " + go_repr(self.value)
        if self.detail:
            s += ": " + self.detail
        return s

    def error(self):
        """'field: body', as in the Status message."""
        return self.field + ": " + self.body()

    def cause(self):
        """The Status cause."""
        return {"reason": self.TYPES[self.kind][0], "message": self.body(),
                "field": self.field}


def _dns_name(name, path, errs, limit, regex, msg, value):
    """Append the errors of a name longer than LIMIT or not matching REGEX
    (MSG says what it must be); the errors show VALUE."""
    if len(name) > limit:
        errs.append(FieldError("Invalid", path, value,
                               "must be no more than %d characters" % limit))
    if not regex.match(name):
        errs.append(FieldError("Invalid", path, value, msg))


def dns_label(name, path, errs):
    """Append errors for a value that must be an RFC 1123 label."""
    _dns_name(name, path, errs, 63, DNS1123_LABEL_RE, LABEL_MSG, name)


def dns1035_label(name, path, errs):
    """Append errors for a value that must be a DNS-1035 label (Service
    names)."""
    _dns_name(name, path, errs, 63, DNS1035_RE, DNS1035_MSG, name)


def path_segment(name, path, errs):
    """Append errors for a name that must be a path segment (RBAC
    objects: "system:foo" is fine)."""
    if name in (".", ".."):
        errs.append(FieldError("Invalid", path, name, "may not be '%s'" %
                               name))
    for bad in ("/", "%"):
        if bad in name:
            errs.append(FieldError("Invalid", path, name,
                                   "may not contain '%s'" % bad))


def dns_subdomain(name, path, errs, value=None):
    """Append errors for a value that must be an RFC 1123 subdomain (the
    errors show VALUE when given, else NAME)."""
    _dns_name(name, path, errs, 253, DNS1123_SUB_RE, SUB_MSG,
              name if value is None else value)


def _qualified_name(key, path, errs):
    """Validate a label/annotation key (optional DNS prefix + name)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS1123_SUB_RE.match(prefix)):
        errs.append(FieldError("Invalid", path, key, "prefix part " +
                               SUB_MSG))
    if not name or len(name) > 63 or not QNAME_RE.match(name):
        errs.append(FieldError("Invalid", path, key, QNAME_MSG))


def no_name_rule(name, path, errs):
    """The name rule of kinds whose names are not checked beyond being
    set (Events, Leases)."""


def validate_meta(obj, name_rule, errs):
    """ObjectMeta checks shared by every kind; NAME_RULE(name, path, errs)
    is the kind's rule for metadata.name (dns_subdomain, dns_label ...)."""
    md = obj.get("metadata") or {}
    name = md.get("name") or ""
    if not name:
        errs.append(FieldError("Required", "metadata.name", None,
                               "name or generateName is required"))
    else:
        name_rule(name, "metadata.name", errs)
    for k, v in (md.get("labels") or {}).items():
        _qualified_name(k, "metadata.labels", errs)
        if not isinstance(v, str) or len(v) > 63 or \
                not LABEL_VALUE_RE.match(v):
            errs.append(FieldError("Invalid", "metadata.labels", v,
                                   VALUE_MSG))
    size = 0
    for k, v in (md.get("annotations") or {}).items():
        _qualified_name(k.lower(), "metadata.annotations", errs)
        size += len(k) + len(v if isinstance(v, str) else "")
    if size > 256 * 1024:
        errs.append(FieldError("TooLong", "metadata.annotations", None,
                               "may not be more than 262144 bytes"))


# --- defaulting -------------------------------------------------------------

def _default_container(c):
    """Defaults the API server fills into a container."""
    c.setdefault("resources", {})
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    img = c.get("image") or ""
    tail = img.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        latest = "@" not in img and (":" not in tail or
                                     tail.endswith(":latest"))
        c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"


def _default_pod_spec(spec):
    """PodSpec defaults (SetDefaults_PodSpec and the containers')."""
    for f in ("containers", "initContainers"):
        for c in spec.get(f) or []:
            if isinstance(c, dict):
                _default_container(c)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)


def default_pod(obj):
    """Pod defaults (pkg/apis/core/v1/defaults.go, the parts clients see)."""
    spec = obj.setdefault("spec", {})
    _default_pod_spec(spec)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    st = obj.setdefault("status", {})
    st.setdefault("phase", "Pending")
    if "qosClass" not in st:
        res = [c.get("resources") or {} for c in spec.get("containers") or []
               if isinstance(c, dict)]
        any_set = any(r.get("requests") or r.get("limits") for r in res)
        st["qosClass"] = "Burstable" if any_set else "BestEffort"


def _default_request(r):
    """ExactCount / count 1 defaults of a device request."""
    if isinstance(r, dict):
        r.setdefault("allocationMode", "ExactCount")
        if r["allocationMode"] == "ExactCount":
            r.setdefault("count", 1)


def default_claim_spec(spec):
    """Defaults of a ResourceClaimSpec."""
    if not isinstance(spec, dict):
        return
    for req in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(req, dict):
            continue
        if isinstance(req.get("exactly"), dict):
            _default_request(req["exactly"])
        for sub in req.get("firstAvailable") or []:
            _default_request(sub)


def default_webhooks(obj):
    """MutatingWebhookConfiguration defaults."""
    for w in obj.get("webhooks") or []:
        if not isinstance(w, dict):
            continue
        w.setdefault("failurePolicy", "Fail")
        w.setdefault("matchPolicy", "Equivalent")
        w.setdefault("namespaceSelector", {})
        w.setdefault("objectSelector", {})
        w.setdefault("timeoutSeconds", 10)
        w.setdefault("reinvocationPolicy", "Never")
        svc = (w.get("clientConfig") or {}).get("service")
        if isinstance(svc, dict):
            svc.setdefault("port", 443)
        for r in w.get("rules") or []:
            if isinstance(r, dict):
                r.setdefault("scope", "*")


def default_match_resources(mr):
    """admissionregistration/v1 MatchResources defaults."""
    if not isinstance(mr, dict):
        return
    mr.setdefault("matchPolicy", "Equivalent")
    mr.setdefault("namespaceSelector", {})
    mr.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for r in mr.get(key) or []:
            if isinstance(r, dict):
                r.setdefault("scope", "*")


def default_policy(obj):
    """ValidatingAdmissionPolicy defaults."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("failurePolicy", "Fail")
        default_match_resources(spec.get("matchConstraints"))


def default_policy_binding(obj):
    """ValidatingAdmissionPolicyBinding defaults."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        default_match_resources(spec.get("matchResources"))


def default_deployment(obj):
    """apps/v1 SetDefaults_Deployment plus the pod template's defaults."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    st = spec.setdefault("strategy", {})
    if isinstance(st, dict):
        st.setdefault("type", "RollingUpdate")
        if st["type"] == "RollingUpdate":
            ru = st.setdefault("rollingUpdate", {})
            if isinstance(ru, dict):
                ru.setdefault("maxUnavailable", "25%")
                ru.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    tmpl = spec.get("template")
    if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict):
        _default_pod_spec(tmpl["spec"])


def default_service(obj):
    """v1 SetDefaults_Service (no cluster IP allocation here)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for p in spec.get("ports") or []:
        if not isinstance(p, dict):
            continue
        p.setdefault("protocol", "TCP")
        if p.get("targetPort") in (None, 0, ""):
            p["targetPort"] = p.get("port")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")


def default_secret(obj):
    """Secret: type Opaque; stringData folded into data (base64), as the
    v1 conversion does."""
    if not obj.get("type"):
        obj["type"] = "Opaque"
    sd = obj.pop("stringData", None)
    if isinstance(sd, dict) and sd:
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        for k, v in sd.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data


def default_namespace(obj):
    """Namespace defaults: the kubernetes finalizer, phase Active."""
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def label_namespace_name(obj):
    """The kubernetes.io/metadata.name label of a Namespace (set once its
    name is final)."""
    md = obj["metadata"]
    md.setdefault("labels", {})["kubernetes.io/metadata.name"] = \
        md.get("name", "")


def default_claim(obj):
    """ResourceClaim defaults."""
    default_claim_spec(obj.get("spec"))


def default_claim_template(obj):
    """ResourceClaimTemplate defaults (of the claim spec inside)."""
    default_claim_spec((obj.get("spec") or {}).get("spec"))


def default_crd(obj):
    """CustomResourceDefinition defaults."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("conversion", {"strategy": "None"})
    spec.setdefault("scope", "Namespaced")
