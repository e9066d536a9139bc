# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG placement solver (plugins/module_utils/_mig/placement.py): layouts, geometries, mig-parted counts."""

from __future__ import annotations

import itertools
import re

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as _mig
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import placement as mig_placement


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


# ---------------------------------------------------------------------------------- nearest_fit

@pytest.mark.parametrize("request_, nearest", [
    (["4g.20gb", "4g.20gb"], ["4g.20gb"]),                                      # one too many: drop one
    (["1g.5gb", "3g.20gb", "4g.20gb", "4g.20gb"], ["3g.20gb", "4g.20gb"]),      # drop two, keep the most compute
    (["3g.20gb@0", "3g.20gb@4", "4g.20gb@0"], ["3g.20gb@4", "4g.20gb@0"]),      # pins: 7 compute beats 6
    (["4g.20gb@0", "4g.20gb"], ["4g.20gb@0"]),                                  # equal score: the earlier entry
    (["7g.40gb", "1g.5gb", "1g.5gb"], ["1g.5gb", "1g.5gb"]),                    # two instances beat one larger
    (["1g.5gb@0", "1g.5gb@0"], ["1g.5gb@0"]),
    (["3g.20gb", "3g.20gb@4", "3g.20gb"], ["3g.20gb", "3g.20gb@4"]),             # equal score: entries 0 and 1, not 0 and 2
])
def test_nearest_fit_drops_fewest_then_keeps_most_compute(request_, nearest):
    assert mig_placement.nearest_fit("A100-SXM4-40GB", request_) == nearest
    assert mig_placement.place("A100-SXM4-40GB", nearest)["fits"]


def test_nearest_fit_of_a_long_list_tries_few_layouts(monkeypatch):
    """A thousand equal entries are one distinct entry: at most 7 fit, found with a handful of placement searches."""
    calls = []
    real_place = mig_placement.place
    real_place_on = mig_placement.place_on
    # nearest_fit resolves the model once and searches on the entry, so the searches go through place_on
    monkeypatch.setattr(mig_placement, "place_on", lambda entry, request: calls.append(len(request)) or real_place_on(entry, request))
    assert mig_placement.nearest_fit("A100-SXM4-40GB", ["1g.5gb"] * 1000) == ["1g.5gb"] * 7
    assert len(calls) <= 2 and max(calls) <= 8
    calls.clear()
    mixed = ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "1g.10gb"] * 200
    nearest = mig_placement.nearest_fit("A100-SXM4-40GB", mixed)
    assert real_place("A100-SXM4-40GB", nearest)["fits"] and len(nearest) == 7
    assert len(calls) < 500


def test_nearest_fit_none_when_nothing_fits():
    assert mig_placement.nearest_fit("A100-SXM4-40GB", []) is None
    with pytest.raises(ValueError):
        mig_placement.nearest_fit("A100-SXM4-40GB", ["9g.99gb"])


def test_count_vectors_lists_every_split_largest_first_counts_first():
    assert list(mig_placement._count_vectors([2, 1], 2)) == [(2, 0), (1, 1)]
    assert list(mig_placement._count_vectors([3, 2, 1], 3)) == [(3, 0, 0), (2, 1, 0), (2, 0, 1), (1, 2, 0), (1, 1, 1), (0, 2, 1)]
    assert list(mig_placement._count_vectors([1, 1], 3)) == []
    assert list(mig_placement._count_vectors([], 0)) == [()]


