# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes naming rules for roles: the checks in plugins/module_utils/_k8s_names.py.

Documentation: plugins/filter/k8s_name_problems.yml, k8s_manifest_problems.yml, k8s_objects.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.module_utils import _k8s_names


def _plain(value):
    """Templated containers and strings as plain Python values (the checks test exact types)."""
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def k8s_name_problems(checks):
    """``"<option>: <why>"`` for every value of ``checks`` that breaks its Kubernetes naming rule."""
    try:
        return _k8s_names.problems(_plain(checks))
    except ValueError as exc:
        raise AnsibleFilterError("k8s_name_problems: %s" % exc)


def k8s_manifest_problems(manifests, where="apply_manifests"):
    """Why ``manifests`` cannot go through the apply role (Secrets at any depth, missing or invalid names)."""
    if not isinstance(where, str) or not where:
        raise AnsibleFilterError("k8s_manifest_problems: where must be a non-empty string")
    return _k8s_names.manifest_problems(_plain(manifests), where)


def k8s_objects(manifests):
    """The objects of ``manifests`` in order, the items of every ``*List`` (at any depth) in place of the list."""
    if not isinstance(manifests, (list, tuple)):
        raise AnsibleFilterError("k8s_objects: the input must be a list of Kubernetes objects, got %s"
                                 % type(manifests).__name__)
    return _k8s_names.flatten(_plain(manifests))


class FilterModule:
    """Kubernetes naming filters."""

    def filters(self):
        return {
            "k8s_name_problems": k8s_name_problems,
            "k8s_manifest_problems": k8s_manifest_problems,
            "k8s_objects": k8s_objects,
        }
