# SPDX-License-Identifier: Apache-2.0
"""The dev stack (scripts/kpgpud-dev) as scripts/faults drives it.

Stack.up() brings up the simulator and the three daemons, each under its
own uid when run as root. Every daemon's command line and credentials are
read back from /proc once it runs, so a daemon killed by a scenario can be
started again exactly as it was (admit, whose listening socket was handed
over as fd 3, is started again on the same port with --listen). Stack.down()
stops what runs, restarted daemons included (their pids are written where
kpgpud-dev looks).
"""

import os
import signal
import socket
import sqlite3
import subprocess
import time

from load import Api

# KPGPUD_TIMEOUT_SCALE (default 1) multiplies every bounded wait here, as in
# the shell tests' wait_for.
try:
    SCALE = max(float(os.environ.get("KPGPUD_TIMEOUT_SCALE", "1")), 0.0)
except ValueError:
    SCALE = 1.0

DAEMONS = ("sync", "quota", "admit")
MANAGED = "app.kubernetes.io/managed-by=kpgpud"
INSTANCES = "/apis/platform.kubeplus.io/v1alpha1/agents"
# kind, collection, label selector of what sync caches: every DeviceClass
# (strict quota needs them all), only kpgpud's objects of the other kinds.
OWNED = (
    ("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", None),
    ("ResourceClaimTemplate",
     "/apis/resource.k8s.io/v1/resourceclaimtemplates", MANAGED),
    ("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims", MANAGED),
    ("ResourceQuota", "/api/v1/resourcequotas", MANAGED),
)


def proc_spec(pid):
    """argv, uid, gid and supplementary groups of a running process."""
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    uid = gid = None
    groups = []
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == "Uid":
                uid = int(v.split()[0])
            elif k == "Gid":
                gid = int(v.split()[0])
            elif k == "Groups":
                groups = [int(g) for g in v.split()]
    return {"argv": argv, "uid": uid, "gid": gid, "groups": groups}


