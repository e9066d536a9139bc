# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUDirect RDMA rule (plugins/module_utils/_catalog/gpudirect_rdma.py) on the facts of several host kinds.

Each host kind is the text its tools print (nvidia-smi, ofed_info) and the files it has under /proc
and /sys (formats: nvidia-stack.md 5.3 and 7.1; sysfs as the kernel's ib_core writes it)."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpudirect_rdma


@pytest.mark.parametrize("facts, mode, reason", [
    (dict(kernel_version="5.12.0", cuda_version="11.7", kernel_module={"type": "open"},
          gpus=[{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}], rdma_devices=[{"name": "mlx5_0"}]),
     "dmabuf", None),
    (dict(kernel_version="5.11.22", cuda_version="11.7", kernel_module={"type": "open"}, ofed={"present": True},
          gpus=[{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}], rdma_devices=[{"name": "mlx5_0"}]),
     "peermem", "dmabuf: kernel 5.11.22 is older than 5.12"),
    (dict(kernel_version="6.1", cuda_version="12.0", kernel_module={"type": "open"}, ofed={"present": True},
          gpus=[{"index": 3, "name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"}], rdma_devices=[{}]),
     "peermem", "dmabuf: GPU 3 (Tesla V100-SXM2-16GB) has compute capability 7.0; DMA-BUF needs Turing or newer (>= 7.5)"),
    (dict(kernel_version="6.1", cuda_version="12.0", kernel_module={"type": "open"}, ofed={"present": True},
          gpus=[{"index": 0, "name": "NVIDIA H100", "compute_capability": "9.0"}], rdma_devices=[]),
     "unsupported", "dmabuf: no RDMA device in /sys/class/infiniband"),
])
def test_rdma_mode_boundaries(facts, mode, reason):
    result = gpudirect_rdma.gpudirect_rdma(facts)
    assert result["mode"] == mode
    if reason:
        assert reason in result["reasons"]


FRESH = dict(kernel_version="6.8.0-45-generic", kernel_module={"type": None, "version": None}, gpus=[],
             pci_gpus=[{"address": "0000:18:00.0", "device": "0x2330"}], rdma_devices=[{"name": "mlx5_0"}],
             modules_loaded={"ib_core": True}, ofed={"present": False})
MOFED = {"ofed": {"present": True, "kind": "mofed", "version": "24.10-1.1.4.0"}}


@pytest.mark.parametrize("changes, driver, module_type, mode, fragment", [
    ({}, "580.105.08", None, "dmabuf", None),
    ({}, "580.105.08", "open", "dmabuf", None),
    ({}, "570.124.06", "auto", "dmabuf", None),
    ({}, "580.105.08", "proprietary", "unsupported",
     "dmabuf: driver.kernel_module_type is proprietary; DMA-BUF needs the open kernel modules"),
    (MOFED, "580.105.08", "proprietary", "peermem", "dmabuf: driver.kernel_module_type is proprietary"),
    (dict(MOFED, kernel_version="5.4.0-150-generic"), "550.144.03", None, "peermem",
     "dmabuf: kernel 5.4.0-150-generic is older than 5.12"),
    (dict(MOFED, kernel_version="5.11.0"), "580.105.08", None, "peermem", "dmabuf: kernel 5.11.0 is older than 5.12"),
    (dict(kernel_version="5.12.0"), "580.105.08", None, "dmabuf", None),
    (MOFED, "510.47.03", "open", "peermem", "dmabuf: driver 510.47.03 is older than 515.43.04 (CUDA 11.7"),
    (MOFED, "515.43.04", "open", "dmabuf", None),
    (MOFED, "", None, "peermem", "dmabuf: the version of the driver to be installed is unknown"),
    (dict(MOFED, pci_gpus=[{"address": "0000:3b:00.0", "device": "0x1db1"}]), "580.105.08", None, "peermem",
     "dmabuf: GPU 0000:3b:00.0 (PCI device 10de:1db1) is older than Turing"),
    (dict(pci_gpus=[{"address": "0000:3b:00.0", "device": "0x1eb8"}]), "580.105.08", None, "dmabuf", None),  # T4
    (dict(pci_gpus=[]), "580.105.08", None, "unsupported", "dmabuf: no NVIDIA GPU on the PCI bus"),
    (dict(rdma_devices=[], modules_loaded={"ib_core": False}), "580.105.08", None, "unsupported",
     "dmabuf: no RDMA device in /sys/class/infiniband and ib_core is not loaded"),
    (dict(rdma_devices=[]), "580.105.08", None, "dmabuf", None),  # ib_core loaded: inbox drivers
    (dict(kernel_version=None), "580.105.08", None, "unsupported", "dmabuf: kernel version unknown"),
    (dict(MOFED, kernel_version=None), "580.105.08", None, "peermem", "dmabuf: kernel version unknown"),
])
def test_planned_rdma_mode_for_the_operators_driver(changes, driver, module_type, mode, fragment):
    facts = dict(FRESH, **changes)
    result = gpudirect_rdma.gpudirect_rdma_planned(facts, driver, module_type)
    assert result["mode"] == mode, result
    assert result["modes"]["dmabuf"]["supported"] == (mode == "dmabuf")
    if fragment:
        assert any(fragment in r for r in result["reasons"]), result["reasons"]
    else:
        assert result["reasons"] == []
    assert result["evidence"][0].startswith("the NVIDIA driver is not installed yet: decided for driver %s" % (driver or "(unknown)"))


def test_planned_rdma_mode_without_pci_facts_says_so():
    facts = {k: v for k, v in FRESH.items() if k != "pci_gpus"}
    result = gpudirect_rdma.gpudirect_rdma_planned(facts, "580.105.08")
    assert result["mode"] == "dmabuf"
    assert "the GPUs on the PCI bus were not gathered (gpu_host_facts of an older collection)" in result["evidence"]
