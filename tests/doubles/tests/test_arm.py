# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ARM double is as strict as the service it stands in for (plain HTTP requests, no collection code)."""

from __future__ import annotations

import pytest
import requests

from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import API_VERSION, validate
from ansible_collections.gpu_ops.cluster.tests.doubles.arm import ArmDouble

RG = "gpu-rg"
CLUSTER = "gpu-aks"
MIG = {"properties": {"vmSize": "Standard_ND96asr_v4", "count": 1, "gpuInstanceProfile": "MIG1g"}}


class Client:
    def __init__(self, double):
        self.double = double
        token, dummy = double.issue_token()
        self.headers = {"Authorization": "Bearer " + token}

    def url(self, tail="", version=API_VERSION):
        base = "%ssubscriptions/%s/resourceGroups/%s/providers/Microsoft.ContainerService/managedClusters/%s%s" % (
            self.double.url, self.double.subscription, RG, CLUSTER, tail)
        return base + ("?api-version=%s" % version if version else "")

    def pool(self, name="mig"):
        return self.url("/agentPools/" + name)

    def get(self, url, **kwargs):
        return requests.get(url, headers=self.headers, timeout=5, **kwargs)

    def put(self, url, body):
        return requests.put(url, headers=self.headers, json=body, timeout=5)

    def delete(self, url):
        return requests.delete(url, headers=self.headers, timeout=5)

    def settle(self, response):
        """Poll the operation of a write until it is no longer InProgress; the last status document."""
        link = response.headers.get("Azure-AsyncOperation")
        for dummy in range(20):
            status = self.get(link).json()
            if status["status"] != "InProgress":
                return status
        raise AssertionError("operation never finished")


@pytest.fixture
def arm():
    with ArmDouble() as double:
        double.add_cluster(RG, CLUSTER, kubernetes_version="1.33.2")
        yield Client(double)


def error(response):
    return response.status_code, response.json()["error"]["code"]


def test_bearer_token_is_required(arm):
    assert error(requests.get(arm.url(), timeout=5)) == (401, "AuthenticationFailed")
    assert error(requests.get(arm.url(), headers={"Authorization": "Bearer forged"}, timeout=5)) == (
        401, "InvalidAuthenticationToken")
    token, dummy = arm.double.issue_token(lifetime=-1)
    assert error(requests.get(arm.url(), headers={"Authorization": "Bearer " + token}, timeout=5)) == (
        401, "ExpiredAuthenticationToken")
    token, dummy = arm.double.issue_token(audience="https://management.chinacloudapi.cn/")
    assert error(requests.get(arm.url(), headers={"Authorization": "Bearer " + token}, timeout=5)) == (
        401, "InvalidAuthenticationTokenAudience")
    assert "WWW-Authenticate" in requests.get(arm.url(), timeout=5).headers


def test_api_version_is_required_and_checked(arm):
    response = arm.get(arm.url(version=None))
    assert error(response) == (400, "MissingApiVersionParameter")
    assert "api-version" in response.json()["error"]["message"]
    assert error(arm.get(arm.url(version="2019-01-01"))) == (400, "NoRegisteredProviderFound")


def test_names_are_case_insensitive_and_missing_things_are_404(arm):
    upper = arm.url().replace("/resourceGroups/gpu-rg/", "/RESOURCEGROUPS/GPU-RG/")
    assert arm.get(upper).json()["name"] == CLUSTER
    assert error(arm.get(arm.url().replace(CLUSTER, "nosuch"))) == (404, "ResourceNotFound")
    assert error(arm.get(arm.url().replace("/" + RG + "/", "/nosuch/"))) == (404, "ResourceGroupNotFound")
    assert error(arm.get(arm.url().replace(arm.double.subscription, "11111111-1111-1111-1111-111111111111"))) == (
        404, "SubscriptionNotFound")
    assert error(arm.get(arm.pool("nosuch"))) == (404, "NotFound")
    assert error(arm.put(arm.url().replace(CLUSTER, "nosuch").replace("?", "/agentPools/mig?"), MIG)) == (
        404, "ResourceNotFound")


def test_cluster_and_pool_documents_are_valid_sdk_models(arm):
    arm.settle(arm.put(arm.pool(), MIG))
    cluster = arm.get(arm.url()).json()
    assert validate("ManagedCluster", cluster, readonly="ignore") == []
    assert [p["name"] for p in cluster["properties"]["agentPoolProfiles"]] == ["mig", "nodepool1"]
    pools = arm.get(arm.url("/agentPools")).json()["value"]
    assert [p["name"] for p in pools] == ["mig", "nodepool1"]
    for pool in pools:
        assert validate("AgentPool", pool, readonly="ignore") == []


def test_put_lifecycle_creating_then_succeeded(arm):
    response = arm.put(arm.pool(), MIG)
    assert response.status_code == 201
    assert response.json()["properties"]["provisioningState"] == "Creating"
    assert response.headers["Retry-After"] == "1"
    assert "/operations/" in response.headers["Azure-AsyncOperation"]
    assert arm.settle(response)["status"] == "Succeeded"
    assert arm.get(arm.pool()).json()["properties"]["provisioningState"] == "Succeeded"
    again = arm.put(arm.pool(), MIG)
    assert again.status_code == 200
    assert again.json()["properties"]["provisioningState"] == "Updating"


