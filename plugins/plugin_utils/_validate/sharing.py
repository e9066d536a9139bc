# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPU sharing validation checks of ACK-style MPS (seed guide 004): an MPS control daemon on every MPS node, and
workloads that follow the guide's rules. The rules, labels and findings are ``_gpu_sharing.py``'s (the mps role's).
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._sharing import gpu_sharing
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Skip, described_by
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import node_labels

# each check's phase, title, reads, cause and fix: sharing.yml beside this file
described = described_by(__file__)


def _mps_nodes(view):
    nodes = [n for n in view.kubernetes("nodes") if node_labels(n).get(gpu_sharing.ACK_MPS_LABEL) == gpu_sharing.ACK_MPS_VALUE]
    if not nodes:
        raise Skip("no node is labelled %s=%s" % (gpu_sharing.ACK_MPS_LABEL, gpu_sharing.ACK_MPS_VALUE))
    return nodes


@described("mps.ack_daemons")
def ack_daemons(view):
    nodes = _mps_nodes(view)
    daemons = [p for p in view.kubernetes("pods")
               if ((p.get("metadata") or {}).get("labels") or {}).get(gpu_sharing.ACK_DAEMON_LABEL) == gpu_sharing.ACK_DAEMON_VALUE]
    report = gpu_sharing.ack_daemon_coverage(nodes, daemons)
    return ["%d MPS node(s), %d daemon pod(s)" % (len(report["nodes"]), len(daemons))], report["problems"]


@described("mps.ack_workloads")
def ack_workloads(view):
    nodes = _mps_nodes(view)
    judged = gpu_sharing.ack_workload_pods(view.kubernetes("pods"), nodes)
    if not judged:
        raise Skip("no workload pod runs on an MPS node or uses a GPU (%d MPS node(s))" % len(nodes))
    findings = gpu_sharing.ack_workload_findings(view.kubernetes("pods"), nodes)
    return ["%d finding(s) in %d pod(s) on %d MPS node(s)" % (len(findings), len(judged), len(nodes))], [f["message"] for f in findings]
