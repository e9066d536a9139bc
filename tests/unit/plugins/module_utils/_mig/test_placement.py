# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG catalog, solver, expectations and verification (plugins/module_utils/_catalog/mig.py)."""

from __future__ import annotations

import itertools
import re

import jsonschema
import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as _mig
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import documents as mig_documents
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


# --------------------------------------------------------------------------------------------
# The solver
# --------------------------------------------------------------------------------------------

# Layouts the MIG guide shows as valid A100-40GB configurations.
VALID_A100_40GB = [
    {"7g.40gb": 1},
    {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1},
    {"4g.20gb": 1, "1g.5gb": 3},
    {"3g.20gb": 2},
    {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1},
    {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2},  # 3-2-1-1: 3g must take slot 4
    {"3g.20gb": 1, "2g.10gb": 2},
    {"3g.20gb": 1, "1g.5gb": 4},
    {"2g.10gb": 3, "1g.5gb": 1},
    {"2g.10gb": 2, "1g.5gb": 3},
    {"2g.10gb": 1, "1g.5gb": 5},
    {"1g.5gb": 7},
    {"1g.10gb": 4},
    {"1g.5gb+me": 1, "1g.5gb": 6},
    {"4g.20gb": 1, "3g.20gb": 1},
    {"1g.10gb": 1, "2g.10gb": 2, "1g.5gb": 2},
]

