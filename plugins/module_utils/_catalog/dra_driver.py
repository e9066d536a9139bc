# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NVIDIA DRA driver for GPUs (ComputeDomains, IMEX channels): facts only, no I/O.

Sources (shared notes anchors-2026-11-29.md sections 1.3 and 2):

- kubernetes-sigs/dra-driver-nvidia-gpu@95932046 (2026-08-07): site/content/docs/install.md, upgrade.md,
  prerequisites.md, reference/feature-gates.md, deployments/helm/dra-driver-nvidia-gpu/Chart.yaml; the
  ComputeDomain CRD at @764900e7 (v0.4.1): deployments/helm/dra-driver-nvidia-gpu/crds/
  resource.nvidia.com_computedomains.yaml.
- NVIDIA/k8s-dra-driver-gpu@0882da87 (v25.12.0): the last release of the chart under its old name.
- GoogleCloudPlatform/cluster-toolkit@10470803 (v1.95.0): modules/management/kubectl-apply (module
  ``install_nvidia_dra_driver``), examples/gke-a4x/nvidia-dra-driver.yaml and nccl-jobset-example.yaml; NVIDIA/aicr
  recipes/components/nvidia-dra-driver-gpu/values-gke-cos-gb200.yaml (the same GKE values).
- NVIDIA/gpu-operator@10ee5b36 (v26.7.0): deployments/gpu-operator/values.yaml ``draDriver`` (experimental).

- ``CHARTS``: the two chart lines, by name: where each is published and the releases the catalog offers.
  The chart was renamed when the code moved to kubernetes-sigs; the move is forward only (``UPGRADE_ORDER``).
- ``NAMESPACE``: the namespace (and release name) Cluster Toolkit and the upgrade guide use.
- ``DRIVER_ROOTS``: ``nvidiaDriverRoot`` by how the GPU driver is installed.
- ``COMPUTE_DOMAIN_DRIVER``, ``GPU_DRIVER``: the ResourceSlice drivers a working install publishes (its DeviceClasses:
  ``DEVICE_CLASS_SOURCES``; ``RESOURCE_API_VERSION``: through which API).
- ``COMPUTE_DOMAIN``: the ComputeDomain API (namespaced, immutable spec) and its defaults.
- ``CLIQUE_LABEL``, ``IMEX_CHANNEL_DIR``: the GFD clique label and where the driver injects IMEX channels.
- ``MIN_DRIVER_COMPUTE_DOMAINS``, ``MIN_DRIVER_GPU_ALLOCATION``, ``MIN_KUBERNETES``: the version floors.
- ``HOST_IMEX_SERVICE``, ``HOST_MANAGED_IMEX``: the host service that must be off unless IMEX is host-managed.
- ``GKE_VALUES``, ``GKE_RESOURCE_QUOTA``: what GKE A4X needs (ComputeDomains only; critical-priority pods admitted
  through a quota).
- ``GPU_OPERATOR_DRA_MIN``: the first GPU Operator release that can deploy the driver itself (``draDriver``); it
  ships the ComputeDomain CRDs too, so a cluster gets one of the two installs, never both.
- ``CHART_TAGS``: the upstream tag and commit each catalog release was checked at (Chart.yaml name and version,
  values.yaml keys, CRDs, DeviceClass templates; tests/data/upstream/dra-driver-nvidia-gpu/).
- ``CRDS``: the CustomResourceDefinitions each chart line ships (and from which release), which the role checks.
- ``DEVICE_CLASS_SOURCES``: which ``resources.<x>.enabled`` value makes the chart create each DeviceClass, and the
  first release that has it.
- ``WORKLOADS``, ``COMPONENT_LABEL``: the controller Deployment and the kubelet plugin DaemonSet, named
  ``<chart name>-<suffix>``, their pods labelled ``<chart name>-component: <suffix>``.
- ``PINNED``: the release the dra_driver role installs unless told another (the newest tagged release).
- ``FEATURE_GATES_SINCE``, ``HOST_MANAGED_IMEX_SINCE``: the first releases whose values have ``featureGates`` and
  ``resources.computeDomains.imex.mode``.
- ``GKE_DRA_MIN_VERSION``: the GKE version floor of an A4X cluster that runs the driver (DRA GA).
- ``CHANNEL_CLAIM``, ``CHANNEL_TEMPLATE_SUFFIX``: how a workload names its channel claim and a ComputeDomain its
  channel ResourceClaimTemplate; ``MULTI_NODE_NVLINK_MACHINES``: the GKE machines whose NVLink spans nodes.
- ``DAEMON_CONTAINER``, ``DAEMON_LOG_CAUSES``: the ComputeDomain daemon's container and the log lines that name why a
  ComputeDomain stays NotReady (validate's compute_domain.yml holds each cause's fix, by name).
