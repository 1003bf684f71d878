# SPDX-License-Identifier: Apache-2.0
"""MutatingAdmissionPolicy (admissionregistration.k8s.io: v1 from 1.36,
v1beta1/v1alpha1 before with the gate and runtime-config), applied in the
mutating stage of every CREATE and UPDATE as kube-apiserver's
MutatingAdmissionPolicy plug-in does: after the built-in mutation
(defaults), before the mutating webhooks, with reinvocation.

Shared with ValidatingAdmissionPolicy (vap.py): matching (matchConstraints,
binding matchResources), parameters (paramKind/paramRef, and the
param-informer bug), the CEL variables (request, namespaceObject, params,
variables) and the spec checks of the common parts.  Here: the mutations
(ApplyConfiguration merged by the kind's list types, smd.py; JSONPatch),
the spec checks of the mutating kinds, reinvocation and the errors.

Upstream: staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/
mutating/{dispatcher,reinvocationcontext,compilation}.go, .../mutating/
patch/{smd,json_patch}.go, .../policy/generic/policy_dispatcher.go
(PolicyError, the 403), pkg/admission/reinvocation.go and k8s.io/api
admissionregistration/v1 types.go (release-1.36) and KEP-3962.

Errors.  Configuration errors (params) and evaluation errors of a
(policy, binding, param) invocation are collected; under failurePolicy
Fail the first one is the Status, 403 with the message
`policy '<p>' with binding '<b>' denied request: <error>` (not prefixed by
the resource: the dispatcher replaces NewForbidden's message), reason
Forbidden for configuration errors and Invalid for evaluation errors, a
cause per error; under Ignore they are dropped.
"""

import json
import threading

from . import cel, jsonpatch, release, schema, smd, vap
from .hooks import ApiError, err_forbidden, err_internal, err_invalid
from .validation import FieldError

GROUP = vap.GROUP
MAP = "mutatingadmissionpolicies." + GROUP
MAPB = "mutatingadmissionpolicybindings." + GROUP
GATE = "MutatingAdmissionPolicy"
PLUGIN = "MutatingAdmissionPolicy"
TYPES = ("Object", "JSONPatch")
PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")
REINVOCATION = ("IfNeeded", "Never")


class _Broken(vap._Broken):
    """A mutation that did not compile (a policy stored unchecked)."""


class Compiled:
    """The programs of one MutatingAdmissionPolicy; ERRS collects the
    spec checks' FieldErrors in the apiserver's order (failurePolicy,
    paramKind, matchConstraints, matchConditions, variables, mutations,
    reinvocationPolicy)."""

    def __init__(self, pol, errs=None, checks=False):
        errs = [] if errs is None else errs
        spec = pol.get("spec") or {}
        self.name = pol["metadata"]["name"]
        self.failure = spec.get("failurePolicy") or "Fail"
        self.param_kind = spec.get("paramKind")
        self.reinvocation = spec.get("reinvocationPolicy")
        declared = vap.BASE_VARS + (("params",) if self.param_kind else ())
        if checks:
            if spec.get("failurePolicy") is None:
                errs.append(FieldError("Required", "spec.failurePolicy"))
            else:
                vap._not_supported("spec.failurePolicy",
                                   spec["failurePolicy"], ("Fail", "Ignore"),
                                   errs)
            pk = spec.get("paramKind")
            if isinstance(pk, dict):
                for f in ("apiVersion", "kind"):
                    if not pk.get(f):
                        errs.append(FieldError("Required",
                                               "spec.paramKind." + f))
            mc = spec.get("matchConstraints")
            if not isinstance(mc, dict):
                errs.append(FieldError("Required", "spec.matchConstraints"))
            else:
                vap._validate_match(mc, "spec.matchConstraints", errs)
                if not mc.get("resourceRules"):
                    errs.append(FieldError(
                        "Required", "spec.matchConstraints.resourceRules"))
        var_errs = []
        self.variables = vap.compile_variables(spec, declared, var_errs,
                                               TYPES)
        self.conditions = vap.compile_conditions(
            spec, declared, frozenset(self.variables), errs, TYPES)
        errs.extend(var_errs)
        self.mutations = []
        muts = vap._list(spec.get("mutations"))
        if not muts:
            errs.append(FieldError("Required", "spec.mutations",
                                   detail="mutations must contain at least "
                                   "one item"))
        names = frozenset(self.variables)
        for i, m in enumerate(muts):
            path = "spec.mutations[%d]" % i
            pt = m.get("patchType")
            field = {"ApplyConfiguration": "applyConfiguration",
                     "JSONPatch": "jsonPatch"}.get(pt)
            if field is None:
                errs.append(FieldError("NotSupported", path + ".patchType",
                                       pt if pt is not None else "",
                                       "supported values: " + ", ".join(
                                           '"%s"' % t for t in PATCH_TYPES)))
                continue
            body = m.get(field)
            if not isinstance(body, dict):
                errs.append(FieldError("Required", path + "." + field,
                                       detail="must be specified when "
                                       "patchType is %s" % pt))
                continue
            expr = body.get("expression")
            epath = "%s.%s.expression" % (path, field)
            if not isinstance(expr, str) or not expr.strip():
                errs.append(FieldError("Required", epath))
                continue
            prog = vap._compile(expr, declared, names, epath, errs, TYPES)
            self.mutations.append((pt, prog or _Broken(expr, errs[-1])))
        if checks:
            rp = spec.get("reinvocationPolicy")
            if not rp:
                errs.append(FieldError("Required",
                                       "spec.reinvocationPolicy"))
            else:
                vap._not_supported("spec.reinvocationPolicy", rp,
                                   REINVOCATION, errs)


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


