# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of the Kubernetes reader of the action plugins (plugin_utils/_k8s/reader.py): when it reads in the
worker, how it reads its queries, what module_defaults and environment it takes, and that credentials never reach a
message. The reads themselves run against the Kubernetes API double in
tests/integration/test_role_apply.py and test_role_kube_connection.py."""

from __future__ import annotations

import os
import sys
import tempfile
import types

import pytest

from ansible.errors import AnsibleError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import reader as action


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
    assert action.query(manifest, 0) == {"api_version": "apps/v1", "kind": "DaemonSet", "name": "ds",
                                         "namespace": "kube-system", "label_selectors": [], "field_selectors": [],
                                         "wait": False, "wait_condition": {}}
    listed = action.query({"kind": "Node", "label_selectors": "cloud.google.com/gke-accelerator"}, 1)
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
        action.query(query, 3)


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
    text = action.scrub("401 from https://10.0.0.1 (gpu-context): token tok-12345 rejected; key S0VZ; Bearer api-key-678",
                        secrets)
    assert text == "401 from https://10.0.0.1 (gpu-context): token ******** rejected; key ********; Bearer ********"
    # a kubeconfig path is no secret (its contents are never in a message)
    assert action.credential_strings({"kubeconfig": "/home/u/.kube/config"}) == []
    assert action._strings("abc") == []  # too short to scrub without mangling the message


class _Templar:
    """Templates ``{{ name }}`` from a dict of variables, as far as these tests need (a stand-in for Ansible's)."""

    def __init__(self, variables):
        self.variables = variables

    def template(self, value):
        if isinstance(value, dict):
            return dict((k, self.template(v)) for k, v in value.items())
        if isinstance(value, str) and value.startswith("{{ ") and value.endswith(" }}"):
            return self.variables[value[3:-3]]
        return value


class _Reader(action.K8sReadAction):
    def run(self, tmp=None, task_vars=None):
        raise AssertionError("not run here")


def _action(module_defaults=None, environment=None, variables=None):
    action_plugin = _Reader.__new__(_Reader)
    action_plugin._task = types.SimpleNamespace(module_defaults=module_defaults, environment=environment)
    action_plugin._templar = _Templar(variables or {})
    return action_plugin


def test_module_defaults_reach_the_reads_as_they_reach_kubernetes_core_k8s_info():
    defaults = [
        {"group/kubernetes.core.k8s": {"kubeconfig": "/group/config", "context": "group"},
         "kubernetes.core.k8s": {"context": "only-for-k8s"}},
        {"kubernetes.core.k8s_info": {"context": "{{ info_context }}"}, "gpu_ops.cluster.gke_cluster": {"x": 1}},
    ]
    # the group's options, then the module's own over them (templated); another module's entry is not taken
    assert _action(defaults, variables={"info_context": "info"}).defaults() == {"kubeconfig": "/group/config",
                                                                                "context": "info"}
    # group/k8s (ansible-core's own group, which extends kubernetes.core's) counts too, under kubernetes.core's
    assert _action([{"group/ansible.builtin.k8s": {"context": "legacy", "validate_certs": False},
                     "group/kubernetes.core.k8s": {"context": "core"}}]).defaults() == {
        "context": "core", "validate_certs": False}
    assert _action(None).defaults() == {} and _action([]).defaults() == {}
    with pytest.raises(AnsibleError, match="module_defaults for kubernetes.core.k8s_info must be a dict"):
        _action([{"kubernetes.core.k8s_info": "{{ text }}"}], variables={"text": "kubeconfig"}).defaults()


def test_the_tasks_environment_is_templated_and_merged_in_order():
    assert _action(environment=[{"K8S_AUTH_CONTEXT": "{{ ctx }}"}, {"HTTPS_PROXY": "http://proxy:3128"}],
                   variables={"ctx": "gpu"}).environment() == {"K8S_AUTH_CONTEXT": "gpu", "HTTPS_PROXY": "http://proxy:3128"}
    assert _action(environment=None).environment() == {}
    assert _action(environment=[None, ""]).environment() == {}
    with pytest.raises(AnsibleError, match="environment must be a dict"):
        _action(environment=["K8S_AUTH_CONTEXT=gpu"]).environment()


def test_a_read_has_the_tasks_environment_and_a_temporary_folder_that_goes_with_it(monkeypatch, tmp_path):
    monkeypatch.delenv("K8S_AUTH_CONTEXT", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with action._process_state({"K8S_AUTH_CONTEXT": "gpu"}):
        folder = tempfile.gettempdir()
        assert folder != str(tmp_path) and os.path.isdir(folder) and os.environ["K8S_AUTH_CONTEXT"] == "gpu"
        handle, name = tempfile.mkstemp()  # what the kubernetes client does with a kubeconfig's certificate data
        os.close(handle)
        assert os.path.dirname(name) == folder
        # what kubernetes.core's discovery caches in the temporary folder
        with open(os.path.join(folder, "k8srcp-1.json"), "w", encoding="utf-8") as cache:
            cache.write('{"apis": 1}')
    assert not os.path.exists(folder) and tempfile.gettempdir() == str(tmp_path)
    assert "K8S_AUTH_CONTEXT" not in os.environ
    # the next read finds the cache, and only the cache
    with action._process_state({}):
        assert sorted(os.listdir(tempfile.gettempdir())) == ["k8srcp-1.json"]
    assert sorted(os.listdir(tmp_path)) == ["gpu_ops_k8s_reader-%d" % os.getuid()]
    assert sorted(os.listdir(tmp_path / ("gpu_ops_k8s_reader-%d" % os.getuid()))) == ["k8srcp-1.json"]


def test_a_cache_folder_that_is_not_ours_alone_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / ("gpu_ops_k8s_reader-%d" % os.getuid())).mkdir(mode=0o777)
    os.chmod(tmp_path / ("gpu_ops_k8s_reader-%d" % os.getuid()), 0o777)
    assert action._cache_folder() is None
    with action._process_state({}):
        folder = tempfile.gettempdir()
        assert os.path.dirname(folder) == str(tmp_path)
    assert not os.path.exists(folder)


def test_no_log_options_of_the_connection_are_scrubbed():
    secrets = action.no_log_strings({"api_key": "api-key-678", "password": "pass-9876", "context": "gpu-context",
                                     "host": "https://10.0.0.1"})
    assert set(secrets) == {"api-key-678", "pass-9876"}
    assert action.no_log_strings(None) == []
