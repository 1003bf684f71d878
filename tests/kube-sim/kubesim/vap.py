# SPDX-License-Identifier: Apache-2.0
"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), evaluated
in the validating stage of every write as kube-apiserver's
ValidatingAdmissionPolicy plug-in does.

For each policy (by name) whose matchConstraints match the request, every
binding naming it whose matchResources (if any) also match is evaluated
once per parameter object (paramKind/paramRef).  matchConditions decide
whether the validations run; a validation that does not hold gives a
decision with its message (messageExpression, message or "failed
expression: <expr>") and reason (default Invalid); evaluation errors are
denials under failurePolicy Fail and ignored under Ignore.  The binding's
validationActions turn a denial into a 4xx (Deny), a warning header
(Warn) or nothing (Audit: there is no audit log here).  The first denial
is the Status:

  <resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>'
  with binding '<binding>' denied request: <message>

with the reason's code (Invalid 422, Forbidden 403, Unauthorized 401,
RequestEntityTooLarge 413).  Upstream: staging/src/k8s.io/apiserver/pkg/
admission/plugin/policy/validating/{dispatcher,validator}.go,
policy/generic/policy_dispatcher.go (CollectParams), policy/matching,
plugin/cel/{activation,condition}.go and pkg/apis/admissionregistration/
validation/validation.go for the create-time checks (done here too, as a
validating hook on the two kinds: 422 with the apiserver's field paths).
"""

import re
import threading

from . import cel, release
from .hooks import ApiError, err_forbidden, err_invalid
from .selector import match_label_selector_obj, rule_matches
from .validation import FieldError

GROUP = "admissionregistration.k8s.io"
VAP = "validatingadmissionpolicies." + GROUP
VAPB = "validatingadmissionpolicybindings." + GROUP
BASE_VARS = ("object", "oldObject", "request", "namespaceObject",
             "variables", "authorizer")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422,
                "RequestEntityTooLarge": 413}
MAX_MESSAGE = 5 * 1024
CEL_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
CEL_RESERVED = cel.RESERVED | {"true", "false", "null", "in"}
STATS = {"evaluations": 0}
# CEL runtime cost (kubesim/cel.py's approximation of cel-go's units):
# per policy evaluation and per admission (every policy of one write);
# /sim/stats shows it as "vap", /sim/stats/reset zeroes it.
_COST_LOCK = threading.Lock()
COST = {}


def _cost_add(key, cost):
    with _COST_LOCK:
        c = COST.setdefault(key, {"count": 0, "cost": 0, "max": 0})
        c["count"] += 1
        c["cost"] += cost
        c["max"] = max(c["max"], cost)


def cost_snapshot():
    """{"policies": {name: {count, cost, max}}, "admissions": {...}}."""
    with _COST_LOCK:
        out = {"policies": {}, "admissions": {"count": 0, "cost": 0,
                                              "max": 0}}
        for k, v in COST.items():
            if k == "":
                out["admissions"] = dict(v)
            else:
                out["policies"][k] = dict(v)
        return out


def cost_reset():
    with _COST_LOCK:
        COST.clear()


# ------------------------------------------------------------- compiling

def _compile(expr, declared, variables, path, errs, types=()):
    """A Program, or None with a FieldError appended."""
    try:
        return cel.Program(expr, declared, variables, types)
    except cel.CelError as e:
        msg, where = str(e), ""
        m = re.search(r" at offset (\d+)", msg)
        if m:
            off = int(m.group(1))
            line = expr.count("\n", 0, off) + 1
            col = off - (expr.rfind("\n", 0, off) + 1) + 1
            where = "%d:%d:" % (line, col)
            msg = msg[:m.start()] + msg[m.end():]
        errs.append(FieldError("Invalid", path, expr,
                               "compilation failed: ERROR: <input>:%s %s"
                               % (where, msg)))
        return None


def compile_variables(spec, declared, errs, types=()):
    """{name: Program} of spec.variables (each may use the ones before
    it), with FieldErrors appended to ERRS."""
    out = {}
    seen = set()
    for i, v in enumerate(_list(spec.get("variables"))):
        path = "spec.variables[%d]" % i
        name, expr = v.get("name"), v.get("expression")
        if not isinstance(name, str) or not name.strip():
            errs.append(FieldError("Required", path + ".name",
                                   detail="name is not specified"))
        elif not CEL_IDENT.match(name) or name in CEL_RESERVED:
            errs.append(FieldError("Invalid", path + ".name", name,
                                   "name is not a valid CEL identifier"))
        if not isinstance(expr, str) or not expr.strip():
            errs.append(FieldError("Required", path + ".expression",
                                   detail="expression is not specified"))
            continue
        prog = _compile(expr, declared, frozenset(seen),
                        path + ".expression", errs, types)
        if prog is not None and isinstance(name, str):
            out[name] = prog
            seen.add(name)
    return out


def compile_conditions(spec, declared, names, errs, types=()):
    """[(name, Program)] of spec.matchConditions (at most 64, names
    unique), with FieldErrors appended to ERRS."""
    out = []
    cond_names = set()
    conds = _list(spec.get("matchConditions"))
    if len(conds) > 64:
        errs.append(FieldError("TooMany", "spec.matchConditions",
                               len(conds), "must have at most 64 items"))
    for i, mc in enumerate(conds):
        path = "spec.matchConditions[%d]" % i
        name, expr = mc.get("name"), mc.get("expression")
        if not isinstance(expr, str) or not expr.strip():
            errs.append(FieldError("Required", path + ".expression"))
        else:
            prog = _compile(expr.strip(), declared, names,
                            path + ".expression", errs, types)
            out.append((name, prog or _Broken(expr, errs[-1])))
        if not isinstance(name, str) or not name:
            errs.append(FieldError("Required", path + ".name"))
        elif name in cond_names:
            errs.append(FieldError("Duplicate", path + ".name", name))
        else:
            cond_names.add(name)
    return out


class Compiled:
    """The programs of one policy (compiled once per resourceVersion)."""

    def __init__(self, pol, errs=None):
        errs = [] if errs is None else errs
        spec = pol.get("spec") or {}
        self.name = pol["metadata"]["name"]
        self.spec = spec
        self.failure = spec.get("failurePolicy") or "Fail"
        self.param_kind = spec.get("paramKind")
        declared = BASE_VARS + (("params",) if self.param_kind else ())
        self.variables = compile_variables(spec, declared, errs)
        names = frozenset(self.variables)
        self.conditions = compile_conditions(spec, declared, names, errs)
        self.validations = []
        msg_declared = tuple(d for d in declared if d != "authorizer")
        vals = _list(spec.get("validations"))
        for i, v in enumerate(vals):
            path = "spec.validations[%d]" % i
            expr = v.get("expression")
            prog = mprog = None
            if not isinstance(expr, str) or not expr.strip():
                errs.append(FieldError("Required", path + ".expression",
                                       detail="expression is not specified"))
            else:
                prog = _compile(expr, declared, names, path + ".expression",
                                errs)
            mexpr = v.get("messageExpression")
            if isinstance(mexpr, str) and mexpr and not mexpr.strip():
                errs.append(FieldError("Invalid", path + ".messageExpression",
                                       mexpr, "must be non-empty if "
                                       "specified"))
            elif isinstance(mexpr, str) and mexpr.strip():
                mprog = _compile(mexpr, msg_declared, names,
                                 path + ".messageExpression", errs)
            msg = v.get("message")
            if isinstance(msg, str) and msg and not msg.strip():
                errs.append(FieldError("Invalid", path + ".message", msg,
                                       "message must be non-empty if "
                                       "specified"))
            elif isinstance(msg, str) and re.search(r"[\n\r]", msg.strip()):
                errs.append(FieldError("Invalid", path + ".message", msg,
                                       "message must not contain line "
                                       "breaks"))
            reason = v.get("reason")
            if reason is not None and reason not in REASON_CODES:
                errs.append(FieldError(
                    "NotSupported", path + ".reason", reason,
                    "supported values: " + ", ".join(
                        '"%s"' % r for r in sorted(REASON_CODES))))
            if prog is None and isinstance(expr, str) and expr.strip():
                prog = _Broken(expr, errs[-1])
            if prog is not None:
                self.validations.append((v, prog, mprog))
        audits = _list(spec.get("auditAnnotations"))
        if not vals and not audits:
            for f in ("validations", "auditAnnotations"):
                errs.append(FieldError(
                    "Required", "spec." + f, detail="validations or "
                    "auditAnnotations must contain at least one item"))
        for i, a in enumerate(audits):
            expr = a.get("valueExpression")
            path = "spec.auditAnnotations[%d].valueExpression" % i
            if not isinstance(expr, str) or not expr.strip():
                errs.append(FieldError("Required", path, detail="value"
                                       "Expression is not specified"))
            else:
                _compile(expr.strip(), declared, names, path, errs)


class _Broken:
    """An expression that did not compile (only a policy stored without
    the spec checks can have one): evaluating it is an error, as
    upstream's "compilation error: ..." evaluation result."""

    def __init__(self, text, ferr):
        self.text = text
        self.error = "compilation error: " + ferr.detail

    def evaluate_in(self, env):
        """Always the compilation error."""
        raise cel.CelError(self.error)


def _list(v):
    """V if it is a list of dicts, else the dicts in it / []."""
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) \
        else []


