# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUDirect workload patcher (plugins/plugin_utils/_gpudirect/workload.py), called directly: what a patch adds,
that a re-patch changes nothing, and the refusals (tests/unit/plugins/filter/test_gpudirect_workload.py validates
the filter's output of every kind against the Kubernetes schemas)."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as g
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._gpudirect import workload as w

TCPXO_NETWORKS = ["vpc%d" % i for i in range(1, 9)]
GKE = "1.32.2-gke.1489001"


def pod(gpus=8, **spec):
    trainer = dict(name="trainer", image="us-docker.pkg.dev/my-project/ml/trainer:1.0",
                   resources=dict(limits={"nvidia.com/gpu": gpus}))
    return dict(apiVersion="v1", kind="Pod", metadata=dict(name="train-0"), spec=dict(containers=[trainer], **spec))


def test_a_tcpxo_pod_gets_the_fabric_the_daemon_and_the_nccl_environment():
    original = pod()
    warnings = []
    patched = w.patch_workload(original, "tcpxo", TCPXO_NETWORKS, gke_version=GKE, warnings=warnings)
    assert original == pod(), "the input is not changed"
    annotations = patched["metadata"]["annotations"]
    assert annotations[g.DEFAULT_INTERFACE_ANNOTATION] == g.CONTROL_INTERFACE
    assert [i["network"] for i in json.loads(annotations[g.INTERFACES_ANNOTATION])][1:] == TCPXO_NETWORKS
    daemon = g.DAEMONS["tcpxo"]["name"]
    # GKE 1.32 runs native sidecars: the daemon is an init container that keeps running
    assert [c["name"] for c in patched["spec"]["initContainers"]] == [daemon]
    assert [c["name"] for c in patched["spec"]["containers"]] == ["trainer"]
    env = {e["name"]: e.get("value") for e in patched["spec"]["containers"][0]["env"]}
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    assert patched["spec"]["volumes"]


def test_a_patch_of_a_patch_changes_nothing():
    once = w.patch_workload(pod(), "tcpxo", TCPXO_NETWORKS, gke_version=GKE)
    assert w.patch_workload(copy.deepcopy(once), "tcpxo", TCPXO_NETWORKS, gke_version=GKE) == once


def test_older_gke_gets_a_classic_sidecar():
    patched = w.patch_workload(pod(), "tcpxo", TCPXO_NETWORKS, gke_version="1.28.11-gke.1289000")
    daemon = g.DAEMONS["tcpxo"]["name"]
    assert daemon in [c["name"] for c in patched["spec"]["containers"]]
    assert daemon not in [c["name"] for c in patched["spec"].get("initContainers") or []]


@pytest.mark.parametrize("args, kwargs, message", [
    ((pod(), "tcp", TCPXO_NETWORKS), {}, "fabric: 'tcp' has no GKE workload patch; allowed: rdma, rdma-a4x, tcpx, tcpxo"),
    ((pod(), "tcpxo", TCPXO_NETWORKS), dict(sidecar="both"), "sidecar: 'both' is not one of auto, native, classic"),
    ((pod(), "tcpxo", TCPXO_NETWORKS), dict(sidecar="native", gke_version="1.28.11-gke.1289000"),
     "sidecar: native sidecars need GKE >= 1.29"),
    ((pod(), "tcpxo", TCPXO_NETWORKS), dict(gke_version="latest"), "gke_version: "),
    (("Pod", "tcpxo", TCPXO_NETWORKS), {}, "the manifest must be a mapping, not str"),
    ((pod(gpus=4), "tcpxo", TCPXO_NETWORKS), {}, "requests 4 of the 8 GPUs"),
    ((pod(hostNetwork=True), "tcpxo", TCPXO_NETWORKS), {}, "hostNetwork"),
])
def test_refusals_say_what_is_wrong(args, kwargs, message):
    with pytest.raises(w.WorkloadError) as caught:
        w.patch_workload(*args, **kwargs)
    assert message in str(caught.value)


def test_workload_error_is_a_value_error():
    assert issubclass(w.WorkloadError, ValueError)


# ------------------------------------------------------------------ GPUDirect-RDMA (A3 Ultra, A4; issue 21)

RDMA_NETWORKS = ["rdma-%d" % i for i in range(8)]


def test_an_rdma_pod_gets_its_interfaces_the_gib_mounts_and_env_without_a_sidecar_or_privilege():
    warnings = []
    patched = w.patch_workload(pod(), "rdma", RDMA_NETWORKS, gke_version="1.33.5-gke.1080000",
                               machine_type="a3-ultragpu-8g", warnings=warnings)
    annotations = patched["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert json.loads(annotations["networking.gke.io/interfaces"]) == [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": "eth%d" % (i + 2), "network": "rdma-%d" % i} for i in range(8)]
    assert not [k for k in annotations if k.startswith("devices.gke.io/")]  # no NRI device annotation
    spec = patched["spec"]
    assert "initContainers" not in spec and [c["name"] for c in spec["containers"]] == ["trainer"]
    assert {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]} == {
        "library-dir-host": "/home/kubernetes/bin/nvidia", "gib": "/home/kubernetes/bin/gib"}
    trainer = spec["containers"][0]
    assert {m["mountPath"]: m["name"] for m in trainer["volumeMounts"]} == {
        "/usr/local/nvidia": "library-dir-host", "/usr/local/gib": "gib"}
    assert "securityContext" not in trainer and "hostNetwork" not in spec
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert env["NCCL_NET"] == "gIB" and env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/gib/configs/tuner_config_a3u.txtpb"
    assert w.patch_workload(copy.deepcopy(patched), "rdma", RDMA_NETWORKS, gke_version="1.33.5-gke.1080000",
                            machine_type="a3-ultragpu-8g") == patched


