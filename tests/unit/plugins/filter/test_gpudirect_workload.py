# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpudirect_workload filter: every kind, both sidecar modes, idempotence, refusals.

Every patched manifest is validated like an API server would (tests/contract/k8s_validation.py:
kubernetes-validate strict on Kubernetes 1.33 and the newest schema, plus the server-side checks).
JobSet is a custom resource without a schema there, so each of its replicated jobs is validated as
the batch/v1 Job it stands for.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.gpudirect import (
    gpudirect_profile, gpudirect_workload, nccl_env)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as g
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl
from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation

NETWORKS = {
    "tcpx": ["vpc1", "vpc2", "vpc3", "vpc4"],
    "tcpxo": ["vpc%d" % i for i in range(1, 9)],
    "rdma": ["rdma-%d" % i for i in range(8)],
}
GKE = "1.32.2-gke.1489001"


def container(name="trainer", gpus=8, **extra):
    result = dict(name=name, image="us-docker.pkg.dev/my-project/ml/trainer:1.0",
                  command=["python", "train.py"])
    if gpus is not None:
        result["resources"] = dict(limits={"nvidia.com/gpu": gpus})
    result.update(extra)
    return result


def pod_spec(gpus=8, **extra):
    spec = dict(containers=[container(gpus=gpus)])
    spec.update(extra)
    return spec


def pod(gpus=8, **extra):
    return dict(apiVersion="v1", kind="Pod", metadata=dict(name="train-0", labels=dict(app="train")),
                spec=pod_spec(gpus, **extra))


def job(gpus=8):
    return dict(apiVersion="batch/v1", kind="Job", metadata=dict(name="train"),
                spec=dict(completions=2, parallelism=2, completionMode="Indexed",
                          template=dict(metadata=dict(labels=dict(app="train")),
                                        spec=pod_spec(gpus, restartPolicy="Never"))))


def deployment(gpus=8):
    return dict(apiVersion="apps/v1", kind="Deployment", metadata=dict(name="serve"),
                spec=dict(replicas=2, selector=dict(matchLabels=dict(app="serve")),
                          template=dict(metadata=dict(labels=dict(app="serve")), spec=pod_spec(gpus))))


def statefulset(gpus=8):
    return dict(apiVersion="apps/v1", kind="StatefulSet", metadata=dict(name="train"),
                spec=dict(serviceName="train", replicas=2, selector=dict(matchLabels=dict(app="train")),
                          template=dict(metadata=dict(labels=dict(app="train")), spec=pod_spec(gpus))))


def jobset(gpus=8):
    def replicated(name, gpus, replicas):
        spec = pod_spec(gpus, restartPolicy="Never")
        spec["containers"][0]["name"] = name
        return dict(name=name, replicas=replicas,
                    template=dict(spec=dict(parallelism=1, completions=1, backoffLimit=0,
                                            template=dict(spec=spec))))

    return dict(apiVersion="jobset.x-k8s.io/v1alpha2", kind="JobSet", metadata=dict(name="train"),
                spec=dict(replicatedJobs=[replicated("coordinator", None, 1), replicated("workers", gpus, 4)]))


KINDS = dict(Pod=pod, Job=job, Deployment=deployment, StatefulSet=statefulset, JobSet=jobset)


def templates(manifest):
    """(metadata, spec) of every pod template of a manifest."""
    if manifest["kind"] == "Pod":
        return [manifest]
    if manifest["kind"] == "JobSet":
        return [r["template"]["spec"]["template"] for r in manifest["spec"]["replicatedJobs"]]
    return [manifest["spec"]["template"]]


def validate(manifest):
    if manifest["kind"] == "JobSet":
        for replicated in manifest["spec"]["replicatedJobs"]:
            k8s_validation.validate(dict(apiVersion="batch/v1", kind="Job",
                                         metadata=dict(name="%s-%s" % (manifest["metadata"]["name"], replicated["name"])),
                                         spec=replicated["template"]["spec"]))
    else:
        k8s_validation.validate(manifest)


