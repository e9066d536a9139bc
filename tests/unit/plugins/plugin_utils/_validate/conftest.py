# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Healthy clusters and hosts for the validation checks, and the broken-one-way helper.

The fixtures under fixtures/ are what k8s_info, gke_multinetwork_info / gpu_nodepool_info and gpu_host_facts
return for a healthy GKE A3 Mega (TCPXO) cluster, GKE A3 Ultra and A4X (GPUDirect-RDMA) clusters, a GPU Operator
cluster with MIG (A100, mixed strategy), a bare-metal GPU Operator and Network Operator cluster with GPUDirect RDMA
(H100, nvidia-peermem) and a bare-metal H100 host with RDMA. They are written out, not derived from the production tables.
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as snap
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
HEALTHY = ("gke-tcpxo", "gke-a3ultra", "gke-a4x", "gpu-operator-mig", "gpu-operator-rdma", "host", "ack-mps")


def raw(name):
    with open(os.path.join(FIXTURES, "raw-%s.json" % name)) as handle:
        return json.load(handle)


def build(data):
    if "host" in data:
        return snap.build_host(data["name"], data["host"])
    k8s = data["kubernetes"]
    built = snap.build_kubernetes(data["name"], k8s["nodes"], k8s["daemonsets"], k8s["pods"], k8s["cluster_policies"],
                                  k8s["nic_cluster_policies"], k8s.get("network_param_sets"), k8s.get("networks"), gke=data.get("gke"),
                                  resource_slices=k8s.get("resource_slices"), compute_domains=k8s.get("compute_domains"))
    if "compute_domain_daemon_logs" in k8s:
        # what the role reads after the snapshot: the logs of the daemons that are not ready
        built = snap.with_daemon_logs(built, k8s["compute_domain_daemon_logs"])
    return built


def statuses(result):
    return dict((r["id"], r["status"]) for r in result["results"])


def broken(name, mutate):
    """(healthy results, broken results) of fixture ``name`` after ``mutate(raw)``."""
    data = raw(name)
    healthy = suite.validate(build(data))
    changed = copy.deepcopy(data)
    mutate(changed)
    return healthy, suite.validate(build(changed))


def assert_only_failure(name, mutate, check_id, text):
    """Breaking ``name`` by ``mutate`` fails ``check_id`` with its cause and ``text``; every other check is unchanged."""
    healthy, result = broken(name, mutate)
    assert statuses(healthy)[check_id] == "passed"
    by_id = dict((r["id"], r) for r in result["results"])
    failed = by_id[check_id]
    assert failed["status"] == "failed", failed
    assert failed["cause"] == suite.CHECKS_BY_ID[check_id].cause
    assert text in failed["message"], failed["message"]
    assert failed["fix"]
    others = dict((k, v) for k, v in statuses(result).items() if k != check_id)
    assert others == dict((k, v) for k, v in statuses(healthy).items() if k != check_id)
    assert result["exit_status"] != 0
    return failed


@pytest.fixture
def only_failure():
    return assert_only_failure


@pytest.fixture
def load_raw():
    return raw


@pytest.fixture
def build_snapshot():
    return build
