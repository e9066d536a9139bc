# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPU Operator, Network Operator, device plugin and MIG validation checks of Kubernetes clusters.

They reuse the engines that judge the same things at install time: the operators' readiness report
(``_operators/readiness.py``), the MIG manager's node state and expected resources (``_mig/nodes.py``,
``_mig/placement.py``) and the GPU request reader (``_gpu_sharing.py``); the names and labels are the MIG and
GPU Operator catalogs'.
"""

from __future__ import annotations

import json

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpu_operator as gpu_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpudirect_rdma
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import network_operator as net_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.placement import standard_layouts
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._sharing.gpu_sharing import is_gpu_name, pod_gpu_requests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.readiness import not_ready_pods, readiness_report
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip, described_by
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import node_labels, node_name

# each check's phase, title, reads, cause and fix: operators.yml beside this file
described = described_by(__file__)

PRODUCT_LABEL = "nvidia.com/gpu.product"      # GPU Feature Discovery (the MIG catalog's expected_labels use it)
STRATEGY_LABEL = "nvidia.com/mig.strategy"
_MIG_OFF = ("all-disabled", "")
_FINISHED = ("Succeeded", "Failed")


def _finished(pod):
    """A pod that has ended (Succeeded or Failed): a DaemonSet's previous pod, evicted or stopped with its node, neither
    serves the node nor tells whether the pod that replaced it is ready."""
    return (pod.get("status") or {}).get("phase") in _FINISHED


def _mig_nodes(view):
    """Nodes that ask the MIG manager for a config other than all-disabled; Skip when none does."""
    found = [n for n in view.kubernetes("nodes") if node_labels(n).get(mig_catalog.MIG_CONFIG_LABEL, "") not in _MIG_OFF]
    if not found:
        raise Skip("no node asks for a MIG config (label %s)" % mig_catalog.MIG_CONFIG_LABEL)
    return sorted(found, key=lambda n: node_name(n) or "")


def _policy(view):
    policies = view.kubernetes("cluster_policies")
    if not policies:
        raise Skip("no ClusterPolicy: the GPU Operator is not installed")
    return policies[0]


def _strategy(view, node):
    labels = node_labels(node)
    if labels.get(STRATEGY_LABEL):
        return labels[STRATEGY_LABEL]
    policies = view.kubernetes("cluster_policies")
    return (((policies[0].get("spec") or {}).get("mig") or {}).get("strategy") if policies else None) or "single"


# --------------------------------------------------------------------------------------------
# preflight
# --------------------------------------------------------------------------------------------

@described("mig.capable_gpus")
def capable_gpus(view):
    evidence, problems = [], []
    for node in _mig_nodes(view):
        product = node_labels(node).get(PRODUCT_LABEL)
        model = mig_catalog.find_gpu_model(product) if product else None
        evidence.append("node %s: %s -> %s" % (node_name(node), product, model))
        if model is None:
            problems.append("node %s asks for %s but its GPU %s is not a MIG-capable model" % (
                node_name(node), node_labels(node)[mig_catalog.MIG_CONFIG_LABEL], product or "(no gpu.product label)"))
    return evidence, problems


# --------------------------------------------------------------------------------------------
# deployment
# --------------------------------------------------------------------------------------------

@described("gpu.device_plugin")
def device_plugin(view):
    nodes = view.gpu_nodes()
    if not nodes:
        raise Skip("no GPU node")
    names = [node_name(n) for n in nodes]
    plugins, broken, ready = _device_plugins(view, names)
    evidence = ["node %s: %s" % (n, ", ".join(p["metadata"]["name"] for p in plugins if p["spec"]["nodeName"] == n) or "none")
                for n in sorted(names)]
    problems = []
    for name in sorted(names):
        if name in ready:
            continue
        problems.append("node %s: %s" % (name, "device plugin pod not ready (%s)" % broken[name] if name in broken
                                         else "no device plugin pod"))
    return evidence, problems


def _device_plugins(view, names):
    """(device plugin pods on the nodes ``names``, {node: why its pod is not ready}, names of the nodes with a ready one)."""
    plugins = [p for p in view.pods_on(names) if _is_device_plugin_pod(p) and not _finished(p)]
    broken = dict((r["node"], r["problem"]) for r in not_ready_pods(plugins))
    return plugins, broken, set(p["spec"]["nodeName"] for p in plugins if p["spec"]["nodeName"] not in broken)


def _is_device_plugin_pod(pod):
    """A pod of the NVIDIA device plugin: its own chart's, the GPU Operator's, GKE's or a static pod (by name or image)."""
    name = (pod.get("metadata") or {}).get("name") or ""
    images = [c.get("image") or "" for c in (pod.get("spec") or {}).get("containers") or []]
    return "device-plugin" in name and ("nvidia" in name or any("device-plugin" in i for i in images))


