# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""NVIDIA MPS on a host: the control daemon's settings and its control commands.

Read by the mps_control module (``run``), the mps_control_info module (``run_info``) and,
through the filters in plugins/filter/mps.py, the ``mps`` role. Kubernetes-side MPS (ACK rules, allocation
report) lives in plugin_utils/_sharing/gpu_sharing.py, so that the host module imports nothing it does not need.

Sources (shared research notes nvidia-stack.md section 6.1):
- ``nvidia-cuda-mps-control`` environment (``CUDA_MPS_PIPE_DIRECTORY``, ``CUDA_MPS_LOG_DIRECTORY``,
  ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` as ``<dev>=<n>G|M``
  pairs) and its control commands;
- one control daemon per MIG device, with its own pipe directory and
  ``CUDA_VISIBLE_DEVICES=MIG-<uuid>``;
"""

from __future__ import annotations

import os
import re
import time

# the collection's one wait loop: light (standard library only), so the host module stays lean
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import Waiter, WaitTimeout
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError


# --------------------------------------------------------------------------------------------
# Host settings
# --------------------------------------------------------------------------------------------

STOP_POLICIES = ("refuse", "drain")
# <n>G or <n>M as the control daemon takes it; MB/GB as the environment variable also allows
_MEM_LIMIT = re.compile(r"^(?P<n>[1-9][0-9]*)\s*(?P<unit>[MG])B?\Z", re.IGNORECASE)
# a device of CUDA_VISIBLE_DEVICES / the pinned-memory limit: an index, a GPU UUID or a MIG UUID
_DEVICE = re.compile(r"^(?:[0-9]+|GPU-[0-9a-fA-F-]{8,}|MIG-[0-9a-zA-Z/-]{8,})\Z")


def _problem(field, text):
    return "%s: %s" % (field, text)


def _absolute_dir(field, value, problems):
    if not isinstance(value, str) or not value.startswith("/") or "\n" in value or " " in value:
        problems.append(_problem(field, "must be an absolute path without spaces, got %r" % (value,)))
        return None
    return value.rstrip("/") or "/"


def _percentage(field, value, problems):
    if value is None or value == "":
        return None
    try:
        number = int(str(value))
    except ValueError:
        number = None
    if isinstance(value, bool) or number is None or not 1 <= number <= 100:
        problems.append(_problem(field, "must be a whole number from 1 to 100, got %r" % (value,)))
        return None
    return number


def mem_limit(field, value):
    """A pinned-memory limit as the control daemon spells it (``10G``, ``512M``); ValueError otherwise."""
    match = _MEM_LIMIT.match(str(value).strip())
    if isinstance(value, bool) or not match:
        raise ValueError(_problem(field, "%r is not a memory limit (<whole number>G or <whole number>M, "
                                         "e.g. 10G or 512M)" % (value,)))
    return "%s%s" % (match.group("n"), match.group("unit").upper())


def mem_limit_mb(limit):
    """A limit as ``mem_limit`` spells it, in MB (``10G`` -> 10240), so that the daemon's answer compares
    equal to the wanted limit whichever unit it prints; None for None."""
    if limit is None:
        return None
    return int(limit[:-1]) * (1024 if limit.endswith("G") else 1)


def _device(field, value, problems):
    text = str(value).strip()
    if isinstance(value, bool) or not _DEVICE.match(text):
        problems.append(_problem(field, "%r is not a GPU index, GPU-<uuid> or MIG-<uuid>" % (value,)))
        return None
    return text


def _mem_limits(field, value, problems):
    if not value:
        return {}
    if not isinstance(value, dict):
        problems.append(_problem(field, "must be a mapping of device (index or UUID) to limit, got %r" % (value,)))
        return {}
    limits = {}
    for device, limit in value.items():
        name = _device("%s key" % field, device, problems)
        try:
            limits[name] = mem_limit("%s[%s]" % (field, device), limit)
        except ValueError as exc:
            problems.append(str(exc))
    return limits


def _on_host(field, devices, gpus, problems):
    """Each GPU index or GPU UUID of ``devices`` is one of the host's ``gpus`` (gpu_host facts); MIG UUIDs are not
    in those facts and pass."""
    indexes = sorted(str(g.get("index")) for g in gpus)
    uuids = set(str(g.get("uuid")) for g in gpus)
    for device in devices:
        if (device.isdigit() and device not in indexes) or (device.startswith("GPU-") and device not in uuids):
            problems.append(_problem(field, "%s is not a GPU of this host (GPUs: %s)"
                                     % (device, ", ".join(indexes) or "none")))


def host_settings(settings, gpus=None):
    """Validated settings of one MPS control daemon, or ValueError naming every bad field.

    ``settings``: pipe_directory, log_directory (absolute), active_thread_percentage (1-100 or
    None), pinned_device_mem_limit ({device: "10G"}), visible_devices ([index | GPU-uuid |
    MIG-uuid]), exclusive_process (bool), stop_policy (refuse | drain). ``gpus``: the host's GPUs
    (the gpu_host facts' ``gpus``), when known: every index and GPU UUID must be one of them.
    Returns the settings normalised plus ``environment`` (the daemon's environment, as the unit file carries it).
    """
    settings = dict(settings or {})
    problems = []
    pipe = _absolute_dir("pipe_directory", settings.get("pipe_directory"), problems)
    log = _absolute_dir("log_directory", settings.get("log_directory"), problems)
    if pipe and log and pipe == log:
        problems.append(_problem("log_directory", "must differ from pipe_directory (%s)" % pipe))
    percentage = _percentage("active_thread_percentage", settings.get("active_thread_percentage"), problems)
    limits = _mem_limits("pinned_device_mem_limit", settings.get("pinned_device_mem_limit"), problems)
    devices = [d for d in (_device("visible_devices", v, problems) for v in settings.get("visible_devices") or [])
               if d]
    if gpus is not None:
        _on_host("pinned_device_mem_limit", sorted(limits), gpus, problems)
        _on_host("visible_devices", devices, gpus, problems)
    mig_devices = [d for d in devices if d.startswith("MIG-")]
    if mig_devices and len(devices) > 1:
        problems.append(_problem("visible_devices", "a MIG device needs a control daemon of its own (one per MIG "
                                                    "device, each with its own pipe_directory); got %s"
                                 % ", ".join(devices)))
    exclusive = settings.get("exclusive_process") or False
    if exclusive and mig_devices:
        problems.append(_problem("exclusive_process", "compute mode is a property of the whole GPU; it cannot be "
                                                      "set for the MIG device %s" % mig_devices[0]))
    policy = settings.get("stop_policy") or "refuse"
    if policy not in STOP_POLICIES:
        problems.append(_problem("stop_policy", "%r is not one of: %s" % (policy, ", ".join(STOP_POLICIES))))
    if problems:
        raise ValueError("; ".join(problems))
    environment = {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": log}
    if percentage is not None:
        environment["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percentage)
    if limits:
        environment["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join("%s=%s" % item for item in sorted(limits.items()))
    if devices:
        environment["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    return dict(pipe_directory=pipe, log_directory=log, active_thread_percentage=percentage,
                pinned_device_mem_limit=limits, visible_devices=devices, mig=bool(mig_devices),
                exclusive_process=bool(exclusive), stop_policy=policy, environment=environment)


def parse_server_list(text):
    """Server PIDs from ``get_server_list`` output (one per line; empty before the first client)."""
    pids = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.isdigit():
            raise ValueError("get_server_list printed %r, expected one server PID per line" % line)
        pids.append(int(line))
    return pids


def parse_percentage(text):
    """``get_default_active_thread_percentage`` output (``100.0``) as a number."""
    try:
        return float(str(text).strip())
    except ValueError:
        raise ValueError("get_default_active_thread_percentage printed %r, expected a number" % (text,))


# --------------------------------------------------------------------------------------------
# The control daemon (through nvidia-cuda-mps-control's stdin commands)
# --------------------------------------------------------------------------------------------


class ControlError(Exception):
    """The control daemon refused a command, or clients stand in the way of a stop."""


class Control:
    """One control daemon, reached through ``send(stdin_text) -> (rc, stdout, stderr)``.

    ``send`` executes ``nvidia-cuda-mps-control`` with the daemon's CUDA_MPS_PIPE_DIRECTORY; the
    module passes AnsibleModule.run_command, the tests the fake under tests/fakes.
    """

    def __init__(self, send, sleep=None, clock=None):
        self._run = send
        # resolved at construction, so a test that patches time.sleep reaches the waiter
        self._waiter = Waiter(clock=clock or time.monotonic, sleep=sleep or time.sleep)

    def command(self, *lines):
        rc, out, err = self._run("".join(line + "\n" for line in lines))
        if rc != 0:
            raise ControlError(("%s %s" % (out, err)).strip() or "rc %d" % rc)
        return out

    def running(self):
        """Whether a daemon answers on the pipe directory."""
        rc, _out, _err = self._run("get_server_list\n")
        return rc == 0

    def snapshot(self):
        """(running, server PIDs, default active thread percentage) in one call."""
        rc, out, _err = self._run("get_server_list\nget_default_active_thread_percentage\n")
        if rc != 0:
            return False, [], None
        lines = out.strip().splitlines()
        return True, parse_server_list("\n".join(lines[:-1])), parse_percentage(lines[-1] if lines else "")

    def servers(self, pids=None):
        """[dict(pid, clients=[pid])] of the running daemon (of the servers ``pids`` when given)."""
        found = []
        for pid in parse_server_list(self.command("get_server_list")) if pids is None else pids:
            rc, out, _err = self._run("get_client_list %d\n" % pid)
            clients = [int(line) for line in out.split() if line.isdigit()] if rc == 0 else []
            found.append(dict(pid=pid, clients=clients))
        return found

    def default_percentage(self):
        return parse_percentage(self.command("get_default_active_thread_percentage"))

    def default_limit(self, device):
        """The default pinned-memory limit of a device as ``<n>G|M``; None when unset or unreadable."""
        text = self.command("get_default_device_pinned_mem_limit %s" % device).strip()
        try:
            return mem_limit("limit", text)
        except ValueError:
            return None

    def wait_for_clients(self, policy, timeout, interval):
        """Servers that still have clients: fail (refuse) or wait until they leave (drain)."""
        def busy_servers():
            busy = [s for s in self.servers() if s["clients"]]
            if busy and policy == "refuse":
                raise ControlError("MPS clients are running (%s); stopping the daemon would end them. Stop them "
                                   "first, or use stop_policy drain to wait for them" % _described(busy))
            return busy

        try:
            self._waiter.until(busy_servers, lambda busy: not busy, timeout, lambda _busy, _attempt: interval)
        except WaitTimeout as exc:
            raise ControlError("MPS clients still running after %ss of draining (%s)" % (timeout, _described(exc.last)))

    def wait_until(self, answering, what):
        """Wait (START_TIMEOUT) until the daemon answers on the pipe (``answering``) or no longer does."""
        try:
            self._waiter.until(self.running, lambda running: running == answering, START_TIMEOUT,
                               lambda _running, _attempt: START_POLL)
        except WaitTimeout:
            raise ControlError(what)


def _described(servers):
    return "; ".join("server %d: clients %s" % (s["pid"], ", ".join(str(c) for c in s["clients"])) for s in servers)


# --------------------------------------------------------------------------------------------
# The mps_control module's engine
# --------------------------------------------------------------------------------------------

# how long (seconds) a freshly started daemon may take to answer, or a stopped one to go quiet, and the poll pause
START_TIMEOUT = 5.0
START_POLL = 0.25


def _check_params(params):
    problems = []
    pipe = _absolute_dir("pipe_directory", params.get("pipe_directory"), problems)
    _percentage("active_thread_percentage", params.get("active_thread_percentage"), problems)
    limits = _mem_limits("pinned_device_mem_limit", params.get("pinned_device_mem_limit"), problems)
    for key, lowest in (("drain_timeout", 0), ("poll_interval", 1)):
        if params.get(key) is not None and params[key] < lowest:
            problems.append(_problem(key, "must be at least %d, got %s" % (lowest, params[key])))
    for key in params.get("environment") or {}:
        if not re.match(r"^[A-Z_][A-Z0-9_]*\Z", str(key)):
            problems.append(_problem("environment", "%r is not an environment variable name" % (key,)))
    if problems:
        raise ValueError("; ".join(problems))
    return pipe, limits


def _stop(control, params, check_mode, result):
    if check_mode and params["stop_policy"] == "drain":
        busy = [s for s in result["servers"] if s["clients"]]
        if busy:
            result["actions"].append("would wait up to %ss for the clients of %d server(s)"
                                     % (params["drain_timeout"], len(busy)))
    else:
        control.wait_for_clients(params["stop_policy"], params["drain_timeout"], params["poll_interval"])
    if not params["quit"]:
        result["actions"].append("no MPS clients left: the daemon can be stopped")
        return
    result.update(changed=True, running=False)
    result["actions"].append("stopped the daemon")
    if check_mode:
        return
    control.command("quit")
    control.wait_until(False, "the control daemon still answers %ss after quit" % START_TIMEOUT)


def _start(control, start_daemon, params, pipe, check_mode, result):
    if not params["start"]:
        raise ControlError("no MPS control daemon answers on %s; start its service first" % pipe)
    result.update(changed=True, running=True)
    result["actions"].append("started the daemon")
    if check_mode:
        return False
    start_daemon()
    control.wait_until(True, "the control daemon started but does not answer on %s after %ss" % (pipe, START_TIMEOUT))
    return True


def _configure(control, params, limits, check_mode, result):
    wanted = params.get("active_thread_percentage")
    have = result["default_active_thread_percentage"]
    if have is None:  # just started
        have = control.default_percentage()
    if wanted is not None and abs(have - wanted) > 0.05:
        result["actions"].append("set_default_active_thread_percentage %d" % wanted)
        result["changed"] = True
        if not check_mode:
            control.command("set_default_active_thread_percentage %d" % wanted)
            have = control.default_percentage()
    result["default_active_thread_percentage"] = have
    for device, limit in sorted(limits.items()):
        if mem_limit_mb(control.default_limit(device)) != mem_limit_mb(limit):
            result["actions"].append("set_default_device_pinned_mem_limit %s %s" % (device, limit))
            result["changed"] = True
            if not check_mode:
                control.command("set_default_device_pinned_mem_limit %s %s" % (device, limit))


def _binary(params, get_bin_path):
    """The control binary's path, or None when it is not installed (not on PATH, or no such file)."""
    binary = params.get("control_binary") or "nvidia-cuda-mps-control"
    if "/" not in binary:
        return get_bin_path(binary) or None
    return binary if os.path.isfile(binary) and os.access(binary, os.X_OK) else None


def _required_binary(params, get_bin_path):
    binary = _binary(params, get_bin_path)
    if binary is None:
        name = params.get("control_binary") or "nvidia-cuda-mps-control"
        raise ValueError("control_binary: %s %s; install the NVIDIA driver's CUDA MPS control daemon or set "
                         "control_binary" % (name, "is not on PATH" if "/" not in name else "is not an executable file"))
    return binary


def _not_installed(params):
    """state=absent without the control binary: no daemon can run, nothing to stop."""
    return dict(changed=False, running=False, servers=[], default_active_thread_percentage=None,
                actions=["%s is not installed: no MPS control daemon to stop"
                         % (params.get("control_binary") or "nvidia-cuda-mps-control")])


def _read(control):
    running, pids, percentage = control.snapshot()
    return dict(changed=False, actions=[], running=running, default_active_thread_percentage=percentage,
                servers=control.servers(pids))


def info(params, run_command, get_bin_path):
    """What the daemon on params['pipe_directory'] reports (running, servers with clients, default percentage); changed False."""
    pipe, _limits = _check_params(dict(params, pinned_device_mem_limit={}))
    binary = _required_binary(params, get_bin_path)
    result = _read(Control(lambda stdin: run_command([binary], data=stdin, binary_data=True,
                                                     environ_update={"CUDA_MPS_PIPE_DIRECTORY": pipe})))
    del result["actions"]
    return result


def converge(params, run_command, get_bin_path, check_mode):
    """Bring one control daemon to params['state']; returns the module result (ValueError/ControlError on failure)."""
    pipe, limits = _check_params(params)
    if params.get("state") == "absent" and _binary(params, get_bin_path) is None:
        return _not_installed(params)
    binary = _required_binary(params, get_bin_path)
    pipe_env = {"CUDA_MPS_PIPE_DIRECTORY": pipe}

    def send(stdin):
        return run_command([binary], data=stdin, binary_data=True, environ_update=pipe_env)

    def start_daemon():
        environment = dict((str(k), str(v)) for k, v in (params.get("environment") or {}).items())
        environment.update(pipe_env)
        rc, out, err = run_command([binary, "-d"], environ_update=environment)
        if rc != 0:
            raise ControlError("%s -d failed: %s" % (binary, ("%s %s" % (out, err)).strip()))

    control = Control(send)
    result = _read(control)
    running = result["running"]
    if params.get("state") == "absent":
        if running:
            _stop(control, params, check_mode, result)
    else:
        if not running:
            running = _start(control, start_daemon, params, pipe, check_mode, result)
        if running:
            _configure(control, params, limits, check_mode, result)
    return result


def run_info(params, context):
    """Entry point of the mps_control_info module (the contract of ``_core.contract``)."""
    try:
        return info(params, context.run_command, context.get_bin_path)
    except ValueError as exc:
        raise EngineError(str(exc))


def run(params, context):
    """Entry point of the mps_control module (the contract of ``_core.contract``)."""
    try:
        return converge(params, context.run_command, context.get_bin_path, context.check_mode)
    except (ValueError, ControlError) as exc:
        raise EngineError(str(exc))
