# SPDX-License-Identifier: Apache-2.0
"""make study: runs the sharing-mode study and writes study/out/
(report.md, PNG plots, every run as CSV).

Environment: STUDY_QUICK=1 for a short run (fewer loads, replications and
design points; for development), STUDY_REPORT_ONLY=1 to redo the report
and plots from STUDY_OUT's runs.csv, STUDY_OUT=DIR (default study/out),
STUDY_JOBS=N worker processes (default 2), STUDY_SEED=N base seed (default
20), STUDY_CALIB=FILE[,FILE] calibration files from study/calibrate/
(default: study/calibrate/calib.json if there is one).
"""

import csv
import datetime
import itertools
import multiprocessing
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from sim import calib, hardware as hw, model  # noqa: E402

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

QUICK = os.environ.get("STUDY_QUICK", "") not in ("", "0")
OUT = os.environ.get("STUDY_OUT", os.path.join(HERE, "out"))
JOBS = int(os.environ.get("STUDY_JOBS", "2"))
SEED = int(os.environ.get("STUDY_SEED", "20"))
CALIB_DEFAULT = os.path.join(HERE, "calibrate", "calib.json")

K = 3                                       # pods per tenant
C = model.Config
ALL_CONFIGS = [C("exclusive", "full", K), C("mig", "1g", K),
               C("one", "1g", K), C("one", "2g", K), C("one", "3g", K),
               C("hybrid", "1g", K), C("hybrid", "2g", K),
               C("hybrid", "3g", K), C("hybrid-mps", "1g", K),
               C("hybrid-mps", "2g", K)]
MAIN_15 = ("exclusive", "mig-1g", "one-1g", "one-2g", "one-3g",
           "hybrid-1g", "hybrid-2g", "hybrid-3g", "hybrid-mps-1g",
           "hybrid-mps-2g")
MAIN_05 = ("mig-1g", "one-1g", "hybrid-1g", "hybrid-mps-1g")
if QUICK:
    REPS = 3
    LOADS = {"replay-conv": [1, 4], "replay-code": [0.5, 2],
             "agent-cv1.4": [6, 24], "agent-cv8": [6, 24]}
    MAIN_15 = ("mig-1g", "one-1g", "one-2g", "hybrid-1g", "hybrid-2g",
               "hybrid-mps-2g")
    MAIN_05 = ("one-1g", "hybrid-1g")
    FACT_REPS = 2
    FACT_RUNS = 8                           # a 2^(6-3) design
else:
    REPS = 20
    LOADS = {"replay-conv": [0.5, 1, 2, 4],
             "replay-code": [0.25, 0.5, 1, 2],
             "agent-cv1.4": [18], "agent-cv8": [6, 18]}
    FACT_REPS = 3
    FACT_RUNS = 16                          # a 2^(6-2) design
MODELS = {"1.5B": [c for c in ALL_CONFIGS if c.label in MAIN_15],
          "0.5B": [c for c in ALL_CONFIGS if c.label in MAIN_05]}
# the 0.5B model needs about twice the traffic to load a partition as
# much; it runs the replays' three heaviest loads and the bursty agents
MODEL_LOADS = {"0.5B": {"replay-conv": lambda x: 1.5 * x,
                        "replay-code": lambda x: 2 * x,
                        "agent-cv1.4": lambda x: x + 6,
                        "agent-cv8": lambda x: x + 6}}
MODEL_SKIP = {"0.5B": ("agent-cv1.4",)}
GOALS = (0.99, 0.95)

# The factorial sensitivity: factors, their coded levels -1 / +1, and the
# cases (model, traffic, load, hybrid config, one-pod config) it compares.
FACTORS = ["ts_gain", "host_ms", "mbu", "mfu", "chunk", "proc_reserve_gib"]
FACT_CASES = [("1.5B", "replay-conv", 4 if QUICK else 2, "hybrid-2g",
               "one-2g"),
              ("0.5B", "replay-conv", 6 if QUICK else 3, "hybrid-1g",
               "one-1g")]


def loads_for(model_name, traffic):
    f = MODEL_LOADS.get(model_name, {}).get(traffic)
    out = [f(x) if f else x for x in LOADS[traffic]]
    out = [int(x) if x == int(x) else x for x in out]
    if not QUICK and model_name in MODEL_SKIP:
        if traffic in MODEL_SKIP[model_name]:
            return []
        if "replay" in traffic:
            out = out[1:]
    return out


def traffics_for(model_name):
    return [t for t in LOADS if loads_for(model_name, t)]


def params_for(cfg, p):
    """Main-grid parameters of a configuration: MPS is run at the
    favourable end of its published range (at 0 it equals hybrid)."""
    if cfg.mode == "hybrid-mps":
        return model.with_params(p, mps_gain=PARAMS["mps_gain"].high)
    return p


DESIGNS = {32: "2^(6-1), F = ABCDE, resolution VI",
           16: "2^(6-2), E = ABC, F = BCD, resolution IV: main effects "
               "are not aliased with two-factor interactions",
           8: "2^(6-3), D = AB, E = AC, F = BC, resolution III"}


def design():
    """Coded levels (rows of -1/+1 for FACTORS) of a two-level fractional
    factorial (DESIGNS)."""
    if FACT_RUNS == 32:
        base = list(itertools.product((-1, 1), repeat=5))
        return [list(r) + [int(np.prod(r))] for r in base]
    if FACT_RUNS == 16:
        base = list(itertools.product((-1, 1), repeat=4))
        return [[a, b, c, d, a * b * c, b * c * d] for a, b, c, d in base]
    base = list(itertools.product((-1, 1), repeat=3))
    return [[a, b, c, a * b, a * c, b * c] for a, b, c in base]


def load_calibration():
    paths = os.environ.get("STUDY_CALIB", "")
    if not paths and os.path.exists(CALIB_DEFAULT):
        paths = CALIB_DEFAULT
    derived = []
    for path in [x for x in paths.split(",") if x]:
        doc = calib.load(path)
        if doc.get("synthetic"):
            raise calib.CalibError("%s is a synthetic example, not a "
                                   "measurement" % path)
        d = calib.derive(doc)
        d["path"] = path
        derived.append(d)
    return derived


CALIBRATION = load_calibration()
PARAMS = calib.apply(model.PARAMS, CALIBRATION) if CALIBRATION \
    else model.PARAMS
BASE = model.defaults(PARAMS)


def level(name, coded):
    """A parameter's value at coded level -1 / 0 / +1."""
    pr = PARAMS[name]
    if coded == 0:
        return pr.default
    return pr.low if coded < 0 else pr.high


# ---------------------------------------------------------------- tasks

