# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GCP double is strict where the real APIs are strict (so the modules tested against it are honest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import requests

from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

P = "dbl-project"
NETS = "compute/v1/projects/%s/global/networks" % P
FWS = "compute/v1/projects/%s/global/firewalls" % P
SUBNETS = "compute/v1/projects/%s/regions/us-central1/subnetworks" % P
CLUSTERS = "v1/projects/%s/locations/us-central1/clusters" % P


class Client:
    def __init__(self, double):
        self.double = double
        self.http = requests.Session()
        self.http.headers["Authorization"] = "Bearer %s" % double.token

    def call(self, method, path, body=None, **params):
        response = self.http.request(method, self.double.url + path, json=body, params=params or None, timeout=30)
        return response.status_code, (response.json() if response.content else None)

    def done(self, method, path, body=None):
        status, op = self.call(method, path, body)
        assert status == 200, op
        link = op["selfLink"]
        if op.get("kind") == "compute#operation":
            status, op = self.call("POST", link.split("www.googleapis.com/", 1)[1] + "/wait")
        else:
            while op["status"] != "DONE":
                time.sleep(0.02)
                status, op = self.call("GET", "v1/projects/%s/locations/%s/operations/%s" % (
                    P, op["location"], op["name"]))
        assert op["status"] == "DONE" and not op.get("error"), op
        return op


@pytest.fixture
def gcp():
    with GcpDouble() as double:
        yield Client(double)


def net(name, **extra):
    return dict({"name": name, "autoCreateSubnetworks": False, "mtu": 8244}, **extra)


def test_bearer_token_required(gcp):
    assert requests.get(gcp.double.url + NETS + "/n", timeout=5).status_code == 401
    response = requests.get(gcp.double.url + NETS + "/n", headers={"Authorization": "Bearer nope"}, timeout=5)
    assert response.status_code == 401 and response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_schema_violations_are_400_naming_the_field(gcp):
    status, body = gcp.call("POST", NETS, net("n1", mtuX=1))
    assert status == 400 and "mtuX: unknown field" in body["error"]["message"]
    status, body = gcp.call("POST", CLUSTERS, {"cluster": {"name": "c", "initialNodeCount": 1,
                                                           "releaseChannel": {"channel": "FAST"}}})
    assert status == 400 and "cluster.releaseChannel.channel" in body["error"]["message"]
    status, body = gcp.call("GET", "compute/v1/projects/%s/global/nothing" % P)
    assert status == 404
    assert gcp.double.mutating_requests()[0]["status"] == 400


def test_network_rules(gcp):
    assert gcp.call("POST", NETS, net("n1", mtu=1299))[0] == 400
    assert gcp.call("POST", NETS, net("n1", mtu=8897))[0] == 400
    assert gcp.call("POST", NETS, {"name": "n1"})[1]["error"]["message"].startswith(
        "Invalid value for field 'resource.autoCreateSubnetworks'")
    assert gcp.call("POST", NETS, net("N_1"))[0] == 400
    gcp.done("POST", NETS, {"name": "plain", "autoCreateSubnetworks": False})
    assert gcp.call("GET", NETS + "/plain")[1]["mtu"] == 1460


def test_created_resource_visible_once_operation_done_and_duplicates_conflict(gcp):
    gcp.double.set_latency(3.0)  # long enough that a loaded machine still sees the operation running
    status, op = gcp.call("POST", NETS, net("n1"))
    assert status == 200 and op["status"] == "RUNNING"
    assert gcp.call("GET", NETS + "/n1")[0] == 404
    assert gcp.call("POST", NETS, net("n1"))[0] == 409
    status, body = gcp.call("POST", SUBNETS, {"name": "s1", "network": "global/networks/n1",
                                              "ipCidrRange": "192.168.0.0/24"})
    assert status == 400 and body["error"]["errors"][0]["reason"] == "resourceNotReady"
    started = time.monotonic()
    status, op = gcp.call("POST", op["selfLink"].split("googleapis.com/", 1)[1] + "/wait")
    assert op["status"] == "DONE" and time.monotonic() - started > 0.1
    assert gcp.call("GET", NETS + "/n1")[1]["selfLink"].endswith("/global/networks/n1")
    assert gcp.call("POST", NETS, net("n1"))[0] == 409


