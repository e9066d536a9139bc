# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every request body the GKE engines send validates against the container v1 / v1beta1 discovery documents.

The engines run against the GCP double with its own body validation switched off, so that a bad
body is not stopped at the double but reaches the assertion here; the scenarios cover every kind of
request the engines make (creates with every option, each update method, recreate, delete), on
v1 and, for the host maintenance interval, v1beta1. Render-mode request files are validated too.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_cluster, gpu_nodepool
from ansible_collections.gpu_ops.cluster.tests.contract.discovery import discovery
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import (  # pylint: disable=unused-import
    PROJECT,
    REGION,
    ZONE,
    create_fabric,
    module_runner,
)

VERSION = "1.31.1-gke.2008000"


def problems_of(method, path, body, query=None):
    path = path.lstrip("/")
    version = "v1beta1" if path.startswith("v1beta1/") else "v1"
    return discovery("container", version).validate_request(method, path, body, query or {})


def container_mutations(double):
    return [r for r in double.mutating_requests() if not r["path"].startswith("/compute/")]


@pytest.fixture
def loose():
    """The double without its own body validation: the assertions below are the contract."""
    with GcpDouble(latency=0.0, validate=False) as double:
        yield double


def cluster_args(double, **extra):
    args = double.module_args(
        project=PROJECT, name="a3mega", location=REGION, node_locations=[ZONE], cluster_version=VERSION,
        gpudirect="tcpxo", network="default", subnetwork="default",
        ip_allocation=dict(cluster_secondary_range_name="pods", services_secondary_range_name="services"),
        private_nodes=True, master_ipv4_cidr="172.16.0.32/28",
        master_authorized_networks=[dict(cidr_block="203.0.113.0/24", display_name="office")],
        default_node_pool=dict(machine_type="e2-standard-4", node_count=1, service_account="default",
                               oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"]),
        maintenance_exclusion=dict(name="hold", start_time="2026-01-01T00:00:00Z", end_time="2026-01-15T00:00:00Z",
                                   scope="no_upgrades"))
    args.update(extra)
    return args


def pool_args(double, networks, **extra):
    args = double.module_args(
        project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="gpu", node_locations=[ZONE],
        machine_type="a3-megagpu-8g", gpudirect="tcpxo", node_count=2, gpu_driver_version="latest",
        additional_node_networks=networks, placement_policy=dict(type="COMPACT", policy_name="a3mega-compact"),
        reservation_affinity=dict(consume="specific", reservation="a3mega-res/reservationBlocks/block-1"),
        service_account="gpu-nodes@%s.iam.gserviceaccount.com" % PROJECT,
        oauth_scopes=["https://www.googleapis.com/auth/cloud-platform"], disk_size_gb=200, disk_type="pd-ssd",
        node_labels={"team": "ml"}, node_taints=["dedicated=gpu:NoSchedule"], spot=False,
        node_version=VERSION)
    args.update(extra)
    return args


def assert_all_valid(double, expected_methods):
    sent = container_mutations(double)
    seen = set()
    for request in sent:
        problems = problems_of(request["method"], request["path"], request["body"], request["query"])
        assert problems == [], "%s %s: %s\n%s" % (
            request["method"], request["path"], problems, json.dumps(request["body"], indent=1))
        version = "v1beta1" if request["path"].startswith("/v1beta1/") else "v1"
        method = discovery("container", version).match(request["method"], request["path"].lstrip("/"))
        seen.add("%s:%s" % (version, method.id))
    missing = set(expected_methods) - seen
    assert not missing, "scenario did not exercise %s (saw %s)" % (sorted(missing), sorted(seen))
    return sent


def test_cluster_requests(loose, module_runner):
    assert module_runner(gke_cluster.main, cluster_args(loose))["changed"] is True
    updated = cluster_args(loose, cluster_version="1.32.2-gke.1489001", release_channel="regular",
                           node_locations=[ZONE, "us-central1-b"],
                           master_authorized_networks=[dict(cidr_block="198.51.100.0/24")],
                           maintenance_exclusion=dict(name="pin", start_time="2026-02-01T00:00:00Z"))
    result = module_runner(gke_cluster.main, updated)
    assert result["changed"] is True, result
    recreated = module_runner(gke_cluster.main, dict(updated, network="other", recreate=True))
    assert recreated["changes"][0]["action"] == "recreate"
    gone = module_runner(gke_cluster.main, dict(loose.module_args(project=PROJECT), name="a3mega", location=REGION,
                                                state="absent"))
    assert gone["changed"] is True
    assert_all_valid(loose, [
        "v1:container.projects.locations.clusters.create",
        "v1:container.projects.locations.clusters.update",
        "v1:container.projects.locations.clusters.setMaintenancePolicy",
        "v1:container.projects.locations.clusters.delete",
    ])


@pytest.mark.parametrize("beta", [False, True])
def test_node_pool_requests(loose, module_runner, beta):
    networks = create_fabric(loose, ["vpc%d" % i for i in range(1, 9)])
    assert module_runner(gke_cluster.main, cluster_args(loose, private_nodes=None, master_ipv4_cidr=None))["changed"]
    loose.clear_log()
    extra = dict(host_maintenance_interval="PERIODIC") if beta else {}
    assert module_runner(gpu_nodepool.main, pool_args(loose, networks, **extra))["changed"] is True
    updated = pool_args(loose, networks, node_labels={"team": "infra"}, node_taints=[], disk_size_gb=300,
                        node_count=3, auto_upgrade=True, gvnic=False, image_type="COS_CONTAINERD",
                        node_version="1.32.2-gke.1489001", **extra)
    # gvnic: false is refused with gpudirect; the in-place gVNIC update is exercised without it
    updated.pop("gpudirect")
    result = module_runner(gpu_nodepool.main, updated)
    assert result.get("changed") is True, result
    scaled = dict(updated, enable_autoscaling=True, min_count=1, max_count=4)
    scaled.pop("node_count")
    assert module_runner(gpu_nodepool.main, scaled)["changed"] is True
    recreated = dict(scaled, reservation_affinity=dict(consume="any"), recreate=True)
    assert module_runner(gpu_nodepool.main, recreated)["changes"][0]["action"] == "recreate"
    shared = loose.module_args(project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="shared",
                               machine_type="a2-highgpu-2g", accelerator_type="nvidia-tesla-a100",
                               accelerator_count=2, gpu_partition_size="1g.5gb", node_count=1,
                               gpu_sharing=dict(strategy="time-sharing", max_shared_clients_per_gpu=2),
                               gpu_driver_version="disabled", **extra)
    assert module_runner(gpu_nodepool.main, shared)["changed"] is True
    moved = module_runner(gpu_nodepool.main, dict(shared, node_locations=[ZONE, "us-central1-b"]))
    assert moved["changes"][0]["fields"] == ["node_locations"]
    absent = loose.module_args(project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="gpu",
                               state="absent", **extra)
    assert module_runner(gpu_nodepool.main, absent)["changed"] is True
    version = "v1beta1" if beta else "v1"
    sent = assert_all_valid(loose, ["%s:container.projects.locations.clusters.nodePools.%s" % (version, method)
                                    for method in ("create", "update", "setSize", "setAutoscaling",
                                                   "setManagement", "delete")])
    if beta:
        creates = [r for r in sent if r["method"] == "POST" and r["path"].endswith("/nodePools")]
        assert creates and all("hostMaintenancePolicy" in r["body"]["nodePool"]["config"] for r in creates)
    else:
        assert all(r["path"].startswith("/v1/") for r in sent)


def test_render_mode_files_validate(tmp_path, module_runner):
    render = str(tmp_path)
    common = dict(project="demo-project", render_dir=render)
    module_runner(gke_cluster.main, dict(common, name="demo", location=REGION, node_locations=[ZONE],
                                         cluster_version=VERSION, gpudirect="tcpxo"))
    networks = [dict(network="demo-gpunic-%d" % i, subnetwork="demo-gpunic-%d-sub" % i) for i in range(1, 9)]
    module_runner(gpu_nodepool.main, dict(common, provider="gke", cluster="demo", location=REGION, name="gpu",
                                          node_locations=[ZONE], machine_type="a3-megagpu-8g", gpudirect="tcpxo",
                                          node_count=2, additional_node_networks=networks,
                                          host_maintenance_interval="PERIODIC",
                                          reservation_affinity=dict(consume="specific", reservation="res")))
    files = sorted((tmp_path / "requests").iterdir())
    assert [f.name.split("-", 2)[1] for f in files] == ["gcp", "gcp"]
    for path in files:
        request = json.loads(path.read_text())
        api_path = request["url"].split("container.googleapis.com/", 1)[1]
        assert problems_of(request["method"], api_path, request["body"]) == [], path.name


# ------------------------------------------------------------------ GPUDirect-RDMA (compute v1 + container v1)

def compute_mutations(double):
    return [r for r in double.mutating_requests() if r["path"].startswith("/compute/")
            and not r["path"].endswith("/wait")]


def test_rdma_fabric_and_pool_requests(loose, module_runner):
    from ansible_collections.gpu_ops.cluster.plugins.modules import gke_multinetwork
    roce_zone = "us-central1-b"
    fabrics = {}
    for profile in ("rdma", "rdma-a4x"):
        result = module_runner(gke_multinetwork.main, loose.module_args(
            project=PROJECT, cluster="c-%s" % profile, location=REGION, zone=roce_zone, gpudirect=profile,
            cidr_base="10.%d.0.0/16" % len(fabrics)))
        assert result["changed"] is True, result
        fabrics[profile] = result["additional_node_networks"]
    compute = discovery("compute", "v1")
    inserts = compute_mutations(loose)
    for request in inserts:
        problems = compute.validate_request(request["method"], request["path"].lstrip("/"), request["body"],
                                            request["query"])
        assert problems == [], "%s %s: %s" % (request["method"], request["path"], problems)
    profiles = [r["body"]["networkProfile"] for r in inserts if "networkProfile" in (r["body"] or {})]
    # compute v1 Network.networkProfile: "projects/{project_id}/global/networkProfiles/{network_profile_name}"
    assert profiles == ["projects/%s/global/networkProfiles/%s-vpc-roce" % (PROJECT, roce_zone)] * 2

    assert module_runner(gke_cluster.main, cluster_args(loose, private_nodes=None, master_ipv4_cidr=None,
                                                        node_locations=[roce_zone], gpudirect="rdma"))["changed"]
    loose.clear_log()
    for profile, machine in (("rdma", "a3-ultragpu-8g"), ("rdma-a4x", "a4x-highgpu-4g")):
        args = pool_args(loose, fabrics[profile], name="gpu-%s" % profile.replace("-", ""), gpudirect=profile,
                         machine_type=machine, node_locations=[roce_zone], disk_type=None,
                         placement_policy=dict(type="COMPACT"))
        assert module_runner(gpu_nodepool.main, args)["changed"] is True
    sent = assert_all_valid(loose, ["v1:container.projects.locations.clusters.nodePools.create"])
    configs = [r["body"]["nodePool"]["config"] for r in sent]
    assert configs[0]["gpuDirectConfig"] == {"gpuDirectStrategy": "RDMA"} and "gpuDirectConfig" not in configs[1]
    assert configs[1]["diskType"] == "hyperdisk-balanced"


def test_managed_accelerator_network_profile_body_validates():
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool
    body = nodepool.create_body(dict(name="gpu", machine_type="a4-highgpu-8g", gpudirect="rdma", node_count=2,
                                     image_type="COS_CONTAINERD", accelerator_network_profile="auto",
                                     node_version="1.34.1-gke.1829001", gpu_driver_version="latest"))
    assert body["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
    assert body["config"]["labels"] == {"cloud.google.com/gke-networking-dra-driver": "true"}
    assert discovery("container", "v1").validate("NodePool", body) == []
