# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MPS filters: host settings, ACK MPS checks and the GPU allocation report (engines: module_utils/_host/mps.py, plugin_utils/_sharing/gpu_sharing.py).

Documentation: plugins/filter/<filter name>.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import filtered, plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_mps = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._host.mps")
gpu_sharing = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._sharing.gpu_sharing")


def _documents(name, value, what):
    # null is refused: a failed read is not "no nodes"
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, dict) for v in value):
        raise AnsibleFilterError("%s: %s must be a list of %s documents (k8s_info resources), got %s"
                                 % (name, what.lower() + "s", what, type(value).__name__))
    return plain(value)


def _call(name, function, *args, **kwargs):
    return filtered(AnsibleFilterError, name, function, *args, **kwargs)


def mps_host_settings(settings, gpus=None):
    """Validated MPS control daemon settings and the daemon's environment; ``gpus``: the host's GPUs when known."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("mps_host_settings: the input must be a dict of settings")
    if gpus is not None and (not isinstance(gpus, (list, tuple)) or not all(isinstance(g, dict) for g in gpus)):
        raise AnsibleFilterError("mps_host_settings: gpus must be the gpu_host facts' gpus (a list of dicts), got %s"
                                 % type(gpus).__name__)
    return _call("mps_host_settings", _mps.host_settings, plain(settings), None if gpus is None else plain(gpus))


def mps_server_list(text):
    """Server PIDs from get_server_list output."""
    return _call("mps_server_list", _mps.parse_server_list, str(text or ""))


def mps_ack_findings(pods, nodes, exempt_namespaces=None, exempt_labels=None):
    """What the ACK MPS guide forbids or requires, found in pods."""
    if exempt_namespaces is not None and (not isinstance(exempt_namespaces, (list, tuple))
                                          or not all(isinstance(n, str) for n in exempt_namespaces)):
        raise AnsibleFilterError("mps_ack_findings: exempt_namespaces must be a list of namespace names, got %r"
                                 % (exempt_namespaces,))
    if exempt_labels is not None and not isinstance(exempt_labels, dict):
        raise AnsibleFilterError("mps_ack_findings: exempt_labels must be a dict of labels, got %r" % (exempt_labels,))
    return _call("mps_ack_findings", gpu_sharing.ack_workload_findings, _documents("mps_ack_findings", pods, "Pod"),
                 _documents("mps_ack_findings", nodes, "Node"),
                 exempt_namespaces=("kube-system",) if exempt_namespaces is None else list(exempt_namespaces),
                 exempt_labels=plain(exempt_labels or {}))


def mps_ack_daemon_coverage(nodes, daemon_pods):
    """MPS nodes without a running, ready MPS control daemon pod."""
    return gpu_sharing.ack_daemon_coverage(_documents("mps_ack_daemon_coverage", nodes, "Node"),
                                           _documents("mps_ack_daemon_coverage", daemon_pods, "Pod"))


def mps_ack_label_patches(targets, nodes, schedule, every=False):
    """Node patches for the ACK schedule label, only where it differs (all when ``every``)."""
    if not isinstance(targets, (list, tuple)) or not all(isinstance(t, str) for t in targets):
        raise AnsibleFilterError("mps_ack_label_patches: the input must be a list of node names, got %r" % (targets,))
    if not isinstance(schedule, str) or not schedule:
        raise AnsibleFilterError("mps_ack_label_patches: schedule must be the label value, got %r" % (schedule,))
    return gpu_sharing.ack_label_patches(list(targets), _documents("mps_ack_label_patches", nodes, "Node"), schedule,
                                         every=bool(every))


def mps_gpudirect_conflicts(nodes):
    """Nodes whose GPUDirect fabric refuses MPS."""
    return gpu_sharing.gpudirect_conflicts(_documents("mps_gpudirect_conflicts", nodes, "Node"))


def gpu_allocation(nodes, pods):
    """Per node, allocated/total GPU resources and GPU memory."""
    return _call("gpu_allocation", gpu_sharing.allocation_report, _documents("gpu_allocation", nodes, "Node"),
                 _documents("gpu_allocation", pods, "Pod"))


def gpu_allocation_table(report):
    """A gpu_allocation result as a table like kubectl inspect cgpu."""
    if not isinstance(report, dict) or "nodes" not in report:
        raise AnsibleFilterError("gpu_allocation_table: the input must be a gpu_allocation result")
    return gpu_sharing.allocation_table(plain(report))


class FilterModule:
    """MPS and GPU allocation filters."""

    def filters(self):
        return {
            "mps_host_settings": mps_host_settings,
            "mps_server_list": mps_server_list,
            "mps_ack_findings": mps_ack_findings,
            "mps_ack_daemon_coverage": mps_ack_daemon_coverage,
            "mps_ack_label_patches": mps_ack_label_patches,
            "mps_gpudirect_conflicts": mps_gpudirect_conflicts,
            "gpu_allocation": gpu_allocation,
            "gpu_allocation_table": gpu_allocation_table,
        }
