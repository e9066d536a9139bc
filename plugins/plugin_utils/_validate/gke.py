# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GKE GPUDirect (TCPX, TCPXO, RDMA) validation checks: platform gates, the installer / NRI injector /
device plugin deployment, and what makes GPUDirect workloads fail or fall back to slow paths.

Every fact (machines, GPUs per node, version gates, releases, DaemonSet names, annotations, volumes, NCCL
environment, MTU) is read from ``_catalog/gke_gpudirect.py`` and ``_catalog/nccl.py``; nothing is copied.
"""

from __future__ import annotations

import json

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gd
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import GPU_RESOURCE, MIG_CONFIG_LABEL
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._gpu_sharing import pod_gpu_requests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip, register
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import node_labels, node_name

# GKE sets this node label on pools with NCCL Fast Socket enabled (GKE guide "Improve workload efficiency using
# NCCL Fast Socket", https://cloud.google.com/kubernetes-engine/docs/how-to/nccl-fast-socket).
FAST_SOCKET_LABEL = "cloud.google.com/gke-nccl-fastsocket"
ADVANCED_DATAPATH = "ADVANCED_DATAPATH"
# the MIG manager's "no MIG" config (also a GPU Operator default)
_MIG_OFF = ("all-disabled", "")
_FINISHED = ("Succeeded", "Failed")


def _gpudirect_nodes(view):
    """[(node, fabric)] of the nodes whose machine type runs GPUDirect; Skip when there is none."""
    found = [(n, gd.node_fabric(node_labels(n))) for n in view.kubernetes("nodes")]
    found = [(n, f) for n, f in found if f]
    if not found:
        raise Skip("no node of a GPUDirect machine type (%s)" % ", ".join(sorted(gd.MACHINES)))
    return sorted(found, key=lambda item: node_name(item[0]) or "")


def _kubelet_version(node):
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
    if not version:
        raise Missing("kubernetes.nodes[%s].status.nodeInfo.kubeletVersion" % node_name(node))
    return version.lstrip("v")


def _fabrics(nodes):
    return sorted(set(f for _n, f in nodes))


def _gpu_pods(view, nodes):
    """[(pod, node, fabric, requests)] of the active pods that request GPUs on GPUDirect nodes."""
    by_name = dict((node_name(n), (n, f)) for n, f in nodes)
    found = []
    for pod in view.pods_on(by_name):
        if (pod.get("status") or {}).get("phase") in _FINISHED:
            continue
        requests = pod_gpu_requests(pod)
        if requests:
            node, fabric = by_name[pod["spec"]["nodeName"]]
            found.append((pod, node, fabric, requests))
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

@register("gke.gpudirect.version_gate", "preflight", "GKE version meets the GPUDirect profile's minimum patch",
          reads=["kubernetes.nodes"],
          cause="The GKE version of a GPUDirect node is below the minimum patch of its profile, so the NCCL plugin "
                "or the RxDM daemon does not work there.",
          fix=dict(role="gke_gpu_cluster", variable="gke_gpu_cluster_version",
                   manual="upgrade the control plane and the GPUDirect node pool to a patch at or above the minimum"))
def version_gate(view):
    evidence, problems = [], []
    for node, fabric in _gpudirect_nodes(view):
        version = _kubelet_version(node)
        error = gd.version_gate_error(fabric, version)
        evidence.append("node %s: %s, GKE %s" % (node_name(node), fabric, version))
        if error:
            problems.append("node %s: %s" % (node_name(node), error))
    return evidence, problems


def _gke_cluster(view):
    _gpudirect_nodes(view)
    return view.need("gke.cluster")


@register("gke.dataplane_v2", "preflight", "The cluster runs Dataplane V2", reads=["kubernetes.nodes", "gke.cluster"],
          cause="The cluster does not run Dataplane V2 (ADVANCED_DATAPATH), which GKE multi-networking and so the GPU NICs need.",
          fix=dict(role="gke_gpu_cluster", variable="gke_gpu_cluster_recreate",
                   manual="the datapath is fixed at creation: recreate the cluster with Dataplane V2"))
def dataplane_v2(view):
    cluster = _gke_cluster(view)
    datapath = cluster.get("datapath_provider")
    problems = [] if datapath == ADVANCED_DATAPATH else ["datapath provider is %s" % (datapath or "the legacy default")]
    return ["datapath provider %s" % datapath], problems


@register("gke.multi_networking", "preflight", "Multi-networking is on", reads=["kubernetes.nodes", "gke.cluster"],
          cause="GKE multi-networking is off, so pods cannot attach the GPU NICs and NCCL falls back to the primary NIC.",
          fix=dict(role="gke_gpu_cluster", variable="gke_gpu_cluster_recreate",
                   manual="multi-networking is set at creation: recreate the cluster with it on"))
def multi_networking(view):
    cluster = _gke_cluster(view)
    on = cluster.get("multi_networking") is True
    return ["multi_networking %s" % cluster.get("multi_networking")], [] if on else ["multi-networking is off"]


@register("gke.standard_cluster", "preflight", "The cluster is Standard, not Autopilot", reads=["kubernetes.nodes", "gke.cluster"],
          cause="The cluster is an Autopilot cluster, which cannot run GPUDirect node pools with multi-networking.",
          fix=dict(manual="create a GKE Standard cluster (role gpu_ops.cluster.gke_gpu_cluster creates one) and move the workloads"))
def standard_cluster(view):
    cluster = _gke_cluster(view)
    if "autopilot" not in cluster or cluster["autopilot"] is None:
        raise Missing("gke.cluster.autopilot")
    return ["autopilot %s" % cluster["autopilot"]], ["the cluster is Autopilot"] if cluster["autopilot"] else []


@register("gke.cos_image", "preflight", "GPUDirect node pools run Container-Optimized OS",
          reads=["kubernetes.nodes", "gke.node_pools"],
          cause="A GPUDirect node pool does not run Container-Optimized OS (COS_CONTAINERD), the only image the "
                "GPUDirect installers and gVNIC support.",
          fix=dict(role="gke_gpu_cluster", variable="gke_gpu_cluster_node_pool",
                   manual="set image_type COS_CONTAINERD on the GPUDirect node pool"))
def cos_image(view):
    _gpudirect_nodes(view)
    pools = [p for p in view.need("gke.node_pools") if p.get("gpudirect")]
    if not pools:
        raise Missing("gke.node_pools", "GPUDirect nodes exist but no node pool of a GPUDirect machine type was read")
    evidence = ["pool %s: %s" % (p.get("name"), p.get("image_type")) for p in pools]
    problems = ["pool %s runs %s" % (p.get("name"), p.get("image_type")) for p in pools
                if not str(p.get("image_type") or "").upper().startswith("COS")]
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


def _ds_problems(ds, name, wanted_nodes):
    status = ds.get("status") or {}
    desired, ready = status.get("desiredNumberScheduled") or 0, status.get("numberReady") or 0
    problems = []
    if desired < wanted_nodes:
        problems.append("DaemonSet %s schedules %d pod(s) for %d node(s)" % (name, desired, wanted_nodes))
    if ready < desired:
        problems.append("DaemonSet %s: %d of %d pods ready" % (name, ready, desired))
    return problems


def _ds_images(ds):
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [c.get("image") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]


@register("gpudirect.installer", "deployment", "The NCCL plugin installer runs the release of the GKE version on every node",
          reads=["kubernetes.nodes", "kubernetes.daemonsets"],
          cause="The GPUDirect NCCL plugin installer DaemonSet is missing, not ready on every GPUDirect node, or runs "
                "another release than the GKE version needs, so workloads load no plugin or a mismatched one.",
          fix=dict(role="gpudirect_installer", variable="gpudirect_installer_gpudirect",
                   manual="set gpudirect_installer_gke_version to the nodes' version"))
def installer(view):
    nodes = _gpudirect_nodes(view)
    evidence, problems = [], []
    for fabric in _fabrics(nodes):
        entry = gd.INSTALLERS[fabric]
        members = [n for n, f in nodes if f == fabric]
        versions = sorted(set(_kubelet_version(n) for n in members))
        ds = _daemonset(view, entry["name"], entry["namespace"])
        if ds is None:
            problems.append("DaemonSet %s/%s not found" % (entry["namespace"], entry["name"]))
            continue
        problems.extend(_ds_problems(ds, entry["name"], len(members)))
        images = _ds_images(ds)
        evidence.append("%s: images %s, nodes at %s" % (entry["name"], ", ".join(i or "?" for i in images), ", ".join(versions)))
        for version in versions:
            wanted = gd.release(fabric, version)["installer"]
            if not any(_image_is(i, wanted) for i in images):
                running = ", ".join(i or "?" for i in images)
                problems.append("%s runs %s; GKE %s needs %s:%s" % (entry["name"], running, version, wanted["repository"], wanted["tag"]))
    return evidence, problems


@register("gpudirect.nri_injector", "deployment", "The NRI device injector runs on every TCPX/TCPXO node",
          reads=["kubernetes.nodes", "kubernetes.daemonsets"],
          cause="The NRI device injector is missing or not ready, so the RxDM daemon gets no GPU devices and GPUDirect "
                "pods fail to start.",
          fix=dict(role="nri_device_injector", variable="nri_device_injector_state"))
def nri_injector(view):
    nodes = [(n, f) for n, f in _gpudirect_nodes(view) if f in gd.DAEMONS]
    if not nodes:
        raise Skip("no TCPX or TCPXO node: the other GPUDirect fabrics run no RxDM daemon")
    entry = gd.NRI_INJECTOR
    ds = _daemonset(view, entry["name"], entry["namespace"])
    if ds is None:
        return [], ["DaemonSet %s/%s not found" % (entry["namespace"], entry["name"])]
    return ["%s: %s" % (entry["name"], ", ".join(i or "?" for i in _ds_images(ds)))], _ds_problems(ds, entry["name"], len(nodes))


@register("gpudirect.allocatable_gpus", "deployment", "Every GPUDirect node advertises all of its machine's GPUs",
          reads=["kubernetes.nodes"],
          cause="A GPUDirect node advertises fewer GPUs than its machine type has, so whole-node GPUDirect pods do not "
                "schedule there (a GPU, its driver or the device plugin failed).",
          fix=dict(manual="read the node's device-plugin log and dmesg (Xid errors); drain and recreate the node"))
def allocatable_gpus(view):
    evidence, problems = [], []
    for node, _fabric in _gpudirect_nodes(view):
        machine = gd.machine(node_labels(node)[gd.MACHINE_TYPE_LABEL])
        have = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
        evidence.append("node %s: %s=%s" % (node_name(node), GPU_RESOURCE, have))
        if str(have) != str(machine["gpus_per_node"]):
            problems.append("node %s advertises %s=%s, its machine has %d" % (node_name(node), GPU_RESOURCE, have,
                                                                              machine["gpus_per_node"]))
    return evidence, problems


@register("gpudirect.daemon_pair", "deployment", "Workload RxDM daemons match the installer release",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A GPUDirect pod's RxDM daemon is not the release paired with the NCCL plugin the installer puts on "
                "its node, so the plugin and the daemon disagree and NCCL fails or falls back.",
          fix=dict(manual="re-render the workload with the gpu_ops.cluster.gpudirect_workload filter "
                          "(it pins the daemon image of the release for the GKE version)"))
def daemon_pair(view):
    nodes = [(n, f) for n, f in _gpudirect_nodes(view) if f in gd.DAEMONS]
    if not nodes:
        raise Skip("no TCPX or TCPXO node: the other GPUDirect fabrics run no RxDM daemon")
    evidence, problems = [], []
    for pod, node, fabric, _requests in _gpu_pods(view, nodes):
        wanted = gd.release(fabric, _kubelet_version(node))["daemon"]
        name = gd.DAEMONS[fabric]["name"]
        for container in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers") or []):
            if container.get("name") == name:
                evidence.append("pod %s: %s" % (_pod_name(pod), container.get("image")))
                if not _image_is(container.get("image"), wanted):
                    problems.append("pod %s runs daemon %s; the node's release pairs %s:%s" % (
                        _pod_name(pod), container.get("image"), wanted["repository"], wanted["tag"]))
    return evidence, problems


# --------------------------------------------------------------------------------------------
# conformance
# --------------------------------------------------------------------------------------------

@register("gpudirect.no_gpu_sharing", "conformance", "GPUDirect nodes do not share GPUs (MIG, time-sharing, MPS)",
          reads=["kubernetes.nodes"],
          cause="A GPUDirect node pool shares its GPUs (multi-instance GPU, time-sharing or MPS), which GPUDirect refuses: "
                "NCCL cannot map GPU memory to the GPU NICs.",
          fix=dict(role="gke_gpu_cluster", variable="gke_gpu_cluster_node_pool",
                   manual="create the GPUDirect pool without gpu_partition_size or gpu_sharing and without a MIG config"))
def no_gpu_sharing(view):
    problems, evidence = [], []
    for node, fabric in _gpudirect_nodes(view):
        labels = node_labels(node)
        found = ["%s=%s" % (k, labels[k]) for k in gd.GPU_SHARING_LABELS if labels.get(k)]
        if labels.get(MIG_CONFIG_LABEL, "") not in _MIG_OFF:
            found.append("%s=%s" % (MIG_CONFIG_LABEL, labels[MIG_CONFIG_LABEL]))
        evidence.append("node %s: %s" % (node_name(node), ", ".join(found) or "no sharing label"))
        if found:
            problems.append("node %s (%s): %s" % (node_name(node), ", ".join(found), gd.sharing_refusal(fabric)))
    return evidence, problems


@register("gpudirect.pod_whole_node", "conformance", "GPUDirect pods request every GPU of their node",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A pod on a GPUDirect node requests fewer GPUs than the node has, so its GPUs and GPU NICs do not pair "
                "and the pod sees only part of the node's bandwidth.",
          fix=dict(manual="request all GPUs of the node (nvidia.com/gpu = the machine's GPU count) in one container per node"))
def pod_whole_node(view):
    evidence, problems = [], []
    for pod, node, _fabric, requests in _gpu_pods(view, _gpudirect_nodes(view)):
        want = gd.machine(node_labels(node)[gd.MACHINE_TYPE_LABEL])["gpus_per_node"]
        have = requests.get(GPU_RESOURCE, 0)
        evidence.append("pod %s: %s=%s" % (_pod_name(pod), GPU_RESOURCE, have))
        if have != want:
            problems.append("pod %s requests %s GPU(s) on node %s, which has %d" % (_pod_name(pod), have, node_name(node), want))
    return evidence, problems


def _pod_checks(view, judge):
    evidence, problems = [], []
    for pod, node, fabric, _requests in _gpu_pods(view, _gpudirect_nodes(view)):
        missing = judge(pod, node, fabric)
        evidence.append("pod %s (%s): %s" % (_pod_name(pod), fabric, "complete" if not missing else "missing " + ", ".join(missing)))
        if missing:
            problems.append("pod %s on node %s lacks %s" % (_pod_name(pod), node_name(node), ", ".join(missing)))
    return evidence, problems


@register("gpudirect.pod_annotations", "conformance", "GPUDirect pods carry the network and device annotations",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A GPU pod on a GPUDirect node lacks the networking.gke.io interfaces annotation or the NRI device "
                "annotation of its RxDM daemon, so it gets no GPU NICs and NCCL runs over the primary NIC.",
          fix=dict(manual="patch the workload with the gpu_ops.cluster.gpudirect_workload filter"))
def pod_annotations(view):
    def judge(pod, _node, fabric):
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        wanted = [gd.INTERFACES_ANNOTATION]
        device = gd.device_annotation(fabric)
        if device:
            wanted.append(device[0])
        return ["annotation " + k for k in wanted if not annotations.get(k)]
    return _pod_checks(view, judge)


@register("gpudirect.pod_interfaces", "conformance", "GPUDirect pods attach exactly the GPU NIC networks, on the fabric's interfaces",
          reads=["kubernetes.nodes", "kubernetes.pods", "gke.nics"],
          cause="A GPU pod on a GPUDirect node attaches another network in a GPU NIC's place (or too few GPU NIC networks), so "
                "NCCL's GPU NIC list names an interface that is not a GPU NIC and traffic leaves the fast path.",
          fix=dict(manual="attach the GPU NIC networks only, as the gpu_ops.cluster.gpudirect_workload filter writes them; "
                          "give other networks interfaces after the GPU NICs, or a pod of their own"))
def pod_interfaces(view):
    nics = view.need("gke.nics") if view.has("gke.nics") else None
    by_interface = dict((n.get("interface"), n.get("k8s_network")) for n in nics or [])

    def judge(pod, _node, fabric):
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(gd.INTERFACES_ANNOTATION)
        if not text:
            return []       # gpudirect.pod_annotations reports the missing annotation
        try:
            entries = json.loads(text)
            attached = dict((e["interfaceName"], e["network"]) for e in entries if e.get("interfaceName") != gd.CONTROL_INTERFACE)
        except (ValueError, TypeError, KeyError, AttributeError):
            return ["a readable %s annotation" % gd.INTERFACES_ANNOTATION]
        wanted = gd.interface_names(fabric)
        missing = ["GPU NIC interface %s" % i for i in wanted if i not in attached]
        missing += ["%s for GPU NIC network %s (has %s)" % (i, by_interface[i], attached[i]) for i in wanted
                    if i in attached and by_interface.get(i) and attached[i] != by_interface[i]]
        return missing
    return _pod_checks(view, judge)


@register("gpudirect.pod_volumes", "conformance", "GPUDirect pods mount the fabric's volumes",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A GPU pod on a GPUDirect node lacks a volume of its fabric (plugin libraries, sockets, aperture devices), "
                "so NCCL cannot load the plugin or reach the RxDM daemon.",
          fix=dict(manual="patch the workload with the gpu_ops.cluster.gpudirect_workload filter"))
def pod_volumes(view):
    def judge(pod, _node, fabric):
        have = set(v.get("name") for v in pod["spec"].get("volumes") or [])
        return ["volume " + v["name"] for v in gd.WORKLOAD_VOLUMES[fabric] if v["name"] not in have]
    return _pod_checks(view, judge)


_ENV_SCRIPTS = {"tcpxo": gd.TCPXO_ENV_SCRIPT, "rdma": gd.GIB_ENV_SCRIPT}


@register("gpudirect.pod_nccl_env", "conformance", "GPUDirect GPU containers set the fabric's NCCL environment",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A GPU container on a GPUDirect node lacks NCCL variables of its fabric's recommended environment, so "
                "NCCL does not use the GPUDirect plugin or runs it untuned.",
          fix=dict(manual="patch the workload with the gpu_ops.cluster.gpudirect_workload filter (or source the fabric's "
                          "NCCL environment script in the container)"))
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
        for container in pod["spec"].get("containers") or []:
            if not pod_gpu_requests(dict(spec=dict(containers=[container]), metadata=pod.get("metadata"))):
                continue
            if container.get("sources_nccl_env_script") and fabric in _ENV_SCRIPTS:
                continue
            names = set(e.get("name") for e in container.get("env") or [])
            lacking = sorted(k for k in expected if k.startswith("NCCL_") and k not in names)
            if lacking:
                missing.append("container %s: %s" % (container.get("name"), " ".join(lacking)))
        return missing
    return _pod_checks(view, judge)


@register("gpudirect.fast_socket", "conformance", "NCCL Fast Socket is off on GPUDirect nodes",
          reads=["kubernetes.nodes"],
          cause="NCCL Fast Socket is enabled on a GPUDirect node pool; its plugin competes with the GPUDirect plugin "
                "and NCCL may pick the socket transport.",
          fix=dict(manual="disable NCCL Fast Socket on the GPUDirect node pool (node pool setting fastSocket.enabled: false)"))
def fast_socket(view):
    evidence, problems = [], []
    for node, _fabric in _gpudirect_nodes(view):
        value = node_labels(node).get(FAST_SOCKET_LABEL)
        evidence.append("node %s: %s=%s" % (node_name(node), FAST_SOCKET_LABEL, value))
        if str(value).lower() == "true":
            problems.append("node %s has NCCL Fast Socket enabled" % node_name(node))
    return evidence, problems


@register("gke.gpu_vpc", "conformance", "GPU VPCs exist with the GPUDirect MTU and their firewall rules",
          reads=["kubernetes.nodes", "gke.nics"],
          cause="A GPU NIC's VPC, subnet or firewall rule is missing or its MTU is not the GPUDirect MTU, so GPU NIC "
                "traffic is dropped or fragmented.",
          fix=dict(role="gcp_gpu_vpcs", variable="gcp_gpu_vpcs_mtu"))
def gpu_vpc(view):
    _gpudirect_nodes(view)
    nics = view.need("gke.nics")
    if not nics:
        return [], ["no GPU NIC network was found for the GPUDirect nodes"]
    evidence, problems = [], []
    for nic in nics:
        network, subnet, firewall = nic.get("network"), nic.get("subnetwork"), nic.get("firewall")
        label = "GPU NIC %s" % nic.get("index")
        if not network:
            problems.append("%s: network missing" % label)
            continue
        mtu = network.get("mtu")
        evidence.append("%s: network %s mtu %s" % (label, network.get("name"), mtu))
        if mtu != gd.DEFAULT_MTU:
            problems.append("%s: network %s has MTU %s, GPUDirect needs %d" % (label, network.get("name"), mtu, gd.DEFAULT_MTU))
        if not subnet:
            problems.append("%s: subnetwork missing" % label)
        if not firewall:
            problems.append("%s: firewall rule missing" % label)
    return evidence, problems
