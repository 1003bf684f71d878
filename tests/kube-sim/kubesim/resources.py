# SPDX-License-Identifier: Apache-2.0
"""The resource types the simulator serves (the kinds of kinds.py in its
release, plus those of registered CRDs), and the discovery and OpenAPI
documents kubectl reads about them."""

import hashlib
import json
import threading

from . import kinds, schema
from . import release as release_mod
from .hooks import ApiError

_META_FIELDS = {"metadata.name", "metadata.namespace"}


class ResourceInfo:
    """A Kind (kinds.py) as the server serves it in one release that
    serves it: the versions served and the names the rest of the
    simulator reads."""

    def __init__(self, desc, release=kinds.RELEASE):
        self.desc = desc
        self.group = desc.group
        self.versions = desc.served_versions(release)
        self.version = desc.storage_version(release)
        self.resource = desc.plural
        self.kind = desc.kind
        self.namespaced = desc.namespaced
        self.singular = desc.singular or desc.kind.lower()
        self.short_names = list(desc.short_names)
        self.subresources = {s.name for s in desc.subresources}
        self.verbs = list(desc.verbs)
        self.generation = desc.generation
        self.return_deleted = desc.return_deleted
        self.fields = set(desc.field_selectors) | _META_FIELDS
        self.builtin = desc.builtin
        self.crd = desc.crd
        self.categories = list(desc.categories)
        self.key = desc.key
        self.api_version = self.api_version_for(self.version)
        self.list_kind = desc.kind + "List"
        self._known = schema.builtin_schema(desc.schema)

    def __repr__(self):
        return "<ResourceInfo %s>" % self.key

    def api_version_for(self, version):
        """apiVersion string for one served version."""
        return (self.group + "/" + version) if self.group else version

    def known_fields(self, version):
        """The schema (schema.py form) of the fields an object of VERSION
        may have, or None: anything goes.  A custom resource's comes from
        its CRD's openAPIV3Schema of that version (else the storage
        version's)."""
        openapi = self.desc.openapi
        if openapi is None:
            return self._known
        return schema.crd_schema(openapi.get(version) or
                                 openapi.get(self.version))


def crd_resource(crd):
    """The ResourceInfo a (valid) CRD object defines."""
    return ResourceInfo(kinds.custom_kind(crd))


class Registry:
    """Thread-safe map of served resources, by key, by group/version: the
    BUILTIN kinds that RELEASE serves in some version, and the CRDs'.
    RELEASE is a release.Release (a plain "1.35" means that release's
    defaults); self.release is always a Release."""

    def __init__(self, release=kinds.RELEASE, builtin=kinds.BUILTIN):
        self.lock = threading.Lock()
        release = release_mod.of(release)
        self.release = release
        self.by_key = {}
        self.builtin_keys = []
        for k in builtin:
            if k.served_versions(release):
                self.by_key[k.key] = ResourceInfo(k, release)
                self.builtin_keys.append(k.key)
        self.generation = 0

    def add_crd(self, crd):
        """Serve the resource of a CRD (replacing an older definition)."""
        r = crd_resource(crd)
        with self.lock:
            self.by_key[r.key] = r
            self.generation += 1
        return r

    def remove(self, key):
        """Stop serving a custom resource."""
        with self.lock:
            if key in self.by_key and not self.by_key[key].builtin:
                del self.by_key[key]
                self.generation += 1

    def get(self, key):
        """ResourceInfo by 'plural[.group]' or raise 404."""
        with self.lock:
            r = self.by_key.get(key)
        if r is None:
            raise ApiError(404, "NotFound", "the server could not find the "
                           "requested resource", plain="404 page not found")
        return r

    def lookup(self, group, version, plural):
        """ResourceInfo serving group/version/plural, or None."""
        with self.lock:
            r = self.by_key.get(plural + ("." + group if group else ""))
        if r is None or version not in r.versions:
            return None
        return r

    def for_kind(self, api_version, kind):
        """ResourceInfo for an apiVersion and kind, or None."""
        group, _, version = api_version.rpartition("/")
        with self.lock:
            for r in self.by_key.values():
                if (r.group == group and r.kind == kind and
                        version in r.versions):
                    return r
        return None

    def all(self):
        """Every served resource."""
        with self.lock:
            return list(self.by_key.values())

    def group_versions(self):
        """{group: [versions]} of every served non-core group."""
        out = {}
        for r in self.all():
            if r.group:
                vs = out.setdefault(r.group, [])
                for v in r.versions:
                    if v not in vs:
                        vs.append(v)
        return out


