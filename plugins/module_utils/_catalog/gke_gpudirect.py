# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GKE GPUDirect catalog: one table per fact, read by modules, filters and roles.

Everything a role, module or filter needs to know about the machines, versions, images and DaemonSets
of GPUDirect-TCPX (A3 High), GPUDirect-TCPXO (A3 Mega) and GPUDirect-RDMA (A3 Ultra / A4, gIB NCCL
plugin) lives here, once. The NCCL environments of every fabric are in ``_catalog/nccl.py``, the
workload patcher that applies both in ``plugin_utils/_gpudirect/workload.py``. Roles read the catalog
through the ``gpu_ops.cluster.gpudirect_profile`` and ``gpu_ops.cluster.nccl_env`` filters; they never
copy a value.

Sources (see the shared research notes gke-gpudirect.md and the seed guide):
- machine types, accelerator labels, GPU-NIC counts, installer DaemonSets, RxDM daemon containers,
  NRI device injector, pod annotations: GoogleCloudPlatform/container-engine-accelerators (CEA)
  gpudirect-tcpx/, gpudirect-tcpxo/, gpudirect-rdma/, nri_device_injector/ manifests.
- MTU 8244: every peer (Cluster Toolkit multivpc, xpk, the GKE guide).
- minimum GKE patch versions: TCPX from the guide's requirements table as encoded by Cluster Toolkit
  (gpu_direct.tf, Sept 2024); TCPXO from CEA gpudirect-tcpxo/README.md "Recommended GKE versions"
  (latest entry per minor). No table was verified for RDMA: the gate accepts every version.
- image pairs: CEA gpudirect-tcpx/README.md (releases Feb 15 2024 and Jun 22 2026, the latter for
  GKE 1.34+ / devmem-TCP), gpudirect-tcpxo/README.md (Jan 9 2026), gpudirect-rdma/ manifests.
- NCCL environments: the guide's "recommended NCCL configuration" section (TCPX classic), CEA
  nccl-config.yaml after commit 0e5609b0 (TCPX GKE 1.34+), the TCPXO Jan 9 2026 release notes /
  nccl-env-profile.sh, the gIB ``set_nccl_env.sh`` values (A3 Ultra / A4), NCCL's documented
  variables for bare metal.
