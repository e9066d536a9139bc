# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make demo-operators`: playbooks/gpu_operator.yml with inventories/baremetal-k8s renders the whole
Network Operator / GPU Operator / RDMA test plan without credentials, and every object it writes passes
the schemas written from the published CRDs (and the built-in ones)."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT, render_playbook

UPSTREAM_KEYS = REPO_ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "gpu_operator" / "values_keys.json"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """`make demo-operators`, once for this module: (render folder, result)."""
    return render_playbook(tmp_path_factory, "gpu_operator.yml", "baremetal-k8s", "operators")


def _docs(folder):
    return {str(p.relative_to(folder)): yaml.safe_load(p.read_text()) for p in sorted(folder.rglob("*.yaml"))}


def _check_every_manifest_validates_against_the_published_schemas(rendered):
    out, dummy = rendered
    # NicClusterPolicy, IPPool, MacvlanNetwork, Namespace, vector-add Pod, two RDMA test Pods
    assert k8s_validation.validate_path(str(out / "manifests")) == 7


def _check_steps_come_in_order_network_then_gpu_then_test(rendered):
    out, dummy = rendered
    steps = sorted(p.name for p in (out / "manifests").iterdir())
    assert steps == ["25-network-operator", "25-network-operator-networks", "30-gpu-operator",
                     "30-gpu-operator-vectoradd", "50-rdma-test"]
    assert sorted(p.name for p in (out / "charts").iterdir()) == ["25-network-operator", "30-gpu-operator"]


def _check_nic_cluster_policy_and_networks(rendered):
    out, dummy = rendered
    docs = _docs(out / "manifests" / "25-network-operator")
    policy = docs["01-nicclusterpolicy-nic-cluster-policy.yaml"]["spec"]
    assert "ofedDriver" not in policy  # host DOCA-OFED
    assert json.loads(policy["rdmaSharedDevicePlugin"]["config"])["configList"][0] == {
        "resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63, "selectors": {"vendors": ["15b3"], "ifNames": ["ens64np1"]}}
    assert policy["nvIpam"]["image"] == "nvidia-k8s-ipam" and "ipamPlugin" not in policy["secondaryNetwork"]
    networks = _docs(out / "manifests" / "25-network-operator-networks")
    assert networks["01-ippool-rdma-pool.yaml"]["metadata"]["namespace"] == "nvidia-network-operator"
    macvlan = networks["02-macvlannetwork-demo-macvlannetwork.yaml"]["spec"]
    assert macvlan["master"] == "ens64np1" and json.loads(macvlan["ipam"]) == {"type": "nv-ipam", "poolName": "rdma-pool"}


def _check_gpu_operator_values_follow_the_hosts_and_the_chart(rendered):
    out, dummy = rendered
    release = yaml.safe_load((out / "charts" / "30-gpu-operator" / "gpu-operator.yaml").read_text())
    assert release["chart_version"] == "v25.10.1" and release["release_namespace"] == "gpu-operator"
    values = release["values"]
    # the hosts' facts say DMA-BUF with host DOCA-OFED; GDS needs the open modules
    assert values["driver"]["rdma"] == {"enabled": False, "useHostMofed": True}
    assert values["driver"]["kernelModuleType"] == "open" and values["gds"] == {"enabled": True}
    keys = json.loads(UPSTREAM_KEYS.read_text())["tags"]["v25.10.1"]

    def walk(node, prefix=""):
        for key, value in node.items():
            path = prefix + key
            if isinstance(value, dict) and value:
                yield from walk(value, path + ".")
            else:
                yield path
    assert [p for p in walk(values) if p not in keys and not any(p.startswith(k + ".") for k in keys)
            and not any(k.startswith(p + ".") for k in keys)] == []
    namespace = yaml.safe_load((out / "manifests" / "30-gpu-operator" / "01-namespace-gpu-operator.yaml").read_text())
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def _check_checks_say_what_would_be_verified(rendered):
    out, dummy = rendered
    checks = yaml.safe_load((out / "checks" / "30-gpu-operator" / "expectations.yaml").read_text())
    assert checks["gpu_nodes"] == {"gpu-node-1": "nvnode1", "gpu-node-2": "nvnode2"}
    assert checks["node_labels"]["nvidia.com/gpu.present"] == "true"
    assert [s["container"] for s in checks["driver_sidecars"]] == ["nvidia-fs-ctr"]
    rdma = yaml.safe_load((out / "checks" / "50-rdma-test" / "ib_write_bw.yaml").read_text())
    assert rdma["mode"] == "dmabuf" and rdma["threshold_gbps"] == 80.0 and rdma["nodes"] == ["nvnode1", "nvnode2"]
    assert "--use_cuda=0 --use_cuda_dmabuf -d mlx5_0" in rdma["server"]


def _check_rdma_test_pods_land_on_two_nodes_on_the_secondary_network(rendered):
    out, dummy = rendered
    pods = list(_docs(out / "manifests" / "50-rdma-test").values())
    assert [p["spec"]["nodeSelector"]["kubernetes.io/hostname"] for p in pods] == ["nvnode1", "nvnode2"]
    for pod in pods:
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "demo-macvlannetwork"
        container = pod["spec"]["containers"][0]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": 1, "rdma/rdma_shared_device_a": 1}
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}


def _check_the_outcome_says_nothing_was_contacted(rendered):
    dummy, result = rendered
    outcome = result.task("Show the outcome")["result"]["msg"]
    assert outcome[0] == "GPU Operator v25.10.1 (generic) in gpu-operator, GPUDirect RDMA dmabuf, kernel modules open"
    assert outcome[-1].endswith("nothing was contacted.")


def test_make_demo_operators_renders_everything(rendered):
    """One render, every check (one test per run keeps pytest-xdist from running it on both workers)."""
    _check_every_manifest_validates_against_the_published_schemas(rendered)
    _check_steps_come_in_order_network_then_gpu_then_test(rendered)
    _check_nic_cluster_policy_and_networks(rendered)
    _check_gpu_operator_values_follow_the_hosts_and_the_chart(rendered)
    _check_checks_say_what_would_be_verified(rendered)
    _check_rdma_test_pods_land_on_two_nodes_on_the_secondary_network(rendered)
    _check_the_outcome_says_nothing_was_contacted(rendered)
