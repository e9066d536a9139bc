# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes naming rules for roles: the checks in plugins/plugin_utils/_k8s/names.py and manifests.py, and node taints
parsed as gpu_nodepool parses them (plugins/module_utils/_core/problems.py).

Documentation: plugins/filter/k8s_name_problems.yml, k8s_manifest_problems.yml, k8s_objects.yml,
k8s_apply_batches.yml, node_taint_tolerations.yml, k8s_not_ready.yml, k8s_wait_failure.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import filtered, plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_problems = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems")
_awx_inputs = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx.inputs")
_manifests = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s.manifests")
_k8s_names = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s.names")
_k8s_wait = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s.wait")


def _rules():
    """The rules a role's checks may name: Kubernetes' own and AWX's (playbooks/awx_setup.yml checks its names too)."""
    return dict(_k8s_names.RULES, **_awx_inputs.RULES)


def k8s_name_problems(checks):
    """``"<option>: <why>"`` for every value of ``checks`` that breaks its Kubernetes naming rule."""
    return filtered(AnsibleFilterError, "k8s_name_problems", _k8s_names.problems, plain(checks), _rules())


def k8s_manifest_problems(manifests, where="apply_manifests"):
    """Why ``manifests`` cannot go through the apply role (Secrets at any depth, missing or invalid names)."""
    if not isinstance(where, str) or not where:
        raise AnsibleFilterError("k8s_manifest_problems: where must be a non-empty string")
    return _manifests.manifest_problems(plain(manifests), where)


def k8s_objects(manifests):
    """The objects of ``manifests`` in order, the items of every ``*List`` (at any depth) in place of the list."""
    if not isinstance(manifests, (list, tuple)):
        raise AnsibleFilterError("k8s_objects: the input must be a list of Kubernetes objects, got %s"
                                 % type(manifests).__name__)
    return _manifests.flatten(plain(manifests))


def k8s_apply_batches(objects, wait_condition=None, wait_condition_kinds=(), leave_out=()):
    """The kubernetes.core.k8s calls (list ``definition``, ``wait_condition``, ``label``) that send ``objects`` in order."""
    return filtered(AnsibleFilterError, "k8s_apply_batches", _manifests.apply_batches, plain(objects),
                    plain(wait_condition), plain(wait_condition_kinds), plain(leave_out))


def k8s_not_ready(obj):
    """Why a Kubernetes object is not ready, in one short line (phase, container reasons, ready counts, false conditions)."""
    if obj is not None and not isinstance(obj, dict):
        raise AnsibleFilterError("k8s_not_ready: the input must be a Kubernetes object (a dict), got %s" % type(obj).__name__)
    return _k8s_wait.not_ready(plain(obj or {}))


def k8s_wait_failure(results, step, timeout=None):
    """The short message of the first failed call of role apply's loop ("" when none failed)."""
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, dict) for r in results):
        raise AnsibleFilterError("k8s_wait_failure: the input must be the list of loop results (register.results)")
    if not isinstance(step, str) or not step:
        raise AnsibleFilterError("k8s_wait_failure: step must be a non-empty string")
    return _k8s_wait.apply_failure(plain(list(results)), step, timeout)


def node_taint_tolerations(taints, option="node_taints"):
    """Tolerations for ``key=value:Effect`` node taints; a bad taint fails naming ``option`` (gpu_nodepool's rules)."""
    if not isinstance(option, str) or not option:
        raise AnsibleFilterError("node_taint_tolerations: option must be a non-empty string (the variable's name)")
    if taints is None:
        return []
    if not isinstance(taints, (list, tuple)) or not all(isinstance(t, str) for t in taints):
        raise AnsibleFilterError("node_taint_tolerations: %s must be a list of key=value:Effect strings, got %r"
                                 % (option, taints))
    problems = _problems.Problems()
    parsed = _problems.parse_taints(problems, option, plain(taints))
    if problems:
        raise AnsibleFilterError("node_taint_tolerations: %s" % "; ".join(problems.items))
    return _problems.tolerations(parsed)


class FilterModule:
    """Kubernetes naming filters."""

    def filters(self):
        return {
            "k8s_name_problems": k8s_name_problems,
            "k8s_manifest_problems": k8s_manifest_problems,
            "k8s_objects": k8s_objects,
            "k8s_apply_batches": k8s_apply_batches,
            "k8s_not_ready": k8s_not_ready,
            "k8s_wait_failure": k8s_wait_failure,
            "node_taint_tolerations": node_taint_tolerations,
        }
