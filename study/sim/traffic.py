# SPDX-License-Identifier: Apache-2.0
"""Traffic: the Azure LLM inference traces 2023 replayed at their own
time scale and split among tenants, and agent sessions (LLM calls separated
by tool gaps) arriving as a Gamma renewal process.

Nothing here depends on the configuration: the arrivals of a (traffic,
load, replication) are drawn once from their own seed and every
configuration replays them (common random numbers). Agent calls after a
session's first wait for the previous call's answer, so their times depend
on the configuration; the sessions' starts, calls, tokens and gaps do not.
"""

import gzip
import os
import re
from dataclasses import dataclass

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "data")
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
_ROW = re.compile(r"^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{7}),"
                  r"(\d+),(\d+)$")
MAX_ROWS = 1_000_000            # a cap on what one trace file may hold


class TraceError(ValueError):
    pass


@dataclass
class Trace:
    name: str
    t: np.ndarray               # seconds since the first request
    prompt: np.ndarray          # ContextTokens
    output: np.ndarray          # GeneratedTokens

    @property
    def rate(self):
        return (len(self.t) - 1) / (self.t[-1] - self.t[0])


def parse_trace(text, name="trace"):
    """Parses the CSV text of one Azure LLM trace file."""
    lines = text.split("\r\n") if "\r\n" in text else text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != HEADER:
        raise TraceError("%s: header is not %r" % (name, HEADER))
    if len(lines) - 1 > MAX_ROWS:
        raise TraceError("%s: more than %d rows" % (name, MAX_ROWS))
    if len(lines) < 3:
        raise TraceError("%s: fewer than two requests" % name)
    n = len(lines) - 1
    t = np.empty(n)
    prompt = np.empty(n, dtype=np.int64)
    output = np.empty(n, dtype=np.int64)
    day0 = None
    for i, line in enumerate(lines[1:]):
        m = _ROW.match(line)
        if m is None:
            raise TraceError("%s: line %d is malformed: %r"
                             % (name, i + 2, line[:80]))
        y, mo, d, hh, mm, ss, frac, ctx, gen = m.groups()
        day = (int(y), int(mo), int(d))
        if day0 is None:
            day0 = day
        elif day != day0:
            raise TraceError("%s: line %d: trace spans more than one day"
                             % (name, i + 2))
        t[i] = int(hh) * 3600 + int(mm) * 60 + int(ss) + int(frac) * 1e-7
        prompt[i] = int(ctx)
        output[i] = int(gen)
    if np.any(np.diff(t) <= 0):
        bad = int(np.argmax(np.diff(t) <= 0))
        raise TraceError("%s: line %d: timestamps not strictly increasing"
                         % (name, bad + 3))
    return Trace(name, t - t[0], prompt, output)


_cache = {}


def load_trace(name, data_dir=DATA_DIR):
    """Loads "conv" or "code" from study/data/NAME.csv.gz (cached)."""
    if name not in ("conv", "code"):
        raise TraceError("unknown trace %r (expected conv or code)" % name)
    key = (name, data_dir)
    if key not in _cache:
        path = os.path.join(data_dir, name + ".csv.gz")
        with gzip.open(path, "rb") as f:
            raw = f.read(64 << 20)
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            raise TraceError("%s: not ASCII" % path) from None
        _cache[key] = parse_trace(text, name)
    return _cache[key]


@dataclass
class Replay:
    """One tenant's calls: arrival times (s, the trace's own clock),
    prompt and output tokens, and the pod (0..k-1) each goes to."""
    t: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    pod: np.ndarray


def split_replay(trace, share, k, rng, offset=0.0):
    """The calls of one tenant that gets `share` of the service's traffic,
    on the trace's own clock (never stretched), starting `offset` seconds
    into the trace (wrapping round its end). share <= 1: the trace split
    among 1/share tenants, every row kept with probability share. share >
    1: ceil(share) copies of the trace, the first at the offset and each
    other shifted by its own random offset, each thinned to share /
    copies and all superposed (a tenant as busy as several such
    services). Each call goes to one of the tenant's k pods at random."""
    if share <= 0 or k < 1:
        raise ValueError("share must be positive and k at least 1")
    n = len(trace.t)
    span = trace.t[-1] + float(np.mean(np.diff(trace.t)))
    copies = max(1, int(np.ceil(share - 1e-9)))
    ts, idx = [], []
    for c in range(copies):
        keep = np.flatnonzero(rng.random(n) < share / copies)
        shift = offset if c == 0 else offset + rng.random() * span
        ts.append((trace.t[keep] - shift) % span)
        idx.append(keep)
    t = np.concatenate(ts)
    idx = np.concatenate(idx)
    order = np.argsort(t, kind="stable")
    t, idx = t[order], idx[order]
    pod = rng.integers(k, size=len(t))
    return Replay(t, trace.prompt[idx], trace.output[idx], pod)


