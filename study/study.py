"""make study: runs every configuration of the sharing-mode study and writes
study/out/ (report.md, PNG plots, every run as CSV).

Environment: STUDY_QUICK=1 for a short run (fewer loads, replications and
calls; for development), STUDY_OUT=DIR (default study/out), STUDY_JOBS=N
worker processes (default 2), STUDY_SEED=N base seed (default 20).
"""

import csv
import datetime
import multiprocessing
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from sim import model  # noqa: E402

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

QUICK = os.environ.get("STUDY_QUICK", "") not in ("", "0")
OUT = os.environ.get("STUDY_OUT", os.path.join(HERE, "out"))
JOBS = int(os.environ.get("STUDY_JOBS", "2"))
SEED = int(os.environ.get("STUDY_SEED", "20"))

K = 3                                   # pods per tenant, main grid
if QUICK:
    LOADS = [0.1, 0.35, 0.7, 1.4]
    REPS = 2
    CALLS = {"replay": 800, "agent": 2000}
else:
    LOADS = [0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4]
    REPS = 3
    CALLS = {"replay": 1500, "agent": 4000}
MAIN = [model.Config("exclusive", "full", K)] + \
    [model.Config("mig", g, K) for g in ("1g", "2g", "3g")] + \
    [model.Config("hybrid", "1g", K), model.Config("hybrid-mps", "1g", K),
     model.Config("hybrid", "2g", K),
     model.Config("larger", "2g", K), model.Config("larger", "3g", K)]
# the decision map: hybrid on a partition vs one pod on the next size up
PAIRS = [("1g", "2g"), ("2g", "3g")]
MAP_K = [2, 3, 6]
GOAL_LOOSE = 0.95                       # a second, looser SLO goal
SENS_TRAFFIC = "agent-g1.4"
SENS_LOADS = [0.2, 0.5]
SENS_CONFIGS = (model.Config("hybrid", "1g", K),
                model.Config("hybrid-mps", "1g", K),
                model.Config("larger", "2g", K))


def affects(param, cfg):
    """Whether a parameter can change a configuration's results."""
    if param == "switch_loss":
        return cfg.mode == "hybrid"
    if param.startswith("mps_"):
        return cfg.mode == "hybrid-mps"
    return True
METRICS = ["calls", "ttft_p50", "ttft_p99", "comp_p50", "comp_p99", "slo",
           "util_busy", "util_work", "gpu_util", "tenants_per_gpu",
           "gpu_eq_s_per_1k", "tenants_simulated", "sim_seconds"]


def calls_for(traffic):
    return CALLS[model.TRAFFIC[traffic][1]]


def tasks():
    """(group, variant, params, config, traffic, load, rep) of every run;
    replication r uses seed SEED*1000 + r whatever the configuration, so
    configurations are compared on the same random streams."""
    base = model.defaults()
    out = []
    for traffic in model.TRAFFIC:
        for cfg in MAIN:
            for load in LOADS:
                for r in range(REPS):
                    out.append(("main", "default", base, cfg, traffic, load,
                                r))
        for k in MAP_K:
            if k == K:
                continue            # the main grid has these
            for small, big in PAIRS:
                for cfg in (model.Config("hybrid", small, k),
                            model.Config("larger", big, k)):
                    for load in LOADS:
                        for r in range(REPS):
                            out.append(("map", "default", base, cfg, traffic,
                                        load, r))
    for cfg in SENS_CONFIGS:
        for load in SENS_LOADS:
            for r in range(REPS):
                out.append(("sens", "default", base, cfg, SENS_TRAFFIC, load,
                            r))
    for name, (dflt, lo, hi, _) in model.PARAMS.items():
        if lo is None:
            continue
        for end, val in (("low", lo), ("high", hi)):
            if val == dflt:
                continue
            p = model.with_params(base, **{name: val})
            if name == "prefill_rate":          # throughput moves as one
                p["decode_rate"] = base["decode_rate"] * val / dflt
            if name == "decode_rate":
                continue
            for cfg in SENS_CONFIGS:
                if not affects(name, cfg):
                    continue
                for load in SENS_LOADS:
                    for r in range(REPS):
                        out.append(("sens", "%s=%s" % (name, val), p, cfg,
                                    SENS_TRAFFIC, load, r))
    return out