INVALID_A100_40GB = [
    ({"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}, "compute slices"),
    ({"3g.20gb": 3}, "at most 2"),
    ({"7g.40gb": 1, "1g.5gb": 1}, "compute slices"),
    ({"1g.5gb": 8}, "at most 7"),
    ({"2g.10gb": 4}, "at most 3"),
    ({"1g.5gb+me": 2}, "media extensions"),
    ({"1g.5gb+me": 1, "1g.5gb": 7}, "compute slices"),
    ({"1g.10gb": 4, "1g.5gb": 1}, "memory slices"),
    ({"3g.20gb": 1, "2g.10gb": 2, "1g.5gb": 1}, "memory slices"),
]


@pytest.mark.parametrize("layout", VALID_A100_40GB, ids=lambda d: "+".join("%sx%d" % kv for kv in sorted(d.items())))
def test_solver_accepts_known_valid_a100_geometries(layout):
    result = mig_placement.place("A100-40GB", layout)
    assert result["fits"], result["reason"]
    _assert_sound("A100-40GB", layout, result["placements"])


@pytest.mark.parametrize("layout, why", INVALID_A100_40GB)
def test_solver_rejects_invalid_a100_geometries(layout, why):
    result = mig_placement.place("A100-40GB", layout)
    assert not result["fits"]
    assert result["placements"] == []
    assert why in result["reason"]


def test_three_two_one_one_puts_3g_at_slot_4_and_creates_it_first():
    result = mig_placement.place("A100-40GB", {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2})
    starts = {(p["profile"], p["start"]) for p in result["placements"]}
    assert ("3g.20gb", 4) in starts and ("2g.10gb", 0) in starts
    assert result["creation_order"][0]["profile"] == "3g.20gb"
    assert (result["compute_slices_used"], result["memory_slices_used"]) == (7, 8)


def test_pinned_starts():
    ok = mig_placement.place("A100-40GB", ["3g.20gb@4", "4g.20gb"])
    assert ok["fits"] and {(p["profile"], p["start"]) for p in ok["placements"]} == {("3g.20gb", 4), ("4g.20gb", 0)}
    clash = mig_placement.place("A100-40GB", ["4g.20gb@0", "3g.20gb@0"])
    assert not clash["fits"]
    assert "no non-overlapping placement" in clash["reason"] and "4g.20gb@0" in clash["reason"]
    wrong = mig_placement.place("A100-40GB", ["3g.20gb@2"])
    assert not wrong["fits"] and "allowed starts: 0, 4" in wrong["reason"]
    # pinned small instances leave no room for a 3g (slot 0 and slot 4 areas are both touched)
    blocked = mig_placement.place("A100-40GB", ["1g.5gb@1", "1g.5gb@5", "3g.20gb"])
    assert not blocked["fits"] and "3g.20gb takes 4 slots starting at {0,4}" in blocked["reason"]
    with pytest.raises(ValueError, match="slot number"):
        mig_placement.place("A100-40GB", ["3g.20gb@x"])


def test_compute_instance_prefix_in_a_list_is_one_gpu_instance_each():
    result = mig_placement.place("A100-40GB", ["1c.3g.20gb", "1c.3g.20gb"])
    assert result["fits"]
    assert [(p["profile"], p["compute_instances"]) for p in result["placements"]] == [("3g.20gb", [1]), ("3g.20gb", [1])]
    with pytest.raises(ValueError, match="does not fit a 3g"):
        mig_placement.place("A100-40GB", {"4c.3g.20gb": 1})


@pytest.mark.parametrize("counts, instances", [
    # mig-parted counts compute instances; those of one GI profile fill the GI created last
    ({"1c.3g.20gb": 2}, [("3g.20gb", [1, 1])]),
    ({"1c.3g.20gb": 3}, [("3g.20gb", [1, 1, 1])]),
    ({"1c.3g.20gb": 6}, [("3g.20gb", [1, 1, 1]), ("3g.20gb", [1, 1, 1])]),
    ({"2c.3g.20gb": 1, "1c.3g.20gb": 2}, [("3g.20gb", [2, 1]), ("3g.20gb", [1])]),
    ({"3g.20gb": 1, "1c.3g.20gb": 3}, [("3g.20gb", [3]), ("3g.20gb", [1, 1, 1])]),
    ({"1c.7g.40gb": 7}, [("7g.40gb", [1] * 7)]),
    ({"4c.7g.40gb": 1, "3c.7g.40gb": 1}, [("7g.40gb", [4, 3])]),
    ({"1c.2g.10gb": 2, "1g.5gb": 2}, [("2g.10gb", [1, 1]), ("1g.5gb", [1]), ("1g.5gb", [1])]),
    ({"3c.3g.20gb": 1}, [("3g.20gb", [3])]),
])
def test_mig_parted_counts_pack_into_gpu_instances(counts, instances):
    assert mig_placement.pack_compute_instances("A100-40GB", counts) == instances
    placed = mig_placement.place("A100-40GB", counts)
    assert placed["fits"], placed["reason"]
    assert sorted((p["profile"], p.get("compute_instances", [int(p["profile"][0])])) for p in placed["placements"]) == \
        sorted(instances)


def test_mig_parted_counts_that_do_not_fit():
    assert "at most 2" in mig_placement.place("A100-40GB", {"1c.3g.20gb": 7})["reason"]  # three 3g instances
    with pytest.raises(ValueError, match="compute instance size 5 is not one of 1, 2, 3, 4, 7"):
        mig_placement.place("A100-40GB", {"5c.7g.40gb": 1})
    with pytest.raises(ValueError, match="whole number"):
        mig_placement.pack_compute_instances("A100-40GB", {"1c.3g.20gb": -1})


def test_mig_parted_config_keeps_compute_instance_counts():
    config = mig_documents.mig_parted_config("H100-80GB", [{"1c.3g.40gb": 3, "3g.40gb": 1}, {"2c.4g.40gb": 2, "3C.3G.40GB": 1}],
                                             name="split", device_filter=False, include_defaults=False)
    assert config["mig-configs"]["split"] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 3, "3g.40gb": 1}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"2c.4g.40gb": 2, "3g.40gb": 1}}]
    assert mig_nodes.expected_resources("H100-80GB", 1, {"1c.3g.40gb": 3, "3g.40gb": 1}, "mixed") == {
        "nvidia.com/mig-1c.3g.40gb": 3, "nvidia.com/mig-3g.40gb": 1}


