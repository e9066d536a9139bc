# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GKE GPUDirect (TCPX, TCPXO, RDMA) validation checks: platform gates, the installer / NRI injector /
device plugin deployment, and what makes GPUDirect workloads fail or fall back to slow paths.

A node's profile is the catalog profile whose machine types hold its instance type: ``rdma`` (A3 Ultra, A4) and
``rdma-a4x`` (A4X) are told apart, so each is held to its own NIC count, installer image and interfaces.
Every fact (machines, GPUs per node, version gates, releases, DaemonSet names, annotations, volumes, NCCL
environment, MTU, the RDMA Network names and device modes) is read from ``_catalog/gke_gpudirect.py``,
``_catalog/nccl.py`` (not from the fabric engine: the filter that loads this file would import the cloud clients
with it, in every worker that templates a filter of the collection); the TCPX/TCPXO settings an RDMA workload
refuses from ``_gpudirect_workload.rdma_conflicts`` (the ``gpudirect_conflicts`` filter); nothing is copied.
"""

from __future__ import annotations

import json

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gd
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import GPU_RESOURCE, MIG_CONFIG_LABEL
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._gpudirect import workload
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._sharing.gpu_sharing import pod_gpu_requests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.readiness import not_ready_pods
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Fault, Missing, Skip, described_by
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import node_labels, node_name

# each check's phase, title, reads, cause and fix: gke.yml beside this file
described = described_by(__file__)

# GKE sets this node label on pools with NCCL Fast Socket enabled (GKE guide "Improve workload efficiency using
# NCCL Fast Socket", https://cloud.google.com/kubernetes-engine/docs/how-to/nccl-fast-socket).
FAST_SOCKET_LABEL = "cloud.google.com/gke-nccl-fastsocket"
ADVANCED_DATAPATH = "ADVANCED_DATAPATH"
# the node label GKE sets to the name of the node's pool (GKE node labels reference)
_POOL_LABEL = "cloud.google.com/gke-nodepool"
# the node label GKE sets to the node image's OS distribution (cos, ubuntu), and how the kubelet names COS in
# status.nodeInfo.osImage: what a node shows of its image when the GKE API is not read
OS_DISTRIBUTION_LABEL = "cloud.google.com/gke-os-distribution"
_COS_DISTRIBUTION = "cos"
_COS_OS_IMAGE = "Container-Optimized OS"
# the MIG manager's "no MIG" config (also a GPU Operator default)
_MIG_OFF = ("all-disabled", "")
_FINISHED = ("Succeeded", "Failed")


def _node_profile(node):
    """The GPUDirect profile whose machine types hold the node's instance type (rdma-a4x for A4X), else None."""
    machine_type = node_labels(node).get(gd.MACHINE_TYPE_LABEL)
    found = [name for name in gd.PROFILE_NAMES if machine_type in gd.PROFILES[name]["machine_types"]]
    return found[0] if found else None


def _gpudirect_nodes(view):
    """[(node, profile)] of the nodes whose machine type runs GPUDirect; Skip when there is none."""
    found = [(n, _node_profile(n)) for n in view.kubernetes("nodes")]
    found = [(n, f) for n, f in found if f]
    if not found:
        raise Skip("no node of a GPUDirect machine type (%s)" % ", ".join(sorted(gd.MACHINES)))
    return sorted(found, key=lambda item: node_name(item[0]) or "")


def _is_rdma(profile):
    return profile in gd.rdma_profile_names()


def _rdma_device(nic):
    """Whether a gke.nics entry is an RDMA NIC (the device mode of the RDMA profiles)."""
    return nic.get("device_mode") in set(gd.PROFILES[p]["device_mode"] for p in gd.rdma_profile_names())


def _dranet(node):
    """Whether GKE DRANET hands the node's accelerator NICs to pods (accelerator_network_profile auto): pods then
    claim them through DRA, with no multi-network annotation and no GKENetworkParamSet of the collection's."""
    key, value = gd.DRANET_NODE_LABEL
    return node_labels(node).get(key) == value


def _rdma_nodes(view):
    """[(node, profile)] of the GPUDirect-RDMA nodes; Skip when there is none."""
    nodes = [(n, f) for n, f in _gpudirect_nodes(view) if _is_rdma(f)]
    if not nodes:
        raise Skip("no GPUDirect-RDMA node (%s)" % ", ".join(m for p in gd.rdma_profile_names() for m in gd.PROFILES[p]["machine_types"]))
    return nodes


def _kubelet_version(node):
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
    if not version:
        raise Missing("kubernetes.nodes[%s].status.nodeInfo.kubeletVersion" % node_name(node))
    return version.lstrip("v")


def _fabrics(nodes):
    return sorted(set(f for _n, f in nodes))


def _gpu_pods(view, nodes, where="GPUDirect"):
    """[(pod, node, fabric, requests)] of the active pods that request GPUs on GPUDirect nodes; Skip when there is
    none (a workload check with no workload to judge has not passed)."""
    by_name = dict((node_name(n), (n, f)) for n, f in nodes)
    found = []
    for pod in view.pods_on(by_name):
        if (pod.get("status") or {}).get("phase") in _FINISHED:
            continue
        requests = pod_gpu_requests(pod)
        if requests:
            node, fabric = by_name[pod["spec"]["nodeName"]]
            found.append((pod, node, fabric, requests))
    if not found:
        raise Skip("no running pod requests GPUs on a %s node (%d node(s)): there is no workload to judge" % (where, len(by_name)))
    return found


