"""Known fields of the built-in types, for fieldValidation (unknown-field
detection) and custom-resource pruning.

A schema is None (anything goes), a dict of field -> schema (an object with
known fields), {"*": schema} (a map with any keys) or [schema] (a list)."""

ANY = None

_OWNER = {"apiVersion": ANY, "kind": ANY, "name": ANY, "uid": ANY,
          "controller": ANY, "blockOwnerDeletion": ANY}

META = {"name": ANY, "generateName": ANY, "namespace": ANY, "selfLink": ANY,
        "uid": ANY, "resourceVersion": ANY, "generation": ANY,
        "creationTimestamp": ANY, "deletionTimestamp": ANY,
        "deletionGracePeriodSeconds": ANY, "labels": ANY, "annotations": ANY,
        "ownerReferences": [_OWNER], "finalizers": ANY, "managedFields": ANY}

_RESOURCES = {"limits": ANY, "requests": ANY,
              "claims": [{"name": ANY, "request": ANY}]}

_CONTAINER = {f: ANY for f in (
    "name", "image", "command", "args", "workingDir", "ports", "envFrom",
    "env", "resizePolicy", "restartPolicy", "restartPolicyRules",
    "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
    "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext",
    "stdin", "stdinOnce", "tty")}
_CONTAINER["resources"] = _RESOURCES
_EPHEMERAL = dict(_CONTAINER, targetContainerName=ANY)

_POD_SPEC = {f: ANY for f in (
    "volumes", "restartPolicy", "terminationGracePeriodSeconds",
    "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
    "serviceAccountName", "serviceAccount", "automountServiceAccountToken",
    "nodeName", "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace",
    "securityContext", "imagePullSecrets", "hostname", "subdomain",
    "affinity", "schedulerName", "tolerations", "hostAliases",
    "priorityClassName", "priority", "dnsConfig", "readinessGates",
    "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers",
    "schedulingGates", "resources", "hostnameOverride")}
_POD_SPEC.update({
    "containers": [_CONTAINER], "initContainers": [_CONTAINER],
    "ephemeralContainers": [_EPHEMERAL],
    "resourceClaims": [{"name": ANY, "resourceClaimName": ANY,
                        "resourceClaimTemplateName": ANY}]})

_SELECTOR = {"cel": {"expression": ANY}}
_OPAQUE = {"driver": ANY, "parameters": ANY}
_EXACT = {"deviceClassName": ANY, "selectors": [_SELECTOR],
          "allocationMode": ANY, "count": ANY, "adminAccess": ANY,
          "tolerations": ANY, "capacity": ANY}
_SUB = dict(_EXACT, name=ANY)
del _SUB["adminAccess"]
_CLAIM_SPEC = {"devices": {
    "requests": [{"name": ANY, "exactly": _EXACT, "firstAvailable": [_SUB]}],
    "constraints": [{"requests": ANY, "matchAttribute": ANY,
                     "distinctAttribute": ANY}],
    "config": [{"requests": ANY, "opaque": _OPAQUE}]}}

_DEVICE = {f: ANY for f in (
    "name", "attributes", "capacity", "consumesCounters", "nodeName",
    "nodeSelector", "allNodes", "taints", "bindsToNode", "bindingConditions",
    "bindingFailureConditions", "allowMultipleAllocations")}

_SPECS = {
    "namespaces": {"spec": {"finalizers": ANY}, "status": ANY},
    "pods": {"spec": _POD_SPEC, "status": ANY},
    "resourcequotas": {"spec": {"hard": ANY, "scopes": ANY,
                                "scopeSelector": ANY}, "status": ANY},
    "events": {f: ANY for f in (
        "involvedObject", "reason", "message", "source", "firstTimestamp",
        "lastTimestamp", "count", "type", "eventTime", "series", "action",
        "related", "reportingComponent", "reportingInstance")},
    "leases.coordination.k8s.io": {"spec": {f: ANY for f in (
        "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
        "leaseTransitions", "strategy", "preferredHolder")}},
    "deviceclasses.resource.k8s.io": {"spec": {
        "selectors": [_SELECTOR], "config": [{"opaque": _OPAQUE}],
        "extendedResourceName": ANY}},
    "resourceclaims.resource.k8s.io": {"spec": _CLAIM_SPEC, "status": ANY},
    "resourceclaimtemplates.resource.k8s.io": {"spec": {
        "metadata": META, "spec": _CLAIM_SPEC}},
    "resourceslices.resource.k8s.io": {"spec": {
        "driver": ANY, "pool": {"name": ANY, "generation": ANY,
                                "resourceSliceCount": ANY},
        "nodeName": ANY, "nodeSelector": ANY, "allNodes": ANY,
        "perDeviceNodeSelection": ANY, "devices": [_DEVICE],
        "sharedCounters": ANY}},
    "mutatingwebhookconfigurations.admissionregistration.k8s.io": {
        "webhooks": ANY},
    "customresourcedefinitions.apiextensions.k8s.io": {"spec": ANY,
                                                       "status": ANY},
}


def builtin_schema(key):
    """Top-level schema of a built-in resource, or None if unknown."""
    spec = _SPECS.get(key)
    if spec is None:
        return None
    out = {"apiVersion": ANY, "kind": ANY, "metadata": META}
    out.update(spec)
    return out


def from_openapi(s):
    """Convert a CRD openAPIV3Schema into this module's schema form."""
    if not isinstance(s, dict):
        return ANY
    if s.get("x-kubernetes-preserve-unknown-fields"):
        return ANY
    if s.get("x-kubernetes-int-or-string") or s.get("x-kubernetes-embedded-"
                                                     "resource"):
        return ANY
    t = s.get("type")
    if t == "array":
        return [from_openapi(s.get("items"))]
    if t == "object" or "properties" in s:
        if "properties" in s:
            return {k: from_openapi(v) for k, v in s["properties"].items()}
        if isinstance(s.get("additionalProperties"), dict):
            return {"*": from_openapi(s["additionalProperties"])}
        return ANY
    return ANY


def crd_schema(openapi):
    """Top-level schema of a custom resource from its openAPIV3Schema."""
    if not isinstance(openapi, dict) or "properties" not in openapi:
        return None
    out = from_openapi(openapi)
    if not isinstance(out, dict):
        return None
    out = dict(out)
    out["apiVersion"] = ANY
    out["kind"] = ANY
    out["metadata"] = META
    return out


def prune(obj, schema, path="", found=None):
    """Remove fields unknown to schema from obj; return their paths."""
    if found is None:
        found = []
    if schema is None:
        return found
    if isinstance(schema, list):
        if isinstance(obj, list):
            for i, x in enumerate(obj):
                prune(x, schema[0], "%s[%d]" % (path, i), found)
        return found
    if not isinstance(obj, dict):
        return found
    if "*" in schema and len(schema) == 1:
        for k, v in obj.items():
            prune(v, schema["*"], "%s[%s]" % (path, k), found)
        return found
    for k in list(obj.keys()):
        p = (path + "." + k) if path else k
        if k not in schema:
            found.append(p)
            del obj[k]
        else:
            prune(obj[k], schema[k], p, found)
    return found
