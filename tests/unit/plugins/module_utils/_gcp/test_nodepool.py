# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE node-pool engine (plugins/module_utils/_gcp/nodepool.py) against the GCP double, run through
gpu_nodepool's main() with provider gke."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_cluster, gpu_nodepool
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import (  # pylint: disable=unused-import
    PROJECT,
    REGION,
    ZONE,
    create_fabric,
    gcp,
    module_runner,
    mutations,
)

VERSION = "1.32.2-gke.1489001"
POOL = "v1/projects/%s/locations/%s/clusters/a3mega/nodePools/gpu" % (PROJECT, REGION)


@pytest.fixture
def cluster(gcp, module_runner):
    """A multi-networking cluster and eight GPU NIC networks; the request log starts empty."""
    networks = create_fabric(gcp, ["vpc%d" % i for i in range(1, 9)])
    result = module_runner(gke_cluster.main, gcp.module_args(
        project=PROJECT, name="a3mega", location=REGION, node_locations=[ZONE], cluster_version=VERSION,
        gpudirect="tcpxo"))
    assert result["changed"] is True, result
    gcp.clear_log()
    return networks


def pool_args(double, networks, **extra):
    args = double.module_args(project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="gpu",
                              node_locations=[ZONE], machine_type="a3-megagpu-8g", gpudirect="tcpxo", node_count=2,
                              gpu_driver_version="latest", additional_node_networks=networks,
                              placement_policy=dict(type="COMPACT"),
                              reservation_affinity=dict(consume="specific", reservation="a3mega-res"))
    args.update(extra)
    return args


