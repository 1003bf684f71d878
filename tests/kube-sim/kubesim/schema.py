# SPDX-License-Identifier: Apache-2.0
"""Known fields of the built-in types, for fieldValidation (unknown-field
detection) and custom-resource pruning.

A schema is None (anything goes), "s" / "i" / "b" (a string, integer or
boolean leaf), a dict of field -> schema (an object with known fields; the
optional key "__go__" names its Go type for decoding errors), {"*": schema}
(a map with any keys) or [schema] (a list)."""

import re

ANY = None

S, I, B = "s", "i", "b"
_OWNER = {"__go__": "OwnerReference", "apiVersion": S, "kind": S,
          "name": S, "uid": S, "controller": B, "blockOwnerDeletion": B}

META = {"__go__": "ObjectMeta", "name": S, "generateName": S,
        "namespace": S, "selfLink": S, "uid": S, "resourceVersion": S,
        "generation": I, "creationTimestamp": ANY, "deletionTimestamp": ANY,
        "deletionGracePeriodSeconds": I, "labels": {"*": S},
        "annotations": {"*": S}, "ownerReferences": [_OWNER],
        "finalizers": [S], "managedFields": ANY}

_RESOURCES = {"__go__": "ResourceRequirements", "limits": ANY,
              "requests": ANY,
              "claims": [{"__go__": "ResourceClaim", "name": S,
                          "request": S}]}

_CONTAINER = {f: ANY for f in (
    "name", "image", "command", "args", "workingDir", "ports", "envFrom",
    "env", "resizePolicy", "restartPolicy", "restartPolicyRules",
    "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
    "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext",
    "stdin", "stdinOnce", "tty")}
_CONTAINER.update({"__go__": "Container", "name": S, "image": S,
                   "resources": _RESOURCES})
_EPHEMERAL = dict(_CONTAINER, targetContainerName=S,
                  __go__="EphemeralContainer")

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
    "resourceClaims": [{"__go__": "PodResourceClaim", "name": S,
                        "resourceClaimName": S,
                        "resourceClaimTemplateName": S}],
    "__go__": "PodSpec", "nodeName": S, "restartPolicy": S})

_SELECTOR = {"__go__": "DeviceSelector",
             "cel": {"__go__": "CELDeviceSelector", "expression": S}}
_OPAQUE = {"__go__": "OpaqueDeviceConfiguration", "driver": S,
           "parameters": ANY}
_TOLERATION = {"__go__": "DeviceToleration", "key": S, "operator": S,
               "value": S, "effect": S, "tolerationSeconds": I}
_TAINT = {"__go__": "DeviceTaint", "key": S, "value": S, "effect": S,
          "timeAdded": ANY}
_EXACT = {"__go__": "ExactDeviceRequest", "deviceClassName": S,
          "selectors": [_SELECTOR], "allocationMode": S, "count": I,
          "adminAccess": B, "tolerations": [_TOLERATION],
          "capacity": {"__go__": "CapacityRequirements",
                       "requests": {"*": ANY}}}
_SUB = dict(_EXACT, name=S, __go__="DeviceSubRequest")
del _SUB["adminAccess"]
_CLAIM_SPEC = {"__go__": "ResourceClaimSpec", "devices": {
    "__go__": "DeviceClaim",
    "requests": [{"__go__": "DeviceRequest", "name": S, "exactly": _EXACT,
                  "firstAvailable": [_SUB]}],
    "constraints": [{"__go__": "DeviceConstraint", "requests": [S],
                     "matchAttribute": S, "distinctAttribute": S}],
    "config": [{"__go__": "DeviceClaimConfiguration", "requests": [S],
                "opaque": _OPAQUE}]}}

_DEVICE = {f: ANY for f in (
    "attributes", "capacity", "consumesCounters",
    "nodeSelector", "bindsToNode", "bindingConditions",
    "bindingFailureConditions", "allowMultipleAllocations")}
_DEVICE["taints"] = [_TAINT]
_DEVICE.update({"__go__": "Device", "name": S, "nodeName": S,
                "allNodes": B})

_NAMED_RULE = {"__go__": "NamedRuleWithOperations", "resourceNames": [S],
               "operations": [S], "apiGroups": [S], "apiVersions": [S],
               "resources": [S], "scope": S}
_MATCH_RESOURCES = {"__go__": "MatchResources", "namespaceSelector": ANY,
                    "objectSelector": ANY, "resourceRules": [_NAMED_RULE],
                    "excludeResourceRules": [_NAMED_RULE],
                    "matchPolicy": S}
_NAMED_EXPR = {"name": S, "expression": S}

