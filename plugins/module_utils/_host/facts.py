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

On a fresh host the GPU Operator is about to give a driver, nothing of the driver can be read:
``gpudirect_rdma_planned`` decides from what is there (kernel, the GPUs on the PCI bus, RDMA devices or
``ib_core``, MOFED) and from the driver the operator will install (its version and kernel module type,
from the operator catalog), and names its evidence.

Reads, and never writes: two nvidia-smi calls (the GPU table as CSV, the ``-q -d COMPUTE``
header for the CUDA version), ``/proc/driver/nvidia/version``, ``/proc/modules``,
``/proc/sys/kernel/osrelease``, ``/sys/class/infiniband``, the NVIDIA display controllers of
``/sys/bus/pci/devices`` and ``ofed_info -s``. Whatever is missing becomes a null fact and, where it
matters, a line in ``problems`` - never an exception.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi

GPU_FIELDS = ("index", "uuid", "name", "memory.total", "mig.mode.current", "mig.mode.pending", "compute_mode",
              "driver_version", "compute_cap")
WATCHED_MODULES = ("nvidia_peermem", "nvidia_fs", "gdrdrv", "ib_core")

DMABUF_MIN_KERNEL = (5, 12)
DMABUF_MIN_CUDA = (11, 7)
DMABUF_MIN_COMPUTE_CAPABILITY = (7, 5)
# CUDA 11.7 (the DMA-BUF minimum, GPU Operator "GPUDirect RDMA" doc) comes with the driver. Source for the
# number: NVIDIA ships CUDA 11.7.0 with driver 515.43.04 (its installer is cuda_11.7.0_515.43.04_linux.run under
# developer.download.nvidia.com/compute/cuda/11.7.0/), and 515.43.04 is the first release of the open GPU
# kernel modules (github.com/NVIDIA/open-gpu-kernel-modules), which DMA-BUF also needs. The CUDA 11.7 release
# notes' driver table itself was not found in our sources: the installer name is the evidence.
DMABUF_MIN_DRIVER = (515, 43, 4)
# Without a driver the GPU generation shows only in the PCI device ID. Source: the "Compatible GPUs" table of
# github.com/NVIDIA/open-gpu-kernel-modules README.md (550.40.82): the open modules run on "any Turing or later
# GPU", and that table, sorted by PCI device ID, starts at 1E02 (NVIDIA TITAN RTX, TU102). That earlier
# families (Volta 0x1d8*/0x1db*/0x1df*, Pascal, Maxwell) all number below it is known from their IDs, not
# from a table stating the rule.
TURING_MIN_PCI_DEVICE = 0x1E02
NVIDIA_PCI_VENDOR = "0x10de"
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


def _kernel_reasons(facts):
    kernel = version_tuple(facts.get("kernel_version"))
    if kernel is None:
        return ["kernel version unknown; DMA-BUF needs Linux >= 5.12"]
    if kernel < DMABUF_MIN_KERNEL:
        return ["kernel %s is older than 5.12" % facts.get("kernel_version")]
    return []


def _peermem_reasons(facts, common):
    if (facts.get("ofed") or {}).get("present"):
        return list(common)
    return list(common) + ["neither MOFED nor DOCA-OFED is installed (nvidia-peermem needs one)"]


def _verdict(dmabuf, peermem, common):
    """dict(mode, reasons, modes): DMA-BUF preferred, then nvidia-peermem, else unsupported with every reason."""
    modes = dict(dmabuf=dict(supported=not dmabuf, reasons=dmabuf), peermem=dict(supported=not peermem, reasons=peermem))
    if not dmabuf:
        return dict(mode="dmabuf", reasons=[], modes=modes)
    if not peermem:
        return dict(mode="peermem", reasons=["dmabuf: " + r for r in dmabuf], modes=modes)
    reasons = ["dmabuf: " + r for r in dmabuf] + ["peermem: " + r for r in peermem if r not in common]
    return dict(mode="unsupported", reasons=reasons, modes=modes)


def driver_loaded(facts):
    """Whether the host runs an NVIDIA driver (its kernel module or nvidia-smi answered)."""
    return bool((facts.get("kernel_module") or {}).get("type") or facts.get("gpus"))


def _driver_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", str(text or ""))[:3]) or None