# --------------------------------------------------------------------------------------------
# One catalog lookup per request
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, expected", [
    (lambda: mig_placement.place("A100-SXM4-40GB", {"2c.3g.20gb": 1, "1c.3g.20gb": 2})["fits"], True),
    (lambda: mig_placement.pack_compute_instances("A100-SXM4-40GB", {"1c.3g.20gb": 2}), [("3g.20gb", [1, 1])]),
    (lambda: mig_placement.standard_layouts("A100-SXM4-40GB")["all-3g.20gb"], {"3g.20gb": 2}),
    (lambda: mig_placement.normalize_layout("A100-SXM4-40GB", ["all-balanced", "3g.20gb", ["1c.7g.40gb"]], 3),
     [{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, {"3g.20gb": 2}, {"7g.40gb": 1}]),
    (lambda: mig_placement.nearest_fit("A100-SXM4-40GB", ["4g.20gb", "3g.20gb", "3g.20gb", "1g.5gb"]), ["4g.20gb", "3g.20gb"]),
], ids=["place", "pack_compute_instances", "standard_layouts", "normalize_layout", "nearest_fit"])
def test_a_request_looks_its_model_up_once(catalog_lookups, call, expected):
    """However many layouts a request tries, the model is resolved where the request enters."""
    assert call() == expected
    assert catalog_lookups == ["A100-SXM4-40GB"]


def test_an_unknown_model_is_refused_naming_the_supported_models(catalog_lookups):
    calls = [
        lambda: mig_placement.place("T4", {"1g.5gb": 1}),
        lambda: mig_placement.pack_compute_instances("T4", {"1g.5gb": 1}),
        lambda: mig_placement.standard_layouts("T4"),
        lambda: mig_placement.normalize_layout("T4", "all-balanced", 1),
        lambda: mig_placement.nearest_fit("T4", ["1g.5gb"]),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"^unknown GPU model 'T4'; supported models: A100-40GB, A100-80GB, A30-24GB, .*H100-80GB"):
            call()
    assert catalog_lookups == ["T4"] * len(calls)


def _toy_gpu():
    """A made-up GPU with 4 slots and 4 compute slices, written here: not a catalog model, and not known to the catalog."""
    def shape(name, slices, size, starts, maximum, profile_id, media=False):
        return dict(name=name, compute_slices=slices, memory_slices=size, placements=list(starts), max_instances=maximum,
                    media_extensions=media, gpu_instance_profile_id=profile_id)

    profiles = [shape("1g.3gb", 1, 1, (0, 1, 2, 3), 4, 21), shape("1g.3gb+me", 1, 1, (0, 1, 2, 3), 1, 22, media=True),
                shape("2g.6gb", 2, 2, (0, 2), 2, 23), shape("4g.12gb", 4, 4, (0,), 1, 24)]
    return dict(name="TOY-12GB", memory_slices=4, compute_slices=4, placements_verified=False,
                profiles={p["name"]: p for p in profiles}, balanced={"1g.3gb": 2, "2g.6gb": 1})


def test_the_entry_functions_use_the_entry_given_and_never_look_it_up(catalog_lookups):
    toy = _toy_gpu()
    placed = mig_placement.place_on(toy, {"2g.6gb": 1, "1g.3gb": 2})
    assert placed["fits"] and placed["gpu_model"] == "TOY-12GB" and placed["placements_verified"] is False
    assert [(p["profile"], p["start"], p["size"], p["gpu_instance_profile_id"]) for p in placed["placements"]] == [
        ("2g.6gb", 0, 2, 23), ("1g.3gb", 2, 1, 21), ("1g.3gb", 3, 1, 21)]
    assert [p["profile"] for p in placed["creation_order"]] == ["2g.6gb", "1g.3gb", "1g.3gb"]
    assert (placed["compute_slices_used"], placed["memory_slices_used"]) == (4, 4)
    over = mig_placement.place_on(toy, ["4g.12gb", "1g.3gb"])
    assert over["reason"] == "needs 5 compute slices, TOY-12GB has 4; needs 5 memory slices, TOY-12GB has 4"
    nothing = mig_placement.place_on(toy, None)
    assert nothing["fits"] and nothing["placements"] == [] and nothing["memory_slices_used"] == 0
    assert mig_placement.standard_layouts_on(toy) == {
        "all-disabled": None, "all-enabled": {}, "all-4g.12gb": {"4g.12gb": 1}, "all-2g.6gb": {"2g.6gb": 2},
        "all-1g.3gb": {"1g.3gb": 4}, "all-1g.3gb.me": {"1g.3gb+me": 1}, "all-balanced": {"1g.3gb": 2, "2g.6gb": 1}}
    assert mig_placement.pack_compute_instances_on(toy, {"1c.2g.6gb": 3}) == [("2g.6gb", [1, 1]), ("2g.6gb", [1])]
    assert mig_placement.normalize_layout_on(toy, "all-balanced", 2) == [{"1g.3gb": 2, "2g.6gb": 1}] * 2
    assert mig_placement.nearest_fit_on(toy, ["2g.6gb"] * 3 + ["1g.3gb+me"]) == ["2g.6gb", "2g.6gb"]
    assert catalog_lookups == []
    with pytest.raises(ValueError, match="unknown GPU model"):
        mig_placement.place(toy, {})  # the public functions resolve what they are given, and the catalog has no TOY


