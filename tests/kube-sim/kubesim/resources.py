"""The resource types the simulator serves: built-ins plus registered CRDs,
and the discovery and OpenAPI documents kubectl reads about them."""

import hashlib
import json
import threading

from .hooks import ApiError

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch",
         "update", "watch"]

_META_FIELDS = {"metadata.name", "metadata.namespace"}


class ResourceInfo:
    """One served resource type (group, version, plural, kind, scope ...)."""

    def __init__(self, group, version, resource, kind, namespaced,
                 short_names=(), subresources=(), generation=None,
                 return_deleted=True, fields=(), builtin=True,
                 versions=None, crd=None, categories=()):
        self.group = group
        self.version = version
        self.resource = resource
        self.kind = kind
        self.namespaced = namespaced
        self.singular = kind.lower()
        self.short_names = list(short_names)
        self.subresources = set(subresources)
        self.generation = generation
        self.return_deleted = return_deleted
        self.fields = set(fields) | _META_FIELDS
        self.builtin = builtin
        self.versions = versions or [version]
        self.crd = crd
        self.categories = list(categories)
        self.key = resource + ("." + group if group else "")
        self.api_version = (group + "/" + version) if group else version
        self.list_kind = kind + "List"

    def __repr__(self):
        return "<ResourceInfo %s>" % self.key

    def api_version_for(self, version):
        """apiVersion string for one served version."""
        return (self.group + "/" + version) if self.group else version


def _builtins():
    """The built-in resource types of the simulated 1.34 API server."""
    pod_fields = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                  "spec.serviceAccountName", "spec.hostNetwork",
                  "status.phase", "status.podIP", "status.nominatedNodeName")
    ev_fields = ("involvedObject.kind", "involvedObject.namespace",
                 "involvedObject.name", "involvedObject.uid",
                 "involvedObject.apiVersion", "involvedObject.resourceVersion",
                 "involvedObject.fieldPath", "reason", "reportingComponent",
                 "source", "type")
    rs = "resource.k8s.io"
    return [
        ResourceInfo("", "v1", "namespaces", "Namespace", False, ["ns"],
                     ["status", "finalize"], fields=["status.phase"]),
        ResourceInfo("", "v1", "pods", "Pod", True, ["po"], ["status"],
                     generation="spec", fields=pod_fields,
                     categories=["all"]),
        ResourceInfo("", "v1", "resourcequotas", "ResourceQuota", True,
                     ["quota"], ["status"], return_deleted=False),
        ResourceInfo("", "v1", "events", "Event", True, ["ev"],
                     fields=ev_fields, return_deleted=False),
        ResourceInfo("coordination.k8s.io", "v1", "leases", "Lease", True,
                     return_deleted=False),
        ResourceInfo(rs, "v1", "deviceclasses", "DeviceClass", False,
                     generation="spec"),
        ResourceInfo(rs, "v1", "resourceclaimtemplates",
                     "ResourceClaimTemplate", True),
        ResourceInfo(rs, "v1", "resourceclaims", "ResourceClaim", True,
                     subresources=["status"]),
        ResourceInfo(rs, "v1", "resourceslices", "ResourceSlice", False,
                     generation="spec", return_deleted=False,
                     fields=["spec.nodeName", "spec.driver"]),
        ResourceInfo("admissionregistration.k8s.io", "v1",
                     "mutatingwebhookconfigurations",
                     "MutatingWebhookConfiguration", False,
                     generation="spec", return_deleted=False),
        ResourceInfo("admissionregistration.k8s.io", "v1",
                     "validatingadmissionpolicies",
                     "ValidatingAdmissionPolicy", False, subresources=[
                         "status"], generation="spec", return_deleted=False,
                     categories=["api-extensions"]),
        ResourceInfo("admissionregistration.k8s.io", "v1",
                     "validatingadmissionpolicybindings",
                     "ValidatingAdmissionPolicyBinding", False,
                     generation="spec", return_deleted=False,
                     categories=["api-extensions"]),
        ResourceInfo("apiextensions.k8s.io", "v1",
                     "customresourcedefinitions", "CustomResourceDefinition",
                     False, ["crd", "crds"], ["status"], generation="spec",
                     return_deleted=False),
    ] + _workload_builtins()