def test_create_tcpxo_pool_then_rerun_sends_nothing(gcp, module_runner, cluster):
    args = pool_args(gcp, cluster, host_maintenance_interval="PERIODIC", node_labels={"team": "ml"},
                     node_taints=["dedicated=gpu:NoSchedule"])
    result = module_runner(gpu_nodepool.main, args)
    assert result["changed"] is True, result
    assert result["expected_resources"] == {"nvidia.com/gpu": 8}
    sent = mutations(gcp)
    assert len(sent) == 1
    assert sent[0]["path"] == "/v1beta1/projects/%s/locations/%s/clusters/a3mega/nodePools" % (PROJECT, REGION)
    body = sent[0]["body"]["nodePool"]
    config = body["config"]
    assert config["accelerators"] == [{"acceleratorType": "nvidia-h100-mega-80gb", "acceleratorCount": "8",
                                       "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]
    assert config["gvnic"] == {"enabled": True}
    assert config["hostMaintenancePolicy"] == {"maintenanceInterval": "PERIODIC"}
    assert config["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                             "key": "compute.googleapis.com/reservation-name",
                                             "values": ["a3mega-res"]}
    assert config["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NO_SCHEDULE"}]
    assert body["placementPolicy"] == {"type": "COMPACT"}
    assert body["management"] == {"autoUpgrade": False, "autoRepair": True}
    assert [n["network"] for n in body["networkConfig"]["additionalNodeNetworkConfigs"]] == \
        ["vpc%d" % i for i in range(1, 9)]
    reads = [r["path"] for r in gcp.requests if r["method"] == "GET" and "/operations/" not in r["path"]]
    assert any("/compute/v1/projects/%s/global/networks/vpc8" % PROJECT in p for p in reads), \
        "the GPU NIC networks are checked before the create"
    assert result["node_pool"]["status"] == "RUNNING"

    gcp.clear_log()
    again = module_runner(gpu_nodepool.main, args)
    assert again["changed"] is False and again["changes"] == []
    assert mutations(gcp) == []
    assert all(r["path"].startswith(("/v1beta1/", "/v1/projects/%s/locations/%s/clusters/a3mega" % (PROJECT, REGION)))
               for r in gcp.requests)


def test_v1_unless_host_maintenance_interval(gcp, module_runner, cluster):
    result = module_runner(gpu_nodepool.main, pool_args(gcp, cluster))
    assert result["changed"] is True
    assert all(r["path"].startswith("/v1/") for r in gcp.requests if not r["path"].startswith("/compute/"))
    assert "hostMaintenancePolicy" not in mutations(gcp)[0]["body"]["nodePool"]["config"]


def test_sparse_updates_one_request_each(gcp, module_runner, cluster):
    module_runner(gpu_nodepool.main, pool_args(gcp, cluster, node_labels={"a": "1", "b": "2"}))
    gcp.clear_log()
    wanted = pool_args(gcp, cluster, node_labels={"a": "1"}, node_taints=["gpu=true:NoExecute"], node_count=4,
                       auto_repair=False, disk_size_gb=500)
    preview = module_runner(gpu_nodepool.main, wanted, check=True, diff=True)
    assert preview["changed"] is True and mutations(gcp) == []
    assert preview["changes"] == [dict(action="update", kind="nodePool", name="gpu",
                                       fields=["auto_repair", "disk_size_gb", "node_count", "node_labels",
                                               "node_taints"])]
    before = json.loads(preview["diff"][0]["before"])
    after = json.loads(preview["diff"][0]["after"])
    assert before["node_labels"] == ["a=1", "b=2"] and after["node_labels"] == ["a=1"]
    assert before["node_count"] == 2 and after["node_count"] == 4
    assert "machine_type" not in after

    result = module_runner(gpu_nodepool.main, wanted)
    assert result["changed"] is True
    sent = [(r["method"], r["path"].rsplit("/", 1)[-1], r["body"]) for r in mutations(gcp)]
    assert sent == [
        ("POST", "gpu:setManagement", {"management": {"autoUpgrade": False, "autoRepair": False}}),
        ("PUT", "gpu", {"labels": {"labels": {"a": "1"}}}),
        ("PUT", "gpu", {"taints": {"taints": [{"key": "gpu", "value": "true", "effect": "NO_EXECUTE"}]}}),
        ("PUT", "gpu", {"diskSizeGb": "500"}),
        ("POST", "gpu:setSize", {"nodeCount": 4}),
    ]
    stored = gcp.resource(POOL)
    assert stored["config"]["labels"] == {"a": "1"}
    gcp.clear_log()
    assert module_runner(gpu_nodepool.main, wanted)["changed"] is False
    assert mutations(gcp) == []


def test_autoscaling_replaces_node_count(gcp, module_runner, cluster):
    module_runner(gpu_nodepool.main, pool_args(gcp, cluster))
    gcp.clear_log()
    wanted = pool_args(gcp, cluster, node_count=None, enable_autoscaling=True, min_count=0, max_count=4)
    result = module_runner(gpu_nodepool.main, wanted)
    assert result["changes"][0]["fields"] == ["autoscaling.enabled", "autoscaling.max_count", "autoscaling.min_count"]
    assert [r["body"] for r in mutations(gcp)] == [
        {"autoscaling": {"enabled": True, "minNodeCount": 0, "maxNodeCount": 4}}]
    gcp.clear_log()
    assert module_runner(gpu_nodepool.main, wanted)["changed"] is False
    assert mutations(gcp) == []


def test_immutable_change_is_refused_then_recreated(gcp, module_runner, cluster):
    module_runner(gpu_nodepool.main, pool_args(gcp, cluster))
    gcp.clear_log()
    changed = pool_args(gcp, cluster, reservation_affinity=dict(consume="any"), gpu_driver_version="default",
                        node_taints=["x:NoSchedule"])
    refused = module_runner(gpu_nodepool.main, changed)
    assert refused["failed"] is True
    assert "gpu_driver_version" in refused["msg"] and "reservation_affinity" in refused["msg"]
    assert "recreate: true" in refused["msg"]
    assert mutations(gcp) == []

    result = module_runner(gpu_nodepool.main, dict(changed, recreate=True))
    assert result["changed"] is True and result["changes"][0]["action"] == "recreate"
    assert [r["method"] for r in mutations(gcp)] == ["DELETE", "POST"]
    pools = gcp.state(PROJECT)["nodePools"]
    assert sorted(p["selfLink"].rsplit("/", 1)[-1] for p in pools) == ["default-pool", "gpu"]
    stored = gcp.resource(POOL)
    assert stored["config"]["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    gcp.clear_log()
    assert module_runner(gpu_nodepool.main, dict(changed, recreate=True))["changed"] is False
    assert mutations(gcp) == []


def test_missing_network_is_found_before_the_create(gcp, module_runner, cluster):
    networks = list(cluster)
    networks[5] = dict(network="vpc6", subnetwork="nope-sub")
    result = module_runner(gpu_nodepool.main, pool_args(gcp, networks))
    assert result["failed"] is True
    assert result["msg"].startswith("additional_node_networks[5].subnetwork:")
    assert mutations(gcp) == []


def test_check_mode_create_does_not_look_for_the_networks(gcp, module_runner, cluster):
    """In a check-mode run of a play the GPU NIC networks of earlier tasks do not exist yet: the preflight skips them."""
    networks = [dict(network="later%d" % i, subnetwork="later%d-sub" % i) for i in range(1, 9)]
    preview = module_runner(gpu_nodepool.main, pool_args(gcp, networks), check=True)
    assert preview["changed"] is True and preview["changes"][0]["action"] == "create", preview
    assert preview["expected_resources"] == {"nvidia.com/gpu": 8}
    assert not [r for r in gcp.requests if "networks/" in r["path"]]
    # what the zone offers is still read in check mode (it does not depend on earlier tasks)
    assert [r["path"].rsplit("/", 2)[-2] for r in gcp.requests if "/zones/" in r["path"]] == [
        "zones", "machineTypes", "acceleratorTypes"]
    assert mutations(gcp) == []


def test_missing_cluster(gcp, module_runner):
    networks = [dict(network="vpc%d" % i, subnetwork="vpc%d-sub" % i) for i in range(1, 9)]
    result = module_runner(gpu_nodepool.main, pool_args(gcp, networks))
    assert result["failed"] is True and result["msg"].startswith("cluster:")
    absent = module_runner(gpu_nodepool.main, pool_args(gcp, networks, state="absent"))
    assert absent["changed"] is False
    assert mutations(gcp) == []


def test_absent(gcp, module_runner, cluster):
    module_runner(gpu_nodepool.main, pool_args(gcp, cluster))
    gcp.clear_log()
    args = gcp.module_args(project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="gpu",
                           state="absent")
    preview = module_runner(gpu_nodepool.main, args, check=True)
    assert preview["changed"] is True and mutations(gcp) == []
    result = module_runner(gpu_nodepool.main, args)
    assert result["changed"] is True and result["node_pool"] == {}
    assert [r["method"] for r in mutations(gcp)] == ["DELETE"]
    assert gcp.resource(POOL) is None
    assert module_runner(gpu_nodepool.main, args)["changed"] is False


@pytest.mark.parametrize("extra,expected", [
    (dict(machine_type="g2-standard-8", accelerator_type="nvidia-l4", accelerator_count=1,
          gpu_sharing=dict(strategy="time-sharing", max_shared_clients_per_gpu=4)), {"nvidia.com/gpu": 4}),
    (dict(machine_type="a2-highgpu-2g", accelerator_type="nvidia-tesla-a100", accelerator_count=2,
          gpu_partition_size="1g.5gb"), {"nvidia.com/gpu": 14}),
    (dict(machine_type="a2-highgpu-2g", accelerator_type="nvidia-tesla-a100", accelerator_count=2,
          gpu_partition_size="3g.20gb", gpu_sharing=dict(strategy="time-sharing", max_shared_clients_per_gpu=3)),
     {"nvidia.com/gpu": 12}),
    (dict(machine_type="a3-highgpu-8g"), {"nvidia.com/gpu": 8}),
])
def test_expected_resources_and_sharing_bodies(gcp, module_runner, cluster, extra, expected):
    args = gcp.module_args(project=PROJECT, provider="gke", cluster="a3mega", location=REGION, name="shared",
                           node_count=1, gpu_driver_version="default")
    args.update(extra)
    result = module_runner(gpu_nodepool.main, args, check=True)
    assert result["changed"] is True, result
    assert result["expected_resources"] == expected
    assert mutations(gcp) == []
    created = module_runner(gpu_nodepool.main, args)
    accel = mutations(gcp)[0]["body"]["nodePool"]["config"]["accelerators"][0]
    assert created["expected_resources"] == expected
    if extra.get("gpu_sharing"):
        assert accel["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu":
                                             str(extra["gpu_sharing"]["max_shared_clients_per_gpu"])}
    if extra.get("gpu_partition_size"):
        assert accel["gpuPartitionSize"] == extra["gpu_partition_size"]


def test_render_mode_plans_against_an_empty_project(tmp_path, module_runner):
    networks = [dict(network="demo-gpunet-%d" % i, subnetwork="demo-gpunet-%d-sub" % i) for i in range(1, 9)]
    args = dict(project="demo-project", provider="gke", cluster="demo", location=REGION, name="gpu",
                node_locations=[ZONE], machine_type="a3-megagpu-8g", gpudirect="tcpxo", node_count=2,
                additional_node_networks=networks, host_maintenance_interval="PERIODIC", render_dir=str(tmp_path))
    result = module_runner(gpu_nodepool.main, args)
    assert result["changed"] is True
    files = sorted((tmp_path / "requests").iterdir())
    assert len(files) == 1
    request = json.loads(files[0].read_text())
    assert request["url"].startswith("https://container.googleapis.com/v1beta1/projects/demo-project/")
    assert result["node_pool"]["name"] == "gpu"
    assert result["expected_resources"] == {"nvidia.com/gpu": 8}


# ---------------------------------------------------------------- preflight reads of what the zone offers


def offer_reads(double):
    return sorted(p.split("/projects/%s/" % PROJECT, 1)[1] for p in double.read_counts()
                  if "/zones/" in p or p.endswith("/serverConfig"))


def test_a_create_reads_each_offer_once_and_a_no_op_rerun_reads_none(gcp, module_runner, cluster):
    assert module_runner(gpu_nodepool.main, pool_args(gcp, cluster))["changed"]
    assert offer_reads(gcp) == ["locations/%s/serverConfig" % REGION, "zones/%s" % ZONE,
                                "zones/%s/acceleratorTypes/nvidia-h100-mega-80gb" % ZONE,
                                "zones/%s/machineTypes/a3-megagpu-8g" % ZONE]
    assert all(n == 1 for p, n in gcp.read_counts().items() if "/zones/" in p or p.endswith("/serverConfig"))
    gcp.clear_log()
    again = module_runner(gpu_nodepool.main, pool_args(gcp, cluster))
    assert again["changed"] is False and mutations(gcp) == [] and offer_reads(gcp) == []


@pytest.mark.parametrize("withdraw,extra,expected", [
    (("machineTypes", "a3-megagpu-8g"), {}, "machine_type: machine type a3-megagpu-8g in zone us-central1-c does"),
    (("acceleratorTypes", "nvidia-h100-mega-80gb"), {},
     "accelerator_type: accelerator type nvidia-h100-mega-80gb in zone us-central1-c does not exist"),
    (None, dict(disk_type="hyperdisk-turbo"), "disk_type: disk type hyperdisk-turbo in zone us-central1-c"),
    (None, dict(node_locations=["us-central1-z"], placement_policy=None), "node_locations: zone us-central1-z does"),
    (None, dict(image_type="COS_CONTAINERD_ARM"), "image_type: COS_CONTAINERD_ARM is not an image type GKE offers"),
    (None, dict(node_version="1.32.3-gke.1"), "node_version: 1.32.3-gke.1 is not a node version GKE offers"),
])
def test_what_the_zone_does_not_offer_is_refused_before_the_create(gcp, module_runner, cluster, withdraw, extra,
                                                                   expected):
    if withdraw:
        gcp.catalog.withdraw(ZONE, *withdraw)
    for check in (True, False):
        result = module_runner(gpu_nodepool.main, pool_args(gcp, cluster, **extra), check=check)
        assert result.get("failed") and expected in result["msg"], result["msg"]
    assert mutations(gcp) == [] and gcp.resource(POOL) is None


def test_more_cards_than_an_instance_takes(gcp, module_runner, cluster):
    args = pool_args(gcp, None, gpudirect=None, machine_type="n1-standard-8", accelerator_type="nvidia-tesla-t4",
                     accelerator_count=8, placement_policy=None, reservation_affinity=None)
    result = module_runner(gpu_nodepool.main, dict((k, v) for k, v in args.items() if v is not None))
    expected = "accelerator_count: 8 cards of nvidia-tesla-t4: zone us-central1-c allows at most 4 per instance"
    assert result.get("failed") and expected in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_a_new_zone_that_lacks_the_machine_is_refused_before_the_update(gcp, module_runner, cluster):
    assert module_runner(gpu_nodepool.main, pool_args(gcp, cluster, placement_policy=None))["changed"]
    gcp.catalog.withdraw("us-central1-b", "machineTypes", "a3-megagpu-8g")
    gcp.clear_log()
    result = module_runner(gpu_nodepool.main, pool_args(gcp, cluster, placement_policy=None,
                                                        node_locations=[ZONE, "us-central1-b"]))
    assert result.get("failed") and "machine type a3-megagpu-8g in zone us-central1-b" in result["msg"]
    assert mutations(gcp) == []


# ------------------------------------------------------------------ GPUDirect-RDMA pools (A3 Ultra / A4 / A4X)

ROCE_ZONE = "us-central1-b"


@pytest.fixture
def rdma_cluster(gcp, module_runner):
    """A multi-networking cluster in ROCE_ZONE and the RDMA fabric of rdma (8 NICs) and rdma-a4x (4 NICs)."""
    from ansible_collections.gpu_ops.cluster.plugins.modules import gke_multinetwork
    fabrics = {}
    for profile, prefix in (("rdma", "u"), ("rdma-a4x", "x")):
        fabric = module_runner(gke_multinetwork.main, gcp.module_args(
            project=PROJECT, cluster="a3mega", location=REGION, zone=ROCE_ZONE, gpudirect=profile, name_prefix=prefix,
            cidr_base="10.%d.0.0/16" % (1 if profile == "rdma" else 2)))
        assert fabric["changed"] is True, fabric
        fabrics[profile] = fabric["additional_node_networks"]
    result = module_runner(gke_cluster.main, gcp.module_args(
        project=PROJECT, name="a3mega", location=REGION, node_locations=[ROCE_ZONE], cluster_version=VERSION,
        gpudirect="rdma"))
    assert result["changed"] is True, result
    gcp.clear_log()
    return fabrics


def rdma_args(double, fabrics, profile="rdma", **extra):
    options = dict(gpudirect=profile, machine_type="a4-highgpu-8g" if profile == "rdma" else "a4x-highgpu-4g",
                   node_locations=[ROCE_ZONE])
    options.update(extra)
    return pool_args(double, fabrics[profile], **options)


def test_rdma_pool_sets_gpudirect_rdma_networks_placement_reservation_driver(gcp, module_runner, rdma_cluster):
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster))
    assert result["changed"] is True, result
    body = mutations(gcp)[-1]["body"]["nodePool"]
    config = body["config"]
    assert config["gpuDirectConfig"] == {"gpuDirectStrategy": "RDMA"}
    assert config["accelerators"] == [{"acceleratorType": "nvidia-b200", "acceleratorCount": "8",
                                       "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]
    networks = body["networkConfig"]["additionalNodeNetworkConfigs"]
    assert networks[0] == {"network": "u-gvnic", "subnetwork": "u-gvnic-sub"}
    assert [n["subnetwork"] for n in networks[1:]] == ["u-rdma-sub-%d" % i for i in range(8)]
    assert body["placementPolicy"] == {"type": "COMPACT"} and config["reservationAffinity"]["values"] == ["a3mega-res"]
    # the shared RoCE network is read once, each subnet once
    reads = [r["path"] for r in gcp.requests if r["method"] == "GET" and "/global/networks/" in r["path"]]
    assert sorted(reads) == sorted(set(reads)) and len(reads) == 2

    gcp.clear_log()
    again = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster))
    assert again["changed"] is False and mutations(gcp) == []


