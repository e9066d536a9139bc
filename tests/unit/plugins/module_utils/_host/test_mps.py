# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MPS host engine (plugins/module_utils/_host/mps.py): host settings, parsers, and mps_control against the
strict fake nvidia-cuda-mps-control (tests/fakes)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import Context, EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mps as _mps


FAKE = str(pathlib.Path(__file__).parents[4] / "fakes" / "nvidia-cuda-mps-control")


@pytest.fixture
def host(tmp_path):
    """A pipe and log directory, a run_command like AnsibleModule's, and the fake's test hooks."""
    pipe, log = tmp_path / "pipe", tmp_path / "log"
    pipe.mkdir()
    log.mkdir()

    class Host:
        calls = []

        @staticmethod
        def run_command(args, data=None, binary_data=False, environ_update=None):
            env = dict(os.environ, **(environ_update or {}))
            Host.calls.append((list(args), data, dict(environ_update or {})))
            proc = subprocess.run([sys.executable] + list(args), input=data, env=env, capture_output=True,
                                  text=True, check=False)
            return proc.returncode, proc.stdout, proc.stderr

        @staticmethod
        def hook(*args):
            env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe))
            return subprocess.run([sys.executable, FAKE] + list(args), env=env, capture_output=True, text=True,
                                  check=True).stdout.strip()

        @staticmethod
        def params(**changes):
            params = dict(state="present", pipe_directory=str(pipe), environment={"CUDA_MPS_LOG_DIRECTORY": str(log)},
                          control_binary=FAKE, start=True, active_thread_percentage=None,
                          pinned_device_mem_limit={}, stop_policy="refuse", drain_timeout=600, poll_interval=1,
                          quit=True)
            params.update(changes)
            return params

        @staticmethod
        def converge(check_mode=False, **changes):
            return _mps.converge(Host.params(**changes), Host.run_command, lambda name: None, check_mode)

        @staticmethod
        def info():
            return _mps.info(Host.params(), Host.run_command, lambda name: None)

    Host.pipe, Host.log = pipe, log
    yield Host
    if (pipe / "nvidia-cuda-mps-control.pid").exists():
        Host.hook("--fake-crash")  # end the detached daemon process


def test_start_configure_and_converge(host):
    first = host.converge(active_thread_percentage=40, pinned_device_mem_limit={"0": "8G", "1": "512MB"})
    assert first["changed"] and first["running"]
    assert first["actions"] == ["started the daemon", "set_default_active_thread_percentage 40",
                                "set_default_device_pinned_mem_limit 0 8G", "set_default_device_pinned_mem_limit 1 512M"]
    assert first["default_active_thread_percentage"] == 40.0
    again = host.converge(active_thread_percentage=40, pinned_device_mem_limit={"0": "8G", "1": "512M"})
    assert not again["changed"] and again["actions"] == [] and again["servers"] == []
    assert "Startup" in (host.log / "control.log").read_text()
    # the same limit spelled in the other unit is no change
    same = host.converge(active_thread_percentage=40, pinned_device_mem_limit={"0": "8192M", "1": "512M"})
    assert not same["changed"] and same["actions"] == []