def _pod_name(pod):
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace") or "default", meta.get("name"))


def _image_is(image, wanted):
    """Whether ``image`` is the catalog image ``wanted`` (repository:tag), under any registry (a mirror keeps the path)."""
    reference = "%s:%s" % (wanted["repository"], wanted["tag"])
    return (image or "").split("@")[0].endswith("/" + reference) or (image or "").split("@")[0] == reference


# --------------------------------------------------------------------------------------------
# preflight
# --------------------------------------------------------------------------------------------

@described("gke.gpudirect.version_gate")
def version_gate(view):
    evidence, problems = [], []
    for node, fabric in _gpudirect_nodes(view):
        version = _kubelet_version(node)
        error = gd.version_gate_error(fabric, version)
        evidence.append("node %s: %s, GKE %s%s" % (node_name(node), fabric, version, ", DRANET" if _dranet(node) else ""))
        if error:
            problems.append("node %s: %s" % (node_name(node), error))
        floor = gd.ACCELERATOR_NETWORK_PROFILE_MIN_GKE
        if _is_rdma(fabric) and _dranet(node) and gd.parse_gke_version(version) < gd.parse_gke_version(floor):
            problems.append("node %s: GKE %s is below %s, the floor of accelerator_network_profile %s (DRANET)" % (
                node_name(node), version, floor, gd.ACCELERATOR_NETWORK_PROFILE))
    return evidence, problems


def _gke_cluster(view):
    _gpudirect_nodes(view)
    return view.need("gke.cluster")


@described("gke.dataplane_v2")
def dataplane_v2(view):
    cluster = _gke_cluster(view)
    datapath = cluster.get("datapath_provider")
    problems = [] if datapath == ADVANCED_DATAPATH else ["datapath provider is %s" % (datapath or "the legacy default")]
    return ["datapath provider %s" % datapath], problems


@described("gke.multi_networking")
def multi_networking(view):
    cluster = _gke_cluster(view)
    on = cluster.get("multi_networking") is True
    return ["multi_networking %s" % cluster.get("multi_networking")], [] if on else ["multi-networking is off"]


@described("gke.standard_cluster")
def standard_cluster(view):
    cluster = _gke_cluster(view)
    if "autopilot" not in cluster or cluster["autopilot"] is None:
        raise Missing("gke.cluster.autopilot")
    return ["autopilot %s" % cluster["autopilot"]], ["the cluster is Autopilot"] if cluster["autopilot"] else []


def _node_os(node):
    """(is COS, what shows it) of a node from its OS distribution label, else its osImage; (None, None) when neither."""
    label = node_labels(node).get(OS_DISTRIBUTION_LABEL)
    if label:
        return label.strip().lower() == _COS_DISTRIBUTION, "%s=%s" % (OS_DISTRIBUTION_LABEL, label)
    image = ((node.get("status") or {}).get("nodeInfo") or {}).get("osImage")
    if image:
        return image.strip().startswith(_COS_OS_IMAGE), "osImage %s" % image
    return None, None


def _cos_nodes(view, nodes):
    """gke.cos_image from what the nodes show when the GKE API's node pools were not read; other when a node shows nothing."""
    why = (view.snapshot.get("read_errors") or {}).get("gke.node_pools") or "not read"
    evidence, problems = ["gke.node_pools: %s; judged from the nodes" % why], []
    for node, _fabric in nodes:
        cos, shown = _node_os(node)
        if cos is None:
            raise Missing("gke.node_pools", "%s; node %s has neither the %s label nor status.nodeInfo.osImage: give "
                          "validate_gke (cluster, location and GCP credentials) to read its pool's image type" % (
                              why, node_name(node), OS_DISTRIBUTION_LABEL))
        evidence.append("node %s: %s" % (node_name(node), shown))
        if not cos:
            problems.append("node %s (pool %s) runs %s" % (node_name(node), node_labels(node).get(_POOL_LABEL), shown))
    return evidence, problems


@described("gke.cos_image")
def cos_image(view):
    nodes = _gpudirect_nodes(view)
    if not view.has("gke.node_pools"):
        return _cos_nodes(view, nodes)
    pools = [p for p in view.need("gke.node_pools") if p.get("gpudirect")]
    if not pools:
        raise Missing("gke.node_pools", "GPUDirect nodes exist but no node pool of a GPUDirect machine type was read")
    evidence = ["pool %s: %s" % (p.get("name"), p.get("image_type")) for p in pools]
    problems = ["pool %s runs %s" % (p.get("name"), p.get("image_type")) for p in pools
                if not str(p.get("image_type") or "").upper().startswith("COS")]
    return evidence, problems


