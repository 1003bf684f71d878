# SPDX-License-Identifier: Apache-2.0
"""The kinds the simulator serves, one descriptor (Kind) each.

Everything the generic code (resources.py, api.py, server.py, tables.py,
proto.py) needs to know about a kind is in its Kind: names, group and
versions (with the releases that serve each version), scope, verbs,
subresources, metadata.generation, the delete reply, field selectors, and
references to its per-kind functions.  Adding a built-in kind is adding
one Kind below (every Kind defined in that section is served); a CRD's
kind is made by custom_kind().
"""

import copy
import functools
from dataclasses import dataclass, field

from . import (checks, crdvalidate, drafeat, dravalid, proto, schema,
               tables, validation)
from . import release as release_mod

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch",
         "update", "watch")

# The release a registry serves when none is named (the simulator's
# default, --set k8s-version; release.py).
RELEASE = release_mod.NEWEST
release_key = release_mod.release_key


@dataclass(frozen=True)
class Version:
    """One version of a kind's group and the releases that serve it:
    from SINCE (a release such as "1.35"; None: every earlier one too) to
    UNTIL (the last release serving it; None: every later one too).
    GATE names a feature gate the version needs (served only while it is
    on); DEFAULT_ON False marks an API off by default (a beta API new
    since 1.24, an alpha API: KEP-3136), served only when the runtime-config
    enables its group/version."""

    name: str
    since: str = None
    until: str = None
    gate: str = None
    default_on: bool = True

    def served_in(self, release, group=""):
        """True when RELEASE ("1.34", or a release.Release with its gate
        overrides and runtime-config) serves this version of GROUP."""
        r = release_key(release)
        if not ((self.since is None or release_key(self.since) <= r) and
                (self.until is None or r <= release_key(self.until))):
            return False
        rel = release if isinstance(release, release_mod.Release) else None
        if self.gate is not None:
            on = rel.gate(self.gate) if rel is not None else \
                release_mod.gate_default(release, self.gate)
            if not on:
                return False
        if rel is not None:
            return rel.api_enabled(group, self.name, self.default_on)
        return self.default_on


@dataclass(frozen=True)
class Subresource:
    """A subresource: its name, verbs and what a write through it does:
    write(old, body) is the object the write produces from the stored
    object OLD and the request's BODY (body.metadata.resourceVersion is
    the precondition)."""

    name: str
    verbs: tuple
    write: object


def _write_status(old, body):
    """PUT/PATCH .../status: only status changes."""
    new = copy.deepcopy(old)
    new["status"] = body.get("status")
    if new["status"] is None:
        new.pop("status")
    new["metadata"]["resourceVersion"] = body["metadata"].get(
        "resourceVersion")
    return new


def _write_finalize(old, body):
    """PUT namespaces/X/finalize: only spec.finalizers changes."""
    new = copy.deepcopy(old)
    fins = (body.get("spec") or {}).get("finalizers") or []
    new.setdefault("spec", {})["finalizers"] = fins
    new["metadata"]["resourceVersion"] = body["metadata"].get(
        "resourceVersion")
    return new


STATUS = Subresource("status", ("get", "patch", "update"), _write_status)
FINALIZE = Subresource("finalize", ("update",), _write_finalize)


# --- lifecycle functions of single kinds ------------------------------------

def _namespace_terminating(ns):
    """A deleted Namespace is Terminating until it is finalized."""
    ns.setdefault("status", {})["phase"] = "Terminating"


def _namespace_held(ns):
    """A Namespace stays until spec.finalizers is empty (the namespace
    controller empties it through finalize)."""
    return bool((ns.get("spec") or {}).get("finalizers"))


def _crd_established(crd, now):
    """Mark a new CRD established, as the apiextensions server does."""
    spec = crd.get("spec") or {}
    crd["status"] = {
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason":
             "NoConflicts", "message": "no conflicts found",
             "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason":
             "InitialNamesAccepted", "message": "the initial names have "
             "been accepted", "lastTransitionTime": now}],
        "acceptedNames": spec.get("names") or {},
        "storedVersions": [v["name"] for v in spec.get("versions") or []
                           if v.get("storage")]}


def _crd_serve(api, entry, etype):
    """Serve a stored CRD's resource (again, as now defined); once the CRD
    is gone, drop its objects and stop serving it."""
    r = api.res.add_crd(entry.obj)
    if etype == "DELETED":
        api.store.drop_resource(r)
        api.res.remove(r.key)


