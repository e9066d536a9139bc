# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NVIDIA DRA driver plan and its verification (filters ``dra_driver_plan``, ``dra_driver_readiness``).

The facts are ``_catalog/dra_driver.py`` (chart lines, floors, GKE A4X values, names). ``dra_driver_plan`` turns the
role's options, the GPU hosts' facts (gpu_host_facts) and what is known of the cluster into the release (chart,
values), the objects around it (namespace, GKE's ResourceQuota) and what a working install publishes; everything the
chosen release, the cluster or the hosts cannot take is refused first (``OperatorInputError`` naming the option), so
the playbook's preflight refuses it before any change. ``dra_driver_readiness`` judges what was read after the
install and names each node and its reason.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver as _catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as _gke
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import (
    OperatorInputError, _choice, _dns_label, _merge, require,
)

IMEX_MODES = ("driver-managed", "host-managed")
GKE_ACCELERATOR_LABEL = _gke.ACCELERATOR_LABEL
ARCH_LABEL = _gke.ARCH_LABEL
GPU_RESOURCE_LABEL = "nvidia.com/gpu"
_OPTIONS = ("chart_version", "chart_ref", "chart_repo_url", "release_name", "namespace", "platform", "gpu_allocation",
            "imex_mode", "disable_host_imex", "kubernetes_version", "gpu_operator", "values", "gpu_node_selector")


def _numbers(text):
    return tuple(int(part) for part in re.findall(r"\d+", str(text or ""))[:3])


def _at_least(version, floor):
    """Whether a dotted version reaches ``floor``, comparing as many parts as the floor has."""
    wanted = _numbers(floor)
    have = _numbers(version)
    return have[:len(wanted)] + (0,) * (len(wanted) - len(have[:len(wanted)])) >= wanted


def release(version):
    """(chart line, version without "v") of a catalog release; "v25.3.0" and "25.3.0" are the same release."""
    text = str(version or "").strip()
    bare = text[1:] if text[:1] in ("v", "V") else text
    for line, entry in _catalog.CHARTS.items():
        if bare in entry["versions"]:
            return line, bare
    raise OperatorInputError("chart_version: %r is not a release of the catalog (%s)" % (text, "; ".join(
        "%s: %s" % (line, ", ".join(entry["versions"])) for line, entry in _catalog.CHARTS.items())))


def _reaches(line, version, since):
    """Whether release (line, version) is at or after ``since`` (line, version) in the forward-only line order."""
    order = _catalog.UPGRADE_ORDER
    if order.index(line) != order.index(since[0]):
        return order.index(line) > order.index(since[0])
    return _numbers(version) >= _numbers(since[1])


def device_classes(line, version, gpu_allocation, host_managed):
    """The DeviceClasses release (line, version) creates with these settings."""
    found = []
    for name, (resource, since) in _catalog.DEVICE_CLASS_SOURCES.items():
        if resource == "gpus" and not gpu_allocation:
            continue
        if not _reaches(line, version, (_catalog.UPGRADE_ORDER[0], since)):
            continue
        if host_managed and name == _catalog.HOST_MANAGED_WITHOUT_CLASS:
            continue
        found.append(name)
    return sorted(found)


def crds(line, version):
    """The CRD names release (line, version) ships in crds/."""
    return sorted(name for name, firsts in _catalog.CRDS.items()
                  if line in firsts and _numbers(version) >= _numbers(firsts[line]))


def _affinity(expressions):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [dict(key=key, operator=operator, **({"values": list(values)} if values else {}))
                              for key, operator, values in expressions]}]}}}


def _gke_values():
    gke = _catalog.GKE_VALUES
    # the taints GKE gives the nodes of the machines whose NVLink spans nodes (the GPU taint, and the arm64 one)
    taints = [taint for machine in _catalog.MULTI_NODE_NVLINK_MACHINES for taint in _gke.node_taints(machine)]
    return {
        "nvidiaDriverRoot": gke["nvidiaDriverRoot"],
        "controller": {"affinity": _affinity([(GPU_RESOURCE_LABEL, "DoesNotExist", None)])},
        "kubeletPlugin": {
            "affinity": _affinity([(GKE_ACCELERATOR_LABEL, "In", [gke["accelerator"]]), (ARCH_LABEL, "In", [gke["arch"]])]),
            "tolerations": [{"key": key, "operator": "Equal", "value": value, "effect": effect}
                            for key, value, effect in dict.fromkeys(taints)]},
    }