def validate_policy(obj):
    """Create/update checks of a MutatingAdmissionPolicy."""
    errs = []
    Compiled(obj, errs, checks=True)
    return errs


def validate_binding(obj):
    """Create/update checks of a MutatingAdmissionPolicyBinding (a VAP
    binding's, without validationActions)."""
    errs = []
    spec = obj.get("spec") or {}
    if not spec.get("policyName"):
        errs.append(FieldError("Required", "spec.policyName"))
    vap._validate_param_ref(spec.get("paramRef"), errs)
    vap._validate_match(spec.get("matchResources"), "spec.matchResouces",
                        errs)
    return errs


def check_spec(ctx):
    """Validating hook: 422 for an invalid policy or binding."""
    key = ctx.resource.key
    if key not in (MAP, MAPB) or ctx.operation not in ("CREATE", "UPDATE") \
            or ctx.subresource:
        return
    obj = ctx.object or {}
    errs = validate_policy(obj) if key == MAP else validate_binding(obj)
    if errs:
        raise err_invalid(ctx.resource, ctx.name, errs)


# ------------------------------------------------------------- mutations

class MutationError(Exception):
    """A mutation that failed (failurePolicy decides)."""


def _check_type_names(v, want, path=""):
    """CheckTypeNamesMatchFieldPathNames: every Object.* value under a
    message sits at the field path its type name names."""
    if isinstance(v, cel.Message):
        if v.type_name != want:
            raise MutationError(
                'type mismatch: unexpected type name "%s", expected "%s", '
                'which matches field name path from root Object type'
                % (v.type_name, want))
        for k, x in v.items():
            _check_type_names(x, want + "." + k)
    elif isinstance(v, list):
        for x in v:
            _check_type_names(x, want)
    elif isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (cel.Message, list, dict)):
                _check_type_names(x, want + "." + k)


def _expr_error(prog, exc):
    """`expression '<expr>' resulted in error: <error>`."""
    if isinstance(prog, vap._Broken):
        return prog.error
    return "expression '%s' resulted in error: %s" % (prog.text, exc)


def apply_configuration(ctx, obj, prog, env):
    """OBJ with the Object{...} PROG evaluates to merged in (a new
    object); MutationError on failure."""
    try:
        v = prog.evaluate_in(env)
    except cel.CelError as e:
        raise MutationError(_expr_error(prog, e))
    if not isinstance(v, cel.Message) or v.type_name != "Object":
        raise MutationError("unsupported return type from "
                            "ApplyConfiguration expression: %s"
                            % cel._type(v))
    _check_type_names(v, "Object")
    config = cel.plain(v)
    res = ctx.resource
    version = str(obj.get("apiVersion") or "").rpartition("/")[2]
    known = res.known_fields(version or res.version)
    bad = smd.undeclared(config, known)
    if bad:
        raise MutationError("error applying patch: failed to convert patch "
                            "object to typed object: %s: field not "
                            "declared in schema" % bad)
    ti = smd.type_info(res, version)
    atomics = smd.atomic_paths(config, ti)
    if atomics:
        raise MutationError("error applying patch: invalid "
                            "ApplyConfiguration: may not mutate atomic "
                            "arrays, maps or structs: " + ", ".join(atomics))
    config["apiVersion"] = obj.get("apiVersion")
    config["kind"] = obj.get("kind")
    try:
        return smd.merge(obj, config, ti)
    except smd.SmdError as e:
        raise MutationError("error applying patch: failed to merge patch: "
                            "%s" % e)


