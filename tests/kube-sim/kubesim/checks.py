# SPDX-License-Identifier: Apache-2.0
"""Kind-specific validation: Pods (resource claims), resource.k8s.io/v1,
CRDs, webhook configurations and Events."""

from . import drafeat, dravalid, release
from .selector import match_label_selector_obj
from .validation import (FieldError, GoValue, dns_label, dns_subdomain,
                         validate_meta)

MAX_REQUESTS = 32
MAX_SELECTORS = 32
MAX_CONSTRAINTS = 32
MAX_CONFIG = 32
MAX_SUBREQUESTS = 8
MAX_DEVICES = 128
MAX_ATTRS = 32
MAX_CEL = 10 * 1024


def _claim_value(c):
    """Go's %#v of a core.PodResourceClaim."""
    def ptr(v, n):
        return "(*string)(nil)" if v is None else "(*string)(0xc00001%04x)" % n
    return GoValue('core.PodResourceClaim{Name:%s, ResourceClaimName:%s, '
                   'ResourceClaimTemplateName:%s}' % (
                       '"%s"' % (c.get("name") or ""),
                       ptr(c.get("resourceClaimName"), 0x10),
                       ptr(c.get("resourceClaimTemplateName"), 0x20)))


def _pod_claims(spec, errs):
    """validatePodResourceClaim for each spec.resourceClaims entry."""
    names = set()
    for i, c in enumerate(spec.get("resourceClaims") or []):
        p = "spec.resourceClaims[%d]" % i
        if not isinstance(c, dict):
            errs.append(FieldError("Invalid", p, str(c), "must be an object"))
            continue
        n = c.get("name") or ""
        if not n:
            errs.append(FieldError("Required", p + ".name"))
        elif n in names:
            errs.append(FieldError("Duplicate", p + ".name", n))
        else:
            dns_label(n, p + ".name", errs)
            names.add(n)
        rcn, rctn = c.get("resourceClaimName"), c.get(
            "resourceClaimTemplateName")
        if rcn is not None and rctn is not None:
            errs.append(FieldError("Invalid", p, _claim_value(c),
                                   "at most one of `resourceClaimName` or "
                                   "`resourceClaimTemplateName` may be "
                                   "specified"))
        if rcn is None and rctn is None:
            errs.append(FieldError("Invalid", p, _claim_value(c),
                                   "must specify one of: `resourceClaimName`"
                                   ", `resourceClaimTemplateName`"))
        if rcn is not None:
            dns_subdomain(rcn, p + ".resourceClaimName", errs)
        if rctn is not None:
            dns_subdomain(rctn, p + ".resourceClaimTemplateName", errs)
    return names


def _container_claims(claims, pod_names, path, errs):
    """validateResourceClaimNames for one container."""
    seen = set()
    for j, cl in enumerate(claims or []):
        p = "%s[%d]" % (path, j)
        name = (cl or {}).get("name") or ""
        if not name:
            errs.append(FieldError("Required", p))
            continue
        key = name
        if cl.get("request"):
            dns_label(cl["request"], p + ".request", errs)
            key += "/" + cl["request"]
        if key in seen:
            errs.append(FieldError("Duplicate", p, name))
        seen.add(key)
        if name not in pod_names:
            d = "must be one of the names in pod.spec.resourceClaims"
            if pod_names:
                d += ": " + ", ".join(sorted(pod_names))
            else:
                d += " which is empty"
            errs.append(FieldError("NotFound", p, name, d))


def _at_most(items, cap, path, errs):
    """The TooMany error of a list of more than CAP items."""
    if len(items) > cap:
        errs.append(FieldError("TooMany", path, len(items),
                               "must have at most %d items" % cap))


def _unique_label(n, path, seen, errs):
    """A required DNS-label name, unique among SEEN (which gets it); whether
    it was given."""
    if not n:
        errs.append(FieldError("Required", path))
        return False
    dns_label(n, path, errs)
    if n in seen:
        errs.append(FieldError("Duplicate", path, n))
    seen.add(n)
    return True


