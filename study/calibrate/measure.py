#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Measures what the sharing-mode study assumes, on one GPU or MIG device,
with a small decoder-only transformer with random weights (nothing is
downloaded), and writes the calibration file the study reads
(study/sim/calib.py; format in study/calibrate/README.md).

    python3 study/calibrate/measure.py --out calib.json [--quick]

Run it once per device: a whole GPU (MIG off), or each MIG profile in turn
(CUDA_VISIBLE_DEVICES=MIG-<uuid>). It measures
1. decode steps of one process at several batch sizes (1,024-token
   contexts): wall time of an eager step that copies its tokens to the host
   (as a server does) and GPU time of the same step replayed from a CUDA
   graph: host time, bandwidth utilisation, throughput against batch;
2. prefill of 512- and 2,048-token prompts: compute utilisation;
3. k processes (2, 3) each decoding batch b on the device at once
   (time-slicing, CUDA's default between processes; with --mps, under an
   MPS daemon you started) against one of them alone at batch b and one
   process batching all k * b calls: the hardware's answer to hybrid
   against one pod.
--quick takes about two minutes on an H100; the full run about four.
Needs PyTorch with CUDA; everything else is the standard library.
"""

import argparse
import datetime
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time

FORMAT = "kpgpud-study-calibration"
VERSION = 1

# Nominal figures by device name (substring, case-insensitive): memory
# bandwidth (bytes/s), dense BF16 tensor FLOP/s, SMs and GB of the whole
# GPU. NVIDIA datasheets; --peak-bw / --peak-flops override.
PEAKS = [
    ("H100 80GB HBM3", 3.35e12, 989e12, 132, 80),
    ("H100 SXM", 3.35e12, 989e12, 132, 80),
    ("H100 NVL", 3.9e12, 835e12, 132, 94),
    ("H100 PCIe", 2.0e12, 756e12, 114, 80),
    ("H200", 4.8e12, 989e12, 132, 141),
    ("A100-SXM4-80GB", 2.039e12, 312e12, 108, 80),
    ("A100 80GB PCIe", 1.935e12, 312e12, 108, 80),
    ("A100-SXM4-40GB", 1.555e12, 312e12, 108, 40),
]


def model_dims(a):
    """Parameter count, weight bytes and KV bytes per token (BF16)."""
    hd = a.d_model // a.heads
    per_layer = a.d_model * (a.heads + 2 * a.kv_heads) * hd + \
        a.heads * hd * a.d_model + 3 * a.d_model * a.ffn + 2 * a.d_model
    params = a.layers * per_layer + 2 * a.vocab * a.d_model + a.d_model
    return {"layers": a.layers, "d_model": a.d_model, "heads": a.heads,
            "kv_heads": a.kv_heads, "head_dim": hd, "ffn": a.ffn,
            "vocab": a.vocab, "params": params, "weight_bytes": 2 * params,
            "kv_bytes_per_token": 2 * a.layers * a.kv_heads * hd * 2,
            "dtype": "bfloat16", "weights": "random (seed 0)"}


def device_peaks(name, sms, mem_bytes, a):
    """(peak bytes/s, peak FLOP/s, note) of the device, a MIG device
    getting its SMs' share of FLOPs and its memory's share of bandwidth."""
    for sub, bw, fl, full_sms, full_gb in PEAKS:
        if sub.lower() in name.lower():
            mem_share = min(1.0, round(8 * mem_bytes / (full_gb * 1e9))
                            / 8.0) if "MIG" in name else 1.0
            sm_share = min(1.0, sms / full_sms)
            bw_ = a.peak_bw or bw * mem_share
            fl_ = a.peak_flops or fl * sm_share
            return bw_, fl_, "table %r: %.3g B/s x %.3f, %.3g FLOP/s x " \
                "%.3f" % (sub, bw, mem_share, fl, sm_share)
    if a.peak_bw and a.peak_flops:
        return a.peak_bw, a.peak_flops, "given on the command line"
    sys.exit("measure: unknown device %r: give --peak-bw and --peak-flops"
             % name)


# ------------------------------------------------------------ the model

class Tiny:
    """A decoder-only transformer (RMSNorm, GQA attention, SwiGLU MLP,
    untied LM head; no rotary embedding: its cost is negligible) with
    random BF16 weights and a preallocated KV cache."""

    def __init__(self, torch, a, max_batch, max_ctx, dev):
        self.t = torch
        self.a = a
        g = torch.Generator(device="cpu").manual_seed(0)
        hd = a.d_model // a.heads
        self.hd = hd

        def w(*shape):
            x = torch.randn(*shape, generator=g, dtype=torch.float32)
            return (x * 0.02).to(device=dev, dtype=torch.bfloat16)
        self.emb = w(a.vocab, a.d_model)
        self.layers = []
        for _ in range(a.layers):
            self.layers.append({
                "n1": torch.ones(a.d_model, device=dev, dtype=torch.bfloat16),
                "qkv": w(a.d_model, (a.heads + 2 * a.kv_heads) * hd),
                "o": w(a.heads * hd, a.d_model),
                "n2": torch.ones(a.d_model, device=dev, dtype=torch.bfloat16),
                "gu": w(a.d_model, 2 * a.ffn),
                "down": w(a.ffn, a.d_model),
            })
        self.nf = torch.ones(a.d_model, device=dev, dtype=torch.bfloat16)
        self.lm = w(a.d_model, a.vocab)
        self.dev = dev
        self.kc = self.vc = None
        self.alloc(max_batch, max_ctx)
        self.sdpa = hasattr(torch.nn.functional,
                            "scaled_dot_product_attention")
        self.gqa = False
        if self.sdpa:
            try:
                q = torch.zeros(1, a.heads, 1, hd, device=dev,
                                dtype=torch.bfloat16)
                k = torch.zeros(1, a.kv_heads, 2, hd, device=dev,
                                dtype=torch.bfloat16)
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, k, enable_gqa=True)
                self.gqa = True
            except (TypeError, RuntimeError):
                pass

    def alloc(self, max_batch, max_ctx):
        """(Re)allocates the KV cache."""
        t, a = self.t, self.a
        self.kc = self.vc = None
        t.cuda.empty_cache()
        self.kc = t.zeros(a.layers, max_batch, a.kv_heads, max_ctx, self.hd,
                          device=self.dev, dtype=t.bfloat16)
        self.vc = t.zeros_like(self.kc)

    def _norm(self, x, wt):
        t = self.t
        x32 = x.float()
        return (x32 * t.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
                ).to(x.dtype) * wt

    def _attn(self, q, k, v, causal):
        t = self.t
        F = t.nn.functional
        if self.gqa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                  enable_gqa=True)
        r = self.a.heads // self.a.kv_heads
        k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        # PyTorch before 2.0: the same by hand
        s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
        if causal:
            n, m = s.shape[-2], s.shape[-1]
            mask = t.ones(n, m, dtype=t.bool, device=s.device).tril(m - n)
            s = s.masked_fill(~mask, float("-inf"))
        return t.softmax(s.float(), -1).to(v.dtype) @ v

    def forward(self, tokens, b, n, pos):
        """tokens: [b * n]; n new tokens per sequence at positions pos..
        pos + n - 1 (decode: n = 1). Returns the next tokens [b]."""
        t, a, hd = self.t, self.a, self.hd
        F = t.nn.functional
        x = self.emb[tokens]
        for li, L in enumerate(self.layers):
            h = self._norm(x, L["n1"])
            qkv = h @ L["qkv"]
            q, k, v = qkv.split([a.heads * hd, a.kv_heads * hd,
                                 a.kv_heads * hd], -1)
            q = q.view(b, n, a.heads, hd).transpose(1, 2)
            k = k.view(b, n, a.kv_heads, hd).transpose(1, 2)
            v = v.view(b, n, a.kv_heads, hd).transpose(1, 2)
            self.kc[li, :b, :, pos:pos + n] = k
            self.vc[li, :b, :, pos:pos + n] = v
            kk = self.kc[li, :b, :, :pos + n]
            vv = self.vc[li, :b, :, :pos + n]
            o = self._attn(q, kk, vv, causal=n > 1)
            x = x + o.transpose(1, 2).reshape(b * n, a.heads * hd) @ L["o"]
            h = self._norm(x, L["n2"])
            g, u = (h @ L["gu"]).chunk(2, -1)
            x = x + (F.silu(g) * u) @ L["down"]
        x = self._norm(x.view(b, n, -1)[:, -1], self.nf)
        return (x @ self.lm).argmax(-1)


def _sync(torch):
    torch.cuda.synchronize()


def capture(torch, model, b, ctx, dev):
    """A CUDA graph of one decode step at batch b; returns (graph, input
    tokens, output tokens)."""
    static = torch.randint(0, model.a.vocab, (b,), device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model.forward(static, b, 1, ctx)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.forward(static, b, 1, ctx)
    graph.replay()
    _sync(torch)
    return graph, static, out


def time_decode(torch, model, b, ctx, steps, dev):
    """(wall ms of an eager step that copies its tokens to the host, GPU ms
    of the step replayed from a CUDA graph back to back, wall ms of a graph
    replay that copies its tokens to the host: a server with CUDA
    graphs)."""
    tok = torch.randint(0, model.a.vocab, (b,), device=dev)
    for _ in range(3):
        tok = model.forward(tok, b, 1, ctx).clone()
        tok.cpu()
    t0 = time.perf_counter()
    for _ in range(steps):
        out = model.forward(tok, b, 1, ctx)
        host = out.cpu()            # a server samples on the host
        tok = out
    wall = (time.perf_counter() - t0) / steps * 1e3
    del host
    graph, static, out = capture(torch, model, b, ctx, dev)
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(steps):
        graph.replay()
    e1.record()
    _sync(torch)
    gpu = e0.elapsed_time(e1) / steps
    t0 = time.perf_counter()
    for _ in range(steps):
        graph.replay()
        out.cpu()
    gwall = (time.perf_counter() - t0) / steps * 1e3
    del graph
    return wall, gpu, gwall


def time_prefill(torch, model, n, reps, dev):
    tok = torch.randint(0, model.a.vocab, (n,), device=dev)
    model.forward(tok, 1, n, 0)
    _sync(torch)
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        model.forward(tok, 1, n, 0)
    e1.record()
    _sync(torch)
    return e0.elapsed_time(e1) / reps


def bandwidth_probe(torch, dev, nbytes=1 << 30):
    x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=dev)
    y = torch.empty_like(x)
    y.copy_(x)
    _sync(torch)
    t0 = time.perf_counter()
    for _ in range(10):
        y.copy_(x)
    _sync(torch)
    return 2 * nbytes * 10 / (time.perf_counter() - t0)


# -------------------------------------------------- sharing (processes)

def worker(idx, a, max_batch, ctx, conn):
    """A process with its own CUDA context and model; decodes on command
    for a given time and reports its steps."""
    import torch
    dev = torch.device("cuda")
    model = Tiny(torch, a, max_batch, ctx + 2, dev)
    conn.send(("ready", idx))
    graphs = {}
    while True:
        cmd = conn.recv()
        if cmd[0] == "quit":
            return
        _, b, seconds, t_start, use_graph = cmd
        if use_graph:
            if b not in graphs:
                graphs[b] = capture(torch, model, b, ctx, dev)
            graph, _, out = graphs[b]

            def step():
                graph.replay()
                out.cpu()
        else:
            tok = torch.randint(0, a.vocab, (b,), device=dev)

            def step():
                model.forward(tok, b, 1, ctx).cpu()
        for _ in range(3):
            step()
        _sync(torch)
        while time.time() < t_start:
            time.sleep(0.001)
        steps = 0
        t_end = t_start + seconds
        while time.time() < t_end:
            step()
            steps += 1
        conn.send(("done", idx, steps, time.time() - t_start))


def sharing(a, ks, batches, seconds, ctx, mode, log):
    ctxm = mp.get_context("spawn")
    kmax = max(ks)
    max_batch = max(kmax * b for b in batches)
    pipes, procs = [], []
    for i in range(kmax):
        parent, child = ctxm.Pipe()
        p = ctxm.Process(target=worker, args=(i, a, max_batch if i == 0
                                              else max(batches), ctx, child))
        p.start()
        pipes.append(parent)
        procs.append(p)
    for c in pipes:
        if c.recv()[0] != "ready":
            raise RuntimeError("a worker failed to start")

    def run(which, b, use_graph):
        t_start = time.time() + 2.0
        for i in which:
            pipes[i].send(("run", b, seconds, t_start, use_graph))
        rate = 0.0
        for i in which:
            _, _, steps, took = pipes[i].recv()
            rate += steps * b / took
        return rate

    rows = []
    try:
        for use_graph in (False, True):
            for b in batches:
                alone = run([0], b, use_graph)
                for k in ks:
                    shared = run(list(range(k)), b, use_graph)
                    merged = run([0], k * b, use_graph)
                    rows.append({"mode": mode, "processes": k, "batch": b,
                                 "graphs": use_graph, "context": ctx,
                                 "seconds": seconds,
                                 "alone_tokens_per_s": alone,
                                 "shared_tokens_per_s": shared,
                                 "merged_tokens_per_s": merged})
                    log("sharing %s%s k=%d b=%d: alone %.0f, %d processes "
                        "%.0f, one process batching %d: %.0f tokens/s"
                        % (mode, " (CUDA graphs)" if use_graph else "", k,
                           b, alone, k, shared, k * b, merged))
    finally:
        for c in pipes:
            c.send(("quit",))
        for p in procs:
            p.join(30)
    return rows


# ----------------------------------------------------------------- main

def nvidia_smi():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                              text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def args_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="calibration file to write")
    ap.add_argument("--quick", action="store_true",
                    help="fewer batches and shorter sharing runs (~1 min)")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--d-model", type=int, default=896)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=4864)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--procs", default="2,3",
                    help="process counts of the sharing runs")
    ap.add_argument("--mps", action="store_true",
                    help="the sharing runs are under an MPS daemon the "
                    "caller started (recorded as mps)")
    ap.add_argument("--no-sharing", action="store_true")
    ap.add_argument("--peak-bw", type=float, default=0.0)
    ap.add_argument("--peak-flops", type=float, default=0.0)
    return ap


def main(argv=None):
    a = args_parser().parse_args(argv)
    t_all = time.perf_counter()

    def log(msg):
        print("measure: [%5.1f s] %s" % (time.perf_counter() - t_all, msg),
              flush=True)
    try:
        import torch
    except ImportError:
        sys.exit("measure: needs PyTorch with CUDA (import torch failed)")
    if not torch.cuda.is_available():
        sys.exit("measure: no CUDA device visible")
    dev = torch.device("cuda")
    prop = torch.cuda.get_device_properties(0)
    bw, fl, peak_note = device_peaks(prop.name, prop.multi_processor_count,
                                     prop.total_memory, a)
    dims = model_dims(a)
    log("%s, %d SMs, %.1f GiB; model %.0fM parameters"
        % (prop.name, prop.multi_processor_count, prop.total_memory / 2**30,
           dims["params"] / 1e6))
    if a.quick:
        batches = [1, 4, 16, 64, 256]
        seconds, steps = 2.5, 30
    else:
        batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
        seconds, steps = 5.0, 60
    ks = [int(x) for x in a.procs.split(",") if x]
    kv_tok = dims["kv_bytes_per_token"]
    free = torch.cuda.mem_get_info()[0]
    # the sharing workers are separate processes: keep room for them
    room = free - (max(ks) + 1) * (dims["weight_bytes"] + (1 << 30))
    cap = max(1, int(room * 0.5 // (kv_tok * (a.context + 2))))
    batches = [b for b in batches if b <= cap] or [1]
    model = Tiny(torch, a, max(batches), a.context + 2, dev)
    doc = {"format": FORMAT, "version": VERSION,
           "created": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "device": {"name": prop.name, "sms": prop.multi_processor_count,
                      "memory_bytes": prop.total_memory,
                      "peak_bw": bw, "peak_flops": fl,
                      "peak_source": peak_note,
                      "nvidia_smi": nvidia_smi(),
                      "cuda_visible_devices":
                      os.environ.get("CUDA_VISIBLE_DEVICES", "")},
           "software": {"torch": torch.__version__,
                        "cuda": torch.version.cuda,
                        "python": platform.python_version()},
           "model": dims, "quick": a.quick}
    doc["device"]["copy_bw"] = bandwidth_probe(torch, dev)
    log("copy bandwidth %.0f GB/s (nominal %.0f)"
        % (doc["device"]["copy_bw"] / 1e9, bw / 1e9))
    doc["decode"] = []
    for b in batches:
        wall, gpu, gwall = time_decode(torch, model, b, a.context, steps,
                                       dev)
        doc["decode"].append({"batch": b, "context": a.context,
                              "wall_ms": wall, "gpu_ms": min(gpu, wall),
                              "graph_wall_ms": max(gwall, min(gpu, wall))})
        log("decode b=%d: step %.2f ms eager, %.2f ms with CUDA graphs, "
            "%.2f ms GPU: %.0f tokens/s eager" % (b, wall, gwall, gpu,
                                                  b / wall * 1e3))
    # sharing batches: a small one, and the smallest that keeps the GPU
    # busy u >= 0.6 alone (so that k >= 2 processes saturate it and the
    # sharing gain can be identified), within memory
    u = {e["batch"]: e["gpu_ms"] / e["wall_ms"] for e in doc["decode"]}
    fit = [b for b in batches if b * max(ks) <= cap] or [batches[0]]
    busy = [b for b in fit if u[b] >= 0.6]
    share_b = sorted({min(fit), 4 if 4 in fit else min(fit),
                      min(busy) if busy else max(fit)})
    share_b = share_b[-2:]
    doc["prefill"] = []
    model.alloc(1, 2048 + 2)
    for n in (512, 2048):
        ms = time_prefill(torch, model, n, 5, dev)
        doc["prefill"].append({"tokens": n, "gpu_ms": ms})
        log("prefill %d tokens: %.2f ms: %.0f tokens/s"
            % (n, ms, n / ms * 1e3))
    del model
    torch.cuda.empty_cache()
    doc["sharing"] = []
    if not a.no_sharing and ks:
        doc["sharing"] = sharing(a, ks, share_b, seconds, a.context,
                                 "mps" if a.mps else "time-slicing", log)
    doc["seconds"] = time.perf_counter() - t_all
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, a.out)
    log("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