_CACHE = {}
_CACHE_LOCK = threading.Lock()


def compiled(pol):
    """The Compiled form of a stored policy (memoised by uid and rv)."""
    md = pol["metadata"]
    key = (md.get("uid"), md.get("resourceVersion"))
    with _CACHE_LOCK:
        c = _CACHE.get(key)
    if c is None:
        c = Compiled(pol)
        with _CACHE_LOCK:
            if len(_CACHE) > 256:
                _CACHE.clear()
            _CACHE[key] = c
    return c


# ------------------------------------------------------------ validation

def _not_supported(path, value, allowed, errs):
    """Append a NotSupported error unless VALUE is in ALLOWED."""
    if value not in allowed:
        errs.append(FieldError("NotSupported", path, value,
                               "supported values: " + ", ".join(
                                   '"%s"' % a for a in allowed)))


def _validate_rules(rules, path, errs):
    """NamedRuleWithOperations checks (validateRuleWithOperations)."""
    for i, r in enumerate(rules):
        p = "%s[%d]" % (path, i)
        ops = r.get("operations") or []
        if not ops:
            errs.append(FieldError("Required", p + ".operations"))
        for j, op in enumerate(ops):
            _not_supported("%s.operations[%d]" % (p, j), op,
                           ("*", "CONNECT", "CREATE", "DELETE", "UPDATE"),
                           errs)
        if len(ops) > 1 and "*" in ops:
            errs.append(FieldError("Invalid", p + ".operations", ops,
                                   "if '*' is present, must not specify "
                                   "other operations"))
        for f in ("apiGroups", "apiVersions", "resources"):
            vals = r.get(f) or []
            if not vals:
                errs.append(FieldError("Required", "%s.%s" % (p, f)))
            elif len(vals) > 1 and "*" in vals:
                errs.append(FieldError("Invalid", "%s.%s" % (p, f), vals,
                                       "if '*' is present, must not "
                                       "specify other %s" % (
                                           "API groups" if f == "apiGroups"
                                           else "API versions" if f ==
                                           "apiVersions" else "resources")))
        _not_supported(p + ".scope", r.get("scope", "*"),
                       ("*", "Cluster", "Namespaced"), errs)
        names = set()
        for j, n in enumerate(r.get("resourceNames") or []):
            if n in names:
                errs.append(FieldError("Duplicate", "%s.resourceNames[%d]"
                                       % (p, j), n))
            names.add(n)