def test_a30_geometries():
    assert mig_placement.place("A30", {"2g.12gb": 2})["fits"]
    assert mig_placement.place("A30", {"2g.12gb+me": 1, "2g.12gb": 1})["fits"]
    assert mig_placement.place("A30", {"1g.6gb": 4})["fits"]
    assert "media extensions" in mig_placement.place("A30", {"1g.6gb+me": 1, "2g.12gb+me": 1})["reason"]
    assert "compute slices" in mig_placement.place("A30", {"4g.24gb": 1, "1g.6gb": 1})["reason"]


def test_request_errors():
    with pytest.raises(ValueError, match="whole number"):
        mig_placement.place("A100-40GB", {"1g.5gb": -1})
    with pytest.raises(ValueError, match="does not exist on A100-80GB"):
        mig_placement.place("A100-80GB", {"1g.5gb": 1})
    assert mig_placement.place("A100-40GB", {})["fits"]  # MIG enabled, no instances


def _assert_sound(model, layout, placements):
    """Placements are non-overlapping, at allowed starts, and realise exactly the layout."""
    entry = _mig.gpu_model(model)
    used = [0] * entry["memory_slices"]
    counts = {}
    for p in placements:
        found = entry["profiles"][p["profile"]]
        assert p["start"] in found["placements"] and p["size"] == found["memory_slices"]
        for slot in range(p["start"], p["start"] + p["size"]):
            used[slot] += 1
        counts[p["profile"]] = counts.get(p["profile"], 0) + 1
    assert max(used) <= 1
    assert counts == {k: v for k, v in layout.items() if v}


def _feasible_by_enumeration(model):
    """Every multiset that some set of non-overlapping placements realises (independent of the solver)."""
    entry = _mig.gpu_model(model)
    options = [(name, start, p["memory_slices"], p["compute_slices"], p["media_extensions"])
               for name, p in entry["profiles"].items() for start in p["placements"]]
    feasible = set()

    def grow(index, slots, compute, media, chosen):
        feasible.add(tuple(sorted(chosen)))
        for i in range(index, len(options)):
            name, start, size, g, me = options[i]
            span = set(range(start, start + size))
            if span & slots or compute + g > entry["compute_slices"] or (me and media):
                continue
            grow(i + 1, slots | span, compute + g, media or me, chosen + [name])

    grow(0, frozenset(), 0, False, [])
    return {t for t in feasible
            if all(t.count(n) <= entry["profiles"][n]["max_instances"] for n in set(t))}


@pytest.mark.parametrize("model", ["A100-40GB", "A30-24GB"])
def test_solver_agrees_with_exhaustive_enumeration(model):
    entry = _mig.gpu_model(model)
    feasible = _feasible_by_enumeration(model)
    names = sorted(entry["profiles"])
    ranges = [range(entry["profiles"][n]["max_instances"] + 2) for n in names]
    checked = 0
    for counts in itertools.product(*ranges):
        if sum(counts) > entry["memory_slices"] + 1:
            continue
        layout = dict(zip(names, counts))
        key = tuple(sorted(itertools.chain.from_iterable([n] * c for n, c in layout.items())))
        result = mig_placement.place(model, layout)
        assert result["fits"] == (key in feasible), (layout, result["reason"])
        if result["fits"]:
            _assert_sound(model, layout, result["placements"])
        checked += 1
    assert checked > 150


# --------------------------------------------------------------------------------------------
# Expectations
# --------------------------------------------------------------------------------------------


