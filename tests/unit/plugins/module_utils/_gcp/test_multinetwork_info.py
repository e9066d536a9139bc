# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gke_multinetwork_info's engine (plugins/module_utils/_gcp/multinetwork_info.py) against the GCP double:
what a fabric looks like before and after it is created, read without a single write."""

from __future__ import annotations

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork_info
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.modules import gke_multinetwork_info
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

PROJECT = "info-project"


@pytest.fixture
def double():
    with GcpDouble() as gcp:
        yield gcp


def _params(double, **options):
    """The module's parameters, defaults filled in as AnsibleModule fills them."""
    result = ArgumentSpecValidator(gke_multinetwork_info.argument_spec()).validate(
        double.module_args(project=PROJECT, **options))
    assert result.error_messages == []
    return result.validated_parameters


def _session(double):
    return GcpSession(**double.module_args(project=PROJECT))


def test_a_missing_fabric_lists_every_missing_resource_and_the_names_later_steps_use(double):
    info = multinetwork_info.describe(_session(double), _params(double, cluster="fab", location="us-central1",
                                                                gpudirect="tcpx"))
    assert info["changed"] is False and info["exists"] is False
    assert info["gpudirect"] == "tcpx" and info["region"] == "us-central1"
    assert len(info["missing"]) == 4 * 3  # network, subnetwork and firewall of each of tcpx's 4 GPU NICs
    assert "network fab-gpunic-1" in info["missing"]
    assert [nic["index"] for nic in info["nics"]] == [1, 2, 3, 4]
    assert all(nic[kind] is None for nic in info["nics"] for kind in multinetwork_info.KINDS)
    assert info["cluster"] == dict(exists=False, multi_networking=False, datapath_provider=None, status=None, autopilot=None,
                                   current_master_version=None)
    assert info["k8s_network_names"] == ["vpc1", "vpc2", "vpc3", "vpc4"]
    assert double.mutating_requests() == []


def test_a_created_fabric_is_described_as_gcp_has_it(double):
    params = _params(double, cluster="fab", location="us-central1", gpudirect="tcpx")
    engine = multinetwork.FabricEngine(_session(double), multinetwork.resolve(params))
    engine.read()
    engine.plan_present()
    engine.apply()
    writes = len(double.mutating_requests())
    assert writes
    info = multinetwork_info.describe(_session(double), params)
    assert info["exists"] is True and info["missing"] == []
    assert info["nics"][1]["network"]["name"] == "fab-gpunic-2"
    assert info["nics"][1]["subnetwork"]["ipCidrRange"]
    assert [n["network"] for n in info["additional_node_networks"]] == ["fab-gpunic-%d" % i for i in range(1, 5)]
    assert len(double.mutating_requests()) == writes, "describing writes nothing"


def test_bad_input_is_a_fabric_error_naming_the_option(double):
    with pytest.raises(multinetwork.FabricError, match="location"):
        multinetwork_info.describe(_session(double), _params(double, cluster="fab", location="mars-1",
                                                             gpudirect="tcpx"))


def test_an_rdma_fabric_lists_each_shared_resource_once(double):
    params = _params(double, cluster="fab", location="us-central1-b", gpudirect="rdma-a4x")
    info = multinetwork_info.describe(_session(double), params)
    # gVNIC network, subnet and rule + the RoCE network + its 4 subnets; the RDMA NICs have no rule
    assert info["exists"] is False and len(info["missing"]) == 8
    assert info["missing"].count("network fab-gpunic-rdma") == 1 and not any("None" in m for m in info["missing"])
    assert info["zone"] == "us-central1-b" and info["network_profile"] == "us-central1-b-vpc-roce"
    assert [n["device_mode"] for n in info["nics"]] == ["NetDevice"] + ["RDMA"] * 4
    engine = multinetwork.FabricEngine(_session(double), multinetwork.resolve(params))
    engine.read()
    engine.plan_present()
    engine.preflight()
    engine.apply()
    double.clear_log()
    info = multinetwork_info.describe(_session(double), params)
    assert info["exists"] is True and info["missing"] == [] and double.mutating_requests() == []
    assert info["nics"][1]["network"]["networkProfile"].endswith("/networkProfiles/us-central1-b-vpc-roce")
    assert info["nics"][1]["firewall"] is None


def test_the_cluster_view_says_autopilot_and_the_control_plane_version(double):
    """What the validation checks gke.standard_cluster and gke.dataplane_v2 read."""
    double._project(PROJECT)["clusters"]["us-central1/fab"] = {
        "name": "fab", "status": "RUNNING", "currentMasterVersion": "1.32.2-gke.1489001", "autopilot": {"enabled": True},
        "networkConfig": {"enableMultiNetworking": True, "datapathProvider": "ADVANCED_DATAPATH"}}
    info = multinetwork_info.describe(_session(double), _params(double, cluster="fab", location="us-central1", gpudirect="tcpx"))
    assert info["cluster"] == dict(exists=True, multi_networking=True, datapath_provider="ADVANCED_DATAPATH", status="RUNNING",
                                   autopilot=True, current_master_version="1.32.2-gke.1489001")
    assert double.mutating_requests() == []