def _resource_quota(namespace):
    quota = _catalog.GKE_RESOURCE_QUOTA
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": namespace + "-quota", "namespace": namespace},
            "spec": {"hard": {"pods": str(quota["pods"])}, "scopeSelector": {"matchExpressions": [
                {"operator": "In", "scopeName": "PriorityClass", "values": list(quota["priority_classes"])}]}}}


def _gpu_operator_conflict(gpu_operator):
    """Why the cluster's GPU Operator (its chart version and values, when the playbook knows them) deploys the DRA
    driver itself; '' when it does not."""
    if not gpu_operator:
        return ""
    require(isinstance(gpu_operator, dict), "gpu_operator: a dict of chart_version and values, got %s",
            type(gpu_operator).__name__)
    version = gpu_operator.get("chart_version") or ""
    values = gpu_operator.get("values") or {}
    if not version or not _at_least(version, _catalog.GPU_OPERATOR_DRA_MIN):
        return ""
    dra = values.get("draDriver") if isinstance(values.get("draDriver"), dict) else {}
    cluster = values.get("gpuCluster") if isinstance(values.get("gpuCluster"), dict) else {}
    if dra.get("enabled") is True or cluster.get("deployCR") is True:
        return ("GPU Operator %s deploys the DRA driver itself (%s), with the ComputeDomain CRDs: two releases would own "
                "the same CRDs. Install one of the two: turn the GPU Operator's draDriver off, or leave this role out"
                % (version, "draDriver.enabled" if dra.get("enabled") is True else "gpuCluster.deployCR"))
    return ""


def _host_problems(hosts, host_managed, disable, platform):
    """(problems, hosts whose nvidia-imex.service the role disables) from the GPU hosts' facts."""
    problems, to_disable = [], []
    service = _catalog.HOST_IMEX_SERVICE
    for host, facts in sorted((hosts or {}).items()):
        facts = facts or {}
        driver = facts.get("driver_version")
        if driver and not _at_least(driver, _catalog.MIN_DRIVER_COMPUTE_DOMAINS):
            problems.append("%s: driver %s is older than %s, the first that ComputeDomains run on; upgrade the GPU driver"
                            % (host, driver, _catalog.MIN_DRIVER_COMPUTE_DOMAINS))
        elif not driver and platform == "host":
            problems.append("%s: no NVIDIA driver found (gpu_host_facts: %s); the host-installed driver must be %s or newer"
                            % (host, "; ".join(facts.get("problems") or []) or "no driver_version",
                               _catalog.MIN_DRIVER_COMPUTE_DOMAINS))
        imex = facts.get("nvidia_imex") or {}
        if host_managed:
            if imex.get("active") is not True:
                problems.append("%s: host-managed IMEX needs %s running on every GPU host; it is %s there"
                                % (host, service, imex.get("state") or "not reported (gather gpu_host_facts)"))
        elif imex.get("active") is True:
            if disable:
                to_disable.append(host)
            else:
                problems.append(
                    "%s: %s is active and would hold the IMEX session, so the ComputeDomain daemons never become Ready "
                    "(NV_ERR_IN_USE). Disable and mask it (or set disable_host_imex to let the role do it), or choose "
                    "imex_mode host-managed" % (host, service))
    return problems, to_disable


