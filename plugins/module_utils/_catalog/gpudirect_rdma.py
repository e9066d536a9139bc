# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPUDirect RDMA mode rule of a GPU host: the version gates and the one function that applies them.

Sources (shared research notes, nvidia-stack.md 1.6 and 7.1): DMA-BUF needs Linux >= 5.12, the open GPU
kernel modules, CUDA >= 11.7 (driver-provided) and a Turing-or-newer (compute capability >= 7.5)
data-center GPU; the legacy ``nvidia-peermem`` path needs MOFED or DOCA-OFED.

``gpudirect_rdma`` judges gathered facts (module gpu_host_facts); ``gpudirect_rdma_planned`` judges a
fresh host against the driver the GPU Operator is about to install (its version and kernel module type,
from ``_catalog/gpu_operator``), and names its evidence. Pure functions of plain data: no I/O.
"""

from __future__ import annotations

import re


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


def version_tuple(text):
    """(5, 15) of ``5.15.0-105-generic``; None when there is no leading number."""
    match = re.match(r"^\s*v?(\d+)(?:\.(\d+))?", str(text or ""))
    if not match:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


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
        device = int(str(gpu.get("device") or "0"), 16) if re.match(r"^(0x)?[0-9a-f]+\Z", str(gpu.get("device") or "")) else None
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