def test_subnet_rules(gcp):
    gcp.done("POST", NETS, net("n1"))
    gcp.done("POST", NETS, net("n2"))
    body = {"name": "s1", "network": "projects/%s/global/networks/n1" % P, "ipCidrRange": "192.168.0.0/24"}
    gcp.done("POST", SUBNETS, body)
    assert gcp.call("GET", NETS + "/n1")[1]["subnetworks"][0].endswith("/subnetworks/s1")
    overlap = dict(body, name="s2", ipCidrRange="192.168.0.128/25")
    status, error = gcp.call("POST", SUBNETS, overlap)
    assert status == 400 and "conflicts with existing subnetwork 's1'" in error["error"]["message"]
    assert gcp.call("POST", SUBNETS, dict(overlap, network="global/networks/n2"))[0] == 200  # other network: fine
    assert gcp.call("POST", SUBNETS, dict(body, name="s3", ipCidrRange="192.168.1.1/24"))[0] == 400
    assert gcp.call("POST", SUBNETS, dict(body, name="s3", ipCidrRange="192.168.300.0/24"))[0] == 400
    assert gcp.call("POST", SUBNETS, dict(body, name="s3", ipCidrRange="192.168.1.0/30"))[0] == 400
    assert gcp.call("POST", SUBNETS, dict(body, name="s3", network="global/networks/none",
                                          ipCidrRange="192.168.9.0/24"))[0] == 400
    assert gcp.call("POST", SUBNETS, body)[0] == 409
    current = gcp.call("GET", SUBNETS + "/s1")[1]
    patch = {"ipCidrRange": "192.168.0.0/23", "fingerprint": current["fingerprint"]}
    status, error = gcp.call("PATCH", SUBNETS + "/s1", patch)
    assert status == 400 and "expandIpCidrRange" in error["error"]["message"]
    assert gcp.call("PATCH", SUBNETS + "/s1", {"description": "x", "fingerprint": "stale"})[0] == 412
    assert gcp.call("POST", SUBNETS + "/s1/expandIpCidrRange", {"ipCidrRange": "192.168.0.0/25"})[0] == 400
    gcp.done("POST", SUBNETS + "/s1/expandIpCidrRange", {"ipCidrRange": "192.168.0.0/23"})
    assert gcp.call("GET", SUBNETS + "/s1")[1]["ipCidrRange"] == "192.168.0.0/23"


def test_firewall_rules_and_network_in_use(gcp):
    gcp.done("POST", NETS, net("n1"))
    rule = {"name": "f1", "network": "global/networks/n1", "sourceRanges": ["192.168.0.0/24"],
            "allowed": [{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "icmp"}]}
    status, error = gcp.call("POST", FWS, dict(rule, network="global/networks/missing"))
    assert status == 400 and "resource.network" in error["error"]["message"]
    assert gcp.call("POST", FWS, dict(rule, allowed=[{"IPProtocol": "icmp", "ports": ["22"]}]))[0] == 400
    assert gcp.call("POST", FWS, dict(rule, allowed=[{"IPProtocol": "tcp", "ports": ["70000"]}]))[0] == 400
    gcp.done("POST", FWS, rule)
    gcp.done("POST", FWS, {"name": "open", "network": "global/networks/n1", "allowed": [{"IPProtocol": "tcp"}]})
    assert gcp.call("GET", FWS + "/open")[1]["sourceRanges"] == ["0.0.0.0/0"]
    status, error = gcp.call("DELETE", NETS + "/n1")
    assert status == 400 and error["error"]["errors"][0]["reason"] == "resourceInUseByAnotherResource"
    gcp.done("PATCH", FWS + "/f1", {"sourceRanges": ["10.0.0.0/8"]})
    assert gcp.call("GET", FWS + "/f1")[1]["sourceRanges"] == ["10.0.0.0/8"]
    assert gcp.call("PATCH", FWS + "/f1", {"network": "global/networks/other"})[0] == 400
    gcp.done("DELETE", FWS + "/f1")
    gcp.done("DELETE", FWS + "/open")
    gcp.done("DELETE", NETS + "/n1")
    assert gcp.double.state(P)["networks"] == []


def test_network_mtu_patch(gcp):
    gcp.done("POST", NETS, net("n1"))
    gcp.done("PATCH", NETS + "/n1", {"mtu": 1500})
    assert gcp.call("GET", NETS + "/n1")[1]["mtu"] == 1500
    assert gcp.call("PATCH", NETS + "/n1", {"mtu": 9000})[0] == 400
    assert gcp.call("PATCH", NETS + "/n1", {"description": "changed"})[0] == 400