def tasks():
    """(key, params, config, traffic, load, rep, model). Replication r
    uses seed SEED * 1000 + r for every configuration and load: common
    random numbers."""
    out = []
    for mname, cfgs in MODELS.items():
        for traffic in LOADS:
            for load in loads_for(mname, traffic):
                for cfg in cfgs:
                    p = params_for(cfg, BASE)
                    for r in range(REPS):
                        out.append((("main", mname, traffic, load,
                                     cfg.label, r, -1), p, cfg, traffic,
                                    load, r, mname))
    labels = {c.label: c for c in ALL_CONFIGS}
    for ci, (mname, traffic, load, hyb, one) in enumerate(FACT_CASES):
        for pi, row in enumerate(design()):
            p = dict(BASE)
            for f, x in zip(FACTORS, row):
                p[f] = level(f, x)
            for lab in (hyb, one):
                for r in range(FACT_REPS):
                    out.append((("fact", mname, traffic, load, lab, r, pi),
                                p, labels[lab], traffic, load, r, mname))
    return out


def cost_estimate(t):
    _, _, cfg, traffic, load, _, mname = t
    kind = model.TRAFFIC[traffic][1]
    calls = load * (5.0 if kind == "replay" else 3.0)
    return calls * (1.6 if cfg.mode.startswith("hybrid") else 1.0)


def run_task(t):
    key, p, cfg, traffic, load, rep, mname = t
    seed = SEED * 1000 + rep
    t0 = time.process_time()
    res = model.run_one(cfg, traffic, load, p, seed, mname)
    row = {"group": key[0], "model": mname, "traffic": traffic,
           "load": load, "config": cfg.label, "rep": rep, "point": key[6],
           "seed": seed, "fits": res is not None,
           "cpu_s": time.process_time() - t0}
    for m in METRICS:
        row[m] = "" if res is None else res[m]
    return key, row


METRICS = ["slo", "overloaded", "calls", "unfinished", "rejected",
           "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "gpu_busy",
           "tokens_per_s", "calls_per_s", "cv_calls", "cv_sessions",
           "cgap_n", "cgap_s1", "cgap_s2", "sgap_n", "sgap_s1", "sgap_s2",
           "gpu_eq"]


# ----------------------------------------------------------- statistics

def t95(n):
    """Two-sided 95 % Student t quantile for n - 1 degrees of freedom."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447,
             7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228, 12: 2.179,
             15: 2.131, 19: 2.093, 20: 2.086, 24: 2.064, 30: 2.042,
             40: 2.021, 60: 2.000, 120: 1.980}
    df = n - 1
    if df < 1:
        return float("nan")
    best = min((k for k in table if k >= df), default=None)
    return table[best] if best is not None else 1.96


def ci(values):
    """(mean, 95 % half-width) over replications."""
    v = np.asarray(values, float)
    if len(v) == 0:
        return float("nan"), float("nan")
    if len(v) < 2:
        return float(v.mean()), float("nan")
    return float(v.mean()), float(t95(len(v)) * v.std(ddof=1) /
                                  np.sqrt(len(v)))


class Results:
    """The rows of the main grid and the factorial, indexed."""

    def __init__(self, rows):
        self.rows = rows
        self.main = {}
        self.fact = {}
        for r in rows:
            if r["group"] == "main":
                k = (r["model"], r["traffic"], r["load"], r["config"])
                self.main.setdefault(k, {})[r["rep"]] = r
            else:
                k = (r["model"], r["traffic"], r["load"], r["config"],
                     r["point"])
                self.fact.setdefault(k, {})[r["rep"]] = r

    def cell(self, mname, traffic, load, label):
        """{rep: row} or None when the configuration does not fit (or was
        not run)."""
        c = self.main.get((mname, traffic, load, label))
        if not c or not next(iter(c.values()))["fits"]:
            return None
        return c

    def summary(self, mname, traffic, load, label, metric):
        c = self.cell(mname, traffic, load, label)
        if c is None:
            return None
        return ci([c[r][metric] for r in sorted(c)])

    def overloaded(self, mname, traffic, load, label):
        c = self.cell(mname, traffic, load, label)
        return None if c is None else sum(1 for r in c.values()
                                          if r["overloaded"])

    def paired(self, mname, traffic, load, a, b, metric="slo"):
        """Mean and CI of a - b over the replications both ran."""
        ca = self.cell(mname, traffic, load, a)
        cb = self.cell(mname, traffic, load, b)
        if ca is None or cb is None:
            return None
        reps = sorted(set(ca) & set(cb))
        return ci([ca[r][metric] - cb[r][metric] for r in reps])


def verdict(d, a, b):
    """Words for a paired difference a - b with its CI."""
    if d is None:
        return "n/a"
    m, h = d
    if np.isnan(h) or abs(m) <= h:
        return "within noise"
    return "%s higher" % (a if m > 0 else b)


def configs_of(mname, mergeable):
    return [c for c in MODELS[mname] if mergeable or not c.merges]


def cheapest(res, mname, traffic, load, goal, mergeable=True):
    """The configurations of the least cost whose mean SLO attainment over
    the replications meets the goal, best first (ties in cost broken by
    the paired difference in attainment), with the decision's standing:
    'clear' when the chosen one's CI lies above the goal and every cheaper
    one's below it, else 'within noise'. (None, ...) when none meets it."""
    ok, cheaper = [], []
    for cfg in configs_of(mname, mergeable):
        s = res.summary(mname, traffic, load, cfg.label, "slo")
        if s is None:
            continue
        if s[0] >= goal:
            ok.append((round(cfg.gpu_equivalent(), 6), -s[0], cfg.label, s))
        else:
            cheaper.append((round(cfg.gpu_equivalent(), 6), cfg.label, s))
    if not ok:
        return None, [], [], "none meets"
    ok.sort()
    cost0 = ok[0][0]
    best = [x for x in ok if x[0] == cost0]
    label, s = best[0][2], best[0][3]
    clear = not np.isnan(s[1]) and s[0] - s[1] >= goal
    for c, lab, s2 in cheaper:
        if c <= cost0 and (np.isnan(s2[1]) or s2[0] + s2[1] >= goal):
            clear = False
    tied, also = [], []
    for x in best[1:]:
        d = res.paired(mname, traffic, load, label, x[2])
        if d is not None and (np.isnan(d[1]) or abs(d[0]) <= d[1]):
            tied.append(x[2])
        else:
            also.append(x[2])
    return label, tied, also, "clear" if clear and not tied \
        else "within noise"


def per_rep_choice(res, mname, traffic, load, goal, mergeable=True):
    """{label: replications in which it is the cheapest configuration
    meeting the goal} (ties in cost: the higher attainment)."""
    counts = {}
    cfgs = configs_of(mname, mergeable)
    for r in range(REPS):
        best = None
        for cfg in cfgs:
            c = res.cell(mname, traffic, load, cfg.label)
            if c is None or r not in c or c[r]["slo"] < goal:
                continue
            key = (round(cfg.gpu_equivalent(), 6), -c[r]["slo"], cfg.label)
            if best is None or key < best:
                best = key
        lab = best[2] if best else "none"
        counts[lab] = counts.get(lab, 0) + 1
    return counts