def apply_json_patch(ctx, obj, prog, env):
    """OBJ with the [JSONPatch{...}] PROG evaluates to applied (a new
    object, or OBJ when a test operation fails); MutationError on
    failure, ApiError 500 for a result that does not decode."""
    try:
        v = prog.evaluate_in(env)
    except cel.CelError as e:
        raise MutationError(_expr_error(prog, e))
    if not isinstance(v, list):
        raise MutationError("type mismatch: JSONPatchType.expression should "
                            "evaluate to array")
    ops = []
    for p in v:
        if not isinstance(p, cel.Message) or p.type_name != "JSONPatch":
            raise MutationError("type mismatch: JSONPatchType.expression "
                                "should evaluate to array of JSONPatch")
        op = {"op": p.get("op", ""), "path": p.get("path", "")}
        if p.get("from"):
            op["from"] = p["from"]
        if "value" in p and p["value"] is not None:
            val = p["value"]
            if isinstance(val, cel.Message):
                _check_type_names(val, val.type_name)
            op["value"] = cel.plain(val)
        ops.append(op)
    try:
        out = jsonpatch.apply(obj, ops)
    except jsonpatch.TestFailed:
        return obj
    except jsonpatch.PatchError as e:
        raise MutationError("JSON Patch: %s" % e)
    if not isinstance(out, dict):
        raise err_internal("JSON Patch produced a non-object")
    res = ctx.resource
    sch = res.known_fields(str(out.get("apiVersion") or "").rpartition(
        "/")[2] or res.version)
    if sch is not None:
        walk = schema.prune(json.loads(json.dumps(out)), sch,
                            walk=schema.Walk(res.kind))
        if walk.type_error:
            raise err_internal(walk.type_error)
        if walk.found:
            raise err_internal("strict decoding error: " + ", ".join(
                'unknown field "%s"' % f for f in walk.found))
    return out


class _Reinvoke:
    """The plug-in's reinvocation state of one request
    (policyReinvokeContext): its last output, the IfNeeded invocations
    since the object last changed, those to run again."""

    def __init__(self):
        self.last_output = None
        self.previously = set()
        self.again = set()

    def require_reinvoking_previous(self):
        """Every IfNeeded invocation so far is to run again."""
        self.again |= self.previously
        self.previously = set()


def _snapshot(obj):
    return json.dumps(obj, sort_keys=True)


class _PolicyError:
    """One collected error: policy, binding, message, reason."""

    def __init__(self, policy, binding, message, reason=""):
        self.policy = policy
        self.binding = binding
        self.message = message
        self.reason = reason

    def text(self):
        """PolicyError.Error()."""
        if self.binding:
            return "policy '%s' with binding '%s' denied request: %s" % (
                self.policy, self.binding, self.message)
        return 'policy "%s" denied request: %s' % (self.policy,
                                                   self.message)


def _denial(ctx, errors):
    """The 403 of the collected errors (the first one's message)."""
    name = ctx.name
    if not name:
        md = (ctx.object or {}).get("metadata") or {}
        name = md.get("name") or md.get("generateName") or "Unknown"
    err = err_forbidden(ctx.resource, name, "admission request denied by "
                        "policy")
    err.message = errors[0][1].text()
    if errors[0][1].reason:
        err.reason = errors[0][1].reason
    err.details["causes"] = [{"message": e.text()} for _, e in errors]
    return err


def mutate(ctx):
    """Mutating hook: every bound MutatingAdmissionPolicy that matches,
    per (policy, binding, param) invocation, mutations in order."""
    res = ctx.resource
    if res.key in (MAP, MAPB) or ctx.operation not in ("CREATE", "UPDATE",
                                                       "CONNECT") \
            or ctx.object is None:
        return
    if not release.gate(ctx.api, GATE):
        return
    try:
        policies, _ = ctx.api.list(MAP, copy=False)
    except ApiError:
        return      # not served in this release
    if not policies:
        return
    bindings, _ = ctx.api.list(MAPB, copy=False)
    by_policy = {}
    for b in bindings:
        by_policy.setdefault((b.get("spec") or {}).get("policyName"),
                             []).append(b)
    rc = ctx.reinvocation
    st = rc.values.get(PLUGIN)
    if st is None:
        st = rc.values[PLUGIN] = _Reinvoke()
    if rc.is_reinvoke and _snapshot(ctx.object) != st.last_output:
        st.require_reinvoking_previous()
    try:
        errors = _dispatch(ctx, policies, by_policy, st)
    finally:
        st.last_output = _snapshot(ctx.object)
    errors = [e for e in errors if e[0] != "Ignore"]
    if errors:
        raise _denial(ctx, errors)