class Stack:
    """One dev stack in a directory."""

    def __init__(self, src, bindir, testbin, d):
        self.src, self.bin, self.testbin, self.d = src, bindir, testbin, d
        self.specs = {}
        self.api = None
        self.port = None

    def path(self, *p):
        return os.path.join(self.d, *p)

    def env(self):
        e = dict(os.environ)
        e["KPGPUD_BIN"] = self.bin
        e["KUBECONFIG"] = self.path("sim", "kubeconfig")
        e.setdefault("HOME", self.d)
        return e

    def up(self):
        """Start the stack; raise with the script's output on failure."""
        r = subprocess.run([os.path.join(self.src, "scripts", "kpgpud-dev"),
                            "up", self.d], env=self.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError("kpgpud-dev up failed:\n" + r.stdout)
        with open(self.path("admit.port")) as f:
            self.port = int(f.read().strip())
        self.api = Api(self.path("sim"))
        for n in DAEMONS:
            self.specs[n] = proc_spec(self.pid(n))
        return r.stdout

    def down(self):
        subprocess.run([os.path.join(self.src, "scripts", "kpgpud-dev"),
                        "down", self.d], env=self.env(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)

    def pid(self, name):
        try:
            with open(self.path("pid", name)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def alive(self, name):
        """Whether the recorded process runs and is that daemon."""
        p = self.pid(name)
        if p is None:
            return False
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                cmd = f.read()
            with open("/proc/%d/stat" % p) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        # an exec in progress may show an empty command line
        return state != "Z" and (not cmd or
                                 b"kpgpud-" + name.encode() in cmd)

    def send(self, name, sig):
        p = self.pid(name)
        if p is not None:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass

    def reap(self, name, limit=15.0):
        """Wait (bounded) until the daemon is gone."""
        p = self.pid(name)
        end = time.monotonic() + limit * SCALE
        while p is not None and time.monotonic() < end:
            try:
                os.waitpid(p, os.WNOHANG)
            except ChildProcessError:
                pass
            if not os.path.exists("/proc/%d" % p):
                return True
            try:
                with open("/proc/%d/stat" % p) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return True
            except OSError:
                return True
            time.sleep(0.05)
        return p is None

    def kill(self, name, sig=signal.SIGKILL):
        self.send(name, sig)
        return self.reap(name)

    def start(self, name):
        """Start a daemon again as it ran before (same argv, uid, groups).
        admit binds its old port again, which an outgoing connection of
        this busy machine may hold for a moment (the port is ephemeral):
        started again until it listens, for up to 20 s."""
        pid = self.launch(name)
        if name != "admit":
            return pid
        end = time.monotonic() + 20 * SCALE
        while time.monotonic() < end:
            if self.alive(name):
                try:
                    socket.create_connection(("127.0.0.1", self.port),
                                             timeout=1).close()
                    return pid
                except OSError:
                    pass
            else:
                self.reap(name, 1)
                pid = self.launch(name)
            time.sleep(0.1)
        return pid

    def launch(self, name):
        """Exec a daemon once, as it ran before."""
        sp = self.specs[name]
        argv = list(sp["argv"])
        if name == "admit" and "--listen-fd" in argv:
            i = argv.index("--listen-fd")
            argv[i:i + 2] = ["--listen", "127.0.0.1:%d" % self.port]
        cmd = ["setsid", "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
        for v in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if os.environ.get(v):
                cmd.append("%s=%s" % (v, os.environ[v]))
        if sp["uid"] != os.getuid():
            cmd += ["setpriv", "--reuid=%d" % sp["uid"],
                    "--regid=%d" % sp["gid"]]
            if sp["groups"]:
                cmd.append("--groups=" + ",".join(map(str, sp["groups"])))
            else:
                cmd.append("--clear-groups")
        cmd += argv
        with open(self.path("log", name + ".log"), "ab") as log:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=log, close_fds=True)
        with open(self.path("pid", name + ".tmp"), "w") as f:
            f.write("%d\n" % p.pid)
        os.rename(self.path("pid", name + ".tmp"), self.path("pid", name))
        want = os.path.basename(argv[0]).encode()
        end = time.monotonic() + 5 * SCALE
        while time.monotonic() < end:       # until setpriv has exec'd it
            try:
                with open("/proc/%d/cmdline" % p.pid, "rb") as f:
                    if os.path.basename(f.read().split(b"\0")[0]) == want:
                        break
            except OSError:
                break
            time.sleep(0.01)
        return p.pid

    # ---- probes ----

    def ctl(self, *args, timeout=5.0):
        try:
            r = subprocess.run(
                [os.path.join(self.bin, "kpgpuctl"), "cache", "--socket",
                 self.path("run", "sync.sock")] + list(args),
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True, timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            return None
        return r.stdout if r.returncode == 0 else None

    def sync_synced(self):
        out = self.ctl("status")
        return out is not None and "synced=true" in out.split("\n")

    def quota_leader(self):
        try:
            with open(self.path("quota", "quota.prom")) as f:
                return "kpgpud_quota_leader_active 1\n" in f.read()
        except OSError:
            return False

    def fault_arm(self, spec):
        r = subprocess.run([os.path.join(self.testbin, "ipc_faultarm"),
                            self.path("run", "sync.sock"), spec],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)
        return r.returncode == 0

    def sim_faults(self, body):
        st, doc = self.api.request("POST", "/sim/faults", body)
        if st != 200:
            raise RuntimeError("/sim/faults %r: HTTP %d" % (body, st))
        return doc

    # ---- cache against the API ----

    def api_list(self, path, selector=None):
        """{"ns/name": rv} of a collection, every page; None on an error."""
        out, cont = {}, ""
        while True:
            q = "?limit=500"
            if selector:
                q += "&labelSelector=" + selector
            if cont:
                q += "&continue=" + cont
            st, doc = self.api.request("GET", path + q)
            if st != 200 or not isinstance(doc, dict):
                return None
            for it in doc.get("items") or []:
                md = it.get("metadata") or {}
                out["%s/%s" % (md.get("namespace", ""), md.get("name"))] = \
                    md.get("resourceVersion")
            cont = (doc.get("metadata") or {}).get("continue") or ""
            if not cont:
                return out

    def api_state(self):
        st = {"ns": self.api_list("/api/v1/namespaces"),
              "in": self.api_list(INSTANCES)}
        for kind, path, selector in OWNED:
            st[kind] = self.api_list(path, selector)
        return None if any(v is None for v in st.values()) else st

    def cache_state(self):
        """The same view read from cache.db (read-only); None if unreadable."""
        db = self.path("cache", "cache.db")
        if not os.path.exists(db):
            return None
        try:
            c = sqlite3.connect("file:%s?mode=ro" % db, uri=True,
                                timeout=2.0)
            try:
                st = {"ns": {"/" + n: rv for n, rv in c.execute(
                    "SELECT name, rv FROM namespaces")},
                      "in": {"%s/%s" % (ns, n): rv for ns, n, rv in
                             c.execute("SELECT ns, name, rv FROM instances")}}
                for kind, _, _ in OWNED:
                    st[kind] = {"%s/%s" % (ns, n): rv for ns, n, rv in
                                c.execute("SELECT ns, name, rv FROM owned "
                                          "WHERE kind = ?", (kind,))}
            finally:
                c.close()
        except sqlite3.Error:
            return None
        return st

    def cache_diff(self):
        """[] when cache.db equals the API object by object, else the
        differences (at most a few, for the report)."""
        a, c = self.api_state(), self.cache_state()
        if a is None:
            return ["API not readable"]
        if c is None:
            return ["cache.db not readable"]
        diffs = []
        for k in a:
            for key in sorted(set(a[k]) | set(c[k])):
                if a[k].get(key) != c[k].get(key):
                    diffs.append("%s %s api=%s cache=%s" % (
                        k, key, a[k].get(key), c[k].get(key)))
        return diffs[:5]
