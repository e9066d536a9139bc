# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait of the k8s_daemonset_wait action plugin: which objects it reads, how often, what it says while it waits and
the message it fails with. Only the reads are scripted (the Kubernetes API); the live reads run against the Kubernetes
API double in tests/integration/test_gpudirect_roles.py and test_playbook_gke_gpudirect.py."""

from __future__ import annotations

import types

import pytest

from ansible.errors import AnsibleError

from ansible_collections.gpu_ops.cluster.plugins.action import k8s_daemonset_wait as action

LABEL = "cloud.google.com/gke-accelerator"
OPTS = dict(name="nccl-tcpx-installer", namespace="kube-system", node_label=LABEL, node_values=["nvidia-h100-80gb"],
            min_nodes=2, timeout=3, delay=1, nodes=[], daemonset=None)
NAME = "kube-system/nccl-tcpx-installer"


def _node(name, value="nvidia-h100-80gb"):
    labels = {LABEL: value} if value else {}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def _daemonset(name="nccl-tcpx-installer", namespace="kube-system"):
    return {"kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace, "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"k8s-app": name, "tier": "gpu"}},
                     "template": {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}


def _pod(node, ready=True, image="img:1"):
    return {"kind": "Pod", "metadata": {"name": "pod-" + node,
                                        "ownerReferences": [{"kind": "DaemonSet", "name": "nccl-tcpx-installer"}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


class Scripted(action.ActionModule):
    """The action with its reads answered from a script per kind: each read takes the next answer (the last one
    repeats); an answer is a list of objects or an error message."""

    def __init__(self, script, check_mode=False):  # pylint: disable=super-init-not-called
        self.script = dict((kind, list(answers)) for kind, answers in script.items())
        self.queries = []
        self._task = types.SimpleNamespace(check_mode=check_mode)
        self._wait_vars = {"inventory_hostname": "gpu-cluster"}

    def _read_one(self, query, why_not):
        self.queries.append(query)
        answers = self.script[query["kind"]]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        return (None, answer) if isinstance(answer, str) else (answer, None)


@pytest.fixture
def said(monkeypatch):
    lines, sleeps = [], []
    monkeypatch.setattr(action.display, "display", lambda msg, *a, **k: lines.append(msg))
    monkeypatch.setattr(action.time, "sleep", sleeps.append)
    return types.SimpleNamespace(lines=lines, sleeps=sleeps)


def _wait(plugin, **opts):
    return plugin._wait(dict(OPTS, **opts), NAME, "")


def test_the_nodes_and_the_daemonset_handed_over_are_not_read(said):
    plugin = Scripted({"Pod": [[_pod("gpu-0"), _pod("gpu-1")]]})
    nodes = [_node("gpu-1"), _node("cpu-0", None), _node("gpu-0")]
    report = _wait(plugin, nodes=nodes, daemonset=_daemonset())
    assert [(e["node"], e["ready"], e["pod"]) for e in report] == [("gpu-0", True, "pod-gpu-0"), ("gpu-1", True, "pod-gpu-1")]
    # one read: the pods, by the DaemonSet's selector, in its namespace
    assert plugin.queries == [{"kind": "Pod", "namespace": "kube-system", "label_selectors": ["k8s-app=nccl-tcpx-installer,tier=gpu"]}]
    assert said.lines == [] and said.sleeps == []


def test_too_few_handed_over_nodes_are_read_and_waited_for(said):
    plugin = Scripted({"Node": [[_node("gpu-0")], [_node("gpu-0"), _node("gpu-1")]], "DaemonSet": [[_daemonset()]],
                       "Pod": [[_pod("gpu-0"), _pod("gpu-1")]]})
    report = _wait(plugin, nodes=[_node("gpu-0")])
    assert [e["node"] for e in report] == ["gpu-0", "gpu-1"]
    assert [q["kind"] for q in plugin.queries] == ["Node", "Node", "DaemonSet", "Pod"]
    assert plugin.queries[0]["label_selectors"] == [LABEL + " in (nvidia-h100-80gb)"]
    assert plugin.queries[2] == {"api_version": "apps/v1", "kind": "DaemonSet", "namespace": "kube-system",
                                 "name": "nccl-tcpx-installer"}
    assert said.lines == ["WAITING: [gpu-cluster]: 1 GPU nodes labelled %s in (nvidia-h100-80gb), 2 expected at least "
                          "(3 retries left, next read in 1 s)" % LABEL]
    assert said.sleeps == [1]


def test_a_daemonset_handed_over_in_check_mode_or_another_one_is_read(said):
    for plugin, given in ((Scripted({"DaemonSet": [[_daemonset()]], "Pod": [[_pod("gpu-0")]]}, check_mode=True), _daemonset()),
                          (Scripted({"DaemonSet": [[_daemonset()]], "Pod": [[_pod("gpu-0")]]}), _daemonset(namespace="other"))):
        _wait(plugin, nodes=[_node("gpu-0")], min_nodes=1, daemonset=given)
        assert [q["kind"] for q in plugin.queries] == ["DaemonSet", "Pod"]


@pytest.mark.parametrize("answers, message", [
    ([[_node("gpu-0")]], "Found 1 nodes labelled %s in (nvidia-h100-80gb) within 3 s, 2 expected at least." % LABEL),
    (["403 forbidden"], "Found 0 nodes labelled %s in (nvidia-h100-80gb) within 3 s, 2 expected at least: 403 forbidden." % LABEL),
])
def test_too_few_nodes_until_the_timeout_fail_with_their_count(said, answers, message):
    plugin = Scripted({"Node": answers})
    with pytest.raises(action.WaitFailed) as failed:
        _wait(plugin)
    assert str(failed.value) == message
    # timeout 3 s, delay 1 s: the first read and 3 retries, a second apart
    assert len(plugin.queries) == 4 and said.sleeps == [1, 1, 1] and len(said.lines) == 3


@pytest.mark.parametrize("answer, message", [
    ([], "DaemonSet kube-system/nccl-tcpx-installer was not found."),
    ("404 not found", "DaemonSet kube-system/nccl-tcpx-installer was not found: 404 not found."),
])
def test_a_missing_daemonset_fails_at_once(said, answer, message):
    plugin = Scripted({"DaemonSet": [answer]})
    with pytest.raises(action.WaitFailed) as failed:
        _wait(plugin, nodes=[_node("gpu-0"), _node("gpu-1")])
    assert str(failed.value) == message and said.sleeps == []


def test_pods_are_read_until_every_node_is_ready(said):
    plugin = Scripted({"Pod": [[_pod("gpu-0", ready=False), _pod("gpu-1", image="img:0")],
                               [_pod("gpu-0"), _pod("gpu-1", image="img:0")],
                               [_pod("gpu-0"), _pod("gpu-1")]]})
    report = _wait(plugin, nodes=[_node("gpu-0"), _node("gpu-1")], daemonset=_daemonset())
    assert all(e["ready"] for e in report) and len(plugin.queries) == 3
    assert said.lines == [
        "WAITING: [gpu-cluster]: a ready pod of DaemonSet %s on gpu-0, gpu-1 (3 retries left, next read in 1 s)" % NAME,
        "WAITING: [gpu-cluster]: a ready pod of DaemonSet %s on gpu-1 (2 retries left, next read in 1 s)" % NAME]


def test_a_node_never_ready_fails_naming_it_and_why(said):
    plugin = Scripted({"Pod": [[_pod("gpu-0"), _pod("gpu-1", ready=False)]]})
    with pytest.raises(action.WaitFailed) as failed:
        _wait(plugin, nodes=[_node("gpu-0"), _node("gpu-1")], daemonset=_daemonset())
    assert str(failed.value) == ("DaemonSet %s is not ready on 1 of 2 GPU nodes after 3 s: gpu-1 (pod pod-gpu-1 is Running, "
                                 "not ready)" % NAME)
    assert len(plugin.queries) == 4


def test_pods_that_cannot_be_read_fail_with_the_reads_message(said):
    # a failed read is retried: a later good read ends the wait
    plugin = Scripted({"Pod": ["connection refused", [_pod("gpu-0")]]})
    assert _wait(plugin, nodes=[_node("gpu-0")], min_nodes=1, daemonset=_daemonset(), timeout=2)[0]["ready"]
    assert said.lines == ["WAITING: [gpu-cluster]: reading the pods of DaemonSet %s failed: connection refused "
                          "(2 retries left, next read in 1 s)" % NAME]
    # the error of the last read is the message
    plugin = Scripted({"Pod": [[_pod("gpu-0", ready=False)], "connection refused"]})
    with pytest.raises(action.WaitFailed) as failed:
        _wait(plugin, nodes=[_node("gpu-0")], min_nodes=1, daemonset=_daemonset(), timeout=2)
    assert str(failed.value) == "Waiting for DaemonSet %s failed: reading its pods failed: connection refused" % NAME
    assert len(plugin.queries) == 3


def test_a_daemonset_without_match_labels_is_refused(said):
    daemonset = _daemonset()
    daemonset["spec"]["selector"] = {}
    with pytest.raises(action.WaitFailed, match="has no spec.selector.matchLabels"):
        _wait(Scripted({}), nodes=[_node("gpu-0")], min_nodes=1, daemonset=daemonset)


@pytest.mark.parametrize("timeout, delay, reads", [(3, 1, 4), (900, 10, 91), (5, 10, 2), (0, 10, 2), (4, 0, 5)])
def test_attempts_are_those_of_until_with_timeout_by_delay_retries(timeout, delay, reads):
    assert action.attempts(timeout, delay) == reads


def test_options_are_checked_and_converted():
    opts = action.options(dict(name="ds", namespace="ns", node_label=LABEL, node_values=["a"], min_nodes="3", timeout="60"))
    assert (opts["min_nodes"], opts["timeout"], opts["delay"], opts["nodes"]) == (3, 60, 10, [])
    defaults = action.options(dict(name="ds", namespace="ns", node_label=LABEL, node_values=["a"], delay=0))
    assert (defaults["min_nodes"], defaults["timeout"], defaults["delay"], defaults["daemonset"]) == (1, 600, 0, None)
    for required in ("name", "namespace", "node_label", "node_values"):
        raw = dict(name="ds", namespace="ns", node_label=LABEL, node_values=["a"])
        del raw[required]
        with pytest.raises(AnsibleError, match="missing required arguments: %s" % required):
            action.options(raw)
    for bad, message in ((dict(node_values=[]), "node_values must be a non-empty list"),
                         (dict(name=" "), "name must not be empty"),
                         (dict(delay=-1), "delay must be 0 or more, got -1"),
                         (dict(min_nodes="many"), "min_nodes")):
        raw = dict(name="ds", namespace="ns", node_label=LABEL, node_values=["a"])
        raw.update(bad)
        with pytest.raises(AnsibleError, match=message):
            action.options(raw)
    with pytest.raises(AnsibleError, match="node_label"):
        action.options(dict(name="ds", namespace="ns", node_values=["a"]))


def test_a_timeout_no_longer_than_the_delay_still_retries_once(said):
    # timeout 1 s, delay 1 s: the first read and one retry (the deadline, timeout + delay, only bounds slow reads)
    plugin = Scripted({"Node": [[]]})
    with pytest.raises(action.WaitFailed):
        _wait(plugin, timeout=1, delay=1)
    assert len(plugin.queries) == 2 and said.sleeps == [1]
