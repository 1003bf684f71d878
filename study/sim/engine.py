# SPDX-License-Identifier: Apache-2.0
"""The discrete-event core: a clock with an event heap and a stream of
arrivals, model servers that batch their own calls continuously, and GPU
partitions that share their time among the servers on them.

Server: one model-server process (a pod's vLLM, say). A call waits until
its KV cache (prompt + output tokens) fits the server's KV budget and the
server holds fewer than max_seqs calls (FCFS, no overtaking), then is
prefilled (FCFS, chunked: each step carries up to `chunk` prompt tokens
beside the decoding sequences) and decodes one token per step with every
other admitted call. Between events the server's state is constant, so its
step time is too, and the simulation is exact for this fluid of steps: a
decoding sequence advances 1/step tokens per second (tracked as virtual
time V: a sequence admitted to decode at V with n tokens to go finishes at
V + n), the head prefill c/step token-equivalents per second.

Partition: a MIG device or a whole GPU. Alone, a server's step is host
time h plus GPU time g; it keeps the GPU busy u = g / (h + g) of the time.
Several servers on one partition (time-slicing or MPS) share it: while two
or more have work the partition delivers `1 + gain` GPU-seconds per second
(gain < 0: a context-switch or contention cost, > 0: overlap the published
figures credit to sharing), divided max-min fairly among the servers'
demands u; a server granted a < u runs its steps u / a times slower. A
server whose host phase leaves the GPU idle thereby lends it to the others
at no cost: that overlap is modelled, the gain is what remains.
"""

import heapq
from collections import deque

INF = float("inf")
TOL = 1e-7                      # s: events this close count as now


class Sim:
    """A clock, a heap of (time, sequence, function, argument) and an
    optional stream of arrivals (an object with next_t and fire())."""

    def __init__(self):
        self.now = 0.0
        self.heap = []
        self.seq = 0
        self.stopped = None         # a reason once the run is abandoned

    def at(self, t, fn, arg):
        if t < self.now:
            raise ValueError("event scheduled in the past: %r < %r"
                             % (t, self.now))
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn, arg))

    def run(self, until, stream=None):
        heap = self.heap
        pop = heapq.heappop
        while self.stopped is None:
            t_ev = heap[0][0] if heap else INF
            t_ar = stream.next_t if stream is not None else INF
            if t_ar == INF and t_ev == INF:
                break
            if t_ar <= t_ev:
                if t_ar > until:
                    break
                self.now = t_ar
                stream.fire()
            else:
                if t_ev > until:
                    break
                t, _, fn, arg = pop(heap)
                self.now = t
                fn(arg)
        if self.stopped is None:
            self.now = until


class Call:
    """One LLM call. pf: prefill work (token-equivalents); kv_res: KV bytes
    reserved while admitted; kv_read: KV bytes a decode step reads for it
    (its mean context)."""

    __slots__ = ("prompt", "out", "pf", "pf_left", "kv_res", "kv_read",
                 "t_arr", "t_first", "t_done", "rejected", "on_done",
                 "ctx")

    def __init__(self, prompt, out, pf, kv_res, kv_read, on_done=None,
                 ctx=None):
        if pf < 0 or out < 1 or kv_res < 0:
            raise ValueError("bad call: prefill %r, output %r" % (pf, out))
        self.prompt = prompt
        self.out = out
        self.pf = self.pf_left = pf
        self.kv_res = kv_res
        self.kv_read = kv_read
        self.on_done = on_done
        self.ctx = ctx
        self.t_arr = self.t_first = self.t_done = None
        self.rejected = False