def _version_key(v):
    """Kubernetes version priority: GA > beta > alpha, higher first."""
    import re
    m = re.match(r'^v(\d+)(?:(alpha|beta)(\d+))?$', v)
    if not m:
        return (0, 0, 0, v)
    rank = {"alpha": 1, "beta": 2, None: 3}[m.group(2)]
    return (rank, int(m.group(1)), int(m.group(3) or 0), "")


def discovery_api():
    """GET /api."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": "127.0.0.1:6443"}]}


def _group_doc(group, versions):
    """One APIGroup entry."""
    vs = sorted(versions, key=_version_key, reverse=True)
    gvs = [{"groupVersion": group + "/" + v, "version": v} for v in vs]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def discovery_apis(reg):
    """GET /apis (legacy APIGroupList)."""
    groups = reg.group_versions()
    order = kinds.GROUP_ORDER
    names = [g for g in order if g in groups] + sorted(
        g for g in groups if g not in order)
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_doc(g, groups[g]) for g in names]}


def discovery_group(reg, group):
    """GET /apis/GROUP, or None when the group is not served."""
    groups = reg.group_versions()
    if group not in groups:
        return None
    d = _group_doc(group, groups[group])
    d.update({"kind": "APIGroup", "apiVersion": "v1"})
    return d


def discovery_resources(reg, group, version):
    """GET /api/v1 or /apis/G/V (APIResourceList), or None."""
    rs = [r for r in reg.all() if r.group == group and version in r.versions]
    if not rs:
        return None
    out = []
    for r in sorted(rs, key=lambda x: x.resource):
        e = {"name": r.resource, "singularName": r.singular,
             "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs}
        if r.short_names:
            e["shortNames"] = r.short_names
        if r.categories:
            e["categories"] = r.categories
        out.append(e)
        for s in sorted(r.desc.subresources, key=lambda x: x.name):
            out.append({"name": r.resource + "/" + s.name,
                        "singularName": "", "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": list(s.verbs)})
    gv = (group + "/" + version) if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": gv, "resources": out}


def _gv_path(group, version):
    """'api/v1' or 'apis/G/V'."""
    return ("apis/%s/%s" % (group, version)) if group else "api/" + version


def openapi_doc(reg, group, version):
    """The OpenAPI v3 document of one group-version (patch ops only)."""
    paths = {}
    param = {"name": "fieldValidation", "in": "query",
             "schema": {"type": "string", "uniqueItems": True}}
    for r in reg.all():
        if r.group != group or version not in r.versions:
            continue
        base = "/" + _gv_path(group, version)
        if r.namespaced:
            base += "/namespaces/{namespace}"
        gvk = {"group": group, "version": version, "kind": r.kind}
        op = {"x-kubernetes-group-version-kind": gvk,
              "x-kubernetes-action": "patch", "parameters": [param],
              "responses": {"200": {"description": "OK"}}}
        paths[base + "/" + r.resource + "/{name}"] = {
            "patch": op, "put": dict(op, **{"x-kubernetes-action": "put"})}
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes",
                     "version": reg.release.version_info()["gitVersion"]},
            "paths": paths, "components": {"schemas": {}}}


def openapi_root(reg):
    """GET /openapi/v3: the group-version index with content hashes."""
    out = {}
    gvs = {("", "v1")}
    for r in reg.all():
        for v in r.versions:
            gvs.add((r.group, v))
    for g, v in sorted(gvs):
        body = json.dumps(openapi_doc(reg, g, v), sort_keys=True).encode()
        h = hashlib.sha512(body).hexdigest()[:128].upper()
        out[_gv_path(g, v)] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s"
                               % (_gv_path(g, v), h)}
    return {"paths": out}