@described("gke.gpudirect.pool_networks")
def pool_networks(view):
    nodes = _gpudirect_nodes(view)
    # pools whose nodes run GKE DRANET get their accelerator networks from GKE (accelerator_network_profile auto)
    managed = set(node_labels(n).get(_POOL_LABEL) for n, _f in nodes if _dranet(n))
    pools = [p for p in view.need("gke.node_pools") if p.get("gpudirect") and p.get("name") not in managed]
    if not pools:
        raise Skip("every GPUDirect pool runs GKE DRANET (GKE manages its accelerator networks)")
    evidence, problems = [], []
    for pool in pools:
        machine_type = pool.get("machine_type")
        profile = _node_profile(dict(metadata=dict(labels={gd.MACHINE_TYPE_LABEL: machine_type})))
        if profile is None:
            continue
        have, want = pool["gpudirect"].get("gpu_nics"), gd.PROFILES[profile]["node_networks"]
        if not isinstance(have, int):
            raise Missing("gke.node_pools[%s].gpudirect.gpu_nics" % pool.get("name"), "the pool record has no count of its "
                          "additional node networks (gpu_nodepool_info gives it)")
        evidence.append("pool %s (%s, %s): %s additional node network(s)" % (pool.get("name"), machine_type, profile, have))
        if have < want:
            problems.append("pool %s (%s) has %s additional node network(s); %s needs %d" % (
                pool.get("name"), machine_type, have, profile, want))
    if not evidence:
        raise Skip("no node pool read is of a GPUDirect machine type (%s): GKE listed %s" % (
            ", ".join(sorted(gd.MACHINES)), ", ".join("%s (%s)" % (p.get("name"), p.get("machine_type")) for p in pools)))
    return evidence, problems


# --------------------------------------------------------------------------------------------
# deployment
# --------------------------------------------------------------------------------------------

def _daemonset(view, name, namespace):
    for ds in view.kubernetes("daemonsets"):
        meta = ds.get("metadata") or {}
        if meta.get("name") == name and meta.get("namespace") == namespace:
            return ds
    return None


def _ds_pods(view, ds):
    """The pods of DaemonSet ``ds`` (by owner) that the snapshot keeps: those on GPU nodes."""
    meta = ds.get("metadata") or {}
    return [p for p in view.kubernetes("pods") if (p.get("metadata") or {}).get("namespace") == meta.get("namespace")
            and any(o.get("kind") == "DaemonSet" and o.get("name") == meta.get("name")
                    for o in (p.get("metadata") or {}).get("ownerReferences") or [])]


def _ds_problems(view, ds, name, nodes):
    """Why DaemonSet ``ds`` does not run a ready pod on each of ``nodes``: the nodes without a pod, and each pod that is
    not ready with its node, container and reason (from the DaemonSet's counts when its pods were not read)."""
    status = ds.get("status") or {}
    desired, ready = status.get("desiredNumberScheduled") or 0, status.get("numberReady") or 0
    problems = []
    if desired < len(nodes):
        problems.append(Fault("DaemonSet %s schedules %d pod(s) for %d node(s)" % (name, desired, len(nodes)), "not_ready"))
    if ready >= desired:
        return problems
    pods = [p for p in _ds_pods(view, ds) if (p.get("spec") or {}).get("nodeName") in set(node_name(n) for n in nodes)] \
        if view.has("kubernetes.pods") else []
    broken = not_ready_pods(pods)
    problems.extend(Fault("DaemonSet %s not ready on node %s: pod %s, %s" % (name, r["node"], r["pod"], r["problem"]), "not_ready")
                    for r in broken)
    if not broken:
        problems.append(Fault("DaemonSet %s: %d of %d pods ready" % (name, ready, desired), "not_ready"))
    return problems


def _ds_images(ds):
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c.get("image") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]


@described("gpudirect.installer")
def installer(view):
    nodes = _gpudirect_nodes(view)
    evidence, problems = [], []
    for fabric in _fabrics(nodes):
        entry = gd.INSTALLERS[fabric]
        members = [n for n, f in nodes if f == fabric]
        versions = sorted(set(_kubelet_version(n) for n in members))
        ds = _daemonset(view, entry["name"], entry["namespace"])
        if ds is None:
            problems.append(Fault("DaemonSet %s/%s not found" % (entry["namespace"], entry["name"]), "missing"))
            continue
        problems.extend(_ds_problems(view, ds, entry["name"], members))
        images = _ds_images(ds)
        evidence.append("%s: images %s, nodes at %s" % (entry["name"], ", ".join(i or "?" for i in images), ", ".join(versions)))
        for version in versions:
            wanted = gd.installer_image(fabric, version)
            if not any(_image_is(i, wanted) for i in images):
                running = ", ".join(i or "?" for i in images)
                problems.append("%s runs %s; %s on GKE %s needs %s:%s" % (
                    entry["name"], running, fabric, version, wanted["repository"], wanted["tag"]))
    return evidence, problems


@described("gpudirect.nri_injector")
def nri_injector(view):
    nodes = [(n, f) for n, f in _gpudirect_nodes(view) if f in gd.DAEMONS]
    if not nodes:
        raise Skip("no TCPX or TCPXO node: the other GPUDirect fabrics run no RxDM daemon")
    entry = gd.NRI_INJECTOR
    ds = _daemonset(view, entry["name"], entry["namespace"])
    if ds is None:
        return [], ["DaemonSet %s/%s not found" % (entry["namespace"], entry["name"])]
    return ["%s: %s" % (entry["name"], ", ".join(i or "?" for i in _ds_images(ds)))], _ds_problems(view, ds, entry["name"], [n for n, _f in nodes])


def _gpu_count(node):
    """The node's allocatable nvidia.com/gpu as a number (None when absent or not a whole number)."""
    have = str(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "")).strip()
    return int(have) if have.isdigit() else None


def _sharing(node):
    """What shows that a GPUDirect node shares its GPUs: its GKE sharing labels, a MIG config, or more nvidia.com/gpu
    than its machine has GPUs (a device-plugin sharing config GKE does not label); [] when nothing does."""
    labels = node_labels(node)
    found = ["%s=%s" % (k, labels[k]) for k in gd.GPU_SHARING_LABELS if labels.get(k)]
    if labels.get(MIG_CONFIG_LABEL, "") not in _MIG_OFF:
        found.append("%s=%s" % (MIG_CONFIG_LABEL, labels[MIG_CONFIG_LABEL]))
    have, gpus = _gpu_count(node), gd.machine(labels[gd.MACHINE_TYPE_LABEL])["gpus_per_node"]
    if not found and have is not None and have > gpus:
        found.append("%s=%d for %d GPUs" % (GPU_RESOURCE, have, gpus))
    return found


