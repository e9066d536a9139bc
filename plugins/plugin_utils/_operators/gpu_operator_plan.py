# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPU Operator plan (filter ``gpu_operator_plan``, role ``gpu_operator``).

The chart catalog it reads is ``_catalog/gpu_operator.py`` (one table per fact, with its sources);
the Network Operator's plan is ``network_operator_plan.py`` beside this file.

``gpu_operator_plan`` (like ``network_operator_plan``) turns role options into chart values and
objects, refusing (``OperatorInputError`` naming the option) anything the chosen chart version,
platform or the GPU hosts' facts cannot do, so the roles fail before anything is installed. The
per-host GPUDirect RDMA rule is ``_catalog/gpudirect_rdma.py`` (its answer is in gpu_host_facts); here the hosts' verdicts are
combined (``resolve_rdma_mode``), and for hosts without a driver yet, where the operator installs it, the
rule is asked about the driver the GPU Operator catalog pins (``gpudirect_rdma.gpudirect_rdma_planned``).
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpudirect_rdma
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import GPU_RESOURCE, SHARING_STRATEGIES, STRATEGIES as MIG_STRATEGIES
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gpu_operator import (
    AKS_DRIVER_SOURCES, CLUSTER_POLICY_NAME, CRITICAL_PRIORITY_CLASSES, DRIVER_DAEMONSET_LABEL, DRIVER_FEATURE_FIELDS,
    DRIVER_SIDECARS, DRIVER_TYPES,
    GKE_NVIDIA_DIR, GPU_OPERATOR_CHART, GPU_OPERATOR_CHARTS, GPU_OPERATOR_PLATFORMS, GPU_OPERATOR_REPO_URL,
    GPU_PRESENT_LABEL, KERNEL_MODULE_AUTO_MIN_DRIVER, KERNEL_MODULE_TYPES, MIG_CONFIG_DEFAULTS,
    POD_SECURITY_LABELS, PULL_POLICIES, RDMA_MODES, SANDBOX_WORKLOADS,
    DEPLOY_LABELS, GPU_OPERATOR_COMMON_KEYS, KEY_HISTORY,
)
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import names as _k8s_names
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import (
    OperatorInputError, _accepted, _catalog_chart, _chart_source, _choice, _dns_label, _dns_subdomain,
    _flatten, _hosts_with, _merge, _images, _pinned, require, _version_tuple,
)


# --------------------------------------------------------------------------------------------
# GPU Operator
# --------------------------------------------------------------------------------------------

def gpu_operator_chart(version):
    """(series, catalog entry) of a gpu-operator chart version; refuses versions outside the catalog."""
    return _catalog_chart(GPU_OPERATOR_CHARTS, "GPU Operator", version)


def gpu_operator_keys(version):
    """The value keys (dotted) that gpu-operator chart ``version`` accepts."""
    dummy, entry = gpu_operator_chart(version)
    return GPU_OPERATOR_COMMON_KEYS | entry["added"]


def check_gpu_operator_values(values, version, option="values"):
    """Refuse a values dict holding a key chart ``version`` does not have, naming the key and the version."""
    keys = gpu_operator_keys(version)
    unknown = [path for path in _flatten(values) if not _accepted(path, keys)]
    if unknown:
        hints = ["%s (%s)" % (p, KEY_HISTORY[p]) if p in KEY_HISTORY else p for p in unknown]
        raise OperatorInputError("%s: GPU Operator chart %s has no value %s" % (option, version, ", ".join(hints)))
    return values


