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
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Skip, register
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import node_labels


def _mps_nodes(view):
    nodes = [n for n in view.kubernetes("nodes") if node_labels(n).get(gpu_sharing.ACK_MPS_LABEL) == gpu_sharing.ACK_MPS_VALUE]
    if not nodes:
        raise Skip("no node is labelled %s=%s" % (gpu_sharing.ACK_MPS_LABEL, gpu_sharing.ACK_MPS_VALUE))
    return nodes


@register("mps.ack_daemons", "deployment", "An MPS control daemon runs on every ACK MPS node",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A node labelled for MPS has no running, ready MPS control daemon pod, so GPU pods scheduled there fail to "
                "start or run without MPS.",
          fix=dict(role="mps", variable="mps_ack_nodes", manual="run the mps role's ack entry point for the node"))
def ack_daemons(view):
    nodes = _mps_nodes(view)
    daemons = [p for p in view.kubernetes("pods")
               if ((p.get("metadata") or {}).get("labels") or {}).get(gpu_sharing.ACK_DAEMON_LABEL) == gpu_sharing.ACK_DAEMON_VALUE]
    report = gpu_sharing.ack_daemon_coverage(nodes, daemons)
    return ["%d MPS node(s), %d daemon pod(s)" % (len(report["nodes"]), len(daemons))], report["problems"]


@register("mps.ack_workloads", "conformance", "Workloads on ACK MPS nodes follow the MPS rules",
          reads=["kubernetes.nodes", "kubernetes.pods"],
          cause="A GPU pod breaks an ACK MPS rule (no hostIPC, NVIDIA_VISIBLE_DEVICES in its env, privileged, or a GPU "
                "request outside aliyun.com/gpu-mem), so it fails to start or escapes the scheduler's GPU memory books.",
          fix=dict(role="mps", variable="mps_ack_workload_check",
                   manual="set hostIPC: true, request aliyun.com/gpu-mem, drop NVIDIA_VISIBLE_DEVICES and privileged"))
def ack_workloads(view):
    nodes = _mps_nodes(view)
    findings = gpu_sharing.ack_workload_findings(view.kubernetes("pods"), nodes)
    return ["%d finding(s) on %d MPS node(s)" % (len(findings), len(nodes))], [f["message"] for f in findings]
