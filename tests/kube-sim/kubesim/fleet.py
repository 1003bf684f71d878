"""A fleet of GPU nodes from the fixtures, published at start.

`run DIR --set fleet=NAME` creates the ResourceSlices of
fixtures/fleets/NAME/*.json (one per node, as the NVIDIA DRA driver's
kubelet plugin publishes them) before the server answers, so the nodes
exist from the first request. A node is removed by deleting its slice and
added by creating one (`kubectl delete resourceslice NAME`, `kubectl
apply -f FILE`): the scheduler and the kubelet stand-in read the slices on
every pass. `fleet` unset (the default) publishes nothing.
"""

import json
import os
import re

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


def register(reg):
    """Publish the fleet's slices at start when --set fleet=NAME."""
    name = reg.options.get("fleet")
    if not name:
        return
    slices = []
    for f in fleet_files(name):
        with open(f) as src:
            slices.append(json.load(src))

    def publish(api):
        for s in slices:
            api.create("resourceslices." + RS, "", s)
        reg.log("fleet: %s, %d nodes published" % (name, len(slices)))
    reg.add_seed("fleet", publish)
