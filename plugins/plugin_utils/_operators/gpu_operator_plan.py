# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Catalog of the NVIDIA GPU Operator and Network Operator charts, and the plans built from it.

One table per fact (sources: NVIDIA/gpu-operator ``deployments/gpu-operator/values.yaml`` at each
tag, ``api/nvidia/v1/clusterpolicy_types.go``; gpu-operator-rdma.rst, google-gke.rst,
microsoft-aks.rst; Mellanox/network-operator ``api/v1alpha1`` and its upgrade notes):

- ``GPU_OPERATOR_CHARTS``: per chart series, the pinned release and the value keys it accepts
  (``driver.kernelModuleType`` from v25.3, ``driver.useOpenKernelModules`` before it, ...).
- ``GPU_OPERATOR_PLATFORMS``: the published specifics of generic Kubernetes, GKE, AKS, OpenShift.
- ``NETWORK_OPERATOR_CHARTS``: per chart series, the pinned release, its top-level value keys, the
  IPAM plugins its NicClusterPolicy can deploy (Whereabouts removed in 25.10), the component
  image tags and the chart's ``kubeVersion`` (``kube_version_refusal``: helm's pre-release rule).

``gpu_operator_plan`` and ``network_operator_plan`` turn role options into chart values and
objects, refusing (``OperatorInputError`` naming the option) anything the chosen chart version,
platform or the GPU hosts' facts cannot do, so the roles fail before anything is installed. The
per-host GPUDirect RDMA rule belongs to ``gpu_host_facts`` (``_gpu_host``); here the hosts' verdicts are
combined (``resolve_rdma_mode``), and for hosts without a driver yet, where the operator installs it, the
rule is asked about the driver this catalog pins (``_gpu_host.gpudirect_rdma_planned``).
"""

from __future__ import annotations

import copy
import json
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import facts as _gpu_host
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _k8s_names

# --------------------------------------------------------------------------------------------
# GPU Operator chart catalog
# --------------------------------------------------------------------------------------------

# Value keys every catalogued gpu-operator chart accepts. A key that names a map or list the chart
# passes through (nodeSelector, env, config data...) accepts anything below it.
_GPU_OPERATOR_COMMON_KEYS = frozenset((
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


def _series(version):
    """The catalog series of a chart version: v25.3.4 -> v25.3."""
    match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$", str(version).strip())
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
_KEY_HISTORY = {
    "driver.kernelModuleType": "added in v25.3 (use driver.useOpenKernelModules before)",
    "driver.useOpenKernelModules": "a no-op from v25.3 (use driver.kernelModuleType)",
    "cdi.default": "removed in v25.10 (CDI is the default there)",
    "cdi.nriPluginEnabled": "added in v26.3",
    "sandboxWorkloads.mode": "added in v26.3",
}

KERNEL_MODULE_TYPES = ("auto", "open", "proprietary")
# "auto" picks open or proprietary per GPU and driver branch; only R570+ driver containers support it.
KERNEL_MODULE_AUTO_MIN_DRIVER = (570, 86, 15)
MIG_STRATEGIES = ("none", "single", "mixed")
MIG_CONFIG_DEFAULTS = ("all-disabled", "")
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
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
_DEPLOY_LABELS = (
    ("driver", "driver"), ("toolkit", "container-toolkit"), ("device_plugin", "device-plugin"),
    ("gfd", "gpu-feature-discovery"), ("dcgm_exporter", "dcgm-exporter"), ("validator", "operator-validator"),
)

# Platform specifics (google-gke.rst, microsoft-aks.rst, state_manager.go ocpSuggestedNamespace).
GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
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

# --------------------------------------------------------------------------------------------
# Network Operator chart catalog
# --------------------------------------------------------------------------------------------

_NETWORK_OPERATOR_COMMON_KEYS = frozenset((
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


class OperatorInputError(ValueError):
    """Input a chart version, platform or the GPU hosts cannot take; the message names the option."""


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def _require(condition, message, *args):
    if not condition:
        raise OperatorInputError(message % args if args else message)


def _catalog_chart(catalog, chart, version, shown=lambda series: series):
    """(series, entry) of chart ``version`` in ``catalog``; refuses a version outside it, listing the known series."""
    series = _series(version)
    _require(series in catalog, "chart_version: %s chart %r is not in the catalog (known: %s)", chart, version,
             ", ".join("%s.x (pinned %s)" % (shown(s), e["pinned"]) for s, e in catalog.items()))
    return series, catalog[series]


def _dns_label(option, value):
    """A namespace or short name, checked by the collection's one name check (_k8s_names)."""
    why = _k8s_names.check("dns1123_label", value)
    _require(why is None, "%s: %s", option, why)
    return value


def _dns_subdomain(option, value):
    why = _k8s_names.check("dns1123_subdomain", value)
    _require(why is None, "%s: %s", option, why)
    return value


def _choice(option, value, choices):
    _require(value in choices, "%s: %r is not one of: %s", option, value, ", ".join(choices))
    return value


def _flatten(values, prefix=""):
    """Dotted paths of every leaf of a values dict (a dict value is walked, anything else is a leaf)."""
    paths = []
    for key, value in (values or {}).items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        if isinstance(value, dict) and value:
            paths.extend(_flatten(value, path))
        else:
            paths.append(path)
    return paths


def _accepted(path, keys):
    parts = path.split(".")
    return any(".".join(parts[:index]) in keys for index in range(1, len(parts) + 1))


def _merge(base, extra):
    """A copy of ``base`` with ``extra`` merged in recursively (dicts merge, anything else replaces)."""
    result = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", str(text or ""))[:3])


def _chart_source(options, chart, repo_url):
    """chart_ref and chart_repo_url of a release: the upstream chart unless set; an empty (not unset) repository
    URL means chart_ref is a local chart path or an OCI reference (the apply role then leaves the URL out)."""
    url = options.get("chart_repo_url")
    return {"chart_ref": options.get("chart_ref") or chart, "chart_repo_url": repo_url if url is None else str(url)}


def _pinned(version, pinned, prefix=""):
    """A full chart version as given (v25.3.4), or the series' pinned release for a series (v25.3)."""
    text = str(version).strip().lstrip("v")
    return prefix + text if text.count(".") == 2 else pinned


# --------------------------------------------------------------------------------------------
# GPU Operator
# --------------------------------------------------------------------------------------------

