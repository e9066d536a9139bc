# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad input to gke_cluster, gpu_nodepool (provider gke) and gke_multinetwork, one table.

Every case runs the real module against the GCP double, which already holds a multi-networking
cluster, an eight-network GPU NIC fabric, and clusters that are wrong in one way each (no
multi-networking, Autopilot, a release channel, an old node version). Each case must fail, name the
option in its message, and leave the double without a single mutating request.

A module-level test: one table across three modules and their entry points, so it stays in
tests/unit/plugins/modules/ rather than at the mirrored path of one engine. The harness is
tests/unit/plugins/module_utils/_gcp/gke_harness.py.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_cluster, gke_multinetwork, gpu_nodepool
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import (  # pylint: disable=unused-import
    PROJECT,
    REGION,
    ZONE,
    create_cluster_directly,
    create_fabric,
    module_runner,
)

VERSION = "1.32.2-gke.1489001"
NETS = [dict(network="vpc%d" % i, subnetwork="vpc%d-sub" % i) for i in range(1, 9)]


@pytest.fixture(scope="module")
def world():
    with GcpDouble(latency=0.0) as double:
        create_fabric(double, ["vpc%d" % i for i in range(1, 10)])
        create_cluster_directly(double, "a3mega", locations=[ZONE])
        create_cluster_directly(double, "plain", networkConfig=dict(datapathProvider="ADVANCED_DATAPATH"))
        create_cluster_directly(double, "auto", autopilot=dict(enabled=True), nodePools=None)
        create_cluster_directly(double, "channel", releaseChannel=dict(channel="REGULAR"))
        create_cluster_directly(double, "oldnodes")
        double.edit("v1/projects/%s/locations/%s/clusters/oldnodes" % (PROJECT, REGION),
                    {"currentNodeVersion": "1.32.1-gke.1000000"})
        double.clear_log()
        yield double


def cluster(**extra):
    args = dict(name="a3mega", location=REGION, node_locations=[ZONE], cluster_version=VERSION, gpudirect="tcpxo")
    args.update(extra)
    return gke_cluster.main, args


def pool(**extra):
    args = dict(provider="gke", cluster="a3mega", location=REGION, name="gpu", node_locations=[ZONE],
                machine_type="a3-megagpu-8g", gpudirect="tcpxo", node_count=2, additional_node_networks=NETS)
    args.update(extra)
    return gpu_nodepool.main, args


def fabric(**extra):
    args = dict(cluster="a3mega", location=REGION, gpudirect="tcpxo")
    args.update(extra)
    return gke_multinetwork.main, args


NINE = NETS + [dict(network="vpc9", subnetwork="vpc9-sub")]