def test_an_rdma_pod_takes_every_gpu_of_its_node():
    with pytest.raises(w.WorkloadError, match="requests 4 of the 8 GPUs .* GPUDirect-RDMA needs all GPUs of the node"):
        w.patch_workload(pod(gpus=4), "rdma", RDMA_NETWORKS)
    with pytest.raises(w.WorkloadError, match="rdma needs 8 GPU NIC networks, 4 given"):
        w.patch_workload(pod(), "rdma", RDMA_NETWORKS[:4])


@pytest.mark.parametrize("kwargs, message", [
    (dict(sidecar="native"), "sidecar: native asks for the RxDM daemon sidecar; rdma pods have none"),
    (dict(nccl_overrides={"NCCL_FASTSOCKET_NUM_FLOWS": "8"}), "nccl_overrides.NCCL_FASTSOCKET_NUM_FLOWS: NCCL Fast Socket"),
    (dict(nccl_overrides={"NCCL_NET": "FastSocket"}), "NCCL_NET: FastSocket selects NCCL Fast Socket"),
    (dict(nccl_overrides={"NCCL_FASTRAK_IFNAME": "eth1"}), "NCCL_FASTRAK_IFNAME: a GPUDirect-TCPXO setting; rdma uses the gIB"),
])
def test_an_rdma_patch_refuses_tcpx_daemon_and_fast_socket_settings(kwargs, message):
    with pytest.raises(w.WorkloadError, match=message):
        w.patch_workload(pod(), "rdma", RDMA_NETWORKS, **kwargs)


def test_rdma_conflicts_names_every_conflicting_setting():
    settings = {
        "tcpxo_installer_registry": "mirror.example.com",
        "nri_device_injector_step": "31-x",
        "nccl_test_sidecar": "classic",
        "nccl_test_nccl_overrides": {"NCCL_NET": "Socket", "NCCL_IB_TC": "52"},
        "gke_gpu_cluster_node_pool": {"gpu_sharing": {"strategy": "time-sharing"}, "enable_fast_socket": True,
                                      "node_labels": {"cloud.google.com/gke-gpu-partition-size": "1g.18gb", "team": "a"}},
    }
    problems = w.rdma_conflicts("rdma", settings)
    assert len(problems) == 7, problems
    assert problems[0].startswith("gke_gpu_cluster_node_pool.gpu_sharing: GPUDirect-RDMA needs whole nodes")
    assert "gke_gpu_cluster_node_pool.enable_fast_socket: NCCL Fast Socket does not work" in problems[1]
    assert problems[2].startswith("gke_gpu_cluster_node_pool.node_labels.cloud.google.com/gke-gpu-partition-size")
    assert problems[3].startswith("nccl_test_nccl_overrides.NCCL_NET: Socket selects another network plugin")
    assert problems[4] == "nccl_test_sidecar: classic asks for the RxDM daemon sidecar; rdma pods have none"
    assert problems[5].startswith("nri_device_injector_step: a TCPX/TCPXO daemon setting")
    assert problems[6].startswith("tcpxo_installer_registry: a TCPX/TCPXO daemon setting")
    # the same settings are fine for TCPXO, and harmless ones are fine for RDMA
    assert w.rdma_conflicts("tcpxo", settings) == []
    assert w.rdma_conflicts("rdma", {"nccl_test_sidecar": "auto", "nccl_test_nccl_overrides": {"NCCL_NET": "gIB"},
                                     "gke_gpu_cluster_node_pool": {"node_labels": {"team": "a"}, "gpu_sharing": None}}) == []
    # only a dict named *node_pool is read as a node pool; an unset pool is no conflict
    assert w.rdma_conflicts("rdma", {"gke_gpu_cluster_node_pool": None, "my_settings": {"gpu_sharing": True}}) == []


