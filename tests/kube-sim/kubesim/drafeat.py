# SPDX-License-Identifier: Apache-2.0
"""resource.k8s.io fields of the DRA features that Kubernetes 1.36 and
1.37 turn on (release.py gates): defaulting, validation with the
apiserver's field paths and texts, and the strategies' dropDisabledFields
when a gate is off.

- device taints (DRADeviceTaints): ResourceSlice devices[].taints,
  request tolerations; DeviceTaintRule (DRADeviceTaintRules);
- consumable capacity (DRAConsumableCapacity): allowMultipleAllocations,
  capacity requestPolicy, request capacity.requests, distinctAttribute;
- partitionable devices (DRAPartitionableDevices): sharedCounters,
  consumesCounters, per-device node selection;
- DRA extended resources (DRAExtendedResource): DeviceClass
  extendedResourceName;
- device binding conditions (DRADeviceBindingConditions): dropped only.

Sources (kubernetes/kubernetes): pkg/apis/resource/validation/
validation.go (validateDevice, validateDeviceTaint,
validateDeviceToleration, validateRequestPolicy*, validateCounterSet,
validateDeviceTaintRuleSpec, validateDeviceClassSpec),
pkg/apis/resource/v1*/defaults.go (SetDefaults_DeviceTaint: timeAdded),
pkg/registry/resource/*/strategy.go (dropDisabledFields,
devicetaintrule PrepareForUpdate), pkg/apis/core/v1/helper
IsExtendedResourceName; the facts file k8s-1.36-1.37-facts.md section 2.
"""

import datetime
import time

from . import quantity as qty
from . import release
from .validation import (DNS1123_SUB_RE, LABEL_VALUE_RE, QNAME_MSG,
                         QNAME_RE, VALUE_MSG, FieldError,
                         _qualified_name, dns_label, dns_subdomain)