def _validate_match(mr, path, errs):
    """MatchResources checks (validateMatchResources)."""
    if not isinstance(mr, dict):
        return
    if mr.get("matchPolicy") is None:
        errs.append(FieldError("Required", path + ".matchPolicy"))
    else:
        _not_supported(path + ".matchPolicy", mr["matchPolicy"],
                       ("Equivalent", "Exact"), errs)
    for f in ("namespaceSelector", "objectSelector"):
        if mr.get(f) is None:
            errs.append(FieldError("Required", "%s.%s" % (path, f)))
    _validate_rules(_list(mr.get("resourceRules")), path + ".resourceRules",
                    errs)
    _validate_rules(_list(mr.get("excludeResourceRules")),
                    path + ".excludeResourceRules", errs)


def validate_policy(obj):
    """Create/update checks of a ValidatingAdmissionPolicy."""
    errs = []
    spec = obj.get("spec") or {}
    if spec.get("failurePolicy") is None:
        errs.append(FieldError("Required", "spec.failurePolicy"))
    else:
        _not_supported("spec.failurePolicy", spec["failurePolicy"],
                       ("Fail", "Ignore"), errs)
    pk = spec.get("paramKind")
    if isinstance(pk, dict):
        for f in ("apiVersion", "kind"):
            if not pk.get(f):
                errs.append(FieldError("Required", "spec.paramKind." + f))
    mc = spec.get("matchConstraints")
    if not isinstance(mc, dict):
        errs.append(FieldError("Required", "spec.matchConstraints"))
    else:
        _validate_match(mc, "spec.matchConstraints", errs)
        if not mc.get("resourceRules"):
            errs.append(FieldError("Required",
                                   "spec.matchConstraints.resourceRules"))
    Compiled(obj, errs)
    return errs