def gpu_template(manifest):
    found = [t for t in templates(manifest) if any(
        (c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu") for c in t["spec"]["containers"])]
    assert len(found) == 1
    return found[0]


def env_of(cont):
    return dict((e["name"], e.get("value")) for e in cont.get("env", []))


# ------------------------------------------------------------------ every kind, every fabric

@pytest.mark.parametrize("fabric", sorted(NETWORKS))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_patch_validates_and_is_idempotent(kind, fabric):
    original = KINDS[kind]()
    validate(original)
    frozen = copy.deepcopy(original)
    once = gpudirect_workload(original, fabric, NETWORKS[fabric], gke_version=GKE)
    assert original == frozen  # the input is not modified
    validate(once)
    assert gpudirect_workload(once, fabric, NETWORKS[fabric], gke_version=GKE) == once

    template = gpu_template(once)
    annotations = template["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default"] + NETWORKS[fabric]
    trainer = template["spec"]["containers"][0]
    env = env_of(trainer)
    expected, _warnings = nccl.nccl_environment(fabric, GKE)
    assert env == expected
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    volumes = dict((v["name"], v) for v in template["spec"]["volumes"])
    for wanted in g.WORKLOAD_VOLUMES[fabric]:
        assert volumes[wanted["name"]] == wanted
    mounts = dict((m["mountPath"], m["name"]) for m in trainer["volumeMounts"])
    for name, path, _ro in g.GPU_CONTAINER_MOUNTS[fabric]:
        assert mounts[path] == name
    if fabric == "rdma":
        assert "initContainers" not in template["spec"] and len(template["spec"]["containers"]) == 1
        assert not any(k.startswith("devices.gke.io/") for k in annotations)
    else:
        daemon = template["spec"]["initContainers"][0]
        assert daemon["name"] == g.DAEMONS[fabric]["name"] and daemon["restartPolicy"] == "Always"
        assert daemon["image"] == g.images(fabric, GKE)["daemon"]
        assert "privileged" not in daemon["securityContext"]
        assert annotations["devices.gke.io/container.%s" % daemon["name"]] == g.device_annotation(fabric)[1]
    if kind == "JobSet":  # the coordinator without GPUs is left as it was
        assert once["spec"]["replicatedJobs"][0] == original["spec"]["replicatedJobs"][0]


# ------------------------------------------------------------------ the guide's manifests

def test_tcpxo_pod_matches_the_guides_section():
    patched = gpudirect_workload(pod(), "tcpxo", NETWORKS["tcpxo"], gke_version=GKE)
    annotations = patched["metadata"]["annotations"]
    guide_devices = ["/dev/nvidia%d" % i for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm",
                                                               "/dev/dmabuf_import_helper"]
    assert [d["path"] for d in yaml.safe_load(annotations["devices.gke.io/container.tcpxo-daemon"])] == guide_devices
    assert json.loads(annotations["networking.gke.io/interfaces"]) == [
        {"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": "eth%d" % i, "network": "vpc%d" % i} for i in range(1, 9)]
    daemon = patched["spec"]["initContainers"][0]
    assert daemon["securityContext"]["capabilities"]["add"] == ["NET_ADMIN", "NET_BIND_SERVICE"]
    assert {m["mountPath"] for m in daemon["volumeMounts"]} == {"/usr/local/nvidia/lib64", "/hostsysfs", "/hostprocsysfs"}
    assert "--num_hops=2" in daemon["args"][0] and "--num_nics" not in daemon["args"][0]
    trainer = patched["spec"]["containers"][0]
    assert env_of(trainer)["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert {"name": "aperture-devices", "mountPath": "/dev/aperture_devices"} in trainer["volumeMounts"]


def test_tcpx_pod_matches_the_guides_section():
    patched = gpudirect_workload(pod(), "tcpx", NETWORKS["tcpx"], gke_version="1.30.4-gke.1129000")
    daemon = patched["spec"]["initContainers"][0]
    assert daemon["command"][:2] == ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset"]
    assert daemon["command"][-2:] == ["--setup_param", "--verbose 128 2 0 "]
    assert daemon["securityContext"]["capabilities"]["add"] == ["NET_ADMIN"]
    assert daemon["image"].endswith("gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12")
    trainer = patched["spec"]["containers"][0]
    assert {"name": "tcpx-socket", "mountPath": "/tmp"} in trainer["volumeMounts"]
    assert {"name": "libraries", "mountPath": "/usr/local/nvidia/lib64", "readOnly": True} in trainer["volumeMounts"]
    assert env_of(trainer)["NCCL_ALGO"] == "Ring"
    on_134 = gpudirect_workload(pod(), "tcpx", NETWORKS["tcpx"], gke_version="1.34.1-gke.1829001")
    assert on_134["spec"]["initContainers"][0]["image"].endswith(":v2.0.15")
    assert env_of(on_134["spec"]["containers"][0])["NCCL_ALGO"] == "Ring,Tree"


# ------------------------------------------------------------------ sidecar modes

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_classic_sidecar(kind):
    patched = gpudirect_workload(KINDS[kind](), "tcpxo", NETWORKS["tcpxo"], gke_version="1.28.11-gke.1289000")
    validate(patched)
    spec = gpu_template(patched)["spec"]
    assert "initContainers" not in spec
    assert [c["name"] for c in spec["containers"]] == [spec["containers"][0]["name"], "tcpxo-daemon"]
    assert "restartPolicy" not in spec["containers"][-1]
    assert gpudirect_workload(patched, "tcpxo", NETWORKS["tcpxo"], gke_version="1.28.11-gke.1289000") == patched


def test_explicit_modes_and_switching():
    native = gpudirect_workload(job(), "tcpx", NETWORKS["tcpx"], sidecar="native")
    classic = gpudirect_workload(job(), "tcpx", NETWORKS["tcpx"], sidecar="classic")
    assert native["spec"]["template"]["spec"]["initContainers"][0]["name"] == "tcpx-daemon"
    assert classic["spec"]["template"]["spec"]["containers"][-1]["name"] == "tcpx-daemon"
    # re-patching moves the daemon rather than adding a second one
    assert gpudirect_workload(classic, "tcpx", NETWORKS["tcpx"], sidecar="native") == native
    assert gpudirect_workload(native, "tcpx", NETWORKS["tcpx"], sidecar="classic") == classic


def test_user_init_containers_stay_after_the_native_sidecar():
    manifest = pod(initContainers=[dict(name="fetch", image="busybox:1.36", command=["true"])])
    patched = gpudirect_workload(manifest, "tcpxo", NETWORKS["tcpxo"], gke_version=GKE)
    assert [c["name"] for c in patched["spec"]["initContainers"]] == ["tcpxo-daemon", "fetch"]
    validate(patched)


def test_native_sidecar_refused_on_old_gke():
    with pytest.raises(AnsibleFilterError, match="native sidecars need GKE >= 1.29"):
        gpudirect_workload(pod(), "tcpx", NETWORKS["tcpx"], gke_version="1.28.8-gke.1095000", sidecar="native")


def test_classic_sidecar_in_a_job_warns(monkeypatch):
    seen = []
    monkeypatch.setattr("ansible_collections.gpu_ops.cluster.plugins.filter.gpudirect.display.warning", seen.append)
    gpudirect_workload(job(), "tcpx", NETWORKS["tcpx"], sidecar="classic", gke_version="1.30")
    assert any("does not complete on its own" in w for w in seen)


# ------------------------------------------------------------------ re-patching and the user's env

def test_repatch_for_a_new_gke_version_equals_a_fresh_patch():
    old = gpudirect_workload(deployment(), "tcpx", NETWORKS["tcpx"], gke_version="1.33.5-gke.1")
    new = gpudirect_workload(old, "tcpx", NETWORKS["tcpx"], gke_version="1.34.1-gke.1829001")
    assert new == gpudirect_workload(deployment(), "tcpx", NETWORKS["tcpx"], gke_version="1.34.1-gke.1829001")
    assert "NCCL_NVLS_ENABLE" not in env_of(new["spec"]["template"]["spec"]["containers"][0])


def test_repatch_with_other_overrides():
    first = gpudirect_workload(pod(), "tcpxo", NETWORKS["tcpxo"], nccl_overrides=dict(NCCL_DEBUG="INFO"))
    second = gpudirect_workload(first, "tcpxo", NETWORKS["tcpxo"], nccl_overrides=dict(NCCL_DEBUG_SUBSYS=None))
    env = env_of(second["spec"]["containers"][0])
    assert env["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_SUBSYS" not in env
    assert second == gpudirect_workload(pod(), "tcpxo", NETWORKS["tcpxo"], nccl_overrides=dict(NCCL_DEBUG_SUBSYS=None))


def test_the_manifests_own_env_wins(monkeypatch):
    seen = []
    monkeypatch.setattr("ansible_collections.gpu_ops.cluster.plugins.filter.gpudirect.display.warning", seen.append)
    manifest = pod()
    manifest["spec"]["containers"][0]["env"] = [
        dict(name="NCCL_DEBUG", value="INFO"),
        dict(name="LD_LIBRARY_PATH", value="/opt/conda/lib"),
        dict(name="RANK", valueFrom=dict(fieldRef=dict(fieldPath="metadata.name"))),
    ]
    patched = gpudirect_workload(manifest, "tcpxo", NETWORKS["tcpxo"], gke_version=GKE)
    env = patched["spec"]["containers"][0]["env"]
    assert env[:3] == [dict(name="NCCL_DEBUG", value="INFO"),
                       dict(name="LD_LIBRARY_PATH", value="/opt/conda/lib:/usr/local/nvidia/lib64"),
                       manifest["spec"]["containers"][0]["env"][2]]
    assert any("keeps its own NCCL_DEBUG=INFO (recommended: WARN)" in w for w in seen)
    assert gpudirect_workload(patched, "tcpxo", NETWORKS["tcpxo"], gke_version=GKE) == patched
    validate(patched)


def test_ld_library_path_from_value_from_is_refused():
    manifest = pod()
    manifest["spec"]["containers"][0]["env"] = [
        dict(name="LD_LIBRARY_PATH", valueFrom=dict(configMapKeyRef=dict(name="paths", key="ld")))]
    with pytest.raises(AnsibleFilterError, match="sets LD_LIBRARY_PATH from valueFrom"):
        gpudirect_workload(manifest, "tcpxo", NETWORKS["tcpxo"])


def test_machine_type_from_the_node_selector():
    manifest = job()
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-b200"}
    patched = gpudirect_workload(manifest, "rdma", NETWORKS["rdma"])
    env = env_of(patched["spec"]["template"]["spec"]["containers"][0])
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/gib/configs/tuner_config_a4.txtpb"


def test_registry_override_and_network_objects():
    networks = [dict(apiVersion="networking.gke.io/v1", kind="Network", metadata=dict(name=n)) for n in NETWORKS["tcpx"]]
    patched = gpudirect_workload(pod(), "tcpx", networks, gke_version="1.34", registry="europe-docker.pkg.dev/p/mirror")
    assert patched["spec"]["initContainers"][0]["image"] == \
        "europe-docker.pkg.dev/p/mirror/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15"
    assert [i["network"] for i in json.loads(
        patched["metadata"]["annotations"]["networking.gke.io/interfaces"])] == ["default"] + NETWORKS["tcpx"]


def test_a_list_of_manifests():
    service = dict(apiVersion="v1", kind="Service", metadata=dict(name="train"),
                   spec=dict(clusterIP="None", selector=dict(app="train")))
    result = gpudirect_workload([service, statefulset()], "tcpxo", NETWORKS["tcpxo"], gke_version=GKE)
    assert result[0] == service
    assert result[1] == gpudirect_workload(statefulset(), "tcpxo", NETWORKS["tcpxo"], gke_version=GKE)
    cron = dict(apiVersion="batch/v1", kind="CronJob", metadata=dict(name="c"),
                spec=dict(schedule="* * * * *", jobTemplate=job()["spec"]))
    with pytest.raises(AnsibleFilterError, match="item 1: kind 'CronJob' is not supported"):
        gpudirect_workload([service, cron], "tcpxo", NETWORKS["tcpxo"])


# ------------------------------------------------------------------ refusals

def _refuse(manifest, match, fabric="tcpxo", **kwargs):
    with pytest.raises(AnsibleFilterError, match=match):
        networks = kwargs.pop("networks") if "networks" in kwargs else NETWORKS[fabric]
        gpudirect_workload(manifest, fabric, networks, **kwargs)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("gpus", [1, 4, 16])
def test_refuses_fewer_or_more_than_all_gpus(kind, gpus):
    _refuse(KINDS[kind](gpus=gpus), r"requests %d of the 8 GPUs .* needs all GPUs of the node" % gpus)


def test_refuses_a_pod_without_gpus():
    _refuse(pod(gpus=None), "requests 0 of the 8 GPUs")
    manifest = jobset()
    manifest["spec"]["replicatedJobs"] = manifest["spec"]["replicatedJobs"][:1]
    _refuse(manifest, "requests 0 of the 8 GPUs")


def test_gpus_summed_across_containers():
    manifest = pod(gpus=4)
    manifest["spec"]["containers"].append(container(name="second", gpus=4))
    patched = gpudirect_workload(manifest, "tcpxo", NETWORKS["tcpxo"], gke_version=GKE)
    assert all(env_of(c)["NCCL_FASTRAK_IFNAME"] for c in patched["spec"]["containers"])


@pytest.mark.parametrize("selector", [
    {"cloud.google.com/gke-gpu-sharing-strategy": "mps"},
    {"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"},
    {"cloud.google.com/gke-max-shared-clients-per-gpu": "2"},
    {"cloud.google.com/gke-gpu-partition-size": "1g.10gb"},
])
def test_refuses_shared_gpus_in_node_selector(selector):
    _refuse(pod(nodeSelector=selector), "selects shared GPUs")


def test_refuses_shared_gpus_in_node_affinity():
    affinity = dict(nodeAffinity=dict(requiredDuringSchedulingIgnoredDuringExecution=dict(nodeSelectorTerms=[
        dict(matchExpressions=[dict(key="cloud.google.com/gke-gpu-sharing-strategy", operator="In", values=["mps"])])])))
    _refuse(deployment_with(affinity=affinity), "selects shared GPUs", fabric="tcpx")


def deployment_with(**spec):
    manifest = deployment()
    manifest["spec"]["template"]["spec"].update(spec)
    return manifest


def test_refuses_another_accelerator():
    _refuse(pod(nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-l4"}),
            "selects cloud.google.com/gke-accelerator=nvidia-l4 but tcpxo runs on nvidia-h100-mega-80gb")
    _refuse(pod(nodeSelector={"node.kubernetes.io/instance-type": "a3-highgpu-8g"}),
            "but tcpxo runs on a3-megagpu-8g")


def test_refuses_host_network():
    _refuse(pod(hostNetwork=True), "hostNetwork pods cannot use the multi-network annotations")


def test_refuses_unknown_kinds_and_api_versions():
    _refuse(dict(apiVersion="apps/v1", kind="DaemonSet", metadata=dict(name="d"), spec={}),
            "kind 'DaemonSet' is not supported; supported: Deployment, Job, JobSet, Pod, StatefulSet")
    manifest = job()
    manifest["apiVersion"] = "batch/v1beta1"
    _refuse(manifest, "Job must have apiVersion batch/v1")
    _refuse("not a manifest", "the manifest must be a mapping")


def test_refuses_clashing_volumes_and_mounts():
    manifest = pod(volumes=[dict(name="sys", emptyDir={})])
    _refuse(manifest, "volume sys exists with another source")
    manifest = pod(volumes=[dict(name="scratch", emptyDir={})])
    manifest["spec"]["containers"][0]["volumeMounts"] = [dict(name="scratch", mountPath="/tmp")]
    _refuse(manifest, "already mounts volume scratch at /tmp", fabric="tcpx")


def test_refuses_gpus_in_init_containers():
    _refuse(pod(initContainers=[container(name="warmup", gpus=8)]), "init container warmup requests GPUs")


@pytest.mark.parametrize("networks, match", [
    (["vpc1", "vpc2"], "tcpxo needs 8 GPU NIC networks, 2 given"),
    (["vpc1"] * 8, "names repeat"),
    (["default"] + ["vpc%d" % i for i in range(1, 8)], "is the pod network"),
    (["VPC_1"] + ["vpc%d" % i for i in range(2, 9)], "is not a Network object name"),
    ("vpc1", "a list of 8 Network names is required"),
])
def test_refuses_bad_network_names(networks, match):
    _refuse(pod(), match, networks=networks)


def test_refuses_bad_options():
    _refuse(pod(), "fabric: 'ib' has no GKE workload patch", fabric="ib", networks=[])
    _refuse(pod(), "sidecar: 'sometimes' is not one of auto, native, classic", sidecar="sometimes")
    _refuse(pod(), "gke_version: 'latest' is not a GKE version", gke_version="latest")
    _refuse(pod(), "overrides.NCCL_NVLSTREE_MAX_CHUNKSIZE", nccl_overrides=dict(NCCL_NVLSTREE_MAX_CHUNKSIZE=1))


# ------------------------------------------------------------------ catalog filters

def test_gpudirect_profile_filter():
    entry = gpudirect_profile("tcpxo", gke_version=GKE)
    assert entry == g.describe("tcpxo", GKE)
    with pytest.raises(AnsibleFilterError, match="gpudirect_profile: unknown GPUDirect profile"):
        gpudirect_profile("efa")


def test_nccl_env_filter_formats():
    env = nccl_env("roce", interfaces=["mlx5_0"], ctrl_interface="bond0")
    assert env["NCCL_IB_HCA"] == "=mlx5_0"
    assert nccl_env("roce", interfaces=["mlx5_0"], format="k8s")[0] == dict(name="NCCL_NET", value="IB")
    assert nccl_env("socket", interfaces=["eth0"], format="exports").startswith("export NCCL_NET=Socket\n")
    assert "NCCL_NET=Socket\n" in nccl_env("socket", format="conf")
    with pytest.raises(AnsibleFilterError, match="format 'yaml' is not one of dict, k8s, exports, conf"):
        nccl_env("socket", format="yaml")
    with pytest.raises(AnsibleFilterError, match="nccl_env: fabric: unknown fabric 'efa'"):
        nccl_env("efa")


# ------------------------------------------------------------------ managed accelerator network profile (DRANET)

@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_dranet_patch_validates_and_claims_the_catalog_template(kind):
    """Every kind patched for DRANET is a valid manifest; its GPU pods claim the template the catalog describes,
    and that template is a valid resource.k8s.io/v1 object (Kubernetes 1.34+, the floor's minor)."""
    once = gpudirect_workload(KINDS[kind](), "rdma", [], gke_version="1.34.1-gke.1829001", dranet=True)
    validate(once)
    dranet = gpudirect_profile("rdma", gke_version="1.34.1-gke.1829001")["dranet"]
    template = gpu_template(once)
    assert "networking.gke.io/interfaces" not in template.get("metadata", {}).get("annotations", {})
    [claim] = template["spec"]["resourceClaims"]
    assert claim == {"name": dranet["claim"], "resourceClaimTemplateName": dranet["claim_template"]["metadata"]["name"]}
    assert template["spec"]["containers"][0]["resources"]["claims"] == [{"name": dranet["claim"]}]
    assert gpudirect_workload(copy.deepcopy(once), "rdma", [], gke_version="1.34.1-gke.1829001", dranet=True) == once
    claim_template = dict(dranet["claim_template"], metadata=dict(name="default-rdma", namespace="default"))
    k8s_validation.validate(claim_template, versions=(k8s_validation.NEWEST_KUBERNETES_VERSION,))
    broken = copy.deepcopy(claim_template)
    broken["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = "eight"
    with pytest.raises(k8s_validation.ManifestError, match="count"):  # the schema is really applied
        k8s_validation.validate(broken, versions=(k8s_validation.NEWEST_KUBERNETES_VERSION,))


def test_dranet_filter_refusals():
    with pytest.raises(AnsibleFilterError, match="gpudirect_workload: dranet: must be a boolean"):
        gpudirect_workload(pod(), "rdma", [], dranet="yes")
    with pytest.raises(AnsibleFilterError, match="gpudirect_workload: dranet: .*tcpx is not an RDMA profile"):
        gpudirect_workload(pod(), "tcpx", [], dranet=True)