def _containers(spec, field, pod_names, errs, all_names):
    """Names, images and claim references of one container list."""
    for i, c in enumerate(spec.get(field) or []):
        p = "spec.%s[%d]" % (field, i)
        if not isinstance(c, dict):
            errs.append(FieldError("Invalid", p, str(c), "must be an object"))
            continue
        _unique_label(c.get("name") or "", p + ".name", all_names, errs)
        if not c.get("image") and field != "ephemeralContainers":
            errs.append(FieldError("Required", p + ".image"))
        res = c.get("resources") or {}
        if field == "ephemeralContainers":
            if res:
                errs.append(FieldError("Forbidden", p + ".resources", None,
                                       "cannot be set for an Ephemeral "
                                       "Container"))
            continue
        _container_claims(res.get("claims"), pod_names,
                          p + ".resources.claims", errs)


def validate_pod(obj, old, errs):
    """Pod spec validation (the parts kpgpud depends on)."""
    spec = obj.get("spec") or {}
    names = _pod_claims(spec, errs)
    if not spec.get("containers"):
        errs.append(FieldError("Required", "spec.containers"))
    all_names = set()
    for f in ("initContainers", "containers", "ephemeralContainers"):
        _containers(spec, f, names, errs, all_names)
    if old is None and spec.get("ephemeralContainers"):
        errs.append(FieldError("Forbidden", "spec.ephemeralContainers", None,
                               "cannot be set on create"))
    if old is not None:
        _pod_update(obj, old, errs)


def _strip_images(spec):
    """A pod spec with the mutable fields blanked, for comparison."""
    s = dict(spec)
    for f in ("containers", "initContainers"):
        s[f] = [dict(c, image=None) for c in s.get(f) or []
                if isinstance(c, dict)]
    for f in ("activeDeadlineSeconds", "tolerations",
              "terminationGracePeriodSeconds", "ephemeralContainers",
              "schedulingGates", "nodeName"):
        s.pop(f, None)
    return s


def _pod_update(obj, old, errs):
    """ValidatePodUpdate: the spec is immutable except a few fields."""
    if _strip_images(obj.get("spec") or {}) != _strip_images(
            old.get("spec") or {}):
        errs.append(FieldError(
            "Forbidden", "spec", None, "pod updates may not change fields "
            "other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
            "`spec.tolerations` (only additions to existing tolerations),"
            "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
            "if it was previously negative)"))


def _selectors(sels, path, errs, compile_cel=True):
    """DeviceSelector list checks; new CEL expressions are compiled and
    cost-checked (stored ones are not checked again)."""
    _at_most(sels or [], MAX_SELECTORS, path, errs)
    for i, s in enumerate(sels or []):
        p = "%s[%d]" % (path, i)
        cel = (s or {}).get("cel")
        if not isinstance(cel, dict):
            errs.append(FieldError("Required", p + ".cel"))
            continue
        e = cel.get("expression") or ""
        if not e:
            errs.append(FieldError("Required", p + ".cel.expression"))
        elif len(e) > MAX_CEL:
            errs.append(FieldError("TooLong", p + ".cel.expression", None,
                                   "may not be more than %d bytes" % MAX_CEL))
        elif compile_cel:
            errs.extend(dravalid.selector_errors(e, p + ".cel.expression"))


def _exact(r, path, errs, sub=False):
    """ExactDeviceRequest / DeviceSubRequest checks."""
    dc = r.get("deviceClassName") or ""
    if not dc:
        errs.append(FieldError("Required", path + ".deviceClassName"))
    else:
        dns_subdomain(dc, path + ".deviceClassName", errs)
    _selectors(r.get("selectors"), path + ".selectors", errs)
    mode = r.get("allocationMode")
    cnt = r.get("count")
    if mode == "ExactCount":
        if cnt is None or not isinstance(cnt, int) or cnt <= 0:
            errs.append(FieldError("Invalid", path + ".count", cnt or 0,
                                   "must be greater than zero"))
    elif mode == "All":
        if cnt:
            errs.append(FieldError("Invalid", path + ".count", cnt,
                                   "must not be specified when "
                                   "allocationMode is 'All'"))
    else:
        errs.append(FieldError("NotSupported", path + ".allocationMode",
                               mode or "", 'supported values: "All", '
                               '"ExactCount"'))
    drafeat.request_errors(r, path, errs)


