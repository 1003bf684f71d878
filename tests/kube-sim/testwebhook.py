#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A tiny mutating admission webhook for the simulator's tests.

  testwebhook.py DIR [--san NAME]... [--sleep SECONDS]

Generates a CA and a server certificate for the SAN names (plus
127.0.0.1) with openssl in DIR, serves HTTPS/1.1 with keep-alive on
127.0.0.1 (a free port), and writes DIR/port, DIR/ca.crt, DIR/cabundle
(base64 of the CA PEM, for clientConfig.caBundle) and DIR/ready. Every
request is appended to DIR/requests.log as one JSON line.

The URL path picks the behaviour:
  /patch    allow with a JSON Patch that adds label
            kubesim.test/patched=true and annotation
            kubesim.test/review-uid=<request uid>
  /allow    allow without a patch
  /sleep    sleep --sleep seconds, then allow
  /garbage  answer 200 with a body that is not JSON
  /deny     allowed: false, status {code: 403, message: "no GPUs today"}
  /baduid   a well-formed review with the wrong response.uid
  /badpatch allow with a patch that cannot be applied
  /status500  answer 500 with a plain text body
  /claim    allow with the patch kpgpud-admit sends: add
            spec.resourceClaims [{name: gpu, resourceClaimTemplateName: gpu}]
            and resources.claims [{name: gpu}] to every container
  /badclaim only the container claims (the result fails validation)
  /unknown  allow with a patch that adds label kubesim.test/unknown=added
            and the unknown fields spec.bogusField and
            spec.containers[0].bogusField (the apiserver drops them)
