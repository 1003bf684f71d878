"""The Kubernetes release the simulator plays and its feature gates.

`run DIR --set k8s-version=1.34|1.35|1.36|1.37` picks the release
(default DEFAULT, the newest); `--set feature-gates=Name=true,Other=false`
overrides gates as kube-apiserver's --feature-gates does (an unknown gate
or a locked one set against its lock stops the start with the
apiserver's text); `--set runtime-config=GROUP/VERSION=true,...` enables
the non-GA API versions a gated kind is served in (as --runtime-config).

gate(sim_or_registry, name) answers whether a gate is on: for a hooks
Registry, a Sim or an Api it reads their --set options; for None the
options configure() was last given (main.py calls it once at start, so
code without a handle on the simulator, e.g. a kind's validation, reads
the same answer).

The table is the DRA rows of the facts file k8s-1.36-1.37-facts.md
section 2.1 (kubernetes/kubernetes pkg/features/kube_features.go for
1.35, staging/src/k8s.io/kube-scheduler/pkg/features/kube_features.go
versioned specs for 1.36 and 1.37); the 1.34 column is from
kubernetes-dra-facts.md and the same specs' 1.34 entries. A gate absent
from a release (DRAListTypeAttributes before 1.36, ...) is off there and
may not be set.
"""

DEFAULT = "1.37"
RELEASES = ("1.34", "1.35", "1.36", "1.37")

# (default, stage, locked) per release.
_OFF_A = (False, "Alpha", False)
_OFF_B = (False, "Beta", False)
_ON_B = (True, "Beta", False)
_ON_GA = (True, "GA", False)
_LOCK = (True, "GA", True)

GATES = {
    "DynamicResourceAllocation": {"1.34": _ON_GA, "1.35": _LOCK,
                                  "1.36": _LOCK, "1.37": _LOCK},
    "DRAPrioritizedList": {"1.34": _ON_B, "1.35": _ON_B, "1.36": _ON_GA,
                           "1.37": _LOCK},
    "DRAAdminAccess": {"1.34": _ON_B, "1.35": _ON_B, "1.36": _LOCK,
                       "1.37": _LOCK},
    "DRADeviceTaints": {"1.34": _OFF_A, "1.35": _OFF_A, "1.36": _ON_B,
                        "1.37": _ON_GA},
    # 1.34 had DeviceTaintRule under DRADeviceTaints; its row here is the
    # same alpha-off state under the name later releases use.
    "DRADeviceTaintRules": {"1.34": _OFF_A, "1.35": _OFF_A,
                            "1.36": _OFF_B, "1.37": _ON_GA},
    "DRAConsumableCapacity": {"1.34": _OFF_A, "1.35": _OFF_A,
                              "1.36": _ON_B, "1.37": _ON_B},
    "DRAPartitionableDevices": {"1.34": _OFF_A, "1.35": _OFF_A,
                                "1.36": _ON_B, "1.37": _ON_B},
    "DRAExtendedResource": {"1.34": _OFF_A, "1.35": _OFF_A, "1.36": _ON_B,
                            "1.37": _LOCK},
    "DRAResourceClaimDeviceStatus": {"1.34": _ON_B, "1.35": _ON_B,
                                     "1.36": _ON_B, "1.37": _LOCK},
    "DRADeviceBindingConditions": {"1.34": _OFF_A, "1.35": _OFF_A,
                                   "1.36": _ON_B, "1.37": _ON_B},
    "DRASchedulerFilterTimeout": {"1.34": _ON_B, "1.35": _ON_B,
                                  "1.36": _ON_B, "1.37": _ON_B},
    "DRAListTypeAttributes": {"1.36": _OFF_A, "1.37": _OFF_A},
    "DRANodeAllocatableResources": {"1.36": _OFF_A, "1.37": _OFF_A},
    "DRAWorkloadResourceClaims": {"1.36": _OFF_A, "1.37": _OFF_B},
    # {1.37, false, Beta} then {1.37, true, Beta, MinCompatibilityVersion
    # 1.37}: on at 1.37 (no emulated version here).
    "DRAFractionalCapacityRange": {"1.37": _ON_B},
    "DRADerivedAttributes": {"1.37": _OFF_A},
    "DRADeviceCompatibilityGroups": {"1.37": _OFF_A},
    "DRAOptionalNodeOperations": {"1.37": _OFF_A},
    # kubelet gate (website feature-gates/ResourceHealthStatus.md); the
    # 1.37 state is unverified, taken as 1.36's.
    "ResourceHealthStatus": {"1.34": _OFF_A, "1.35": _OFF_A, "1.36": _ON_B,
                             "1.37": _ON_B},
}

