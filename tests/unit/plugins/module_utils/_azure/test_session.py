# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ARM session (_arm.py) against the ARM double: LROs, retries, clouds, credentials, render mode."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import azure.identity
import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import session as _arm
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import AZURE_COMMON_SPEC
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure.session import (
    CLOUDS,
    ArmSession,
    CredentialsError,
    LroError,
    build_credential,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError, RenderSession
from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import API_VERSION
from ansible_collections.gpu_ops.cluster.tests.doubles.arm import ArmDouble, DoubleCredential

RG = "gpu-rg"
CLUSTER = "gpu-aks"
MIG_POOL = {"properties": {"vmSize": "Standard_ND96asr_v4", "count": 1, "gpuInstanceProfile": "MIG1g"}}


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def double():
    with ArmDouble(retry_after=7) as arm:
        arm.add_cluster(RG, CLUSTER)
        yield arm


def session_for(double, **kwargs):
    kwargs.setdefault("credential", DoubleCredential(double))
    kwargs.setdefault("sleep", Sleeps())
    kwargs.setdefault("max_retries", 4)
    return ArmSession(double.subscription, arm_endpoint=double.url, **kwargs)


def pool_url(arm, name="mig"):
    return arm.url("resourceGroups/%s/providers/Microsoft.ContainerService/managedClusters/%s/agentPools/%s"
                   % (RG, CLUSTER, name), API_VERSION)


# ------------------------------------------------------------------------------------- URLs and clouds


def test_url_is_relative_to_the_subscription(double):
    arm = session_for(double)
    assert arm.url("resourceGroups/rg", "2026-08-01") == (
        "%ssubscriptions/%s/resourceGroups/rg?api-version=2026-08-01" % (double.url, double.subscription))
    assert arm.url("/subscriptions/other/resourceGroups/rg", "v") == double.url + "subscriptions/other/resourceGroups/rg?api-version=v"
    assert arm.arm_endpoint.startswith("http://127.0.0.1:")  # the scheme of arm_endpoint is kept


@pytest.mark.parametrize("cloud,endpoint,scope", [
    ("public", "https://management.azure.com/", "https://management.azure.com/.default"),
    ("china", "https://management.chinacloudapi.cn/", "https://management.chinacloudapi.cn/.default"),
    ("usgovernment", "https://management.usgovcloudapi.net/", "https://management.usgovcloudapi.net/.default"),
])
def test_cloud_selects_endpoint_and_scope(cloud, endpoint, scope):
    arm = ArmSession("sub", cloud=cloud, credential=object())
    assert arm.arm_endpoint == endpoint
    assert arm.scope == scope
    assert arm.url("resourceGroups/rg", "v").startswith(endpoint + "subscriptions/sub/")


def test_unknown_cloud_is_refused():
    with pytest.raises(CredentialsError, match="cloud must be one of china, public, usgovernment"):
        ArmSession("sub", cloud="germany", credential=object())


@pytest.mark.parametrize("cloud", ["china", "usgovernment"])
def test_sovereign_cloud_token_audience_is_accepted_by_its_arm(cloud):
    audience = CLOUDS[cloud].audience
    with ArmDouble(audiences=(audience,)) as double:
        double.add_cluster(RG, CLUSTER)
        credential = DoubleCredential(double)
        arm = session_for(double, cloud=cloud, credential=credential)
        assert arm.get(pool_url(arm, "nodepool1"))["name"] == "nodepool1"
        assert credential.scopes == [(audience + ".default",)]


def test_public_cloud_token_is_refused_by_a_sovereign_arm():
    with ArmDouble(audiences=(CLOUDS["china"].audience,)) as double:
        double.add_cluster(RG, CLUSTER)
        arm = session_for(double, cloud="public")
        with pytest.raises(ApiError) as caught:
            arm.get(pool_url(arm, "nodepool1"))
        assert caught.value.status == 401
        assert "wrong audience" in caught.value.message


@pytest.mark.parametrize("cloud", ["public", "china", "usgovernment"])
def test_credentials_use_the_authority_of_the_cloud(cloud, monkeypatch):
    made = []

    class Recorder:
        def __init__(self, *args, **kwargs):
            made.append((type(self).__name__, args, kwargs))

    class ClientSecretCredential(Recorder):
        pass

    class DefaultAzureCredential(Recorder):
        pass

    # Microsoft Entra ID cannot be reached from here: record what azure-identity would be given
    monkeypatch.setattr(azure.identity, "ClientSecretCredential", ClientSecretCredential)
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", DefaultAzureCredential)
    ArmSession("sub", cloud=cloud, tenant_id="t", client_id="c", client_secret="s3cr3t-value")
    ArmSession("sub", cloud=cloud, client_id="mi-client")
    ArmSession("sub", cloud=cloud)
    authority = CLOUDS[cloud].authority_host
    assert made[0] == ("ClientSecretCredential", ("t", "c", "s3cr3t-value"), dict(authority=authority))
    assert made[1] == ("DefaultAzureCredential", (), dict(
        authority=authority, managed_identity_client_id="mi-client", workload_identity_client_id="mi-client"))
    assert made[2] == ("DefaultAzureCredential", (), dict(authority=authority))


def test_an_authority_of_ones_own_skips_instance_discovery_and_azure_logs_stay_quiet(monkeypatch):
    made = []

    def record(*args, **kwargs):
        made.append(kwargs)

    monkeypatch.setattr(azure.identity, "ClientSecretCredential", record)
    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", record)
    for name in ("azure.identity", "msal"):
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    build_credential("public", "t", "c", "s3cr3t-value", authority_host="login.example.test")
    build_credential("public", authority_host="login.example.test")
    build_credential("public")
    # Microsoft's instance discovery does not know an authority of one's own; the public one keeps it
    assert [m.get("disable_instance_discovery") for m in made] == [True, True, None]
    # azure-identity's own WARNING of a failed get_token (the server's answer, unscrubbed) reaches no handler of the root
    assert [logging.getLogger(name).propagate for name in ("azure.identity", "msal")] == [False, False]


def test_client_secret_without_tenant_is_refused_without_echoing_it():
    with pytest.raises(CredentialsError) as caught:
        ArmSession("sub", client_id="c", client_secret="s3cr3t-value")
    assert "tenant_id" in str(caught.value)
    assert "s3cr3t-value" not in str(caught.value)


def test_managed_identity_through_azure_identity_end_to_end(double, monkeypatch):
    # the real DefaultAzureCredential, finding the double's App Service managed-identity endpoint
    for name in list(os.environ):
        if name.startswith("AZURE_") or name in ("MSI_ENDPOINT", "IMDS_ENDPOINT", "IDENTITY_ENDPOINT"):
            monkeypatch.delenv(name, raising=False)
    for name, value in double.msi_environment().items():
        monkeypatch.setenv(name, value)
    arm = ArmSession(double.subscription, arm_endpoint=double.url, sleep=Sleeps())
    assert arm.get(pool_url(arm, "nodepool1"))["properties"]["mode"] == "System"
    assert double.requests_for("GET", "agentPools")[-1]["authorized"]


# ------------------------------------------------------------------------------------- tokens


def test_token_is_reused_until_near_expiry(double):
    credential = DoubleCredential(double, lifetime=3600)
    arm = session_for(double, credential=credential)
    for dummy in range(3):
        arm.get(pool_url(arm, "nodepool1"))
    assert len(credential.scopes) == 1


def test_token_near_expiry_is_renewed(double):
    credential = DoubleCredential(double, lifetime=60)  # inside the renewal margin
    arm = session_for(double, credential=credential)
    for dummy in range(3):
        arm.get(pool_url(arm, "nodepool1"))
    assert len(credential.scopes) == 3


def test_missing_token_is_a_401_from_arm(double):
    class NoToken(DoubleCredential):
        def get_token(self, *scopes, **kwargs):
            from azure.core.credentials import AccessToken  # pylint: disable=import-outside-toplevel

            return AccessToken("not-issued-by-entra", 4102444800)

    arm = session_for(double, credential=NoToken(double))
    with pytest.raises(ApiError) as caught:
        arm.get(pool_url(arm, "nodepool1"))
    assert caught.value.status == 401
    assert "The access token is invalid" in caught.value.message
    assert "not-issued-by-entra" not in str(caught.value)


def test_credential_failure_never_carries_the_secret(double):
    secret = "Sup3r~Secret.Value_123"

    class Failing:
        def get_token(self, *scopes, **kwargs):
            raise RuntimeError("AADSTS7000215: Invalid client secret provided: %s; Authorization: Bearer eyJ0eXAiOiJKV1QiLCJh"
                               "bGciOi.eyJhdWQiOiJodHRwczovL21hbmFn.c2lnbmF0dXJl" % secret)

    arm = session_for(double, credential=Failing(), client_secret=secret)
    with pytest.raises(ApiError) as caught:
        arm.get(pool_url(arm, "nodepool1"))
    text = str(caught.value)
    assert "AADSTS7000215" in text
    assert secret not in text
    assert "eyJ0eXAiOiJKV1QiLCJh" not in text
    assert double.requests_for() == []  # nothing was sent without a token


def test_retry_log_never_carries_the_token(double):
    messages = []
    credential = DoubleCredential(double)
    arm = session_for(double, credential=credential, log=messages.append)
    double.fault("throttle", count=1, method="GET")
    arm.get(pool_url(arm, "nodepool1"))
    assert messages and "retrying GET" in messages[0]
    issued = list(double.tokens)
    assert not any(token in message for token in issued for message in messages)


# ------------------------------------------------------------------------------------- LROs


def test_put_lro_by_azure_async_operation(double):
    arm = session_for(double)
    response = arm.put(pool_url(arm), MIG_POOL)
    body, headers = response
    assert response.status == 201
    assert body["properties"]["provisioningState"] == "Creating"
    assert "Azure-AsyncOperation" in headers
    final = arm.wait(response)
    assert final["properties"]["provisioningState"] == "Succeeded"
    assert final["properties"]["gpuInstanceProfile"] == "MIG1g"
    # Retry-After (7 s) between every poll: two InProgress answers, then Succeeded
    assert arm.sleep == [7.0, 7.0, 7.0]
    polls = double.requests_for("GET", "/operations/")
    assert len(polls) == 3


def test_put_lro_by_location(double):
    double.lro_style = "location"
    arm = session_for(double)
    response = arm.put(pool_url(arm), MIG_POOL)
    assert "Location" in response.headers and "Azure-AsyncOperation" not in response.headers
    final = arm.wait(response)
    assert final["properties"]["provisioningState"] == "Succeeded"
    assert [r["status"] for r in double.requests_for("GET", "/operationresults/")] == [202, 202, 200]
    assert arm.sleep == [7.0, 7.0, 7.0]


def test_put_lro_by_provisioning_state(double):
    double.lro_style = "state"
    arm = session_for(double, poll_interval=3)
    response = arm.put(pool_url(arm), MIG_POOL)
    assert "Location" not in response.headers and "Azure-AsyncOperation" not in response.headers
    final = arm.wait(response)
    assert final["properties"]["provisioningState"] == "Succeeded"
    # first pause honours the PUT's Retry-After, then the default interval
    assert arm.sleep == [7.0, 3, 3]
    assert [r["status"] for r in double.requests_for("GET", "agentPools/mig")] == [200, 200, 200]


def test_delete_lro_by_location(double):
    arm = session_for(double)
    arm.wait(arm.put(pool_url(arm), MIG_POOL))
    response = arm.delete(pool_url(arm))
    assert response.status == 202
    assert arm.wait(response) is None
    assert double.pool(RG, CLUSTER, "mig") is None
    assert arm.get(pool_url(arm)) is None


def test_delete_of_a_missing_pool_is_a_204(double):
    arm = session_for(double)
    response = arm.delete(pool_url(arm, "nothere"))
    assert response.status == 204
    assert arm.wait(response) is None


@pytest.mark.parametrize("style", ["async", "location", "state"])
def test_failed_lro_raises_lro_error(double, style):
    double.lro_style = style
    double.fault("lro_failed", method="PUT", match="agentPools/mig", code="OverconstrainedAllocationRequest",
                 message="Allocation failed. VM(s) with the following constraints cannot be allocated.")
    arm = session_for(double)
    response = arm.put(pool_url(arm), MIG_POOL)
    with pytest.raises(LroError) as caught:
        arm.wait(response)
    error = caught.value
    assert error.method == "PUT"
    assert error.url.endswith("/agentPools/mig")
    assert "Failed" in str(error)
    if style != "state":  # the resource itself only says Failed, the operation has the reason
        assert error.code == "OverconstrainedAllocationRequest"
        assert "Allocation failed" in str(error)
    assert double.pool(RG, CLUSTER, "mig")["properties"]["provisioningState"] == "Failed"


def test_lro_timeout(double):
    double.lro_polls = 10 ** 6
    now = [0.0]

    def clock():
        return now[0]

    def sleep(seconds):
        now[0] += seconds

    arm = session_for(double, operation_timeout=30, clock=clock, sleep=sleep)
    response = arm.put(pool_url(arm), MIG_POOL)
    with pytest.raises(LroError, match="timed out"):
        arm.wait(response)
    assert now[0] == 30


def test_wait_for_state_of_a_pool_found_mid_operation(double):
    arm = session_for(double)
    arm.put(pool_url(arm), MIG_POOL)  # not waited for: the pool is Creating
    found = arm.get(pool_url(arm))
    assert found["properties"]["provisioningState"] == "Creating"
    final = arm.wait_for_state(pool_url(arm), first=found)
    assert final["properties"]["provisioningState"] == "Succeeded"


# ------------------------------------------------------------------------------------- retries


def test_throttling_honours_retry_after(double):
    arm = session_for(double)
    double.fault("throttle", count=3, method="PUT", retry_after=5)
    response = arm.put(pool_url(arm), MIG_POOL)
    assert response.status == 201
    assert arm.sleep[:3] == [5.0, 5.0, 5.0]
    assert [r["status"] for r in double.requests_for("PUT")] == [429, 429, 429, 201]


def test_503_and_connection_reset_are_retried(double):
    arm = session_for(double)
    double.fault("unavailable", count=2, method="GET")
    double.fault("reset", count=1, method="GET")
    assert arm.get(pool_url(arm, "nodepool1"))["name"] == "nodepool1"
    assert [r["status"] for r in double.requests_for("GET")] == ["reset", 503, 503, 200]


def test_throttling_beyond_max_retries_gives_the_arm_error(double):
    arm = session_for(double, max_retries=2)
    double.fault("throttle", count=5, method="GET", retry_after=1)
    with pytest.raises(ApiError) as caught:
        arm.get(pool_url(arm, "nodepool1"))
    assert caught.value.status == 429
    assert "throttled" in caught.value.message
    assert len(double.requests_for("GET")) == 3


def test_put_retried_after_commit_and_reset_is_idempotent(double):
    arm = session_for(double)
    double.fault("commit_then_reset", method="PUT")
    with pytest.raises(ApiError) as caught:
        # the double took the first PUT; the retry meets the running operation (409)
        arm.put(pool_url(arm), MIG_POOL)
    assert caught.value.status == 409
    assert double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]