@described("gpudirect.allocatable_gpus")
def allocatable_gpus(view):
    evidence, problems, judged = [], [], 0
    for node, _fabric in _gpudirect_nodes(view):
        want = gd.machine(node_labels(node)[gd.MACHINE_TYPE_LABEL])["gpus_per_node"]
        have = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
        # a shared node advertises partitions or replicas (gpudirect.no_gpu_sharing names that); a node with no GPU
        # resource at all is gpu.allocatable's: either way the count here is not the cause
        if _sharing(node):
            evidence.append("node %s: %s=%s, not judged: it shares its GPUs" % (node_name(node), GPU_RESOURCE, have))
            continue
        if str(have or "0").strip() == "0":
            evidence.append("node %s: no %s, not judged: it advertises no GPU" % (node_name(node), GPU_RESOURCE))
            continue
        judged += 1
        evidence.append("node %s: %s=%s" % (node_name(node), GPU_RESOURCE, have))
        if _gpu_count(node) is None:
            problems.append("node %s advertises %s=%s, not a whole number of GPUs; its machine has %d" % (
                node_name(node), GPU_RESOURCE, have, want))
        elif _gpu_count(node) < want:
            problems.append("node %s advertises %s=%s, its machine has %d" % (node_name(node), GPU_RESOURCE, have, want))
    if not judged:
        raise Skip("no GPUDirect node's GPU count can be judged: %s" % "; ".join(evidence))
    return evidence, problems


def _by_object_name(documents):
    return dict(((d.get("metadata") or {}).get("name"), d) for d in documents or [])


def _not_ready(document):
    """Why a GKENetworkParamSet or Network is not Ready (its Ready condition's status, reason and message), else None."""
    ready = [c for c in ((document.get("status") or {}).get("conditions") or []) if c.get("type") == "Ready"]
    if not ready:
        return "no Ready condition"
    if str(ready[-1].get("status")) == "True":
        return None
    detail = ": ".join(str(ready[-1].get(k)) for k in ("reason", "message") if ready[-1].get(k))
    return "Ready %s%s" % (ready[-1].get("status"), ": " + detail if detail else "")


def _pair_problems(name, mode, profile, param_sets, networks):
    """What is wrong with the GKENetworkParamSet / Network pair ``name`` a profile's pods attach in device mode ``mode``."""
    params, network = param_sets.get(name), networks.get(name)
    problems = []
    if params is None:
        problems.append("GKENetworkParamSet %s not found (%s needs it, deviceMode %s)" % (name, profile, mode))
    elif ((params.get("spec") or {}).get("deviceMode")) != mode:
        problems.append("GKENetworkParamSet %s has deviceMode %s; %s needs %s" % (
            name, (params.get("spec") or {}).get("deviceMode"), profile, mode))
    elif _not_ready(params):
        problems.append("GKENetworkParamSet %s is not Ready (%s)" % (name, _not_ready(params)))
    ref = ((network or {}).get("spec") or {}).get("parametersRef") or {}
    if network is None:
        problems.append("Network %s not found (%s needs it)" % (name, profile))
    elif (ref.get("group"), ref.get("kind"), ref.get("name")) != (gd.NETWORK_API_GROUP, "GKENetworkParamSet", name):
        problems.append("Network %s does not refer to GKENetworkParamSet %s (parametersRef %s)" % (
            name, name, json.dumps(ref, sort_keys=True)))
    elif _not_ready(network) and not problems:     # a Network is not Ready while its GKENetworkParamSet is not
        problems.append("Network %s is not Ready (%s)" % (name, _not_ready(network)))
    return problems


def _pair_evidence(profile, name, param_sets, networks):
    params, network = param_sets.get(name), networks.get(name)
    return "%s: GKENetworkParamSet %s deviceMode %s, Network %s" % (
        profile, name, ((params.get("spec") or {}).get("deviceMode") if params else "(none)"), "present" if network else "(none)")


@described("gpudirect.rdma_networks")
def rdma_networks(view):
    nodes = _rdma_nodes(view)
    profiles = sorted(set(f for n, f in nodes if not _dranet(n)))
    if not profiles:
        raise Skip("every GPUDirect-RDMA node runs GKE DRANET (accelerator_network_profile %s): GKE manages its "
                   "accelerator networks" % gd.ACCELERATOR_NETWORK_PROFILE)
    param_sets = _by_object_name(view.kubernetes("network_param_sets"))
    networks = _by_object_name(view.kubernetes("networks"))
    evidence, problems = [], []
    for profile in profiles:
        for name, mode in _rdma_pairs(profile):
            evidence.append(_pair_evidence(profile, name, param_sets, networks))
            problems += _pair_problems(name, mode, profile, param_sets, networks)
    return evidence, sorted(set(problems), key=problems.index)


def _rdma_pairs(profile):
    """[(Network name, device mode)] of an RDMA profile: the gVNIC network, then rdma-0..N-1."""
    return [(gd.RDMA_GVNIC_NETWORK, gd.DEFAULT_DEVICE_MODE)] + [
        (name, gd.PROFILES[profile]["device_mode"]) for name in gd.rdma_network_names(profile)]


