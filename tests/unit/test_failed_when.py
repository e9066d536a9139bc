# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module's own error message reaches the user on every core line.

Since ansible-core 2.19 a ``failed_when`` on a task takes the module's error over: when the expression is true,
ansible-core 2.21 reports "A 'failed_when' expression evaluated to 'True'" instead of the module's message (a closed
port, a refused object, a missing permission), and when it is false the registered result has no ``msg`` on either
line. So a task of a module that can fail on its own (the Kubernetes and cloud modules) carries no ``failed_when``
that can be true; ``failed_when: false`` stays only where what follows reads the result's output, not its message.
"""

from __future__ import annotations

import glob
import os

import yaml

from ansible_collections.gpu_ops.cluster.tests.unit.test_role_includes import _tasks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# modules whose failures carry the message the user needs (their collections' modules, ours included)
FAILING_MODULES = ("kubernetes.core.", "gpu_ops.cluster.", "awx.awx.")
# (file, task name start): why its failed_when may be true
ALLOWED = {
    ("roles/apply/tasks/_manifests_send.yml", "Apply the manifests of step"): (
        "a wait that timed out on an object it read is reported by the next task, naming the object, instead of a"
        " dump of it; a call that failed without an object back fails here: on 2.21 the error line is ansible-core's,"
        " and the item's result printed with it keeps the module's msg"),
}


def _module(task):
    return next((key for key in task if isinstance(key, str) and key.startswith(FAILING_MODULES)), None)


def failed_when_tasks():
    """``(file, task name, module, failed_when)`` of every role task with a failed_when."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle) or []
        for task in _tasks(document):
            if "failed_when" in task:
                found.append((os.path.relpath(path, ROOT), " ".join(str(task.get("name", "")).split()), _module(task),
                              task["failed_when"]))
    return found


def _allowed(path, name):
    return next((why for (where, start), why in ALLOWED.items() if where == path and name.startswith(start)), None)


def test_the_scan_finds_failed_when_on_module_tasks():
    found = failed_when_tasks()
    assert any(module and module.startswith("kubernetes.core.") for dummy, dummy, module, dummy in found)
    assert any(path == "roles/apply/tasks/_manifests_send.yml" for path, dummy, dummy, dummy in found)


def test_no_module_task_has_a_failed_when_that_can_hide_its_message():
    hiding = [(path, name, module, expression) for path, name, module, expression in failed_when_tasks()
              if module and expression is not False and not _allowed(path, name)]
    assert not hiding, "failed_when on these module tasks replaces the module's message on ansible-core 2.21: %s" % hiding


def test_the_allowed_list_is_not_stale():
    found = set((path, name) for path, name, dummy, dummy in failed_when_tasks())
    for path, start in ALLOWED:
        assert any(where == path and name.startswith(start) for where, name in found), (path, start)
