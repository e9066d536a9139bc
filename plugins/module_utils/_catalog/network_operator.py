# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NVIDIA Network Operator chart catalog: facts only, no I/O.

Sources: Mellanox/network-operator ``api/v1alpha1``, its chart values and ``hack/release.yaml`` at each tag and its
upgrade notes (tests/data/upstream/network-operator/<tag>/ holds what the version matrix test checks against).
``NETWORK_OPERATOR_CHARTS``: per chart series, the pinned release, its top-level value keys, the IPAM
plugins its NicClusterPolicy can deploy (Whereabouts removed in 25.10), the DOCA driver of the pinned release,
the component images (``component_image``) and the chart's ``kubeVersion``.
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

# kube_version: the chart's Chart.yaml kubeVersion (github.com/Mellanox/network-operator,
# deployment/network-operator/Chart.yaml at the release tags): '>= 1.21.0' up to 25.10.0, '>= 1.21.0-0' from
# 26.1.0 (Mellanox/network-operator pull request 2167: without "-0" helm refuses pre-release server versions).
# doca_driver: the doca-driver image tag of the pinned release (hack/release.yaml "Mofed" at its tag); another
# release of the series ships another one, so it is only the default for the pinned release.
# images: the release's own component images where they do not follow the shared scheme (see component_image).
# "added": top-level value keys of that release's values.yaml beyond the common ones (keepNCP arrives in 26.7).
_KUBE_VERSION_BEFORE_26_1 = ">= 1.21.0"
NETWORK_OPERATOR_CHARTS = {
    "v25.4": {"pinned": "25.4.0", "ipam": ("whereabouts", "nv-ipam"), "default_ipam": "whereabouts",
              "added": frozenset(("nicConfigurationOperator", "nic-configuration-operator-chart", "maintenanceOperator",
                                  "maintenance-operator-chart")),
              "doca_driver": "25.04-0.6.1.0-2", "kube_version": _KUBE_VERSION_BEFORE_26_1,
              # hack/release.yaml at v25.4.0: the components keep their projects' registries and tags
              "images": {"rdmaSharedDevicePlugin": ("ghcr.io/mellanox", "v1.5.3"),
                         "multus": ("ghcr.io/k8snetworkplumbingwg", "v4.1.0"),
                         "cniPlugins": ("ghcr.io/k8snetworkplumbingwg", "v1.6.2-update.1"),
                         "ipoib": ("ghcr.io/mellanox", "v1.2.2"),
                         "ipamPlugin": ("ghcr.io/k8snetworkplumbingwg", "v0.7.0"),
                         "nvIpam": ("ghcr.io/mellanox", "v0.3.7")}},
    "v25.7": {"pinned": "25.7.0", "ipam": ("whereabouts", "nv-ipam"), "default_ipam": "whereabouts",
              "added": frozenset(("nicConfigurationOperator", "nic-configuration-operator-chart", "maintenanceOperator",
                                  "maintenance-operator-chart")),
              "doca_driver": "doca3.1.0-25.07-0.9.7.0-0", "kube_version": _KUBE_VERSION_BEFORE_26_1, "images": None},
    "v25.10": {"pinned": "25.10.0", "ipam": ("nv-ipam",), "default_ipam": "nv-ipam",
               "added": frozenset(("maintenanceOperator", "maintenance-operator-chart")),
               "doca_driver": "doca3.2.0-25.10-1.2.8.0-2", "kube_version": _KUBE_VERSION_BEFORE_26_1, "images": None},
    "v26.4": {"pinned": "26.4.1", "ipam": ("nv-ipam",), "default_ipam": "nv-ipam",
              "added": frozenset(("maintenanceOperator", "maintenance-operator-chart")),
              "doca_driver": "doca3.4.1-26.04-1.1.0.0-1", "kube_version": ">= 1.21.0-0", "images": None},
}
# The image name of each NicClusterPolicy component the role renders (spec key -> image).
COMPONENT_IMAGES = {"rdmaSharedDevicePlugin": "k8s-rdma-shared-dev-plugin", "multus": "multus-cni",
                    "cniPlugins": "plugins", "ipoib": "ipoib-cni", "ipamPlugin": "whereabouts",
                    "nvIpam": "nvidia-k8s-ipam"}
DOCA_DRIVER_IMAGE = "doca-driver"


def component_image(series, release, component):
    """dict(image, repository, version) of a NicClusterPolicy component for ``release`` of chart ``series``.

    From 25.7 the components share the release's tag (network-operator-v<release>) in nvcr.io/nvidia/mellanox; a
    series with its own ``images`` lists them for its pinned release only (another release of it ships others).
    """
    entry = NETWORK_OPERATOR_CHARTS[series]
    if not entry.get("images"):
        return {"image": COMPONENT_IMAGES[component], "repository": MELLANOX_REPOSITORY,
                "version": "network-operator-v%s" % release}
    if release != entry["pinned"]:
        raise ValueError("Network Operator %s images are known for the catalog's release %s only, not %s"
                         % (series.lstrip("v"), entry["pinned"], release))
    repository, version = entry["images"][component]
    return {"image": COMPONENT_IMAGES[component], "repository": repository, "version": version}


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