def test_standard_layouts_differ_per_model():
    assert mig_placement.standard_layouts("A100-40GB")["all-1g.10gb"] == {"1g.10gb": 4}
    assert mig_placement.standard_layouts("A100-80GB")["all-1g.10gb"] == {"1g.10gb": 7}
    assert mig_placement.standard_layouts("H100-80GB")["all-1g.10gb.me"] == {"1g.10gb+me": 1}
    assert mig_placement.standard_layouts("H200")["all-balanced"] == {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    assert mig_placement.standard_layouts("A30")["all-balanced"] == {"1g.6gb": 2, "2g.12gb": 1}
    assert mig_placement.standard_layouts("A100-40GB")["all-disabled"] is None


def test_layout_forms():
    assert mig_placement.normalize_layout("A100-40GB", "3g.20gb", 2) == [{"3g.20gb": 2}, {"3g.20gb": 2}]
    assert mig_placement.normalize_layout("A100-40GB", "all-balanced", 1) == [{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}]
    assert mig_placement.normalize_layout("A100-40GB", None, 2) == [None, None]
    assert mig_placement.normalize_layout("A100-40GB", [{"7g.40gb": 1}, "disabled", ["3g.20gb", "3g.20gb"]], 3) == [
        {"7g.40gb": 1}, None, {"3g.20gb": 2}]
    with pytest.raises(ValueError, match="3 entries for 2 GPUs"):
        mig_placement.normalize_layout("A100-40GB", [None, None, None], 2)
    with pytest.raises(ValueError, match="GPU 1 .* does not fit"):
        mig_placement.normalize_layout("A100-40GB", [{"7g.40gb": 1}, {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}], 2)
    with pytest.raises(ValueError, match="gpus must be a whole number"):
        mig_placement.normalize_layout("A100-40GB", "1g.5gb", 0)


def test_expected_resources_strategies():
    assert mig_nodes.expected_resources("H100-80GB", 8, "1g.10gb+me", "mixed") == {"nvidia.com/mig-1g.10gb.me": 8}
    layout = [{"3g.20gb": 2}, {"1g.5gb": 7}, None]
    assert mig_nodes.expected_resources("A100-40GB", 3, layout, "mixed") == {
        "nvidia.com/mig-3g.20gb": 2, "nvidia.com/mig-1g.5gb": 7, "nvidia.com/gpu": 1}
    assert mig_nodes.expected_resources("A100-40GB", 3, layout, "none") == {"nvidia.com/gpu": 3}
    with pytest.raises(ValueError, match="homogeneous"):
        mig_nodes.expected_resources("A100-40GB", 1, {"3g.20gb": 1, "2g.10gb": 1}, "single")
    with pytest.raises(ValueError, match="MIG disabled"):
        mig_nodes.expected_resources("A100-40GB", 2, [{"7g.40gb": 1}, None], "single")
    with pytest.raises(ValueError, match="no MIG devices"):
        mig_nodes.expected_resources("A100-40GB", 2, "all-enabled", "single")
    with pytest.raises(ValueError, match="none, single, mixed"):
        mig_nodes.expected_resources("A100-40GB", 2, "1g.5gb", "auto")


def test_sharing_multiplies_and_renames():
    ts = {"strategy": "time-slicing", "replicas": 4}
    assert mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "single", ts) == {"nvidia.com/gpu": 224}
    renamed = dict(ts, rename_by_default=True)
    assert mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "single", renamed) == {
        "nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 224}
    assert mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "mixed", dict(ts, replicas=2)) == {
        "nvidia.com/mig-1g.5gb": 112}
    mps = {"strategy": "mps", "replicas": 10}
    assert mig_nodes.expected_node_resources("H100-80GB", 8, None, "none", mps) == {"nvidia.com/gpu": 80}
    with pytest.raises(ValueError, match="not supported for MIG devices"):
        mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "single", mps)
    with pytest.raises(ValueError, match="replicas must be a whole number >= 2"):
        mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "single", {"strategy": "time-slicing", "replicas": 1})
    with pytest.raises(ValueError, match="not advertised"):
        mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "mixed",
                                          dict(ts, resources=["nvidia.com/mig-2g.10gb"]))
    with pytest.raises(ValueError, match="unknown sharing options: replica"):
        mig_nodes.expected_node_resources("A100-40GB", 8, "1g.5gb", "mixed", {"strategy": "mps", "replica": 2})


