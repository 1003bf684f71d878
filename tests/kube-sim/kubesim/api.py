# SPDX-License-Identifier: Apache-2.0
"""The write pipeline (create, update, patch, delete) shared by HTTP requests
and internal callers, and the internal API documented in hooks.py."""

import copy
import functools
import json
import random
import time
import uuid

from . import checks, fieldmanager, patch as patchmod, schema, selector
from . import validation
from .hooks import (AdmissionContext, ApiError, Caller,
                    err_already_exists, err_bad_request, err_conflict,
                    err_forbidden, err_internal, err_invalid, err_not_found)
from .store import Entry, obj_key

INTERNAL_USER = "system:kube-controller-manager"
NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339():
    """The current time as metav1.Time renders it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Who(Caller):
    """The caller of one request (hooks.Caller) and how unknown fields of
    its body are handled."""

    def __init__(self, user=INTERNAL_USER, role="internal", dry_run=False,
                 options=None, field_validation="Ignore", groups=None,
                 uid="", user_agent=""):
        super().__init__(user, role, dry_run, options, groups, uid)
        self.field_validation = field_validation
        # managedFields: the User-Agent names the manager when no
        # fieldManager is given; TRACK False (/sim/bulk) records none;
        # APPLIED: a server-side apply already set them
        self.user_agent = user_agent
        self.track = True
        self.applied = False


class WatchEvent:
    """One event delivered by Api.watch()."""

    def __init__(self, etype, resource, obj, old, rv):
        self.type = etype
        self.resource = resource
        self.object = obj
        self.old_object = old
        self.resource_version = rv


class Watch:
    """An internal watch over one resource or all of them."""

    def __init__(self, watcher, namespace, copy=True, api=None):
        self.watcher = watcher
        self.namespace = namespace
        self.copy = copy
        self.api = api

    def next(self, timeout=1.0):
        """The next WatchEvent, or None on timeout or after close()."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            ev = self.watcher.get(max(0.0, left))
            if ev is None:
                return None
            md = ev.entry.obj["metadata"]
            if self.namespace and md.get("namespace") != self.namespace:
                continue
            if not self.copy:
                return WatchEvent(ev.type, ev.entry.res, ev.entry.obj,
                                  ev.old or None, ev.rv)
            if self.api is not None:
                self.api.copied += 2 if ev.old else 1
            old = json.loads(json.dumps(ev.old)) if ev.old else None
            return WatchEvent(ev.type, ev.entry.res, ev.entry.copy(), old,
                              ev.rv)

    def close(self):
        """Stop the watch."""
        self.watcher.close()


def _counted(write):
    """A write of the pipeline: counted in Api.writes, and in Api.refused
    when it raises."""
    @functools.wraps(write)
    def counted(self, *args, **kwargs):
        self.writes += 1
        try:
            return write(self, *args, **kwargs)
        except Exception:
            self.refused += 1
            raise
    return counted


