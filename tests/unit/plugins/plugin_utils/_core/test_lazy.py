# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A filter's engine is imported when the filter first uses it (plugins/plugin_utils/_core/lazy.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import lazy

HOLDER = os.path.abspath(os.path.join(os.path.dirname(lazy.__file__), *[".."] * 6))
PROBE = """
import importlib, json, sys
names = sys.argv[1:]
for name in names:
    importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.filter." + name)
ours = sorted(m for m in sys.modules if m.startswith("ansible_collections.gpu_ops.cluster.plugins.")
              and ".filter." not in m and not m.endswith((".filter", ".plugins")))
print(json.dumps(ours))
"""


def _loaded(*filter_files):
    proc = subprocess.run([sys.executable, "-c", PROBE] + list(filter_files), capture_output=True, text=True,
                          check=False, timeout=120, env=dict(os.environ, PYTHONPATH=HOLDER))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_module_is_imported_on_first_use_and_once():
    module = lazy.engine("json")
    assert "(imported)" not in repr(module)
    assert module.dumps([1]) == "[1]" and "(imported)" in repr(module)
    assert module.loads is json.loads


def test_a_missing_module_or_name_fails_where_it_is_used():
    with pytest.raises(ImportError):
        lazy.engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.no_such_engine").run
    with pytest.raises(AttributeError):
        lazy.engine("json").no_such_function


def test_loading_the_filter_files_imports_no_engine():
    """What a forked worker pays to find one filter: the filter files and the small input checks, no engine."""
    loaded = _loaded("gpudirect", "k8s_names", "mig", "validate", "nvidia_operators", "bandwidth", "mps", "nccl_tests")
    assert [m for m in loaded if "._core.lazy" not in m and "._core.inputs" not in m
            and not m.endswith(("plugin_utils", "plugin_utils._core"))] == [], loaded
