# SPDX-License-Identifier: Apache-2.0
"""Helpers for the simulator's own Python tests: a private simulator per
test file, ok/fail/skip counting and the closing "N passed, N failed,
N skipped" line."""

import atexit
import http.client
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from .client import Client

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class T:
    """Counts checks of one test file and owns its temp dir and sims."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.dir = tempfile.mkdtemp(prefix="kube-sim-test.")
        self.sims = []
        atexit.register(self.finish)
        signal.signal(signal.SIGTERM, self._killed)
        sys.excepthook = self._crashed

    def _crashed(self, etype, value, tb):
        """An uncaught exception is a failed test, not a silent end."""
        import traceback
        traceback.print_exception(etype, value, tb)
        self.check("test raised %s: %s" % (etype.__name__, value), False)

    def _killed(self, signum, frame):
        """SIGTERM (e.g. a test timeout): count a failure, clean up."""
        self.check("test terminated by signal %d" % signum, False)
        sys.exit(1)

    def check(self, desc, cond, detail=""):
        """Record one check."""
        if cond:
            self.passed += 1
            print("ok   " + desc)
        else:
            self.failed += 1
            print("FAIL " + desc + (" -- " + str(detail)[:600]
                                    if detail != "" else ""))
        sys.stdout.flush()
        return cond

    def skip(self, desc):
        """Record a check this machine cannot run (desc says why)."""
        self.skipped += 1
        print("skip " + desc)
        sys.stdout.flush()

    def eq(self, desc, got, want):
        """Check got == want."""
        return self.check(desc, got == want, "got %r, want %r" % (got, want))

    def start(self, name="sim", *args):
        """Start a simulator in DIR/name; returns (dir, admin Client)."""
        d = os.path.join(self.dir, name)
        # KPGPUD_K8S_VERSION: the release (as lib_base.sh's sim_start);
        # a --set k8s-version= in ARGS wins
        ver = os.environ.get("KPGPUD_K8S_VERSION")
        pre = ["--set", "k8s-version=" + ver] if ver else []
        r = subprocess.run([os.path.join(HERE, "run"), d, "--plugins",
                            "none", "--set", "verify-stored=on"] + pre +
                           list(args), capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL starting simulator: " + r.stderr)
            self.failed += 1
            sys.exit(1)
        self.sims.append(d)
        return d, Client(d)

    def finish(self):
        """Stop the simulators, remove the temp dir, print the totals."""
        for d in self.sims:
            self._stored_check(d)
        for d in self.sims:
            try:
                with open(os.path.join(d, "pid")) as f:
                    pid = int(f.read())
                os.kill(pid, signal.SIGTERM)
                end = time.monotonic() + 5
                while time.monotonic() < end:
                    os.kill(pid, 0)
                    time.sleep(0.05)
                os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
        if os.environ.get("KEEP_TMP"):
            print("kept " + self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        print("%d passed, %d failed, %d skipped"
              % (self.passed, self.failed, self.skipped))
        sys.stdout.flush()
        os._exit(1 if self.failed else 0)


    def _stored_check(self, d):
        """The simulator in D, if it answers, found no stored object that
        a reader (its controllers share them) changed in place."""
        try:
            st, out = Client(d).req("GET", "/sim/stored-check")
        except (OSError, ValueError, http.client.HTTPException):
            return
        if st == 200 and isinstance(out, dict) and out.get("verify"):
            self.check("simulator %s: no stored object changed in place"
                       % os.path.basename(d), out.get("changed_count") == 0,
                       out)


def tool(name):
    """The path of a newer client in KPGPUD_TOOLS (default the tree's
    tools/: kubectl v1.35.2, helm v4.1.4 from scripts/deps --install), or
    None when it is not there."""
    d = os.environ.get("KPGPUD_TOOLS") or os.path.join(
        os.path.dirname(os.path.dirname(HERE)), "tools")
    p = os.path.join(d, name)
    return p if os.access(p, os.X_OK) else None


def timeout_scale():
    """KPGPUD_TIMEOUT_SCALE (default 1): what every bound is multiplied by."""
    try:
        return max(float(os.environ.get("KPGPUD_TIMEOUT_SCALE", "1")), 0.0)
    except ValueError:
        return 1.0


def wait_for(limit, fn):
    """Poll fn every 20 ms until it returns a true value (bounded by limit
    times KPGPUD_TIMEOUT_SCALE)."""
    end = time.monotonic() + limit * timeout_scale()
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() >= end:
            return v
        time.sleep(0.02)
