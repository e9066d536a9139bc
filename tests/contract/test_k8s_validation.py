# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""k8s_validation accepts valid manifests and rejects what an API server would reject."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation as kv

DAEMONSET = {
    "apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {"name": "tcpxo-daemon", "namespace": "kube-system", "labels": {"app": "tcpxo-daemon"}},
    "spec": {
        "selector": {"matchLabels": {"app": "tcpxo-daemon"}},
        "template": {
            "metadata": {"labels": {"app": "tcpxo-daemon"}},
            "spec": {
                "hostNetwork": True,
                "tolerations": [{"operator": "Exists"}],
                "containers": [{
                    "name": "daemon", "image": "us-docker.pkg.dev/example/tcpxo/daemon:v1.0.14",
                    "securityContext": {"privileged": True},
                    "resources": {"limits": {"nvidia.com/gpu": 8}, "requests": {"nvidia.com/gpu": 8}},
                    "volumeMounts": [{"name": "nvidia", "mountPath": "/usr/local/nvidia"}],
                }],
                "volumes": [{"name": "nvidia", "hostPath": {"path": "/home/kubernetes/bin/nvidia"}}],
            },
        },
    },
}
GNP = {"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "vpc1"},
       "spec": {"vpc": "a3-gpunet-1", "vpcSubnet": "a3-gpunet-1-subnet", "deviceMode": "NetDevice"}}
NETWORK = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "vpc1"},
           "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": "vpc1"}}}
