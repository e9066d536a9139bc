# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API double behaves like an API server for the python client (in process).

kubernetes.core flows are covered by test_k8s_kubernetes_core.py.
"""

from __future__ import annotations

import json
import time

import kubernetes
import kubernetes.stream
import pytest
import requests

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT, K8sDouble

ApiException = kubernetes.client.ApiException


def _cm(name, namespace="default", labels=None, data=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "data": data or {"k": "v"}}


def _ds(name="inst", namespace="kube-system", node_selector=None, tolerations=None, affinity=None, image="repo/inst:1.0"):
    spec = {"containers": [{"name": "c", "image": image, "env": [{"name": "A", "value": "1"}]}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def _status(error):
    return json.loads(error.body)


@pytest.fixture
def core(k8s_double):
    return kubernetes.client.CoreV1Api(k8s_double.api_client())


@pytest.fixture
def apps(k8s_double):
    return kubernetes.client.AppsV1Api(k8s_double.api_client())


@pytest.fixture
def dyn(k8s_double):
    return k8s_double.dynamic_client()


# ----------------------------------------------------------------------------- discovery and auth

def test_discovery_serves_core_groups_and_custom_resources(k8s_double, dyn):
    raw = requests.get(k8s_double.url + "/api/v1", headers={"Authorization": "Bearer " + k8s_double.token}, timeout=5).json()
    assert raw["groupVersion"] == "v1"
    names = {r["name"] for r in raw["resources"]}
    assert {"namespaces", "configmaps", "pods", "pods/log", "nodes"} <= names
    for api_version, kind in (("networking.gke.io/v1", "Network"), ("networking.gke.io/v1", "GKENetworkParamSet"),
                              ("nvidia.com/v1", "ClusterPolicy"), ("nvidia.com/v1alpha1", "NVIDIADriver"),
                              ("mellanox.com/v1alpha1", "NicClusterPolicy"), ("mellanox.com/v1alpha1", "MacvlanNetwork")):
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        assert resource.namespaced is False
        assert "status" in resource.subresources
    assert dyn.resources.get(api_version="nvidia.com/v1alpha1", kind="NVIDIADriver").short_names == ["nvd", "nvdriver", "nvdrivers"]
    crd = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").get(
        name="networks.networking.gke.io")
    assert [c.type for c in crd.status.conditions] == ["NamesAccepted", "Established"]


def test_wrong_token_is_unauthorized(k8s_double):
    answer = requests.get(k8s_double.url + "/api/v1/namespaces", headers={"Authorization": "Bearer nope"}, timeout=5)
    assert answer.status_code == 401 and answer.json()["reason"] == "Unauthorized"


def _as(double, token, path, method="GET", body=None):
    answer = requests.request(method, double.url + path, headers={"Authorization": "Bearer " + token}, json=body, timeout=5)
    return answer.status_code, answer.json() if answer.headers.get("Content-Type") == "application/json" else answer.text


def test_a_granted_token_may_do_exactly_what_its_rules_allow(k8s_double):
    k8s_double.put(_cm("cfg"))
    k8s_double.put(_cm("other"))
    token = k8s_double.grant({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
                              "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                                        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["cfg"]},
                                        {"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["get"]},
                                        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
                             user="system:serviceaccount:ops:reader")
    assert _as(k8s_double, token, "/api/v1/nodes")[0] == 200
    assert _as(k8s_double, token, "/api/v1/namespaces/default/configmaps/cfg")[0] == 200
    assert _as(k8s_double, token, "/api")[0] == 200 and _as(k8s_double, token, "/apis/apps/v1")[0] == 200   # discovery
    assert _as(k8s_double, token, "/version")[0] == 200
    # the API server's 403 Status (apiserver responsewriters/errors.go, apimachinery errors.NewForbidden)
    code, status = _as(k8s_double, token, "/api/v1/namespaces/default/configmaps/other")
    assert code == 403 and status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
        "details": {"name": "other", "kind": "configmaps"},
        "message": 'configmaps "other" is forbidden: User "system:serviceaccount:ops:reader" cannot get resource "configmaps" '
                   'in API group "" in the namespace "default"'}
    code, status = _as(k8s_double, token, "/apis/apps/v1/daemonsets")
    assert code == 403 and status["details"] == {"group": "apps", "kind": "daemonsets"}
    assert status["message"] == ('daemonsets.apps is forbidden: User "system:serviceaccount:ops:reader" cannot list resource '
                                 '"daemonsets" in API group "apps" at the cluster scope')
    assert _as(k8s_double, token, "/api/v1/nodes/gpu-0")[0] == 403                      # get is not list
    assert _as(k8s_double, token, "/api/v1/namespaces/default/secrets")[0] == 403
    assert _as(k8s_double, token, "/api/v1/namespaces/default/configmaps", "POST", _cm("new"))[0] == 403
    assert k8s_double.get("ConfigMap", "new", "default") is None
    code, status = _as(k8s_double, token, "/apis/apps/v1/namespaces/default/deployments/x/status")
    assert code == 404   # allowed by */status, then not found
    code, text = _as(k8s_double, token, "/logs")
    assert code == 403 and text["message"] == 'forbidden: User "system:serviceaccount:ops:reader" cannot get path "/logs"'
    denied = [r for r in k8s_double.requests() if r.status == 403]
    assert {r.user for r in denied} == {"system:serviceaccount:ops:reader"}


def test_grant_refuses_what_the_api_server_would_not_store(k8s_double):
    with pytest.raises(ValueError):
        k8s_double.grant([{"apiGroups": [""], "resources": ["pods"], "verb": ["list"]}])
    with pytest.raises(ValueError):
        k8s_double.grant({"kind": "ConfigMap"})
    assert _as(k8s_double, "not-granted", "/api")[0] == 401


def test_selected_crds_only():
    with K8sDouble(crds=["Network", "GKENetworkParamSet"]) as double:
        dyn = double.dynamic_client()
        dyn.resources.get(api_version="networking.gke.io/v1", kind="Network")
        with pytest.raises(kubernetes.dynamic.exceptions.ResourceNotFoundError):
            dyn.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    with pytest.raises(ValueError):
        K8sDouble(crds=["NoSuchThing"])


def test_discovery_is_not_inherited_from_an_earlier_double_on_the_same_address():
    """The library's default discovery cache is a file in the shared temp folder keyed by host and port: an
    earlier double's discovery left there (here: one that served every CRD) must not leak into this double."""
    import hashlib
    import os
    import tempfile
    with K8sDouble() as everything:
        cache = os.path.join(everything._tmpdir, "full.json")
        kubernetes.dynamic.DynamicClient(everything.api_client(), cache_file=cache).resources.get(
            api_version="nvidia.com/v1", kind="ClusterPolicy")
        with open(cache, encoding="utf-8") as handle:
            stale = handle.read()
    with K8sDouble(crds=["Network"]) as double:
        default_cache = os.path.join(tempfile.gettempdir(), "osrcp-%s.json" % hashlib.md5(double.url.encode("utf-8")).hexdigest())
        try:
            with open(default_cache, "w", encoding="utf-8") as handle:
                handle.write(stale)
            # the stale file is really read by a client on the library default ...
            leaky = kubernetes.dynamic.DynamicClient(double.api_client())
            assert leaky.resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").kind == "ClusterPolicy"
            # ... and ignored by the double's own client
            with pytest.raises(kubernetes.dynamic.exceptions.ResourceNotFoundError):
                double.dynamic_client().resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
        finally:
            if os.path.exists(default_cache):
                os.remove(default_cache)