# What configure() was last given (the running simulator's options).
_CONFIGURED = {"options": {}}


def _options(x):
    """The --set options of X (hooks Registry, Sim, Api) or, for None,
    those configure() was given."""
    if x is None:
        return _CONFIGURED["options"]
    if isinstance(x, dict):
        return x
    for path in (("options",), ("hooks", "options")):
        obj = x
        for attr in path:
            obj = getattr(obj, attr, None)
        if isinstance(obj, dict):
            return obj
    return _CONFIGURED["options"]


def parse_release(text):
    """The release named by --set k8s-version (1.37, v1.37, 1.37.2);
    ValueError when not one the simulator plays."""
    t = (text or "").strip()
    if t.startswith("v"):
        t = t[1:]
    t = ".".join(t.split(".")[:2])
    if t not in RELEASES:
        raise ValueError("--set k8s-version: unsupported version %r "
                         "(one of %s)" % (text, ", ".join(RELEASES)))
    return t


def current(x=None):
    """The release X's options (or the configured ones) select."""
    v = _options(x).get("k8s-version")
    return parse_release(v) if v else DEFAULT


def release_key(rel):
    """'1.36' as (1, 36)."""
    return tuple(int(p) for p in rel.split("."))


def at_least(x, rel):
    """True when the release played is REL or newer."""
    return release_key(current(x)) >= release_key(rel)


def _parse_bool(name, text):
    t = (text or "").strip().lower()
    if t in ("true", "1", "t"):
        return True
    if t in ("false", "0", "f"):
        return False
    raise ValueError("--set feature-gates: invalid value of %s: %s, err: "
                     "strconv.ParseBool: parsing %r: invalid syntax"
                     % (name, text, text))


_MEMO = {}


def overrides(x=None):
    """{gate: bool} of --set feature-gates=A=true,B=false (checked)."""
    rel = current(x)
    text = _options(x).get("feature-gates") or ""
    got = _MEMO.get((rel, text))
    if got is not None:
        return got
    out = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, val = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError("--set feature-gates: missing bool value for "
                             "%s" % name)
        on = _parse_bool(name, val)
        spec = GATES.get(name, {}).get(rel)
        if spec is None:
            raise ValueError("--set feature-gates: unrecognized feature "
                             "gate: %s" % name)
        if spec[2] and on != spec[0]:
            raise ValueError("--set feature-gates: cannot set feature gate "
                             "%s to %s, feature is locked to %s"
                             % (name, str(on).lower(),
                                str(spec[0]).lower()))
        out[name] = on
    if len(_MEMO) < 64:
        _MEMO[(rel, text)] = out
    return out


def gate(sim_or_registry, name):
    """Whether feature gate NAME is on in the release played, after
    --set feature-gates. An unknown gate is off."""
    ov = overrides(sim_or_registry)
    if name in ov:
        return ov[name]
    spec = GATES.get(name, {}).get(current(sim_or_registry))
    return bool(spec and spec[0])


def runtime_config(x=None):
    """{'group/version': bool} of --set runtime-config."""
    out = {}
    for item in (_options(x).get("runtime-config") or "").split(","):
        item = item.strip()
        if not item:
            continue
        gv, _, val = item.partition("=")
        out[gv.strip()] = (val.strip().lower() or "true") in ("true", "1")
    return out


def api_enabled(group, version, gate_name, x=None):
    """Whether a gated kind's VERSION of GROUP is served: its gate on,
    and a non-GA version (alpha, beta) enabled by --set runtime-config
    (off by default, as new beta APIs are since KEP-3136)."""
    if gate_name and not gate(x, gate_name):
        return False
    if "alpha" in version or "beta" in version:
        return runtime_config(x).get(group + "/" + version, False)
    return True


def configure(options):
    """Remember the running simulator's options and check them (a bad
    version, gate or value raises ValueError with the text to print)."""
    current(options)
    overrides(options)
    _CONFIGURED["options"] = options
    return current(options)


def table(x=None):
    """{gate: bool} of every gate the release played knows (for logs)."""
    rel = current(x)
    return {n: gate(x, n) for n, r in sorted(GATES.items()) if rel in r}