def _request(r, path, names, errs):
    """validateDeviceRequest."""
    n = r.get("name") or ""
    _unique_label(n, path + ".name", names, errs)
    fa, ex = r.get("firstAvailable"), r.get("exactly")
    if fa and ex is not None:
        errs.append(FieldError("Invalid", path, GoValue("null"),
                               "exactly one of `exactly` or `firstAvailable`"
                               " is required, but multiple fields are set"))
    elif not fa and ex is None:
        errs.append(FieldError("Required", path, None, "exactly one of "
                               "`exactly` or `firstAvailable` is required"))
    if isinstance(ex, dict):
        _exact(ex, path + ".exactly", errs)
    if fa:
        _at_most(fa, MAX_SUBREQUESTS, path + ".firstAvailable", errs)
        subs = set()
        for i, s in enumerate(fa):
            sp = "%s.firstAvailable[%d]" % (path, i)
            sn = (s or {}).get("name") or ""
            if _unique_label(sn, sp + ".name", subs, errs):
                names.add(n + "/" + sn)
            _exact(s or {}, sp, errs, sub=True)


def _request_refs(refs, path, names, errs):
    """Constraint/config request references must name a request."""
    for i, ref in enumerate(refs or []):
        if ref not in names:
            errs.append(FieldError("Invalid", "%s[%d]" % (path, i), ref,
                                   "must be the name of a request in the "
                                   "claim or the name of a request and a "
                                   "subrequest separated by '/'"))


def _opaque(o, path, errs, stored=False):
    """OpaqueDeviceConfiguration checks (validateOpaqueConfiguration)."""
    if not isinstance(o, dict):
        errs.append(FieldError("Required", path))
        return
    dravalid.csi_driver_name(o.get("driver") or "", path + ".driver", errs)
    if stored:
        if o.get("parameters") is None:
            errs.append(FieldError("Required", path + ".parameters"))
    else:
        dravalid.raw_parameters(o.get("parameters"), path + ".parameters",
                                errs)


def validate_claim_spec(spec, path, errs):
    """ResourceClaimSpec (v1) checks."""
    dev = (spec or {}).get("devices") or {}
    reqs = dev.get("requests") or []
    _at_most(reqs, MAX_REQUESTS, path + ".devices.requests", errs)
    names = set()
    for i, r in enumerate(reqs):
        _request(r or {}, "%s.devices.requests[%d]" % (path, i), names,
                 errs)
    for i, c in enumerate(dev.get("constraints") or []):
        p = "%s.devices.constraints[%d]" % (path, i)
        _request_refs(c.get("requests"), p + ".requests", names, errs)
        ma = c.get("matchAttribute")
        da = c.get("distinctAttribute")
        if ma is None and da is None:
            # validateDeviceConstraint: with DRAConsumableCapacity on,
            # either field (upstream's text says "multiple" here too);
            # off (1.34, 1.35), matchAttribute.
            if release.gate(None, "DRAConsumableCapacity"):
                errs.append(FieldError(
                    "Required", p, None, 'exactly one of "matchAttribute" '
                    'or "distinctAttribute" is required, but multiple '
                    'fields are set'))
            else:
                errs.append(FieldError("Required", p + ".matchAttribute"))
        for f, v in (("matchAttribute", ma), ("distinctAttribute", da)):
            if v is not None and "/" not in v:
                errs.append(FieldError("Invalid", "%s.%s" % (p, f), v,
                                       "a fully qualified name must be a "
                                       "domain and a name separated by a "
                                       "slash"))
                break
    for i, c in enumerate(dev.get("config") or []):
        p = "%s.devices.config[%d]" % (path, i)
        _request_refs(c.get("requests"), p + ".requests", names, errs)
        _opaque(c.get("opaque"), p + ".opaque", errs)
    for what, cap in (("constraints", MAX_CONSTRAINTS),
                      ("config", MAX_CONFIG)):
        _at_most(dev.get(what) or [], cap, "%s.devices.%s" % (path, what),
                 errs)


