# SPDX-License-Identifier: Apache-2.0
"""Object storage: one global resourceVersion counter, sorted keys per
resource for paged lists, a bounded event history and watch fan-out."""

import bisect
import collections
import json
import threading
import time

from .hooks import ApiError


def dumps(obj):
    """Compact JSON bytes, as the API server writes them."""
    return json.dumps(obj, separators=(",", ":"),
                      ensure_ascii=False).encode()


class Entry:
    """One stored object revision; its JSON is rendered once and cached."""

    __slots__ = ("obj", "res", "rv", "_full", "_item")

    def __init__(self, res, obj, rv):
        self.res = res
        self.obj = obj
        self.rv = rv
        self._full = None
        self._item = None

    def full(self):
        """JSON bytes of the object with kind and apiVersion."""
        if self._full is None:
            self._full = dumps(self.obj)
        return self._full

    def item(self):
        """JSON bytes as a list item (built-ins drop kind/apiVersion)."""
        if self._item is None:
            if self.res.builtin:
                self._item = dumps({k: v for k, v in self.obj.items()
                                    if k not in ("kind", "apiVersion")})
            else:
                self._item = self.full()
        return self._item

    def copy(self):
        """A private deep copy of the object."""
        return json.loads(self.full())


class Event:
    """One change: type, the new entry (last state for DELETED), old obj."""

    __slots__ = ("type", "entry", "old", "rv", "_line")

    def __init__(self, etype, entry, old):
        self.type = etype
        self.entry = entry
        self.old = old
        self.rv = entry.rv
        self._line = None

    def line(self):
        """The watch stream line for this event."""
        if self._line is None:
            self._line = (b'{"type":"' + self.type.encode() +
                          b'","object":' + self.entry.full() + b'}\n')
        return self._line


class RawLine:
    """A line written to a watch stream as is (fault injection)."""

    __slots__ = ("raw", "rv")

    def __init__(self, raw, rv):
        self.raw = raw
        self.rv = rv


def obj_key(res, namespace, name):
    """Storage key: 'ns/name' for namespaced resources, else 'name'."""
    return (namespace + "/" + name) if res.namespaced else name


class Watcher:
    """A queue of events for one watch; filled by the store on commit."""

    MAX_QUEUE = 200000

    def __init__(self, store, keys):
        self.store = store
        self.keys = keys
        self.queue = collections.deque()
        self.cond = threading.Condition(threading.Lock())
        self.closed = False
        self.overflow = False
        self.http = False

    def push(self, ev):
        """Queue one event (called with the store lock held)."""
        with self.cond:
            if self.http and len(self.queue) >= self.MAX_QUEUE:
                self.overflow = True
                self.closed = True
            else:
                self.queue.append(ev)
            self.cond.notify()

    def get(self, timeout):
        """Next event, or None on timeout or when closed."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.queue and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            if self.queue:
                return self.queue.popleft()
            return None

    def drain(self, n):
        """Up to n queued events without waiting."""
        out = []
        with self.cond:
            while self.queue and len(out) < n:
                out.append(self.queue.popleft())
        return out

    def close(self):
        """Stop the watch; the consumer sees None."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.store.remove_watcher(self)