def _validate_param_ref(pr, errs):
    """ParamRef checks of a binding (name xor selector, the
    parameterNotFoundAction)."""
    if not isinstance(pr, dict):
        return
    if pr.get("name") and pr.get("selector") is not None:
        for f in ("name", "selector"):
            errs.append(FieldError("Forbidden", "spec.paramRef." + f,
                                   detail="name and selector are "
                                   "mutually exclusive"))
    if not pr.get("name") and pr.get("selector") is None:
        errs.append(FieldError("Required", "spec.paramRef",
                               detail="one of name or selector must be "
                               "specified"))
    if not pr.get("parameterNotFoundAction"):
        errs.append(FieldError("Required",
                               "spec.paramRef.parameterNotFoundAction"))
    else:
        _not_supported("spec.paramRef.parameterNotFoundAction",
                       pr["parameterNotFoundAction"], ("Deny", "Allow"),
                       errs)


def validate_binding(obj):
    """Create/update checks of a ValidatingAdmissionPolicyBinding."""
    errs = []
    spec = obj.get("spec") or {}
    if not spec.get("policyName"):
        errs.append(FieldError("Required", "spec.policyName"))
    _validate_param_ref(spec.get("paramRef"), errs)
    # The apiserver's field path really is spelt "matchResouces".
    _validate_match(spec.get("matchResources"), "spec.matchResouces", errs)
    actions = spec.get("validationActions") or []
    seen = set()
    for i, a in enumerate(actions):
        _not_supported("spec.validationActions[%d]" % i, a,
                       ("Audit", "Deny", "Warn"), errs)
        if a in seen:
            errs.append(FieldError("Duplicate",
                                   "spec.validationActions[%d]" % i, a))
        seen.add(a)
    if "Deny" in seen and "Warn" in seen:
        errs.append(FieldError(
            "Invalid", "spec.validationActions", actions, "must not contain "
            "both Deny and Warn (repeating the same validation failure "
            "information in the API response and headers serves no "
            "purpose)"))
    if not seen:
        errs.append(FieldError("Required", "spec.validationActions",
                               detail="at least one validation action is "
                               "required"))
    return errs


def check_spec(ctx):
    """Validating hook: 422 for an invalid policy or binding."""
    key = ctx.resource.key
    if key not in (VAP, VAPB) or ctx.operation not in ("CREATE", "UPDATE") \
            or ctx.subresource:
        return
    obj = ctx.object or {}
    errs = validate_policy(obj) if key == VAP else validate_binding(obj)
    if errs:
        raise err_invalid(ctx.resource, ctx.name, errs)


# -------------------------------------------------------------- matching

def _rule_matches(rule, ctx):
    """One NamedRuleWithOperations against the request."""
    names = rule.get("resourceNames") or []
    if names and _request_name(ctx) not in names:
        return False
    return rule_matches(rule, ctx)


