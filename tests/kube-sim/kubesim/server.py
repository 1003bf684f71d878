# SPDX-License-Identifier: Apache-2.0
"""The HTTPS front end: routing, authentication and authorization, lists,
watches, tables, fault injection and request statistics."""

import base64
import gc
import http.server
import json
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

from . import kinds, tables, tenants
from . import release as release_mod
from . import resources as resmod
from .api import Who
from .hooks import (ApiError, default_groups, err_bad_request, err_internal,
                    err_not_found, qualified)
from .selector import match_fields, match_labels, parse_fields, parse_labels
from .store import dumps

MAX_BODY = 3 * 1024 * 1024
MAX_DEPTH = 100
# /version of the default release (each simulator answers its own:
# sim.release.version_info())
VERSION = release_mod.Release().version_info()
READ_VERBS = {"get", "list", "watch"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
# The writer role (kpgpud-quota's needs): the write verbs it may use on a
# resource (not on its subresources).
WRITER = dict.fromkeys((
    "deviceclasses.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io",
    "resourceclaims.resource.k8s.io", "resourcequotas",
    "leases.coordination.k8s.io", "events", "configmaps"), WRITE_VERBS)
WRITER["namespaces"] = {"update", "patch"}
# kpgpud-quota --injection policy keeps its MutatingAdmissionPolicy
# (deploy/components/policy-injection/rbac-injection.yaml; resourceNames
# are not modelled)
WRITER.update(dict.fromkeys((
    "mutatingadmissionpolicies.admissionregistration.k8s.io",
    "mutatingadmissionpolicybindings.admissionregistration.k8s.io"),
    {"create", "update", "delete"}))
PATCH_TYPES = {"application/json-patch+json": "json",
               "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic"}


def _depth(v):
    """Nesting depth of a JSON value (iterative, so it cannot overflow)."""
    best, stack = 0, [(v, 1)]
    while stack:
        x, d = stack.pop()
        best = max(best, d)
        if isinstance(x, dict):
            stack.extend((y, d + 1) for y in x.values())
        elif isinstance(x, list):
            stack.extend((y, d + 1) for y in x)
    return best


def authorized(role, verb, res, sub):
    """RBAC of the four simulated roles."""
    if role in ("admin", "internal"):
        return True
    if role in ("read-only", "writer") and verb in READ_VERBS:
        return True
    if role != "writer" or sub:
        return False
    return verb in WRITER.get(res.key, ())


def forbidden_message(user, verb, res, sub, ns, name):
    """The RBAC 403 text (responsewriters/errors.go)."""
    r = res.resource + ("/" + sub if sub else "")
    head = ('%s "%s" is forbidden' % (qualified(res), name) if name else
            "%s is forbidden" % qualified(res))
    where = ('in the namespace "%s"' % ns) if ns else "at the cluster scope"
    return '%s: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        head, user, verb, r, res.group, where)


class Route:
    """A parsed resource URL."""

    def __init__(self, res, version, ns, name, sub):
        self.res = res
        self.version = version
        self.ns = ns
        self.name = name
        self.sub = sub


class Stats:
    """Request counts per role, verb and resource."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        """Zero every counter."""
        with getattr(self, "lock"):
            self.total = 0
            self.roles = {}
            self.resources = {}
            self.codes = {}
            self.protocols = {}
            self.role_protocols = {}

    def add(self, role, verb, resource, code, protocol="HTTP/1.1"):
        """Count one request."""
        with self.lock:
            self.total += 1
            self.protocols[protocol] = self.protocols.get(protocol, 0) + 1
            p = self.role_protocols.setdefault(role, {})
            p[protocol] = p.get(protocol, 0) + 1
            r = self.roles.setdefault(role, {})
            r[verb] = r.get(verb, 0) + 1
            if resource:
                v = self.resources.setdefault(role, {}).setdefault(verb, {})
                v[resource] = v.get(resource, 0) + 1
            c = self.codes.setdefault(role, {})
            c[str(code)] = c.get(str(code), 0) + 1

    def snapshot(self, sim):
        """The /sim/stats document."""
        with self.lock:
            out = json.loads(json.dumps({
                "total": self.total, "roles": self.roles,
                "resources": self.resources, "codes": self.codes,
                "protocols": self.protocols,
                "role_protocols": self.role_protocols}))
        out["watches_open"] = len(sim.store.http_watchers())
        out["objects_copied"] = sim.api.copied
        from . import controllers
        out["controllers"] = controllers.stats_snapshot()
        out["resource_version"] = sim.store.rv
        h2stats = getattr(sim, "h2stats", None)
        if h2stats is not None:
            out["h2"] = h2stats.snapshot()
        from . import vap
        out["vap"] = vap.cost_snapshot()
        return out


class Handler(http.server.BaseHTTPRequestHandler):
    """One HTTP/1.1 connection (keep-alive) of the simulated API server."""

    protocol_version = "HTTP/1.1"
    garbage = None
    truncated = False
    server_version = "kube-sim"
    sys_version = ""
    timeout = 600

    def setup(self):
        """Finish the TLS handshake in this connection's thread."""
        self.request.settimeout(30)
        self.h2 = False
        if isinstance(self.request, ssl.SSLSocket):
            try:
                self.request.do_handshake()
                self.h2 = self.request.selected_alpn_protocol() == "h2"
            except (ssl.SSLError, OSError):
                self.close_connection = True
        self.request.settimeout(self.timeout)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle(self):
        """Serve requests until the client goes away (h2 when ALPN chose
        it, else HTTP/1.1 keep-alive)."""
        if self.h2:
            from .h2serve import H2Connection
            H2Connection(self.server, self.request,
                         self.client_address).serve()
            return
        self.server.conn_add(self.request)
        try:
            super().handle()
        except (ssl.SSLError, OSError):
            pass
        finally:
            self.server.conn_remove(self.request)

    def log_message(self, fmt, *args):
        """Access log lines go to the simulator log, not stderr noise."""
        self.server.sim.log(fmt % args)

    def log_request(self, code="-", size="-"):
        """Called as the status line is sent (HTTP/1.1 and h2): the request
        is counted now, before any byte of its answer can reach the
        client, so a client that has its answer finds it in /sim/stats.
        Only errors are logged (the bench makes 100k requests)."""
        self._count(code if isinstance(code, int) else 0)
        if isinstance(code, int) and code >= 400 or self.server.sim.verbose:
            self.server.sim.log('%s %s %s %s' % (
                getattr(self, "role", "-"), self.command, self.path, code))

    def _count(self, code):
        """Count the request being answered in /sim/stats, once."""
        st, self._stat = getattr(self, "_stat", None), None
        if st is not None:
            self.server.sim.stats.add(
                self.role, st[0], st[1], code,
                "HTTP/2" if self.request_version == "HTTP/2.0"
                else "HTTP/1.1")

    # --- responses ---------------------------------------------------------

    def _send(self, code, body, ctype="application/json", headers=None):
        """Write a complete response (or garbage, when injected)."""
        mode = self.garbage
        self.garbage = None
        if mode == "junk":
            body = b'{"kind":\x00 this is not JSON'
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for w in getattr(self, "warnings", []):
            self.send_header("Warning", '299 - "%s"' % w.replace(
                '"', '\\"'))
        if mode == "truncate":
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])
            self.close_connection = True
            self.truncated = True
        elif self.command == "HEAD":
            self.end_headers()
        elif self.request_version == "HTTP/2.0":
            self.end_headers()      # h2 sends a whole response at once
            self.wfile.write(body)
        else:
            # HTTP/1.1: the head and the body in one write, as the API
            # server's buffered writer sends an answer (one TLS record and
            # one segment for a small answer, not a head then a body)
            self._headers_buffer.append(b"\r\n")
            head, self._headers_buffer = b"".join(self._headers_buffer), []
            self.wfile.write(head + body)
        self.code = code

    def send_chunk(self, data):
        """One chunk of a streamed body; b'' is the last chunk."""
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")

    def end_watch(self, dropped):
        """End a watch stream (HTTP/1.1: the last chunk, even when the
        watch was dropped: the stream ends as after timeoutSeconds)."""
        self.send_chunk(b"")

    def on_watch(self, w):
        """The watch this request serves (h2 closes it on RST_STREAM)."""

    def send_obj(self, code, obj, headers=None):
        """Write a JSON object."""
        self._send(code, obj if isinstance(obj, bytes) else dumps(obj),
                   headers=headers)

    def send_error_obj(self, err):
        """Write an ApiError as a Status (or plain text)."""
        if err.plain is not None:
            self._send(err.code, err.plain.encode(),
                       "text/plain; charset=utf-8", err.headers)
        else:
            self.send_obj(err.code, err.status(), err.headers)

    # --- request plumbing --------------------------------------------------

    def _read_body(self):
        """The request body (capped), or b''."""
        if self._body_done:
            return b""
        self._body_done = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
                if len(out) > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge", "Request "
                                   "entity too large: limit is 3145728")
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            if n > 8 * MAX_BODY:
                self.close_connection = True
            else:
                while n > 0:
                    n -= len(self.rfile.read(min(n, 65536)) or b"x" * n)
            raise ApiError(413, "RequestEntityTooLarge", "Request entity too "
                           "large: limit is 3145728")
        return self.rfile.read(n) if n else b""

    def _drain(self):
        """Discard an unread request body so keep-alive stays in sync."""
        if self._body_done:
            return
        try:
            self._read_body()
        except (ApiError, ValueError):
            self.close_connection = True

    def _json_body(self):
        """The body as JSON (400 on garbage, 415 on other encodings)."""
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/vnd.kubernetes.protobuf":
            from .proto import decode_object
            return decode_object(self._read_body())
        if "protobuf" in ctype or "cbor" in ctype:
            self._read_body()
            raise ApiError(415, "UnsupportedMediaType", "the body of the "
                           "request was in an unknown format - accepted "
                           "media types include: application/json, "
                           "application/yaml")
        raw = self._read_body()
        if not raw:
            return None
        try:
            body = json.loads(raw)
            if _depth(body) > MAX_DEPTH:
                raise RecursionError()
            return body
        except RecursionError:
            raise err_bad_request("the object provided is unrecognized: "
                                  "exceeded max depth")
        except ValueError as e:
            raise err_bad_request("the object provided is unrecognized: %s" %
                                  e)

    def _authenticate(self):
        """Set self.role, self.user, self.groups, self.uid (and
        self.tenant for a tenant token) from the bearer token."""
        auth = self.headers.get("Authorization", "")
        sim = self.server.sim
        self.tenant, self.uid = None, ""
        if not auth:
            self.role, self.user = "anonymous", "system:anonymous"
            self.groups = default_groups(self.user, self.role)
            return
        tok = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        role = sim.tokens.get(tok)
        if role is None and tok:
            t = sim.tenant(tok) if hasattr(sim, "tenant") else None
            if t is not None:
                self.role, self.user, self.tenant = "tenant", t.user, t
                self.groups, self.uid = t.groups, t.uid
                return
        if role is None:
            self.role, self.user, self.groups = "unauthenticated", "-", []
            raise ApiError(401, "Unauthorized", "Unauthorized")
        self.role, self.user = role, sim.users[role]
        self.groups = default_groups(self.user, role)

    def _dispatch(self):
        """Handle one request of any method."""
        sim = self.server.sim
        self.code = 0
        self.garbage = None
        self._body_done = False
        self.warnings = []
        self.role = "-"
        url = urllib.parse.urlsplit(self.path)
        self.q = {k: v[-1] for k, v in urllib.parse.parse_qs(
            url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        verb, rkey = "nonresource", None
        # [verb, resource] of what /sim/stats counts (not /sim/ calls)
        self._stat = None if path.startswith("/sim/") else [verb, rkey]
        try:
            self._authenticate()
            if path.startswith("/sim/"):
                return self._sim_endpoint(path)
            route = self._route(path)
            if route is not None:
                verb = self._verb(route)
                rkey = route.res.key + ("/" + route.sub if route.sub else "")
                self._stat = [verb, rkey]
            sim.faults.before(self.role, verb, rkey)
            if route is not None:
                self.garbage = sim.faults.garbage(self.role, verb, rkey)
            if route is None:
                return self._nonresource(path)
            self._authorize(verb, route)
            if not route.sub and verb not in route.res.verbs:
                raise ApiError(405, "MethodNotAllowed", "the server does "
                               "not allow this method on the requested "
                               "resource")
            getattr(self, "_do_" + verb)(route)
        except ApiError as e:
            if self.code:
                self.close_connection = True
            else:
                self._drain()
                self.send_error_obj(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # a bug in the simulator: answer 500
            sim.log("internal error on %s %s: %r" % (self.command, self.path,
                                                     e))
            import traceback
            sim.log(traceback.format_exc())
            if not self.code:
                self.send_error_obj(err_internal(str(e)))
            self.close_connection = True
        finally:
            self._count(self.code)  # no answer was started (client gone)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    def _verb(self, r):
        """The Kubernetes verb of a resource request."""
        m = self.command
        if m in ("GET", "HEAD"):
            if r.name:
                return "get"
            return "watch" if self.q.get("watch") in ("1", "true") else "list"
        if m == "POST":
            if r.name and not r.sub:
                raise ApiError(405, "MethodNotAllowed", "the server does not "
                               "allow this method on the requested resource")
            return "create"
        if m == "PUT":
            return "update"
        if m == "PATCH":
            return "patch"
        if m == "DELETE":
            return "delete" if r.name else "deletecollection"
        raise ApiError(405, "MethodNotAllowed", "the server does not allow "
                       "this method on the requested resource")

    def _authorize(self, verb, r):
        """403 unless the role may do verb on the resource."""
        ns = r.ns or (r.name if r.res.desc is kinds.NAMESPACE else "")
        if self.role == "tenant":
            ok = tenants.allowed(self.tenant, verb, r.res, r.sub, ns)
        else:
            ok = self.role != "anonymous" and authorized(self.role, verb,
                                                         r.res, r.sub)
        if not ok:
            msg = forbidden_message(self.user, verb, r.res, r.sub, ns,
                                    r.name)
            d = {"name": r.name} if r.name else {}
            if r.res.group:
                d["group"] = r.res.group
            d["kind"] = r.res.resource
            raise ApiError(403, "Forbidden", msg, d)

    def _route(self, path):
        """Parse a resource path, None for non-resource paths."""
        parts = path.strip("/").split("/")
        sim = self.server.sim
        if parts[0] == "api" and len(parts) >= 3 and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        ns = ""
        if rest[0] == kinds.NAMESPACE.plural and len(rest) >= 3 and \
                kinds.NAMESPACE.subresource(rest[2]) is None:
            ns, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "404 page not found",
                           plain="404 page not found")
        res = sim.resources.lookup(group, version, rest[0])
        if res is None or (ns and not res.namespaced):
            raise ApiError(404, "NotFound", "404 page not found",
                           plain="404 page not found")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in res.subresources:
            raise ApiError(404, "NotFound", "404 page not found",
                           plain="404 page not found")
        if res.namespaced and name and not ns:
            raise ApiError(404, "NotFound", "404 page not found",
                           plain="404 page not found")
        return Route(res, version, ns, name, sub)

    # --- non-resource endpoints -------------------------------------------

    def _nonresource(self, path):
        """/version, discovery, OpenAPI, health."""
        sim = self.server.sim
        if path in ("/healthz", "/livez", "/readyz"):
            return self._send(200, b"ok", "text/plain; charset=utf-8")
        if path == "/version":
            return self.send_obj(200, sim.release.version_info())
        if self.role == "anonymous":
            raise ApiError(403, "Forbidden", 'forbidden: User '
                           '"system:anonymous" cannot get path "%s"' % path,
                           {})
        doc = None
        parts = path.strip("/").split("/")
        if path == "/api":
            doc = resmod.discovery_api()
        elif path == "/apis":
            doc = resmod.discovery_apis(sim.resources)
        elif path == "/api/v1":
            doc = resmod.discovery_resources(sim.resources, "", "v1")
        elif parts[0] == "apis" and len(parts) == 2:
            doc = resmod.discovery_group(sim.resources, parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = resmod.discovery_resources(sim.resources, parts[1],
                                             parts[2])
        elif path == "/openapi/v3":
            doc = resmod.openapi_root(sim.resources)
        elif parts[0] == "openapi" and len(parts) >= 4 and parts[1] == "v3":
            if parts[2] == "api" and len(parts) == 4:
                doc = resmod.openapi_doc(sim.resources, "", parts[3])
            elif parts[2] == "apis" and len(parts) == 5:
                doc = resmod.openapi_doc(sim.resources, parts[3], parts[4])
            if doc is not None and not doc["paths"]:
                doc = None
        if doc is None:
            raise ApiError(404, "NotFound", "404 page not found",
                           plain="404 page not found")
        self.send_obj(200, doc)

    # --- /sim/ -------------------------------------------------------------

    def _sim_endpoint(self, path):
        """Admin-only fault injection and statistics."""
        sim = self.server.sim
        if self.role != "admin":
            raise ApiError(403, "Forbidden", 'forbidden: User "%s" cannot '
                           '%s path "%s"' % (self.user, self.command.lower(),
                                             path), {})
        if path == "/sim/stats" and self.command == "GET":
            return self.send_obj(200, sim.stats.snapshot(sim))
        if path == "/sim/stored-check" and self.command == "GET":
            n, bad = sim.store.changed_objects()
            return self.send_obj(200, {"verify": sim.store.verify,
                                       "checked": n, "changed": bad[:20],
                                       "changed_count": len(bad)})
        if path == "/sim/stats/reset" and self.command == "POST":
            self._read_body()       # any body is ignored, but read
            sim.stats.reset()
            sim.h2stats.reset()
            from . import vap
            vap.cost_reset()
            return self.send_obj(200, {"reset": True})
        if path == "/sim/release" and self.command == "GET":
            return self.send_obj(200, sim.release.describe())
        if path == "/sim/faults" and self.command == "GET":
            return self.send_obj(200, sim.faults.describe())
        if path == "/sim/faults" and self.command == "POST":
            body = self._json_body() or {}
            if not isinstance(body, dict):
                raise err_bad_request("faults must be a JSON object")
            return self.send_obj(200, sim.faults.apply(body, sim, self))
        if path == "/sim/bulk" and self.command == "POST":
            return self._sim_bulk()
        fn = sim.hooks.sim_endpoints.get((self.command, path))
        if fn is not None:
            body = self._json_body() if self.command != "GET" else None
            code, out = fn(body)
            return self.send_obj(code, out)
        raise ApiError(404, "NotFound", "404 page not found",
                       plain="404 page not found")

    def _sim_bulk(self):
        """Create many objects through the normal pipeline (fixtures)."""
        sim = self.server.sim
        body = self._json_body() or {}
        items = body.get("items") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise err_bad_request("expected {\"items\": [...]}")
        made, errors = 0, []
        for o in items:
            try:
                res = sim.api.resource_for_kind(o.get("apiVersion", ""),
                                                o.get("kind", ""))
                ns = (o.get("metadata") or {}).get("namespace", "") \
                    if res.namespaced else ""
                who = Who("admin", "admin")
                who.track = False   # fixtures: no managedFields
                sim.api.do_create(res, ns, o, who)
                made += 1
            except ApiError as e:
                if len(errors) < 20:
                    errors.append(e.message)
        # The stored objects are long-lived and hold no cycles: moved out
        # of the collector's generations, a full collection no longer
        # walks them all with the GIL held (they are still freed by
        # reference counting when replaced or deleted).
        gc.freeze()
        self.send_obj(200, {"created": made, "errors": errors})

    # --- resource verbs ----------------------------------------------------

    def _who(self, dry_run=None):
        """The Who of this request, with its query options."""
        dr = dry_run if dry_run is not None else self.q.get("dryRun") == "All"
        fv = self.q.get("fieldValidation") or "Warn"
        if fv not in ("Strict", "Warn", "Ignore"):
            raise err_bad_request("fieldValidation must be one of Strict, "
                                  "Warn, Ignore: %s" % fv)
        w = Who(self.user, self.role, dr, dict(self.q), fv,
                getattr(self, "groups", None), getattr(self, "uid", ""),
                self.headers.get("User-Agent", ""))
        self.warnings = w.warnings
        return w

    def _render(self, r, entry):
        """An entry's JSON in the requested version (the versions of a
        kind served in several have the same fields here: only
        apiVersion changes)."""
        if entry.res.builtin and len(r.res.versions) == 1:
            return entry.full()
        want = r.res.api_version_for(r.version)
        if entry.obj.get("apiVersion") == want:
            return entry.full()
        return dumps(dict(entry.obj, apiVersion=want))

    def _wants_table(self):
        """True when the client asked for a meta.k8s.io Table."""
        return "as=Table" in self.headers.get("Accept", "")

    def _do_get(self, r):
        """GET one object."""
        sim = self.server.sim
        e = sim.store.get(r.res, r.ns, r.name)
        if e is None:
            raise err_not_found(r.res, r.name)
        if self._wants_table():
            t = tables.table(r.res, r.version, [e.obj], e.rv,
                             include=self.q.get("includeObject", "Metadata"))
            return self.send_obj(200, t)
        self.send_obj(200, self._render(r, e))

    def _matcher(self, r):
        """Selector match function for a list/watch, or None."""
        lsel = parse_labels(self.q.get("labelSelector"))
        fsel = parse_fields(self.q.get("fieldSelector"), r.res.fields)
        if not lsel and not fsel:
            return None
        return lambda o: (match_labels(lsel, o["metadata"].get("labels")) and
                          match_fields(fsel, o))

    def _list_rv_checks(self):
        """resourceVersion / resourceVersionMatch / continue rules."""
        q = self.q
        rv, match, cont = q.get("resourceVersion"), q.get(
            "resourceVersionMatch"), q.get("continue")
        errs = []
        if match and not rv:
            errs.append("resourceVersionMatch: Forbidden: resourceVersionMatch "
                        "is forbidden unless resourceVersion is provided")
        if match and cont:
            errs.append("resourceVersionMatch: Forbidden: resourceVersionMatch "
                        "is forbidden when continue is provided")
        if match == "Exact" and rv == "0":
            errs.append("resourceVersionMatch: Forbidden: resourceVersionMatch "
                        "\"exact\" is forbidden for resourceVersion \"0\"")
        if q.get("sendInitialEvents") and q.get("watch") not in ("1", "true"):
            errs.append("sendInitialEvents: Forbidden: sendInitialEvents is "
                        "forbidden for list")
        if errs:
            body = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
            raise ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is '
                           'invalid: ' + body, {"kind": "ListOptions",
                                                "group": "meta.k8s.io"})
        if rv and rv != "0":
            try:
                n = int(rv)
            except ValueError:
                raise ApiError(400, "BadRequest", "invalid resource version:"
                               " %s" % rv)
            sim = self.server.sim
            if match == "Exact" and n < sim.store.history_start:
                raise ApiError(410, "Expired", "The resourceVersion for the "
                               "provided list is too old.")
            if not sim.store.wait_rv(n, 3.0):
                raise ApiError(504, "Timeout", "Too large resource version: "
                               "%d, current: %d" % (n, sim.store.rv), {
                                   "causes": [{"reason":
                                               "ResourceVersionTooLarge",
                                               "message": "Too large "
                                               "resource version"}],
                                   "retryAfterSeconds": 1})

    def _decode_continue(self, tok):
        """(rv, start key) from a continue token."""
        sim = self.server.sim
        try:
            d = json.loads(base64.urlsafe_b64decode(tok.encode()))
            rv, start = int(d["rv"]), str(d["start"])
        except (ValueError, KeyError, TypeError):
            raise err_bad_request("continue key is not valid: %s" % tok)
        if rv < sim.store.history_start:
            raise ApiError(410, "Expired", "The provided continue parameter "
                           "is too old to display a consistent list result. "
                           "You can start a new list without the continue "
                           "parameter.", {})
        return rv, start

    def _do_list(self, r):
        """LIST with selectors and pagination."""
        sim = self.server.sim
        self._list_rv_checks()
        match = self._matcher(r)
        try:
            limit = int(self.q.get("limit") or 0)
        except ValueError:
            limit = 0
        start, first_rv = None, None
        if self.q.get("continue"):
            first_rv, start = self._decode_continue(self.q["continue"])
        entries, last, remaining, rv = sim.store.scan(
            r.res, r.ns, start, match, max(0, limit))
        rv = first_rv or rv
        cont = None
        if limit > 0 and remaining:
            cont = base64.urlsafe_b64encode(json.dumps(
                {"rv": rv, "start": last}).encode()).decode()
        rem = remaining if (cont and match is None) else None
        if self._wants_table():
            t = tables.table(r.res, r.version, [e.obj for e in entries], rv,
                             cont, rem, self.q.get("includeObject",
                                                   "Metadata"))
            return self.send_obj(200, t)
        md = {"resourceVersion": str(rv)}
        if cont:
            md["continue"] = cont
            if rem is not None:
                md["remainingItemCount"] = rem
        head = dumps({"kind": r.res.list_kind,
                      "apiVersion": r.res.api_version_for(r.version),
                      "metadata": md})
        if r.res.builtin:
            items = b",".join(e.item() for e in entries)
        else:
            items = b",".join(self._render(r, e) for e in entries)
        self.send_obj(200, head[:-1] + b',"items":[' + items + b']}')

    def _do_watch(self, r):
        """WATCH: a chunked stream of events."""
        from .watch import serve_watch
        serve_watch(self, r)

    def _do_create(self, r):
        """POST a new object."""
        sim = self.server.sim
        body = self._json_body()
        if r.sub:
            raise ApiError(405, "MethodNotAllowed", "the server does not "
                           "allow this method on the requested resource")
        who = self._who()
        entry = sim.api.do_create(r.res, r.ns, body, who)
        self.warnings = who.warnings
        self.send_obj(201, self._render(r, entry))

    def _do_update(self, r):
        """PUT an object or a subresource."""
        sim = self.server.sim
        body = self._json_body()
        who = self._who()
        entry = sim.api.do_update(r.res, r.ns, r.name, body, who, r.sub)
        self.warnings = who.warnings
        self._reply_write(r, entry)

    def _reply_write(self, r, entry):
        """200 with the written object."""
        self.send_obj(200, self._render(r, entry))

    def _success(self, r, entry):
        """The Status a delete of some kinds returns."""
        d = {"name": r.name, "kind": r.res.resource,
             "uid": entry.obj["metadata"].get("uid", "")}
        if r.res.group:
            d["group"] = r.res.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Success", "details": d}

    def _patch_options(self, apply):
        """PatchOptions checks (ValidatePatchOptions): fieldManager is
        required for apply, force only for apply."""
        errs = []
        force = self.q.get("force")
        if apply and not self.q.get("fieldManager"):
            errs.append("fieldManager: Required value: is required for "
                        "apply patch")
        if force is not None and not apply:
            errs.append("force: Forbidden: may not be specified for "
                        "non-apply patch")
        if errs:
            body = errs[0] if len(errs) == 1 else \
                "[" + ", ".join(errs) + "]"
            raise ApiError(422, "Invalid", 'PatchOptions.meta.k8s.io "" is '
                           'invalid: ' + body, {"group": "meta.k8s.io",
                                                "kind": "PatchOptions"})
        return force in ("true", "1", "True")

    def _apply_body(self):
        """An apply configuration: JSON, or YAML (python3-yaml)."""
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except ValueError:
            try:
                import yaml
                body = yaml.safe_load(raw.decode("utf-8"))
            except ImportError:
                raise err_bad_request("the object provided is unrecognized")
            except Exception as e:  # yaml.YAMLError, UnicodeDecodeError
                raise err_bad_request("error decoding YAML: %s" % e)
        if _depth(body) > MAX_DEPTH:
            raise err_bad_request("the object provided is unrecognized: "
                                  "exceeded max depth")
        return body

    def _do_apply(self, r):
        """PATCH application/apply-patch+yaml: server-side apply (201 when
        it created the object)."""
        sim = self.server.sim
        force = self._patch_options(True)
        body = self._apply_body()
        who = self._who()
        entry, created = sim.api.do_apply(r.res, r.ns, r.name, body, who,
                                          r.sub, force)
        self.warnings = who.warnings
        self.send_obj(201 if created else 200, self._render(r, entry))

    def _do_patch(self, r):
        """PATCH with merge, JSON or strategic merge patch, or apply."""
        sim = self.server.sim
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/apply-patch+yaml":
            return self._do_apply(r)
        ptype = PATCH_TYPES.get(ctype)
        if ptype is None:
            raise ApiError(415, "UnsupportedMediaType", "the body of the "
                           "request was in an unknown format - accepted "
                           "media types include: application/json-patch+json"
                           ", application/merge-patch+json, application/"
                           "apply-patch+yaml" + (
                               ", application/strategic-merge-patch+json"
                               if r.res.builtin else ""))
        self._patch_options(False)
        body = self._json_body()
        who = self._who()
        entry = sim.api.do_patch(r.res, r.ns, r.name, body, ptype, who,
                                 r.sub)
        self.warnings = who.warnings
        self._reply_write(r, entry)

    def _delete_options(self):
        """DeleteOptions from the body and query."""
        body = self._json_body() or {}
        if not isinstance(body, dict):
            raise err_bad_request("invalid DeleteOptions")
        pol = body.get("propagationPolicy") or self.q.get(
            "propagationPolicy")
        if pol and pol not in ("Background", "Foreground", "Orphan"):
            raise ApiError(422, "Invalid", 'DeleteOptions.meta.k8s.io "" is '
                           'invalid: propagationPolicy: Unsupported value: '
                           '"%s": supported values: "Foreground", '
                           '"Background", "Orphan", "nil"' % pol)
        if body.get("orphanDependents") is True:
            pol = "Orphan"
        elif body.get("orphanDependents") is False and not pol:
            pol = "Background"
        dry = "All" in (body.get("dryRun") or []) or \
            self.q.get("dryRun") == "All"
        who = self._who(dry)
        who.options["propagationPolicy"] = pol or "Background"
        if "orphanDependents" in body:
            who.options["orphanDependents"] = body["orphanDependents"]
        return who, body.get("preconditions")

    def _do_delete(self, r):
        """DELETE one object."""
        sim = self.server.sim
        if r.sub:
            raise ApiError(405, "MethodNotAllowed", "the server does not "
                           "allow this method on the requested resource")
        who, pre = self._delete_options()
        entry, gone = sim.api.do_delete(r.res, r.ns, r.name, who, pre)
        if gone and not r.res.return_deleted:
            return self.send_obj(200, self._success(r, entry))
        code = 202 if not gone and who.options.get(
            "orphanDependents") is False else 200
        self.send_obj(code, self._render(r, entry))

    def _do_deletecollection(self, r):
        """DELETE a collection (with selectors)."""
        sim = self.server.sim
        match = self._matcher(r)
        who, _ = self._delete_options()
        entries, _, _, _ = sim.store.scan(r.res, r.ns, None, match, 0)
        items = []
        for e in entries:
            md = e.obj["metadata"]
            try:
                ent, _ = sim.api.do_delete(r.res, md.get("namespace", ""),
                                           md["name"], who)
                items.append(ent.obj)
            except ApiError as err:
                if err.code != 404:
                    raise
        self.send_obj(200, {"kind": r.res.list_kind,
                            "apiVersion": r.res.api_version_for(r.version),
                            "metadata": {"resourceVersion":
                                         str(sim.store.rv)},
                            "items": items})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """Threaded HTTPS server, one thread per connection."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, addr, sim, ssl_ctx):
        self.sim = sim
        self.ssl_ctx = ssl_ctx
        self.conns_lock = threading.Lock()
        self.h1_conns = set()
        self.h2_conns = set()
        from .h2serve import H2Stats
        self.h2stats = sim.h2stats = H2Stats()
        super().__init__(addr, Handler)

    def conn_add(self, sock):
        """Track an HTTP/1.1 connection (for the drop_connections fault)."""
        with self.conns_lock:
            self.h1_conns.add(sock)

    def conn_remove(self, sock):
        """Forget an HTTP/1.1 connection."""
        with self.conns_lock:
            self.h1_conns.discard(sock)

    def h2_add(self, conn):
        """Track an h2 connection (GOAWAY at shutdown)."""
        with self.conns_lock:
            self.h2_conns.add(conn)

    def h2_remove(self, conn):
        """Forget an h2 connection."""
        with self.conns_lock:
            self.h2_conns.discard(conn)

    def drop_connections(self, keep=None):
        """Cut every client connection but keep's: GOAWAY then close on
        h2, close on HTTP/1.1. Returns how many."""
        with self.conns_lock:
            h1 = [s for s in self.h1_conns if s is not keep]
            h2c = [c for c in self.h2_conns if c is not keep]
        for s in h1:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for c in h2c:
            c.send_goaway()
        return len(h1) + len(h2c)

    def goaway_all(self, wait=2.0):
        """Shutdown: GOAWAY on every h2 connection, wait until flushed."""
        with self.conns_lock:
            conns = list(self.h2_conns)
        for c in conns:
            c.send_goaway()
        end = time.monotonic() + wait
        while time.monotonic() < end:
            with self.conns_lock:
                if not self.h2_conns:
                    return
            time.sleep(0.02)

    def get_request(self):
        """Accept and wrap in TLS without handshaking in the accept loop."""
        sock, addr = self.socket.accept()
        if self.ssl_ctx is not None:
            sock = self.ssl_ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        """Log unexpected connection errors to the simulator log."""
        exc = sys.exc_info()[1]
        self.sim.log("connection error from %s: %r" % (client_address, exc))

