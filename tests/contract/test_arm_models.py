# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The strict ARM model validator: what it accepts and what it rejects, against the SDK's models."""

from __future__ import annotations

import pytest

from azure.mgmt.containerservice import models as sdk_models

from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import (
    API_VERSION,
    ModelError,
    check,
    enum_values,
    read_only_paths,
    schema,
    validate,
)

MIG_POOL = {
    "properties": {
        "vmSize": "Standard_ND96asr_v4",
        "count": 1,
        "mode": "User",
        "osType": "Linux",
        "osSKU": "Ubuntu",
        "gpuInstanceProfile": "MIG1g",
        "nodeLabels": {"gpu": "a100"},
        "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"],
        "enableAutoScaling": False,
        "gpuProfile": {"driver": "None"},
        "upgradeSettings": {"maxSurge": "10%"},
    }
}


def test_api_version_is_the_sdk_default():
    assert API_VERSION == "2026-08-01"


def test_a_valid_mig_pool_passes_and_deserializes():
    assert validate("AgentPool", MIG_POOL) == []
    pool = check("AgentPool", MIG_POOL)
    assert isinstance(pool, sdk_models.AgentPool)
    assert pool.properties.gpu_instance_profile == "MIG1g"
    assert pool.properties.gpu_profile.driver == "None"
    assert pool.properties.node_taints == ["nvidia.com/gpu=present:NoSchedule"]


def test_the_sdk_alone_would_accept_garbage():
    # why this module exists: the SDK model keeps unknown keys and wrong values
    loose = sdk_models.AgentPool({"properties": {"gpuInstanceProfile": "MIG9g", "count": "three", "bogus": 1}})
    assert loose.properties.gpu_instance_profile == "MIG9g"
    assert loose.properties.count == "three"


@pytest.mark.parametrize("profile", ["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"])
def test_every_gpu_instance_profile_is_accepted(profile):
    assert validate("AgentPool", {"properties": {"gpuInstanceProfile": profile}}) == []


@pytest.mark.parametrize("value", ["MIG5g", "mig1g", "1g.5gb", "", 1])
def test_gpu_instance_profile_outside_the_enum_is_rejected(value):
    problems = validate("AgentPool", {"properties": {"gpuInstanceProfile": value}})
    assert len(problems) == 1
    assert problems[0].startswith("properties.gpuInstanceProfile: ")
    assert "MIG1g|MIG2g|MIG3g|MIG4g|MIG7g" in problems[0]


def test_unknown_properties_are_rejected_at_every_depth():
    body = {"location": "eastus", "properties": {"vmSize": "x", "gpuProfil": {}, "gpuProfile": {"drivers": "None"}}}
    problems = validate("AgentPool", body)
    assert "location: unknown property of AgentPool" in problems
    assert any(p.startswith("properties.gpuProfil: unknown property") for p in problems)
    assert any(p.startswith("properties.gpuProfile.drivers: unknown property of GPUProfile") for p in problems)
    assert len(problems) == 3


def test_wrong_case_property_is_unknown_with_a_hint():
    problems = validate("AgentPool", {"properties": {"VMSize": "Standard_ND96asr_v4"}})
    assert problems == ["properties.VMSize: unknown property of AgentPoolManagedClusterAgentPoolProfileProperties "
                        "(did you mean vmSize?)"]


@pytest.mark.parametrize("field,value,expected", [
    ("count", "1", "expected integer"),
    ("count", True, "expected integer"),
    ("count", 1.5, "expected integer"),
    ("enableAutoScaling", "true", "expected boolean"),
    ("vmSize", 5, "expected string"),
    ("nodeTaints", "a=b:NoSchedule", "expected array"),
    ("nodeLabels", ["a"], "expected object (map)"),
    ("spotMaxPrice", "cheap", "expected number"),
    ("upgradeSettings", "10%", "expected object (AgentPoolUpgradeSettings)"),
])
def test_wrong_json_types_are_rejected(field, value, expected):
    problems = validate("AgentPool", {"properties": {field: value}})
    assert len(problems) == 1, problems
    assert problems[0].startswith("properties.%s: %s" % (field, expected))