def _workload_builtins():
    """The kinds a deployment manifest uses (core, apps, policy, RBAC):
    scope, short names, status subresources, generation and the delete
    reply (the object for ServiceAccounts and Services, whose storage sets
    ReturnDeletedObject; a Success Status for the others) as in 1.34."""
    rbac = "rbac.authorization.k8s.io"
    return [
        ResourceInfo("", "v1", "serviceaccounts", "ServiceAccount", True,
                     ["sa"]),
        ResourceInfo("", "v1", "secrets", "Secret", True,
                     return_deleted=False, fields=["type"]),
        ResourceInfo("", "v1", "configmaps", "ConfigMap", True, ["cm"],
                     return_deleted=False),
        ResourceInfo("", "v1", "services", "Service", True, ["svc"],
                     ["status"], categories=["all"]),
        ResourceInfo("apps", "v1", "deployments", "Deployment", True,
                     ["deploy"], ["status"], generation="spec+annotations",
                     return_deleted=False, categories=["all"]),
        ResourceInfo("policy", "v1", "poddisruptionbudgets",
                     "PodDisruptionBudget", True, ["pdb"], ["status"],
                     generation="spec", return_deleted=False),
        ResourceInfo(rbac, "v1", "roles", "Role", True,
                     return_deleted=False),
        ResourceInfo(rbac, "v1", "rolebindings", "RoleBinding", True,
                     return_deleted=False),
        ResourceInfo(rbac, "v1", "clusterroles", "ClusterRole", False,
                     return_deleted=False),
        ResourceInfo(rbac, "v1", "clusterrolebindings", "ClusterRoleBinding",
                     False, return_deleted=False),
    ]


def crd_resource(crd):
    """The ResourceInfo a (valid) CRD object defines."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served = [v for v in spec.get("versions") or [] if v.get("served")]
    storage = [v for v in served if v.get("storage")] or served
    ver = storage[0]
    subs = ["status"] if "status" in (ver.get("subresources") or {}) else []
    r = ResourceInfo(spec.get("group", ""), ver["name"], names.get("plural"),
                     names.get("kind"), spec.get("scope") != "Cluster",
                     names.get("shortNames") or [], subs, generation="nonmeta",
                     return_deleted=False, builtin=False,
                     versions=[v["name"] for v in served], crd=crd,
                     categories=names.get("categories") or [])
    r.singular = names.get("singular") or r.kind.lower()
    r.schemas = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema")
                 for v in served}
    r.printer_columns = {v["name"]: v.get("additionalPrinterColumns") or []
                         for v in served}
    return r


class Registry:
    """Thread-safe map of served resources, by key, by group/version."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_key = {}
        self.builtin_keys = []
        for r in _builtins():
            self.by_key[r.key] = r
            self.builtin_keys.append(r.key)
        self.generation = 0

    def add_crd(self, crd):
        """Serve the resource of a CRD (replacing an older definition)."""
        r = crd_resource(crd)
        with self.lock:
            self.by_key[r.key] = r
            self.generation += 1
        return r

    def remove(self, key):
        """Stop serving a custom resource."""
        with self.lock:
            if key in self.by_key and not self.by_key[key].builtin:
                del self.by_key[key]
                self.generation += 1

    def get(self, key):
        """ResourceInfo by 'plural[.group]' or raise 404."""
        with self.lock:
            r = self.by_key.get(key)
        if r is None:
            raise ApiError(404, "NotFound", "the server could not find the "
                           "requested resource", plain="404 page not found")
        return r

    def lookup(self, group, version, plural):
        """ResourceInfo serving group/version/plural, or None."""
        with self.lock:
            r = self.by_key.get(plural + ("." + group if group else ""))
        if r is None or version not in r.versions:
            return None
        return r

    def for_kind(self, api_version, kind):
        """ResourceInfo for an apiVersion and kind, or None."""
        group, _, version = api_version.rpartition("/")
        with self.lock:
            for r in self.by_key.values():
                if (r.group == group and r.kind == kind and
                        version in r.versions):
                    return r
        return None

    def all(self):
        """Every served resource."""
        with self.lock:
            return list(self.by_key.values())

    def group_versions(self):
        """{group: [versions]} of every served non-core group."""
        out = {}
        for r in self.all():
            if r.group:
                vs = out.setdefault(r.group, [])
                for v in r.versions:
                    if v not in vs:
                        vs.append(v)
        return out


