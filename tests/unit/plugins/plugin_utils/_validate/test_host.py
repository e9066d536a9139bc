# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bare-metal host checks: the healthy H100 RDMA host broken one way fails exactly that check."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite


def _no_driver(data):
    data["host"].update(driver_version=None, cuda_version=None, gpus=[], kernel_module={"type": None, "version": None})


def _no_dmabuf_no_ofed(data):
    data["host"]["kernel_module"]["type"] = "proprietary"
    data["host"]["ofed"] = {"present": False, "kind": None, "version": None}


def _lost_gpu(data):
    data["host"]["gpus"].pop()


def _mig_pending(data):
    data["host"]["gpus"][2]["mig_mode_pending"] = True


def _mig_disable_pending(data):
    # the other way round: MIG on, turned off, the reset not done yet (pending present and False)
    data["host"]["gpus"][5].update(mig_mode_current=True, mig_mode_pending=False)


def _peermem_with_dmabuf(data):
    data["host"]["modules_loaded"]["nvidia_peermem"] = True


def _peermem_missing(data):
    data["host"]["kernel_module"]["type"] = "proprietary"


BREAKS = [
    ("host.driver", _no_driver, "no NVIDIA driver is loaded"),
    ("host.gpudirect_rdma_mode", _no_dmabuf_no_ofed, "neither MOFED nor DOCA-OFED is installed"),
    ("host.gpus_visible", _lost_gpu, "the driver lists 7 of the 8 GPUs on the PCI bus"),
    ("host.mig_mode_applied", _mig_pending, "GPU 2 (NVIDIA H100 80GB HBM3): MIG mode False, pending True"),
    ("host.mig_mode_applied", _mig_disable_pending, "GPU 5 (NVIDIA H100 80GB HBM3): MIG mode True, pending False"),
    ("host.peermem_matches_mode", _peermem_with_dmabuf, "nvidia-peermem is loaded but the driver supports DMA-BUF"),
    ("host.peermem_matches_mode", _peermem_missing, "nvidia-peermem is not loaded"),
]


# breaking the driver or the RDMA mode also changes what the checks that depend on them can say: tested below
ALONE = [b for b in BREAKS if b[1] not in (_no_driver, _no_dmabuf_no_ofed)]


@pytest.mark.parametrize("check_id, mutate, text", ALONE, ids=["%s-%s" % (b[0], b[1].__name__) for b in ALONE])
def test_broken_one_way_fails_that_check_only(only_failure, check_id, mutate, text):
    only_failure("host", mutate, check_id, text)


def test_a_host_without_driver_fails_the_driver_check_and_no_check_passes_on_it(load_raw, build_snapshot):
    data = load_raw("host")
    _no_driver(data)
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["host.driver"]["status"] == "failed"
    assert "no NVIDIA driver is loaded" in by_id["host.driver"]["message"]
    assert by_id["host.gpus_visible"]["status"] == "failed"      # 0 of 8 GPUs seen: true, and said


def test_every_host_check_has_a_break():
    ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.host"))
    assert ids == set(b[0] for b in BREAKS)


def test_facts_of_an_older_collection_are_other_not_passed(load_raw, build_snapshot):
    data = load_raw("host")
    del data["host"]["pci_gpus"]
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["host.gpus_visible"]["status"] == "other"
    assert "cannot read host.pci_gpus" in by_id["host.gpus_visible"]["message"]


def test_a_host_without_rdma_skips_the_rdma_checks_with_the_reason(load_raw, build_snapshot):
    data = load_raw("host")
    data["host"]["rdma_devices"] = []
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["host.gpudirect_rdma_mode"]["status"] == "skipped"
    assert "no RDMA device" in by_id["host.gpudirect_rdma_mode"]["message"]


def test_kubernetes_checks_skip_on_a_host_target(load_raw, build_snapshot):
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(load_raw("host")))["results"])
    assert by_id["gpudirect.installer"]["status"] == "skipped"
    assert "not a Kubernetes cluster" in by_id["gpudirect.installer"]["message"]


def test_a_host_without_any_rdma_mode_fails_preflight_and_skips_the_peermem_check_naming_it(load_raw, build_snapshot):
    data = load_raw("host")
    _no_dmabuf_no_ofed(data)
    result = suite.validate(build_snapshot(data))
    by_id = dict((r["id"], r) for r in result["results"])
    assert by_id["host.gpudirect_rdma_mode"]["status"] == "failed"
    assert "neither MOFED nor DOCA-OFED is installed" in by_id["host.gpudirect_rdma_mode"]["message"]
    assert "the NVIDIA kernel modules are proprietary" in by_id["host.gpudirect_rdma_mode"]["message"]
    assert by_id["host.peermem_matches_mode"]["status"] == "skipped"
    assert "host.gpudirect_rdma_mode reports why" in by_id["host.peermem_matches_mode"]["message"]
    assert result["exit_status"] == 8


def test_the_driver_evidence_names_the_version_module_and_gpu_count(load_raw, build_snapshot):
    """A case the mutation check showed missing: the evidence line is what the report shows for a passed check."""
    data = load_raw("host")
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["host.driver"]["evidence"] == ["driver 550.54.14, kernel module open, 8 GPU(s)"]


def test_a_host_whose_gpus_are_not_mig_capable_skips_the_mig_check(load_raw, build_snapshot):
    # an L40S-like host: mig_capable present and false on every GPU, no MIG mode to apply
    data = load_raw("host")
    for gpu in data["host"]["gpus"]:
        gpu.update(mig_capable=False, mig_mode_current=None, mig_mode_pending=None)
    result = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])["host.mig_mode_applied"]
    assert result["status"] == "skipped" and "no MIG-capable GPU on the host" in result["message"], result
