# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Kubernetes API double serves for helm: TLS, OpenAPI v3, protobuf release Secrets, and the helm
CLI's own install / upgrade / uninstall against it (kubernetes.core.helm through the roles is covered by
tests/integration/test_role_nvidia_device_plugin_helm.py).
"""

from __future__ import annotations

import base64
import json
import subprocess

import kubernetes
import pytest
import requests
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles import k8s_protobuf
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import chart_path, helm_binary

PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}


# --------------------------------------------------------------------- a minimal protobuf encoder

def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number, value):
    if isinstance(value, bool) or isinstance(value, int):
        return _varint(number << 3) + _varint(int(value))
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _map(number, mapping):
    return b"".join(_field(number, _field(1, k) + _field(2, v)) for k, v in mapping.items())


def _envelope(api_version, kind, raw):
    return k8s_protobuf.MAGIC + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, raw)


def _secret(name, namespace="", labels=None, data=None, secret_type="Opaque", extra=b""):
    # Go writes every string field, empty ones included (namespace "" here, as helm sends it)
    meta = _field(1, name) + _field(2, "") + _field(3, namespace) + _map(11, labels or {})
    return _envelope("v1", "Secret", _field(1, meta) + _map(2, data or {}) + _field(3, secret_type) + extra)


# --------------------------------------------------------------------- transport and discovery

def _get(double, path, **kwargs):
    return requests.get(double.url + path, headers={"Authorization": "Bearer " + double.token}, verify=double.ca_file,
                        timeout=10, **kwargs)


def test_tls_double_serves_the_python_client_and_a_verifiable_kubeconfig(helm_k8s):
    assert helm_k8s.url.startswith("https://127.0.0.1:")
    assert kubernetes.client.VersionApi(helm_k8s.api_client()).get_code().git_version.startswith("v1.33")
    config = yaml.safe_load(open(helm_k8s.kubeconfig, encoding="utf-8"))
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
    assert ca == open(helm_k8s.ca_file, "rb").read() and b"BEGIN CERTIFICATE" in ca
    with pytest.raises(requests.exceptions.SSLError):  # its own CA, not a public one
        requests.get(helm_k8s.url + "/version", timeout=10)


def test_openapi_v3_lists_group_versions_and_field_validation(helm_k8s):
    index = _get(helm_k8s, "/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/nvidia.com/v1"} <= set(index)
    document = _get(helm_k8s, index["apis/apps/v1"]["serverRelativeURL"]).json()
    assert document["openapi"].startswith("3.")
    patch = document["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "DaemonSet"}
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][2].items()
    cluster_scoped = _get(helm_k8s, index["api/v1"]["serverRelativeURL"]).json()["paths"]
    assert "/api/v1/nodes/{name}" in cluster_scoped and "/api/v1/namespaces/{namespace}/nodes/{name}" not in cluster_scoped
    assert _get(helm_k8s, "/openapi/v3/apis/nosuch.example.com/v1").status_code == 404
    assert _get(helm_k8s, "/openapi/v2").status_code == 404  # protobuf only in a real server; not served


# --------------------------------------------------------------------- protobuf bodies

def _post(double, path, body):
    return requests.post(double.url + path, data=body, verify=double.ca_file, timeout=10,
                         headers=dict(PROTOBUF, Authorization="Bearer " + double.token))


def test_protobuf_secret_is_stored_as_its_json_form(helm_k8s):
    labels = {"owner": "helm", "name": "demo", "status": "deployed", "version": "1"}
    answer = _post(helm_k8s, "/api/v1/namespaces/default/secrets",
                   _secret("sh.helm.release.v1.demo.v1", labels=labels, data={"release": b"\x00binary"},
                           secret_type="helm.sh/release.v1"))
    assert answer.status_code == 201, answer.text
    stored = helm_k8s.get("Secret", "sh.helm.release.v1.demo.v1", "default")
    assert stored["type"] == "helm.sh/release.v1" and stored["metadata"]["labels"] == labels
    assert stored["metadata"]["namespace"] == "default"  # an empty namespace takes the request's
    assert base64.b64decode(stored["data"]["release"]) == b"\x00binary"
    listed = _get(helm_k8s, "/api/v1/namespaces/default/secrets", params={"labelSelector": "owner=helm,name=demo"})
    assert [s["metadata"]["name"] for s in listed.json()["items"]] == ["sh.helm.release.v1.demo.v1"]
    options = _envelope("meta.k8s.io/v1", "DeleteOptions", _field(4, "Background"))
    deleted = requests.delete(helm_k8s.url + "/api/v1/namespaces/default/secrets/sh.helm.release.v1.demo.v1",
                              data=options, verify=helm_k8s.ca_file, timeout=10,
                              headers=dict(PROTOBUF, Authorization="Bearer " + helm_k8s.token))
    assert deleted.status_code == 200 and helm_k8s.list("Secret", "default") == []


@pytest.mark.parametrize("body, code, message", [
    (_secret("s", extra=_field(9, "x")), 400, "field 9 of Secret is not known"),
    (_secret("s", namespace="other"), 400, "does not match the namespace"),
    (_envelope("v1", "ConfigMap", _field(1, _field(1, "c"))), 415, "decodes protobuf only for"),
    (_secret("s")[:-3], 400, "truncated"),
    (b"{}", 400, "starts with k8s"),
    (_secret("s", data={"k": b"v"}, secret_type=""), 201, ""),
])
def test_protobuf_bodies_are_decoded_strictly(helm_k8s, body, code, message):
    answer = _post(helm_k8s, "/api/v1/namespaces/default/secrets", body)
    assert answer.status_code == code, answer.text
    if message:
        assert message in answer.json()["message"]
        assert helm_k8s.writes() == []
    else:
        assert helm_k8s.get("Secret", "s", "default")["type"] == "Opaque"  # defaulted as an omitted type is


# --------------------------------------------------------------------- the helm CLI

def _helm(double, *args):
    return subprocess.run([helm_binary()] + list(args), env=dict(double.helm_env), capture_output=True, text=True,
                          timeout=120, check=False)


def _release_labels(double, namespace):
    return sorted((s["metadata"]["labels"]["version"], s["metadata"]["labels"]["status"])
                  for s in double.list("Secret", namespace) if s["type"] == "helm.sh/release.v1")


def test_helm_cli_install_upgrade_uninstall(helm_k8s):
    chart = chart_path("nvidia-device-plugin")
    ns = ["-n", "nvdp", "--create-namespace"]
    done = _helm(helm_k8s, "install", "nvdp", chart, "--set", "migStrategy=single", *ns)
    assert done.returncode == 0, done.stderr
    assert _release_labels(helm_k8s, "nvdp") == [("1", "deployed")]
    assert helm_k8s.get("DaemonSet", "nvdp-nvidia-device-plugin", "nvdp")
    done = _helm(helm_k8s, "upgrade", "nvdp", chart, "--set", "migStrategy=mixed", "-n", "nvdp")
    assert done.returncode == 0, done.stderr
    assert _release_labels(helm_k8s, "nvdp") == [("1", "superseded"), ("2", "deployed")]
    env = helm_k8s.get("DaemonSet", "nvdp-nvidia-device-plugin", "nvdp")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "MIG_STRATEGY", "value": "mixed"} in env
    history = json.loads(_helm(helm_k8s, "history", "nvdp", "-n", "nvdp", "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2]
    done = _helm(helm_k8s, "uninstall", "nvdp", "-n", "nvdp")
    assert done.returncode == 0, done.stderr
    assert _release_labels(helm_k8s, "nvdp") == [] and helm_k8s.list("DaemonSet", "nvdp") == []


def test_helm_cli_meets_the_double_strictness(helm_k8s, tmp_path):
    """A field the API server does not know fails the install (the double rejects it as fieldValidation=Strict)."""
    (tmp_path / "bad/templates").mkdir(parents=True)
    (tmp_path / "bad/Chart.yaml").write_text("apiVersion: v2\nname: bad\nversion: 0.1.0\n", encoding="utf-8")
    (tmp_path / "bad/templates/cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndataa:\n  k: v\n", encoding="utf-8")
    done = _helm(helm_k8s, "install", "bad", str(tmp_path / "bad"), "-n", "default")
    assert done.returncode != 0
    assert "dataa" in done.stderr, done.stderr
    assert helm_k8s.list("ConfigMap", "default") == []
    # helm records the failed release
    assert _release_labels(helm_k8s, "default") == [("1", "failed")]
