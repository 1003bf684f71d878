"""GPU partitions, the sharing configurations of a tenant, and one run.

Every number here is a parameter with its source in PARAMS, read from
params.toml; study.py prints the table into the report and varies the
uncertain ones.
"""

import os
import tomllib
from dataclasses import dataclass

import numpy as np

from .engine import Partition, Pod, Sim
from .traffic import Agent, AgentSource, ReplaySource, Service, load_trace

PARAMS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "params.toml")


def load_params(path=PARAMS_FILE):
    """{name: (default, low, high, source)} of the parameter file, in its
    order; low/high is the published range the sensitivity analysis walks,
    None when the value is a definition or fixed."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    out = {}
    for name, t in doc.items():
        if not isinstance(t, dict) or set(t) - {"default", "low", "high",
                                                "source"}:
            raise ValueError("%s: [%s] must have only default, low, high "
                             "and source" % (path, name))
        if "default" not in t or "source" not in t or \
                ("low" in t) != ("high" in t):
            raise ValueError("%s: [%s] needs default and source, and low "
                             "with high" % (path, name))
        out[name] = (t["default"], t.get("low"), t.get("high"), t["source"])
    return out


PARAMS = load_params()


def defaults():
    return {k: v[0] for k, v in PARAMS.items()}


# MIG profiles of an A100-80GB (NVIDIA MIG user guide): compute sevenths,
# memory eighths, devices per GPU. "full" is the whole GPU with MIG off.
PROFILES = {
    "1g": (1, 1, 7),
    "2g": (2, 2, 3),
    "3g": (3, 4, 2),
    "full": (7, 8, 1),
}


def speed(profile, p):
    """Work per second of a partition, in whole-GPU (MIG off) units."""
    if profile == "full":
        return 1.0
    s3 = (1.0 - p["mig_overhead"]) / p["scale_3g_full"]
    s = {"3g": s3, "2g": s3 / p["scale_2g_3g"],
         "1g": s3 / p["scale_2g_3g"] / p["scale_1g_2g"]}
    return s[profile]


def memory_gib(profile, p):
    """Memory a device exposes: the 1g figure times its memory eighths."""
    return p["mem_1g_mib"] * PROFILES[profile][1] / 1024.0


@dataclass(frozen=True)
class Config:
    """How one tenant with k pods is placed.

    mode: "exclusive" (a whole GPU per pod), "mig" (a partition per pod),
    "hybrid" (one partition time-shared by the k pods), "hybrid-mps" (the
    same under MPS), "larger" (one pod serving all of the tenant's calls on
    one bigger partition).
    """
    mode: str
    profile: str
    k: int

    @property
    def label(self):
        if self.mode == "exclusive":
            return "exclusive"
        return "%s-%s" % (self.mode, self.profile)

    def devices(self):
        """(partitions the tenant holds, pods on each)."""
        if self.mode in ("exclusive", "mig"):
            return self.k, 1
        return 1, (1 if self.mode == "larger" else self.k)

    def fits(self, p):
        _, pods = self.devices()
        return pods * p["model_gib"] <= memory_gib(self.profile, p)

    def gpu_equivalent(self):
        """GPU-equivalents the tenant holds: compute sevenths of its
        devices (a whole GPU is 1)."""
        n, _ = self.devices()
        return n * PROFILES[self.profile][0] / 7.0

    def tenants_per_gpu(self):
        n, _ = self.devices()
        return PROFILES[self.profile][2] / n


def sharing_args(cfg, p):
    if cfg.mode == "hybrid":
        return {"sharing": "ts", "switch_loss": p["switch_loss"]}
    if cfg.mode == "hybrid-mps":
        _, pods = cfg.devices()
        used = pods * p["model_gib"] / memory_gib(cfg.profile, p)
        f = 1.0 - p["mps_penalty"] if used > p["mps_contention"] \
            else 1.0 + p["mps_gain"]
        return {"sharing": "mps", "mps_factor": f}
    return {"sharing": "single"}


TRAFFIC = {
    # name: (token trace, kind, Gamma CV of session arrivals)
    "replay-conv": ("conv", "replay", None),
    "replay-code": ("code", "replay", None),
    "agent-g1.4": ("code", "agent", 1.41),
    "agent-g8": ("code", "agent", 8.0),
}


def run_one(cfg, traffic, load, p, seed, calls):
    """Simulates the tenants that fit on one GPU (at least one tenant) for
    about `calls` LLM calls after a 10 % warm-up. `load` is a tenant's
    offered work in units of one 1g partition's capacity, spread evenly
    over its k pods' sources (in "larger" the k sources feed one pod).
    Returns a dict of metrics, or None when the model does not fit."""
    if not cfg.fits(p):
        return None
    rng = np.random.default_rng(seed)
    sim = Sim()
    trace_name, kind, cv = TRAFFIC[traffic]
    trace = load_trace(trace_name)
    service = Service(p["prefill_rate"], p["decode_rate"])
    agent = Agent(p["turns"], p["calls_per_turn"], p["tools_per_turn"],
                  p["cached"], p["tool_time"], p["think_time"])
    tenants = max(1, int(cfg.tenants_per_gpu()))
    src_load = load * speed("1g", p) / cfg.k     # work/s of one source
    # run length from the expected call rate
    w1, w2 = service.work(trace.prompt, trace.output)
    if kind == "agent":
        per_call = float(np.mean(w1)) * agent.uncached_share() + \
            float(np.mean(w2))
    else:
        per_call = float(np.mean(w1 + w2))
    src_calls = calls / (tenants * cfg.k)         # calls of one source
    window = src_calls * per_call / src_load
    warm = 0.1 * window
    if kind == "agent":                           # sessions must settle
        warm = max(warm, 2.0 * agent.session_span())
    horizon = warm + window
    per_arrival = agent.calls_per_session() if kind == "agent" else 1.0
    block = max(16, int(src_calls * horizon / window / per_arrival))
    n_dev, pods_per_dev = cfg.devices()
    n_pods = 1 if cfg.mode == "larger" else cfg.k
    spd = speed(cfg.profile, p)
    share = sharing_args(cfg, p)
    rec = []
    partitions = []
    for t in range(tenants):
        parts = [Partition(sim, "t%d/d%d" % (t, d), PROFILES[cfg.profile][0],
                           spd, **share) for d in range(n_dev)]
        partitions += parts
        pods = [Pod(sim, parts[j // pods_per_dev], "t%d/p%d" % (t, j), "ps",
                    rec.append) for j in range(n_pods)]
        for j in range(cfg.k):
            sub = np.random.default_rng(rng.integers(1 << 62))
            pod = pods[j % n_pods]
            if kind == "replay":
                ReplaySource(sim, sub, trace, service, pod, src_load, block)
            else:
                AgentSource(sim, sub, trace, service, pod, src_load, agent,
                            cv, block)
    sim.run(warm)
    for part in partitions:
        part._advance()
        part.busy_time = part.work_done = 0.0
    n_warm = len(rec)
    sim.run(horizon)
    for part in partitions:
        part._advance()
    jobs = rec[n_warm:]
    r = metrics(jobs, partitions, cfg, p, horizon - warm, tenants)
    r["tenants_simulated"] = tenants
    r["sim_seconds"] = horizon
    return r


def metrics(jobs, partitions, cfg, p, span, tenants):
    """Latency, SLO and utilisation figures of one run."""
    n = len(jobs)
    if n == 0:
        raise RuntimeError("a run completed no calls; make it longer")
    ttft = np.fromiter((j.t_first - j.t_arrival for j in jobs), float, n)
    comp = np.fromiter((j.t_done - j.t_arrival for j in jobs), float, n)
    outs = np.fromiter((j.out_tokens for j in jobs), float, n)
    ok = (ttft <= p["ttft_slo"]) & \
        (comp <= p["ttft_slo"] + outs * p["tpot_slo"])
    slices_busy = sum(q.busy_time * q.slices for q in partitions)
    slices_held = sum(q.slices for q in partitions) * span
    work = sum(q.work_done for q in partitions)
    cap = sum(q.speed for q in partitions) * span
    gpu_eq_s = cfg.gpu_equivalent() * tenants * span
    return {
        "calls": n,
        "ttft_p50": float(np.percentile(ttft, 50)),
        "ttft_p99": float(np.percentile(ttft, 99)),
        "comp_p50": float(np.percentile(comp, 50)),
        "comp_p99": float(np.percentile(comp, 99)),
        "slo": float(ok.mean()),
        # time the devices held work, weighted by their slices
        "util_busy": slices_busy / slices_held,
        # work served over what the devices could serve at full speed
        "util_work": work / cap,
        # the same, over a whole GPU packed with such tenants
        "gpu_util": slices_busy / slices_held * min(
            1.0, cfg.tenants_per_gpu() * cfg.gpu_equivalent()),
        "tenants_per_gpu": cfg.tenants_per_gpu(),
        "gpu_eq_s_per_1k": gpu_eq_s / n * 1000.0,
    }


def with_params(p, **kw):
    q = dict(p)
    for k, v in kw.items():
        if k not in q:
            raise KeyError("unknown parameter %r" % k)
        q[k] = v
    return q