def gpu_operator_chart(version):
    """(series, catalog entry) of a gpu-operator chart version; refuses versions outside the catalog."""
    return _catalog_chart(GPU_OPERATOR_CHARTS, "GPU Operator", version)


def gpu_operator_keys(version):
    """The value keys (dotted) that gpu-operator chart ``version`` accepts."""
    dummy, entry = gpu_operator_chart(version)
    return _GPU_OPERATOR_COMMON_KEYS | entry["added"]


def check_gpu_operator_values(values, version, option="values"):
    """Refuse a values dict holding a key chart ``version`` does not have, naming the key and the version."""
    keys = gpu_operator_keys(version)
    unknown = [path for path in _flatten(values) if not _accepted(path, keys)]
    if unknown:
        hints = ["%s (%s)" % (p, _KEY_HISTORY[p]) if p in _KEY_HISTORY else p for p in unknown]
        raise OperatorInputError("%s: GPU Operator chart %s has no value %s" % (option, version, ", ".join(hints)))
    return values


def _gke_version(option, text):
    match = re.match(r"^v?(\d+)\.(\d+)", str(text or ""))
    _require(match is not None, "%s: %r is not a GKE version (for example 1.33.2-gke.1111000)", option, text)
    return int(match.group(1)), int(match.group(2))


# What a host without MOFED has once the Network Operator's DOCA-OFED driver container runs there.
CONTAINER_OFED = dict(present=True, kind="the Network Operator's DOCA-OFED", version="container")


def _host_verdicts(hosts, planned, container_ofed=False):
    """{host: gpudirect_rdma verdict} and notes: the facts' own verdict, or for a host without a driver where the
    operator installs one (``planned``: version, kernel_module_type, chart) the verdict for that driver. With
    ``container_ofed`` a host without MOFED is judged as it will be with the Network Operator's OFED container."""
    verdicts, notes = {}, []
    for host, facts in sorted(hosts.items()):
        facts = facts or {}
        borrowed = container_ofed and not (facts.get("ofed") or {}).get("present")
        if borrowed:
            facts = dict(facts, ofed=CONTAINER_OFED)
        if planned and not _gpu_host.driver_loaded(facts):
            verdict = _gpu_host.gpudirect_rdma_planned(facts, planned["version"], planned.get("kernel_module_type"))
            chosen = verdict["mode"] if verdict["mode"] != "unsupported" else "off"
            notes.append("%s: %s for the driver GPU Operator chart %s installs (%s)%s" % (
                host, chosen, planned["chart"], "; ".join(verdict["evidence"]),
                "; not chosen: " + "; ".join(verdict["reasons"]) if verdict["reasons"] else ""))
            verdicts[host] = verdict
        elif isinstance(facts.get("gpudirect_rdma"), dict):
            verdicts[host] = _gpu_host.gpudirect_rdma(facts) if borrowed else facts["gpudirect_rdma"]
            if borrowed:
                notes.append("%s: judged with the Network Operator's DOCA-OFED container (rdma.use_host_mofed false; "
                             "the host has no MOFED): %s" % (host, verdicts[host]["mode"]))
    return verdicts, notes


def resolve_rdma_mode(requested, hosts, planned=None, container_ofed=False):
    """The GPUDirect RDMA mode for ``requested`` (auto|dmabuf|peermem|off) on the GPU hosts' facts.

    ``hosts`` maps host name -> gpu_host facts. auto takes the mode every host's verdict agrees on
    (unsupported -> off); a forced mode must be supported on every host. ``planned`` (dict version,
    kernel_module_type, chart) is the driver the GPU Operator installs: a host without a driver is judged
    for it (its facts cannot show a driver that is not there yet), and the notes say why. ``container_ofed``:
    MOFED comes from the Network Operator's driver container, so a host without it is judged with it.
    Returns (mode, notes).
    """
    _choice("rdma.mode", requested, RDMA_MODES)
    if requested == "off":
        return "off", []
    if requested == "auto" and not hosts:
        return "off", ["GPUDirect RDMA is off: no GPU host facts to choose a mode from (gpu_host_facts)"]
    _require(bool(hosts), "rdma.mode %s needs the GPU hosts' gpu_host facts (gpu_host_facts), and none were given",
             requested)
    verdicts, notes = _host_verdicts(hosts, planned, container_ofed)
    missing = sorted(set(hosts) - set(verdicts))
    _require(not missing, "rdma.mode %s: no gpu_host.gpudirect_rdma facts for %s (run gpu_host_facts on them)",
             requested, ", ".join(missing))
    if requested == "auto":
        by_mode = {}
        for host, verdict in sorted(verdicts.items()):
            by_mode.setdefault(verdict.get("mode"), []).append(host)
        _require(len(by_mode) == 1, "rdma.mode auto: the GPU hosts do not agree on a GPUDirect RDMA mode (%s); "
                 "fix the hosts or set rdma.mode", "; ".join("%s: %s" % (m, ", ".join(h)) for m, h in sorted(by_mode.items())))
        mode = next(iter(by_mode))
        if mode == "unsupported":
            reasons = sorted({r for v in verdicts.values() for r in v.get("reasons") or []})
            return "off", ["GPUDirect RDMA is off: no GPU host supports it (%s)" % "; ".join(reasons)] + notes
        _require(mode in ("dmabuf", "peermem"), "rdma.mode auto: unknown mode %r in the hosts' facts", mode)
        return mode, notes
    refused = []
    for host, verdict in sorted(verdicts.items()):
        mode_verdict = (verdict.get("modes") or {}).get(requested) or {}
        if not mode_verdict.get("supported"):
            refused.append("%s (%s)" % (host, "; ".join(mode_verdict.get("reasons") or ["no verdict in the facts"])))
    _require(not refused, "rdma.mode %s is not supported on %s", requested, ", ".join(refused))
    return requested, notes


def _driver_branch_ok_for_auto(driver_version):
    version = _version_tuple(driver_version)
    return not version or version >= KERNEL_MODULE_AUTO_MIN_DRIVER


