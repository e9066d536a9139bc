# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What the apply role checks and does with the manifests it is given: Secrets refused (by path only), each
object's apiVersion, kind and names checked by Kubernetes' rules (names.py), ``*List`` objects flattened, and
the objects grouped into as few kubernetes.core.k8s calls as their wait conditions allow.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s.names import (
    PATH_SEGMENT_NAME_KINDS, dns1123_label, dns1123_subdomain, is_secret_kind, label_key, labels, path_segment_name, show,
)


def _is_list_kind(kind):
    return isinstance(kind, str) and kind.endswith("List")


def secret_paths(manifests, where="apply_manifests"):
    """Where a Secret sits in ``manifests``, at any depth of ``*List`` items; never its data."""
    found = []
    if not isinstance(manifests, (list, tuple)):
        return found
    for index, item in enumerate(manifests):
        path = "%s[%d]" % (where, index)
        if not isinstance(item, dict):
            continue
        kind = item.get("kind")
        if is_secret_kind(kind):
            found.append(path)
        elif _is_list_kind(kind) or "items" in item and "metadata" not in item:
            found.extend(secret_paths(item.get("items"), path + ".items"))
    return found


def flatten(manifests):
    """Objects of ``manifests`` in order, with the items of every ``*List`` in place of the list."""
    objects = []
    for item in manifests:
        if isinstance(item, dict) and _is_list_kind(item.get("kind")) and isinstance(item.get("items"), list):
            objects.extend(flatten(item["items"]))
        else:
            objects.append(item)
    return objects


def _effective_wait_condition(obj, wait_condition, wait_condition_kinds):
    if not wait_condition or wait_condition_kinds and obj.get("kind") not in wait_condition_kinds:
        return {}
    return wait_condition


def apply_batches(objects, wait_condition=None, wait_condition_kinds=(), leave_out=()):
    """The kubernetes.core.k8s calls that send ``objects`` in their order, as few as the arguments allow.

    kubernetes.core.k8s takes a list ``definition`` and sends its objects one by one, stopping at the
    first failure; only ``wait_condition`` differs between the apply role's objects (it goes to the
    kinds in ``wait_condition_kinds``, or to every kind when that is empty). So each run of consecutive
    objects with the same wait condition is one call: ``{"definition": [...], "wait_condition": {} or
    the condition, "label": "Kind/name, ..."}``. Objects equal to one in ``leave_out`` (those the API
    server cannot take yet) are not sent; the others keep their order.
    """
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise TypeError("the input must be a list of Kubernetes objects")
    if wait_condition is not None and not isinstance(wait_condition, dict):
        raise TypeError("wait_condition must be a dict, got %s" % type(wait_condition).__name__)
    for option, value in (("wait_condition_kinds", wait_condition_kinds), ("leave_out", leave_out)):
        if not isinstance(value, (list, tuple)):
            raise TypeError("%s must be a list, got %s" % (option, type(value).__name__))
    batches = []
    for obj in objects:
        if obj in leave_out:
            continue
        condition = _effective_wait_condition(obj, wait_condition, wait_condition_kinds)
        if batches and batches[-1]["wait_condition"] == condition:
            batches[-1]["definition"].append(obj)
        else:
            batches.append({"definition": [obj], "wait_condition": condition})
    for batch in batches:
        batch["label"] = ", ".join("%s/%s" % (o.get("kind"), (o.get("metadata") or {}).get("name"))
                                   for o in batch["definition"])
    return batches


def manifest_problems(manifests, where="apply_manifests"):
    """Why the objects cannot go through the apply role: Secrets at any depth (by path only), objects
    without apiVersion, kind or name, names that are not valid or cannot be file names."""
    if not isinstance(manifests, (list, tuple)):
        return ["%s: must be a list of Kubernetes objects, got %s" % (where, type(manifests).__name__)]
    found = ["%s: a Secret cannot go through gpu_ops.cluster.apply, whose task results would show its data; "
             "create it with kubernetes.core.k8s and no_log: true" % path for path in secret_paths(manifests, where)]
    if found:
        return found  # nothing else is looked at: a message about a Secret's fields could show them
    for index, item in enumerate(manifests):
        path = "%s[%d]" % (where, index)
        if not isinstance(item, dict):
            found.append("%s: must be a Kubernetes object (a dict), got %s" % (path, type(item).__name__))
            continue
        if _is_list_kind(item.get("kind")):
            if not isinstance(item.get("items"), list):
                found.append("%s.items: a %s must hold a list of objects" % (path, item.get("kind")))
            else:
                found.extend(manifest_problems(item["items"], path + ".items"))
            continue
        found.extend(_object_problems(item, path))
    return found


def _object_problems(item, path):
    found = []
    for field in ("apiVersion", "kind"):
        value = item.get(field)
        if not isinstance(value, str) or not value.strip():
            found.append("%s.%s: is required (a non-empty string)" % (path, field))
    kind = item.get("kind")
    if isinstance(kind, str) and kind and not re.match(r"^[A-Za-z][A-Za-z0-9]*\Z", kind):
        found.append("%s.kind: %s is not a Kubernetes kind (letters and digits)" % (path, show(kind)))
    metadata = item.get("metadata")
    if not isinstance(metadata, dict):
        found.append("%s.metadata: is required (a dict with name)" % path)
        return found
    name_rule = path_segment_name if kind in PATH_SEGMENT_NAME_KINDS else dns1123_subdomain
    why = name_rule(metadata.get("name"))
    if why:
        found.append("%s.metadata.name: %s" % (path, why))
    if metadata.get("namespace") is not None:
        why = dns1123_label(metadata["namespace"])
        if why:
            found.append("%s.metadata.namespace: %s" % (path, why))
    for field in ("labels", "annotations"):
        if metadata.get(field) is not None:
            why = labels(metadata[field]) if field == "labels" else _annotation_problems(metadata[field])
            if why:
                found.append("%s.metadata.%s: %s" % (path, field, why))
    return found


def _annotation_problems(value):
    if not isinstance(value, dict):
        return "must be a dict, got %s" % type(value).__name__
    reasons = [label_key(key) for key in sorted(value, key=str)]
    return "; ".join(r for r in reasons if r) or None