def test_errors_name_the_request_and_arm_message(double):
    arm = session_for(double)
    with pytest.raises(ApiError) as caught:
        arm.put(pool_url(arm), {"properties": {"vmSize": "Standard_ND96asr_v4", "gpuInstanceProfile": "MIG5g"}})
    assert caught.value.status == 400
    assert "PUT" in str(caught.value) and "agentPools/mig" in str(caught.value)
    assert "gpuInstanceProfile" in caught.value.message


def test_get_of_a_missing_resource_is_none(double):
    arm = session_for(double)
    assert arm.get(pool_url(arm, "nothere")) is None


# ------------------------------------------------------------------------------------- render mode


def test_render_mode_sends_nothing_and_records_writes(tmp_path, monkeypatch):
    def no_credentials(*args, **kwargs):
        raise AssertionError("render mode must not build a credential")

    monkeypatch.setattr(_arm, "build_credential", no_credentials)
    arm = ArmSession("sub-1", render_dir=str(tmp_path), sleep=Sleeps())
    assert arm.render
    assert isinstance(arm.http.session, RenderSession)
    url = arm.url("resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/mig",
                  API_VERSION)
    assert arm.get(url) is None
    final = arm.wait(arm.put(url, MIG_POOL))
    assert final["properties"]["provisioningState"] == "Succeeded"
    assert final["name"] == "mig"
    assert final["id"] == "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c/agentPools/mig"
    assert arm.wait(arm.delete(url)) is None
    files = sorted(os.listdir(os.path.join(str(tmp_path), "requests")))
    assert files == ["001-arm-put-agentPools_mig.json", "002-arm-delete-agentPools_mig.json"]
    with open(os.path.join(str(tmp_path), "requests", files[0])) as handle:
        recorded = json.load(handle)
    assert recorded["method"] == "PUT"
    assert recorded["body"] == MIG_POOL
    assert recorded["url"].endswith("/agentPools/mig?api-version=%s" % API_VERSION)
    assert arm.sleep == []


