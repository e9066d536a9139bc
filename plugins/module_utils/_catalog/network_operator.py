# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NVIDIA Network Operator chart catalog: facts only, no I/O.

Sources: Mellanox/network-operator ``api/v1alpha1``, its chart values at each tag and its upgrade notes.
``NETWORK_OPERATOR_CHARTS``: per chart series, the pinned release, its top-level value keys, the IPAM
plugins its NicClusterPolicy can deploy (Whereabouts removed in 25.10), the component image tags and
the chart's ``kubeVersion``.
"""

from __future__ import annotations


# --------------------------------------------------------------------------------------------
# Network Operator chart catalog
# --------------------------------------------------------------------------------------------

NETWORK_OPERATOR_COMMON_KEYS = frozenset((
    "nfd", "upgradeCRDs", "sriovNetworkOperator", "node-feature-discovery", "sriov-network-operator",
    "operator", "imagePullSecrets",
))
NETWORK_OPERATOR_REPO_URL = "https://helm.ngc.nvidia.com/nvidia"
NETWORK_OPERATOR_CHART = "network-operator"
NIC_CLUSTER_POLICY_NAME = "nic-cluster-policy"
MELLANOX_REPOSITORY = "nvcr.io/nvidia/mellanox"

# From 25.x the components share the release's tag (network-operator-v<release>) in nvcr.io/nvidia/mellanox.
# kube_version: the chart's Chart.yaml kubeVersion (github.com/Mellanox/network-operator,
# deployment/network-operator/Chart.yaml at the release tags): '>= 1.21.0' up to 25.10.0, '>= 1.21.0-0' from
# 26.1.0 (Mellanox/network-operator pull request 2167: without "-0" helm refuses pre-release server versions).
_KUBE_VERSION_BEFORE_26_1 = ">= 1.21.0"
NETWORK_OPERATOR_CHARTS = {
    "v25.4": {"pinned": "25.4.0", "ipam": ("whereabouts", "nv-ipam"), "default_ipam": "whereabouts",
              "added": frozenset(("nicConfigurationOperator", "nic-configuration-operator-chart", "maintenanceOperator",
                                  "maintenance-operator-chart")),
              "doca_driver": None, "kube_version": _KUBE_VERSION_BEFORE_26_1},
    "v25.7": {"pinned": "25.7.0", "ipam": ("whereabouts", "nv-ipam"), "default_ipam": "whereabouts",
              "added": frozenset(("nicConfigurationOperator", "nic-configuration-operator-chart", "maintenanceOperator",
                                  "maintenance-operator-chart")),
              "doca_driver": "doca3.1.0-25.07-0.9.7.0-0", "kube_version": _KUBE_VERSION_BEFORE_26_1},
    "v25.10": {"pinned": "25.10.0", "ipam": ("nv-ipam",), "default_ipam": "nv-ipam",
               "added": frozenset(("maintenanceOperator", "maintenance-operator-chart")),
               "doca_driver": None, "kube_version": _KUBE_VERSION_BEFORE_26_1},
    "v26.4": {"pinned": "26.4.1", "ipam": ("nv-ipam",), "default_ipam": "nv-ipam",
              "added": frozenset(("maintenanceOperator", "maintenance-operator-chart", "keepNCP")),
              "doca_driver": None, "kube_version": ">= 1.21.0-0"},
}
IPAM_PLUGINS = ("auto", "nv-ipam", "whereabouts")
OFED_SOURCES = ("host", "operator")
NETWORK_KINDS = {"macvlan": "MacvlanNetwork", "hostdevice": "HostDeviceNetwork", "ipoib": "IPoIBNetwork"}
MACVLAN_MODES = ("bridge", "private", "vepa", "passthru")
RDMA_SHARED_RESOURCE = "rdma_shared_device_a"
RDMA_RESOURCE_PREFIX = "rdma"
# The selectors the RDMA shared device plugin reads (k8s-rdma-shared-dev-plugin pkg/types Selectors). Its JSON decoding
# ignores any other key: pciAddresses or rootDevices (SR-IOV device plugin selectors) would be dropped, and the resource
# would take every device the remaining selectors match.
RDMA_SHARED_SELECTORS = ("vendors", "deviceIDs", "drivers", "ifNames", "linkTypes")
MELLANOX_VENDOR = "15b3"
NV_IPAM_API = "nv-ipam.nvidia.com/v1alpha1"
# NicClusterPolicy status.appliedStates names per component (pkg/state).
NCP_STATES = {
    "ofedDriver": "state-OFED", "rdmaSharedDevicePlugin": "state-RDMA-device-plugin",
    "multus": "state-multus-cni", "cniPlugins": "state-container-networking-plugins",
    "ipoib": "state-ipoib-cni", "nvIpam": "state-nv-ipam-cni",
}