@dataclass(frozen=True, eq=False)
class Kind:
    """One served kind.

    kind, plural, group   "Pod", "pods", "" (the core group)
    versions              Version entries; a release serves those whose
                          range includes it
    storage               the version objects are stored (and preferred)
                          in; None: the first one served
    namespaced            scope: True namespaced, False cluster-scoped
    short_names, categories, singular (default: kind in lower case)
    verbs                 verbs of the resource itself (discovery; others
                          are 405 MethodNotAllowed)
    subresources          Subresource entries (STATUS, FINALIZE)
    generation            when metadata.generation moves: None (never),
                          "spec", "spec+annotations", "nonmeta" (any
                          change outside metadata, and status when
                          status is a subresource)
    return_deleted        DELETE answers the object (True) or a Success
                          Status
    field_selectors       fields beyond metadata.name/namespace
    builtin               False for a CRD's kind
    schema                the known fields beyond apiVersion, kind and
                          metadata (schema.py form; unknown ones are
                          dropped or refused per fieldValidation); None:
                          anything goes
    proto                 the protobuf message (proto.py form) of a kind
                          clients may send as protobuf
    columns               (column definitions, row function) of the
                          Table kubectl get receives (tables.py); None:
                          NAME and AGE
    crd, openapi          the CRD object of a custom kind, and its
                          openAPIV3Schema by version (its known fields)
    printer_columns       a custom kind's additionalPrinterColumns by
                          version (its columns)

    The per-kind functions (None: nothing to do):
    name_rule(name, path, errs)   the metadata.name rule (validation.py)
    default(obj)          defaults, applied before mutating admission and
                          again after it (idempotent)
    default_named(obj)    defaults that need the final name (after
                          admission and generateName)
    drop_disabled(obj, old)  drops fields of features that are off
    validate(obj, old, errs)  the kind's validation (old None on create;
                          the metadata is checked for every kind)
    create_checks(obj, ns_labels) -> [FieldError]  create-time checks
                          that read the namespace's labels
    on_create(obj, now)   what the server sets on a new object besides
                          metadata (a CRD's established status)
    on_commit(api, entry, etype)  after a write is stored, under the
                          store lock (a CRD's resource served or gone)
    terminating(obj)      marks an object whose deletion waits (a
                          Namespace's phase Terminating)
    held(obj) -> bool     True while something beyond metadata.finalizers
                          keeps a deleted object (a Namespace's
                          spec.finalizers, emptied through finalize)
    """

    kind: str
    plural: str
    group: str = ""
    versions: tuple = (Version("v1"),)
    storage: str = None
    namespaced: bool = True
    short_names: tuple = ()
    categories: tuple = ()
    singular: str = ""
    verbs: tuple = VERBS
    subresources: tuple = ()
    generation: str = None
    return_deleted: bool = True
    field_selectors: tuple = ()
    builtin: bool = True
    schema: dict = field(default=None, repr=False)
    proto: dict = field(default=None, repr=False)
    columns: tuple = field(default=None, repr=False)
    crd: dict = field(default=None, repr=False)
    openapi: dict = field(default=None, repr=False)
    printer_columns: dict = field(default=None, repr=False)
    name_rule: object = validation.dns_subdomain
    default: object = None
    default_named: object = None
    drop_disabled: object = None
    validate: object = None
    create_checks: object = None
    on_create: object = None
    on_commit: object = None
    terminating: object = None
    held: object = None

    @property
    def key(self):
        """'plural[.group]', the name kubectl and the internal API use."""
        return self.plural + ("." + self.group if self.group else "")

    def served_versions(self, release=RELEASE):
        """Names of the versions RELEASE serves."""
        return [v.name for v in self.versions
                if v.served_in(release, self.group)]


    def storage_version(self, release=RELEASE):
        """The version RELEASE stores objects in, or None if it serves
        the kind in no version."""
        served = self.served_versions(release)
        if self.storage in served:
            return self.storage
        return served[0] if served else None

    def subresource(self, name):
        """The Subresource NAME, or None."""
        for s in self.subresources:
            if s.name == name:
                return s
        return None


# --- the built-in kinds of a 1.34 API server --------------------------------

RS = "resource.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
RBAC = "rbac.authorization.k8s.io"