- bandwidth thresholds: Cluster Toolkit A3 High / A3 Mega validation playbooks (2 nodes, all_gather).
"""

from __future__ import annotations

import copy
import json
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver


DEFAULT_MTU = 8244
MTU_RANGE = (1300, 8896)  # compute.v1 Network.mtu

# --------------------------------------------------------------------------------------------
# Machines
# --------------------------------------------------------------------------------------------

# machine type -> facts of the machine (GKE node label values, GPUs per node, GPUDirect fabric, host CPU
# architecture). ``boot_disk_types``: the only boot disk types the machine takes (None: any), ``default_disk_type``
# what the collection asks for when the pool names none (GKE's own default, pd-balanced, is refused there).
# A4X (a4x-highgpu-4g, 4 x GB200 on arm64 Grace hosts, 4 RDMA NICs + 1 extra gVNIC, Hyperdisk only): NVIDIA AICR
# gke-gb200 doc and https://cloud.google.com/compute/docs/accelerator-optimized-machines (A4X series); RDMA NIC
# counts (8 MRDMA NICs on A3 Ultra / A4): https://cloud.google.com/vpc/docs/rdma-network-profiles.
# Hyperdisk on A4X checked 2026-11-26 against GoogleCloudPlatform/cluster-toolkit@v1.95.0:examples/gke-a4x/gke-a4x.yaml
# (the pool's disk_type: hyperdisk-balanced); Google's own A4X disk table was not read (unverified there).
_HYPERDISK = ("hyperdisk-balanced", "hyperdisk-extreme", "hyperdisk-ml")
MACHINES = {
    "a3-highgpu-8g": dict(description="A3 High", accelerator_type="nvidia-h100-80gb", gpus_per_node=8, fabric="tcpx",
                          arch="amd64", boot_disk_types=None, default_disk_type=None),
    "a3-megagpu-8g": dict(description="A3 Mega", accelerator_type="nvidia-h100-mega-80gb", gpus_per_node=8,
                          fabric="tcpxo", arch="amd64", boot_disk_types=None, default_disk_type=None),
    "a3-ultragpu-8g": dict(description="A3 Ultra", accelerator_type="nvidia-h200-141gb", gpus_per_node=8,
                           fabric="rdma", arch="amd64", boot_disk_types=None, default_disk_type=None),
    "a4-highgpu-8g": dict(description="A4", accelerator_type="nvidia-b200", gpus_per_node=8, fabric="rdma",
                          arch="amd64", boot_disk_types=None, default_disk_type=None),
    "a4x-highgpu-4g": dict(description="A4X", accelerator_type="nvidia-gb200", gpus_per_node=4, fabric="rdma",
                           arch="arm64", boot_disk_types=_HYPERDISK, default_disk_type="hyperdisk-balanced"),
}

# GKE node labels that identify a GPU node's hardware.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
MACHINE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# node labels / selectors that mean "this GPU is shared": GPUDirect refuses them.
GPU_SHARING_LABELS = (
    "cloud.google.com/gke-gpu-sharing-strategy",      # time-sharing or MPS
    "cloud.google.com/gke-max-shared-clients-per-gpu",
    "cloud.google.com/gke-gpu-partition-size",        # multi-instance GPU
)


# The GPU-NIC fabric a profile needs on the cloud side (gke_multinetwork, gpu_nodepool, gcp_gpu_vpcs):
# - "vpc-per-nic" (TCPX, TCPXO): one custom-mode VPC + one subnet + one internal firewall rule per GPU NIC,
#   MTU 8244 (every peer: Cluster Toolkit multivpc, xpk, the GKE guide).
# - "rdma" (A3 Ultra, A4, A4X): one extra gVNIC VPC (one subnet, an internal firewall rule) and one RoCE VPC
#   created with the zone's RDMA network profile (Network.networkProfile =
#   projects/{project}/global/networkProfiles/{zone}-vpc-roce, compute v1; the network is zonal: nodes only in
#   that zone, subnets only in its region; MRDMA NICs only) holding one subnet per RDMA NIC; MTU 8896 on both
#   (xpk a3_ultra.yaml blueprint; CTK gke-a4.yaml / modules/network/gpu-rdma-vpc; checked 2026-11-26 at
#   GoogleCloudPlatform/cluster-toolkit@v1.95.0:modules/network/gpu-rdma-vpc/variables.tf and
#   modules/network/vpc/variables.tf, both "mtu" default 8896, which gke-a3-ultragpu.yaml and gke-a4.yaml
#   keep). No VPC firewall rule on the
#   RoCE VPC: RoCE VPC networks support only regional network firewall policies of type RDMA_ROCE_POLICY and
#   allow all ingress/egress by implied rules (https://cloud.google.com/firewall/docs/firewall-for-roce).
#   Sources: https://cloud.google.com/vpc/docs/rdma-network-profiles; shared research anchors-2026-11-25.md §4.
FABRIC_LAYOUTS = ("vpc-per-nic", "rdma")
RDMA_MTU = 8896
RDMA_NETWORK_PROFILE_SUFFIX = "vpc-roce"     # the profile of zone Z is named "Z-vpc-roce"
RDMA_NIC_TYPE = "MRDMA"                      # how ConnectX NICs appear in Compute Engine
# Kubernetes Network names of the RDMA fabric (CEA gpudirect-rdma manifests; AICR asserts these exact names)
RDMA_GVNIC_NETWORK = "gvnic-1"
RDMA_NETWORK_PREFIX = "rdma-"

# The managed alternative: node pool networkConfig.acceleratorNetworkProfile "auto" (container v1
# NodeNetworkConfig, "For now the only valid value is auto"; GKE creates the accelerator VPCs) with DRANET.
# Floor: GKE 1.34.1-gke.1829001 (Cluster Toolkit enable_dranet precondition, PR #5418; the GKE "configure
# automated networking for accelerators" page). Checked 2026-11-26: GoogleCloudPlatform/cluster-toolkit@v1.95.0:
# modules/compute/gke-node-pool/gpu_direct.tf (dranet_min_version) and main.tf (its precondition message).
# Node label that turns the DRANET driver on:
ACCELERATOR_NETWORK_PROFILE = "auto"
ACCELERATOR_NETWORK_PROFILE_MIN_GKE = "1.34.1-gke.1829001"
DRANET_NODE_LABEL = ("cloud.google.com/gke-networking-dra-driver", "true")

# The workload side of the managed profile. GKE creates the accelerator VPCs, subnets and the Kubernetes networking
# itself ("by using a single parameter when creating a node pool, GKE provides all the necessary cloud and Kubernetes
# networking resources": https://cloud.google.com/kubernetes-engine/docs/how-to/config-auto-net-for-accelerators),
# so the collection builds no RoCE/gVNIC VPC and applies no GKENetworkParamSet/Network objects; from 1.34.1-gke.1829001
# GKE installs the networking DeviceClasses itself
# (https://cloud.google.com/kubernetes-engine/docs/how-to/allocate-network-resources-dra). The gIB NCCL plugin
# installer is still needed: Cluster Toolkit's DRANET blueprint installs it next to enable_dranet
# (GoogleCloudPlatform/cluster-toolkit@v1.95.0:examples/gke-a4x/gke-a4x.yaml, gib install: true), and the managed
# test pods mount /home/kubernetes/bin/gib. Pods claim the node's RDMA NICs through a ResourceClaimTemplate
# (resource.k8s.io/v1) of device class mrdma.google.com, one request of ExactCount = the profile's RDMA NICs, named in
# spec.resourceClaims and in the GPU containers' resources.claims, with no networking.gke.io/interfaces annotation:
# GoogleCloudPlatform/container-engine-accelerators@992db81257553607f1477945f1b3219632991829:
# gpudirect-rdma/nccl-test-managed-rdma.yaml (claim "rdma", request "req-mrdma", ExactCount 8 on A3 Ultra / A4).
# Template name: Cluster Toolkit's (cluster-toolkit@v1.95.0:modules/compute/gke-node-pool/resource-claim-template.yaml.tftpl,
# "default-rdma", which pods of a Toolkit-built cluster already name).
DRANET_API_VERSION = "resource.k8s.io/v1"
DRANET_DEVICE_CLASS = "mrdma.google.com"
DRANET_CLAIM_TEMPLATE = "default-rdma"
DRANET_CLAIM = "rdma"
DRANET_REQUEST = "req-mrdma"


def _profile_entry(fabric, machine_types, min_versions=(), **fields):
    """A profile: its own facts, its machines' (the first is the default) and the minimum patch of each minor."""
    machine = MACHINES[machine_types[0]]
    entry = dict(
        fabric=fabric,
        machine_type=machine_types[0],
        accelerator_type=machine["accelerator_type"],
        gpus_per_node=machine["gpus_per_node"],
        arch=machine["arch"],
        min_versions=dict((".".join(version.split(".")[:2]), version) for version in min_versions),
        layout="vpc-per-nic",
        mtu=DEFAULT_MTU,
        gvnic_networks=0,          # extra gVNIC node networks besides the GPU NICs'
        network_profile=None,      # suffix of the zone's network profile of the GPU-NIC VPC
        gpudirect_strategy=None,   # NodeConfig.gpuDirectConfig.gpuDirectStrategy of the pool
    )
    entry.update(fields)
    entry["machine_types"] = list(machine_types)
    entry["accelerator_types"] = sorted(set(MACHINES[m]["accelerator_type"] for m in entry["machine_types"]))
    # every additional node network of a pool: the extra gVNICs, then one per GPU NIC
    entry["node_networks"] = entry["gvnic_networks"] + entry["gpu_nic_count"]
    return entry


_RDMA_FABRIC = dict(layout="rdma", mtu=RDMA_MTU, gvnic_networks=1, network_profile=RDMA_NETWORK_PROFILE_SUFFIX,
                    device_mode="RDMA", first_gpu_interface=2)

