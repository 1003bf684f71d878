# SPDX-License-Identifier: Apache-2.0
"""The calibration file (study/calibrate/measure.py writes it, sim/calib.py
reads it): measurements synthesised from known parameters with the study's
own step model come back as those parameters; malformed files are refused
with what is wrong; a calibration replaces the assumed figures and marks
them; the shipped example parses; measure.py's pure parts run without a
GPU or PyTorch."""

import copy
import itertools
import json
import os
import sys

from sim import calib, model

HERE = os.path.dirname(os.path.abspath(__file__))
CALDIR = os.path.join(os.path.dirname(HERE), "calibrate")
sys.path.insert(0, CALDIR)

import measure  # noqa: E402

TRUE = {"mbu": 0.62, "mfu": 0.38, "host_ms": 2.5, "ts_gain": -0.1}


def synthetic(true=TRUE, mode="time-slicing"):
    """A calibration document as measure.py writes it, its numbers made
    by the step model from `true` on a whole H100."""
    a = measure.args_parser().parse_args(["--out", "x"])
    dims = measure.model_dims(a)
    bw, fl = 3.35e12, 989e12
    W, kv, P = dims["weight_bytes"], dims["kv_bytes_per_token"], \
        dims["params"]
    ctx = 1024
    dec = []
    for b in (1, 4, 16, 64, 256):
        mem = (W + b * (ctx + 1) * kv) / (bw * true["mbu"])
        comp = b * 2 * P / (fl * true["mfu"])
        g = max(mem, comp) * 1e3
        dec.append({"batch": b, "context": ctx, "gpu_ms": g,
                    "wall_ms": g + true["host_ms"],
                    "graph_wall_ms": g + 0.1})
    pre = []
    for n in (512, 2048):
        flops = 2 * P * n + 2 * dims["layers"] * dims["d_model"] * n * n
        pre.append({"tokens": n, "gpu_ms": flops / (fl * true["mfu"]) * 1e3})
    share = []
    for graphs in (False, True):
        for k, b in itertools.product((2, 3), (4, 256)):
            d = next(e for e in dec if e["batch"] == b)
            wall = d["graph_wall_ms" if graphs else "wall_ms"]
            u = d["gpu_ms"] / wall
            alone = b / wall * 1e3
            shared = alone * min(k, (1 + true["ts_gain"]) / u)
            share.append({"mode": mode, "processes": k, "batch": b,
                          "graphs": graphs, "context": ctx, "seconds": 6.0,
                          "alone_tokens_per_s": alone,
                          "shared_tokens_per_s": shared,
                          "merged_tokens_per_s": shared * 1.5})
    return {"format": calib.FORMAT, "version": calib.VERSION,
            "created": "2026-01-01T00:00:00Z",
            "device": {"name": "NVIDIA H100 80GB HBM3", "sms": 132,
                       "memory_bytes": 85e9, "peak_bw": bw,
                       "peak_flops": fl, "peak_source": "test"},
            "model": dims, "decode": dec, "prefill": pre, "sharing": share}


def test_round_trip_recovers_the_parameters():
    doc = calib.parse(json.dumps(synthetic()))
    d = calib.derive(doc)
    for k, v in TRUE.items():
        assert abs(d["params"][k] - v) < 1e-6 * max(1, abs(v)), \
            (k, d["params"][k], v)
    # some sharing runs do not saturate the GPU: reported, not used
    assert any(not r["saturated"] for r in d["sharing"])
    assert any(r["saturated"] for r in d["sharing"])
    assert all(abs(r["merged_over_shared"] - 1.5) < 1e-9
               for r in d["sharing"])


def test_mps_runs_give_mps_gain():
    t = dict(TRUE, ts_gain=0.2)
    d = calib.derive(calib.parse(json.dumps(synthetic(t, "mps"))))
    assert "ts_gain" not in d["params"]
    assert abs(d["params"]["mps_gain"] - 0.2) < 1e-6


def refused(doc, words):
    try:
        calib.parse(json.dumps(doc) if not isinstance(doc, str) else doc)
    except calib.CalibError as e:
        assert words in str(e), (words, str(e))
        return
    raise AssertionError("accepted a bad file (%s)" % words)


