# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NVIDIA GPU Operator chart catalog: facts only, no I/O.

Sources: NVIDIA/gpu-operator ``deployments/gpu-operator/values.yaml`` at each tag,
``api/nvidia/v1/clusterpolicy_types.go``; gpu-operator-rdma.rst, google-gke.rst, microsoft-aks.rst.

- ``GPU_OPERATOR_CHARTS``: per chart series, the pinned release and the value keys it accepts
  (``driver.kernelModuleType`` from v25.3, ``driver.useOpenKernelModules`` before it, ...).
- ``GPU_OPERATOR_PLATFORMS``: the published specifics of generic Kubernetes, GKE, AKS, OpenShift.
- the names the roles wait on and patch (ClusterPolicy, driver DaemonSet, node labels).
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import HOST_NVIDIA_DIR as GKE_NVIDIA_DIR


# --------------------------------------------------------------------------------------------
# GPU Operator chart catalog
# --------------------------------------------------------------------------------------------

# Value keys every catalogued gpu-operator chart accepts. A key that names a map or list the chart
# passes through (nodeSelector, env, config data...) accepts anything below it.
GPU_OPERATOR_COMMON_KEYS = frozenset((
    "platform.openshift", "nfd.enabled", "nfd.nodefeaturerules", "psa.enabled",
    "cdi.enabled",
    "sandboxWorkloads.enabled", "sandboxWorkloads.defaultWorkload",
    "hostPaths.rootFS", "hostPaths.driverInstallDir",
    "daemonsets.labels", "daemonsets.annotations", "daemonsets.priorityClassName", "daemonsets.tolerations",
    "daemonsets.updateStrategy", "daemonsets.rollingUpdate.maxUnavailable",
    "validator.repository", "validator.image", "validator.imagePullPolicy",
    "validator.imagePullSecrets", "validator.env", "validator.args", "validator.resources",
    "validator.plugin.env", "operator.repository", "operator.image", "operator.imagePullPolicy",
    "operator.imagePullSecrets", "operator.priorityClassName", "operator.runtimeClass",
    "operator.use_ocp_driver_toolkit", "operator.cleanupCRD", "operator.upgradeCRD",
    "operator.annotations",
    "operator.logging", "operator.resources", "operator.tolerations", "operator.affinity",
    "driver.enabled", "driver.repository", "driver.image", "driver.version", "driver.imagePullPolicy",
    "driver.imagePullSecrets", "driver.usePrecompiled", "driver.startupProbe", "driver.rdma.enabled", "driver.rdma.useHostMofed", "driver.upgradePolicy",
    "driver.manager", "driver.env", "driver.resources", "driver.repoConfig.configMapName",
    "driver.certConfig.name", "driver.licensingConfig", "driver.virtualTopology.config",
    "driver.kernelModuleConfig.name",
    "driver.nvidiaDriverCRD.enabled", "driver.nvidiaDriverCRD.deployDefaultCR",
    "driver.nvidiaDriverCRD.driverType", "driver.nvidiaDriverCRD.nodeSelector",
    "toolkit.enabled", "toolkit.repository", "toolkit.image", "toolkit.version", "toolkit.imagePullPolicy",
    "toolkit.imagePullSecrets", "toolkit.env", "toolkit.resources", "toolkit.installDir",
    "devicePlugin.enabled", "devicePlugin.repository", "devicePlugin.image", "devicePlugin.version",
    "devicePlugin.imagePullPolicy", "devicePlugin.imagePullSecrets", "devicePlugin.args", "devicePlugin.env",
    "devicePlugin.resources", "devicePlugin.config.create", "devicePlugin.config.name",
    "devicePlugin.config.default", "devicePlugin.config.data", "devicePlugin.mps.root",
    "dcgm.enabled", "dcgm.repository", "dcgm.image", "dcgm.version", "dcgm.env", "dcgm.resources",
    "dcgmExporter.enabled", "dcgmExporter.repository", "dcgmExporter.image", "dcgmExporter.version",
    "dcgmExporter.imagePullPolicy", "dcgmExporter.env", "dcgmExporter.resources", "dcgmExporter.serviceMonitor",
    "gfd.enabled", "gfd.repository", "gfd.image", "gfd.version", "gfd.env", "gfd.resources",
    "migManager.enabled", "migManager.repository", "migManager.image", "migManager.version", "migManager.env",
    "migManager.resources", "migManager.config.create", "migManager.config.name", "migManager.config.default",
    "migManager.config.data", "migManager.gpuClientsConfig.name",
    "mig.strategy",
    "nodeStatusExporter.enabled",
    "gds.enabled", "gds.repository", "gds.image", "gds.version", "gds.imagePullPolicy", "gds.env", "gds.args",
    "gdrcopy.enabled", "gdrcopy.repository", "gdrcopy.image", "gdrcopy.version", "gdrcopy.imagePullPolicy",
    "gdrcopy.env", "gdrcopy.args",
    "vgpuManager.enabled", "vgpuDeviceManager.enabled", "vgpuDeviceManager.config", "vfioManager.enabled",
    "kataManager.enabled", "kataManager.config", "sandboxDevicePlugin.enabled",
    "ccManager.enabled", "ccManager.defaultMode",
    "node-feature-discovery",
))