# profile -> GKE facts. ``machine_type`` / ``accelerator_type`` name the profile's default machine;
# ``machine_types`` / ``accelerator_types`` list every machine of the profile. ``first_gpu_interface``:
# the pods' first GPU NIC is eth<n>. ``min_versions``: the oldest patch of each minor that works.
# RDMA version gates: unverified. Google's requirement table for custom GPUDirect-RDMA on A3 Ultra / A4 / A4X
# was not readable in the research corpus (anchors-2026-11-25.md §4 "Not re-verified"), and no repository
# states one (checked 2026-11-26): GoogleCloudPlatform/cluster-toolkit@v1.95.0:
# modules/compute/gke-node-pool/gpu_direct.tf gates only a3-highgpu-8g and a3-megagpu-8g; its
# gke-a3-ultragpu.yaml, gke-a4.yaml and gke-a4x.yaml blueprints pick version_prefix "1.35." (a choice, not a
# floor: gke-a4.yaml had 1.32. at v1.50/v1.60, 1.33. at v1.70/v1.80); container-engine-accelerators (master
# 992db812, 2026-06-11) has no gpudirect-rdma/README.md with "Recommended GKE versions" as it has for TCPXO;
# AICR's GB200 recipes ask for Kubernetes >= 1.34 for their own DRA use. So both rdma gates accept every
# version; GKE itself refuses a version that does not offer the machine, and gpu_nodepool's offers preflight
# reads the zone's machine types first.
# ``gpudirect_strategy``: container v1 GPUDirectConfig enum "RDMA: GPUDirect-RDMA on A3 Ultra, and A4 machine
# types" - A4X is not named there, so the a4x profile does not send it (unverified either way).
PROFILES = {
    "tcpx": _profile_entry(
        "tcpx", ("a3-highgpu-8g",), description="GPUDirect-TCPX on A3 High",
        gpu_nic_count=4, device_mode="NetDevice", first_gpu_interface=1,
        min_versions=("1.27.7-gke.1121000", "1.28.8-gke.1095000", "1.29.3-gke.1093000", "1.30.2-gke.1023000")),
    "tcpxo": _profile_entry(
        "tcpxo", ("a3-megagpu-8g",), description="GPUDirect-TCPXO on A3 Mega",
        gpu_nic_count=8, device_mode="NetDevice", first_gpu_interface=1,
        min_versions=("1.28.11-gke.1289000", "1.29.6-gke.1254000", "1.30.4-gke.1129000", "1.31.1-gke.2008000",
                      "1.32.2-gke.1489001")),
    # eth1 is the node's second gVNIC; upstream pods attach eth2..eth9 to the RDMA networks
    "rdma": _profile_entry(
        "rdma", ("a3-ultragpu-8g", "a4-highgpu-8g"),
        description="GPUDirect-RDMA (RoCE, gIB NCCL plugin) on A3 Ultra and A4",
        gpu_nic_count=8, gpudirect_strategy="RDMA", **_RDMA_FABRIC),
    "rdma-a4x": _profile_entry(
        "rdma", ("a4x-highgpu-4g",), description="GPUDirect-RDMA (RoCE, gIB NCCL plugin) on A4X (GB200, arm64)",
        gpu_nic_count=4, **_RDMA_FABRIC),
}

PROFILE_NAMES = sorted(PROFILES)

# Interface naming in GKE multi-network pods.
# the Kubernetes objects of GKE multi-networking (GKENetworkParamSet, Network) and a NIC's default device mode
NETWORK_API_GROUP = "networking.gke.io"
DEFAULT_DEVICE_MODE = "NetDevice"
INTERFACE_PREFIX = "eth"
CONTROL_INTERFACE = "eth0"
DEFAULT_NETWORK = "default"

# Native sidecars (initContainers with restartPolicy: Always) need GKE >= 1.29 (TCPXO best-practice.md).
NATIVE_SIDECAR_MIN_GKE = "1.29"

# Two-node all_gather "# Avg bus bandwidth" pass thresholds (GB/s). tcpx / tcpxo: Cluster Toolkit
# validation playbooks (A3 High / A3 Mega). rdma / rdma-a4x: no published pass figure exists (neither
# Google's guides, Cluster Toolkit, xpk nor CEA state one); the value is derived, not published: a quarter
# of the nodes' RDMA line rate (A3 Ultra / A4: 8 x 400 Gbit/s = 400 GB/s, A4X: 4 x 400 Gbit/s = 200 GB/s,
# Google's machine-type pages), averaged over the test's 1M-8G range like the TCPX/TCPXO figures.
# A socket fallback stays far below it (AICR measured ~4 GB/s without TCPXO). Override with
# nccl_test_threshold_gbps once a run of your own machines gives a better floor.
NCCL_BANDWIDTH_THRESHOLDS = {"tcpx": 25.0, "tcpxo": 30.0, "rdma": 100.0, "rdma-a4x": 50.0}

# Large-message floors of the same two-node all_gather / all_reduce runs: (message size in bytes, bus bandwidth GB/s at
# that size or above). The size is the top of the nccl_test role's range for the profile (512M, 1G, 8G); the floor is
# derived, not published: half the nodes' GPU NIC line rate (A3 High 4 x 200 Gbit/s = 100 GB/s, A3 Mega 8 x 200 Gbit/s =
# 200 GB/s, A3 Ultra / A4 8 x 400 Gbit/s = 400 GB/s, A4X 4 x 400 Gbit/s = 200 GB/s). The guide's published A3 High and A3 Mega
# tables reach 71 and 122 GB/s there; a socket fallback stays at a few GB/s (validate's performance phase judges it).
NCCL_LARGE_MESSAGE_FLOORS = {"tcpx": (512 * 2 ** 20, 50.0), "tcpxo": (2 ** 30, 100.0), "rdma": (8 * 2 ** 30, 200.0),
                             "rdma-a4x": (8 * 2 ** 30, 100.0)}

# The NCCL net plugin the TCPX / TCPXO profiles load, as NCCL core names it at NCCL_DEBUG=INFO ("NCCL INFO Using network
# <name>", NVIDIA/nccl src/init.cc; _nccl_tests.networks_in reads it); <name> is the plugin's ncclNet_t name: tcpx
# "GPUDirectTCPX_v7" (google/nccl-plugin-gpudirecttcpx src/nccl_plugin.cc @4b8ea7f2; a name starting with it matches),
# tcpxo "FasTrak" (closed-source plugin; public A3 Mega logs read "Using network FasTrak"). The RDMA profiles' plugin is
# their NCCL_NET (gIB) in _catalog/nccl.py. NCCL's own transports are "Socket" and "IB" (src/transport/).
NCCL_NET_PLUGINS = {"tcpx": "GPUDirectTCPX", "tcpxo": "FasTrak"}
NCCL_FALLBACK_NETS = ("Socket", "IB")

# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

DEFAULT_REGISTRY = "us-docker.pkg.dev/gce-ai-infra"


def _release(name, installer, daemon, **facts):
    """One release: ``installer`` and ``daemon`` are ``repository:tag`` under the default registry."""
    def image(reference):
        repository, tag = reference.rsplit(":", 1)
        return dict(repository=repository, tag=tag)
    entry = dict(name=name, installer=image(installer), daemon=image(daemon) if daemon else None)
    if "test" in facts:
        facts["test"] = image(facts["test"])
    entry.update(facts)
    return entry


# Coupled installer (NCCL plugin) + RxDM daemon pairs: the daemon version follows the installer's;
# upgrade the installer first; all pods of one workload use the same pair.
# ``gke_from``: first GKE minor the release is for (None: baseline). The newest release whose
# ``gke_from`` the cluster reaches is chosen.
RELEASES = {
    "tcpx": (
        _release("tcpx-v3.1.9", "gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
                 "gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
                 released="2024-02-15", gke_from=None, nccl="2.19.3", nccl_env="classic"),
        # GKE 1.34: COS 125, kernel 6.12, upstream devmem-TCP
        _release("tcpx-v3.1.12", "gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.12",
                 "gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.15",
                 released="2026-06-22", gke_from="1.34", nccl="2.19.4", nccl_env="devmem"),
    ),
    "tcpxo": (
        _release("tcpxo-v1.0.15", "gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
                 "gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
                 released="2026-01-09", gke_from=None, nccl="2.28.7-1", nccl_env="default"),
    ),
    "rdma": (
        # RDMA needs no RxDM sidecar; upstream states neither a release date nor the NCCL version
        _release("gib-v1.1.1", "gpudirect-gib/nccl-plugin-gib:v1.1.1", None,
                 test="gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1",
                 released=None, gke_from=None, nccl=None, nccl_env="default"),
    ),
}

# Images of a profile whose hosts are not amd64 (keyed by profile name; the profile's release gives the
# rest). A4X (arm64, GB200): CEA gpudirect-rdma/nccl-rdma-installer-a4x.yaml names
# nccl-plugin-gib-arm64:v1.1.0 (commit 2da1c92f, 2026-05-06; still so at master 992db812, 2026-06-11) without a
# digest, as does GoogleCloudPlatform/cluster-toolkit@v1.95.0:examples/gke-a4x/gke-a4x.yaml (version v1.1.0);
# the digest below is the one NVIDIA AI Cluster Runtime's published image BOM ("Container Image Inventory",
# component gke-gb200-rdma: nccl-plugin-gib-arm64:v1.1.2@sha256:6b7950ca...) pins for v1.1.2, the newest arm64
# gIB release seen (the BOM page was read 2026-11-26; the NVIDIA/aicr snapshot at hand, v0.11.1, predates it, so
# no repo@tag is recorded). Test image: CEA@992db812:gpudirect-rdma/nccl-test-imex-a4x.yaml (v1.1.0, no digest).
ARCH_IMAGES = {
    "rdma-a4x": dict(
        arch="arm64",
        installer=dict(repository="gpudirect-gib/nccl-plugin-gib-arm64", tag="v1.1.2",
                       digest="sha256:6b7950cac6e6833661d4206920f5633b6e361b18bfd5315b63f9bf4a4b84a80e"),
        # TODO: pin a digest once one is published for the arm64 diagnostic image
        test=dict(repository="gpudirect-gib/nccl-plugin-gib-diagnostic-arm64", tag="v1.1.0"),
    ),
}
# The amd64 gIB images (RELEASES["rdma"]) stay tag-pinned: no public source (CEA, Cluster Toolkit, xpk,
# AICR) publishes a digest for nccl-plugin-gib:v1.1.1 or its diagnostic image. Checked 2026-11-26: CEA master
# 992db812 gpudirect-rdma/nccl-rdma-installer.yaml and nccl-test.yaml name v1.1.1 by tag (the directory's history
# pins by digest only nccl-gib-a4x-max-arm64); cluster-toolkit@v1.95.0 names v1.1.0 by tag; AICR's BOM lists no
# amd64 gIB image. Third-party recipes name an amd64 nccl-plugin-gib:v1.1.2 (unverified upstream; not adopted).
# TODO: pin sha256 digests for gpudirect-gib/nccl-plugin-gib(-diagnostic):v1.1.1 once published.

# Infra images outside gce-ai-infra, each with the registry it is pulled from by default.
PAUSE_IMAGE = dict(
    registry="gke.gcr.io", repository="pause", tag="3.8",
    digest="sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830",
)
# Upstream runs the TCPXO pre-installation step in an unpinned ``ubuntu``; we pin it.
PRE_INSTALL_IMAGE = dict(
    registry="docker.io/library", repository="ubuntu", tag="24.04",
    digest="sha256:c4a8d5503dfb2a3eb8ab5f807da5bc69a85730fb49b5cfca2330194ebcc41c7b",
)

# --------------------------------------------------------------------------------------------
# DaemonSets: NCCL plugin installers and the NRI device injector
# --------------------------------------------------------------------------------------------

HOST_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
HOST_LIBRARY_DIR = HOST_NVIDIA_DIR + "/lib64"
CONTAINER_NVIDIA_DIR = "/usr/local/nvidia"
LIBRARY_DIR = CONTAINER_NVIDIA_DIR + "/lib64"   # where GPU containers find the plugin and NCCL
# the NCCL environment scripts the TCPXO and gIB images ship
GIB_ENV_SCRIPT = "/usr/local/gib/scripts/set_nccl_env.sh"
TCPXO_ENV_SCRIPT = LIBRARY_DIR + "/nccl-env-profile.sh"


def _installer(profile_name, accelerators, **own):
    """An installer DaemonSet entry: what every upstream installer shares, plus its own fields."""
    name = "nccl-%s-installer" % profile_name
    entry = dict(
        name=name,
        namespace="kube-system",
        labels={"k8s-app": name},
        pod_labels={"name": name, "k8s-app": name},
        priority_class="system-node-critical",
        host_network=True,
        host_pid=True,
        node_label=ACCELERATOR_LABEL,
        accelerators=accelerators,
        extra_copies=[],                # further (src, dest) copies after copy_from -> copy_to
        cpu_request="150m",
        privileged=True,
        pre_install=None,
    )
    entry.update(own)
    return entry


