# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""GPU sharing on Kubernetes: the ACK MPS workload rules, the GPUDirect refusal and the GPU allocation report.

Read by the ``mps`` role through the filters in plugins/filter/mps.py.

Sources (seed 004 - the ACK MPS guide; shared research notes nvidia-stack.md sections 3 and 6.2):
- ACK: node label ``ack.node.gpu.schedule=mps``, daemon pods ``app.aliyun.com/name=mps-control-daemon``,
  GPU memory requested as ``aliyun.com/gpu-mem`` (GiB), ``hostIPC: true`` required, no
  ``NVIDIA_VISIBLE_DEVICES`` in pod env, no ``privileged: true`` on GPU workloads, and the
  ``kubectl inspect cgpu`` table;
- device plugin / GFD: ``nvidia.com/<resource>.replicas`` and ``.sharing-strategy`` labels,
  ``.shared`` resource names, ``nvidia.com/gpu.memory`` (MiB); GKE sharing node labels;
- MIG device memory: the MIG catalog (module_utils/_catalog/mig.py).
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog

# --------------------------------------------------------------------------------------------
# Kubernetes documents
# --------------------------------------------------------------------------------------------

GPU_RESOURCE = mig_catalog.GPU_RESOURCE
ACK_MPS_LABEL = "ack.node.gpu.schedule"
ACK_MPS_VALUE = "mps"
ACK_DAEMON_LABEL = "app.aliyun.com/name"
ACK_DAEMON_VALUE = "mps-control-daemon"
ACK_GPU_MEM = "aliyun.com/gpu-mem"
ACK_GPU_COUNT = "aliyun.com/gpu-count"
GFD_MEMORY_LABEL = "nvidia.com/gpu.memory"          # MiB per GPU
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
GKE_SHARING_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"
GKE_CLIENTS_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"
FINISHED_PHASES = ("Succeeded", "Failed")
# values of NVIDIA_VISIBLE_DEVICES that hide GPUs rather than pick them
_HIDING_VALUES = ("", "void", "none")


def _meta(doc):
    return (doc or {}).get("metadata") or {}


def _labels(doc):
    return _meta(doc).get("labels") or {}


def _whole(value, what):
    text = str(value).strip()
    if re.match(r"^[0-9]+\Z", text):
        return int(text)
    raise ValueError("%s: %r is not a whole number" % (what, value))


def is_gpu_name(name):
    return (name == GPU_RESOURCE or name.startswith(GPU_RESOURCE + ".") or name.startswith(mig_catalog.MIG_RESOURCE_PREFIX)
            or name in (ACK_GPU_MEM, ACK_GPU_COUNT))


def _container_requests(container, where):
    """GPU resources of a container: limits, or requests (extended resources need them equal)."""
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    found = {}
    for name in set(limits) | set(requests):
        if not is_gpu_name(name):
            continue
        value = limits.get(name, requests.get(name))
        found[name] = _whole(value, "%s container %s %s" % (where, container.get("name"), name))
    return found


def pod_gpu_requests(pod):
    """The GPU resources a pod holds: max(any init container, sum of the containers), per resource."""
    where = "pod %s/%s" % (_meta(pod).get("namespace", "default"), _meta(pod).get("name"))
    spec = pod.get("spec") or {}
    total = {}
    for container in spec.get("containers") or []:
        for name, value in _container_requests(container, where).items():
            total[name] = total.get(name, 0) + value
    for container in spec.get("initContainers") or []:
        for name, value in _container_requests(container, where).items():
            total[name] = max(total.get(name, 0), value)
    return total


def _active(pod):
    return (pod.get("status") or {}).get("phase") not in FINISHED_PHASES


def gpudirect_conflicts(nodes):
    """Nodes whose machine type carries a GPUDirect fabric (TCPX, TCPXO, ...), which refuses MPS.

    The rule and its wording are the GPUDirect catalog's (gke_gpudirect.sharing_refusal). Returns
    a list of text, one per such node.
    """
    problems = []
    for node in sorted(nodes or [], key=lambda n: _meta(n).get("name") or ""):
        fabric = gke_gpudirect.node_fabric(_labels(node))
        if fabric:
            problems.append("node %s (%s): %s" % (_meta(node).get("name"),
                                                  _labels(node).get(gke_gpudirect.MACHINE_TYPE_LABEL),
                                                  gke_gpudirect.sharing_refusal(fabric)))
    return problems


# --------------------------------------------------------------------------------------------
# ACK MPS workload rules (seed 004)
# --------------------------------------------------------------------------------------------

