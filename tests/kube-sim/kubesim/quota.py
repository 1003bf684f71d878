"""ResourceQuota for the simulator: the quota controller that keeps
status.hard / status.used current, and the admission check that refuses
a ResourceClaim over quota with the apiserver's 403 texts.

Usage of a ResourceClaim (pkg/quota/v1/evaluator/core/resource_claims.go):
count/resourceclaims.resource.k8s.io = 1, and per device class
<class>.deviceclass.resource.k8s.io/devices = the devices it may get
(ExactCount: count; All: 32; firstAvailable: the largest per class).
Pods are not charged for claims.
"""

from . import quantity as qty
from .controllers import QUOTA_USER, each, event_loop
from .hooks import ApiError, err_forbidden

RS = "resource.k8s.io"
CLAIMS = "resourceclaims." + RS
CLAIM_COUNT = "count/resourceclaims." + RS
CLASS_SUFFIX = ".deviceclass." + RS + "/devices"
ALL_MODE_COUNT = 32
POD_RESOURCES = ("cpu", "memory", "requests.cpu", "requests.memory",
                 "limits.cpu", "limits.memory", "ephemeral-storage",
                 "requests.ephemeral-storage", "limits.ephemeral-storage")


def claim_usage(claim):
    """{resource name: int} a ResourceClaim consumes."""
    use = {CLAIM_COUNT: 1}
    reqs = (((claim.get("spec") or {}).get("devices") or {})
            .get("requests") or [])
    for r in reqs:
        if r.get("exactly") is not None:
            ex = r["exactly"]
            n = _devices(ex)
            if n is None:
                continue
            key = ex.get("deviceClassName", "") + CLASS_SUFFIX
            use[key] = use.get(key, 0) + n
        elif r.get("firstAvailable"):
            worst = {}
            for s in r["firstAvailable"]:
                n = _devices(s)
                if n is None:
                    continue
                c = s.get("deviceClassName", "")
                worst[c] = max(worst.get(c, 0), n)
            for c, n in worst.items():
                key = c + CLASS_SUFFIX
                use[key] = use.get(key, 0) + n
    return use


def _devices(req):
    """Devices one (sub)request may get; None for unknown modes."""
    mode = req.get("allocationMode") or "ExactCount"
    if mode == "ExactCount":
        try:
            return int(req.get("count") or 1)
        except (TypeError, ValueError):
            return None
    if mode == "All":
        return ALL_MODE_COUNT
    return None


def is_claim_resource(name):
    """True for the quota resource names the claim evaluator tracks."""
    return name == CLAIM_COUNT or name.endswith(CLASS_SUFFIX)


def _applies(quota):
    """Scoped quotas never match ResourceClaims (no claim scopes)."""
    spec = quota.get("spec") or {}
    return not spec.get("scopes") and not spec.get("scopeSelector")


def _claims_usage(claims):
    """Summed usage of a list of claims."""
    total = {}
    for c in claims:
        for k, v in claim_usage(c).items():
            total[k] = total.get(k, 0) + v
    return total


def _pretty(d):
    """Sorted 'name=qty' pairs joined by ',' (quota prettyPrint)."""
    return ",".join("%s=%s" % (k, d[k]) for k in sorted(d))


def _q(text):
    """Parse a quantity, treating garbage as zero."""
    try:
        return qty.parse(text)
    except qty.QuantityError:
        return qty.Quantity(0)


def check_claim(ctx):
    """Validating hook: quota admission for ResourceClaim CREATE."""
    if ctx.resource.key != CLAIMS or ctx.operation != "CREATE" or \
            ctx.subresource:
        return
    quotas, _ = ctx.api.list("resourcequotas", namespace=ctx.namespace)
    if not quotas:
        return
    requested = claim_usage(ctx.object)
    used_live = None
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        if not _applies(quota):
            continue
        st = quota.get("status") or {}
        hard = st.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        restricted = sorted(k for k in hard if is_claim_resource(k))
        if not restricted:
            continue
        used = st.get("used") or {}
        if not st.get("hard") or any(k not in used for k in restricted):
            raise err_forbidden(ctx.resource, ctx.name,
                                "status unknown for quota: %s, resources: %s"
                                % (quota["metadata"]["name"],
                                   ",".join(restricted)))
        if used_live is None:
            claims, _ = ctx.api.list(CLAIMS, namespace=ctx.namespace)
            used_live = _claims_usage(claims)
        exceeded = [k for k in restricted if k in requested and
                    qty.Quantity(used_live.get(k, 0) + requested[k]).compare(
                        _q(hard[k])) > 0]
        if exceeded:
            raise err_forbidden(
                ctx.resource, ctx.name,
                "exceeded quota: %s, requested: %s, used: %s, limited: %s"
                % (quota["metadata"]["name"],
                   _pretty({k: requested[k] for k in exceeded}),
                   _pretty({k: used_live.get(k, 0) for k in exceeded}),
                   _pretty({k: hard[k] for k in exceeded})))


