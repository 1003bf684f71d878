"""Traffic: the Azure LLM inference traces 2023, Gamma arrivals, and agent
sessions (LLM calls separated by tool gaps).

A source turns a target offered load into calls on a pod. Work per call is
prompt / prefill_rate + output / decode_rate, in whole-GPU seconds.
"""

import gzip
import os
import re
from dataclasses import dataclass

import numpy as np

from .engine import Job

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


def held_to_mean(draw, mean, block):
    """An endless iterator over gaps from draw(n), rescaled block by block
    so that every `block` consecutive gaps average exactly `mean`: the
    offered load of a run is the nominal one while the gaps keep their
    shape (their burstiness within a block)."""
    if block < 1:
        raise ValueError("block must be at least 1")
    while True:
        g = np.asarray(draw(block), dtype=float)
        g = g * (mean * block / g.sum())
        yield from g


@dataclass
class Service:
    """Token throughput of the tenant's model on a whole GPU, MIG off."""
    prefill_rate: float          # prompt tokens per second
    decode_rate: float           # output tokens per second

    def work(self, prompt, output):
        return prompt / self.prefill_rate, output / self.decode_rate


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
        # tool calls fall in the gaps between a turn's LLM calls
        return self.tools_per_turn / max(self.calls_per_turn - 1, 1e-9) \
            * self.tool_time

    def session_span(self):
        """Mean length of a session less its calls' own latency (s)."""
        return self.turns * (self.calls_per_turn - 1) * self.gap_mean() + \
            (self.turns - 1) * self.think_time

    def calls_per_session(self):
        return self.turns * self.calls_per_turn

    def uncached_share(self):
        """Expected share of prompt tokens a call must prefill: the first
        call of a session fills the cache, the others hit it."""
        n = self.calls_per_session()
        return (1.0 + (n - 1.0) * (1.0 - self.cached)) / n


class ReplaySource:
    """Independent calls replayed from an Azure trace: row by row from a
    random start (wrapping round), each with its own tokens and the gap to
    the next row, the gaps stretched so that every `block` calls offer
    `load` seconds of work per second."""

    def __init__(self, sim, rng, trace, service, pod, load, block):
        self.sim, self.pod, self.service = sim, pod, service
        w1, w2 = service.work(trace.prompt, trace.output)
        mean_work = float(np.mean(w1 + w2))
        mean_gap = mean_work / load
        self.trace = trace
        i0 = int(rng.integers(len(trace.t)))
        self.i = (i0 + 1) % len(trace.t)   # row i0 arrived at time 0
        g = np.diff(trace.t)
        g = np.append(g, g.mean())      # the wrap-round gap
        start = [i0]

        def draw(n):
            idx = (start[0] + np.arange(n)) % len(g)
            start[0] = (start[0] + n) % len(g)
            return g[idx]
        self.gaps = held_to_mean(draw, mean_gap, block)
        sim.after(next(self.gaps), self._arrive)

    def _arrive(self):
        tr = self.trace
        i = self.i
        self.i = (i + 1) % len(tr.t)
        o = int(tr.output[i])
        w1, w2 = self.service.work(int(tr.prompt[i]), o)
        self.pod.arrive(Job(w1, w2, o))
        self.sim.after(next(self.gaps), self._arrive)


class AgentSource:
    """Agent sessions arrive with Gamma inter-arrival times; each
    session runs its turns and calls one after another: a call, a tool gap,
    the next call; a think time between turns. Tokens are drawn from a
    trace; calls after a session's first prefill only the uncached share."""

    def __init__(self, sim, rng, trace, service, pod, load, agent, cv,
                 block):
        self.sim, self.rng, self.trace = sim, rng, trace
        self.service, self.pod, self.agent = service, pod, agent
        w1, w2 = service.work(trace.prompt, trace.output)
        per_call = float(np.mean(w1)) * agent.uncached_share() + \
            float(np.mean(w2))
        self.session_rate = load / (per_call * agent.calls_per_session())
        shape = 1.0 / (cv * cv)
        self.gaps = held_to_mean(lambda n: rng.gamma(shape, 1.0, n),
                                 1.0 / self.session_rate, block)
        self.p_turn_end = 1.0 / agent.calls_per_turn
        self.p_session_end = 1.0 / agent.turns
        sim.after(next(self.gaps), self._session)

    def _session(self):
        self._call(first=True)
        self.sim.after(next(self.gaps), self._session)

    def _call(self, first):
        tr = self.trace
        i = int(self.rng.integers(len(tr.t)))
        p, o = int(tr.prompt[i]), int(tr.output[i])
        if not first:
            p = p * (1.0 - self.agent.cached)
        w1, w2 = self.service.work(p, o)
        self.pod.arrive(Job(w1, w2, o, on_done=self._next))

    def _next(self, job):
        r = self.rng.random()
        if r >= self.p_turn_end:             # another call in this turn
            self.sim.after(self.rng.exponential(self.agent.gap_mean()),
                           self._call, False)
        elif self.rng.random() >= self.p_session_end:   # another turn
            self.sim.after(self.rng.exponential(self.agent.think_time),
                           self._call, False)
