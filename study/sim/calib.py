# SPDX-License-Identifier: Apache-2.0
"""Reads the calibration file study/calibrate/measure.py writes and turns
its measurements into the model's parameters.

The file (JSON, format "kpgpud-study-calibration", version 1) holds raw
measurements of one device (a whole GPU or one MIG device); this module
derives, with the same step model the simulator uses (sim/hardware.py):

- mbu: bytes a decode step reads (weights + KV cache) over its GPU time
  (CUDA-graph replay, no host work), over the device's nominal bandwidth;
  median over the batches at most 16 (memory-bound);
- mfu: FLOPs of a prefill chunk over its GPU time, over the device's
  nominal BF16 throughput; the largest chunk measured;
- host_ms: a decode step's wall time (eager loop, tokens copied to the host
  each step) less its GPU time; median over batches;
- ts_gain (mps_gain for runs under MPS): k processes each decoding batch b
  on the device at once against one alone (eager steps, or CUDA-graph
  steps as a server with graphs runs them). Alone a process keeps the GPU
  busy u = g / (h + g); the model gives k of them an aggregate of
  min(k, (1 + gain) / u) times one's rate, so gain = aggregate / rate *
  u - 1 where k * u > 1 and the processes slowed each other (saturated);
  other runs only bound it and are reported, not used.

It also reports, per sharing run, k processes' tokens/s against one process
batching all their calls (k * b): the hardware's answer to hybrid against
one pod.
"""

import json
import math

FORMAT = "kpgpud-study-calibration"
VERSION = 1
MAX_BYTES = 4 << 20


class CalibError(ValueError):
    pass


def _num(d, key, where, positive=True, integer=False):
    if key not in d:
        raise CalibError("%s: missing %r" % (where, key))
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
            (integer and not isinstance(v, int)) or not math.isfinite(v):
        raise CalibError("%s: %r must be a %s" % (
            where, key, "whole number" if integer else "finite number"))
    if positive and v <= 0:
        raise CalibError("%s: %r must be positive" % (where, key))
    return v


def _list(d, key, where):
    v = d.get(key)
    if not isinstance(v, list) or not v:
        raise CalibError("%s: %r must be a non-empty list" % (where, key))
    for i, e in enumerate(v):
        if not isinstance(e, dict):
            raise CalibError("%s: %s[%d] must be an object" % (where, key, i))
    return v


def parse(text, name="calibration"):
    """Validates the JSON text of a calibration file; returns it as a
    dict. Raises CalibError naming what is wrong."""
    if len(text) > MAX_BYTES:
        raise CalibError("%s: larger than %d bytes" % (name, MAX_BYTES))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CalibError("%s: not JSON: %s" % (name, e)) from None
    if not isinstance(doc, dict):
        raise CalibError("%s: not a JSON object" % name)
    if doc.get("format") != FORMAT:
        raise CalibError("%s: format is not %r" % (name, FORMAT))
    if doc.get("version") != VERSION:
        raise CalibError("%s: version %r, this parser reads %d"
                         % (name, doc.get("version"), VERSION))
    dev = doc.get("device")
    if not isinstance(dev, dict) or not isinstance(dev.get("name"), str):
        raise CalibError("%s: device must be an object with a name" % name)
    for k in ("peak_bw", "peak_flops"):
        _num(dev, k, name + ": device")
    _num(dev, "sms", name + ": device", integer=True)
    m = doc.get("model")
    if not isinstance(m, dict):
        raise CalibError("%s: model must be an object" % name)
    for k in ("params", "weight_bytes", "kv_bytes_per_token", "layers",
              "d_model"):
        _num(m, k, name + ": model")
    for i, e in enumerate(_list(doc, "decode", name)):
        w = "%s: decode[%d]" % (name, i)
        _num(e, "batch", w, integer=True)
        _num(e, "context", w, integer=True)
        _num(e, "wall_ms", w)
        _num(e, "gpu_ms", w)
        if e["gpu_ms"] > e["wall_ms"] * 1.05:
            raise CalibError("%s: gpu_ms above wall_ms" % w)
    for i, e in enumerate(_list(doc, "prefill", name)):
        w = "%s: prefill[%d]" % (name, i)
        _num(e, "tokens", w, integer=True)
        _num(e, "gpu_ms", w)
    for i, e in enumerate(doc.get("sharing", []) or []):
        w = "%s: sharing[%d]" % (name, i)
        if e.get("mode") not in ("time-slicing", "mps"):
            raise CalibError("%s: mode must be time-slicing or mps" % w)
        _num(e, "processes", w, integer=True)
        _num(e, "batch", w, integer=True)
        _num(e, "alone_tokens_per_s", w)
        _num(e, "shared_tokens_per_s", w)
        _num(e, "merged_tokens_per_s", w)
        if e["processes"] < 2:
            raise CalibError("%s: processes must be at least 2" % w)
    return doc


