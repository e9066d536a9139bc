# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubeconfig gke_gpu_cluster writes authenticates with no gke-gcloud-auth-plugin.

The role's kubeconfig tasks write the file for a cluster whose endpoint and CA certificate are the
Kubernetes double's (over TLS, as GKE's); the double accepts only the bearer token the GCP double's
token endpoint hands out for a service-account key. kubernetes.core (in the same run) and the Kubernetes
Python client (here) load the file, run the collection's exec credential plugin with the environment
AWX's Google Compute Engine credential injects, and reach the cluster. Neither the token nor the key is
in the file or in the output.
"""

from __future__ import annotations

import base64
import datetime
import json
import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT

EXEC_MODULE = "ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.exec_credential"


@pytest.fixture
def cluster(gcp_double):
    """A Kubernetes double over TLS that accepts the GCP double's token, and what GKE says of the cluster."""
    double = K8sDouble(tls=True, token=gcp_double.token).start()
    try:
        double.add_node("gke-a3-pool-0", labels={"cloud.google.com/gke-nodepool": "a3-pool"})
        with open(double.ca_file, "rb") as handle:
            ca = base64.b64encode(handle.read()).decode("ascii")
        # the fields of the gke_cluster result the kubeconfig template reads
        double.gke = {"endpoint": double.url.split("://", 1)[1], "cluster": {"masterAuth": {"clusterCaCertificate": ca}}}
        yield double
    finally:
        double.stop()


@pytest.fixture
def key_file(gcp_double, tmp_path):
    key = gcp_double.service_account_key(project=GCP_PROJECT)
    path = tmp_path / "gce-key.json"
    path.write_text(json.dumps(key), encoding="utf-8")
    return key, str(path)


def play(kubeconfig, gke, **role_vars):
    return [{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"name": "Write the kubeconfig through the role",
             "ansible.builtin.include_role": {"name": "gpu_ops.cluster.gke_gpu_cluster", "tasks_from": "_kubeconfig"},
             "vars": dict({"gke_gpu_cluster_project": GCP_PROJECT, "gke_gpu_cluster_location": "us-central1",
                           "gke_gpu_cluster_name": "a3", "gke_gpu_cluster_kubeconfig": kubeconfig,
                           "__gke_gpu_cluster_cluster": gke}, **role_vars)},
            {"name": "Read the nodes with the kubeconfig",
             "kubernetes.core.k8s_info": {"kind": "Node", "kubeconfig": kubeconfig}, "register": "nodes"},
            {"name": "Nodes", "ansible.builtin.debug": {"msg": "{{ nodes.resources | map(attribute='metadata.name') }}"}},
        ]}]


def test_kubernetes_core_authenticates_through_the_exec_plugin(run_playbook, gcp_double, cluster, key_file, tmp_path):
    key, path = key_file
    kubeconfig = str(tmp_path / "kube" / "a3.yaml")
    # what AWX's Google Compute Engine credential injects (README "Credentials from the environment")
    env = {"GCP_AUTH_KIND": "serviceaccount", "GCE_CREDENTIALS_FILE_PATH": path, "GCP_PROJECT": GCP_PROJECT}
    result = run_playbook(play(kubeconfig, cluster.gke), env=env, verbosity=3).assert_ok()
    assert result.task("Nodes")["result"]["msg"] == ["gke-a3-pool-0"]
    assert len(gcp_double.token_requests) >= 1, "the token came from the token endpoint"

    text = open(kubeconfig, encoding="utf-8").read()
    user = yaml.safe_load(text)["users"][0]["user"]["exec"]
    assert user["args"] == ["-m", EXEC_MODULE] and "gke-gcloud-auth-plugin" not in text
    assert [e["name"] for e in user["env"]] == ["PYTHONPATH"]
    for output in (text, result.stdout, result.stderr, json.dumps(result.results)):
        assert gcp_double.token not in output
        assert key["private_key"].splitlines()[1] not in output and key["private_key_id"] not in output


def test_the_python_client_loads_the_file_and_runs_the_plugin_again_when_the_token_expires(
        run_playbook, gcp_double, cluster, key_file, tmp_path, monkeypatch):
    import kubernetes.client  # pylint: disable=import-outside-toplevel
    from kubernetes.config import kube_config  # pylint: disable=import-outside-toplevel

    dummy, path = key_file
    kubeconfig = str(tmp_path / "a3.yaml")
    # the key file named in the role's variable, the environment empty
    run_playbook(play(kubeconfig, cluster.gke, gke_gpu_cluster_kubeconfig_credentials={
        "auth_kind": "serviceaccount", "service_account_file": path}), env={"GCP_AUTH_KIND": ""}).assert_ok()
    for name in ("GCP_AUTH_KIND", "GCP_SERVICE_ACCOUNT_FILE", "GCE_CREDENTIALS_FILE_PATH", "GCP_SERVICE_ACCOUNT_CONTENTS"):
        monkeypatch.delenv(name, raising=False)
    before = len(gcp_double.token_requests)
    configuration = kubernetes.client.Configuration()
    # what kubernetes.config.load_kube_config does, keeping the loader to age its token
    with open(kubeconfig, encoding="utf-8") as handle:
        loader = kube_config.KubeConfigLoader(config_dict=yaml.safe_load(handle),
                                              config_base_path=os.path.dirname(kubeconfig))
    loader.load_and_set(configuration)
    api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    assert [n.metadata.name for n in api.list_node().items] == ["gke-a3-pool-0"]
    assert len(gcp_double.token_requests) == before + 1
    # an expired token: the client's refresh hook runs the plugin again for a new one
    assert loader.expiry > datetime.datetime.now(tz=datetime.timezone.utc), "the plugin said when the token expires"
    loader.expiry = datetime.datetime.now(tz=datetime.timezone.utc) - datetime.timedelta(minutes=1)
    assert [n.metadata.name for n in api.list_node().items] == ["gke-a3-pool-0"]
    assert len(gcp_double.token_requests) == before + 2


def test_the_gcloud_plugin_stays_available(run_playbook, cluster, tmp_path):
    kubeconfig = str(tmp_path / "a3.yaml")
    plays = play(kubeconfig, cluster.gke, gke_gpu_cluster_kubeconfig_auth="gke-gcloud-auth-plugin")
    plays[0]["tasks"] = plays[0]["tasks"][:1]  # no gke-gcloud-auth-plugin here: only the file is checked
    run_playbook(plays).assert_ok()
    user = yaml.safe_load(open(kubeconfig, encoding="utf-8"))["users"][0]["user"]["exec"]
    assert user["command"] == "gke-gcloud-auth-plugin" and "args" not in user
