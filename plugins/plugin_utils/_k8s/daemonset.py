# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""On which nodes a DaemonSet runs a Ready pod of its current template, and why not elsewhere.

Used by action ``k8s_daemonset_wait``. Only names, images,
phases, conditions and container states are read.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs as _inputs


def _name(obj):
    return ((obj or {}).get("metadata") or {}).get("name")


def _condition(obj, kind):
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None


def _images(pod_spec):
    """Sorted (container name, image) pairs of a pod spec, init containers included."""
    pairs = []
    for group in ("initContainers", "containers"):
        for container in (pod_spec or {}).get(group) or []:
            pairs.append((container.get("name"), container.get("image")))
    return sorted(pairs)


def _owned_by(pod, daemonset):
    owners = (pod.get("metadata") or {}).get("ownerReferences")
    if not owners:
        return True  # no owner recorded: the label selector decides
    uid = (daemonset.get("metadata") or {}).get("uid")
    for owner in owners:
        if owner.get("kind") == "DaemonSet" and owner.get("name") == _name(daemonset):
            if not uid or not owner.get("uid") or owner.get("uid") == uid:
                return True
    return False


def _waiting(pod):
    """Why a pod's containers are not running: 'init container X: Reason (message)' strings."""
    reasons = []
    status = pod.get("status") or {}
    for group, label in (("initContainerStatuses", "init container"), ("containerStatuses", "container")):
        for item in status.get(group) or []:
            state = item.get("state") or {}
            if "waiting" in state:
                waiting = state["waiting"] or {}
                text = waiting.get("reason") or "Waiting"
                if waiting.get("message"):
                    text += " (%s)" % waiting["message"]
                reasons.append("%s %s: %s" % (label, item.get("name"), text))
            elif "terminated" in state and group == "containerStatuses":
                terminated = state["terminated"] or {}
                reasons.append("%s %s: terminated %s (exit code %s)" % (
                    label, item.get("name"), terminated.get("reason") or "", terminated.get("exitCode")))
            elif "terminated" in state and (state["terminated"] or {}).get("exitCode", 0) != 0:
                terminated = state["terminated"] or {}
                reasons.append("%s %s: failed %s (exit code %s)" % (
                    label, item.get("name"), terminated.get("reason") or "", terminated.get("exitCode")))
    return reasons


def _pod_reason(pod, wanted_images):
    """None when the pod is ready and runs the current template, else why not."""
    name = _name(pod)
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "pod %s is terminating" % name
    if wanted_images is not None and _images(pod.get("spec")) != wanted_images:
        current = ", ".join("%s=%s" % pair for pair in _images(pod.get("spec")))
        return "pod %s runs an outdated template (%s)" % (name, current)
    ready = _condition(pod, "Ready")
    if ready is not None and str(ready.get("status")) == "True":
        return None
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    details = _waiting(pod)
    scheduled = _condition(pod, "PodScheduled")
    if not details and scheduled is not None and str(scheduled.get("status")) == "False":
        details.append("unschedulable: %s" % (scheduled.get("message") or scheduled.get("reason") or "?"))
    text = "pod %s is %s, not ready" % (name, phase)
    if details:
        text += ": " + "; ".join(details)
    return text


def _node_problem(node):
    """Why a node cannot run pods (NotReady, cordoned), or None."""
    problems = []
    ready = _condition(node, "Ready")
    if ready is None or str(ready.get("status")) != "True":
        problems.append("node NotReady")
    if (node.get("spec") or {}).get("unschedulable"):
        problems.append("node cordoned")
    return ", ".join(problems) or None


def node_report(pods, nodes, daemonset):
    """One entry per node of ``nodes`` (``node``, ``ready``, ``pod``, ``reason``): whether a pod of ``daemonset`` that
    runs the DaemonSet's current pod template is Ready on it, and if not, why. Bad input raises ValueError.

    ``pods``: the pods matching the DaemonSet's selector (kubernetes.core.k8s_info ``resources``);
    ``nodes``: the nodes it must run on; ``daemonset``: the DaemonSet object as read from the cluster.
    """
    if not isinstance(pods, list) or not isinstance(nodes, list):
        raise ValueError("pods and nodes must be lists of Kubernetes objects")
    _inputs.objects("pods", pods)
    _inputs.objects("nodes", nodes)
    if not isinstance(daemonset, dict) or daemonset.get("kind", "DaemonSet") != "DaemonSet":
        raise ValueError("the third argument must be a DaemonSet object")
    template = ((daemonset.get("spec") or {}).get("template") or {}).get("spec")
    wanted = _images(template) if template else None
    by_node = {}
    for pod in pods:
        if not _owned_by(pod, daemonset):
            continue
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            by_node.setdefault(node_name, []).append(pod)
    report = []
    for node in sorted(nodes, key=lambda n: _name(n) or ""):
        node_name = _name(node)
        candidates = sorted(by_node.get(node_name, []), key=lambda p: _name(p) or "")
        entry = dict(node=node_name, ready=False, pod=None, reason=None)
        reasons = []
        for pod in candidates:
            reason = _pod_reason(pod, wanted)
            if reason is None:
                entry.update(ready=True, pod=_name(pod))
                break
            reasons.append(reason)
        if not entry["ready"]:
            if not candidates:
                reasons.append("no pod of DaemonSet %s on the node" % _name(daemonset))
            else:
                entry["pod"] = _name(candidates[0])
            problem = _node_problem(node)
            if problem:
                reasons.append(problem)
            entry["reason"] = "; ".join(reasons)
        report.append(entry)
    return report