def test_rdma_a4x_pool_gets_hyperdisk_and_no_strategy(gcp, module_runner, rdma_cluster):
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x"))
    assert result["changed"] is True, result
    config = mutations(gcp)[-1]["body"]["nodePool"]["config"]
    assert config["diskType"] == "hyperdisk-balanced" and "gpuDirectConfig" not in config
    assert config["accelerators"][0]["acceleratorType"] == "nvidia-gb200" and config["machineType"] == "a4x-highgpu-4g"
    assert result["expected_resources"] == {"nvidia.com/gpu": 4}
    gcp.clear_log()
    assert module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x"))["changed"] is False


A4X_POLICY = dict(type="COMPACT", policy_name="a4x-1x72", accelerator_topology="1x72")


def test_a4x_workload_policy_is_created_before_the_pool_and_kept(gcp, module_runner, rdma_cluster):
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x", placement_policy=A4X_POLICY))
    assert result["changed"] is True, result
    sent = mutations(gcp)
    policy = next(r for r in sent if r["path"].endswith("/regions/us-central1/resourcePolicies"))
    assert policy["body"] == {"name": "a4x-1x72", "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}}
    assert sent.index(policy) < len(sent) - 1
    assert sent[-1]["body"]["nodePool"]["placementPolicy"] == {"type": "COMPACT", "policyName": "a4x-1x72"}
    gcp.clear_log()
    again = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x", placement_policy=A4X_POLICY))
    assert again["changed"] is False and mutations(gcp) == []


def test_an_existing_workload_policy_of_another_topology_is_refused(gcp, module_runner, rdma_cluster):
    other = dict(A4X_POLICY, accelerator_topology="1x64")
    first = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x", placement_policy=other))
    assert first["changed"] is True
    module_runner(gpu_nodepool.main, dict(rdma_args(gcp, rdma_cluster, profile="rdma-a4x"), state="absent"))
    gcp.clear_log()
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x", placement_policy=A4X_POLICY))
    assert result.get("failed") and "resource policy a4x-1x72 in us-central1 has accelerator topology 1x64, not 1x72" in result["msg"]
    assert [r for r in mutations(gcp) if "/nodePools" in r["path"]] == []


@pytest.mark.parametrize("placement, words", [
    (dict(policy_name="a4x", accelerator_topology="72"), "'72' is no accelerator topology"),
    (dict(accelerator_topology="1x72"), "a workload policy needs a name"),
])
def test_a_bad_workload_policy_is_refused_before_any_request(gcp, module_runner, rdma_cluster, placement, words):
    gcp.clear_log()
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x", placement_policy=placement))
    assert result.get("failed") and "placement_policy.accelerator_topology: " in result["msg"] and words in result["msg"]
    assert mutations(gcp) == []


@pytest.mark.parametrize("profile, extra, option, words", [
    ("rdma-a4x", dict(disk_type="pd-balanced"), "disk_type", "takes Hyperdisk only"),
    ("rdma", dict(machine_type="a3-megagpu-8g"), "machine_type", "gpudirect=rdma runs on a3-ultragpu-8g, a4-highgpu-8g"),
    ("rdma", dict(gpu_partition_size="1g.18gb"), "gpu_partition_size", "MIG partitions are not used"),
    ("rdma", dict(gpu_sharing=dict(strategy="mps", max_shared_clients_per_gpu=2)), "gpu_sharing", "mutually exclusive"),
    ("rdma", dict(gpu_sharing=dict(strategy="time-sharing", max_shared_clients_per_gpu=2)), "gpu_sharing",
     "mutually exclusive"),
    ("rdma-a4x", dict(machine_type="a4-highgpu-8g"), "machine_type", "gpudirect=rdma-a4x runs on a4x-highgpu-4g"),
    ("rdma", dict(accelerator_network_profile="auto"), "accelerator_network_profile", "must not be set too"),
    ("rdma", dict(accelerator_network_profile="auto", additional_node_networks=[], node_version="1.33.5-gke.100"),
     "accelerator_network_profile", "needs GKE 1.34.1-gke.1829001"),
])
def test_rdma_conflicts_are_refused_before_any_request(gcp, module_runner, rdma_cluster, profile, extra, option, words):
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile=profile, **extra))
    assert result.get("failed") and option in result["msg"] and words in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_an_a3_mega_machine_on_an_rdma_profile_is_one_problem(gcp, module_runner, rdma_cluster):
    """The machine type is the fault: its nine RDMA networks are not also called an extra gVNIC network on A3 Mega."""
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, machine_type="a3-megagpu-8g"))
    assert result.get("failed") and [p.split(":")[0] for p in result["problems"]] == ["machine_type"], result
    # the same nine networks on a TCPXO pool of that machine are the A3 Mega trap
    result = module_runner(gpu_nodepool.main, pool_args(gcp, rdma_cluster["rdma"], gpudirect="tcpxo",
                                                        machine_type="a3-megagpu-8g", node_locations=[ROCE_ZONE]))
    assert result.get("failed") and "takes a GPU NIC's PCI slot" in result["msg"], result
    assert mutations(gcp) == []