def max_load(res, mname, traffic, label, goal):
    """Highest load of the grid up to which the mean attainment meets the
    goal (0: not even the lowest; None: does not fit)."""
    best = 0
    for load in loads_for(mname, traffic):
        s = res.summary(mname, traffic, load, label, "slo")
        if s is None:
            return None
        if s[0] < goal:
            break
        best = load
    return best


# ------------------------------------------------------------ factorial

def factorial(res):
    """Per case: the design's rows with each point's mean SLO of both
    configurations and their paired difference, the main effects on the
    difference (with 95 % CIs from the replications), and for each factor
    the value at which the fitted difference crosses zero when the others
    stay at their defaults (the flip point), if inside the range."""
    out = []
    rows = design()
    for mname, traffic, load, hyb, one in FACT_CASES:
        pts = []
        for pi, row in enumerate(rows):
            a = res.fact.get((mname, traffic, load, hyb, pi), {})
            b = res.fact.get((mname, traffic, load, one, pi), {})
            reps = sorted(set(a) & set(b))
            fits = bool(reps) and a[reps[0]]["fits"] and b[reps[0]]["fits"]
            if not fits:
                pts.append({"row": row, "fits": False})
                continue
            d = [a[r]["slo"] - b[r]["slo"] for r in reps]
            pts.append({"row": row, "fits": True,
                        "hyb": float(np.mean([a[r]["slo"] for r in reps])),
                        "one": float(np.mean([b[r]["slo"] for r in reps])),
                        "diff": float(np.mean(d)), "diffs": d})
        ok = [p for p in pts if p["fits"]]
        effects = {}
        for fi, f in enumerate(FACTORS):
            hi = [x for p in ok if p["row"][fi] > 0 for x in p["diffs"]]
            lo = [x for p in ok if p["row"][fi] < 0 for x in p["diffs"]]
            if hi and lo:
                m = float(np.mean(hi) - np.mean(lo))
                se = float(np.sqrt(np.var(hi, ddof=1) / len(hi) +
                                   np.var(lo, ddof=1) / len(lo))) \
                    if len(hi) > 1 and len(lo) > 1 else float("nan")
                effects[f] = (m, 1.96 * se)
        center = res.paired(mname, traffic, load, hyb, one)
        flips = {}
        for f, (m, h) in effects.items():
            if center is None or m == 0:
                continue
            c = -center[0] / (m / 2.0)      # coded units from the default
            lo, hi = PARAMS[f].low, PARAMS[f].high
            d0 = PARAMS[f].default
            val = d0 + c * ((hi - d0) if c > 0 else (d0 - lo))
            flips[f] = (c, val, abs(c) <= 1.0)
        win = {"hybrid": 0, "one": 0, "both": 0, "neither": 0, "nofit": 0}
        g = BASE["slo_goal"]
        for p in pts:
            if not p["fits"]:
                win["nofit"] += 1
            elif p["hyb"] >= g and p["one"] >= g:
                win["both"] += 1
            elif p["hyb"] >= g:
                win["hybrid"] += 1
            elif p["one"] >= g:
                win["one"] += 1
            else:
                win["neither"] += 1
        out.append({"case": (mname, traffic, load, hyb, one), "points": pts,
                    "effects": effects, "center": center, "flips": flips,
                    "wins": win})
    return out


# ---------------------------------------------------------------- plots

COLOURS = {"exclusive": "k", "mig-1g": "C0", "one-1g": "C2", "one-2g": "C2",
           "one-3g": "C2", "hybrid-1g": "C3", "hybrid-2g": "C3",
           "hybrid-3g": "C3", "hybrid-mps-1g": "C1", "hybrid-mps-2g": "C1"}
STYLES = {"1g": "-", "2g": "--", "3g": ":", "full": "-"}


def plot_slo(res, path):
    fig, axes = plt.subplots(len(MODELS), len(LOADS),
                             figsize=(4.2 * len(LOADS), 3.4 * len(MODELS)),
                             squeeze=False)
    for i, mname in enumerate(MODELS):
        for j, traffic in enumerate(LOADS):
            ax = axes[i][j]
            loads = loads_for(mname, traffic)
            if not loads:
                ax.set_axis_off()
                ax.set_title("%s model, %s: not run" % (mname, traffic),
                             fontsize=9)
                continue
            for cfg in MODELS[mname]:
                xs, ys, es = [], [], []
                for load in loads:
                    s = res.summary(mname, traffic, load, cfg.label, "slo")
                    if s is None:
                        continue
                    xs.append(load)
                    ys.append(s[0])
                    es.append(0.0 if np.isnan(s[1]) else s[1])
                if xs:
                    ax.errorbar(xs, ys, yerr=es, color=COLOURS[cfg.label],
                                linestyle=STYLES[cfg.profile], marker="o",
                                ms=3, capsize=2, label=cfg.label)
            ax.axhline(BASE["slo_goal"], color="grey", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title("%s model, %s" % (mname, traffic), fontsize=9)
            ax.set_xlabel("share of the service" if "replay" in traffic
                          else "agent sessions per minute", fontsize=8)
            ax.set_ylabel("share of calls meeting the SLO", fontsize=8)
            ax.grid(True, alpha=0.3)
        axes[i][0].legend(fontsize=6, ncol=2)
    fig.suptitle("SLO attainment against load (k = %d pods; bars: 95 %% CI "
                 "over %d replications)" % (K, REPS), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=85)
    plt.close(fig)


def plot_factorial(fact, path):
    fig, axes = plt.subplots(1, len(fact), figsize=(4.5 * len(fact), 3.4),
                             squeeze=False)
    for ax, case in zip(axes[0], fact):
        names = [f for f in FACTORS if f in case["effects"]]
        m = [case["effects"][f][0] for f in names]
        h = [case["effects"][f][1] for f in names]
        ax.barh(range(len(names)), m, xerr=np.nan_to_num(h), color="C0")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=8)
        ax.axvline(0, color="k", lw=0.8)
        mname, traffic, load, hyb, one = case["case"]
        ax.set_title("%s, %s %s:\neffect on SLO(%s) - SLO(%s)"
                     % (mname, traffic, load, hyb, one), fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=85)
    plt.close(fig)


# ---------------------------------------------------------------- report

def fmt(s, digits=3):
    if s is None:
        return "does not fit"
    m, h = s
    if np.isnan(h):
        return "%.*f" % (digits, m)
    return "%.*f ± %.*f" % (digits, m, digits, h)


def fmt_lat(s):
    if s is None:
        return "-"
    m = s[0]
    if not np.isfinite(m):
        return "unfinished"
    return "%.2f" % m


