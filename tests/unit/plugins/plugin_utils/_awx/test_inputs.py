# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AWX inputs (plugins/plugin_utils/_awx/inputs.py): names, git project URLs and credential inputs as AWX 24.6.1 takes
them (update_scm_url, validate_ssh_private_key, the managed credential types' fields)."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx import inputs as awx
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import names as _k8s_names

KEY = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
RSA = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("url", [
    "https://git.example/gpu_ops/cluster.git", "http://10.0.0.5:8080/repo.git", "ssh://git@github.com/org/repo.git",
    "git@github.com:org/repo.git", "git@bitbucket.org:team/repo.git", "deploy@git.example:repos/cluster.git",
    "git://git.example/cluster.git", "ftps://mirror.example/cluster.git", "file:///srv/git/cluster.git", "/srv/git/cluster.git",
    "[fd00::11]:org/repo.git", " https://git.example/c.git ",
], ids=["https", "http with port", "ssh github as git", "scp github", "scp bitbucket", "scp own user", "git",
        "ftps", "file", "local path", "scp ipv6", "blanks around"])
def test_git_urls_awx_takes(url):
    assert awx.scm_url(url) is None


@pytest.mark.parametrize("url, why", [
    ("s3://bucket/cluster.git", "scheme 's3' is not one AWX clones git from (ssh, git, http, https, ftp, ftps, file)"),
    ("git+ssh://git@host/repo.git", "AWX refuses the git+ssh:// scheme"),
    ("ssh://me@github.com/org/repo.git", "SSH access to github.com needs the user git"),
    ("github.com:org/repo.git", "SSH access to github.com needs the user git"),
    ("https:///repo.git", "a https URL needs a host"),
    ("file://server/share/repo.git", "a file:// URL names no host but localhost"),
    ("https://git.example:99999/repo.git", "has an invalid port"),
    ("host:a:b", "is not a git URL (scp-like: [user@]host:path)"),
    ("https://git.example/repo.git\n--upload-pack=x", "holds white space or a control character"),
    ("", "is not a git URL"), (None, "is not a git URL"),
], ids=["s3", "git+ssh", "github other user", "github no user", "no host", "file with a host", "port", "two colons",
        "newline", "empty", "none"])
def test_git_urls_awx_refuses_say_why(url, why):
    found = awx.scm_url(url)
    assert found is not None and why in found, found


@pytest.mark.parametrize("value, why", [
    ("GPU fleet", None), ("x" * 512, None), ("é ü", None),
    ("x" * 513, "is 513 characters long, at most 512"), ("gpu\nops", "holds a control character"),
    ("tab\there", "holds a control character"), ("del\x7f", "holds a control character"), ("c1\x85", "holds a control"),
    ("   ", "is not a name"), (None, "is not a name"), (5, "is not a name"),
], ids=["plain", "512", "unicode", "513", "newline", "tab", "delete", "C1 control", "blank", "none", "number"])
def test_awx_names(value, why):
    found = awx.name(value)
    assert found is None if why is None else why in found, found


def test_credential_inputs_per_type_name_fields_never_values():
    good_gce = {"username": "sa@p.iam.gserviceaccount.com", "project": "p", "ssh_key_data": KEY}
    assert awx.credential_inputs("Google Compute Engine", good_gce) == []
    assert awx.credential_inputs("Google Compute Engine", dict(good_gce, ssh_key_data=RSA)) == []
    bad = awx.credential_inputs("Google Compute Engine", {"username": "sa", "ssh_key_data": "hunter2-secret"})
    assert bad == ["inputs.ssh_key_data: is not a PEM private key (the private_key of the key file)",
                   "inputs.username: is not the service account's email address"]
    assert "hunter2" not in " ".join(bad)
    encrypted = KEY.replace("PRIVATE KEY", "ENCRYPTED PRIVATE KEY")
    assert awx.credential_inputs("Google Compute Engine", dict(good_gce, ssh_key_data=encrypted)) == [
        "inputs.ssh_key_data: is not a PEM private key (the private_key of the key file)"]
    mismatched = KEY.replace("END PRIVATE", "END RSA PRIVATE")
    assert awx.credential_inputs("Google Compute Engine", dict(good_gce, ssh_key_data=mismatched)) != []
    assert awx.credential_inputs("Google Compute Engine", {"project": "p"}) == [
        "inputs.username: is required by the Google Compute Engine credential type",
        "inputs.ssh_key_data: is required by the Google Compute Engine credential type"]
    azure = "Microsoft Azure Resource Manager"
    assert awx.credential_inputs(azure, {"subscription": "00000000-0000-0000-0000-000000000001", "client": "app-id"}) == []
    assert awx.credential_inputs(azure, {"subscription": "my-sub"}) == ["inputs.subscription: is not a subscription ID (a GUID)"]
    assert awx.credential_inputs(azure, {"client": "x"}) == [
        "inputs.subscription: is required by the Microsoft Azure Resource Manager credential type"]
    k8s = "OpenShift or Kubernetes API Bearer Token"
    assert awx.credential_inputs(k8s, {"host": "https://aks.example:443", "bearer_token": "t"}) == []
    assert awx.credential_inputs(k8s, {"host": "https://rancher.example/k8s/clusters/c-1", "bearer_token": "t"}) == []
    assert awx.credential_inputs(k8s, {"host": "aks.example:443", "bearer_token": "t"}) == [
        "inputs.host: is not the API server's URL (https://host[:port][/path])"]
    assert awx.credential_inputs(k8s, {"host": "https://aks.example:70000", "bearer_token": "t"}) != []
    assert awx.credential_inputs("Vault", {"vault_password": "x"}) == []
    assert awx.credential_inputs(k8s, "token") == ["inputs: must be a dict of the credential type's fields"]


def test_the_rules_reach_roles_through_the_name_checks():
    lines = _k8s_names.problems([
        {"option": "awx_job_templates_project_scm_url", "rule": "awx_scm_url", "value": "s3://b/r"},
        {"option": "awx_job_templates_organization", "rule": "awx_name", "value": "org\r"},
        {"option": "awx_job_templates_credentials[0]", "rule": "awx_credential",
         "value": {"type": "Microsoft Azure Resource Manager", "inputs": {"subscription": "s3cret-ish"}}},
        {"option": "awx_job_templates_credentials[1]", "rule": "awx_credential", "value": "gcp"},
    ], dict(_k8s_names.RULES, **awx.RULES))
    assert [line.split(":")[0] for line in lines] == ["awx_job_templates_project_scm_url", "awx_job_templates_organization",
                                                      "awx_job_templates_credentials[0]", "awx_job_templates_credentials[1]"]
    assert "s3cret-ish" not in " ".join(lines) and "must be a dict of type and inputs" in lines[3]


def test_the_edges_the_mutation_check_showed():
    assert awx.name("nbsp\xa0name") is None and awx.name("c1\x9f") == "'c1\\x9f' holds a control character"
    long_name = awx.name("n" * 600)
    assert long_name == "'%s... is 600 characters long, at most 512" % ("n" * 76)
    assert awx.name("n" * 78) is None and len(ascii("n" * 78)) == 80
    assert awx.scm_url("https://git.example/a!b.git") is None and awx.scm_url("https://git.example/a b.git") is not None
    assert awx.credential_inputs("Google Compute Engine", {"username": "sa@p.example", "ssh_key_data": 42}) == [
        "inputs.ssh_key_data: is not a PEM private key (the private_key of the key file)"]
    assert awx.credential_inputs("Microsoft Azure Resource Manager", {"subscription": 7}) == [
        "inputs.subscription: is not a subscription ID (a GUID)"]
    assert awx.credential({"type": "Microsoft Azure Resource Manager", "inputs": None}) == (
        "inputs.subscription: is required by the Microsoft Azure Resource Manager credential type")
