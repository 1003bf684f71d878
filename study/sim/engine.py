"""The discrete-event core: a clock with an event heap, GPU partitions that
serve their jobs by processor sharing, and pods that hand jobs to a
partition either all at once (a batching model server) or one at a time
(first come, first served).

Work is measured in seconds of a whole GPU with MIG off. A partition of
speed s does s seconds of such work per second; while it holds n jobs each
progresses at speed * factor / n, where factor (below 1 for a context-switch
cost, possibly above 1 for MPS) applies only while two or more pods have work
on it at once. Processor sharing is tracked with virtual time: V grows at
speed * factor / n, a job admitted at V with work w finishes when V reaches
V + w, so the next event is always the smallest tag in a heap.
"""

import heapq
import itertools


class Sim:
    """A clock and a heap of (time, sequence, function, arguments)."""

    def __init__(self):
        self.now = 0.0
        self._heap = []
        self._seq = itertools.count()

    def at(self, t, fn, *args):
        if t < self.now:
            raise ValueError("event scheduled in the past: %r < %r"
                             % (t, self.now))
        heapq.heappush(self._heap, (t, next(self._seq), fn, args))

    def after(self, dt, fn, *args):
        self.at(self.now + dt, fn, *args)

    def run(self, until):
        heap = self._heap
        while heap and heap[0][0] <= until:
            t, _, fn, args = heapq.heappop(heap)
            self.now = t
            fn(*args)
        self.now = until


class Job:
    """One LLM call: prefill work w1, then decode work w2 (GPU-seconds)."""

    __slots__ = ("w1", "w2", "out_tokens", "t_arrival", "t_first", "t_done",
                 "pod", "on_done", "_tag_done")

    def __init__(self, w1, w2, out_tokens=0, on_done=None):
        if w1 < 0 or w2 < 0:
            raise ValueError("negative work")
        self.w1 = w1
        self.w2 = w2
        self.out_tokens = out_tokens
        self.on_done = on_done
        self.t_arrival = self.t_first = self.t_done = None
        self.pod = None


class Partition:
    """A MIG device or a whole GPU, shared by processor sharing.

    sharing: "single" (one pod, no sharing cost), "ts" (time-slicing:
    factor 1 - switch_loss while two or more pods are active) or "mps"
    (factor mps_factor while two or more pods are active).
    """

    def __init__(self, sim, name, slices, speed, sharing="single",
                 switch_loss=0.0, mps_factor=1.0):
        if speed <= 0:
            raise ValueError("partition speed must be positive")
        if sharing not in ("single", "ts", "mps"):
            raise ValueError("unknown sharing %r" % sharing)
        self.sim = sim
        self.name = name
        self.slices = slices
        self.speed = speed
        self.shared_factor = {"single": 1.0, "ts": 1.0 - switch_loss,
                              "mps": mps_factor}[sharing]
        self._heap = []             # (tag, seq, phase, job)
        self._seq = itertools.count()
        self._pods = {}             # pod -> number of its jobs here
        self.n = 0
        self.V = 0.0
        self._t_last = 0.0
        self._token = 0
        self.busy_time = 0.0        # time with at least one job
        self.work_done = 0.0        # GPU-seconds of work served

    def capacity(self):
        if len(self._pods) >= 2:
            return self.speed * self.shared_factor
        return self.speed

    def _advance(self):
        now = self.sim.now
        dt = now - self._t_last
        if dt > 0 and self.n > 0:
            cap = self.capacity()
            self.V += dt * cap / self.n
            self.busy_time += dt
            self.work_done += dt * cap
        self._t_last = now

    def submit(self, job):
        self._advance()
        seq = next(self._seq)
        heapq.heappush(self._heap, (self.V + job.w1, seq, 0, job))
        job._tag_done = self.V + job.w1 + job.w2
        heapq.heappush(self._heap, (job._tag_done, seq, 1, job))
        self.n += 1
        self._pods[job.pod] = self._pods.get(job.pod, 0) + 1
        self._reschedule()

    def _reschedule(self):
        self._token += 1
        if not self._heap:
            return
        dt = (self._heap[0][0] - self.V) * self.n / self.capacity()
        self.sim.after(max(dt, 0.0), self._fire, self._token)

    def _fire(self, token):
        if token != self._token:
            return                  # superseded by a later arrival/departure
        self._advance()
        heap = self._heap
        eps = 1e-9 * max(1.0, abs(self.V))
        done = []
        while heap and heap[0][0] <= self.V + eps:
            _, _, phase, job = heapq.heappop(heap)
            if phase == 0:
                job.t_first = self.sim.now
            else:
                done.append(job)
        for job in done:
            self.n -= 1
            c = self._pods[job.pod] - 1
            if c:
                self._pods[job.pod] = c
            else:
                del self._pods[job.pod]
        if self.n == 0:
            self.V = 0.0            # keeps tags small; nothing is queued
        self._reschedule()
        for job in done:
            job.pod.finished(job)


class Pod:
    """A model server on a partition; discipline "ps" (continuous batching,
    every call runs at once) or "fcfs" (one call at a time, in order)."""

    def __init__(self, sim, partition, name, discipline="ps", record=None):
        if discipline not in ("ps", "fcfs"):
            raise ValueError("unknown discipline %r" % discipline)
        self.sim = sim
        self.partition = partition
        self.name = name
        self.discipline = discipline
        self.record = record        # called with each finished job
        self._queue = []
        self._qhead = 0
        self._running = False

    def arrive(self, job):
        job.t_arrival = self.sim.now
        job.pod = self
        if self.discipline == "ps":
            self.partition.submit(job)
        elif self._running:
            self._queue.append(job)
        else:
            self._running = True
            self.partition.submit(job)

    def finished(self, job):
        job.t_done = self.sim.now
        if self.discipline == "fcfs":
            if self._qhead < len(self._queue):
                nxt = self._queue[self._qhead]
                self._qhead += 1
                if self._qhead > 4096:
                    del self._queue[:self._qhead]
                    self._qhead = 0
                self.partition.submit(nxt)
            else:
                self._running = False
        if self.record is not None:
            self.record(job)
        if job.on_done is not None:
            job.on_done(job)
