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
import time
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
    user = tmp_path / ("gpu_ops_k8s_reader-%d" % os.getuid())
    assert [sorted(os.listdir(user / name)) for name in os.listdir(user)] == [["k8srcp-1.json"]]


def _cached(names):
    """The cache files a read of the connection ``names`` starts with."""
    with action._process_state({}, names):
        return sorted(os.listdir(tempfile.gettempdir()))


def _discovers(names, file_name):
    with action._process_state({}, names):
        with open(os.path.join(tempfile.gettempdir(), file_name), "w", encoding="utf-8") as cache:
            cache.write('{"apis": 1}')


def test_a_read_is_handed_only_the_cache_of_its_own_connection(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gpu = action.connection_names({"kubeconfig": "/k/gpu", "context": "a"}, {})
    for number in range(300):  # every other server this user has read
        _discovers(action.connection_names({"kubeconfig": "/k/%d" % number}, {}), "k8srcp-%d.json" % number)
    _discovers(gpu, "k8srcp-gpu.json")
    assert _cached(gpu) == ["k8srcp-gpu.json"]
    assert _cached(action.connection_names({"kubeconfig": "/k/7"}, {})) == ["k8srcp-7.json"]
    # another context, host or variable naming the server is another connection
    assert _cached(action.connection_names({"kubeconfig": "/k/gpu", "context": "b"}, {})) == []
    assert _cached(action.connection_names({"kubeconfig": "/k/gpu", "context": "a", "host": "https://h"}, {})) == []
    assert _cached(action.connection_names({"kubeconfig": "/k/gpu", "context": "a"}, {"K8S_AUTH_CONTEXT": "c"})) == []
    # files of the folder's older layout, beside the connections' folders, are handed to nobody
    user = tmp_path / ("gpu_ops_k8s_reader-%d" % os.getuid())
    (user / "k8srcp-old.json").write_text("{}")
    assert _cached(gpu) == ["k8srcp-gpu.json"]


def test_connection_names_hold_no_credential(monkeypatch, tmp_path):
    kubeconfig = {"clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1"}}],
                  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x",
                  "users": [{"name": "u", "user": {"token": "token-4242"}}]}
    names = action.connection_names({"kubeconfig": kubeconfig, "api_key": "key-4343", "password": "pw-4444"},
                                    {"K8S_AUTH_API_KEY": "key-4545"})
    assert "4242" not in repr(names) and "4343" not in repr(names) and "4444" not in repr(names)
    assert "4545" not in repr(names) and "https://10.0.0.1" in repr(names)
    # another user of the same cluster reads the same server: the same connection for the cache
    other = dict(kubeconfig, users=[{"name": "u", "user": {"token": "other"}}])
    assert action.connection_names({"kubeconfig": other}, {}) == action.connection_names({"kubeconfig": kubeconfig}, {})
    # a kubeconfig read into a dict in another key order is the same connection
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    reordered = dict(kubeconfig, clusters=[{"cluster": {"server": "https://10.0.0.1"}, "name": "c"}])
    assert action._cache_folder(action.connection_names({"kubeconfig": reordered}, {})) == action._cache_folder(
        action.connection_names({"kubeconfig": kubeconfig}, {}))
    # what the variables name counts, the task's environment over the process's
    assert action.connection_names({}, {"KUBECONFIG": "/k/a"}) != action.connection_names({}, {"KUBECONFIG": "/k/b"})