# ----------------------------------------------------------------------------- CRUD semantics

def test_namespaces_and_namespaced_objects(core):
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    namespace = core.read_namespace("gpu-operator")
    assert namespace.status.phase == "Active"
    assert namespace.metadata.labels == {"kubernetes.io/metadata.name": "gpu-operator"}
    core.create_namespaced_config_map("gpu-operator", _cm("a", "gpu-operator"))
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_config_map("nope", _cm("a", "nope"))
    assert missing.value.status == 404 and _status(missing.value)["message"] == 'namespaces "nope" not found'
    with pytest.raises(ApiException) as duplicate:
        core.create_namespaced_config_map("gpu-operator", _cm("a", "gpu-operator"))
    assert duplicate.value.status == 409 and _status(duplicate.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as mismatch:
        core.create_namespaced_config_map("default", _cm("b", "gpu-operator"))
    assert mismatch.value.status == 400
    with pytest.raises(ApiException) as not_found:
        core.read_namespaced_config_map("zzz", "gpu-operator")
    assert not_found.value.status == 404 and _status(not_found.value)["details"]["kind"] == "configmaps"


def test_server_metadata_and_resource_versions(core, apps):
    created = core.create_namespaced_config_map("default", _cm("a"))
    assert created.metadata.uid and created.metadata.creation_timestamp and created.metadata.generation is None
    rv = created.metadata.resource_version
    same = core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    assert same.metadata.resource_version == rv, "a no-op patch must not bump resourceVersion"
    changed = core.patch_namespaced_config_map("a", "default", {"data": {"k": "w"}})
    assert int(changed.metadata.resource_version) > int(rv)

    ds = apps.create_namespaced_daemon_set("kube-system", _ds())
    assert ds.metadata.generation == 1
    ds = apps.patch_namespaced_daemon_set("inst", "kube-system", {"metadata": {"labels": {"x": "y"}}})
    assert ds.metadata.generation == 1, "metadata changes do not bump generation"
    ds = apps.patch_namespaced_daemon_set("inst", "kube-system", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "repo/inst:2.0"}]}}}})
    assert ds.metadata.generation == 2