@described("gpu.allocatable")
def gpu_allocatable(view):
    nodes = view.gpu_nodes()
    if not nodes:
        raise Skip("no GPU node")
    evidence, problems, lacking = [], [], []
    for node in sorted(nodes, key=lambda n: node_name(n) or ""):
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        gpu = dict((k, v) for k, v in allocatable.items() if is_gpu_name(k) and str(v) not in ("0", ""))
        evidence.append("node %s: %s" % (node_name(node), ", ".join("%s=%s" % kv for kv in sorted(gpu.items())) or "none"))
        if not gpu:
            lacking.append(node_name(node))
    # a node whose device plugin is missing or not ready advertises nothing because of it: gpu.device_plugin names that
    ready = _device_plugins(view, lacking)[2] if lacking else set()
    for name in lacking:
        if name in ready:
            problems.append("node %s advertises no GPU resource" % name)
        else:
            evidence.append("node %s: not judged, it has no ready device plugin pod (gpu.device_plugin)" % name)
    if lacking and not problems and len(lacking) == len(nodes):
        raise Skip("no GPU node can be judged: %s" % "; ".join(evidence))
    return evidence, problems


@described("gpu_operator.cluster_policy")
def cluster_policy(view):
    report = readiness_report(_policy(view), None)
    return report["summary"][:1], [] if report["ready"] else report["summary"]


def _driver_nodes(view, policy):
    """The GPU nodes the GPU Operator installs the driver on; Skip when it installs none."""
    if ((policy.get("spec") or {}).get("driver") or {}).get("enabled") is False:
        raise Skip("the ClusterPolicy does not install the driver (spec.driver.enabled: false)")
    deploy = "nvidia.com/gpu.deploy.driver"
    wanted = [n for n in view.gpu_nodes() if node_labels(n).get(deploy) not in ("false", "pre-installed")]
    if not wanted:
        raise Skip("no GPU node gets its driver from the GPU Operator (none, or every one labelled %s=false or "
                   "pre-installed)" % deploy)
    return sorted(wanted, key=lambda n: node_name(n) or "")


def _driver_pods(view, nodes):
    key, value = gpu_catalog.DRIVER_DAEMONSET_LABEL.split("=", 1)
    return [p for p in view.pods_on([node_name(n) for n in nodes]) if ((p.get("metadata") or {}).get("labels") or {}).get(key) == value
            and not _finished(p)]


@described("gpu_operator.driver_pods")
def driver_pods(view):
    wanted = _driver_nodes(view, _policy(view))
    pods = _driver_pods(view, wanted)
    by_node = dict((p["spec"]["nodeName"], p) for p in pods)
    evidence, problems = ["%d driver node(s), %d driver pod(s)" % (len(wanted), len(pods))], []
    for node in wanted:
        if node_name(node) not in by_node:
            problems.append("node %s has no driver pod" % node_name(node))
    problems.extend("%s not ready on node %s (pod %s: %s)" % (r["component"], r["node"], r["pod"], r["problem"])
                    for r in not_ready_pods(pods))
    return evidence, problems