def chart_series(version):
    """The catalog series of a chart version: v25.3.4 -> v25.3."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?\Z", str(version).strip())
    if not match:
        return None
    return "v%s.%s" % (match.group(1), match.group(2))


GPU_OPERATOR_CHARTS = {
    "v24.9": {
        "pinned": "v24.9.2",
        "driver_version": "550.144.03",
        "added": frozenset(("driver.useOpenKernelModules", "cdi.default", "operator.defaultRuntime",
                            "operator.initContainer")),
        "kernel_module_key": "useOpenKernelModules",
        "cdi_default": False,
    },
    "v25.3": {
        "pinned": "v25.3.4",
        "driver_version": "580.82.07",
        "added": frozenset(("driver.kernelModuleType", "cdi.default", "operator.initContainer")),
        "kernel_module_key": "kernelModuleType",
        "cdi_default": False,
    },
    "v25.10": {
        "pinned": "v25.10.1",
        "driver_version": "580.105.08",
        "added": frozenset(("driver.kernelModuleType", "operator.initContainer", "driver.secretEnv")),
        "kernel_module_key": "kernelModuleType",
        "cdi_default": True,
    },
    "v26.3": {
        "pinned": "v26.3.0",
        "driver_version": "580.126.20",
        "added": frozenset(("driver.kernelModuleType", "cdi.nriPluginEnabled", "sandboxWorkloads.mode", "driver.secretEnv")),
        "kernel_module_key": "kernelModuleType",
        "cdi_default": True,
    },
}

# Where a key that a version lacks does exist, for the error message.
KEY_HISTORY = {
    "driver.kernelModuleType": "added in v25.3 (use driver.useOpenKernelModules before)",
    "driver.useOpenKernelModules": "a no-op from v25.3 (use driver.kernelModuleType)",
    "cdi.default": "removed in v25.10 (CDI is the default there)",
    "cdi.nriPluginEnabled": "added in v26.3",
    "sandboxWorkloads.mode": "added in v26.3",
}

KERNEL_MODULE_TYPES = ("auto", "open", "proprietary")
# "auto" picks open or proprietary per GPU and driver branch; only R570+ driver containers support it.
KERNEL_MODULE_AUTO_MIN_DRIVER = (570, 86, 15)
MIG_CONFIG_DEFAULTS = ("all-disabled", "")
RDMA_MODES = ("auto", "dmabuf", "peermem", "off")
SANDBOX_WORKLOADS = ("container", "vm-passthrough", "vm-vgpu")
DRIVER_TYPES = ("gpu", "vgpu", "vgpu-host-manager")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
# The rdma / gds / gdrcopy fields of an NVIDIADriver spec and their kinds (CRD nvidia.com_nvidiadrivers.yaml, the same
# from v24.9.2 to v25.10): a driver pool's settings go into the resource as given, so they are checked against it here.
_SIDECAR_FIELDS = {"enabled": "bool", "repository": "str", "image": "str", "version": "str", "imagePullPolicy": "pull_policy",
                   "imagePullSecrets": "strings", "env": "env", "args": "strings"}
DRIVER_FEATURE_FIELDS = {"rdma": {"enabled": "bool", "useHostMofed": "bool"}, "gds": _SIDECAR_FIELDS,
                         "gdrcopy": _SIDECAR_FIELDS}

GPU_OPERATOR_REPO_URL = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
CLUSTER_POLICY_NAME = "cluster-policy"
DRIVER_DAEMONSET_LABEL = "app=nvidia-driver-daemonset"

# Sidecars of the driver pod that an option implies, and what their log says once loaded
# (gpu-operator-rdma.rst; the GDS and GDRCopy sidecars publish no fixed message: their readiness
# is their load check).
DRIVER_SIDECARS = {
    "peermem": {"container": "nvidia-peermem-ctr", "message": "successfully loaded nvidia-peermem module"},
    "gds": {"container": "nvidia-fs-ctr", "message": None},
    "gdrcopy": {"container": "nvidia-gdrcopy-ctr", "message": None},
}

# Node labels the operator sets on a GPU node per enabled component (controllers/state_manager.go).
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
DEPLOY_LABELS = (
    ("driver", "driver"), ("toolkit", "container-toolkit"), ("device_plugin", "device-plugin"),
    ("gfd", "gpu-feature-discovery"), ("dcgm_exporter", "dcgm-exporter"), ("validator", "operator-validator"),
)

# Platform specifics (google-gke.rst, microsoft-aks.rst, state_manager.go ocpSuggestedNamespace).
GPU_OPERATOR_PLATFORMS = {
    "generic": {"namespace": "gpu-operator", "driver": True, "toolkit": True},
    # GKE installs the driver (gpu-driver-version on the pool); the operator must not.
    "gke": {"namespace": "gpu-operator", "driver": False, "toolkit": True, "cdi": True,
            "install_dir": GKE_NVIDIA_DIR, "runtime_config_source_from": (1, 33),
            "critical_pods_quota": 100, "mig_with_reboot": True},
    # AKS stock GPU images ship driver and toolkit; "--gpu-driver none" pools need the operator's.
    "aks": {"namespace": "gpu-operator", "driver": False, "toolkit": False,
            "runtime_class": "nvidia-container-runtime"},
    "openshift": {"namespace": "nvidia-gpu-operator", "driver": True, "toolkit": True, "openshift": True},
}
AKS_DRIVER_SOURCES = ("preinstalled", "operator")
CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")

# Pod Security Admission: the operands are privileged (driver, toolkit, device plugin mount host
# paths and load kernel modules), so the namespace must allow privileged pods.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/audit": "privileged",
    "pod-security.kubernetes.io/warn": "privileged",
}

# The driver upgrade controller (NVIDIA/k8s-operator-libs@1090aefa pkg/upgrade/consts.go, used by the GPU Operator
# with driver name "gpu"): the node label it moves through the states below, the label that keeps a node out of the
# upgrade, and the order of the states (node-maintenance-required / post-maintenance-required only with the
# maintenance operator). A node without the state label has not been processed yet.
DRIVER_UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
DRIVER_UPGRADE_SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
DRIVER_UPGRADE_STATES = (
    "upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required",
    "node-maintenance-required", "post-maintenance-required", "pod-restart-required", "validation-required",
    "uncordon-required", "upgrade-done", "upgrade-failed",
)
DRIVER_UPGRADE_DONE = "upgrade-done"
DRIVER_UPGRADE_FAILED = "upgrade-failed"
# The node label of the operator's driver DaemonSet (controllers/state_manager.go), which marks the nodes whose driver
# the upgrade controller manages.
DRIVER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.driver"
# The driver pod's containers: the init container that unloads the old driver before the new one loads (its log says
# why a node cannot move on: modules in use, pods still on the GPUs) and the driver container.
DRIVER_MANAGER_CONTAINER = "k8s-driver-manager"
DRIVER_CONTAINER = "nvidia-driver-ctr"

# driver.upgradePolicy of the chart (deployments/gpu-operator/values.yaml at v25.10.1 and v26.3.0): option -> chart key,
# with the kind of each value; the chart's defaults are autoUpgrade true, maxParallelUpgrades 1, maxUnavailable 25%,
# waitForCompletion.timeoutSeconds 0, gpuPodDeletion {force false, timeoutSeconds 300, deleteEmptyDir false},
# drain {enable false, force false, timeoutSeconds 300, deleteEmptyDir false}.
DRIVER_UPGRADE_POLICY = {
    "auto_upgrade": ("autoUpgrade", "bool"),
    "max_parallel_upgrades": ("maxParallelUpgrades", "count"),
    "max_unavailable": ("maxUnavailable", "count_or_percent"),
    "wait_for_completion": ("waitForCompletion", {"timeout_seconds": ("timeoutSeconds", "count"),
                                                  "pod_selector": ("podSelector", "str")}),
    "gpu_pod_deletion": ("gpuPodDeletion", {"force": ("force", "bool"), "timeout_seconds": ("timeoutSeconds", "count"),
                                            "delete_empty_dir": ("deleteEmptyDir", "bool")}),
    "drain": ("drain", {"enable": ("enable", "bool"), "force": ("force", "bool"), "pod_selector": ("podSelector", "str"),
                        "timeout_seconds": ("timeoutSeconds", "count"), "delete_empty_dir": ("deleteEmptyDir", "bool")}),
}