def test_rdma_conflicts_refuses_bad_input():
    with pytest.raises(ValueError, match="'tcp' is not a GPUDirect profile"):
        w.rdma_conflicts("tcp", {})
    with pytest.raises(ValueError, match="settings: a dict"):
        w.rdma_conflicts("rdma", ["tcpx_installer_image"])


# ------------------------------------------------------------------ managed accelerator network profile (DRANET)

def test_a_dranet_pod_claims_the_rdma_nics_and_gets_no_interface_annotation():
    """The managed path: the pod names the claim in spec.resourceClaims and the GPU container in resources.claims (the
    shape of container-engine-accelerators' gpudirect-rdma/nccl-test-managed-rdma.yaml), keeps the gIB mounts and env."""
    original = pod()
    original["spec"]["containers"].append(dict(name="logger", image="busybox"))
    patched = w.patch_workload(original, "rdma", [], gke_version="1.34.1-gke.1829001", machine_type="a4-highgpu-8g",
                               dranet=True)
    annotations = patched["metadata"]["annotations"]
    assert "networking.gke.io/interfaces" not in annotations and "networking.gke.io/default-interface" not in annotations
    spec = patched["spec"]
    assert spec["resourceClaims"] == [{"name": "rdma", "resourceClaimTemplateName": "default-rdma"}]
    trainer, logger = spec["containers"]
    assert trainer["resources"]["claims"] == [{"name": "rdma"}] and trainer["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert "resources" not in logger, "only the containers that request GPUs claim the NICs"
    assert {m["mountPath"] for m in trainer["volumeMounts"]} == {"/usr/local/nvidia", "/usr/local/gib"}
    assert {e["name"]: e["value"] for e in trainer["env"]}["NCCL_NET"] == "gIB"
    again = w.patch_workload(copy.deepcopy(patched), "rdma", [], gke_version="1.34.1-gke.1829001",
                             machine_type="a4-highgpu-8g", dranet=True)
    assert again == patched
    own = w.patch_workload(pod(gpus=4), "rdma-a4x", None, dranet=True, claim_template="team-rdma")
    assert own["spec"]["resourceClaims"] == [{"name": "rdma", "resourceClaimTemplateName": "team-rdma"}]


@pytest.mark.parametrize("fabric, networks, kwargs, message", [
    ("tcpxo", [], dict(dranet=True), "dranet: .*tcpxo is not an RDMA profile; RDMA profiles: rdma, rdma-a4x"),
    ("rdma", ["rdma-%d" % i for i in range(8)], dict(dranet=True), "network_names: with dranet GKE attaches"),
    ("rdma", ["rdma-%d" % i for i in range(8)], dict(claim_template="x"), "claim_template: only with dranet"),
    ("rdma", [], dict(dranet=True, claim_template="Bad_Name"), "claim_template: 'Bad_Name' is not a ResourceClaimTemplate"),
])
def test_dranet_refusals(fabric, networks, kwargs, message):
    with pytest.raises(w.WorkloadError, match=message):
        w.patch_workload(pod(), fabric, networks, **kwargs)


def test_dranet_refuses_an_interfaces_annotation_and_a_clashing_claim():
    annotated = pod()
    annotated["metadata"]["annotations"] = {"networking.gke.io/interfaces": "[]"}
    with pytest.raises(w.WorkloadError, match="has the networking.gke.io/interfaces annotation; with dranet"):
        w.patch_workload(annotated, "rdma", [], dranet=True)
    clash = pod(resourceClaims=[{"name": "rdma", "resourceClaimTemplateName": "other"}])
    with pytest.raises(w.WorkloadError, match="resourceClaims entry rdma exists with another source"):
        w.patch_workload(clash, "rdma", [], dranet=True)


# ------------------------------------------------------------------ node taints (A4X: arm64 hosts)

# what GKE taints the nodes with, written here (not read from the catalog)
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
ARM64_TOLERATION = {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
A4X_NETWORKS = ["rdma-%d" % i for i in range(4)]


def test_an_a4x_pod_tolerates_the_arm64_taint_and_an_a3_ultra_pod_only_the_gpu_one():
    a4x = w.patch_workload(pod(gpus=4), "rdma-a4x", A4X_NETWORKS)
    assert a4x["spec"]["tolerations"] == [GPU_TOLERATION, ARM64_TOLERATION]
    assert w.patch_workload(copy.deepcopy(a4x), "rdma-a4x", A4X_NETWORKS) == a4x
    assert w.patch_workload(pod(), "rdma", RDMA_NETWORKS)["spec"]["tolerations"] == [GPU_TOLERATION]


@pytest.mark.parametrize("own, added", [
    ([{"operator": "Exists"}], []),                                                    # tolerates every taint
    ([{"key": "kubernetes.io/arch", "operator": "Exists"}], [GPU_TOLERATION]),         # any value, any effect
    ([{"key": "kubernetes.io/arch", "operator": "Exists", "effect": "NoExecute"}], [GPU_TOLERATION, ARM64_TOLERATION]),
    ([{"key": "kubernetes.io/arch", "operator": "Equal", "value": "amd64", "effect": "NoSchedule"}],
     [GPU_TOLERATION, ARM64_TOLERATION]),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], [ARM64_TOLERATION]),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": ""}], [ARM64_TOLERATION]),
    ([{"operator": "Exists", "key": "team"}], [GPU_TOLERATION, ARM64_TOLERATION]),
    (["not-a-toleration"], [GPU_TOLERATION, ARM64_TOLERATION]),
])
def test_only_the_tolerations_a_pod_lacks_are_added(own, added):
    patched = w.patch_workload(pod(gpus=4, tolerations=copy.deepcopy(own)), "rdma-a4x", A4X_NETWORKS)
    assert patched["spec"]["tolerations"] == own + added