def test_a_start_that_would_run_past_the_last_slot_is_never_chosen():
    toy = _toy_gpu()
    # a placement table that lists start 3 for a 2-slot instance on slots 0-3 (a driver table read as it is)
    toy["profiles"]["2g.6gb"]["placements"] = [3, 2, 0]
    assert [p["start"] for p in mig_placement.place_on(toy, ["2g.6gb"])["placements"]] == [2]
    pinned = mig_placement.place_on(toy, ["2g.6gb@3"])
    assert not pinned["fits"] and pinned["reason"].startswith("no non-overlapping placement on the 4 slots of TOY-12GB")


def test_a_pinned_instance_does_not_hold_back_an_identical_unpinned_one():
    """Identical unpinned instances take increasing starts; a pinned one of the same profile is not in that order."""
    result = mig_placement.place("A100-40GB", ["1g.5gb@6", "1g.5gb"])
    assert result["fits"], result["reason"]
    assert [(p["profile"], p["start"]) for p in result["placements"]] == [("1g.5gb", 0), ("1g.5gb", 6)]


def test_the_no_fit_reason_gives_each_profiles_slots_and_the_pins():
    blocked = mig_placement.place("A100-40GB", ["1g.5gb@1", "1g.5gb@5", "3g.20gb"])
    assert blocked["reason"] == (
        "no non-overlapping placement on the 8 slots of A100-40GB: 3g.20gb takes 4 slots starting at {0,4}; "
        "1g.5gb takes 1 slot starting at {0,1,2,3,4,5,6}; pinned: 1g.5gb@1, 1g.5gb@5")


def test_layout_counts_are_whole_numbers_from_zero():
    assert mig_placement.normalize_layout("A100-40GB", {"3g.20gb": 1, "1g.5gb": 0}, 1) == [{"3g.20gb": 1}]
    for bad in (-1, True, "2", 1.5):
        with pytest.raises(ValueError, match=r"count of 1g\.5gb must be a whole number >= 0, got %s" % re.escape(repr(bad))):
            mig_placement.normalize_layout("A100-40GB", {"1g.5gb": bad}, 1)


def test_a_layout_that_does_not_fit_is_named_with_its_gpu_and_counts():
    with pytest.raises(ValueError) as err:
        mig_placement.normalize_layout("A100-40GB", [{"7g.40gb": 1}, {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}], 2)
    assert str(err.value) == ("MIG layout of GPU 1 {1g.5gb: 1, 3g.20gb: 1, 4g.20gb: 1} does not fit A100-40GB: "
                              "needs 8 compute slices, A100-40GB has 7; needs 9 memory slices, A100-40GB has 8")


def test_nearest_fit_refuses_layouts_over_the_slice_totals_without_a_search(monkeypatch):
    calls = []
    real_place_on = mig_placement.place_on
    monkeypatch.setattr(mig_placement, "place_on", lambda entry, request: calls.append(list(request)) or real_place_on(entry, request))
    assert mig_placement.nearest_fit("A100-40GB", ["1g.10gb"] * 4 + ["1g.5gb"]) == ["1g.10gb"] * 4
    # all five need 9 memory slices of 8 though 5 compute slices of 7 would do: refused on the totals, never searched
    assert calls == [["1g.10gb"] * 4]
