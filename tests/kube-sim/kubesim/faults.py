# SPDX-License-Identifier: Apache-2.0
"""Fault injection: errors (random or counted), latency, pause, dropped
watches, cut connections and forgotten history, set through
POST /sim/faults."""

import random
import threading
import time

from .hooks import ApiError, err_bad_request

_KNOWN = {"error_rate", "error_code", "retry_after", "error_count",
          "error_verbs", "error_resources", "error_roles", "latency_ms",
          "pause", "drop_watches", "forget_history", "bookmark_seconds",
          "reset", "garbage_count", "garbage_mode", "watch_garbage",
          "drop_connections"}
GARBAGE_MODES = ("junk", "truncate")


class Faults:
    """The current fault settings of one simulator."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = threading.Event()
        self.running.set()
        self.bookmark_seconds = 60.0
        self._clear()

    def _clear(self):
        """No faults."""
        self.error_rate = 0.0
        self.error_code = 500
        self.retry_after = None
        self.error_count = 0
        self.error_verbs = None
        self.error_resources = None
        self.error_roles = None
        self.latency_ms = 0
        self.garbage_count = 0
        self.garbage_mode = "junk"
        self.injected = 0
        self.running.set()

    def describe(self):
        """The settings as JSON."""
        with self.lock:
            return {"error_rate": self.error_rate,
                    "error_code": self.error_code,
                    "retry_after": self.retry_after,
                    "error_count": self.error_count,
                    "error_verbs": self.error_verbs,
                    "error_resources": self.error_resources,
                    "error_roles": self.error_roles,
                    "latency_ms": self.latency_ms,
                    "garbage_count": self.garbage_count,
                    "garbage_mode": self.garbage_mode,
                    "paused": not self.running.is_set(),
                    "bookmark_seconds": self.bookmark_seconds,
                    "injected": self.injected}

    def _list(self, v, name):
        """A string list setting (None clears it)."""
        if v is None:
            return None
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise err_bad_request("%s must be a list of strings" % name)
        return v

    def _number(self, body, name, lo, hi):
        """A numeric setting within [lo, hi]."""
        v = body[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                not lo <= v <= hi:
            raise err_bad_request("%s must be a number in [%s, %s]" %
                                  (name, lo, hi))
        return v

    def apply(self, body, sim, h=None):
        """Apply a POST /sim/faults body (h: the request doing it, whose
        own connection drop_connections spares); returns what was done."""
        unknown = set(body) - _KNOWN
        if unknown:
            raise err_bad_request("unknown fault settings: %s" %
                                  ", ".join(sorted(unknown)))
        out = {}
        with self.lock:
            if body.get("reset"):
                self._clear()
            if "error_rate" in body:
                self.error_rate = self._number(body, "error_rate", 0, 1)
            if "error_code" in body:
                self.error_code = int(self._number(body, "error_code", 400,
                                                   599))
            if "retry_after" in body:
                self.retry_after = None if body["retry_after"] is None else \
                    int(self._number(body, "retry_after", 0, 3600))
            if "error_count" in body:
                self.error_count = int(self._number(body, "error_count", 0,
                                                    10 ** 9))
            for k in ("error_verbs", "error_resources", "error_roles"):
                if k in body:
                    setattr(self, k, self._list(body[k], k))
            if "latency_ms" in body:
                self.latency_ms = self._number(body, "latency_ms", 0, 600000)
            if "bookmark_seconds" in body:
                self.bookmark_seconds = float(self._number(
                    body, "bookmark_seconds", 0.05, 3600))
            if "garbage_count" in body:
                self.garbage_count = int(self._number(body, "garbage_count",
                                                      0, 10 ** 9))
            if "garbage_mode" in body:
                if body["garbage_mode"] not in GARBAGE_MODES:
                    raise err_bad_request("garbage_mode must be one of %s" %
                                          ", ".join(GARBAGE_MODES))
                self.garbage_mode = body["garbage_mode"]
        if "pause" in body:
            if body["pause"]:
                self.running.clear()
            else:
                self.running.set()
        if body.get("drop_watches"):
            out["dropped_watches"] = sim.store.drop_watchers()
        if body.get("drop_connections") and h is not None:
            keep = getattr(h, "conn", None) or h.request
            out["dropped_connections"] = h.server.drop_connections(keep)
        if body.get("watch_garbage"):
            out["garbage_watches"] = sim.store.inject_raw(
                b'{"type":"ADDED","object":{"kind":\x00garbage\n')
        if body.get("forget_history"):
            sim.store.forget_history()
            out["history_start"] = sim.store.history_start
        out["faults"] = self.describe()
        return out

    def _matches(self, role, verb, rkey):
        """True when a request is subject to the error settings."""
        if self.error_verbs is not None and verb not in self.error_verbs:
            return False
        if self.error_roles is not None and role not in self.error_roles:
            return False
        if self.error_resources is not None:
            base = (rkey or "").split("/")[0]
            if base not in self.error_resources and \
                    rkey not in self.error_resources:
                return False
        return True

    def before(self, role, verb, rkey):
        """Called before each API request: pause, latency, errors."""
        self.running.wait()
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000.0)
        with self.lock:
            if not (self.error_count or self.error_rate):
                return
            if not self._matches(role, verb, rkey):
                return
            if self.error_count:
                self.error_count -= 1
            elif random.random() >= self.error_rate:
                return
            self.injected += 1
            code, ra = self.error_code, self.retry_after
        raise self._error(code, ra)

    def garbage(self, role, verb, rkey):
        """The garbage mode for this response, or None (consumes one)."""
        with self.lock:
            if not self.garbage_count or verb == "watch" or \
                    not self._matches(role, verb, rkey):
                return None
            self.garbage_count -= 1
            self.injected += 1
            return self.garbage_mode

    def _error(self, code, retry_after):
        """The injected error, worded as the real server's."""
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if code == 429:
            headers.setdefault("Retry-After", "1")
            return ApiError(429, "TooManyRequests", "Too many requests, "
                            "please try again later.", headers=headers,
                            plain="Too many requests, please try again "
                            "later.\n")
        if code == 500:
            msg = "injected fault"
            return ApiError(500, "InternalError", "Internal error occurred: "
                            + msg, {"causes": [{"message": msg}]}, headers)
        if code == 503:
            return ApiError(503, "ServiceUnavailable", "the server is "
                            "currently unable to handle the request",
                            {}, headers)
        if code == 504:
            return ApiError(504, "Timeout", "the server was unable to return "
                            "a response in the time allotted, but may still "
                            "be processing the request", {}, headers)
        return ApiError(code, "", "injected fault %d" % code, {}, headers)
