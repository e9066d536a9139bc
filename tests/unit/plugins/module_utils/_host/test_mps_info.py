# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mps_control_info engine (plugins/module_utils/_host/mps_info.py) against the strict fake
nvidia-cuda-mps-control (tests/fakes), through the module contract's Context."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import Context, EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mps_info

FAKE = str(pathlib.Path(__file__).parents[4] / "fakes" / "nvidia-cuda-mps-control")


def _run_command(args, data=None, binary_data=False, environ_update=None):
    env = dict(os.environ, **(environ_update or {}))
    proc = subprocess.run([sys.executable] + list(args), input=data, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _context(pipe):
    params = dict(pipe_directory=str(pipe), control_binary=FAKE)
    return params, Context(params, run_command=_run_command, get_bin_path=lambda name, **kwargs: None)


def test_no_daemon_reads_as_not_running_and_changes_nothing(tmp_path):
    params, context = _context(tmp_path)
    result = mps_info.run(params, context)
    assert result["changed"] is False and result["running"] is False
    assert "actions" not in result


def test_a_running_daemon_reports_itself(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(tmp_path), CUDA_MPS_LOG_DIRECTORY=str(log))
    subprocess.run([sys.executable, FAKE, "-d"], env=env, check=True)
    try:
        params, context = _context(tmp_path)
        result = mps_info.run(params, context)
        assert result["running"] is True and result["changed"] is False
    finally:
        subprocess.run([sys.executable, FAKE, "--fake-crash"], env=env, check=True)


def test_bad_input_is_an_engine_error_naming_the_option(tmp_path):
    params, context = _context("relative/pipe")
    with pytest.raises(EngineError) as error:
        mps_info.run(params, context)
    assert "pipe_directory" in str(error.value)