def dra_driver_plan(options, hosts=None):
    """The release, the objects and the expectations of the NVIDIA DRA driver; refuses what cannot work."""
    require(isinstance(options, dict), "options: a dict, got %s", type(options).__name__)
    unknown = sorted(set(options) - set(_OPTIONS))
    require(not unknown, "unknown options %s (known: %s)", ", ".join(unknown), ", ".join(_OPTIONS))
    line, version = release(options.get("chart_version") or _catalog.PINNED)
    platform = _choice("platform", options.get("platform") or "host", tuple(_catalog.DRIVER_ROOTS))
    imex_mode = _choice("imex_mode", options.get("imex_mode") or "driver-managed", IMEX_MODES)
    host_managed = imex_mode == "host-managed"
    gpu_allocation = bool(options.get("gpu_allocation"))
    namespace = _dns_label("namespace", options.get("namespace") or _catalog.NAMESPACE)
    release_name = _dns_label("release_name", options.get("release_name") or _catalog.NAMESPACE)
    problems = []
    if platform == "gke":
        require(not gpu_allocation, "gpu_allocation: GKE's device plugin keeps nvidia.com/gpu on A4X nodes; the DRA driver "
                "runs there for ComputeDomains only (set gpu_allocation false)")
        require(not host_managed, "imex_mode: host-managed IMEX needs nvidia-imex on the host, which GKE nodes do not run;"
                " use driver-managed")
    if host_managed:
        require(_reaches(line, version, _catalog.HOST_MANAGED_IMEX_SINCE),
                "imex_mode: host-managed IMEX is a value of %s %s and later (resources.computeDomains.imex.mode); "
                "chart_version %s has no such mode", _catalog.HOST_MANAGED_IMEX_SINCE[0], _catalog.HOST_MANAGED_IMEX_SINCE[1],
                version)
    kubernetes = options.get("kubernetes_version")
    if kubernetes and not _at_least(kubernetes, _catalog.MIN_KUBERNETES):
        problems.append("kubernetes_version: the cluster runs %s; the DRA driver needs Kubernetes %s or newer "
                        "(resource.k8s.io/v1, DRA GA); upgrade the cluster" % (kubernetes, _catalog.MIN_KUBERNETES))
    conflict = _gpu_operator_conflict(options.get("gpu_operator"))
    if conflict:
        problems.append("gpu_operator: " + conflict)
    host_problems, to_disable = _host_problems(hosts, host_managed, bool(options.get("disable_host_imex")), platform)
    problems.extend(host_problems)
    require(not problems, "%s", "; ".join(problems))

    values = {"nvidiaDriverRoot": _catalog.DRIVER_ROOTS[platform],
              "resources": {"gpus": {"enabled": gpu_allocation}, "computeDomains": {"enabled": True}}}
    if gpu_allocation:
        values["gpuResourcesEnabledOverride"] = True
    if platform == "gke":
        values = _merge(values, _gke_values())
    if host_managed:
        gate = _catalog.HOST_MANAGED_IMEX
        values = _merge(values, {"featureGates": {gate["feature_gate"]: True},
                                 "resources": {"computeDomains": {"imex": {"mode": gate["value"]}}}})
    extra = options.get("values") or {}
    require(isinstance(extra, dict), "values: a dict of chart values, got %s", type(extra).__name__)
    values = _merge(values, extra)

    entry = _catalog.CHARTS[line]
    url = options.get("chart_repo_url")
    chart = {"release_name": release_name, "release_namespace": namespace,
             "chart_ref": options.get("chart_ref") or entry["chart_ref"],
             "chart_repo_url": entry["repo_url"] if url is None else str(url),
             "chart_version": version, "values": values}
    objects = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    if platform == "gke":
        objects.append(_resource_quota(namespace))
    selector = options.get("gpu_node_selector") or (
        {GKE_ACCELERATOR_LABEL: _catalog.GKE_VALUES["accelerator"]} if platform == "gke" else {})
    require(isinstance(selector, dict), "gpu_node_selector: a dict of node labels, got %s", type(selector).__name__)
    # a local copy of the chart keeps the chart's name (its Chart.yaml), which the workloads are named after
    chart_name = line
    # nameOverride renames the workloads (and, from the sigs line on, their selector labels): the upgrade guide sets it
    # to the old chart's name when moving a release from the NGC line to the sigs line
    name = values.get("nameOverride") or chart_name
    label = name if line == _catalog.UPGRADE_ORDER[-1] else chart_name
    return {
        "line": line, "version": version, "platform": platform, "imex_mode": imex_mode, "namespace": namespace,
        "chart": chart, "objects": objects, "disable_host_imex": to_disable,
        "host_imex_service": _catalog.HOST_IMEX_SERVICE,
        "expect": {
            "controller": {"kind": _catalog.WORKLOADS["controller"][0],
                           "name": "%s-%s" % (name, _catalog.WORKLOADS["controller"][1])},
            "kubelet_plugin": {"kind": _catalog.WORKLOADS["kubelet_plugin"][0],
                               "name": "%s-%s" % (name, _catalog.WORKLOADS["kubelet_plugin"][1]),
                               "selector": "%s=%s" % (_catalog.COMPONENT_LABEL % label,
                                                      _catalog.WORKLOADS["kubelet_plugin"][1])},
            "device_classes": device_classes(line, version, gpu_allocation, host_managed),
            "crds": crds(line, version),
            "slice_driver": _catalog.COMPUTE_DOMAIN_DRIVER,
            "resource_api_version": _catalog.RESOURCE_API_VERSION,
            "clique_label": _catalog.CLIQUE_LABEL,
            "gpu_node_selector": selector,
        },
    }