def gpudirect_rdma_planned(facts, driver_version, kernel_module_type=None):
    """The GPUDirect RDMA mode of a host whose NVIDIA driver is not installed yet, for the driver the GPU Operator
    will install there (``driver_version``; ``kernel_module_type`` open, proprietary, or auto/None where the
    operator is free to install the open modules, as it does for DMA-BUF).

    Decides from the kernel, the GPUs on the PCI bus (their generation, from the device ID), RDMA devices or a
    loaded ``ib_core``, MOFED/DOCA-OFED, and the planned driver; what it cannot know before the driver runs
    (data-center vs consumer part) is left to the operator's validator. Returns the shape of
    ``gpudirect_rdma`` plus ``basis: planned`` and ``evidence`` (what the decision rests on).
    """
    common, evidence = [], ["the NVIDIA driver is not installed yet: decided for driver %s with %s kernel modules"
                            % (driver_version or "(unknown)", kernel_module_type or "the operator's choice of")]
    gpus = facts.get("pci_gpus")
    if gpus is None:
        evidence.append("the GPUs on the PCI bus were not gathered (gpu_host_facts of an older collection)")
    elif not gpus:
        common.append("no NVIDIA GPU on the PCI bus")
    else:
        evidence.append("%d NVIDIA GPU(s) on the PCI bus (device %s)" % (len(gpus), ", ".join(
            sorted({"10de:%s" % str(g.get("device") or "?").replace("0x", "") for g in gpus}))))
    devices = [d.get("name") for d in facts.get("rdma_devices") or []]
    if devices:
        evidence.append("RDMA devices %s" % ", ".join(str(d) for d in devices))
    elif (facts.get("modules_loaded") or {}).get("ib_core"):
        evidence.append("no RDMA device yet, ib_core loaded (the RDMA stack is there)")
    else:
        common.append("no RDMA device in /sys/class/infiniband and ib_core is not loaded")
    dmabuf = list(common)
    for gpu in gpus or []:
        device = int(str(gpu.get("device") or "0"), 16) if re.match(r"^(0x)?[0-9a-f]+$", str(gpu.get("device") or "")) else None
        if device is not None and device < TURING_MIN_PCI_DEVICE:
            dmabuf.append("GPU %s (PCI device 10de:%04x) is older than Turing; DMA-BUF and the open kernel modules "
                          "need Turing or newer" % (gpu.get("address"), device))
    dmabuf.extend(_kernel_reasons(facts))
    if kernel_module_type == "proprietary":
        dmabuf.append("driver.kernel_module_type is proprietary; DMA-BUF needs the open kernel modules")
    version = _driver_tuple(driver_version)
    if version is None:
        dmabuf.append("the version of the driver to be installed is unknown; DMA-BUF needs 515.43.04 or later (CUDA 11.7)")
    elif version < DMABUF_MIN_DRIVER:
        dmabuf.append("driver %s is older than 515.43.04 (CUDA 11.7, the DMA-BUF minimum)" % driver_version)
    if not _kernel_reasons(facts):
        evidence.append("kernel %s (>= 5.12)" % facts.get("kernel_version"))
    if (facts.get("ofed") or {}).get("present"):
        evidence.append("%s %s installed" % (facts["ofed"].get("kind") or "MOFED", facts["ofed"].get("version") or ""))
    result = _verdict(dmabuf, _peermem_reasons(facts, common), common)
    result.update(basis="planned", evidence=evidence)
    return result


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
    dmabuf.extend(_kernel_reasons(facts))
    module_type = (facts.get("kernel_module") or {}).get("type")
    if module_type != "open":
        dmabuf.append("the NVIDIA kernel modules are %s; DMA-BUF needs the open kernel modules"
                      % (module_type or "not loaded"))
    cuda = version_tuple(facts.get("cuda_version"))
    if cuda is None:
        dmabuf.append("CUDA version unknown; DMA-BUF needs CUDA >= 11.7")
    elif cuda < DMABUF_MIN_CUDA:
        dmabuf.append("CUDA %s is older than 11.7" % facts.get("cuda_version"))
    return _verdict(dmabuf, _peermem_reasons(facts, common), common)


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
    facts["pci_gpus"] = pci_gpus(sys_root)
    facts["gpudirect_rdma"] = gpudirect_rdma(facts)
    return facts