class _Request:
    """Per-request data shared by every policy: the namespace, lazily."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._ns = False

    def namespace(self):
        """The request's Namespace object (None if cluster-scoped)."""
        if self._ns is False:
            ctx = self.ctx
            self._ns = None
            if ctx.namespace and ctx.resource.key != "namespaces":
                try:
                    self._ns = ctx.api.get("namespaces", "", ctx.namespace)
                except ApiError:
                    self._ns = None
        return self._ns

    def namespace_labels(self):
        """Labels for namespaceSelector, or None: always matches."""
        ctx = self.ctx
        if ctx.resource.key == "namespaces":
            obj = ctx.object if ctx.object is not None else ctx.old_object
            return ((obj or {}).get("metadata") or {}).get("labels") or {}
        if not ctx.namespace:
            return None
        ns = self.namespace()
        return ((ns or {}).get("metadata") or {}).get("labels") or {}


def matches(mr, ctx, req, need_rules=True):
    """MatchResources (policy matchConstraints or binding matchResources)
    against the request, as policy/matching does."""
    nsel = mr.get("namespaceSelector")
    if nsel:
        labels = req.namespace_labels()
        if labels is not None and not match_label_selector_obj(nsel, labels):
            return False
    osel = mr.get("objectSelector")
    if osel:
        objs = [o for o in (ctx.object, ctx.old_object) if o is not None]
        if not any(match_label_selector_obj(osel, (o.get("metadata") or {})
                                            .get("labels") or {})
                   for o in objs):
            return False
    if any(_rule_matches(r, ctx) for r in _list(
            mr.get("excludeResourceRules"))):
        return False
    rules = _list(mr.get("resourceRules"))
    if not rules:
        return not need_rules
    return any(_rule_matches(r, ctx) for r in rules)


# ------------------------------------------------------------- evaluation

class ConfigError(Exception):
    """A policy or binding that cannot be applied (failurePolicy)."""


def _request_name(ctx):
    """request.name: empty on a CREATE whose name is being generated."""
    md = (ctx.object or {}).get("metadata") or {}
    gen = md.get("generateName")
    if ctx.operation == "CREATE" and gen and ctx.name.startswith(gen) and \
            len(ctx.name) == len(gen) + 5:
        return ""
    return ctx.name


def request_value(ctx):
    """The CEL `request` (AdmissionRequest as unstructured, omitempty)."""
    res = ctx.resource
    kind = {"group": res.group, "version": res.version, "kind": res.kind}
    resource = {"group": res.group, "version": res.version,
                "resource": res.resource}
    r = {"kind": kind, "resource": resource, "requestKind": dict(kind),
         "requestResource": dict(resource)}
    if ctx.subresource:
        r["subResource"] = ctx.subresource
        r["requestSubResource"] = ctx.subresource
    name = _request_name(ctx)
    if name:
        r["name"] = name
    if ctx.namespace:
        r["namespace"] = ctx.namespace
    r["operation"] = ctx.operation
    user = {}
    if ctx.user:
        user["username"] = ctx.user
    uid = getattr(ctx, "uid", "")
    if uid:
        user["uid"] = uid
    groups = list(getattr(ctx, "groups", None) or [])
    if groups:
        user["groups"] = groups
    r["userInfo"] = user
    r["dryRun"] = bool(ctx.dry_run)
    okind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions",
             "DELETE": "DeleteOptions"}.get(ctx.operation)
    if okind:
        opts = {"kind": okind, "apiVersion": "meta.k8s.io/v1"}
        for k in ("fieldManager", "fieldValidation", "propagationPolicy"):
            if (ctx.options or {}).get(k) is not None and \
                    (okind == "DeleteOptions") == (k == "propagationPolicy"):
                opts[k] = ctx.options[k]
        r["options"] = opts
    return r


def namespace_value(ns):
    """The CEL `namespaceObject`: metadata subset, spec and status."""
    if ns is None:
        return None
    md = ns.get("metadata") or {}
    keep = ("name", "generateName", "namespace", "uid", "resourceVersion",
            "generation", "creationTimestamp", "deletionTimestamp",
            "deletionGracePeriodSeconds", "labels", "annotations",
            "finalizers")
    out = {"metadata": {k: md[k] for k in keep if md.get(k)}}
    for f in ("spec", "status"):
        if ns.get(f):
            out[f] = ns[f]
    return out