def test_defaults_are_applied_like_the_api_server(apps):
    ds = apps.create_namespaced_daemon_set("kube-system", _ds())
    assert ds.spec.update_strategy.type == "RollingUpdate" and ds.spec.update_strategy.rolling_update.max_unavailable == 1
    assert ds.spec.revision_history_limit == 10
    pod_spec = ds.spec.template.spec
    assert (pod_spec.restart_policy, pod_spec.dns_policy, pod_spec.scheduler_name) == ("Always", "ClusterFirst", "default-scheduler")
    container = pod_spec.containers[0]
    assert (container.termination_message_path, container.image_pull_policy) == ("/dev/termination-log", "IfNotPresent")


def test_dry_run_all_validates_but_stores_nothing(k8s_double, core):
    answer = core.create_namespaced_config_map("default", _cm("dry"), dry_run="All")
    assert answer.metadata.name == "dry" and answer.metadata.uid
    assert k8s_double.get("ConfigMap", "dry", "default") is None
    core.create_namespaced_config_map("default", _cm("real"))
    core.patch_namespaced_config_map("real", "default", {"data": {"k": "changed"}}, dry_run="All")
    core.delete_namespaced_config_map("real", "default", dry_run="All")
    assert k8s_double.get("ConfigMap", "real", "default")["data"] == {"k": "v"}
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_config_map("default", _cm("Bad_Name"), dry_run="All")
    assert invalid.value.status == 422
    assert [r.dry_run for r in k8s_double.requests(kind="ConfigMap")] == [True, False, True, True, True]
    assert [r.verb for r in k8s_double.writes()] == ["create"]


def test_list_kind_selectors_and_items(core, dyn):
    for name, labels in (("a", {"app": "x", "tier": "1"}), ("b", {"app": "y"}), ("c", {})):
        core.create_namespaced_config_map("default", _cm(name, labels=labels))
    raw = dyn.request("GET", "/api/v1/namespaces/default/configmaps", serialize=False)
    listing = json.loads(raw.data)
    assert (listing["kind"], listing["apiVersion"]) == ("ConfigMapList", "v1") and listing["metadata"]["resourceVersion"]
    assert "kind" not in listing["items"][0], "built-in list items carry no kind"

    def names(**params):
        return [i.metadata.name for i in core.list_namespaced_config_map("default", **params).items]
    assert names() == ["a", "b", "c"]
    assert names(label_selector="app=x") == ["a"]
    assert names(label_selector="app!=x") == ["b", "c"]
    assert names(label_selector="app in (x, y)") == ["a", "b"]
    assert names(label_selector="app notin (x)") == ["b", "c"]
    assert names(label_selector="app") == ["a", "b"]
    assert names(label_selector="!app") == ["c"]
    assert names(label_selector="app=x,tier=1") == ["a"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert [i.metadata.name for i in core.list_config_map_for_all_namespaces(label_selector="app=y").items] == ["b"]
    with pytest.raises(ApiException) as bad:
        names(field_selector="data.k=v")
    assert bad.value.status == 400 and "field label not supported" in _status(bad.value)["message"]
    with pytest.raises(ApiException):
        names(label_selector="app in x")


def test_custom_resource_list_items_carry_kind(dyn):
    gnp = dyn.resources.get(api_version="networking.gke.io/v1", kind="GKENetworkParamSet")
    gnp.create({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "vpc1"},
                "spec": {"vpc": "n1", "vpcSubnet": "s1", "deviceMode": "RDMA"}})
    listing = gnp.get()
    assert listing.kind == "GKENetworkParamSetList" and listing.items[0].kind == "GKENetworkParamSet"


