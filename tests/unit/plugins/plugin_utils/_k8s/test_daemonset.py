# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/_k8s/daemonset.py, the engine of action k8s_daemonset_wait: per-node
readiness of a DaemonSet, with the reason where it is not ready.

The pods, nodes and DaemonSets come from the Kubernetes API double's controllers (in process, no
HTTP), so they carry what a real cluster returns: owner references, template-generation labels,
kubelet-like statuses. Faults the double does not produce by itself (image pull errors, a pod being
deleted) are written into those objects the way the kubelet / API server would report them.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import daemonset as engine
from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT, K8sDouble

GPU = {"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"}


def _daemonset(image="registry.example/installer:v1", name="installer"):
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "installer"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "installer"}},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "In",
                                               "values": ["nvidia-h100-mega-80gb"]}]}]}}},
                    "tolerations": [{"operator": "Exists"}],
                    "initContainers": [{"name": "install", "image": image}],
                    "containers": [{"name": "pause", "image": "registry.example/pause:3.8"}],
                },
            },
        },
    }


@pytest.fixture
def cluster():
    k8s = K8sDouble()  # controllers run on every put(); no server needed
    for name in ("gpu-0", "gpu-1"):
        k8s.add_node(name, labels=GPU, allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    k8s.add_node("cpu-0")
    return k8s


def _report(k8s, daemonset=None, nodes=None):
    daemonset = daemonset or k8s.get("DaemonSet", "installer", "kube-system")
    if nodes is None:
        nodes = [n for n in k8s.list("Node") if n["metadata"]["labels"].get("cloud.google.com/gke-accelerator")]
    return engine.node_report(k8s.list("Pod", "kube-system"), nodes, daemonset)


def _pod_on(k8s, node):
    return next(p for p in k8s.list("Pod", "kube-system") if p["spec"]["nodeName"] == node)


def test_ready_on_every_gpu_node(cluster):
    cluster.put(_daemonset())
    report = _report(cluster)
    assert [(e["node"], e["ready"], e["reason"]) for e in report] == [("gpu-0", True, None), ("gpu-1", True, None)]
    assert report[0]["pod"] == _pod_on(cluster, "gpu-0")["metadata"]["name"]


def test_pod_never_ready_names_the_pod(cluster):
    cluster.put(_daemonset())
    cluster.never_ready("gpu-1")
    gpu0, gpu1 = _report(cluster)
    assert gpu0["ready"] is True
    pod = _pod_on(cluster, "gpu-1")["metadata"]["name"]
    assert gpu1 == {"node": "gpu-1", "ready": False, "pod": pod, "reason": "pod %s is Running, not ready" % pod}


def test_pods_of_an_older_template_do_not_count(cluster):
    cluster.put(_daemonset("registry.example/installer:v1"))
    newer = cluster.get("DaemonSet", "installer", "kube-system")
    newer["spec"]["template"]["spec"]["initContainers"][0]["image"] = "registry.example/installer:v2"
    # the pods still run v1: the controller has not rolled them yet
    report = engine.node_report(cluster.list("Pod", "kube-system"), [cluster.get("Node", "gpu-0")], newer)
    assert report[0]["ready"] is False
    assert report[0]["reason"].endswith("runs an outdated template (install=registry.example/installer:v1, "
                                        "pause=registry.example/pause:3.8)")
    # once the controller rolled them out, the node is ready again
    cluster.modify("DaemonSet", "installer", lambda d: d["spec"]["template"]["spec"]["initContainers"][0].update(
        image="registry.example/installer:v2"), "kube-system")
    assert [e["ready"] for e in _report(cluster)] == [True, True]


def test_node_without_a_pod(cluster):
    cluster.put(_daemonset())
    # a GPU node whose label the DaemonSet does not select (another accelerator value)
    cluster.add_node("gpu-2", labels={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})
    report = _report(cluster)
    assert report[2] == {"node": "gpu-2", "ready": False, "pod": None, "reason": "no pod of DaemonSet installer on the node"}


def test_not_ready_and_cordoned_nodes_are_named(cluster):
    cluster.add_node("gpu-2", labels=GPU, ready=False)
    cluster.put(_daemonset())
    cluster.modify("Node", "gpu-1", lambda n: n["spec"].update(unschedulable=True))
    cluster.never_ready("gpu-1")
    report = {e["node"]: e for e in _report(cluster)}
    assert report["gpu-0"]["ready"] is True
    assert report["gpu-1"]["reason"].endswith("is Running, not ready; node cordoned")
    assert report["gpu-2"]["reason"].endswith("is Running, not ready; node NotReady")


def test_waiting_containers_give_the_reason(cluster):
    cluster.put(_daemonset())
    pod = _pod_on(cluster, "gpu-1")
    pod["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
        "initContainerStatuses": [{"name": "install", "ready": False, "state": {"waiting": {
            "reason": "ImagePullBackOff", "message": "Back-off pulling image \"registry.example/installer:v1\""}}}],
        "containerStatuses": [{"name": "pause", "ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}],
    }
    pods = [pod if p["metadata"]["name"] == pod["metadata"]["name"] else p for p in cluster.list("Pod", "kube-system")]
    report = engine.node_report(pods, [cluster.get("Node", "gpu-1")], cluster.get("DaemonSet", "installer", "kube-system"))
    assert report[0]["reason"] == (
        "pod %s is Pending, not ready: init container install: ImagePullBackOff (Back-off pulling image "
        "\"registry.example/installer:v1\"); container pause: PodInitializing" % pod["metadata"]["name"])


def test_failed_init_container_and_crashed_container(cluster):
    cluster.put(_daemonset())
    pod = _pod_on(cluster, "gpu-0")
    pod["status"] = {
        "phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}],
        "initContainerStatuses": [{"name": "install", "state": {"terminated": {"reason": "Error", "exitCode": 1}}}],
    }
    report = engine.node_report([pod], [cluster.get("Node", "gpu-0")], cluster.get("DaemonSet", "installer", "kube-system"))
    assert report[0]["reason"].endswith("not ready: init container install: failed Error (exit code 1)")


def test_unschedulable_pod(cluster):
    cluster.put(_daemonset())
    pod = _pod_on(cluster, "gpu-0")
    pod["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}]}
    report = engine.node_report([pod], [cluster.get("Node", "gpu-0")], cluster.get("DaemonSet", "installer", "kube-system"))
    assert report[0]["reason"].endswith("is Pending, not ready: unschedulable: 0/3 nodes are available")


def test_terminating_pod_does_not_count_but_its_replacement_does(cluster):
    cluster.put(_daemonset())
    old = _pod_on(cluster, "gpu-0")
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    daemonset = cluster.get("DaemonSet", "installer", "kube-system")
    node = cluster.get("Node", "gpu-0")
    [entry] = engine.node_report([old], [node], daemonset)
    assert entry["ready"] is False and entry["reason"] == "pod %s is terminating" % old["metadata"]["name"]
    replacement = copy.deepcopy(_pod_on(cluster, "gpu-0"))
    replacement["metadata"]["name"] = "installer-zzzzz"
    [entry] = engine.node_report([old, replacement], [node], daemonset)
    assert entry == {"node": "gpu-0", "ready": True, "pod": "installer-zzzzz", "reason": None}


def test_pods_of_another_owner_are_ignored(cluster):
    cluster.put(_daemonset())
    cluster.put(_daemonset(name="installer-copy"))  # same selector labels, another DaemonSet
    daemonset = cluster.get("DaemonSet", "installer", "kube-system")
    foreign = [p for p in cluster.list("Pod", "kube-system") if p["metadata"]["ownerReferences"][0]["name"] == "installer-copy"]
    assert foreign
    report = engine.node_report(foreign, [cluster.get("Node", "gpu-0")], daemonset)
    assert report[0]["ready"] is False and report[0]["reason"] == "no pod of DaemonSet installer on the node"


@pytest.mark.parametrize("pods, nodes, daemonset, message", [
    ({}, [], {}, "pods and nodes must be lists"),
    ([], [], "ds", "must be a DaemonSet object"),
    ([], [], {"kind": "Deployment"}, "must be a DaemonSet object"),
    (["pod"], [], {}, r"pods\[0\]: must be a Kubernetes object"),
])
def test_the_engine_refuses_what_is_not_kubernetes_objects(pods, nodes, daemonset, message):
    with pytest.raises(ValueError, match=message):
        engine.node_report(pods, nodes, daemonset)


def _plain_daemonset(uid="uid-1"):
    return {"kind": "DaemonSet", "metadata": {"name": "installer", "namespace": "kube-system", "uid": uid},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}


def _plain_pod(name, node, owners=None, ready=True, statuses=None, init_statuses=None):
    meta = {"name": name}
    if owners is not None:
        meta["ownerReferences"] = owners
    status = {"phase": "Running" if ready else "Pending", "conditions": [{"type": "Ready", "status": str(ready)}]}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    return {"kind": "Pod", "metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "img:1"}]},
            "status": status}


def _plain_node(name):
    return {"kind": "Node", "metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize("owners, counted", [
    (None, True),  # no owner recorded: the selector decides
    ([], True),
    ([{"kind": "DaemonSet", "name": "installer", "uid": "uid-1"}], True),
    ([{"kind": "DaemonSet", "name": "installer"}], True),  # an owner without uid: the name decides
    ([{"kind": "DaemonSet", "name": "installer", "uid": "uid-0"}], False),  # the DaemonSet was recreated
    ([{"kind": "DaemonSet", "name": "other"}], False),
    ([{"kind": "ReplicaSet", "name": "installer"}], False),
    ([{"kind": "ReplicaSet", "name": "x"}, {"kind": "DaemonSet", "name": "installer", "uid": "uid-1"}], True),
])
def test_only_pods_of_this_daemonset_count(owners, counted):
    report = engine.node_report([_plain_pod("p0", "gpu-0", owners)], [_plain_node("gpu-0")], _plain_daemonset())
    assert report[0]["ready"] is counted and report[0]["pod"] == ("p0" if counted else None)
    # a DaemonSet read without a uid takes the owner's name
    report = engine.node_report([_plain_pod("p0", "gpu-0", [{"kind": "DaemonSet", "name": "installer", "uid": "uid-0"}])],
                                [_plain_node("gpu-0")], _plain_daemonset(uid=None))
    assert report[0]["ready"]


def test_the_reason_names_each_waiting_or_terminated_container():
    pod = _plain_pod("p0", "gpu-0", ready=False, init_statuses=[
        {"name": "done", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "boom", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}},
        {"name": "pull", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}},
    ], statuses=[
        {"name": "c", "state": {"waiting": {}}},
        {"name": "d", "state": {"terminated": {"exitCode": 0}}},
    ])
    [entry] = engine.node_report([pod], [_plain_node("gpu-0")], _plain_daemonset())
    assert entry["reason"] == ("pod p0 is Pending, not ready: init container boom: failed Error (exit code 2); "
                               "init container pull: ImagePullBackOff (not found); container c: Waiting; "
                               "container d: terminated  (exit code 0)")


def test_nodes_are_reported_by_name_and_the_first_ready_pod_by_name_wins():
    pods = [_plain_pod("p-b", "gpu-0"), _plain_pod("p-a", "gpu-0"), _plain_pod("p-c", "gpu-1", ready=False),
            _plain_pod("p-d", "gpu-1", ready=False)]
    report = engine.node_report(pods, [_plain_node("gpu-1"), _plain_node("gpu-0")], _plain_daemonset())
    assert [(e["node"], e["ready"], e["pod"]) for e in report] == [("gpu-0", True, "p-a"), ("gpu-1", False, "p-c")]
    assert report[1]["reason"] == "pod p-c is Pending, not ready; pod p-d is Pending, not ready"