def test_node_pool_rules(gcp):
    status, error = gcp.call("POST", CLUSTERS + "/nope/nodePools", {"nodePool": {"name": "p"}})
    assert status == 404
    cluster = {"name": "c1", "initialNodeCount": 1,
               "networkConfig": {"enableMultiNetworking": True}, "ipAllocationPolicy": {"useIpAliases": True}}
    status, error = gcp.call("POST", CLUSTERS, {"cluster": cluster})
    assert status == 400 and "Dataplane V2" in error["error"]["message"]
    cluster["networkConfig"]["datapathProvider"] = "ADVANCED_DATAPATH"
    gcp.double.set_latency(0.2)
    status, op = gcp.call("POST", CLUSTERS, {"cluster": cluster})
    assert status == 200
    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", {"nodePool": {"name": "p"}})
    assert status == 400 and error["error"]["status"] == "FAILED_PRECONDITION"
    gcp.double.wait_idle()
    pool = {"name": "gpu", "initialNodeCount": 1, "networkConfig": {"additionalNodeNetworkConfigs": [
        {"network": "n1", "subnetwork": "s1"}]}}
    status, error = gcp.call("POST", "v1beta1/" + CLUSTERS[3:] + "/c1/nodePools", {"nodePool": pool})
    assert status == 400 and "network n1 not found" in error["error"]["message"]
    gcp.done("POST", NETS, net("n1"))
    gcp.done("POST", SUBNETS, {"name": "s1", "network": "global/networks/n1", "ipCidrRange": "192.168.0.0/24"})
    gcp.done("POST", CLUSTERS + "/c1/nodePools", {"nodePool": pool})
    assert gcp.call("GET", CLUSTERS + "/c1/nodePools/gpu")[1]["status"] == "RUNNING"
    assert gcp.call("POST", CLUSTERS + "/c1/nodePools", {"nodePool": pool})[0] == 409


def test_http_control_endpoints(gcp):
    url = gcp.double.url
    response = requests.post(url + "_double/faults", json=[
        {"kind": "429", "method": "GET", "path": "/networks/n1$", "count": 1, "retry_after": 3},
        {"kind": "reset", "method": "GET", "path": "/networks/n2$"}], timeout=5)
    assert len(response.json()["ids"]) == 2
    status, body = gcp.call("GET", NETS + "/n1")
    assert status == 429 and body["error"]["status"] == "RESOURCE_EXHAUSTED"
    with pytest.raises(requests.ConnectionError):
        gcp.call("GET", NETS + "/n2")
    assert requests.get(url + "_double/faults", timeout=5).json() == {"faults": []}
    requests.post(url + "_double/latency", json={"seconds": 0.0}, timeout=5)
    gcp.done("POST", NETS, net("n1"))
    log = requests.get(url + "_double/log", timeout=5).json()["requests"]
    assert [(r["method"], r["status"]) for r in log[:2]] == [("GET", 429), ("GET", "reset")]
    assert log[2]["body"]["name"] == "n1" and log[2]["mutating"] and not log[3]["mutating"]
    state = requests.get(url + "_double/state", params={"project": P}, timeout=5).json()
    assert [n["name"] for n in state["networks"]] == ["n1"]
    edited = requests.post(url + "_double/edit", json={"path": NETS + "/n1", "set": {"mtu": 1460}}, timeout=5).json()
    assert edited["mtu"] == 1460 and gcp.call("GET", NETS + "/n1")[1]["mtu"] == 1460
    requests.delete(url + "_double/log", timeout=5)
    assert requests.get(url + "_double/log", timeout=5).json()["requests"] == []