# ----------------------------------------------------------------------------- patches and updates

def test_strategic_merge_patch_merges_lists_by_key(apps):
    apps.create_namespaced_daemon_set("kube-system", _ds())
    ds = apps.patch_namespaced_daemon_set("inst", "kube-system", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "B", "value": "2"}]}, {"name": "sidecar", "image": "repo/side:1"}]}}}})
    containers = ds.spec.template.spec.containers
    assert [c.name for c in containers] == ["c", "sidecar"]
    assert containers[0].image == "repo/inst:1.0", "the strategic merge kept the unpatched fields"
    assert [(e.name, e.value) for e in containers[0].env] == [("A", "1"), ("B", "2")]
    ds = apps.patch_namespaced_daemon_set("inst", "kube-system", {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "$patch": "delete"}]}}}})
    assert [c.name for c in ds.spec.template.spec.containers] == ["c"]


def test_merge_patch_replaces_lists_and_json_patch_tests(k8s_double, dyn):
    resource = dyn.resources.get(api_version="apps/v1", kind="DaemonSet")
    resource.create(_ds(), namespace="kube-system")
    resource.patch(name="inst", namespace="kube-system", content_type="application/merge-patch+json",
                   body={"spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}})
    assert k8s_double.get("DaemonSet", "inst", "kube-system")["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    resource.patch(name="inst", namespace="kube-system", content_type="application/json-patch+json", body=[
        {"op": "test", "path": "/spec/template/spec/containers/0/image", "value": "repo/inst:1.0"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "repo/inst:1.1"}])
    assert k8s_double.get("DaemonSet", "inst", "kube-system")["spec"]["template"]["spec"]["containers"][0]["image"] == "repo/inst:1.1"
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as failed:
        resource.patch(name="inst", namespace="kube-system", content_type="application/json-patch+json",
                       body=[{"op": "test", "path": "/spec/template/spec/containers/0/image", "value": "nope"}])
    assert failed.value.status == 422


def test_strategic_merge_patch_on_a_custom_resource_is_415(dyn):
    network = dyn.resources.get(api_version="networking.gke.io/v1", kind="Network")
    network.create({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}, "spec": {"type": "L3"}})
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as unsupported:
        network.patch(name="n", body={"spec": {"type": "L2"}}, content_type="application/strategic-merge-patch+json")
    assert unsupported.value.status == 415
    assert network.patch(name="n", body={"spec": {"type": "L2"}}, content_type="application/merge-patch+json").spec.type == "L2"


def test_server_side_apply_and_watch_are_refused_loudly(k8s_double, dyn):
    resource = dyn.resources.get(api_version="v1", kind="ConfigMap")
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as ssa:
        resource.server_side_apply(body=_cm("x"), name="x", namespace="default", field_manager="test")
    assert ssa.value.status == 415
    answer = requests.get(k8s_double.url + "/api/v1/namespaces/default/configmaps?watch=true",
                          headers={"Authorization": "Bearer " + k8s_double.token}, timeout=5)
    assert answer.status_code == 400 and "watch is not supported" in answer.json()["message"]


def test_replace_checks_resource_version(core, dyn):
    core.create_namespaced_config_map("default", _cm("a"))
    current = core.read_namespaced_config_map("a", "default")
    stale = current.metadata.resource_version
    current.data = {"k": "new"}
    core.replace_namespaced_config_map("a", "default", current)
    current.data = {"k": "newer"}
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("a", "default", current)
    assert conflict.value.status == 409 and "the object has been modified" in _status(conflict.value)["message"]
    assert stale != core.read_namespaced_config_map("a", "default").metadata.resource_version
    network = dyn.resources.get(api_version="networking.gke.io/v1", kind="Network")
    network.create({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}, "spec": {"type": "L3"}})
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as unconditional:
        network.replace(body={"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"},
                              "spec": {"type": "L2"}})
    assert unconditional.value.status == 422