ISOLATION = [
    ("exclusive", "full: its own GPU", "full",
     "nothing (another GPU)"),
    ("mig-1g", "hardware: each pod's MIG device has its own memory slices, "
     "L2 and memory bandwidth, and its SMs (MIG User Guide)",
     "hardware: a fault stays in its GPU instance, except errors that need "
     "a whole-GPU reset (MIG User Guide)",
     "nothing inside the GPU beyond shared PCIe/NVLink, power and heat"),
    ("one-Ng", "from other tenants: MIG. Between the tenant's pods: none: "
     "one process and one KV cache for all of them",
     "from other tenants: MIG. Between the pods: none: a crash or an "
     "out-of-memory error stops all k pods' serving",
     "a pod's burst takes batch slots and KV cache from the others (no "
     "per-pod limit unless the server enforces one)"),
    ("hybrid-Ng", "from other tenants: MIG. Between the pods: separate "
     "processes and address spaces, no memory limit; NVIDIA: 'no memory "
     "or fault-isolation between replicas' (GPU Operator, time-slicing)",
     "from other tenants: MIG. Between the pods: none promised (same "
     "source)",
     "can allocate the partition's memory until the others fail to "
     "allocate; takes time slices (long kernels delay the others)"),
    ("hybrid-mps-Ng", "from other tenants: MIG. Between the pods: separate "
     "address spaces (Volta MPS); a per-client memory limit can be set "
     "(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) (MPS documentation)",
     "none: a fatal GPU fault in one client is raised in every client of "
     "the MPS server (MPS documentation, error containment)",
     "an SM share can be capped (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); "
     "memory bandwidth and L2 are shared; DRA driver gate MPSSupport "
     "(alpha, off)"),
]


ISOLATION_SHORT = {
    "exclusive": "yes: separate GPUs",
    "mig": "yes: hardware (memory, bandwidth, faults)",
    "one": "no: one process",
    "hybrid": "no: separate processes, no memory limit, no fault "
              "isolation",
    "hybrid-mps": "partly: memory limit settable; a fatal fault reaches "
                  "all",
}


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def pooled_cv(res, mname, traffic, metric):
    """Per-run values of a metric (one-1g's runs, else mig-1g's: the
    arrivals are the same in every configuration's runs but for agents'
    answer times)."""
    vals = []
    for load in loads_for(mname, traffic):
        c = res.cell(mname, traffic, load, "one-1g") or \
            res.cell(mname, traffic, load, "mig-1g")
        if c:
            vals.extend(r[metric] for r in c.values()
                        if r[metric] != "" and np.isfinite(r[metric]))
    return vals


def pooled_gap_cv(res, mname, traffic, prefix):
    """Per load, the CV of all the replications' gaps together (from
    their sums): 'load: cv, ...'."""
    out = []
    for load in loads_for(mname, traffic):
        c = res.cell(mname, traffic, load, "one-1g") or \
            res.cell(mname, traffic, load, "mig-1g")
        n = s1 = s2 = 0.0
        for r in (c or {}).values():
            n += r[prefix + "_n"]
            s1 += r[prefix + "_s1"]
            s2 += r[prefix + "_s2"]
        if n >= 2 and s1 > 0:
            m = s1 / n
            out.append("%g: %.2f" % (load, np.sqrt(max(s2 / n - m * m,
                                                       0.0)) / m))
    return ", ".join(out) or "-"


def report(res, fact, wall, started, cpu):
    p = BASE
    goal = p["slo_goal"]
    L = []
    w = L.append
    w("# Sharing-mode study: one pod, hybrid, MPS, MIG and exclusive for "
      "LLM serving\n")
    w("Generated by `make study` on %s UTC (%s mode). Run time: **%.0f s** "
      "wall clock (%.0f CPU-s in the runs) with %d worker processes on this "
      "machine (%s, %d CPUs; load average %.1f when the run ended: the "
      "machine may have been shared, so the time is an upper bound). %d "
      "runs.\n" % (started, "quick" if QUICK else "full", wall, cpu, JOBS,
                   platform.machine(), os.cpu_count() or 0,
                   os.getloadavg()[0], len(res.rows)))
    w("## Question\n")
    w("A tenant runs k = %d pods that make LLM calls. Which placement "
      "meets the SLO (time to first token <= %.0f s and mean time per "
      "output token <= %.2f s for %.0f %% of calls) at the least cost: a "
      "whole GPU per pod (exclusive), a 1g MIG device per pod (mig-1g), "
      "one serving pod on one MIG device for all the tenant's calls "
      "(one-1g/2g/3g; only when the pods serve the same model), the k "
      "pods time-sharing one MIG device (hybrid-1g/2g/3g), or the same "
      "under MPS (hybrid-mps)? Costs are GPU-equivalents held (compute "
      "sevenths, as kpgpud bills: 1g = 1/7).\n"
      % (K, p["ttft_slo"], p["tpot_slo"], 100 * goal))
    L.extend(answer_section(res, fact, goal))
    L.extend(flip_section(fact))
    L.extend(config_section(res))
    L.extend(results_section(res, goal))
    L.extend(paired_section(res))
    L.extend(factorial_section(fact))
    L.extend(traffic_section(res))
    L.extend(params_section())
    L.extend(calibration_section())
    L.extend(method_section())
    L.extend(limits_section())
    return "\n".join(L) + "\n"


def decision_table(res, goal, mergeable):
    L = ["| model | traffic | " + " | ".join(
        "load %d" % (i + 1) for i in range(max(len(v) for v in
                                               LOADS.values()))) + " |",
         "|---|---|" + "---|" * max(len(v) for v in LOADS.values())]
    stand = {"clear": 0, "within noise": 0, "none meets": 0}
    width = max(len(v) for v in LOADS.values())
    for mname in MODELS:
        for traffic in traffics_for(mname):
            cells = []
            for load in loads_for(mname, traffic):
                lab, tied, also, st = cheapest(res, mname, traffic, load,
                                               goal, mergeable)
                stand[st] += 1
                reps = per_rep_choice(res, mname, traffic, load, goal,
                                      mergeable)
                top = max(reps.items(), key=lambda kv: kv[1])
                cell = "%s: **%s**%s" % (load, lab or "none",
                                         (" = " + " = ".join(tied))
                                         if tied else "")
                if also:
                    cell += "; also meeting it at this cost, lower: " + \
                        ", ".join(also)
                cell += " (%s; per replication: %s %d/%d)" % (
                    st, top[0], top[1], REPS)
                cells.append(cell)
            cells += [""] * (width - len(cells))
            L.append("| %s | %s | %s |" % (mname, traffic,
                                           " | ".join(cells)))
    L.append("")
    L.append("Decisions: %d clear (the chosen configuration's 95 %% CI "
             "above the goal, every cheaper one's below it, no tie within "
             "noise), %d within noise, %d where nothing studied meets the "
             "goal." % (stand["clear"], stand["within noise"],
                        stand["none meets"]))
    L.append("")
    return L


