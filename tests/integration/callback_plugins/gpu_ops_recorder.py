# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only callback: append one JSON line per task result to $GPU_OPS_RESULTS_FILE.

The integration tests' ``run_playbook`` helper enables it next to the default stdout callback, so
tests assert on structured results (task name, action, status, changed, the module's return)
instead of parsing console text.
"""

from __future__ import annotations

DOCUMENTATION = """
name: gpu_ops_recorder
type: aggregate
short_description: Record task results as JSON lines (tests only)
description:
  - Writes one JSON object per task result to the file named by the E(GPU_OPS_RESULTS_FILE) environment variable.
requirements:
  - E(GPU_OPS_RESULTS_FILE) set
"""

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    """Record task results as JSON lines."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpu_ops_recorder"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._path = os.environ.get("GPU_OPS_RESULTS_FILE")
        self._play = None

    def _write(self, record):
        if not self._path:
            return
        with open(self._path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")

    def _record(self, result, status):
        task = getattr(result, "task", None) or result._task  # pylint: disable=protected-access
        host = getattr(result, "host", None) or result._host  # pylint: disable=protected-access
        data = getattr(result, "result", None)
        if data is None:
            data = result._result  # pylint: disable=protected-access
        self._write({"play": self._play, "task": task.get_name(), "action": task.action, "host": host.get_name(),
                     "status": status, "changed": bool(data.get("changed")), "result": dict(data)})

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._write({"stats": summary})