def _classic_installer(profile_name, accelerators, **own):
    """TCPX and TCPXO: the plugin (and NCCL) go to the host's /home/kubernetes/bin/nvidia/lib64."""
    return _installer(
        profile_name, accelerators,
        # volume name -> host path (type None: unchecked)
        host_paths={"var-lib": dict(path="/var/lib", type=None),
                    "library-dir-host": dict(path="/home/kubernetes/bin", type=None)},
        mounts={"var-lib": "/var/lib", "library-dir-host": "/usr/local"},
        command=["/scripts/container_entry.sh", "install", "--install-nccl"],
        copy_from="/var/lib/%s/lib64/." % profile_name,
        copy_to=LIBRARY_DIR,            # host /home/kubernetes/bin/nvidia/lib64 through the mount
        **own)


INSTALLERS = {
    "tcpx": _classic_installer("tcpx", ["nvidia-h100-80gb"]),
    "tcpxo": _classic_installer(
        "tcpxo", ["nvidia-h100-mega-80gb"],
        # privileged step run in the host namespaces (nsenter -at 1) before the install
        pre_install=dict(
            name="pre-installation",
            iptables_rule="INPUT -p tcp -j ACCEPT",
            kernel_module="import-helper",
            pci_id="1ae0:0084",                  # GPU-NIC functions exposed as aperture devices
            aperture_dir="/dev/aperture_devices",
        )),
    "rdma": _installer(
        "rdma", ["nvidia-h200-141gb", "nvidia-b200"],
        host_paths={"library-dir-host": dict(path=HOST_LIBRARY_DIR, type="DirectoryOrCreate"),
                    "gib": dict(path="/home/kubernetes/bin/gib", type=None)},
        mounts={"library-dir-host": "/usr/local/home/kubernetes/bin/nvidia/lib64",
                "gib": "/usr/local/home/kubernetes/bin/gib"},
        # no --install-nccl since CEA commit 2da1c92f (May 2026): the workload keeps its own NCCL
        command=["/scripts/container_entry.sh", "install"],
        copy_from="/var/lib/gib/lib64/.",
        copy_to="/usr/local/home/kubernetes/bin/nvidia/lib64",
        # the gIB scripts (set_nccl_env.sh) and configs (tuner files) land in host /home/kubernetes/bin/gib
        extra_copies=[dict(src="/var/lib/gib/.", dest="/usr/local/home/kubernetes/bin/gib")]),
}
# A4X: the same installer on GB200 nodes, restricted to arm64 hosts (CEA nccl-rdma-installer-a4x.yaml).
ARCH_LABEL = "kubernetes.io/arch"
INSTALLERS["rdma-a4x"] = dict(copy.deepcopy(INSTALLERS["rdma"]), accelerators=["nvidia-gb200"],
                              arch_label=ARCH_LABEL, node_arch=["arm64"])

# The taints GKE puts on the nodes of a GPU pool, as (key, value, effect): every GPU node carries
# nvidia.com/gpu=present:NoSchedule, and a node whose CPU is not x86 carries kubernetes.io/arch=<arch>:NoSchedule
# (GKE "Prepare an Arm workload for deployment": Arm nodes are tainted kubernetes.io/arch=arm64:NoSchedule; the A4X
# tolerations of GoogleCloudPlatform/cluster-toolkit@10470803 examples/gke-a4x and NVIDIA AICR
# values-gke-cos-gb200.yaml, shared notes anchors-2026-11-29.md section 2). Which pools are arm64 is MACHINES' arch.
GPU_NODE_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
ARCH_TAINT_EFFECT = "NoSchedule"
UNTAINTED_ARCH = "amd64"


def node_taints(machine_type):
    """The taints GKE puts on a GPU node of ``machine_type`` (KeyError for a machine the catalog lacks)."""
    arch = MACHINES[machine_type]["arch"]
    taints = [GPU_NODE_TAINT]
    if arch != UNTAINTED_ARCH:
        taints.append((ARCH_LABEL, arch, ARCH_TAINT_EFFECT))
    return taints


def pod_tolerations(profile_name):
    """The tolerations a pod needs on every node of a profile (the union over its machines), in catalog order."""
    tolerations = []
    for machine_type in profile(profile_name)["machine_types"]:
        for key, value, effect in node_taints(machine_type):
            toleration = dict(key=key, operator="Equal", value=value, effect=effect)
            if toleration not in tolerations:
                tolerations.append(toleration)
    return tolerations