def _kernel_module(options, entry, version, needs_open):
    """(values for the kernel module choice, resolved type or None for the chart default) for the chart version."""
    driver = options.get("driver") or {}
    requested = driver.get("kernel_module_type")
    if requested is not None:
        _choice("driver.kernel_module_type", requested, KERNEL_MODULE_TYPES)
    reasons = [name for name, on in needs_open if on]
    if reasons:
        _require(requested != "proprietary", "driver.kernel_module_type proprietary cannot serve %s: "
                 "they need the open kernel modules (set it to open or auto)", " and ".join(reasons))
        requested = "open"  # pre-R570 drivers and 'auto' on older GPUs would pick proprietary
    if entry["kernel_module_key"] == "useOpenKernelModules":
        _require(requested != "auto", "driver.kernel_module_type auto: GPU Operator chart %s has no "
                 "driver.kernelModuleType (added in v25.3); choose open or proprietary", version)
        if requested is None:
            return {}, None
        return {"useOpenKernelModules": requested == "open"}, requested
    driver_version = driver.get("version") or entry["driver_version"]
    _require((requested or "auto") != "auto" or _driver_branch_ok_for_auto(driver_version),
             "driver.kernel_module_type auto (the chart default) needs a 570.86.15 or later driver container, "
             "driver.version is %s; choose open or proprietary", driver_version)
    if requested is None:
        return {}, None
    return {"kernelModuleType": requested}, requested


def _device_plugin_values(options, mig_strategy):
    plugin = options.get("device_plugin") or {}
    values = {"enabled": bool(plugin.get("enabled", True))}
    sharing = dict(plugin.get("sharing") or {})
    strategy = _choice("device_plugin.sharing.strategy", sharing.get("strategy") or "none", SHARING_STRATEGIES)
    if strategy == "none":
        return values
    _require(values["enabled"], "device_plugin.sharing needs device_plugin.enabled")
    _require(strategy != "mps" or mig_strategy == "none",
             "device_plugin.sharing.strategy mps: MPS is not supported on MIG devices (mig.strategy is %s)", mig_strategy)
    replicas = sharing.get("replicas", 2)
    _require(isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 2,
             "device_plugin.sharing.replicas must be a whole number >= 2 for %s, got %r", strategy, replicas)
    block = {"renameByDefault": bool(sharing.get("rename_by_default")),
             "resources": [{"name": name, "replicas": replicas}
                           for name in (sharing.get("resources") or ["nvidia.com/gpu"])]}
    if sharing.get("fail_requests_greater_than_one") is not None:
        block["failRequestsGreaterThanOne"] = bool(sharing["fail_requests_greater_than_one"])
    config_name = _dns_label("device_plugin.sharing.config_name", sharing.get("config_name") or "shared")
    config = {"version": "v1", "flags": {"migStrategy": mig_strategy},
              "sharing": {"timeSlicing" if strategy == "time-slicing" else "mps": block}}
    values["config"] = {"create": True, "name": "device-plugin-config", "default": config_name,
                        "data": {config_name: json.dumps(config, indent=2, sort_keys=True)}}
    return values


def _mig_values(options, platform):
    mig = options.get("mig") or {}
    strategy = _choice("mig.strategy", mig.get("strategy") or "single", MIG_STRATEGIES)
    manager = {"enabled": bool(mig.get("manager_enabled", True))}
    config = mig.get("config")
    default = mig.get("config_default") or "all-disabled"
    # The ClusterPolicy admits only these (CRD enum); a node gets another config through its nvidia.com/mig.config label.
    _require(default in MIG_CONFIG_DEFAULTS, "mig.config_default %r: the ClusterPolicy accepts only %s; choose a node's "
             "configuration with its nvidia.com/mig.config label", default, " or ".join(repr(d) for d in MIG_CONFIG_DEFAULTS))
    manager["config"] = {"default": default}
    if config:
        _require(manager["enabled"], "mig.config needs mig.manager_enabled")
        _require(isinstance(config, dict) and isinstance(config.get("mig-configs"), dict),
                 "mig.config must be a mig-parted config with a mig-configs map")
        _require(default in config["mig-configs"] or not default, "mig.config_default %r is not a configuration of "
                 "mig.config (%s)", default, ", ".join(sorted(config["mig-configs"])))
        manager["config"].update({"create": True, "name": "custom-mig-parted-config",
                                  "data": {"config.yaml": json.dumps(config, indent=2, sort_keys=True)}})
    if platform.get("mig_with_reboot") and manager["enabled"]:
        manager["env"] = [{"name": "WITH_REBOOT", "value": "true"}]
    return strategy, manager


def _driver_crs(options, version, entry, kernel_values, driver_on):
    pools = options.get("driver_pools") or []
    if not pools:
        return []
    _require(driver_on, "driver_pools: NVIDIADriver resources need the operator-managed driver (driver.enabled)")
    objects, selectors = [], []
    for index, pool in enumerate(pools):
        option = "driver_pools[%d]" % index
        name = _dns_subdomain(option + ".name", pool.get("name"))
        selector = pool.get("node_selector") or {}
        _require(isinstance(selector, dict) and bool(selector),
                 "%s.node_selector must name the pool's node labels (disjoint from the other pools)", option)
        why = _k8s_names.check("labels", selector)
        _require(why is None, "%s.node_selector: %s", option, why)
        _require(selector not in selectors, "%s.node_selector repeats another pool's selector %s", option,
                 json.dumps(selector, sort_keys=True))
        selectors.append(selector)
        spec = {"driverType": _choice(option + ".driver_type", pool.get("driver_type") or "gpu", DRIVER_TYPES),
                "repository": pool.get("repository") or "nvcr.io/nvidia", "image": pool.get("image") or "driver",
                "version": str(pool.get("version") or entry["driver_version"]),
                "usePrecompiled": bool(pool.get("precompiled", False)),
                "nodeSelector": {str(k): str(v) for k, v in selector.items()}}
        module = pool.get("kernel_module_type")
        if module:
            _choice(option + ".kernel_module_type", module, KERNEL_MODULE_TYPES)
            _require(entry["kernel_module_key"] == "kernelModuleType" or module != "auto",
                     "%s.kernel_module_type auto: GPU Operator chart %s has no kernelModuleType (added in v25.3)",
                     option, version)
            spec["kernelModuleType"] = module
        else:
            spec.update(kernel_values)
        for key in DRIVER_FEATURE_FIELDS:
            if pool.get(key) is not None:
                spec[key] = _driver_feature("%s.%s" % (option, key), key, pool[key])
        objects.append({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver",
                        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpu_ops.cluster"}},
                        "spec": spec})
    return objects


