# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes release the simulator behaves as: its number, the
feature gates of that release with their upstream defaults, and which
API group/versions it serves.

    run DIR --set k8s-version=1.34|1.35|1.36|1.37     (default: NEWEST)
            --set feature-gates=Name=true,Other=false
            --set runtime-config=GROUP/VERSION[=true|false],...

A Release is the release number as a string ("1.37", so it compares,
prints and orders as before) that also carries the gate overrides and the
runtime-config of one simulator.  Every part of the simulator reaches it
the same way:

    release.of(x)          the Release of a Sim, a resources.Registry, a
                           hooks.Registry, an Api, an admission context,
                           a Release or a plain release string
    release.gate(x, name)  whether feature gate NAME is on there

Code with no handle on its simulator (a kind's defaulting or validation,
the allocator's one-shot helpers) passes None: main() hands the running
simulator's Release to configure(), and of(None) / gate(None, name) read
that one (the newest release's defaults until then).  at_least(x, rel)
and table(x) are shorthands for the DRA code (drafeat, devicetaint,
quota, fleet).

The gate table (GATES) is kube-apiserver's / kube-scheduler's versioned
feature specs for the releases served: the DRA gates (1.35 from
kubernetes/kubernetes pkg/features/kube_features.go with the 1.35 specs,
1.36 and 1.37 from the versioned specs of
staging/src/k8s.io/kube-scheduler/pkg/features/kube_features.go, 1.37
pre-release code, cross-checked with the KEPs' kep.yaml) and
MutatingAdmissionPolicy (staging/src/k8s.io/apiserver/pkg/features/
kube_features.go on release-1.36 and master, KEP-3962). The 1.34 column
comes from the history entries of the same versioned specs (the stage and
default each gate had at 1.34). A gate a release does not have is unknown
there: setting it is refused as kube-apiserver refuses it, and gate() says
False.
"""

# The releases the simulator can be, oldest first; the default is the
# newest.
RELEASES = ("1.34", "1.35", "1.36", "1.37")
NEWEST = RELEASES[-1]

# /version of each release: the newest patch releases seen upstream
# (1.35.7 and 1.36.3 of 2026-07-22; 1.37.0 of 2026-08-26, kubernetes/
# sig-release), 1.34.0 as before. gitCommit, buildDate and goVersion are
# stand-ins.
_VERSION = {
    "1.34": ("v1.34.0", "2025-08-27T00:00:00Z", "go1.24.6"),
    "1.35": ("v1.35.7", "2026-07-22T00:00:00Z", "go1.25.7"),
    "1.36": ("v1.36.3", "2026-07-22T00:00:00Z", "go1.26.2"),
    "1.37": ("v1.37.0", "2026-08-26T00:00:00Z", "go1.26.5"),
}

ALPHA, BETA, GA = "Alpha", "Beta", "GA"


def _spec(stage, default, locked=False):
    """One release's spec of a gate: (stage, default, locked)."""
    return (stage, default, locked)


def _row(r134, r135, r136, r137):
    """A gate's specs by release; None: the release lacks the gate."""
    return {r: s for r, s in zip(RELEASES, (r134, r135, r136, r137))
            if s is not None}


# Feature gates by name: {release: (stage, default, lockToDefault)}.
GATES = {
    # apiserver: KEP-3962 (alpha 1.32, beta 1.34 off, GA 1.36 on, not
    # locked in 1.36 or 1.37)
    "MutatingAdmissionPolicy": _row(
        _spec(BETA, False), _spec(BETA, False), _spec(GA, True),
        _spec(GA, True)),
    # DRA (kube-scheduler's gates since they moved there)
    "DynamicResourceAllocation": _row(
        _spec(GA, True, True), _spec(GA, True, True), _spec(GA, True, True),
        _spec(GA, True, True)),
    "DRAPrioritizedList": _row(
        _spec(BETA, True), _spec(BETA, True), _spec(GA, True),
        _spec(GA, True, True)),
    "DRAAdminAccess": _row(
        _spec(BETA, True), _spec(BETA, True), _spec(GA, True, True),
        _spec(GA, True, True)),
    "DRADeviceTaints": _row(
        _spec(ALPHA, False), _spec(ALPHA, False), _spec(BETA, True),
        _spec(GA, True)),
    # split from DRADeviceTaints in 1.35
    "DRADeviceTaintRules": _row(
        None, _spec(ALPHA, False), _spec(BETA, False), _spec(GA, True)),
    "DRAConsumableCapacity": _row(
        _spec(ALPHA, False), _spec(ALPHA, False), _spec(BETA, True),
        _spec(BETA, True)),
    "DRAPartitionableDevices": _row(
        _spec(ALPHA, False), _spec(ALPHA, False), _spec(BETA, True),
        _spec(BETA, True)),
    "DRAExtendedResource": _row(
        _spec(ALPHA, False), _spec(ALPHA, False), _spec(BETA, True),
        _spec(GA, True, True)),
    "DRAResourceClaimDeviceStatus": _row(
        _spec(BETA, True), _spec(BETA, True), _spec(BETA, True),
        _spec(GA, True, True)),
    "DRADeviceBindingConditions": _row(
        _spec(ALPHA, False), _spec(ALPHA, False), _spec(BETA, True),
        _spec(BETA, True)),
    "DRASchedulerFilterTimeout": _row(
        _spec(BETA, True), _spec(BETA, True), _spec(BETA, True),
        _spec(BETA, True)),
    "DRAListTypeAttributes": _row(
        None, None, _spec(ALPHA, False), _spec(ALPHA, False)),
    "DRANodeAllocatableResources": _row(
        None, None, _spec(ALPHA, False), _spec(ALPHA, False)),
    "DRAWorkloadResourceClaims": _row(
        None, None, _spec(ALPHA, False), _spec(BETA, False)),
    # {1.37, false, Beta} then {1.37, true, Beta, MinCompatibilityVersion
    # 1.37}: on at 1.37 (no emulated or min-compat version here)
    "DRAFractionalCapacityRange": _row(
        None, None, None, _spec(BETA, True)),
    "DRADerivedAttributes": _row(None, None, None, _spec(ALPHA, False)),
    "DRADeviceCompatibilityGroups": _row(
        None, None, None, _spec(ALPHA, False)),
    "DRAOptionalNodeOperations": _row(
        None, None, None, _spec(ALPHA, False)),
    # referenced by +featureGate in the 1.37 API, state UNVERIFIED:
    # modelled as alpha, off
    "DRAPartitionableDevicesType": _row(
        None, None, None, _spec(ALPHA, False)),
    # kubelet; 1.37 UNVERIFIED (kept as 1.36)
    "ResourceHealthStatus": _row(
        _spec(ALPHA, False), _spec(ALPHA, False), _spec(BETA, True),
        _spec(BETA, True)),
    # kubelet; beta on since 1.34, 1.36/1.37 presumed on (UNVERIFIED)
    "KubeletPodResourcesDynamicResources": _row(
        _spec(BETA, True), _spec(BETA, True), _spec(BETA, True),
        _spec(BETA, True)),
}


def release_key(release):
    """'1.34' as (1, 34), for comparing releases."""
    return tuple(int(x) for x in str(release).split("."))


def _parse_bool(name, text):
    """strconv.ParseBool as the feature-gate flag uses it."""
    t = text.strip()
    if t in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if t in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError('invalid value of %s=%s, err: strconv.ParseBool: '
                     'parsing "%s": invalid syntax' % (name, t, t))


def parse_feature_gates(text, version):
    """'Name=true,Other=false' as {name: bool}, checked against the gates
    of VERSION as featuregate.Set does (unknown and locked gates
    refused)."""
    out = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, val = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError("missing bool value for %s" % name)
        on = _parse_bool(name, val)
        spec = GATES.get(name, {}).get(version)
        if spec is None:
            raise ValueError("unrecognized feature gate: %s" % name)
        if spec[2] and on != spec[1]:
            raise ValueError("cannot set feature gate %s to %s, feature is "
                             "locked to %s" % (name, str(on).lower(),
                                               str(spec[1]).lower()))
        out[name] = on
    return out


def parse_runtime_config(text):
    """'group/version[=true|false],...' (also api/all, api/beta,
    api/alpha) as {key: bool}."""
    out = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, val = item.partition("=")
        key = key.strip()
        if "/" not in key:
            raise ValueError("invalid key %s: want group/version" % key)
        out[key] = _parse_bool(key, val) if sep else True
    return out


class Release(str):
    """A release number ("1.37") with one simulator's gate overrides and
    runtime-config."""

    def __new__(cls, version=NEWEST, gates=None, runtime_config=None):
        v = str(version).strip()
        if v.startswith("v"):
            v = v[1:]
        if v.count(".") == 2:   # 1.36.3: the minor release
            v = v.rpartition(".")[0]
        if v not in RELEASES:
            raise ValueError("unknown Kubernetes version %r: the simulator "
                             "behaves as %s" % (str(version),
                                                ", ".join(RELEASES)))
        self = super().__new__(cls, v)
        self.gates = dict(gates or {})
        self.runtime_config = dict(runtime_config or {})
        return self

    @classmethod
    def from_options(cls, options):
        """The Release of the --set options k8s-version, feature-gates and
        runtime-config; ValueError with a message naming the option."""
        version = options.get("k8s-version") or NEWEST
        try:
            rel = cls(version)
        except ValueError as e:
            raise ValueError("--set k8s-version: %s" % e)
        try:
            gates = parse_feature_gates(options.get("feature-gates"), rel)
        except ValueError as e:
            raise ValueError("--set feature-gates: %s" % e)
        try:
            rc = parse_runtime_config(options.get("runtime-config"))
        except ValueError as e:
            raise ValueError("--set runtime-config: %s" % e)
        return cls(rel, gates, rc)

    @property
    def minor(self):
        """"37" of 1.37."""
        return self.split(".")[1]

    def gate(self, name):
        """Whether feature gate NAME is on (False: unknown here)."""
        if name in self.gates:
            return self.gates[name]
        spec = GATES.get(name, {}).get(str(self))
        return bool(spec and spec[1])

    def api_enabled(self, group, version, default):
        """Whether GROUP/VERSION is served, given its DEFAULT (GA and old
        beta APIs on, new beta and alpha APIs off: KEP-3136) and the
        runtime-config (group/version, else api/all, api/beta,
        api/alpha)."""
        rc = self.runtime_config
        gv = (group or "api") + "/" + version
        if gv in rc:
            return rc[gv]
        level = "alpha" if "alpha" in version else \
            "beta" if "beta" in version else "ga"
        if level != "ga" and "api/" + level in rc:
            return rc["api/" + level]
        if "api/all" in rc:
            return rc["api/all"]
        return default

    def version_info(self):
        """The /version document."""
        git, built, go = _VERSION[str(self)]
        return {"major": "1", "minor": self.minor, "gitVersion": git,
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean", "buildDate": built,
                "goVersion": go, "compiler": "gc",
                "platform": "linux/amd64"}

    def describe(self):
        """{"version", "gates": {name: bool}} of every gate this release
        has (GET /sim/release)."""
        return {"version": str(self),
                "gitVersion": _VERSION[str(self)][0],
                "gates": {n: self.gate(n) for n in sorted(GATES)
                          if str(self) in GATES[n]},
                "overrides": dict(self.gates),
                "runtimeConfig": dict(self.runtime_config)}


# The running simulator's Release (configure()); None: Release().
_CONFIGURED = [None]


def configure(rel=None):
    """Remember REL (a Release or release string; None: forget) as the
    running simulator's, for of(None); returns the Release now read."""
    _CONFIGURED[0] = None if rel is None else of(rel)
    return of(None)


def of(x):
    """The Release of X: a Release, a release string, anything that holds
    one (.release of a Sim, resources.Registry, hooks.Registry; .res of an
    Api; .api of an admission context), or None: the configured one."""
    if x is None:
        rel = _CONFIGURED[0]
        return rel if rel is not None else Release()
    if isinstance(x, Release):
        return x
    if isinstance(x, str):
        return Release(x)
    for attr in ("release", "res", "resources", "api"):
        v = getattr(x, attr, None)
        if v is not None and v is not x and not callable(v):
            return of(v)
    raise TypeError("no Kubernetes release in %r" % (x,))


def gate(x, name):
    """Whether feature gate NAME is on in the release of X (a Sim, a
    registry, an Api, a Release, a release string, None: the configured
    one); a plain release string means that release's defaults."""
    return of(x).gate(name)


def gate_default(version, name):
    """NAME's default in release VERSION (False where it has no such
    gate); VERSION may be any release number, served or not."""
    spec = GATES.get(name, {}).get(str(version))
    return bool(spec and spec[1])


def at_least(x, rel):
    """Whether the release of X (as of()) is REL or newer."""
    return release_key(of(x)) >= release_key(rel)


def table(x=None):
    """{gate: bool} of every gate the release of X has (for the log)."""
    return of(x).describe()["gates"]
