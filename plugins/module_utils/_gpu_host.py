# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Facts of a GPU host (module gpu_host_facts) and the GPUDirect RDMA mode rule.

The RDMA mode rule lives here once (``gpudirect_rdma``); roles read its answer from the facts.
Sources (shared research notes, nvidia-stack.md 1.6 and 7.1): DMA-BUF needs Linux >= 5.12, the
open GPU kernel modules, CUDA >= 11.7 (driver-provided) and a Turing-or-newer (compute
capability >= 7.5) data-center GPU; the legacy ``nvidia-peermem`` path needs MOFED or DOCA-OFED.

Reads, and never writes: two nvidia-smi calls (the GPU table as CSV, the ``-q -d COMPUTE``
header for the CUDA version), ``/proc/driver/nvidia/version``, ``/proc/modules``,
``/proc/sys/kernel/osrelease``, ``/sys/class/infiniband`` and ``ofed_info -s``. Whatever is
missing becomes a null fact and, where it matters, a line in ``problems`` - never an exception.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils import _nvsmi

GPU_FIELDS = ("index", "uuid", "name", "memory.total", "mig.mode.current", "mig.mode.pending", "compute_mode",
              "driver_version", "compute_cap")
WATCHED_MODULES = ("nvidia_peermem", "nvidia_fs", "gdrdrv")

DMABUF_MIN_KERNEL = (5, 12)
DMABUF_MIN_CUDA = (11, 7)
DMABUF_MIN_COMPUTE_CAPABILITY = (7, 5)
# Not data-center parts (the DMA-BUF row of the GPU Operator RDMA doc names data-center GPUs only).
_NOT_DATA_CENTER = re.compile(r"\b(GeForce|TITAN)\b", re.IGNORECASE)
_NVRM = re.compile(r"NVRM version:\s+NVIDIA UNIX\s+(?P<open>Open\s+)?(?:\S+\s+)?Kernel Module\s+(?:for\s+\S+\s+)?"
                   r"(?P<version>\d+(?:\.\d+)+)")


def version_tuple(text):
    """(5, 15) of ``5.15.0-105-generic``; None when there is no leading number."""
    match = re.match(r"^\s*v?(\d+)(?:\.(\d+))?", str(text or ""))
    if not match:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


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