def test_expected_labels():
    single = mig_nodes.expected_labels("A100-40GB", 8, "1g.5gb", "single")
    assert single["nvidia.com/mig.strategy"] == "single"
    assert single["nvidia.com/gpu.count"] == "56"
    assert re.search(single["nvidia.com/gpu.product"]["pattern"], "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")
    assert not re.search(single["nvidia.com/gpu.product"]["pattern"], "NVIDIA-A100-SXM4-40GB-MIG-2g.10gb")
    mixed = mig_nodes.expected_labels("A100-40GB", 8, "1g.5gb", "mixed")
    assert mixed == {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": {"gpu_model": "A100-40GB"},
                     "nvidia.com/mig-1g.5gb.count": "56"}
    shared = mig_nodes.expected_labels("A100-40GB", 8, "1g.5gb", "single", {"strategy": "time-slicing", "replicas": 4})
    assert shared["nvidia.com/gpu.replicas"] == "4"
    assert shared["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert re.search(shared["nvidia.com/gpu.product"]["pattern"], "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED")


# --------------------------------------------------------------------------------------------
# Config documents
# --------------------------------------------------------------------------------------------

# mig-parted api/spec/v1 rules (nvidia-stack.md 4.1) written as a schema.
_PROFILE_KEY = r"^([0-9]+c\.)?[0-9]+g\.[0-9]+gb([+-](me|me\.all|gfx)(,(me|me\.all|gfx))*)?$"
MIG_PARTED_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "mig-configs"],
    "properties": {
        "version": {"const": "v1"},
        "mig-configs": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["devices", "mig-enabled"],
                    "properties": {
                        "devices": {"oneOf": [{"const": "all"},
                                              {"type": "array", "items": {"type": "integer", "minimum": 0}}]},
                        "device-filter": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                        "mig-enabled": {"type": "boolean"},
                        "mig-devices": {"type": "object", "propertyNames": {"pattern": _PROFILE_KEY},
                                        "additionalProperties": {"type": "integer", "minimum": 0}},
                    },
                    "if": {"properties": {"mig-enabled": {"const": False}}},
                    "then": {"not": {"required": ["mig-devices"]}},
                    "else": {"required": ["mig-devices"]},
                },
            },
        },
    },
}


