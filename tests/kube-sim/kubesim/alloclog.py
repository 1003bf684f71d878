# SPDX-License-Identifier: Apache-2.0
"""Ground truth of device allocation: every interval during which a
ResourceClaim held devices, with its consumers, read with
GET /sim/allocations (simctl DIR allocations).

The log is written by a validating hook that runs last, under the store
lock, for every committed write of a ResourceClaim (whoever writes it: the
scheduler, the resourceclaim controller, a client), so each timestamp is
the wall-clock time of the write that allocated, reserved, unreserved or
deallocated, to the microsecond. An interval opens when status.allocation
appears and closes when it is cleared or the claim is removed. Each entry:

  {"namespace", "name", "uid", "node",
   "devices": [{"request", "driver", "pool", "device"}],
   "allocatedAt", "deallocatedAt" (null while open),
   "consumers": [{"resource", "name", "uid", "reservedAt",
                  "releasedAt" (null while reserved)}]}

At most MAX_ENTRIES intervals are kept; the oldest closed ones go first
and "dropped" counts them.
"""

import copy
import datetime
import threading
import time

from . import allocator

RS = "resource.k8s.io"
MAX_ENTRIES = 100000
MAX_CONSUMERS = 4096


def stamp(t):
    """RFC 3339 UTC with microseconds."""
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AllocationLog:
    """The intervals, keyed by claim uid while open."""

    def __init__(self):
        self.lock = threading.Lock()
        self.entries = []
        self.open = {}
        self.dropped = 0

    def observe(self, ctx):
        """Validating hook: record what this write of a claim changes."""
        if ctx.resource.key != "resourceclaims." + RS or ctx.dry_run:
            return
        t = time.time()
        old = ctx.old_object
        new = ctx.object
        if ctx.operation == "DELETE":
            # Removed now, unless finalizers keep it (then nothing changes
            # for its allocation).
            keep = old["metadata"].get("finalizers") or ctx.options.get(
                "propagationPolicy") in ("Foreground", "Orphan")
            new = old if keep else None
        elif new is not None and new["metadata"].get("deletionTimestamp") \
                and not new["metadata"].get("finalizers"):
            new = None  # the update that empties finalizers removes it
        src = new if new is not None else old
        uid = src["metadata"].get("uid")
        alloc = ((new or {}).get("status") or {}).get("allocation")
        reserved = ((new or {}).get("status") or {}).get("reservedFor") or []
        with self.lock:
            e = self.open.get(uid)
            if e is None and alloc:
                e = self._open(src, alloc, t)
            if e is None:
                return
            live = {r.get("uid") for r in reserved}
            for c in e["consumers"]:
                if c["releasedAt"] is None and c["uid"] not in live:
                    c["releasedAt"] = stamp(t)
            have = {c["uid"] for c in e["consumers"]
                    if c["releasedAt"] is None}
            for r in reserved:
                if r.get("uid") not in have and \
                        len(e["consumers"]) < MAX_CONSUMERS:
                    e["consumers"].append({
                        "resource": r.get("resource"), "name": r.get("name"),
                        "uid": r.get("uid"), "reservedAt": stamp(t),
                        "releasedAt": None})
            if not alloc:
                e["deallocatedAt"] = stamp(t)
                del self.open[uid]

    def _open(self, claim, alloc, t):
        """A new interval (lock held)."""
        md = claim["metadata"]
        e = {"namespace": md.get("namespace"), "name": md.get("name"),
             "uid": md.get("uid"), "node": allocator.allocated_node(
                 {"status": {"allocation": alloc}}),
             "devices": [{k: r.get(k) for k in ("request", "driver", "pool",
                                                "device")}
                         for r in (alloc.get("devices") or {}).get("results")
                         or []],
             "allocatedAt": stamp(t), "deallocatedAt": None,
             "consumers": []}
        if len(self.entries) >= MAX_ENTRIES:
            for i, old in enumerate(self.entries):
                if old["deallocatedAt"] is not None:
                    del self.entries[i]
                    self.dropped += 1
                    break
            else:
                self.dropped += 1
                return None
        self.entries.append(e)
        self.open[md.get("uid")] = e
        return e

    def snapshot(self, body=None):
        """GET /sim/allocations."""
        with self.lock:
            return 200, {"intervals": copy.deepcopy(self.entries),
                         "dropped": self.dropped}


def register(reg):
    """Plug the allocation log into the simulator (validating hook last)."""
    log = AllocationLog()
    reg.add_validating("zz-allocation-log", log.observe, order=1 << 30)
    reg.add_sim_endpoint("GET", "/sim/allocations", log.snapshot)
