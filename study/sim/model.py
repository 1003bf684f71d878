# SPDX-License-Identifier: Apache-2.0
"""Parameters, the configurations of a tenant, and one run.

Every number is a parameter with its source and status in params.toml
(published, assumed, a target, or a definition); a calibration file from
study/calibrate/ replaces the assumed serving figures it measured
(sim/calib.py). study.py prints the table into the report and varies the
uncertain ones.
"""

import os
import tomllib
from dataclasses import dataclass

import numpy as np

from . import hardware as hw
from .engine import Call, Partition, Server, Sim
from .traffic import (Agent, agent_sessions, inter_arrival_cv, load_trace,
                      split_replay)

PARAMS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "params.toml")
STATUSES = ("published", "assumed", "target", "definition", "calibrated")


def load_params(path=PARAMS_FILE):
    """{name: Param} of the parameter file, in its order; low/high is the
    range the sensitivity analysis walks (None when the value is not
    uncertain)."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    out = {}
    for name, t in doc.items():
        if not isinstance(t, dict) or set(t) - {"default", "low", "high",
                                                "source", "status"}:
            raise ValueError("%s: [%s] must have only default, low, high, "
                             "source and status" % (path, name))
        if "default" not in t or "source" not in t or \
                "status" not in t or ("low" in t) != ("high" in t):
            raise ValueError("%s: [%s] needs default, source and status, "
                             "and low with high" % (path, name))
        if t["status"] not in STATUSES:
            raise ValueError("%s: [%s] status must be one of %s"
                             % (path, name, ", ".join(STATUSES)))
        if not isinstance(t["default"], (int, float)):
            raise ValueError("%s: [%s] default must be a number"
                             % (path, name))
        if "low" in t and not t["low"] <= t["default"] <= t["high"]:
            raise ValueError("%s: [%s] needs low <= default <= high"
                             % (path, name))
        out[name] = Param(t["default"], t.get("low"), t.get("high"),
                          t["source"], t["status"])
    return out


@dataclass(frozen=True)
class Param:
    default: float
    low: float
    high: float
    source: str
    status: str


PARAMS = load_params()


def defaults(params=None):
    return {k: v.default for k, v in (params or PARAMS).items()}


def with_params(p, **kw):
    q = dict(p)
    for k, v in kw.items():
        if k not in q:
            raise KeyError("unknown parameter %r" % k)
        q[k] = v
    return q


# ---------------------------------------------------------------- configs

MODES = ("exclusive", "mig", "one", "hybrid", "hybrid-mps")


@dataclass(frozen=True)
class Config:
    """How one tenant with k pods is placed.

    exclusive: a whole GPU (MIG off) per pod; mig: a partition per pod;
    one: one server on one partition serves all the tenant's calls (the
    pods merged: only when they run the same model); hybrid: one partition
    time-shared by the k pods' servers; hybrid-mps: the same under MPS.
    """
    mode: str
    profile: str
    k: int

    def __post_init__(self):
        if self.mode not in MODES or self.profile not in hw.PROFILES or \
                self.k < 1:
            raise ValueError("bad config %r" % (self,))
        if self.mode == "exclusive" and self.profile != "full":
            raise ValueError("exclusive is a whole GPU per pod")

    @property
    def label(self):
        if self.mode == "exclusive":
            return "exclusive"
        return "%s-%s" % (self.mode, self.profile)

    @property
    def merges(self):
        """Needs the pods to run one model (one server for all)."""
        return self.mode == "one"

    def layout(self):
        """(partitions, servers per partition)."""
        if self.mode in ("exclusive", "mig"):
            return self.k, 1
        if self.mode == "one":
            return 1, 1
        return 1, self.k

    def gain_param(self):
        return {"hybrid": "ts_gain", "hybrid-mps": "mps_gain"}.get(self.mode)

    def fits(self, model, p):
        _, procs = self.layout()
        return hw.fits(model, self.profile, procs, p)

    def gpu_equivalent(self):
        """GPU-equivalents held: compute sevenths of the devices (what
        kpgpud bills; a whole GPU is 1)."""
        n, _ = self.layout()
        return n * hw.PROFILES[self.profile].compute_slices / 7.0

    def tenants_per_gpu(self):
        n, _ = self.layout()
        return hw.PROFILES[self.profile].per_gpu / n


TRAFFIC = {
    # name: (token trace, kind, Gamma CV of session arrivals)
    "replay-conv": ("conv", "replay", None),
    "replay-code": ("code", "replay", None),
    "agent-cv1.4": ("code", "agent", 1.41),
    "agent-cv8": ("code", "agent", 8.0),
}


def agent_of(p):
    return Agent(p["turns"], p["calls_per_turn"], p["tools_per_turn"],
                 p["cached"], p["tool_time"], p["think_time"])


# ------------------------------------------------------------- arrivals

WARMUP = {"replay": 60.0, "agent": 60.0}
WINDOW = 240.0                   # measured seconds
DRAIN = 1800.0                   # at most this long after the window
OVERLOAD_WAIT = 120.0            # a call queued this long: overloaded


def arrivals(traffic, load, k, p, seed):
    """The tenant's traffic of one replication, drawn from its own seed
    whatever the configuration (common random numbers). load: for a
    replay the number of tenants the service's hour is split among, for
    agents sessions per minute."""
    trace_name, kind, cv = TRAFFIC[traffic]
    trace = load_trace(trace_name)
    # the replication's seed picks where in the trace's hour its window
    # lies, the same at every load; the load's own stream splits the calls
    offset = np.random.default_rng([seed, 0]).random() * trace.t[-1]
    rng = np.random.default_rng([seed, 1 + int(round(load * 1000))])
    if kind == "replay":
        return kind, split_replay(trace, load, k, rng, offset)
    sessions = agent_sessions(trace, agent_of(p), load / 60.0, cv,
                              WARMUP["agent"] + WINDOW, k, rng)
    return kind, sessions


class _ReplayStream:
    def __init__(self, r, make, servers_of_pod):
        self.t = r.t.tolist()
        self.r = r
        self.make = make
        self.dest = [servers_of_pod[j] for j in r.pod.tolist()]
        self.prompt = r.prompt.tolist()
        self.output = r.output.tolist()
        self.i = 0
        self.calls = []
        self.next_t = self.t[0] if self.t else float("inf")

    def fire(self):
        i = self.i
        call = self.make(self.prompt[i], self.output[i], 0)
        self.calls.append(call)
        self.dest[i].arrive(call)
        self.i = i = i + 1
        self.next_t = self.t[i] if i < len(self.t) else float("inf")


class _AgentStream:
    def __init__(self, sim, sessions, make, servers_of_pod, cached):
        self.sim = sim
        self.sessions = sessions
        self.make = make
        self.dest = servers_of_pod
        self.cached = cached
        self.i = 0
        self.calls = []              # (session index, call)
        self.next_t = sessions[0].start if sessions else float("inf")

    def fire(self):
        i = self.i
        self._call(i, 0)
        self.i = i = i + 1
        self.next_t = self.sessions[i].start if i < len(self.sessions) \
            else float("inf")

    def _call(self, si, j):
        s = self.sessions[si]
        prompt = int(s.prompt[j])
        cached = 0 if j == 0 else int(prompt * self.cached)
        call = self.make(prompt, int(s.output[j]), cached, self._next,
                         (si, j))
        self.calls.append((si, call))
        self.dest[s.pod].arrive(call)

    def _next(self, call):
        si, j = call.ctx
        s = self.sessions[si]
        if j + 1 < len(s.prompt):
            self.sim.at(self.sim.now + float(s.gap[j]), self._resume,
                        (si, j + 1))

    def _resume(self, arg):
        self._call(*arg)


def call_maker(model):
    kvb = model.kv_bytes
    L, d, P = model.layers, model.d_model, model.params

    def make(prompt, out, cached, on_done=None, ctx=None):
        new = prompt - cached
        # linear layers for the new tokens, attention over the context
        pf = new + 2.0 * L * d * new * (cached + 0.5 * new) / P
        return Call(prompt, out, pf, kvb * (prompt + out),
                    kvb * (prompt + 0.5 * out), on_done, ctx)
    return make


def run_one(cfg, traffic, load, p, seed, model_name):
    """Simulates one tenant of configuration cfg serving `model_name` for
    one replication's arrivals. Returns a dict of metrics, or None when the
    servers do not fit their partition."""
    model = hw.MODELS[model_name]
    if not cfg.fits(model, p):
        return None
    kind, arr = arrivals(traffic, load, cfg.k, p, seed)
    sim = Sim()
    n_parts, per_part = cfg.layout()
    gain = p[cfg.gain_param()] if cfg.gain_param() else 0.0
    cost = hw.step_cost(model, cfg.profile, p)
    budget = hw.kv_budget(model, cfg.profile, per_part, p)
    parts, servers = [], []
    for _ in range(n_parts):
        part = Partition(gain)
        parts.append(part)
        for _ in range(per_part):
            servers.append(Server(sim, part, cost, budget,
                                  int(p["max_seqs"]), p["chunk"],
                                  OVERLOAD_WAIT))
    # pod j's calls go to server j (exclusive, mig, hybrid) or server 0
    dest = [servers[j if len(servers) > 1 else 0] for j in range(cfg.k)]
    make = call_maker(model)
    warm = WARMUP[kind]
    end = warm + WINDOW
    if kind == "replay":
        keep = arr.t < end               # nothing arrives after the window
        arr = type(arr)(arr.t[keep], arr.prompt[keep], arr.output[keep],
                        arr.pod[keep])
        stream = _ReplayStream(arr, make, dest)
    else:
        stream = _AgentStream(sim, arr, make, dest, p["cached"])
    sim.run(warm, stream)
    gpu0 = sum(s.gpu_time for s in servers)
    tok0 = sum(s.tokens for s in servers)
    sim.run(end, stream)
    for s in servers:
        s.advance(sim.now)
    gpu_t = sum(s.gpu_time for s in servers) - gpu0
    tokens = sum(s.tokens for s in servers) - tok0
    if sim.stopped is None:
        sim.run(end + DRAIN, stream)
    if kind == "replay":
        calls = [c for c in stream.calls if warm <= c.t_arr < end]
        n_planned = int(((arr.t >= warm) & (arr.t < end)).sum())
        offered_t = arr.t[(arr.t >= warm) & (arr.t < end)]
        cv_sessions = float("nan")
    else:
        ses = {i for i, s in enumerate(arr) if warm <= s.began < end}
        calls = [c for si, c in stream.calls if si in ses]
        n_planned = sum(len(arr[i].prompt) for i in ses)
        offered_t = np.array([c.t_arr for c in calls])
        starts = np.array(sorted(arr[i].began for i in ses))
        cv_sessions = inter_arrival_cv(starts)
    r = metrics(calls, n_planned, p)
    r["overloaded"] = sim.stopped is not None or r["unfinished"] > 0
    r["gpu_busy"] = gpu_t / (n_parts * WINDOW)
    r["tokens_per_s"] = tokens / WINDOW
    r["calls_per_s"] = n_planned / WINDOW
    r["cv_calls"] = inter_arrival_cv(offered_t)
    r["cv_sessions"] = cv_sessions
    for name, t in (("cgap", offered_t),
                    ("sgap", starts if kind == "agent" else ())):
        g = np.diff(np.sort(np.asarray(t, float)))
        r[name + "_n"] = len(g)
        r[name + "_s1"] = float(g.sum())
        r[name + "_s2"] = float((g * g).sum())
    r["gpu_eq"] = cfg.gpu_equivalent()
    return r


def metrics(calls, n_planned, p):
    """SLO and latency figures over the measured calls. A call meets the
    SLO when its time to first token is at most ttft_slo and its mean time
    per output token after the first at most tpot_slo. Calls that were
    refused (longer than the KV cache), not finished, or never arrived
    because the run was abandoned as overloaded count as misses."""
    n = max(n_planned, len(calls))
    inf = float("inf")
    ttft = np.full(n, inf)
    tpot = np.full(n, inf)
    for i, c in enumerate(calls):
        if c.t_first is not None:
            ttft[i] = c.t_first - c.t_arr
        if c.t_done is not None:
            tpot[i] = (c.t_done - c.t_first) / (c.out - 1) \
                if c.out > 1 else 0.0
    ok = (ttft <= p["ttft_slo"]) & (tpot <= p["tpot_slo"])
    done = np.isfinite(tpot)
    return {
        "calls": n,
        "unfinished": int(n - done.sum()),
        "rejected": int(sum(1 for c in calls if c.rejected)),
        "slo": float(ok.mean()) if n else 1.0,
        "ttft_p50": quantile(ttft, 0.5),
        "ttft_p99": quantile(ttft, 0.99),
        "tpot_p50": quantile(tpot, 0.5),
        "tpot_p99": quantile(tpot, 0.99),
    }


def quantile(x, q):
    """The q quantile by rank (inf where more than 1 - q of the calls
    never finished); 0 for no calls."""
    if len(x) == 0:
        return 0.0
    s = np.sort(x)
    return float(s[min(len(s) - 1, int(np.ceil(q * len(s))) - 1)])