def test_status_subresource_is_separate(k8s_double, dyn):
    policy = dyn.resources.get(api_version="mellanox.com/v1alpha1", kind="NicClusterPolicy")
    body = {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy", "metadata": {"name": "nic-cluster-policy"},
            "spec": {"nvIpam": {"image": "nvidia-k8s-ipam", "repository": "ghcr.io/mellanox", "version": "v0.3.7"}},
            "status": {"state": "ready"}}
    created = policy.create(body)
    assert created.status is None, "status sent on create is dropped"
    policy.status.patch(name="nic-cluster-policy", content_type="application/merge-patch+json",
                        body={"status": {"state": "notReady", "reason": "OFED not ready"}})
    policy.patch(name="nic-cluster-policy", content_type="application/merge-patch+json", body={"status": {"state": "ready"}})
    stored = k8s_double.get("NicClusterPolicy", "nic-cluster-policy")
    assert stored["status"] == {"state": "notReady", "reason": "OFED not ready"}
    assert stored["metadata"]["generation"] == 1


def test_validation_errors_are_422_with_causes(dyn):
    bad = _ds()
    bad["spec"]["template"]["spec"]["hostNetwrok"] = True
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as invalid:
        dyn.resources.get(api_version="apps/v1", kind="DaemonSet").create(bad, namespace="kube-system")
    status = _status(invalid.value)
    assert invalid.value.status == 422 and status["reason"] == "Invalid"
    assert any("hostNetwrok" in c["message"] for c in status["details"]["causes"])
    gnp = dyn.resources.get(api_version="networking.gke.io/v1", kind="GKENetworkParamSet")
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as enum:
        gnp.create({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "v"},
                    "spec": {"vpc": "n", "vpcSubnet": "s", "deviceMode": "TCPX"}})
    assert enum.value.status == 422 and "deviceMode" in str(enum.value.body)


def test_immutable_fields(apps, dyn):
    apps.create_namespaced_daemon_set("kube-system", _ds())
    with pytest.raises(ApiException) as immutable:
        apps.patch_namespaced_daemon_set("inst", "kube-system", {"spec": {"selector": {"matchLabels": {"app": "other"}},
                                                                          "template": {"metadata": {"labels": {"app": "other"}}}}})
    assert immutable.value.status == 422 and "field is immutable" in _status(immutable.value)["message"]
    driver = dyn.resources.get(api_version="nvidia.com/v1alpha1", kind="NVIDIADriver")
    driver.create({"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "d"},
                   "spec": {"driverType": "gpu", "image": "driver", "usePrecompiled": False}})
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as cel:
        driver.patch(name="d", body={"spec": {"driverType": "vgpu"}}, content_type="application/merge-patch+json")
    assert cel.value.status == 422


# ----------------------------------------------------------------------------- deletion

def test_finalizers_hold_deletion(k8s_double, core):
    body = _cm("held")
    body["metadata"]["finalizers"] = ["example.com/cleanup"]
    core.create_namespaced_config_map("default", body)
    core.delete_namespaced_config_map("held", "default")
    held = k8s_double.get("ConfigMap", "held", "default")
    assert held["metadata"]["deletionTimestamp"]
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    assert k8s_double.get("ConfigMap", "held", "default") is None


def test_owner_references_and_namespaces_cascade(k8s_double, core, apps):
    k8s_double.add_node("n0")
    apps.create_namespaced_daemon_set("kube-system", _ds())
    assert len(k8s_double.list("Pod", "kube-system")) == 1
    apps.delete_namespaced_daemon_set("inst", "kube-system")
    assert k8s_double.list("Pod", "kube-system") == []
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tmp"}})
    core.create_namespaced_config_map("tmp", _cm("a", "tmp"))
    core.delete_namespace("tmp")
    assert k8s_double.get("Namespace", "tmp") is None and k8s_double.list("ConfigMap", "tmp") == []


# ----------------------------------------------------------------------------- controllers

