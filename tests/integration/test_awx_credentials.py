# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Playbook runs with exactly the environment each AWX/AAP built-in credential type injects (awx
main/models/credential/injectors.py) and no credential variables: the modules and roles find their
account in it, and no secret reaches the output."""

from __future__ import annotations

import base64
import json
import os
import stat

import google.auth.exceptions
import google.auth.transport.requests
import pytest
from google.oauth2 import service_account

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble

CREDENTIAL_PREFIXES = ("GCP_", "GCE_", "GOOGLE_", "AZURE_", "K8S_AUTH_", "IDENTITY_", "MSI_")


def only(variables):
    """The runner's own credential variables blanked out (empty counts as unset), then ``variables``."""
    env = {name: "" for name in os.environ if name.startswith(CREDENTIAL_PREFIXES)}
    env.update(variables)
    return env


def play(tasks, defaults=None):
    return [dict(name="AWX credential", hosts="localhost", gather_facts=False, module_defaults=defaults or {},
                 tasks=tasks)]


def test_google_compute_engine_credential(run_playbook, gcp_double, tmp_path):
    # AWX writes the key (mode 0660) into the job's private data dir; its token_uri is Google's, here the double's
    email, project = "awx-runner@proj-awx.iam.gserviceaccount.com", "proj-awx"
    key = gcp_double.service_account_key(project, name="awx-runner")
    key_file = tmp_path / "env" / "tmpgce"
    key_file.parent.mkdir()
    key_file.write_text(json.dumps(key, indent=2))
    os.chmod(key_file, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IWGRP)
    env = only(dict(GCE_EMAIL=email, GCE_PROJECT=project, GCE_CREDENTIALS_FILE_PATH=str(key_file),
                    GCP_SERVICE_ACCOUNT_FILE=str(key_file), GCP_AUTH_KIND="serviceaccount", GCP_PROJECT=project,
                    GCP_ENV_TYPE="tower"))
    # the endpoints point at the double; project and credentials come from the environment only
    defaults = {"group/gpu_ops.cluster.gcp": dict(container_endpoint=gcp_double.url, compute_endpoint=gcp_double.url)}
    role = {"name": "GPU NIC fabric", "ansible.builtin.include_role": {"name": "gpu_ops.cluster.gcp_gpu_vpcs"},
            "vars": dict(gcp_gpu_vpcs_cluster="awx", gcp_gpu_vpcs_location="us-central1", gcp_gpu_vpcs_gpudirect="tcpx")}
    result = run_playbook(play([role], defaults), env=env, verbosity=3).assert_ok()

    state = gcp_double.state(project)
    assert len(state["networks"]) == 4 and len(state["firewalls"]) == 4
    assert set(_issuers(gcp_double)) == {email}
    key_body = key["private_key"].splitlines()[1]
    for secret in (key_body, gcp_double.token):
        assert secret not in result.output


def test_microsoft_azure_resource_manager_credential(run_playbook, tmp_path):
    # Microsoft Entra ID cannot be reached from here: render mode shows the subscription and cloud taken
    # from the environment (tests/unit/plugins/module_utils/_core/test_argspec.py checks the service principal)
    subscription, secret = "6f1c2d3e-0000-4000-8000-00000000a3c5", "awx-azure-s3cr3t"
    env = only(dict(AZURE_SUBSCRIPTION_ID=subscription, AZURE_CLIENT_ID="app-id", AZURE_TENANT="tenant-id",
                    AZURE_SECRET=secret, AZURE_CLOUD_ENVIRONMENT="AzureUSGovernment"))
    render = tmp_path / "rendered"
    pool = dict(provider="aks", resource_group="gpu-rg", cluster="gpu-aks", name="mig", vm_size="Standard_ND96asr_v4",
                node_count=1, gpu_instance_profile="MIG1g", render_dir=str(render))
    result = run_playbook(play([{"name": "MIG pool", "gpu_ops.cluster.gpu_nodepool": pool}]), env=env,
                          verbosity=3).assert_ok()

    [request] = [json.loads(p.read_text()) for p in (render / "requests").iterdir()]
    assert request["url"].startswith("https://management.usgovcloudapi.net/subscriptions/%s/resourceGroups/gpu-rg/"
                                     % subscription)
    assert secret not in result.output and secret not in json.dumps(request)


def test_kubernetes_bearer_token_credential(run_playbook):
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "awx-check", "namespace": "default"},
                 "data": {"from": "awx"}}
    apply = {"name": "Apply", "ansible.builtin.include_role": {"name": "gpu_ops.cluster.apply", "tasks_from": "manifests"},
             "vars": {"apply_step": "10-awx", "apply_manifests": [configmap]}}
    with K8sDouble(tls=True) as k8s:
        env = only(dict(K8S_AUTH_HOST=k8s.url, K8S_AUTH_API_KEY=k8s.token, K8S_AUTH_VERIFY_SSL="True",
                        K8S_AUTH_SSL_CA_CERT=k8s.ca_file))
        result = run_playbook(play([apply]), env=env, verbosity=3).assert_ok()
        assert k8s.get("ConfigMap", "awx-check", "default")["data"] == {"from": "awx"}
        assert k8s.token not in result.output


def _issuers(double):
    """The ``iss`` of each JWT grant the token endpoint was sent."""
    return [json.loads(base64.urlsafe_b64decode(form["assertion"].split(".")[1] + "=="))["iss"]
            for form in double.token_requests]


def _refresh(key):
    credentials = service_account.Credentials.from_service_account_info(
        key, scopes=["https://www.googleapis.com/auth/cloud-platform"])
    credentials.refresh(google.auth.transport.requests.Request())
    return credentials.token


def test_token_endpoint_trades_only_jwts_signed_by_a_known_key(gcp_double):
    good = gcp_double.service_account_key("p", name="a")
    assert _refresh(good) == gcp_double.token
    other = gcp_double.service_account_key("p", name="b")
    forged = dict(good, private_key=other["private_key"])  # a's name, b's key
    with pytest.raises(google.auth.exceptions.RefreshError, match="Invalid JWT Signature"):
        _refresh(forged)
    with pytest.raises(google.auth.exceptions.RefreshError, match="account not found"):
        _refresh(dict(good, client_email="nobody@p.iam.gserviceaccount.com"))
    # every grant was asked for; only the first one (a, signed by a's key) was traded for the token
    assert _issuers(gcp_double) == ["a@p.iam.gserviceaccount.com"] * 2 + ["nobody@p.iam.gserviceaccount.com"]