def test_mig_parted_config_one_layout_for_all_gpus():
    config = mig_documents.mig_parted_config("A100-40GB", "all-balanced", name="balanced")
    jsonschema.validate(config, MIG_PARTED_SCHEMA)
    assert config["mig-configs"]["balanced"] == [{
        "devices": "all",
        "device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
        "mig-enabled": True,
        "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    }]
    assert config["mig-configs"]["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert config["mig-configs"]["all-enabled"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]


def test_mig_parted_config_per_gpu_groups_identical_layouts():
    layout = [{"3g.20gb": 2}, None, {"3g.20gb": 2}, {"1g.5gb+me": 1, "1g.5gb": 6}]
    config = mig_documents.mig_parted_config("A100-40GB", layout, name="mixed-pool", device_filter=False,
                                             include_defaults=False)
    jsonschema.validate(config, MIG_PARTED_SCHEMA)
    assert config == {"version": "v1", "mig-configs": {"mixed-pool": [
        {"devices": [0, 2], "mig-enabled": True, "mig-devices": {"3g.20gb": 2}},
        {"devices": [1], "mig-enabled": False},
        {"devices": [3], "mig-enabled": True, "mig-devices": {"1g.5gb": 6, "1g.5gb+me": 1}},
    ]}}
    a30 = mig_documents.mig_parted_config("A30", "2g.12gb")
    assert a30["mig-configs"]["custom"][0]["device-filter"] == "0x20B710DE"
    jsonschema.validate(a30, MIG_PARTED_SCHEMA)


def test_mig_parted_config_refuses_bad_input():
    with pytest.raises(ValueError, match="does not fit"):
        mig_documents.mig_parted_config("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1})
    with pytest.raises(ValueError, match="default configs"):
        mig_documents.mig_parted_config("A100-40GB", "1g.5gb", name="all-disabled")
    with pytest.raises(ValueError, match="non-empty string"):
        mig_documents.mig_parted_config("A100-40GB", "1g.5gb", name="")


def test_device_plugin_config():
    assert mig_documents.device_plugin_config("single") == {"version": "v1", "flags": {"migStrategy": "single"}}
    resources = mig_nodes.expected_resources("A100-40GB", 8, "1g.5gb", "mixed")
    config = mig_documents.device_plugin_config("mixed", {"strategy": "time-slicing", "replicas": 2,
                                                          "fail_requests_greater_than_one": True}, resources)
    assert config["sharing"] == {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}
    mps = mig_documents.device_plugin_config("none", {"strategy": "mps", "replicas": 4})
    assert mps["sharing"] == {"mps": {"renameByDefault": False,
                                      "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    with pytest.raises(ValueError, match="MPS sharing is not supported for MIG"):
        mig_documents.device_plugin_config("single", {"strategy": "mps", "replicas": 4})


# --------------------------------------------------------------------------------------------
# Verification against Nodes
# --------------------------------------------------------------------------------------------


def _node(name, allocatable, labels):
    base = {"kubernetes.azure.com/agentpool": "migpool"}
    base.update(labels)
    alloc = {"cpu": "94", "memory": "900Gi", "pods": "110"}
    alloc.update(allocatable)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": base},
            "status": {"allocatable": alloc, "capacity": dict(alloc)}}


MIXED_LABELS = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
                "nvidia.com/mig-1g.5gb.count": "56"}


def test_verify_nodes_pass_and_fail():
    resources = mig_nodes.expected_resources("A100-40GB", 8, "1g.5gb", "mixed")
    labels = mig_nodes.expected_labels("A100-40GB", 8, "1g.5gb", "mixed")
    good = [_node("aks-migpool-0", {"nvidia.com/mig-1g.5gb": "56"}, MIXED_LABELS),
            _node("aks-migpool-1", {"nvidia.com/mig-1g.5gb": "56"}, MIXED_LABELS),
            _node("aks-system-0", {}, {"kubernetes.azure.com/agentpool": "system"})]
    report = mig_nodes.verify_nodes(good, resources, labels, {"kubernetes.azure.com/agentpool": "migpool"}, 2)
    assert report["ok"], report["problems"]
    assert [n["name"] for n in report["nodes"]] == ["aks-migpool-0", "aks-migpool-1"]

    short = [good[0], _node("aks-migpool-1", {"nvidia.com/mig-1g.5gb": "49"},
                            dict(MIXED_LABELS, **{"nvidia.com/mig-1g.5gb.count": "49"}))]
    report = mig_nodes.verify_nodes(short, resources, labels, {"kubernetes.azure.com/agentpool": "migpool"})
    assert not report["ok"]
    assert report["problems"] == [
        "node aks-migpool-1: allocatable nvidia.com/mig-1g.5gb=49, expected 56",
        "node aks-migpool-1: label nvidia.com/mig-1g.5gb.count=49, expected 56",
    ]
    bad_node = report["nodes"][1]
    assert bad_node["expected_resources"] == {"nvidia.com/mig-1g.5gb": 56}
    assert bad_node["actual_resources"] == {"nvidia.com/mig-1g.5gb": 49}
    assert bad_node["summary"] == ('Node aks-migpool-1: expected {"nvidia.com/mig-1g.5gb": 56}, '
                                   'actual {"nvidia.com/mig-1g.5gb": 49}.')


def test_verify_nodes_other_problems():
    resources = mig_nodes.expected_resources("A100-40GB", 8, "1g.5gb", "single")
    labels = mig_nodes.expected_labels("A100-40GB", 8, "1g.5gb", "single")
    # the plugin still runs the none strategy: whole GPUs, no GFD MIG labels
    node = _node("n1", {"nvidia.com/gpu": "8", "nvidia.com/mig-2g.10gb": "3"},
                 {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8"})
    problems = mig_nodes.node_problems(node, resources, labels)
    assert problems == [
        "allocatable nvidia.com/gpu=8, expected 56",
        "allocatable nvidia.com/mig-2g.10gb=3 not expected",
        "label nvidia.com/gpu.count=8, expected 56",
        "label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB does not match -MIG-1g\\.5gb$",
        "label nvidia.com/mig.strategy missing (expected single)",
    ]
    wrong_gpu = _node("n2", {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                      "nvidia.com/gpu.count": "8"})
    assert mig_nodes.node_problems(wrong_gpu, {"nvidia.com/gpu": 8}, mig_nodes.expected_labels("A100-40GB", 8, None, "none")) == [
        "label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 is a H100-80GB, expected A100-40GB"]
    # renamed sharing: the old name may be absent or 0
    renamed = {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 32}
    assert mig_nodes.node_problems(_node("n3", {"nvidia.com/gpu.shared": "32"}, {}), renamed) == []
    assert mig_nodes.node_problems(_node("n3", {"nvidia.com/gpu.shared": "32", "nvidia.com/gpu": "0"}, {}), renamed) == []
    report = mig_nodes.verify_nodes([], resources, labels, {"agentpool": "migpool"}, 1)
    assert report["problems"] == ["found 0 node(s) matching agentpool=migpool, expected at least 1"]


PARTED = {"version": "v1", "mig-configs": {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "balanced": [{"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 2}},
                 {"device-filter": ["0x233010DE", "0x233110DE"], "devices": "all", "mig-enabled": True,
                  "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}],
    "split": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1c.7g.80gb": 7}}],
}}


@pytest.mark.parametrize("config, name, model, problem", [
    (PARTED, "balanced", "H100-80GB", None),
    (PARTED, "balanced", None, None),  # an unknown GPU: only the name is checked
    (PARTED, "split", "H100-80GB", None),
    (PARTED, "all-disabled", "A30", None),
    (PARTED, "all-1g.10gb", "H100-80GB", "config 'all-1g.10gb' is not in the mig-parted config; its configs: all-disabled, "
                                         "balanced, split"),
    (PARTED, "balanced", "A100-80GB", "config 'balanced' of the mig-parted config has no entry for A100-80GB"),
    (PARTED, "split", "A100-40GB", "profile '1c.7g.80gb' does not exist on A100-40GB"),
    ({"mig-configs": {}}, "x", None, "the mig-parted config is not a mig-parted config"),
    (None, "all-balanced", "H200-141GB", None),
    (None, "all-1g.18gb", "H200-141GB", None),
    (None, "all-1g.10gb", "H200-141GB", "not one of the GPU Operator's default configs for H200-141GB"),
    (None, "all-balanced", None, "no mig-parted config and no GPU model"),
])
def test_parted_config_problems(config, name, model, problem):
    problems = mig_nodes.parted_config_problems(config, name, model)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems


def _labelled_node(name, config=None, state=None):
    labels = {k: v for k, v in (("nvidia.com/mig.config", config), ("nvidia.com/mig.config.state", state)) if v}
    return {"metadata": {"name": name, "labels": labels}}


def test_mig_config_status_and_events():
    events = [{"involvedObject": {"kind": "Node", "name": "b"}, "type": "Warning", "reason": "Rebooted",
               "message": "Node b has been\n  rebooted", "lastTimestamp": "2026-11-23T10:00:02Z", "count": 2},
              {"involvedObject": {"kind": "Node", "name": "b"}, "reason": "Starting", "message": "kubelet",
               "lastTimestamp": "2026-11-23T10:00:01Z"},
              {"involvedObject": {"kind": "Pod", "name": "b"}, "reason": "Pulled", "message": "not about the node"}]
    done = mig_nodes.mig_config_status([_labelled_node("a", "x", "success")], "x")
    assert done["converged"] and done["failed"] == [] and done["message"] == ""
    status = mig_nodes.mig_config_status([_labelled_node("b", "x", "rebooting"), _labelled_node("a", "x", "failed"), _labelled_node("c", "y", "success")],
                                         "x", events, 1)
    assert not status["converged"] and status["failed"] == ["a"]
    assert [n["name"] for n in status["nodes"]] == ["a", "b", "c"]
    lines = status["message"].split(" | ")
    assert lines[0].startswith("node a: nvidia.com/mig.config.state=failed for config x - the MIG manager could not apply it")
    assert lines[1].endswith("rebooting the node (WITH_REBOOT=true); recent events: Warning Rebooted: Node b has been rebooted (x2)")
    assert lines[2].startswith("node c: nvidia.com/mig.config=y (expected x)")
    assert not mig_nodes.mig_config_status([], "x")["converged"]
