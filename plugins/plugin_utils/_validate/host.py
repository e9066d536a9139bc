# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The bare-metal GPU host validation checks, over the ``gpu_host`` fact of gpu_host_facts: driver, every GPU on
the PCI bus seen by the driver, MIG mode changes waiting for a reset, and the GPUDirect RDMA mode (DMA-BUF vs
nvidia-peermem, the rule of ``_catalog/gpudirect_rdma.py``).
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpudirect_rdma
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip, register


def _facts(view, *keys):
    """The host facts, with every key in ``keys`` present (gpu_host_facts returns them always)."""
    facts = view.host()
    for key in keys:
        if key not in facts:
            raise Missing("host.%s" % key)
    return facts


@register("host.driver", "preflight", "The NVIDIA driver is loaded", reads=["host.kernel_module", "host.gpus", "host.driver_version"],
          cause="The host runs no NVIDIA driver (no kernel module loaded, nvidia-smi lists no GPU).",
          fix=dict(role="gpu_operator", variable="gpu_operator_driver",
                   manual="or install the driver on the host (playbooks/gpu_hosts.yml reports the host's state)"))
def driver(view):
    facts = _facts(view, "kernel_module", "gpus", "driver_version")
    loaded = gpudirect_rdma.driver_loaded(facts)
    module = (facts.get("kernel_module") or {}).get("type")
    evidence = ["driver %s, kernel module %s, %d GPU(s)" % (facts.get("driver_version"), module, len(facts.get("gpus") or []))]
    return evidence, [] if loaded else ["no NVIDIA driver is loaded"]


@register("host.gpudirect_rdma_mode", "preflight", "Driver, kernel and CUDA allow GPUDirect RDMA (DMA-BUF or peermem)",
          reads=["host.rdma_devices", "host.gpus", "host.kernel_version", "host.cuda_version", "host.kernel_module", "host.ofed"],
          cause="The host has RDMA devices but neither DMA-BUF (open kernel modules, Linux >= 5.12, CUDA >= 11.7) nor "
                "nvidia-peermem (MOFED/DOCA-OFED) is possible, so NCCL cannot move GPU memory over RDMA.",
          fix=dict(role="gpu_operator", variable="gpu_operator_rdma",
                   manual="install the open kernel modules on Linux >= 5.12, or MOFED/DOCA-OFED for peermem"))
def gpudirect_rdma_mode(view):
    facts = _facts(view, "rdma_devices", "gpus", "kernel_version", "cuda_version", "kernel_module", "ofed")
    if not facts["rdma_devices"]:
        raise Skip("the host has no RDMA device: GPUDirect RDMA does not apply")
    verdict = gpudirect_rdma.gpudirect_rdma(facts)
    evidence = ["mode %s" % verdict["mode"]] + verdict["reasons"]
    return evidence, verdict["reasons"] if verdict["mode"] == "unsupported" else []


@register("host.gpus_visible", "deployment", "The driver sees every NVIDIA GPU on the PCI bus", reads=["host.pci_gpus", "host.gpus"],
          cause="A GPU on the host's PCI bus is not listed by the driver (fell off the bus, Xid error, or not bound), so "
                "workloads see fewer GPUs than the host has.",
          fix=dict(manual="read dmesg for Xid / 'fallen off the bus' errors; reset the GPU or reboot, else replace it"))
def gpus_visible(view):
    facts = _facts(view, "pci_gpus", "gpus")
    on_bus, seen = len(facts["pci_gpus"] or []), len(facts["gpus"] or [])
    if not on_bus:
        raise Skip("no NVIDIA GPU on the PCI bus")
    return ["%d on the PCI bus, %d seen by the driver" % (on_bus, seen)], [] if seen >= on_bus else [
        "the driver lists %d of the %d GPUs on the PCI bus" % (seen, on_bus)]


@register("host.mig_mode_applied", "deployment", "No MIG mode change waits for a GPU reset", reads=["host.gpus"],
          cause="A GPU's MIG mode was changed but the change waits for a GPU reset or reboot, so its geometry is not the "
                "one configured.",
          fix=dict(manual="reset the GPU (nvidia-smi -r -i <index>) when idle, or reboot the host; then re-run playbooks/gpu_hosts.yml"))
def mig_mode_applied(view):
    gpus = _facts(view, "gpus")["gpus"] or []
    capable = [g for g in gpus if g.get("mig_capable")]
    if not capable:
        raise Skip("no MIG-capable GPU on the host")
    evidence = ["GPU %s: MIG %s, pending %s" % (g.get("index"), g.get("mig_mode_current"), g.get("mig_mode_pending")) for g in capable]
    problems = ["GPU %s (%s): MIG mode %s, pending %s" % (g.get("index"), g.get("name"), g.get("mig_mode_current"), g.get("mig_mode_pending"))
                for g in capable if g.get("mig_mode_pending") is not None and g.get("mig_mode_pending") != g.get("mig_mode_current")]
    return evidence, problems


@register("host.peermem_matches_mode", "conformance", "nvidia-peermem is loaded only where the driver uses it",
          reads=["host.rdma_devices", "host.gpus", "host.kernel_version", "host.cuda_version", "host.kernel_module", "host.ofed",
                 "host.modules_loaded"],
          cause="nvidia-peermem is loaded where the driver uses DMA-BUF, or missing where peermem is the only mode, so "
                "NCCL's GPUDirect RDMA path is not the one the driver supports.",
          fix=dict(role="gpu_operator", variable="gpu_operator_rdma",
                   manual="set the RDMA mode to the host's (dmabuf where supported); unload or load nvidia-peermem on hosts outside the operator"))
def peermem_matches_mode(view):
    facts = _facts(view, "rdma_devices", "gpus", "kernel_version", "cuda_version", "kernel_module", "ofed", "modules_loaded")
    if not facts["rdma_devices"]:
        raise Skip("the host has no RDMA device: GPUDirect RDMA does not apply")
    mode = gpudirect_rdma.gpudirect_rdma(facts)["mode"]
    if mode == "unsupported":
        raise Skip("no GPUDirect RDMA mode fits the host (host.gpudirect_rdma_mode reports why)")
    loaded = bool((facts["modules_loaded"] or {}).get("nvidia_peermem"))
    evidence = ["mode %s, nvidia_peermem loaded %s" % (mode, loaded)]
    if mode == "dmabuf" and loaded:
        return evidence, ["nvidia-peermem is loaded but the driver supports DMA-BUF"]
    if mode == "peermem" and not loaded:
        return evidence, ["peermem is the host's only GPUDirect RDMA mode but nvidia-peermem is not loaded"]
    return evidence, []