@dataclass
class Agent:
    """Agent session structure (GitHub Copilot coding-agent traces)."""
    turns: float = 3.95          # mean turns per session
    calls_per_turn: float = 7.83  # mean LLM calls per turn
    tools_per_turn: float = 7.3  # mean tool calls per turn
    cached: float = 0.857        # share of prompt tokens served from cache
    tool_time: float = 2.0       # mean seconds per tool call (assumed)
    think_time: float = 30.0     # mean seconds between turns (assumed)

    def gap_mean(self):
        """Mean seconds between two calls of a turn: the turn's tool calls
        fall in its calls' gaps."""
        return self.tools_per_turn / max(self.calls_per_turn - 1, 1e-9) \
            * self.tool_time

    def session_span(self):
        """Mean length of a session less its calls' own latency (s)."""
        return self.turns * (self.calls_per_turn - 1) * self.gap_mean() + \
            (self.turns - 1) * self.think_time

    def calls_per_session(self):
        return self.turns * self.calls_per_turn


@dataclass
class Session:
    start: float                 # its first simulated call
    pod: int
    prompt: np.ndarray           # per call
    output: np.ndarray
    gap: np.ndarray              # idle time after each call's answer
    began: float = 0.0           # when it began (before 0: under way)
    skipped: int = 0             # calls before 0, not simulated


def gamma_gaps(rng, mean, cv, n):
    """n Gamma inter-arrival times of the given mean and coefficient of
    variation (shape 1/cv^2), nothing rescaled afterwards."""
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, mean / shape, n)


def agent_sessions(trace, agent, rate, cv, horizon, k, rng, lead=900.0):
    """Sessions starting in [-lead, horizon) as a Gamma renewal process of
    `rate` sessions per second and coefficient of variation cv; each has
    geometric turns of geometric calls (the agent's means), tokens drawn
    from the trace's rows, exponential tool gaps within a turn and think
    times between turns, and runs on one of the k pods.

    A session that started before 0 is already under way at 0: its calls
    whose planned times (start plus the gaps before them, the model's own
    latency left out) fall before 0 are dropped and it begins at the first
    call after 0. The run so starts near its steady state instead of
    empty; only sessions starting at or after 0 are ever measured."""
    mean = 1.0 / rate
    starts = []
    t = -lead + rng.random() * mean
    while t < horizon:
        for g in gamma_gaps(rng, mean, cv, 256):
            if t >= horizon:
                break
            starts.append(t)
            t += g
    n_rows = len(trace.t)
    out = []
    p_turn = 1.0 / agent.turns
    p_call = 1.0 / agent.calls_per_turn
    for s in starts:
        turns = rng.geometric(p_turn)
        calls = rng.geometric(p_call, turns)
        n = int(calls.sum())
        rows = rng.integers(n_rows, size=n)
        gap = rng.exponential(agent.gap_mean(), n)
        ends = np.cumsum(calls) - 1          # last call of each turn
        gap[ends] = rng.exponential(agent.think_time, turns)
        gap[-1] = 0.0
        pod = int(rng.integers(k))
        first = 0
        start = float(s)
        if s < 0:
            planned = s + np.concatenate(([0.0], np.cumsum(gap[:-1])))
            first = int(np.searchsorted(planned, 0.0))
            if first == n:
                continue
            start = float(planned[first])
        out.append(Session(start, pod, trace.prompt[rows[first:]],
                           trace.output[rows[first:]], gap[first:],
                           float(s), first))
    out.sort(key=lambda x: x.start)
    return out


def inter_arrival_cv(times):
    """Coefficient of variation of the gaps between sorted times."""
    g = np.diff(np.sort(np.asarray(times, float)))
    if len(g) < 2 or g.mean() <= 0:
        return float("nan")
    return float(g.std() / g.mean())
