# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark-only callback: where a playbook run's time goes, task by task, as JSON in $GPU_OPS_TASK_PROFILE.

A task's wall time runs from its start to the next task's start (or the play's end), so it includes the
strategy's own cost between tasks. Executions counts the hosts a task really ran on (ok, changed or failed):
with a module task each one is a Python process on the target; skipped hosts cost only the condition.
"""

from __future__ import annotations

DOCUMENTATION = """
name: gpu_ops_task_profile
type: aggregate
short_description: Per-task wall time and executions of a run (benchmarks only)
description:
  - Writes the per-task profile of the run as JSON to the file named by E(GPU_OPS_TASK_PROFILE) at the end.
requirements:
  - E(GPU_OPS_TASK_PROFILE) set
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    """Per-task wall time, executions and skips."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpu_ops_task_profile"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._path = os.environ.get("GPU_OPS_TASK_PROFILE")
        self._tasks = {}
        self._current = None
        self._started = None
        self._run_started = time.perf_counter()

    def _key(self, task):
        role = task._role.get_name() if task._role else ""  # pylint: disable=protected-access
        return "%s | %s | %s" % (role, task.get_name(), task.action)

    def _close_current(self):
        if self._current is not None:
            self._tasks[self._current]["wall_s"] += time.perf_counter() - self._started
        self._current = None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close_current()
        key = self._key(task)
        entry = self._tasks.setdefault(key, dict(task=key, action=task.action, starts=0, wall_s=0.0,
                                                 executions=0, skipped=0))
        entry["starts"] += 1
        self._current, self._started = key, time.perf_counter()

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def _count(self, result, field):
        key = self._key(result._task)  # pylint: disable=protected-access
        if key in self._tasks:
            self._tasks[key][field] += 1

    def v2_runner_on_ok(self, result):
        self._count(result, "executions")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "executions")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "executions")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_playbook_on_play_start(self, play):
        self._close_current()

    def v2_playbook_on_stats(self, stats):
        self._close_current()
        if not self._path:
            return
        tasks = sorted(self._tasks.values(), key=lambda entry: -entry["wall_s"])
        for entry in tasks:
            entry["wall_s"] = round(entry["wall_s"], 3)
        document = dict(run_wall_s=round(time.perf_counter() - self._run_started, 3), tasks=tasks)
        with open(self._path, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