# the ClusterPolicy switches that add a sidecar to the driver pod (gpu-operator-rdma.rst, nvidia-stack.md 1.4/1.6):
# driver.rdma.enabled is the legacy nvidia-peermem mode; without it GPUDirect RDMA uses DMA-BUF, with no sidecar
_SIDECAR_SWITCHES = (("peermem", ("driver", "rdma", "enabled")), ("gds", ("gds", "enabled")), ("gdrcopy", ("gdrcopy", "enabled")))


def _spec_value(policy, path):
    value = policy.get("spec") or {}
    for key in path:
        value = (value if isinstance(value, dict) else {}).get(key)
    return value


@described("gpu_operator.driver_sidecars")
def driver_sidecars(view):
    policy = _policy(view)
    asked = [(gpu_catalog.DRIVER_SIDECARS[name]["container"], "spec.%s" % ".".join(path))
             for name, path in _SIDECAR_SWITCHES if _spec_value(policy, path) is True]
    if not asked:
        raise Skip("the ClusterPolicy asks for no driver sidecar (%s are not true; GPUDirect RDMA, if used, is DMA-BUF)"
                   % ", ".join("spec.%s" % ".".join(p) for _n, p in _SIDECAR_SWITCHES))
    pods = _driver_pods(view, _driver_nodes(view, policy))
    if not pods:
        raise Skip("no driver pod to judge (gpu_operator.driver_pods names the nodes without one)")
    evidence, problems = [], []
    for pod in sorted(pods, key=lambda p: (p["spec"]["nodeName"], p["metadata"].get("name"))):
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        evidence.append("node %s: pod %s runs %s" % (pod["spec"]["nodeName"], pod["metadata"].get("name"), ", ".join(names)))
        for container, switch in asked:
            if container not in names:
                problems.append("node %s: driver pod %s runs without %s, which %s: true asks for" % (
                    pod["spec"]["nodeName"], pod["metadata"].get("name"), container, switch))
    return evidence, problems


def _kernel_module_problem(driver):
    """Why the driver the ClusterPolicy installs loads the proprietary kernel modules, which DMA-BUF cannot use; None
    when it loads the open ones or cannot be told (no version given: the chart's default, R570 or later since v25.3)."""
    module_type = driver.get("kernelModuleType")
    if module_type == "proprietary":
        return "spec.driver.kernelModuleType is proprietary"
    if module_type in (None, "auto") and driver.get("useOpenKernelModules") is not True:
        version = tuple(int(x) for x in str(driver.get("version") or "").split("-", maxsplit=1)[0].split(".") if x.isdigit())
        if version and version < gpu_catalog.KERNEL_MODULE_AUTO_MIN_DRIVER:
            return ("driver %s is older than R570 (%s), whose containers choose the proprietary modules unless "
                    "spec.driver.kernelModuleType is open" % (driver.get("version"), ".".join(
                        str(x) for x in gpu_catalog.KERNEL_MODULE_AUTO_MIN_DRIVER)))
    return None


def _rdma_device_plugins(policies):
    return [name for name in ("rdmaSharedDevicePlugin", "sriovDevicePlugin")
            for p in policies if (p.get("spec") or {}).get(name)]