def _param_kind_text(pk):
    """ParamKind.String() as Go prints it."""
    return "&ParamKind{APIVersion:%s,Kind:%s,}" % (pk.get("apiVersion", ""),
                                                  pk.get("kind", ""))


def collect_params(comp, binding, ctx):
    """The parameter objects of one binding (generic.CollectParams):
    [None] without paramKind/paramRef; [] when none is found and
    parameterNotFoundAction is Allow; ConfigError for Deny and
    misconfigurations."""
    pk = comp.param_kind
    ref = (binding.get("spec") or {}).get("paramRef")
    if not pk or not isinstance(ref, dict):
        return [None]
    try:
        res = ctx.api.resource_for_kind(pk.get("apiVersion", ""),
                                        pk.get("kind", ""))
    except ApiError:
        raise ConfigError("paramKind kind `%s` not known"
                          % _param_kind_text(pk))
    ns = ""
    if res.namespaced:
        ns = ref.get("namespace") or ctx.namespace
        if not ns:
            raise ConfigError("cannot use namespaced paramRef in policy "
                              "binding that matches cluster-scoped "
                              "resources")
    elif ref.get("namespace"):
        raise ConfigError("paramRef.namespace must not be provided for a "
                          "cluster-scoped `paramKind`")
    frozen = _frozen_store(ctx, res)
    if ref.get("name"):
        params = []
        if frozen is not None:
            p = frozen.get((ns, ref["name"]))
            params = [p] if p is not None else []
        if frozen is None or (not params and _direct_get(ctx)):
            try:
                params = [ctx.api.get(res.key, ns, ref["name"])]
            except ApiError as e:
                if e.code != 404:
                    raise ConfigError(e.message)
                params = []
    else:
        sel = ref.get("selector") or {}
        if frozen is not None:
            items = [o for (ons, _), o in frozen.items()
                     if not ns or ons == ns]
        else:
            items, _ = ctx.api.list(res.key, ns or None)
        params = [o for o in items if match_label_selector_obj(
            sel, (o.get("metadata") or {}).get("labels") or {})]
        params.sort(key=lambda o: (o["metadata"].get("namespace", ""),
                                   o["metadata"]["name"]))
    if not params and ref.get("parameterNotFoundAction") == "Deny":
        raise ConfigError("no params found for policy binding with `Deny` "
                          "parameterNotFoundAction")
    return params


# ------------------------------------------- param informers (the bug)

class ParamInformers:
    """The policy sources' param informers, with kubernetes/kubernetes
    #130887 / #133827 (policy_source.go's refresh loop) when BUG is on.

    Every refresh tick (1 s, policyRefreshIntervalDefault) the kinds used
    as paramKind by a policy (Validating or Mutating) that has at least
    one binding are the ones with an informer; the informer of a kind no
    longer used is cancelled.  For a built-in kind (ConfigMap, ...) the
    informer is the shared informer factory's, which never restarts a
    stopped informer: its store stays as it was at that moment, for every
    later use of that kind, until the simulator restarts.  A custom
    resource's informer is made afresh on each use, so CRD paramKinds are
    unaffected.  With DIRECT_GET (1.37: upstream #134423), a paramRef.name
    the frozen store lacks is read from the live store instead; a
    paramRef.selector and a stale object still come from the frozen
    store."""

    TICK = 1.0

    def __init__(self, bug=True, direct_get=False):
        self.bug = bug
        self.direct_get = direct_get
        self.lock = threading.Lock()
        self.active = set()     # resource keys with a running informer
        self.frozen = {}        # built-in key -> {(ns, name): object}
        self.ticks = 0

    def store(self, key):
        """The frozen store of resource KEY, or None (read live)."""
        with self.lock:
            return self.frozen.get(key)

    def tick(self, api):
        """One refresh: cancel the informers of kinds no bound policy
        uses any more (freezing built-in ones), start the others."""
        used = set()
        for pol_key, bind_key in ((VAP, VAPB), (
                "mutatingadmissionpolicies." + GROUP,
                "mutatingadmissionpolicybindings." + GROUP)):
            try:
                pols, _ = api.list(pol_key, copy=False)
                binds, _ = api.list(bind_key, copy=False)
            except ApiError:
                continue
            bound = {(b.get("spec") or {}).get("policyName") for b in binds}
            for pol in pols:
                pk = (pol.get("spec") or {}).get("paramKind")
                if pol["metadata"]["name"] not in bound or \
                        not isinstance(pk, dict):
                    continue
                try:
                    res = api.resource_for_kind(pk.get("apiVersion", ""),
                                                pk.get("kind", ""))
                except ApiError:
                    continue
                used.add(res.key)
        with self.lock:
            self.ticks += 1
            gone = self.active - used
            self.active = used
        for key in sorted(gone):
            try:
                res = api.resource(key)
            except ApiError:
                continue
            if not res.builtin or not self.bug:
                continue
            with self.lock:
                if key in self.frozen:
                    continue
            items, _ = api.list(key, copy=False)
            snap = {(o["metadata"].get("namespace", ""),
                     o["metadata"]["name"]): o for o in items}
            with self.lock:
                self.frozen.setdefault(key, snap)

    def describe(self):
        """GET /sim/param-informers."""
        with self.lock:
            return {"bug": self.bug, "directGet": self.direct_get,
                    "ticks": self.ticks, "active": sorted(self.active),
                    "frozen": {k: len(v) for k, v in self.frozen.items()}}

    def run(self, api, stop):
        """The refresh loop (a controller)."""
        while not stop.wait(self.TICK):
            try:
                self.tick(api)
            except ApiError:
                pass