def test_write_during_a_running_operation_is_a_409(arm):
    arm.put(arm.pool(), MIG)
    assert error(arm.put(arm.pool(), MIG)) == (409, "OperationNotAllowed")
    assert error(arm.delete(arm.pool())) == (409, "OperationNotAllowed")


def test_put_bodies_are_validated_against_the_models(arm):
    response = arm.put(arm.pool(), {"properties": {"vmSize": "Standard_ND96asr_v4", "gpuInstanceProfile": "MIG9g",
                                                   "bogus": True, "count": "1"}})
    assert error(response) == (400, "InvalidRequestContent")
    message = response.json()["error"]["message"]
    for part in ("properties.gpuInstanceProfile", "MIG1g|MIG2g|MIG3g|MIG4g|MIG7g", "properties.bogus",
                 "properties.count: expected integer"):
        assert part in message
    assert arm.double.pool(RG, CLUSTER, "mig") is None
    bad_json = requests.put(arm.pool(), headers=dict(arm.headers, **{"Content-Type": "application/json"}),
                            data="{not json", timeout=5)
    assert error(bad_json) == (400, "InvalidRequestContent")


def test_read_only_properties_are_ignored_like_arm_does(arm):
    body = {"id": "/x", "name": "other", "properties": dict(MIG["properties"], provisioningState="Succeeded")}
    response = arm.put(arm.pool(), body)
    assert response.status_code == 201
    assert response.json()["name"] == "mig"
    assert response.json()["properties"]["provisioningState"] == "Creating"


@pytest.mark.parametrize("properties,code,words", [
    (dict(MIG["properties"], enableAutoScaling=True, minCount=1, maxCount=2), "InvalidParameter", "autoscaler"),
    (dict(MIG["properties"], osSKU="AzureLinux"), "InvalidParameter", "osSKU AzureLinux"),
    (dict(MIG["properties"], vmSize="Standard_NC4as_T4_v3"), "InvalidParameter", "not a multi-instance GPU"),
    (dict(MIG["properties"], nodeTaints=["a=b:Sometimes"]), "InvalidParameter", "nodeTaints[0]"),
    ({"vmSize": "Standard_D4ds_v5", "enableAutoScaling": True}, "InvalidParameter", "minCount and maxCount"),
    ({"vmSize": "Standard_D4ds_v5", "minCount": 1, "maxCount": 2}, "InvalidParameter", "must be nil"),
    ({"vmSize": "Standard_D4ds_v5", "count": 1001}, "InvalidParameter", "range of 0 to 1000"),
    ({"vmSize": "Standard_D4ds_v5", "mode": "System", "count": 0}, "InvalidParameter", "range of 1 to 1000"),
    ({"vmSize": "Standard_D4ds_v5", "orchestratorVersion": "1.34"}, "NodePoolMcVersionIncompatible", "newer"),
    ({"count": 1}, "InvalidParameter", "vmSize"),
])
def test_aks_rules(arm, properties, code, words):
    response = arm.put(arm.pool(), {"properties": properties})
    assert error(response) == (400, code)
    assert words in response.json()["error"]["message"]


def test_bad_pool_name(arm):
    response = arm.put(arm.pool("Bad_Name"), MIG)
    assert error(response) == (400, "InvalidParameter")


@pytest.mark.parametrize("change,field", [
    ({"vmSize": "Standard_ND96isr_H100_v5"}, "vmSize"),
    ({"gpuInstanceProfile": "MIG2g"}, "gpuInstanceProfile"),
    ({"osSKU": "Ubuntu2204"}, "osSKU"),
    ({"gpuProfile": {"driver": "None"}}, "gpuProfile"),
])
def test_immutable_properties(arm, change, field):
    arm.settle(arm.put(arm.pool(), MIG))
    response = arm.put(arm.pool(), {"properties": dict(MIG["properties"], **change)})
    assert error(response) == (400, "PropertyChangeNotAllowed")
    assert response.json()["error"]["message"] == "Changing property '%s' is not allowed." % field


def test_put_replaces_the_pool(arm):
    arm.settle(arm.put(arm.pool(), {"properties": dict(MIG["properties"], nodeLabels={"a": "b"},
                                                       nodeTaints=["x=y:NoSchedule"])}))
    # a sparse PUT: labels and taints go back to their defaults (none), immutable fields stay
    arm.settle(arm.put(arm.pool(), {"properties": {"count": 2}}))
    pool = arm.get(arm.pool()).json()["properties"]
    assert "nodeLabels" not in pool and "nodeTaints" not in pool
    assert (pool["count"], pool["vmSize"], pool["gpuInstanceProfile"]) == (2, "Standard_ND96asr_v4", "MIG1g")


def test_downgrade_is_refused(arm):
    arm.settle(arm.put(arm.pool(), dict(MIG, properties=dict(MIG["properties"], orchestratorVersion="1.33.2"))))
    response = arm.put(arm.pool(), dict(MIG, properties=dict(MIG["properties"], orchestratorVersion="1.32")))
    assert error(response) == (400, "NotAllowedAgentPoolVersionDowngrade")


