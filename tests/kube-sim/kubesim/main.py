# SPDX-License-Identifier: Apache-2.0
"""Start-up of the simulator: options, TLS material (openssl CLI), tokens,
kubeconfigs, plug-ins and controllers, then serve until SIGTERM."""

import argparse
import base64
import importlib
import os
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time

from . import hooks, tenants
from . import release as release_mod
from .api import Api, Who
from .faults import Faults
from .resources import Registry as Resources
from .server import Server, Stats
from .store import Store

ROLES = ("admin", "read-only", "writer", "none")


class Sim:
    """Everything one running simulator holds."""

    def __init__(self, history, verbose=False, release=None):
        # the Kubernetes release this simulator is (--set k8s-version,
        # feature-gates, runtime-config): a release.Release, i.e. "1.37"
        self.release = release if release is not None else \
            release_mod.Release()
        self.store = Store(history)
        self.resources = Resources(self.release)
        self.hooks = hooks.Registry()
        self.hooks.release = self.release
        self.api = Api(self.store, self.resources, self.hooks)
        self.faults = Faults()
        self.stats = Stats()
        self.tokens = {}
        self.dir = ""
        self.tenants = {}
        self.tenants_stamp = None
        self.tenants_lock = threading.Lock()
        self.users = {r: r for r in ROLES}
        self.users["internal"] = "system:kube-controller-manager"
        self.verbose = verbose
        self.log_lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = []

    def tenant(self, token):
        """The Tenant of TOKEN or None; DIR/tenants is read again when it
        changed (simctl DIR tenant adds to it while the server runs)."""
        t = self.tenants.get(token)
        if t is not None or not self.dir:
            return t
        with self.tenants_lock:
            st = tenants.stamp(self.dir)
            if st != self.tenants_stamp:
                self.tenants = tenants.load(self.dir)
                self.tenants_stamp = st
        return self.tenants.get(token)

    def log(self, msg):
        """One line in the simulator log (stderr, i.e. DIR/log)."""
        with self.log_lock:
            sys.stderr.write("%s %s\n" % (time.strftime("%H:%M:%S"), msg))
            sys.stderr.flush()


def parse_args(argv):
    """Command-line options."""
    p = argparse.ArgumentParser(prog="kubesim")
    p.add_argument("dir", help="state directory (kubeconfig, tokens, ...)")
    p.add_argument("--port", type=int, default=0, help="0 = any free port")
    p.add_argument("--history", type=int, default=10000,
                   help="watch event history window (events)")
    p.add_argument("--tls-cert", help="server certificate (PEM)")
    p.add_argument("--tls-key", help="server key (PEM)")
    p.add_argument("--ca", help="CA certificate that signed --tls-cert")
    p.add_argument("--plugins", default="all",
                   help="plug-in modules to load: all, none or a comma list")
    p.add_argument("--bookmark-seconds", type=float, default=60.0)
    p.add_argument("--faults", default="",
                   help="initial faults as JSON (as POST /sim/faults)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VAL",
                   help="option for plug-ins (Registry.options)")
    p.add_argument("--http2", choices=("on", "off"), default="on",
                   help="offer h2 in ALPN (off: HTTP/1.1 only)")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def _openssl(*args):
    """Run the openssl CLI quietly; raise on failure."""
    subprocess.run(["openssl"] + list(args), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_certs(d):
    """Create (or reuse) DIR/ca.{crt,key} and DIR/server.{crt,key}."""
    ca, cakey = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
    crt, key = os.path.join(d, "server.crt"), os.path.join(d, "server.key")
    if all(os.path.exists(f) for f in (ca, cakey, crt, key)):
        return ca, crt, key
    old = os.umask(0o077)
    try:
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:P-256", "-nodes", "-keyout", cakey,
                 "-out", ca, "-days", "3650", "-subj", "/CN=kube-sim-ca",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        csr = os.path.join(d, "server.csr")
        _openssl("req", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                 "-out", csr, "-subj", "/CN=kube-apiserver")
        ext = os.path.join(d, "server.ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost,"
                    "DNS:kubernetes.default.svc\n"
                    "basicConstraints=CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\n")
        _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey,
                 "-CAcreateserial", "-out", crt, "-days", "3650",
                 "-extfile", ext)
        for f in (csr, ext, os.path.join(d, "ca.srl")):
            if os.path.exists(f):
                os.unlink(f)
    finally:
        os.umask(old)
    os.chmod(ca, 0o644)
    os.chmod(crt, 0o644)
    return ca, crt, key


def load_tokens(d):
    """Role tokens from DIR/tokens, created on first start."""
    path = os.path.join(d, "tokens")
    toks = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[0] in ROLES:
                    toks[parts[0]] = parts[1]
    if set(toks) != set(ROLES):
        toks = {r: secrets.token_hex(24) for r in ROLES}
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                     0o600)
        with os.fdopen(fd, "w") as f:
            for r in ROLES:
                f.write("%s %s\n" % (r, toks[r]))
        os.replace(path + ".tmp", path)
    return toks


def _write(path, text, mode=0o600):
    """Atomically write a small file."""
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def kubeconfig(url, ca_pem, user, token, namespace="default"):
    """A kubeconfig for one user (token auth, embedded CA)."""
    ca64 = base64.b64encode(ca_pem).decode()
    return ("apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n"
            "  cluster:\n    server: %s\n    certificate-authority-data: %s\n"
            "users:\n- name: %s\n  user:\n    token: %s\ncontexts:\n"
            "- name: kube-sim\n  context:\n    cluster: kube-sim\n"
            "    user: %s\n    namespace: %s\n"
            "current-context: kube-sim\n" % (url, ca64, user, token, user,
                                             namespace))


