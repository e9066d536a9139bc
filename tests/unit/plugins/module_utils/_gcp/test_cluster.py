# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE cluster engine (plugins/module_utils/_gcp/cluster.py) against the GCP double, run through gke_cluster's
main(): create, no-op re-run, sparse updates, immutable fields, check mode, diff."""

from __future__ import annotations

import glob
import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_cluster
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import (  # pylint: disable=unused-import
    PROJECT,
    REGION,
    ZONE,
    gcp,
    module_runner,
    mutations,
)

VERSION = "1.31.1-gke.2008000"
NEWER = "1.32.2-gke.1489001"
CLUSTER_PATH = "/v1/projects/%s/locations/%s/clusters/a3mega" % (PROJECT, REGION)


def cluster_args(double, **extra):
    args = double.module_args(project=PROJECT, name="a3mega", location=REGION, node_locations=[ZONE],
                              cluster_version=VERSION, gpudirect="tcpxo",
                              ip_allocation=dict(cluster_ipv4_cidr="10.8.0.0/14", services_ipv4_cidr="10.12.0.0/20"))
    args.update(extra)
    return args


def stored(double):
    return double.resource("v1/projects/%s/locations/%s/clusters/a3mega" % (PROJECT, REGION))


def test_create_then_rerun_sends_nothing(gcp, module_runner):
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result["changed"] is True, result
    assert result["changes"] == [dict(action="create", kind="cluster", name="a3mega")]
    cluster = stored(gcp)
    assert cluster["status"] == "RUNNING"
    assert cluster["networkConfig"]["enableMultiNetworking"] is True
    assert cluster["networkConfig"]["datapathProvider"] == "ADVANCED_DATAPATH"
    assert cluster["ipAllocationPolicy"]["useIpAliases"] is True
    assert cluster["currentMasterVersion"] == VERSION
    assert cluster["releaseChannel"] == {"channel": "UNSPECIFIED"}
    pool = cluster["nodePools"][0]
    assert pool["management"]["autoUpgrade"] is False, "a pinned version without a channel keeps node auto-upgrade off"
    assert result["multi_networking"] is True and result["version"] == VERSION
    creates = [r for r in mutations(gcp) if r["method"] == "POST"]
    assert len(creates) == 1 and creates[0]["body"]["cluster"]["initialClusterVersion"] == VERSION

    gcp.clear_log()
    again = module_runner(gke_cluster.main, cluster_args(gcp))
    assert again["changed"] is False and again["changes"] == []
    assert mutations(gcp) == []
    assert again["cluster"]["name"] == "a3mega"


def test_check_mode_and_diff_send_nothing(gcp, module_runner):
    result = module_runner(gke_cluster.main, cluster_args(gcp), check=True, diff=True)
    assert result["changed"] is True
    assert result["changes"][0]["action"] == "create"
    after = json.loads(result["diff"][0]["after"])
    assert after["networkConfig"]["enableMultiNetworking"] is True
    assert result["diff"][0]["before"] == ""
    assert mutations(gcp) == []
    assert stored(gcp) is None


def test_sparse_updates_use_the_update_methods(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.clear_log()
    wanted = cluster_args(
        gcp, cluster_version=NEWER, master_authorized_networks=[dict(cidr_block="203.0.113.0/24")],
        maintenance_exclusion=dict(name="hold", start_time="2026-01-01T00:00:00Z", end_time="2026-01-20T00:00:00Z",
                                   scope="no_upgrades"))
    preview = module_runner(gke_cluster.main, wanted, check=True, diff=True)
    assert preview["changed"] is True and mutations(gcp) == []
    fields = preview["changes"][0]["fields"]
    assert set(fields) == {"cluster_version", "master_authorized_networks", "maintenance_exclusion"}
    before, after = json.loads(preview["diff"][0]["before"]), json.loads(preview["diff"][0]["after"])
    assert before["cluster_version"] == VERSION and after["cluster_version"] == NEWER
    assert "network" not in after, "the diff shows only what changes"

    result = module_runner(gke_cluster.main, wanted)
    assert result["changed"] is True
    sent = mutations(gcp)
    # the control plane first, one desired* field per clusters.update, then setMaintenancePolicy
    assert [r["method"] for r in sent] == ["PUT", "PUT", "POST"]
    assert sent[0]["body"] == {"update": {"desiredMasterVersion": NEWER}}
    assert list(sent[1]["body"]["update"]) == ["desiredMasterAuthorizedNetworksConfig"]
    assert sent[2]["path"].endswith(":setMaintenancePolicy")
    window = sent[2]["body"]["maintenancePolicy"]["window"]["maintenanceExclusions"]["hold"]
    assert window == {"startTime": "2026-01-01T00:00:00Z", "endTime": "2026-01-20T00:00:00Z",
                      "maintenanceExclusionOptions": {"scope": "NO_UPGRADES"}}
    cluster = stored(gcp)
    assert cluster["currentMasterVersion"] == NEWER
    assert cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [{"cidrBlock": "203.0.113.0/24"}]

    gcp.clear_log()
    assert module_runner(gke_cluster.main, wanted)["changed"] is False
    assert mutations(gcp) == []


def test_release_channel_change_and_exclusion_merge(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    first = module_runner(gke_cluster.main, cluster_args(gcp, maintenance_exclusion=dict(
        name="first", start_time="2026-02-01T00:00:00Z", end_time="2026-02-10T00:00:00Z", scope="no_upgrades")))
    assert first["changes"][0]["fields"] == ["maintenance_exclusion"]
    version = stored(gcp)["maintenancePolicy"]["resourceVersion"]
    gcp.clear_log()
    wanted = cluster_args(gcp, release_channel="regular", maintenance_exclusion=dict(
        name="pin", start_time="2026-03-01T00:00:00+00:00", scope="no_minor_or_node_upgrades"))
    result = module_runner(gke_cluster.main, wanted)
    assert result["changed"] is True, result
    sent = mutations(gcp)
    assert sent[0]["body"] == {"update": {"desiredReleaseChannel": {"channel": "REGULAR"}}}
    exclusions = sent[1]["body"]["maintenancePolicy"]["window"]["maintenanceExclusions"]
    assert set(exclusions) == {"first", "pin"}, "other exclusions are kept"
    assert exclusions["pin"]["maintenanceExclusionOptions"] == {"scope": "NO_MINOR_OR_NODE_UPGRADES",
                                                                "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}
    assert sent[1]["body"]["maintenancePolicy"]["resourceVersion"] == version, "the read resourceVersion guards the write"
    gcp.clear_log()
    assert module_runner(gke_cluster.main, wanted)["changed"] is False
    assert mutations(gcp) == []


def test_unset_release_channel_is_left_alone(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.edit(CLUSTER_PATH, {"releaseChannel": {"channel": "STABLE"}})
    gcp.clear_log()
    args = cluster_args(gcp)
    args.pop("cluster_version")
    args.pop("gpudirect")
    assert module_runner(gke_cluster.main, args)["changed"] is False
    assert mutations(gcp) == []


def test_immutable_change_is_refused_then_recreated(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.clear_log()
    changed = cluster_args(gcp, ip_allocation=dict(cluster_ipv4_cidr="10.16.0.0/14", services_ipv4_cidr="10.12.0.0/20"),
                           network="other-net")
    refused = module_runner(gke_cluster.main, changed)
    assert refused["failed"] is True
    assert "ip_allocation.cluster_ipv4_cidr" in refused["msg"] and "network" in refused["msg"]
    assert "recreate: true" in refused["msg"]
    assert mutations(gcp) == []

    preview = module_runner(gke_cluster.main, dict(changed, recreate=True), check=True)
    assert preview["changes"][0]["action"] == "recreate" and mutations(gcp) == []

    result = module_runner(gke_cluster.main, dict(changed, recreate=True))
    assert result["changed"] is True and result["changes"][0]["action"] == "recreate"
    assert [r["method"] for r in mutations(gcp)] == ["DELETE", "POST"]
    cluster = stored(gcp)
    assert cluster["ipAllocationPolicy"]["clusterIpv4CidrBlock"] == "10.16.0.0/14"
    assert len(gcp.state(PROJECT)["clusters"]) == 1


def test_existing_cluster_without_multi_networking_is_an_error(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.edit(CLUSTER_PATH, {"networkConfig": {"datapathProvider": "ADVANCED_DATAPATH"}})
    gcp.clear_log()
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result["failed"] is True
    assert result["msg"].startswith("multi_networking:")
    assert "only be turned on when a cluster is created" in result["msg"]
    assert mutations(gcp) == []


def test_existing_autopilot_cluster_is_refused(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.edit(CLUSTER_PATH, {"autopilot": {"enabled": True}})
    gcp.clear_log()
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result["failed"] is True and result["msg"].startswith("autopilot:")
    assert mutations(gcp) == []


def test_existing_cluster_below_the_gpudirect_minimum(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    # an older patch than the pin: the control plane is upgraded to the pin (which passed the gate)
    gcp.edit(CLUSTER_PATH, {"currentMasterVersion": "1.31.1-gke.1000000"})
    gcp.clear_log()
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result["changed"] is True
    assert mutations(gcp)[0]["body"] == {"update": {"desiredMasterVersion": VERSION}}
    # a newer minor than the pin, but below that minor's minimum: GKE does not downgrade, so it is an error
    gcp.edit(CLUSTER_PATH, {"currentMasterVersion": "1.32.1-gke.1000000"})
    gcp.clear_log()
    refused = module_runner(gke_cluster.main, cluster_args(gcp))
    assert refused["failed"] is True
    assert refused["msg"].startswith("cluster_version:") and "1.32.2-gke.1489001" in refused["msg"]
    assert mutations(gcp) == []


def test_newer_cluster_than_the_pin_is_left_alone(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.edit(CLUSTER_PATH, {"currentMasterVersion": NEWER})
    gcp.clear_log()
    result = module_runner(gke_cluster.main, cluster_args(gcp))
    assert result["changed"] is False and mutations(gcp) == []


def test_absent_deletes_once(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.clear_log()
    args = dict(project=PROJECT, name="a3mega", location=REGION, state="absent")
    args.update(gcp.module_args(project=PROJECT))
    preview = module_runner(gke_cluster.main, args, check=True)
    assert preview["changed"] is True and mutations(gcp) == []
    result = module_runner(gke_cluster.main, args)
    assert result["changed"] is True and result["cluster"] == {}
    assert [r["method"] for r in mutations(gcp)] == ["DELETE"]
    assert stored(gcp) is None
    assert module_runner(gke_cluster.main, args)["changed"] is False


def test_render_mode_records_the_create_without_credentials(tmp_path, module_runner):
    args = dict(project="demo-project", name="demo", location=ZONE, cluster_version=NEWER, gpudirect="tcpxo",
                render_dir=str(tmp_path), auth_kind="serviceaccount")
    result = module_runner(gke_cluster.main, args)
    assert result["changed"] is True
    files = sorted(glob.glob(os.path.join(str(tmp_path), "requests", "*.json")))
    assert len(files) == 1 and "-gcp-post-" in files[0]
    with open(files[0]) as handle:
        request = json.load(handle)
    assert request["url"] == "https://container.googleapis.com/v1/projects/demo-project/locations/%s/clusters" % ZONE
    assert request["body"]["cluster"]["networkConfig"]["enableMultiNetworking"] is True
    assert result["cluster"]["name"] == "demo"


@pytest.mark.parametrize("channel,exclusion,auto_upgrade", [
    ("unspecified", None, False),
    ("regular", dict(start_time="2026-01-01T00:00:00Z"), True),
])
def test_pin_strategy(gcp, module_runner, channel, exclusion, auto_upgrade):
    args = cluster_args(gcp, release_channel=channel)
    if exclusion:
        args["maintenance_exclusion"] = exclusion
    result = module_runner(gke_cluster.main, args)
    assert result["changed"] is True, result
    body = mutations(gcp)[0]["body"]["cluster"]
    assert body["nodePools"][0]["management"]["autoUpgrade"] is auto_upgrade
    assert body["releaseChannel"]["channel"] == channel.upper()
    if exclusion:
        assert body["maintenancePolicy"]["window"]["maintenanceExclusions"]["gpu-ops-pin"][
            "maintenanceExclusionOptions"]["scope"] == "NO_MINOR_OR_NODE_UPGRADES"


# ---------------------------------------------------------------- preflight reads


def server_config_reads(double):
    return sum(n for path, n in double.read_counts().items() if path.endswith("/serverConfig"))


def test_create_reads_the_server_config_once_and_a_no_op_rerun_reads_only_the_cluster(gcp, module_runner):
    assert module_runner(gke_cluster.main, cluster_args(gcp))["changed"]
    assert server_config_reads(gcp) == 1
    zone_reads = [p for p in gcp.read_counts() if p.endswith("/zones/%s" % ZONE)]
    assert len(zone_reads) == 1, "node_locations are read once before the create"
    gcp.clear_log()
    assert not module_runner(gke_cluster.main, cluster_args(gcp))["changed"]
    assert gcp.read_counts() == {CLUSTER_PATH: 1}


@pytest.mark.parametrize("extra,option,words", [
    (dict(location="us-central9", node_locations=None), "location", "location us-central9 does not exist"),
    (dict(cluster_version="1.32.9-gke.100"), "cluster_version", "not a control-plane version GKE offers"),
    (dict(default_node_pool=dict(image_type="WINDOWS_SAC_CONTAINERD")), "default_node_pool.image_type",
     "not an image type GKE offers"),
    (dict(node_locations=["us-central1-z"]), "node_locations", "zone us-central1-z does not exist"),
])
def test_what_the_service_does_not_offer_is_refused_before_the_create(gcp, module_runner, extra, option, words):
    for check in (True, False):
        result = module_runner(gke_cluster.main, cluster_args(gcp, **extra), check=check)
        assert result["failed"] and "%s: " % option in result["msg"] and words in result["msg"], result["msg"]
    assert mutations(gcp) == [] and stored(gcp) is None


def test_an_upgrade_to_a_version_not_offered_is_refused_before_any_update(gcp, module_runner):
    module_runner(gke_cluster.main, cluster_args(gcp))
    gcp.clear_log()
    result = module_runner(gke_cluster.main, cluster_args(gcp, cluster_version="1.33.0-gke.1"))
    assert result["failed"] and "cluster_version: 1.33.0-gke.1 is not a control-plane version" in result["msg"]
    assert mutations(gcp) == [] and stored(gcp)["currentMasterVersion"] == VERSION


def test_authorized_networks_limit_depends_on_private_nodes(gcp, module_runner):
    blocks = [dict(cidr_block="10.%d.0.0/16" % i) for i in range(51)]
    result = module_runner(gke_cluster.main, cluster_args(gcp, master_authorized_networks=blocks))
    assert result["failed"] and "master_authorized_networks: lists 51 CIDR blocks; GKE allows at most 50" in \
        result["msg"]
    private = cluster_args(gcp, master_authorized_networks=blocks, private_nodes=True, master_ipv4_cidr="172.16.0.0/28")
    assert module_runner(gke_cluster.main, private, check=True)["changed"]
    result = module_runner(gke_cluster.main, dict(private, master_authorized_networks=blocks * 2))
    assert result["failed"] and "at most 100" in result["msg"]
    assert mutations(gcp) == []


@pytest.mark.parametrize("profile", ["rdma", "rdma-a4x"])
def test_rdma_profiles_get_the_same_cluster_as_tcpx(gcp, module_runner, profile):
    # multi-networking + Dataplane V2 + a pinned version, as for TCPX/TCPXO; no RDMA gate is verified, so an old
    # version the service offers passes
    result = module_runner(gke_cluster.main, cluster_args(gcp, gpudirect=profile, cluster_version="1.29.6-gke.1254000"))
    assert result["changed"] is True, result
    config = stored(gcp)["networkConfig"]
    assert config["enableMultiNetworking"] is True and config["datapathProvider"] == "ADVANCED_DATAPATH"
    refused = module_runner(gke_cluster.main, cluster_args(gcp, name="other", gpudirect=profile,
                                                           multi_networking=False))
    assert refused.get("failed") and "gpudirect=%s needs multi_networking: true" % profile in refused["msg"]
