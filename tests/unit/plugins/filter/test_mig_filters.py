# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG and nvidia-smi filters: the catalog reaches roles through these, errors become filter errors."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import mig, nvsmi

FILTER_DIR = pathlib.Path(mig.__file__).parent
FIXTURES = pathlib.Path(__file__).parents[1] / "module_utils" / "fixtures" / "nvsmi"


def test_every_filter_has_a_doc_file_naming_it():
    names = list(mig.FilterModule().filters()) + list(nvsmi.FilterModule().filters())
    assert len(names) == 12
    for name in names:
        doc = yaml.safe_load((FILTER_DIR / (name + ".yml")).read_text())
        assert doc["DOCUMENTATION"]["name"] == name
        assert "_input" in doc["DOCUMENTATION"]["options"]
        assert doc["EXAMPLES"].count(name) >= 1


def test_aks_profile_feeds_the_expectation_filters():
    filters = mig.FilterModule().filters()
    pool = filters["mig_aks_profile"]("Standard_ND96asr_v4", "MIG1g")
    assert filters["mig_expected_resources"](pool, strategy="single") == {"nvidia.com/gpu": 56}
    assert filters["mig_expected_resources"](pool, strategy="mixed") == {"nvidia.com/mig-1g.5gb": 56}
    assert filters["mig_expected_resources"](pool, strategy="none") == {"nvidia.com/gpu": 8}
    labels = filters["mig_expected_labels"](pool, strategy="mixed")
    assert labels["nvidia.com/mig-1g.5gb.count"] == "56"
    # gpus from an extra var arrive as text
    assert filters["mig_expected_resources"]("A100-40GB", "2", "3g.20gb", "single") == {"nvidia.com/gpu": 4}


@pytest.mark.parametrize("call, message", [
    (lambda: mig.mig_aks_profile("Standard_NC6s_v3", "MIG1g"), "mig_aks_profile: VM size 'Standard_NC6s_v3'"),
    (lambda: mig.mig_expected_resources("A100-40GB", 8, {"3g.20gb": 1, "2g.10gb": 1}, "single"), "homogeneous"),
    (lambda: mig.mig_expected_resources("A100-40GB", None, "1g.5gb", "single"), "gpus (GPUs per node) is required"),
    (lambda: mig.mig_expected_resources("A100-40GB", "eight", "1g.5gb", "single"), "gpus must be a whole number"),
    (lambda: mig.mig_expected_resources({"gpu_model": "A100-40GB"}, None, None, "single"), "missing gpus_per_vm, layout"),
    (lambda: mig.mig_expected_labels("T4", 1, None, "none"), "unknown GPU model 'T4'"),
    (lambda: mig.mig_verify_nodes({"items": []}, {}), "list of Node documents"),
    (lambda: mig.mig_device_plugin_config("auto"), "none, single, mixed"),
    (lambda: mig.mig_placements("A100-40GB", {"9g.99gb": 1}), "does not exist on A100-40GB"),
    (lambda: mig.mig_parted_config("A100-40GB", {"7g.40gb": 2}), "at most 1"),
    (lambda: mig.mig_label_patches("node-a", [], "x"), "mig_label_patches: the input must be a list of node names"),
    (lambda: mig.mig_label_patches(["a"], None, "x"), "mig_label_patches: nodes must be a list of Node documents"),
    (lambda: mig.mig_label_patches(["a"], [], ""), "mig_label_patches: config must be a mig-parted config name"),
    (lambda: mig.mig_label_patches(["a"], [], "x", every="yes"), "mig_label_patches: every: must be true or false"),
    (lambda: nvsmi.nvsmi_parse("x", "smi"), "kind 'smi' is not one of"),
    (lambda: nvsmi.nvsmi_parse("GPU 0: x", "list", fields="a"), "fields only applies"),
    (lambda: nvsmi.nvsmi_parse("Unable to list: Insufficient Permissions", "lgi"), "Insufficient Permissions"),
])
def test_errors_are_filter_errors(call, message):
    with pytest.raises(AnsibleFilterError) as err:
        call()
    assert message in str(err.value)


def test_placements_and_parted_config_filters():
    placed = mig.mig_placements("A100-40GB", ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
    assert placed["fits"] and placed["creation_order"][0] == {
        "profile": "3g.20gb", "start": 4, "size": 4, "gpu_instance_profile_id": 9}
    config = mig.mig_parted_config("A100-40GB", "all-balanced", name="balanced", device_filter=False)
    assert config["mig-configs"]["balanced"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]


def test_verify_and_device_plugin_config_filters():
    node = {"metadata": {"name": "n1", "labels": {"pool": "mig"}},
            "status": {"allocatable": {"nvidia.com/gpu": "55"}}}
    report = mig.mig_verify_nodes([node], {"nvidia.com/gpu": 56}, {}, {"pool": "mig"}, 1)
    assert report["problems"] == ["node n1: allocatable nvidia.com/gpu=55, expected 56"]
    config = mig.mig_device_plugin_config("mixed", {"strategy": "time-slicing", "replicas": 3},
                                          {"nvidia.com/mig-1g.5gb": 56})
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/mig-1g.5gb", "replicas": 3}]


def test_label_patches_filter_names_the_catalog_labels():
    nodes = [{"metadata": {"name": "a", "labels": {"nvidia.com/mig.config": "all-1g.10gb"}}}, {"metadata": {"name": "b"}}]
    assert mig.mig_label_patches(["a", "b"], nodes, "all-1g.10gb") == [{"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "b", "labels": {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "pending"}}}]
    assert len(mig.mig_label_patches(["a", "b"], [], "all-1g.10gb", every=True)) == 2


def test_nvsmi_filters():
    listing = (FIXTURES / "list--aks-a100-mixed.txt").read_text()
    assert nvsmi.nvsmi_parse(listing)[0]["mig_devices"][0]["profile"] == "1g.5gb"
    assert nvsmi.nvsmi_parse(listing.splitlines())[0]["uuid"] == "GPU-48aeb943-9458-4282-da24-e5f49e0db44b"
    assert nvsmi.nvsmi_listing_problems(listing, "1g.5gb", "1") == []
    assert nvsmi.nvsmi_listing_problems(listing, "1g.5gb", 2) == ["1 MIG 1g.5gb device(s) listed, expected at least 2"]
    rows = nvsmi.nvsmi_parse("0, Enabled\n", "csv", "index,mig.mode.current")
    assert rows == [{"index": "0", "mig.mode.current": "Enabled"}]
