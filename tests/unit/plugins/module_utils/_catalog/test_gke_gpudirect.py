# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE GPUDirect catalog (plugins/module_utils/_catalog/gke_gpudirect.py): consistency of its tables and the lookups roles and modules use."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as g
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl


# ------------------------------------------------------------------ the keys other engineers read

@pytest.mark.parametrize("name", g.PROFILE_NAMES)
def test_every_profile_has_the_shared_keys(name):
    entry = g.profile(name)
    for key in ("machine_type", "accelerator_type", "gpu_nic_count", "device_mode", "gpus_per_node",
                "min_versions", "machine_types", "accelerator_types", "first_gpu_interface"):
        assert key in entry, key
    assert entry["machine_type"] in entry["machine_types"]
    assert g.MACHINES[entry["machine_type"]]["accelerator_type"] == entry["accelerator_type"]
    assert entry["device_mode"] in ("NetDevice", "RDMA")


def test_profile_facts():
    assert (g.PROFILES["tcpx"]["machine_type"], g.PROFILES["tcpx"]["accelerator_type"],
            g.PROFILES["tcpx"]["gpu_nic_count"]) == ("a3-highgpu-8g", "nvidia-h100-80gb", 4)
    assert (g.PROFILES["tcpxo"]["machine_type"], g.PROFILES["tcpxo"]["accelerator_type"],
            g.PROFILES["tcpxo"]["gpu_nic_count"]) == ("a3-megagpu-8g", "nvidia-h100-mega-80gb", 8)
    rdma = g.PROFILES["rdma"]
    assert rdma["machine_types"] == ["a3-ultragpu-8g", "a4-highgpu-8g"]
    assert rdma["accelerator_types"] == ["nvidia-b200", "nvidia-h200-141gb"]
    assert rdma["gpu_nic_count"] == 8 and rdma["device_mode"] == "RDMA"
    a4x = g.PROFILES["rdma-a4x"]
    assert (a4x["fabric"], a4x["machine_types"], a4x["accelerator_types"], a4x["gpus_per_node"], a4x["arch"]) == (
        "rdma", ["a4x-highgpu-4g"], ["nvidia-gb200"], 4, "arm64")
    assert a4x["gpu_nic_count"] == 4 and a4x["node_networks"] == 5 and rdma["node_networks"] == 9


def test_machines_of_a_profile_are_listed_by_profile_not_by_fabric():
    # rdma and rdma-a4x share the fabric, but each lists only its own machines
    assert "a4x-highgpu-4g" not in g.PROFILES["rdma"]["machine_types"]
    assert g.profile_machine("rdma-a4x") == "a4x-highgpu-4g"
    with pytest.raises(ValueError, match="does not run rdma-a4x"):
        g.profile_machine("rdma-a4x", "a4-highgpu-8g")


def test_fabric_facts_per_profile():
    for name in ("tcpx", "tcpxo"):
        entry = g.PROFILES[name]
        assert (entry["layout"], entry["mtu"], entry["gvnic_networks"], entry["network_profile"]) == (
            "vpc-per-nic", 8244, 0, None)
        assert g.network_profile_name(name, "us-central1-a") is None
    for name in ("rdma", "rdma-a4x"):
        entry = g.PROFILES[name]
        assert (entry["layout"], entry["mtu"], entry["gvnic_networks"]) == ("rdma", 8896, 1)
        assert g.network_profile_name(name, "us-central1-b") == "us-central1-b-vpc-roce"
        assert g.describe(name)["mtu"] == 8896
    assert g.PROFILES["rdma"]["gpudirect_strategy"] == "RDMA" and g.PROFILES["rdma-a4x"]["gpudirect_strategy"] is None
    assert g.MACHINES["a4x-highgpu-4g"]["boot_disk_types"] and all(
        t.startswith("hyperdisk-") for t in g.MACHINES["a4x-highgpu-4g"]["boot_disk_types"])


def test_rdma_gates_are_open_and_say_so():
    # no verified minimum for custom RDMA: every version passes (documented in the catalog)
    assert g.version_gate_error("rdma-a4x", "1.30.1-gke.100") is None
    assert g.PROFILES["rdma-a4x"]["min_versions"] == {} and g.ACCELERATOR_NETWORK_PROFILE_MIN_GKE == "1.34.1-gke.1829001"


