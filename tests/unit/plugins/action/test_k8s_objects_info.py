# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of the k8s_objects_info action plugin: when it reads in the worker, how it reads its queries, and
that credentials never reach a message. The reads themselves run against the Kubernetes API double in
tests/integration/test_role_apply.py and test_role_kube_connection.py."""

from __future__ import annotations

import os
import sys

import pytest

from ansible.errors import AnsibleError

from ansible_collections.gpu_ops.cluster.plugins.action import k8s_objects_info as action


def test_the_controllers_python_is_recognised_through_links(tmp_path):
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    linked_bin = tmp_path / "linked-bin"
    linked_bin.symlink_to(venv_bin)
    assert action.same_python(str(linked_bin / "python"), str(venv_bin / "python"))
    assert action.same_python(sys.executable, sys.executable)
    # another environment whose python links to the same binary is not the same Python (other site-packages)
    other_bin = tmp_path / "other" / "bin"
    other_bin.mkdir(parents=True)
    (other_bin / "python").symlink_to(sys.executable)
    assert not action.same_python(str(other_bin / "python"), str(venv_bin / "python"))
    # relative names and auto discovery are not known to be this Python
    for interpreter in ("python3", "auto", "", None):
        assert not action.same_python(interpreter, sys.executable)
    assert not action.same_python(os.path.join(str(tmp_path), "missing", "python"), sys.executable)


def test_a_query_may_be_a_manifest_or_a_list_query():
    manifest = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system",
                                                                           "labels": {"a": "b"}}}
    assert action._query(manifest, 0) == {"api_version": "apps/v1", "kind": "DaemonSet", "name": "ds",
                                          "namespace": "kube-system", "label_selectors": [], "field_selectors": [],
                                          "wait": False, "wait_condition": {}}
    listed = action._query({"kind": "Node", "label_selectors": "cloud.google.com/gke-accelerator"}, 1)
    assert listed["api_version"] == "v1" and listed["label_selectors"] == ["cloud.google.com/gke-accelerator"]
    assert "name" not in listed


@pytest.mark.parametrize("query, message", [
    ("Node", "queries[3] must be a dict"),
    ({"name": "x"}, "queries[3]: kind is required"),
    ({"kind": "Node", "labels": ["a"]}, "queries[3]: unknown keys labels"),
    ({"kind": "Node", "label_selectors": [1]}, "queries[3]: label_selectors must be a list of strings"),
    ({"kind": "Node", "wait_condition": "Ready"}, "queries[3]: wait_condition must be a dict"),
])
def test_a_bad_query_is_named(query, message):
    with pytest.raises(AnsibleError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        action._query(query, 3)


def test_the_wait_condition_is_what_kubernetes_core_k8s_hands_its_waiter():
    assert action._module_condition({}) is None
    assert action._module_condition({"type": "Ready"}) == {"type": "Ready", "status": True, "reason": None}
    assert action._module_condition({"type": "Ready", "status": "True", "reason": "NetworkReady"}) == \
        {"type": "Ready", "status": "True", "reason": "NetworkReady"}


def test_credentials_are_scrubbed_from_messages():
    kubeconfig = {"users": [{"name": "gpu-user", "user": {"token": "tok-12345", "client-key-data": "S0VZ"}}],
                  "clusters": [{"name": "gpu-cluster", "cluster": {"server": "https://10.0.0.1"}}]}
    secrets = action.credential_strings({"kubeconfig": kubeconfig, "api_key": "api-key-678", "context": "gpu-context"})
    assert sorted(secrets) == ["S0VZ", "api-key-678", "tok-12345"]
    text = action._scrub("401 from https://10.0.0.1 (gpu-context): token tok-12345 rejected; key S0VZ; Bearer api-key-678",
                         secrets)
    assert text == "401 from https://10.0.0.1 (gpu-context): token ******** rejected; key ********; Bearer ********"
    # a kubeconfig path is no secret (its contents are never in a message)
    assert action.credential_strings({"kubeconfig": "/home/u/.kube/config"}) == []
    assert action._secrets("abc") == []  # too short to scrub without mangling the message