# The known fields of each built-in kind beyond apiVersion, kind and
# metadata (kinds.py names one of these in each Kind).
NAMESPACE = {"spec": {"__go__": "NamespaceSpec", "finalizers": [S]},
             "status": ANY}
POD = {"spec": _POD_SPEC, "status": ANY}
RESOURCE_QUOTA = {"spec": {"hard": ANY, "scopes": ANY, "scopeSelector": ANY},
                  "status": ANY}
EVENT = {f: ANY for f in (
    "involvedObject", "reason", "message", "source", "firstTimestamp",
    "lastTimestamp", "count", "type", "eventTime", "series", "action",
    "related", "reportingComponent", "reportingInstance")}
LEASE = {"spec": {f: ANY for f in (
    "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
    "leaseTransitions", "strategy", "preferredHolder")}}
DEVICE_CLASS = {"spec": {
    "selectors": [_SELECTOR], "config": [{"opaque": _OPAQUE}],
    "extendedResourceName": ANY}}
RESOURCE_CLAIM = {"spec": _CLAIM_SPEC, "status": ANY}
RESOURCE_CLAIM_TEMPLATE = {"spec": {"metadata": META, "spec": _CLAIM_SPEC}}
RESOURCE_SLICE = {"spec": {
    "__go__": "ResourceSliceSpec",
    "driver": S, "pool": {"__go__": "ResourcePool", "name": S,
                          "generation": I, "resourceSliceCount": I},
    "nodeName": S, "nodeSelector": ANY, "allNodes": B,
    "perDeviceNodeSelection": ANY, "devices": [_DEVICE],
    "sharedCounters": ANY}}
DEVICE_TAINT_RULE = {"spec": {
    "__go__": "DeviceTaintRuleSpec",
    "deviceSelector": {"__go__": "DeviceTaintSelector", "driver": S,
                       "pool": S, "device": S},
    "taint": _TAINT}, "status": ANY}
MUTATING_WEBHOOK_CONFIGURATION = {"webhooks": ANY}
VALIDATING_ADMISSION_POLICY = {
    "spec": {"__go__": "ValidatingAdmissionPolicySpec",
             "paramKind": {"__go__": "ParamKind", "apiVersion": S,
                           "kind": S},
             "matchConstraints": _MATCH_RESOURCES,
             "validations": [{"__go__": "Validation", "expression": S,
                              "message": S, "reason": S,
                              "messageExpression": S}],
             "failurePolicy": S,
             "auditAnnotations": [{"__go__": "AuditAnnotation",
                                   "key": S, "valueExpression": S}],
             "matchConditions": [_NAMED_EXPR],
             "variables": [_NAMED_EXPR]},
    "status": ANY}
VALIDATING_ADMISSION_POLICY_BINDING = {
    "spec": {"__go__": "ValidatingAdmissionPolicyBindingSpec",
             "policyName": S,
             "paramRef": {"__go__": "ParamRef", "name": S,
                          "namespace": S, "selector": ANY,
                          "parameterNotFoundAction": S},
             "matchResources": _MATCH_RESOURCES,
             "validationActions": [S]}}
MUTATING_ADMISSION_POLICY = {
    "spec": {"__go__": "MutatingAdmissionPolicySpec",
             "paramKind": {"__go__": "ParamKind", "apiVersion": S,
                           "kind": S},
             "matchConstraints": _MATCH_RESOURCES,
             "variables": [_NAMED_EXPR],
             "mutations": [{"__go__": "Mutation", "patchType": S,
                            "applyConfiguration": {
                                "__go__": "ApplyConfiguration",
                                "expression": S},
                            "jsonPatch": {"__go__": "JSONPatch",
                                          "expression": S}}],
             "failurePolicy": S,
             "matchConditions": [_NAMED_EXPR],
             "reinvocationPolicy": S}}
MUTATING_ADMISSION_POLICY_BINDING = {
    "spec": {"__go__": "MutatingAdmissionPolicyBindingSpec",
             "policyName": S,
             "paramRef": {"__go__": "ParamRef", "name": S,
                          "namespace": S, "selector": ANY,
                          "parameterNotFoundAction": S},
             "matchResources": _MATCH_RESOURCES}}
CUSTOM_RESOURCE_DEFINITION = {"spec": ANY, "status": ANY}

_STRMAP = {"*": S}
_RULE = {"__go__": "PolicyRule", "verbs": [S], "apiGroups": [S],
         "resources": [S], "resourceNames": [S], "nonResourceURLs": [S]}
_BINDING = {
    "subjects": [{"__go__": "Subject", "kind": S, "apiGroup": S, "name": S,
                  "namespace": S}],
    "roleRef": {"__go__": "RoleRef", "apiGroup": S, "kind": S, "name": S}}