- ``NVLS_ALL_REDUCE``: the NCCL settings of an NVLS all-reduce inside a domain and its bus-bandwidth floor (and
  the floor's standing: no published figure).
"""

from __future__ import annotations


CHARTS = {
    # NGC, the name up to v25.12.0 (Cluster Toolkit pins v25.3.0; its A4X Max blueprint v25.8.0)
    "nvidia-dra-driver-gpu": dict(
        repo_url="https://helm.ngc.nvidia.com/nvidia", chart_ref="nvidia-dra-driver-gpu",
        versions=("25.3.0", "25.3.1", "25.3.2", "25.8.0", "25.8.1", "25.12.0")),
    # kubernetes-sigs, from v0.4.0 (also on NGC as nvidia/dra-driver-nvidia-gpu); Chart.yaml kubeVersion >=1.32.0-0
    "dra-driver-nvidia-gpu": dict(
        repo_url="", chart_ref="oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
        versions=("0.4.1", "0.5.0")),
}

# The forward-only migration between the chart lines (upgrade.md): the new chart's CRDs first, then the release.
UPGRADE_ORDER = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")

NAMESPACE = "nvidia-dra-driver-gpu"

DRIVER_ROOTS = {
    "host": "/",                             # driver installed on the host (the chart's default)
    "gpu-operator": "/run/nvidia/driver",    # the GPU Operator's containerized driver
    "gke": "/home/kubernetes/bin/nvidia",    # GKE's managed driver (COS)
}

# the DRA API (GA from Kubernetes 1.34) its DeviceClasses and ResourceSlices are served through
RESOURCE_API_VERSION = "resource.k8s.io/v1"
COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"   # ResourceSlice .spec.driver of the IMEX channels
GPU_DRIVER = "gpu.nvidia.com"                          # ResourceSlice .spec.driver of GPU allocation

COMPUTE_DOMAIN = dict(
    group="resource.nvidia.com", version="v1beta1", kind="ComputeDomain", plural="computedomains",
    namespaced=True, spec_immutable=True,
    allocation_modes=("Single", "All"), default_allocation_mode="Single",
    # deprecated, "recommended to be set to zero" with the IMEXDaemonsWithDNSNames gate (on by default)
    default_num_nodes=0,
    statuses=("Ready", "NotReady"),
    cliques_plural="computedomaincliques",
)

CLIQUE_LABEL = "nvidia.com/gpu.clique"          # set by GFD: "<cluster UUID>.<clique ID>"
IMEX_CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"

MIN_DRIVER_COMPUTE_DOMAINS = "570.158.01"
MIN_DRIVER_GPU_ALLOCATION = "565"
MIN_KUBERNETES = "1.34"                          # DRA GA; the driver's docs recommend 1.34.2 or later

HOST_IMEX_SERVICE = "nvidia-imex.service"
# host-managed IMEX (alpha): the only mode in which the host service may stay on
HOST_MANAGED_IMEX = dict(feature_gate="HostManagedIMEXDaemon", value_path="resources.computeDomains.imex.mode",
                         value="hostManaged")

GKE_VALUES = dict(
    nvidiaDriverRoot=DRIVER_ROOTS["gke"],
    gpus_enabled=False,                          # GKE's device plugin keeps nvidia.com/gpu
    accelerator="nvidia-gb200",
    arch="arm64",                                # the kubelet plugin tolerates these nodes' taints: gke_gpudirect.node_taints
)
GKE_RESOURCE_QUOTA = dict(pods=100, priority_classes=("system-node-critical", "system-cluster-critical"))

GPU_OPERATOR_DRA_MIN = "26.7.0"


# Checked at kubernetes-sigs/dra-driver-nvidia-gpu (the NVIDIA/k8s-dra-driver-gpu history moved there with its tags).
# Chart.yaml spells every version without "v" ("strict semver" says the chart); helm takes "v25.3.0" (Cluster
# Toolkit's spelling) for the same release, and the role accepts both. 0.5.0 had no tag when the notes were taken:
# its facts are those of HEAD 95932046 (0.5.0-dev, "add docs for 0.5.0 release" fdba75bc); GPU Operator v26.7.0
# deploys v0.5.0.
CHART_TAGS = {
    "25.3.0": ("v25.3.0", "06db1a78434d01cdf82521a6546077cc5a8ac39b"),
    "25.3.1": ("v25.3.1", "42270a3bd6fc2f38404b6d82dc1ffaf6926844a0"),
    "25.3.2": ("v25.3.2", "7020737a5e6d17d53003b19b1c473fa352f59232"),
    "25.8.0": ("v25.8.0", "2ef1f2ad8ad2e65756d19f454f55e5b021d0bf3b"),
    "25.8.1": ("v25.8.1", "fc69d98528027bfe06efff81e6fd99c98ede8ff7"),
    "25.12.0": ("v25.12.0", "0882da8720c28763137e0987778ec476ec4cf8df"),
    "0.4.1": ("v0.4.1", "764900e7833798a1528bd52a2af3e1b2d5f7a616"),
    "0.5.0": ("HEAD", "95932046683719c43b6a0dd9613c2e5aad5d6703"),
}

# the CRDs in the chart's crds/ folder: name -> first release of each line that ships it
CRDS = {
    "computedomains.resource.nvidia.com": {"nvidia-dra-driver-gpu": "25.3.0", "dra-driver-nvidia-gpu": "0.4.1"},
    "computedomaincliques.resource.nvidia.com": {"nvidia-dra-driver-gpu": "25.12.0", "dra-driver-nvidia-gpu": "0.4.1"},
}

# DeviceClass -> (the resources.<x>.enabled value its template needs, first release of the NGC line that has it);
# in host-managed IMEX mode (0.5.0) the chart leaves out the daemon class
DEVICE_CLASS_SOURCES = {
    "compute-domain-daemon.nvidia.com": ("computeDomains", "25.3.0"),
    "compute-domain-default-channel.nvidia.com": ("computeDomains", "25.3.0"),
    "gpu.nvidia.com": ("gpus", "25.3.0"),
    "mig.nvidia.com": ("gpus", "25.3.0"),
    "vfio.gpu.nvidia.com": ("gpus", "25.12.0"),
}
HOST_MANAGED_WITHOUT_CLASS = "compute-domain-daemon.nvidia.com"

# templates/controller.yaml (only with computeDomains enabled) and kubeletplugin.yaml
WORKLOADS = dict(controller=("Deployment", "controller"), kubelet_plugin=("DaemonSet", "kubelet-plugin"))
COMPONENT_LABEL = "%s-component"               # templates/_helpers.tpl selectorLabels

PINNED = "0.4.1"

FEATURE_GATES_SINCE = ("nvidia-dra-driver-gpu", "25.8.0")
HOST_MANAGED_IMEX_SINCE = ("dra-driver-nvidia-gpu", "0.5.0")

# DRA is GA from 1.34; Cluster Toolkit's A4X blueprint pins 1.35.x. Google's own A4X floor table was not found.
GKE_DRA_MIN_VERSION = "1.34"
# The workload side (cluster-toolkit@10470803 examples/gke-a4x/nccl-jobset-example.yaml: the pods' claim
# "compute-domain-channel" names the ComputeDomain's template "<ComputeDomain>-channel"; CEA@992db812
# gpudirect-rdma/nccl-test-imex-a4x.yaml the same). Each node publishes one channel (shared notes 1.4, NVIDIA/nvcf
# PR #1515), so one pod per node holds the claim and that pod has every GPU of the node.
CHANNEL_CLAIM = "compute-domain-channel"
CHANNEL_TEMPLATE_SUFFIX = "-channel"
# GKE machines whose NVLink spans nodes (an NVL72 rack, 18 nodes x 4 GB200): A4X (notes anchors-2026-11-29.md 2);
# A4 / A3 Ultra are single-node NVLink and get no ComputeDomain.
MULTI_NODE_NVLINK_MACHINES = ("a4x-highgpu-4g",)

# The per-ComputeDomain daemon the controller starts on each node (a DaemonSet, container "compute-domain-daemon":
# the driver's templates/compute-domain-daemon.tmpl.yaml, read through the code search 2026-11-29, commit not
# recorded). Log lines that say why its ComputeDomain stays NotReady (notes 1.4: dra-driver-nvidia-gpu #524 and
# AICR PR #2520 for the host IMEX service holding the session; the prerequisites' "No matching network interface").
DAEMON_CONTAINER = "compute-domain-daemon"
DAEMON_LOG_CAUSES = (
    dict(name="host_imex", pattern=r"NV_ERR_IN_USE",
         cause="the host's %s holds the IMEX session (NV_ERR_IN_USE)" % HOST_IMEX_SERVICE),
    dict(name="no_interface", pattern=r"[Nn]o matching network interface",
         cause="the IMEX daemon found no network interface matching its peers' addresses (no matching network interface)"),
)

# NVLS all-reduce inside a ComputeDomain. NCCL environment (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html):
# NCCL_NVLS_ENABLE turns NVLink SHARP (NVLS) on, NCCL_MNNVL_ENABLE multi-node NVLink. The floor is NVIDIA AICR's GB200
# "nccl-all-reduce-bw-nvls" constraint, peak bus bandwidth of all_reduce_perf on a two-node pair: >= 500 GB/s, which AICR
# itself calls provisional (an effective 450 gate with its 10 % tolerance, about 40 % under its ~770 GB/s baseline,
# NVIDIA/aicr #2784; shared notes anchors-2026-11-25.md "NCCL floors in AICR"). Neither NVIDIA nor Google publishes a
# GB200 NVL72 NVLS pass figure, so this is a provisional vendor gate, not a published one: the verdict says so.
NVLS_ALL_REDUCE = dict(
    env={"NCCL_NVLS_ENABLE": "1", "NCCL_MNNVL_ENABLE": "1"},
    benchmark="all_reduce_perf",
    floor_gbps=500.0,
    floor_source="NVIDIA AICR's provisional GB200 NVLS gate (peak busBW, 2-node all_reduce_perf; NVIDIA/aicr #2784); "
                 "no published GB200 NVL72 NVLS figure exists",
    floor_published=False,
)