"""

import argparse
import base64
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

MAX_BODY = 3 * 1024 * 1024


def run(cmd):
    """Run an openssl command quietly; exit on failure."""
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit("testwebhook: %s failed: %s" % (cmd[1], r.stderr.decode()))


def make_certs(d, sans):
    """CA + server certificate for SANS, signed by the CA."""
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, n) for n in ("tls.key", "tls.csr",
                                                  "tls.crt"))
    ext = os.path.join(d, "ext.cnf")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", ca_key, "-out", ca_crt, "-days", "2",
         "-subj", "/CN=kubesim-test-webhook-ca"])
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
         "-out", csr, "-subj", "/CN=%s" % sans[0]])
    alt = ",".join(["DNS:%s" % s for s in sans] + ["IP:127.0.0.1"])
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % alt)
    run(["openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey",
         ca_key, "-CAcreateserial", "-out", crt, "-days", "2", "-extfile",
         ext])
    with open(ca_crt, "rb") as f:
        bundle = base64.b64encode(f.read()).decode()
    with open(os.path.join(d, "cabundle"), "w") as f:
        f.write(bundle)
    return crt, key


def review_response(req, uid, allowed=True, patch=None, status=None):
    """An AdmissionReview v1 response body."""
    resp = {"uid": uid, "allowed": allowed}
    if patch is not None:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if status is not None:
        resp["status"] = status
    return {"apiVersion": req.get("apiVersion", "admission.k8s.io/v1"),
            "kind": "AdmissionReview", "response": resp}


def label_patch(obj, key, value, field="labels"):
    """JSON Patch ops that set metadata.<field>[key] = value."""
    md = obj.get("metadata") or {}
    esc = key.replace("~", "~0").replace("/", "~1")
    if md.get(field):
        return [{"op": "add", "path": "/metadata/%s/%s" % (field, esc),
                 "value": value}]
    return [{"op": "add", "path": "/metadata/" + field,
             "value": {key: value}}]


def claim_patch(obj, pod_level):
    """The GPU claim injection patch (optionally without the pod claim)."""
    ops = []
    if pod_level:
        ops.append({"op": "add", "path": "/spec/resourceClaims", "value": [
            {"name": "gpu", "resourceClaimTemplateName": "gpu"}]})
    for i, _ in enumerate((obj.get("spec") or {}).get("containers") or []):
        ops.append({"op": "add",
                    "path": "/spec/containers/%d/resources/claims" % i,
                    "value": [{"name": "gpu"}]})
    return ops


class Handler(http.server.BaseHTTPRequestHandler):
    """One HTTPS/1.1 connection; keep-alive as long as the client wants."""

    protocol_version = "HTTP/1.1"

    def setup(self):
        """Per-connection socket options."""
        super().setup()
        # Headers and body are separate writes: without this, Nagle plus
        # the client's delayed ACK stall every keep-alive answer ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        """Quiet: requests go to requests.log instead."""

    def _send(self, code, body, ctype="application/json"):
        """Write a complete response with Content-Length (keep-alive)."""
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _log(self, review):
        """Append one request record to requests.log."""
        rec = {"path": self.path, "peer": "%s:%d" % self.client_address,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "review": review, "time": time.time()}
        with self.server.log_lock:
            with open(self.server.log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")

    def do_POST(self):
        """Answer one AdmissionReview as the path's mode says."""
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self._send(413, b"too large", "text/plain")
            return
        raw = self.rfile.read(n)
        try:
            review = json.loads(raw)
        except ValueError:
            review = None
        self._log(review)
        if not isinstance(review, dict) or self.headers.get(
                "Content-Type") != "application/json":
            self._send(400, b"bad request", "text/plain")
            return
        req = review.get("request") or {}
        uid = req.get("uid", "")
        obj = req.get("object") or {}
        mode = self.path.split("?")[0].strip("/")
        if mode == "sleep":
            time.sleep(self.server.sleep)
            mode = "allow"
        if mode == "garbage":
            self._send(200, b"<html>this is not an AdmissionReview</html>",
                       "text/html")
            return
        if mode == "status500":
            self._send(500, b"webhook exploded", "text/plain")
            return
        if mode == "patch":
            ops = label_patch(obj, "kubesim.test/patched", "true")
            ops += label_patch(obj, "kubesim.test/review-uid", uid,
                               "annotations")
            out = review_response(review, uid, patch=ops)
        elif mode in ("claim", "badclaim"):
            out = review_response(review, uid, patch=claim_patch(
                obj, mode == "claim"))
        elif mode == "unknown":
            ops = label_patch(obj, "kubesim.test/unknown", "added")
            ops.append({"op": "add", "path": "/spec/bogusField",
                        "value": "x"})
            ops.append({"op": "add", "path": "/spec/containers/0/bogusField",
                        "value": {"nested": True}})
            out = review_response(review, uid, patch=ops)
        elif mode == "deny":
            out = review_response(review, uid, allowed=False, status={
                "code": 403, "message": "no GPUs today"})
        elif mode == "baduid":
            out = review_response(review, "not-" + uid)
        elif mode == "badpatch":
            out = review_response(review, uid, patch=[
                {"op": "remove", "path": "/metadata/no/such/path"}])
        else:
            out = review_response(review, uid)
        self._send(200, json.dumps(out).encode())


class Server(http.server.ThreadingHTTPServer):
    """Threaded HTTPS server."""

    daemon_threads = True
    allow_reuse_address = True


def main():
    """Make certificates, then serve until killed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--san", action="append", default=[])
    ap.add_argument("--sleep", type=float, default=5.0)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    sans = args.san or ["localhost"]
    crt, key = make_certs(args.dir, sans)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    ctx.set_alpn_protocols(["http/1.1"])
    srv = Server(("127.0.0.1", 0), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.sleep = args.sleep
    srv.log_path = os.path.join(args.dir, "requests.log")
    srv.log_lock = threading.Lock()
    open(srv.log_path, "w").close()
    with open(os.path.join(args.dir, "port"), "w") as f:
        f.write(str(srv.server_address[1]))
    with open(os.path.join(args.dir, "ready"), "w") as f:
        f.write("ok\n")
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