NRI_INJECTOR = dict(
    name="device-injector",
    namespace="kube-system",
    labels={"k8s-app": "device-injector", "name": "device-injector"},
    priority_class="system-node-critical",
    host_network=True,
    host_pid=True,
    node_label=ACCELERATOR_LABEL,
    accelerators=["nvidia-rtx-pro-6000", "nvidia-rtx-pro-6000-vws", "nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
    image=dict(registry="gcr.io/gke-release", repository="nri-device-injector", tag=None,
               digest="sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"),
    host_paths={"dev": dict(path="/dev", type=None), "nri": dict(path="/var/run/nri", type=None)},
    mounts={"dev": "/dev", "nri": "/var/run/nri"},
    cpu_request="150m",
    privileged=True,
    plugin_name="device_injector_nri",
    plugin_index=10,
    annotation_prefix="devices.gke.io/container.",
)

# --------------------------------------------------------------------------------------------
# Workload patch: RxDM daemon, devices, volumes, mounts
# --------------------------------------------------------------------------------------------

# Device nodes the NRI injector hands to the RxDM daemon (beyond /dev/nvidia0..N-1).
DAEMON_DEVICES = {
    "tcpx": ["/dev/nvidiactl", "/dev/nvidia-uvm"],
    "tcpxo": ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/dmabuf_import_helper"],
}

# The RxDM daemon container per profile (no daemon for rdma).
DAEMONS = {
    "tcpx": dict(
        name="tcpx-daemon",
        command=[
            "/tcpgpudmarxd/build/app/tcpgpudmarxd",
            "--gpu_nic_preset", "a3vm",
            "--gpu_shmem_type", "fd",
            "--uds_path", "/run/tcpx",
            "--setup_param", "--verbose 128 2 0 ",
        ],
        args=None,
        capabilities=["NET_ADMIN"],
        mounts=[("libraries", LIBRARY_DIR), ("tcpx-socket", "/run/tcpx"),
                ("sys", "/hostsysfs"), ("proc-sys", "/hostprocsysfs")],
        env={"LD_LIBRARY_PATH": LIBRARY_DIR},
    ),
    "tcpxo": dict(
        name="tcpxo-daemon",
        command=["/bin/sh", "-c"],
        # --num_nics, --uid= and --alsologtostderr are deprecated since the open-source rebuild
        args=["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
              "/fts/entrypoint_rxdm_container.sh --num_hops=2\n"],
        capabilities=["NET_ADMIN", "NET_BIND_SERVICE"],
        mounts=[("libraries", LIBRARY_DIR), ("sys", "/hostsysfs"), ("proc-sys", "/hostprocsysfs")],
        env={"LD_LIBRARY_PATH": LIBRARY_DIR},
    ),
}

# Pod volumes per profile: name -> volume source. tcpx-socket is an emptyDir: the daemon and the
# GPU containers share it inside the pod, nothing on the host needs it.
WORKLOAD_VOLUMES = {
    "tcpx": [
        dict(name="libraries", hostPath=dict(path=HOST_LIBRARY_DIR)),
        dict(name="tcpx-socket", emptyDir={}),
        dict(name="sys", hostPath=dict(path="/sys")),
        dict(name="proc-sys", hostPath=dict(path="/proc/sys")),
    ],
    "tcpxo": [
        dict(name="libraries", hostPath=dict(path=HOST_LIBRARY_DIR)),
        dict(name="sys", hostPath=dict(path="/sys")),
        dict(name="proc-sys", hostPath=dict(path="/proc/sys")),
        dict(name="aperture-devices", hostPath=dict(path="/dev/aperture_devices")),
    ],
    "rdma": [
        dict(name="library-dir-host", hostPath=dict(path=HOST_NVIDIA_DIR)),
        dict(name="gib", hostPath=dict(path="/home/kubernetes/bin/gib")),
    ],
}
WORKLOAD_VOLUMES["rdma-a4x"] = copy.deepcopy(WORKLOAD_VOLUMES["rdma"])

# Mounts added to every container that requests GPUs: (volume, mountPath, readOnly).
GPU_CONTAINER_MOUNTS = {
    "tcpx": [("tcpx-socket", "/tmp", False), ("libraries", LIBRARY_DIR, True)],
    "tcpxo": [("aperture-devices", "/dev/aperture_devices", False)],
    "rdma": [("library-dir-host", CONTAINER_NVIDIA_DIR, False), ("gib", "/usr/local/gib", False)],
}
GPU_CONTAINER_MOUNTS["rdma-a4x"] = list(GPU_CONTAINER_MOUNTS["rdma"])

# LD_LIBRARY_PATH entry every GPU container needs, per fabric.
LIBRARY_PATHS = {"tcpx": LIBRARY_DIR, "tcpxo": LIBRARY_DIR, "rdma": LIBRARY_DIR, "rdma-a4x": LIBRARY_DIR}

# --------------------------------------------------------------------------------------------
# The Network objects RDMA pods attach (RDMA_GVNIC_NETWORK / RDMA_NETWORK_PREFIX above; the fabric engine,
# _gcp/multinetwork.py, builds the GKENetworkParamSet + Network pairs from the same names)
# --------------------------------------------------------------------------------------------


def rdma_profile_names():
    """The profiles whose NICs are RDMA devices (deviceMode RDMA), in catalog order."""
    return [name for name in PROFILE_NAMES if PROFILES[name]["device_mode"] == "RDMA"]


def rdma_network_names(profile_name):
    """The RDMA Network objects a pod of the profile attaches: rdma-0..N-1 (N: the profile's NICs)."""
    entry = profile(profile_name)
    if entry["device_mode"] != "RDMA":
        raise ValueError("%s is not an RDMA profile; RDMA profiles: %s" % (profile_name, ", ".join(rdma_profile_names())))
    return ["%s%d" % (RDMA_NETWORK_PREFIX, index) for index in range(entry["gpu_nic_count"])]


def dranet_claim_template(profile_name, name=None, namespace=None):
    """The ResourceClaimTemplate whose claim gives a pod every RDMA NIC of its node under the managed profile (DRANET)."""
    entry = profile(profile_name)
    if entry["device_mode"] != "RDMA":
        raise ValueError("DRANET (accelerator_network_profile %s) hands out RDMA NICs: %s is not an RDMA profile; RDMA "
                         "profiles: %s" % (ACCELERATOR_NETWORK_PROFILE, profile_name, ", ".join(rdma_profile_names())))
    metadata = dict(name=name or DRANET_CLAIM_TEMPLATE)
    if namespace:
        metadata["namespace"] = namespace
    request = dict(name=DRANET_REQUEST, exactly=dict(deviceClassName=DRANET_DEVICE_CLASS, allocationMode="ExactCount",
                                                     count=entry["gpu_nic_count"]))
    return dict(apiVersion=DRANET_API_VERSION, kind="ResourceClaimTemplate", metadata=metadata,
                spec=dict(spec=dict(devices=dict(requests=[request]))))


def dranet_version_error(version):
    """Why GKE ``version`` (full, or a minor such as 1.34) is below the managed profile's floor, or None.

    A minor alone is refused only below the floor's minor (its patch is not known yet)."""
    floor = ACCELERATOR_NETWORK_PROFILE_MIN_GKE
    text = str(version or "").strip().lstrip("v")
    if _GKE_VERSION.match(text):
        too_old = parse_gke_version(text) < parse_gke_version(floor)
    else:
        too_old = gke_minor(text) < gke_minor(floor)
    if too_old:
        return "GKE %s is below %s, the floor of accelerator_network_profile %s (DRANET)" % (
            version, floor, ACCELERATOR_NETWORK_PROFILE)
    return None


_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)\Z")
_GKE_MINOR = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?\Z")


# --------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------

def network_profile_name(profile_name, zone):
    """The name of the zone's network profile the profile's GPU-NIC VPC is created with, or None."""
    suffix = profile(profile_name)["network_profile"]
    return "%s-%s" % (zone, suffix) if suffix else None


def profile(name):
    """The catalog entry of a profile; ValueError naming the allowed values otherwise."""
    if name not in PROFILES:
        raise ValueError("unknown GPUDirect profile %r; allowed: %s" % (name, ", ".join(PROFILE_NAMES)))
    return PROFILES[name]