def test_daemonset_controller_follows_selectors_affinity_and_taints(k8s_double, apps, core):
    k8s_double.add_node("gpu-0", labels={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, taints=[GPU_TAINT])
    k8s_double.add_node("gpu-1", labels={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, taints=[GPU_TAINT])
    k8s_double.add_node("cpu-0")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]}]}}}
    apps.create_namespaced_daemon_set("kube-system", _ds("untolerated", affinity=affinity))
    apps.create_namespaced_daemon_set("kube-system", _ds("gpu", affinity=affinity, tolerations=[
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    apps.create_namespaced_daemon_set("kube-system", _ds("everywhere", tolerations=[{"operator": "Exists"}]))
    desired = {name: apps.read_namespaced_daemon_set(name, "kube-system").status.desired_number_scheduled
               for name in ("untolerated", "gpu", "everywhere")}
    assert desired == {"untolerated": 0, "gpu": 2, "everywhere": 3}
    pods = core.list_namespaced_pod("kube-system", label_selector="app=gpu").items
    assert sorted(p.spec.node_name for p in pods) == ["gpu-0", "gpu-1"]
    assert all(p.metadata.owner_references[0].kind == "DaemonSet" for p in pods)

    k8s_double.never_ready("gpu-1")
    status = apps.read_namespaced_daemon_set("gpu", "kube-system").status
    assert (status.desired_number_scheduled, status.number_ready, status.number_unavailable) == (2, 1, 1)
    assert status.observed_generation == 1


def test_daemonset_ready_delay(apps):
    with K8sDouble(ready_delay=0.5) as double:
        double.add_node("n0")
        api = kubernetes.client.AppsV1Api(double.api_client())
        api.create_namespaced_daemon_set("kube-system", _ds())
        assert api.read_namespaced_daemon_set("inst", "kube-system").status.number_ready == 0
        time.sleep(0.6)
        assert api.read_namespaced_daemon_set("inst", "kube-system").status.number_ready == 1


def test_manual_mode_with_set_status(core):
    with K8sDouble(controllers=False) as double:
        api = kubernetes.client.AppsV1Api(double.api_client())
        double.add_node("n0")
        api.create_namespaced_daemon_set("kube-system", _ds())
        assert api.read_namespaced_daemon_set("inst", "kube-system").status is None
        double.reconcile()
        assert api.read_namespaced_daemon_set("inst", "kube-system").status.number_ready == 1
        double.set_status("DaemonSet", "inst", {"numberReady": 0, "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
                                                "numberMisscheduled": 0}, "kube-system")
        assert api.read_namespaced_daemon_set("inst", "kube-system").status.number_ready == 0


def test_pods_are_scheduled_against_allocatable_gpus(k8s_double, core):
    k8s_double.add_node("gpu-0", allocatable={"nvidia.com/gpu": "8"})

    def pod(name):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"restartPolicy": "Never", "containers": [
                    {"name": "nccl", "image": "repo/nccl:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    k8s_double.script_pod("^first$", phase="Running")
    core.create_namespaced_pod("default", pod("first"))
    core.create_namespaced_pod("default", pod("second"))
    first, second = core.read_namespaced_pod("first", "default"), core.read_namespaced_pod("second", "default")
    assert first.spec.node_name == "gpu-0" and first.status.phase == "Running"
    assert first.spec.containers[0].resources.requests == {"nvidia.com/gpu": "8"}
    assert second.status.phase == "Pending" and second.status.conditions[0].reason == "Unschedulable"


def test_job_outcome_and_logs_are_scripted(k8s_double, core):
    k8s_double.add_node("gpu-0", allocatable={"nvidia.com/gpu": "8"})
    k8s_double.script_pod("^nccl-test", phase="Succeeded", logs="# Avg bus bandwidth    : 123.456\n")
    batch = kubernetes.client.BatchV1Api(k8s_double.api_client())
    batch.create_namespaced_job("default", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "nccl-test"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "nccl", "image": "repo/nccl:1"}]}}}})
    job = batch.read_namespaced_job("nccl-test", "default")
    assert job.status.succeeded == 1 and {c.type for c in job.status.conditions} >= {"Complete"}
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": job.metadata.uid}
    pods = core.list_namespaced_pod("default", label_selector="job-name=nccl-test").items
    assert len(pods) == 1 and pods[0].status.phase == "Succeeded"
    assert core.read_namespaced_pod_log(pods[0].metadata.name, "default") == "# Avg bus bandwidth    : 123.456\n"
    assert core.read_namespaced_pod_log(pods[0].metadata.name, "default", tail_lines=0) == ""

    k8s_double.script_pod("^broken", phase="Failed", logs={"nccl": "NCCL WARN failure\n"})
    batch.create_namespaced_job("default", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "broken"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "nccl", "image": "repo/nccl:1"},
                                                                       {"name": "side", "image": "repo/side:1"}]}}}})
    assert [c.type for c in batch.read_namespaced_job("broken", "default").status.conditions][-1] == "Failed"
    pod = core.list_namespaced_pod("default", label_selector="job-name=broken").items[0]
    with pytest.raises(ApiException) as which:
        core.read_namespaced_pod_log(pod.metadata.name, "default")
    assert which.value.status == 400 and "a container name must be specified" in _status(which.value)["message"]
    assert core.read_namespaced_pod_log(pod.metadata.name, "default", container="nccl") == "NCCL WARN failure\n"