def _field_problem(kind, value):
    """Why ``value`` is not of ``kind`` (a kind of DRIVER_FEATURE_FIELDS), or None."""
    if kind == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if kind == "str":
        return None if isinstance(value, str) and value else "must be a non-empty string"
    if kind == "pull_policy":
        return None if value in PULL_POLICIES else "must be one of: %s" % ", ".join(PULL_POLICIES)
    if kind == "strings":
        return None if isinstance(value, list) and all(isinstance(v, str) and v for v in value) else \
            "must be a list of non-empty strings"
    entries = value if isinstance(value, list) else [None]
    if all(isinstance(e, dict) and set(e) <= {"name", "value"} and isinstance(e.get("name"), str) and e["name"]
           and isinstance(e.get("value", ""), str) for e in entries):
        return None
    return "must be a list of {name, value} (strings)"


def _driver_feature(option, key, value):
    """A driver pool's rdma / gds / gdrcopy settings, checked against the NVIDIADriver CRD before they go into it."""
    fields = DRIVER_FEATURE_FIELDS[key]
    _require(isinstance(value, dict), "%s: must be a dict of %s, got %s", option, ", ".join(fields), type(value).__name__)
    unknown = sorted(set(value) - set(fields), key=str)
    _require(not unknown, "%s: unknown field %s (the NVIDIADriver %s fields: %s)", option,
             ", ".join(str(u) for u in unknown), key, ", ".join(fields))
    for field, field_value in value.items():
        why = _field_problem(fields[field], field_value)
        _require(why is None, "%s.%s %s, got %s", option, field, why, _k8s_names.show(field_value))
    return dict(value)


def _hosts_with(hosts, test):
    return sorted(h for h, f in (hosts or {}).items() if test(f or {}))


