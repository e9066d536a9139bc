# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU sharing on Kubernetes (plugins/plugin_utils/_sharing/gpu_sharing.py): ACK MPS rules, GPUDirect refusal, the GPU allocation report."""

from __future__ import annotations

import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as _gpudirect
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._sharing import gpu_sharing as _mps_k8s


CLUSTER = yaml.safe_load((pathlib.Path(__file__).parents[2] / "module_utils" / "fixtures" / "mps" / "cluster.yaml").read_text())


# ------------------------------------------------------------------------------ GPUDirect


def test_gpudirect_machines_are_refused_with_the_catalog_rule():
    nodes = [{"metadata": {"name": "a3-0", "labels": {_gpudirect.MACHINE_TYPE_LABEL: "a3-highgpu-8g"}}},
             {"metadata": {"name": "a3m-0", "labels": {_gpudirect.MACHINE_TYPE_LABEL: "a3-megagpu-8g"}}},
             {"metadata": {"name": "a3-small", "labels": {_gpudirect.MACHINE_TYPE_LABEL: "a3-highgpu-1g",
                                                          _gpudirect.ACCELERATOR_LABEL: "nvidia-h100-80gb"}}},
             {"metadata": {"name": "g2", "labels": {_gpudirect.MACHINE_TYPE_LABEL: "g2-standard-8"}}}]
    problems = _mps_k8s.gpudirect_conflicts(nodes)
    assert problems == ["node a3-0 (a3-highgpu-8g): " + _gpudirect.sharing_refusal("tcpx"),
                        "node a3m-0 (a3-megagpu-8g): " + _gpudirect.sharing_refusal("tcpxo")]
    assert "not MPS" in problems[0]


# ------------------------------------------------------------------------------ ACK rules

MPS_NODE = {"metadata": {"name": "gpu-1", "labels": {"ack.node.gpu.schedule": "mps"}}}
PLAIN_NODE = {"metadata": {"name": "gpu-2", "labels": {"ack.node.gpu.schedule": "default"}}}


def _pod(name, node="gpu-1", limits=None, host_ipc=None, env=None, privileged=None, phase="Running",
         namespace="ml", labels=None):
    container = {"name": "main", "resources": {"limits": limits or {}}}
    if env:
        container["env"] = env
    if privileged is not None:
        container["securityContext"] = {"privileged": privileged}
    spec = {"nodeName": node, "containers": [container]}
    if host_ipc is not None:
        spec["hostIPC"] = host_ipc
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": spec,
            "status": {"phase": phase}}