def test_gke_networking_controller_reasons(k8s_double, dyn):
    gnp = dyn.resources.get(api_version="networking.gke.io/v1", kind="GKENetworkParamSet")
    network = dyn.resources.get(api_version="networking.gke.io/v1", kind="Network")

    def make(name, **spec):
        gnp.create({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": name}, "spec": spec})
        network.create({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": name}, "spec": {
            "type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}}})

    make("vpc1", vpc="net-1", vpcSubnet="sub-1", deviceMode="NetDevice")
    make("vpc2", vpc="net-1", vpcSubnet="sub-2", deviceMode="NetDevice")
    make("vpc3", vpc="default", vpcSubnet="sub-3", deviceMode="RDMA")
    make("vpc4", vpc="net-4", vpcSubnet="sub-4")

    def reasons(name):
        return {c["type"]: c["reason"] for c in k8s_double.get("Network", name)["status"]["conditions"]}, \
            k8s_double.get("GKENetworkParamSet", name)["status"]["conditions"][0]["reason"]
    assert reasons("vpc1") == ({"ParamsReady": "GNPParamsReady", "Ready": "NetworkReady"}, "GNPReady")
    assert reasons("vpc2")[1] == "DeviceModeVPCAlreadyInUse"
    assert reasons("vpc3")[1] == "DeviceModeCantUseDefaultVPC"
    assert reasons("vpc4") == ({"ParamsReady": "GNPParamsNotReady", "Ready": "ParamsNotReady"},
                               "SecondaryRangeAndDeviceModeUnspecified")
    assert k8s_double.get("GKENetworkParamSet", "vpc1")["status"]["networkName"] == "vpc1"
    # RDMA: the RoCE VPC holds one subnet per RDMA NIC, each its own set; a subnet is still used once only
    make("rdma-0", vpc="roce", vpcSubnet="roce-sub-0", deviceMode="RDMA")
    make("rdma-1", vpc="roce", vpcSubnet="roce-sub-1", deviceMode="RDMA")
    make("rdma-2", vpc="roce", vpcSubnet="roce-sub-1", deviceMode="RDMA")
    assert reasons("rdma-1") == ({"ParamsReady": "GNPParamsReady", "Ready": "NetworkReady"}, "GNPReady")
    assert reasons("rdma-2")[1] == "DeviceModeSubnetAlreadyInUse"
    gnp.delete(name="vpc1")
    conditions = {c["type"]: c["reason"] for c in k8s_double.get("Network", "vpc1")["status"]["conditions"]}
    assert conditions == {"ParamsReady": "GNPDeleted", "Ready": "ParamsNotReady"}


def test_runtime_crd_registration(k8s_double, dyn):
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": "gpuprofiles.example.com"},
                 "spec": {"group": "example.com", "scope": "Namespaced",
                          "names": {"kind": "GPUProfile", "plural": "gpuprofiles", "singular": "gpuprofile", "listKind": "GPUProfileList"},
                          "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                              "type": "object", "properties": {"spec": {"type": "object", "properties": {
                                  "slices": {"type": "integer", "minimum": 1}}}}}}}]}})
    dyn.resources.invalidate_cache()
    profiles = dyn.resources.get(api_version="example.com/v1", kind="GPUProfile")
    profiles.create({"apiVersion": "example.com/v1", "kind": "GPUProfile", "metadata": {"name": "p"}, "spec": {"slices": 7}},
                    namespace="default")
    with pytest.raises(kubernetes.dynamic.exceptions.DynamicApiError) as invalid:
        profiles.create({"apiVersion": "example.com/v1", "kind": "GPUProfile", "metadata": {"name": "q"},
                         "spec": {"slices": 0, "typo": 1}}, namespace="default")
    assert invalid.value.status == 422
    crds.delete(name="gpuprofiles.example.com")
    with pytest.raises(KeyError):
        k8s_double.resource_type("example.com/v1/GPUProfile")
    answer = requests.get(k8s_double.url + "/apis/example.com/v1/namespaces/default/gpuprofiles/p",
                          headers={"Authorization": "Bearer " + k8s_double.token}, timeout=5)
    assert answer.status_code == 404