def validate_device_class(obj, old, errs):
    """DeviceClass checks; unchanged selectors and config of an update
    count as stored (validateDeviceClassSpec)."""
    spec = obj.get("spec") or {}
    was = (old or {}).get("spec") or {} if old is not None else None
    _selectors(spec.get("selectors"), "spec.selectors", errs,
               compile_cel=was is None or
               was.get("selectors") != spec.get("selectors"))
    stored = was is not None and was.get("config") == spec.get("config")
    for i, c in enumerate(spec.get("config") or []):
        _opaque(c.get("opaque"), "spec.config[%d].opaque" % i, errs, stored)
    drafeat.class_errors(spec, errs)


def _device(d, path, errs, per_device=False):
    """One ResourceSlice device."""
    if not d.get("name"):
        errs.append(FieldError("Required", path + ".name"))
    else:
        dns_label(d["name"], path + ".name", errs)
    attrs = d.get("attributes") or {}
    for k, v in attrs.items():
        kinds = [t for t in ("int", "bool", "string", "version")
                 if isinstance(v, dict) and t in v]
        if len(kinds) != 1:
            errs.append(FieldError("Required" if not kinds else "Invalid",
                                   "%s.attributes[%s]" % (path, k),
                                   None if not kinds else GoValue("{}"),
                                   "exactly one value must be specified"))
        elif kinds[0] in ("string", "version") and len(
                str(v[kinds[0]])) > 64:
            errs.append(FieldError("TooLong", "%s.attributes[%s].%s" % (
                path, k, kinds[0]), None, "may not be more than 64 bytes"))
    if len(attrs) + len(d.get("capacity") or {}) > MAX_ATTRS:
        errs.append(FieldError("Invalid", path, GoValue("{}"),
                               "the total number of attributes and "
                               "capacities must not exceed %d" % MAX_ATTRS))
    drafeat.device_errors(d, path, errs, per_device)


def validate_slice(obj, errs):
    """ResourceSlice checks."""
    spec = obj.get("spec") or {}
    dravalid.csi_driver_name(spec.get("driver") or "", "spec.driver", errs)
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        errs.append(FieldError("Required", "spec.pool.name"))
    if (pool.get("resourceSliceCount") or 0) <= 0:
        errs.append(FieldError("Invalid", "spec.pool.resourceSliceCount",
                               pool.get("resourceSliceCount") or 0,
                               "must be greater than zero"))
    sel = [f for f in ("nodeName", "nodeSelector", "allNodes",
                       "perDeviceNodeSelection") if spec.get(f)]
    msg = ("exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
           "`perDeviceNodeSelection` is required")
    if not sel:
        errs.append(FieldError("Required", "spec", None, msg))
    elif len(sel) > 1:
        errs.append(FieldError("Invalid", "spec", GoValue(
            "{" + ", ".join('"%s"' % s for s in sel) + "}"),
            msg + ", but multiple fields are set"))
    devs = spec.get("devices") or []
    _at_most(devs, drafeat.MAX_DEVICES_ADVANCED if drafeat.advanced(spec)
             else MAX_DEVICES, "spec.devices", errs)
    per_device = spec.get("perDeviceNodeSelection") is True
    seen = set()
    for i, d in enumerate(devs):
        _device(d or {}, "spec.devices[%d]" % i, errs, per_device)
        n = (d or {}).get("name")
        if n in seen:
            errs.append(FieldError("Duplicate", "spec.devices[%d].name" % i,
                                   n))
        seen.add(n)
    drafeat.slice_errors(spec, errs)


