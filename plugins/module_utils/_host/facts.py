# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Facts of a GPU host (module gpu_host_facts), judged by the GPUDirect RDMA mode rule.

The RDMA mode rule and its version gates live once, in ``_catalog/gpudirect_rdma.py``; the facts carry
its answer (``gpudirect_rdma``), and roles read it from there.

Reads, and never writes: two nvidia-smi calls (the GPU table as CSV, the ``-q -d COMPUTE``
header for the CUDA version), ``/proc/driver/nvidia/version``, ``/proc/modules``,
``/proc/sys/kernel/osrelease``, ``/sys/class/infiniband``, the NVIDIA display controllers of
``/sys/bus/pci/devices``, ``ofed_info -s`` and ``systemctl show nvidia-imex.service`` (the host IMEX service, which
must not hold the IMEX session where the NVIDIA DRA driver runs ComputeDomains). Whatever is missing becomes a null fact and, where it
matters, a line in ``problems`` - never an exception.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.dra_driver import HOST_IMEX_SERVICE
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gpudirect_rdma import (
    NVIDIA_PCI_VENDOR, gpudirect_rdma,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError


GPU_FIELDS = ("index", "uuid", "name", "memory.total", "mig.mode.current", "mig.mode.pending", "compute_mode",
              "driver_version", "compute_cap")
WATCHED_MODULES = ("nvidia_peermem", "nvidia_fs", "gdrdrv", "ib_core")
_NVRM = re.compile(r"NVRM version:\s+NVIDIA UNIX\s+(?P<open>Open\s+)?(?:\S+\s+)?Kernel Module\s+(?:for\s+\S+\s+)?"
                   r"(?P<version>\d+(?:\.\d+)+)")


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def _listdir(path, key=None):
    """The sorted entries of folder ``path``; none where it is missing or unreadable."""
    try:
        return sorted(os.listdir(path), key=key)
    except OSError:
        return []


# --------------------------------------------------------------------------------------------
# nvidia-smi
# --------------------------------------------------------------------------------------------


def _mig_mode(value):
    if value is None:
        return None
    return value.strip().lower() == "enabled"


def _gpu(row):
    memory = row.get("memory.total")
    current, pending = row.get("mig.mode.current"), row.get("mig.mode.pending")
    return dict(
        index=int(row["index"]) if (row.get("index") or "").isdigit() else row.get("index"),
        uuid=row.get("uuid"),
        name=row.get("name"),
        memory_total_mib=int(memory) if memory and memory.isdigit() else None,
        mig_capable=current is not None,
        mig_mode_current=_mig_mode(current),
        mig_mode_pending=_mig_mode(pending),
        compute_mode=row.get("compute_mode"),
        compute_capability=row.get("compute_cap"),
    )


def gather_gpus(run_tool, nvidia_smi):
    """(gpus, driver_version, cuda_version, problems) from nvidia-smi; never raises."""
    problems = []
    fields = list(GPU_FIELDS)
    rc, out, err = run_tool([nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    if rc != 0 and "compute_cap" in (out or "") + (err or ""):
        fields.remove("compute_cap")  # drivers before R510 do not know the field
        rc, out, err = run_tool([nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    text = (out or "") + (err or "")
    if rc != 0:
        if re.search(r"No devices were found", text):
            return [], None, None, ["nvidia-smi found no GPU"]
        return [], None, None, ["nvidia-smi failed (rc=%s): %s" % (rc, " ".join(text.split())[:300])]
    try:
        rows = _nvsmi.parse_query_csv(out, fields)
    except _nvsmi.NvsmiError as exc:
        return [], None, None, ["cannot read the nvidia-smi GPU table: %s" % exc]
    gpus = [_gpu(row) for row in rows]
    drivers = sorted({row.get("driver_version") for row in rows if row.get("driver_version")})
    if len(drivers) > 1:
        problems.append("GPUs report different driver versions: %s" % ", ".join(drivers))
    for gpu in gpus:
        if gpu["mig_capable"] and gpu["mig_mode_current"] != gpu["mig_mode_pending"]:
            problems.append("GPU %s: MIG mode change pending (current %s, pending %s): a GPU reset or reboot applies it"
                            % (gpu["index"], _word(gpu["mig_mode_current"]), _word(gpu["mig_mode_pending"])))
    cuda = None
    if gpus:
        rc, out, err = run_tool([nvidia_smi, "-q", "-d", "COMPUTE"])
        match = re.search(r"^\s*CUDA Version\s*:\s*(\S+)", out or "", re.MULTILINE)
        if rc == 0 and match and match.group(1).lower() not in ("n/a", "[n/a]"):
            cuda = match.group(1)
        else:
            problems.append("nvidia-smi -q did not report a CUDA version")
    return gpus, (drivers[0] if drivers else None), cuda, problems


def _word(flag):
    return {True: "Enabled", False: "Disabled"}.get(flag, "N/A")


# --------------------------------------------------------------------------------------------
# Kernel, modules, OFED, RDMA devices
# --------------------------------------------------------------------------------------------


def kernel_module(proc_root):
    """dict(type=open|proprietary|None, version) from /proc/driver/nvidia/version."""
    text = _read(os.path.join(proc_root, "driver", "nvidia", "version"))
    match = _NVRM.search(text or "")
    if not match:
        return dict(type=None, version=None)
    return dict(type="open" if match.group("open") else "proprietary", version=match.group("version"))


def loaded_modules(proc_root):
    """Names of the loaded kernel modules (/proc/modules), or None when unreadable."""
    text = _read(os.path.join(proc_root, "modules"))
    if text is None:
        return None
    return {line.split()[0] for line in text.splitlines() if line.strip()}


def ofed(run_tool, ofed_info):
    """dict(present, kind=mofed|doca-ofed|None, version) from ``ofed_info -s``."""
    if not ofed_info:
        return dict(present=False, kind=None, version=None)
    rc, out, _err = run_tool([ofed_info, "-s"])
    text = (out or "").strip()
    match = re.search(r"(MLNX_OFED_LINUX|OFED-internal|DOCA[-_]OFED\S*?|OFED)-(\d[\w.\-]*?):?\s*\Z", text)
    if rc != 0 or not match:
        return dict(present=False, kind=None, version=None)
    kind = "mofed" if match.group(1) == "MLNX_OFED_LINUX" else "doca-ofed"
    return dict(present=True, kind=kind, version=match.group(2))


def _rate_gbps(text):
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec", text or "")
    if not match:
        return None
    value = float(match.group(1))
    return int(value) if value.is_integer() else value


def rdma_devices(sys_root):
    """RDMA devices of /sys/class/infiniband: [dict(name, netdevs, state, link_layer, rate_gbps, ports)]."""
    base = os.path.join(sys_root, "class", "infiniband")
    devices = []
    for name in _listdir(base):
        ports = []
        for number in _listdir(os.path.join(base, name, "ports"), key=lambda p: int(p) if p.isdigit() else 0):
            folder = os.path.join(base, name, "ports", number)
            state = (_read(os.path.join(folder, "state")) or "").strip()
            ports.append(dict(port=int(number) if number.isdigit() else number,
                              state=re.sub(r"^\d+:\s*", "", state) or None,
                              link_layer=(_read(os.path.join(folder, "link_layer")) or "").strip() or None,
                              rate_gbps=_rate_gbps(_read(os.path.join(folder, "rate")))))
        netdevs = _listdir(os.path.join(base, name, "device", "net"))
        first = ports[0] if ports else dict(state=None, link_layer=None, rate_gbps=None)
        devices.append(dict(name=name, netdevs=netdevs, state=first["state"], link_layer=first["link_layer"],
                            rate_gbps=first["rate_gbps"], ports=ports))
    return devices


def pci_gpus(sys_root):
    """NVIDIA display and 3D controllers (PCI class 0x03xxxx) of /sys/bus/pci/devices: [dict(address, device)].

    They are listed before any NVIDIA driver is installed (the kernel enumerates the bus)."""
    base = os.path.join(sys_root, "bus", "pci", "devices")
    found = []
    for address in _listdir(base):
        if (_read(os.path.join(base, address, "vendor")) or "").strip().lower() != NVIDIA_PCI_VENDOR:
            continue
        if (_read(os.path.join(base, address, "class")) or "").strip().lower().startswith("0x03"):
            device = (_read(os.path.join(base, address, "device")) or "").strip().lower()
            found.append(dict(address=address, device=device or None))
    return found


_UNIT_PROPERTIES = ("LoadState", "ActiveState", "UnitFileState")


def imex_service(run_tool, systemctl):
    """The host ``nvidia-imex.service``: present (its unit is loaded), active, state, enabled; nulls and the reason
    (``error``) when systemd cannot tell - a host without systemctl, or one not booted with systemd (a container),
    runs no systemd service at all, so that is no problem of the host."""
    unknown = dict(present=None, active=None, state=None, enabled=None, error="systemctl not found")
    if not systemctl:
        return unknown
    rc, out, err = run_tool([systemctl, "show", HOST_IMEX_SERVICE, "--property=" + ",".join(_UNIT_PROPERTIES)])
    props = dict(line.split("=", 1) for line in (out or "").splitlines() if "=" in line)
    if rc != 0 or "LoadState" not in props:
        return dict(unknown, error="systemctl show failed (rc %s): %s" % (rc, (err or out or "").strip()[:300]))
    present = props["LoadState"] not in ("not-found", "")
    state = props.get("ActiveState") or None
    return dict(present=present, active=present and state in ("active", "activating", "reloading"),
                state=state if present else None, enabled=(props.get("UnitFileState") or None) if present else None,
                error=None)


# --------------------------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------------------------


def gather(run_tool, nvidia_smi, ofed_info, proc_root="/proc", sys_root="/sys", systemctl=None):
    """The ``gpu_host`` facts. ``run_tool(argv) -> (rc, stdout, stderr)``; missing tools are None."""
    facts = dict(nvidia_smi=dict(present=bool(nvidia_smi), path=nvidia_smi or None), problems=[])
    if nvidia_smi:
        gpus, driver, cuda, problems = gather_gpus(run_tool, nvidia_smi)
        facts["problems"] += problems
    else:
        gpus, driver, cuda = [], None, None
        facts["problems"].append("nvidia-smi not found")
    module = kernel_module(proc_root)
    facts.update(driver_version=driver or module["version"], cuda_version=cuda,
                 kernel_version=(_read(os.path.join(proc_root, "sys", "kernel", "osrelease")) or "").strip() or None,
                 kernel_module=module, gpus=gpus)
    loaded = loaded_modules(proc_root)
    if loaded is None:
        facts["problems"].append("cannot read %s" % os.path.join(proc_root, "modules"))
    facts["modules_loaded"] = {name: name in (loaded or ()) for name in WATCHED_MODULES}
    facts["ofed"] = ofed(run_tool, ofed_info)
    facts["rdma_devices"] = rdma_devices(sys_root)
    facts["pci_gpus"] = pci_gpus(sys_root)
    facts["nvidia_imex"] = imex_service(run_tool, systemctl)
    facts["gpudirect_rdma"] = gpudirect_rdma(facts)
    return facts


def run(params, context):
    """Entry point of the gpu_host_facts module (the contract of ``_core.contract``)."""
    for option in ("procfs_root", "sysfs_root"):
        if not os.path.isdir(params[option]):
            raise EngineError("%s: %s is not a folder (where %s is mounted)"
                              % (option, params[option], option.split("_", maxsplit=1)[0]))

    def find(option, name):
        path = params.get(option)
        if path:
            return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
        return context.get_bin_path(name, opt_dirs=["/usr/bin", "/usr/sbin", "/usr/local/bin", "/sbin"])

    def run_tool(argv):
        return context.run_command(argv, environ_update=dict(LC_ALL="C"))

    facts = gather(run_tool, find("nvidia_smi", "nvidia-smi"), find("ofed_info", "ofed_info"),
                   proc_root=params["procfs_root"], sys_root=params["sysfs_root"],
                   systemctl=find("systemctl", "systemctl"))
    return dict(changed=False, ansible_facts=dict(gpu_host=facts))
