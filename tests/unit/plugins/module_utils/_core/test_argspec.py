# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The environment fallbacks of the shared account options: what AWX/AAP's built-in credential types inject
(awx main/models/credential/injectors.py) becomes our options, through Ansible's own argument validation."""

from __future__ import annotations

import json
import os
import time

import azure.identity
import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args
from azure.core.credentials import AccessToken

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import session as _arm
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import AZURE_COMMON_SPEC, GCP_COMMON_SPEC
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure.session import CLOUDS, ArmSession

AWX_GCE = dict(GCE_EMAIL="sa@proj-env.iam.gserviceaccount.com", GCE_PROJECT="proj-env",
               GCE_CREDENTIALS_FILE_PATH="/runner/env/tmpkey", GCP_SERVICE_ACCOUNT_FILE="/runner/env/tmpkey",
               GCP_AUTH_KIND="serviceaccount", GCP_PROJECT="proj-env", GCP_ENV_TYPE="tower")
AWX_AZURE = dict(AZURE_SUBSCRIPTION_ID="11111111-2222-3333-4444-555555555555", AZURE_CLIENT_ID="app-id",
                 AZURE_TENANT="tenant-id", AZURE_SECRET="s3cr3t-from-awx", AZURE_CLOUD_ENVIRONMENT="AzureUSGovernment")


@pytest.fixture
def environment(monkeypatch):
    """Only the variables a test sets: none of the runner's GCP/Azure variables leak in."""
    for name in list(os.environ):
        if name.startswith(("GCP_", "GCE_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(name)

    def set_vars(variables):
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
    return set_vars


def validated(spec, params):
    result = ArgumentSpecValidator(spec).validate(params)
    assert result.error_messages == []
    return result.validated_parameters


def test_awx_gce_credential_fills_the_gcp_account(environment):
    environment(AWX_GCE)
    params = validated(GCP_COMMON_SPEC, {})
    assert (params["project"], params["auth_kind"], params["service_account_file"]) == (
        "proj-env", "serviceaccount", "/runner/env/tmpkey")


def test_older_gce_names_are_read_when_the_gcp_names_are_missing(environment):
    environment(dict(GCE_PROJECT="old-proj", GCE_CREDENTIALS_FILE_PATH="/k.json", GCP_AUTH_KIND="serviceaccount"))
    params = validated(GCP_COMMON_SPEC, {})
    assert (params["project"], params["service_account_file"]) == ("old-proj", "/k.json")


def test_task_options_win_over_the_environment(environment):
    environment(AWX_GCE)
    params = validated(GCP_COMMON_SPEC, dict(project="from-task", auth_kind="accesstoken", access_token="tok"))
    assert (params["project"], params["auth_kind"]) == ("from-task", "accesstoken")


def test_scopes_come_comma_separated(environment):
    environment(dict(GCP_PROJECT="p", GCP_SCOPES="https://a/scope,https://b/scope"))
    assert validated(GCP_COMMON_SPEC, {})["scopes"] == ["https://a/scope", "https://b/scope"]


def test_without_environment_the_project_is_still_required(environment):
    result = ArgumentSpecValidator(GCP_COMMON_SPEC).validate({})
    assert "missing required arguments: project" in " ".join(result.error_messages)


def test_empty_variables_count_as_unset(environment):
    environment(dict(AZURE_SUBSCRIPTION_ID="sub", AZURE_CLOUD_ENVIRONMENT="", AZURE_TENANT="", AZURE_TENANT_ID="t2"))
    params = validated(AZURE_COMMON_SPEC, {})
    assert (params["cloud"], params["tenant_id"]) == ("public", "t2")


def test_unknown_cloud_environment_is_refused_naming_the_choices(environment):
    environment(dict(AZURE_SUBSCRIPTION_ID="sub", AZURE_CLOUD_ENVIRONMENT="AzureGermanCloud"))
    message = " ".join(ArgumentSpecValidator(AZURE_COMMON_SPEC).validate({}).error_messages)
    assert "cloud" in message and "AzureGermanCloud" in message and "AzureUSGovernment" in message


class _Module:
    def __init__(self, params):
        self.params = params

    def debug(self, message):
        del message

    def fail_json(self, **kwargs):
        raise AssertionError(kwargs)


def test_awx_azure_credential_makes_a_service_principal_of_its_cloud(environment, monkeypatch):
    environment(AWX_AZURE)
    made = []

    class ClientSecretCredential:
        def __init__(self, *args, **kwargs):
            made.append((args, kwargs))

        def get_token(self, *scopes, **kwargs):  # the session logs in before its first request
            del scopes, kwargs
            return AccessToken("token-from-entra", int(time.time()) + 3600)

    # Microsoft Entra ID cannot be reached from here: record what azure-identity would be given
    monkeypatch.setattr(azure.identity, "ClientSecretCredential", ClientSecretCredential)
    session = ArmSession.from_module(_Module(validated(AZURE_COMMON_SPEC, {})))
    assert made == [(("tenant-id", "app-id", "s3cr3t-from-awx"), dict(authority=CLOUDS["usgovernment"].authority_host))]
    assert session.subscription_id == AWX_AZURE["AZURE_SUBSCRIPTION_ID"]
    assert session.arm_endpoint == CLOUDS["usgovernment"].arm_endpoint


KEY = {"type": "service_account", "project_id": "demo-project", "private_key_id": "abc123",
       "private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
       "client_email": "sa@demo-project.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token",
       "universe_domain": "googleapis.com"}


@pytest.mark.parametrize("given, masked", [
    (KEY, set(KEY.values())),  # a mapping: Ansible lists every value in it before the jsonarg conversion
    (json.dumps(KEY), {json.dumps(KEY)}),  # the JSON text: only the text (the session adds the private key)
])
def test_service_account_contents_as_a_mapping_masks_every_value(environment, given, masked):
    """What docs/behaviour-contract.md and the gcp doc fragment say of service_account_contents given as a mapping,
    read from the module's public ``no_log_values`` (the arguments handed over with ansible-core's test helper)."""
    with patch_module_args(dict(auth_kind="serviceaccount", project="p", service_account_contents=given)):
        module = AnsibleModule(argument_spec=GCP_COMMON_SPEC)
    assert isinstance(module.params["service_account_contents"], str)
    assert module.no_log_values == masked