# ------------------------------------------------------------------------------------- from_module


def _module(args):
    with patch_module_args(args):
        return AnsibleModule(argument_spec=AZURE_COMMON_SPEC)


def _failure(args, capsys, **kwargs):
    with patch_module_args(args):
        module = AnsibleModule(argument_spec=AZURE_COMMON_SPEC)
        with pytest.raises(SystemExit):
            run_module(module, lambda params, context: dict(session=repr(context.session(ArmSession, **kwargs))))
    return json.loads(capsys.readouterr().out)


def test_from_module_builds_a_working_session(double):
    module = _module(dict(subscription_id=double.subscription, arm_endpoint=double.url, max_retries=3))
    arm = ArmSession.from_module(module, credential=DoubleCredential(double), sleep=Sleeps())
    assert arm.http.retry.max_retries == 3 and not arm.render
    assert arm.get(pool_url(arm, "nodepool1"))["name"] == "nodepool1"


def test_from_module_render_mode(tmp_path):
    arm = ArmSession.from_module(_module(dict(subscription_id="s", render_dir=str(tmp_path))))
    assert arm.render


def test_from_module_without_azure_identity_fails_cleanly(capsys, monkeypatch):
    monkeypatch.setattr(_arm, "HAS_AZURE_IDENTITY", False)
    result = _failure(dict(subscription_id="s"), capsys)
    assert result["failed"]
    assert "azure-identity" in result["msg"]