CLUSTER_POLICY = {
    "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
    "spec": {
        "operator": {"defaultRuntime": "containerd"},
        "daemonsets": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "580.126.20",
                   "rdma": {"enabled": True, "useHostMofed": False}, "kernelModuleType": "open"},
        "toolkit": {"enabled": True, "env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]},
        "devicePlugin": {"enabled": True}, "dcgm": {"enabled": False}, "dcgmExporter": {"enabled": True},
        "gfd": {"enabled": True}, "nodeStatusExporter": {"enabled": False},
        "migManager": {"enabled": True, "config": {"name": "default-mig-parted-config", "default": "all-disabled"}},
        "mig": {"strategy": "single"},
        "ccManager": {"enabled": False, "defaultMode": "off"},
    },
}
NVIDIA_DRIVER = {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "h100"},
                 "spec": {"driverType": "gpu", "image": "driver", "repository": "nvcr.io/nvidia", "version": "580.126.20",
                          "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "usePrecompiled": False}}
NIC_CLUSTER_POLICY = {
    "apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy", "metadata": {"name": "nic-cluster-policy"},
    "spec": {
        "ofedDriver": {"image": "doca-driver", "repository": "nvcr.io/nvidia/mellanox", "version": "doca3.1.0-25.07-0.9.7.0-0",
                       "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "drain": {"enable": True}}},
        "rdmaSharedDevicePlugin": {
            "image": "k8s-rdma-shared-dev-plugin", "repository": "ghcr.io/mellanox", "version": "v1.5.3",
            "config": json.dumps({"configList": [{"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63,
                                                  "selectors": {"vendors": ["15b3"], "deviceIDs": ["101b"]}}]})},
        "secondaryNetwork": {"multus": {"image": "multus-cni", "repository": "ghcr.io/k8snetworkplumbingwg", "version": "v4.1.0"}},
        "nvIpam": {"image": "nvidia-k8s-ipam", "repository": "ghcr.io/mellanox", "version": "v0.3.7", "enableWebhook": False},
    },
}
MACVLAN = {"apiVersion": "mellanox.com/v1alpha1", "kind": "MacvlanNetwork", "metadata": {"name": "rdma-net"},
           "spec": {"networkNamespace": "default", "master": "ens8f0np0", "mode": "bridge", "mtu": 9000,
                    "ipam": json.dumps({"type": "nv-ipam", "poolName": "pool1"})}}
HOST_DEVICE_NETWORK = {"apiVersion": "mellanox.com/v1alpha1", "kind": "HostDeviceNetwork", "metadata": {"name": "hostdev-net"},
                       "spec": {"networkNamespace": "default", "resourceName": "hostdev",
                                "ipam": json.dumps({"type": "nv-ipam", "poolName": "pool1"})}}
IPOIB_NETWORK = {"apiVersion": "mellanox.com/v1alpha1", "kind": "IPoIBNetwork", "metadata": {"name": "ipoib-net"},
                 "spec": {"networkNamespace": "default", "master": "ibs3f1", "ipam": "{}"}}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-env", "namespace": "default"},
             "data": {"NCCL_DEBUG": "INFO"}}

VALID = [DAEMONSET, GNP, NETWORK, CLUSTER_POLICY, NVIDIA_DRIVER, NIC_CLUSTER_POLICY, MACVLAN, HOST_DEVICE_NETWORK,
         IPOIB_NETWORK, CONFIGMAP]


def _changed(doc, change):
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


@pytest.mark.parametrize("doc", VALID, ids=lambda d: d["kind"])
def test_valid_manifests_pass(doc):
    assert kv.problems(doc) == []
    kv.validate(doc)


def test_every_requested_custom_resource_has_a_schema():
    assert set(kv.custom_resources()) == {
        ("networking.gke.io", "Network"), ("networking.gke.io", "GKENetworkParamSet"),
        ("nvidia.com", "ClusterPolicy"), ("nvidia.com", "NVIDIADriver"), ("mellanox.com", "NicClusterPolicy"),
        ("mellanox.com", "MacvlanNetwork"), ("mellanox.com", "HostDeviceNetwork"), ("mellanox.com", "IPoIBNetwork"),
        ("nv-ipam.nvidia.com", "IPPool")}
    for custom in kv.custom_resources().values():
        # all of them are cluster-scoped but nv-ipam's IPPool, which lives in the Network Operator namespace
        assert custom.namespaced == (custom.kind == "IPPool"), custom.kind
        assert "status" in custom.subresources


@pytest.mark.parametrize("doc, expected", [
    (_changed(DAEMONSET, lambda d: d["spec"]["template"]["spec"].update(hostNetwrok=True)),
     "Additional properties are not allowed ('hostNetwrok' was unexpected)"),
    (_changed(DAEMONSET, lambda d: d["spec"].update(minReadySeconds="10")), "spec.minReadySeconds: '10' is not of type"),
    (_changed(DAEMONSET, lambda d: d["spec"]["template"]["metadata"]["labels"].update(app="other")),
     "`selector` does not match template `labels`"),
    (_changed(DAEMONSET, lambda d: d["spec"].pop("selector")), "spec.selector: required"),
    (_changed(DAEMONSET, lambda d: d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].update(
        {"nvidia.com/gpu": 4})), "must be equal to the nvidia.com/gpu limit"),
    (_changed(DAEMONSET, lambda d: d["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0].update(name="nvida")),
     "volume 'nvida' is not declared"),
    (_changed(DAEMONSET, lambda d: d["spec"]["template"]["spec"].update(restartPolicy="Never")),
     "restartPolicy: unsupported value 'Never'"),
    (_changed(DAEMONSET, lambda d: d["metadata"].update(name="TCPXO_Daemon")), "is not a DNS-1123 subdomain"),
    (_changed(DAEMONSET, lambda d: d["metadata"]["labels"].update(app="x" * 64)), "invalid label value"),
    (_changed(DAEMONSET, lambda d: d.update(apiVersion="extensions/v1beta1")), "unknown kind extensions/v1beta1 DaemonSet"),
    (_changed(CONFIGMAP, lambda d: d["data"].update({"bad key": "x"})), "a valid config key"),
    (_changed(CONFIGMAP, lambda d: d["metadata"].update(annotations={"a": "x" * (300 * 1024)})), "metadata.annotations: too long"),
    (_changed(GNP, lambda d: d["spec"].update(deviceMode="RDMA-X")), "spec.deviceMode: 'RDMA-X' is not one of ['DPDK-VFIO', 'NetDevice', 'RDMA']"),
    (_changed(GNP, lambda d: d["spec"].update(vpcSubnetwork="x")), "('vpcSubnetwork' was unexpected)"),
    (_changed(GNP, lambda d: d["metadata"].update(namespace="default")), "cluster-scoped and must not set a namespace"),
    (_changed(NETWORK, lambda d: d["spec"].update(type="Device2")), "'Device2' is not one of ['L2', 'L3', 'Device']"),
    (_changed(NETWORK, lambda d: d["spec"].pop("type")), "'type' is a required property"),
    (_changed(NETWORK, lambda d: d["spec"]["parametersRef"].pop("name")), "'name' is a required property"),
    (_changed(CLUSTER_POLICY, lambda d: d["spec"].pop("toolkit")), "'toolkit' is a required property"),
    (_changed(CLUSTER_POLICY, lambda d: d["spec"]["driver"].update(rdma={"enabled": "yes"})), "'yes' is not of type 'boolean'"),
    (_changed(CLUSTER_POLICY, lambda d: d["spec"]["mig"].update(strategy="auto")), "'auto' is not one of ['none', 'single', 'mixed']"),
    # YAML 1.1 reads an unquoted `off` as a boolean: the CRD enum catches it
    (_changed(CLUSTER_POLICY, lambda d: d["spec"]["ccManager"].update(defaultMode=False)), "False is not one of ['on', 'off', 'devtools']"),
    (_changed(NVIDIA_DRIVER, lambda d: d["spec"].update(driverType="cuda")), "'cuda' is not one of ['gpu', 'vgpu', 'vgpu-host-manager']"),
    (_changed(NVIDIA_DRIVER, lambda d: d["spec"].update(default=True)), "spec.nodeSelector"),
    (_changed(NIC_CLUSTER_POLICY, lambda d: d["spec"]["ofedDriver"].pop("version")), "'version' is a required property"),
    (_changed(NIC_CLUSTER_POLICY, lambda d: d["spec"].update(ofedDrivers={})), "('ofedDrivers' was unexpected)"),
    (_changed(MACVLAN, lambda d: d["spec"].update(mode="l2")), "'l2' is not one of ['bridge', 'private', 'vepa', 'passthru']"),
    (_changed(MACVLAN, lambda d: d["spec"].update(mtu=-1)), "-1 is less than the minimum of 0"),
    (_changed(HOST_DEVICE_NETWORK, lambda d: d["spec"].update(resourcePrefix="nvidia.com")), "('resourcePrefix' was unexpected)"),
])
def test_invalid_manifests_are_rejected(doc, expected):
    found = kv.problems(doc)
    assert any(expected in p for p in found), found
    with pytest.raises(kv.ManifestError) as raised:
        kv.validate(doc)
    assert expected in str(raised.value)


def test_every_problem_is_reported_not_only_the_first():
    doc = _changed(DAEMONSET, lambda d: (d["spec"]["template"]["spec"].update(bogus=1), d["metadata"].update(name="Bad_Name")))
    found = kv.problems(doc)
    assert any("bogus" in p for p in found) and any("Bad_Name" in p for p in found)


def test_unknown_custom_resource_kind_fails_loudly():
    found = kv.problems({"apiVersion": "example.com/v1", "kind": "GPUProfile", "metadata": {"name": "p"}, "spec": {}})
    assert len(found) == 1 and "unknown kind example.com/v1 GPUProfile" in found[0]


def test_wrong_version_of_a_known_custom_resource_fails():
    found = kv.problems(_changed(NETWORK, lambda d: d.update(apiVersion="networking.gke.io/v1alpha1")))
    assert "unknown kind networking.gke.io/v1alpha1 Network" in found[0]


def test_field_only_in_a_newer_kubernetes_is_rejected_for_the_oldest_supported_version():
    # PodSpec.hostnameOverride is not in the 1.33 API: a 1.33 cluster would drop it silently
    doc = _changed(DAEMONSET, lambda d: d["spec"]["template"]["spec"].update(hostnameOverride="node-a"))
    assert kv.problems(doc, versions=(kv.NEWEST_KUBERNETES_VERSION,)) == []
    found = kv.problems(doc)
    assert found and all("(Kubernetes 1.33)" in p for p in found), found


def test_not_a_mapping_and_missing_kind():
    assert "must be a mapping" in kv.problems(["x"])[0]
    assert "apiVersion and kind are required" in kv.problems({"metadata": {"name": "x"}})[0]


def test_v1_list_items_are_each_validated():
    doc = {"apiVersion": "v1", "kind": "List", "items": [GNP, _changed(NETWORK, lambda d: d["spec"].update(type="X"))]}
    found = kv.problems(doc)
    assert len(found) == 1 and found[0].startswith("items[1] Network/vpc1")


def test_validate_path_checks_every_document_of_every_file(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump_all([DAEMONSET, CONFIGMAP]), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(yaml.safe_dump(GNP), encoding="utf-8")
    assert kv.validate_path(str(tmp_path)) == 3

    broken = _changed(GNP, lambda d: d["spec"].update(deviceMode="x"))
    (tmp_path / "sub" / "c.yaml").write_text(yaml.safe_dump(broken), encoding="utf-8")
    with pytest.raises(kv.ManifestError) as raised:
        kv.validate_path(str(tmp_path))
    assert len(raised.value.problems) == 1 and "c.yaml#0" in raised.value.problems[0]


def test_validate_path_rejects_empty_and_missing_folders(tmp_path):
    with pytest.raises(kv.ManifestError, match="no Kubernetes manifests found"):
        kv.validate_path(str(tmp_path))
    with pytest.raises(kv.ManifestError, match="no such file or folder"):
        kv.validate_path(str(tmp_path / "missing"))


def test_unquoted_yaml_off_is_caught_in_a_file(tmp_path):
    text = yaml.safe_dump(CLUSTER_POLICY).replace("defaultMode: 'off'", "defaultMode: off")
    assert "defaultMode: off" in text
    (tmp_path / "cp.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(kv.ManifestError, match="is not one of"):
        kv.validate_path(str(tmp_path / "cp.yaml"))


def test_openapi_schema_of_a_runtime_crd_is_made_strict():
    schema = kv.openapi_to_jsonschema({
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "size": {"x-kubernetes-int-or-string": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "name": {"type": "string", "nullable": True}}},
        },
    })
    validator = kv.jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors({"metadata": {"name": "x", "labels": {}}, "spec": {
        "size": "10%", "free": {"anything": 1}, "name": None}}))
    errors = [e.message for e in validator.iter_errors({"spec": {"size": [], "typo": 1}})]
    assert any("'typo' was unexpected" in e for e in errors) and len(errors) == 2