def test_bad_files_are_refused():
    good = synthetic()
    refused("{", "not JSON")
    refused([], "not a JSON object")
    for path, value, words in (
            (("format",), "other", "format"),
            (("version",), 2, "version"),
            (("device", "peak_bw"), -1, "positive"),
            (("device", "sms"), 1.5, "whole number"),
            (("model", "params"), "many", "finite number"),
            (("decode", 0, "gpu_ms"), 1e9, "gpu_ms above wall_ms"),
            (("decode",), [], "non-empty list"),
            (("prefill", 0), 3, "must be an object"),
            (("sharing", 0, "mode"), "mig", "mode"),
            (("sharing", 0, "processes"), 1, "at least 2"),
            (("device", "name"), None, "device")):
        doc = copy.deepcopy(good)
        d = doc
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
        refused(doc, words)
    doc = copy.deepcopy(good)
    del doc["decode"][0]["batch"]
    refused(doc, "missing 'batch'")
    refused(" " * (calib.MAX_BYTES + 1), "larger than")


def test_apply_marks_calibrated():
    d = calib.derive(calib.parse(json.dumps(synthetic())))
    d["path"] = "x.json"
    params = calib.apply(model.PARAMS, [d])
    for k in TRUE:
        assert params[k].status == "calibrated", k
        assert abs(params[k].default - TRUE[k]) < 1e-6
        assert params[k].low <= params[k].default <= params[k].high
    # what was not measured keeps its status
    assert params["proc_reserve_gib"].status == "assumed"
    assert model.PARAMS["mbu"].status == "assumed"      # not modified


def test_shipped_example_parses():
    doc = calib.load(os.path.join(CALDIR, "example.json"))
    assert doc.get("synthetic") is True
    d = calib.derive(doc)
    assert set(TRUE) <= set(d["params"])


def test_measure_pure_parts():
    a = measure.args_parser().parse_args(["--out", "x", "--quick"])
    dims = measure.model_dims(a)
    # the default harness model is a ~0.4B decoder (Qwen2.5-0.5B shape,
    # smaller vocabulary): 24 layers, 2 KV heads of 64
    assert 3e8 < dims["params"] < 6e8
    assert dims["kv_bytes_per_token"] == 2 * 24 * 2 * 64 * 2
    bw, fl, _ = measure.device_peaks("NVIDIA H100 80GB HBM3", 132, 85e9, a)
    assert (bw, fl) == (3.35e12, 989e12)
    bw, fl, _ = measure.device_peaks("NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                                     16, 10.47e9, a)
    assert abs(bw - 3.35e12 / 8) < 1 and abs(fl - 989e12 * 16 / 132) < 1
    bw, fl, _ = measure.device_peaks("NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                                     60, 42.4e9, a)
    assert abs(bw - 3.35e12 / 2) < 1


def test_measure_model_on_cpu_when_pytorch_is_here():
    # the harness's transformer (where PyTorch is installed; CI has none):
    # prefill and token-by-token decode agree, parameters as counted
    try:
        import torch
    except ImportError:
        print("  PyTorch not installed: harness model not run")
        return
    a = measure.args_parser().parse_args(
        ["--out", "x", "--layers", "2", "--d-model", "128", "--heads", "4",
         "--kv-heads", "2", "--ffn", "256", "--vocab", "1000"])
    cpu = torch.device("cpu")
    m = measure.Tiny(torch, a, 4, 64, cpu)
    n = sum(x.numel() for x in [m.emb, m.nf, m.lm] +
            [v for L in m.layers for v in L.values()])
    assert n == measure.model_dims(a)["params"]
    seq = torch.randint(0, a.vocab, (6,), generator=torch.Generator()
                        .manual_seed(1))
    full = m.forward(seq, 1, 6, 0)
    for i in range(6):
        last = m.forward(seq[i:i + 1], 1, 1, i)
    assert full.tolist() == last.tolist()
    assert m.forward(seq[:4], 4, 1, 10).shape == (4,)