def gpu_operator_plan(options, hosts=None):
    """Chart values, extra objects and verification expectations for the GPU Operator.

    ``options``: the role's settings (chart_version, platform, namespace, driver, toolkit,
    device_plugin, mig, gds, gdrcopy, rdma, dcgm_exporter, sandbox_workloads, driver_pools, values,
    gke_version, aks_driver). ``hosts``: GPU host name -> gpu_host facts.
    """
    options = dict(options or {})
    hosts = dict(hosts or {})
    version = str(options.get("chart_version") or "")
    series, entry = gpu_operator_chart(version)
    platform_name = _choice("platform", options.get("platform") or "generic", tuple(GPU_OPERATOR_PLATFORMS))
    platform = dict(GPU_OPERATOR_PLATFORMS[platform_name])
    namespace = _dns_label("namespace", options.get("namespace") or platform["namespace"])
    if platform_name == "aks":
        source = _choice("aks_driver", options.get("aks_driver") or "preinstalled", AKS_DRIVER_SOURCES)
        if source == "operator":  # "--gpu-driver none" pools: a normal operator install
            platform.update(driver=True, toolkit=True, runtime_class=None)
    driver = dict(options.get("driver") or {})
    toolkit = dict(options.get("toolkit") or {})
    driver_on = platform["driver"] if driver.get("enabled") is None else bool(driver["enabled"])
    _require(not (driver_on and platform_name == "gke"),
             "driver.enabled: on GKE the driver is installed by GKE (gpu-driver-version on the node pool); "
             "the GPU Operator must not install it")
    _require(not (driver_on and platform_name == "aks" and not platform["driver"]),
             "driver.enabled: AKS pools with the preinstalled driver must not get the operator's driver "
             "(set aks_driver: operator for '--gpu-driver none' pools)")
    toolkit_on = platform["toolkit"] if toolkit.get("enabled") is None else bool(toolkit["enabled"])

    rdma = dict(options.get("rdma") or {})
    planned = None
    if driver_on:  # hosts without a driver yet are judged for the driver the operator will install
        planned = {"version": str(driver.get("version") or entry["driver_version"]), "chart": version,
                   "kernel_module_type": driver.get("kernel_module_type")}
    # use_host_mofed false: MOFED comes from the Network Operator's OFED container (ofed.source operator)
    mode, notes = resolve_rdma_mode(rdma.get("mode") or "auto", hosts, planned,
                                    container_ofed=rdma.get("use_host_mofed") is False)
    gds = bool(options.get("gds"))
    gdrcopy = bool(options.get("gdrcopy"))
    for name, wanted in (("gds", gds), ("gdrcopy", gdrcopy), ("rdma.mode peermem", mode == "peermem")):
        _require(not wanted or driver_on, "%s: its kernel module is loaded by a sidecar of the operator's driver pod, "
                 "and the driver is not installed by the operator here (platform %s, driver.enabled false)",
                 name, platform_name)
    use_host_mofed = rdma.get("use_host_mofed")
    if mode != "off" or gds:
        if use_host_mofed is None:
            use_host_mofed = bool(hosts) and all(((f or {}).get("ofed") or {}).get("present") for f in hosts.values())
        if use_host_mofed:
            lacking = _hosts_with(hosts, lambda f: not (f.get("ofed") or {}).get("present"))
            _require(not lacking, "rdma.use_host_mofed: MLNX_OFED/DOCA-OFED is not installed on %s", ", ".join(lacking))
    if driver.get("precompiled"):
        _require(driver_on, "driver.precompiled needs driver.enabled")

    values = {}
    needs_open = (("GPUDirect Storage (gds)", gds), ("DMA-BUF GPUDirect RDMA", mode == "dmabuf"))
    kernel_values, module_type = ({}, None)
    if driver_on:
        kernel_values, module_type = _kernel_module(options, entry, version, needs_open)
        driver_values = {"enabled": True, "usePrecompiled": bool(driver.get("precompiled", False))}
        driver_values.update(kernel_values)
        if driver.get("version"):
            driver_values["version"] = str(driver["version"])
        driver_values["rdma"] = {"enabled": mode == "peermem", "useHostMofed": bool(use_host_mofed)}
        if options.get("driver_pools"):
            driver_values["nvidiaDriverCRD"] = {"enabled": True, "deployDefaultCR": False}
        values["driver"] = driver_values
    else:
        _require(not driver.get("kernel_module_type") or driver.get("kernel_module_type") == "auto",
                 "driver.kernel_module_type: the driver is not installed by the operator here (platform %s)", platform_name)
        if mode == "dmabuf" or gds:
            proprietary = _hosts_with(hosts, lambda f: (f.get("kernel_module") or {}).get("type") == "proprietary")
            _require(not (gds and proprietary), "gds: the preinstalled driver on %s uses the proprietary kernel "
                     "modules; GPUDirect Storage needs the open ones", ", ".join(proprietary))
        values["driver"] = {"enabled": False}

    values["toolkit"] = {"enabled": toolkit_on}
    if toolkit.get("version"):
        values["toolkit"]["version"] = str(toolkit["version"])
    mig_strategy, manager = _mig_values(options, platform)
    values["devicePlugin"] = _device_plugin_values(options, mig_strategy)
    values["mig"] = {"strategy": mig_strategy}
    values["migManager"] = manager
    values["gds"] = {"enabled": gds}
    values["gdrcopy"] = {"enabled": gdrcopy}
    exporter = dict(options.get("dcgm_exporter") or {})
    values["dcgmExporter"] = {"enabled": bool(exporter.get("enabled", True))}
    if exporter.get("service_monitor"):
        _require(values["dcgmExporter"]["enabled"], "dcgm_exporter.service_monitor needs dcgm_exporter.enabled")
        values["dcgmExporter"]["serviceMonitor"] = {"enabled": True}
    sandbox = dict(options.get("sandbox_workloads") or {})
    if sandbox.get("enabled"):
        values["sandboxWorkloads"] = {"enabled": True, "defaultWorkload": _choice(
            "sandbox_workloads.default_workload", sandbox.get("default_workload") or "container", SANDBOX_WORKLOADS)}
    objects = []
    if platform_name == "gke":
        values["hostPaths"] = {"driverInstallDir": GKE_NVIDIA_DIR}
        values["toolkit"]["installDir"] = GKE_NVIDIA_DIR
        values["cdi"] = {"enabled": True}
        gke_version = options.get("gke_version")
        _require(bool(gke_version), "gke_version: the GKE preset needs the cluster's GKE version "
                 "(RUNTIME_CONFIG_SOURCE=file is required from 1.33)")
        if _gke_version("gke_version", gke_version) >= platform["runtime_config_source_from"]:
            values["toolkit"]["env"] = [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
        objects.append({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": {"name": "gpu-operator-quota", "namespace": namespace},
                        "spec": {"hard": {"pods": str(platform["critical_pods_quota"])},
                                 "scopeSelector": {"matchExpressions": [{
                                     "operator": "In", "scopeName": "PriorityClass",
                                     "values": list(CRITICAL_PRIORITY_CLASSES)}]}}})
    if platform.get("runtime_class") and not toolkit_on:
        values["operator"] = {"runtimeClass": platform["runtime_class"]}
    if platform.get("openshift"):
        values["platform"] = {"openshift": True}
    objects.extend(_driver_crs(options, version, entry, kernel_values, driver_on))
    extra = options.get("values") or {}
    check_gpu_operator_values(extra, version, option="values")
    values = _merge(values, extra)
    check_gpu_operator_values(values, version, option="values")

    components = {"driver": driver_on, "toolkit": toolkit_on, "device_plugin": values["devicePlugin"]["enabled"],
                  "gfd": True, "dcgm_exporter": values["dcgmExporter"]["enabled"], "validator": True}
    sidecars = [dict(DRIVER_SIDECARS[name]) for name, on in
                (("peermem", mode == "peermem"), ("gds", gds), ("gdrcopy", gdrcopy)) if on]
    return {
        "chart": dict(_chart_source(options, GPU_OPERATOR_CHART, GPU_OPERATOR_REPO_URL),
                      release_name=options.get("release_name") or "gpu-operator", release_namespace=namespace,
                      chart_version=_pinned(version, entry["pinned"], prefix="v"), values=values),
        "series": series,
        "platform": platform_name,
        "namespace": namespace,
        "namespace_labels": dict(POD_SECURITY_LABELS),
        "objects": objects,
        "rdma": {"mode": mode, "use_host_mofed": bool(use_host_mofed) if mode != "off" else False, "notes": notes},
        "kernel_module_type": module_type,
        "expect": {
            "labels": dict([(GPU_PRESENT_LABEL, "true")] + [
                ("nvidia.com/gpu.deploy.%s" % label, "true") for key, label in _DEPLOY_LABELS if components[key]]),
            "gpu_resource": "nvidia.com/gpu" if mig_strategy != "mixed" else None,
            "driver_sidecars": sidecars if driver_on else [],
        },
    }


def gpu_operator_chart_versions():
    """The pinned chart version of every catalogued series (newest last)."""
    return [entry["pinned"] for entry in GPU_OPERATOR_CHARTS.values()]


# --------------------------------------------------------------------------------------------
# Network Operator
# --------------------------------------------------------------------------------------------

def network_operator_chart(version):
    """(series, catalog entry) of a network-operator chart version; refuses versions outside the catalog."""
    return _catalog_chart(NETWORK_OPERATOR_CHARTS, "Network Operator", version, shown=lambda series: series.lstrip("v"))


def network_operator_keys(version):
    """The top-level value keys that network-operator chart ``version`` accepts."""
    dummy, entry = network_operator_chart(version)
    return _NETWORK_OPERATOR_COMMON_KEYS | entry["added"]


# A server version with a semver pre-release part: v1.33.5-gke.1234, v1.34.3-eks-ac2d5a0 (build metadata, +k3s1,
# is no pre-release).
_PRERELEASE_SERVER = re.compile(r"^v?\d+\.\d+\.\d+-[0-9A-Za-z.-]+(?:\+[0-9A-Za-z.-]+)?$")
_PRERELEASE_COMPARATOR = re.compile(r"\d+(?:\.\d+){0,2}-[0-9A-Za-z]")


def refuses_prerelease(kube_version):
    """Whether helm refuses a chart of this ``kubeVersion`` on every cluster that reports a pre-release version:
    none of its comparators carries a pre-release itself (the "-0" idiom)."""
    return bool(kube_version) and not _PRERELEASE_COMPARATOR.search(str(kube_version))


def kube_version_refusal(chart, kube_version, server_version=None):
    """Why helm would refuse ``chart`` (its Chart.yaml ``kubeVersion``) on a cluster of ``server_version``, or
    without one on a cluster that reports any pre-release version; None when it would not for that reason.

    helm checks kubeVersion with Masterminds/semver, whose constraints never match a pre-release version unless
    one of their comparators carries a pre-release itself (the "-0" idiom); managed clusters report pre-release
    versions (GKE v1.33.5-gke.1234, EKS v1.34.3-eks-ac2d5a0), so ``>= 1.21.0`` refuses them however new they
    are. Only that rule is judged here: the range itself is helm's to check.
    """
    if not refuses_prerelease(kube_version):
        return None
    if server_version is None:
        return ("%s declares kubeVersion '%s', which helm never matches with a pre-release Kubernetes version such as "
                "GKE's v1.33.5-gke.1234 or EKS's v1.34.3-eks-ac2d5a0" % (chart, kube_version))
    if not server_version or not _PRERELEASE_SERVER.match(str(server_version).strip()):
        return None
    return ("%s declares kubeVersion '%s', which helm never matches with a pre-release Kubernetes version such as "
            "this cluster's %s (helm: 'chart requires kubeVersion: %s which is incompatible with Kubernetes %s')"
            % (chart, kube_version, server_version, kube_version, server_version))


def check_network_operator_values(values, version, option="values"):
    keys = network_operator_keys(version)
    unknown = sorted(set(values or {}) - keys)
    _require(not unknown, "%s: Network Operator chart %s has no top-level value %s (it has: %s)", option, version,
             ", ".join(unknown), ", ".join(sorted(keys)))
    return values


def _image(name, tag, overrides=None):
    image = {"image": name, "repository": MELLANOX_REPOSITORY, "version": tag}
    image.update({k: v for k, v in (overrides or {}).items() if v})
    return image


def _selectors(option, selectors):
    selectors = dict(selectors or {})
    allowed = RDMA_SHARED_SELECTORS
    unknown = sorted(set(selectors) - set(allowed))
    _require(not unknown, "%s: unknown selector %s (allowed: %s)", option, ", ".join(unknown), ", ".join(allowed))
    for key, value in selectors.items():
        _require(isinstance(value, list) and all(isinstance(v, str) and v for v in value),
                 "%s.%s must be a list of strings", option, key)
    return selectors or {"vendors": [MELLANOX_VENDOR]}


def _ipam_config(option, network, ipam, pools):
    if ipam == "nv-ipam":
        pool = network.get("ip_pool")
        _require(pool in pools, "%s.ip_pool: %r is not one of network_operator ip_pools (%s)", option, pool,
                 ", ".join(sorted(pools)) or "none defined")
        return json.dumps({"type": "nv-ipam", "poolName": pool})
    ip_range = network.get("range")
    _require(bool(ip_range), "%s.range: Whereabouts needs the network's address range (CIDR)", option)
    config = {"type": "whereabouts", "range": ip_range}
    if network.get("exclude"):
        config["exclude"] = list(network["exclude"])
    return json.dumps(config)


def network_operator_plan(options, hosts=None):
    """Chart values, the NicClusterPolicy, IP pools and network objects for the Network Operator."""
    options = dict(options or {})
    version = str(options.get("chart_version") or "")
    series, entry = network_operator_chart(version)
    pinned = _pinned(version, entry["pinned"])
    tag = "network-operator-v%s" % pinned
    namespace = _dns_label("namespace", options.get("namespace") or "nvidia-network-operator")
    ipam = _choice("ipam", options.get("ipam") or "auto", IPAM_PLUGINS)
    if ipam == "auto":
        ipam = entry["default_ipam"]
    _require(ipam in entry["ipam"], "ipam: %s is not available in Network Operator chart %s (Whereabouts was "
             "removed in 25.10; use nv-ipam)", ipam, version)
    spec = {}
    ofed = dict(options.get("ofed") or {})
    source = _choice("ofed.source", ofed.get("source") or "host", OFED_SOURCES)
    if source == "host":
        lacking = _hosts_with(hosts, lambda f: not (f.get("ofed") or {}).get("present"))
        _require(not lacking, "ofed.source host: MLNX_OFED/DOCA-OFED is not installed on %s "
                 "(install it, or set ofed.source: operator)", ", ".join(lacking))
    else:
        driver_version = ofed.get("version") or entry["doca_driver"]
        _require(bool(driver_version), "ofed.version: the catalog knows no DOCA driver for Network Operator chart %s; "
                 "set the doca-driver image tag", version)
        spec["ofedDriver"] = {"image": "doca-driver", "repository": ofed.get("repository") or MELLANOX_REPOSITORY,
                              "version": str(driver_version),
                              "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1,
                                                "drain": {"enable": True, "force": True, "timeoutSeconds": 300,
                                                          "deleteEmptyDir": True}},
                              "startupProbe": {"initialDelaySeconds": 10, "periodSeconds": 20},
                              "livenessProbe": {"initialDelaySeconds": 30, "periodSeconds": 30},
                              "readinessProbe": {"initialDelaySeconds": 10, "periodSeconds": 30}}
    plugin = dict(options.get("rdma_shared_device_plugin") or {})
    resources = []
    if plugin.get("enabled", True):
        resource_name = plugin.get("resource_name") or RDMA_SHARED_RESOURCE
        _require(re.match(r"^[a-z0-9_]+$", resource_name) is not None,
                 "rdma_shared_device_plugin.resource_name: %r must be lowercase letters, digits and '_'", resource_name)
        hca_max = plugin.get("rdma_hca_max", 63)
        _require(isinstance(hca_max, int) and 1 <= hca_max <= 1000,
                 "rdma_shared_device_plugin.rdma_hca_max must be between 1 and 1000, got %r", hca_max)
        config = {"configList": [{"resourceName": resource_name, "rdmaHcaMax": hca_max,
                                  "selectors": _selectors("rdma_shared_device_plugin.selectors", plugin.get("selectors"))}]}
        spec["rdmaSharedDevicePlugin"] = dict(_image("k8s-rdma-shared-dev-plugin", tag),
                                              config=json.dumps(config, sort_keys=True))
        resources.append("%s/%s" % (RDMA_RESOURCE_PREFIX, resource_name))
    secondary = {"multus": _image("multus-cni", tag), "cniPlugins": _image("plugins", tag)}
    networks = list(options.get("networks") or [])
    if any((n or {}).get("kind") == "ipoib" for n in networks) or options.get("ipoib"):
        secondary["ipoib"] = _image("ipoib-cni", tag)
    if ipam == "whereabouts":
        secondary["ipamPlugin"] = _image("whereabouts", tag)
    else:
        spec["nvIpam"] = dict(_image("nvidia-k8s-ipam", tag), enableWebhook=False)
    spec["secondaryNetwork"] = secondary
    policy = {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
              "metadata": {"name": NIC_CLUSTER_POLICY_NAME}, "spec": spec}

    pools, pool_objects = {}, []
    for index, pool in enumerate(options.get("ip_pools") or []):
        option = "ip_pools[%d]" % index
        _require(ipam == "nv-ipam", "%s: IP pools are nv-ipam objects, and ipam is %s", option, ipam)
        name = _dns_subdomain(option + ".name", pool.get("name"))
        _require(name not in pools, "%s.name: %s is defined twice", option, name)
        _require(bool(re.match(r"^\d+\.\d+\.\d+\.\d+/\d+$", str(pool.get("subnet") or ""))),
                 "%s.subnet: %r is not an IPv4 CIDR", option, pool.get("subnet"))
        block = pool.get("per_node_block_size", 16)
        _require(isinstance(block, int) and block >= 2, "%s.per_node_block_size must be 2 or more, got %r", option, block)
        pool_spec = {"subnet": pool["subnet"], "perNodeBlockSize": block}
        if pool.get("gateway"):
            pool_spec["gateway"] = pool["gateway"]
        pools[name] = pool_spec
        pool_objects.append({"apiVersion": NV_IPAM_API, "kind": "IPPool",
                             "metadata": {"name": name, "namespace": namespace}, "spec": pool_spec})

    network_objects, names = [], set()
    for index, network in enumerate(networks):
        option = "networks[%d]" % index
        network = dict(network or {})
        kind = NETWORK_KINDS[_choice(option + ".kind", network.get("kind"), tuple(NETWORK_KINDS))]
        name = _dns_subdomain(option + ".name", network.get("name"))
        _require(name not in names, "%s.name: %s is defined twice", option, name)
        names.add(name)
        net_spec = {"networkNamespace": _dns_label(option + ".network_namespace", network.get("network_namespace") or "default")}
        if kind in ("MacvlanNetwork", "IPoIBNetwork"):
            _require(bool(network.get("master")), "%s.master: the %s needs its host interface (ibdev2netdev shows it)",
                     option, kind)
            net_spec["master"] = network["master"]
        if kind == "MacvlanNetwork":
            net_spec["mode"] = _choice(option + ".mode", network.get("mode") or "bridge", MACVLAN_MODES)
            mtu = network.get("mtu", 1500)
            _require(isinstance(mtu, int) and 0 <= mtu <= 9216, "%s.mtu must be between 0 and 9216, got %r", option, mtu)
            net_spec["mtu"] = mtu
        if kind == "HostDeviceNetwork":
            _require(bool(network.get("resource_name")), "%s.resource_name: a HostDeviceNetwork names the SR-IOV "
                     "device plugin resource its pods request", option)
            net_spec["resourceName"] = network["resource_name"]
        net_spec["ipam"] = _ipam_config(option, network, ipam, pools)
        network_objects.append({"apiVersion": "mellanox.com/v1alpha1", "kind": kind, "metadata": {"name": name},
                                "spec": net_spec})
    values = {"nfd": {"enabled": bool(options.get("nfd_enabled", True)), "deployNodeFeatureRules": True},
              "sriovNetworkOperator": {"enabled": bool(options.get("sriov_network_operator", False))}}
    check_network_operator_values(options.get("values") or {}, version)
    values = _merge(values, options.get("values") or {})
    return {
        "chart": dict(_chart_source(options, NETWORK_OPERATOR_CHART, NETWORK_OPERATOR_REPO_URL),
                      release_name=options.get("release_name") or "network-operator", release_namespace=namespace,
                      chart_version=pinned, values=values),
        "series": series,
        "kube_version": entry["kube_version"],
        "namespace": namespace,
        "ipam": ipam,
        "ofed_source": source,
        "nic_cluster_policy": policy,
        "ip_pools": pool_objects,
        "networks": network_objects,
        "rdma_resources": resources,
        "expected_states": sorted(NCP_STATES[k] for k in list(spec) + list(secondary) if k in NCP_STATES),
    }