def _pod_usage(pods, name):
    """Usage of one compute resource name summed over live pods."""
    if name == "pods":
        return qty.Quantity(len(pods))
    kind, _, res = name.rpartition(".")
    kind = kind or "requests"
    total = qty.Quantity(0, "BinarySI" if "memory" in res or
                         "storage" in res else "DecimalSI")
    for p in pods:
        spec = p.get("spec") or {}
        s = qty.Quantity(0)
        for c in spec.get("containers") or []:
            v = ((c.get("resources") or {}).get(kind) or {}).get(res)
            if v is not None:
                s = s + _q(v)
        for c in spec.get("initContainers") or []:
            v = ((c.get("resources") or {}).get(kind) or {}).get(res)
            if v is not None and _q(v).compare(s) > 0:
                s = _q(v)
        total = total + s
    return total


class QuotaController:
    """Recomputes status of every ResourceQuota from the live objects."""

    def __init__(self, api):
        self.api = api
        self.namespaces = set()

    def relevant(self, ev):
        """Quota objects and anything in a namespace that has a quota."""
        if ev.resource.key == "resourcequotas":
            return True
        return ev.object["metadata"].get("namespace") in self.namespaces

    def _count(self, name, ns):
        """count/<resource>[.<group>] usage, or None if unknown."""
        try:
            res = self.api.resource(name[len("count/"):])
        except ApiError:
            return None
        if not res.namespaced:
            return None
        items, _ = self.api.list(res.key, namespace=ns)
        return len(items)

    def usage(self, ns, hard):
        """{name: str} used amounts for every resource name in HARD."""
        claims, _ = self.api.list(CLAIMS, namespace=ns)
        cu = _claims_usage(claims)
        pods = None
        used = {}
        for name in hard:
            if is_claim_resource(name):
                used[name] = str(cu.get(name, 0))
            elif name.startswith("count/"):
                n = self._count(name, ns)
                used[name] = str(n or 0)
            elif name == "pods" or name in POD_RESOURCES:
                if pods is None:
                    pods = [p for p in self.api.list("pods",
                                                     namespace=ns)[0]
                            if (p.get("status") or {}).get("phase") not in
                            ("Succeeded", "Failed")]
                used[name] = str(_pod_usage(pods, name))
            else:
                used[name] = "0"
        return used

    def pass_once(self):
        """Update status of every quota whose usage changed."""
        quotas, _ = self.api.list("resourcequotas")
        self.namespaces = {q["metadata"]["namespace"] for q in quotas}
        each([q for q in quotas if not q["metadata"].get(
            "deletionTimestamp")], self.sync)

    def sync(self, q):
        """Write the status of one quota if it changed."""
        md = q["metadata"]
        hard = dict((q.get("spec") or {}).get("hard") or {})
        status = {"hard": hard, "used": self.usage(md["namespace"], hard)}
        if (q.get("status") or {}) == status:
            return
        q["status"] = status
        try:
            self.api.update("resourcequotas", md["namespace"], q,
                            subresource="status", user=QUOTA_USER)
        except ApiError:
            pass


def run(api, stop):
    """Controller thread of the quota controller."""
    ctl = QuotaController(api)
    event_loop(api, stop, ctl.relevant, ctl.pass_once)


def register(reg):
    """Plug quota admission and the quota controller into the simulator."""
    reg.add_validating("ResourceQuota", check_claim, order=50)
    reg.add_controller("resourcequota-controller", run)