def answer_section(res, fact, goal):
    L = ["## Answer\n"]
    L.append("Cheapest configuration meeting the SLO for %.0f %% of calls "
             "(mean over %d replications), per model, traffic and load "
             "(replay: the tenant's share of the Azure service's traffic; "
             "agents: sessions per minute). Among configurations of the "
             "same cost the one with the highest attainment is named; '=' "
             "joins those within noise of it, 'also' those that meet the "
             "goal at that cost with a lower attainment. 'Per "
             "replication': the configuration most often the cheapest "
             "meeting the goal within one replication. **Pods that serve "
             "one model (mergeable):**\n" % (100 * goal, REPS))
    L.extend(decision_table(res, goal, True))
    L.append("**Pods that serve different models (cannot be merged into "
             "one server):**\n")
    L.extend(decision_table(res, goal, False))
    L.append("The same with the goal at %.0f %% of calls (mergeable):\n"
             % (100 * GOALS[1]))
    L.extend(decision_table(res, GOALS[1], True))
    L.append("Paired comparisons over every model, traffic and load "
             "(SLO attainment, same calls; details in 'Paired "
             "differences'):\n")
    L.append("| A | B | A higher | B higher | within noise | both serve "
             "every call in time |")
    L.append("|---|---|---|---|---|---|")
    for a, b in PAIRS:
        n = {"a": 0, "b": 0, "noise": 0, "same": 0}
        for mname in MODELS:
            for traffic in traffics_for(mname):
                for load in loads_for(mname, traffic):
                    d = res.paired(mname, traffic, load, a, b)
                    if d is None:
                        continue
                    v = verdict(d, a, b)
                    if v == "within noise":
                        n["same" if abs(d[0]) < 1e-12 and
                          res.summary(mname, traffic, load, a,
                                      "slo")[0] >= 1.0 else "noise"] += 1
                    else:
                        n["a" if v.startswith(a + " ") else "b"] += 1
        if sum(n.values()):
            L.append("| %s | %s | %d | %d | %d | %d |"
                     % (a, b, n["a"], n["b"], n["noise"], n["same"]))
    L.append("")
    L.append("![SLO against load](slo_vs_load.png)\n")
    return L


def flip_section(fact):
    L = ["## Where the answer flips\n"]
    L.append("A two-level fractional factorial (%d points, %d replications "
             "each; factors: %s, each at the ends of its range in the "
             "parameter table) compares the hybrid and one-pod "
             "configurations of one partition at one load per case. "
             "Response: the paired difference in SLO attainment, hybrid "
             "minus one pod. The flip point is where the fitted difference "
             "crosses zero along one factor with the others at their "
             "defaults (linear in the factor's coded level; 'outside' when "
             "the crossing lies beyond the range walked).\n"
             % (FACT_RUNS, FACT_REPS, ", ".join(FACTORS)))
    for case in fact:
        mname, traffic, load, hyb, one = case["case"]
        c = case["center"]
        wn = case["wins"]
        L.append("- **%s model, %s, load %s, %s vs %s**: at the defaults "
                 "%s - %s = %s (%s). Over the design: only hybrid meets "
                 "the goal at %d points, only one pod at %d, both at %d, "
                 "neither at %d, hybrid does not fit at %d."
                 % (mname, traffic, load, hyb, one, hyb, one, fmt(c),
                    verdict(c, hyb, one), wn["hybrid"], wn["one"],
                    wn["both"], wn["neither"], wn["nofit"]))
        parts = []
        for f in FACTORS:
            if f not in case["flips"]:
                continue
            cc, val, inside = case["flips"][f]
            e = case["effects"][f]
            parts.append("%s (effect %+.3f ± %.3f): %s" % (
                f, e[0], e[1], ("flips at %.3g" % val) if inside
                else "outside the range"))
        if parts:
            L.append("  Flip points: " + "; ".join(parts) + ".")
    L.append("")
    return L