def test_tolerations_that_are_not_a_list_are_refused():
    with pytest.raises(w.WorkloadError, match="Pod/train-0: spec.tolerations must be a list"):
        w.patch_workload(pod(gpus=4, tolerations={"key": "x"}), "rdma-a4x", A4X_NETWORKS)


# ------------------------------------------------------------------ ComputeDomains (multi-node NVLink, IMEX)

def test_compute_domain_is_one_v1beta1_domain_with_zero_nodes_and_a_single_channel():
    assert w.compute_domain("train-42", namespace="ml") == {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
        "metadata": {"name": "train-42", "namespace": "ml"},
        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "train-42-channel"}, "allocationMode": "Single"}}}
    own = w.compute_domain("train-42", claim_template="imex")
    assert own["metadata"] == {"name": "train-42"} and own["spec"]["channel"]["resourceClaimTemplate"] == {"name": "imex"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="Train"), "name: 'Train' is not a Kubernetes object name"),
    (dict(name="t", namespace="a/b"), "namespace: 'a/b' is not"),
    (dict(name="t", claim_template=""), "claim_template: '' is not"),
    (dict(name=None), "name: None is not"),
])
def test_compute_domain_refuses_bad_names(kwargs, message):
    with pytest.raises(w.WorkloadError, match=message):
        w.compute_domain(**kwargs)


def test_an_a4x_pod_claims_its_channel_and_requires_a_clique_node():
    domain = w.compute_domain("train-42")
    job = dict(apiVersion="batch/v1", kind="Job", metadata=dict(name="train", namespace="ml"), spec=dict(template=dict(
        metadata={}, spec=dict(containers=[dict(name="trainer", image="t", resources=dict(limits={"nvidia.com/gpu": 4})),
                                           dict(name="logger", image="busybox")],
                               affinity=dict(nodeAffinity=dict(requiredDuringSchedulingIgnoredDuringExecution=dict(
                                   nodeSelectorTerms=[dict(matchExpressions=[dict(key="pool", operator="In", values=["a"])]),
                                                      dict(matchExpressions=[dict(key="pool", operator="In", values=["b"])])])))))))
    patched = w.patch_workload(job, "rdma-a4x", A4X_NETWORKS, compute_domain=domain)
    spec = patched["spec"]["template"]["spec"]
    assert spec["resourceClaims"] == [{"name": "compute-domain-channel", "resourceClaimTemplateName": "train-42-channel"}]
    trainer, logger = spec["containers"]
    assert trainer["resources"]["claims"] == [{"name": "compute-domain-channel"}] and "resources" not in logger
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][-1] for t in terms] == [{"key": "nvidia.com/gpu.clique", "operator": "Exists"}] * 2
    assert [len(t["matchExpressions"]) for t in terms] == [2, 2]
    assert w.patch_workload(copy.deepcopy(patched), "rdma-a4x", A4X_NETWORKS, compute_domain=domain) == patched