# --------------------------------------------------------------------------------------------
# After the install
# --------------------------------------------------------------------------------------------

def _selected(node, selector):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == str(value) for key, value in (selector or {}).items())


def _ready(obj):
    status = obj.get("status") or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _pod_ready(pod):
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False, "phase %s" % (status.get("phase") or "unknown")
    waiting = [c for c in status.get("containerStatuses") or [] if not c.get("ready")]
    if waiting:
        reasons = []
        for container in waiting:
            state = container.get("state") or {}
            why = (state.get("waiting") or state.get("terminated") or {}).get("reason") or "not ready"
            reasons.append("%s %s" % (container.get("name"), why))
        return False, ", ".join(reasons)
    return True, ""


def dra_driver_readiness(expect, read):
    """{ok, problems, nodes} of an install: ``read`` holds what the role read (device_classes, resource_slices,
    controller, kubelet_plugin_pods, nodes, crds); each problem names the node or object and the reason."""
    require(isinstance(expect, dict) and isinstance(read, dict), "dra_driver_readiness: expect and read are dicts")
    problems = []
    crds_found = set(read.get("crds") or [])
    for name in expect.get("crds") or []:
        if name not in crds_found:
            problems.append("CRD %s is missing (the chart's crds/ were not installed)" % name)
    controller = read.get("controller")
    want = expect["controller"]
    if not controller:
        problems.append("%s %s is missing" % (want["kind"], want["name"]))
    else:
        status = controller.get("status") or {}
        ready = int(status.get("readyReplicas") or 0)
        if ready < int((controller.get("spec") or {}).get("replicas", 1) or 1):
            problems.append("%s %s: %d ready replica(s); the controller pod is not running (check its node: it stays off "
                            "GPU nodes)" % (want["kind"], want["name"], ready))
    classes = set(read.get("device_classes") or [])
    missing = [c for c in expect.get("device_classes") or [] if c not in classes]
    if missing:
        problems.append("DeviceClass(es) missing: %s" % ", ".join(missing))
    pods_by_node = {}
    for pod in read.get("kubelet_plugin_pods") or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            pods_by_node.setdefault(node, []).append(pod)
    sliced = set()
    for item in read.get("resource_slices") or []:
        spec = item.get("spec") or {}
        if spec.get("driver") == expect["slice_driver"] and spec.get("nodeName"):
            sliced.add(spec["nodeName"])
    gpu_nodes = [n for n in read.get("nodes") or [] if _selected(n, expect.get("gpu_node_selector"))]
    if not gpu_nodes:
        problems.append("no node matches the GPU node selector %s" % (expect.get("gpu_node_selector") or "{}"))
    nodes = []
    for node in sorted(gpu_nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        reasons = []
        if not _ready(node):
            reasons.append("node not Ready")
        pods = pods_by_node.get(name) or []
        if not pods:
            reasons.append("no %s pod (its affinity or tolerations do not fit the node)" % expect["kubelet_plugin"]["name"])
        else:
            ready, why = _pod_ready(pods[0])
            if not ready:
                reasons.append("%s pod %s not ready: %s" % (expect["kubelet_plugin"]["name"], pods[0]["metadata"]["name"], why))
        if name not in sliced:
            reasons.append("no ResourceSlice of driver %s (the kubelet plugin publishes none)" % expect["slice_driver"])
        labels = node["metadata"].get("labels") or {}
        clique = labels.get(expect["clique_label"])
        if not clique:
            reasons.append("no %s label (GPU Feature Discovery sets it from the fabric; is GFD running and the NVLink "
                           "fabric up?)" % expect["clique_label"])
        nodes.append({"name": name, "ok": not reasons, "reasons": reasons, "clique": clique or None})
    problems.extend("node %s: %s" % (n["name"], "; ".join(n["reasons"])) for n in nodes if not n["ok"])
    return {"ok": not problems, "problems": problems, "nodes": nodes}