# rule -> what the guide says (one table: the findings and the role README read it)
ACK_RULES = {
    "host-ipc-missing": "pods that use GPUs on an MPS node need hostIPC: true, or they fail to start",
    "visible-devices-env": "NVIDIA_VISIBLE_DEVICES must not be set in a pod's env; request GPUs as resources",
    "privileged-gpu": "GPU workloads must not run privileged: true (they see every GPU, outside the scheduler's books)",
    "unaccounted-gpu-request": "on MPS nodes GPUs are requested as aliyun.com/gpu-mem; other GPU requests bypass "
                               "the scheduler's GPU memory accounting",
}


def _finding(pod, rule, detail, container=None):
    meta = _meta(pod)
    where = "%s/%s" % (meta.get("namespace", "default"), meta.get("name"))
    if container:
        where += " container %s" % container
    return dict(namespace=meta.get("namespace", "default"), pod=meta.get("name"),
                node=(pod.get("spec") or {}).get("nodeName"), container=container, rule=rule,
                message="%s: %s (%s)" % (where, detail, ACK_RULES[rule]))


def _visible_devices(container):
    for item in container.get("env") or []:
        if item.get("name") == "NVIDIA_VISIBLE_DEVICES":
            if "valueFrom" in item:
                return "<valueFrom>"
            if str(item.get("value", "")).strip().lower() not in _HIDING_VALUES:
                return str(item.get("value"))
    return None


def _privileged(container):
    return bool((container.get("securityContext") or {}).get("privileged"))


def _exempt(pod, exempt_namespaces, exempt_labels):
    if _meta(pod).get("namespace", "default") in (exempt_namespaces or ()):
        return True
    labels = _labels(pod)
    return any(labels.get(k) == str(v) for k, v in (exempt_labels or {}).items())


def ack_workload_pods(pods, nodes, exempt_namespaces=("kube-system",), exempt_labels=None):
    """The pods the ACK MPS rules judge, in order: the active pods on MPS nodes and those anywhere that request GPU
    resources or pick GPUs by NVIDIA_VISIBLE_DEVICES; not finished pods, the MPS control daemon's own pods nor exempt
    namespaces/labels. Returns a list of dict(pod, on_mps, requests, picked)."""
    exempt = dict(exempt_labels or {})
    exempt.setdefault(ACK_DAEMON_LABEL, ACK_DAEMON_VALUE)
    mps_nodes = {_meta(n).get("name") for n in nodes or [] if _labels(n).get(ACK_MPS_LABEL) == ACK_MPS_VALUE}
    judged = []
    for pod in sorted(pods or [], key=lambda p: (_meta(p).get("namespace", ""), _meta(p).get("name") or "")):
        if not _active(pod) or _exempt(pod, exempt_namespaces, exempt):
            continue
        spec = pod.get("spec") or {}
        requests = {k: v for k, v in pod_gpu_requests(pod).items() if v}
        on_mps = spec.get("nodeName") in mps_nodes
        containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        picked = [(c.get("name"), _visible_devices(c)) for c in containers if _visible_devices(c) is not None]
        if on_mps or requests or picked:
            judged.append(dict(pod=pod, on_mps=on_mps, requests=requests, picked=picked))
    return judged


def ack_workload_findings(pods, nodes, exempt_namespaces=("kube-system",), exempt_labels=None):
    """What the ACK MPS guide forbids or requires, found in running pods.

    ``nodes``: Node documents; those labelled ``ack.node.gpu.schedule=mps`` are the MPS nodes.
    ``pods``: Pod documents, judged as ``ack_workload_pods`` picks them.
    Returns a list of findings: dict(namespace, pod, node, container, rule, message).
    """
    findings = []
    for one in ack_workload_pods(pods, nodes, exempt_namespaces, exempt_labels):
        pod, on_mps, requests, picked = one["pod"], one["on_mps"], one["requests"], one["picked"]
        spec = pod.get("spec") or {}
        containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        uses_gpu = bool(requests or picked)
        for name, value in picked:
            findings.append(_finding(pod, "visible-devices-env", "sets NVIDIA_VISIBLE_DEVICES=%s" % value, name))
        if uses_gpu:
            for container in containers:
                if _privileged(container):
                    findings.append(_finding(pod, "privileged-gpu", "runs privileged", container.get("name")))
        if on_mps and uses_gpu and not spec.get("hostIPC"):
            findings.append(_finding(pod, "host-ipc-missing", "runs on MPS node %s without hostIPC: true"
                                     % spec.get("nodeName")))
        bypass = sorted(k for k in requests if k != ACK_GPU_MEM)
        if on_mps and bypass:
            findings.append(_finding(pod, "unaccounted-gpu-request", "requests %s on MPS node %s"
                                     % (", ".join("%s: %s" % (k, requests[k]) for k in bypass), spec.get("nodeName"))))
    return findings