class Store:
    """All objects of all resources, versioned by one counter."""

    def __init__(self, history=10000):
        self.lock = threading.RLock()
        self.rv = 1
        self.objects = {}
        self.sorted = {}
        self.history = collections.deque()
        self.history_max = max(1, history)
        self.history_start = 1
        self.watchers = set()
        self.rv_cond = threading.Condition(self.lock)
        # --set verify-stored=on: every revision's JSON is rendered when
        # it is stored, so changed_objects() can tell whether a reader
        # changed a stored object in place (readers share them).
        self.verify = False

    def _table(self, res):
        """The key->Entry dict of a resource and its sorted key list."""
        t = self.objects.get(res.key)
        if t is None:
            t = self.objects[res.key] = {}
            self.sorted[res.key] = []
        return t, self.sorted[res.key]

    def get(self, res, namespace, name):
        """The current Entry or None."""
        with self.lock:
            t, _ = self._table(res)
            return t.get(obj_key(res, namespace, name))

    def next_rv(self):
        """Allocate the next resourceVersion (lock held by the caller)."""
        self.rv += 1
        return self.rv

    def commit(self, etype, res, obj, old):
        """Store obj (already carrying its new RV) and record the event.

        For DELETED, obj is the last state and the key is removed.  The
        caller holds self.lock and allocated obj's RV with next_rv().
        """
        md = obj["metadata"]
        key = obj_key(res, md.get("namespace", ""), md["name"])
        t, keys = self._table(res)
        entry = Entry(res, obj, int(md["resourceVersion"]))
        if self.verify:
            entry.full()
        if etype == "DELETED":
            t.pop(key, None)
            i = bisect.bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                del keys[i]
        else:
            if key not in t:
                bisect.insort(keys, key)
            t[key] = entry
        ev = Event(etype, entry, old)
        self.history.append(ev)
        while len(self.history) > self.history_max:
            self.history_start = self.history.popleft().rv
        for w in list(self.watchers):
            if w.keys is None or res.key in w.keys:
                w.push(ev)
        self.rv_cond.notify_all()
        return entry

    def drop_resource(self, res):
        """Forget every object of a resource (CRD removal) with events."""
        with self.lock:
            t, _ = self._table(res)
            for e in list(t.values()):
                obj = e.copy()
                obj["metadata"]["resourceVersion"] = str(self.next_rv())
                self.commit("DELETED", res, obj, e.obj)
            self.objects.pop(res.key, None)
            self.sorted.pop(res.key, None)

    def changed_objects(self):
        """(revisions checked, keys of those whose object no longer
        matches the JSON rendered when it was stored), over the stored
        objects and the event history; only with verify on."""
        with self.lock:
            seen = {}
            for t in self.objects.values():
                for e in t.values():
                    seen[id(e)] = e
            for ev in self.history:
                if isinstance(ev, Event):
                    seen[id(ev.entry)] = ev.entry
            bad = []
            for e in seen.values():
                if e._full is not None and dumps(e.obj) != e._full:
                    md = e.obj.get("metadata") or {}
                    bad.append("%s %s@%d" % (e.res.key, obj_key(
                        e.res, md.get("namespace", ""), md.get("name", "")),
                        e.rv))
            return len(seen), sorted(bad)

    def count(self, res):
        """Number of stored objects of a resource."""
        with self.lock:
            return len(self._table(res)[0])

    def scan(self, res, namespace, start_after, match, limit):
        """Entries in key order after start_after that satisfy match.

        Returns (entries, last_key, remaining) where remaining is the number
        of keys after last_key in the scanned range (None if a filter
        other than the namespace applies and more may follow).
        """
        with self.lock:
            t, keys = self._table(res)
            lo, hi = 0, len(keys)
            if namespace and res.namespaced:
                lo = bisect.bisect_left(keys, namespace + "/")
                hi = bisect.bisect_left(keys, namespace + "0")
            if start_after is not None:
                lo = max(lo, bisect.bisect_right(keys, start_after))
            out = []
            i = lo
            while i < hi:
                e = t[keys[i]]
                i += 1
                if match is None or match(e.obj):
                    out.append(e)
                    if limit and len(out) >= limit:
                        break
            last = keys[i - 1] if out else None
            more = i < hi
            return out, last, (hi - i) if more else 0, self.rv

    def add_watcher(self, keys, since):
        """Register a watcher; replay history after `since` (int or None).

        Raises ApiError 410 when `since` is older than the history window.
        """
        w = Watcher(self, keys)
        with self.lock:
            if since is not None and since < self.rv:
                if since < self.history_start:
                    raise ApiError(410, "Expired", "too old resource "
                                   "version: %d (%d)" % (since,
                                                         self.history_start))
                for ev in self.history:
                    if ev.rv > since and (keys is None or
                                          ev.entry.res.key in keys):
                        w.queue.append(ev)
            self.watchers.add(w)
        return w

    def snapshot_and_watch(self, res, namespace, keys):
        """All current entries of res plus a watcher of later events."""
        w = Watcher(self, keys)
        with self.lock:
            entries, _, _, rv = self.scan(res, namespace, None, None, 0)
            self.watchers.add(w)
        return entries, rv, w

    def remove_watcher(self, w):
        """Unregister a watcher."""
        with self.lock:
            self.watchers.discard(w)

    def http_watchers(self):
        """The watches of HTTP clients (not of in-process controllers)."""
        with self.lock:
            return [w for w in self.watchers if w.http]

    def drop_watchers(self):
        """Close every open HTTP watch (fault injection)."""
        with self.lock:
            ws = [w for w in self.watchers if w.http]
        for w in ws:
            w.dropped = True
            w.close()
        return len(ws)

    def inject_raw(self, line):
        """Queue a raw (garbage) line to every open watch (fault)."""
        with self.lock:
            ws = [w for w in self.watchers if w.http]
            for w in ws:
                w.push(RawLine(line, self.rv))
        return len(ws)

    def forget_history(self):
        """Drop the event history: every resume before now gets 410."""
        with self.lock:
            self.history.clear()
            self.history_start = self.rv

    def wait_rv(self, rv, timeout):
        """Wait until the global RV reaches rv; True if it did."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.rv < rv:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.rv_cond.wait(left)
            return True