class Api:
    """Object operations over the store, with admission and validation."""

    def __init__(self, store, resources, registry):
        self.store = store
        self.res = resources
        self.hooks = registry
        self.writes = 0  # write attempts, refused ones too
        self.refused = 0  # write attempts refused
        self.copied = 0  # objects deep-copied for internal readers

    # --- reads -------------------------------------------------------------

    def resource(self, key):
        """ResourceInfo by 'plural[.group]'."""
        return self.res.get(key)

    def resource_for_kind(self, api_version, kind):
        """ResourceInfo by apiVersion and kind (404 when not served)."""
        r = self.res.for_kind(api_version, kind)
        if r is None:
            raise ApiError(404, "NotFound", 'no matches for kind "%s" in '
                           'version "%s"' % (kind, api_version))
        return r

    def resources(self):
        """Every served resource."""
        return self.res.all()

    def current_rv(self):
        """The newest resourceVersion."""
        return self.store.rv

    def change_mark(self):
        """A value that moves whenever the store changes or any write is
        attempted (even one refused), so a level-triggered pass that saw
        the same mark before would see the same state and do the same."""
        return (self.store.rv, self.writes)

    def _res(self, key):
        """ResourceInfo from a key or a ResourceInfo."""
        return key if hasattr(key, "key") else self.res.get(key)

    def get(self, key, namespace, name):
        """A copy of one object (ApiError 404 if missing)."""
        res = self._res(key)
        e = self.store.get(res, namespace or "", name)
        if e is None:
            raise err_not_found(res, name)
        self.copied += 1
        return e.copy()

    def list(self, key, namespace=None, label_selector=None,
             field_selector=None, copy=True):
        """(items, resourceVersion) of the matching objects.

        COPY False returns the stored objects themselves, shared with the
        store and every other reader, as an informer's cache hands them
        out: the caller must never change them (copy what it writes)."""
        res = self._res(key)
        lsel = selector.parse_labels(label_selector)
        fsel = selector.parse_fields(field_selector, res.fields)

        def match(o):
            return (selector.match_labels(lsel, o["metadata"].get("labels"))
                    and selector.match_fields(fsel, o))
        entries, _, _, rv = self.store.scan(
            res, namespace, None,
            None if lsel is None and fsel is None else match, 0)
        if not copy:
            return [e.obj for e in entries], rv
        self.copied += len(entries)
        return [e.copy() for e in entries], rv

    def watch(self, key=None, namespace=None, resource_version=None,
              copy=True):
        """A Watch of events after resource_version (None: from now);
        COPY False delivers the stored objects themselves (read-only, as
        list(copy=False))."""
        keys = None if key is None else {self._res(key).key}
        since = None if resource_version is None else int(resource_version)
        if since is None:
            since = self.store.rv
        return Watch(self.store.add_watcher(keys, since), namespace, copy,
                     self)

    # --- internal writes ---------------------------------------------------

    def create(self, key, namespace, obj, user=INTERNAL_USER, dry_run=False):
        """Create an object as a trusted internal user."""
        who = Who(user, dry_run=dry_run)
        return self.do_create(self._res(key), namespace or "",
                              copy.deepcopy(obj), who).copy()

    def update(self, key, namespace, obj, subresource="",
               user=INTERNAL_USER, dry_run=False):
        """Replace an object (resourceVersion in obj is a precondition)."""
        who = Who(user, dry_run=dry_run)
        name = (obj.get("metadata") or {}).get("name", "")
        return self.do_update(self._res(key), namespace or "", name,
                              copy.deepcopy(obj), who,
                              subresource).copy()

    def patch(self, key, namespace, name, body, patch_type="merge",
              subresource="", user=INTERNAL_USER, dry_run=False):
        """Patch an object with a merge, json or strategic patch."""
        who = Who(user, dry_run=dry_run)
        return self.do_patch(self._res(key), namespace or "", name, body,
                             patch_type, who, subresource).copy()

    def delete(self, key, namespace, name, propagation="Background",
               preconditions=None, user=INTERNAL_USER, dry_run=False):
        """Delete an object; returns its last state."""
        who = Who(user, dry_run=dry_run,
                  options={"propagationPolicy": propagation})
        entry, _ = self.do_delete(self._res(key), namespace or "", name, who,
                                  preconditions)
        return entry.copy()

    # --- the pipeline ------------------------------------------------------

    def _admission(self, op, res, ns, name, obj, old, who, sub=""):
        """An AdmissionContext for the hooks."""
        opts = dict(who.options)
        return AdmissionContext(op, res, ns, name, obj, old, who.user,
                                who.role, self, sub, who.dry_run, opts,
                                groups=who.groups, uid=who.uid)

    def _decode(self, res, body, who):
        """Type checks and unknown-field handling of a request body."""
        if not isinstance(body, dict):
            raise err_bad_request("the object provided is unrecognized "
                                  "(must be of type %s)" % res.kind)
        av, kind = body.get("apiVersion"), body.get("kind")
        if kind and kind != res.kind:
            raise err_bad_request('%s in version "%s" cannot be handled as '
                                  'a %s: no kind "%s" is registered for '
                                  'version "%s"' % (kind, res.version,
                                                    res.kind, kind, av))
        if av and res.group and av.split("/")[0] != res.group:
            raise err_bad_request("the API version in the data (%s) does not "
                                  "match the expected API version (%s)" %
                                  (av, res.api_version))
        ver = av.rpartition("/")[2] if av else ""
        if ver not in res.versions:
            ver = res.version
        body["apiVersion"] = res.api_version_for(ver)
        body["kind"] = res.kind
        if not isinstance(body.get("metadata"), dict):
            body["metadata"] = {}
        out = {"kind": res.kind, "apiVersion": body["apiVersion"]}
        out.update(body)
        self._prune(res, out, who)
        return out

    def _prune(self, res, body, who):
        """Drop unknown fields; Strict turns them into a 400."""
        sch = res.known_fields(body["apiVersion"].rpartition("/")[2])
        if sch is None:
            return
        walk = schema.prune(body, sch, walk=schema.Walk(res.kind))
        ver = body["apiVersion"].rpartition("/")[2]
        if walk.type_error:
            raise err_bad_request('%s in version "%s" cannot be handled as '
                                  'a %s: %s' % (res.kind, ver, res.kind,
                                                walk.type_error))
        found = walk.found
        if not found:
            return
        if who.field_validation == "Strict":
            ver = body["apiVersion"].rpartition("/")[2]
            raise err_bad_request(
                '%s in version "%s" cannot be handled as a %s: strict '
                'decoding error: %s' % (res.kind, ver, res.kind, ", ".join(
                    'unknown field "%s"' % f for f in found)))
        if who.field_validation == "Warn":
            who.warnings.extend('unknown field "%s"' % f for f in found)

    def _check_namespace(self, res, ns, body, name, creating):
        """URL/body namespace agreement and namespace lifecycle."""
        md = body["metadata"]
        if not res.namespaced:
            md.pop("namespace", None)
            return
        if md.get("namespace") and md["namespace"] != ns:
            raise err_bad_request("the namespace of the provided object does "
                                  "not match the namespace sent on the "
                                  "request")
        md["namespace"] = ns
        nsres = self.res.get("namespaces")
        e = self.store.get(nsres, "", ns)
        if e is None:
            raise err_not_found(nsres, ns)
        if creating and e.obj["metadata"].get("deletionTimestamp"):
            err = err_forbidden(res, name, "unable to create new content in "
                                "namespace %s because it is being terminated"
                                % ns)
            err.details["causes"] = [{
                "reason": "NamespaceTerminating", "field":
                "metadata.namespace", "message": "namespace %s is being "
                "terminated" % ns}]
            raise err

    def _validate(self, res, obj, old):
        """The kind's validation (kinds.py); raises 422."""
        errs = checks.validate(res, obj, old)
        create_checks = res.desc.create_checks
        if old is None and create_checks is not None:
            labels = None
            if res.namespaced:
                ns = self.store.get(self.res.get("namespaces"), "",
                                    obj["metadata"].get("namespace", ""))
                labels = ns.obj["metadata"].get("labels") if ns else None
            errs = create_checks(obj, labels) + errs
        if errs:
            raise err_invalid(res, obj["metadata"].get("name", ""), errs)

    @staticmethod
    def _default(res, obj):
        """The kind's defaults (idempotent)."""
        if res.desc.default is not None:
            res.desc.default(obj)

    @staticmethod
    def _drop_disabled(res, obj, old):
        """Drop the fields of features that are off."""
        if res.desc.drop_disabled is not None:
            res.desc.drop_disabled(obj, old)

    def _post_defaults(self, res, obj):
        """Defaults again, and those that depend on the final name."""
        self._default(res, obj)
        if res.desc.default_named is not None:
            res.desc.default_named(obj)

    def _generate_name(self, res, ns, md):
        """Pick metadata.name from generateName (retrying collisions)."""
        base = md["generateName"][:58]
        for _ in range(8):
            name = base + "".join(random.choice(NAME_CHARS)
                                  for _ in range(5))
            if self.store.get(res, ns, name) is None:
                return name
        return name

    @_counted
    def do_create(self, res, ns, body, who):
        """Create; returns the stored Entry."""
        body = self._decode(res, body, who)
        md = body["metadata"]
        name = md.get("name") or ""
        self._check_namespace(res, ns, body, name, True)
        if md.get("resourceVersion"):
            raise err_internal("resourceVersion should not be set on "
                               "objects to be created")
        for f in ("uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation", "selfLink"):
            md.pop(f, None)
        if "status" in res.subresources:
            body.pop("status", None)
        self._default(res, body)
        if who.track and not who.applied:
            fieldmanager.record_update(res, None, body, who, "",
                                       body["apiVersion"])
        ctx = self._admission("CREATE", res, ns, name, body, None, who)
        self.hooks.run_mutating(ctx)
        who.warnings.extend(ctx.warnings)
        body = ctx.object
        md = body["metadata"]
        if not md.get("name") and md.get("generateName"):
            md["name"] = self._generate_name(res, ns, md)
        name = md.get("name") or ""
        self._post_defaults(res, body)
        self._drop_disabled(res, body, None)
        self._validate(res, body, None)
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_rfc3339()
        if res.generation:
            md["generation"] = 1
        if res.desc.on_create is not None:
            res.desc.on_create(body, md["creationTimestamp"])
        with self.store.lock:
            # Validating admission runs before storage finds the name
            # taken, as on kube-apiserver (a denial wins over a 409).
            vctx = self._admission("CREATE", res, ns, name, body, None, who)
            self.hooks.run_validating(vctx)
            who.warnings.extend(vctx.warnings)
            if self.store.get(res, ns, name) is not None:
                raise err_already_exists(res, name)
            if who.dry_run:
                md["resourceVersion"] = str(self.store.rv)
                return Entry(res, body, self.store.rv)
            md["resourceVersion"] = str(self.store.next_rv())
            entry = self.store.commit("ADDED", res, body, None)
            self._committed(res, entry, "ADDED")
        return entry

    def _committed(self, res, entry, etype):
        """The kind's reaction to a stored write (a CRD's resource served
        or gone), under the store lock."""
        if res.desc.on_commit is not None:
            res.desc.on_commit(self, entry, etype)

    def _merge_subresource(self, res, old, body, sub):
        """The object an update of the main resource or a subresource
        produces: status and spec changes go only through their endpoint
        (a subresource's write is its Subresource's, kinds.py)."""
        if sub:
            subres = res.desc.subresource(sub)
            if subres is None:
                raise err_not_found(res, old["metadata"]["name"])
            return subres.write(old, body)
        if "status" in res.subresources:
            if "status" in old:
                body["status"] = copy.deepcopy(old["status"])
            else:
                body.pop("status", None)
        return body

    def _keep_system_meta(self, md, oldmd):
        """Fields of metadata that clients cannot change."""
        for f in ("uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation"):
            if f in oldmd:
                md[f] = oldmd[f]
            else:
                md.pop(f, None)
        if "generateName" in oldmd:
            md["generateName"] = oldmd["generateName"]
        else:
            md.pop("generateName", None)

    def _bump_generation(self, res, new, old):
        """metadata.generation: +1 on a spec (or non-metadata) change;
        Deployments also count annotation changes (copied to ReplicaSets)."""
        if not res.generation:
            return
        gen = old["metadata"].get("generation", 1)
        if res.generation == "spec":
            changed = new.get("spec") != old.get("spec")
        elif res.generation == "spec+annotations":
            changed = new.get("spec") != old.get("spec") or \
                new["metadata"].get("annotations") != \
                old["metadata"].get("annotations")
        else:
            skip = {"metadata", "status"} if "status" in res.subresources \
                else {"metadata"}
            changed = any(new.get(k) != old.get(k) for k in
                          set(new) | set(old) if k not in skip)
        new["metadata"]["generation"] = gen + 1 if changed else gen

    def _prepare_update(self, res, ns, name, cur, body, who, sub):
        """Run steps 2-6 of an update; returns the new object."""
        body = self._decode(res, body, who)
        md = body["metadata"]
        if md.get("name") and md["name"] != name:
            raise err_bad_request("the name of the object (%s) does not match"
                                  " the name on the URL (%s)" %
                                  (md["name"], name))
        md["name"] = name
        self._check_namespace(res, ns, body, name, False)
        want = md.get("resourceVersion")
        if not want and not res.builtin and not sub:
            raise err_invalid(res, name, [validation.FieldError(
                "Invalid", "metadata.resourceVersion", validation.GoValue(
                    "0x0"), "must be specified for an update")])
        if want and want != cur.obj["metadata"]["resourceVersion"]:
            raise err_conflict(res, name)
        old = cur.obj
        new = self._merge_subresource(res, old, body, sub)
        self._keep_system_meta(new["metadata"], old["metadata"])
        self._default(res, new)
        if who.track and not who.applied:
            fieldmanager.record_update(res, old, new, who, sub,
                                       body["apiVersion"])
        ctx = self._admission("UPDATE", res, ns, name, new, old, who, sub)
        self.hooks.run_mutating(ctx)
        who.warnings.extend(ctx.warnings)
        new = ctx.object
        self._post_defaults(res, new)
        self._drop_disabled(res, new, old)
        self._keep_system_meta(new["metadata"], old["metadata"])
        self._bump_generation(res, new, old)
        self._validate(res, new, old)
        return new

    def _finalized(self, res, obj):
        """True when a deleting object has no finalizers left."""
        md = obj["metadata"]
        if not md.get("deletionTimestamp") or md.get("finalizers"):
            return False
        return not self._held(res, obj)

    @staticmethod
    def _held(res, obj):
        """True while the kind keeps a deleted object for a reason beyond
        metadata.finalizers (a Namespace's spec.finalizers)."""
        return res.desc.held is not None and res.desc.held(obj)

    def _commit_update(self, res, ns, name, cur, new, who, sub):
        """Steps 7-8 of an update; returns (entry, retry)."""
        with self.store.lock:
            now = self.store.get(res, ns, name)
            if now is None:
                raise err_not_found(res, name)
            if now is not cur:
                return None, True
            new["metadata"]["resourceVersion"] = cur.obj["metadata"][
                "resourceVersion"]
            if new == cur.obj:
                return cur, False
            vctx = self._admission("UPDATE", res, ns, name, new, cur.obj,
                                   who, sub)
            self.hooks.run_validating(vctx)
            who.warnings.extend(vctx.warnings)
            if who.dry_run:
                return Entry(res, new, cur.rv), False
            new["metadata"]["resourceVersion"] = str(self.store.next_rv())
            etype = "DELETED" if self._finalized(res, new) else "MODIFIED"
            entry = self.store.commit(etype, res, new, cur.obj)
            self._committed(res, entry, etype)
            return entry, False

    def _update_loop(self, res, ns, name, who, sub, make_body):
        """Read-modify-write with retries when another write raced."""
        for _ in range(20):
            cur = self.store.get(res, ns, name)
            if cur is None:
                raise err_not_found(res, name)
            body = make_body(cur)
            new = self._prepare_update(res, ns, name, cur, body, who, sub)
            entry, retry = self._commit_update(res, ns, name, cur, new, who,
                                               sub)
            if not retry:
                return entry
        raise err_conflict(res, name)

    @_counted
    def do_update(self, res, ns, name, body, who, sub=""):
        """PUT; returns the stored Entry."""
        def make(cur):
            b = copy.deepcopy(body)
            if not isinstance(b, dict):
                return b
            md = b.setdefault("metadata", {})
            if isinstance(md, dict) and not md.get("resourceVersion") and \
                    (res.builtin or sub):
                md["resourceVersion"] = cur.obj["metadata"]["resourceVersion"]
            return b
        if isinstance(body, dict):
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv:
                cur = self.store.get(res, ns, name)
                if cur is None:
                    raise err_not_found(res, name)
                new = self._prepare_update(res, ns, name, cur, body, who, sub)
                entry, retry = self._commit_update(res, ns, name, cur, new,
                                                   who, sub)
                if retry:
                    raise err_conflict(res, name)
                return entry
        return self._update_loop(res, ns, name, who, sub, make)

    @_counted
    def do_patch(self, res, ns, name, body, ptype, who, sub=""):
        """PATCH; returns the stored Entry."""
        if ptype == "strategic" and not res.builtin:
            raise ApiError(415, "UnsupportedMediaType", "the body of the "
                           "request was in an unknown format - accepted "
                           "media types include: application/json-patch+json"
                           ", application/merge-patch+json, application/"
                           "apply-patch+yaml")

        def make(cur):
            old = cur.copy()
            if ptype == "json":
                out = patchmod.json_patch(old, body)
            elif ptype == "strategic":
                if not isinstance(body, dict):
                    raise err_bad_request("invalid strategic merge patch")
                out = patchmod.strategic_merge(old, body)
            else:
                if not isinstance(body, dict):
                    raise err_bad_request("invalid merge patch")
                out = patchmod.merge_patch(old, body)
            if not isinstance(out, dict):
                raise err_bad_request("the patch did not produce an object")
            md = out.get("metadata")
            if isinstance(md, dict) and not md.get("resourceVersion"):
                md["resourceVersion"] = cur.obj["metadata"]["resourceVersion"]
            return out
        return self._update_loop(res, ns, name, who, sub, make)

    def do_apply(self, res, ns, name, config, who, sub="", force=False):
        """Server-side apply (PATCH application/apply-patch+yaml): returns
        (entry, created).  The manager is who.options["fieldManager"]."""
        if not isinstance(config, dict):
            raise err_bad_request("the object provided is unrecognized "
                                  "(must be of type %s)" % res.kind)
        md = config.get("metadata")
        if md is not None and not isinstance(md, dict):
            raise err_bad_request("metadata must be an object")
        md = md or {}
        if md.get("managedFields"):
            raise err_bad_request("metadata.managedFields must be nil")
        if md.get("name") and md["name"] != name:
            raise err_bad_request("the name of the object (%s) does not "
                                  "match the name on the URL (%s)" %
                                  (md["name"], name))
        manager = who.options["fieldManager"]
        force = bool(force)
        who.applied = True
        if self.store.get(res, ns, name) is None and not sub:
            body = fieldmanager.apply(res, None, config, manager, force)
            body.setdefault("metadata", {})["name"] = name
            try:
                return self.do_create(res, ns, body, who), True
            except ApiError as e:
                if e.code != 409 or e.reason != "AlreadyExists":
                    raise
            # created meanwhile: apply to it

        def make(cur):
            return fieldmanager.apply(res, cur.copy(), config, manager,
                                      force, sub)
        return self._update_loop(res, ns, name, who, sub, make), False

    def _check_preconditions(self, res, name, obj, pre):
        """DeleteOptions.preconditions."""
        if not pre:
            return
        md = obj["metadata"]
        if pre.get("uid") and pre["uid"] != md.get("uid"):
            raise err_conflict(res, name, "Precondition failed: UID in "
                               "precondition: %s, UID in object meta: %s" %
                               (pre["uid"], md.get("uid")))
        if pre.get("resourceVersion") and \
                pre["resourceVersion"] != md.get("resourceVersion"):
            raise err_conflict(res, name, "Precondition failed: "
                               "ResourceVersion in precondition: %s, "
                               "ResourceVersion in object meta: %s" %
                               (pre["resourceVersion"],
                                md.get("resourceVersion")))

    def _deleting_state(self, res, obj, who):
        """The object with deletionTimestamp and policy finalizers."""
        new = copy.deepcopy(obj)
        md = new["metadata"]
        md.setdefault("deletionTimestamp", now_rfc3339())
        md.setdefault("deletionGracePeriodSeconds", 0)
        pol = who.options.get("propagationPolicy")
        fin = {"Foreground": "foregroundDeletion",
               "Orphan": "orphan"}.get(pol)
        if fin and fin not in (md.get("finalizers") or []):
            md["finalizers"] = (md.get("finalizers") or []) + [fin]
        if res.desc.terminating is not None:
            res.desc.terminating(new)
        return new

    @_counted
    def do_delete(self, res, ns, name, who, preconditions=None):
        """DELETE; returns (entry, gone) where gone says it was removed."""
        for _ in range(20):
            cur = self.store.get(res, ns, name)
            if cur is None:
                raise err_not_found(res, name)
            self._check_preconditions(res, name, cur.obj, preconditions)
            ctx = self._admission("DELETE", res, ns, name, None, cur.obj, who)
            self.hooks.run_mutating(ctx)
            with self.store.lock:
                if self.store.get(res, ns, name) is cur:
                    return self._commit_delete(res, cur, ctx, who)
        raise err_conflict(res, name)

    def _commit_delete(self, res, cur, ctx, who):
        """The locked part of a delete: validating hooks, then mark or
        remove the object."""
        self.hooks.run_validating(ctx)
        who.warnings.extend(ctx.warnings)
        old = cur.obj
        keep = bool(old["metadata"].get("finalizers")) or \
            who.options.get("propagationPolicy") in ("Foreground", "Orphan") \
            or self._held(res, old)
        new = self._deleting_state(res, old, who) if keep else \
            copy.deepcopy(old)
        if keep and new == old:
            return cur, False
        if who.dry_run:
            return Entry(res, new, cur.rv), not keep
        new["metadata"]["resourceVersion"] = str(self.store.next_rv())
        etype = "MODIFIED" if keep else "DELETED"
        entry = self.store.commit(etype, res, new, old)
        self._committed(res, entry, etype)
        return entry, not keep

    def key_of(self, res, ns, name):
        """Storage key (for callers that index objects)."""
        return obj_key(res, ns, name)

