#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small HTTPS server for the unit tests of kube/kube.c.

Usage: kube_testserver.py DIR
Makes a CA and a server certificate for 127.0.0.1 in DIR (with openssl),
serves HTTPS on a free port and writes DIR/port when ready. Behaviour is
chosen by the path, so one server serves every test:

  GET  /ok                       200 {"kind":"Thing","ok":true}
  ANY  /echo                     200 {"method","body","ctype","auth","ua"}
  GET  /status/CODE              Status JSON with that code, no retry hints
  GET  /flaky/KEY?code=C&n=N&ra=S  C (429/500/503) N times, then 200;
                                 Retry-After: S when ra is given
  GET  /hits/KEY                 {"count":N,"t":[server times in s]}
  GET  /plain404                 text/plain 404 page not found
  GET  /big?n=BYTES              200 with a JSON string of that size
  ANY  /raw?code=C               C (default 200) answering the request's
                                 body, byte for byte, as application/json
  GET  /list?limit=L[&continue=T]  paginated list of 7 items, rv "42";
                                 continue=expired gives 410; pad=N gives
                                 each item N bytes more
  GET  /watch/NAME               chunked watch script (see WATCH below)
"""
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

HITS = {}
LOCK = threading.Lock()
T0 = time.monotonic()


def ev(typ, name, rv):
    obj = {"kind": "Thing", "apiVersion": "v1",
           "metadata": {"name": name, "resourceVersion": str(rv)}}
    return json.dumps({"type": typ, "object": obj}) + "\n"


def expired():
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {},
          "status": "Failure", "message": "too old resource version: 5 (120)",
          "reason": "Expired", "code": 410}
    return json.dumps({"type": "ERROR", "object": st}) + "\n"


def split_every(data, sizes):
    """Cut data into pieces of the given sizes (cycled)."""
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i:i + n])
        i += n
        k += 1
    return out


def watch_script(name):
    """(chunks, then) for a watch script; then is 'end' or 'hang'."""
    three = ev("ADDED", "a", 10) + ev("MODIFIED", "b", 11) + \
        ev("DELETED", "c", 12)
    big = json.dumps({"type": "ADDED", "object": {
        "kind": "Thing", "metadata": {"name": "big", "resourceVersion": "13"},
        "data": "x" * 300000}}) + "\n"
    book = json.dumps({"type": "BOOKMARK", "object": {
        "kind": "Thing", "apiVersion": "v1", "metadata": {
            "resourceVersion": "99", "annotations": {
                "k8s.io/initial-events-end": "true"}}}}) + "\n"
    scripts = {
        "split": (split_every(three, [1, 7, 30, 2]), "end"),
        "big": (split_every(big + ev("ADDED", "after", 14), [4096, 777]),
                "end"),
        "bookmark": ([ev("ADDED", "a", 10), book], "end"),
        "expired": ([ev("ADDED", "a", 10), expired()], "end"),
        "garbage": ([ev("ADDED", "a", 10), "{not json\n"], "end"),
        "truncated": ([ev("ADDED", "a", 10), '{"type":"ADD'], "end"),
        "stall": ([ev("ADDED", "a", 10)], "hang"),
        "empty": ([], "end"),
    }
    return scripts[name]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, obj=None, text=None, headers=None):
        body = (json.dumps(obj) if obj is not None else text or "").encode()
        self.send_response(code)
        ctype = "application/json" if obj is not None else "text/plain"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def status(self, code, reason, msg, headers=None):
        self.reply(code, {"kind": "Status", "apiVersion": "v1",
                          "metadata": {}, "status": "Failure",
                          "message": msg, "reason": reason, "code": code},
                   headers=headers)

    def chunk(self, data):
        b = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.flush()

    def do_watch(self, name):
        chunks, then = watch_script(name)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for c in chunks:
            self.chunk(c)
            time.sleep(0.01)
        if then == "hang":
            time.sleep(20)
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_list(self, q):
        limit = int(q.get("limit", ["500"])[0])
        cont = q.get("continue", [""])[0]
        if cont == "expired":
            return self.status(410, "Expired", "The provided continue "
                               "parameter is too old")
        start = int(cont) if cont else 0
        pad = "p" * int(q.get("pad", ["0"])[0])
        items = [{"metadata": {"name": "item%d" % i}, "pad": pad}
                 if pad else {"metadata": {"name": "item%d" % i}}
                 for i in range(start, min(7, start + limit))]
        md = {"resourceVersion": "42"}
        nxt = start + limit
        if nxt < 7:
            md["continue"] = "expired" if q.get("expire") else str(nxt)
            md["remainingItemCount"] = 7 - nxt
        self.reply(200, {"kind": "ThingList", "apiVersion": "v1",
                         "metadata": md, "items": items})

    def handle_any(self):
        u = urlparse(self.path)
        q = parse_qs(u.query)
        parts = u.path.strip("/").split("/")
        n = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(n) if n else b""
        body = raw.decode(errors="replace")
        key = parts[1] if len(parts) > 1 else ""
        if parts[0] in ("flaky", "echo", "ok"):
            with LOCK:
                HITS.setdefault(key or parts[0], []).append(
                    time.monotonic() - T0)
        if parts[0] == "ok":
            return self.reply(200, {"kind": "Thing", "ok": True})
        if parts[0] == "echo":
            return self.reply(200, {
                "method": self.command, "body": body,
                "ctype": self.headers.get("Content-Type", ""),
                "auth": self.headers.get("Authorization", ""),
                "ua": self.headers.get("User-Agent", "")})
        if parts[0] == "status":
            return self.status(int(key), "Test", "status %s" % key)
        if parts[0] == "flaky":
            with LOCK:
                count = len(HITS[key])
            if count <= int(q.get("n", ["1"])[0]):
                code = int(q.get("code", ["500"])[0])
                hdr = {"Retry-After": q["ra"][0]} if "ra" in q else {}
                if code == 429:
                    return self.reply(429, text="Too many requests, please "
                                      "try again later.\n", headers=hdr)
                return self.status(code, "InternalError", "flaky",
                                   headers=hdr)
            return self.reply(200, {"kind": "Thing", "attempt": count})
        if parts[0] == "hits":
            with LOCK:
                t = list(HITS.get(key, []))
            return self.reply(200, {"count": len(t), "t": t})
        if parts[0] == "plain404":
            return self.reply(404, text="404 page not found\n")
        if parts[0] == "big":
            return self.reply(200, {"s": "y" * int(q["n"][0])})
        if parts[0] == "raw":
            self.send_response(int(q.get("code", ["200"])[0]))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            return self.wfile.write(raw)
        if parts[0] == "list":
            return self.do_list(q)
        if parts[0] == "watch":
            return self.do_watch(key)
        return self.reply(404, text="404 page not found\n")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass    # clients hang up on purpose (stall tests, caps)


def make_certs(d):
    """A CA, a server cert for 127.0.0.1/localhost, and an unrelated CA."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for ca in ("ca", "otherca"):
        run("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=kpgpud test %s" % ca, "-keyout",
            os.path.join(d, ca + ".key"), "-out", os.path.join(d, ca + ".crt"))
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-subj", "/CN=127.0.0.1", "-keyout",
        os.path.join(d, "server.key"), "-out", os.path.join(d, "server.csr"))
    run("x509", "-req", "-in", os.path.join(d, "server.csr"), "-CA",
        os.path.join(d, "ca.crt"), "-CAkey", os.path.join(d, "ca.key"),
        "-CAcreateserial", "-days", "2", "-extfile", ext, "-out",
        os.path.join(d, "server.crt"))


def main():
    d = sys.argv[1]
    make_certs(d)
    srv = Server(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"),
                        os.path.join(d, "server.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = os.path.join(d, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, os.path.join(d, "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
