# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE multi-networking engine (plugins/module_utils/_gcp/multinetwork.py) against the GCP double, run
in-process through gke_multinetwork's main()."""

from __future__ import annotations

import ipaddress
import json
import os
import re

import pytest

from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.modules import gke_multinetwork
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

PROJECT = "fabric-project"
REGION = "us-central1"
COMPUTE = "compute/v1/projects/%s/" % PROJECT


@pytest.fixture
def double():
    with GcpDouble() as gcp:
        yield gcp


def run(double, capsys, **options):
    args = double.module_args(project=PROJECT, cluster="a3mega", location=REGION, max_retries=4)
    args.update(options)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gke_multinetwork.main()
    return json.loads(capsys.readouterr().out)


def names(double, kind):
    return sorted(item["name"] for item in double.state(PROJECT)[kind])


def counts(double):
    state = double.state(PROJECT)
    return len(state["networks"]), len(state["subnetworks"]), len(state["firewalls"])


# ---------------------------------------------------------------- create / no-op / absent


def test_tcpxo_fabric_is_created_with_everything_later_steps_need(double, capsys):
    result = run(double, capsys, gpudirect="tcpxo")
    nics = gpudirect.profile("tcpxo")["gpu_nic_count"]
    assert result["changed"] and not result.get("failed")
    assert len(result["changes"]) == 3 * nics
    assert counts(double) == (nics, nics, nics)
    state = double.state(PROJECT)
    for index, net in enumerate(sorted(state["networks"], key=lambda n: int(n["name"].rsplit("-", 1)[1]))):
        assert net["name"] == "a3mega-gpunic-%d" % (index + 1)
        assert net["mtu"] == gpudirect.DEFAULT_MTU and net["autoCreateSubnetworks"] is False
    subnets = dict((s["name"], s) for s in state["subnetworks"])
    assert subnets["a3mega-gpunic-1-sub"]["ipCidrRange"] == "192.168.0.0/24"
    assert subnets["a3mega-gpunic-8-sub"]["ipCidrRange"] == "192.168.7.0/24"
    assert subnets["a3mega-gpunic-8-sub"]["network"].endswith("/global/networks/a3mega-gpunic-8")
    rules = dict((f["name"], f) for f in state["firewalls"])
    rule = rules["a3mega-gpunic-3-internal"]
    assert rule["sourceRanges"] == ["192.168.2.0/24"]
    assert sorted(a["IPProtocol"] for a in rule["allowed"]) == ["icmp", "tcp", "udp"]
    assert rule["network"].endswith("/a3mega-gpunic-3") and rule["direction"] == "INGRESS"

    assert result["additional_node_networks"][0] == {"network": "a3mega-gpunic-1", "subnetwork": "a3mega-gpunic-1-sub"}
    assert result["k8s_network_names"] == ["vpc%d" % i for i in range(1, nics + 1)]
    kinds = [(m["kind"], m["metadata"]["name"]) for m in result["manifests"]]
    assert kinds[:2] == [("GKENetworkParamSet", "vpc1"), ("Network", "vpc1")] and len(kinds) == 2 * nics
    param_set, network = result["manifests"][0], result["manifests"][1]
    assert param_set["apiVersion"] == "networking.gke.io/v1"
    assert param_set["spec"] == {"vpc": "a3mega-gpunic-1", "vpcSubnet": "a3mega-gpunic-1-sub",
                                 "deviceMode": "NetDevice"}
    assert network["spec"] == {"type": "Device", "parametersRef": {"group": "networking.gke.io",
                                                                   "kind": "GKENetworkParamSet", "name": "vpc1"}}
    interfaces = json.loads(result["pod_interfaces_annotation"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert interfaces[-1] == {"interfaceName": "eth8", "network": "vpc8"}
    assert result["pod_annotations"]["networking.gke.io/default-interface"] == "eth0"
    assert result["drift"] == []


def test_networks_first_then_subnets_and_firewalls_together(double, capsys):
    double.set_latency(0.05)
    run(double, capsys, gpudirect="tcpx")
    posts = [r for r in double.requests if r["method"] == "POST" and not r["path"].endswith("/wait")]
    kinds = [r["path"].rsplit("/", 1)[1] for r in posts]
    assert kinds[:4] == ["networks"] * 4, "all networks are inserted before any subnet or firewall"
    assert sorted(kinds[4:]) == ["firewalls"] * 4 + ["subnetworks"] * 4


def test_concurrency_one_is_the_sequential_loop(double, capsys):
    run(double, capsys, gpudirect="tcpx", concurrency=1)
    mutating = [r for r in double.requests if r["method"] == "POST"]
    # every insert is followed by its own wait before the next insert
    assert [r["path"].endswith("/wait") for r in mutating] == [False, True] * 12


def test_rerun_is_a_no_op_that_reads_each_resource_once(double, capsys):
    run(double, capsys, gpudirect="tcpxo")
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpxo")
    assert not result["changed"] and result["changes"] == []
    assert double.mutating_requests() == []
    reads = double.read_counts()
    assert len(reads) == 24 and set(reads.values()) == {1}
    assert len(double.requests) == 24


def test_check_mode_and_diff_send_nothing_mutating(double, capsys):
    result = run(double, capsys, gpudirect="tcpx", _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"] and len(result["changes"]) == 12
    assert double.mutating_requests() == []
    assert counts(double) == (0, 0, 0)
    first = result["diff"][0]
    assert first["before"] == "" and '"mtu": 8244' in first["after"]
    assert result["additional_node_networks"][3]["network"] == "a3mega-gpunic-4"


def test_absent_deletes_in_reverse_dependency_order(double, capsys):
    run(double, capsys, gpudirect="tcpx")
    double.set_latency(0.05)
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx", state="absent")
    assert result["changed"] and len(result["changes"]) == 12
    assert counts(double) == (0, 0, 0)
    deletes = [r for r in double.requests if r["method"] == "DELETE"]
    for nic in range(1, 5):
        order = [r["seq"] for r in deletes if "gpunic-%d" % nic in r["path"]]
        network_seq = [r["seq"] for r in deletes if r["path"].endswith("/networks/a3mega-gpunic-%d" % nic)][0]
        assert max(order) == network_seq and len(order) == 3
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx", state="absent")
    assert not result["changed"] and double.mutating_requests() == []


def test_absent_in_check_mode(double, capsys):
    run(double, capsys, gpudirect="tcpx")
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx", state="absent", _ansible_check_mode=True)
    assert result["changed"] and {c["action"] for c in result["changes"]} == {"delete"}
    assert double.mutating_requests() == [] and counts(double) == (4, 4, 4)


def test_absent_refuses_when_another_resource_uses_a_network(double, capsys):
    run(double, capsys, gpudirect="tcpx")
    gcp = GcpSession(**double.module_args(project=PROJECT))
    rule = {"name": "ssh", "network": "global/networks/a3mega-gpunic-2", "allowed": [{"IPProtocol": "tcp",
                                                                                      "ports": ["22"]}],
            "sourceRanges": ["10.0.0.0/8"]}
    gcp.wait_compute_operation(gcp.post(gcp.compute_url("global/firewalls"), rule))
    result = run(double, capsys, gpudirect="tcpx", state="absent")
    assert result["failed"]
    assert "a3mega-gpunic-2" in result["msg"] and "ssh" in result["msg"]
    assert "a3mega-gpunic-2" in names(double, "networks") and len(names(double, "networks")) == 1


# ---------------------------------------------------------------- drift


def test_drift_is_reported_and_fixed_where_the_api_allows(double, capsys):
    run(double, capsys, gpudirect="tcpx")
    double.edit(COMPUTE + "global/firewalls/a3mega-gpunic-1-internal",
                {"sourceRanges": ["0.0.0.0/0"], "allowed": [{"IPProtocol": "all"}]})
    double.edit(COMPUTE + "global/networks/a3mega-gpunic-2", {"mtu": 1460})
    double.edit(COMPUTE + "regions/%s/subnetworks/a3mega-gpunic-3-sub" % REGION, {"ipCidrRange": "192.168.2.0/25"})
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx", _ansible_diff=True)
    assert result["changed"]
    fields = sorted((d["name"], d["field"], d["fixable"]) for d in result["drift"])
    assert fields == [("a3mega-gpunic-1-internal", "allowed", True), ("a3mega-gpunic-1-internal", "sourceRanges", True),
                      ("a3mega-gpunic-2", "mtu", True), ("a3mega-gpunic-3-sub", "ipCidrRange", True)]
    assert "MTU 1460 differs" in json.dumps(result["warnings"])
    methods = sorted((r["method"], r["path"].rsplit("/", 1)[1]) for r in double.mutating_requests())
    assert methods == [("PATCH", "a3mega-gpunic-1-internal"), ("PATCH", "a3mega-gpunic-2"),
                       ("POST", "expandIpCidrRange")]
    state = double.state(PROJECT)
    rule = [f for f in state["firewalls"] if f["name"] == "a3mega-gpunic-1-internal"][0]
    assert rule["sourceRanges"] == ["192.168.0.0/24"]
    assert sorted(a["IPProtocol"] for a in rule["allowed"]) == ["icmp", "tcp", "udp"]
    assert [n["mtu"] for n in state["networks"] if n["name"] == "a3mega-gpunic-2"] == [8244]
    diff = [d for d in result["diff"] if "firewall" in d["before_header"]][0]
    assert "0.0.0.0/0" in diff["before"] and "192.168.0.0/24" in diff["after"]
    double.clear_log()
    assert not run(double, capsys, gpudirect="tcpx")["changed"]
    assert double.mutating_requests() == []


def test_drift_the_api_cannot_fix_fails_before_any_change(double, capsys):
    run(double, capsys, gpudirect="tcpx")
    double.edit(COMPUTE + "regions/%s/subnetworks/a3mega-gpunic-2-sub" % REGION, {"ipCidrRange": "192.168.0.0/23"})
    double.edit(COMPUTE + "global/firewalls/a3mega-gpunic-1-internal", {"sourceRanges": ["0.0.0.0/0"]})
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx")
    assert result["failed"]
    assert "subnetwork a3mega-gpunic-2-sub: ipCidrRange is \"192.168.0.0/23\", wanted \"192.168.1.0/24\"" in result["msg"]
    assert "expandIpCidrRange" in result["msg"] and "networks[1].cidr" in result["msg"]
    assert double.mutating_requests() == []
    fixable = [d for d in result["drift"] if d["fixable"]]
    assert [d["name"] for d in fixable] == ["a3mega-gpunic-1-internal"]


def test_auto_mode_network_of_the_same_name_is_refused(double, capsys):
    gcp = GcpSession(**double.module_args(project=PROJECT))
    gcp.wait_compute_operation(gcp.post(gcp.compute_url("global/networks"),
                                        {"name": "a3mega-gpunic-1", "autoCreateSubnetworks": True}))
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx")
    assert result["failed"] and "autoCreateSubnetworks" in result["msg"] and "custom-mode" in result["msg"]
    assert double.mutating_requests() == []


# ---------------------------------------------------------------- options


def test_explicit_networks_and_allocation_around_them(double, capsys):
    networks = [{"cidr": "192.168.1.0/24", "name": "gpu-a", "k8s_network": "gpu-a"}, {}, {"mtu": 1500}, {}]
    result = run(double, capsys, nic_count=4, networks=networks, name_prefix="blue")
    assert not result.get("failed"), result.get("msg")
    cidrs = [n["cidr"] for n in result["networks"]]
    assert cidrs == ["192.168.1.0/24", "192.168.0.0/24", "192.168.2.0/24", "192.168.3.0/24"]
    assert [n["network"] for n in result["networks"]] == ["gpu-a", "blue-2", "blue-3", "blue-4"]
    assert result["k8s_network_names"] == ["gpu-a", "vpc2", "vpc3", "vpc4"]
    assert [n["mtu"] for n in result["networks"]] == [8244, 8244, 1500, 8244]
    assert names(double, "networks") == ["blue-2", "blue-3", "blue-4", "gpu-a"]
    assert result["gpudirect"] is None and result["device_mode"] == "NetDevice"
    assert result["pod_interfaces"][1] == {"interfaceName": "eth1", "network": "gpu-a"}


def test_any_source_needs_the_explicit_flag(double, capsys):
    result = run(double, capsys, gpudirect="tcpx", firewall_allow_any_source=True)
    assert not result.get("failed")
    assert {tuple(f["sourceRanges"]) for f in double.state(PROJECT)["firewalls"]} == {("0.0.0.0/0",)}


def test_shared_source_ranges(double, capsys):
    result = run(double, capsys, gpudirect="tcpx", firewall_source_ranges=["192.168.0.0/16"])
    assert not result.get("failed")
    assert {tuple(f["sourceRanges"]) for f in double.state(PROJECT)["firewalls"]} == {("192.168.0.0/16",)}


def test_a_zonal_location_puts_the_subnets_in_its_region(double, capsys):
    result = run(double, capsys, gpudirect="tcpx", location="%s-c" % REGION)
    assert not result.get("failed"), result.get("msg")
    assert result["region"] == REGION
    assert {s["region"].rsplit("/", 1)[-1] for s in double.state(PROJECT)["subnetworks"]} == {REGION}


@pytest.mark.parametrize("old, value", [("region", REGION), ("profile", "tcpx")])
def test_the_names_before_location_and_gpudirect_are_not_options(double, capsys, old, value):
    """0.1.0 was never released with them: ``region`` and ``profile`` are unknown options, nothing is sent."""
    args = double.module_args(project=PROJECT, cluster="a3mega", location=REGION, gpudirect="tcpx")
    args[old] = value
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gke_multinetwork.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] and "Unsupported parameters" in result["msg"] and old in result["msg"]
    assert double.requests == []


@pytest.mark.parametrize("options, option, words", [
    (dict(gpudirect="tcpx", networks=[{"cidr": "10.0.0.0/24"}, {"cidr": "10.0.0.128/25"}, {}, {}]),
     "networks[0].cidr", "overlaps networks[1].cidr"),
    (dict(gpudirect="tcpx", networks=[{"cidr": "10.0.0.1/24"}, {}, {}, {}]), "networks[0].cidr", "not a valid CIDR"),
    (dict(gpudirect="tcpx", networks=[{"cidr": "10.0.300.0/24"}, {}, {}, {}]), "networks[0].cidr", "not a valid CIDR"),
    (dict(gpudirect="tcpx", networks=[{}, {}, {}]), "networks", "gpudirect tcpx has 4 GPU NICs"),
    (dict(gpudirect="tcpx", nic_count=8), "nic_count", "does not match gpudirect tcpx"),
    (dict(nic_count=9), "nic_count", "between 1 and 8"),
    (dict(), "gpudirect", "set one of gpudirect"),
    (dict(gpudirect="tcpxo", mtu=9000), "mtu", "1300-8896"),
    (dict(gpudirect="tcpx", networks=[{"mtu": 1000}, {}, {}, {}]), "networks[0].mtu", "1300-8896"),
    (dict(gpudirect="tcpx", firewall_source_ranges=["0.0.0.0/0"]), "firewall_source_ranges",
     "firewall_allow_any_source"),
    (dict(gpudirect="tcpx", firewall_source_ranges=["10.0.0.0/33"]), "firewall_source_ranges", "not a valid CIDR"),
    (dict(gpudirect="tcpxo", cidr_base="192.168.0.0/22"), "cidr_base", "no room for 8 subnets"),
    (dict(gpudirect="tcpx", cidr_base="192.168.0.0/16", subnet_prefix_length=30), "subnet_prefix_length",
     "between 8 and 29"),
    (dict(gpudirect="tcpx", name_prefix="GPU"), "name_prefix", "not a valid name"),
    (dict(gpudirect="tcpx", networks=[{"name": "x"}, {"name": "x"}, {}, {}]), "networks[].name", "names repeat: x"),
    (dict(gpudirect="tcpx", k8s_network_prefix="VPC_"), "k8s_network_prefix", "Kubernetes object name"),
    (dict(gpudirect="tcpx", location="uscentral"), "location", "neither a region"),
    (dict(gpudirect="tcpx", concurrency=0), "concurrency", "between 1 (one operation at a time) and 24"),
    (dict(gpudirect="tcpx", concurrency=-3), "concurrency", "got -3"),
    (dict(gpudirect="tcpx", concurrency=25), "concurrency", "between 1"),
])
def test_bad_input_is_refused_before_any_request(double, capsys, options, option, words):
    result = run(double, capsys, **options)
    assert result["failed"]
    assert "%s: " % option in result["msg"] and words in result["msg"], result["msg"]
    assert double.requests == []


# ---------------------------------------------------------------- faults


def test_transient_faults_are_retried(double, capsys):
    double.inject("429", method="POST", path="/global/networks$", count=2, retry_after=0)
    double.inject("503", method="GET", path="/subnetworks/", count=3)
    double.inject("reset", method="POST", path="/firewalls$", count=2)
    result = run(double, capsys, gpudirect="tcpx")
    assert not result.get("failed"), result.get("msg")
    assert counts(double) == (4, 4, 4)
    assert double.pending_faults() == []


def test_interrupted_run_converges_on_rerun(double, capsys):
    """Inserts of an earlier run still running (or done) meet 409; the re-run waits for them and converges."""
    gcp = GcpSession(**double.module_args(project=PROJECT))
    # what a run killed half-way leaves: one network done, its subnet and two more networks still being created
    gcp.wait_compute_operation(gcp.post(gcp.compute_url("global/networks"), {
        "name": "a3mega-gpunic-3", "autoCreateSubnetworks": False, "mtu": 8244}))
    double.set_latency(1.5)
    gcp.post(gcp.compute_url("regions/%s/subnetworks" % REGION), {
        "name": "a3mega-gpunic-3-sub", "network": "global/networks/a3mega-gpunic-3", "ipCidrRange": "192.168.2.0/24"})
    gcp.post(gcp.compute_url("global/networks"), dict(name="a3mega-gpunic-1", autoCreateSubnetworks=False, mtu=8244))
    gcp.post(gcp.compute_url("global/networks"), dict(name="a3mega-gpunic-2", autoCreateSubnetworks=False, mtu=1500))
    double.set_latency(0.05)
    result = run(double, capsys, gpudirect="tcpx")
    assert not result.get("failed"), result.get("msg")
    assert counts(double) == (4, 4, 4)
    assert [n["mtu"] for n in double.state(PROJECT)["networks"]] == [8244] * 4
    conflicts = sorted(r["body"]["name"] for r in double.requests if r["status"] == 409)
    assert conflicts == ["a3mega-gpunic-1", "a3mega-gpunic-2", "a3mega-gpunic-3-sub"]
    double.clear_log()
    assert not run(double, capsys, gpudirect="tcpx")["changed"] and double.mutating_requests() == []


def test_operation_error_names_the_resource_and_rerun_converges(double, capsys):
    double.inject("op_error", method="POST", path="/global/firewalls$", count=1, skip=2,
                  message="Quota 'FIREWALLS' exceeded. Limit: 200.0 globally.")
    result = run(double, capsys, gpudirect="tcpx")
    assert result["failed"]
    assert "create firewall a3mega-gpunic-" in result["msg"] and "Quota 'FIREWALLS' exceeded" in result["msg"]
    assert counts(double) == (4, 4, 3)
    result = run(double, capsys, gpudirect="tcpx")
    assert not result.get("failed") and len(result["changes"]) == 1
    assert counts(double) == (4, 4, 4)


# ---------------------------------------------------------------- preflight reads and rollback


def test_apply_reads_the_region_once_before_the_first_write(double, capsys):
    result = run(double, capsys, gpudirect="tcpx")
    assert result["changed"]
    reads = double.read_counts()
    region = "/%sregions/%s" % (COMPUTE, REGION)
    assert reads[region] == 1 and len(reads) == 12 + 1 and sum(reads.values()) == 13
    first_write = min(r["seq"] for r in double.mutating_requests())
    assert [r["seq"] for r in double.requests if r["path"] == region][0] < first_write


def test_a_plan_of_updates_and_creates_checks_the_location_before_its_first_write(double, capsys):
    """A live fabric with one network added and a firewall rule to fix: the same reads before the first write as a
    plan of creates only (the location, here a zone, and its region), once each."""
    location = REGION + "-c"
    run(double, capsys, nic_count=2, location=location)
    double.edit(COMPUTE + "global/firewalls/a3mega-gpunic-1-internal", {"sourceRanges": ["10.9.0.0/16"]})
    double.clear_log()
    result = run(double, capsys, nic_count=3, location=location)
    assert result["changed"]
    writes = double.mutating_requests()
    assert sorted(set(r["method"] for r in writes)) == ["PATCH", "POST"], writes
    first_write = min(r["seq"] for r in writes)
    reads = double.read_counts()
    for path in ("/%sregions/%s" % (COMPUTE, REGION), "/%szones/%s" % (COMPUTE, location)):
        assert reads[path] == 1, (path, reads)
        assert [r["seq"] for r in double.requests if r["path"] == path][0] < first_write, path
    assert counts(double) == (3, 3, 3)


def test_a_plan_of_updates_and_creates_in_a_zone_that_does_not_exist_writes_nothing(double, capsys):
    """The same refusal as a plan of creates only: a live fabric with one network added and a firewall rule to fix,
    asked in a zone that does not exist, fails on the zone before its first PATCH or POST."""
    run(double, capsys, nic_count=2, location=REGION + "-c")
    double.edit(COMPUTE + "global/firewalls/a3mega-gpunic-1-internal", {"sourceRanges": ["10.9.0.0/16"]})
    double.clear_log()
    planned = run(double, capsys, nic_count=3, location=REGION + "-c", _ansible_check_mode=True)
    assert sorted(set(c["action"] for c in planned["changes"])) == ["create", "update"], planned["changes"]
    double.clear_log()
    result = run(double, capsys, nic_count=3, location=REGION + "-z")
    assert result["failed"] and "location: zone %s-z does not exist" % REGION in result["msg"], result["msg"]
    assert double.mutating_requests() == [] and counts(double) == (2, 2, 2)
    assert double.state(PROJECT)["firewalls"][0]["sourceRanges"] == ["10.9.0.0/16"]


@pytest.mark.parametrize("location,what", [("us-central9", "region us-central9"), ("us-central1-z", "zone us-central1-z")])
def test_a_region_or_zone_that_does_not_exist_is_refused_before_any_write(double, capsys, location, what):
    result = run(double, capsys, gpudirect="tcpx", location=location)
    assert result["failed"] and "location: %s does not exist" % what in result["msg"]
    assert double.mutating_requests() == [] and counts(double) == (0, 0, 0)


def test_check_mode_reports_the_missing_region_too(double, capsys):
    result = run(double, capsys, gpudirect="tcpx", location="us-central9", _ansible_check_mode=True)
    assert result["failed"] and "region us-central9 does not exist" in result["msg"]


def test_absent_in_a_region_that_does_not_exist_deletes_nothing(double, capsys):
    run(double, capsys, gpudirect="tcpx")
    double.clear_log()
    result = run(double, capsys, gpudirect="tcpx", location="us-central9", state="absent")
    assert result["failed"] and "location: region us-central9 does not exist" in result["msg"]
    assert double.mutating_requests() == [] and counts(double) == (4, 4, 4)


def test_a_create_refused_as_invalid_rolls_back_what_this_run_created(double, capsys):
    # the second subnet insert is refused as invalid; by then networks, subnets and rules of this run exist
    double.inject("status", status=400, method="POST", path="/subnetworks$", count=1, skip=1,
                  message="Invalid value for field 'resource.ipCidrRange'.")
    result = run(double, capsys, gpudirect="tcpx", concurrency=1)
    assert result["failed"] and re.search(r"create subnetwork a3mega-gpunic-\d-sub failed: HTTP 400", result["msg"])
    assert "rolled back what this run created" in result["msg"]
    assert counts(double) == (0, 0, 0), "nothing this run created is left behind"
    rolled = result["rolled_back"]
    assert len(rolled) == len(set(rolled)) == 4 + 3 + 4
    assert sorted(r.split()[0] for r in rolled) == ["firewall"] * 4 + ["network"] * 4 + ["subnetwork"] * 3
    # leaves go first: a network is only deleted after its subnet and rule (the double refuses otherwise)
    deletes = [r["path"].rsplit("/", 2)[-2] for r in double.mutating_requests() if r["method"] == "DELETE"]
    assert deletes.index("networks") > max(i for i, k in enumerate(deletes) if k != "networks")
    assert not run(double, capsys, gpudirect="tcpx").get("failed")
    assert counts(double) == (4, 4, 4)


def test_rollback_keeps_what_an_earlier_run_created(double, capsys):
    run(double, capsys, gpudirect="tcpx", nic_count=None)
    double.clear_log()
    # grow to TCPXO's eight networks; the first new subnet insert is refused as invalid
    double.inject("status", status=400, method="POST", path="/subnetworks$", count=1,
                  message="Invalid value for field 'resource.region'.")
    result = run(double, capsys, gpudirect="tcpxo")
    assert result["failed"] and "rolled back" in result["msg"]
    assert counts(double) == (4, 4, 4)
    assert names(double, "networks") == ["a3mega-gpunic-%d" % i for i in range(1, 5)]


# ---------------------------------------------------------------- render mode


def test_render_mode_writes_requests_in_order_and_contacts_nothing(double, capsys, tmp_path):
    result = run(double, capsys, gpudirect="tcpx", render_dir=str(tmp_path), auth_kind="application")
    assert result["changed"] and len(result["changes"]) == 12
    files = sorted(os.listdir(tmp_path / "requests"))
    assert len(files) == 12
    kinds = [json.loads((tmp_path / "requests" / f).read_text())["url"].rsplit("/", 1)[1] for f in files]
    assert kinds == ["networks", "subnetworks", "firewalls"] * 4
    first = json.loads((tmp_path / "requests" / files[0]).read_text())
    assert first["body"]["name"] == "a3mega-gpunic-1" and first["body"]["mtu"] == 8244
    assert double.requests == []
    for name in files:
        body = json.loads((tmp_path / "requests" / name).read_text())["body"]
        if "ipCidrRange" in body:
            assert ipaddress.ip_network(body["ipCidrRange"]).subnet_of(ipaddress.ip_network("192.168.0.0/16"))


# ---------------------------------------------------------------- GPUDirect-RDMA: gVNIC VPC + RoCE VPC

ZONE = "us-central1-b"
ROCE_PROFILE = "projects/%s/global/networkProfiles/%s-vpc-roce" % (PROJECT, ZONE)


def rdma_run(double, capsys, profile="rdma", **options):
    options.setdefault("zone", ZONE)
    return run(double, capsys, cluster="a4", gpudirect=profile, **options)


@pytest.mark.parametrize("profile, rdma_nics", [("rdma", 8), ("rdma-a4x", 4)])
def test_rdma_fabric_is_a_gvnic_vpc_and_one_roce_vpc_with_a_subnet_per_nic(double, capsys, profile, rdma_nics):
    result = rdma_run(double, capsys, profile=profile)
    assert result["changed"] and not result.get("failed"), result.get("msg")
    # networks: gvnic + roce; subnets: 1 + N; firewall rules: only the gVNIC VPC's
    assert counts(double) == (2, 1 + rdma_nics, 1)
    assert len(result["changes"]) == 2 + 1 + rdma_nics + 1
    state = double.state(PROJECT)
    networks = dict((n["name"], n) for n in state["networks"])
    roce, gvnic = networks["a4-gpunic-rdma"], networks["a4-gpunic-gvnic"]
    assert roce["networkProfile"].endswith(ROCE_PROFILE) and "networkProfile" not in gvnic
    assert roce["mtu"] == gvnic["mtu"] == 8896 and roce["autoCreateSubnetworks"] is False
    subnets = dict((s["name"], s) for s in state["subnetworks"])
    assert sorted(subnets) == sorted(["a4-gpunic-gvnic-sub"] + ["a4-gpunic-rdma-sub-%d" % i for i in range(rdma_nics)])
    assert subnets["a4-gpunic-gvnic-sub"]["ipCidrRange"] == "192.168.0.0/24"
    assert subnets["a4-gpunic-rdma-sub-0"]["ipCidrRange"] == "192.168.1.0/24"
    assert all(s["network"].endswith("/a4-gpunic-rdma") for n, s in subnets.items() if "-rdma-" in n)
    rule = state["firewalls"][0]
    assert rule["name"] == "a4-gpunic-gvnic-internal" and rule["network"].endswith("/a4-gpunic-gvnic")
    assert rule["sourceRanges"] == ["192.168.0.0/24"]

    assert result["zone"] == ZONE and result["network_profile"] == "%s-vpc-roce" % ZONE
    # NIC numbering and interfaces: the node's extra gVNIC is NIC 1 on eth1, the RDMA NICs NIC 2.. on eth2..
    assert [(n["index"], n["interface"], n["device_mode"]) for n in result["networks"][:2]] == [
        (1, "eth1", "NetDevice"), (2, "eth2", "RDMA")]
    assert [n["index"] for n in result["networks"]] == list(range(1, rdma_nics + 2))
    assert result["networks"][1]["firewall"] is None and result["networks"][1]["source_ranges"] == []
    assert result["additional_node_networks"][0] == {"network": "a4-gpunic-gvnic", "subnetwork": "a4-gpunic-gvnic-sub"}
    assert result["additional_node_networks"][1:] == [
        {"network": "a4-gpunic-rdma", "subnetwork": "a4-gpunic-rdma-sub-%d" % i} for i in range(rdma_nics)]
    assert result["k8s_network_names"] == ["gvnic-1"] + ["rdma-%d" % i for i in range(rdma_nics)]
    modes = dict((m["metadata"]["name"], m["spec"]["deviceMode"]) for m in result["manifests"]
                 if m["kind"] == "GKENetworkParamSet")
    assert modes["gvnic-1"] == "NetDevice" and set(v for k, v in modes.items() if k != "gvnic-1") == {"RDMA"}
    # pods: eth0 on the default network, eth2.. on rdma-0..; the node's extra gVNIC is not a pod interface
    assert result["pod_interfaces"][0] == {"interfaceName": "eth0", "network": "default"}
    assert result["pod_interfaces"][1:] == [{"interfaceName": "eth%d" % (2 + i), "network": "rdma-%d" % i}
                                            for i in range(rdma_nics)]


def test_rdma_network_goes_first_then_all_its_subnets_together(double, capsys):
    double.set_latency(0.05)
    rdma_run(double, capsys, profile="rdma-a4x")
    posts = [r for r in double.requests if r["method"] == "POST" and not r["path"].endswith("/wait")]
    kinds = [r["path"].rsplit("/", 1)[1] for r in posts]
    assert kinds[:2] == ["networks"] * 2
    assert sorted(kinds[2:]) == ["firewalls"] + ["subnetworks"] * 5


@pytest.mark.parametrize("profile, resources", [("rdma", 12), ("rdma-a4x", 8)])
def test_rdma_rerun_is_a_no_op_that_reads_each_resource_once(double, capsys, profile, resources):
    rdma_run(double, capsys, profile=profile)
    double.clear_log()
    result = rdma_run(double, capsys, profile=profile)
    assert not result["changed"] and result["changes"] == []
    assert double.mutating_requests() == []
    reads = double.read_counts()
    assert len(reads) == resources and set(reads.values()) == {1} and len(double.requests) == resources


def test_rdma_create_reads_the_network_profile_once_before_the_first_write(double, capsys):
    rdma_run(double, capsys)
    reads = double.read_counts()
    profile = "/%sglobal/networkProfiles/%s-vpc-roce" % (COMPUTE, ZONE)
    assert reads[profile] == 1
    first_write = min(r["seq"] for r in double.mutating_requests())
    assert [r["seq"] for r in double.requests if r["path"] == profile][0] < first_write


def test_rdma_zone_without_a_roce_profile_is_refused_before_any_write(double, capsys):
    double.catalog.withdraw_network_profile(ZONE)
    result = rdma_run(double, capsys)
    assert result["failed"] and "network profile %s-vpc-roce does not exist" % ZONE in result["msg"]
    assert double.mutating_requests() == []


def test_rdma_teardown_deletes_subnets_and_rule_then_networks(double, capsys):
    rdma_run(double, capsys, profile="rdma-a4x")
    double.clear_log()
    result = rdma_run(double, capsys, profile="rdma-a4x", state="absent")
    assert result["changed"] and counts(double) == (0, 0, 0)
    deletes = [r["path"] for r in double.requests if r["method"] == "DELETE"]
    assert len(deletes) == 8
    # Each network goes after its own subnets and rule; the two networks are torn down in parallel, so
    # the order between them is the scheduler's.
    at = dict((p.rsplit("/", 1)[1], i) for i, p in enumerate(deletes))
    gvnic_children = [n for n in at if n.startswith("a4-gpunic-gvnic-")]
    roce_children = [n for n in at if n.startswith("a4-gpunic-rdma-")]
    assert len(gvnic_children) == 2 and len(roce_children) == 4
    assert max(at[n] for n in gvnic_children) < at["a4-gpunic-gvnic"]
    assert max(at[n] for n in roce_children) < at["a4-gpunic-rdma"]
    double.clear_log()
    again = rdma_run(double, capsys, profile="rdma-a4x", state="absent")
    assert not again["changed"] and double.mutating_requests() == []


def test_rdma_network_without_its_profile_is_drift_the_api_cannot_fix(double, capsys):
    run(double, capsys, cluster="a4", nic_count=1, name_prefix="a4-gpunic",
        networks=[dict(name="a4-gpunic-rdma", subnetwork="other-sub", firewall="other-fw")])
    double.clear_log()
    result = rdma_run(double, capsys)
    assert result["failed"] and "networkProfile" in result["msg"] and "set only when it is created" in result["msg"]
    assert double.mutating_requests() == []


@pytest.mark.parametrize("options, option, words", [
    (dict(location="us-central1", zone=None), "zone", "required with gpudirect=rdma"),
    (dict(location="us-central1", zone="us-east4-b"), "zone", "not in the region us-central1"),
    (dict(location="us-central1-a", zone="us-central1-b"), "zone", "differs from location"),
    (dict(networks=[{}]), "networks", "is not used with gpudirect=rdma"),
    (dict(nic_count=4), "nic_count", "does not match gpudirect rdma"),
])
def test_rdma_bad_input_is_refused_before_any_request(double, capsys, options, option, words):
    result = run(double, capsys, cluster="a4", gpudirect="rdma", **dict(dict(zone=ZONE), **options))
    assert result["failed"] and option in result["msg"] and words in result["msg"], result["msg"]
    assert double.requests == []


def test_rdma_zone_defaults_to_a_zonal_location(double, capsys):
    result = run(double, capsys, cluster="a4", gpudirect="rdma-a4x", location=ZONE)
    assert result["changed"] and result["zone"] == ZONE