class Server:
    """A model server on a partition (see the module's docstring)."""

    def __init__(self, sim, part, cost, kv_budget, max_seqs, chunk,
                 overload_wait=INF):
        self.sim = sim
        self.part = part
        self.cost = cost
        self.h = cost.host
        self.kv_budget = kv_budget
        self.max_seqs = max_seqs
        self.chunk = chunk
        self.overload_wait = overload_wait
        self.waiting = deque()
        self.pf = deque()
        self.pf_total = 0.0         # prefill left over the whole queue
        self.dec = []               # heap of (tag, seq, call)
        self._seq = 0
        self.V = 0.0
        self.b = 0
        self.kv_read = 0.0
        self.kv_used = 0.0
        self.n_adm = 0
        self.c = 0.0                # prefill tokens per step now
        self.u = 0.0                # GPU demand alone
        self.step0 = 0.0            # step time alone
        self.sigma = 1.0            # speed granted / speed alone
        self.r_dec = 0.0
        self.r_pf = 0.0
        self.t_last = 0.0
        self.token = 0
        self.gpu_time = 0.0         # GPU-seconds used
        self.busy_time = 0.0        # seconds with work
        self.tokens = 0.0           # decode tokens produced
        part.servers.append(self)
        for s in part.servers:      # alone on its partition: a fast path
            s.solo = len(part.servers) == 1

    # -- state between events
    def advance(self, now):
        dt = now - self.t_last
        if dt > 0.0:
            if self.b:
                d = self.r_dec * dt
                self.V += d
                self.tokens += d * self.b
            if self.pf:
                d = self.r_pf * dt
                self.pf[0].pf_left -= d
                self.pf_total -= d
            if self.u > 0.0:
                self.busy_time += dt
                self.gpu_time += dt * self.u * self.sigma
        self.t_last = now

    def demand(self):
        if not self.b and not self.pf:
            self.u = self.step0 = self.c = 0.0
            return
        if self.pf:
            c = self.pf_total
            if c < self.pf[0].pf_left:     # rounding drift
                c = self.pf_total = self.pf[0].pf_left
            self.c = c if c < self.chunk else self.chunk
        else:
            self.c = 0.0
        g = self.cost.gpu(self.b, self.kv_read, self.c)
        self.step0 = self.h + g
        self.u = g / self.step0 if self.step0 > 0.0 else 0.0

    def set_speed(self, sigma):
        self.sigma = sigma
        if self.u > 0.0:
            step = self.step0 / sigma
            self.r_dec = 1.0 / step
            self.r_pf = self.c / step
        else:
            self.r_dec = self.r_pf = 0.0

    def schedule(self):
        self.token += 1
        dt = INF
        if self.pf:
            left = self.pf[0].pf_left
            dt = left / self.r_pf if left > 0.0 else 0.0
        if self.b:
            d = (self.dec[0][0] - self.V) / self.r_dec
            if d < dt:
                dt = d
        if dt < INF:
            sim = self.sim
            sim.seq += 1
            heapq.heappush(sim.heap, (sim.now + (dt if dt > 0.0 else 0.0),
                                      sim.seq, self._fire, self.token))

    def _update(self):
        """New rates after a change of this server's state: for a server
        alone on its partition, demand(), set_speed(1.0) and schedule()
        in one (the hot path)."""
        if not self.solo:
            self.part.reallocate(self)
            return
        pf = self.pf
        b = self.b
        self.token += 1
        self.sigma = 1.0
        if not b and not pf:
            self.u = self.step0 = self.c = 0.0
            self.r_dec = self.r_pf = 0.0
            return
        if pf:
            left = pf[0].pf_left
            c = self.pf_total
            if c < left:                    # rounding drift
                c = self.pf_total = left
            if c > self.chunk:
                c = self.chunk
        else:
            c = 0.0
        self.c = c
        cost = self.cost
        mem = cost.weights + self.kv_read * cost.per_kv_byte
        comp = (b + c) * cost.per_token
        g = mem if mem > comp else comp
        step = self.h + g
        self.step0 = step
        if step > 0.0:
            self.u = g / step
            r = self.r_dec = 1.0 / step
            rp = self.r_pf = c / step
        else:
            self.u = r = rp = self.r_dec = self.r_pf = 0.0
        dt = INF
        if pf:
            dt = left / rp if left > 0.0 else 0.0
        if b:
            d = (self.dec[0][0] - self.V) / r
            if d < dt:
                dt = d
        if dt < INF:
            sim = self.sim
            sim.seq += 1
            heapq.heappush(sim.heap, (sim.now + (dt if dt > 0.0 else 0.0),
                                      sim.seq, self._fire, self.token))

    # -- events
    def arrive(self, call):
        sim = self.sim
        if self.solo:
            self.advance(sim.now)
        else:
            self.part.advance(sim.now)
        call.t_arr = sim.now
        if call.kv_res > self.kv_budget:
            call.rejected = True    # longer than the server's KV cache
            return
        self.waiting.append(call)
        self._admit()
        self._update()

    def _admit(self):
        w = self.waiting
        while w and self.n_adm < self.max_seqs and \
                self.kv_used + w[0].kv_res <= self.kv_budget:
            call = w.popleft()
            self.pf.append(call)
            self.pf_total += call.pf_left
            self.kv_used += call.kv_res
            self.n_adm += 1
        if w and self.sim.now - w[0].t_arr > self.overload_wait:
            self.sim.stopped = "overloaded"

    def _fire(self, token):
        if token != self.token:
            return                  # superseded
        now = self.sim.now
        if self.solo:
            self.advance(now)
        else:
            self.part.advance(now)
        done = []
        pf = self.pf
        # what is due within TOL seconds is done now (a finish time can sit
        # within rounding of the clock)
        tol = TOL * self.r_pf
        while pf and pf[0].pf_left <= tol + 1e-9 * (1.0 + pf[0].pf):
            call = pf.popleft()
            call.t_first = now
            if not pf:
                self.pf_total = 0.0
            if call.out > 1:
                self._seq += 1
                heapq.heappush(self.dec, (self.V + (call.out - 1),
                                          self._seq, call))
                self.b += 1
                self.kv_read += call.kv_read
            else:
                done.append(call)
        dec = self.dec
        lim = self.V + TOL * self.r_dec + 1e-9 * (1.0 + self.V)
        while dec and dec[0][0] <= lim:
            call = heapq.heappop(dec)[2]
            self.b -= 1
            self.kv_read -= call.kv_read
            done.append(call)
        if not self.b:
            self.V = 0.0
            self.kv_read = 0.0
            self.dec.clear()
        for call in done:
            call.t_done = now
            self.kv_used -= call.kv_res
            self.n_adm -= 1
        if not self.n_adm:
            self.kv_used = 0.0
        self._admit()
        self._update()
        for call in done:
            if call.on_done is not None:
                call.on_done(call)


