# SPDX-License-Identifier: Apache-2.0
"""The trace loader reads the shipped Azure traces exactly and refuses
malformed input; the parameter file gives every parameter a default, a
status and a source; the MIG geometry gives a whole GPU at least the sum of
its slices; traffic is what it says (clock not stretched, Gamma CV as set,
common random numbers); a run is deterministic with its seed; hybrid and one
pod differ exactly when batching or memory should tell them apart; the
study's decision logic reads replications as documented."""

import gzip
import hashlib
import os
import tempfile

import numpy as np

from sim import hardware as hw
from sim import model
from sim.traffic import (DATA_DIR, Agent, TraceError, agent_sessions,
                         gamma_gaps, load_trace, parse_trace, split_replay)

SHA256 = {
    "conv": "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
    "code": "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
}


def test_shipped_traces_are_the_published_files():
    for name, want in SHA256.items():
        with gzip.open(os.path.join(DATA_DIR, name + ".csv.gz")) as f:
            got = hashlib.sha256(f.read()).hexdigest()
        assert got == want, "%s.csv.gz is not the published file" % name


def test_trace_loader_figures():
    conv, code = load_trace("conv"), load_trace("code")
    assert len(conv.t) == 19366 and len(code.t) == 8819
    assert abs(conv.t[-1] - 3501.72) < 0.01
    assert abs(code.t[-1] - 3435.95) < 0.01
    assert abs(conv.prompt.mean() - 1154.70) < 0.01
    assert abs(conv.output.mean() - 211.13) < 0.01
    assert abs(code.prompt.mean() - 2047.85) < 0.01
    assert abs(code.output.mean() - 27.88) < 0.01
    g = np.diff(code.t)
    assert abs(g.std() / g.mean() - 13.15) < 0.01
    assert conv.prompt.max() == 14050 and code.output.max() == 1899
    assert min(conv.output.min(), code.output.min()) >= 1


def expect_error(text, words):
    try:
        parse_trace(text, "t")
    except TraceError as e:
        assert words in str(e), str(e)
        return
    raise AssertionError("accepted: %r" % text[:60])


def test_trace_loader_refuses_bad_input():
    h = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
    row = "2023-11-16 18:15:46.6805900,%s,%s"
    ok = h + row % (10, 5) + "\r\n" + \
        "2023-11-16 18:15:47.0000000,3,4"
    tr = parse_trace(ok)
    assert list(tr.prompt) == [10, 3] and abs(tr.t[1] - 0.31941) < 1e-6
    expect_error("A,B,C\r\n" + row % (1, 1), "header")
    expect_error(h + row % (1, 1), "fewer than two")
    expect_error(h + row % (1, 1) + "\r\n" + row % (2, 2),
                 "not strictly increasing")
    expect_error(h + row % (1, 1) + "\r\n" + row % ("-1", 2), "malformed")
    expect_error(h + row % (1, 1) + "\r\n2023-11-17 01:00:00.0000000,1,1",
                 "more than one day")
    try:
        load_trace("chat")
    except TraceError:
        pass
    else:
        raise AssertionError("unknown trace accepted")


def test_parameter_file():
    p = model.PARAMS
    assert list(p)[:2] == ["gpu_bw", "gpu_flops"]
    for name, pr in p.items():
        assert pr.source and isinstance(pr.default, (int, float)), name
        assert pr.status in model.STATUSES, name
        assert (pr.low is None) == (pr.high is None), name
        if pr.low is not None:
            assert pr.low <= pr.default <= pr.high, name
    # the time-slicing gain can go either way, as the sources disagree
    assert p["ts_gain"].low < 0 < p["ts_gain"].high
    good = '[a]\ndefault = 1.0\nsource = "s"\nstatus = "assumed"\n'
    for bad in ('[a]\ndefault = 1.0\nstatus = "assumed"\n',  # no source
                '[a]\nsource = "s"\nstatus = "assumed"\n',   # no default
                '[a]\ndefault = 1.0\nsource = "s"\n',        # no status
                good.replace("assumed", "guessed"),           # bad status
                good + 'low = 0.5\n',                          # low, no high
                good + 'low = 2.0\nhigh = 3.0\n',              # out of range
                good + 'lo = 0.5\n'):                          # unknown key
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write(bad)
            f.flush()
            try:
                model.load_params(f.name)
            except ValueError as e:
                assert "[a]" in str(e), e
            else:
                raise AssertionError("accepted: %r" % bad)
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(good)
        f.flush()
        got = model.load_params(f.name)
        assert got["a"].default == 1.0 and got["a"].status == "assumed"


