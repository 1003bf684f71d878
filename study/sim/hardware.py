# SPDX-License-Identifier: Apache-2.0
"""The GPU, its MIG profiles, the tenants' models and the cost of one
serving step.

A partition has what NVIDIA's tables give its profile: a number of SMs
(compute) and memory slices (capacity, and with them L2 and memory
bandwidth). Nothing is derived from single-job speed-up measurements, so a
whole GPU is never worth less than the sum of its slices: seven 1g.10gb
devices hold 7 x 16 = 112 of the 132 SMs and 7/8 of the bandwidth.

One decode step of a model server (continuous batching, Orca/vLLM) with b
sequences decoding and c prompt tokens of chunked prefill takes

    h + max((W + K) / (BW * mbu), (b + c) * 2P / (F * mfu))

seconds: h the host's per-step work (scheduling, sampling, launches) while
the GPU waits, W the weight bytes, K the KV-cache bytes the step reads, BW
and F the partition's bandwidth and dense BF16 throughput, 2P the FLOPs a
token costs. At small batch the step is memory-bound (weights read once for
the whole batch, so throughput rises with b); past the ridge it is
compute-bound.
"""

from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class Profile:
    name: str
    sms: int            # streaming multiprocessors
    mem_slices: int     # eighths of memory, L2 and bandwidth
    compute_slices: int  # sevenths (what kpgpud bills: 1g = 1/7)
    per_gpu: int        # devices of this profile one GPU holds
    mem_gib: float      # memory a process sees


# NVIDIA H100 SXM5 80GB. SMs and GiB: `nvidia-smi mig -lgip` on an H100
# 80GB HBM3 (1g.10gb 16 SMs 9.75 GiB, 2g.20gb 32 SMs 19.62 GiB, 3g.40gb 60
# SMs 39.50 GiB, 7g.80gb 132 SMs 79.25 GiB); fractions of memory and
# instances per GPU: NVIDIA MIG User Guide, "Supported MIG Profiles"
# (1g 1/8, 2g 2/8, 3g 4/8, 7g full; 7, 3, 2, 1 per GPU). A device reports
# a little less than the instance holds (1g.10gb: 9728 MiB, kpgpud's
# facts), so the usable figure is the instance's times 9728/9984. "full" is
# the GPU with MIG off: 132 SMs, 80 GB (79.6 GiB usable).
PROFILES = {
    "1g": Profile("1g.10gb", 16, 1, 1, 7, 9.75 * 9728 / 9984),
    "2g": Profile("2g.20gb", 32, 2, 2, 3, 19.62 * 9728 / 9984),
    "3g": Profile("3g.40gb", 60, 4, 3, 2, 39.50 * 9728 / 9984),
    "full": Profile("H100 SXM5 80GB, MIG off", 132, 8, 7, 1, 79.6),
}
GPU_SMS = 132


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only model in BF16."""
    name: str
    params: float        # parameters
    layers: int
    d_model: int
    kv_bytes: int        # KV-cache bytes per token (K and V, all layers)
    max_len: int = 16384  # the longest context the server accepts

    @property
    def weight_bytes(self):
        return 2.0 * self.params


def kv_per_token(layers, kv_heads, head_dim, dtype_bytes=2):
    return 2 * layers * kv_heads * head_dim * dtype_bytes


# Architectures of the Qwen2.5 family (Qwen2.5 technical report,
# arXiv:2412.15115, table 1, and the models' published config.json):
# 0.5B: 24 layers, hidden 896, 2 KV heads of 64; 1.5B: 28 layers, hidden
# 1536, 2 KV heads of 128; 7B: 28 layers, hidden 3584, 4 KV heads of 128.
MODELS = {
    "0.5B": ModelSpec("Qwen2.5-0.5B-class", 0.494e9, 24, 896,
                      kv_per_token(24, 2, 64)),
    "1.5B": ModelSpec("Qwen2.5-1.5B-class", 1.54e9, 28, 1536,
                      kv_per_token(28, 2, 128)),
    "7B": ModelSpec("Qwen2.5-7B-class", 7.62e9, 28, 3584,
                    kv_per_token(28, 4, 128)),
}


@dataclass(frozen=True)
class StepCost:
    """The per-step constants of one model on one partition."""
    host: float          # s per step, GPU idle (h)
    weights: float       # s per step to read the weights (W / BW)
    per_kv_byte: float   # s per KV byte read
    per_token: float     # s of compute per token in the step (2P / F)

    def gpu(self, b, kv, c):
        """GPU seconds of one step: b decoding sequences whose KV caches
        hold kv bytes, c prefill tokens."""
        mem = self.weights + kv * self.per_kv_byte
        comp = (b + c) * self.per_token
        return mem if mem > comp else comp


def step_cost(model, profile, p):
    """StepCost of `model` on a partition of `profile` with parameters p
    (gpu_bw, gpu_flops, mbu, mfu, host_ms)."""
    prof = PROFILES[profile]
    bw = p["gpu_bw"] * prof.mem_slices / 8.0 * p["mbu"]
    flops = p["gpu_flops"] * prof.sms / GPU_SMS * p["mfu"]
    return StepCost(host=p["host_ms"] * 1e-3,
                    weights=model.weight_bytes / bw,
                    per_kv_byte=1.0 / bw,
                    per_token=2.0 * model.params / flops)


def prefill_tokens(model, n):
    """Prefill work of an n-token prompt in token-equivalents: the linear
    layers (2P per token) plus causal attention (2 * layers * d_model * n^2
    FLOPs: QK^T and AV over half the square each)."""
    return n + model.layers * model.d_model * float(n) * n / model.params


def kv_budget(model, profile, procs, p):
    """KV-cache bytes each of `procs` servers sharing a partition gets:
    its share of gpu_mem_util of the memory, less its weights and its
    runtime reserve (CUDA context, activations, graphs). Negative: the
    servers do not fit."""
    mem = PROFILES[profile].mem_gib * GIB * p["gpu_mem_util"] / procs
    return mem - model.weight_bytes - p["proc_reserve_gib"] * GIB


def fits(model, profile, procs, p):
    """A server starts only when its KV cache holds one sequence of the
    model's longest context (vLLM refuses to start otherwise)."""
    return kv_budget(model, profile, procs, p) >= model.kv_bytes * \
        model.max_len


def capacity_table(p, model):
    """Per profile: decode tokens/s of one sequence, and of the largest
    batch of 1,000-token sequences one server holds (its KV budget, at most
    max_seqs), prefill tokens/s in chunks, and the compute ceiling (tokens/s
    of an unbounded batch). The batched column is capped per server (seven
    1g servers batch seven times max_seqs); the ceiling, like the hardware,
    never gives seven 1g devices more than the whole GPU (see
    tests/test_study.py)."""
    rows = []
    for name, prof in PROFILES.items():
        sc = step_cost(model, name, p)
        single = 1.0 / (sc.host + sc.gpu(1, 1000 * model.kv_bytes, 0))
        budget = kv_budget(model, name, 1, p)
        bmax = int(min(p["max_seqs"], max(budget, 0) //
                       (1000 * model.kv_bytes)))
        batched = bmax / (sc.host + sc.gpu(bmax, bmax * 1000 *
                                           model.kv_bytes, 0)) \
            if bmax > 0 else 0.0
        chunk = p["chunk"]
        prefill = chunk / (sc.host + sc.gpu(0, 0, chunk))
        ceiling = 1.0 / sc.per_token
        rows.append((name, prof, single, bmax, batched, prefill, ceiling))
    return rows