def test_numbers_are_accepted_for_float_fields():
    assert validate("AgentPool", {"properties": {"spotMaxPrice": -1}}) == []
    assert validate("AgentPool", {"properties": {"spotMaxPrice": 0.5}}) == []


def test_list_and_map_items_are_checked():
    problems = validate("AgentPool", {"properties": {"nodeTaints": ["ok=1:NoSchedule", 2],
                                                     "nodeLabels": {"a": "b", "c": 3}}})
    assert sorted(problems) == ["properties.nodeLabels.c: expected string, got 3",
                                "properties.nodeTaints[1]: expected string, got 2"]


def test_null_is_accepted_for_optional_fields():
    assert validate("AgentPool", {"properties": {"minCount": None, "maxCount": None}}) == []


def test_read_only_properties_rejected_or_ignored():
    body = {"id": "/x", "name": "gpu", "properties": {"provisioningState": "Succeeded", "count": 1}}
    problems = validate("AgentPool", body)
    assert sorted(p.split(":")[0] for p in problems) == ["id", "name", "properties.provisioningState"]
    assert validate("AgentPool", body, readonly="ignore") == []


def test_read_only_paths_of_an_agent_pool():
    paths = read_only_paths("AgentPool")
    assert {"id", "name", "type", "systemData", "properties.provisioningState",
            "properties.currentOrchestratorVersion", "properties.eTag"} <= paths
    assert "properties.vmSize" not in paths
    assert "properties.gpuInstanceProfile" not in paths


def test_required_properties_are_reported():
    problems = validate("ManagedCluster", {"properties": {}})
    assert problems == ["location: required property of ManagedCluster is missing"]


def test_required_nested_properties_are_reported():
    # ManagedClusterAgentPoolProfile.name is required inside agentPoolProfiles
    problems = validate("ManagedCluster", {"location": "eastus", "properties": {"agentPoolProfiles": [{"count": 1}]}})
    assert problems == ["properties.agentPoolProfiles[0].name: required property of ManagedClusterAgentPoolProfile "
                        "is missing"]


def test_datetime_fields_need_rfc3339_text():
    body = {"properties": {"creationData": {"sourceResourceId": "/x"}}}
    assert validate("AgentPool", body) == []
    assert validate("TimeSpan", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00+01:00"}) == []
    problems = validate("TimeSpan", {"start": "yesterday", "end": 5})
    assert len(problems) == 2
    assert all("RFC 3339" in p for p in problems)


def test_check_raises_with_every_problem():
    with pytest.raises(ModelError) as caught:
        check("AgentPool", {"properties": {"count": "x", "osSKU": "Debian"}})
    assert caught.value.model == "AgentPool"
    assert len(caught.value.problems) == 2
    assert "properties.osSKU: 'Debian' is not one of" in str(caught.value)


def test_body_must_be_an_object():
    assert validate("AgentPool", ["properties"]) == ["(body): expected object (AgentPool), got ['properties']"]


def test_enum_values_helper():
    assert enum_values("AgentPool", "properties.gpuInstanceProfile") == ["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"]
    assert enum_values("AgentPool", "properties.gpuProfile.driver") == ["Install", "None"]
    assert "AzureLinux" in enum_values("AgentPool", "properties.osSKU")
    assert enum_values("AgentPool", "properties.vmSize") is None


def test_schema_knows_rest_names_and_visibility():
    fields = schema("AgentPoolManagedClusterAgentPoolProfileProperties")
    assert fields["osSKU"].attr == "os_sku"
    assert fields["provisioningState"].read_only
    assert not fields["gpuInstanceProfile"].read_only


def test_unknown_model_name():
    with pytest.raises(KeyError):
        validate("NoSuchModel", {})