# --------------------------------------------------------------------------------------------
# Readiness reports
# --------------------------------------------------------------------------------------------

def _pod_problems(pod):
    """What keeps a pod from being ready, or None when it is ready (or completed)."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase == "Succeeded":
        return None
    statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    waiting = []
    for container in statuses:
        state = container.get("state") or {}
        for key in ("waiting", "terminated"):
            detail = state.get(key)
            if detail and not (key == "terminated" and detail.get("exitCode") == 0):
                waiting.append("%s %s" % (container.get("name"), detail.get("reason") or key))
        if not container.get("ready") and not state.get("waiting") and not state.get("terminated") and \
                container in (status.get("containerStatuses") or []):
            waiting.append("%s not ready" % container.get("name"))
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    if phase == "Running" and ready:
        return None
    return ", ".join(waiting) or (phase or "Pending")


def _component_of(pod):
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("kind") == "DaemonSet":
            return owner.get("name")
    return labels.get("app") or labels.get("app.kubernetes.io/component") or pod["metadata"].get("name")


def not_ready_pods(pods):
    """[{component, pod, node, problem}] of the pods that are not ready, sorted by component and node."""
    report = []
    for pod in pods or []:
        problem = _pod_problems(pod)
        if problem:
            report.append({"component": _component_of(pod), "pod": pod["metadata"].get("name"),
                           "node": (pod.get("spec") or {}).get("nodeName") or "(unscheduled)", "problem": problem})
    return sorted(report, key=lambda r: (r["component"], r["node"], r["pod"]))


def readiness_report(policy, pods=None):
    """{ready, state, summary, components} for a ClusterPolicy or NicClusterPolicy and its namespace's pods."""
    policy = policy or {}
    status = policy.get("status") or {}
    state = status.get("state")
    kind = policy.get("kind") or "policy"
    name = (policy.get("metadata") or {}).get("name") or "?"
    components = [{"component": s.get("name"), "state": s.get("state"), "message": s.get("message")}
                  for s in status.get("appliedStates") or [] if s.get("state") not in ("ready", "ignore")]
    pods_report = not_ready_pods(pods)
    ready = state == "ready"
    lines = ["%s/%s is %s" % (kind, name, state or "without a status (the operator has not reconciled it)")]
    conditions = [c for c in status.get("conditions") or [] if c.get("status") == "True" and c.get("type") == "Error"
                  or (c.get("type") == "Ready" and c.get("status") == "False")]
    lines.extend("%s: %s (%s)" % (c.get("type"), c.get("reason"), c.get("message") or "") for c in conditions)
    lines.extend("component %s is %s%s" % (c["component"], c["state"], ": " + c["message"] if c["message"] else "")
                 for c in components)
    lines.extend("%s not ready on node %s (pod %s: %s)" % (r["component"], r["node"], r["pod"], r["problem"])
                 for r in pods_report)
    return {"ready": ready, "state": state, "summary": lines, "components": components, "pods": pods_report}