def test_caches_unused_for_a_week_go_when_another_connection_starts(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old, recent = action.connection_names({"host": "old"}, {}), action.connection_names({"host": "recent"}, {})
    _discovers(old, "k8srcp-old.json")
    _discovers(recent, "k8srcp-recent.json")
    user = tmp_path / ("gpu_ops_k8s_reader-%d" % os.getuid())
    (user / "k8srcp-legacy.json").write_text("{}")
    week = time.time() - action.CACHE_KEPT_S - 60
    for name in os.listdir(user):
        if name != os.path.basename(action._cache_folder(recent)):
            os.utime(user / name, (week, week))
    assert len(os.listdir(user)) == 3
    # a read of a known connection keeps everything
    assert _cached(old) == ["k8srcp-old.json"]
    os.utime(action._cache_folder(old), (week, week))
    assert len(os.listdir(user)) == 3
    # a new connection removes what was not used for the week, and keeps what was
    assert _cached(action.connection_names({"host": "new"}, {})) == []
    assert _cached(recent) == ["k8srcp-recent.json"]
    assert _cached(old) == []
    assert "k8srcp-legacy.json" not in os.listdir(user)


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


# --- the reads, against the Kubernetes API double (a real server on 127.0.0.1, kubernetes.core's real client) ---------

@pytest.fixture(scope="module")
def cluster():
    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble  # pylint: disable=import-outside-toplevel

    double = K8sDouble(tls=True).start()
    double.add_node("gpu-0", labels={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"})
    double.add_node("cpu-0")
    double.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-env", "namespace": "default"},
                "data": {"NCCL_DEBUG": "INFO"}})
    yield double
    double.stop()


def _reading(cluster, task_vars=None, connection="local", delegate_to=None, become=False, environment=None):
    plugin = _action(environment=environment)
    plugin._connection = types.SimpleNamespace(transport=connection)
    plugin._task.delegate_to = delegate_to
    plugin._play_context = types.SimpleNamespace(become=become)
    return plugin


QUERIES = [action.query({"kind": "Node", "label_selectors": ["cloud.google.com/gke-accelerator"]}, 0),
           action.query({"kind": "ConfigMap", "name": "nccl-env", "namespace": "default", "wait": True}, 1),
           action.query({"kind": "ConfigMap", "name": "absent", "namespace": "default"}, 2),
           action.query({"apiVersion": "example.com/v1", "kind": "Nothing", "name": "x"}, 3)]


def test_the_reads_are_k8s_info_shaped_and_made_with_the_kubeconfig(cluster, tmp_path):
    result = _reading(cluster).read_here({}, QUERIES, {"kubeconfig": cluster.kubeconfig}, [])
    assert not result.get("failed"), result
    nodes, config, absent, unserved = result["results"]
    assert [n["metadata"]["name"] for n in nodes["resources"]] == ["gpu-0"] and nodes["api_found"] is True
    assert nodes["query"] == {"api_version": "v1", "kind": "Node", "label_selectors": ["cloud.google.com/gke-accelerator"]}
    # a waited query says whether kubernetes.core's wait would end at once (a ConfigMap: it exists)
    assert config["resources"][0]["data"] == {"NCCL_DEBUG": "INFO"} and config["ready"] is True
    assert absent == {"query": {"api_version": "v1", "kind": "ConfigMap", "name": "absent", "namespace": "default"},
                      "resources": [], "api_found": True}
    assert unserved["api_found"] is False and unserved["resources"] == []
    assert result["resources"] == nodes["resources"] + config["resources"] and result["api_found"] is False


def test_a_refused_read_fails_with_the_message_and_no_credential(cluster, tmp_path):
    kubeconfig = str(tmp_path / "wrong-token.yaml")
    cluster.write_kubeconfig(kubeconfig, token="wrong-token-4711")
    result = _reading(cluster).read_here({}, QUERIES[:1], {"kubeconfig": kubeconfig, "api_key": "api-key-0815"},
                                         ["api-key-0815"])
    assert result["failed"] and result["msg"].startswith("k8s_objects_info: ")
    assert "wrong-token-4711" not in result["msg"] and "api-key-0815" not in result["msg"]
    assert "exception" not in result  # only at -vvv


def test_bad_connection_options_fail_before_any_request(cluster):
    cluster.clear_requests()
    result = _reading(cluster).read_here({}, QUERIES[:1], {"kubeconfig": cluster.kubeconfig, "validate_certs": "maybe"}, [])
    assert result["failed"] and "validate_certs" in result["msg"] and cluster.requests() == []


def test_the_tasks_environment_reaches_the_client(cluster, monkeypatch):
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    result = _reading(cluster, environment=[{"K8S_AUTH_KUBECONFIG": cluster.kubeconfig}]).read_here({}, QUERIES[:1], {}, [])
    assert not result.get("failed"), result
    assert [n["metadata"]["name"] for n in result["resources"]] == ["gpu-0"]
    assert "K8S_AUTH_KUBECONFIG" not in os.environ


@pytest.mark.parametrize("kwargs, task_vars, why", [
    (dict(connection="ssh"), {"ansible_python_interpreter": sys.executable}, "connection ssh is not local"),
    (dict(delegate_to="other"), {"ansible_python_interpreter": sys.executable}, "the task is delegated"),
    (dict(become=True), {"ansible_python_interpreter": sys.executable}, "become is set"),
    ({}, {}, "the interpreter is not the controller's Python"),
    ({}, {"ansible_python_interpreter": "/usr/bin/python3-not-this-one"}, "the interpreter is not the controller's Python"),
    ({}, {"ansible_python_interpreter": sys.executable}, ""),
])
def test_the_worker_reads_only_where_the_module_would_run_this_python(cluster, kwargs, task_vars, why):
    found = _reading(cluster, **kwargs).why_not_here(task_vars)
    assert found.startswith(why) and (why or found == "")


def test_elsewhere_each_query_runs_k8s_info_with_the_connection(cluster):
    plugin = _reading(cluster, connection="ssh")
    sent = []

    def execute_module(module_name=None, module_args=None, task_vars=None):
        sent.append((module_name, module_args))
        return {"resources": [{"kind": "Node"}], "api_found": True} if len(sent) == 1 else {
            "failed": True, "msg": "401 for token api-key-0815"}

    plugin._execute_module = execute_module
    result = plugin.read({}, QUERIES[:1], {"api_key": "api-key-0815"}, {}, ["api-key-0815"])
    assert result["in_worker"] is False and result["in_worker_reason"] == "connection ssh is not local"
    assert sent == [("kubernetes.core.k8s_info", {"api_key": "api-key-0815", "api_version": "v1", "kind": "Node",
                                                  "label_selectors": ["cloud.google.com/gke-accelerator"]})]
    assert result["resources"] == [{"kind": "Node"}] and result["api_found"] is True
    failed = plugin.read({}, QUERIES[:2], {"api_key": "api-key-0815"}, {}, ["api-key-0815"])
    assert failed["failed"] and failed["msg"] == "k8s_objects_info: 401 for token ********"


def _with_loader(plugin, basedir):
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel

    loader = DataLoader()
    loader.set_basedir(str(basedir))
    plugin._loader = loader
    return plugin


def test_the_connection_is_the_tasks_over_module_defaults_with_kubeconfigs_found_as_ansible_finds_paths(cluster, tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.yaml").write_text("apiVersion: v1\nkind: Config\n")
    (tmp_path / "configs" / "b.yaml").write_text("apiVersion: v1\nkind: Config\n")
    plugin = _with_loader(_reading(cluster), tmp_path)
    plugin._task.module_defaults = [{"group/kubernetes.core.k8s": {
        "kubeconfig": "configs/a.yaml:configs/b.yaml", "context": "from-defaults", "verify_ssl": None}}]
    auth = plugin.auth({"context": "own", "namespace": "not-an-auth-option"})
    assert auth == {"kubeconfig": "%s:%s" % (tmp_path / "configs" / "a.yaml", tmp_path / "configs" / "b.yaml"),
                    "context": "own"}
    # a file that is not there is left to the client to refuse, with its path resolved
    assert plugin.auth({"kubeconfig": "configs/none.yaml"})["kubeconfig"] == str(tmp_path / "configs" / "none.yaml")
    # a kubeconfig as a dict is the client's; nothing else is a kubeconfig
    assert plugin.auth({"kubeconfig": {"clusters": []}})["kubeconfig"] == {"clusters": []}
    with pytest.raises(AnsibleError, match="kubeconfig must be a path or a dict, got int"):
        plugin.auth({"kubeconfig": 7})


def test_a_remote_connection_gets_the_kubeconfig_path_as_given(cluster, tmp_path):
    plugin = _with_loader(_reading(cluster, connection="ssh"), tmp_path)
    assert plugin.auth({"kubeconfig": "configs/a.yaml"}) == {"kubeconfig": "configs/a.yaml"}


def test_a_longer_secret_is_scrubbed_before_a_shorter_one_inside_it():
    assert action.scrub("token abcdefgh", ["abcd", "abcdefgh"]) == "token ********"


def test_a_bad_task_environment_fails_the_read_before_anything_is_sent(cluster):
    cluster.clear_requests()
    plugin = _reading(cluster, environment=["K8S_AUTH_HOST=x"])
    result = plugin.read_here({}, QUERIES[:1], {"kubeconfig": cluster.kubeconfig}, [])
    assert result == {"failed": True, "msg": "k8s_objects_info: environment must be a dict, got str"}
    assert cluster.requests() == []


def test_a_waited_list_is_not_ready(cluster):
    listed = action.query({"kind": "Node", "wait": True}, 0)
    result = _reading(cluster).read_here({}, [listed], {"kubeconfig": cluster.kubeconfig}, [])
    assert len(result["results"][0]["resources"]) == 2 and result["results"][0]["ready"] is False


def test_the_controllers_python_is_false_not_none_for_what_it_cannot_know():
    assert action.same_python("python3", sys.executable) is False
    assert action.same_python(None, sys.executable) is False
    assert action.query({"kind": "Node"}, 0)["wait"] is False


def test_here_the_reads_are_made_in_the_worker(cluster):
    result = _reading(cluster).read({}, QUERIES[:1], {"kubeconfig": cluster.kubeconfig},
                                    {"ansible_python_interpreter": sys.executable}, [])
    assert result["in_worker"] is True and "in_worker_reason" not in result
    assert [n["metadata"]["name"] for n in result["resources"]] == ["gpu-0"]