def gather_gpus(run, nvidia_smi):
    """(gpus, driver_version, cuda_version, problems) from nvidia-smi; never raises."""
    problems = []
    fields = list(GPU_FIELDS)
    rc, out, err = run([nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    if rc != 0 and "compute_cap" in (out or "") + (err or ""):
        fields.remove("compute_cap")  # drivers before R510 do not know the field
        rc, out, err = run([nvidia_smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
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
        rc, out, err = run([nvidia_smi, "-q", "-d", "COMPUTE"])
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


def ofed(run, ofed_info):
    """dict(present, kind=mofed|doca-ofed|None, version) from ``ofed_info -s``."""
    if not ofed_info:
        return dict(present=False, kind=None, version=None)
    rc, out, _err = run([ofed_info, "-s"])
    text = (out or "").strip()
    match = re.search(r"(MLNX_OFED_LINUX|OFED-internal|DOCA[-_]OFED\S*?|OFED)-(\d[\w.\-]*?):?\s*$", text)
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
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    devices = []
    for name in names:
        ports = []
        try:
            port_numbers = sorted(os.listdir(os.path.join(base, name, "ports")), key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            port_numbers = []
        for number in port_numbers:
            folder = os.path.join(base, name, "ports", number)
            state = (_read(os.path.join(folder, "state")) or "").strip()
            ports.append(dict(port=int(number) if number.isdigit() else number,
                              state=re.sub(r"^\d+:\s*", "", state) or None,
                              link_layer=(_read(os.path.join(folder, "link_layer")) or "").strip() or None,
                              rate_gbps=_rate_gbps(_read(os.path.join(folder, "rate")))))
        try:
            netdevs = sorted(os.listdir(os.path.join(base, name, "device", "net")))
        except OSError:
            netdevs = []
        first = ports[0] if ports else dict(state=None, link_layer=None, rate_gbps=None)
        devices.append(dict(name=name, netdevs=netdevs, state=first["state"], link_layer=first["link_layer"],
                            rate_gbps=first["rate_gbps"], ports=ports))
    return devices


# --------------------------------------------------------------------------------------------
# The GPUDirect RDMA mode rule
# --------------------------------------------------------------------------------------------


def _gpu_reasons(gpus):
    """Why the GPUs rule out DMA-BUF: none, older than Turing, or not a data-center part."""
    if not gpus:
        return ["no NVIDIA GPU found"]
    reasons = []
    for gpu in gpus:
        capability = version_tuple(gpu.get("compute_capability"))
        if capability is not None and capability < DMABUF_MIN_COMPUTE_CAPABILITY:
            reasons.append("GPU %s (%s) has compute capability %s; DMA-BUF needs Turing or newer (>= 7.5)"
                           % (gpu.get("index"), gpu.get("name"), gpu.get("compute_capability")))
        elif capability is None:
            reasons.append("GPU %s (%s): compute capability unknown (driver too old to report it); DMA-BUF needs "
                           "Turing or newer" % (gpu.get("index"), gpu.get("name")))
        if _NOT_DATA_CENTER.search(gpu.get("name") or ""):
            reasons.append("GPU %s (%s) is not a data-center GPU" % (gpu.get("index"), gpu.get("name")))
    return reasons


def gpudirect_rdma(facts):
    """The GPUDirect RDMA mode that fits the host facts.

    dict(mode=dmabuf|peermem|unsupported, reasons, modes=dict(dmabuf=dict(supported, reasons),
    peermem=dict(supported, reasons))). DMA-BUF is preferred; ``reasons`` of the chosen mode say why
    the preferred ones were not chosen, of ``unsupported`` every reason of every mode.
    """
    gpus = facts.get("gpus") or []
    common = list(_gpu_reasons(gpus)[:1]) if not gpus else []
    if not facts.get("rdma_devices"):
        common.append("no RDMA device in /sys/class/infiniband")
    dmabuf = list(common) + (_gpu_reasons(gpus) if gpus else [])
    kernel = version_tuple(facts.get("kernel_version"))
    if kernel is None:
        dmabuf.append("kernel version unknown; DMA-BUF needs Linux >= 5.12")
    elif kernel < DMABUF_MIN_KERNEL:
        dmabuf.append("kernel %s is older than 5.12" % facts.get("kernel_version"))
    module_type = (facts.get("kernel_module") or {}).get("type")
    if module_type != "open":
        dmabuf.append("the NVIDIA kernel modules are %s; DMA-BUF needs the open kernel modules"
                      % (module_type or "not loaded"))
    cuda = version_tuple(facts.get("cuda_version"))
    if cuda is None:
        dmabuf.append("CUDA version unknown; DMA-BUF needs CUDA >= 11.7")
    elif cuda < DMABUF_MIN_CUDA:
        dmabuf.append("CUDA %s is older than 11.7" % facts.get("cuda_version"))
    peermem = list(common)
    if not (facts.get("ofed") or {}).get("present"):
        peermem.append("neither MOFED nor DOCA-OFED is installed (nvidia-peermem needs one)")
    modes = dict(dmabuf=dict(supported=not dmabuf, reasons=dmabuf), peermem=dict(supported=not peermem, reasons=peermem))
    if not dmabuf:
        return dict(mode="dmabuf", reasons=[], modes=modes)
    if not peermem:
        return dict(mode="peermem", reasons=["dmabuf: " + r for r in dmabuf], modes=modes)
    reasons = ["dmabuf: " + r for r in dmabuf] + ["peermem: " + r for r in peermem if r not in common]
    return dict(mode="unsupported", reasons=reasons, modes=modes)


# --------------------------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------------------------


def gather(run, nvidia_smi, ofed_info, proc_root="/proc", sys_root="/sys"):
    """The ``gpu_host`` facts. ``run(argv) -> (rc, stdout, stderr)``; missing tools are None."""
    facts = dict(nvidia_smi=dict(present=bool(nvidia_smi), path=nvidia_smi or None), problems=[])
    if nvidia_smi:
        gpus, driver, cuda, problems = gather_gpus(run, nvidia_smi)
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
    facts["ofed"] = ofed(run, ofed_info)
    facts["rdma_devices"] = rdma_devices(sys_root)
    facts["gpudirect_rdma"] = gpudirect_rdma(facts)
    return facts
