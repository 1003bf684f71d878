# SPDX-License-Identifier: Apache-2.0
"""Extension points of the Kubernetes API simulator (part 1 <-> part 2).

The core server (part 1: server.py, store.py, api.py ...) knows nothing about
webhooks, quota, controllers or allocation.  Those live in plug-in modules
(part 2: webhooks.py, quota.py, controllers.py, allocator.py, ...) that plug
in here.  With nothing registered the server behaves as a bare API server.

Loading
-------
At start-up the server imports, in this order, every module of the package
named in PLUGIN_MODULES that exists, and calls its ``register(reg)`` function
if it defines one (``reg`` is the Registry below).  ``run --plugins none``
(or a comma list) restricts which modules are loaded.  A module that fails to
import stops the server at start-up (the error is in DIR/log).

Write pipeline (create / update / patch / delete, HTTP and internal alike)
---------------------------------------------------------------------------
 1. authentication, authorization (HTTP only; internal callers are trusted)
 2. decode, drop or reject unknown fields (fieldValidation), defaulting
 3. built-in namespace lifecycle: 404 if the namespace does not exist, 403
    NamespaceTerminating on create into a terminating namespace
 4. MUTATING hooks in (order, name) order; ctx.object is mutable.  On CREATE
    with generateName the name is still empty here, as real webhooks see it.
    MutatingAdmissionPolicy (order 50) runs before the webhooks (100), as
    kube-apiserver's RecommendedPluginOrder has it.  When a hook sets
    ctx.reinvocation.should_reinvoke (a policy or webhook changed the
    object), every mutating hook runs once more with
    ctx.reinvocation.is_reinvoke set (admission.reinvoker: at most two
    passes); a hook that is not reinvocation-aware must be idempotent.
 5. defaulting again, name generation (generateName), uid/timestamps
 6. validation of the built-in type (422 Invalid, 400 BadRequest ...)
 7. VALIDATING hooks (e.g. ResourceQuota), called while holding the store
    lock so that check-then-persist is atomic: they may read through
    ctx.api (get/list) but must not write or block.  (The one exception,
    quota.py, charges ResourceQuota status.used straight in the store
    under that lock, as the apiserver's quota admission writes it.)
 8. persist (unless dry run), resourceVersion bump, watch event.

A hook is ``fn(ctx) -> None`` and rejects the request by raising ApiError.

AdmissionContext fields
-----------------------
  operation    "CREATE" | "UPDATE" | "DELETE"
  resource     ResourceInfo (group, version, resource, kind, namespaced,
               key such as "pods" or "resourceclaims.resource.k8s.io",
               subresources; desc, the kind's descriptor in kinds.py)
  subresource  "" or "status", "finalize", ...
  namespace    "" for cluster-scoped objects
  name         object name ("" on CREATE with generateName in mutating hooks)
  object       dict: the new object (None on DELETE); mutable in mutating hooks
  old_object   dict: the stored object on UPDATE/DELETE (read-only), else None
  user         user name (e.g. "admin", "writer", "system:kube-controller-manager",
               "system:serviceaccount:NS:NAME" for a tenant)
  groups       list of str: the user's groups as the authenticator reports
               them (request.userInfo.groups), see default_groups()
  uid          str: the user's uid ("" when the authenticator has none)
  role         "admin" | "read-only" | "writer" | "none" | "tenant" |
               "internal"
  dry_run      bool
  options      dict of the request's query options (fieldManager, ...)
  api          the internal Api (see below)
  warnings     list of str; appended strings become "Warning: 299 - ..." headers
  reinvocation Reinvocation: is_reinvoke (the second pass), should_reinvoke
               (ask for one), values (per-plug-in state, by plug-in name)

Internal API (ctx.api, and the ``api`` argument of controllers)
---------------------------------------------------------------
Resources are named like kubectl's "resource.group": "pods", "namespaces",
"resourceclaims.resource.k8s.io", "agents.platform.kubeplus.io".  Objects are
plain dicts (JSON); every call returns deep copies, so callers may mutate them.
Writes run the full pipeline above (admission hooks included) as ``user``
(default "system:kube-controller-manager"), without authorization.

  api.resource(key) -> ResourceInfo (raises ApiError 404 if unknown)
  api.resource_for_kind(api_version, kind) -> ResourceInfo
  api.resources() -> [ResourceInfo]              (built-ins + served CRDs)
  api.get(key, namespace, name) -> dict          (raises ApiError 404)
  api.list(key, namespace=None, label_selector=None, field_selector=None,
           copy=True)
        -> (items, resource_version)             (items carry kind/apiVersion)
        copy=False: the stored objects themselves, shared with every reader
        (an informer's cache): never change them, copy what you write
  api.create(key, namespace, obj, user=..., dry_run=False) -> dict
  api.update(key, namespace, obj, subresource="", user=...) -> dict
        (resourceVersion in obj, if set, is a precondition -> 409 Conflict;
         subresource "status" changes only status; "finalize" on namespaces
         changes only spec.finalizers; a subresource the kind does not
         have is ApiError 404, as over HTTP)
  api.patch(key, namespace, name, patch, patch_type="merge",
            subresource="", user=...) -> dict
        (patch_type "merge" | "json" | "strategic"; patch is a dict/list)
  api.delete(key, namespace, name, propagation="Background",
             preconditions=None, user=...) -> dict   (the last state)
  api.watch(key=None, namespace=None, resource_version=None, copy=True)
        -> Watch (copy=False: events carry the shared stored objects)
        key None = events of every resource.  Watch.next(timeout) returns a
        WatchEvent (type "ADDED"|"MODIFIED"|"DELETED", resource ResourceInfo,
        object dict, old_object dict|None, resource_version int) or None on
        timeout; Watch.close() stops it.  resource_version None = only new
        events; an int resumes after it (ApiError 410 when too old).
  api.current_rv() -> int

Deletion semantics the controllers build on
-------------------------------------------
- An object whose metadata.finalizers is non-empty is not removed by DELETE:
  it gets deletionTimestamp (+ deletionGracePeriodSeconds 0) and a MODIFIED
  event; the update that empties metadata.finalizers removes it (DELETED).
- Namespace DELETE sets deletionTimestamp and status.phase "Terminating" and
  returns the Namespace (200); spec.finalizers ["kubernetes"] keeps it alive.
  A namespace controller empties it, may write status conditions with
  update(..., subresource="status") and finally calls
  update("namespaces", "", ns, subresource="finalize") with
  spec.finalizers == []; once both finalizer lists are empty the namespace is
  removed.  With no namespace controller registered a deleted namespace stays
  Terminating forever (as on a real cluster without kube-controller-manager).
- ownerReferences are stored but not acted upon by the core (GC is a
  controller's job).  propagationPolicy is passed to delete hooks in
  ctx.options["propagationPolicy"].

Controllers
-----------
``reg.add_controller(name, fn)``: fn(api, stop) runs in its own daemon
thread from server start; ``stop`` is a threading.Event set at shutdown
(the thread is joined for up to 2 s).  A controller that raises is logged
and restarted after 1 s.

Seeds
-----
``reg.add_seed(name, fn)``: fn(api) runs once at start, after the stock
namespaces exist and before the server answers (fixture objects).

Admin endpoints
---------------
``reg.add_sim_endpoint(method, path, fn)``: an admin-only endpoint under
/sim/ (e.g. "GET", "/sim/allocations").  fn(body) gets the decoded JSON body
(None for GET) and returns (status, JSON-able object); raise ApiError to
answer with a Status.

Configuration
-------------
``reg.options`` is a dict of the ``run ... --set KEY=VAL`` options (strings)
and ``reg.dir`` the simulator's state directory (DIR), both set before
``register(reg)`` is called.  ``reg.log(msg)`` writes a line to DIR/log.

Release
-------
``reg.release`` is the Kubernetes release the simulator is (release.py: a
``release.Release``, the string "1.37" with the feature-gate overrides and
runtime-config of ``--set k8s-version=``, ``feature-gates=``,
``runtime-config=``).  ``release.gate(x, "DRADeviceTaints")`` says whether
a gate is on, where x is the registry, an Api (``ctx.api``), the Sim, a
release string (that release's defaults) or None (the running
simulator's, for code without a handle: ``release.configure``).
"""