def _gke_version(option, text):
    match = re.match(r"^v?(\d+)\.(\d+)", str(text or ""))
    require(match is not None, "%s: %r is not a GKE version (for example 1.33.2-gke.1111000)", option, text)
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
        if planned and not gpudirect_rdma.driver_loaded(facts):
            verdict = gpudirect_rdma.gpudirect_rdma_planned(facts, planned["version"], planned.get("kernel_module_type"))
            chosen = verdict["mode"] if verdict["mode"] != "unsupported" else "off"
            notes.append("%s: %s for the driver GPU Operator chart %s installs (%s)%s" % (
                host, chosen, planned["chart"], "; ".join(verdict["evidence"]),
                "; not chosen: " + "; ".join(verdict["reasons"]) if verdict["reasons"] else ""))
            verdicts[host] = verdict
        elif isinstance(facts.get("gpudirect_rdma"), dict):
            verdicts[host] = gpudirect_rdma.gpudirect_rdma(facts) if borrowed else facts["gpudirect_rdma"]
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
    require(bool(hosts), "rdma.mode %s needs the GPU hosts' gpu_host facts (gpu_host_facts), and none were given",
            requested)
    verdicts, notes = _host_verdicts(hosts, planned, container_ofed)
    missing = sorted(set(hosts) - set(verdicts))
    require(not missing, "rdma.mode %s: no gpu_host.gpudirect_rdma facts for %s (run gpu_host_facts on them)",
            requested, ", ".join(missing))
    if requested == "auto":
        by_mode = {}
        for host, verdict in sorted(verdicts.items()):
            by_mode.setdefault(verdict.get("mode"), []).append(host)
        require(len(by_mode) == 1, "rdma.mode auto: the GPU hosts do not agree on a GPUDirect RDMA mode (%s); "
                "fix the hosts or set rdma.mode", "; ".join("%s: %s" % (m, ", ".join(h)) for m, h in sorted(by_mode.items())))
        mode = next(iter(by_mode))
        if mode == "unsupported":
            reasons = sorted({r for v in verdicts.values() for r in v.get("reasons") or []})
            return "off", ["GPUDirect RDMA is off: no GPU host supports it (%s)" % "; ".join(reasons)] + notes
        require(mode in ("dmabuf", "peermem"), "rdma.mode auto: unknown mode %r in the hosts' facts", mode)
        return mode, notes
    refused = []
    for host, verdict in sorted(verdicts.items()):
        mode_verdict = (verdict.get("modes") or {}).get(requested) or {}
        if not mode_verdict.get("supported"):
            refused.append("%s (%s)" % (host, "; ".join(mode_verdict.get("reasons") or ["no verdict in the facts"])))
    require(not refused, "rdma.mode %s is not supported on %s", requested, ", ".join(refused))
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
        require(requested != "proprietary", "driver.kernel_module_type proprietary cannot serve %s: "
                "they need the open kernel modules (set it to open or auto)", " and ".join(reasons))
        requested = "open"  # pre-R570 drivers and 'auto' on older GPUs would pick proprietary
    if entry["kernel_module_key"] == "useOpenKernelModules":
        require(requested != "auto", "driver.kernel_module_type auto: GPU Operator chart %s has no "
                "driver.kernelModuleType (added in v25.3); choose open or proprietary", version)
        if requested is None:
            return {}, None
        return {"useOpenKernelModules": requested == "open"}, requested
    driver_version = driver.get("version") or entry["driver_version"]
    require((requested or "auto") != "auto" or _driver_branch_ok_for_auto(driver_version),
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
    require(values["enabled"], "device_plugin.sharing needs device_plugin.enabled")
    require(strategy != "mps" or mig_strategy == "none",
            "device_plugin.sharing.strategy mps: MPS is not supported on MIG devices (mig.strategy is %s)", mig_strategy)
    replicas = sharing.get("replicas", 2)
    require(isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 2,
            "device_plugin.sharing.replicas must be a whole number >= 2 for %s, got %r", strategy, replicas)
    block = {"renameByDefault": bool(sharing.get("rename_by_default")),
             "resources": [{"name": name, "replicas": replicas}
                           for name in (sharing.get("resources") or [GPU_RESOURCE])]}
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
    require(default in MIG_CONFIG_DEFAULTS, "mig.config_default %r: the ClusterPolicy accepts only %s; choose a node's "
            "configuration with its nvidia.com/mig.config label", default, " or ".join(repr(d) for d in MIG_CONFIG_DEFAULTS))
    manager["config"] = {"default": default}
    if config:
        require(manager["enabled"], "mig.config needs mig.manager_enabled")
        require(isinstance(config, dict) and isinstance(config.get("mig-configs"), dict),
                "mig.config must be a mig-parted config with a mig-configs map")
        require(default in config["mig-configs"] or not default, "mig.config_default %r is not a configuration of "
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
    require(driver_on, "driver_pools: NVIDIADriver resources need the operator-managed driver (driver.enabled)")
    objects, selectors = [], []
    for index, pool in enumerate(pools):
        option = "driver_pools[%d]" % index
        name = _dns_subdomain(option + ".name", pool.get("name"))
        selector = pool.get("node_selector") or {}
        require(isinstance(selector, dict) and bool(selector),
                "%s.node_selector must name the pool's node labels (disjoint from the other pools)", option)
        why = _k8s_names.check("labels", selector)
        require(why is None, "%s.node_selector: %s", option, why)
        require(selector not in selectors, "%s.node_selector repeats another pool's selector %s", option,
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
            # the NVIDIADriver CRD of a chart before v25.3 has useOpenKernelModules only: the API server would prune
            # kernelModuleType, and the pool would silently get the chart's default modules
            require(entry["kernel_module_key"] == "kernelModuleType" or module != "auto",
                    "%s.kernel_module_type auto: the NVIDIADriver of GPU Operator chart %s has no kernelModuleType "
                    "(added in v25.3), only useOpenKernelModules; choose open or proprietary", option, version)
            if entry["kernel_module_key"] == "kernelModuleType":
                spec["kernelModuleType"] = module
            else:
                spec["useOpenKernelModules"] = module == "open"
        else:
            spec.update(kernel_values)
        for key in DRIVER_FEATURE_FIELDS:
            if pool.get(key) is not None:
                spec[key] = _driver_feature("%s.%s" % (option, key), key, pool[key])
        _images(option, spec)  # the driver's and its sidecars' repository, image and version
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
    require(isinstance(value, dict), "%s: must be a dict of %s, got %s", option, ", ".join(fields), type(value).__name__)
    unknown = sorted(set(value) - set(fields), key=str)
    require(not unknown, "%s: unknown field %s (the NVIDIADriver %s fields: %s)", option,
            ", ".join(str(u) for u in unknown), key, ", ".join(fields))
    for field, field_value in value.items():
        why = _field_problem(fields[field], field_value)
        require(why is None, "%s.%s %s, got %s", option, field, why, _k8s_names.show(field_value))
    return dict(value)


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
    require(not (driver_on and platform_name == "gke"),
            "driver.enabled: on GKE the driver is installed by GKE (gpu-driver-version on the node pool); "
            "the GPU Operator must not install it")
    require(not (driver_on and platform_name == "aks" and not platform["driver"]),
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
        require(not wanted or driver_on, "%s: its kernel module is loaded by a sidecar of the operator's driver pod, "
                "and the driver is not installed by the operator here (platform %s, driver.enabled false)",
                name, platform_name)
    use_host_mofed = rdma.get("use_host_mofed")
    if mode != "off" or gds:
        if use_host_mofed is None:
            use_host_mofed = bool(hosts) and all(((f or {}).get("ofed") or {}).get("present") for f in hosts.values())
        if use_host_mofed:
            lacking = _hosts_with(hosts, lambda f: not (f.get("ofed") or {}).get("present"))
            require(not lacking, "rdma.use_host_mofed: MLNX_OFED/DOCA-OFED is not installed on %s", ", ".join(lacking))
    if driver.get("precompiled"):
        require(driver_on, "driver.precompiled needs driver.enabled")

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
        require(not driver.get("kernel_module_type") or driver.get("kernel_module_type") == "auto",
                "driver.kernel_module_type: the driver is not installed by the operator here (platform %s)", platform_name)
        if mode == "dmabuf" or gds:
            proprietary = _hosts_with(hosts, lambda f: (f.get("kernel_module") or {}).get("type") == "proprietary")
            require(not (gds and proprietary), "gds: the preinstalled driver on %s uses the proprietary kernel "
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
        require(values["dcgmExporter"]["enabled"], "dcgm_exporter.service_monitor needs dcgm_exporter.enabled")
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
        require(bool(gke_version), "gke_version: the GKE preset needs the cluster's GKE version "
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
    _images("values", values)  # the chart's values as sent: the options' image fields (driver.version) and extra ones
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
        "names": {"cluster_policy": CLUSTER_POLICY_NAME, "driver_selector": DRIVER_DAEMONSET_LABEL,
                  "gpu_resource": GPU_RESOURCE},
        "expect": {
            "labels": dict([(GPU_PRESENT_LABEL, "true")] + [
                ("nvidia.com/gpu.deploy.%s" % label, "true") for key, label in DEPLOY_LABELS if components[key]]),
            "gpu_resource": GPU_RESOURCE if mig_strategy != "mixed" else None,
            "driver_sidecars": sidecars if driver_on else [],
        },
    }