def test_delete_lifecycle_and_last_system_pool(arm):
    arm.settle(arm.put(arm.pool(), MIG))
    response = arm.delete(arm.pool())
    assert response.status_code == 202
    location = response.headers["Location"]
    assert arm.get(arm.pool()).json()["properties"]["provisioningState"] == "Deleting"
    statuses = [arm.get(location).status_code for dummy in range(3)]
    assert statuses[-1] == 204 and 202 in statuses
    assert arm.get(arm.pool()).status_code == 404
    assert arm.delete(arm.pool()).status_code == 204
    assert error(arm.delete(arm.pool("nodepool1"))) == (400, "OperationNotAllowed")


def test_lro_styles(arm):
    arm.double.lro_style = "location"
    response = arm.put(arm.pool(), MIG)
    assert "Location" in response.headers and "Azure-AsyncOperation" not in response.headers
    arm.double.finish_operations()
    arm.double.lro_style = "state"
    response = arm.put(arm.pool("other"), MIG)
    assert "Location" not in response.headers and "Azure-AsyncOperation" not in response.headers
    states = [arm.get(arm.pool("other")).json()["properties"]["provisioningState"] for dummy in range(3)]
    assert states == ["Creating", "Creating", "Succeeded"]


def test_lro_latency_in_seconds(arm):
    arm.double.lro_polls = 0
    arm.double.lro_seconds = 60
    response = arm.put(arm.pool(), MIG)
    link = response.headers["Azure-AsyncOperation"]
    assert [arm.get(link).json()["status"] for dummy in range(3)] == ["InProgress"] * 3


def test_failed_operation_leaves_the_pool_failed(arm):
    arm.double.fault("lro_failed", method="PUT", code="QuotaExceeded", message="Operation could not be completed "
                                                                               "as it results in exceeding quota.")
    status = arm.settle(arm.put(arm.pool(), MIG))
    assert status["status"] == "Failed"
    assert status["error"] == {"code": "QuotaExceeded",
                               "message": "Operation could not be completed as it results in exceeding quota."}
    assert arm.get(arm.pool()).json()["properties"]["provisioningState"] == "Failed"


def test_faults_through_the_control_endpoint(arm):
    fault = {"kind": "throttle", "count": 2, "method": "GET", "retry_after": 3}
    created = requests.post(arm.double.url + "_double/faults", json=fault, timeout=5)
    assert created.status_code == 201
    first = arm.get(arm.url())
    assert first.status_code == 429 and first.headers["Retry-After"] == "3"
    assert arm.get(arm.url()).status_code == 429
    assert arm.get(arm.url()).status_code == 200
    requests.post(arm.double.url + "_double/faults", json={"kind": "unavailable"}, timeout=5)
    assert arm.get(arm.url()).status_code == 503
    requests.post(arm.double.url + "_double/faults", json={"kind": "reset", "match": "agentPools"}, timeout=5)
    assert arm.get(arm.url()).status_code == 200  # does not match
    with pytest.raises(requests.ConnectionError):
        arm.get(arm.pool("nodepool1"))
    bad = requests.post(arm.double.url + "_double/faults", json={"kind": "meteor"}, timeout=5)
    assert bad.status_code == 400
    log = requests.get(arm.double.url + "_double/requests", timeout=5).json()["value"]
    assert [entry["status"] for entry in log[-3:]] == [503, 200, "reset"]
    assert all("Authorization" not in str(entry) for entry in log)


def test_commit_then_reset_applies_the_write(arm):
    arm.double.fault("commit_then_reset", method="PUT")
    with pytest.raises(requests.ConnectionError):
        arm.put(arm.pool(), MIG)
    assert arm.double.pool(RG, CLUSTER, "mig")["properties"]["provisioningState"] == "Creating"


def test_clusters_and_tokens_through_the_control_endpoint(arm):
    made = requests.post(arm.double.url + "_double/clusters",
                         json={"resource_group": "rg2", "name": "c2", "location": "westeurope"}, timeout=5)
    assert made.status_code == 201 and made.json()["location"] == "westeurope"
    token = requests.post(arm.double.url + "_double/tokens", json={}, timeout=5).json()["token"]
    url = arm.url().replace(RG, "rg2").replace(CLUSTER, "c2")
    assert requests.get(url, headers={"Authorization": "Bearer " + token}, timeout=5).json()["name"] == "c2"


def test_managed_identity_endpoint(arm):
    endpoint = arm.double.msi_endpoint
    params = {"api-version": "2019-08-01", "resource": "https://management.azure.com"}
    assert requests.get(endpoint, params=params, timeout=5).status_code == 401
    answer = requests.get(endpoint, params=params, headers={"X-IDENTITY-HEADER": arm.double.msi_header}, timeout=5)
    assert answer.status_code == 200
    token = answer.json()["access_token"]
    assert int(answer.json()["expires_on"]) > 0
    assert requests.get(arm.url(), headers={"Authorization": "Bearer " + token}, timeout=5).status_code == 200