def validate_crd(obj, errs):
    """CustomResourceDefinition checks (names, versions, scope)."""
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    if not group:
        errs.append(FieldError("Required", "spec.group"))
    elif "." not in group:
        errs.append(FieldError("Invalid", "spec.group", group,
                               "should be a domain with at least one dot"))
    if not names.get("plural"):
        errs.append(FieldError("Required", "spec.names.plural"))
    if not names.get("kind"):
        errs.append(FieldError("Required", "spec.names.kind"))
    want = "%s.%s" % (names.get("plural"), group)
    if obj["metadata"].get("name") != want:
        errs.append(FieldError("Invalid", "metadata.name",
                               obj["metadata"].get("name"),
                               'must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        errs.append(FieldError("NotSupported", "spec.scope",
                               spec.get("scope") or "",
                               'supported values: "Cluster", "Namespaced"'))
    vers = spec.get("versions") or []
    if not vers:
        errs.append(FieldError("Invalid", "spec.versions", GoValue("null"),
                               "must have exactly one version marked as "
                               "storage version"))
    elif len([v for v in vers if v.get("storage")]) != 1:
        errs.append(FieldError("Invalid", "spec.versions", GoValue("[]"),
                               "must have exactly one version marked as "
                               "storage version"))
    elif not any(v.get("served") for v in vers):
        errs.append(FieldError("Invalid", "spec.versions", GoValue("[]"),
                               "must have at least one version marked as "
                               "served"))


def validate_webhooks(obj, errs):
    """MutatingWebhookConfiguration checks."""
    seen = set()
    for i, w in enumerate(obj.get("webhooks") or []):
        p = "webhooks[%d]" % i
        n = w.get("name") or ""
        if not n:
            errs.append(FieldError("Required", p + ".name"))
        elif n in seen:
            errs.append(FieldError("Duplicate", p + ".name", n))
        seen.add(n)
        if w.get("sideEffects") not in ("None", "NoneOnDryRun"):
            errs.append(FieldError("NotSupported", p + ".sideEffects",
                                   w.get("sideEffects") or "",
                                   'supported values: "None", '
                                   '"NoneOnDryRun"'))
        if not w.get("admissionReviewVersions"):
            errs.append(FieldError("Required", p + ".admissionReviewVersions",
                                   None, "must specify one of v1, v1beta1"))
        cc = w.get("clientConfig") or {}
        if bool(cc.get("url")) == bool(cc.get("service")):
            errs.append(FieldError("Required", p + ".clientConfig", None,
                                   "exactly one of url or service is "
                                   "required"))
        t = w.get("timeoutSeconds")
        if not isinstance(t, int) or t < 1 or t > 30:
            errs.append(FieldError("Invalid", p + ".timeoutSeconds", t,
                                   "the timeout value must be between 1 and "
                                   "30 seconds"))
        if w.get("failurePolicy") not in ("Fail", "Ignore"):
            errs.append(FieldError("NotSupported", p + ".failurePolicy",
                                   w.get("failurePolicy") or "",
                                   'supported values: "Fail", "Ignore"'))


def _event_series(obj, errs):
    """Checks of a "new" Event (eventTime set)."""
    for f in ("reportingComponent", "reportingInstance", "action", "reason"):
        if not obj.get(f):
            errs.append(FieldError("Required", f))
    for f, cap in (("reportingInstance", 128), ("action", 128),
                   ("reason", 128)):
        if len(obj.get(f) or "") > cap:
            errs.append(FieldError("Invalid", f, "", "can have at most %d "
                                   "characters" % cap))


def validate_event(obj, errs):
    """legacyValidateEvent: namespaces must agree; new-style events need
    their reporting fields."""
    io = obj.get("involvedObject") or {}
    ns = obj["metadata"].get("namespace", "")
    ion = io.get("namespace") or ""
    if not obj.get("eventTime"):
        ok = ns in ("", "default") if not ion else ns == ion
    else:
        ok = bool(ion) or ns in ("default", "kube-system")
        _event_series(obj, errs)
    if not ok:
        errs.append(FieldError("Invalid", "involvedObject.namespace", ion,
                               "does not match event.namespace"))
    if len(obj.get("message") or "") > 1024:
        errs.append(FieldError("Invalid", "message", "", "can have at most "
                               "1024 characters"))


