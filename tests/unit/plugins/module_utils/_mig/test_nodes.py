# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG node expectations and verification (plugins/module_utils/_mig/nodes.py): resources, labels, mig-parted states."""

from __future__ import annotations

import re

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes


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


def test_mig_label_patches_only_where_the_config_label_differs():
    nodes = [_labelled_node("a", "x", "success"), _labelled_node("b", "y", "success"), _labelled_node("c"), _labelled_node("d", "x")]
    patches = mig_nodes.mig_label_patches(["a", "b", "c"], nodes, "x")
    assert patches == [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "nvidia.com/mig.config": "x", "nvidia.com/mig.config.state": "pending"}}} for name in ("b", "c")]
    # a re-run after the patches: nothing left to send
    assert mig_nodes.mig_label_patches(["a", "b", "c"], [_labelled_node(n, "x", "pending") for n in "abc"], "x") == []
    # a node not read (not among the nodes) gets its patch
    assert [p["metadata"]["name"] for p in mig_nodes.mig_label_patches(["e"], nodes, "x")] == ["e"]
    # render mode read nothing: every target, in the given order
    assert [p["metadata"]["name"] for p in mig_nodes.mig_label_patches(["d", "a"], [], "x", every=True)] == ["d", "a"]


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


_TS2 = {"strategy": "time-slicing", "replicas": 2}
_MPS2 = {"strategy": "mps", "replicas": 2}
_TOO_BIG = {"version": "v1", "mig-configs": {"x": [
    {"devices": "all", "mig-enabled": True, "mig-devices": {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 1}}]}}


@pytest.mark.parametrize("call, expected", [
    (lambda m: mig_nodes.expected_resources(m, 2, "3g.20gb", "mixed"), {"nvidia.com/mig-3g.20gb": 4}),
    (lambda m: mig_nodes.expected_node_resources(m, 2, "3g.20gb", "mixed", _TS2), {"nvidia.com/mig-3g.20gb": 8}),
    (lambda m: mig_nodes.expected_node_resources(m, 2, None, "none", _MPS2), {"nvidia.com/gpu": 4}),
    (lambda m: mig_nodes.expected_labels(m, 2, "3g.20gb", "single"), {
        "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": {"pattern": r"-MIG-3g\.20gb$"}}),
    (lambda m: mig_nodes.parted_config_problems(None, "all-balanced", m), []),
    (lambda m: mig_nodes.parted_config_problems(_TOO_BIG, "x", m), [
        "config 'x' of the mig-parted config: mig-devices {1g.5gb: 1, 3g.20gb: 1, 4g.20gb: 1} do not fit one A100-40GB: "
        "needs 8 compute slices, A100-40GB has 7; needs 9 memory slices, A100-40GB has 8"]),
], ids=["expected_resources", "time-slicing", "mps", "expected_labels", "default config", "config document"])
def test_node_expectations_look_the_model_up_once(catalog_lookups, call, expected):
    assert call("A100-SXM4-40GB") == expected
    assert catalog_lookups == ["A100-SXM4-40GB"]


def test_node_expectations_check_sharing_strategy_and_layout_in_that_order():
    with pytest.raises(ValueError, match="sharing.replicas"):
        mig_nodes.expected_node_resources("T4", 1, "9g.9gb", "auto", {"strategy": "mps"})
    with pytest.raises(ValueError, match="unknown GPU model 'T4'"):
        mig_nodes.expected_node_resources("T4", 1, None, "auto", _MPS2)  # MPS reads the layout first
    with pytest.raises(ValueError, match="MIG strategy 'auto'"):
        mig_nodes.expected_node_resources("T4", 1, None, "auto", _TS2)
    with pytest.raises(ValueError, match="MIG strategy 'auto'"):
        mig_nodes.expected_node_resources("A100-40GB", 1, None, "auto", _MPS2)
    with pytest.raises(ValueError, match="MPS sharing is not supported for MIG devices"):
        mig_nodes.expected_node_resources("A100-40GB", 1, "7g.40gb", "auto", _MPS2)
    with pytest.raises(ValueError, match="unknown GPU model 'T4'"):
        mig_nodes.expected_labels("T4", 1, None, "auto", {"strategy": "mps"})
    with pytest.raises(ValueError, match="sharing.replicas"):
        mig_nodes.expected_labels("A100-40GB", 1, None, "auto", {"strategy": "mps"})
    with pytest.raises(ValueError, match="MIG strategy 'auto'"):
        mig_nodes.expected_labels("A100-40GB", 1, "9g.9gb", "auto")