class Partition:
    """A GPU or MIG device; gain applies while two or more servers on it
    have work (time-slicing or MPS)."""

    def __init__(self, gain=0.0):
        if gain <= -1.0:
            raise ValueError("gain must be above -1")
        self.servers = []
        self.cap_shared = 1.0 + gain

    def advance(self, now):
        for s in self.servers:
            s.advance(now)

    def reallocate(self, changed):
        servers = self.servers
        changed.demand()
        if len(servers) == 1:
            changed.set_speed(1.0)
            changed.schedule()
            return
        active = [s for s in servers if s.u > 0.0]
        cap = self.cap_shared
        if len(active) < 2 or sum(s.u for s in active) <= cap:
            # nobody is slowed: only the changed server and any that was
            # slowed before need new rates
            for s in servers:
                if s is changed or s.sigma != 1.0:
                    s.set_speed(1.0)
                    s.schedule()
            return
        new = {}
        left = cap
        n = len(active)
        for s in sorted(active, key=_demand):
            share = left / n
            a = s.u if s.u < share else share
            new[s] = a / s.u
            left -= a
            n -= 1
        for s in servers:
            sig = new.get(s, 1.0)
            if s is changed or sig != s.sigma:
                s.set_speed(sig)
                s.schedule()


def _demand(s):
    return s.u