CASES = [
    # --- gke_cluster
    ("cluster: invalid name", cluster(name="A3_Mega"), "name"),
    ("cluster: location neither zone nor region", cluster(location="uscentral"), "location"),
    ("cluster: node location in another region", cluster(node_locations=["europe-west4-a"]), "node_locations"),
    ("cluster: version neither pinned in full nor an alias", cluster(cluster_version="1.32.2"), "cluster_version"),
    ("cluster: version alias not a minor", cluster(cluster_version="1"), "cluster_version"),
    ("cluster: version under the TCPXO minimum", cluster(cluster_version="1.30.3-gke.1000000"), "cluster_version"),
    ("cluster: minor older than any TCPXO minor", cluster(cluster_version="1.27.16-gke.100"), "cluster_version"),
    ("cluster: version under the TCPX minimum", cluster(gpudirect="tcpx", cluster_version="1.29.1-gke.1"),
     "cluster_version"),
    ("cluster: gpudirect without a version", cluster(cluster_version=None), "cluster_version"),
    ("cluster: Autopilot requested", cluster(autopilot=True), "autopilot"),
    ("cluster: existing Autopilot cluster", cluster(name="auto"), "autopilot"),
    ("cluster: existing cluster without multi-networking", cluster(name="plain", node_locations=None),
     "multi_networking"),
    ("cluster: multi-networking on the legacy datapath", cluster(datapath="legacy", gpudirect=None), "datapath"),
    ("cluster: gpudirect without multi-networking", cluster(multi_networking=False), "multi_networking"),
    ("cluster: pod CIDR with host bits", cluster(ip_allocation=dict(cluster_ipv4_cidr="10.4.0.1/14")),
     "ip_allocation.cluster_ipv4_cidr"),
    ("cluster: malformed service CIDR", cluster(ip_allocation=dict(services_ipv4_cidr="10.300.0.0/20")),
     "ip_allocation.services_ipv4_cidr"),
    ("cluster: overlapping pod and service CIDRs",
     cluster(ip_allocation=dict(cluster_ipv4_cidr="10.0.0.0/14", services_ipv4_cidr="10.1.0.0/20")),
     "ip_allocation.cluster_ipv4_cidr"),
    ("cluster: range name and CIDR for pods",
     cluster(ip_allocation=dict(cluster_secondary_range_name="pods", cluster_ipv4_cidr="10.0.0.0/14")),
     "ip_allocation.cluster_ipv4_cidr"),
    ("cluster: pinned on a channel without exclusion", cluster(release_channel="regular"), "maintenance_exclusion"),
    ("cluster: node auto-upgrade off on a channel",
     cluster(release_channel="stable", default_node_pool=dict(auto_upgrade=False),
             maintenance_exclusion=dict(start_time="2026-01-01T00:00:00Z")), "default_node_pool.auto_upgrade"),
    ("cluster: exclusion start is not a time", cluster(release_channel="regular", maintenance_exclusion=dict(
        start_time="tomorrow")), "maintenance_exclusion.start_time"),
    ("cluster: exclusion ends before it starts", cluster(maintenance_exclusion=dict(
        start_time="2026-02-01T00:00:00Z", end_time="2026-01-01T00:00:00Z", scope="no_upgrades")),
     "maintenance_exclusion.end_time"),
    ("cluster: scope not allowed without a channel", cluster(maintenance_exclusion=dict(
        start_time="2026-02-01T00:00:00Z")), "maintenance_exclusion.scope"),
    ("cluster: control plane range not a /28", cluster(private_nodes=True, master_ipv4_cidr="172.16.0.0/24"),
     "master_ipv4_cidr"),
    ("cluster: malformed authorized network", cluster(master_authorized_networks=[dict(cidr_block="1.2.3/24")]),
     "master_authorized_networks[0].cidr_block"),
    ("cluster: more authorized networks than a public cluster may have",
     cluster(master_authorized_networks=[dict(cidr_block="10.%d.0.0/16" % i) for i in range(51)]),
     "master_authorized_networks"),
    ("cluster: more authorized networks than a private cluster may have",
     cluster(private_nodes=True, master_ipv4_cidr="172.16.0.0/28",
             master_authorized_networks=[dict(cidr_block="10.%d.%d.0/24" % (i // 200, i % 200)) for i in range(101)]),
     "master_authorized_networks"),
    ("cluster: machine type with an underscore", cluster(default_node_pool=dict(machine_type="e2_standard_8")),
     "default_node_pool.machine_type"),
    ("cluster: machine type without a family", cluster(default_node_pool=dict(machine_type="large")),
     "default_node_pool.machine_type"),
    ("cluster: disk type that is no disk family", cluster(default_node_pool=dict(disk_type="ssd")),
     "default_node_pool.disk_type"),
    ("cluster: image type with spaces", cluster(default_node_pool=dict(image_type="COS CONTAINERD")),
     "default_node_pool.image_type"),
    ("cluster: well-formed region that does not exist",
     cluster(name="newcluster", location="us-central9", node_locations=None), "location"),
    ("cluster: version GKE does not offer", cluster(name="newcluster", cluster_version="1.32.9-gke.100"),
     "cluster_version"),
    ("cluster: image type GKE does not offer", cluster(name="newcluster", default_node_pool=dict(
        image_type="WINDOWS_SAC_CONTAINERD")), "default_node_pool.image_type"),
    ("cluster: node location that does not exist", cluster(name="newcluster", node_locations=["us-central1-z"]),
     "node_locations"),
    # --- gpu_nodepool (gke)
    ("pool: A3 High machine for TCPXO", pool(machine_type="a3-highgpu-8g"), "machine_type"),
    ("pool: A3 Mega machine for TCPX", pool(gpudirect="tcpx", additional_node_networks=NETS[:4]), "machine_type"),
    ("pool: four networks for TCPXO", pool(additional_node_networks=NETS[:4]), "additional_node_networks"),
    ("pool: extra gVNIC network on A3 Mega (7 of 8 GPUs)", pool(additional_node_networks=NINE),
     "additional_node_networks"),
    ("pool: same network twice", pool(additional_node_networks=NETS[:7] + [NETS[0]]),
     "additional_node_networks[7].network"),
    ("pool: malformed network name", pool(additional_node_networks=[dict(network="VPC_1", subnetwork="s")] + NETS[1:]),
     "additional_node_networks[0].network"),
    ("pool: GPU sharing with GPUDirect", pool(gpu_sharing=dict(strategy="mps", max_shared_clients_per_gpu=4)),
     "gpu_sharing"),
    ("pool: specific reservation without a name", pool(reservation_affinity=dict(consume="specific")),
     "reservation_affinity.reservation"),
    ("pool: reservation name with consume any", pool(reservation_affinity=dict(consume="any", reservation="r1")),
     "reservation_affinity.reservation"),
    ("pool: compact placement across zones", pool(node_locations=None, placement_policy=dict(type="COMPACT")),
     "placement_policy"),
    ("pool: gVNIC on Ubuntu", pool(image_type="UBUNTU_CONTAINERD"), "image_type"),
    ("pool: gVNIC off with GPUDirect", pool(gvnic=False), "gvnic"),
    ("pool: one shared client", pool(gpudirect=None, additional_node_networks=None, machine_type="g2-standard-8",
                                     accelerator_type="nvidia-l4", accelerator_count=1,
                                     gpu_sharing=dict(strategy="time-sharing", max_shared_clients_per_gpu=1)),
     "gpu_sharing.max_shared_clients_per_gpu"),
    ("pool: MIG size the GPU does not have", pool(gpudirect=None, additional_node_networks=None,
                                                  machine_type="a2-highgpu-1g", accelerator_type="nvidia-tesla-a100",
                                                  accelerator_count=1, gpu_partition_size="2g.20gb"),
     "gpu_partition_size"),
    ("pool: zero GPUs", pool(gpudirect=None, additional_node_networks=None, machine_type="g2-standard-8",
                             accelerator_type="nvidia-l4", accelerator_count=0), "accelerator_count"),
    ("pool: malformed taint", pool(node_taints=["dedicated=gpu"]), "node_taints"),
    ("pool: invalid label key", pool(node_labels={"bad key": "x"}), "node_labels"),
    ("pool: autoscaling bounds reversed", pool(enable_autoscaling=True, min_count=5, max_count=2), "min_count"),
    ("pool: node version under the TCPXO minimum", pool(node_version="1.31.1-gke.1000000"), "node_version"),
    ("pool: AKS option with provider gke", pool(vm_size="Standard_ND96asr_v4"), "vm_size"),
    ("pool: short OAuth scope", pool(oauth_scopes=["cloud-platform"]), "oauth_scopes"),
    ("pool: boot disk too small", pool(disk_size_gb=5), "disk_size_gb"),
    ("pool: no node count for a new pool", pool(node_count=None), "node_count"),
    ("pool: cluster without multi-networking", pool(cluster="plain"), "additional_node_networks"),
    ("pool: Autopilot cluster", pool(cluster="auto"), "cluster"),
    ("pool: missing cluster", pool(cluster="nothere"), "cluster"),
    ("pool: auto-upgrade off on a release channel", pool(cluster="channel"), "auto_upgrade"),
    ("pool: cluster nodes under the TCPXO minimum", pool(cluster="oldnodes"), "node_version"),
    ("pool: GPU network that does not exist",
     pool(additional_node_networks=NETS[:7] + [dict(network="vpc-missing", subnetwork="vpc8-sub")]),
     "additional_node_networks[7].network"),
    ("pool: subnet of another network",
     pool(additional_node_networks=NETS[:7] + [dict(network="vpc8", subnetwork="vpc9-sub")]),
     "additional_node_networks[7].subnetwork"),
    ("pool: primary network as a GPU network",
     pool(additional_node_networks=NETS[:7] + [dict(network="default", subnetwork="vpc8-sub")]),
     "additional_node_networks[7].network"),
    ("pool: machine type in capitals", pool(machine_type="A3-MEGAGPU-8G"), "machine_type"),
    ("pool: disk type that is no disk family", pool(disk_type="ssd-fast"), "disk_type"),
    ("pool: image type with a hyphen", pool(image_type="cos-containerd"), "image_type"),
    ("pool: accelerator type with a space", pool(gpudirect=None, additional_node_networks=None,
                                                 machine_type="n1-standard-8", accelerator_type="nvidia tesla t4",
                                                 accelerator_count=1), "accelerator_type"),
    ("pool: machine type the zone does not offer", pool(gpudirect=None, additional_node_networks=None,
                                                        machine_type="g2-standard-7", accelerator_type="nvidia-l4",
                                                        accelerator_count=1), "machine_type"),
    ("pool: more cards than an instance takes", pool(gpudirect=None, additional_node_networks=None,
                                                     machine_type="n1-standard-8", accelerator_type="nvidia-tesla-t4",
                                                     accelerator_count=8), "accelerator_count"),
    ("pool: disk type the zone does not offer", pool(disk_type="pd-turbo"), "disk_type"),
    ("pool: image type GKE does not offer", pool(image_type="COS"), "image_type"),
    ("pool: node zone that does not exist", pool(node_locations=["us-central1-z"]), "node_locations"),
    ("pool: node version GKE does not offer", pool(node_version="1.32.3-gke.1"), "node_version"),
    # --- gke_multinetwork
    ("fabric: MTU below 1300", fabric(mtu=1200), "mtu"),
    ("fabric: MTU above 8896", fabric(mtu=9000), "mtu"),
    ("fabric: network count not matching the profile", fabric(nic_count=4), "nic_count"),
    ("fabric: networks list not matching the profile", fabric(gpudirect="tcpx", networks=[{}] * 8), "networks"),
    ("fabric: malformed subnet CIDR", fabric(gpudirect="tcpx", networks=[dict(cidr="192.168.0.0/33"), {}, {}, {}]),
     "networks[0].cidr"),
    ("fabric: overlapping subnet CIDRs",
     fabric(gpudirect="tcpx", networks=[dict(cidr="10.0.0.0/20"), dict(cidr="10.0.8.0/24"), {}, {}]), "cidr"),
    ("fabric: location neither zone nor region", fabric(location="uscentral"), "location"),
    ("fabric: firewall open to the world", fabric(firewall_source_ranges=["0.0.0.0/0"]), "firewall_source_ranges"),
    ("fabric: no operation may run", fabric(concurrency=0), "concurrency"),
    ("fabric: more operations than the largest fabric has", fabric(concurrency=100), "concurrency"),
    ("fabric: well-formed region that does not exist", fabric(cluster="newfabric", location="us-central9"),
     "location"),
    ("fabric: well-formed zone that does not exist", fabric(cluster="newfabric", location="us-central1-z"),
     "location"),
]


def test_the_table_is_large_enough():
    assert len(CASES) >= 30
    assert len(set(c[0] for c in CASES)) == len(CASES)


@pytest.mark.parametrize("title,case,field", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_before_any_change(world, module_runner, title, case, field):
    main, args = case
    args = dict((k, v) for k, v in args.items() if v is not None)
    args.update(world.module_args(project=PROJECT))
    world.clear_log()
    result = module_runner(main, args)
    assert result.get("failed") is True, "%s: accepted: %r" % (title, result)
    assert field in result["msg"], "%s: the message does not name %s: %s" % (title, field, result["msg"])
    assert world.mutating_requests() == [], "%s: a mutating request was sent" % title
    assert world.token not in repr(result)