import threading

# Modules of this package that may register hooks, loaded in this order.
PLUGIN_MODULES = ("cel", "allocator", "quota", "webhooks", "controllers",
                  "vap", "mapolicy", "kubelet", "alloclog", "kubeplus",
                  "fleet", "devicetaint")


class ApiError(Exception):
    """An error the server renders as a Kubernetes Status body.

    code: HTTP status; reason: StatusReason (e.g. "Forbidden", "Invalid");
    message: Status.message; details: dict for Status.details (name, group,
    kind, causes [{reason, message, field}], retryAfterSeconds) or None;
    headers: extra response headers (e.g. {"Retry-After": "1"});
    plain: if set, the body is this plain text instead of a Status.
    """

    def __init__(self, code, reason, message, details=None, headers=None,
                 plain=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.plain = plain

    def status(self):
        """Return the Status object for this error."""
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {},
              "status": "Failure", "message": self.message}
        if self.reason:
            st["reason"] = self.reason
        if self.details:
            st["details"] = self.details
        st["code"] = self.code
        return st


def _details(res, name):
    """Status details for a resource (ResourceInfo or plural str) and name."""
    d = {}
    if name:
        d["name"] = name
    if hasattr(res, "group"):
        if res.group:
            d["group"] = res.group
        d["kind"] = res.resource
    else:
        d["kind"] = res
    return d