# The order in which /apis lists the built-in groups (others follow,
# sorted by name).
GROUP_ORDER = ("apps", "policy", RBAC, ADMISSION, "apiextensions.k8s.io",
               "coordination.k8s.io", RS)

NAMESPACE = Kind(
    "Namespace", "namespaces", namespaced=False, short_names=("ns",),
    subresources=(STATUS, FINALIZE), field_selectors=("status.phase",),
    name_rule=validation.dns_label, default=validation.default_namespace,
    default_named=validation.label_namespace_name,
    terminating=_namespace_terminating, held=_namespace_held,
    schema=schema.NAMESPACE, proto=proto.NAMESPACE,
    columns=tables.NAMESPACE)
POD = Kind(
    "Pod", "pods", short_names=("po",), subresources=(STATUS,),
    generation="spec", categories=("all",), field_selectors=(
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
        "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
        "status.podIP", "status.nominatedNodeName"),
    default=validation.default_pod, validate=checks.validate_pod,
    schema=schema.POD,
    columns=tables.POD)
RESOURCE_QUOTA = Kind(
    "ResourceQuota", "resourcequotas", short_names=("quota",),
    subresources=(STATUS,), return_deleted=False,
    schema=schema.RESOURCE_QUOTA, proto=proto.QUOTA)
EVENT = Kind(
    "Event", "events", short_names=("ev",), return_deleted=False,
    field_selectors=(
        "involvedObject.kind", "involvedObject.namespace",
        "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent",
        "source", "type"),
    name_rule=validation.no_name_rule,
    validate=checks.on_create_and_update(checks.validate_event),
    schema=schema.EVENT,
    columns=tables.EVENT)
LEASE = Kind(
    "Lease", "leases", "coordination.k8s.io", return_deleted=False,
    name_rule=validation.no_name_rule,
    schema=schema.LEASE,
    columns=tables.LEASE)
DEVICE_CLASS = Kind(
    "DeviceClass", "deviceclasses", RS, namespaced=False, generation="spec",
    drop_disabled=dravalid.drop_disabled_class,
    validate=checks.validate_device_class,
    schema=schema.DEVICE_CLASS)
RESOURCE_CLAIM_TEMPLATE = Kind(
    "ResourceClaimTemplate", "resourceclaimtemplates", RS,
    default=drafeat.default_claim_template,
    drop_disabled=functools.partial(dravalid.drop_disabled,
                                    dravalid.template_claim_spec),
    validate=checks.validate_claim_template,
    create_checks=functools.partial(dravalid.admin_access_errors,
                                    dravalid.template_claim_spec),
    schema=schema.RESOURCE_CLAIM_TEMPLATE)
RESOURCE_CLAIM = Kind(
    "ResourceClaim", "resourceclaims", RS, subresources=(STATUS,),
    default=drafeat.default_claim,
    drop_disabled=functools.partial(dravalid.drop_disabled,
                                    dravalid.claim_spec),
    validate=checks.validate_claim,
    create_checks=functools.partial(dravalid.admin_access_errors,
                                    dravalid.claim_spec),
    schema=schema.RESOURCE_CLAIM,
    columns=tables.RESOURCE_CLAIM)
RESOURCE_SLICE = Kind(
    "ResourceSlice", "resourceslices", RS, namespaced=False,
    generation="spec", return_deleted=False,
    field_selectors=("spec.nodeName", "spec.driver"),
    default=drafeat.default_slice, drop_disabled=drafeat.drop_disabled_slice,
    validate=checks.on_create_and_update(checks.validate_slice),
    schema=schema.RESOURCE_SLICE,
    columns=tables.RESOURCE_SLICE)
# DeviceTaintRule (facts section 2.3): resource.k8s.io/v1alpha3 from 1.33,
# v1beta2 from 1.36, v1 from 1.37, each only with DRADeviceTaintRules on
# (off before 1.37; no such gate in 1.34) and, for alpha and beta, --set
# runtime-config (default_on False: KEP-3136). The
# v1 storage answers a DELETE with a Status (NewRESTv1); the older
# versions' storage returns the object (not modelled: one reply per kind).
DEVICE_TAINT_RULE = Kind(
    "DeviceTaintRule", "devicetaintrules", RS,
    versions=(Version("v1", since="1.37", gate="DRADeviceTaintRules"),
              Version("v1beta2", since="1.36", gate="DRADeviceTaintRules",
                      default_on=False),
              Version("v1alpha3", since="1.33",
                      gate="DRADeviceTaintRules", default_on=False)),
    storage="v1", namespaced=False, subresources=(STATUS,),
    generation="spec", return_deleted=False,
    default=drafeat.default_rule, validate=drafeat.validate_rule_kind,
    schema=schema.DEVICE_TAINT_RULE)