# GKE multi-networking on a node (the catalog's names)
NETWORK_RESOURCE_PREFIX = gd.NETWORK_RESOURCE_PREFIX
NORTH_INTERFACES_ANNOTATION = gd.NORTH_INTERFACES_ANNOTATION
NIC_INFO_ANNOTATION = gd.NIC_INFO_ANNOTATION


def _node_annotation(node, key):
    """A node's JSON-list annotation as a list of mappings; None when absent; ValueError when it is not one."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(key)
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ValueError("node %s: annotation %s is not a JSON list of objects" % (node_name(node), key))
    return value


def _advertised_networks(node):
    """The Networks a node advertises (allocatable networking.gke.io.networks/<name> above 0, not the .IP ones)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return set(k[len(NETWORK_RESOURCE_PREFIX):] for k, v in allocatable.items()
               if k.startswith(NETWORK_RESOURCE_PREFIX) and not k.endswith(".IP") and str(v).strip() not in ("0", ""))


def _named_networks(node):
    """Every Network a node names: in its allocatable and in its north-interfaces annotation."""
    north = _node_annotation(node, NORTH_INTERFACES_ANNOTATION) or []
    return _advertised_networks(node) | set(e.get("network") for e in north if e.get("network"))


def _fabric_networks(view, nodes):
    """{profile: [(Network name, device mode)]} of the GPU NIC networks of the non-DRANET GPUDirect nodes' profiles.

    RDMA profiles: the catalog's names. TCPX/TCPXO: named by whoever built the fabric, so the GKE API's GPU NICs when
    read, every GKENetworkParamSet in NetDevice mode, and every Network the nodes of the profile name that no
    GKENetworkParamSet gives another mode (a pair that is missing is still the fabric's: its check names it)."""
    param_sets = _by_object_name(view.kubernetes("network_param_sets"))
    rdma_names = set(n for p in gd.rdma_profile_names() for n, _m in _rdma_pairs(p))
    from_api = set(n.get("k8s_network") for n in (view.need("gke.nics") if view.has("gke.nics") else None) or []
                   if n.get("k8s_network") and not _rdma_device(n))
    device = set(name for name, d in param_sets.items() if ((d.get("spec") or {}).get("deviceMode")) == gd.DEFAULT_DEVICE_MODE)
    found = {}
    for profile in sorted(set(f for _n, f in nodes)):
        if _is_rdma(profile):
            found[profile] = _rdma_pairs(profile)
            continue
        named = set(name for n, f in nodes if f == profile for name in _named_networks(n))
        named = set(name for name in named if name not in param_sets or name in device)
        names = sorted((from_api | device | named) - rdma_names - set([gd.DEFAULT_NETWORK]))
        found[profile] = [(name, gd.PROFILES[profile]["device_mode"]) for name in names]
    return found


def _annotated_nodes(view):
    """[(node, profile)] of the GPUDirect nodes whose GPU NICs GKE multi-networking attaches (not DRANET's)."""
    nodes = [(n, f) for n, f in _gpudirect_nodes(view) if not _dranet(n)]
    if not nodes:
        raise Skip("every GPUDirect node runs GKE DRANET: GKE manages its accelerator networks")
    return nodes


@described("gpudirect.gpu_nic_networks")
def gpu_nic_networks(view):
    nodes = [(n, f) for n, f in _annotated_nodes(view) if not _is_rdma(f)]
    if not nodes:
        raise Skip("no TCPX or TCPXO node (gpudirect.rdma_networks judges the GPUDirect-RDMA networks)")
    param_sets = _by_object_name(view.kubernetes("network_param_sets"))
    networks = _by_object_name(view.kubernetes("networks"))
    evidence, problems = [], []
    for profile, pairs in sorted(_fabric_networks(view, nodes).items()):
        if not pairs:
            raise Missing("kubernetes.network_param_sets", "no GPU NIC network of %s is named by its nodes, a GKENetworkParamSet "
                          "in %s mode or the GKE API: give validate_gke to read the fabric" % (profile, gd.DEFAULT_DEVICE_MODE))
        for name, mode in pairs:
            evidence.append(_pair_evidence(profile, name, param_sets, networks))
            problems += _pair_problems(name, mode, profile, param_sets, networks)
    return evidence, problems


def _pool_short(view, node, profile):
    """Whether the GKE API shows the node's pool with fewer node networks than its profile (gke.gpudirect.pool_networks)."""
    if not view.has("gke.node_pools"):
        return False
    pool = [p for p in view.need("gke.node_pools") if p.get("name") == node_labels(node).get(_POOL_LABEL)]
    have = ((pool[0].get("gpudirect") or {}).get("gpu_nics") if pool else None)
    return isinstance(have, int) and have < gd.PROFILES[profile]["node_networks"]