EFFECTS = ("NoExecute", "NoSchedule", "None")
EFFECTS_MSG = 'supported values: "NoExecute", "NoSchedule", "None"'
OPERATORS_MSG = 'supported values: "Equal", "Exists"'
MAX_TAINTS = 16          # DeviceTaintsMaxLength
MAX_TOLERATIONS = 16     # DeviceTolerationsMaxLength
MAX_DEVICES_ADVANCED = 64  # ResourceSliceMaxDevicesWithAdvancedFeatures
MAX_COUNTER_SETS = 8     # ResourceSliceMaxCounterSets
MAX_COUNTERS = 32        # ResourceSliceMaxCountersPerCounterSet
MAX_CONSUMES = 2         # ResourceSliceMaxDeviceCounterConsumptionsPerDevice
MAX_VALID_VALUES = 10    # CapacityRequestPolicyDiscreteMaxOptions
MAX_POOL_NAME = 253
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def now_seconds():
    """metav1.Time now, truncated to the second."""
    return datetime.datetime.fromtimestamp(
        int(time.time()), datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------ defaulting

def default_taint(t):
    """SetDefaults_DeviceTaint: timeAdded = now when unset."""
    if isinstance(t, dict) and not t.get("timeAdded"):
        t["timeAdded"] = now_seconds()


def default_toleration(t):
    """DeviceToleration operator defaults to Equal."""
    if isinstance(t, dict) and not t.get("operator"):
        t["operator"] = "Equal"


def default_slice(obj):
    """ResourceSlice defaults of the gated fields."""
    for d in ((obj.get("spec") or {}).get("devices") or []):
        if isinstance(d, dict):
            for t in d.get("taints") or []:
                default_taint(t)


def default_rule(obj):
    """DeviceTaintRule defaults."""
    default_taint((obj.get("spec") or {}).get("taint"))


def default_claim_spec(spec):
    """Toleration defaults in a claim spec (ResourceClaim, template)."""
    if not isinstance(spec, dict):
        return
    for r in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(r, dict):
            continue
        items = [r.get("exactly")] + list(r.get("firstAvailable") or [])
        for it in items:
            if isinstance(it, dict):
                for t in it.get("tolerations") or []:
                    default_toleration(t)


def rule_update_time(obj, old):
    """devicetaintrule PrepareForUpdate: a changed effect with an
    unchanged timeAdded gets timeAdded = now."""
    if old is None:
        return
    t = (obj.get("spec") or {}).get("taint")
    ot = (old.get("spec") or {}).get("taint") or {}
    if isinstance(t, dict) and t.get("effect") != ot.get("effect") and \
            t.get("timeAdded") == ot.get("timeAdded"):
        t["timeAdded"] = now_seconds()


# ------------------------------------------------------- small validators

def label_name(key, path, errs):
    """metav1validation.ValidateLabelName (IsQualifiedName)."""
    if not key:
        errs.append(FieldError("Invalid", path, key,
                               "name part must be non-empty"))
        errs.append(FieldError("Invalid", path, key, QNAME_MSG))
        return
    _qualified_name(key, path, errs)


def label_value(value, path, errs):
    """validateLabelValue (IsValidLabelValue)."""
    if len(value) > 63:
        errs.append(FieldError("Invalid", path, value,
                               "must be no more than 63 characters"))
    if not LABEL_VALUE_RE.match(value):
        errs.append(FieldError("Invalid", path, value, VALUE_MSG))


def pool_name(name, path, errs):
    """validatePoolName: '/'-separated DNS subdomains, at most 253."""
    if not name:
        errs.append(FieldError("Required", path))
        return
    if len(name) > MAX_POOL_NAME:
        errs.append(FieldError("TooLong", path, None,
                               "may not be more than %d bytes"
                               % MAX_POOL_NAME))
    for part in name.split("/"):
        dns_subdomain(part, path, errs)


def _too_many(items, cap, path, errs):
    """field.TooMany when ITEMS has more than CAP entries."""
    if isinstance(items, (list, dict)) and len(items) > cap:
        errs.append(FieldError("TooMany", path, len(items),
                               "must have at most %d items" % cap))
        return True
    return False


def _quantity(v, path, errs):
    """Parse a Quantity; a bad one is an Invalid error, None returned."""
    try:
        return qty.parse(v)
    except (qty.QuantityError, TypeError):
        errs.append(FieldError("Invalid", path, str(v),
                               "must be a valid quantity"))
        return None


def _value(q):
    """Quantity.Value(): rounded up to an integer."""
    return -((-q.value) // 1)


# ------------------------------------------------------------ taints

def taint_errors(t, path, errs, old=None):
    """validateDeviceTaint (the effect is checked when new or changed)."""
    if not isinstance(t, dict):
        errs.append(FieldError("Required", path))
        return
    label_name(t.get("key") or "", path + ".key", errs)
    if t.get("value"):
        label_value(t["value"], path + ".value", errs)
    if old is None or old.get("effect") != t.get("effect"):
        eff = t.get("effect") or ""
        if not eff:
            errs.append(FieldError("Required", path + ".effect"))
        elif eff not in EFFECTS:
            errs.append(FieldError("NotSupported", path + ".effect", eff,
                                   EFFECTS_MSG))


def toleration_errors(t, path, errs):
    """validateDeviceToleration."""
    if not isinstance(t, dict):
        return
    if t.get("key"):
        label_name(t["key"], path + ".key", errs)
    op = t.get("operator") or ""
    if op == "Exists":
        if t.get("value"):
            errs.append(FieldError("Invalid", path + ".value", t["value"],
                                   "must be empty for operator `Exists`"))
    elif op == "Equal":
        label_value(t.get("value") or "", path + ".value", errs)
    elif op == "":
        errs.append(FieldError("Required", path + ".operator"))
    else:
        errs.append(FieldError("NotSupported", path + ".operator", op,
                               OPERATORS_MSG))
    eff = t.get("effect") or ""
    if eff and eff not in EFFECTS:
        errs.append(FieldError("NotSupported", path + ".effect", eff,
                               EFFECTS_MSG))


def request_errors(r, path, errs):
    """The gated fields of an ExactDeviceRequest / DeviceSubRequest."""
    tols = r.get("tolerations")
    if isinstance(tols, list) and not _too_many(tols, MAX_TOLERATIONS,
                                                path + ".tolerations", errs):
        for i, t in enumerate(tols):
            toleration_errors(t, "%s.tolerations[%d]" % (path, i), errs)
    caps = (r.get("capacity") or {}).get("requests") \
        if isinstance(r.get("capacity"), dict) else None
    for n, v in (caps or {}).items():
        _quantity(v, "%s.capacity.requests[%s]" % (path, n), errs)


# ------------------------------------------------- consumable capacity

def request_policy_errors(value, policy, path, errs):
    """validateRequestPolicy of one capacity of a multi-allocatable
    device (VALUE its capacity value)."""
    if not isinstance(policy, dict):
        return
    vv, vr = policy.get("validValues"), policy.get("validRange")
    if vv and vr is not None:
        errs.append(FieldError(
            "Forbidden", path, None, 'exactly one policy can be specified, '
            'cannot specify "validValues" and "validRange" at the same '
            'time'))
        return
    default = policy.get("default")
    if vv:
        if default is None:
            errs.append(FieldError("Required", path + ".default", None,
                                   "required when validValues is defined"))
            return
        d = _quantity(default, path + ".default", errs)
        if d is not None:
            _valid_values(d, value, vv, path + ".validValues", errs)
    elif vr is not None:
        if default is None:
            errs.append(FieldError("Required", path + ".default", None,
                                   "required when validRange is defined"))
            return
        d = _quantity(default, path + ".default", errs)
        if d is not None and isinstance(vr, dict):
            _valid_range(d, value, vr, path + ".validRange", errs)


def _valid_values(default, cap, values, path, errs):
    """validateRequestPolicyValidValues."""
    qs = [_quantity(v, "%s[%d]" % (path, i), errs)
          for i, v in enumerate(values)]
    for i in range(len(qs) - 1):
        if qs[i] is not None and qs[i + 1] is not None and \
                qs[i].value > qs[i + 1].value:
            errs.append(FieldError("Invalid", "%s[%d]" % (path, i + 1),
                                   str(qs[i + 1]),
                                   "values must be sorted in ascending "
                                   "order"))
    if _too_many(values, MAX_VALID_VALUES, path, errs):
        return
    found = False
    seen = set()
    for i, q in enumerate(qs):
        if q is None:
            continue
        if q.value > cap.value:
            errs.append(FieldError("Invalid", "%s[%d]" % (path, i), str(q),
                                   "option is larger than capacity value: "
                                   "%s" % cap))
        if q.value == default.value:
            found = True
        k = _value(q)
        if k in seen:
            errs.append(FieldError("Duplicate", "%s[%d]" % (path, i),
                                   str(k)))
        seen.add(k)
    if not found:
        errs.append(FieldError("Invalid", path, str(default),
                               "default value is not valid according to "
                               "the requestPolicy"))


def _valid_range(default, cap, rng, path, errs):
    """validateRequestPolicyRange (integer step arithmetic, or milli
    units for fractional values under DRAFractionalCapacityRange)."""
    if rng.get("min") is None:
        errs.append(FieldError("Required", path + ".min", None,
                               "required when validRange is defined"))
        return
    mn = _quantity(rng["min"], path + ".min", errs)
    mx = _quantity(rng["max"], path + ".max", errs) \
        if rng.get("max") is not None else None
    step = _quantity(rng["step"], path + ".step", errs) \
        if rng.get("step") is not None else None
    if mn is None:
        return
    if mn.value > cap.value:
        errs.append(FieldError("Invalid", path + ".min", str(mn),
                               "min is larger than capacity value: %s"
                               % cap))
    if default.value < mn.value:
        errs.append(FieldError("Invalid", path + ".default", str(default),
                               "default is less than min: %s" % mn))
    if mx is not None:
        if mn.value > mx.value:
            errs.append(FieldError("Invalid", path + ".max", str(mn),
                                   "min is larger than max: %s" % mx))
        if mx.value > cap.value:
            errs.append(FieldError("Invalid", path + ".max", str(mx),
                                   "max is larger than capacity value: %s"
                                   % cap))
        if default.value > mx.value:
            errs.append(FieldError("Invalid", path + ".default",
                                   str(default),
                                   "default is more than max: %s" % mx))
    if step is None:
        return
    if step.value <= 0:
        errs.append(FieldError("Invalid", path + ".step", str(step),
                               "must be greater than zero"))
        return
    added = mn + step
    if added.value > cap.value:
        errs.append(FieldError("Invalid", path + ".step", str(step),
                               "one step %s is larger than capacity value: "
                               "%s" % (added, cap)))
    milli = release.gate(None, "DRAFractionalCapacityRange") and any(
        not q.is_integer() for q in (mn, mx, step, default)
        if q is not None)

    def units(q):
        return -((-q.value * 1000) // 1) if milli else _value(q)
    for v in [default] + ([mx] if mx is not None else []):
        if (units(v) - units(mn)) % units(step):
            errs.append(FieldError("Invalid", path + ".step", str(v),
                                   "value is not a multiple of a given step "
                                   "(%s) from (%s)" % (step, mn)))


# ---------------------------------------------------------- slices

def _counters(counters, path, errs):
    """A counters map: required, at most 32, DNS-label names."""
    if not counters:
        errs.append(FieldError("Required", path))
        return
    if _too_many(counters, MAX_COUNTERS, path, errs):
        return
    for n, c in counters.items():
        dns_label(n, path, errs)
        if isinstance(c, dict):
            _quantity(c.get("value"), "%s[%s].value" % (path, n), errs)


def _named_sets(items, cap, key, path, errs, check):
    """validateSet: at most CAP, each checked, duplicates by KEY."""
    if not isinstance(items, list) or _too_many(items, cap, path, errs):
        return
    seen = set()
    for i, it in enumerate(items):
        p = "%s[%d]" % (path, i)
        it = it if isinstance(it, dict) else {}
        check(it, p)
        k = it.get(key)
        if k in seen:
            errs.append(FieldError("Duplicate", p, k))
        seen.add(k)


def device_errors(d, path, errs, per_device):
    """validateDevice's checks of the gated fields."""
    multi = d.get("allowMultipleAllocations") is True
    for n, c in (d.get("capacity") or {}).items():
        if not isinstance(c, dict) or c.get("requestPolicy") is None:
            continue
        p = "%s.capacity[%s].requestPolicy" % (path, n)
        if not multi:
            errs.append(FieldError("Forbidden", p, None,
                                   "allowMultipleAllocations must be true"))
            continue
        val = _quantity(c.get("value"), "%s.capacity[%s].value"
                        % (path, n), errs)
        if val is not None:
            request_policy_errors(val, c["requestPolicy"], p, errs)
    taints = d.get("taints")
    if isinstance(taints, list) and not _too_many(
            taints, MAX_TAINTS, path + ".taints", errs):
        for i, t in enumerate(taints):
            taint_errors(t, "%s.taints[%d]" % (path, i), errs)

    def consumption(cc, p):
        if not cc.get("counterSet"):
            errs.append(FieldError("Required", p + ".counterSet"))
        else:
            dns_label(cc["counterSet"], p + ".counterSet", errs)
        _counters(cc.get("counters"), p + ".counters", errs)
    _named_sets(d.get("consumesCounters"), MAX_CONSUMES, "counterSet",
                path + ".consumesCounters", errs, consumption)
    placed = [f for f in ("nodeName", "nodeSelector", "allNodes")
              if d.get(f) is not None]
    msg = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
           "required when `perDeviceNodeSelection` is set to true in the "
           "ResourceSlice spec")
    if per_device:
        if d.get("nodeName") == "":
            errs.append(FieldError("Invalid", path + ".nodeName", "",
                                   "must not be empty"))
        if d.get("allNodes") is False:
            errs.append(FieldError("Invalid", path + ".allNodes", False,
                                   "must be either unset or set to true"))
        set_ = [f for f in placed if d.get(f) not in ("", False)]
        if not set_:
            errs.append(FieldError("Required", path, None, msg))
        elif len(set_) > 1:
            errs.append(FieldError("Invalid", path, "{%s}" % ", ".join(
                "`%s`" % f for f in set_), msg))
    elif placed:
        errs.append(FieldError("Invalid", path, None,
                               "`nodeName`, `nodeSelector` and `allNodes` "
                               "can only be set if `perDeviceNodeSelection` "
                               "is set to true in the ResourceSlice spec"))


def advanced(spec):
    """haveDeviceTaints || haveConsumesCounters: the 64-device limit."""
    return any(isinstance(d, dict) and (d.get("taints") or
                                        d.get("consumesCounters"))
               for d in spec.get("devices") or [])


def slice_errors(spec, errs):
    """validateResourceSliceSpec's checks of the gated fields."""
    if spec.get("sharedCounters") is not None and \
            spec.get("devices") is not None and \
            release.at_least(None, "1.35"):
        errs.append(FieldError("Invalid", "spec", "",
                               "only one of `sharedCounters` or `devices` "
                               "is allowed"))

    def counter_set(cs, p):
        if not cs.get("name"):
            errs.append(FieldError("Required", p + ".name"))
        else:
            dns_label(cs["name"], p + ".name", errs)
        _counters(cs.get("counters"), p + ".counters", errs)
    _named_sets(spec.get("sharedCounters"), MAX_COUNTER_SETS, "name",
                "spec.sharedCounters", errs, counter_set)


# --------------------------------------------------- DeviceTaintRule

def validate_rule(obj, old, errs):
    """ValidateDeviceTaintRule(Update): selector fields and the taint."""
    spec = obj.get("spec") or {}
    sel = spec.get("deviceSelector")
    if isinstance(sel, dict):
        p = "spec.deviceSelector"
        if sel.get("driver") is not None:
            from .dravalid import csi_driver_name
            csi_driver_name(sel["driver"], p + ".driver", errs)
        if sel.get("pool") is not None:
            pool_name(sel["pool"], p + ".pool", errs)
        if sel.get("device") is not None:
            dns_label(sel["device"], p + ".device", errs)
    old_taint = ((old or {}).get("spec") or {}).get("taint") \
        if old is not None else None
    taint_errors(spec.get("taint") or {}, "spec.taint", errs,
                 old_taint if isinstance(old_taint, dict) else None)


# ----------------------------------------------- extended resources

def is_extended_resource_name(name):
    """v1helper.IsExtendedResourceName: not native (no '/', or in the
    kubernetes.io/ domain), not requests.*, and requests.<name> a
    qualified name."""
    if not isinstance(name, str) or "/" not in name or \
            "kubernetes.io/" in name or name.startswith("requests."):
        return False
    q = "requests." + name
    parts = q.split("/")
    if len(parts) != 2:
        return False
    prefix, short = parts
    if not prefix or len(prefix) > 253 or not DNS1123_SUB_RE.match(prefix):
        return False
    return bool(short) and len(short) <= 63 and bool(QNAME_RE.match(short))


def class_errors(spec, errs):
    """validateDeviceClassSpec: extendedResourceName's format."""
    ext = spec.get("extendedResourceName")
    if ext is not None and not is_extended_resource_name(ext):
        errs.append(FieldError("Invalid", "spec.extendedResourceName", ext,
                               "must be a valid extended resource name"))


# -------------------------------------------------- dropDisabledFields

def _device_uses(spec, test):
    return any(isinstance(d, dict) and test(d)
               for d in (spec or {}).get("devices") or [])


def drop_disabled_slice(obj, old):
    """The ResourceSlice strategy's dropDisabledFields: gated fields go
    unless the stored slice already uses them."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    was = (old or {}).get("spec") or {}
    devs = [d for d in spec.get("devices") or [] if isinstance(d, dict)]
    if not release.gate(None, "DRADeviceTaints") and \
            not _device_uses(was, lambda d: d.get("taints")):
        for d in devs:
            d.pop("taints", None)
    if not release.gate(None, "DRAConsumableCapacity") and \
            not _device_uses(was, lambda d: d.get("allowMultipleAllocations")
                             or any(isinstance(c, dict) and
                                    c.get("requestPolicy") is not None
                                    for c in (d.get("capacity") or {})
                                    .values())):
        for d in devs:
            d.pop("allowMultipleAllocations", None)
            for c in (d.get("capacity") or {}).values():
                if isinstance(c, dict):
                    c.pop("requestPolicy", None)
    if not release.gate(None, "DRAPartitionableDevices") and not (
            was.get("sharedCounters") or was.get("perDeviceNodeSelection")
            or _device_uses(was, lambda d: d.get("consumesCounters") or
                            d.get("nodeName") or d.get("nodeSelector") or
                            d.get("allNodes"))):
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
        for d in devs:
            for f in ("consumesCounters", "nodeName", "nodeSelector",
                      "allNodes"):
                d.pop(f, None)
    if not release.gate(None, "DRADeviceBindingConditions") and \
            not _device_uses(was, lambda d: d.get("bindingConditions") or
                             d.get("bindsToNode")):
        for d in devs:
            for f in ("bindsToNode", "bindingConditions",
                      "bindingFailureConditions"):
                d.pop(f, None)


# ------------------------------------------------ kind defaults (kinds.py)

def default_claim(obj):
    """ResourceClaim defaults, tolerations included."""
    from .validation import default_claim as base
    base(obj)
    default_claim_spec(obj.get("spec"))


def default_claim_template(obj):
    """ResourceClaimTemplate defaults, tolerations included."""
    from .validation import default_claim_template as base
    base(obj)
    default_claim_spec((obj.get("spec") or {}).get("spec"))


def validate_rule_kind(obj, old, errs):
    """DeviceTaintRule validation (kinds.py), timeAdded bumped first on
    an update that changes the effect (PrepareForUpdate)."""
    rule_update_time(obj, old)
    validate_rule(obj, old, errs)