def test_describe_works_for_every_profile():
    for name in g.PROFILE_NAMES:
        entry = g.describe(name)
        assert entry["name"] == name and entry["installer"]["namespace"] == "kube-system"


def test_unknown_profile_lists_allowed():
    with pytest.raises(ValueError, match="allowed: rdma, rdma-a4x, tcpx, tcpxo"):
        g.profile("tcp")


# ------------------------------------------------------------------ versions

def test_version_gates():
    assert g.version_gate_error("tcpx", "1.27.7-gke.1121000") is None
    assert "below the minimum 1.28.11-gke.1289000" in g.version_gate_error("tcpxo", "1.28.10-gke.1000000")
    assert "older than 1.28" in g.version_gate_error("tcpxo", "1.27.16-gke.1000000")
    assert g.version_gate_error("tcpxo", "1.35.0-gke.100") is None
    assert g.version_gate_error("rdma", "1.31.4-gke.1183000") is None  # no table: every version passes


@pytest.mark.parametrize("version, minor", [
    ("1.34", (1, 34)), ("1.34.1", (1, 34)), ("1.34.1-gke.1829001", (1, 34)), ("v1.30.4-gke.1129000", (1, 30)),
    ("v1.29.0+k3s1", (1, 29)),
])
def test_gke_minor(version, minor):
    assert g.gke_minor(version) == minor


@pytest.mark.parametrize("version", ["", "latest", "1", "one.two"])
def test_gke_minor_refuses(version):
    with pytest.raises(ValueError, match="not a GKE version"):
        g.gke_minor(version)


def test_native_sidecar_gate():
    assert g.NATIVE_SIDECAR_MIN_GKE == "1.29"
    assert not g.native_sidecar_supported("1.28.15-gke.3163000")
    assert g.native_sidecar_supported("1.29.3-gke.1093000")
    assert g.native_sidecar_supported("v1.34.1-gke.1829001")


# ------------------------------------------------------------------ releases and images

def test_tcpx_release_follows_the_gke_version():
    assert g.release("tcpx")["installer"]["tag"] == "v3.1.9"
    assert g.release("tcpx", "1.33.5-gke.1")["daemon"]["tag"] == "v2.0.12"
    new = g.release("tcpx", "1.34.1-gke.1829001")
    assert (new["installer"]["tag"], new["daemon"]["tag"], new["nccl"]) == ("v3.1.12", "v2.0.15", "2.19.4")
    assert g.release("tcpx", "1.35")["name"] == "tcpx-v3.1.12"


def test_tcpxo_release_pair():
    rel = g.release("tcpxo", "1.32.2-gke.1489001")
    assert (rel["installer"]["tag"], rel["daemon"]["tag"], rel["released"]) == ("v1.0.15", "v1.0.21", "2026-01-09")


def test_every_release_is_a_coupled_pair():
    for fabric, releases in g.RELEASES.items():
        for rel in releases:
            assert rel["installer"]["repository"].startswith("gpudirect-")
            if fabric in g.DAEMONS:
                assert rel["daemon"]["repository"].split("/", 1)[0] == rel["installer"]["repository"].split("/", 1)[0]
            else:
                assert rel["daemon"] is None
            assert rel["nccl_env"] in nccl.NCCL_ENVS[fabric]


