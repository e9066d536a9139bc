# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Readiness reports of the GPU Operator and Network Operator: the ClusterPolicy / NicClusterPolicy state,
the pods that are not ready and why, node labels against what the hosts' facts expect, and the driver pods
with their sidecars (filter ``operator_readiness``).
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import require


# --------------------------------------------------------------------------------------------
# Readiness reports
# --------------------------------------------------------------------------------------------

def _last_termination(container):
    """`` (last terminated: Error, exit code 1)`` of a restarting container (its reason and exit code or signal: what
    crashed it, where its waiting reason says only CrashLoopBackOff); "" when it never terminated."""
    last = (container.get("lastState") or {}).get("terminated")
    if not last:
        return ""
    code = "signal %s" % last["signal"] if last.get("signal") else "exit code %s" % last.get("exitCode")
    return " (last terminated: %s, %s)" % (last.get("reason") or "no reason", code)


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
                waiting.append("%s %s%s" % (container.get("name"), detail.get("reason") or key, _last_termination(container)))
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
    require(bool(pods), "no driver pod found")
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
