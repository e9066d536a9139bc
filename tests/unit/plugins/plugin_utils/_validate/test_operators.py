# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator, device plugin and MIG checks: the healthy MIG cluster broken one way fails exactly that check."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import operators
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as snap
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


def _driver_init_crash(data):
    # the driver manager init container crashes: the pod never starts its driver container
    pod = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == "nvidia-driver-daemonset-dgx-0"][0]
    pod["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}],
                     "initContainerStatuses": [{"name": "k8s-driver-manager", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
                     "containerStatuses": [{"name": "nvidia-driver-ctr", "ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}]}


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
    ("gpu_operator.driver_pods", _driver_init_crash, "on node dgx-0 (pod nvidia-driver-daemonset-dgx-0: k8s-driver-manager CrashLoopBackOff"),
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


def _by_name(items, name):
    return [i for i in items if i["metadata"]["name"] == name][0]


def _driver_pod_without(container):
    def mutate(data):
        for pod in _k8s(data)["pods"]:
            if pod["metadata"]["name"] == "nvidia-driver-daemonset-7xq2k":
                pod["spec"]["containers"] = [c for c in pod["spec"]["containers"] if c["name"] != container]
    mutate.__name__ = "driver_pod_without_" + container
    return mutate


def _gdrcopy_on(data):
    _by_name(_k8s(data)["cluster_policies"], "cluster-policy")["spec"]["gdrcopy"] = {"enabled": True}


def _peermem_with_host_mofed_gone(data):
    del _by_name(_k8s(data)["nic_cluster_policies"], "nic-cluster-policy")["spec"]["ofedDriver"]


def _dmabuf_on(kernel):
    def mutate(data):
        _by_name(_k8s(data)["cluster_policies"], "cluster-policy")["spec"]["driver"]["rdma"]["enabled"] = False
        _driver_pod_without("nvidia-peermem-ctr")(data)
        _by_name(_k8s(data)["pods"], "nvidia-driver-daemonset-m4t9v")["spec"]["containers"].pop()
        _by_name(_k8s(data)["nodes"], "h100-1")["status"]["nodeInfo"]["kernelVersion"] = kernel
    mutate.__name__ = "dmabuf_on_" + kernel
    return mutate


def _sriov_resource_unadvertised(data):
    spec = _by_name(_k8s(data)["nic_cluster_policies"], "nic-cluster-policy")["spec"]
    spec["sriovDevicePlugin"] = {"config": json.dumps({"resourceList": [{"resourcePrefix": "nvidia.com", "resourceName": "hostdev"}]})}
    _by_name(_k8s(data)["nodes"], "h100-0")["status"]["allocatable"]["nvidia.com/hostdev"] = "4"


def _rdma_resource_zero(data):
    _by_name(_k8s(data)["nodes"], "h100-0")["status"]["allocatable"]["rdma/rdma_shared_device_a"] = "0"


RDMA_BREAKS = [
    ("gpu_operator.driver_sidecars", _driver_pod_without("nvidia-peermem-ctr"),
     "node h100-0: driver pod nvidia-driver-daemonset-7xq2k runs without nvidia-peermem-ctr, which spec.driver.rdma.enabled: true asks for"),
    ("gpu_operator.driver_sidecars", _gdrcopy_on, "runs without nvidia-gdrcopy-ctr, which spec.gdrcopy.enabled: true asks for"),
    ("gpu_operator.gpudirect_rdma_mode", _peermem_with_host_mofed_gone, "no NicClusterPolicy deploys it"),
    ("gpu_operator.gpudirect_rdma_mode", _dmabuf_on("5.11.22-generic"), "node h100-1 runs kernel 5.11.22-generic; DMA-BUF needs Linux >= 5.12"),
    ("network_operator.rdma_resources", _sriov_resource_unadvertised, "node h100-1 does not advertise nvidia.com/hostdev"),
    ("network_operator.rdma_resources", _rdma_resource_zero, "node h100-0 does not advertise rdma/rdma_shared_device_a"),
]


@pytest.mark.parametrize("check_id, mutate, text", RDMA_BREAKS, ids=["%s-%s" % (b[0], b[1].__name__) for b in RDMA_BREAKS])
def test_rdma_cluster_broken_one_way_fails_that_check_only(load_raw, build_snapshot, check_id, mutate, text):
    # the DMA-BUF break also turns the sidecar check to skipped: compare with the same cluster in DMA-BUF mode
    healthy = dict((r["id"], r["status"]) for r in suite.validate(build_snapshot(load_raw("gpu-operator-rdma")))["results"])
    data = load_raw("gpu-operator-rdma")
    mutate(data)
    result = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert result[check_id]["status"] == "failed", result[check_id]
    assert text in result[check_id]["message"], result[check_id]["message"]
    assert result[check_id]["cause"] == suite.CHECKS_BY_ID[check_id].cause and result[check_id]["fix"]
    changed = sorted(k for k, r in result.items() if r["status"] != healthy[k])
    assert changed in ([check_id], sorted([check_id, "gpu_operator.driver_sidecars"])), changed


def test_a_dmabuf_cluster_on_a_new_kernel_passes(load_raw, build_snapshot):
    data = load_raw("gpu-operator-rdma")
    _dmabuf_on("5.12.0-1-generic")(data)
    result = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert result["gpu_operator.gpudirect_rdma_mode"]["status"] == "passed"
    assert "node h100-1: kernel 5.12.0-1-generic" in result["gpu_operator.gpudirect_rdma_mode"]["evidence"]
    assert result["gpu_operator.driver_sidecars"]["status"] == "skipped"


@pytest.mark.parametrize("driver, problem", [
    ({"version": "570.86.15"}, None),
    ({"version": "570.86.14"}, "driver 570.86.14 is older than R570 (570.86.15)"),
    ({"version": "550.127.08-ubuntu22.04", "kernelModuleType": "auto"}, "driver 550.127.08-ubuntu22.04 is older than R570"),
    ({"version": "550.127.08", "useOpenKernelModules": True}, None),
    ({"version": "550.127.08", "kernelModuleType": "open"}, None),
    ({"kernelModuleType": "proprietary"}, "spec.driver.kernelModuleType is proprietary"),
    ({}, None),
])
def test_the_kernel_modules_of_the_policy_s_driver(driver, problem):
    found = operators._kernel_module_problem(driver)
    assert (found is None) if problem is None else (problem in found), found


def test_the_node_affinity_of_a_nic_cluster_policy_picks_the_nodes_judged(load_raw, build_snapshot):
    data = load_raw("gpu-operator-rdma")
    _rdma_resource_zero(data)
    spec = _by_name(_k8s(data)["nic_cluster_policies"], "nic-cluster-policy")["spec"]
    for operator, values, status in (("In", ["h100-1"], "passed"), ("NotIn", ["h100-0"], "passed"), ("NotIn", ["cpu-0"], "failed"),
                                     ("Exists", None, "failed"), ("DoesNotExist", None, "skipped"), ("Gt", ["1"], "other")):
        expression = {"key": "kubernetes.io/hostname", "operator": operator}
        if values:
            expression["values"] = values
        spec["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}
        result = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])["network_operator.rdma_resources"]
        assert result["status"] == status, (operator, values, result)


def test_without_mellanox_labels_the_gpu_nodes_are_judged(load_raw, build_snapshot):
    data = load_raw("gpu-operator-rdma")
    for node in _k8s(data)["nodes"]:
        node["metadata"]["labels"].pop("feature.node.kubernetes.io/pci-15b3.present", None)
    _by_name(_k8s(data)["nodes"], "cpu-0")["metadata"]["labels"]["feature.node.kubernetes.io/pci-15b3.present"] = "false"
    result = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])["network_operator.rdma_resources"]
    assert result["status"] == "passed" and "nodes judged (GPU nodes): h100-0, h100-1" in result["evidence"]
    assert "node h100-0: rdma/rdma_shared_device_a=63" in result["evidence"]


def test_every_operator_check_has_a_break():
    ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.operators"))
    assert ids - {"gpu.allocatable"} == set(b[0] for b in BREAKS + RDMA_BREAKS)


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


# ----------------------------------------------------------------------------- custom MIG configs (mig-parted ConfigMap)
# Written out by hand (not from the MIG catalog): on an A100-SXM4-40GB a 3g.20gb, a 2g.10gb and a 1g.5gb instance fit one
# GPU together (NVIDIA MIG user guide, A100 placements); the fixture's nodes have 8 GPUs each.
CUSTOM = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  three-sizes:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.20gb": 1
        "2g.10gb": 1
        "1g.5gb": 1
  half-and-half:
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices:
        "3g.20gb": 2
    - devices: [4, 5, 6, 7]
      mig-enabled: false
  unknown-profile:
    - devices: all
      mig-enabled: true
      mig-devices:
        "5g.25gb": 1
  too-big:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.20gb": 3
"""


def _config_map(text=CUSTOM):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom-mig-config", "namespace": "gpu-operator"},
            "data": {"config.yaml": text}}


def _custom(load_raw, config, allocatable, labels=None):
    data = load_raw("gpu-operator-mig")
    for name in ("dgx-0", "dgx-1"):
        node = _node(data, name)
        node["metadata"]["labels"].update(dict({"nvidia.com/mig.config": config}, **(labels or {})))
        node["status"]["allocatable"] = dict({"cpu": "255"}, **allocatable)
    # the trainer asks for a 1g.5gb device; keep it on what the custom configs advertise
    return data


def _geometry(data, parted=None):
    k8s = data["kubernetes"]
    snapshot = snap.build_kubernetes(data["name"], k8s["nodes"], k8s["daemonsets"], k8s["pods"], k8s["cluster_policies"],
                                     k8s["nic_cluster_policies"], mig_parted_config=parted)
    return dict((r["id"], r) for r in suite.validate(snapshot)["results"])["mig.geometry"]


THREE_SIZES = {"nvidia.com/mig-3g.20gb": "8", "nvidia.com/mig-2g.10gb": "8", "nvidia.com/mig-1g.5gb": "8"}


def test_a_healthy_custom_geometry_passes(load_raw):
    result = _geometry(_custom(load_raw, "three-sizes", THREE_SIZES), _config_map())
    assert result["status"] == "passed", result
    assert result["evidence"][0] == ("node dgx-0: A100-40GB custom config three-sizes of ConfigMap gpu-operator/custom-mig-config "
                                     "strategy mixed")
    # the mig-parted document itself does as well as its ConfigMap
    assert _geometry(_custom(load_raw, "three-sizes", THREE_SIZES), yaml.safe_load(CUSTOM))["status"] == "passed"


def test_a_node_that_advertises_another_geometry_than_its_custom_config_fails_with_cause_and_fix(load_raw):
    wrong = dict(THREE_SIZES, **{"nvidia.com/mig-2g.10gb": "0"})
    result = _geometry(_custom(load_raw, "three-sizes", wrong), _config_map())
    assert result["status"] == "failed"
    assert result["cause"] == suite.CHECKS_BY_ID["mig.geometry"].cause
    assert "mig-parted ConfigMap" in result["fix"] and "mig_manager_config" in result["fix"]
    assert "node dgx-0: " in result["message"] and "nvidia.com/mig-2g.10gb" in result["message"]
    # one GPU short of 3g.20gb devices: not whole GPUs of the config
    short = dict(THREE_SIZES, **{"nvidia.com/mig-3g.20gb": "7"})
    result = _geometry(_custom(load_raw, "three-sizes", short), _config_map())
    assert result["status"] == "failed" and '"nvidia.com/mig-3g.20gb": 7} is not n GPUs of' in result["message"]


def test_per_device_entries_are_judged_by_the_gpu_count(load_raw):
    healthy = {"nvidia.com/mig-3g.20gb": "8", "nvidia.com/gpu": "4"}
    data = _custom(load_raw, "half-and-half", healthy, {"nvidia.com/gpu.count": "8"})
    assert _geometry(data, _config_map())["status"] == "passed"
    data = _custom(load_raw, "half-and-half", dict(healthy, **{"nvidia.com/gpu": "3"}), {"nvidia.com/gpu.count": "8"})
    result = _geometry(data, _config_map())
    assert result["status"] == "failed"
    assert 'the config gives {"nvidia.com/gpu": 4, "nvidia.com/mig-3g.20gb": 8} under strategy mixed' in result["message"]
    # without the GPU count the per-device config cannot be laid out: other, never a pass
    result = _geometry(_custom(load_raw, "half-and-half", healthy), _config_map())
    assert result["status"] == "other" and "nvidia.com/gpu.count" in result["message"]


def test_a_per_device_config_that_leaves_a_gpu_unnamed_is_other(load_raw):
    text = CUSTOM + """  first-four:
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices:
        "3g.20gb": 2
    - devices: [4, 5, 6, 7, 8, "x"]
      mig-enabled: false
"""
    healthy = {"nvidia.com/mig-3g.20gb": "8", "nvidia.com/gpu": "4"}
    # devices 8 and "x" name no GPU of an 8-GPU node and are ignored; every GPU 0-7 is named: judged
    assert _geometry(_custom(load_raw, "first-four", healthy, {"nvidia.com/gpu.count": "8"}), _config_map(text))["status"] == "passed"
    # a 9-GPU node: GPU 8 is named ("devices: [.., 8]"), so it must be counted; 10 GPUs: GPU 9 is named by no entry
    result = _geometry(_custom(load_raw, "first-four", healthy, {"nvidia.com/gpu.count": "9"}), _config_map(text))
    assert result["status"] == "failed" and '"nvidia.com/gpu": 5' in result["message"]
    result = _geometry(_custom(load_raw, "first-four", healthy, {"nvidia.com/gpu.count": "10"}), _config_map(text))
    assert result["status"] == "other" and "every GPU must be named" in result["message"]
    result = _geometry(_custom(load_raw, "first-four", healthy, {"nvidia.com/gpu.count": "0"}), _config_map(text))
    assert result["status"] == "other"


def test_driver_pod_problems_are_listed_by_node_name(load_raw):
    data = load_raw("gpu-operator-mig")
    _k8s(data)["pods"] = [p for p in _k8s(data)["pods"] if "driver" not in p["metadata"]["name"]]
    _k8s(data)["nodes"].reverse()
    assert _results(data)["gpu_operator.driver_pods"]["message"] == "node dgx-0 has no driver pod; node dgx-1 has no driver pod"


def test_a_custom_config_naming_an_unknown_profile_or_not_fitting_fails_with_a_clear_cause(load_raw):
    result = _geometry(_custom(load_raw, "unknown-profile", {"nvidia.com/mig-1g.5gb": "56"}), _config_map())
    assert result["status"] == "failed"
    assert "config 'unknown-profile' of ConfigMap gpu-operator/custom-mig-config" in result["message"]
    assert "5g.25gb" in result["message"]
    result = _geometry(_custom(load_raw, "too-big", {"nvidia.com/mig-3g.20gb": "24"}), _config_map())
    assert result["status"] == "failed" and "do not fit one A100-40GB" in result["message"]
    result = _geometry(_custom(load_raw, "no-such-config", {"nvidia.com/mig-1g.5gb": "56"}), _config_map())
    assert result["status"] == "failed"
    assert "config 'no-such-config' is not in ConfigMap gpu-operator/custom-mig-config; its configs: all-disabled" in result["message"]


def test_a_custom_config_under_the_single_strategy_needs_one_profile(load_raw):
    data = _custom(load_raw, "three-sizes", {"nvidia.com/gpu": "24"}, {"nvidia.com/mig.strategy": "single"})
    result = _geometry(data, _config_map())
    assert result["status"] == "failed"
    assert "config three-sizes cannot be advertised under strategy single" in result["message"]


def test_a_custom_config_without_its_mig_parted_config_is_other(load_raw):
    result = _geometry(_custom(load_raw, "three-sizes", THREE_SIZES))
    assert result["status"] == "other"
    assert "cannot read mig_parted" in result["message"] and "validate_mig_parted_config" in result["message"]
    # a ConfigMap without config.yaml, or not YAML: the snapshot keeps why, the check says it
    broken = dict(_config_map(), data={"other.yaml": "x"})
    result = _geometry(_custom(load_raw, "three-sizes", THREE_SIZES), broken)
    assert result["status"] == "other" and "ConfigMap gpu-operator/custom-mig-config has no config.yaml key" in result["message"]
    result = _geometry(_custom(load_raw, "three-sizes", THREE_SIZES), _config_map("version: v1\nmig-configs: [unclosed"))
    assert result["status"] == "other" and "config.yaml is not YAML" in result["message"]
    result = _geometry(_custom(load_raw, "three-sizes", THREE_SIZES), {"version": "v2"})
    assert result["status"] == "other" and "is not a mig-parted config" in result["message"]


def test_the_default_configs_need_no_mig_parted_config(load_raw):
    data = load_raw("gpu-operator-mig")
    assert _geometry(data)["status"] == "passed"


# ----------------------------------------------------------------------------- cases the mutation check showed missing

def _results(data):
    return dict((r["id"], r) for r in suite.validate(build_snapshot_of(data))["results"])


def build_snapshot_of(data):
    k8s = data["kubernetes"]
    return snap.build_kubernetes(data["name"], k8s["nodes"], k8s["daemonsets"], k8s["pods"], k8s["cluster_policies"],
                                 k8s["nic_cluster_policies"])


def _drop_strategy_labels(data):
    for name in ("dgx-0", "dgx-1"):
        del _node(data, name)["metadata"]["labels"]["nvidia.com/mig.strategy"]


def test_without_a_strategy_label_the_cluster_policy_strategy_applies_then_single(load_raw):
    data = load_raw("gpu-operator-mig")
    _drop_strategy_labels(data)
    result = _results(data)["mig.geometry"]
    assert result["status"] == "passed" and "strategy mixed" in result["evidence"][0]     # the ClusterPolicy's spec.mig
    _k8s(data)["cluster_policies"][0]["spec"]["mig"] = {"strategy": "single"}
    result = _results(data)["mig.geometry"]
    assert result["status"] == "failed" and "strategy single" in result["evidence"][0]
    _k8s(data)["cluster_policies"][0]["spec"].pop("mig")
    assert "strategy single" in _results(data)["mig.geometry"]["evidence"][0]             # no strategy anywhere: single
    _k8s(data)["cluster_policies"] = []
    assert "strategy single" in _results(data)["mig.geometry"]["evidence"][0]


def test_the_evidence_lists_nodes_by_name_with_their_device_plugin_pods(load_raw):
    data = load_raw("gpu-operator-mig")
    _k8s(data)["nodes"].reverse()
    results = _results(data)
    assert results["gpu.device_plugin"]["evidence"] == ["node dgx-0: nvidia-device-plugin-daemonset-q8m2c",
                                                        "node dgx-1: nvidia-device-plugin-daemonset-z4t7w"]
    assert results["gpu.allocatable"]["evidence"] == ["node dgx-0: nvidia.com/mig-1g.5gb=56", "node dgx-1: nvidia.com/mig-1g.5gb=56"]
    assert [e.split(":")[0] for e in results["mig.geometry"]["evidence"]] == ["node dgx-0", "node dgx-1"]
    assert [e.split(":")[0] for e in results["mig.capable_gpus"]["evidence"]] == ["node dgx-0", "node dgx-1"]
    assert len(results["gpu_operator.cluster_policy"]["evidence"]) == 1
    _k8s(data)["pods"] = [p for p in _k8s(data)["pods"] if "device-plugin" not in p["metadata"]["name"]]
    _node(data, "dgx-1")["status"]["allocatable"] = {"cpu": "255", "nvidia.com/mig-1g.5gb": "0"}
    results = _results(data)
    assert results["gpu.device_plugin"]["evidence"] == ["node dgx-0: none", "node dgx-1: none"]
    assert results["gpu.allocatable"]["evidence"][1] == "node dgx-1: none"
    # without a ready device plugin pod that is the cause, gpu.device_plugin's: one fault, one failure
    assert results["gpu.allocatable"]["status"] == "passed"
    assert results["gpu.allocatable"]["evidence"][2] == "node dgx-1: not judged, it has no ready device plugin pod (gpu.device_plugin)"
    _node(data, "dgx-0")["status"]["allocatable"] = {"cpu": "255"}
    assert _results(data)["gpu.allocatable"]["status"] == "skipped"


@pytest.mark.parametrize("name, image, found", [
    ("nvidia-device-plugin-daemonset-a", "registry.example/other:1", True),    # by its name
    ("gke-device-plugin-a", "gke.gcr.io/nvidia-gpu-device-plugin:v1", True),   # by its image
    ("gke-device-plugin-a", "busybox:1", False),
    ("nvidia-dcgm-exporter-a", "nvcr.io/nvidia/k8s/dcgm-exporter:3", False),
])
def test_device_plugin_pods_are_found_by_name_or_image(load_raw, name, image, found):
    data = load_raw("gpu-operator-mig")
    pod = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == "nvidia-device-plugin-daemonset-z4t7w"][0]
    pod["metadata"]["name"] = name
    pod["spec"]["containers"][0]["image"] = image
    assert _results(data)["gpu.device_plugin"]["status"] == ("passed" if found else "failed")


def test_the_driver_pods_are_not_required_where_the_driver_is_not_deployed(load_raw):
    data = load_raw("gpu-operator-mig")
    _k8s(data)["pods"] = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] != "nvidia-driver-daemonset-dgx-1"]
    assert _results(data)["gpu_operator.driver_pods"]["message"] == "node dgx-1 has no driver pod"
    for value in ("false", "pre-installed"):
        _node(data, "dgx-1")["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] = value
        result = _results(data)["gpu_operator.driver_pods"]
        assert result["status"] == "passed" and result["evidence"] == ["1 driver node(s), 1 driver pod(s)"]
    _k8s(data)["cluster_policies"][0]["spec"]["driver"]["enabled"] = False
    result = _results(data)["gpu_operator.driver_pods"]
    assert result["status"] == "skipped" and "spec.driver.enabled: false" in result["message"]


def test_geometry_boundaries_one_gpu_balanced_and_nothing_advertised(load_raw):
    data = load_raw("gpu-operator-mig")
    _node(data, "dgx-0")["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "7"       # a one-GPU node
    assert _results(data)["mig.geometry"]["status"] == "passed"
    # all-balanced on an A100-40GB, by hand: 2 x 1g.5gb, 1 x 2g.10gb, 1 x 3g.20gb per GPU; 8 GPUs
    node = _node(data, "dgx-1")
    node["metadata"]["labels"]["nvidia.com/mig.config"] = "all-balanced"
    node["status"]["allocatable"] = {"nvidia.com/mig-1g.5gb": "16", "nvidia.com/mig-2g.10gb": "8", "nvidia.com/mig-3g.20gb": "8"}
    assert _results(data)["mig.geometry"]["status"] == "passed"
    node["status"]["allocatable"]["nvidia.com/mig-3g.20gb"] = "4"      # whole GPUs per resource, but not the same number
    assert "is not n GPUs of" in _results(data)["mig.geometry"]["message"]
    node["status"]["allocatable"] = {"nvidia.com/mig-2g.10gb": "8"}      # a profile of the config missing altogether
    message = _results(data)["mig.geometry"]["message"]
    assert message.startswith("node dgx-1: allocatable {\"nvidia.com/mig-2g.10gb\": 8} is not n GPUs of"), message
    # nothing advertised at all is no geometry: gpu.allocatable names the node, mig.geometry does not compare it
    node["status"]["allocatable"] = {"cpu": "8"}
    results = _results(data)
    assert results["mig.geometry"]["status"] == "passed" and results["gpu.allocatable"]["status"] == "failed"
    assert "node dgx-1: not compared, it advertises no GPU resource" in results["mig.geometry"]["evidence"][1]


def test_requests_of_finished_pods_are_not_judged_and_pending_pods_need_a_node_advertising_them(load_raw):
    data = load_raw("gpu-operator-mig")
    trainer = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == "trainer"][0]
    trainer["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    assert _results(data)["gpu.requests_advertised"]["status"] == "failed"
    trainer["status"]["phase"] = "Succeeded"
    assert _results(data)["gpu.requests_advertised"]["status"] == "skipped"
    # Pending: any node may do, but a resource advertised as 0 is not advertised
    trainer["status"]["phase"] = "Pending"
    del trainer["spec"]["nodeName"]
    _node(data, "cpu-0")["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    result = _results(data)["gpu.requests_advertised"]
    assert result["status"] == "failed" and result["message"] == "pod ml/trainer requests nvidia.com/gpu, which no node advertises"
    _node(data, "cpu-0")["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    assert _results(data)["gpu.requests_advertised"]["status"] == "passed"


def test_a_not_ready_policy_shows_the_first_line_of_its_summary_as_evidence_and_all_of_it_as_the_problem(load_raw):
    data = load_raw("gpu-operator-mig")
    _policy_not_ready(data)
    _ncp_not_ready(data)
    results = _results(data)
    for check in ("gpu_operator.cluster_policy", "network_operator.nic_cluster_policy"):
        result = results[check]
        assert len(result["evidence"]) == 1 and result["message"].startswith(result["evidence"][0]), result
        assert result["message"] != result["evidence"][0], "the problem lists more than the first line"


def _rdma_results(build_snapshot, data):
    return dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])


def test_peermem_with_host_mofed_needs_no_ofed_driver_and_without_it_names_none(load_raw, build_snapshot):
    data = load_raw("gpu-operator-rdma")
    _peermem_with_host_mofed_gone(data)
    failed = _rdma_results(build_snapshot, data)["gpu_operator.gpudirect_rdma_mode"]
    assert failed["evidence"] == ["spec.driver.rdma.enabled true (legacy nvidia-peermem), useHostMofed False",
                                  "NicClusterPolicy with ofedDriver: none"]
    _by_name(_k8s(data)["cluster_policies"], "cluster-policy")["spec"]["driver"]["rdma"]["useHostMofed"] = True
    passed = _rdma_results(build_snapshot, data)["gpu_operator.gpudirect_rdma_mode"]
    assert passed["status"] == "passed"
    assert passed["evidence"] == ["spec.driver.rdma.enabled true (legacy nvidia-peermem), useHostMofed True",
                                  "the hosts' MLNX_OFED/DOCA-OFED loads the RDMA stack"]


@pytest.mark.parametrize("config", [
    {"configList": [{"rdmaHcaMax": 63}]},
    {"configList": [{"resourceName": "a"}, "b"]},
    {"configList": {"resourceName": "a"}},
    {"periodicUpdateInterval": 300},
    ["configList"],
])
def test_an_rdma_config_without_named_resources_fails_saying_so(load_raw, build_snapshot, config):
    data = load_raw("gpu-operator-rdma")
    _by_name(_k8s(data)["nic_cluster_policies"], "nic-cluster-policy")["spec"]["rdmaSharedDevicePlugin"]["config"] = json.dumps(config)
    failed = _rdma_results(build_snapshot, data)["network_operator.rdma_resources"]
    assert failed["status"] == "failed"
    assert failed["message"] == "spec.rdmaSharedDevicePlugin.config has no configList of entries with a resourceName"


def test_an_sriov_resource_without_prefix_is_matched_by_its_whole_name(load_raw, build_snapshot):
    data = load_raw("gpu-operator-rdma")
    spec = _by_name(_k8s(data)["nic_cluster_policies"], "nic-cluster-policy")["spec"]
    spec["sriovDevicePlugin"] = {"config": json.dumps({"resourceList": [{"resourceName": "hostdev"}]})}
    _by_name(_k8s(data)["nodes"], "h100-0")["status"]["allocatable"].update({"nvidia.com/hostdev": "8", "example.com/myhostdev": "2"})
    _by_name(_k8s(data)["nodes"], "h100-1")["status"]["allocatable"]["example.com/myhostdev"] = "2"
    failed = _rdma_results(build_snapshot, data)["network_operator.rdma_resources"]
    assert failed["message"] == "node h100-1 does not advertise */hostdev"
    assert "node h100-0: nvidia.com/hostdev=8, rdma/rdma_shared_device_a=63" in failed["evidence"]
    assert "node h100-1: rdma/rdma_shared_device_a=63" in failed["evidence"]


def test_does_not_exist_in_a_node_affinity_keeps_the_nodes_without_the_label(load_raw, build_snapshot):
    data = load_raw("gpu-operator-rdma")
    _rdma_resource_zero(data)
    spec = _by_name(_k8s(data)["nic_cluster_policies"], "nic-cluster-policy")["spec"]
    spec["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]}]}}
    failed = _rdma_results(build_snapshot, data)["network_operator.rdma_resources"]
    assert failed["message"] == "node h100-0 does not advertise rdma/rdma_shared_device_a"


# ----------------------------------------------------------------------------- wrong verdicts a one-line slip would give
# Variants of the fixtures above: a value present but wrong (not absent), entries that override each other, pods that
# have finished. Each case fails on a realistic slip in operators.py that the cases above let through.

LAYERED = CUSTOM + """  last-wins:
    - devices: all
      mig-enabled: false
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.20gb": 2
  two-gpus-split:
    - devices: all
      mig-enabled: false
    - devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "3g.20gb": 2
  per-model:
    - device-filter: ["0x20B010DE", "0x20B110DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.20gb": 2
    - device-filter: "0x233010DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
"""


def test_the_last_mig_parted_entry_for_a_gpu_wins(load_raw):
    # mig-parted applies the entries in order: MIG off on every GPU, then 2 x 3g.20gb on every GPU
    result = _geometry(_custom(load_raw, "last-wins", {"nvidia.com/mig-3g.20gb": "16"}), _config_map(LAYERED))
    assert result["status"] == "passed", result
    result = _geometry(_custom(load_raw, "last-wins", {"nvidia.com/gpu": "8"}), _config_map(LAYERED))
    assert result["status"] == "failed" and "nvidia.com/gpu=8 not produced by the config" in result["message"], result
    # per device: MIG off everywhere, then GPUs 0 and 1 partitioned: 6 whole GPUs and 4 x 3g.20gb
    split = {"nvidia.com/gpu": "6", "nvidia.com/mig-3g.20gb": "4"}
    data = _custom(load_raw, "two-gpus-split", split, {"nvidia.com/gpu.count": "8"})
    assert _geometry(data, _config_map(LAYERED))["status"] == "passed"
    data = _custom(load_raw, "two-gpus-split", {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu.count": "8"})
    result = _geometry(data, _config_map(LAYERED))
    assert result["status"] == "failed"
    assert 'the config gives {"nvidia.com/gpu": 6, "nvidia.com/mig-3g.20gb": 4}' in result["message"], result


def test_an_entry_whose_device_filter_names_another_gpu_model_is_not_applied(load_raw):
    # the last entry is for H100 80GB (device ID 0x2330): the A100-40GB nodes take the first one
    result = _geometry(_custom(load_raw, "per-model", {"nvidia.com/mig-3g.20gb": "16"}), _config_map(LAYERED))
    assert result["status"] == "passed", result


def test_a_resource_beyond_a_per_device_config_fails_the_geometry(load_raw):
    healthy = {"nvidia.com/mig-3g.20gb": "8", "nvidia.com/gpu": "4"}
    extra = dict(healthy, **{"nvidia.com/mig-1g.5gb": "7"})
    result = _geometry(_custom(load_raw, "half-and-half", extra, {"nvidia.com/gpu.count": "8"}), _config_map())
    assert result["status"] == "failed" and '"nvidia.com/mig-1g.5gb": 7' in result["message"], result


def test_a_request_for_a_resource_its_node_advertises_as_zero_fails(load_raw):
    # the trainer on dgx-0 asks for mig-1g.5gb; dgx-0 lists it at 0 (other profiles applied): present, but not advertised
    data = load_raw("gpu-operator-mig")
    _node(data, "dgx-0")["status"]["allocatable"].update({"nvidia.com/mig-1g.5gb": "0", "nvidia.com/mig-3g.20gb": "16"})
    result = _results(data)["gpu.requests_advertised"]
    assert result["status"] == "failed", result
    assert result["message"] == "pod ml/trainer requests nvidia.com/mig-1g.5gb, which node dgx-0 does not advertise"


def test_a_cluster_policy_without_driver_enabled_installs_the_driver(load_raw):
    # spec.driver.enabled defaults to true in the GPU Operator: an absent value is not a disabled driver
    data = load_raw("gpu-operator-mig")
    del _k8s(data)["cluster_policies"][0]["spec"]["driver"]["enabled"]
    _driver_missing(data)
    result = _results(data)["gpu_operator.driver_pods"]
    assert result["status"] == "failed" and result["message"] == "node dgx-0 has no driver pod", result


def _finished_copy(data, name, phase):
    """A finished copy of pod ``name`` on its node (the DaemonSet's previous pod, evicted or shut down with the node)."""
    pod = [p for p in _k8s(data)["pods"] if p["metadata"]["name"] == name][0]
    old = yaml.safe_load(yaml.safe_dump(pod))
    old["metadata"]["name"] = name + "-old"
    old["status"] = {"phase": phase, "reason": "Terminated", "conditions": [{"type": "Ready", "status": "False"}],
                     "containerStatuses": [{"name": pod["spec"]["containers"][0]["name"], "ready": False,
                                            "state": {"terminated": {"exitCode": 0 if phase == "Succeeded" else 137,
                                                                     "reason": "Completed" if phase == "Succeeded" else "Error"}}}]}
    _k8s(data)["pods"].append(old)
    return old


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_device_plugin_or_driver_pod_beside_a_ready_one_is_not_judged(load_raw, phase):
    data = load_raw("gpu-operator-mig")
    _finished_copy(data, "nvidia-device-plugin-daemonset-q8m2c", phase)
    _finished_copy(data, "nvidia-driver-daemonset-dgx-1", phase)
    results = _results(data)
    assert results["gpu.device_plugin"]["status"] == "passed", results["gpu.device_plugin"]
    assert results["gpu_operator.driver_pods"]["status"] == "passed", results["gpu_operator.driver_pods"]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_device_plugin_or_driver_pod_alone_does_not_serve_its_node(load_raw, phase):
    data = load_raw("gpu-operator-mig")
    _k8s(data)["pods"] = [p for p in _k8s(data)["pods"]
                          if p["metadata"]["name"] not in ("nvidia-device-plugin-daemonset-q8m2c", "nvidia-driver-daemonset-dgx-1")]
    for name in ("nvidia-device-plugin-daemonset-q8m2c", "nvidia-driver-daemonset-dgx-1"):
        pod = _finished_copy(load_raw("gpu-operator-mig"), name, phase)
        _k8s(data)["pods"].append(pod)
    results = _results(data)
    assert results["gpu.device_plugin"]["status"] == "failed"
    assert results["gpu.device_plugin"]["message"] == "node dgx-0: no device plugin pod", results["gpu.device_plugin"]
    assert results["gpu_operator.driver_pods"]["status"] == "failed"
    assert results["gpu_operator.driver_pods"]["message"] == "node dgx-1 has no driver pod", results["gpu_operator.driver_pods"]