@described("gpu_operator.gpudirect_rdma_mode")
def gpudirect_rdma_mode(view):
    policy = _policy(view)
    driver = (policy.get("spec") or {}).get("driver") or {}
    rdma = driver.get("rdma") or {}
    nodes = _driver_nodes(view, policy)
    nic_policies = view.kubernetes("nic_cluster_policies")
    if rdma.get("enabled") is True:
        evidence = ["spec.driver.rdma.enabled true (legacy nvidia-peermem), useHostMofed %s" % rdma.get("useHostMofed")]
        if rdma.get("useHostMofed") is True:
            return evidence + ["the hosts' MLNX_OFED/DOCA-OFED loads the RDMA stack"], []
        ofed = [p["metadata"].get("name") for p in nic_policies if (p.get("spec") or {}).get("ofedDriver")]
        evidence.append("NicClusterPolicy with ofedDriver: %s" % (", ".join(ofed) or "none"))
        if ofed:
            return evidence, []
        return evidence, ["spec.driver.rdma.enabled is true with useHostMofed false: nvidia-peermem needs the Network "
                          "Operator's OFED driver (NicClusterPolicy spec.ofedDriver), and no NicClusterPolicy deploys it"]
    plugins = _rdma_device_plugins(nic_policies)
    if not plugins:
        raise Skip("GPUDirect RDMA is not asked for: spec.driver.rdma.enabled is not true and no NicClusterPolicy "
                   "defines an RDMA device plugin")
    evidence = ["DMA-BUF (spec.driver.rdma.enabled not true), NicClusterPolicy %s" % ", ".join(plugins)]
    problems = []
    module_problem = _kernel_module_problem(driver)
    if module_problem:
        problems.append("DMA-BUF needs the open kernel modules: %s" % module_problem)
    for node in nodes:
        kernel = ((node.get("status") or {}).get("nodeInfo") or {}).get("kernelVersion")
        if not kernel:
            raise Missing("kubernetes.nodes[%s].status.nodeInfo.kernelVersion" % node_name(node),
                          "DMA-BUF needs Linux >= 5.12: the node's kernel version decides")
        evidence.append("node %s: kernel %s" % (node_name(node), kernel))
        version = gpudirect_rdma.version_tuple(kernel)
        if version is None or version < gpudirect_rdma.DMABUF_MIN_KERNEL:
            problems.append("node %s runs kernel %s; DMA-BUF needs Linux >= %s" % (
                node_name(node), kernel, ".".join(str(x) for x in gpudirect_rdma.DMABUF_MIN_KERNEL)))
    return evidence, problems


@described("network_operator.nic_cluster_policy")
def nic_cluster_policy(view):
    policies = view.kubernetes("nic_cluster_policies")
    if not policies:
        raise Skip("no NicClusterPolicy: the Network Operator is not installed")
    report = readiness_report(policies[0], None)
    return report["summary"][:1], [] if report["ready"] else report["summary"]


MELLANOX_NIC_LABEL = "feature.node.kubernetes.io/pci-%s.present" % net_catalog.MELLANOX_VENDOR   # node-feature-discovery
# the device plugins of a NicClusterPolicy: the list of their JSON config, and the prefix of a resource without one
# (k8s-rdma-shared-dev-plugin: rdma; an SR-IOV entry without resourcePrefix takes the plugin's, judged by name alone)
_DEVICE_PLUGINS = (("rdmaSharedDevicePlugin", "configList", net_catalog.RDMA_RESOURCE_PREFIX),
                   ("sriovDevicePlugin", "resourceList", None))


def _plugin_resources(spec, field, key, prefix):
    """([(resource name, how a node's allocatable key matches it)], problem or None) of one device plugin's config."""
    text = (spec.get(field) or {}).get("config")
    if not text:
        return [], None
    try:
        config = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        return [], "spec.%s.config is not JSON (%s)" % (field, exc)
    entries = config.get(key) if isinstance(config, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("resourceName") for e in entries):
        return [], "spec.%s.config has no %s of entries with a resourceName" % (field, key)
    found = []
    for entry in entries:
        own = entry.get("resourcePrefix") or prefix
        found.append("%s/%s" % (own, entry["resourceName"]) if own else "*/%s" % entry["resourceName"])
    return found, None


def _advertises(allocatable, resource):
    if resource.startswith("*/"):
        keys = [k for k in allocatable if k.endswith(resource[1:])]
    else:
        keys = [resource] if resource in allocatable else []
    return any(str(allocatable[k]) not in ("0", "") for k in keys)


