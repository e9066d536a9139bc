# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator, device plugin and MIG checks: the healthy MIG cluster broken one way fails exactly that check."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite


def _k8s(data):
    return data["kubernetes"]


def _node(data, name):
    return [n for n in _k8s(data)["nodes"] if n["metadata"]["name"] == name][0]


def _t4(data):
    _node(data, "dgx-1")["metadata"]["labels"]["nvidia.com/gpu.product"] = "Tesla-T4"


def _no_device_plugin(data):
    _k8s(data)["pods"] = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] != "nvidia-device-plugin-daemonset-z4t7w"]


def _device_plugin_not_ready(data):
    pod = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == "nvidia-device-plugin-daemonset-q8m2c"][0]
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                     "containerStatuses": [{"name": "nvidia-device-plugin", "ready": False,
                                            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}


def _no_gpu_resource(data):
    node = _node(data, "dgx-1")
    node["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "0"
    node["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending"


def _policy_not_ready(data):
    _k8s(data)["cluster_policies"][0]["status"] = {"state": "notReady", "conditions": [
        {"type": "Ready", "status": "False", "reason": "OperandNotReady", "message": "nvidia-container-toolkit-daemonset is not ready"}]}


def _driver_crash(data):
    pod = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == "nvidia-driver-daemonset-dgx-1"][0]
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                     "containerStatuses": [{"name": "nvidia-driver-ctr", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}


def _driver_missing(data):
    _k8s(data)["pods"] = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] != "nvidia-driver-daemonset-dgx-0"]


def _ncp_not_ready(data):
    _k8s(data)["nic_cluster_policies"][0]["status"] = {"state": "notReady", "appliedStates": [
        {"name": "state-RDMA-device-plugin", "state": "notReady", "message": "rdma-shared-dp-ds has 0 of 2 ready"}]}


def _mig_failed(data):
    _node(data, "dgx-0")["metadata"]["labels"]["nvidia.com/mig.config.state"] = "failed"


def _wrong_geometry(data):
    node = _node(data, "dgx-1")
    node["status"]["allocatable"]["nvidia.com/mig-3g.20gb"] = "8"


def _wrong_strategy_request(data):
    pod = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == "trainer"][0]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}


def _pending_request(data):
    _k8s(data)["pods"].append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "waiting", "namespace": "ml"},
                               "spec": {"containers": [{"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/mig-2g.10gb": "1"}}}]},
                               "status": {"phase": "Pending"}})


BREAKS = [
    ("mig.capable_gpus", _t4, "its GPU Tesla-T4 is not a MIG-capable model"),
    ("gpu.device_plugin", _no_device_plugin, "node dgx-1: no device plugin pod"),
    ("gpu.device_plugin", _device_plugin_not_ready, "node dgx-0: device plugin pod not ready (nvidia-device-plugin CrashLoopBackOff)"),
    ("gpu_operator.cluster_policy", _policy_not_ready, "ClusterPolicy/cluster-policy is notReady"),
    ("gpu_operator.driver_pods", _driver_crash, "CrashLoopBackOff"),
    ("gpu_operator.driver_pods", _driver_missing, "node dgx-0 has no driver pod"),
    ("network_operator.nic_cluster_policy", _ncp_not_ready, "state-RDMA-device-plugin is notReady"),
    ("mig.config_state", _mig_failed, "node dgx-0: nvidia.com/mig.config.state=failed"),
    ("mig.geometry", _wrong_geometry, "nvidia.com/mig-3g.20gb=8 not produced by the config"),
    ("gpu.requests_advertised", _wrong_strategy_request, "requests nvidia.com/gpu, which node dgx-0 does not advertise"),
    ("gpu.requests_advertised", _pending_request, "requests nvidia.com/mig-2g.10gb, which no node advertises"),
]


@pytest.mark.parametrize("check_id, mutate, text", BREAKS, ids=["%s-%s" % (b[0], b[1].__name__) for b in BREAKS])
def test_broken_one_way_fails_that_check_only(only_failure, check_id, mutate, text):
    only_failure("gpu-operator-mig", mutate, check_id, text)


def test_every_operator_check_has_a_break():
    ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.operators"))
    assert ids - {"gpu.allocatable"} == set(b[0] for b in BREAKS)


def test_a_node_advertising_no_gpu_fails_allocatable(load_raw, build_snapshot):
    # a node without GPU resources also leaves its MIG config unapplied: both checks say so
    data = load_raw("gpu-operator-mig")
    _no_gpu_resource(data)
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gpu.allocatable"]["status"] == "failed"
    assert "node dgx-1 advertises no GPU resource" in by_id["gpu.allocatable"]["message"]
    assert by_id["mig.config_state"]["status"] == "failed"


def test_without_the_operators_their_checks_skip_and_say_why(load_raw, build_snapshot):
    data = load_raw("gpu-operator-mig")
    data["kubernetes"]["cluster_policies"] = []
    data["kubernetes"]["nic_cluster_policies"] = []
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gpu_operator.cluster_policy"]["status"] == "skipped"
    assert "GPU Operator is not installed" in by_id["gpu_operator.cluster_policy"]["message"]
    assert by_id["network_operator.nic_cluster_policy"]["status"] == "skipped"


def test_a_failed_read_of_the_cluster_policies_is_other(load_raw, build_snapshot):
    data = load_raw("gpu-operator-mig")
    data["kubernetes"]["cluster_policies"] = {"failed": True, "msg": "forbidden"}
    result = suite.validate(build_snapshot(data))
    by_id = dict((r["id"], r) for r in result["results"])
    assert by_id["gpu_operator.cluster_policy"]["status"] == "other"
    assert by_id["gpu_operator.driver_pods"]["status"] == "other"
    assert result["summary"]["ok"] is False


def test_the_single_strategy_geometry_is_judged_per_gpu(load_raw, build_snapshot):
    data = load_raw("gpu-operator-mig")
    for name in ("dgx-0", "dgx-1"):
        node = _node(data, name)
        node["metadata"]["labels"]["nvidia.com/mig.strategy"] = "single"
        node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
        node["status"]["allocatable"] = {"cpu": "255", "nvidia.com/gpu": "56"}
    trainer = [p for p in data["kubernetes"]["pods"] if p["metadata"]["name"] == "trainer"][0]
    trainer["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    result = suite.validate(build_snapshot(data))
    assert result["summary"]["failed"] == 0, [r for r in result["results"] if r["status"] == "failed"]
    _node(data, "dgx-1")["status"]["allocatable"]["nvidia.com/gpu"] = "50"
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["mig.geometry"]["status"] == "failed"
    assert "nvidia.com/gpu=50 is not a whole number of GPUs" in by_id["mig.geometry"]["message"]


def test_a_count_that_is_not_whole_gpus_fails_the_geometry(load_raw, build_snapshot):
    data = load_raw("gpu-operator-mig")
    _node(data, "dgx-1")["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "16"
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert "mig-1g.5gb=16 is not a whole number of GPUs of mixed (each gives 7)" in by_id["mig.geometry"]["message"]