@described("gpudirect.node_networks")
def node_networks(view):
    nodes = _annotated_nodes(view)
    fabric = _fabric_networks(view, nodes)
    param_sets = _by_object_name(view.kubernetes("network_param_sets"))
    networks = _by_object_name(view.kubernetes("networks"))
    evidence, problems, judged = [], [], 0
    for node, profile in nodes:
        # a pair that is missing or not Ready is gpudirect.gpu_nic_networks' / rdma_networks' fault, a pool created
        # short of networks gke.gpudirect.pool_networks': a node lacking those networks is their symptom
        wanted = [name for name, mode in fabric[profile] if not _pair_problems(name, mode, profile, param_sets, networks)]
        if _pool_short(view, node, profile):
            evidence.append("node %s: not judged, its pool has fewer node networks than %s needs" % (node_name(node), profile))
            continue
        judged += 1
        have = _advertised_networks(node)
        evidence.append("node %s (%s): %s" % (node_name(node), profile, ", ".join(sorted(have)) or "no network"))
        lacking = [name for name in wanted if name not in have]
        if lacking:
            problems.append("node %s lacks allocatable %s" % (node_name(node), ", ".join(NETWORK_RESOURCE_PREFIX + n for n in lacking)))
        # a network whose pair is broken counts as present: its own check names it
        count = len([name for name, _mode in fabric[profile] if name in have or name not in wanted])
        if count < gd.PROFILES[profile]["gpu_nic_count"] and not lacking:
            problems.append("node %s advertises %d GPU NIC network(s); %s needs %d" % (
                node_name(node), count, profile, gd.PROFILES[profile]["gpu_nic_count"]))
    if not judged:
        raise Skip("no GPUDirect node can be judged: %s" % "; ".join(evidence))
    return evidence, problems


def _interfaces(node):
    """{kernel interface name at boot: Network} of a node from its NIC annotations; the node's InternalIP marks the
    primary (management) network; an interface on no Network GKE lists is left out (a GPU NIC whose pair is missing
    is gpudirect.gpu_nic_networks'); None when the node lacks either annotation."""
    nic_info, north = _node_annotation(node, NIC_INFO_ANNOTATION), _node_annotation(node, NORTH_INTERFACES_ANNOTATION)
    if nic_info is None or north is None:
        return None
    by_ip = dict((e.get("ipAddress"), e.get("network")) for e in north or [])
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            by_ip.setdefault(address.get("address"), "%s (the node's primary network)" % gd.DEFAULT_NETWORK)
    return dict((e.get("birthName"), by_ip[e.get("birthIP")]) for e in nic_info or [] if e.get("birthName") and e.get("birthIP") in by_ip)


@described("gpudirect.node_nics")
def node_nics(view):
    nodes = _annotated_nodes(view)
    fabric = _fabric_networks(view, nodes)
    evidence, problems, judged = [], [], 0
    for node, profile in nodes:
        interfaces = _interfaces(node)
        if interfaces is None:
            if _advertised_networks(node):
                absent = [k for k in (NIC_INFO_ANNOTATION, NORTH_INTERFACES_ANNOTATION) if _node_annotation(node, k) is None]
                raise Missing("kubernetes.nodes[%s].metadata.annotations" % node_name(node), "the node advertises GKE networks "
                              "but lacks %s, which GKE writes to place them on its interfaces" % " and ".join(absent))
            evidence.append("node %s: not judged, no GKE network on it (gpudirect.node_networks names it)" % node_name(node))
            continue
        judged += 1
        gpu_networks = set(gd.rdma_network_names(profile) if _is_rdma(profile) else [name for name, _mode in fabric[profile]])
        placed = ["%s=%s" % (i, interfaces.get(i, "(none)")) for i in gd.interface_names(profile)]
        evidence.append("node %s (%s): %s" % (node_name(node), profile, ", ".join(placed)))
        wrong = ["%s carries %s" % (i, interfaces[i]) for i in gd.interface_names(profile)
                 if i in interfaces and interfaces[i] not in gpu_networks]
        if wrong:
            problems.append("node %s: %s, not a GPU NIC network of %s" % (node_name(node), "; ".join(wrong), profile))
    if not judged:
        raise Skip("no GPUDirect node carries a GKE network: %s" % "; ".join(evidence))
    return evidence, problems


