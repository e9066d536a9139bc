# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the benchmarks: ``python -m benchmarks [name ...] [-- options for each]``.

Every module of this package that defines ``main(argv)`` is a benchmark (``_``-prefixed modules are
helpers). Each prints a table and writes JSON to ``benchmarks/results/`` (gitignored).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from benchmarks import _paths


def discover():
    package = sys.modules["benchmarks"]
    names = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module("benchmarks.%s" % info.name)
        if callable(getattr(module, "main", None)):
            names.append(info.name)
    return sorted(names)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    _paths.setup()
    available = discover()
    # a benchmark that sets SLOW = True (hours on a small machine) runs only when named
    chosen = argv or [n for n in available if not getattr(importlib.import_module("benchmarks.%s" % n), "SLOW", False)]
    unknown = [n for n in chosen if n not in available]
    if unknown:
        sys.stderr.write("unknown benchmark(s): %s; available: %s\n" % (", ".join(unknown), ", ".join(available)))
        return 2
    status = 0
    for name in chosen:
        print("=== %s" % name)
        module = importlib.import_module("benchmarks.%s" % name)
        status = max(status, module.main(extra) or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
