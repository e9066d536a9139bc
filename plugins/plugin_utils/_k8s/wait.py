# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Short messages about Kubernetes objects that were waited for and are not ready (role apply).

``not_ready(obj)`` says in one line why one object is not ready - a Pod's phase, its containers' waiting or
terminated reasons and its false conditions; a DaemonSet's, Deployment's or StatefulSet's ready counts;
any object's ``status.state`` and false conditions - and never more than ``LIMIT`` characters of it.
``apply_failure(results, step, timeout)`` turns the per-call results of the apply loop (``kubernetes.core.k8s``
with ``wait``) into one message whose first line names the object, instead of the module's object dump.
Only kinds, names, phases, reasons and condition messages are read: never data, spec or annotations.
"""

from __future__ import annotations

LIMIT = 200
MESSAGE_LIMIT = 900


def _cut(text, limit=LIMIT):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def object_name(obj):
    """Kind namespace/name of an object (a dict)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name") or "?"
    if meta.get("namespace"):
        name = "%s/%s" % (meta["namespace"], name)
    return "%s %s" % (obj.get("kind") or "object", name)


def _false_conditions(status):
    found = []
    for condition in status.get("conditions") or []:
        if not isinstance(condition, dict) or str(condition.get("status")) == "True":
            continue
        text = "%s=%s" % (condition.get("type"), condition.get("status"))
        detail = ": ".join(str(v) for v in (condition.get("reason"), condition.get("message")) if v)
        found.append(text + (" (%s)" % _cut(detail, 120) if detail else ""))
    return found


def _container_problems(status):
    found = []
    for group in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(group) or []:
            if not isinstance(container, dict) or container.get("ready"):
                continue
            state = container.get("state") or {}
            for key in ("waiting", "terminated"):
                if isinstance(state.get(key), dict):
                    detail = state[key]
                    reason = ": ".join(str(v) for v in (detail.get("reason"), detail.get("message")) if v)
                    if key == "terminated" and detail.get("exitCode") is not None:
                        reason += " (exit code %s)" % detail["exitCode"]
                    found.append("container %s %s%s" % (container.get("name"), key, (": " + _cut(reason, 120)) if reason else ""))
                    break
            else:
                found.append("container %s not ready" % container.get("name"))
    return found


_COUNTS = {
    "DaemonSet": ("numberReady", "desiredNumberScheduled"),
    "Deployment": ("readyReplicas", "replicas"),
    "StatefulSet": ("readyReplicas", "replicas"),
    "ReplicaSet": ("readyReplicas", "replicas"),
}


def not_ready(obj):
    """Why ``obj`` (as the API server returned it) is not ready, in one line of at most LIMIT characters."""
    if not isinstance(obj, dict) or not obj:
        return "not found"
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    kind = obj.get("kind")
    parts = []
    if kind == "Pod":
        parts.append("phase %s" % (status.get("phase") or "unknown"))
        if obj.get("spec", {}).get("nodeName"):
            parts[-1] += " on node %s" % obj["spec"]["nodeName"]
        parts += _container_problems(status)
    elif kind in _COUNTS:
        ready_key, want_key = _COUNTS[kind]
        want = status.get(want_key, (obj.get("spec") or {}).get("replicas"))
        parts.append("%s of %s pods ready" % (status.get(ready_key, 0), "?" if want is None else want))
    if status.get("state"):
        parts.append("state %s" % status["state"])
    parts += _false_conditions(status)
    if not parts:
        parts.append("no status yet")
    return _cut("; ".join(parts))


def apply_failure(results, step, timeout=None):
    """The message of the first failed call of the apply loop, or "" when every call succeeded.

    ``results``: the loop results of role apply's ``kubernetes.core.k8s`` task (each with ``item.label`` and,
    when it failed, ``msg`` and possibly ``result``, the object as last read).
    """
    for entry in results or []:
        suppressed = isinstance(entry, dict) and "failed_when_suppressed_exception" in entry
        if not isinstance(entry, dict) or ("msg" not in entry and not suppressed) or entry.get("skipped"):
            continue
        label = (entry.get("item") or {}).get("label") or "the objects"
        # an error whose failure Ansible suppressed keeps no message: still a failure, never a silent pass
        message = str(entry.get("msg") or ("the module failed and Ansible kept no message (run again with -vvv)"
                                           if suppressed else "unknown error"))
        obj = entry.get("result") if isinstance(entry.get("result"), dict) else None
        if "Timed out waiting" in message or "timed out" in message.lower():
            if "deletion" in message.lower():
                first = "Step %s: %s is still there after %s s (deleting it timed out)" % (
                    step, object_name(obj) if obj and obj.get("kind") else _cut(label, 200), timeout if timeout is not None else "?")
            elif obj and obj.get("kind"):
                waited = timeout if timeout is not None else "?"
                first = "Step %s: %s is not ready after %s s: %s" % (step, object_name(obj), waited, not_ready(obj))
            else:
                first = "Step %s: %s" % (step, _cut(message, 300))
            lines = [first, "Waited for: %s." % _cut(label, 300)]
        else:
            lines = ["Step %s: applying %s failed: %s" % (step, _cut(label, 200), _cut(message, 400))]
        text = "\n".join(lines)
        return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT - 3] + "..."
    return ""