@described("gpudirect.daemon_pair")
def daemon_pair(view):
    nodes = [(n, f) for n, f in _gpudirect_nodes(view) if f in gd.DAEMONS]
    if not nodes:
        raise Skip("no TCPX or TCPXO node: the other GPUDirect fabrics run no RxDM daemon")
    evidence, problems = [], []
    for pod, node, fabric, _requests in _gpu_pods(view, nodes, "TCPX/TCPXO"):
        wanted = gd.release(fabric, _kubelet_version(node))["daemon"]
        name = gd.DAEMONS[fabric]["name"]
        daemons = [c for c in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers") or []) if c.get("name") == name]
        if not daemons:
            evidence.append("pod %s: no %s container" % (_pod_name(pod), name))
            problems.append("pod %s on node %s runs no %s container; the node's release pairs %s:%s" % (
                _pod_name(pod), node_name(node), name, wanted["repository"], wanted["tag"]))
        for container in daemons:
            evidence.append("pod %s: %s" % (_pod_name(pod), container.get("image")))
            if not _image_is(container.get("image"), wanted):
                problems.append("pod %s runs daemon %s; the node's release pairs %s:%s" % (
                    _pod_name(pod), container.get("image"), wanted["repository"], wanted["tag"]))
    return evidence, problems


# --------------------------------------------------------------------------------------------
# conformance
# --------------------------------------------------------------------------------------------

@described("gpudirect.no_gpu_sharing")
def no_gpu_sharing(view):
    problems, evidence = [], []
    for node, fabric in _gpudirect_nodes(view):
        found = _sharing(node)
        evidence.append("node %s: %s" % (node_name(node), ", ".join(found) or "no sharing label"))
        if found:
            problems.append("node %s (%s): %s" % (node_name(node), ", ".join(found), gd.sharing_refusal(gd.PROFILES[fabric]["fabric"])))
    return evidence, problems


@described("gpudirect.pod_whole_node")
def pod_whole_node(view):
    evidence, problems = [], []
    for pod, node, _fabric, requests in _gpu_pods(view, _gpudirect_nodes(view)):
        want = gd.machine(node_labels(node)[gd.MACHINE_TYPE_LABEL])["gpus_per_node"]
        have = requests.get(GPU_RESOURCE, 0)
        evidence.append("pod %s: %s=%s" % (_pod_name(pod), GPU_RESOURCE, have))
        if have != want:
            problems.append("pod %s requests %s GPU(s) on node %s, which has %d" % (_pod_name(pod), have, node_name(node), want))
    return evidence, problems


def _pod_checks(view, judge, annotated=False, unjudged=None):
    """``judge(pod, node, profile)`` over the GPU pods of GPUDirect nodes; ``annotated``: only the nodes whose pods attach
    their GPU NICs by the multi-network annotation (not the DRANET nodes, whose pods claim them through DRA).
    ``judge`` returns None for a pod it cannot judge; when it judged none, the check skips with ``unjudged``."""
    nodes = _gpudirect_nodes(view)
    if annotated:
        nodes = [(n, f) for n, f in nodes if not _dranet(n)]
        if not nodes:
            raise Skip("every GPUDirect node runs GKE DRANET: its pods claim the NICs through DRA, not annotations")
    evidence, problems, judged = [], [], 0
    for pod, node, fabric, _requests in _gpu_pods(view, nodes):
        missing = judge(pod, node, fabric)
        if missing is None:
            evidence.append("pod %s (%s): not judged" % (_pod_name(pod), fabric))
            continue
        judged += 1
        evidence.append("pod %s (%s): %s" % (_pod_name(pod), fabric, "complete" if not missing else "missing " + ", ".join(missing)))
        if missing:
            problems.append("pod %s on node %s lacks %s" % (_pod_name(pod), node_name(node), ", ".join(missing)))
    if not judged:
        raise Skip(unjudged)
    return evidence, problems


@described("gpudirect.pod_annotations")
def pod_annotations(view):
    def judge(pod, _node, fabric):
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        wanted = [gd.INTERFACES_ANNOTATION]
        device = gd.device_annotation(fabric)
        if device:
            wanted.append(device[0])
        return ["annotation " + k for k in wanted if not annotations.get(k)]
    return _pod_checks(view, judge, annotated=True)


@described("gpudirect.pod_interfaces")
def pod_interfaces(view):
    nics = view.need("gke.nics") if view.has("gke.nics") else None
    by_interface = dict((n.get("interface"), n.get("k8s_network")) for n in nics or [])

    def judge(pod, _node, fabric):
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(gd.INTERFACES_ANNOTATION)
        if not text:
            return None     # gpudirect.pod_annotations reports the missing annotation
        try:
            entries = json.loads(text)
            every = dict((e["interfaceName"], e["network"]) for e in entries)
        except (ValueError, TypeError, KeyError, AttributeError):
            return ["a readable %s annotation" % gd.INTERFACES_ANNOTATION]
        attached = dict((i, n) for i, n in every.items() if i != gd.CONTROL_INTERFACE)
        wanted = gd.interface_names(fabric)
        # RDMA pods attach the catalog's rdma-0..N-1 on the GPU interfaces; TCPX/TCPXO the fabric's (gke.nics) networks
        networks = dict(zip(wanted, gd.rdma_network_names(fabric))) if _is_rdma(fabric) else by_interface
        missing = []
        # RDMA pods list eth0 on the default network with the rdma-N networks (the catalog's annotation, CEA's manifests)
        if _is_rdma(fabric) and every.get(gd.CONTROL_INTERFACE) != gd.DEFAULT_NETWORK:
            missing.append("%s on network %s (has %s)" % (gd.CONTROL_INTERFACE, gd.DEFAULT_NETWORK, every.get(gd.CONTROL_INTERFACE)))
        missing += ["GPU NIC interface %s" % i for i in wanted if i not in attached]
        missing += ["%s for GPU NIC network %s (has %s)" % (i, networks[i], attached[i]) for i in wanted
                    if i in attached and networks.get(i) and attached[i] != networks[i]]
        return missing
    return _pod_checks(view, judge, annotated=True, unjudged="no GPU pod carries the %s annotation, so no interface can be "
                       "judged (gpudirect.pod_annotations reports the pods that lack it)" % gd.INTERFACES_ANNOTATION)


@described("gpudirect.pod_volumes")
def pod_volumes(view):
    def judge(pod, _node, fabric):
        have = set(v.get("name") for v in pod["spec"].get("volumes") or [])
        missing = ["volume " + v["name"] for v in gd.WORKLOAD_VOLUMES[fabric] if v["name"] not in have]
        for container in _gpu_containers(pod):
            mounts = set((m.get("name"), m.get("mountPath")) for m in container.get("volumeMounts") or [])
            missing += ["container %s mount %s at %s" % (container.get("name"), name, path)
                        for name, path, _read_only in gd.GPU_CONTAINER_MOUNTS[fabric] if (name, path) not in mounts]
        return missing
    return _pod_checks(view, judge)


def _gpu_containers(pod):
    return [c for c in pod["spec"].get("containers") or []
            if pod_gpu_requests(dict(spec=dict(containers=[c]), metadata=pod.get("metadata")))]


_ENV_SCRIPTS = {"tcpxo": gd.TCPXO_ENV_SCRIPT, "rdma": gd.GIB_ENV_SCRIPT}   # by the profile's fabric (rdma-a4x: rdma)


@described("gpudirect.pod_nccl_env")
def pod_nccl_env(view):
    def judge(pod, node, fabric):
        version = _kubelet_version(node)
        # below the profile's floor (gke.gpudirect.version_gate fails for it) the catalog picks no variant of
        # that version: judge the environment against the default one rather than give up on the pods
        if version and gd.version_floor_error(fabric, version):
            version = None
        expected, _warnings = nccl.nccl_environment(fabric, gke_version=version,
                                                    machine_type=node_labels(node).get(gd.MACHINE_TYPE_LABEL))
        missing = []
        for container in _gpu_containers(pod):
            if container.get("sources_nccl_env_script") and gd.PROFILES[fabric]["fabric"] in _ENV_SCRIPTS:
                continue
            names = set(e.get("name") for e in container.get("env") or [])
            lacking = sorted(k for k in expected if k.startswith("NCCL_") and k not in names)
            if lacking:
                missing.append("container %s: %s" % (container.get("name"), " ".join(lacking)))
        return missing
    return _pod_checks(view, judge)


@described("gpudirect.rdma_conflicts")
def rdma_conflicts(view):
    daemons = sorted(d["name"] for d in gd.DAEMONS.values())
    prefix = gd.NRI_INJECTOR["annotation_prefix"]
    evidence, problems = [], []
    for pod, node, profile, _requests in _gpu_pods(view, _rdma_nodes(view), "GPUDirect-RDMA"):
        found = []
        for container in (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or []):
            if container.get("name") in daemons:
                found.append("container %s: the TCPX/TCPXO RxDM daemon; %s pods run none" % (container.get("name"), profile))
        found += ["annotation %s: the NRI device injection of an RxDM daemon" % k
                  for k in sorted((pod.get("metadata") or {}).get("annotations") or {}) if k.startswith(prefix)]
        for container in _gpu_containers(pod):
            env = dict((e.get("name"), e.get("value")) for e in container.get("env") or [] if (e.get("name") or "").startswith("NCCL_"))
            found += workload.rdma_conflicts(profile, {"container %s nccl_overrides" % container.get("name"): env})
        evidence.append("pod %s (%s): %s" % (_pod_name(pod), profile, "; ".join(found) or "none"))
        problems += ["pod %s on node %s: %s" % (_pod_name(pod), node_name(node), f) for f in found]
    return evidence, problems


@described("gke.gpudirect.boot_disk")
def boot_disk(view):
    _gpudirect_nodes(view)
    pools = [p for p in view.need("gke.node_pools") if (gd.MACHINES.get(p.get("machine_type")) or {}).get("boot_disk_types")]
    if not pools:
        raise Skip("no node pool of a machine type restricted to some boot disk types (%s)" % ", ".join(
            sorted(m for m, facts in gd.MACHINES.items() if facts["boot_disk_types"])))
    evidence, problems = [], []
    for pool in pools:
        allowed = gd.MACHINES[pool["machine_type"]]["boot_disk_types"]
        if not pool.get("disk_type"):
            raise Missing("gke.node_pools[%s].disk_type" % pool.get("name"))
        evidence.append("pool %s (%s): %s" % (pool.get("name"), pool["machine_type"], pool["disk_type"]))
        if pool["disk_type"] not in allowed:
            problems.append("pool %s (%s) boots from %s; the machine takes %s" % (
                pool.get("name"), pool["machine_type"], pool["disk_type"], ", ".join(allowed)))
    return evidence, problems


@described("gpudirect.fast_socket")
def fast_socket(view):
    evidence, problems = [], []
    for node, _fabric in _gpudirect_nodes(view):
        value = node_labels(node).get(FAST_SOCKET_LABEL)
        evidence.append("node %s: %s=%s" % (node_name(node), FAST_SOCKET_LABEL, value))
        if str(value).lower() == "true":
            problems.append("node %s has NCCL Fast Socket enabled" % node_name(node))
    return evidence, problems


@described("gke.gpu_vpc")
def gpu_vpc(view):
    nodes = _gpudirect_nodes(view)
    nics = view.need("gke.nics")
    if not nics:
        return [], ["no GPU NIC network was found for the GPUDirect nodes"]
    # the fabric read is of one kind: RDMA when a NIC is an RDMA device; its MTU is that of the nodes' profiles of that kind
    rdma_fabric = any(_rdma_device(n) for n in nics)
    mtus = sorted(set(gd.PROFILES[f]["mtu"] for _n, f in nodes if _is_rdma(f) == rdma_fabric))
    wanted_mtu = mtus[0] if len(mtus) == 1 else gd.DEFAULT_MTU
    evidence, problems = [], []
    for nic in nics:
        network, subnet, firewall = nic.get("network"), nic.get("subnetwork"), nic.get("firewall")
        label = "GPU NIC %s" % nic.get("index")
        if not network:
            problems.append("%s: network missing" % label)
            continue
        mtu = network.get("mtu")
        evidence.append("%s: network %s mtu %s" % (label, network.get("name"), mtu))
        if mtu != wanted_mtu:
            problems.append("%s: network %s has MTU %s, GPUDirect needs %d" % (label, network.get("name"), mtu, wanted_mtu))
        if not subnet:
            problems.append("%s: subnetwork missing" % label)
        if not firewall and not _rdma_device(nic):
            problems.append("%s: firewall rule missing" % label)
    return evidence, problems
