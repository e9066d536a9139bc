# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DaemonSet rollout filters: on which nodes is a DaemonSet ready, and why not elsewhere.

Documentation: plugins/filter/daemonset_node_report.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _daemonset


def daemonset_node_report(pods, nodes, daemonset):
    """One entry per node of ``nodes``: whether a pod of ``daemonset`` that runs the DaemonSet's current
    pod template is Ready on it, and if not, why (plugin_utils/_daemonset.py).

    ``pods``: the pods matching the DaemonSet's selector (kubernetes.core.k8s_info ``resources``);
    ``nodes``: the nodes it must run on; ``daemonset``: the DaemonSet object as read from the cluster.
    """
    try:
        return _daemonset.node_report(pods, nodes, daemonset)
    except ValueError as exc:
        raise AnsibleFilterError("daemonset_node_report: %s" % exc)


class FilterModule:
    """DaemonSet rollout filters."""

    def filters(self):
        return {"daemonset_node_report": daemonset_node_report}