def _informers(ctx):
    """The ParamInformers of the request's simulator, or None."""
    return getattr(getattr(ctx.api, "hooks", None), "param_informers", None)


def _frozen_store(ctx, res):
    """The frozen store of RES's informer, or None: read live."""
    pi = _informers(ctx)
    return pi.store(res.key) if pi is not None else None


def _direct_get(ctx):
    """Whether a name missing from a frozen store is read directly."""
    pi = _informers(ctx)
    return bool(pi and pi.direct_get)


class Decision:
    """One failed validation or evaluation error."""

    def __init__(self, message, reason="", error=False):
        self.message = message
        self.reason = reason
        self.error = error


def _expr_error(prog, exc):
    """The apiserver's text of an evaluation error."""
    if isinstance(prog, _Broken):
        return prog.error
    return "expression '%s' resulted in error: %s" % (prog.text, exc)


def evaluate(comp, env):
    """Run matchConditions and validations; return a list of Decision
    (failures and, under failurePolicy Fail, errors)."""
    fail = comp.failure != "Ignore"
    env["variables"] = cel.Variables(comp.variables, env)
    STATS["evaluations"] += 1
    if comp.conditions:
        errors = []
        for _, prog in comp.conditions:
            try:
                v = prog.evaluate_in(env)
            except cel.CelError as e:
                errors.append(_expr_error(prog, e))
                continue
            if v is False:
                return []
            if v is not True:
                errors.append(_expr_error(prog, "cel expression must "
                                          "evaluate to a bool"))
        if errors:
            if not fail:
                return []
            text = errors[0] if len(errors) == 1 else \
                "[" + ", ".join(errors) + "]"
            return [Decision(text, error=True)]
    out = []
    for v, prog, mprog in comp.validations:
        try:
            ok = prog.evaluate_in(env)
            if not isinstance(ok, bool):
                raise cel.CelError("cel expression must evaluate to a bool")
        except cel.CelError as e:
            if fail:
                out.append(Decision(_expr_error(prog, e), error=True))
            continue
        if ok:
            continue
        msg = ""
        if mprog is not None:
            try:
                m = mprog.evaluate_in(env)
            except cel.CelError:
                m = None
            if isinstance(m, str):
                m = m.strip()
                if len(m) <= MAX_MESSAGE and "\n" not in m:
                    msg = m
        if not msg and isinstance(v.get("message"), str):
            msg = v["message"].strip()
        if not msg:
            msg = "failed expression: %s" % str(v.get("expression")).strip()
        out.append(Decision(msg, v.get("reason") or "Invalid"))
    return out