def validate_service(obj, errs):
    """ValidateService: ports are required unless headless or ExternalName."""
    spec = obj.get("spec") or {}
    if not spec.get("ports") and spec.get("clusterIP") != "None" and \
            spec.get("type") != "ExternalName":
        errs.append(FieldError("Required", "spec.ports"))


def _go_strmap(m):
    """A map[string]string as Go's %#v prints it (keys sorted)."""
    return GoValue("map[string]string{%s}" % ", ".join(
        '"%s":"%s"' % (k, m[k]) for k in sorted(m)))


def validate_deployment(obj, errs):
    """ValidateDeploymentSpec: a selector that selects the template."""
    spec = obj.get("spec") or {}
    sel = spec.get("selector")
    if not isinstance(sel, dict):
        errs.append(FieldError("Required", "spec.selector"))
        return
    labels = ((spec.get("template") or {}).get("metadata") or {}).get(
        "labels") or {}
    if (sel.get("matchLabels") or sel.get("matchExpressions")) and \
            not match_label_selector_obj(sel, labels):
        errs.append(FieldError("Invalid", "spec.template.metadata.labels",
                               _go_strmap(labels), "`selector` does not "
                               "match template `labels`"))


def validate_binding(obj, old, errs, kinds=("Role", "ClusterRole")):
    """ValidateRoleBinding / ClusterRoleBinding: roleRef (naming one of
    KINDS), immutable."""
    ref = obj.get("roleRef") or {}
    group = "rbac.authorization.k8s.io"
    if ref.get("apiGroup") != group:
        errs.append(FieldError("NotSupported", "roleRef.apiGroup",
                               ref.get("apiGroup") or "",
                               'supported values: "%s"' % group))
    if ref.get("kind") not in kinds:
        errs.append(FieldError("NotSupported", "roleRef.kind",
                               ref.get("kind") or "", "supported values: " +
                               ", ".join('"%s"' % k for k in kinds)))
    if not ref.get("name"):
        errs.append(FieldError("Required", "roleRef.name"))
    if old is not None and (old.get("roleRef") or {}) != ref:
        errs.append(FieldError("Invalid", "roleRef", GoValue(
            'rbac.RoleRef{APIGroup:"%s", Kind:"%s", Name:"%s"}' % (
                ref.get("apiGroup", ""), ref.get("kind", ""),
                ref.get("name", ""))), "cannot change roleRef"))


def validate_cluster_role_binding(obj, old, errs):
    """ValidateClusterRoleBinding: roleRef names a ClusterRole."""
    validate_binding(obj, old, errs, kinds=("ClusterRole",))


def validate_claim(obj, old, errs):
    """ResourceClaim: the spec on create; an update only checks that the
    spec is unchanged (ValidateResourceClaimUpdate:
    ValidateImmutableField)."""
    if old is None:
        validate_claim_spec(obj.get("spec"), "spec", errs)
    elif obj.get("spec") != old.get("spec"):
        errs.append(FieldError("Invalid", "spec", GoValue(
            "resource.ResourceClaimSpec{...}"), "field is immutable"))


def validate_claim_template(obj, old, errs):
    """ResourceClaimTemplate: the claim spec on create; immutable after
    (ValidateResourceClaimTemplateUpdate)."""
    if old is None:
        validate_claim_spec((obj.get("spec") or {}).get("spec"),
                            "spec.spec", errs)
    elif obj.get("spec") != old.get("spec"):
        errs.append(FieldError("Invalid", "spec", GoValue(
            "resource.ResourceClaimTemplateSpec{...}"),
            "field is immutable"))


def on_create_and_update(check):
    """A validate(obj, old, errs) making CHECK(obj, errs)'s checks on a
    create and on an update alike."""
    def validate(obj, old, errs):
        check(obj, errs)
    validate.__doc__ = check.__doc__
    return validate


def validate(res, obj, old):
    """All validation errors of an object (a list of FieldError): the
    metadata, with the name rule of its kind, then the kind's own
    validate (res.desc, kinds.py)."""
    errs = []
    validate_meta(obj, res.desc.name_rule, errs)
    if res.desc.validate is not None:
        res.desc.validate(obj, old, errs)
    return errs
