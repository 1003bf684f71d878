#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Report file-local functions that borrow another module's prefix.

A header owns a prefix when at least two of its function declarations
(or its only one), and at least half of them, begin with PREFIX_ (ipc.h
owns ipc_, kube.h kube_, nscache.h nscache_; util.h, a collection of
primitives, owns none). A static function in a .c file whose name begins with a prefix
owned by a header the file could see (common/, kube/, ipc/, cache/, its own
directory), but not by a header of its own directory, borrows that
prefix: a reader who greps for the module's API finds it and is misled.

usage: static_prefixes.py SRCDIR   (exit 1 and one line per finding)
"""
import collections
import os
import re
import sys

SHARED = ("common", "kube", "ipc", "cache")
PROGRAMS = ("kpgpud-admit", "kpgpud-sync", "kpgpud-quota", "kpgpuctl")

DECL = re.compile(r"^[A-Za-z_][\w \t*]*?[\s*]([a-z][a-z0-9]*)_\w*\s*\(", re.M)
STATIC = re.compile(r"^static [^;=(]*\n(([a-z][a-z0-9]*)_\w*)\(", re.M)


def headers(src, d):
    p = os.path.join(src, d)
    return [os.path.join(d, f) for f in sorted(os.listdir(p)) if f.endswith(".h")]


def owned(src, h):
    with open(os.path.join(src, h), encoding="utf-8") as f:
        names = DECL.findall(f.read())
    if not names:
        return set()
    counts = collections.Counter(names)
    return {p for p, n in counts.items()
            if 2 * n >= len(names) and (n >= 2 or len(names) == 1)}


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "."
    dirs = [d for d in SHARED + PROGRAMS if os.path.isdir(os.path.join(src, d))]
    owner = {d: set() for d in dirs}
    for d in dirs:
        for h in headers(src, d):
            owner[d] |= owned(src, h)
    found = 0
    for d in dirs:
        visible = set().union(*(owner[s] for s in SHARED if s in owner))
        foreign = visible - owner[d]
        for f in sorted(os.listdir(os.path.join(src, d))):
            if not f.endswith(".c"):
                continue
            with open(os.path.join(src, d, f), encoding="utf-8") as fh:
                text = fh.read()
            for m in STATIC.finditer(text):
                if m.group(2) in foreign:
                    line = text.count("\n", 0, m.start(1)) + 1
                    print("%s/%s:%d: static %s borrows the prefix %s_ of %s"
                          % (d, f, line, m.group(1), m.group(2),
                             ", ".join(s for s in dirs if m.group(2) in owner[s])))
                    found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