def test_mig_capacity_is_hardware_proportional():
    full, one = hw.PROFILES["full"], hw.PROFILES["1g"]
    # 7 x 1g never exceeds the whole GPU: SMs, bandwidth, memory
    assert one.per_gpu * one.sms <= full.sms
    assert one.per_gpu * one.mem_slices <= full.mem_slices
    assert one.per_gpu * one.mem_gib <= full.mem_gib
    p = model.defaults()
    m = hw.MODELS["1.5B"]
    for prof in ("1g", "2g", "3g"):
        pr = hw.PROFILES[prof]
        assert pr.per_gpu * pr.sms <= full.sms, prof
        sc, sf = hw.step_cost(m, prof, p), hw.step_cost(m, "full", p)
        # bandwidth by memory slices, compute by SMs
        assert abs(sc.weights / sf.weights - 8 / pr.mem_slices) < 1e-9
        assert abs(sc.per_token / sf.per_token - full.sms / pr.sms) < 1e-9
    # decode tokens/s, the same total batch split over seven 1g devices
    # or on the whole GPU: never more on the slices
    s1, sf = hw.step_cost(m, "1g", p), hw.step_cost(m, "full", p)
    kv = 1000 * m.kv_bytes
    for b in (1, 8, 64, 512):
        slices = 7 * b / (s1.host + s1.gpu(b, b * kv, 0))
        whole = 7 * b / (sf.host + sf.gpu(7 * b, 7 * b * kv, 0))
        assert slices <= whole, (b, slices, whole)


def test_memory_fit():
    p = model.defaults()
    small, mid, big = (hw.MODELS[x] for x in ("0.5B", "1.5B", "7B"))
    assert model.Config("hybrid", "1g", 3).fits(small, p)
    assert not model.Config("hybrid", "1g", 3).fits(mid, p)
    assert model.Config("one", "1g", 3).fits(mid, p)
    assert model.Config("hybrid", "2g", 3).fits(mid, p)
    assert not model.Config("one", "1g", 3).fits(big, p)
    assert model.Config("one", "2g", 3).fits(big, p)
    # k servers hold k copies of the weights: less KV cache each
    b1 = hw.kv_budget(mid, "2g", 1, p)
    b3 = hw.kv_budget(mid, "2g", 3, p)
    assert 3 * b3 < b1


def test_geometry_and_accounting():
    c = model.Config("mig", "1g", 3)
    assert abs(c.gpu_equivalent() - 3 / 7) < 1e-12
    assert abs(c.tenants_per_gpu() - 7 / 3) < 1e-12
    for mode in ("one", "hybrid", "hybrid-mps"):
        c = model.Config(mode, "2g", 3)
        assert abs(c.gpu_equivalent() - 2 / 7) < 1e-12
        assert c.tenants_per_gpu() == 3
    assert model.Config("exclusive", "full", 3).gpu_equivalent() == 3
    assert model.Config("one", "1g", 3).merges
    assert not model.Config("hybrid", "1g", 3).merges
    for bad in (("exclusive", "1g", 3), ("mig", "5g", 3), ("one", "1g", 0),
                ("shared", "1g", 3)):
        try:
            model.Config(*bad)
        except ValueError:
            continue
        raise AssertionError("accepted %r" % (bad,))


def test_replay_keeps_the_clock():
    tr = load_trace("conv")
    rng = np.random.default_rng(1)
    r = split_replay(tr, 0.25, 3, rng)
    # a quarter of the rows, at their own times, none stretched
    assert abs(len(r.t) / len(tr.t) - 0.25) < 0.02
    assert np.all(np.isin(r.t, tr.t))
    assert set(r.pod.tolist()) == {0, 1, 2}
    # share 2: twice the calls over the same hour
    r2 = split_replay(tr, 2.0, 3, np.random.default_rng(1), offset=100.0)
    assert abs(len(r2.t) / len(tr.t) - 2.0) < 0.05
    assert r2.t.min() >= 0 and r2.t.max() <= tr.t[-1] + 1.0
    assert np.all(np.diff(r2.t) >= 0)