def test_images_and_registry_override():
    images = g.images("tcpxo")
    assert images["installer"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
    assert images["daemon"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
    assert images["nri_injector"] == ("gcr.io/gke-release/nri-device-injector@sha256:"
                                      "6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970")
    assert re.match(r"^docker\.io/library/ubuntu:24\.04@sha256:[0-9a-f]{64}$", images["pre_install"])
    assert re.match(r"^gke\.gcr\.io/pause:3\.8@sha256:[0-9a-f]{64}$", images["pause"])
    assert g.images("tcpx")["pre_install"] is None
    mirrored = g.images("tcpx", "1.34", registry="europe-docker.pkg.dev/p/mirror/")
    assert mirrored["daemon"] == "europe-docker.pkg.dev/p/mirror/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15"
    assert mirrored["nri_injector"].startswith("europe-docker.pkg.dev/p/mirror/nri-device-injector@sha256:")
    rdma = g.images("rdma")
    assert rdma["daemon"] is None and rdma["test"].endswith("gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1")


def test_describe_is_a_deep_copy():
    entry = g.describe("tcpx", "1.34")
    entry["installer"]["accelerators"].append("x")
    entry["min_versions"]["9.9"] = "x"
    assert "x" not in g.INSTALLERS["tcpx"]["accelerators"] and "9.9" not in g.PROFILES["tcpx"]["min_versions"]
    assert entry["images"]["daemon"].endswith(":v2.0.15") and entry["native_sidecar"] is True
    assert entry["nccl_bandwidth_threshold"] == 25.0
    assert entry["daemon"]["device_annotation"]["key"] == "devices.gke.io/container.tcpx-daemon"
    assert g.describe("tcpxo")["nccl_bandwidth_threshold"] == 30.0
    rdma = g.describe("rdma")
    assert rdma["daemon"] is None and rdma["nri_injector"] is None and rdma["nccl_env_script"] == g.GIB_ENV_SCRIPT


def test_installer_accelerators_match_the_machines():
    for name, installer in g.INSTALLERS.items():
        if name not in g.PROFILES:
            # the A4X profile comes with the cloud side of issue 21; until then only its installer row exists
            assert name == "rdma-a4x", name
            continue
        assert sorted(installer["accelerators"]) == g.PROFILES[name]["accelerator_types"]
        assert installer["namespace"] == "kube-system"
    for name in g.DAEMONS:
        assert g.PROFILES[name]["accelerator_type"] in g.NRI_INJECTOR["accelerators"]
    assert g.INSTALLERS["rdma"]["command"] == ["/scripts/container_entry.sh", "install"]
    # every in-container path an installer copies to is under one of its mounts
    for installer in g.INSTALLERS.values():
        copies = [dict(src=installer["copy_from"], dest=installer["copy_to"])] + installer["extra_copies"]
        for copy_ in copies:
            assert any(copy_["dest"].startswith(path) for path in installer["mounts"].values()), copy_
        assert set(installer["mounts"]) == set(installer["host_paths"])


# ------------------------------------------------------------------ annotations

def test_device_annotations_are_the_guides():
    key, value = g.device_annotation("tcpxo")
    assert key == "devices.gke.io/container.tcpxo-daemon"
    paths = [item["path"] for item in yaml.safe_load(value)]
    assert paths == ["/dev/nvidia%d" % i for i in range(8)] + ["/dev/nvidiactl", "/dev/nvidia-uvm",
                                                               "/dev/dmabuf_import_helper"]
    key, value = g.device_annotation("tcpx")
    assert key == "devices.gke.io/container.tcpx-daemon"
    assert "/dev/dmabuf_import_helper" not in value and len(yaml.safe_load(value)) == 10
    assert g.device_annotation("rdma") is None


def test_interfaces_annotation():
    tcpx = json.loads(g.interfaces_annotation("tcpx", ["vpc1", "vpc2", "vpc3", "vpc4"]))
    assert tcpx == [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": "eth%d" % i, "network": "vpc%d" % i} for i in range(1, 5)]
    rdma = json.loads(g.interfaces_annotation("rdma", ["rdma-%d" % i for i in range(8)]))
    assert [e["interfaceName"] for e in rdma] == ["eth0"] + ["eth%d" % i for i in range(2, 10)]


# ------------------------------------------------------------------ RDMA profiles (issue 21, Kubernetes side)

A4X = "rdma-a4x"
needs_a4x = pytest.mark.skipif(A4X not in g.PROFILES, reason="profile rdma-a4x is not in PROFILES yet (cloud side of issue 21)")


def test_rdma_network_names_follow_the_nic_count():
    assert g.rdma_network_names("rdma") == ["rdma-%d" % i for i in range(8)]
    assert g.rdma_profile_names()[0] == "rdma" and "tcpxo" not in g.rdma_profile_names()
    with pytest.raises(ValueError, match="tcpxo is not an RDMA profile; RDMA profiles: rdma"):
        g.rdma_network_names("tcpxo")


def test_rdma_describe_says_what_the_roles_need():
    rdma = g.describe("rdma")
    assert rdma["pod_networks"] == ["rdma-%d" % i for i in range(8)]
    assert rdma["interfaces"] == ["eth%d" % i for i in range(2, 10)]
    assert rdma["nri_injector_needed"] is False and rdma["node_arch"] == "amd64"
    assert rdma["nccl_bandwidth_threshold"] == 100.0
    assert g.describe("tcpxo")["pod_networks"] is None and g.describe("tcpxo")["nri_injector_needed"] is True
    assert rdma["images"]["installer"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    # the release facts without its image references (those are resolved under "images")
    assert rdma["release"]["name"] == "gib-v1.1.1" and not set(rdma["release"]) & {"installer", "daemon", "test"}


def test_a4x_rows_keyed_by_profile_name():
    """The rows this side owns for A4X exist before the profile does: arm64 images, one digest-pinned."""
    installer = g.INSTALLERS[A4X]
    assert installer["accelerators"] == ["nvidia-gb200"] and installer["node_arch"] == ["arm64"]
    assert installer["arch_label"] == "kubernetes.io/arch"
    assert installer["name"] == "nccl-rdma-installer" and installer["command"] == g.INSTALLERS["rdma"]["command"]
    assert "node_arch" not in g.INSTALLERS["rdma"]
    own = g.ARCH_IMAGES[A4X]
    assert own["arch"] == "arm64"
    assert re.match(r"^us-docker\.pkg\.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64:v1\.1\.2@sha256:[0-9a-f]{64}$",
                    g.image_ref(own["installer"]))
    assert g.WORKLOAD_VOLUMES[A4X] == g.WORKLOAD_VOLUMES["rdma"] and g.GPU_CONTAINER_MOUNTS[A4X] == g.GPU_CONTAINER_MOUNTS["rdma"]
    assert g.NCCL_BANDWIDTH_THRESHOLDS[A4X] < g.NCCL_BANDWIDTH_THRESHOLDS["rdma"]


@needs_a4x
def test_a4x_profile_resolves_to_arm64_images_and_four_networks():
    entry = g.describe(A4X)
    assert entry["gpus_per_node"] == 4 and entry["gpu_nic_count"] == 4
    assert entry["pod_networks"] == ["rdma-0", "rdma-1", "rdma-2", "rdma-3"]
    assert "nccl-plugin-gib-arm64" in entry["images"]["installer"] and entry["node_arch"] == "arm64"
    assert sorted(g.INSTALLERS[A4X]["accelerators"]) == entry["accelerator_types"]


# ------------------------------------------------------------------ managed accelerator network profile (DRANET)

def test_dranet_claim_template_requests_every_rdma_nic_of_the_node():
    template = g.dranet_claim_template("rdma")
    assert template["apiVersion"] == "resource.k8s.io/v1" and template["kind"] == "ResourceClaimTemplate"
    assert template["metadata"] == {"name": "default-rdma"}
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request == {"name": "req-mrdma", "exactly": {"deviceClassName": "mrdma.google.com",
                                                        "allocationMode": "ExactCount", "count": 8}}
    a4x = g.dranet_claim_template("rdma-a4x", name="team-rdma", namespace="ml")
    assert a4x["metadata"] == {"name": "team-rdma", "namespace": "ml"}
    assert a4x["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 4
    with pytest.raises(ValueError, match="tcpxo is not an RDMA profile; RDMA profiles: rdma, rdma-a4x"):
        g.dranet_claim_template("tcpxo")


@pytest.mark.parametrize("version, refused", [
    ("1.34.1-gke.1829001", False), ("v1.34.1-gke.1829001", False), ("1.35.0-gke.100", False), ("1.34", False),
    ("1.34.1-gke.1829000", True), ("1.33.5-gke.1162000", True), ("1.33", True),
])
def test_dranet_version_floor(version, refused):
    error = g.dranet_version_error(version)
    assert (error is not None) == refused
    if refused:
        assert error == "GKE %s is below 1.34.1-gke.1829001, the floor of accelerator_network_profile auto (DRANET)" % version


def test_describe_carries_dranet_for_rdma_profiles_only():
    assert g.describe("tcpxo")["dranet"] is None
    dranet = g.describe("rdma", gke_version="1.33.5-gke.1162000")["dranet"]
    assert dranet["device_class"] == "mrdma.google.com" and dranet["claim"] == "rdma"
    assert dranet["claim_template"] == g.dranet_claim_template("rdma")
    assert "below 1.34.1-gke.1829001" in dranet["version_error"]
    assert g.describe("rdma-a4x", gke_version="1.34.1-gke.1829001")["dranet"]["version_error"] is None