def ack_daemon_coverage(nodes, daemon_pods):
    """Which MPS nodes have no running, ready MPS control daemon pod.

    Returns dict(ok, nodes=[names of MPS nodes], missing=[names], problems=[text]).
    """
    mps_nodes = sorted(_meta(n).get("name") for n in nodes or []
                       if _labels(n).get(ACK_MPS_LABEL) == ACK_MPS_VALUE)
    running = set()
    for pod in daemon_pods or []:
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if status.get("phase") == "Running" and ready:
            running.add((pod.get("spec") or {}).get("nodeName"))
    missing = [n for n in mps_nodes if n not in running]
    problems = ["node %s: no running and ready pod labelled %s=%s" % (n, ACK_DAEMON_LABEL, ACK_DAEMON_VALUE)
                for n in missing]
    if not mps_nodes:
        problems.append("no node is labelled %s=%s" % (ACK_MPS_LABEL, ACK_MPS_VALUE))
    return dict(ok=not problems, nodes=mps_nodes, missing=missing, problems=problems)


def ack_label_patches(targets, nodes, schedule, every=False):
    """Node patches that set ``ack.node.gpu.schedule`` to ``schedule`` on the ``targets`` (node names).

    Only the nodes (read as ``nodes``) whose label differs get a patch: a patch is a write even when it
    changes nothing, so a re-run sends none. ``every`` (render mode: nothing was read) patches them all.
    """
    current = dict((_meta(n).get("name"), _labels(n).get(ACK_MPS_LABEL)) for n in nodes or [])
    return [dict(apiVersion="v1", kind="Node", metadata=dict(name=name, labels={ACK_MPS_LABEL: schedule}))
            for name in targets if every or current.get(name) != schedule]


# --------------------------------------------------------------------------------------------
# GPU allocation report (what ``kubectl inspect cgpu`` shows, for any cluster)
# --------------------------------------------------------------------------------------------

MIB_PER_GIB = 1024.0


def _address(node):
    for item in (node.get("status") or {}).get("addresses") or []:
        if item.get("type") == "InternalIP":
            return item.get("address")
    return None


def _sharing(labels, resource):
    """(strategy, replicas) of a GPU or MIG resource from GFD labels (GKE's for nvidia.com/gpu); ('none', 1) unshared."""
    base = resource[:-len(".shared")] if resource.endswith(".shared") else resource
    replicas = labels.get(base + ".replicas")
    strategy = labels.get(base + ".sharing-strategy")
    if base == GPU_RESOURCE:
        replicas = replicas or labels.get(GKE_CLIENTS_LABEL)
        strategy = strategy or labels.get(GKE_SHARING_LABEL)
    strategy = {"time-sharing": "time-slicing", "": "none"}.get(str(strategy or "").lower(), str(strategy).lower())
    replicas = int(replicas) if str(replicas or "").isdigit() else 1
    if replicas > 1:
        return (strategy if strategy != "none" else "time-slicing"), replicas
    return "none", 1


def _gpu_memory_gib(labels):
    value = labels.get(GFD_MEMORY_LABEL)
    if value in (None, ""):
        return None
    try:
        return int(str(value)) / MIB_PER_GIB
    except ValueError:
        return None


def _mig_memory_gib(labels, resource):
    """Memory of a MIG device from the catalog (by the node's GPU model), else from the profile name."""
    _ci, profile_name = mig_catalog.parse_profile(resource)
    model = mig_catalog.find_gpu_model(labels.get(GFD_PRODUCT_LABEL) or "")
    if model:
        try:
            return float(mig_catalog.profile(model, profile_name)["memory_gb"])
        except ValueError:
            pass
    return float(re.search(r"\.(\d+)gb", profile_name).group(1))


def _resource_rows(node, allocated):
    labels = _labels(node)
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    rows = []
    gpu_memory = _gpu_memory_gib(labels)
    for name in sorted(allocatable):
        if not is_gpu_name(name) or name == ACK_GPU_COUNT:
            continue
        total = _whole(allocatable[name], "node %s allocatable %s" % (_meta(node).get("name"), name))
        if not total and not allocated.get(name):
            continue
        used = allocated.get(name, 0)
        row = dict(resource=name, total=total, allocated=used, kind="whole", sharing="none", replicas=1,
                   unit_memory_gib=None)
        if name == ACK_GPU_MEM:
            row.update(kind="gpu-mem", sharing="ack", unit_memory_gib=1.0)
        else:
            strategy, replicas = _sharing(labels, name)
            mig_device = name.startswith(mig_catalog.MIG_RESOURCE_PREFIX)
            unit = _mig_memory_gib(labels, name.replace(".shared", "")) if mig_device else gpu_memory
            if mig_device or labels.get("nvidia.com/mig.strategy") == "single":
                row["kind"] = "mig"
            elif replicas > 1:
                row["kind"] = "shared"
            row.update(sharing=strategy, replicas=replicas,
                       unit_memory_gib=None if unit is None else unit / replicas)
        for key in ("memory_total_gib", "memory_allocated_gib"):
            row[key] = None
        if row["unit_memory_gib"] is not None:
            row["memory_total_gib"] = round(row["unit_memory_gib"] * total, 2)
            row["memory_allocated_gib"] = round(row["unit_memory_gib"] * used, 2)
        rows.append(row)
    return rows