def run_task(t):
    group, variant, p, cfg, traffic, load, rep = t
    seed = SEED * 1000 + rep
    res = model.run_one(cfg, traffic, load, p, seed, calls_for(traffic))
    row = {"group": group, "variant": variant, "config": cfg.label,
           "mode": cfg.mode, "profile": cfg.profile, "k": cfg.k,
           "traffic": traffic, "load": load, "rep": rep, "seed": seed,
           "fits": res is not None}
    for m in METRICS:
        row[m] = "" if res is None else res[m]
    return row


def ci(values):
    """Mean and 95 % half-width (Student t) over replications."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()), float("nan")
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 8: 2.365,
         10: 2.262}.get(len(v), 2.0)
    return float(v.mean()), float(t * v.std(ddof=1) / np.sqrt(len(v)))


def summarise(rows):
    groups = {}
    for r in rows:
        key = (r["group"], r["variant"], r["config"], r["k"], r["traffic"],
               r["load"])
        groups.setdefault(key, []).append(r)
    summ = {}
    for key, rs in groups.items():
        if not rs[0]["fits"]:
            summ[key] = None
            continue
        summ[key] = {m: ci([r[m] for r in rs]) for m in METRICS}
    return summ


def get(summ, config, traffic, load, k=K, group=None, variant="default"):
    for g in ((group,) if group else ("main", "map")):
        key = (g, variant, config, k, traffic, load)
        if key in summ:
            return summ[key]
    return None


def meets(s, goal):
    return s is not None and s["slo"][0] >= goal


def cheapest(summ, traffic, load, goal):
    """The configuration of the main grid holding the fewest
    GPU-equivalents that meets the SLO goal (ties: lower p99 TTFT)."""
    ok = []
    for cfg in MAIN:
        s = get(summ, cfg.label, traffic, load)
        if meets(s, goal):
            ok.append((round(cfg.gpu_equivalent(), 6), s["ttft_p99"][0],
                       cfg.label))
    return min(ok)[2] if ok else None


def cheapest_table(summ, goal):
    """The report's lines of the cheapest configuration meeting GOAL, a
    row a load, a column a traffic."""
    lines = ["| load | " + " | ".join(model.TRAFFIC) + " |",
             "|---|" + "---|" * len(model.TRAFFIC)]
    for load in LOADS:
        lines.append("| %s | %s |" % (load, " | ".join(
            cheapest(summ, t, load, goal) or "none"
            for t in model.TRAFFIC)))
    return lines


def max_load(summ, config, traffic, goal, k=K):
    """The highest load of the grid up to which the configuration meets the
    SLO goal at every grid load (0 when not even the lowest)."""
    best = 0.0
    for load in LOADS:
        if not meets(get(summ, config, traffic, load, k), goal):
            break
        best = load
    return best


# ---------------------------------------------------------------- plots

STYLE = {"exclusive": ("k", "-"), "mig-1g": ("C0", "-"),
         "mig-2g": ("C0", "--"), "mig-3g": ("C0", ":"),
         "hybrid-1g": ("C3", "-"), "hybrid-mps-1g": ("C1", "-"),
         "hybrid-2g": ("C3", "--"), "larger-2g": ("C2", "-"),
         "larger-3g": ("C2", "--")}


def plot_latency(summ, path):
    fig, axes = plt.subplots(len(model.TRAFFIC), 2, figsize=(11, 13),
                             sharex=True)
    for i, traffic in enumerate(model.TRAFFIC):
        for j, (metric, title) in enumerate((("ttft_p99", "p99 TTFT (s)"),
                                             ("comp_p99",
                                              "p99 completion (s)"))):
            ax = axes[i][j]
            for cfg in MAIN:
                xs, ys, es = [], [], []
                for load in LOADS:
                    s = get(summ, cfg.label, traffic, load)
                    if s is None:
                        continue
                    xs.append(load)
                    ys.append(s[metric][0])
                    es.append(s[metric][1])
                if not xs:
                    continue
                c, ls = STYLE[cfg.label]
                es = np.nan_to_num(es)
                # a log axis cannot show a bar below zero: clip it
                lo = np.minimum(es, 0.9 * np.asarray(ys))
                ax.errorbar(xs, ys, yerr=[lo, es], color=c,
                            linestyle=ls, marker="o", ms=3, capsize=2,
                            label=cfg.label)
            ax.set_yscale("log")
            ax.set_title("%s: %s" % (traffic, title), fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            if i == len(model.TRAFFIC) - 1:
                ax.set_xlabel("tenant load (1g partition capacities)")
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.suptitle("Latency vs. load per mode (k = %d pods per tenant; "
                 "bars: 95 %% CI over %d replications)" % (K, REPS),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_utilisation(summ, path):
    fig, axes = plt.subplots(2, len(model.TRAFFIC), figsize=(14, 7),
                             sharex=True)
    for i, traffic in enumerate(model.TRAFFIC):
        for row, (metric, title, log) in enumerate((
                ("gpu_util", "GPU utilisation (busy share, packed GPU)",
                 False),
                ("gpu_eq_s_per_1k", "GPU-equivalent s per 1000 calls",
                 True))):
            ax = axes[row][i]
            for cfg in MAIN:
                xs, ys = [], []
                for load in LOADS:
                    s = get(summ, cfg.label, traffic, load)
                    if s is not None:
                        xs.append(load)
                        ys.append(s[metric][0])
                c, ls = STYLE[cfg.label]
                ax.plot(xs, ys, color=c, linestyle=ls, marker="o", ms=3,
                        label=cfg.label)
            if log:
                ax.set_yscale("log")
            ax.set_title("%s\n%s" % (traffic, title), fontsize=8)
            ax.grid(True, which="both", alpha=0.3)
            if row == 1:
                ax.set_xlabel("tenant load (1g capacities)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# outcome codes of a decision-map cell
NOFIT, NEITHER, BIGGER, HYBRID = 0, 1, 2, 3
OUTCOME = {NOFIT: "hybrid's models do not fit", NEITHER: "neither meets SLO",
           BIGGER: "only the larger partition meets SLO",
           HYBRID: "hybrid meets SLO (at lower cost)"}


def decision(summ, small, big, k, traffic, load, goal):
    h = get(summ, "hybrid-" + small, traffic, load, k)
    if h is None:
        return NOFIT
    if meets(h, goal):
        return HYBRID
    if meets(get(summ, "larger-" + big, traffic, load, k), goal):
        return BIGGER
    return NEITHER


def plot_decision(summ, goal, path):
    cmap = ListedColormap(["#bbbbbb", "#f4a6a6", "#9fd49f", "#6fa8dc"])
    fig, axes = plt.subplots(len(PAIRS), len(model.TRAFFIC),
                             figsize=(14, 6.5))
    for i, (small, big) in enumerate(PAIRS):
        for j, traffic in enumerate(model.TRAFFIC):
            ax = axes[i][j]
            grid = np.array([[decision(summ, small, big, k, traffic, load,
                                       goal) for load in LOADS]
                             for k in MAP_K])
            ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, aspect="auto",
                      origin="lower")
            ax.set_xticks(range(len(LOADS)))
            ax.set_xticklabels([str(x) for x in LOADS], fontsize=7)
            ax.set_yticks(range(len(MAP_K)))
            ax.set_yticklabels([str(k) for k in MAP_K], fontsize=7)
            ax.set_title("%s: hybrid-%s vs one pod on %s" % (traffic, small,
                                                             big),
                         fontsize=8)
            ax.set_xlabel("tenant load (1g capacities)", fontsize=7)
            ax.set_ylabel("pods per tenant k", fontsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(c)) for c in range(4)]
    fig.legend(handles, [OUTCOME[c] for c in range(4)], loc="lower center",
               ncol=4, fontsize=8)
    fig.suptitle("When does hybrid beat a bigger partition? (SLO met by "
                 ">= %.0f %% of calls; model %.1f GiB per pod)"
                 % (100 * goal, model.defaults()["model_gib"]), fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---------------------------------------------------------------- report

def fmt(s, m, digits=2):
    if s is None:
        return "n/a"
    mean, half = s[m]
    if np.isnan(half):
        return "%.*f" % (digits, mean)
    return "%.*f ± %.*f" % (digits, mean, digits, half)


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def report(rows, summ, wall, started):
    p = model.defaults()
    goal = p["slo_goal"]
    L = []
    w = L.append
    w("# Sharing-mode study: hybrid vs. MIG vs. exclusive under agent "
      "traffic\n")
    w("Generated by `make study` on %s UTC (%s mode). Run time: **%.0f s** "
      "wall clock with %d worker processes on this machine (%s, %d CPUs; "
      "load average %.1f when the run ended: the machine was shared with "
      "other work while it ran, so the time is an upper bound). %d runs "
      "in all.\n"
      % (started, "quick" if QUICK else "full", wall, JOBS,
         platform.machine(), os.cpu_count() or 0, os.getloadavg()[0],
         len(rows)))
    w("## Question\n")
    w("A tenant runs k = %d pods that each make LLM calls. Hybrid gives it "
      "one MIG partition time-shared by its pods; is that worth it against "
      "mig-only (a partition per pod), exclusive (a GPU per pod), or simply "
      "one larger partition on which one pod serves all the tenant's "
      "calls?\n" % K)
    w("## Answer at the default parameters\n")
    w("Highest load of the grid %s (a tenant's offered work in 1g "
      "partition capacities) up to which each configuration meets the SLO "
      "for >= %.0f %% / >= %.0f %% of calls, k = %d (0: not even the "
      "lowest):\n" % (LOADS, 100 * goal, 100 * GOAL_LOOSE, K))
    w("| config | GPU-eq held | " + " | ".join(model.TRAFFIC) + " |")
    w("|---|---|" + "---|" * len(model.TRAFFIC))
    for cfg in MAIN:
        w("| %s | %.3f | %s |" % (cfg.label, cfg.gpu_equivalent(), " | ".join(
            "%s / %s" % (max_load(summ, cfg.label, t, goal),
                         max_load(summ, cfg.label, t, GOAL_LOOSE))
            for t in model.TRAFFIC)))
    w("")
    for g in (goal, GOAL_LOOSE):
        for small, big in PAIRS:
            cells = [decision(summ, small, big, k, t, load, g)
                     for k in MAP_K for t in model.TRAFFIC for load in LOADS]
            w("- goal %.0f %%, hybrid-%s vs one pod on %s, decision map "
              "(k in %s x 4 traffics x %d loads = %d cells): hybrid meets "
              "the SLO in %d, only the larger partition in %d, neither in "
              "%d, hybrid's models do not fit in %d."
              % (100 * g, small, big, MAP_K, len(LOADS), len(cells),
                 cells.count(HYBRID), cells.count(BIGGER),
                 cells.count(NEITHER), cells.count(NOFIT)))
    w("")
    w("Cheapest configuration meeting the SLO (fewest GPU-equivalents "
      "held; ties broken by p99 TTFT), k = %d; GPU-equivalents: hybrid-1g "
      "1/7, hybrid-2g and larger-2g 2/7, larger-3g and mig-1g 3/7, mig-2g "
      "6/7, mig-3g 9/7, exclusive 3:\n" % K)
    L.extend(cheapest_table(summ, goal))
    w("")
    w("With the goal relaxed to %.0f %% of calls:\n" % (100 * GOAL_LOOSE))
    L.extend(cheapest_table(summ, GOAL_LOOSE))
    w("")
    w("![latency](latency_vs_load.png)\n")
    w("![utilisation](utilisation.png)\n")
    w("![decision map](decision_map.png)\n")
    w("![decision map at %.0f %%](decision_map_%d.png)\n"
      % (100 * GOAL_LOOSE, round(100 * GOAL_LOOSE)))
    w("## Results at k = %d (means ± 95 %% CI over %d replications)\n"
      % (K, REPS))
    for traffic in model.TRAFFIC:
        w("### %s\n" % traffic)
        w("| config | load | p50 TTFT s | p99 TTFT s | p50 compl. s | "
          "p99 compl. s | SLO met | GPU util | tenants/GPU | "
          "GPU-eq s / 1k calls |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for cfg in MAIN:
            for load in LOADS:
                s = get(summ, cfg.label, traffic, load)
                if s is None:
                    w("| %s | %s | does not fit |||||||| " % (cfg.label, load))
                    continue
                w("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s |"
                  % (cfg.label, load, fmt(s, "ttft_p50"),
                     fmt(s, "ttft_p99"), fmt(s, "comp_p50"),
                     fmt(s, "comp_p99"), fmt(s, "slo", 3),
                     fmt(s, "gpu_util"), s["tenants_per_gpu"][0],
                     fmt(s, "gpu_eq_s_per_1k", 0)))
        w("")
    w("## Sensitivity\n")
    w("Each uncertain parameter moved alone to the ends of its range (see "
      "the parameter table), for %s on %s traffic at loads %s (k = %d). "
      "`prefill_rate` moves the decode rate by the same factor (one "
      "throughput scale). A value in brackets is the default run: the "
      "parameter cannot change that configuration.\n"
      % (", ".join(c.label for c in SENS_CONFIGS), SENS_TRAFFIC,
         SENS_LOADS, K))
    w("| variant | load | " + " | ".join(
        "%s SLO met | %s p99 TTFT s" % (c.label, c.label)
        for c in SENS_CONFIGS) + " | cheapest meeting SLO |")
    w("|---|---|" + "---|---|" * len(SENS_CONFIGS) + "---|")
    variants = ["default"] + sorted({r["variant"] for r in rows
                                     if r["group"] == "sens"} - {"default"})
    for v in variants:
        for load in SENS_LOADS:
            cells, win = [], "neither"
            name = v.split("=")[0]
            for c in SENS_CONFIGS:
                own = v == "default" or affects(name, c)
                s = get(summ, c.label, SENS_TRAFFIC, load, K, "sens",
                        v if own else "default")
                if s is None:
                    a, b = "does not fit", "-"
                elif own:
                    a, b = fmt(s, "slo", 3), fmt(s, "ttft_p99")
                else:
                    a, b = "(%s)" % fmt(s, "slo", 3), \
                        "(%s)" % fmt(s, "ttft_p99")
                cells += [a, b]
                if win == "neither" and meets(s, goal):
                    win = c.label
            w("| %s | %s | %s | %s |" % (v, load, " | ".join(cells), win))
    w("")
    w("## Parameters and sources\n")
    w("| parameter | default | range walked | source |")
    w("|---|---|---|---|")
    for name, (d, lo, hi, src) in model.PARAMS.items():
        rng = "-" if lo is None else "%s .. %s" % (lo, hi)
        w("| %s | %s | %s | %s |" % (name, d, rng, src))
    w("")
    w("Derived partition speeds (whole GPU, MIG off = 1): " + ", ".join(
        "%s %.3f" % (g, model.speed(g, p)) for g in ("1g", "2g", "3g")) +
      "; memory: " + ", ".join("%s %.1f GiB" % (g, model.memory_gib(g, p))
                                for g in ("1g", "2g", "3g", "full")) + ".\n")
    w("## Method\n")
    w("- Each run simulates the tenants that one GPU holds (at least one; "
      "for exclusive and mig-only, a tenant's k pods on as many devices "
      "as it needs). MIG isolates tenants, so they do not interact; "
      "tenants per GPU and GPU utilisation of a packed GPU follow from the "
      "geometry (1g: 7 per GPU, 2g: 3, 3g: 2).")
    w("- Load: a tenant's offered work per second in units of one 1g "
      "partition's capacity, split evenly over its k sources (pods). A "
      "source's arrivals are held to the nominal rate block by block over "
      "the run, keeping their burstiness within the run.")
    w("- replay-conv / replay-code: each source replays the Azure LLM "
      "inference trace 2023 (conversation / code) row by row from a random "
      "start: each row's prompt and output tokens, gaps from the trace's "
      "timestamps, stretched to the load. agent-g1.4 / agent-g8: agent "
      "sessions arrive with Gamma gaps of CV 1.41 / 8; a session has "
      "geometric turns (mean 3.95) of geometric LLM calls (mean 7.83) "
      "with exponential tool gaps between calls and think time between "
      "turns; tokens drawn from the code trace; calls after a session's "
      "first prefill only the uncached 14.3 % of their prompt.")
    w("- Service: prefill = prompt tokens / prefill rate, decode = output "
      "tokens / decode rate, in whole-GPU seconds, divided by the "
      "partition's speed. TTFT = end of prefill. A partition serves its "
      "calls by processor sharing (continuous batching approximated as "
      "an even split); time-slicing between pods costs `switch_loss` of "
      "its throughput while two or more pods have work; MPS multiplies "
      "it by 1 + `mps_gain`, or 1 - `mps_penalty` when the pods' models "
      "take more than `mps_contention` of its memory. Every pod's model "
      "must fit its partition's memory.")
    w("- SLO: a call meets it when TTFT <= %.1f s and completion <= "
      "%.1f s + %.2f s per output token; a configuration meets it when "
      ">= %.0f %% of calls do (mean over replications)."
      % (p["ttft_slo"], p["ttft_slo"], p["tpot_slo"], 100 * goal))
    w("- GPU-equivalent seconds: a device counts its compute sevenths "
      "(1g = 1/7, 2g = 2/7, 3g = 3/7, a whole GPU = 1) for as long as it is "
      "held, per 1000 completed calls.")
    w("- Run lengths: about %d calls per replay run and %d per agent run "
      "after a warm-up (10 %% of the run, and for agents at least two "
      "session lengths); %d independent replications per point with seeds "
      "%s (the same seeds for every configuration: common random "
      "numbers); 95 %% confidence intervals are Student t over the "
      "replications' values."
      % (CALLS["replay"], CALLS["agent"], REPS,
         ", ".join(str(SEED * 1000 + r) for r in range(REPS))))
    w("- Validation (study/tests): M/M/1 and M/G/1 FCFS mean waiting time "
      "(Pollaczek-Khinchine) and M/M/1-PS mean response time within 2 % "
      "over 300 000 calls, determinism with a seed, the trace loader.")
    w("- Every run: runs.csv; means and CIs: summary.csv.\n")
    w("## Limits\n")
    w("- Absolute token rates, tool and think times and the model size "
      "are assumptions (no published figure in the facts); the "
      "sensitivity table shows how the comparison moves with them.")
    w("- Processor sharing ignores that batching raises a model server's "
      "aggregate throughput; it penalises every shared configuration, and "
      "the larger partition (which batches all the tenant's calls in one "
      "server) most if anything, so the comparison favours hybrid no less "
      "than reality.")
    w("- The throughput scaling (NJIT) was measured on GROMACS and QLoRA, "
      "not LLM inference; the time-slicing loss is taken from one voice "
      "pipeline measurement.")
    w("- Time-slicing is modelled as processor sharing: a time slice "
      "(about 2, 10 or 30 ms where it can be set; on MIG devices it cannot) "
      "is much shorter than a call (hundreds of ms to seconds), so only its "
      "throughput cost (`switch_loss`) is kept.")
    w("- Agent traffic with CV 8 is extremely clustered; its runs vary "
      "widely (see the CIs). A run holds each source's arrivals to the "
      "nominal rate, so a run never sees a load far from its nominal one "
      "over its whole length.")
    return "\n".join(L) + "\n"


def main():
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    t0 = time.monotonic()
    os.makedirs(OUT, exist_ok=True)
    ts = tasks()
    print("study: %d runs, %d workers, %s mode" % (len(ts), JOBS,
                                                   "quick" if QUICK
                                                   else "full"), flush=True)
    rows = []
    if os.environ.get("STUDY_REPORT_ONLY"):     # redo the report from CSV
        with open(os.path.join(OUT, "runs.csv")) as f:
            for r in csv.DictReader(f):
                r["fits"] = r["fits"] == "True"
                r["k"], r["rep"] = int(r["k"]), int(r["rep"])
                r["load"] = float(r["load"])
                for m in METRICS:
                    r[m] = float(r[m]) if r["fits"] else ""
                rows.append(r)
        ts = []
    with multiprocessing.Pool(JOBS) as pool:
        for i, row in enumerate(pool.imap(run_task, ts, chunksize=4)):
            rows.append(row)
            if (i + 1) % 200 == 0:
                print("study: %d/%d runs, %.0f s" % (i + 1, len(ts),
                                                    time.monotonic() - t0),
                      flush=True)
    fields = list(rows[0].keys())
    write_csv(os.path.join(OUT, "runs.csv"), rows, fields)
    summ = summarise(rows)
    srows = []
    for key, s in sorted(summ.items(), key=lambda kv: str(kv[0])):
        d = dict(zip(("group", "variant", "config", "k", "traffic", "load"),
                     key))
        for m in METRICS:
            d[m] = "" if s is None else s[m][0]
            d[m + "_ci95"] = "" if s is None else s[m][1]
        srows.append(d)
    write_csv(os.path.join(OUT, "summary.csv"), srows, list(srows[0].keys()))
    goal = model.defaults()["slo_goal"]
    plot_latency(summ, os.path.join(OUT, "latency_vs_load.png"))
    plot_utilisation(summ, os.path.join(OUT, "utilisation.png"))
    plot_decision(summ, goal, os.path.join(OUT, "decision_map.png"))
    plot_decision(summ, GOAL_LOOSE, os.path.join(
        OUT, "decision_map_%d.png" % round(100 * GOAL_LOOSE)))
    wall = time.monotonic() - t0
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(report(rows, summ, wall, started))
    with open(os.path.join(OUT, "params.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["parameter", "default", "low", "high", "source"])
        for name, (d, lo, hi, src) in model.PARAMS.items():
            w.writerow([name, d, lo, hi, src])
    print("study: wrote %s in %.0f s" % (OUT, wall))


if __name__ == "__main__":
    main()