def test_daemon_environment_is_the_default_and_check_mode_changes_nothing(host):
    host.converge(environment={"CUDA_MPS_LOG_DIRECTORY": str(host.log), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25"})
    checked = host.converge(check_mode=True, active_thread_percentage=60)
    assert checked["changed"] and checked["actions"] == ["set_default_active_thread_percentage 60"]
    assert host.info()["default_active_thread_percentage"] == 25.0


def test_check_mode_does_not_start(host):
    result = host.converge(check_mode=True, active_thread_percentage=50)
    assert result["changed"] and result["actions"] == ["started the daemon"]
    assert not host.info()["running"]
    assert not any(call[0][-1] == "-d" for call in host.calls)


def test_refuse_names_the_clients_and_keeps_the_daemon(host):
    host.converge()
    client = int(host.hook("--fake-connect", "1000"))
    with pytest.raises(_mps.ControlError) as err:
        host.converge(state="absent")
    assert "clients %d" % client in str(err.value) and "stop_policy drain" in str(err.value)
    with pytest.raises(_mps.ControlError):
        host.converge(state="absent", check_mode=True)
    info = host.info()
    assert info["running"] and info["servers"][0]["clients"] == [client]


def test_drain_waits_for_the_clients(host, monkeypatch):
    host.converge()
    client = host.hook("--fake-connect")
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        host.hook("--fake-disconnect", client)  # the client finishes while we wait

    monkeypatch.setattr(_mps.time, "sleep", sleep)
    result = host.converge(state="absent", stop_policy="drain", poll_interval=3)
    assert result["changed"] and not result["running"] and slept[0] == 3
    assert not host.info()["running"]


def test_drain_times_out_without_stopping(host):
    host.converge()
    host.hook("--fake-connect")
    with pytest.raises(_mps.ControlError, match="still running after 0s of draining"):
        host.converge(state="absent", stop_policy="drain", drain_timeout=0)
    assert host.info()["running"]


def test_absent_twice_and_quit_false(host):
    host.converge()
    checked = host.converge(state="absent", quit=False)
    assert not checked["changed"] and checked["running"]
    assert host.converge(state="absent")["changed"]
    assert not host.converge(state="absent")["changed"]


def test_a_crashed_daemon_is_started_again(host):
    host.converge()
    host.hook("--fake-crash")
    assert (host.pipe / "nvidia-cuda-mps-control.pid").exists()  # stale
    result = host.converge()
    assert result["actions"][0] == "started the daemon" and host.info()["running"]


def test_start_false_fails_when_nothing_answers(host):
    with pytest.raises(_mps.ControlError, match="start its service first"):
        host.converge(start=False)


def test_a_daemon_that_cannot_start_is_an_error(host):
    host.log.rmdir()
    with pytest.raises(_mps.ControlError, match="Log directory .* does not exist"):
        host.converge()


@pytest.mark.parametrize("changes, message", [
    ({"pipe_directory": "relative"}, "pipe_directory: must be an absolute path"),
    ({"active_thread_percentage": 0}, "active_thread_percentage: must be a whole number from 1 to 100"),
    ({"active_thread_percentage": 101}, "active_thread_percentage: must be a whole number from 1 to 100"),
    ({"pinned_device_mem_limit": {"0": "lots"}}, "pinned_device_mem_limit[0]: 'lots' is not a memory limit"),
    ({"poll_interval": 0}, "poll_interval: must be at least 1"),
    ({"environment": {"cuda visible": "0"}}, "'cuda visible' is not an environment variable name"),
])
def test_bad_params_are_refused_before_any_call(host, changes, message):
    with pytest.raises(ValueError) as err:
        host.converge(**changes)
    assert message in str(err.value)
    assert host.calls == []


@pytest.mark.parametrize("percentage", [1, 100])
def test_the_percentage_bounds_are_accepted(host, percentage):
    result = host.converge(active_thread_percentage=percentage)
    assert result["default_active_thread_percentage"] == float(percentage)  # 100 is the daemon's own default


def test_a_bare_binary_name_is_looked_up_on_path(host):
    """control_binary without a slash is found the way the module finds programs (get_bin_path), then run."""
    looked_up = []
    result = _mps.converge(host.params(control_binary="nvidia-cuda-mps-control"), host.run_command,
                           lambda name: looked_up.append(name) or FAKE, False)
    assert looked_up == ["nvidia-cuda-mps-control"] and result["running"]
    assert host.calls[0][0][0] == FAKE


def test_missing_binary_is_named(host):
    with pytest.raises(ValueError, match="control_binary: nvidia-cuda-mps-control is not on PATH"):
        _mps.converge(host.params(control_binary="nvidia-cuda-mps-control"), host.run_command, lambda n: None, False)


@pytest.mark.parametrize("binary", ["nvidia-cuda-mps-control", "/nonexistent/bin/nvidia-cuda-mps-control"])
def test_absent_without_the_binary_is_a_no_op(host, binary):
    result = _mps.converge(host.params(state="absent", control_binary=binary), host.run_command, lambda n: None, False)
    assert not result["changed"] and not result["running"] and result["servers"] == []
    assert result["actions"] == ["%s is not installed: no MPS control daemon to stop" % binary]
    checked = _mps.converge(host.params(state="absent", control_binary=binary), host.run_command, lambda n: None, True)
    assert not checked["changed"]
    assert host.calls == []  # nothing was run


def test_present_without_the_binary_names_it(host, tmp_path):
    not_executable = tmp_path / "nvidia-cuda-mps-control"
    not_executable.write_text("#!/bin/sh\n")
    with pytest.raises(ValueError, match="control_binary: .* is not an executable file; install"):
        _mps.converge(host.params(control_binary=str(not_executable)), host.run_command, lambda n: None, False)
    assert host.calls == []


def test_a_daemon_that_never_answers_fails_after_the_start_timeout(host, monkeypatch):
    """``-d`` succeeds but nothing answers on the pipe (the daemon died at once): the start wait gives up."""
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    def run_command(args, data=None, binary_data=False, environ_update=None):
        if list(args)[1:] == ["-d"]:
            return 0, "", ""  # started, and exited before it opened the pipe
        return host.run_command(args, data=data, binary_data=binary_data, environ_update=environ_update)

    monkeypatch.setattr(_mps.time, "sleep", sleep)
    monkeypatch.setattr(_mps.time, "monotonic", lambda: now[0])
    with pytest.raises(_mps.ControlError, match="does not answer on .* after 5.0s"):
        _mps.converge(host.params(), run_command, lambda name: None, False)
    assert sum(slept) == _mps.START_TIMEOUT and set(slept) == {_mps.START_POLL}
    assert not host.info()["running"]


GOOD = {"pipe_directory": "/run/nvidia-mps", "log_directory": "/var/log/nvidia-mps"}


def _settings(**changes):
    settings = dict(GOOD)
    settings.update(changes)
    return settings


# ------------------------------------------------------------------------------ host settings


def test_host_settings_build_the_daemon_environment():
    result = _mps.host_settings(_settings(active_thread_percentage="50",
                                          pinned_device_mem_limit={1: "512MB", "0": "10g"},
                                          visible_devices=[0, "GPU-0f6f2a4e-1c9b-4b87-9d3e-7e0c1a2b3c4d"],
                                          exclusive_process=True, pipe_directory="/run/nvidia-mps/"))
    assert result["environment"] == {
        "CUDA_MPS_PIPE_DIRECTORY": "/run/nvidia-mps",
        "CUDA_MPS_LOG_DIRECTORY": "/var/log/nvidia-mps",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=10G,1=512M",
        "CUDA_VISIBLE_DEVICES": "0,GPU-0f6f2a4e-1c9b-4b87-9d3e-7e0c1a2b3c4d",
    }
    assert result["stop_policy"] == "refuse" and result["exclusive_process"] and not result["mig"]


def test_one_mig_device_per_daemon_is_accepted():
    result = _mps.host_settings(_settings(visible_devices=["MIG-5c5b2f3a-8f9e-5b4d-a1c2-3d4e5f6a7b8c"]))
    assert result["mig"] and result["environment"]["CUDA_VISIBLE_DEVICES"].startswith("MIG-")


@pytest.mark.parametrize("changes, message", [
    ({"pipe_directory": "run/nvidia-mps"}, "pipe_directory: must be an absolute path"),
    ({"pipe_directory": None}, "pipe_directory: must be an absolute path"),
    ({"log_directory": "/var/log/my mps"}, "log_directory: must be an absolute path without spaces"),
    ({"log_directory": "/run/nvidia-mps"}, "log_directory: must differ from pipe_directory"),
    ({"active_thread_percentage": 0}, "active_thread_percentage: must be a whole number from 1 to 100, got 0"),
    ({"active_thread_percentage": 101}, "from 1 to 100, got 101"),
    ({"active_thread_percentage": "50%"}, "from 1 to 100, got '50%'"),
    ({"active_thread_percentage": 12.5}, "from 1 to 100, got 12.5"),
    ({"active_thread_percentage": True}, "from 1 to 100, got True"),
    ({"pinned_device_mem_limit": {0: "10"}}, "pinned_device_mem_limit[0]: '10' is not a memory limit"),
    ({"pinned_device_mem_limit": {0: "10T"}}, "'10T' is not a memory limit"),
    ({"pinned_device_mem_limit": {0: "0G"}}, "'0G' is not a memory limit"),
    ({"pinned_device_mem_limit": {0: "-1G"}}, "'-1G' is not a memory limit"),
    ({"pinned_device_mem_limit": {0: "1.5G"}}, "'1.5G' is not a memory limit"),
    ({"pinned_device_mem_limit": {"gpu0": "1G"}}, "pinned_device_mem_limit key: 'gpu0' is not a GPU index"),
    ({"pinned_device_mem_limit": "0=1G"}, "pinned_device_mem_limit: must be a mapping"),
    ({"visible_devices": ["all"]}, "visible_devices: 'all' is not a GPU index"),
    ({"visible_devices": ["MIG-5c5b2f3a-8f9e-5b4d-a1c2-3d4e5f6a7b8c", 1]}, "a MIG device needs a control daemon of its own"),
    ({"visible_devices": ["MIG-5c5b2f3a-8f9e-5b4d-a1c2-3d4e5f6a7b8c"], "exclusive_process": True},
     "exclusive_process: compute mode is a property of the whole GPU"),
    ({"stop_policy": "kill"}, "stop_policy: 'kill' is not one of: refuse, drain"),
])
def test_bad_host_settings_name_the_field(changes, message):
    with pytest.raises(ValueError) as err:
        _mps.host_settings(_settings(**changes))
    assert message in str(err.value)


HOST_GPUS = [dict(index=0, uuid="GPU-0f6f2a4e-1c9b-4b87-9d3e-7e0c1a2b3c4d"), dict(index=1, uuid="GPU-11111111-2222-3333-4444-555555555555")]


@pytest.mark.parametrize("changes, message", [
    ({"visible_devices": [2]}, "visible_devices: 2 is not a GPU of this host (GPUs: 0, 1)"),
    ({"visible_devices": ["GPU-99999999-2222-3333-4444-555555555555"]},
     "visible_devices: GPU-99999999-2222-3333-4444-555555555555 is not a GPU of this host (GPUs: 0, 1)"),
    ({"pinned_device_mem_limit": {8: "1G"}}, "pinned_device_mem_limit: 8 is not a GPU of this host (GPUs: 0, 1)"),
], ids=["index past the last GPU", "unknown UUID", "limit for a missing GPU"])
def test_devices_must_be_the_hosts_gpus_when_its_facts_are_known(changes, message):
    with pytest.raises(ValueError) as err:
        _mps.host_settings(_settings(**changes), gpus=HOST_GPUS)
    assert message in str(err.value)
    assert _mps.host_settings(_settings(**changes))["environment"], "without the host's GPUs only the syntax is checked"


def test_the_hosts_own_gpus_and_mig_devices_pass():
    result = _mps.host_settings(_settings(visible_devices=[1, "GPU-0f6f2a4e-1c9b-4b87-9d3e-7e0c1a2b3c4d"],
                                          pinned_device_mem_limit={0: "1G", "1": "2G"}), gpus=HOST_GPUS)
    assert result["environment"]["CUDA_VISIBLE_DEVICES"] == "1,GPU-0f6f2a4e-1c9b-4b87-9d3e-7e0c1a2b3c4d"
    mig = _mps.host_settings(_settings(visible_devices=["MIG-5c5b2f3a-8f9e-5b4d-a1c2-3d4e5f6a7b8c"]), gpus=HOST_GPUS)
    assert mig["mig"]
    with pytest.raises(ValueError, match=r"visible_devices: 0 is not a GPU of this host \(GPUs: none\)"):
        _mps.host_settings(_settings(visible_devices=[0]), gpus=[])


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(ValueError) as err:
        _mps.host_settings({"pipe_directory": "x", "log_directory": "y", "active_thread_percentage": 0})
    assert str(err.value).count(": ") >= 3


@pytest.mark.parametrize("text, pids", [("", []), ("\n", []), ("4242\n", [4242]), ("101\n202\n", [101, 202])])
def test_server_list(text, pids):
    assert _mps.parse_server_list(text) == pids


@pytest.mark.parametrize("text", ["Cannot find MPS control daemon process", "12 34"])
def test_server_list_refuses_other_text(text):
    with pytest.raises(ValueError, match="one server PID per line"):
        _mps.parse_server_list(text)


def test_percentage_parse():
    assert _mps.parse_percentage("100.0\n") == 100.0
    with pytest.raises(ValueError, match="expected a number"):
        _mps.parse_percentage("n/a")


@pytest.mark.parametrize("spelled, megabytes", [("10G", 10240), ("10240M", 10240), ("512M", 512), (None, None)])
def test_mem_limits_compare_in_megabytes_whatever_the_unit(spelled, megabytes):
    limit = None if spelled is None else _mps.mem_limit("limit", spelled)
    assert _mps.mem_limit_mb(limit) == megabytes


# ---- mps_control_info's entry point, through the module contract's Context

def _info_run_command(args, data=None, binary_data=False, environ_update=None):
    env = dict(os.environ, **(environ_update or {}))
    proc = subprocess.run([sys.executable] + list(args), input=data, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def _info_context(pipe):
    params = dict(pipe_directory=str(pipe), control_binary=FAKE)
    return params, Context(params, run_command=_info_run_command, get_bin_path=lambda name, **kwargs: None)


def test_no_daemon_reads_as_not_running_and_changes_nothing(tmp_path):
    params, context = _info_context(tmp_path)
    result = _mps.run_info(params, context)
    assert result["changed"] is False and result["running"] is False
    assert "actions" not in result


def test_a_running_daemon_reports_itself(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(tmp_path), CUDA_MPS_LOG_DIRECTORY=str(log))
    subprocess.run([sys.executable, FAKE, "-d"], env=env, check=True)
    try:
        params, context = _info_context(tmp_path)
        result = _mps.run_info(params, context)
        assert result["running"] is True and result["changed"] is False
    finally:
        subprocess.run([sys.executable, FAKE, "--fake-crash"], env=env, check=True)


def test_bad_input_is_an_engine_error_naming_the_option(tmp_path):
    params, context = _info_context("relative/pipe")
    with pytest.raises(EngineError) as error:
        _mps.run_info(params, context)
    assert "pipe_directory" in str(error.value)