def test_runs_as_a_process(tmp_path):
    port_file = tmp_path / "port"
    env = dict(os.environ)
    process = subprocess.Popen([sys.executable, "-m", "ansible_collections.gpu_ops.cluster.tests.doubles.gcp",
                                "--port-file", str(port_file)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("READY http://127.0.0.1:")
        port = int(port_file.read_text())
        response = requests.get("http://127.0.0.1:%d/_double/state" % port, timeout=5)
        assert json.loads(response.text)["networks"] == []
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_catalog_reads_are_strict_and_follow_the_catalog_state(gcp):
    zone = "compute/v1/projects/%s/zones/us-central1-c" % P
    assert gcp.call("GET", "compute/v1/projects/%s/regions/us-central1" % P)[1]["status"] == "UP"
    assert gcp.call("GET", "compute/v1/projects/%s/regions/us-central9" % P)[0] == 404
    assert gcp.call("GET", zone)[1]["region"].endswith("/regions/us-central1")
    assert gcp.call("GET", "compute/v1/projects/%s/zones/us-central1-z" % P)[0] == 404
    machine = gcp.call("GET", zone + "/machineTypes/a3-megagpu-8g")[1]
    assert machine["accelerators"] == [{"guestAcceleratorType": "nvidia-h100-mega-80gb", "guestAcceleratorCount": 8}]
    assert gcp.call("GET", zone + "/machineTypes/a3-megagpu-9g")[0] == 404
    assert gcp.call("GET", zone + "/acceleratorTypes/nvidia-l4")[1]["maximumCardsPerInstance"] == 8
    assert gcp.call("GET", zone + "/diskTypes/pd-balanced")[0] == 200
    assert gcp.call("GET", zone + "/diskTypes/pd-fast")[0] == 404
    gcp.double.catalog.withdraw("us-central1-c", "acceleratorTypes", "nvidia-l4")
    assert gcp.call("GET", zone + "/acceleratorTypes/nvidia-l4")[0] == 404
    assert gcp.call("GET", zone[:-1] + "b/acceleratorTypes/nvidia-l4")[0] == 200
    config = gcp.call("GET", "v1/projects/%s/locations/us-central1/serverConfig" % P)[1]
    assert "COS_CONTAINERD" in config["validImageTypes"] and config["validMasterVersions"]
    assert gcp.call("GET", "v1/projects/%s/locations/us-central9/serverConfig" % P)[0] == 404


def test_writes_consult_the_catalog(gcp):
    gcp.done("POST", NETS, net("n1"))
    status, error = gcp.call("POST", "compute/v1/projects/%s/regions/us-central9/subnetworks" % P,
                             {"name": "s1", "network": "global/networks/n1", "ipCidrRange": "10.0.0.0/24"})
    assert status == 400 and "Unknown region" in error["error"]["message"]
    cluster = {"name": "c1", "nodePools": [{"name": "default-pool", "initialNodeCount": 1}],
               "ipAllocationPolicy": {"useIpAliases": True}}
    assert gcp.call("POST", "v1/projects/%s/locations/us-central9/clusters" % P, {"cluster": cluster})[0] == 404
    gcp.done("POST", CLUSTERS, {"cluster": dict(cluster, locations=["us-central1-c"])})
    gcp.double.catalog.withdraw("us-central1-c", "machineTypes", "g2-standard-8")
    for config, wanted in (
            ({"machineType": "g2-standard-8"}, "Machine type g2-standard-8 is not available in zone us-central1-c"),
            ({"machineType": "g2-standard-24", "accelerators": [{"acceleratorType": "nvidia-l4",
                                                                 "acceleratorCount": "9"}]}, "above the maximum of 8"),
            ({"diskType": "pd-fast"}, "Disk type pd-fast"),
            ({"imageType": "COS"}, "Image type COS is not supported")):
        status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools",
                                 {"nodePool": {"name": "p", "initialNodeCount": 1, "config": config}})
        assert status == 400 and wanted in error["error"]["message"], (config, error)


ROCE = "projects/%s/global/networkProfiles/us-central1-b-vpc-roce" % P


def test_network_profiles_are_served_per_zone(gcp):
    status, profile = gcp.call("GET", "compute/v1/" + ROCE)
    assert status == 200 and profile["location"] == {"name": "us-central1-b", "scope": "ZONE"}
    assert profile["features"]["interfaceTypes"] == ["MRDMA"]
    assert gcp.call("GET", "compute/v1/projects/%s/global/networkProfiles/us-central1-c-vpc-roce" % P)[0] == 404
    status, listed = gcp.call("GET", "compute/v1/projects/%s/global/networkProfiles" % P)
    assert status == 200 and "us-central1-b-vpc-roce" in [p["name"] for p in listed["items"]]
    gcp.double.catalog.withdraw_network_profile("us-central1-b")
    assert gcp.call("GET", "compute/v1/" + ROCE)[0] == 404


def test_roce_networks_refuse_what_the_api_refuses(gcp):
    # a profile that does not exist, a malformed reference, auto-mode subnets
    status, error = gcp.call("POST", NETS, net("r0", networkProfile=ROCE.replace("us-central1-b", "us-central1-c")))
    assert status == 404
    status, error = gcp.call("POST", NETS, net("r0", networkProfile="us-central1-b-vpc-roce"))
    assert status == 400 and "networkProfile" in error["error"]["message"]
    status, error = gcp.call("POST", NETS, dict(net("r0", networkProfile=ROCE), autoCreateSubnetworks=True))
    assert status == 400 and "auto mode" in error["error"]["message"]
    gcp.done("POST", NETS, net("roce", networkProfile=ROCE, mtu=8896))
    assert gcp.call("GET", NETS + "/roce")[1]["networkProfile"].endswith(ROCE)
    # the profile is set at creation only
    status, error = gcp.call("PATCH", NETS + "/roce", {"networkProfile": ROCE.replace("-b-", "-a-")})
    assert status == 400
    # subnets only in the region of the profile's zone
    status, error = gcp.call("POST", "compute/v1/projects/%s/regions/us-east4/subnetworks" % P,
                             {"name": "s", "network": "global/networks/roce", "ipCidrRange": "10.9.0.0/24"})
    assert status == 400 and "must be in region us-central1" in error["error"]["message"]
    gcp.done("POST", SUBNETS, {"name": "roce-0", "network": "global/networks/roce", "ipCidrRange": "10.9.0.0/24"})
    gcp.done("POST", SUBNETS, {"name": "roce-1", "network": "global/networks/roce", "ipCidrRange": "10.9.1.0/24"})
    # no VPC firewall rules on a RoCE network
    status, error = gcp.call("POST", FWS, {"name": "fw", "network": "global/networks/roce",
                                           "allowed": [{"IPProtocol": "tcp"}]})
    assert status == 400 and "does not support VPC firewall rules" in error["error"]["message"]


def test_node_pools_on_roce_networks_need_mrdma_machines_in_the_profile_zone(gcp):
    gcp.done("POST", NETS, net("roce", networkProfile=ROCE))
    for index in range(2):
        gcp.done("POST", SUBNETS, {"name": "roce-%d" % index, "network": "global/networks/roce",
                                   "ipCidrRange": "10.9.%d.0/24" % index})
    cluster = {"name": "c1", "initialNodeCount": 1, "locations": ["us-central1-b"],
               "networkConfig": {"enableMultiNetworking": True, "datapathProvider": "ADVANCED_DATAPATH"},
               "ipAllocationPolicy": {"useIpAliases": True}}
    gcp.done("POST", CLUSTERS, {"cluster": cluster})
    networks = {"additionalNodeNetworkConfigs": [{"network": "roce", "subnetwork": "roce-%d" % i} for i in range(2)]}

    def pool(machine, zones=("us-central1-b",), **config):
        return {"nodePool": {"name": "p", "initialNodeCount": 1, "locations": list(zones), "networkConfig": networks,
                             "config": dict({"machineType": machine}, **config)}}

    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", pool("a3-megagpu-8g"))
    assert status == 400 and "accepts only MRDMA" in error["error"]["message"]
    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", pool("a4-highgpu-8g", zones=("us-central1-c",)))
    assert status == 400 and "restricted to zone us-central1-b" in error["error"]["message"]
    # A4X: Hyperdisk only (GKE's pd-balanced default included); gpuDirectStrategy RDMA: A3 Ultra and A4 only
    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", pool("a4x-highgpu-4g"))
    assert status == 400 and "does not support disk type pd-balanced" in error["error"]["message"]
    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", pool("a4x-highgpu-4g", diskType="pd-ssd"))
    assert status == 400 and "does not support disk type pd-ssd" in error["error"]["message"]
    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", pool(
        "a4x-highgpu-4g", diskType="hyperdisk-balanced", gpuDirectConfig={"gpuDirectStrategy": "RDMA"}))
    assert status == 400 and "GPUDirect strategy RDMA is not supported" in error["error"]["message"]
    status, error = gcp.call("POST", CLUSTERS + "/c1/nodePools", pool(
        "a4-highgpu-8g", gpuDirectConfig={"gpuDirectStrategy": "TCPX"}))
    assert status == 400 and "gpuDirectStrategy" in error["error"]["message"]
    gcp.done("POST", CLUSTERS + "/c1/nodePools", pool("a4-highgpu-8g", gpuDirectConfig={"gpuDirectStrategy": "RDMA"}))
    stored = gcp.call("GET", CLUSTERS + "/c1/nodePools/p")[1]
    assert stored["config"]["gpuDirectConfig"] == {"gpuDirectStrategy": "RDMA"}
