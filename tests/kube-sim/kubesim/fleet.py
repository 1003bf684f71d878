# SPDX-License-Identifier: Apache-2.0
"""A fleet of GPU nodes from the fixtures, published at start.

`run DIR --set fleet=NAME` creates the ResourceSlices of
fixtures/fleets/NAME/*.json (one per node, as the NVIDIA DRA driver's
kubelet plugin publishes them) before the server answers, so the nodes
exist from the first request. A node is removed by deleting its slice and
added by creating one (`kubectl delete resourceslice NAME`, `kubectl
apply -f FILE`): the scheduler and the kubelet stand-in read the slices on
every pass. `fleet` unset (the default) publishes nothing.

A node file holds one slice or a JSON list of the node's slices (the
DynamicMIG fleet: a counters-only slice, then one per GPU, as the NVIDIA
driver publishes them for Kubernetes >= 1.35). For an older release the
driver publishes combined slices, each GPU's with its own counter set: a
list is combined so before publishing (release.py).
"""

import copy
import json
import os
import re

from . import release

RS = "resource.k8s.io"
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "fixtures", "fleets")
MAX_NODES = 256


def fleet_files(name):
    """The slice files of fleet NAME, sorted; ValueError when unknown."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name or ""):
        raise ValueError("--set fleet: bad fleet name %r" % name)
    d = os.path.join(FIXTURES, name)
    if not os.path.isdir(d):
        known = sorted(os.listdir(FIXTURES)) if os.path.isdir(FIXTURES) \
            else []
        raise ValueError("--set fleet: unknown fleet %r (known: %s)"
                         % (name, ", ".join(known) or "none"))
    files = sorted(os.path.join(d, f) for f in os.listdir(d)
                   if f.endswith(".json"))
    if not files or len(files) > MAX_NODES:
        raise ValueError("--set fleet: fleet %r has %d node files (1..%d)"
                         % (name, len(files), MAX_NODES))
    return files


def combined(node_slices):
    """Pre-1.35 publishing of a counters slice plus device slices: every
    device slice carries the counter sets its devices consume."""
    sets = {}
    for s in node_slices:
        for cs in (s.get("spec") or {}).get("sharedCounters") or []:
            sets[cs.get("name")] = cs
    out = []
    for s in node_slices:
        spec = s.get("spec") or {}
        if not spec.get("devices"):
            continue
        s = copy.deepcopy(s)
        used = []
        for d in s["spec"]["devices"]:
            for cc in d.get("consumesCounters") or []:
                if cc.get("counterSet") in sets and \
                        cc["counterSet"] not in used:
                    used.append(cc["counterSet"])
        if used:
            s["spec"]["sharedCounters"] = [sets[n] for n in used]
        out.append(s)
    for s in out:
        s["spec"]["pool"]["resourceSliceCount"] = len(out)
    return out


def register(reg):
    """Publish the fleet's slices at start when --set fleet=NAME."""
    name = reg.options.get("fleet")
    if not name:
        return
    slices = []
    nodes = 0
    for f in fleet_files(name):
        with open(f) as src:
            got = json.load(src)
        nodes += 1
        if isinstance(got, list):
            if not release.at_least(reg, "1.35"):
                got = combined(got)
            slices.extend(got)
        else:
            slices.append(got)

    def publish(api):
        for s in slices:
            api.create("resourceslices." + RS, "", s)
        reg.log("fleet: %s, %d nodes published" % (name, nodes))
    reg.add_seed("fleet", publish)
