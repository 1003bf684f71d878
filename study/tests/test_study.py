"""The trace loader reads the shipped Azure traces exactly (row counts and
statistics of the data's README) and refuses malformed input; the parameter
file gives every parameter a default and a source and refuses a malformed
table; a run is deterministic with its seed; configurations respect memory
and geometry."""

import gzip
import hashlib
import os
import tempfile

import numpy as np

from sim import model
from sim.traffic import (DATA_DIR, Agent, TraceError, load_trace,
                         parse_trace)

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
    assert int((g > 10).sum()) == 45
    assert conv.prompt.max() == 14050 and code.output.max() == 1899


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
    assert list(p)[:2] == ["scale_1g_2g", "scale_2g_3g"] and len(p) == 21
    assert p["scale_1g_2g"][:3] == (1.92, 1.88, 1.96)
    assert p["turns"][1:3] == (None, None)
    assert isinstance(p["mem_1g_mib"][0], int)
    for name, (dflt, lo, hi, src) in p.items():
        assert src and isinstance(dflt, (int, float)), name
        assert (lo is None) == (hi is None), name
    good = '[a]\ndefault = 1.0\nsource = "s"\n'
    for bad in ('[a]\ndefault = 1.0\n',                  # no source
                '[a]\nsource = "s"\n',                   # no default
                good + 'low = 0.5\n',                      # low, no high
                good + 'lo = 0.5\n'):                      # unknown key
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
        assert model.load_params(f.name) == {"a": (1.0, None, None, "s")}


def small_run(seed, **kw):
    p = model.with_params(model.defaults(), **kw)
    cfg = model.Config("hybrid", "1g", 3)
    return model.run_one(cfg, "agent-g8", 0.4, p, seed, 1500)


def test_deterministic_with_seed():
    a, b, c = small_run(7), small_run(7), small_run(8)
    assert a == b, "same seed, different results"
    assert a != c, "different seeds, same results"


def test_memory_must_fit():
    p = model.defaults()                      # 3 GiB model, 9.5 GiB slice
    assert model.Config("hybrid", "1g", 3).fits(p)
    assert not model.Config("hybrid", "1g", 4).fits(p)
    assert model.Config("hybrid", "2g", 6).fits(p)
    assert small_run(1, model_gib=4.0) is None


def test_geometry_and_accounting():
    c = model.Config("mig", "2g", 3)
    assert c.gpu_equivalent() == 6 / 7 and c.tenants_per_gpu() == 1
    c = model.Config("hybrid", "1g", 5)
    assert c.gpu_equivalent() == 1 / 7 and c.tenants_per_gpu() == 7
    c = model.Config("larger", "3g", 5)
    assert c.tenants_per_gpu() == 2
    assert model.Config("exclusive", "full", 2).gpu_equivalent() == 2
    p = model.defaults()
    s = [model.speed(x, p) for x in ("1g", "2g", "3g", "full")]
    assert s == sorted(s) and s[-1] == 1.0
    assert abs(s[1] / s[0] - 1.92) < 1e-12


def test_agent_structure():
    a = Agent()
    assert abs(a.calls_per_session() - 3.95 * 7.83) < 1e-12
    # one call in 30.9 prefills its whole prompt, the rest 14.3 % of it
    n = a.calls_per_session()
    assert abs(a.uncached_share() - (1 + (n - 1) * 0.143) / n) < 1e-9


def test_load_is_what_was_offered():
    # the work a partition serves is the load offered (in 1g units),
    # within sampling error, for stationary agent traffic and for a replay
    # long enough to cover the code trace several times
    p = model.defaults()
    for traffic, calls in (("agent-g1.4", 40000), ("replay-code", 40000)):
        r = model.run_one(model.Config("mig", "1g", 1), traffic, 0.3, p, 5,
                          calls)
        assert abs(r["util_work"] - 0.3) < 0.03, (traffic, r["util_work"])
