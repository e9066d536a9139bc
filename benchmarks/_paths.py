# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make ``ansible_collections.gpu_ops.cluster`` importable and name the results folder."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def setup():
    """Put the tree that holds ansible_collections/gpu_ops/cluster on sys.path (this checkout's .collections)."""
    parent = os.path.dirname(ROOT)
    if os.path.basename(parent) == "gpu_ops" and os.path.basename(os.path.dirname(parent)) == "ansible_collections":
        candidates = [os.path.dirname(os.path.dirname(parent))]
    else:
        candidates = [os.path.join(ROOT, ".collections")]
    for path in candidates + os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep):
        if path and os.path.isdir(os.path.join(path, "ansible_collections", "gpu_ops", "cluster")):
            if path not in sys.path:
                sys.path.insert(0, path)
            return path
    raise SystemExit("cannot find ansible_collections/gpu_ops/cluster: run scripts/bootstrap.sh (make venv) first")


def save(result, name, output=None):
    """Write a benchmark's JSON result (default benchmarks/results/<name>-<time>.json); returns the path."""
    import json  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel

    os.makedirs(RESULTS, exist_ok=True)
    path = output or os.path.join(RESULTS, "%s-%s.json" % (name, time.strftime("%Y%m%d-%H%M%S")))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return path
