# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG catalog (plugins/module_utils/_catalog/mig.py): profiles, placements, model names, AKS sizes."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as _mig
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import placement as mig_placement


# --------------------------------------------------------------------------------------------
# Catalog facts, written out from the research notes (nvidia-stack.md 5.1, 5.2, 5.4) so that a
# change to the table has to be made twice on purpose.
# --------------------------------------------------------------------------------------------

PROFILE_TABLE = {
    "A100-40GB": {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
    "A100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "H100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "H100-94GB": {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1},
    "H100-96GB": {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1},
    "H200-141GB": {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
                   "7g.141gb": 1},
    "B200-180GB": {"1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1,
                   "7g.180gb": 1},
    "A30-24GB": {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1},
    "RTX-PRO-6000-96GB": {"1g.24gb": 4, "1g.24gb+me": 1, "1g.24gb+gfx": 4, "1g.24gb+me.all": 1, "1g.24gb-me": 4,
                          "2g.48gb": 2, "2g.48gb+gfx": 2, "2g.48gb+me.all": 1, "2g.48gb-me": 2, "4g.96gb": 1,
                          "4g.96gb+gfx": 1},
}

# nvidia-smi mig -lgipp on 8-slot GPUs: profile ID -> (starts, size)
LGIPP_8 = {19: ([0, 1, 2, 3, 4, 5, 6], 1), 20: ([0, 1, 2, 3, 4, 5, 6], 1), 15: ([0, 2, 4, 6], 2),
           14: ([0, 2, 4], 2), 9: ([0, 4], 4), 5: ([0], 4), 0: ([0], 8)}
LGIPP_A30 = {14: ([0, 1, 2, 3], 1), 21: ([0, 1, 2, 3], 1), 5: ([0, 2], 2), 6: ([0, 2], 2), 0: ([0], 4)}

# The AKS guide's table for Standard_ND96asr_v4 (profile, SM fraction, memory fraction, instances)
AKS_ND96ASR_V4 = {
    "MIG1g": ("1g.5gb", "1/7", "1/8", 7),
    "MIG2g": ("2g.10gb", "2/7", "2/8", 3),
    "MIG3g": ("3g.20gb", "3/7", "4/8", 2),
    "MIG4g": ("4g.20gb", "4/7", "4/8", 1),
    "MIG7g": ("7g.40gb", "7/7", "8/8", 1),
}


@pytest.mark.parametrize("model", sorted(PROFILE_TABLE))
def test_profiles_and_max_instances_per_model(model):
    entry = _mig.gpu_model(model)
    assert {name: p["max_instances"] for name, p in entry["profiles"].items()} == PROFILE_TABLE[model]


@pytest.mark.parametrize("model", ["A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H100-96GB", "H200-141GB",
                                   "B200-180GB"])
def test_eight_slot_placements_match_lgipp(model):
    entry = _mig.gpu_model(model)
    got = {p["gpu_instance_profile_id"]: (p["placements"], p["memory_slices"]) for p in entry["profiles"].values()}
    assert got == LGIPP_8
    assert (entry["memory_slices"], entry["compute_slices"]) == (8, 7)


def test_a30_placements_match_lgipp():
    entry = _mig.gpu_model("A30")
    got = {p["gpu_instance_profile_id"]: (p["placements"], p["memory_slices"]) for p in entry["profiles"].values()}
    assert got == LGIPP_A30
    assert (entry["memory_slices"], entry["compute_slices"]) == (4, 4)


def test_unverified_placements_are_flagged():
    assert _mig.gpu_model("B200")["placements_verified"] is False
    assert _mig.gpu_model("RTX PRO 6000")["placements_verified"] is False
    assert _mig.gpu_model("A100-40GB")["placements_verified"] is True
    assert mig_placement.place("B200", {"7g.180gb": 1})["placements_verified"] is False


def test_fractions_and_driver_minimums_on_a100_40gb():
    profiles = _mig.gpu_model("A100-40GB")["profiles"]
    assert (profiles["1g.10gb"]["sm_fraction"], profiles["1g.10gb"]["memory_fraction"]) == ("1/7", "2/8")
    assert profiles["1g.10gb"]["min_driver_branch"] == 525
    assert profiles["1g.5gb+me"]["min_driver_branch"] == 470
    assert profiles["1g.5gb+me"]["media_extensions"] is True
    assert profiles["1g.5gb"]["media_extensions"] is False


@pytest.mark.parametrize("name, model", [
    ("A100-40GB", "A100-40GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),           # GFD gpu.product
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),  # GFD gpu.product under the single strategy
    ("NVIDIA A100 40GB PCIe", "A100-40GB"),           # the AKS guide's nvidia-smi -L sample
    ("NVIDIA A100 80GB PCIe", "A100-80GB"),
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ("NVIDIA H100 NVL", "H100-94GB"),
    ("NVIDIA-H100-NVL-SHARED", "H100-94GB"),
    ("NVIDIA H200", "H200-141GB"),
    ("nvidia a30", "A30-24GB"),
    ("NVIDIA B200", "B200-180GB"),
])
def test_gpu_model_aliases(name, model):
    assert _mig.gpu_model(name)["name"] == model


def test_gpu_model_errors_name_the_allowed_models():
    with pytest.raises(ValueError) as err:
        _mig.gpu_model("Tesla-T4")
    for model in PROFILE_TABLE:
        assert model in str(err.value)
    with pytest.raises(ValueError, match="GB200 .* not in the catalog"):
        _mig.gpu_model("NVIDIA GB200")
    assert _mig.find_gpu_model("Tesla-T4") is None


def test_profile_errors_name_the_models_profiles():
    with pytest.raises(ValueError) as err:
        _mig.profile("A100-40GB", "1g.10gb+me")
    assert "1g.5gb+me" in str(err.value) and "7g.40gb" in str(err.value)
    with pytest.raises(ValueError, match="is not a MIG profile name"):
        _mig.profile("A100-40GB", "one-slice")


@pytest.mark.parametrize("text, expected", [
    ("1g.5gb", (None, "1g.5gb")),
    ("MIG 1g.5gb", (None, "1g.5gb")),
    ("nvidia.com/mig-1g.10gb.me", (None, "1g.10gb+me")),
    ("1g.24gb+me.all", (None, "1g.24gb+me.all")),
    ("1g.24gb-me", (None, "1g.24gb-me")),
    ("1c.3g.20gb", (1, "3g.20gb")),
])
def test_parse_profile(text, expected):
    assert _mig.parse_profile(text) == expected


def test_resource_names_join_attributes_with_dots():
    assert _mig.resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert _mig.resource_name("3g.40gb") == "nvidia.com/mig-3g.40gb"


# --------------------------------------------------------------------------------------------
# AKS
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aks_name", sorted(AKS_ND96ASR_V4))
def test_every_aks_profile_on_nd96asr_v4(aks_name):
    name, sm, memory, instances = AKS_ND96ASR_V4[aks_name]
    got = _mig.aks_profile("Standard_ND96asr_v4", aks_name)
    assert (got["gpu_model"], got["mig_profile"], got["instances_per_gpu"], got["gpus_per_vm"]) == (
        "A100-40GB", name, instances, 8)
    assert got["verified"] is True
    entry = _mig.profile("A100-40GB", name)
    assert (entry["sm_fraction"], entry["memory_fraction"]) == (sm, memory)
    single = mig_nodes.expected_resources(got["gpu_model"], got["gpus_per_vm"], got["layout"], "single")
    mixed = mig_nodes.expected_resources(got["gpu_model"], got["gpus_per_vm"], got["layout"], "mixed")
    assert single == {"nvidia.com/gpu": instances * 8}
    assert mixed == {"nvidia.com/mig-" + name: instances * 8}


def test_aks_mig1g_gives_the_guides_56():
    got = _mig.aks_profile("standard_nd96asr_v4", "MIG1g")  # VM sizes are case-insensitive in Azure
    assert got["vm_size"] == "Standard_ND96asr_v4"
    assert mig_nodes.expected_resources("A100-40GB", 8, got["layout"], "single") == {"nvidia.com/gpu": 56}
    assert mig_nodes.expected_resources("A100-40GB", 8, got["layout"], "mixed") == {"nvidia.com/mig-1g.5gb": 56}
    assert mig_nodes.expected_resources("A100-40GB", 8, got["layout"], "none") == {"nvidia.com/gpu": 8}


@pytest.mark.parametrize("vm_size, model, gpus, mig3g", [
    ("Standard_ND96amsr_A100_v4", "A100-80GB", 8, "3g.40gb"),
    ("Standard_NC24ads_A100_v4", "A100-80GB", 1, "3g.40gb"),
    ("Standard_NC96ads_A100_v4", "A100-80GB", 4, "3g.40gb"),
    ("Standard_ND96isr_H100_v5", "H100-80GB", 8, "3g.40gb"),
    ("Standard_NC40ads_H100_v5", "H100-94GB", 1, "3g.47gb"),
    ("Standard_NC80adis_H100_v5", "H100-94GB", 2, "3g.47gb"),
])
def test_other_aks_sizes_map_the_g_count(vm_size, model, gpus, mig3g):
    got = _mig.aks_profile(vm_size, "MIG3g")
    assert (got["gpu_model"], got["gpus_per_vm"], got["mig_profile"], got["instances_per_gpu"]) == (model, gpus, mig3g, 2)
    assert got["verified"] is False


def test_aks_errors_name_the_supported_values():
    with pytest.raises(ValueError) as err:
        _mig.aks_profile("Standard_NC6s_v3", "MIG1g")
    assert "Standard_ND96asr_v4" in str(err.value) and "Standard_NC40ads_H100_v5" in str(err.value)
    with pytest.raises(ValueError) as err:
        _mig.aks_profile("Standard_ND96asr_v4", "MIG5g")
    assert "MIG1g, MIG2g, MIG3g, MIG4g, MIG7g" in str(err.value)


def test_aks_pool_problems():
    assert _mig.aks_pool_problems("Standard_ND96asr_v4", "MIG1g", "Ubuntu", False) == []
    problems = _mig.aks_pool_problems("Standard_ND96asr_v4", "MIG1g", "AzureLinux", True)
    assert len(problems) == 2
    assert "Azure Linux" in problems[0] and "autoscaler" in problems[1]