def test_scale_and_eviction_subresources(k8s_double, apps, core):
    k8s_double.add_node("n0")
    apps.create_namespaced_deployment("default", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "repo/web:1"}]}}}})
    scale = apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    assert scale.spec.replicas == 3
    deployment = apps.read_namespaced_deployment("web", "default")
    assert deployment.spec.replicas == 3 and deployment.metadata.generation == 2 and deployment.status.ready_replicas == 3
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "repo/p:1"}]}})
    core.create_namespaced_pod_eviction("p", "default", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                         "metadata": {"name": "p", "namespace": "default"}})
    assert k8s_double.get("Pod", "p", "default") is None


def test_exec_needs_an_upgrade_the_double_refuses(k8s_double):
    answer = requests.post(k8s_double.url + "/api/v1/namespaces/default/pods/p/exec?command=ls",
                           headers={"Authorization": "Bearer " + k8s_double.token}, timeout=5)
    assert answer.status_code == 400 and "websocket" in answer.json()["message"]


def _exec(core, pod, command, **kwargs):
    resp = kubernetes.stream.stream(core.connect_get_namespaced_pod_exec, pod, "default", command=command, stdout=True,
                                    stderr=True, stdin=False, tty=False, _preload_content=False, **kwargs)
    out, err = [], []
    while resp.is_open():
        resp.update(timeout=1)
        if resp.peek_stdout():
            out.append(resp.read_stdout())
        if resp.peek_stderr():
            err.append(resp.read_stderr())
    return "".join(out), "".join(err), resp.returncode


def test_scripted_websocket_exec(k8s_double, core):
    k8s_double.add_node("gpu-0")
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nccl-host-1"}, "spec": {
        "containers": [{"name": "nccl", "image": "repo/nccl:1"}, {"name": "rxdm", "image": "repo/rxdm:1"}]}})
    k8s_double.script_exec("^nccl-host-1$", r"^nvidia-smi -L$", stdout="GPU 0: NVIDIA H100 80GB HBM3\n")
    k8s_double.script_exec("^nccl-host-", r"^/scripts/run\.sh", stdout=lambda pod, cmd: "%s ran %s\n" % (pod, cmd[-1]),
                           stderr="NCCL WARN x\n", rc=2)

    assert _exec(core, "nccl-host-1", ["nvidia-smi", "-L"], container="nccl") == ("GPU 0: NVIDIA H100 80GB HBM3\n", "", 0)
    assert _exec(core, "nccl-host-1", ["/scripts/run.sh", "all_gather"], container="nccl") == (
        "nccl-host-1 ran all_gather\n", "NCCL WARN x\n", 2)
    with pytest.raises(Exception, match="Handshake status 400"):
        _exec(core, "nccl-host-1", ["ls"], container="nccl")
    with pytest.raises(Exception, match="Handshake status 400"):   # two containers: which one?
        _exec(core, "nccl-host-1", ["nvidia-smi", "-L"])
    with pytest.raises(Exception, match="Handshake status 404"):
        _exec(core, "missing", ["nvidia-smi", "-L"])
    log = [(r.subresource, r.body, r.status) for r in k8s_double.requests(kind="Pod") if r.subresource == "exec"]
    assert log == [("exec", "nvidia-smi -L", 101), ("exec", "/scripts/run.sh all_gather", 101), ("exec", "ls", 400),
                   ("exec", "nvidia-smi -L", 400), ("exec", "nvidia-smi -L", 404)]


def test_fault_injection(k8s_double, core):
    k8s_double.fail(verb="create", kind="ConfigMap", code=429, retry_after=2, times=1)
    with pytest.raises(ApiException) as throttled:
        core.create_namespaced_config_map("default", _cm("a"))
    assert throttled.value.status == 429 and throttled.value.headers["Retry-After"] == "2"
    core.create_namespaced_config_map("default", _cm("a"))
    assert [r.status for r in k8s_double.requests(verb="create", kind="ConfigMap")] == [429, 201]
