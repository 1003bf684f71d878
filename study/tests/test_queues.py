# SPDX-License-Identifier: Apache-2.0
"""The serving engine reproduces queueing closed forms in the limits where
it is a textbook queue (within 2 % over long runs), and its batching,
KV-cache admission and GPU sharing behave as documented in sim/engine.py.

Limits used: with no host time, no weights and no KV reads a step costs
(b + c) * per_token seconds, so
- prefill alone (one output token) is a FCFS single server: M/M/1, M/G/1;
- decode alone is processor sharing (each of b sequences gets 1/b of the
  token rate): M/M/1-PS, insensitive to the service distribution;
- with only the weights (memory-bound, no compute) a step costs the same
  for any batch: every call is served at full speed, M/G/infinity.
"""

import numpy as np

from sim.engine import Call, Partition, Server, Sim
from sim.hardware import StepCost

RHO = 0.5
N = 200_000
TOL = 0.02


def cost(host=0.0, weights=0.0, per_kv=0.0, per_token=1.0):
    return StepCost(host, weights, per_kv, per_token)


def poisson_run(lam, n, seed, make, sc, servers=1, gain=0.0,
                kv_budget=float("inf"), max_seqs=10**9, chunk=10**9):
    """Poisson arrivals at rate lam; call i goes to server i % servers on
    one partition. Returns the calls."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / lam, n))
    sim = Sim()
    part = Partition(gain)
    srv = [Server(sim, part, sc, kv_budget, max_seqs, chunk)
           for _ in range(servers)]
    calls = [make(rng) for _ in range(n)]

    class Stream:
        i = 0
        next_t = t[0]

        def fire(self):
            i = self.i
            srv[i % servers].arrive(calls[i])
            self.i = i + 1
            self.next_t = t[i + 1] if i + 1 < n else float("inf")

    sim.run(float("inf"), Stream())
    assert all(c.t_done is not None for c in calls)
    return calls


def close(name, got, want):
    err = got / want - 1.0
    print("  %-30s simulated %.4f, closed form %.4f, error %+.2f %%"
          % (name, got, want, 100 * err))
    assert abs(err) < TOL, "%s off by %.2f %%" % (name, 100 * err)


def prefill_call(work):
    return lambda rng: Call(0, 1, work(rng), 0.0, 0.0)


def test_mm1_fcfs_prefill():
    calls = poisson_run(RHO, N, 1, prefill_call(lambda r: r.exponential()),
                        cost())
    wait = np.mean([c.t_done - c.t_arr - c.pf for c in calls])
    close("M/M/1 FCFS mean wait (prefill)", wait, RHO / (1 - RHO))


def test_mg1_fcfs_pollaczek_khinchine():
    # service uniform on (0, 2): E[S] = 1, E[S^2] = 4/3
    calls = poisson_run(RHO, N, 2,
                        prefill_call(lambda r: r.uniform(0.0, 2.0)), cost())
    wait = np.mean([c.t_done - c.t_arr - c.pf for c in calls])
    close("M/G/1 FCFS mean wait (P-K)", wait,
          RHO * (4.0 / 3.0) / (2.0 * (1.0 - RHO)))


def decode_call(mean_tokens):
    # 1 + geometric tokens: nearly exponential for a large mean
    p = 1.0 / mean_tokens
    return lambda r: Call(0, 1 + int(r.geometric(p)), 0.0, 0.0, 0.0)


def test_mm1_ps_decode():
    # 1000 tokens at 1000 tokens/s: E[S] = 1 s
    calls = poisson_run(RHO, N, 3, decode_call(1000.0),
                        cost(per_token=1e-3))
    resp = np.mean([c.t_done - c.t_arr for c in calls])
    close("M/M/1-PS mean response (decode)", resp, 1.0 / (1.0 - RHO))


def test_md1_ps_is_not_fcfs():
    # constant service: PS still gives E[S]/(1-rho) = 2 (FCFS M/D/1: 1.5)
    calls = poisson_run(RHO, 100_000, 4,
                        lambda r: Call(0, 1001, 0.0, 0.0, 0.0),
                        cost(per_token=1e-3))
    resp = np.mean([c.t_done - c.t_arr for c in calls])
    close("M/D/1-PS mean response", resp, 2.0)


def test_memory_bound_batching_is_free():
    # a step reads only the weights: 1 ms whatever the batch, so at any
    # load a call of n tokens takes n - 1 steps: M/G/infinity
    calls = poisson_run(50.0, 50_000, 5, decode_call(100.0),
                        cost(weights=1e-3, per_token=0.0))
    resp = np.mean([c.t_done - c.t_arr for c in calls])
    want = np.mean([(c.out - 1) * 1e-3 for c in calls])
    close("M/G/inf mean response", resp, want)


def run_at_zero(sc, calls_per_server, gain=0.0, kv_budget=float("inf"),
                chunk=10**9):
    """Submits calls at time 0 (a list per server on one partition)."""
    sim = Sim()
    part = Partition(gain)
    srv = [Server(sim, part, sc, kv_budget, 10**9, chunk)
           for _ in calls_per_server]
    for s, calls in zip(srv, calls_per_server):
        for c in calls:
            s.arrive(c)
    sim.run(1e9)
    return sim


def approx(a, b):
    assert abs(a - b) < 1e-7 * max(1.0, abs(b)), "%r != %r" % (a, b)


def test_throughput_rises_with_batch():
    # memory-bound step: 10 ms of weights + 1 ms host; b calls of 101
    # tokens finish together after 100 steps of 11 ms
    sc = cost(host=1e-3, weights=1e-2, per_token=1e-5)
    for b in (1, 8, 64):
        calls = [Call(0, 101, 0.0, 0.0, 0.0) for _ in range(b)]
        run_at_zero(sc, [calls])
        approx(calls[-1].t_done, 100 * 11e-3)
    # past the ridge (b * 1e-5 > 1e-2: b > 1000) compute decides
    calls = [Call(0, 101, 0.0, 0.0, 0.0) for _ in range(2000)]
    run_at_zero(sc, [calls])
    approx(calls[-1].t_done, 100 * (1e-3 + 2000 * 1e-5))


def test_one_server_batches_what_k_servers_cannot():
    # the same 6 calls: one server batches them (weights read once per
    # step); 3 servers time-sharing the partition each read the weights,
    # and with the GPU saturated take 3 times as long
    sc = cost(weights=1e-2, per_token=0.0)
    one = [Call(0, 101, 0.0, 0.0, 0.0) for _ in range(6)]
    run_at_zero(sc, [one])
    split = [[Call(0, 101, 0.0, 0.0, 0.0) for _ in range(2)]
             for _ in range(3)]
    run_at_zero(sc, split)
    approx(one[0].t_done, 1.0)
    approx(split[0][0].t_done, 3.0)
    # a time-slicing gain of +50 % shortens it to 2 s; a loss lengthens it
    split = [[Call(0, 101, 0.0, 0.0, 0.0) for _ in range(2)]
             for _ in range(3)]
    run_at_zero(sc, split, gain=0.5)
    approx(split[0][0].t_done, 2.0)


def test_host_time_overlaps_across_servers():
    # each server alone: 1 ms host + 1 ms GPU per step (u = 1/2). Two
    # servers fit the GPU together (demand 1): neither is slowed. With a
    # 20 % switching loss the pair gets 0.8: each runs at 0.4 / 0.5.
    # Three (demand 1.5) share it: 1.5x slower.
    sc = cost(host=1e-3, weights=1e-3, per_token=0.0)
    for gain, slow in ((0.0, 1.0), (0.2, 1.0), (-0.2, 0.5 / 0.4)):
        two = [[Call(0, 101, 0.0, 0.0, 0.0)] for _ in range(2)]
        run_at_zero(sc, two, gain=gain)
        approx(two[0][0].t_done, 100 * 2e-3 * slow)
    three = [[Call(0, 101, 0.0, 0.0, 0.0)] for _ in range(3)]
    run_at_zero(sc, three)
    approx(three[0][0].t_done, 100 * 2e-3 * 1.5)


def test_one_server_equals_hybrid_of_one():
    # k = 1: time-slicing has nobody to slice with; the gain never applies
    sc = cost(host=1e-3, weights=1e-2, per_token=1e-5)
    a = [Call(0, 50 + i, 500.0, 0.0, 0.0) for i in range(5)]
    b = [Call(0, 50 + i, 500.0, 0.0, 0.0) for i in range(5)]
    run_at_zero(sc, [a], gain=0.0)
    run_at_zero(sc, [b], gain=-0.24)
    assert [c.t_done for c in a] == [c.t_done for c in b]


def test_kv_budget_limits_concurrency():
    # room for two calls' KV: the third waits until one finishes
    sc = cost(weights=1e-2, per_token=0.0)
    calls = [Call(0, 101, 0.0, 10.0, 0.0) for _ in range(3)]
    run_at_zero(sc, [calls], kv_budget=20.0)
    approx(calls[0].t_done, 1.0)
    approx(calls[1].t_done, 1.0)
    approx(calls[2].t_first, 1.0)
    approx(calls[2].t_done, 2.0)
    # a call that can never fit is refused, not queued for ever
    big = Call(0, 2, 0.0, 30.0, 0.0)
    run_at_zero(sc, [[big]], kv_budget=20.0)
    assert big.rejected and big.t_done is None


def test_chunked_prefill_slows_decode():
    # a decoding call shares its steps with a 1,000-token prefill in 100-
    # token chunks: 10 steps of 1 ms + 100 * 1e-5, then 1 ms steps
    sc = cost(weights=1e-3, per_token=1e-5)
    dec = Call(0, 21, 0.0, 0.0, 0.0)
    pre = Call(0, 1, 1000.0, 0.0, 0.0)
    run_at_zero(sc, [[dec, pre]], chunk=100)
    # dec is prefilled first (no prompt): its decode starts at once
    step_mixed = max(1e-3, 101 * 1e-5)
    approx(pre.t_first, 10 * step_mixed)
    approx(dec.t_done, 10 * step_mixed + 10 * 1e-3)


def test_bad_arguments():
    sim = Sim()
    for bad in (lambda: Partition(-1.0),
                lambda: Call(0, 0, 0.0, 0.0, 0.0),
                lambda: Call(0, 1, -1.0, 0.0, 0.0),
                lambda: sim.at(-1.0, print, None)):
        try:
            bad()
        except ValueError:
            continue
        raise AssertionError("accepted a bad argument")