def admit(ctx):
    """Validating hook: every policy and binding against one write."""
    res = ctx.resource
    if res.key in (VAP, VAPB) or ctx.operation not in OPERATIONS:
        return
    policies, _ = ctx.api.list(VAP)
    if not policies:
        return
    bindings, _ = ctx.api.list(VAPB)
    by_policy = {}
    for b in bindings:
        by_policy.setdefault((b.get("spec") or {}).get("policyName"),
                             []).append(b)
    req = _Request(ctx)
    with cel.Meter() as total:
        denied = _admit_policies(ctx, req, policies, by_policy)
    if total.cost or denied:
        _cost_add("", total.cost)
    if denied:
        pname, bname, d = denied[0]
        raise denial(ctx, pname, bname, d)


def _admit_policies(ctx, req, policies, by_policy):
    """The decisions of every bound policy that matches (admit's loop)."""
    denied = []
    request = None
    for pol in sorted(policies, key=lambda p: p["metadata"]["name"]):
        pname = pol["metadata"]["name"]
        blist = by_policy.get(pname)
        if not blist:
            continue
        spec = pol.get("spec") or {}
        if not matches(spec.get("matchConstraints") or {}, ctx, req):
            continue
        comp = compiled(pol)
        ignore = comp.failure == "Ignore"
        for b in sorted(blist, key=lambda x: x["metadata"]["name"]):
            bname = b["metadata"]["name"]
            bspec = b.get("spec") or {}
            mr = bspec.get("matchResources")
            if isinstance(mr, dict) and not matches(mr, ctx, req, False):
                continue
            try:
                params = collect_params(comp, b, ctx)
            except ConfigError as e:
                if not ignore:
                    denied.append((pname, bname, Decision(
                        "failed to configure binding: %s" % e)))
                continue
            if request is None:
                request = request_value(ctx)
                ns_obj = namespace_value(req.namespace())
            actions = bspec.get("validationActions") or []
            for p in params:
                env = {"object": ctx.object, "oldObject": ctx.old_object,
                       "request": request, "namespaceObject": ns_obj,
                       "params": p}
                with cel.Meter() as m:
                    decisions = evaluate(comp, env)
                _cost_add(pname, m.cost)
                for d in decisions:
                    if "Deny" in actions:
                        denied.append((pname, bname, d))
                    if "Warn" in actions:
                        ctx.warnings.append(
                            "Validation failed for ValidatingAdmissionPolicy"
                            " '%s' with binding '%s': %s"
                            % (pname, bname, d.message))
    return denied


def denial(ctx, pname, bname, d):
    """The ApiError of the first denied decision."""
    msg = "ValidatingAdmissionPolicy '%s' with binding '%s' denied " \
        "request: %s" % (pname, bname, d.message)
    name = ctx.name
    if not name:
        md = (ctx.object or {}).get("metadata") or {}
        name = md.get("name") or md.get("generateName") or "Unknown"
    err = err_forbidden(ctx.resource, name, msg)
    reason = d.reason or "Invalid"
    err.reason = reason
    err.code = REASON_CODES.get(reason, 422)
    err.details.setdefault("causes", []).append({"message": msg})
    return err


def register(reg):
    """Plug ValidatingAdmissionPolicy into the simulator: spec checks of
    the two kinds and evaluation of every write (before ResourceQuota,
    as in kube-apiserver's admission order)."""
    reg.add_validating("ValidatingAdmissionPolicySpec", check_spec, order=10)
    reg.add_validating("ValidatingAdmissionPolicy", admit, order=40)
    opts = getattr(reg, "options", None) or {}
    bug = opts.get("vap-param-informer-bug", "on")
    if bug not in ("on", "off"):
        raise ValueError("--set vap-param-informer-bug: want on or off, "
                         "not %r" % bug)
    rel = getattr(reg, "release", None) or release.Release()
    pi = ParamInformers(bug == "on", direct_get=release.release_key(rel) >=
                        (1, 37))
    reg.param_informers = pi
    reg.add_controller("policy-param-informers", pi.run)
    reg.add_sim_endpoint("GET", "/sim/param-informers",
                         lambda body: (200, pi.describe()))
