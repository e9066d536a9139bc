# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Operator readiness reports (plugins/plugin_utils/_operators/readiness.py): components, driver pods, nodes."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpu_operator
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import gpu_operator_plan as ops
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import readiness
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host as host


def options(version, platform="generic", **extra):
    base = {"chart_version": version, "platform": platform, "gke_version": "1.33.2-gke.1111000"}
    base.update(extra)
    return base


# ---- readiness ------------------------------------------------------------------------------------

def _pod(name, node, component, ready, reason=None):
    state = {"running": {}} if ready else {"waiting": {"reason": reason or "CrashLoopBackOff"}}
    return {"metadata": {"name": name, "ownerReferences": [{"kind": "DaemonSet", "name": component}]},
            "spec": {"nodeName": node},
            "status": {"phase": "Running" if ready else "Pending",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "containerStatuses": [{"name": "main", "ready": ready, "state": state}]}}


def test_readiness_names_the_component_and_node_that_are_not_ready():
    policy = {"kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "status": {"state": "notReady"}}
    report = readiness.readiness_report(policy, [_pod("drv-a", "gpu-1", "nvidia-driver-daemonset", True),
                                                 _pod("drv-b", "gpu-2", "nvidia-driver-daemonset", False, "ImagePullBackOff")])
    assert report["ready"] is False
    assert report["summary"][0] == "ClusterPolicy/cluster-policy is notReady"
    assert "nvidia-driver-daemonset not ready on node gpu-2 (pod drv-b: main ImagePullBackOff)" in report["summary"]
    ncp = {"kind": "NicClusterPolicy", "metadata": {"name": "nic-cluster-policy"}, "status": {"state": "notReady", "appliedStates": [
        {"name": "state-OFED", "state": "notReady", "message": "waiting for driver"}, {"name": "state-multus-cni", "state": "ready"}]}}
    assert readiness.readiness_report(ncp)["summary"][1] == "component state-OFED is notReady: waiting for driver"


def test_driver_pod_report_wants_the_sidecars_and_their_messages():
    pod = {"metadata": {"name": "nvidia-driver-daemonset-x"}, "spec": {"nodeName": "gpu-1", "containers": [
        {"name": "nvidia-driver-ctr"}, {"name": "nvidia-peermem-ctr"}]},
        "status": {"containerStatuses": [{"name": "nvidia-driver-ctr", "ready": True}, {"name": "nvidia-peermem-ctr", "ready": True}]}}
    sidecars = [gpu_operator.DRIVER_SIDECARS["peermem"], gpu_operator.DRIVER_SIDECARS["gds"]]
    problems = readiness.driver_pod_report([pod], sidecars, {"nvidia-driver-daemonset-x/nvidia-peermem-ctr": "waiting for mellanox ofed"})
    assert problems == ["nvidia-driver-daemonset-x on node gpu-1: the nvidia-peermem-ctr log does not say "
                        "'successfully loaded nvidia-peermem module'",
                        "nvidia-driver-daemonset-x on node gpu-1 has no nvidia-fs-ctr container"]
    ok = readiness.driver_pod_report([pod], sidecars[:1], {"nvidia-driver-daemonset-x/nvidia-peermem-ctr":
                                                           "waiting...\nsuccessfully loaded nvidia-peermem module\n"})
    assert ok == []


def test_node_report_names_missing_labels_and_gpus():
    expect = ops.gpu_operator_plan(options("v25.10.1"))["expect"]
    good = {"metadata": {"name": "gpu-1", "labels": dict(expect["labels"])}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    short = {"metadata": {"name": "gpu-2", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {"allocatable": {}}}
    gpu_hosts = {"facts": {"h1": host(), "h2": host()}, "nodes": {"h1": "gpu-1", "h2": "gpu-2", "h3": "gpu-3"}}
    problems = readiness.node_report([good, short], gpu_hosts, expect)
    assert problems[0].startswith("node gpu-2: labels nvidia.com/gpu.deploy.container-toolkit=(missing)")
    assert problems[1] == "node gpu-2: allocatable nvidia.com/gpu is 0, expected at least 8"
    assert problems[2] == "node gpu-3 does not exist"
    assert len(problems) == 3


def test_driver_pod_report_reads_k8s_log_loop_results():
    pod = {"metadata": {"name": "drv"}, "spec": {"nodeName": "gpu-1", "containers": [{"name": "nvidia-peermem-ctr"}]},
           "status": {"containerStatuses": [{"name": "nvidia-peermem-ctr", "ready": True}]}}
    sidecar = gpu_operator.DRIVER_SIDECARS["peermem"]
    results = [{"item": [pod, sidecar], "log": "successfully loaded nvidia-peermem module"}]
    assert readiness.driver_pod_report([pod], [sidecar], results) == []
    assert readiness.driver_pod_report([pod], [sidecar], [{"item": [pod, sidecar], "failed": True}]) != []


def test_a_restarting_container_says_how_it_last_ended():
    pod = _pod("plugin-a", "gpu-1", "nvidia-device-plugin-daemonset", False)
    status = pod["status"]["containerStatuses"][0]
    status["lastState"] = {"terminated": {"reason": "Error", "exitCode": 2}}
    assert readiness.not_ready_pods([pod])[0]["problem"] == "main CrashLoopBackOff (last terminated: Error, exit code 2)"
    status["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137, "signal": 9}}
    assert readiness.not_ready_pods([pod])[0]["problem"] == "main CrashLoopBackOff (last terminated: OOMKilled, signal 9)"
    status["lastState"] = {"terminated": {"exitCode": 1}}
    assert readiness.not_ready_pods([pod])[0]["problem"] == "main CrashLoopBackOff (last terminated: no reason, exit code 1)"
    status["lastState"] = {}
    assert readiness.not_ready_pods([pod])[0]["problem"] == "main CrashLoopBackOff"
