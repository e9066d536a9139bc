# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Keep a forked worker's garbage collector away from the objects it inherits from the controller.

ansible-playbook forks one worker per task and host. A worker inherits the controller's whole heap (ansible-core,
the parsed playbook and roles, and the Kubernetes and cloud clients our action plugins import once in the
controller), and the first full collection of its garbage collector walks every one of those objects, paying CPU
and a copy-on-write page fault for every page it touches (issue #22: 0.5-0.9 s of a 6 s no-op run of gke_gpudirect.yml
on a 2-core machine, in runs with and without this).

``os.register_at_fork(after_in_child=gc.freeze)`` moves the inherited objects into the collector's permanent
generation the moment a worker starts (O(1): the generation lists are spliced, no object is visited), so the
worker collects only what it allocates itself - CPython's documented use of ``gc.freeze`` for a process that
forks without exec. The controller itself is unchanged: its collector still sees every object it holds. A worker
lives for one task; an inherited object it drops is freed by reference counting, and one in a reference cycle is
freed with the worker. Nothing else forks without exec: module processes, ``subprocess`` and async jobs exec a
new interpreter.
"""

from __future__ import annotations

import gc
import os

_registered = []


def freeze_inherited_objects_in_workers():
    """Register the at-fork hook once per process (the controller: the first of our plugins it loads calls this)."""
    if _registered or not hasattr(os, "register_at_fork"):
        return False
    os.register_at_fork(after_in_child=gc.freeze)
    _registered.append(os.getpid())
    return True