def node_report(nodes, gpu_hosts, expect):
    """Problems of the GPU hosts' nodes: missing, labels the operator should have set, no allocatable GPUs.

    ``gpu_hosts`` is {facts: {host: gpu_host}, nodes: {host: node name}}; ``expect`` the plan's
    ``expect``. A node must advertise at least as many ``nvidia.com/gpu`` as its host's facts list
    GPUs when the plan expects full GPUs (MIG single, time-slicing and MPS only add to that).
    """
    names = sorted(set((gpu_hosts.get("nodes") or {}).values()))
    gpu_counts = {gpu_hosts["nodes"][h]: len((f or {}).get("gpus") or []) for h, f in (gpu_hosts.get("facts") or {}).items()
                  if h in gpu_hosts.get("nodes", {})}
    by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes or []}
    problems = []
    for name in names:
        node = by_name.get(name)
        if node is None:
            problems.append("node %s does not exist" % name)
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        wrong = ["%s=%s" % (k, labels.get(k, "(missing)")) for k, v in sorted(expect.get("labels", {}).items())
                 if labels.get(k) != v]
        if wrong:
            problems.append("node %s: labels %s (expected %s)" % (name, ", ".join(wrong), ", ".join(
                "%s=%s" % (k, v) for k, v in sorted(expect["labels"].items()) if labels.get(k) != v)))
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        gpu_resources = {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and str(v) not in ("0", "")}
        resource = expect.get("gpu_resource")
        wanted = (gpu_counts or {}).get(name) or 1
        if resource:
            count = int(str(allocatable.get(resource, "0")) or 0)
            if count < wanted:
                problems.append("node %s: allocatable %s is %d, expected at least %d" % (name, resource, count, wanted))
        elif not gpu_resources:
            problems.append("node %s: no nvidia.com/* GPU resource is allocatable" % name)
    return problems


