"""The simulator reproduces queueing closed forms over long runs (within
2 %), and the partition model's sharing factors and two-phase jobs behave as
documented."""

import numpy as np

from sim.engine import Job, Partition, Pod, Sim

RHO = 0.5
N = 300_000
TOL = 0.02


def single_server(discipline, lam, n, seed, service):
    """Poisson arrivals at rate lam to one pod on a speed-1 partition;
    returns (waiting times, response times) of the n calls."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / lam, n)
    work = service(rng, n)
    sim = Sim()
    done = []
    pod = Pod(sim, Partition(sim, "p", 1, 1.0), "pod", discipline,
              done.append)
    state = {"i": 0}

    def arrive():
        i = state["i"]
        if i == n:
            return
        state["i"] = i + 1
        pod.arrive(Job(0.0, work[i]))
        sim.after(gaps[i], arrive)

    sim.after(gaps[0], arrive)
    sim.run(float("inf"))
    assert len(done) == n
    resp = np.fromiter((j.t_done - j.t_arrival for j in done), float, n)
    wait = np.fromiter((j.t_done - j.t_arrival - j.w2 for j in done),
                       float, n)
    return wait, resp


def close(name, got, want):
    err = got / want - 1.0
    print("  %-28s simulated %.4f, closed form %.4f, error %+.2f %%"
          % (name, got, want, 100 * err))
    assert abs(err) < TOL, "%s off by %.2f %%" % (name, 100 * err)


def test_mm1_fcfs_waiting_time():
    wait, _ = single_server("fcfs", RHO, N, 1,
                            lambda r, n: r.exponential(1.0, n))
    close("M/M/1 FCFS mean wait", wait.mean(), RHO / (1.0 - RHO))


def test_mg1_fcfs_pollaczek_khinchine():
    # service uniform on (0, 2): E[S] = 1, E[S^2] = 4/3
    wait, _ = single_server("fcfs", RHO, N, 2,
                            lambda r, n: r.uniform(0.0, 2.0, n))
    close("M/G/1 FCFS mean wait (P-K)", wait.mean(),
          RHO * (4.0 / 3.0) / (2.0 * (1.0 - RHO)))


def test_mm1_ps_response_time():
    _, resp = single_server("ps", RHO, N, 3,
                            lambda r, n: r.exponential(1.0, n))
    close("M/M/1-PS mean response", resp.mean(), 1.0 / (1.0 - RHO))


def test_md1_ps_is_not_fcfs():
    # PS is insensitive to the service distribution: E[T] = E[S]/(1-rho)
    # = 2 with constant service, where FCFS (M/D/1) would give 1.5
    _, resp = single_server("ps", RHO, 100_000, 4,
                            lambda r, n: np.ones(n))
    close("M/D/1-PS mean response", resp.mean(), 1.0 / (1.0 - RHO))


def run_jobs(sharing, jobs, **kw):
    """Submits (pod index, w1, w2) jobs at time 0; returns the jobs."""
    sim = Sim()
    part = Partition(sim, "p", 1, 0.5, sharing, **kw)
    pods = [Pod(sim, part, "p%d" % i) for i in range(2)]
    out = []
    for i, w1, w2 in jobs:
        j = Job(w1, w2)
        pods[i].arrive(j)
        out.append(j)
    sim.run(1e9)
    return out


def approx(a, b):
    assert abs(a - b) < 1e-9 * max(1.0, abs(b)), "%r != %r" % (a, b)


def test_two_phase_job_alone():
    # speed 0.5: prefill 1 s of work -> first token at 2 s, done at 6 s
    (j,) = run_jobs("single", [(0, 1.0, 2.0)])
    approx(j.t_first, 2.0)
    approx(j.t_done, 6.0)


def test_time_slicing_cost_only_across_pods():
    # two calls of one pod: plain sharing, each done at 2 * 1 / 0.5 = 4 s
    a, b = run_jobs("ts", [(0, 0.0, 1.0), (0, 0.0, 1.0)], switch_loss=0.24)
    approx(a.t_done, 4.0)
    approx(b.t_done, 4.0)
    # the same calls from two pods pay the switch loss: 4 / 0.76
    a, b = run_jobs("ts", [(0, 0.0, 1.0), (1, 0.0, 1.0)], switch_loss=0.24)
    approx(a.t_done, 4.0 / 0.76)
    approx(b.t_done, 4.0 / 0.76)


def test_loss_ends_when_one_pod_is_left():
    # pod 0 has 1 s of work, pod 1 has 3 s; shared at 0.5 * 0.76 until pod
    # 0 finishes (t1 = 2 / 0.38), then pod 1 alone at 0.5
    a, b = run_jobs("ts", [(0, 0.0, 1.0), (1, 0.0, 3.0)], switch_loss=0.24)
    t1 = 2.0 / (0.5 * 0.76)
    approx(a.t_done, t1)
    approx(b.t_done, t1 + 2.0 / 0.5)


def test_mps_factor():
    a, b = run_jobs("mps", [(0, 0.0, 1.0), (1, 0.0, 1.0)], mps_factor=0.7)
    approx(a.t_done, 4.0 / 0.7)


def test_bad_arguments():
    sim = Sim()
    for bad in (lambda: Partition(sim, "p", 1, 0.0),
                lambda: Partition(sim, "p", 1, 1.0, "fair"),
                lambda: Pod(sim, None, "x", "lifo"),
                lambda: Job(-1.0, 1.0),
                lambda: sim.at(-1.0, print)):
        try:
            bad()
        except ValueError:
            continue
        raise AssertionError("accepted a bad argument")
