# SPDX-License-Identifier: Apache-2.0
"""The NVIDIA DRA driver's NodePrepareResources step (gpu.nvidia.com), as
the kubelet stand-in (kubelet.py) calls it for an allocated claim.

What the driver does before it touches a GPU (cmd/gpu-kubelet-plugin/
device_state.go prepareDevices): it takes the opaque configs of its driver
from status.allocation.devices.config (class configs before claim configs),
puts the default MigDeviceConfig and GpuConfig in front (lowest
precedence), picks for every allocated device the last config naming its
request (or the last one naming no request that fits the device type),
normalizes and validates each config (api/nvidia.com/resource/v1beta1
validate.go).  With the feature gates TimeSlicingSettings / MPSSupport off
(alpha, off as shipped) a sharing strategy TimeSlicing / MPS fails
validation.  Errors are wrapped as the driver, the kubelet plug-in helper
and the kubelet wrap them.
"""

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.nvidia.com/v1beta1"
# pkg/featuregates/featuregates.go; only TimeSlicingSettings and MPSSupport
# (alpha, default off) change what the simulator does.
KNOWN_GATES = ("TimeSlicingSettings", "MPSSupport", "IMEXDaemonsWithDNSNames",
               "PassthroughSupport", "NVMLDeviceHealthCheck", "DynamicMIG",
               "ComputeDomainCliques", "CrashOnNVLinkFabricErrors",
               "DeviceMetadata", "FabricManagerPartitioning",
               "HostManagedIMEXDaemon", "NodeLocalFabricIPC",
               "DRAListTypeAttributes", "ConsumableShares")
INTERVALS = ("Default", "Short", "Medium", "Long")
GATE_ERROR = ('"%s" is selected as the GPU sharing strategy, but the "%s" '
              'feature gate is not enabled')
GATE_OF = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}


class PrepareError(Exception):
    """NodePrepareResources failed for one claim (driver's message)."""


def parse_gates(text):
    """The set of enabled gates from 'A,B' or 'A=true,B=false'."""
    on = set()
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, val = item.partition("=")
        if name not in KNOWN_GATES:
            raise ValueError("nvidia-gates: unknown NVIDIA driver feature "
                             "gate %r (known: %s)" % (name,
                                                      ", ".join(KNOWN_GATES)))
        if val.lower() not in ("", "true", "false"):
            raise ValueError("nvidia-gates: %s=%s: value must be true or "
                             "false" % (name, val))
        if val.lower() != "false":
            on.add(name)
    return on


def _validate_sharing(sharing, gates, mig):
    """GpuSharing / MigDeviceSharing Normalize + Validate."""
    if not isinstance(sharing, dict):
        raise PrepareError("error validating GPU config: invalid GPU sharing "
                           "settings: %r" % (sharing,))
    strategy = sharing.get("strategy")
    gate = GATE_OF.get(strategy)
    if gate is None:
        raise PrepareError("error validating GPU config: unknown GPU sharing "
                           "strategy: %s, supported GPU sharing strategies: "
                           "TimeSlicing, MPS" % strategy)
    if gate not in gates:
        raise PrepareError("error validating GPU config: " +
                           GATE_ERROR % (strategy, gate))
    if strategy == "TimeSlicing" and not mig:
        interval = (sharing.get("timeSlicingConfig") or {}).get(
            "interval", "Default")
        if interval not in INTERVALS:
            raise PrepareError(
                "error validating GPU config: unknown time-slice interval: "
                "%s, supported time-slice intervals: %s" %
                (interval, ", ".join(INTERVALS)))
    if strategy == "MPS":
        pct = (sharing.get("mpsConfig") or {}).get(
            "defaultActiveThreadPercentage")
        if isinstance(pct, int) and pct < 0:
            raise PrepareError("error validating GPU config: active thread "
                               "percentage must not be negative")
        if isinstance(pct, int) and pct > 100:
            raise PrepareError("error validating GPU config: active thread "
                               "percentage must not be greater than 100")


def _config_kind(params):
    """'gpu', 'mig' or 'other' for an opaque parameters object."""
    if not isinstance(params, dict) or params.get("apiVersion") != \
            API_VERSION:
        raise PrepareError("error getting opaque device configs: error "
                           "decoding config parameters: apiVersion must be "
                           "%s" % API_VERSION)
    return {"GpuConfig": "gpu", "MigDeviceConfig": "mig"}.get(
        params.get("kind"), "other")


def prepare_claim(claim, device_types, gates):
    """Validate CLAIM's NVIDIA configs; raise PrepareError with the message
    of the driver's PrepareResult (error preparing devices for claim ...).

    device_types maps (pool, device) to the device's 'type' attribute
    ('gpu', 'mig', 'vfio'); gates is the set of enabled feature gates.
    """
    md = claim["metadata"]
    alloc = (claim.get("status") or {}).get("allocation") or {}
    devs = alloc.get("devices") or {}
    try:
        results = [r for r in devs.get("results") or []
                   if r.get("driver") == DRIVER]
        if not results:
            return
        configs = [("mig", [], None), ("gpu", [], None)]
        cfgs = [c for c in devs.get("config") or []
                if ((c.get("opaque") or {}).get("driver")) == DRIVER]
        cfgs.sort(key=lambda c: 0 if c.get("source") == "FromClass" else 1)
        for c in cfgs:
            params = c["opaque"].get("parameters")
            configs.append((_config_kind(params), c.get("requests") or [],
                            params))
        chosen = {}
        for r in results:
            dtype = device_types.get((r.get("pool"), r.get("device")), "")
            for i in range(len(configs) - 1, -1, -1):
                kind, reqs, params = configs[i]
                if r.get("request") in reqs:
                    if kind == "gpu" and dtype != "gpu":
                        raise PrepareError(
                            "cannot apply GpuConfig "
                            "to device %s of type %s (request: %s)" %
                            (_q(r.get("device")), _q(dtype), r["request"]))
                    if kind == "mig" and dtype != "mig":
                        raise PrepareError(
                            "cannot apply "
                            "MigDeviceConfig to device %s of type %s "
                            "(request: %s)" % (_q(r.get("device")),
                                               _q(dtype), r["request"]))
                    chosen[i] = configs[i]
                    break
                if not reqs:
                    if kind in ("gpu", "mig") and kind != dtype:
                        continue
                    chosen[i] = configs[i]
                    break
        for kind, _, params in chosen.values():
            if params is None or kind not in ("gpu", "mig"):
                continue
            if params.get("sharing") is not None:
                _validate_sharing(params["sharing"], gates, kind == "mig")
    except PrepareError as e:
        raise PrepareError("error preparing devices for claim %s/%s:%s: "
                           "prepare devices failed: %s"
                           % (md.get("namespace"), md.get("name"),
                              md.get("uid"), e))


def _q(s):
    """Go's %q for a plain string."""
    return '"%s"' % str(s).replace("\\", "\\\\").replace('"', '\\"')