def _version_key(v):
    """Kubernetes version priority: GA > beta > alpha, higher first."""
    import re
    m = re.match(r'^v(\d+)(?:(alpha|beta)(\d+))?$', v)
    if not m:
        return (0, 0, 0, v)
    rank = {"alpha": 1, "beta": 2, None: 3}[m.group(2)]
    return (rank, int(m.group(1)), int(m.group(3) or 0), "")


def discovery_api():
    """GET /api."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": "127.0.0.1:6443"}]}


def _group_doc(group, versions):
    """One APIGroup entry."""
    vs = sorted(versions, key=_version_key, reverse=True)
    gvs = [{"groupVersion": group + "/" + v, "version": v} for v in vs]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def discovery_apis(reg):
    """GET /apis (legacy APIGroupList)."""
    groups = reg.group_versions()
    order = ["apps", "policy", "rbac.authorization.k8s.io",
             "admissionregistration.k8s.io", "apiextensions.k8s.io",
             "coordination.k8s.io", "resource.k8s.io"]
    names = [g for g in order if g in groups] + sorted(
        g for g in groups if g not in order)
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_doc(g, groups[g]) for g in names]}


def discovery_group(reg, group):
    """GET /apis/GROUP, or None when the group is not served."""
    groups = reg.group_versions()
    if group not in groups:
        return None
    d = _group_doc(group, groups[group])
    d.update({"kind": "APIGroup", "apiVersion": "v1"})
    return d


def discovery_resources(reg, group, version):
    """GET /api/v1 or /apis/G/V (APIResourceList), or None."""
    rs = [r for r in reg.all() if r.group == group and version in r.versions]
    if not rs:
        return None
    out = []
    for r in sorted(rs, key=lambda x: x.resource):
        e = {"name": r.resource, "singularName": r.singular,
             "namespaced": r.namespaced, "kind": r.kind, "verbs": VERBS}
        if r.short_names:
            e["shortNames"] = r.short_names
        if r.categories:
            e["categories"] = r.categories
        out.append(e)
        for s in sorted(r.subresources):
            verbs = ["update"] if s == "finalize" else ["get", "patch",
                                                         "update"]
            out.append({"name": r.resource + "/" + s, "singularName": "",
                        "namespaced": r.namespaced, "kind": r.kind,
                        "verbs": verbs})
    gv = (group + "/" + version) if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": gv, "resources": out}


def _gv_path(group, version):
    """'api/v1' or 'apis/G/V'."""
    return ("apis/%s/%s" % (group, version)) if group else "api/" + version


def openapi_doc(reg, group, version):
    """The OpenAPI v3 document of one group-version (patch ops only)."""
    paths = {}
    param = {"name": "fieldValidation", "in": "query",
             "schema": {"type": "string", "uniqueItems": True}}
    for r in reg.all():
        if r.group != group or version not in r.versions:
            continue
        base = "/" + _gv_path(group, version)
        if r.namespaced:
            base += "/namespaces/{namespace}"
        gvk = {"group": group, "version": version, "kind": r.kind}
        op = {"x-kubernetes-group-version-kind": gvk,
              "x-kubernetes-action": "patch", "parameters": [param],
              "responses": {"200": {"description": "OK"}}}
        paths[base + "/" + r.resource + "/{name}"] = {
            "patch": op, "put": dict(op, **{"x-kubernetes-action": "put"})}
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.34.0"},
            "paths": paths, "components": {"schemas": {}}}


def openapi_root(reg):
    """GET /openapi/v3: the group-version index with content hashes."""
    out = {}
    gvs = {("", "v1")}
    for r in reg.all():
        for v in r.versions:
            gvs.add((r.group, v))
    for g, v in sorted(gvs):
        body = json.dumps(openapi_doc(reg, g, v), sort_keys=True).encode()
        h = hashlib.sha512(body).hexdigest()[:128].upper()
        out[_gv_path(g, v)] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s"
                               % (_gv_path(g, v), h)}
    return {"paths": out}