_SERVICE_SPEC = {f: ANY for f in (
    "selector", "clusterIP", "clusterIPs", "type", "externalIPs",
    "sessionAffinity", "loadBalancerIP", "loadBalancerSourceRanges",
    "externalName", "externalTrafficPolicy", "healthCheckNodePort",
    "publishNotReadyAddresses", "sessionAffinityConfig", "ipFamilies",
    "ipFamilyPolicy", "allocateLoadBalancerNodePorts", "loadBalancerClass",
    "internalTrafficPolicy", "trafficDistribution")}
_SERVICE_SPEC.update({
    "__go__": "ServiceSpec", "type": S, "clusterIP": S,
    "selector": _STRMAP,
    "ports": [{"__go__": "ServicePort", "name": S, "protocol": S,
               "appProtocol": S, "port": I, "targetPort": ANY,
               "nodePort": I}]})
SERVICE_ACCOUNT = {"secrets": ANY, "imagePullSecrets": ANY,
                   "automountServiceAccountToken": B}
SECRET = {"data": _STRMAP, "stringData": _STRMAP, "type": S, "immutable": B}
CONFIG_MAP = {"data": _STRMAP, "binaryData": _STRMAP, "immutable": B}
SERVICE = {"spec": _SERVICE_SPEC, "status": ANY}
DEPLOYMENT = {"spec": {
    "__go__": "DeploymentSpec", "replicas": I, "selector": ANY,
    "template": {"__go__": "PodTemplateSpec", "metadata": META,
                 "spec": _POD_SPEC},
    "strategy": ANY, "minReadySeconds": I, "revisionHistoryLimit": I,
    "paused": B, "progressDeadlineSeconds": I}, "status": ANY}
POD_DISRUPTION_BUDGET = {"spec": {
    "__go__": "PodDisruptionBudgetSpec", "minAvailable": ANY,
    "maxUnavailable": ANY, "selector": ANY,
    "unhealthyPodEvictionPolicy": S}, "status": ANY}
ROLE = {"rules": [_RULE]}
CLUSTER_ROLE = {"rules": [_RULE], "aggregationRule": ANY}
ROLE_BINDING = CLUSTER_ROLE_BINDING = _BINDING


def builtin_schema(fields):
    """Top-level schema of a built-in kind whose known fields beyond
    apiVersion, kind and metadata are FIELDS (None: anything goes)."""
    if fields is None:
        return None
    out = {"apiVersion": ANY, "kind": ANY, "metadata": META}
    out.update(fields)
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


_JSON_TYPES = ((bool, "bool"), (str, "string"), (int, "number"),
               (float, "number"), (list, "array"), (dict, "object"))
_GO_TYPES = {"s": "string", "i": "int64", "b": "bool"}


def type_name(v, table=_JSON_TYPES):
    """The name of v's JSON type in TABLE ((type, name), the first match
    wins; by default the names Go's decoder reports); "null" for none."""
    for t, n in table:
        if isinstance(v, t):
            return n
    return "null"


def _leaf_ok(v, t):
    """True when v fits the leaf type t (null always fits)."""
    if v is None:
        return True
    if t == "s":
        return isinstance(v, str)
    if t == "b":
        return isinstance(v, bool)
    return isinstance(v, int) and not isinstance(v, bool)


class Walk:
    """State of one prune walk: unknown fields and the first type error."""

    def __init__(self, kind):
        self.found = []
        self.type_error = None
        self.go = kind

    def bad_type(self, v, t, path, go):
        """Record a Go-style decoding error (the first one wins)."""
        if self.type_error is None:
            field = re.sub(r"\[\d+\]", "", path)
            self.type_error = ("json: cannot unmarshal %s into Go struct "
                               "field %s.%s of type %s" % (
                                   type_name(v), go, field, _GO_TYPES[t]))


def prune(obj, schema, path="", walk=None, go=None):
    """Remove fields unknown to schema from obj; record type errors."""
    if walk is None:
        walk = Walk("Object")
    go = go or walk.go
    if schema is None:
        return walk
    if isinstance(schema, str):
        if not _leaf_ok(obj, schema):
            walk.bad_type(obj, schema, path, go)
        return walk
    if isinstance(schema, list):
        if isinstance(obj, list):
            for i, x in enumerate(obj):
                prune(x, schema[0], "%s[%d]" % (path, i), walk, go)
        return walk
    if not isinstance(obj, dict):
        return walk
    go = schema.get("__go__", go)
    if "*" in schema:
        for k, v in obj.items():
            prune(v, schema["*"], path, walk, go)
        return walk
    for k in list(obj.keys()):
        p = (path + "." + k) if path else k
        if k not in schema or k == "__go__":
            walk.found.append(p)
            del obj[k]
        else:
            prune(obj[k], schema[k], p, walk, go)
    return walk
