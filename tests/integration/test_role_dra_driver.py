# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/dra_driver against the Kubernetes API double serving Kubernetes 1.34 (resource.k8s.io/v1), with helm
installing the stand-in chart tests/charts/dra-driver-nvidia-gpu (0.4.1: its CRDs, controller, kubelet plugin and
DeviceClasses) through kubernetes.core.helm.

One lifecycle on a GKE A4X-shaped cluster (two GB200 nodes, arm64, tainted as GKE taints them, one CPU node): install
and verify, a re-run that changes nothing, a verification that names the node without a clique label, and removal.
The ResourceSlices are seeded as the kubelet plugin would publish them (the double runs no DRA driver).
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import chart_path

ROLE = "gpu_ops.cluster.dra_driver"
NAMESPACE = RELEASE = "nvidia-dra-driver-gpu"
GB200 = {"cloud.google.com/gke-accelerator": "nvidia-gb200", "kubernetes.io/arch": "arm64", "nvidia.com/gpu": "present"}
TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
          {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}]


def _play(**extra):
    role_vars = {"dra_driver_platform": "gke", "dra_driver_chart_ref": chart_path("dra-driver-nvidia-gpu"),
                 "dra_driver_chart_repo_url": "", "dra_driver_wait_timeout": 60, "dra_driver_verify_retries": 0,
                 "dra_driver_verify_delay": 0}
    role_vars.update(extra)
    return [{"name": "dra driver", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": ROLE}, "vars": role_vars}]}]


def _slice(node):
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
           "metadata": {"name": "%s-compute-domain.nvidia.com-x" % node},
           "spec": {"driver": "compute-domain.nvidia.com", "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}}]}}
    assert k8s_validation.problems(obj, versions=("1.34.0",)) == []
    return obj


def test_gke_a4x_install_no_op_rerun_verdict_and_removal(run_playbook, helm_k8s):
    k8s = helm_k8s
    k8s.server_version = "1.34.2"
    k8s.add_node("cpu-0")
    for index in range(2):
        name = "gb200-%d" % index
        k8s.add_node(name, labels=dict(GB200, **{"nvidia.com/gpu.clique": "8a3c.%d" % index}), taints=TAINTS)
        k8s.put(_slice(name))

    # 1. install: namespace and quota, the release with GKE's values, verified node by node
    result = run_playbook(_play(), env=k8s.helm_env).assert_ok()
    quota = k8s.get("ResourceQuota", "nvidia-dra-driver-gpu-quota", NAMESPACE)
    assert quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["system-node-critical", "system-cluster-critical"]
    plugin = k8s.get("DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin", NAMESPACE)
    assert plugin["status"]["numberReady"] == 2
    assert plugin["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "NVIDIA_DRIVER_ROOT", "value": "/home/kubernetes/bin/nvidia"}]
    assert sorted(c["metadata"]["name"] for c in k8s.list("DeviceClass")) == [
        "compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"]
    assert k8s.get("CustomResourceDefinition", "computedomains.resource.nvidia.com")
    verdict = result.task("Record the result")["result"]["ansible_facts"]["dra_driver_result"]
    assert verdict["verified"] is True and verdict["line"] == "dra-driver-nvidia-gpu"
    assert [(n["name"], n["clique"]) for n in verdict["nodes"]] == [("gb200-0", "8a3c.0"), ("gb200-1", "8a3c.1")]

    # 2. the same run again: nothing changes
    k8s.clear_requests()
    again = run_playbook(_play(), env=k8s.helm_env).assert_ok()
    assert [r["task"] for r in again.changed] == [] and [w for w in k8s.writes() if w.changed] == []

    # 3. a GB200 node without its clique label (GFD has not labelled it): the verification names it and why
    k8s.modify("Node", "gb200-1", lambda node: node["metadata"]["labels"].pop("nvidia.com/gpu.clique"))
    failed = run_playbook(_play(), env=k8s.helm_env)
    message = failed.task("Report what is missing, node by node")["result"]["msg"]
    assert "node gb200-1: no nvidia.com/gpu.clique label" in message and "gb200-0" not in message

    # 4. removal: the release and the namespace go; the CRDs stay (helm leaves crds/ in place)
    run_playbook(_play(dra_driver_state="absent"), env=k8s.helm_env).assert_ok()
    assert k8s.get("Namespace", NAMESPACE) is None and k8s.list("DeviceClass") == []
    assert k8s.get("CustomResourceDefinition", "computedomains.resource.nvidia.com")
