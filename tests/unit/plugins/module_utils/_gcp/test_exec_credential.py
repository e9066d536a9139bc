# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubeconfig's exec credential plugin (plugins/module_utils/_gcp/exec_credential.py) against the GCP
double's token endpoint: credentials from arguments or the GCP_* environment as the modules take them,
the ExecCredential document, errors without secrets. tests/integration/test_gke_kubeconfig.py runs it from
the kubeconfig the role writes, through the Kubernetes client."""

from __future__ import annotations

import datetime
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import exec_credential
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble


@pytest.fixture
def gcp():
    with GcpDouble(latency=0.0) as double:
        yield double


@pytest.fixture
def key_file(gcp, tmp_path):
    key = gcp.service_account_key()
    path = tmp_path / "key.json"
    path.write_text(json.dumps(key), encoding="utf-8")
    return key, str(path)


def run(argv=(), environ=None):
    out, err = io.StringIO(), io.StringIO()
    rc = exec_credential.main(list(argv), environ or {}, out, err)
    return rc, (json.loads(out.getvalue()) if out.getvalue() else None), err.getvalue()


def test_a_key_file_named_in_the_arguments_gives_a_token_and_its_expiry(gcp, key_file):
    key, path = key_file
    rc, document, err = run(["--auth-kind", "serviceaccount", "--service-account-file", path])
    assert (rc, err) == (0, "")
    assert document["apiVersion"] == "client.authentication.k8s.io/v1beta1" and document["kind"] == "ExecCredential"
    assert document["status"]["token"] == gcp.token
    expiry = datetime.datetime.strptime(document["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    # the double answers expires_in=3599; google-auth keeps a margin before it
    assert datetime.timedelta(minutes=50) < expiry - datetime.datetime.utcnow() < datetime.timedelta(hours=1)
    assert len(gcp.token_requests) == 1 and key["private_key"] not in json.dumps(document)


def test_the_environment_awx_injects_is_read_as_the_modules_read_it(gcp, key_file):
    key, path = key_file
    # AWX's Google Compute Engine credential: GCP_AUTH_KIND and the older GCE_CREDENTIALS_FILE_PATH
    rc, document, dummy = run(environ={"GCP_AUTH_KIND": "serviceaccount", "GCE_CREDENTIALS_FILE_PATH": path,
                                       "GCP_SERVICE_ACCOUNT_FILE": ""})
    assert rc == 0 and document["status"]["token"] == gcp.token
    rc, document, dummy = run(environ={"GCP_AUTH_KIND": "serviceaccount",
                                       "GCP_SERVICE_ACCOUNT_CONTENTS": json.dumps(key)})
    assert rc == 0 and document["status"]["token"] == gcp.token
    # an access token is passed through as it is, with no expiry to report
    rc, document, dummy = run(environ={"GCP_AUTH_KIND": "accesstoken", "GCP_ACCESS_TOKEN": "ya29.given"})
    assert rc == 0 and document["status"] == {"token": "ya29.given"}
    # an argument wins over the environment
    environ = {"GCP_AUTH_KIND": "serviceaccount", "GCP_ACCESS_TOKEN": "ya29.given"}
    rc, document, dummy = run(["--auth-kind", "accesstoken"], environ)
    assert rc == 0 and document["status"]["token"] == "ya29.given"


def test_account_options_follow_the_module_spec_fallbacks():
    options = exec_credential.account({}, {"GCP_SCOPES": "a, b", "GCP_AUTH_KIND": ""})
    assert options["scopes"] == ["a", "b"]
    assert options["auth_kind"] == "application", "an empty variable counts as unset, as for the modules"
    assert exec_credential.account({}, {})["scopes"] == ["https://www.googleapis.com/auth/cloud-platform"]


def test_the_version_the_client_asks_for_is_answered():
    info = json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "spec": {}})
    assert exec_credential.api_version({"KUBERNETES_EXEC_INFO": info}) == "client.authentication.k8s.io/v1"
    assert exec_credential.api_version({"KUBERNETES_EXEC_INFO": "not json"}) == "client.authentication.k8s.io/v1beta1"
    rc, document, dummy = run(environ={"GCP_AUTH_KIND": "accesstoken", "GCP_ACCESS_TOKEN": "t",
                                       "KUBERNETES_EXEC_INFO": info})
    assert rc == 0 and document["apiVersion"] == "client.authentication.k8s.io/v1"


def test_a_refused_login_fails_with_one_line_and_no_secret(gcp, tmp_path):
    key = gcp.service_account_key(echo_login=True)
    rc, document, err = run(environ={"GCP_AUTH_KIND": "serviceaccount", "GCP_SERVICE_ACCOUNT_CONTENTS": json.dumps(key)})
    assert rc == 1 and document is None
    assert err.startswith("gpu_ops.cluster exec credential: Google login failed at %stoken" % gcp.url)
    assert err.count("\n") == 1
    body = key["private_key"].splitlines()[1]
    assert body not in err and key["private_key_id"] not in err
    rc, dummy, err = run(["--auth-kind", "serviceaccount"])
    assert rc == 1 and "needs service_account_file or service_account_contents" in err


def test_runs_as_a_module_with_the_python_running_ansible(gcp, key_file):
    dummy, path = key_file
    # as the kubeconfig runs it: PYTHONPATH names the folder that holds ansible_collections/ (ansible-test's
    # runner puts the collection on sys.path itself, so the environment alone has no such entry)
    holder = str(Path(exec_credential.__file__).resolve().parents[6])
    environment = dict(os.environ, PYTHONPATH=holder)
    proc = subprocess.run([sys.executable, "-m", exec_credential.MODULE, "--auth-kind", "serviceaccount",
                           "--service-account-file", path], capture_output=True, text=True, check=False, timeout=60,
                          env=environment)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"]["token"] == gcp.token