def driver_pod_report(pods, sidecars, logs=None):
    """Problems of the driver pods: a sidecar missing or not ready, or its log without the load message.

    ``logs`` maps "<pod>/<container>" to the container's log text, or is the ``results`` of a
    kubernetes.core.k8s_log loop over (pod, sidecar) pairs.
    """
    if isinstance(logs, list):
        logs = {"%s/%s" % (r["item"][0]["metadata"]["name"], r["item"][1]["container"]): r.get("log") or ""
                for r in logs if not r.get("skipped")}
    logs = logs or {}
    problems = []
    _require(bool(pods), "no driver pod found")
    for pod in pods:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName") or "(unscheduled)"
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        ready = {c.get("name"): c.get("ready") for c in (pod.get("status") or {}).get("containerStatuses") or []}
        for sidecar in sidecars:
            container = sidecar["container"]
            if container not in containers:
                problems.append("%s on node %s has no %s container" % (name, node, container))
            elif not ready.get(container):
                problems.append("%s on node %s: %s is not ready" % (name, node, container))
            elif sidecar.get("message") and sidecar["message"] not in logs.get("%s/%s" % (name, container), ""):
                problems.append("%s on node %s: the %s log does not say %r" % (name, node, container, sidecar["message"]))
    return problems


# --------------------------------------------------------------------------------------------
# perftest (ib_write_bw) output
# --------------------------------------------------------------------------------------------

_PERFTEST_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]")
_PERFTEST_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def parse_ib_write_bw(text):
    """The result table of perftest ``ib_write_bw`` output: rows, unit, device, transport, peak/avg Gb/s.

    Bandwidths are reported in Gb/s whatever the unit of the table (MB/sec is converted: 1 MB/s =
    0.008 Gb/s in perftest's decimal units).
    """
    lines = str(text or "").replace("\t", " ").splitlines()
    unit, rows, info = None, [], {}
    for line in lines:
        header = _PERFTEST_HEADER.search(line)
        if header:
            unit = header.group(2)
            continue
        for key, label in (("device", "Device"), ("transport", "Transport type"), ("link_type", "Link type")):
            match = re.search(r"%s\s*:\s*(\S+)" % re.escape(label), line)
            if match and key not in info:
                info[key] = match.group(1)
        if unit:
            row = _PERFTEST_ROW.match(line)
            if row:
                factor = 1.0 if unit == "Gb" else 0.008
                rows.append({"bytes": int(row.group(1)), "iterations": int(row.group(2)),
                             "bw_peak_gbps": round(float(row.group(3)) * factor, 4),
                             "bw_average_gbps": round(float(row.group(4)) * factor, 4),
                             "msg_rate_mpps": float(row.group(5))})
    if unit is None or not rows:
        raise OperatorInputError("no ib_write_bw result table (#bytes ... BW average[...]) in the output")
    averages = [r["bw_average_gbps"] for r in rows]
    return dict(info, unit="%s/sec" % unit, rows=rows, bw_average_gbps=rows[-1]["bw_average_gbps"],
                max_bw_average_gbps=max(averages))


def rdma_threshold(hosts, device=None, fraction=0.8, threshold=None):
    """(threshold Gb/s, link rate Gb/s or None, device) for the RDMA test from the hosts' RDMA devices."""
    if threshold is not None:
        _require(float(threshold) > 0, "threshold_gbps must be positive, got %r", threshold)
        return float(threshold), None, device
    _require(0 < float(fraction) <= 1, "threshold_fraction must be in (0, 1], got %r", fraction)
    rates, chosen = [], device
    for host, facts in sorted((hosts or {}).items()):
        devices = [d for d in (facts or {}).get("rdma_devices") or [] if device in (None, d.get("name"))]
        active = [d for d in devices if str(d.get("state", "")).upper() in ("ACTIVE", "UP", "PORT_ACTIVE")] or devices
        _require(bool(active), "rdma device: %s has no RDMA device%s in its facts", host,
                 " named %s" % device if device else "")
        chosen = chosen or active[0].get("name")
        if active[0].get("rate_gbps"):
            rates.append(float(active[0]["rate_gbps"]))
    _require(bool(rates), "threshold_gbps: no link rate in the hosts' RDMA device facts; set threshold_gbps")
    link = min(rates)
    return round(link * float(fraction), 3), link, chosen