MUTATING_WEBHOOK_CONFIGURATION = Kind(
    "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
    ADMISSION, namespaced=False, generation="spec", return_deleted=False,
    default=validation.default_webhooks,
    validate=checks.on_create_and_update(checks.validate_webhooks),
    schema=schema.MUTATING_WEBHOOK_CONFIGURATION,
    columns=tables.MUTATING_WEBHOOK_CONFIGURATION)
# The policy kinds' spec checks are the vap plug-in's (vap.py): with the
# plug-in off they are stored unchecked, as documented.
VALIDATING_ADMISSION_POLICY = Kind(
    "ValidatingAdmissionPolicy", "validatingadmissionpolicies", ADMISSION,
    namespaced=False, subresources=(STATUS,), generation="spec",
    return_deleted=False, categories=("api-extensions",),
    default=validation.default_policy,
    schema=schema.VALIDATING_ADMISSION_POLICY,
    columns=tables.VALIDATING_ADMISSION_POLICY)
VALIDATING_ADMISSION_POLICY_BINDING = Kind(
    "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings",
    ADMISSION, namespaced=False, generation="spec", return_deleted=False,
    categories=("api-extensions",),
    default=validation.default_policy_binding,
    schema=schema.VALIDATING_ADMISSION_POLICY_BINDING,
    columns=tables.VALIDATING_ADMISSION_POLICY_BINDING)
# MutatingAdmissionPolicy (KEP-3962): v1alpha1 since 1.32 and v1beta1
# since 1.34, both off by default (runtime-config) and needing the gate,
# which is off until 1.36; v1 from 1.36 with the gate on by default
# (apiserver kube_features.go, api-1.36 types.go, KEP-3962). Its spec
# checks and evaluation are the mapolicy plug-in's.
MAP_GATE = "MutatingAdmissionPolicy"
MUTATING_ADMISSION_POLICY = Kind(
    "MutatingAdmissionPolicy", "mutatingadmissionpolicies", ADMISSION,
    versions=(Version("v1alpha1", since="1.32", gate=MAP_GATE,
                      default_on=False),
              Version("v1beta1", since="1.34", gate=MAP_GATE,
                      default_on=False),
              Version("v1", since="1.36", gate=MAP_GATE)),
    storage="v1", namespaced=False, generation="spec",
    return_deleted=False, categories=("api-extensions",),
    default=validation.default_policy,
    schema=schema.MUTATING_ADMISSION_POLICY,
    columns=tables.MUTATING_ADMISSION_POLICY)
MUTATING_ADMISSION_POLICY_BINDING = Kind(
    "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings",
    ADMISSION, versions=MUTATING_ADMISSION_POLICY.versions, storage="v1",
    namespaced=False, generation="spec", return_deleted=False,
    categories=("api-extensions",),
    default=validation.default_policy_binding,
    schema=schema.MUTATING_ADMISSION_POLICY_BINDING,
    columns=tables.MUTATING_ADMISSION_POLICY_BINDING)
CUSTOM_RESOURCE_DEFINITION = Kind(
    "CustomResourceDefinition", "customresourcedefinitions",
    "apiextensions.k8s.io", namespaced=False, short_names=("crd", "crds"),
    subresources=(STATUS,), generation="spec", return_deleted=False,
    default=validation.default_crd,
    validate=checks.on_create_and_update(checks.validate_crd),
    on_create=_crd_established, on_commit=_crd_serve,
    schema=schema.CUSTOM_RESOURCE_DEFINITION,
    columns=tables.CUSTOM_RESOURCE_DEFINITION)

# The kinds a deployment manifest uses (core, apps, policy, RBAC): the
# delete reply is the object for ServiceAccounts and Services (whose
# storage sets ReturnDeletedObject), a Success Status for the others.
SERVICE_ACCOUNT = Kind(
    "ServiceAccount", "serviceaccounts", short_names=("sa",),
    schema=schema.SERVICE_ACCOUNT, proto=proto.SERVICEACCOUNT,
    columns=tables.SERVICE_ACCOUNT)