def test_rdma_networks_must_share_one_roce_network(gcp, module_runner, rdma_cluster):
    networks = list(rdma_cluster["rdma"])
    networks[3] = dict(networks[3], network="u-gvnic")
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, dict(rdma_cluster, rdma=networks)))
    assert result.get("failed") and "must all name the one RoCE network" in result["msg"]
    assert gcp.requests == []


def test_rdma_tcpx_fabric_is_refused_before_the_create(gcp, module_runner, rdma_cluster):
    # a one-VPC-per-NIC fabric has no RoCE network profile
    plain = create_fabric(gcp, ["vpc%d" % i for i in range(1, 10)])
    rdma = [plain[0]] + [dict(network=plain[1]["network"], subnetwork=p["subnetwork"]) for p in plain[1:]]
    gcp.clear_log()
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, dict(rdma_cluster, rdma=rdma)))
    assert result.get("failed") and "was not created with a RoCE network profile" in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_rdma_pool_outside_the_roce_zone_is_refused_before_the_create(gcp, module_runner, rdma_cluster):
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, node_locations=["us-central1-c"]))
    assert result.get("failed") and "restricted to zone us-central1-b" in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_a4x_not_offered_in_the_zone_is_refused_before_the_create(gcp, module_runner, rdma_cluster):
    gcp.catalog.withdraw(ROCE_ZONE, "machineTypes", "a4x-highgpu-4g")
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, profile="rdma-a4x"))
    assert result.get("failed") and "a4x-highgpu-4g" in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_managed_accelerator_network_profile_above_the_floor(gcp, module_runner, rdma_cluster):
    result = module_runner(gpu_nodepool.main, rdma_args(gcp, rdma_cluster, accelerator_network_profile="auto",
                                                        additional_node_networks=[], node_version=None))
    # the cluster runs 1.32: below the managed profile's floor, refused before the create
    assert result.get("failed") and "needs GKE 1.34.1-gke.1829001" in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_managed_accelerator_network_profile_needs_dataplane_v2(gcp, module_runner):
    created = module_runner(gke_cluster.main, gcp.module_args(
        project=PROJECT, name="a3mega", location=REGION, node_locations=[ROCE_ZONE], cluster_version=VERSION,
        multi_networking=False, datapath="legacy"))
    assert created["changed"] is True, created
    gcp.clear_log()
    result = module_runner(gpu_nodepool.main, pool_args(gcp, [], gpudirect="rdma", machine_type="a4-highgpu-8g",
                                                        node_locations=[ROCE_ZONE], accelerator_network_profile="auto",
                                                        additional_node_networks=None))
    assert result.get("failed") and "does not run Dataplane V2" in result["msg"], result["msg"]
    assert mutations(gcp) == []


def test_managed_accelerator_network_profile_on_a_new_enough_cluster(module_runner):
    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble
    floor = "1.34.1-gke.1829001"
    with GcpDouble(gke_versions=[floor, VERSION]) as double:
        created = module_runner(gke_cluster.main, double.module_args(
            project=PROJECT, name="a3mega", location=REGION, node_locations=[ROCE_ZONE], cluster_version=floor,
            gpudirect="rdma"))
        assert created["changed"] is True, created
        args = pool_args(double, [], gpudirect="rdma", machine_type="a4-highgpu-8g", node_locations=[ROCE_ZONE],
                         accelerator_network_profile="auto", additional_node_networks=None)
        result = module_runner(gpu_nodepool.main, args)
        assert result["changed"] is True, result
        body = [r for r in double.mutating_requests() if r["path"].endswith("/nodePools")][0]["body"]["nodePool"]
        assert body["networkConfig"] == {"acceleratorNetworkProfile": "auto"}
        assert body["config"]["labels"] == {"cloud.google.com/gke-networking-dra-driver": "true"}
        assert body["config"]["gpuDirectConfig"] == {"gpuDirectStrategy": "RDMA"}
        double.clear_log()
        assert module_runner(gpu_nodepool.main, args)["changed"] is False