def qualified(res):
    """'pods' or 'resourceclaims.resource.k8s.io' as in error messages."""
    if hasattr(res, "group"):
        return res.resource + ("." + res.group if res.group else "")
    return res


def err_not_found(res, name):
    """404 NotFound as the real server words it."""
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(res),
                    name), _details(res, name))


def err_already_exists(res, name):
    """409 AlreadyExists."""
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' %
                    (qualified(res), name), _details(res, name))


def err_conflict(res, name, why=None):
    """409 Conflict (stale resourceVersion or failed precondition)."""
    why = why or ("the object has been modified; please apply your changes "
                  "to the latest version and try again")
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s '
                    '"%s": %s' % (qualified(res), name, why),
                    _details(res, name))


def err_forbidden(res, name, why):
    """403 Forbidden with a reason text (quota, terminating namespace ...)."""
    if name:
        msg = '%s "%s" is forbidden: %s' % (qualified(res), name, why)
    else:
        msg = '%s is forbidden: %s' % (qualified(res), why)
    return ApiError(403, "Forbidden", msg, _details(res, name))


def err_bad_request(msg):
    """400 BadRequest."""
    return ApiError(400, "BadRequest", msg)


def err_internal(msg):
    """500 InternalError as the real server words it."""
    return ApiError(500, "InternalError", "Internal error occurred: " + msg,
                    {"causes": [{"message": msg}]})


def err_invalid(res, name, causes):
    """422 Invalid; causes is a list of FieldError (see validation.py)."""
    kind = res.kind if hasattr(res, "kind") else str(res)
    group = res.group if hasattr(res, "group") else ""
    qk = kind + ("." + group if group else "")
    texts = [c.error() for c in causes]
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    details["causes"] = [c.cause() for c in causes]
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (qk, name,
                    body), details)