def config_section(res):
    L = ["## Configurations, cost and isolation\n"]
    L.append("| configuration | partitions x profile | servers on each | "
             "GPU-eq held | tenants per GPU | fits 0.5B | fits 1.5B | "
             "fits 7B | pods isolated from each other |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for cfg in ALL_CONFIGS:
        n, per = cfg.layout()
        L.append("| %s | %d x %s | %d | %.3f | %.2f | %s | %s | %s | %s |"
                 % (cfg.label, n, hw.PROFILES[cfg.profile].name, per,
                    cfg.gpu_equivalent(), cfg.tenants_per_gpu(),
                    *("yes" if cfg.fits(hw.MODELS[m], BASE) else "no"
                      for m in ("0.5B", "1.5B", "7B")),
                    ISOLATION_SHORT[cfg.mode]))
    L.append("")
    L.append("hybrid-mps-Ng runs at mps_gain = %+.2f, the favourable end "
             "of the published range: at 0 the model has nothing that "
             "tells it from hybrid-Ng (both are servers sharing one "
             "partition), so the runs would be identical.\n"
             % PARAMS["mps_gain"].high)
    L.append("Fits: every server's weights, runtime reserve (%.1f GiB) and "
             "a KV cache holding one %d-token sequence within its share of "
             "%.0f %% of the device's memory.\n"
             % (BASE["proc_reserve_gib"], hw.MODELS["1.5B"].max_len,
                100 * BASE["gpu_mem_util"]))
    L.append("Isolation (from NVIDIA's documentation; the tenant's "
             "partition is always a MIG device or GPU of its own, so other "
             "tenants are isolated by MIG in every configuration but "
             "exclusive, which is a whole GPU):\n")
    L.append("| configuration | memory isolation | fault isolation | what a "
             "misbehaving neighbour pod can do |")
    L.append("|---|---|---|---|")
    for row in ISOLATION:
        L.append("| %s | %s | %s | %s |" % row)
    L.append("")
    return L


def results_section(res, goal):
    L = ["## Results (means ± 95 %% CI over %d replications)\n" % REPS]
    L.append("Overloaded: runs (of %d) in which a call waited over %.0f s "
             "to be admitted (the run was then stopped and every call not "
             "served counted as a miss) or that left calls unfinished %.0f "
             "s after the window; they stay in the means.\n"
             % (REPS, model.OVERLOAD_WAIT, model.DRAIN))
    for mname in MODELS:
        for traffic in traffics_for(mname):
            L.append("### %s model, %s\n" % (mname, traffic))
            L.append("| config | load | SLO met | overloaded | p99 TTFT s | "
                     "p99 TPOT s | GPU busy | calls/s |")
            L.append("|---|---|---|---|---|---|---|---|")
            for cfg in MODELS[mname]:
                for load in loads_for(mname, traffic):
                    s = res.summary(mname, traffic, load, cfg.label, "slo")
                    if s is None:
                        L.append("| %s | %s | does not fit ||||||"
                                 % (cfg.label, load))
                        continue
                    c = res.cell(mname, traffic, load, cfg.label)
                    med = lambda m: float(np.median([r[m] for r in  # noqa
                                                     c.values()]))
                    L.append("| %s | %s | %s | %d | %s | %s | %.2f | %.2f |"
                             % (cfg.label, load, fmt(s),
                                res.overloaded(mname, traffic, load,
                                               cfg.label),
                                fmt_lat((med("ttft_p99"), 0)),
                                fmt_lat((med("tpot_p99"), 0)),
                                med("gpu_busy"), med("calls_per_s")))
            L.append("")
    L.append("p99 TTFT and TPOT, GPU busy (share of time the partition's "
             "GPU works) and calls/s: medians over the replications.\n")
    return L


PAIRS = [("hybrid-1g", "one-1g"), ("hybrid-2g", "one-2g"),
         ("hybrid-3g", "one-3g"), ("hybrid-mps-1g", "hybrid-1g"),
         ("hybrid-mps-2g", "hybrid-2g"), ("mig-1g", "one-3g"),
         ("hybrid-3g", "mig-1g"), ("hybrid-2g", "mig-1g"),
         ("one-1g", "mig-1g")]


def paired_section(res):
    L = ["## Paired differences\n"]
    L.append("SLO attainment of A minus B over the same replications (both "
             "configurations see the same calls), mean ± 95 % CI; "
             "'within noise' when the CI holds zero. Same cost: hybrid-Ng "
             "and one-Ng; mig-1g, one-3g and hybrid-3g (3/7).\n")
    L.append("| model | traffic | load | A | B | A - B | verdict |")
    L.append("|---|---|---|---|---|---|---|")
    n = {"within noise": 0, "decided": 0}
    for mname in MODELS:
        for traffic in traffics_for(mname):
            for load in loads_for(mname, traffic):
                for a, b in PAIRS:
                    d = res.paired(mname, traffic, load, a, b)
                    if d is None:
                        continue
                    v = verdict(d, a, b)
                    n["within noise" if v == "within noise" else
                      "decided"] += 1
                    if v == "within noise" and abs(d[0]) < 1e-12:
                        continue            # identical: both at 1.0
                    L.append("| %s | %s | %s | %s | %s | %s | %s |"
                             % (mname, traffic, load, a, b, fmt(d, 4), v))
    L.append("")
    L.append("%d comparisons decided, %d within noise (rows where both "
             "configurations served every call within the SLO in every "
             "replication are left out).\n"
             % (n["decided"], n["within noise"]))
    return L


def factorial_section(fact):
    L = ["## Sensitivity: the factorial design\n"]
    L.append("Coded levels: -1 = low, +1 = high end of each factor's range "
             "(parameter table). Design: %s.\n" % DESIGNS[FACT_RUNS])
    for case in fact:
        mname, traffic, load, hyb, one = case["case"]
        L.append("### %s model, %s, load %s: %s vs %s\n"
                 % (mname, traffic, load, hyb, one))
        L.append("| " + " | ".join(FACTORS) + " | SLO %s | SLO %s | "
                 "difference |" % (hyb, one))
        L.append("|" + "---|" * (len(FACTORS) + 3))
        for pt in case["points"]:
            lv = " | ".join("%+d" % x for x in pt["row"])
            if not pt["fits"]:
                L.append("| %s | does not fit |||" % lv)
            else:
                L.append("| %s | %.3f | %.3f | %+.3f |"
                         % (lv, pt["hyb"], pt["one"], pt["diff"]))
        L.append("")
    L.append("![factorial effects](factorial.png)\n")
    return L


def traffic_section(res):
    L = ["## Traffic as simulated\n"]
    L.append("Coefficient of variation of the gaps between a tenant's "
             "calls (and, for agents, between session starts): the median "
             "of the runs' own values, and all %d replications' gaps "
             "pooled, per load:\n" % REPS)
    L.append("| model | traffic | call-gap CV, median of runs | pooled "
             "over replications, per load | session-gap CV, median of runs "
             "| pooled, per load | target |")
    L.append("|---|---|---|---|---|---|---|")
    mname = "1.5B"
    for traffic in LOADS:
        cv = pooled_cv(res, mname, traffic, "cv_calls")
        sv = pooled_cv(res, mname, traffic, "cv_sessions")
        tgt = model.TRAFFIC[traffic][2]
        L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            mname, traffic, "%.2f" % np.median(cv) if cv else "-",
            pooled_gap_cv(res, mname, traffic, "cgap"),
            "%.2f" % np.median(sv) if sv else "-",
            pooled_gap_cv(res, mname, traffic, "sgap") if sv
            else "-", "%.2f" % tgt if tgt else "-"))
    L.append("")
    L.append("Session starts are a Gamma renewal process with the target "
             "CV and nothing rescaled (the generator's CV is checked to "
             "within 5 %% over 2 million draws in study/tests). A run's "
             "window holds tens of sessions; a sample of that size from a "
             "Gamma of CV 8 (shape 1/64) shows a lower CV than its "
             "distribution has, because the rare huge gaps that make it "
             "are seldom drawn; pooling the %d replications' gaps comes "
             "closer. Agent calls come in sessions of ~31 calls, so their "
             "gaps are burstier than a Poisson stream even at session CV "
             "1.4.\n" % REPS)
    return L


