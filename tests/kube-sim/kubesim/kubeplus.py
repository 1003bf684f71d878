# SPDX-License-Identifier: Apache-2.0
"""A KubePlus stand-in: what KubePlus does to the cluster when an instance
of one of its platform kinds is created (off unless --set kubeplus=on).

KubePlus serves one instance kind per ResourceComposition, in the group
platformapi.kubeplus (version v1alpha1, e.g. WordpressService; here: any
CRD of that group, see fixtures/kubeplus-crds.yaml). For every new
instance it installs a Helm release named lower(kind)-<instance> into a
namespace named after the instance and then, once `helm install` is done,
creates a ResourceQuota named after the release with `kubectl create` (a
plain create: never apply or update) and only logs a failure
(deploy/kubeconfiggenerator.py /resource_quota). So a quota of that name
created earlier by someone else makes KubePlus's create fail with 409
AlreadyExists, which it logs and gives up on.

Here: the namespace is created at once (409 is fine), the quota
KUBEPLUS_QUOTA_DELAY later (--set kubeplus-quota-delay=DURATION, default
500ms, standing for the Helm install) with the keys of --set
kubeplus-quota=KEY=QTY,... (default requests.cpu=1,requests.memory=1Gi,
limits.cpu=2,limits.memory=2Gi). Outcomes go to DIR/log as lines starting
"kubeplus: ". An instance deleted before its quota is due gets none. No
Helm chart is installed and nothing is removed when an instance goes.
"""

import time

from .controllers import each, event_loop
from .hooks import ApiError
from .quota import option_duration
from . import quantity as qty

GROUP = "platformapi.kubeplus"
USER = "system:serviceaccount:default:kubeplus"
DEFAULT_DELAY = 0.5
DEFAULT_HARD = "requests.cpu=1,requests.memory=1Gi,limits.cpu=2," \
    "limits.memory=2Gi"
MAX_KEYS = 32


def parse_hard(text):
    """{key: quantity} from KEY=QTY,...; ValueError on bad input."""
    hard = {}
    for part in (text or "").split(","):
        key, eq, val = part.strip().partition("=")
        if not eq or not key or not val:
            raise ValueError("--set kubeplus-quota: want KEY=QTY,... got %r"
                             % part)
        try:
            qty.parse(val)
        except qty.QuantityError as e:
            raise ValueError("--set kubeplus-quota: %s: %s" % (key, e)) \
                from None
        hard[key] = val
    if len(hard) > MAX_KEYS:
        raise ValueError("--set kubeplus-quota: more than %d keys" % MAX_KEYS)
    return hard


class KubePlus:
    """Namespace and ResourceQuota for every new platformapi.kubeplus
    instance."""

    def __init__(self, api, delay, hard, log):
        self.api = api
        self.delay = delay
        self.hard = hard
        self.log = log
        self.seen = set()
        self.pending = {}

    @staticmethod
    def relevant(ev):
        """New or deleted instances."""
        return ev.resource.group == GROUP

    def pass_once(self):
        """Handle new instances, then the quotas that are due."""
        live = {}
        for res in self.api.resources():
            if res.group != GROUP:
                continue
            try:
                items, _ = self.api.list(res.key)
            except ApiError:
                continue
            for inst in items:
                live[inst["metadata"].get("uid")] = (res, inst)
        self.seen &= set(live)
        for uid in list(self.pending):
            if uid not in live:
                del self.pending[uid]
        each([v for u, v in live.items() if u not in self.seen],
             lambda v: self.new_instance(*v))
        t = time.monotonic()
        for uid, (due, res, inst) in list(self.pending.items()):
            if due <= t:
                del self.pending[uid]
                self.create_quota(res, inst)

    def next_due(self):
        """Seconds until the earliest pending quota, or None."""
        if not self.pending:
            return None
        return max(0.0, min(d for d, _, _ in self.pending.values()) -
                   time.monotonic())

    def new_instance(self, res, inst):
        """The instance's namespace now, its quota after the delay."""
        md = inst["metadata"]
        self.seen.add(md["uid"])
        name = md["name"]
        try:
            self.api.create("namespaces", "", {
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name}}, user=USER)
            self.log("kubeplus: %s %s/%s: namespace %s created"
                     % (res.kind, md.get("namespace", ""), name, name))
        except ApiError as e:
            if e.code != 409:
                self.log("kubeplus: %s %s/%s: namespace %s: %s"
                         % (res.kind, md.get("namespace", ""), name, name,
                            e.message))
                return
        self.pending[md["uid"]] = (time.monotonic() + self.delay, res, inst)

    def create_quota(self, res, inst):
        """kubectl create of the release's ResourceQuota; log, never
        retry."""
        name = inst["metadata"]["name"]
        release = "%s-%s" % (res.kind.lower(), name)
        quota = {"apiVersion": "v1", "kind": "ResourceQuota",
                 "metadata": {"name": release, "namespace": name},
                 "spec": {"hard": dict(self.hard)}}
        try:
            self.api.create("resourcequotas", name, quota, user=USER)
        except ApiError as e:
            self.log("kubeplus: resourcequota %s/%s not created: Error from "
                     "server (%s): %s" % (name, release, e.reason, e.message))
            return
        self.log("kubeplus: resourcequota %s/%s created" % (name, release))


def register(reg):
    """Start the KubePlus stand-in when --set kubeplus=on."""
    mode = reg.options.get("kubeplus", "off")
    if mode not in ("on", "off"):
        raise ValueError("--set kubeplus: want on or off, got %r" % mode)
    if mode == "off":
        return
    delay = option_duration(reg, "kubeplus-quota-delay", DEFAULT_DELAY)
    hard = parse_hard(reg.options.get("kubeplus-quota", DEFAULT_HARD))
    log = reg.log

    def run(api, stop):
        kp = KubePlus(api, delay, hard, log)
        event_loop(api, stop, kp.relevant, kp.pass_once, due=kp.next_due)
    reg.add_controller("kubeplus", run)
    reg.log("kubeplus: on, quota after %gs with %s" % (delay, hard))
