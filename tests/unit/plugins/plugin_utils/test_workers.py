# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A forked worker's collector leaves the inherited objects alone; the controller's is unchanged (_workers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# each scenario runs in a fresh interpreter: the at-fork hook cannot be unregistered from the test process
SCENARIO = textwrap.dedent("""
    import gc, json, os, sys
    # what the interpreter itself froze at start-up (Python 3.12 freezes a few hundred objects; 3.11 none)
    baseline = gc.get_freeze_count()
    sys.path[:0] = %(paths)r
    from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _workers

    calls = [_workers.freeze_inherited_objects_in_workers() for _ in range(%(calls)d)]
    held = [[i] for i in range(20000)]  # objects the controller holds when it forks (lists: the collector tracks them)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        inherited_frozen = gc.get_freeze_count()
        fresh = [[i] for i in range(100)]
        gc.collect()
        os.write(write, json.dumps([inherited_frozen, gc.get_freeze_count()]).encode())
        os._exit(0)
    os.close(write)
    child = json.loads(os.read(read, 1000).decode())
    os.waitpid(pid, 0)
    print(json.dumps({"calls": calls, "child": [n - baseline for n in child],
                      "controller_frozen": gc.get_freeze_count() - baseline, "held": len(held)}))
""")


def _run(calls):
    paths = [p for p in sys.path if p]
    proc = subprocess.run([sys.executable, "-c", SCENARIO % {"paths": paths, "calls": calls}],
                          capture_output=True, text=True, check=True, timeout=60)
    return json.loads(proc.stdout)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_worker_freezes_what_it_inherits_and_the_controller_does_not():
    found = _run(calls=1)
    assert found["calls"] == [True]
    inherited_frozen, after_collect = found["child"]
    # every object the controller held (20000 dicts, beside ansible's own) is in the child's permanent generation
    assert inherited_frozen >= found["held"]
    # a collection in the worker does not thaw them
    assert after_collect == inherited_frozen
    # the controller's own collector still sees all of its objects (beyond what the interpreter froze itself)
    assert found["controller_frozen"] == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_without_the_hook_a_worker_inherits_nothing_frozen():
    found = _run(calls=0)
    assert found["child"] == [0, 0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_the_hook_is_registered_once_however_many_plugins_ask():
    found = _run(calls=3)
    assert found["calls"] == [True, False, False]
    assert found["child"][0] >= found["held"]
