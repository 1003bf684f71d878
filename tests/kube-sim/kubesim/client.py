# SPDX-License-Identifier: Apache-2.0
"""A small HTTPS client for a running simulator (used by simctl, bench.py
and the Python tests): keep-alive requests and watch streams."""

import http.client
import json
import os
import ssl
import urllib.parse


class Client:
    """Requests to the simulator in DIR with one role's token."""

    def __init__(self, d, role="admin", token=None):
        self.dir = d
        with open(os.path.join(d, "url")) as f:
            u = urllib.parse.urlsplit(f.read().strip())
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(
            cafile=os.path.join(d, "ca.crt"))
        if token is None:
            with open(os.path.join(d, "tokens")) as f:
                toks = dict(line.split() for line in f if line.strip())
            token = toks[role]
        self.token = token
        self.conn = None

    def _connect(self, timeout=30):
        """A new HTTPS connection."""
        return http.client.HTTPSConnection(self.host, self.port,
                                           context=self.ctx, timeout=timeout)

    def raw(self, method, path, body=None, ctype="application/json",
            headers=None):
        """(status, headers dict, body bytes) of one request."""
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            h["Content-Type"] = ctype
        h.update(headers or {})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request(method, path, body=body, headers=h)
                r = self.conn.getresponse()
                data = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, hdrs, data
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def req(self, method, path, body=None, ctype="application/json",
            headers=None):
        """(status, decoded JSON or text) of one request."""
        st, _, data = self.raw(method, path, body, ctype, headers)
        try:
            return st, json.loads(data)
        except ValueError:
            return st, data.decode(errors="replace")

    def watch(self, path, timeout=30):
        """A Stream over a watch URL (path includes the query)."""
        c = self._connect(timeout)
        h = {"Accept": "application/json",
             "Authorization": "Bearer " + self.token}
        c.request("GET", path, headers=h)
        return Stream(c, c.getresponse())


class Stream:
    """Events of one watch response, one JSON object per line."""

    def __init__(self, conn, resp):
        self.conn = conn
        self.resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}

    def next(self):
        """The next event dict, or None at the end of the stream."""
        line = self.resp.readline()
        if not line:
            return None
        return json.loads(line)

    def close(self):
        """Close the connection."""
        self.conn.close()
