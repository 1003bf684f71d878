# SPDX-License-Identifier: Apache-2.0
"""Runs every test_* function of study/tests/test_*.py and ends with the
line "N passed, N failed"."""

import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main(argv):
    only = argv[1] if len(argv) > 1 else ""
    passed = failed = 0
    for fn in sorted(os.listdir(HERE)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        mod = importlib.import_module(fn[:-3])
        for name in sorted(n for n in dir(mod) if n.startswith("test_")):
            if only not in name:
                continue
            t0 = time.monotonic()
            try:
                getattr(mod, name)()
            except Exception:
                failed += 1
                print("FAIL %s.%s" % (fn[:-3], name))
                traceback.print_exc(file=sys.stdout)
            else:
                passed += 1
                print("ok   %s.%s (%.1f s)" % (fn[:-3], name,
                                             time.monotonic() - t0))
            sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