@pytest.mark.parametrize("pod, rules", [
    (_pod("ok", limits={"aliyun.com/gpu-mem": "7"}, host_ipc=True), []),
    (_pod("no-ipc", limits={"aliyun.com/gpu-mem": "7"}), ["host-ipc-missing"]),
    (_pod("ipc-false", limits={"aliyun.com/gpu-mem": 7}, host_ipc=False), ["host-ipc-missing"]),
    (_pod("env-all", limits={"aliyun.com/gpu-mem": "7"}, host_ipc=True,
          env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]), ["visible-devices-env"]),
    (_pod("env-id", node="gpu-2", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]), ["visible-devices-env"]),
    (_pod("env-void", node="gpu-2", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]), []),
    (_pod("priv", limits={"aliyun.com/gpu-mem": "7"}, host_ipc=True, privileged=True), ["privileged-gpu"]),
    (_pod("priv-no-gpu", node="gpu-2", privileged=True), []),
    (_pod("whole-gpu", limits={"nvidia.com/gpu": "1"}, host_ipc=True), ["unaccounted-gpu-request"]),
    (_pod("whole-gpu-elsewhere", node="gpu-2", limits={"nvidia.com/gpu": "1"}), []),
    (_pod("cpu-on-mps"), []),
    (_pod("done", limits={"aliyun.com/gpu-mem": "7"}, phase="Succeeded"), []),
    (_pod("system", limits={"nvidia.com/gpu": "1"}, namespace="kube-system"), []),
    (_pod("daemon", privileged=True, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
          labels={"app.aliyun.com/name": "mps-control-daemon"}, namespace="mps"), []),
    (_pod("all-wrong", limits={"nvidia.com/gpu": "2"}, privileged=True,
          env=[{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
     ["visible-devices-env", "privileged-gpu", "host-ipc-missing", "unaccounted-gpu-request"]),
])
def test_ack_rules(pod, rules):
    findings = _mps_k8s.ack_workload_findings([pod], [MPS_NODE, PLAIN_NODE])
    assert [f["rule"] for f in findings] == rules
    for finding in findings:
        assert finding["pod"] == pod["metadata"]["name"]
        assert _mps_k8s.ACK_RULES[finding["rule"]] in finding["message"]


def test_ack_exemptions_are_configurable():
    pod = _pod("sys", limits={"nvidia.com/gpu": "1"}, namespace="kube-system")
    assert [f["rule"] for f in _mps_k8s.ack_workload_findings([pod], [MPS_NODE], exempt_namespaces=[])] == [
        "host-ipc-missing", "unaccounted-gpu-request"]
    labelled = _pod("lab", limits={"nvidia.com/gpu": "1"}, labels={"team": "infra"})
    assert _mps_k8s.ack_workload_findings([labelled], [MPS_NODE], exempt_labels={"team": "infra"}) == []


def test_ack_daemon_coverage():
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    not_ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    nodes = [MPS_NODE, PLAIN_NODE, {"metadata": {"name": "gpu-3", "labels": {"ack.node.gpu.schedule": "mps"}}}]
    pods = [{"metadata": {"name": "d1"}, "spec": {"nodeName": "gpu-1"}, "status": ready},
            {"metadata": {"name": "d3"}, "spec": {"nodeName": "gpu-3"}, "status": not_ready}]
    coverage = _mps_k8s.ack_daemon_coverage(nodes, pods)
    assert coverage["nodes"] == ["gpu-1", "gpu-3"] and coverage["missing"] == ["gpu-3"] and not coverage["ok"]
    assert _mps_k8s.ack_daemon_coverage([PLAIN_NODE], [])["problems"] == ["no node is labelled ack.node.gpu.schedule=mps"]


# ------------------------------------------------------------------------------ allocation report


def _rows(report):
    return {(n["name"], r["resource"]): r for n in report["nodes"] for r in n["resources"]}


def test_allocation_report_covers_every_kind_of_gpu():
    report = _mps_k8s.allocation_report(CLUSTER["nodes"], CLUSTER["pods"])
    rows = _rows(report)
    assert [n["name"] for n in report["nodes"]] == [
        "cn-shanghai.192.168.6.104", "gke-sharing", "mig-mixed", "mps-a100", "ts-l4", "whole-h100"]
    whole = rows[("whole-h100", "nvidia.com/gpu")]
    assert (whole["kind"], whole["allocated"], whole["total"]) == ("whole", 4, 8)  # the Succeeded pod holds nothing
    mps = rows[("mps-a100", "nvidia.com/gpu")]
    # two containers (2) beat the init container (1); each MPS share holds a quarter of 40 GiB
    assert (mps["kind"], mps["sharing"], mps["replicas"], mps["allocated"], mps["total"]) == ("shared", "mps", 4, 2, 4)
    assert (mps["memory_allocated_gib"], mps["memory_total_gib"]) == (20.0, 40.0)
    shared = rows[("ts-l4", "nvidia.com/gpu.shared")]
    assert (shared["sharing"], shared["replicas"], shared["allocated"], shared["total"]) == ("time-slicing", 3, 1, 6)
    assert ("ts-l4", "nvidia.com/gpu") not in rows  # 0 allocatable and nothing held: no row
    mig = {k[1]: (r["allocated"], r["total"], r["unit_memory_gib"]) for k, r in rows.items() if k[0] == "mig-mixed"}
    assert mig == {"nvidia.com/mig-1g.10gb": (1, 2, 10.0), "nvidia.com/mig-2g.20gb": (0, 1, 20.0),
                   "nvidia.com/mig-3g.40gb": (1, 1, 40.0)}
    ack = rows[("cn-shanghai.192.168.6.104", "aliyun.com/gpu-mem")]
    assert (ack["kind"], ack["allocated"], ack["total"], ack["memory_allocated_gib"]) == ("gpu-mem", 7, 15, 7.0)
    gke = rows[("gke-sharing", "nvidia.com/gpu")]
    assert (gke["sharing"], gke["replicas"], gke["memory_total_gib"]) == ("mps", 2, None)
    assert report["nodes"][2]["pods"] == ["lab/mig-big", "lab/mig-small"]
    assert report["overcommitted"] == []


def test_mig_memory_comes_from_the_catalog():
    node = copy.deepcopy(CLUSTER["nodes"][3])
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-NVL"  # 1g.12gb on the 94GB part
    node["status"]["allocatable"] = {"nvidia.com/mig-1g.12gb": "7"}
    row = _mps_k8s.allocation_report([node], [])["nodes"][0]["resources"][0]
    assert (row["unit_memory_gib"], row["memory_total_gib"]) == (12.0, 84.0)


def test_allocation_table_reads_like_inspect_cgpu():
    report = _mps_k8s.allocation_report([CLUSTER["nodes"][4]], CLUSTER["pods"])
    lines = _mps_k8s.allocation_table(report).splitlines()
    assert lines[0].split() == ["NAME", "IPADDRESS", "RESOURCE", "SHARING", "ALLOCATED/TOTAL", "GPU", "MEMORY(GiB)"]
    assert lines[1].split() == ["cn-shanghai.192.168.6.104", "192.168.6.104", "aliyun.com/gpu-mem", "ack", "7/15", "7/15"]
    assert set(lines[2]) == {"-"}
    assert lines[3] == "Allocated/Total GPU Memory In Cluster: 7/15 (47%)"


def test_overcommitment_is_reported():
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}}
    pods = [_pod("p%d" % i, node="n", limits={"nvidia.com/gpu": "1"}) for i in range(2)]
    report = _mps_k8s.allocation_report([node], pods)
    assert report["overcommitted"] == ["node n: nvidia.com/gpu allocated 2 of 1"]
    assert "Overcommitted: node n" in _mps_k8s.allocation_table(report)


@pytest.mark.parametrize("nodes, pods, message", [
    ({"items": []}, [], "lists of Node and Pod documents"),
    ([{"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "two"}}}], [],
     "node n allocatable nvidia.com/gpu: 'two' is not a whole number"),
    ([], [_pod("p", limits={"aliyun.com/gpu-mem": "1.5"})], "pod ml/p container main aliyun.com/gpu-mem: '1.5'"),
])
def test_allocation_bad_input(nodes, pods, message):
    with pytest.raises(ValueError) as err:
        _mps_k8s.allocation_report(nodes, pods)
    assert message in str(err.value)