def parse_gke_version(version):
    """(major, minor, patch, gke_build) of a full GKE version such as 1.30.4-gke.1129000."""
    match = _GKE_VERSION.match(version or "")
    if not match:
        raise ValueError("%r is not a full GKE version (MAJOR.MINOR.PATCH-gke.BUILD, e.g. 1.30.4-gke.1129000)" % (version,))
    return tuple(int(part) for part in match.groups())


def gke_minor(version):
    """(major, minor) of a GKE or Kubernetes version: 1.34, 1.34.1, 1.34.1-gke.1829001, v1.30.4-gke.1129000."""
    match = _GKE_MINOR.match(str(version or "").strip())
    if not match:
        raise ValueError("%r is not a GKE version (e.g. 1.34, 1.34.1-gke.1829001 or v1.34.1-gke.1829001)" % (version,))
    return int(match.group(1)), int(match.group(2))


def _minor_tuple(minor):
    return tuple(int(p) for p in minor.split("."))


def version_gate_error(profile_name, version):
    """Why ``version`` is too old for the profile, or None when it is new enough.

    Minors below the table's first minor are refused; minors above its last are accepted; a profile
    without a table accepts every version.
    """
    entry = profile(profile_name)
    wanted = parse_gke_version(version)
    if not entry["min_versions"]:
        return None
    minors = sorted(entry["min_versions"], key=_minor_tuple)
    first = _minor_tuple(minors[0])
    minor = "%d.%d" % wanted[:2]
    if wanted[:2] < first:
        return "GKE %s is older than %s, the first minor that supports %s (%s)" % (
            version, minors[0], profile_name, entry["min_versions"][minors[0]])
    minimum = entry["min_versions"].get(minor)
    if minimum and wanted < parse_gke_version(minimum):
        return "GKE %s is below the minimum %s for %s on %s" % (version, minimum, profile_name, minor)
    return None


def version_floor_error(profile_name, version):
    """``version_gate_error`` for any form nccl_env takes (1.30, 1.30.4, v1.30.4-gke.1129000), or None.

    A full GKE version is held to its minor's minimum patch; a shorter one only to the profile's first minor
    (its patch is unknown). A text that is no GKE version at all raises ValueError.
    """
    text = str(version or "").strip()
    if _GKE_VERSION.match(text.lstrip("v")):
        return version_gate_error(profile_name, text.lstrip("v"))
    wanted = gke_minor(text)
    minors = sorted(profile(profile_name)["min_versions"], key=_minor_tuple)
    if minors and wanted < _minor_tuple(minors[0]):
        return "GKE %s is older than %s, the first minor that supports %s (%s)" % (
            version, minors[0], profile_name, profile(profile_name)["min_versions"][minors[0]])
    return None


def native_sidecar_supported(gke_version):
    """Whether a cluster of ``gke_version`` runs native sidecars (GKE >= 1.29)."""
    return gke_minor(gke_version) >= _minor_tuple(NATIVE_SIDECAR_MIN_GKE)


def machine(machine_type):
    """The catalog entry of a machine type; ValueError naming the allowed values otherwise."""
    if machine_type not in MACHINES:
        raise ValueError("unknown machine type %r; allowed: %s" % (machine_type, ", ".join(sorted(MACHINES))))
    return MACHINES[machine_type]


def profile_machine(profile_name, machine_type=None):
    """The machine type to use for a profile: ``machine_type`` checked, or the profile's default."""
    entry = profile(profile_name)
    if machine_type is None:
        return entry["machine_type"]
    if machine_type not in entry["machine_types"]:
        raise ValueError("machine type %r does not run %s; allowed: %s" % (
            machine_type, profile_name, ", ".join(entry["machine_types"])))
    return machine_type


def image_ref(image, registry=None):
    """``registry/repository[:tag][@digest]`` of a catalog image; ``registry`` replaces its default
    registry (a private mirror keeps the upstream repository path under it)."""
    if image is None:
        return None
    base = (registry or image.get("registry") or DEFAULT_REGISTRY).rstrip("/")
    ref = "%s/%s" % (base, image["repository"])
    if image.get("tag"):
        ref += ":" + image["tag"]
    if image.get("digest"):
        ref += "@" + image["digest"]
    return ref


def release(profile_name, gke_version=None):
    """The installer/daemon release for a profile on a GKE version (the baseline when unknown)."""
    releases = RELEASES[profile(profile_name)["fabric"]]
    chosen = releases[0]
    if gke_version is not None:
        wanted = gke_minor(gke_version)
        for candidate in releases:
            if candidate["gke_from"] is None or wanted >= _minor_tuple(candidate["gke_from"]):
                chosen = candidate
    return chosen


def installer_image(profile_name, gke_version=None):
    """The NCCL plugin installer image (repository, tag, digest) of a profile on a GKE version: the profile's own
    architecture variant (A4X: arm64) when it has one, else its release's."""
    return ARCH_IMAGES.get(profile_name, {}).get("installer") or release(profile_name, gke_version)["installer"]


def images(profile_name, gke_version=None, registry=None):
    """Every image reference a profile needs, resolved (``registry`` overrides all registries)."""
    rel = release(profile_name, gke_version)
    installer = INSTALLERS.get(profile_name, INSTALLERS[profile(profile_name)["fabric"]])
    own = ARCH_IMAGES.get(profile_name, {})
    return dict(
        installer=image_ref(installer_image(profile_name, gke_version), registry),
        daemon=image_ref(rel["daemon"], registry),
        test=image_ref(own.get("test") or rel.get("test") or rel["installer"], registry),
        pause=image_ref(PAUSE_IMAGE, registry),
        pre_install=image_ref(PRE_INSTALL_IMAGE, registry) if installer["pre_install"] else None,
        nri_injector=image_ref(NRI_INJECTOR["image"], registry),
    )


def interface_names(profile_name, count=None):
    """Default GPU interface names of a profile's pods: eth1..eth4 (tcpx), eth1..eth8 (tcpxo), eth2..eth9 (rdma)."""
    entry = profile(profile_name)
    count = entry["gpu_nic_count"] if count is None else count
    first = entry["first_gpu_interface"]
    return ["%s%d" % (INTERFACE_PREFIX, first + i) for i in range(count)]