def _affinity_match(node, affinity):
    """Whether ``node`` matches a NicClusterPolicy's spec.nodeAffinity (its required node selector terms)."""
    terms = (((affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
    if not terms:
        return True
    labels = node_labels(node)

    def matches(expression):
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if operator == "In":
            return labels.get(key) in values
        if operator == "NotIn":
            return labels.get(key) not in values
        if operator == "Exists":
            return key in labels
        if operator == "DoesNotExist":
            return key not in labels
        raise Missing("kubernetes.nic_cluster_policies.spec.nodeAffinity", "operator %s of key %s is not judged here" % (operator, key))
    return any(all(matches(e) for e in term.get("matchExpressions") or []) for term in terms)


@described("network_operator.rdma_resources")
def rdma_resources(view):
    policies = view.kubernetes("nic_cluster_policies")
    if not policies:
        raise Skip("no NicClusterPolicy: the Network Operator is not installed")
    policy = policies[0]
    spec = policy.get("spec") or {}
    states = dict((s.get("name"), s.get("state")) for s in (policy.get("status") or {}).get("appliedStates") or [])
    evidence, problems, resources = [], [], []
    for field, key, prefix in _DEVICE_PLUGINS:
        found, problem = _plugin_resources(spec, field, key, prefix)
        if problem:
            problems.append(problem)
        state_name = net_catalog.NCP_STATES.get(field, "state-SRIOV-device-plugin")
        if found and states.get(state_name, "ready") != "ready":
            # a device plugin that is not running advertises nothing: network_operator.nic_cluster_policy names that
            evidence.append("%s: not judged, %s is %s (network_operator.nic_cluster_policy)" % (
                ", ".join(found), state_name, states.get(state_name)))
            continue
        resources.extend(found)
    if not resources and not problems:
        raise Skip("the NicClusterPolicy defines no RDMA shared or SR-IOV device plugin resource to judge%s" % (
            ": " + "; ".join(evidence) if evidence else ""))
    nodes = [n for n in view.kubernetes("nodes") if _affinity_match(n, spec.get("nodeAffinity"))]
    mellanox = [n for n in nodes if node_labels(n).get(MELLANOX_NIC_LABEL) == "true"]
    targeted = mellanox or [n for n in nodes if n in view.gpu_nodes()]
    if not targeted:
        raise Skip("no node has a Mellanox NIC (label %s=true) or a GPU among the nodes the NicClusterPolicy targets"
                   % MELLANOX_NIC_LABEL)
    evidence.append("nodes judged (%s): %s" % ("label %s=true" % MELLANOX_NIC_LABEL if mellanox else "GPU nodes",
                                               ", ".join(sorted(node_name(n) for n in targeted)) or "none"))
    for node in sorted(targeted, key=lambda n: node_name(n) or ""):
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        shown = dict((k, v) for k, v in allocatable.items() for r in resources if k == r or r.startswith("*/") and k.endswith(r[1:]))
        evidence.append("node %s: %s" % (node_name(node), ", ".join("%s=%s" % kv for kv in sorted(shown.items())) or "none"))
        problems.extend("node %s does not advertise %s" % (node_name(node), resource) for resource in resources
                        if not _advertises(allocatable, resource))
    return evidence, problems


@described("mig.config_state")
def config_state(view):
    evidence, problems = [], []
    for node in _mig_nodes(view):
        config = node_labels(node)[mig_catalog.MIG_CONFIG_LABEL]
        state = mig_nodes.mig_config_state(node, config)
        evidence.append("node %s: %s=%s, state %s" % (state["name"], mig_catalog.MIG_CONFIG_LABEL, config, state["state"]))
        if not state["done"]:
            problems.append("node %s: %s=%s for config %s" % (
                state["name"], mig_catalog.MIG_CONFIG_STATE_LABEL, state["state"] or "(not set)", config))
    return evidence, problems


def _geometry_problem(node, model, layout, strategy):
    """Why the node's allocatable GPU resources are not n GPUs of ``layout`` under ``strategy``; None when they are."""
    per_gpu = mig_nodes.expected_resources(model, 1, layout, strategy)
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    have = dict((k, mig_nodes._quantity(v)) for k, v in allocatable.items() if mig_nodes._is_gpu_resource(k)
                and str(v) not in ("0", ""))
    counts = set()
    for name, count in per_gpu.items():
        got = have.get(name, 0)
        if not isinstance(got, int) or not count or got % count:
            return "allocatable %s=%s is not a whole number of GPUs of %s (each gives %s)" % (name, got, strategy, count)
        counts.add(got // count)
    extra = sorted(set(have) - set(per_gpu))
    if extra:
        return "allocatable %s not produced by the config under strategy %s (expected %s per GPU)" % (
            ", ".join("%s=%s" % (k, have[k]) for k in extra), strategy, mig_nodes._json(per_gpu))
    if len(counts) != 1 or 0 in counts:
        return "allocatable %s is not n GPUs of %s per GPU" % (mig_nodes._json(have), mig_nodes._json(per_gpu))
    return None


@described("mig.geometry")
def geometry(view):
    evidence, problems, compared = [], [], 0
    for node in _mig_nodes(view):
        labels = node_labels(node)
        config = labels[mig_catalog.MIG_CONFIG_LABEL]
        model = mig_catalog.find_gpu_model(labels.get(PRODUCT_LABEL) or "")
        if model is None or labels.get(mig_catalog.MIG_CONFIG_STATE_LABEL) != "success":
            evidence.append("node %s: not compared (GPU model %s, state %s; see mig.capable_gpus and mig.config_state)"
                            % (node_name(node), model, labels.get(mig_catalog.MIG_CONFIG_STATE_LABEL)))
            continue
        if not any(is_gpu_name(k) and str(v) not in ("0", "") for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()):
            # no GPU resource at all is no geometry: gpu.allocatable or gpu.device_plugin names why
            evidence.append("node %s: not compared, it advertises no GPU resource (see gpu.allocatable and gpu.device_plugin)"
                            % node_name(node))
            continue
        compared += 1
        layouts = standard_layouts(model)
        strategy = _strategy(view, node)
        if config not in layouts:
            line, problem = _custom_geometry(view, node, model, config, strategy)
            evidence.append("node %s: %s" % (node_name(node), line))
        else:
            problem = _geometry_problem(node, model, layouts[config], strategy)
            evidence.append("node %s: %s config %s strategy %s" % (node_name(node), model, config, strategy))
        if problem:
            problems.append("node %s: %s" % (node_name(node), problem))
    if not compared:
        raise Skip("no MIG node has a MIG-capable GPU with its config applied, so no geometry can be compared: "
                   + "; ".join(evidence))
    return evidence, problems


GPU_COUNT_LABEL = "nvidia.com/gpu.count"      # GPU Feature Discovery


def _parted(view, node, config, model):
    """The mig-parted config (dict(source, config)) a custom config name is judged by; Missing (other) when none was given."""
    if not view.has("mig_parted"):
        why = (view.snapshot.get("read_errors") or {}).get("mig_parted")
        raise Missing("mig_parted", why or "node %s asks for config %s, which is not a default config of %s: give the MIG "
                      "manager's mig-parted ConfigMap as validate_mig_parted_config to judge it" % (node_name(node), config, model))
    return view.need("mig_parted")


def _custom_layout(document, config, model, node):
    """("all", one GPU's layout), ("per_gpu", [layout per GPU]) or ("unknown", None) of a custom config on ``node``
    (a layout is {profile: count}, None for MIG disabled). The entries apply in order, as mig-parted applies them;
    entries for listed devices need the node's GPU count label, and a GPU no entry names is left unknown."""
    entry = mig_catalog.gpu_model(model)
    applying = [e for e in document["mig-configs"][config] if mig_nodes._entry_applies(e, entry)]

    def layout(one):
        return dict(one.get("mig-devices") or {}) if one.get("mig-enabled") else None
    if all(one.get("devices", "all") == "all" for one in applying):
        return "all", layout(applying[-1])
    count = str(node_labels(node).get(GPU_COUNT_LABEL) or "")
    if not count.isdigit() or not int(count):
        return "unknown", None
    per_gpu = [False] * int(count)
    for one in applying:
        for index in range(int(count)) if one.get("devices", "all") == "all" else one.get("devices") or []:
            if isinstance(index, int) and 0 <= index < len(per_gpu):
                per_gpu[index] = layout(one)
    return ("unknown", None) if False in per_gpu else ("per_gpu", per_gpu)


def _custom_geometry(view, node, model, config, strategy):
    """(evidence, problem or None) of a node whose config is not one of the GPU Operator's default configs."""
    parted = _parted(view, node, config, model)
    source = parted.get("source") or "the mig-parted config"
    found = mig_nodes.parted_config_problems(parted["config"], config, model, source)
    if found:
        return "custom config %s of %s" % (config, source), "; ".join(found)
    kind, layout = _custom_layout(parted["config"], config, model, node)
    line = "%s custom config %s of %s strategy %s" % (model, config, source, strategy)
    if kind == "unknown":
        raise Missing("kubernetes.nodes[%s].metadata.labels.%s" % (node_name(node), GPU_COUNT_LABEL),
                      "config %s lists devices: the node's GPU count is needed, and every GPU must be named" % config)
    try:
        if kind == "per_gpu":
            return line, _exact_problem(node, mig_nodes.expected_resources(model, None, layout, strategy), strategy)
        return line, _geometry_problem(node, model, layout, strategy)
    except ValueError as exc:
        return line, "config %s cannot be advertised under strategy %s: %s" % (config, strategy, exc)


def _exact_problem(node, expected, strategy):
    """Why the node's allocatable GPU resources are not exactly ``expected``; None when they are."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    have = dict((k, mig_nodes._quantity(v)) for k, v in allocatable.items() if mig_nodes._is_gpu_resource(k)
                and str(v) not in ("0", ""))
    if have == expected:
        return None
    return "allocatable %s, the config gives %s under strategy %s" % (mig_nodes._json(have), mig_nodes._json(expected), strategy)


# --------------------------------------------------------------------------------------------
# conformance
# --------------------------------------------------------------------------------------------

@described("gpu.requests_advertised")
def requests_advertised(view):
    nodes = dict((node_name(n), (n.get("status") or {}).get("allocatable") or {}) for n in view.kubernetes("nodes"))
    advertised = set(k for a in nodes.values() for k, v in a.items() if str(v) not in ("0", ""))
    gpu_nodes = set(node_name(n) for n in view.gpu_nodes())
    evidence, problems, judged = [], [], 0
    for pod in view.kubernetes("pods"):
        if (pod.get("status") or {}).get("phase") in _FINISHED:
            continue
        requests = pod_gpu_requests(pod)
        if not requests:
            continue
        where = (pod.get("spec") or {}).get("nodeName")
        have = set(k for k, v in nodes.get(where, {}).items() if str(v) not in ("0", "")) if where else advertised
        name = "%s/%s" % (pod["metadata"].get("namespace"), pod["metadata"].get("name"))
        if where in gpu_nodes and not any(is_gpu_name(k) for k in have):
            # a GPU node that lost every GPU resource is gpu.allocatable's failure; the pod's resource names are not the cause
            evidence.append("pod %s: not judged, GPU node %s advertises no GPU resource" % (name, where))
            continue
        judged += 1
        evidence.append("pod %s: %s" % (name, ", ".join(sorted(requests))))
        for resource in sorted(requests):
            if resource not in have:
                problems.append("pod %s requests %s, which %s" % (
                    name, resource, "node %s does not advertise" % where if where else "no node advertises"))
    if not judged:
        raise Skip("no pod requests a GPU resource%s" % (": " + "; ".join(evidence) if evidence else ""))
    return evidence, problems