def _invocations(ctx, req, policies, by_policy, errors):
    """[(policy, compiled, binding, param)] of the bound policies that
    match (the generic dispatcher), configuration errors into ERRORS."""
    out = []
    for pol in sorted(policies, key=lambda p: p["metadata"]["name"]):
        pname = pol["metadata"]["name"]
        blist = by_policy.get(pname)
        if not blist:
            continue
        spec = pol.get("spec") or {}
        if not vap.matches(spec.get("matchConstraints") or {}, ctx, req):
            continue
        comp = compiled(pol)
        for b in sorted(blist, key=lambda x: x["metadata"]["name"]):
            mr = (b.get("spec") or {}).get("matchResources")
            if isinstance(mr, dict) and not vap.matches(mr, ctx, req,
                                                        False):
                continue
            try:
                params = vap.collect_params(comp, b, ctx)
            except vap.ConfigError as e:
                errors.append((comp.failure, _PolicyError(
                    pname, b["metadata"]["name"],
                    "failed to configure binding: %s" % e)))
                continue
            for p in params:
                out.append((pol, comp, b, p))
    return out


def _dispatch(ctx, policies, by_policy, st):
    """Run the invocations (dispatchInvocations); returns the errors as
    [(failurePolicy, _PolicyError)]."""
    errors = []
    req = vap._Request(ctx)
    invocations = _invocations(ctx, req, policies, by_policy, errors)
    if not invocations:
        return errors
    rc = ctx.reinvocation
    request = vap.request_value(ctx)
    ns_obj = vap.namespace_value(req.namespace())
    dirty = False
    for pol, comp, b, p in invocations:
        pname, bname = pol["metadata"]["name"], b["metadata"]["name"]
        pmd = (p or {}).get("metadata") or {}
        key = (pname, bname, pmd.get("namespace", ""), pmd.get("name", ""))
        env = {"object": ctx.object, "oldObject": ctx.old_object,
               "request": request, "namespaceObject": ns_obj, "params": p}
        env["variables"] = cel.Variables(comp.variables, env)
        if not _conditions_hold(comp, env, pname, bname, errors):
            continue
        if rc.is_reinvoke and key not in st.again:
            continue
        before = _snapshot(ctx.object)
        for pt, prog in comp.mutations:
            env = dict(env, object=ctx.object)
            env["variables"] = cel.Variables(comp.variables, env)
            try:
                if isinstance(prog, vap._Broken):
                    raise MutationError(prog.error)
                if pt == "ApplyConfiguration":
                    new = apply_configuration(ctx, ctx.object, prog, env)
                else:
                    new = apply_json_patch(ctx, ctx.object, prog, env)
            except MutationError as e:
                errors.append((comp.failure, _PolicyError(
                    pname, bname, str(e), "Invalid")))
                continue
            if ctx.resource.desc.default is not None:
                ctx.resource.desc.default(new)
            ctx.object.clear()
            ctx.object.update(new)
            dirty = True
        if _snapshot(ctx.object) != before:
            st.require_reinvoking_previous()
            rc.should_reinvoke = True
        if comp.reinvocation == "IfNeeded":
            st.previously.add(key)
    if dirty:
        st.require_reinvoking_previous()
        rc.should_reinvoke = True
    return errors


def _conditions_hold(comp, env, pname, bname, errors):
    """matchConditions: False skips the invocation; errors are collected
    (reason Invalid) and skip it too."""
    errs = []
    for _, prog in comp.conditions:
        try:
            v = prog.evaluate_in(env)
        except cel.CelError as e:
            errs.append(_expr_error(prog, e))
            continue
        if v is False:
            return False
        if v is not True:
            errs.append(_expr_error(prog, "cel expression must evaluate "
                                    "to a bool"))
    if errs:
        text = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
        errors.append((comp.failure, _PolicyError(pname, bname, text,
                                                  "Invalid")))
        return False
    return True


def register(reg):
    """Plug MutatingAdmissionPolicy into the simulator: spec checks of the
    two kinds and evaluation in the mutating stage, before the webhooks
    (RecommendedPluginOrder)."""
    reg.add_validating("MutatingAdmissionPolicySpec", check_spec, order=11)
    reg.add_mutating("MutatingAdmissionPolicy", mutate, order=50)