SECRET = Kind(
    "Secret", "secrets", return_deleted=False, field_selectors=("type",),
    default=validation.default_secret,
    schema=schema.SECRET, proto=proto.SECRET,
    columns=tables.SECRET)
CONFIG_MAP = Kind(
    "ConfigMap", "configmaps", short_names=("cm",), return_deleted=False,
    schema=schema.CONFIG_MAP, proto=proto.CONFIGMAP,
    columns=tables.CONFIG_MAP)
SERVICE = Kind(
    "Service", "services", short_names=("svc",), subresources=(STATUS,),
    categories=("all",), name_rule=validation.dns1035_label,
    default=validation.default_service,
    validate=checks.on_create_and_update(checks.validate_service),
    schema=schema.SERVICE,
    columns=tables.SERVICE)
DEPLOYMENT = Kind(
    "Deployment", "deployments", "apps", short_names=("deploy",),
    subresources=(STATUS,), generation="spec+annotations",
    return_deleted=False, categories=("all",),
    default=validation.default_deployment,
    validate=checks.on_create_and_update(checks.validate_deployment),
    schema=schema.DEPLOYMENT,
    columns=tables.DEPLOYMENT)
POD_DISRUPTION_BUDGET = Kind(
    "PodDisruptionBudget", "poddisruptionbudgets", "policy",
    short_names=("pdb",), subresources=(STATUS,), generation="spec",
    return_deleted=False,
    schema=schema.POD_DISRUPTION_BUDGET,
    columns=tables.POD_DISRUPTION_BUDGET)
# RBAC names are path segments ("system:foo" is fine).
ROLE = Kind("Role", "roles", RBAC, return_deleted=False,
            name_rule=validation.path_segment,
    schema=schema.ROLE, proto=proto.ROLE,
    columns=tables.ROLE)
ROLE_BINDING = Kind(
    "RoleBinding", "rolebindings", RBAC, return_deleted=False,
    name_rule=validation.path_segment, validate=checks.validate_binding,
    schema=schema.ROLE_BINDING, proto=proto.BINDING,
    columns=tables.ROLE_BINDING)
CLUSTER_ROLE = Kind("ClusterRole", "clusterroles", RBAC, namespaced=False,
                    return_deleted=False, name_rule=validation.path_segment,
    schema=schema.CLUSTER_ROLE, proto=proto.CLUSTERROLE,
    columns=tables.CLUSTER_ROLE)
CLUSTER_ROLE_BINDING = Kind(
    "ClusterRoleBinding", "clusterrolebindings", RBAC, namespaced=False,
    return_deleted=False, name_rule=validation.path_segment,
    validate=checks.validate_cluster_role_binding,
    schema=schema.CLUSTER_ROLE_BINDING, proto=proto.BINDING,
    columns=tables.CLUSTER_ROLE_BINDING)

# Every built-in kind: each Kind defined above, in the order defined.
BUILTIN = tuple(k for k in list(globals().values()) if isinstance(k, Kind))

_PROTO = {k.kind: k.proto for k in BUILTIN if k.proto is not None}


def proto_message(kind):
    """The protobuf message schema of the built-in kind KIND (a kind
    name such as "Namespace"), or None."""
    return _PROTO.get(kind)


# --- custom resources -------------------------------------------------------

def custom_kind(crd):
    """The Kind a (valid) CRD object defines: its served versions, in
    every release."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served = [v for v in spec.get("versions") or [] if v.get("served")]
    storage = ([v for v in served if v.get("storage")] or served)[0]
    subs = (STATUS,) if "status" in (storage.get("subresources") or {}) \
        else ()
    openapi = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema")
               for v in served}
    printer = {v["name"]: v.get("additionalPrinterColumns") or []
               for v in served}
    return Kind(
        names.get("kind"), names.get("plural"), spec.get("group", ""),
        versions=tuple(Version(v["name"]) for v in served),
        storage=storage["name"],
        namespaced=spec.get("scope") != "Cluster",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        singular=names.get("singular") or "", subresources=subs,
        generation="nonmeta", return_deleted=False, builtin=False, crd=crd,
        openapi=openapi, printer_columns=printer,
        validate=functools.partial(crdvalidate.validate, openapi))