def default_groups(user, role=None):
    """The groups an apiserver authenticator reports for USER: service
    accounts get system:serviceaccounts and system:serviceaccounts:NS
    (pkg/serviceaccount), the admin role system:masters, every
    authenticated user system:authenticated."""
    if user == "system:anonymous" or role == "anonymous":
        return ["system:unauthenticated"]
    if user.startswith("system:serviceaccount:") and user.count(":") == 3:
        ns = user.split(":")[2]
        return ["system:serviceaccounts", "system:serviceaccounts:" + ns,
                "system:authenticated"]
    if role == "admin" or (role is None and user == "admin"):
        return ["system:masters", "system:authenticated"]
    return ["system:authenticated"]


class Caller:
    """Who makes one write request and how: user (with its groups and
    uid), role, dry run, query options, the warnings collected for it."""

    def __init__(self, user, role, dry_run=False, options=None, groups=None,
                 uid=""):
        self.user = user
        self.groups = list(groups) if groups is not None else \
            default_groups(user, role)
        self.uid = uid
        self.role = role
        self.dry_run = dry_run
        self.options = options or {}
        self.warnings = []


class Reinvocation:
    """admission.ReinvocationContext of one request: whether this is the
    second pass of the mutating chain, whether a hook asked for it, and
    each plug-in's own reinvocation state."""

    def __init__(self):
        self.is_reinvoke = False
        self.should_reinvoke = False
        self.values = {}


class AdmissionContext(Caller):
    """What an admission hook sees of one write request."""

    def __init__(self, operation, resource, namespace, name, obj, old,
                 user, role, api, subresource="", dry_run=False,
                 options=None, groups=None, uid=""):
        super().__init__(user, role, dry_run, options, groups, uid)
        self.operation = operation
        self.resource = resource
        self.subresource = subresource
        self.namespace = namespace
        self.name = name
        self.object = obj
        self.old_object = old
        self.api = api
        self.reinvocation = Reinvocation()


class Registry:
    """Holds the registered hooks and controllers of one server."""

    def __init__(self):
        self.mutating = []
        self.validating = []
        self.controllers = []
        self.seeds = []
        self.sim_endpoints = {}
        self.lock = threading.Lock()
        self.options = {}
        self.dir = ""
        self.log = lambda msg: None
        # the simulator's release.Release (set before register(reg)):
        # release.gate(reg, "Name") says whether a feature gate is on
        self.release = None

    def add_mutating(self, name, fn, order=100):
        """Register fn(ctx) as a mutating admission hook."""
        with self.lock:
            self.mutating.append((order, name, fn))
            self.mutating.sort(key=lambda t: (t[0], t[1]))

    def add_validating(self, name, fn, order=100):
        """Register fn(ctx) as a validating admission hook."""
        with self.lock:
            self.validating.append((order, name, fn))
            self.validating.sort(key=lambda t: (t[0], t[1]))

    def add_controller(self, name, fn):
        """Register fn(api, stop_event) to run in a thread with the server."""
        with self.lock:
            self.controllers.append((name, fn))

    def add_seed(self, name, fn):
        """Register fn(api): objects created at start, before serving."""
        with self.lock:
            self.seeds.append((name, fn))

    def add_sim_endpoint(self, method, path, fn):
        """Register fn(body) -> (status, obj) for METHOD /sim/PATH."""
        with self.lock:
            self.sim_endpoints[(method, path)] = fn

    def run_mutating(self, ctx):
        """Run every mutating hook, and all of them once more when one
        asked for reinvocation; an ApiError aborts the request."""
        hooks = list(self.mutating)
        for _, _, fn in hooks:
            fn(ctx)
        rc = ctx.reinvocation
        if rc.should_reinvoke and not rc.is_reinvoke:
            rc.is_reinvoke = True
            for _, _, fn in hooks:
                fn(ctx)

    def run_validating(self, ctx):
        """Run every validating hook; an ApiError aborts the request."""
        for _, _, fn in list(self.validating):
            fn(ctx)
