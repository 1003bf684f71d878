# SPDX-License-Identifier: Apache-2.0
"""Tenant identities: service-account tokens bound to one namespace with
the rights of the aggregated `edit` ClusterRole given by a RoleBinding in
that namespace.

`simctl DIR tenant NS [NAME]` adds one (DIR/tenants, lines
`token namespace name uid`, mode 0600) and prints its kubeconfig; a running
simulator reads the file again when it meets a token it does not know, so
tenants added while it runs work at once and a restarted simulator keeps
them.

The rules are those of system:aggregate-to-edit + system:aggregate-to-view
in plugin/pkg/auth/authorizer/rbac/bootstrappolicy (testdata/
cluster-roles-featuregates.yaml, DynamicResourceAllocation on), restricted
to the resources the simulator serves. A RoleBinding only grants them in
its namespace: nothing cluster-scoped (DeviceClasses, ResourceSlices,
Namespaces lists, CRDs, webhook configurations, RBAC kinds), nothing in
another namespace; the own Namespace object can be read, not written.
"""

import fcntl
import os
import re
import secrets
import uuid

FILE = "tenants"
WRITE = {"create", "update", "patch", "delete", "deletecollection"}
READ = {"get", "list", "watch"}

# system:aggregate-to-edit: create/update/patch/delete/deletecollection.
EDIT_WRITE = {
    "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy",
    "configmaps", "events", "persistentvolumeclaims",
    "replicationcontrollers", "replicationcontrollers/scale", "secrets",
    "serviceaccounts", "services", "services/proxy",
    "daemonsets.apps", "deployments.apps", "deployments.apps/rollback",
    "deployments.apps/scale", "replicasets.apps", "replicasets.apps/scale",
    "statefulsets.apps", "statefulsets.apps/scale",
    "horizontalpodautoscalers.autoscaling", "cronjobs.batch", "jobs.batch",
    "poddisruptionbudgets.policy", "ingresses.networking.k8s.io",
    "networkpolicies.networking.k8s.io", "leases.coordination.k8s.io",
    "resourceclaims.resource.k8s.io",
    "resourceclaimtemplates.resource.k8s.io"}
EDIT_CREATE = {"pods/eviction", "serviceaccounts/token"}
# get/list/watch: system:aggregate-to-view plus edit's reads (secrets,
# pod and service proxies, leases).
VIEW_READ = {
    "configmaps", "endpoints", "persistentvolumeclaims",
    "persistentvolumeclaims/status", "pods", "replicationcontrollers",
    "replicationcontrollers/scale", "serviceaccounts", "services",
    "services/status", "bindings", "events", "limitranges",
    "namespaces/status", "pods/log", "pods/status",
    "replicationcontrollers/status", "resourcequotas",
    "resourcequotas/status", "namespaces",
    "endpointslices.discovery.k8s.io", "controllerrevisions.apps",
    "daemonsets.apps", "daemonsets.apps/status", "deployments.apps",
    "deployments.apps/scale", "deployments.apps/status", "replicasets.apps",
    "replicasets.apps/scale", "replicasets.apps/status", "statefulsets.apps",
    "statefulsets.apps/scale", "statefulsets.apps/status",
    "horizontalpodautoscalers.autoscaling",
    "horizontalpodautoscalers.autoscaling/status", "cronjobs.batch",
    "cronjobs.batch/status", "jobs.batch", "jobs.batch/status",
    "poddisruptionbudgets.policy", "poddisruptionbudgets.policy/status",
    "ingresses.networking.k8s.io", "ingresses.networking.k8s.io/status",
    "networkpolicies.networking.k8s.io",
    "resourceclaims.resource.k8s.io", "resourceclaims.resource.k8s.io/status",
    "resourceclaimtemplates.resource.k8s.io",
    "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
    "services/proxy", "leases.coordination.k8s.io"}

LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                          r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class Tenant:
    """One service-account identity bound to a namespace."""

    def __init__(self, token, namespace, name, uid):
        self.token = token
        self.namespace = namespace
        self.name = name
        self.uid = uid

    @property
    def user(self):
        """The service account's user name."""
        return "system:serviceaccount:%s:%s" % (self.namespace, self.name)

    @property
    def groups(self):
        """The groups the service-account authenticator reports."""
        return ["system:serviceaccounts",
                "system:serviceaccounts:" + self.namespace,
                "system:authenticated"]


def allowed(tenant, verb, res, sub, ns):
    """RBAC of `edit` bound in the tenant's namespace. NS is the request's
    namespace (a Namespace object's own name for namespaces/NAME)."""
    if ns != tenant.namespace:
        return False
    key = res.key + ("/" + sub if sub else "")
    if verb in READ:
        return key in VIEW_READ
    if verb in WRITE:
        return key in EDIT_WRITE or (verb == "create" and key in EDIT_CREATE)
    return False


def check_names(namespace, name):
    """An error text for a bad namespace or service-account name, or None."""
    if len(namespace) > 63 or not LABEL_RE.match(namespace):
        return "namespace %r is not a valid DNS label" % namespace
    if len(name) > 253 or not SUBDOMAIN_RE.match(name):
        return "name %r is not a valid DNS subdomain" % name
    return None


def load(d):
    """{token: Tenant} from DIR/tenants (empty when there is none)."""
    out = {}
    try:
        with open(os.path.join(d, FILE)) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and check_names(parts[1], parts[2]) is None:
                    out[parts[0]] = Tenant(*parts)
    except FileNotFoundError:
        pass
    return out


def stamp(d):
    """(mtime, size) of DIR/tenants, to notice that it changed."""
    try:
        st = os.stat(os.path.join(d, FILE))
        return st.st_mtime_ns, st.st_size
    except FileNotFoundError:
        return None


def add(d, namespace, name):
    """The tenant NAMESPACE/NAME, created (and persisted) if new."""
    path = os.path.join(d, FILE)
    lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for t in load(d).values():
            if t.namespace == namespace and t.name == name:
                return t
        t = Tenant(secrets.token_hex(24), namespace, name, str(uuid.uuid4()))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write("%s %s %s %s\n" % (t.token, namespace, name, t.uid))
        return t
    finally:
        os.close(lock)


def kubeconfig_path(d, t):
    """Where the tenant's kubeconfig is kept."""
    return os.path.join(d, "kubeconfig-tenant-%s-%s" % (t.namespace, t.name))