def _sum(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return round(sum(values), 2) if values else None


def allocation_report(nodes, pods):
    """Per node, allocated/total of every GPU resource and of GPU memory, from allocatable and pod requests.

    ``nodes``/``pods``: Node and Pod documents (kubernetes.core.k8s_info ``resources``). Pods that
    have finished, or are not bound to a node, hold nothing. Returns dict(nodes=[dict(name,
    address, resources=[dict(resource, kind: whole|shared|mig|gpu-mem, sharing, replicas, total,
    allocated, unit_memory_gib, memory_total_gib, memory_allocated_gib)], memory_total_gib,
    memory_allocated_gib, pods=[namespace/name])], memory_total_gib, memory_allocated_gib,
    memory_percent, overcommitted=[text]).
    """
    if not isinstance(nodes, list) or not isinstance(pods or [], list):
        raise ValueError("allocation_report takes lists of Node and Pod documents (k8s_info resources)")
    held = {}
    holders = {}
    for pod in pods or []:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or not _active(pod):
            continue
        requests = {k: v for k, v in pod_gpu_requests(pod).items() if v}
        if not requests:
            continue
        bucket = held.setdefault(node_name, {})
        for name, value in requests.items():
            bucket[name] = bucket.get(name, 0) + value
        holders.setdefault(node_name, []).append("%s/%s" % (_meta(pod).get("namespace", "default"), _meta(pod).get("name")))
    report = dict(nodes=[], overcommitted=[])
    for node in sorted(nodes, key=lambda n: _meta(n).get("name") or ""):
        name = _meta(node).get("name")
        rows = _resource_rows(node, held.get(name, {}))
        if not rows:
            continue
        for row in rows:
            if row["allocated"] > row["total"]:
                report["overcommitted"].append("node %s: %s allocated %d of %d" % (
                    name, row["resource"], row["allocated"], row["total"]))
        report["nodes"].append(dict(name=name, address=_address(node), resources=rows,
                                    memory_total_gib=_sum(rows, "memory_total_gib"),
                                    memory_allocated_gib=_sum(rows, "memory_allocated_gib"),
                                    pods=sorted(holders.get(name, []))))
    total = _sum(report["nodes"], "memory_total_gib")
    allocated = _sum(report["nodes"], "memory_allocated_gib")
    report.update(memory_total_gib=total, memory_allocated_gib=allocated,
                  memory_percent=round(100.0 * allocated / total) if total else None)
    return report


def _number(value):
    if value is None:
        return "-"
    return ("%.2f" % value).rstrip("0").rstrip(".")


def allocation_table(report):
    """The report as text, one row per node and GPU resource, like ``kubectl inspect cgpu``."""
    header = ("NAME", "IPADDRESS", "RESOURCE", "SHARING", "ALLOCATED/TOTAL", "GPU MEMORY(GiB)")
    rows = [header]
    for node in report.get("nodes") or []:
        for row in node["resources"]:
            sharing = row["sharing"] if row["replicas"] == 1 else "%s x%d" % (row["sharing"], row["replicas"])
            memory = "%s/%s" % (_number(row["memory_allocated_gib"]), _number(row["memory_total_gib"]))
            rows.append((node["name"], node["address"] or "-", row["resource"], sharing,
                         "%d/%d" % (row["allocated"], row["total"]), memory))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    lines = ["  ".join(str(value).ljust(widths[i]) for i, value in enumerate(r)).rstrip() for r in rows]
    lines.append("-" * max(len(line) for line in lines))
    percent = report.get("memory_percent")
    lines.append("Allocated/Total GPU Memory In Cluster: %s/%s (%s)" % (
        _number(report.get("memory_allocated_gib")), _number(report.get("memory_total_gib")),
        "-" if percent is None else "%d%%" % percent))
    for text in report.get("overcommitted") or []:
        lines.append("Overcommitted: " + text)
    return "\n".join(lines) + "\n"