def test_gamma_burstiness_is_what_it_says():
    rng = np.random.default_rng(2)
    for cv in (1.41, 8.0):
        g = gamma_gaps(rng, 15.0, cv, 2_000_000)
        assert abs(g.mean() / 15.0 - 1) < 0.03, cv
        assert abs(g.std() / g.mean() / cv - 1) < 0.05, cv


def test_agent_sessions():
    tr = load_trace("code")
    a = Agent()
    ses = agent_sessions(tr, a, 1.0, 1.41, 2000.0, 3, np.random.default_rng(3))
    calls = [len(s.prompt) + s.skipped for s in ses if s.began >= 0]
    assert abs(np.mean(calls) / a.calls_per_session() - 1) < 0.1
    # sessions under way at 0 start mid-session, after 0
    under = [s for s in ses if s.began < 0]
    assert under and all(s.start >= 0 for s in under)
    assert all(s.start == s.began for s in ses if s.began >= 0)
    assert [s.start for s in ses] == sorted(s.start for s in ses)


def test_common_random_numbers():
    p = model.defaults()
    a = model.arrivals("replay-conv", 1, 3, p, 7)[1]
    b = model.arrivals("replay-conv", 1, 3, p, 7)[1]
    assert np.array_equal(a.t, b.t) and np.array_equal(a.pod, b.pod)
    c = model.arrivals("replay-conv", 2, 3, p, 7)[1]
    # the same window of the hour at every load
    assert abs(np.median(a.t) - np.median(c.t)) < 200


def small_run(cfg, seed=7, model_name="0.5B", traffic="agent-cv8",
              load=24, **kw):
    p = model.with_params(model.defaults(), **kw)
    return model.run_one(cfg, traffic, load, p, seed, model_name)


def test_deterministic_with_seed():
    cfg = model.Config("hybrid", "1g", 3)
    a, b, c = small_run(cfg), small_run(cfg), small_run(cfg, seed=8)
    assert a == b, "same seed, different results"
    assert a != c, "different seeds, same results"


def test_hybrid_and_one_pod_agree_when_they_should():
    # one pod: the same server whatever the sharing gain
    one = model.Config("one", "1g", 3)
    assert small_run(one, ts_gain=-0.24) == small_run(one, ts_gain=0.16)
    # k = 1: hybrid is one server alone on its partition, i.e. one pod
    h1, o1 = model.Config("hybrid", "1g", 1), model.Config("one", "1g", 1)
    assert small_run(h1) == small_run(o1)
    assert small_run(h1, ts_gain=-0.24) == small_run(o1)


def test_hybrid_and_one_pod_differ_when_they_should():
    # same partition, same calls: one server batches them all (weights
    # read once per step); k servers each read their own weights, so the
    # partition is busier for the same work
    hyb = small_run(model.Config("hybrid", "1g", 3), load=36)
    one = small_run(model.Config("one", "1g", 3), load=36)
    assert hyb["calls"] == one["calls"]
    assert hyb["gpu_busy"] > 1.2 * one["gpu_busy"], (hyb, one)
    # the time-slicing gain moves hybrid, never one pod
    lo = small_run(model.Config("hybrid", "1g", 3), load=36, ts_gain=-0.24)
    hi = small_run(model.Config("hybrid", "1g", 3), load=36, ts_gain=0.16)
    assert lo["tpot_p99"] > hi["tpot_p99"]
    # non-mergeable pods: each server holds its own model, so a bigger
    # model that one server fits on 1g does not fit three times
    p = model.defaults()
    assert model.Config("one", "1g", 3).fits(hw.MODELS["1.5B"], p)
    assert small_run(model.Config("hybrid", "1g", 3),
                     model_name="1.5B") is None


def test_overloaded_runs_are_reported_not_dropped():
    r = small_run(model.Config("one", "1g", 3), traffic="replay-conv",
                  load=24)
    assert r["overloaded"]
    # every call of the window counts: the unserved ones as misses
    assert r["calls"] > 1000 and r["slo"] < 0.5
    assert r["unfinished"] > 0