def test_from_module_bad_numbers(capsys):
    assert "max_retries" in _failure(dict(subscription_id="s", max_retries=-1), capsys)["msg"]
    assert "operation_timeout" in _failure(dict(subscription_id="s", operation_timeout=0), capsys)["msg"]


def test_from_module_secret_without_tenant(capsys):
    result = _failure(dict(subscription_id="s", client_id="c", client_secret="s3cr3t-value"), capsys)
    assert "tenant_id" in result["msg"]
    assert "s3cr3t-value" not in json.dumps(result)


# the folder that holds ansible_collections/gpu_ops/cluster
COLLECTIONS_ROOT = str(Path(_arm.__file__).resolve().parents[6])


def test_loading_the_engine_leaves_azure_identity_unimported():
    """The controller loads the AKS engine with every gpu_nodepool task, GKE runs included: azure-identity
    and msal are imported when a credential is built, not before."""
    script = ("import sys; sys.path[:0] = %r\n"
              "from ansible_collections.gpu_ops.cluster.plugins.action import gpu_nodepool\n"
              "from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import session\n"
              "print(session.HAS_AZURE_IDENTITY, sorted(m for m in sys.modules if m.startswith(('azure.identity', 'msal'))))\n"
              "session.build_credential('public', 'tenant', 'client', 'not-a-real-secret')\n"
              "print('azure.identity' in sys.modules)\n" % [COLLECTIONS_ROOT])
    # a fresh interpreter with its own site-packages and this checkout's collections (not the test runner's path:
    # ansible-test puts a stub ansible package first there, in sys.path and PYTHONPATH)
    env = dict((k, v) for k, v in os.environ.items() if k != "PYTHONPATH")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["True []", "True"]
