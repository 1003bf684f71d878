# SPDX-License-Identifier: Apache-2.0
"""The watch stream: chunked JSON events, bookmarks, timeouts, resume and
410 Expired, as staging/apiserver/pkg/endpoints/handlers/watch.go."""

import time

from . import tables
from .hooks import ApiError
from .store import dumps

BATCH = 512


def _chunk(h, data):
    """Write one piece of the stream (an HTTP/1.1 chunk, an h2 DATA
    frame); b'' ends it."""
    h.send_chunk(data)


def _start(h):
    """Send the 200 headers of a watch stream."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Cache-Control", "no-cache, private")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.code = 200


def _line(h, r, etype, entry):
    """One event line for an entry in the watched version (as a one-row
    Table, column definitions in the first only, when kubectl asks)."""
    if h.table_watch:
        t = tables.table(r.res, r.version, [entry.obj], entry.rv,
                         include=h.q.get("includeObject", "Metadata"))
        if h.table_sent:
            t["columnDefinitions"] = None
        h.table_sent = True
        return dumps({"type": etype, "object": t}) + b"\n"
    return (b'{"type":"' + etype.encode() + b'","object":' +
            h._render(r, entry) + b'}\n')


def _event_line(h, r, ev, match):
    """The line for a stored event after filtering, or None."""
    obj = ev.entry.obj
    if r.ns and obj["metadata"].get("namespace") != r.ns:
        return None
    if match is None:
        if ev.entry.res.builtin and not h.table_watch:
            return ev.line()
        return _line(h, r, ev.type, ev.entry)
    new_ok = match(obj)
    old_ok = ev.old is not None and ev.type == "MODIFIED" and match(ev.old)
    if ev.type == "MODIFIED":
        if new_ok and old_ok:
            etype = "MODIFIED"
        elif new_ok:
            etype = "ADDED"
        elif old_ok:
            etype = "DELETED"
        else:
            return None
    elif new_ok:
        etype = ev.type
    else:
        return None
    return _line(h, r, etype, ev.entry)


def _bookmark(r, rv, initial_end=False):
    """A BOOKMARK event line."""
    md = {"resourceVersion": str(rv)}
    if initial_end:
        md["annotations"] = {"k8s.io/initial-events-end": "true"}
    return dumps({"type": "BOOKMARK", "object": {
        "kind": r.res.kind, "apiVersion": r.res.api_version_for(r.version),
        "metadata": md}}) + b"\n"


def _bookmark_rv(store, w, last):
    """The RV a bookmark may claim: everything up to it has been sent."""
    with store.lock:
        with w.cond:
            if not w.queue:
                return store.rv
    return last


def _params(h):
    """(timeout seconds, bookmarks?, send initial events?) of a watch."""
    q = h.q
    try:
        timeout = float(q.get("timeoutSeconds") or 1800)
    except ValueError:
        raise ApiError(400, "BadRequest", "invalid timeoutSeconds")
    bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
    initial = q.get("sendInitialEvents") == "true"
    if initial and q.get("resourceVersionMatch") != "NotOlderThan":
        raise ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is '
                       'invalid: resourceVersionMatch: Forbidden: '
                       'sendInitialEvents requires setting '
                       'resourceVersionMatch to NotOlderThan',
                       {"kind": "ListOptions", "group": "meta.k8s.io"})
    return max(0.0, timeout), bookmarks, initial


def _open(h, r, match, initial):
    """Register the watcher; returns (watcher, initial lines, last rv)."""
    store = h.server.sim.store
    rv = h.q.get("resourceVersion")
    keys = {r.res.key}
    if rv in (None, "", "0") or initial:
        entries, cur, w = store.snapshot_and_watch(r.res, r.ns, keys)
        lines = [_line(h, r, "ADDED", e) for e in entries
                 if match is None or match(e.obj)]
        return w, lines, cur
    try:
        since = int(rv)
    except ValueError:
        raise ApiError(400, "BadRequest", "invalid resource version: %s" % rv)
    if not store.wait_rv(since, 3.0):
        raise ApiError(504, "Timeout", "Too large resource version: %d, "
                       "current: %d" % (since, store.rv), {
                           "causes": [{"reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource "
                                       "version"}], "retryAfterSeconds": 1})
    return store.add_watcher(keys, since), [], since


def serve_watch(h, r):
    """Serve one watch request until timeout, drop or disconnect."""
    sim = h.server.sim
    match = h._matcher(r)
    timeout, bookmarks, initial = _params(h)
    h.table_watch = h._wants_table()
    h.table_sent = False
    try:
        w, lines, last = _open(h, r, match, initial)
    except ApiError as e:
        if e.code not in (410, 504):
            raise
        _start(h)
        _chunk(h, dumps({"type": "ERROR", "object": e.status()}) + b"\n")
        _chunk(h, b"")
        return
    w.http = True
    h.on_watch(w)
    try:
        _start(h)
        for i in range(0, len(lines), BATCH):
            _chunk(h, b"".join(lines[i:i + BATCH]))
        if initial and bookmarks:
            _chunk(h, _bookmark(r, last, True))
        _stream(h, r, w, match, timeout, bookmarks, last)
        h.end_watch(getattr(w, "dropped", False))
    finally:
        w.close()
    sim.log("watch %s %s ended" % (h.role, h.path)) if sim.verbose else None


def _stream(h, r, w, match, timeout, bookmarks, last):
    """Forward events until the deadline; bookmarks on the way."""
    sim = h.server.sim
    store = sim.store
    deadline = time.monotonic() + timeout
    next_bm = time.monotonic() + sim.faults.bookmark_seconds
    while True:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            break
        wait = min(left, max(0.0, next_bm - now)) if bookmarks else left
        ev = w.get(min(wait, 5.0))
        sim.faults.running.wait()
        if ev is None:
            if w.closed:
                return
            if bookmarks and time.monotonic() >= next_bm:
                _chunk(h, _bookmark(r, _bookmark_rv(store, w, last)))
                next_bm = time.monotonic() + sim.faults.bookmark_seconds
            continue
        out = []
        for e in [ev] + w.drain(BATCH):
            last = e.rv
            line = getattr(e, "raw", None) or _event_line(h, r, e, match)
            if line is not None:
                out.append(line)
        if out:
            _chunk(h, b"".join(out))
        if w.closed and not w.queue:
            return
    if bookmarks:
        _chunk(h, _bookmark(r, _bookmark_rv(store, w, last)))