def load(path):
    with open(path, encoding="utf-8") as f:
        return parse(f.read(MAX_BYTES + 1), path)


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def derive(doc):
    """{"params": {name: value}, "notes": [text], "sharing": [rows]} from a
    parsed calibration document."""
    dev, m = doc["device"], doc["model"]
    notes = []
    dec = {e["batch"]: e for e in doc["decode"]}
    small = [e for b, e in sorted(dec.items()) if b <= 16] or \
        [dec[min(dec)]]
    mbus = [(m["weight_bytes"] + e["batch"] * (e["context"] + 1) *
             m["kv_bytes_per_token"]) / (e["gpu_ms"] * 1e-3) /
            dev["peak_bw"] for e in small]
    host = [max(0.0, e["wall_ms"] - e["gpu_ms"]) for e in dec.values()]
    big = max(doc["prefill"], key=lambda e: e["tokens"])
    n = big["tokens"]
    flops = 2.0 * m["params"] * n + 2.0 * m["layers"] * m["d_model"] * n * n
    out = {"mbu": _median(mbus), "host_ms": _median(host),
           "mfu": flops / (big["gpu_ms"] * 1e-3) / dev["peak_flops"]}
    notes.append("%s (%d SMs): mbu %.2f from %d decode batches <= 16, "
                 "mfu %.2f from a %d-token prefill, host %.2f ms per step"
                 % (dev["name"], dev["sms"], out["mbu"], len(small),
                    out["mfu"], n, out["host_ms"]))
    rows = []
    gains = {"time-slicing": [], "mps": []}
    for e in doc.get("sharing", []) or []:
        d = dec.get(e["batch"])
        k = e["processes"]
        graphs = bool(e.get("graphs"))
        if d is None:
            u = float("nan")
        else:
            wall = d.get("graph_wall_ms", d["wall_ms"]) if graphs \
                else d["wall_ms"]
            u = min(1.0, d["gpu_ms"] / wall)
        ratio = e["shared_tokens_per_s"] / e["alone_tokens_per_s"]
        saturated = d is not None and k * u > 1.0 and ratio < 0.98 * k
        gain = ratio * u - 1.0 if saturated else float("nan")
        if saturated:
            gains[e["mode"]].append(gain)
        rows.append({"mode": e["mode"], "processes": k, "batch": e["batch"],
                     "graphs": graphs, "u": u, "shared_over_alone": ratio,
                     "merged_over_shared": e["merged_tokens_per_s"] /
                     e["shared_tokens_per_s"],
                     "gain": gain, "saturated": saturated})
    for mode, name in (("time-slicing", "ts_gain"), ("mps", "mps_gain")):
        if gains[mode]:
            out[name] = _median(gains[mode])
            notes.append("%s: %s %.3f (median of %d saturated runs)"
                         % (mode, name, out[name], len(gains[mode])))
        elif any(r["mode"] == mode for r in rows):
            notes.append("%s: no saturated run (k * u <= 1): %s not "
                         "identified" % (mode, name))
    return {"params": out, "notes": notes, "sharing": rows,
            "device": dev["name"], "created": doc.get("created", "")}


def apply(params, derived_list):
    """A copy of the parameter table (name -> model.Param) with each
    derived value as the default (the mean over the files), status
    "calibrated", its range widened to hold it."""
    from .model import Param    # late: model imports nothing from here
    vals = {}
    for d in derived_list:
        for k, v in d["params"].items():
            vals.setdefault(k, []).append(v)
    out = dict(params)
    for k, vs in vals.items():
        if k not in out:
            continue
        v = sum(vs) / len(vs)
        old = out[k]
        lo = None if old.low is None else min(old.low, v)
        hi = None if old.high is None else max(old.high, v)
        src = "calibrated: %s (was %s, %s)" % (
            "; ".join(d["device"] for d in derived_list if k in d["params"]),
            old.default, old.status)
        out[k] = Param(v, lo, hi, src, "calibrated")
    return out