def test_a_channel_and_dranet_claim_together_and_a_pod_without_affinity_gets_one_term():
    patched = w.patch_workload(pod(gpus=4), "rdma-a4x", [], dranet=True, compute_domain=w.compute_domain("cd"))
    spec = patched["spec"]
    assert spec["resourceClaims"] == [{"name": "rdma", "resourceClaimTemplateName": "default-rdma"},
                                      {"name": "compute-domain-channel", "resourceClaimTemplateName": "cd-channel"}]
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "rdma"}, {"name": "compute-domain-channel"}]
    assert spec["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.clique", "operator": "Exists"}]}]}}}


def _domain(**channel):
    domain = w.compute_domain("cd")
    domain["spec"]["channel"].update(channel)
    return domain


@pytest.mark.parametrize("fabric, manifest, domain, message", [
    ("rdma", pod(), w.compute_domain("cd"), "compute_domain: rdma runs on a3-ultragpu-8g, a4-highgpu-8g, whose NVLink does "
                                            "not span nodes; a ComputeDomain needs a4x-highgpu-4g"),
    ("rdma-a4x", pod(gpus=2), w.compute_domain("cd"),
     "requests 2 of the 4 GPUs of a a4x-highgpu-4g node; with compute_domain a node's single IMEX channel goes to one pod, "
     "so pods per node \\(1\\) x GPUs per pod \\(2\\) must be the node's 4 GPUs"),
    ("rdma-a4x", pod(gpus=4), _domain(allocationMode="All"),
     "compute_domain.spec.channel.allocationMode: 'All' gives a pod every IMEX channel of its node; allowed: Single"),
    ("rdma-a4x", pod(gpus=4), _domain(resourceClaimTemplate={}),
     "compute_domain.spec.channel.resourceClaimTemplate.name: None is not"),
    ("rdma-a4x", pod(gpus=4), {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ResourceClaimTemplate"},
     "compute_domain: a ComputeDomain object \\(apiVersion resource.nvidia.com/v1beta1\\) is required"),
    ("rdma-a4x", pod(gpus=4), dict(w.compute_domain("cd"), apiVersion="resource.nvidia.com/v1beta2"),
     "compute_domain: a ComputeDomain object"),
    ("rdma-a4x", pod(gpus=4, resourceClaims=[{"name": "imex", "resourceClaimTemplateName": "cd-channel"}]),
     w.compute_domain("cd"), "spec.resourceClaims entry imex already claims cd-channel: a second claim would take the "
                             "node's IMEX channel twice"),
    ("rdma-a4x", pod(gpus=4, resourceClaims=[{"name": "compute-domain-channel", "resourceClaimName": "shared"}]),
     w.compute_domain("cd"), "spec.resourceClaims entry compute-domain-channel exists with another source"),
    ("rdma-a4x", pod(gpus=4, resourceClaims={"name": "x"}), w.compute_domain("cd"), "spec.resourceClaims must be a list"),
    ("rdma-a4x", dict(pod(gpus=4), metadata={"name": "p", "namespace": "b"}), w.compute_domain("cd", namespace="a"),
     "compute_domain.metadata.namespace: a, but the workload runs in b"),
])
def test_compute_domain_refusals_name_the_field(fabric, manifest, domain, message):
    networks = A4X_NETWORKS if fabric == "rdma-a4x" else RDMA_NETWORKS
    with pytest.raises(w.WorkloadError, match=message):
        w.patch_workload(manifest, fabric, networks, compute_domain=domain)


def test_a_domain_in_the_workloads_namespace_or_without_one_is_taken():
    for domain in (w.compute_domain("cd", namespace="a"), w.compute_domain("cd")):
        patched = w.patch_workload(dict(pod(gpus=4), metadata={"name": "p", "namespace": "a"}), "rdma-a4x", A4X_NETWORKS,
                                   compute_domain=domain)
        assert patched["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "cd-channel"