def params_section():
    p = BASE
    L = ["## Parameters and sources\n"]
    L.append("| parameter | value | range walked | status | source |")
    L.append("|---|---|---|---|---|")
    for name, pr in PARAMS.items():
        rng = "-" if pr.low is None else "%g .. %g" % (pr.low, pr.high)
        L.append("| %s | %g | %s | %s | %s |" % (name, pr.default, rng,
                                                 pr.status, pr.source))
    L.append("")
    L.append("MIG profiles (H100 SXM5 80GB: `nvidia-smi mig -lgip`, MIG "
             "User Guide) and what the model gives each (hardware-"
             "proportional capacity: compute by SMs, bandwidth by memory "
             "slices; nothing taken from single-job speed-ups):\n")
    L.append("| profile | SMs | memory slices | memory GiB | per GPU | "
             "BF16 TFLOP/s | bandwidth TB/s |")
    L.append("|---|---|---|---|---|---|---|")
    for name, pr in hw.PROFILES.items():
        L.append("| %s | %d | %d/8 | %.2f | %d | %.0f | %.2f |" % (
            pr.name, pr.sms, pr.mem_slices, pr.mem_gib, pr.per_gpu,
            p["gpu_flops"] * pr.sms / hw.GPU_SMS / 1e12,
            p["gpu_bw"] * pr.mem_slices / 8 / 1e12))
    one = hw.PROFILES["1g"]
    L.append("")
    L.append("Seven 1g devices against the whole GPU: %d of %d SMs, %d/8 "
             "of the bandwidth, %.1f of %.1f GiB: **7 x 1g <= one whole "
             "GPU** in every resource.\n" % (
                 7 * one.sms, hw.GPU_SMS, 7 * one.mem_slices,
                 7 * one.mem_gib, hw.PROFILES["full"].mem_gib))
    L.append("Models (BF16; architectures of the Qwen2.5 family, "
             "arXiv:2412.15115) and their token rates per profile from "
             "the step model (decode of one 1,000-token sequence; the "
             "largest batch of 1,000-token sequences the KV cache holds, "
             "at most %d; prefill in %d-token chunks):\n"
             % (p["max_seqs"], p["chunk"]))
    L.append("| model | weights GB | KV KiB/token | profile | decode 1 seq "
             "tok/s | batch | decode batched tok/s | compute ceiling tok/s "
             "| prefill tok/s |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for mname in ("0.5B", "1.5B", "7B"):
        m = hw.MODELS[mname]
        for name, prof, single, bmax, batched, prefill, ceil in \
                hw.capacity_table(p, m):
            if not hw.fits(m, name, 1, p):
                L.append("| %s | %.2f | %.0f | %s | does not fit |||||"
                         % (mname, m.weight_bytes / 1e9, m.kv_bytes / 1024,
                            name))
                continue
            L.append("| %s | %.2f | %.0f | %s | %.0f | %d | %.0f | %.0f | "
                     "%.0f |" % (mname, m.weight_bytes / 1e9,
                                 m.kv_bytes / 1024, name, single, bmax,
                                 batched, ceil, prefill))
    L.append("")
    L.append("A server batches at most max_seqs = %d calls, so the batched "
             "column is a per-server figure: seven 1g servers together "
             "batch seven times as many calls as one whole-GPU server. The "
             "hardware gives seven 1g devices less than the whole GPU: "
             "their compute ceilings add up to 112/132 of its ceiling and "
             "their memory-bound decode rates to 7/8 of its.\n"
             % p["max_seqs"])
    return L


def calibration_section():
    L = ["## Calibration\n"]
    if not CALIBRATION:
        assumed = [n for n, pr in PARAMS.items() if pr.status == "assumed"]
        L.append("No calibration file was given (study/calibrate/, "
                 "STUDY_CALIB), so these figures are **assumed**, not "
                 "measured: %s. `study/calibrate/measure.py` measures "
                 "mbu, mfu, host_ms and ts_gain (mps_gain under MPS) on a "
                 "GPU; see study/calibrate/README.md.\n"
                 % ", ".join(assumed))
        return L
    for d in CALIBRATION:
        L.append("- %s (%s, %s):" % (d["path"], d["device"], d["created"]))
        for note in d["notes"]:
            L.append("  - " + note)
        for r in d["sharing"]:
            L.append("  - %s, %d processes at batch %d: together %.2f x one "
                     "alone (u = %.2f); one process batching all their "
                     "calls: %.2f x the %d processes%s"
                     % (r["mode"], r["processes"], r["batch"],
                        r["shared_over_alone"], r["u"],
                        r["merged_over_shared"], r["processes"],
                        "" if r["saturated"] else " (unsaturated: gain "
                        "not identified)"))
    still = [n for n, pr in PARAMS.items() if pr.status == "assumed"]
    L.append("")
    L.append("Still assumed: %s.\n" % ", ".join(still))
    return L


def method_section():
    L = ["## Method\n"]
    L.append("- **Service.** Each pod runs a model server that batches its "
             "own calls continuously (Orca's iteration-level scheduling, "
             "vLLM's paged KV cache). A call is admitted when its KV cache "
             "(prompt + output tokens x the model's KV bytes per token) "
             "fits the server's budget and fewer than max_seqs calls are "
             "in; it is prefilled in chunks riding in the decode steps "
             "(Sarathi-Serve), then decodes a token per step. A step takes "
             "host_ms plus max(memory time, compute time): memory = "
             "(weights + the batch's KV cache) / (partition bandwidth x "
             "mbu), compute = (decoding sequences + prefill tokens) x 2 x "
             "parameters / (partition BF16 FLOP/s x mfu); prefill adds "
             "causal attention's FLOPs. So decode throughput rises with "
             "batch size until the step turns compute-bound or the KV "
             "cache is full.")
    L.append("- **Sharing within a partition.** Alone a server keeps its "
             "partition's GPU busy u = GPU time / step time. Servers on "
             "one partition (hybrid: time-slicing, CUDA's default between "
             "processes; hybrid-mps) each batch only their own calls; "
             "while two or more have work they share (1 + gain) GPU-"
             "seconds per second max-min fairly by their demands u; a "
             "server granted less than u runs proportionally slower. One "
             "server's host time is another's GPU time (that overlap is "
             "modelled); ts_gain / mps_gain is what the published figures "
             "add or take beyond it. Each server holds its own weights "
             "and runtime reserve, in 1/k of the partition's memory.")
    L.append("- **MIG.** A partition has its profile's SMs (compute) and "
             "memory slices (capacity and bandwidth): a whole GPU is worth "
             "at least the sum of its slices. Partitions of different "
             "tenants do not interact; one tenant is simulated.")
    L.append("- **Traffic.** Replay: the Azure LLM inference traces 2023 "
             "(conversation, code) on their own clock: a tenant with share "
             "s of a service gets each call with probability s (s > 1: "
             "several copies of the hour at random offsets, superposed); "
             "a replication looks at a %d s window (after %d s of warm-up) "
             "at its own random offset into the hour, the same offset at "
             "every load. Agents: sessions start as a Gamma renewal "
             "process (CV 1.41 or 8, nothing rescaled); a session has "
             "geometric turns (mean 3.95) of geometric calls (mean 7.83), "
             "exponential tool gaps between calls and think time between "
             "turns, tokens drawn from the code trace; its calls after "
             "the first prefill only the uncached %.1f %% of their prompt; "
             "each call waits for the previous one's answer. Sessions "
             "under way when the run starts begin mid-session (calls "
             "planned before 0 dropped); sessions starting in the %d s "
             "window are measured, all their calls followed to the end. "
             "Each call or session goes to one of the k pods at random."
             % (model.WINDOW, model.WARMUP["replay"],
                100 * (1 - BASE["cached"]), model.WINDOW))
    L.append("- **Common random numbers.** A replication's arrivals "
             "(calls, tokens, session structure, pods) come from its own "
             "seed whatever the configuration, so differences between "
             "configurations are paired. Seeds %d .. %d."
             % (SEED * 1000, SEED * 1000 + REPS - 1))
    L.append("- **SLO.** A call meets it when TTFT <= %.1f s and its mean "
             "time per output token after the first <= %.2f s; calls "
             "refused (longer than the KV cache), unfinished or never "
             "served because the run was stopped as overloaded are "
             "misses. A configuration meets the goal when the mean share "
             "over the replications does."
             % (BASE["ttft_slo"], BASE["tpot_slo"]))
    L.append("- **Statistics.** %d replications per point; 95 %% CIs are "
             "Student t over replications; differences are paired by "
             "replication. Decisions are reported with their standing "
             "(clear / within noise) and the per-replication choice."
             % REPS)
    L.append("- **Validation (study/tests).** M/M/1 and M/G/1 FCFS "
             "(Pollaczek-Khinchine) through prefill, M/M/1-PS and M/D/1-PS "
             "through compute-bound decode, M/G/infinity through "
             "memory-bound decode, each within 2 % over long runs; batching "
             "gain, KV admission, chunked prefill, host-time overlap and "
             "the sharing gain against hand-computed times; hybrid and one "
             "pod identical for k = 1 and apart when batching or memory "
             "tell them apart; the traces' hashes; the calibration "
             "parser.")
    L.append("- Every run: runs.csv; cell means and CIs: summary.csv; "
             "paired differences: paired.csv; factorial: factorial.csv; "
             "parameters: params.csv.\n")
    return L


def limits_section():
    return [
        "## Limits\n",
        "- Assumed, not measured (until study/calibrate has been run on "
        "a GPU): bandwidth and compute utilisation, host time per step, "
        "runtime memory per process, the chunk size, and both sharing "
        "gains; the factorial shows where each moves the answer.",
        "- The step model is a roofline with a constant host time; real "
        "servers overlap host and GPU work in part (CUDA graphs, "
        "asynchronous scheduling), which shrinks what time-slicing gains "
        "from overlapping them.",
        "- Time slices are modelled as a fluid share of the GPU; the "
        "latency a pod waits for its slice (about 2 ms, not settable on "
        "MIG devices) is not.",
        "- Decode reads each sequence's mean context (prompt + half its "
        "output); the KV cache reserves prompt + output at admission "
        "(vLLM allocates as it goes and preempts instead).",
        "- The traces are one hour of two services; replications look at "
        "different windows of that hour, so the CIs cover that hour's "
        "variation, not other days. Agent tokens come from the code "
        "trace; real coding agents often carry longer contexts.",
        "- Pods that cannot be merged are modelled as servers of models "
        "of the same size; one pod serving several models (multi-model "
        "or LoRA servers) is not modelled.",
        "- One tenant per run: MIG isolates tenants from each other, so "
        "none of the configurations studied shares a partition between "
        "tenants.\n",
    ]


# ------------------------------------------------------------------ main

def main():
    started = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M")
    t0 = time.monotonic()
    os.makedirs(OUT, exist_ok=True)
    ts = tasks()
    order = sorted(range(len(ts)), key=lambda i: -cost_estimate(ts[i]))
    print("study: %d runs, %d workers, %s mode%s" % (
        len(ts), JOBS, "quick" if QUICK else "full",
        ", calibrated" if CALIBRATION else ""), flush=True)
    rows = [None] * len(ts)
    if os.environ.get("STUDY_REPORT_ONLY"):    # redo the report from CSV
        rows = read_runs(os.path.join(OUT, "runs.csv"))
        ts, order = [], []
    with multiprocessing.Pool(JOBS) as pool:
        done = 0
        for i, (key, row) in zip(order, pool.imap(run_task,
                                                  [ts[i] for i in order],
                                                  chunksize=1)):
            rows[i] = row
            done += 1
            if done % 500 == 0:
                print("study: %d/%d runs, %.0f s" % (
                    done, len(ts), time.monotonic() - t0), flush=True)
    cpu = sum(r["cpu_s"] for r in rows)
    res = Results(rows)
    fact = factorial(res)
    fields = list(rows[0].keys())
    write_csv(os.path.join(OUT, "runs.csv"), rows, fields)
    write_summary(res)
    write_factorial(fact)
    plot_slo(res, os.path.join(OUT, "slo_vs_load.png"))
    plot_factorial(fact, os.path.join(OUT, "factorial.png"))
    with open(os.path.join(OUT, "params.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["parameter", "default", "low", "high", "status",
                     "source"])
        for name, pr in PARAMS.items():
            wr.writerow([name, pr.default, pr.low, pr.high, pr.status,
                         pr.source])
    wall = time.monotonic() - t0
    timing = os.path.join(OUT, "timing.csv")
    if ts:
        write_csv(timing, [{"started": started, "wall_s": wall,
                            "cpu_s": cpu, "jobs": JOBS}],
                  ["started", "wall_s", "cpu_s", "jobs"])
    elif os.path.exists(timing):                # report redone: the run's
        with open(timing) as f:
            t = next(csv.DictReader(f))
        started, wall = t["started"], float(t["wall_s"])
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(report(res, fact, wall, started, cpu))
    print("study: wrote %s in %.0f s (%.0f CPU-s in runs)"
          % (OUT, wall, cpu))


def read_runs(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            r["fits"] = r["fits"] == "True"
            r["rep"], r["point"] = int(r["rep"]), int(r["point"])
            r["load"] = float(r["load"])
            if r["load"] == int(r["load"]):
                r["load"] = int(r["load"])
            r["cpu_s"] = float(r["cpu_s"])
            for m in METRICS:
                if not r["fits"]:
                    continue
                r[m] = r[m] == "True" if m == "overloaded" else float(r[m])
            rows.append(r)
    return rows


def write_summary(res):
    srows = []
    for (mname, traffic, load, label), c in sorted(res.main.items(),
                                                   key=str):
        d = {"model": mname, "traffic": traffic, "load": load,
             "config": label, "reps": len(c)}
        fits = next(iter(c.values()))["fits"]
        for m in ("slo", "ttft_p99", "tpot_p99", "gpu_busy", "calls_per_s",
                  "cv_calls"):
            if fits:
                vals = [r[m] for r in c.values()]
                mean, half = ci(vals) if all(np.isfinite(vals)) else \
                    (float("inf"), float("nan"))
            else:
                mean = half = ""
            d[m], d[m + "_ci95"] = mean, half
        d["overloaded"] = "" if not fits else sum(
            1 for r in c.values() if r["overloaded"])
        srows.append(d)
    write_csv(os.path.join(OUT, "summary.csv"), srows, list(srows[0]))
    prow = []
    for mname in MODELS:
        for traffic in LOADS:
            for load in loads_for(mname, traffic):
                for a, b in PAIRS:
                    d = res.paired(mname, traffic, load, a, b)
                    if d is not None:
                        prow.append({"model": mname, "traffic": traffic,
                                     "load": load, "a": a, "b": b,
                                     "slo_diff": d[0], "ci95": d[1],
                                     "verdict": verdict(d, a, b)})
    if prow:
        write_csv(os.path.join(OUT, "paired.csv"), prow, list(prow[0]))


def write_factorial(fact):
    rows = []
    for case in fact:
        for pt in case["points"]:
            d = dict(zip(("model", "traffic", "load", "hybrid", "one"),
                         case["case"]))
            d.update(zip(FACTORS, pt["row"]))
            d.update({"fits": pt["fits"], "slo_hybrid": pt.get("hyb", ""),
                      "slo_one": pt.get("one", ""),
                      "difference": pt.get("diff", "")})
            rows.append(d)
    if rows:
        write_csv(os.path.join(OUT, "factorial.csv"), rows, list(rows[0]))


if __name__ == "__main__":
    main()
