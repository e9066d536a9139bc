# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU Operator / Network Operator filters: plans from the chart catalog, readiness reports, RDMA test.

Documentation: plugins/filter/gpu_hosts_inventory.yml, gpu_operator_plan.yml, gpu_operator_upgrade_plan.yml, gpu_operator_upgrade_progress.yml,
gpu_operator_upgrade_report.yml, network_operator_plan.yml, operator_readiness.yml,
driver_pod_problems.yml, gpu_operator_node_problems.yml, dra_driver_plan.yml, dra_driver_readiness.yml,
gpudirect_rdma_mode.yml, ib_write_bw_parse.yml, rdma_threshold.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

ops = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.gpu_operator_plan")
network_plan = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.network_operator_plan")
dra = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.dra_driver_plan")
upgrade = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.gpu_operator_upgrade")
readiness = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.readiness")
_perftest = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf.perftest")


def _guard(name, func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except (TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc))


def gpu_hosts_inventory(hosts, hostvars, node_var="k8s_node_name"):
    """{facts: {host: gpu_host}, nodes: {host: Kubernetes node name}} of the GPU hosts.

    The facts are the ones gpu_host_facts gathered (``ansible_facts.gpu_host``), else a ``gpu_host``
    variable (captured facts in the inventory, for render mode and tests). The node name is the
    host's ``k8s_node_name`` variable, else the inventory name.
    """
    facts, nodes = {}, {}
    for host in hosts or []:
        variables = hostvars[host]
        gathered = (variables.get("ansible_facts") or {}).get("gpu_host") or variables.get("gpu_host")
        if gathered:
            facts[host] = gathered
        nodes[host] = variables.get(node_var) or host
    return {"facts": facts, "nodes": nodes}


def gpu_operator_plan(options, hosts=None):
    """Chart values, objects and expectations of the GPU Operator for ``options`` on the GPU hosts' facts."""
    return _guard("gpu_operator_plan", ops.gpu_operator_plan, options, hosts)


def gpu_operator_upgrade_plan(install_plan, installed, options):
    """The upgrade from the installed release to the target chart's install plan: CRDs first, values, the watch."""
    if not isinstance(install_plan, dict) or not isinstance(install_plan.get("chart"), dict):
        raise AnsibleFilterError("gpu_operator_upgrade_plan: the input must be a gpu_operator_plan result (at the target version)")
    if installed is not None and not isinstance(installed, dict):
        raise AnsibleFilterError("gpu_operator_upgrade_plan: installed must be kubernetes.core.helm_info's status (a dict) or null")
    return _guard("gpu_operator_upgrade_plan", upgrade.upgrade_plan, install_plan, installed, options)


def gpu_operator_upgrade_progress(nodes, pods, watch, previous=None, now=0):
    """One poll of the driver rollout: each driver node's upgrade state, time there and verdict."""
    for name, value in (("nodes", nodes), ("pods", pods)):
        if not isinstance(value, list):
            raise AnsibleFilterError("gpu_operator_upgrade_progress: %s must be a list of k8s_info resources" % name)
    if not isinstance(watch, dict) or "state_label" not in watch:
        raise AnsibleFilterError("gpu_operator_upgrade_progress: watch must be the upgrade plan's watch")
    return _guard("gpu_operator_upgrade_progress", upgrade.upgrade_progress, nodes, pods, watch, previous, float(now))


def gpu_operator_upgrade_report(progress, logs=None):
    """The stuck, failed and skipped nodes, each stuck or failed one with its driver pod's log line that says why."""
    if not isinstance(progress, dict) or "nodes" not in progress:
        raise AnsibleFilterError("gpu_operator_upgrade_report: the input must be a gpu_operator_upgrade_progress result")
    return _guard("gpu_operator_upgrade_report", upgrade.upgrade_report, progress, logs)


def network_operator_plan(options, hosts=None):
    """Chart values, NicClusterPolicy, IP pools and networks of the Network Operator."""
    return _guard("network_operator_plan", network_plan.network_operator_plan, options, hosts)


def dra_driver_plan(options, hosts=None):
    """Release, objects and expectations of the NVIDIA DRA driver; refuses what the release, cluster or hosts cannot take."""
    return _guard("dra_driver_plan", dra.dra_driver_plan, options, hosts)


def dra_driver_readiness(read, expect):
    """{ok, problems, nodes}: the installed DRA driver against the plan's expectations, node by node."""
    return _guard("dra_driver_readiness", dra.dra_driver_readiness, expect, read)


def operator_readiness(policy, pods=None):
    """Readiness of a ClusterPolicy / NicClusterPolicy with the not-ready components and pods by node."""
    return _guard("operator_readiness", readiness.readiness_report, policy, pods)


def driver_pod_problems(pods, sidecars, logs=None):
    """Problems of the GPU Operator driver pods against the sidecars the options imply."""
    return _guard("driver_pod_problems", readiness.driver_pod_report, pods, sidecars, logs)


def gpu_operator_node_problems(nodes, gpu_hosts, expect):
    """Problems of the GPU hosts' nodes against the plan's expectations (labels, allocatable GPUs)."""
    return _guard("gpu_operator_node_problems", readiness.node_report, nodes, gpu_hosts, expect)


def gpudirect_rdma_mode(hosts, requested="auto"):
    """{mode, notes}: the GPUDirect RDMA mode for ``requested`` on the GPU hosts' facts."""
    mode, notes = _guard("gpudirect_rdma_mode", ops.resolve_rdma_mode, requested, hosts)
    return {"mode": mode, "notes": notes}


def ib_write_bw_parse(text):
    """The result table of perftest ib_write_bw output (bandwidths in Gb/s)."""
    return _guard("ib_write_bw_parse", _perftest.parse_ib_write_bw, text)


def rdma_threshold(hosts, device=None, fraction=0.8, threshold=None):
    """{threshold_gbps, link_rate_gbps, device} of the RDMA bandwidth test."""
    value, link, chosen = _guard("rdma_threshold", _perftest.rdma_threshold, hosts, device, fraction, threshold)
    return {"threshold_gbps": value, "link_rate_gbps": link, "device": chosen}


def kube_version_refusal(kube_version, server_version=None, chart="the chart"):
    """Why helm would refuse a chart's kubeVersion on this server version (a pre-release one), or without one on
    any pre-release version; "" when not."""
    return _guard("kube_version_refusal", network_plan.kube_version_refusal, chart, kube_version, server_version) or ""


class FilterModule:
    """GPU Operator / Network Operator filters."""

    def filters(self):
        return {
            "gpu_hosts_inventory": gpu_hosts_inventory,
            "gpu_operator_plan": gpu_operator_plan,
            "dra_driver_plan": dra_driver_plan,
            "dra_driver_readiness": dra_driver_readiness,
            "network_operator_plan": network_operator_plan,
            "gpu_operator_upgrade_plan": gpu_operator_upgrade_plan,
            "gpu_operator_upgrade_progress": gpu_operator_upgrade_progress,
            "gpu_operator_upgrade_report": gpu_operator_upgrade_report,
            "operator_readiness": operator_readiness,
            "driver_pod_problems": driver_pod_problems,
            "gpu_operator_node_problems": gpu_operator_node_problems,
            "gpudirect_rdma_mode": gpudirect_rdma_mode,
            "ib_write_bw_parse": ib_write_bw_parse,
            "rdma_threshold": rdma_threshold,
            "kube_version_refusal": kube_version_refusal,
        }