def tenant_kubeconfig(url, ca_pem, t):
    """The kubeconfig of a tenant (its namespace is the default one)."""
    return kubeconfig(url, ca_pem, "tenant-%s-%s" % (t.namespace, t.name),
                      t.token, t.namespace)


def write_files(d, port, ca, toks):
    """DIR/url, DIR/port and the kubeconfigs."""
    url = "https://127.0.0.1:%d" % port
    with open(ca, "rb") as f:
        ca_pem = f.read()
    for r in ROLES:
        _write(os.path.join(d, "kubeconfig-" + r),
               kubeconfig(url, ca_pem, r, toks[r]))
    _write(os.path.join(d, "kubeconfig"),
           kubeconfig(url, ca_pem, "admin", toks["admin"]))
    for t in tenants.load(d).values():
        _write(tenants.kubeconfig_path(d, t), tenant_kubeconfig(url, ca_pem,
                                                                t))
    _write(os.path.join(d, "port"), "%d\n" % port, 0o644)
    _write(os.path.join(d, "url"), url + "\n", 0o644)


def load_plugins(sim, which, options, d):
    """Import the part-2 modules and let them register."""
    sim.hooks.options = options
    sim.hooks.dir = d
    sim.hooks.log = sim.log
    here = os.path.dirname(os.path.abspath(__file__))
    want = None if which == "all" else set(
        x for x in which.split(",") if x and x != "none")
    for name in hooks.PLUGIN_MODULES:
        if want is not None and name not in want:
            continue
        if not os.path.exists(os.path.join(here, name + ".py")):
            continue
        mod = importlib.import_module("kubesim." + name)
        reg = getattr(mod, "register", None)
        if reg is not None:
            try:
                reg(sim.hooks)
            except ValueError as e:  # a bad --set value
                sys.stderr.write("kube-sim: %s\n" % e)
                sys.exit(2)
            sim.log("plug-in %s registered" % name)


def _controller_loop(sim, name, fn):
    """Run one controller; restart it after a crash."""
    while not sim.stop.is_set():
        try:
            fn(sim.api, sim.stop)
            return
        except Exception:
            import traceback
            sim.log("controller %s crashed:\n%s" % (name,
                                                    traceback.format_exc()))
            sim.stop.wait(1.0)


def start_controllers(sim):
    """One daemon thread per registered controller."""
    for name, fn in list(sim.hooks.controllers):
        t = threading.Thread(target=_controller_loop, args=(sim, name, fn),
                             name="ctl-" + name, daemon=True)
        t.start()
        sim.threads.append(t)


def seed(sim):
    """The namespaces every cluster has."""
    for n in ("default", "kube-system", "kube-public", "kube-node-lease"):
        sim.api.do_create(sim.resources.get("namespaces"), "", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": n}}, Who())
    for _, fn in list(sim.hooks.seeds):
        fn(sim.api)


def main(argv=None):
    """Entry point: python3 -m kubesim DIR [options]."""
    a = parse_args(argv if argv is not None else sys.argv[1:])
    d = os.path.abspath(a.dir)
    os.makedirs(d, exist_ok=True)
    options = dict(kv.split("=", 1) for kv in a.set if "=" in kv)
    try:
        rel = release_mod.Release.from_options(options)
    except ValueError as e:     # an unknown version or gate: refuse
        sys.stderr.write("kube-sim: %s\n" % e)
        sys.exit(2)
    # code with no handle on the simulator reads it as release.of(None)
    release_mod.configure(rel)
    sim = Sim(a.history, a.verbose, rel)
    sim.faults.bookmark_seconds = a.bookmark_seconds
    if a.tls_cert and a.tls_key:
        ca, crt, key = a.ca or a.tls_cert, a.tls_cert, a.tls_key
        if a.ca:
            with open(a.ca, "rb") as src:
                _write(os.path.join(d, "ca.crt"), src.read().decode(), 0o644)
    else:
        ca, crt, key = make_certs(d)
    toks = load_tokens(d)
    sim.tokens = {t: r for r, t in toks.items()}
    for k, v in options.items():
        if k.startswith("user.") and k[5:] in ROLES and v:
            sim.users[k[5:]] = v
    sim.dir = d
    sim.store.verify = options.get("verify-stored") == "on"
    load_plugins(sim, a.plugins, options, d)
    sim.log("release %s, gates on: %s" % (rel, ",".join(
        n for n, on in release_mod.table(rel).items() if on)))
    seed(sim)
    if a.faults:
        import json
        sim.faults.apply(json.loads(a.faults), sim)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    ctx.set_alpn_protocols(["h2", "http/1.1"] if a.http2 == "on" else
                           ["http/1.1"])
    srv = Server(("127.0.0.1", a.port), sim, ctx)
    port = srv.server_address[1]
    write_files(d, port, os.path.join(d, "ca.crt") if os.path.exists(
        os.path.join(d, "ca.crt")) else ca, toks)
    start_controllers(sim)

    def on_term(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    sim.log("kube-sim listening on https://127.0.0.1:%d (pid %d), "
            "Kubernetes %s" % (port, os.getpid(),
                               sim.release.version_info()["gitVersion"]))
    srv.serve_forever(poll_interval=0.2)
    srv.goaway_all()
    sim.stop.set()
    for t in sim.threads:
        t.join(2.0)
    sim.log("kube-sim stopped")
    sys.stderr.flush()
    os._exit(0)
