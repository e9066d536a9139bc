# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Faults from the GCP double: 429/503 bursts, connection resets, operations ending in error, a run
killed half-way. Every re-run converges to exactly one cluster and one pool, nothing duplicated.

A module-level test: it drives gke_cluster and gpu_nodepool end to end through their entry points (main() and,
for the killed runs, the module file as a process), so it stays in tests/unit/plugins/modules/ rather than at the
mirrored path of one engine. The harness is tests/unit/plugins/module_utils/_gcp/gke_harness.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_cluster, gpu_nodepool
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import (  # pylint: disable=unused-import
    PROJECT,
    REGION,
    ZONE,
    create_fabric,
    gcp,
    module_runner,
)

VERSION = "1.32.2-gke.1489001"
CLUSTERS = "/v1/projects/%s/locations/%s/clusters" % (PROJECT, REGION)
POOLS = CLUSTERS + "/a3mega/nodePools"


def cluster_args(double, **extra):
    args = double.module_args(project=PROJECT, name="a3mega", location=REGION, node_locations=[ZONE],
                              cluster_version=VERSION, gpudirect="tcpxo")
    args.update(extra)
    return args


def pool_args(double, networks, **extra):
    args = double.module_args(project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="gpu",
                              node_locations=[ZONE], machine_type="a3-megagpu-8g", gpudirect="tcpxo", node_count=2,
                              additional_node_networks=networks, host_maintenance_interval="PERIODIC")
    args.update(extra)
    return args


def accepted(double, method, path_end):
    """Requests the double accepted (2xx) - retried attempts that got 429/503/reset are not counted."""
    return [r for r in double.requests if r["method"] == method and r["path"].endswith(path_end)
            and r["status"] == 200]


def one_of_each(double):
    state = double.state(PROJECT)
    assert [c["name"] for c in state["clusters"]] == ["a3mega"]
    assert all(c["status"] == "RUNNING" for c in state["clusters"])
    return state


def test_429_and_503_bursts_and_resets_converge(gcp, module_runner):
    gcp.inject("429", method="POST", path="/clusters$", count=3, retry_after=0)
    gcp.inject("503", method="GET", path="/clusters/a3mega$", count=2)
    gcp.inject("reset", method="GET", path="/operations/", count=2)
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result["changed"] is True, result
    assert gcp.pending_faults() == []
    assert len(accepted(gcp, "POST", "/clusters")) == 1
    one_of_each(gcp)

    networks = create_fabric(gcp, ["vpc%d" % i for i in range(1, 9)])
    gcp.inject("503", method="POST", path="/nodePools$", count=4)
    gcp.inject("reset", method="GET", path="/global/networks/", count=3)
    gcp.inject("429", method="GET", path="/operations/", count=2, retry_after=0)
    result = module_runner(gpu_nodepool.main, pool_args(gcp, networks))
    assert result["changed"] is True, result
    assert gcp.pending_faults() == []
    assert len(accepted(gcp, "POST", "/nodePools")) == 1
    state = one_of_each(gcp)
    assert sorted(p["selfLink"].rsplit("/", 1)[-1] for p in state["nodePools"]) == ["default-pool", "gpu"]


def test_create_that_already_landed_is_adopted(gcp, module_runner):
    # the first read misses the cluster (as if it answered before an earlier attempt landed);
    # the create then meets 409 and the engine carries on with what exists
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.clear_log()
    gcp.inject("status", status=404, method="GET", path="/clusters/a3mega$", count=1,
               message="Not found: projects/%s/locations/%s/clusters/a3mega." % (PROJECT, REGION))
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result.get("failed") is not True, result
    assert [r["status"] for r in gcp.requests if r["method"] == "POST"] == [409]
    one_of_each(gcp)


def test_retries_exhausted_fail_cleanly(gcp, module_runner):
    gcp.inject("503", method="POST", path="/clusters$", count=50)
    result = module_runner(gke_cluster.main, cluster_args(gcp, max_retries=2))
    assert result["failed"] is True
    assert "HTTP 503" in result["msg"] and gcp.token not in json.dumps(result)
    assert len([r for r in gcp.requests if r["method"] == "POST"]) == 3
    gcp.clear_faults()
    assert module_runner(gke_cluster.main, cluster_args(gcp))["changed"] is True
    one_of_each(gcp)


def test_cluster_operation_error_then_recreate(gcp, module_runner):
    gcp.inject("op_error", method="POST", path="/clusters$", count=1, message="QUOTA_EXCEEDED: CPUS")
    failed = module_runner(gke_cluster.main, cluster_args(gcp))
    assert failed["failed"] is True and "QUOTA_EXCEEDED: CPUS" in failed["msg"]
    assert gcp.state(PROJECT)["clusters"][0]["status"] == "ERROR"

    again = module_runner(gke_cluster.main, cluster_args(gcp))
    assert again["failed"] is True and "status ERROR" in again["msg"] and "recreate: true" in again["msg"]
    gcp.clear_log()
    fixed = module_runner(gke_cluster.main, cluster_args(gcp, recreate=True))
    assert fixed["changed"] is True and fixed["changes"][0]["action"] == "recreate"
    assert [r["method"] for r in gcp.mutating_requests()] == ["DELETE", "POST"]
    one_of_each(gcp)
    assert module_runner(gke_cluster.main, cluster_args(gcp, recreate=True))["changed"] is False


