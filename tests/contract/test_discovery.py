# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The discovery-document validator rejects what the real Google APIs reject."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.tests.contract.discovery import discovery

CLUSTERS = "v1/projects/p/locations/us-central1/clusters"
NETWORKS = "compute/v1/projects/p/global/networks"


@pytest.fixture(scope="module")
def container():
    return discovery("container", "v1")


@pytest.fixture(scope="module")
def compute():
    return discovery("compute", "v1")


def _cluster(**network_config):
    return {"cluster": {"name": "c", "initialNodeCount": 1, "networkConfig": network_config}}


def test_valid_cluster_create_has_no_problems(container):
    body = _cluster(enableMultiNetworking=True, datapathProvider="ADVANCED_DATAPATH")
    assert container.validate_request("POST", CLUSTERS, body) == []


def test_unknown_nested_field_is_named_with_its_path(container):
    problems = container.validate_request("POST", CLUSTERS, _cluster(enableMultiNetworkingX=True))
    assert len(problems) == 1
    assert problems[0].startswith("cluster.networkConfig.enableMultiNetworkingX: unknown field")


def test_bad_enum_lists_allowed_values(container):
    problems = container.validate_request("POST", CLUSTERS, _cluster(datapathProvider="DATAPLANE_V2"))
    assert len(problems) == 1
    assert "cluster.networkConfig.datapathProvider" in problems[0]
    assert "ADVANCED_DATAPATH" in problems[0]


def test_int64_must_be_a_string(container):
    pool = {"name": "gpu", "config": {"accelerators": [{"acceleratorType": "nvidia-h100-80gb",
                                                        "acceleratorCount": 8}]}}
    problems = container.validate_request("POST", CLUSTERS + "/c/nodePools", {"nodePool": pool})
    assert problems == ["nodePool.config.accelerators[0].acceleratorCount: int64 must be sent as a decimal "
                        "string, got number 8"]
    pool["config"]["accelerators"][0]["acceleratorCount"] = "8"
    assert container.validate_request("POST", CLUSTERS + "/c/nodePools", {"nodePool": pool}) == []
    pool["config"]["accelerators"][0]["acceleratorCount"] = "eight"
    assert "is not a decimal int64" in container.validate_request(
        "POST", CLUSTERS + "/c/nodePools", {"nodePool": pool})[0]


def test_wrong_json_types(compute):
    problems = compute.validate_request("POST", NETWORKS, {"name": "n", "mtu": "8244", "autoCreateSubnetworks": "no"})
    assert sorted(problems) == ['autoCreateSubnetworks: expected a boolean, got string "no"',
                                'mtu: expected an integer, got string "8244"']


def test_int32_range_and_bool_is_not_an_integer(compute):
    assert compute.validate("Network", {"mtu": True}) == ["mtu: expected an integer, got boolean true"]
    assert compute.validate("Network", {"mtu": 2 ** 31}) == ["mtu: 2147483648 is out of int32 range"]


def test_arrays_and_inline_item_schemas(compute):
    body = {"name": "f", "network": "global/networks/n", "allowed": [{"IPProtocol": "tcp", "ports": [22]}],
            "sourceRanges": "10.0.0.0/8"}
    problems = compute.validate_request("POST", "compute/v1/projects/p/global/firewalls", body)
    assert sorted(problems) == ["allowed[0].ports[0]: expected a string, got number 22",
                                "sourceRanges: expected an array, got string \"10.0.0.0/8\""]


def test_unknown_query_parameter_and_system_parameters(compute):
    assert compute.validate_request("POST", NETWORKS, {"name": "n", "autoCreateSubnetworks": False},
                                    query={"requestId": "x", "alt": "json"}) == []
    assert compute.validate_request("GET", NETWORKS + "/n", None, query={"view": "FULL"}) == [
        "query parameter 'view' is not accepted by compute.networks.get"]


def test_method_matching_and_bodies(compute, container):
    assert compute.match("POST", "compute/v1/projects/p/regions/r/operations/op-1/wait").id == \
        "compute.regionOperations.wait"
    assert container.match("POST", CLUSTERS + "/c/nodePools/np:setSize").id == \
        "container.projects.locations.clusters.nodePools.setSize"
    assert container.match("GET", "v1/projects/p/locations/l/operations/op").id == \
        "container.projects.locations.operations.get"
    assert container.validate_request("GET", "v1/projects/p/nowhere", None)[0].startswith("no container.v1 method")
    assert compute.validate_request("POST", NETWORKS, None) == ["compute.networks.insert needs a Network request body"]
    assert compute.validate_request("DELETE", NETWORKS + "/n", {"x": 1}) == ["compute.networks.delete takes no "
                                                                             "request body"]


def test_v1beta1_only_fields():
    beta = discovery("container", "v1beta1")
    v1 = discovery("container", "v1")
    config = {"hostMaintenancePolicy": {"maintenanceInterval": "PERIODIC"}}
    assert beta.validate("NodeConfig", config) == []
    assert v1.validate("NodeConfig", config)[0].startswith("hostMaintenancePolicy: unknown field")


def test_null_means_unset(compute):
    assert compute.validate("Network", {"description": None, "mtu": None}) == []