def device_annotation(profile_name):
    """(annotation key, YAML value) of the NRI device annotation for the profile's RxDM daemon, or None."""
    if profile_name not in DAEMONS:
        return None
    entry = profile(profile_name)
    paths = ["/dev/nvidia%d" % i for i in range(entry["gpus_per_node"])] + DAEMON_DEVICES[profile_name]
    key = NRI_INJECTOR["annotation_prefix"] + DAEMONS[profile_name]["name"]
    return key, "".join("- path: %s\n" % p for p in paths)


def interfaces_annotation(profile_name, network_names, interfaces=None):
    """The ``networking.gke.io/interfaces`` value (JSON text) for Network objects ``network_names``."""
    names = list(interfaces) if interfaces else interface_names(profile_name, len(network_names))
    if len(names) != len(network_names):
        raise ValueError("%d interfaces for %d networks" % (len(names), len(network_names)))
    entries = [{"interfaceName": CONTROL_INTERFACE, "network": DEFAULT_NETWORK}]
    entries.extend({"interfaceName": i, "network": n} for i, n in zip(names, network_names))
    return json.dumps(entries, separators=(",", ":"))


def describe(profile_name, gke_version=None, registry=None):
    """Everything a role needs to know about a profile, resolved for a GKE version and a registry."""
    entry = copy.deepcopy(profile(profile_name))
    rel = release(profile_name, gke_version)
    entry["name"] = profile_name
    entry["release"] = dict((k, v) for k, v in rel.items() if k not in ("installer", "daemon", "test"))
    entry["images"] = images(profile_name, gke_version, registry)
    fabric = entry["fabric"]
    entry["installer"] = copy.deepcopy(INSTALLERS.get(profile_name, INSTALLERS[fabric]))
    entry["nri_injector"] = copy.deepcopy(NRI_INJECTOR) if profile_name in DAEMONS else None
    daemon = copy.deepcopy(DAEMONS.get(profile_name))
    annotation = device_annotation(profile_name)
    if daemon:
        daemon["mounts"] = [dict(name=n, mountPath=p) for n, p in daemon["mounts"]]
        daemon["device_annotation"] = dict(key=annotation[0], value=annotation[1])
    entry["daemon"] = daemon
    entry["volumes"] = copy.deepcopy(WORKLOAD_VOLUMES.get(profile_name, WORKLOAD_VOLUMES[fabric]))
    entry["gpu_container_mounts"] = [dict(name=n, mountPath=p, readOnly=r)
                                     for n, p, r in GPU_CONTAINER_MOUNTS.get(profile_name, GPU_CONTAINER_MOUNTS[fabric])]
    entry["library_path"] = LIBRARY_PATHS.get(profile_name, LIBRARY_PATHS[fabric])
    entry["interfaces"] = interface_names(profile_name)
    entry["control_interface"] = CONTROL_INTERFACE
    entry["nccl_bandwidth_threshold"] = NCCL_BANDWIDTH_THRESHOLDS.get(profile_name)
    entry["nccl_env_script"] = TCPXO_ENV_SCRIPT if profile_name == "tcpxo" else (
        GIB_ENV_SCRIPT if entry["device_mode"] == "RDMA" else None)
    entry["node_arch"] = ARCH_IMAGES.get(profile_name, {}).get("arch", "amd64")
    entry["tolerations"] = pod_tolerations(profile_name)
    # multi-node NVLink (a ComputeDomain per job, NVLS all-reduce inside it): every machine of the profile has it
    entry["multi_node_nvlink"] = all(m in dra_driver.MULTI_NODE_NVLINK_MACHINES for m in entry["machine_types"])
    entry["nvls"] = copy.deepcopy(dra_driver.NVLS_ALL_REDUCE) if entry["multi_node_nvlink"] else None
    # the Network objects every pod attaches, in GPU NIC order (RDMA profiles: rdma-0..N-1; TCPX/TCPXO:
    # named by the fabric, so None here)
    entry["pod_networks"] = rdma_network_names(profile_name) if entry["device_mode"] == "RDMA" else None
    entry["nri_injector_needed"] = profile_name in DAEMONS
    entry["native_sidecar_min_gke"] = NATIVE_SIDECAR_MIN_GKE
    entry["native_sidecar"] = native_sidecar_supported(gke_version) if gke_version else None
    # the managed alternative (accelerator_network_profile auto, DRANET): RDMA profiles only
    entry["dranet"] = dict(
        accelerator_network_profile=ACCELERATOR_NETWORK_PROFILE, min_gke=ACCELERATOR_NETWORK_PROFILE_MIN_GKE,
        device_class=DRANET_DEVICE_CLASS, api_version=DRANET_API_VERSION, claim=DRANET_CLAIM,
        claim_template=dranet_claim_template(profile_name),
        version_error=dranet_version_error(gke_version) if gke_version else None,
    ) if entry["device_mode"] == "RDMA" else None
    return entry


# --------------------------------------------------------------------------------------------
# Pod annotations and node rules (the workload patcher, the fabric and the GPU sharing checks)
# --------------------------------------------------------------------------------------------

DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"

# GKE multi-networking on a node: one allocatable resource per attached Network (and one "<name>.IP"), the Networks
# on the node's additional NICs with their IPs, and each NIC's first IP with its kernel name at boot
# (GoogleCloudPlatform/gke-networking-api, apis/network/v1: NorthInterfacesAnnotationKey, NICInfoAnnotationKey)
NETWORK_RESOURCE_PREFIX = "networking.gke.io.networks/"
NORTH_INTERFACES_ANNOTATION = "networking.gke.io/north-interfaces"
NIC_INFO_ANNOTATION = "networking.gke.io/nic-info"


def sharing_refusal(fabric):
    """Why a GPUDirect fabric refuses GPU sharing: the one rule for workloads, node pools and the mps role."""
    return "GPUDirect-%s needs whole nodes, not MPS, time-sharing or multi-instance GPUs" % fabric.upper()


def node_fabric(labels):
    """The GPUDirect fabric of a node's machine type (its instance-type label), else None.

    The accelerator label alone does not tell: a3-highgpu-1g carries the same H100 as the
    TCPX machine a3-highgpu-8g.
    """
    facts = MACHINES.get((labels or {}).get(MACHINE_TYPE_LABEL))
    return facts["fabric"] if facts and facts["fabric"] in PROFILES else None
