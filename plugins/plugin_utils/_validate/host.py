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
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip, described_by

# each check's phase, title, reads, cause and fix: host.yml beside this file
described = described_by(__file__)


def _facts(view, *keys):
    """The host facts, with every key in ``keys`` present (gpu_host_facts returns them always)."""
    facts = view.host()
    for key in keys:
        if key not in facts:
            raise Missing("host.%s" % key)
    return facts


@described("host.driver")
def driver(view):
    facts = _facts(view, "kernel_module", "gpus", "driver_version")
    loaded = gpudirect_rdma.driver_loaded(facts)
    module = (facts.get("kernel_module") or {}).get("type")
    evidence = ["driver %s, kernel module %s, %d GPU(s)" % (facts.get("driver_version"), module, len(facts.get("gpus") or []))]
    return evidence, [] if loaded else ["no NVIDIA driver is loaded"]


@described("host.gpudirect_rdma_mode")
def gpudirect_rdma_mode(view):
    facts = _facts(view, "rdma_devices", "gpus", "kernel_version", "cuda_version", "kernel_module", "ofed")
    if not facts["rdma_devices"]:
        raise Skip("the host has no RDMA device: GPUDirect RDMA does not apply")
    verdict = gpudirect_rdma.gpudirect_rdma(facts)
    evidence = ["mode %s" % verdict["mode"]] + verdict["reasons"]
    return evidence, verdict["reasons"] if verdict["mode"] == "unsupported" else []


@described("host.gpus_visible")
def gpus_visible(view):
    facts = _facts(view, "pci_gpus", "gpus")
    on_bus, seen = len(facts["pci_gpus"] or []), len(facts["gpus"] or [])
    if not on_bus:
        raise Skip("no NVIDIA GPU on the PCI bus")
    return ["%d on the PCI bus, %d seen by the driver" % (on_bus, seen)], [] if seen >= on_bus else [
        "the driver lists %d of the %d GPUs on the PCI bus" % (seen, on_bus)]


@described("host.mig_mode_applied")
def mig_mode_applied(view):
    gpus = _facts(view, "gpus")["gpus"] or []
    capable = [g for g in gpus if g.get("mig_capable")]
    if not capable:
        raise Skip("no MIG-capable GPU on the host")
    evidence = ["GPU %s: MIG %s, pending %s" % (g.get("index"), g.get("mig_mode_current"), g.get("mig_mode_pending")) for g in capable]
    problems = ["GPU %s (%s): MIG mode %s, pending %s" % (g.get("index"), g.get("name"), g.get("mig_mode_current"), g.get("mig_mode_pending"))
                for g in capable if g.get("mig_mode_pending") is not None and g.get("mig_mode_pending") != g.get("mig_mode_current")]
    return evidence, problems


@described("host.peermem_matches_mode")
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