def test_pool_operation_errors(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    networks = create_fabric(gcp, ["vpc%d" % i for i in range(1, 9)])
    # an update that ends in error leaves the pool as it was; the re-run sends the update again
    assert module_runner(gpu_nodepool.main, pool_args(gcp, networks))["changed"] is True
    gcp.inject("op_error", method="POST", path=":setSize$", count=1, message="ZONE_RESOURCE_POOL_EXHAUSTED")
    failed = module_runner(gpu_nodepool.main, pool_args(gcp, networks, node_count=4))
    assert failed["failed"] is True and "ZONE_RESOURCE_POOL_EXHAUSTED" in failed["msg"]
    gcp.clear_log()
    fixed = module_runner(gpu_nodepool.main, pool_args(gcp, networks, node_count=4))
    assert fixed["changed"] is True and fixed["changes"][0]["fields"] == ["node_count"]
    assert [r["path"].rsplit("/", 1)[-1] for r in gcp.mutating_requests()] == ["gpu:setSize"]

    # a create that ends in error leaves a pool in ERROR: named, and replaced with recreate: true
    gcp.inject("op_error", method="POST", path="/nodePools$", count=1, message="stockout")
    failed = module_runner(gpu_nodepool.main, pool_args(gcp, networks, name="gpu2"))
    assert failed["failed"] is True and "stockout" in failed["msg"]
    again = module_runner(gpu_nodepool.main, pool_args(gcp, networks, name="gpu2"))
    assert again["failed"] is True and "status ERROR" in again["msg"]
    fixed = module_runner(gpu_nodepool.main, pool_args(gcp, networks, name="gpu2", recreate=True))
    assert fixed["changed"] is True
    pools = gcp.state(PROJECT)["nodePools"]
    assert sorted((p["selfLink"].rsplit("/", 1)[-1], p["status"]) for p in pools) == [
        ("default-pool", "RUNNING"), ("gpu", "RUNNING"), ("gpu2", "RUNNING")]


def test_cluster_busy_with_another_operation(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    networks = create_fabric(gcp, ["vpc%d" % i for i in range(1, 9)])
    # someone else's long update is running on the cluster: the pool create waits for it
    gcp.set_latency(1.0, operation_type="UPDATE_CLUSTER")
    gcp.clear_log()
    from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import api_call

    api_call(gcp, "PUT", CLUSTERS.lstrip("/") + "/a3mega", {"update": {"desiredLocations": [ZONE]}})
    result = module_runner(gpu_nodepool.main, pool_args(gcp, networks))
    assert result["changed"] is True, result
    assert len(accepted(gcp, "POST", "/nodePools")) == 1


def _run_module_process(module_file, args, tmp_path):
    args_file = tmp_path / ("%s.json" % os.path.basename(module_file))
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    # the same import path as this test process, so the module finds the collection the same way
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen([sys.executable, module_file, str(args_file)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _kill_after(process, double, method, path_end, timeout=30):
    deadline = time.monotonic() + timeout
    while not accepted(double, method, path_end):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the module never sent %s %s" % (method, path_end)
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


@pytest.mark.parametrize("what", ["cluster", "pool"])
def test_run_killed_half_way_converges_on_rerun(gcp, module_runner, tmp_path, what):
    if what == "cluster":
        gcp.set_latency(3.0, operation_type="CREATE_CLUSTER")
        process = _run_module_process(gke_cluster.__file__, cluster_args(gcp), tmp_path)
        _kill_after(process, gcp, "POST", "/clusters")
        assert gcp.state(PROJECT)["clusters"][0]["status"] == "PROVISIONING"
        result = module_runner(gke_cluster.main, cluster_args(gcp))
        assert result.get("failed") is not True, result
        assert len(accepted(gcp, "POST", "/clusters")) == 1
        one_of_each(gcp)
        return
    module_runner(gke_cluster.main, cluster_args(gcp))
    networks = create_fabric(gcp, ["vpc%d" % i for i in range(1, 9)])
    gcp.set_latency(3.0, operation_type="CREATE_NODE_POOL")
    process = _run_module_process(gpu_nodepool.__file__, pool_args(gcp, networks), tmp_path)
    _kill_after(process, gcp, "POST", "/nodePools")
    result = module_runner(gpu_nodepool.main, pool_args(gcp, networks))
    assert result.get("failed") is not True, result
    assert result["node_pool"]["status"] == "RUNNING"
    assert len(accepted(gcp, "POST", "/nodePools")) == 1
    pools = one_of_each(gcp)["nodePools"]
    assert sorted((p["selfLink"].rsplit("/", 1)[-1], p["status"]) for p in pools) == [
        ("default-pool", "RUNNING"), ("gpu", "RUNNING")]
    gcp.clear_log()
    assert module_runner(gpu_nodepool.main, pool_args(gcp, networks))["changed"] is False
    assert gcp.mutating_requests() == []


def test_bad_token_fails_without_echoing_it(gcp, module_runner):
    args = cluster_args(gcp, access_token="ya29.not-the-right-token-123456")
    result = module_runner(gke_cluster.main, args)
    assert result["failed"] is True and "401" in result["msg"]
    assert "ya29.not-the-right-token-123456" not in json.dumps(result)
    assert gcp.mutating_requests() == [] or all(r["status"] == 401 for r in gcp.mutating_requests())
