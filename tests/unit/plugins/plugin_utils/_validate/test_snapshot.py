# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The snapshot: what it keeps, what it never keeps (Secret data, env values), failed reads, the view."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as snap
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Missing, Skip


def test_pods_keep_what_the_checks_read_and_no_secret(load_raw, build_snapshot):
    built = build_snapshot(load_raw("gke-tcpxo"))
    text = json.dumps(built)
    assert "not-a-real-secret-value" not in text
    assert "last-applied-configuration" not in text
    assert '"secretName"' not in text and '"items"' not in text
    pod = [p for p in built["kubernetes"]["pods"] if p["metadata"]["name"] == "nccl-test-0"][0]
    main = pod["spec"]["containers"][1]
    env = dict((e["name"], e.get("value")) for e in main["env"])
    assert env["NCCL_FASTRAK_IFNAME"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
    assert "WANDB_API_KEY" in env and env["WANDB_API_KEY"] is None
    assert {"name": "creds", "secret": {}} in pod["spec"]["volumes"]
    assert {"name": "sys", "hostPath": {"path": "/sys"}} in pod["spec"]["volumes"]
    assert "command" not in pod["spec"]["containers"][0] and "args" not in pod["spec"]["containers"][0]


def test_only_pods_on_gpu_nodes_and_pending_gpu_pods_are_kept():
    nodes = [{"metadata": {"name": "gpu", "labels": {}}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}},
             {"metadata": {"name": "cpu", "labels": {}}, "status": {"allocatable": {"cpu": "4"}}}]
    pods = [{"metadata": {"name": n}, "spec": dict(spec, containers=c)} for n, spec, c in (
        ("on-gpu", {"nodeName": "gpu"}, []), ("on-cpu", {"nodeName": "cpu"}, []),
        ("pending-gpu", {}, [{"name": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]),
        ("pending-cpu", {}, [{"name": "x"}]))]
    built = snap.build_kubernetes("c", nodes, {"resources": []}, {"resources": pods})
    assert [p["metadata"]["name"] for p in built["kubernetes"]["pods"]] == ["on-gpu", "pending-gpu"]


def test_a_failed_read_is_null_and_an_empty_one_is_a_list():
    built = snap.build_kubernetes("c", {"resources": []}, {"failed": True, "msg": "forbidden"}, None,
                                  cluster_policies={"resources": []})
    assert built["kubernetes"]["daemonsets"] is None
    assert built["kubernetes"]["pods"] is None
    assert built["kubernetes"]["cluster_policies"] == []
    assert built["read_errors"] == {"kubernetes.daemonsets": "forbidden", "kubernetes.pods": "not read",
                                    "kubernetes.nic_cluster_policies": "not read", "kubernetes.network_param_sets": "not read",
                                    "kubernetes.networks": "not read"}
    view = snap.View(built)
    with pytest.raises(Missing) as caught:
        view.kubernetes("daemonsets")
    assert (caught.value.path, caught.value.why) == ("kubernetes.daemonsets", "forbidden")
    assert view.kubernetes("cluster_policies") == []


def test_a_refused_read_keeps_the_api_servers_status_not_the_http_headers():
    # kubernetes.core k8s_info's msg for a 403: the client's ApiException text (headers first, then the Status body)
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden", "code": 403,
              "details": {"kind": "nodes"},
              "message": 'nodes is forbidden: User "system:serviceaccount:ops:v" cannot list resource "nodes" in API group "" '
                         'at the cluster scope'}
    msg = ("Exception '403 Reason: Forbidden HTTP response headers: HTTPHeaderDict({'Audit-Id': 'x', 'Content-Type': "
           "'application/json', 'Date': 'Thu, 26 Nov 2026 04:00:00 GMT', 'Content-Length': '300'}) HTTP response body: %s\n' "
           "raised while trying to get resource using (name=None, namespace=None, label_selectors=[], field_selectors=[])"
           % json.dumps(status))
    built = snap.build_kubernetes("c", {"failed": True, "msg": msg}, {"failed": True, "msg": "HTTP response body: {not json"},
                                  {"failed": True, "msg": "HTTP response body: {\"kind\": \"Pod\"}"})
    assert built["read_errors"]["kubernetes.nodes"] == (
        '403 Forbidden: nodes is forbidden: User "system:serviceaccount:ops:v" cannot list resource "nodes" in API group "" '
        'at the cluster scope')
    # a body that is not a Status is kept as the message was
    assert built["read_errors"]["kubernetes.daemonsets"] == "HTTP response body: {not json"
    assert built["read_errors"]["kubernetes.pods"] == 'HTTP response body: {"kind": "Pod"}'
    assert len(snap.build_kubernetes("c", {"failed": True, "msg": "x " * 400}, None, None)["read_errors"]["kubernetes.nodes"]) == 300


def test_the_view_refuses_what_is_not_a_snapshot_and_skips_by_target_kind():
    with pytest.raises(ValueError, match="format is None"):
        snap.View({"target": {"name": "x", "kind": "host"}})
    assert snap.snapshot_problems({"format": snap.FORMAT, "version": 2, "target": {"name": "x", "kind": "vm"}}) == [
        "version is 2, this collection reads version 1", "target must have a name and a kind (kubernetes, host)"]
    host = snap.View(snap.build_host("h", {"gpus": []}))
    with pytest.raises(Skip, match="not a Kubernetes cluster"):
        host.kubernetes("nodes")
    assert host.host() == {"gpus": []}
    assert "host" in host.touched


def test_gpu_nodes_are_found_by_label_or_resource():
    assert snap.is_gpu_node({"metadata": {"labels": {"cloud.google.com/gke-accelerator": "nvidia-l4"}}})
    assert snap.is_gpu_node({"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}})
    assert snap.is_gpu_node({"metadata": {}, "status": {"capacity": {"nvidia.com/mig-1g.5gb": "7"}}})
    assert not snap.is_gpu_node({"metadata": {"labels": {}}, "status": {"allocatable": {"cpu": "4"}}})
    # the label present but false (a node the GPU Operator is kept off) with no GPU resource is no GPU node
    assert not snap.is_gpu_node({"metadata": {"labels": {"nvidia.com/gpu.present": "false"}}, "status": {"allocatable": {"cpu": "4"}}})


def test_a_failed_gke_read_keeps_its_message(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    data["gke"] = {"cluster": None, "nics": None, "node_pools": [], "read_errors": {
        "gke.cluster": "403 Forbidden: container.clusters.get", "gke.nics": "403 Forbidden: container.clusters.get",
        "gke.node_pools": None}}
    built = build_snapshot(data)
    gke_errors = dict((k, v) for k, v in built["read_errors"].items() if k.startswith("gke."))
    assert gke_errors == {"gke.cluster": "403 Forbidden: container.clusters.get", "gke.nics": "403 Forbidden: container.clusters.get"}
    assert "read_errors" not in built["gke"]
    with pytest.raises(Missing) as caught:
        snap.View(built).need("gke.cluster")
    assert caught.value.why == "403 Forbidden: container.clusters.get"


def test_the_diff_of_an_upgrade_names_what_changed(load_raw, build_snapshot):
    before = build_snapshot(load_raw("gke-tcpxo"))
    data = load_raw("gke-tcpxo")
    node = data["kubernetes"]["nodes"][0]
    node["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.1-gke.1000000"
    node["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    node["metadata"]["labels"]["cloud.google.com/gke-nccl-fastsocket"] = "true"
    data["kubernetes"]["nodes"].pop()
    installer = [d for d in data["kubernetes"]["daemonsets"] if d["metadata"]["name"] == "nccl-tcpxo-installer"][0]
    installer["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/nccl-plugin-gpudirecttcpx-dev:v1.0.16"
    after = build_snapshot(data)
    assert snap.diff(before, after) == [
        "node gke-default-0 removed",
        "node gke-a3mega-0 label: cloud.google.com/gke-nccl-fastsocket (none) -> true",
        "node gke-a3mega-0 allocatable: nvidia.com/gpu 8 -> 7",
        "node gke-a3mega-0: kubelet v1.32.2-gke.1489001 -> v1.33.1-gke.1000000",
        "DaemonSet kube-system/nccl-tcpxo-installer: images us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/"
        "nccl-plugin-gpudirecttcpx-dev:v1.0.15 -> example.com/nccl-plugin-gpudirecttcpx-dev:v1.0.16"]
    assert snap.diff(before, before) == []


def test_the_diff_of_policies_and_hosts(load_raw, build_snapshot):
    before = build_snapshot(load_raw("gpu-operator-mig"))
    data = load_raw("gpu-operator-mig")
    data["kubernetes"]["cluster_policies"][0]["status"]["state"] = "notReady"
    assert snap.diff(before, build_snapshot(data)) == ["cluster policy cluster-policy: state ready -> notReady"]
    # a policy the operator has not reconciled yet has no state: losing it is a change too
    del data["kubernetes"]["cluster_policies"][0]["status"]
    assert snap.diff(before, build_snapshot(data)) == ["cluster policy cluster-policy: state ready -> None"]
    host = load_raw("host")
    old = build_snapshot(host)
    host["host"]["driver_version"] = "570.86.15"
    assert snap.diff(old, build_snapshot(host)) == ["host: driver_version 550.54.14 -> 570.86.15"]
    with pytest.raises(ValueError, match="the new snapshot: format is None"):
        snap.diff(old, {"target": {}})


def test_the_gke_network_objects_keep_their_spec_and_status_only():
    param_set = {"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet",
                 "metadata": {"name": "rdma-0", "managedFields": [{"manager": "kubectl"}],
                              "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
                 "spec": {"vpc": "net", "vpcSubnet": "sub", "deviceMode": "RDMA"}, "status": {"conditions": []}}
    built = snap.build_kubernetes("c", {"resources": []}, {"resources": []}, {"resources": []}, {"resources": []},
                                  {"resources": []}, {"resources": [param_set]}, {"failed": True, "msg": "no such kind Network"})
    assert built["kubernetes"]["network_param_sets"] == [{
        "apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "rdma-0"},
        "spec": {"vpc": "net", "vpcSubnet": "sub", "deviceMode": "RDMA"}, "status": {"conditions": []}}]
    assert built["kubernetes"]["networks"] is None
    assert built["read_errors"] == {"kubernetes.networks": "no such kind Network"}


# ----------------------------------------------------------------------------- cases the mutation check showed missing

GPU_NODE = {"metadata": {"name": "gpu", "labels": {"nvidia.com/gpu.present": "true"}}, "status": {}}
CPU_NODE = {"metadata": {"name": "cpu", "labels": {}}, "status": {}}


def _pods(*pods):
    return snap.build_kubernetes("c", [GPU_NODE, CPU_NODE], [], list(pods))["kubernetes"]["pods"]


def test_a_pod_keeps_only_that_it_sources_the_fabric_nccl_script_not_its_command():
    # the gIB script path of GKE's RDMA guide, written out
    sourcing = {"metadata": {"name": "a"}, "spec": {"nodeName": "gpu", "containers": [
        {"name": "m", "command": ["bash", "-c"], "args": ["source /usr/local/gib/scripts/set_nccl_env.sh && run"]}]}}
    plain = {"metadata": {"name": "b"}, "spec": {"nodeName": "gpu", "containers": [{"name": "m", "command": ["run", "--fast"]}]}}
    kept = dict((p["metadata"]["name"], p["spec"]["containers"][0]) for p in _pods(sourcing, plain))
    assert kept["a"] == {"name": "m", "sources_nccl_env_script": True}
    assert kept["b"] == {"name": "m"}


def test_a_scrubbed_pod_keeps_annotations_owners_and_host_settings_with_their_defaults():
    pod = {"metadata": {"name": "a", "namespace": "ml", "labels": {"app": "x"}, "ownerReferences": [{"kind": "Job", "name": "j"}],
                        "annotations": {"devices.gke.io/container.tcpxo-daemon": "x",
                                        "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
           "spec": {"nodeName": "gpu", "hostNetwork": True, "containers": [{"name": "m"}]},
           "status": {"phase": "Running", "podIP": "10.0.0.1"}}
    kept = snap.scrub_pod(pod)
    assert kept["metadata"] == {"name": "a", "namespace": "ml", "labels": {"app": "x"}, "ownerReferences": [{"kind": "Job", "name": "j"}],
                                "annotations": {"devices.gke.io/container.tcpxo-daemon": "x"}}
    assert (kept["spec"]["hostNetwork"], kept["spec"]["hostIPC"]) == (True, False)
    assert kept["status"] == {"phase": "Running"}
    bare = snap.scrub_pod({"metadata": {"name": "b"}})
    assert (bare["spec"]["hostNetwork"], bare["spec"]["hostIPC"], bare["spec"]["containers"]) == (False, False, [])


def test_pending_pods_are_kept_when_they_ask_for_gpus_even_malformed_ones():
    asks = {"metadata": {"name": "asks"}, "spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    malformed = {"metadata": {"name": "malformed"},
                 "spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "two"}}}]}}
    cpu = {"metadata": {"name": "cpu-only"}, "spec": {"containers": [{"name": "m", "resources": {"limits": {"cpu": "2"}}}]}}
    on_cpu = {"metadata": {"name": "on-cpu"}, "spec": {"nodeName": "cpu", "containers": [{"name": "m"}]}}
    no_spec = {"metadata": {"name": "no-spec"}}
    assert [p["metadata"]["name"] for p in _pods(asks, malformed, cpu, on_cpu, no_spec)] == ["asks", "malformed"]


def test_gke_read_errors_keep_only_the_failed_reads_shortened():
    gke = {"cluster": {"name": "c"}, "nics": None, "node_pools": None,
           "read_errors": {"gke.cluster": "an old message", "gke.nics": "x" * 400, "gke.node_pools": ""}}
    built = snap.build_kubernetes("c", [], [], [], [], [], [], [], gke=gke)
    assert built["read_errors"] == {"gke.nics": "x" * 300}
    assert built["gke"] == {"cluster": {"name": "c"}, "nics": None, "node_pools": None}


def test_the_view_has_gpu_nodes_and_pods_on_nodes():
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu", "containers": []}}
    view = snap.View(snap.build_kubernetes("c", [GPU_NODE, CPU_NODE], [], [pod], cluster_policies=None))
    assert view.has("kubernetes.nodes") is True and view.has("kubernetes.cluster_policies") is False
    assert [snap.node_name(n) for n in view.gpu_nodes()] == ["gpu"]
    assert [p["metadata"]["name"] for p in view.pods_on(["gpu"])] == ["p"]
    assert view.pods_on(["cpu"]) == [] and view.pods_on([]) == []
    assert snap.snapshot_problems(["not", "a", "mapping"]) == ["a snapshot is a mapping, got list"]
    assert snap.snapshot_problems(snap.build_host("h", {})) == []


PARTED = {"version": "v1", "mig-configs": {"custom": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}


def _config_map(data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mig", "namespace": "gpu-operator"}, "data": data}


def test_the_mig_parted_config_is_read_from_its_configmap_or_taken_as_it_is():
    import yaml
    assert snap.mig_parted(_config_map({"config.yaml": yaml.safe_dump(PARTED)})) == (
        dict(source="ConfigMap gpu-operator/mig", config=PARTED), None)
    assert snap.mig_parted(PARTED) == (dict(source="the mig-parted config", config=PARTED), None)
    assert snap.mig_parted(_config_map({"other": "x"})) == (None, "ConfigMap gpu-operator/mig has no config.yaml key")
    found, why = snap.mig_parted(_config_map({"config.yaml": "mig-configs: [x"}))
    assert found is None and why.startswith("ConfigMap gpu-operator/mig: config.yaml is not YAML: ")
    for bad in ({"version": "v2", "mig-configs": {}}, {"version": "v1", "mig-configs": []}, {"version": "v1"}, ["v1"]):
        assert snap.mig_parted(bad) == (None, "the mig-parted config is not a mig-parted config (version: v1 with mig-configs)")
    assert snap.mig_parted(_config_map({"config.yaml": "version: v2\n"}))[1] == (
        "ConfigMap gpu-operator/mig is not a mig-parted config (version: v1 with mig-configs)")
    built = snap.build_kubernetes("c", [], [], [], [], [], [], [], mig_parted_config=_config_map({"other": "x"}))
    assert built["mig_parted"] is None
    assert built["read_errors"] == {"mig_parted": "ConfigMap gpu-operator/mig has no config.yaml key"}
    built = snap.build_kubernetes("c", [], [], [], [], [], [], [], mig_parted_config=PARTED)
    assert built["mig_parted"]["config"] == PARTED and built["mig_parted"]["config"] is not PARTED
    assert "read_errors" not in built


SENTINEL = "planted-secret-value-4d1c"


def _hostile_cluster():
    """A node, a DaemonSet, a ClusterPolicy and a GPU pod, each with the sentinel where a credential may sit."""
    managed = [{"manager": "kubectl", "fieldsV1": {"f:data": {SENTINEL: {}}}}]
    last_applied = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps({"env": SENTINEL})}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu", "labels": {"nvidia.com/gpu.present": "true"},
                                                             "annotations": dict(last_applied, note=SENTINEL), "managedFields": managed},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "agent", "namespace": "ops", "annotations": last_applied, "managedFields": managed},
                 "spec": {"template": {"spec": {"containers": [{
                     "name": "a", "image": "agent:1", "command": ["run", "--token=" + SENTINEL], "args": [SENTINEL],
                     "env": [{"name": "API_KEY", "value": SENTINEL}, {"name": "NCCL_DEBUG", "value": "INFO"}]}]}}},
                 "status": {"desiredNumberScheduled": 1, "numberReady": 1}}
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
              "spec": {"driver": {"enabled": True, "env": [{"name": "HTTPS_PROXY", "value": "http://u:%s@proxy" % SENTINEL}],
                                  "args": ["--key", SENTINEL]}, "mig": {"strategy": "mixed"}},
              "status": {"state": "ready"}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "trainer", "namespace": "ml", "annotations": {
               "example.com/api-key": SENTINEL, "networking.gke.io/interfaces": "[]",
               "devices.gke.io/container.tcpxo-daemon": "- path: /dev/nvidia0\n"}},
           "spec": {"nodeName": "gpu", "containers": [{"name": "t", "image": "pytorch", "args": ["--hf-token", SENTINEL],
                                                       "env": [{"name": "HF_TOKEN", "value": SENTINEL}]}]}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"token": SENTINEL}}
    return node, daemonset, policy, pod, secret


def test_nodes_daemonsets_and_policies_keep_no_env_value_command_line_or_other_annotation():
    node, daemonset, policy, pod, _secret = _hostile_cluster()
    built = snap.build_kubernetes("c", {"resources": [node]}, {"resources": [daemonset]}, {"resources": [pod]},
                                  cluster_policies={"resources": [policy]})
    assert SENTINEL not in json.dumps(built)
    k8s = built["kubernetes"]
    assert k8s["nodes"][0]["metadata"] == {"name": "gpu", "labels": {"nvidia.com/gpu.present": "true"}}
    assert k8s["daemonsets"][0]["spec"]["template"]["spec"]["containers"] == [
        {"name": "a", "image": "agent:1", "env": [{"name": "API_KEY"}, {"name": "NCCL_DEBUG", "value": "INFO"}]}]
    assert k8s["daemonsets"][0]["status"] == daemonset["status"]
    assert k8s["cluster_policies"][0]["spec"] == {"driver": {"enabled": True, "env": [{"name": "HTTPS_PROXY"}]}, "mig": {"strategy": "mixed"}}
    assert k8s["pods"][0]["metadata"]["annotations"] == {"networking.gke.io/interfaces": "[]",
                                                         "devices.gke.io/container.tcpxo-daemon": "- path: /dev/nvidia0\n"}


def test_a_node_keeps_the_multi_networking_annotations_the_network_checks_read():
    """gpudirect.node_nics reads each node's NIC annotations: a live snapshot keeps them, and nothing else of the node's
    annotations."""
    nics = '[{"birthIP": "192.168.1.2", "birthName": "eth1"}]'
    north = '[{"network": "a3mega-gpunic-1", "ipAddress": "192.168.1.2"}]'
    node = {"metadata": {"name": "gpu", "annotations": {"networking.gke.io/nic-info": nics,
                                                        "networking.gke.io/north-interfaces": north,
                                                        "example.com/token": SENTINEL}}}
    built = snap.build_kubernetes("c", {"resources": [node]}, {"resources": []}, {"resources": []})
    assert built["kubernetes"]["nodes"][0]["metadata"]["annotations"] == {
        "networking.gke.io/nic-info": nics, "networking.gke.io/north-interfaces": north}
    assert snap.loaded(json.loads(json.dumps(built)))["kubernetes"]["nodes"] == built["kubernetes"]["nodes"]


def test_a_snapshot_file_is_reduced_as_it_is_loaded():
    """A file a user sent: raw objects, a Secret in a collection, in a part of its own and under gke, unknown parts."""
    node, daemonset, policy, pod, secret = _hostile_cluster()
    document = {"format": snap.FORMAT, "version": snap.VERSION, "target": {"name": "c", "kind": "kubernetes", "token": SENTINEL},
                "captured_at": "2026-01-01T00:00:00Z", "extra": SENTINEL,
                "kubernetes": {"nodes": [node], "daemonsets": [daemonset, secret], "pods": [pod, secret], "cluster_policies": [policy],
                               "nic_cluster_policies": None, "secrets": [secret]},
                "gke": {"cluster": {"name": "c"}, "node_pools": [], "nics": [], "found": [secret], "one": secret}}
    loaded = snap.loaded(document)
    assert SENTINEL not in json.dumps(loaded)
    assert loaded["target"] == {"name": "c", "kind": "kubernetes"}
    assert sorted(loaded) == ["captured_at", "format", "gke", "kubernetes", "target", "version"]
    assert sorted(loaded["kubernetes"]) == sorted(snap.KUBERNETES_KEYS)
    assert [p["metadata"]["name"] for p in loaded["kubernetes"]["pods"]] == ["trainer"]
    assert [d.get("kind") for d in loaded["kubernetes"]["daemonsets"]] == [daemonset.get("kind")]
    assert loaded["gke"] == {"cluster": {"name": "c"}, "node_pools": [], "nics": [], "found": []}
    assert loaded["kubernetes"]["nic_cluster_policies"] is None and loaded["kubernetes"]["networks"] is None
    with pytest.raises(ValueError, match="not a validation snapshot: format is None"):
        snap.loaded({"kind": "List", "items": [secret]})


def test_a_snapshot_built_here_loads_back_unchanged(load_raw, build_snapshot):
    for name in ("gke-tcpxo", "gke-a3ultra", "gke-a4x", "gpu-operator-mig", "host", "ack-mps"):
        built = json.loads(json.dumps(build_snapshot(load_raw(name))))
        assert snap.loaded(built) == built, name
    # with what the performance phase adds (roles/validate/tasks/_performance.yml)
    built["performance"] = {"tolerance": 0.1, "nccl": {"output": "# Avg bus bandwidth    : 48.2"}, "ib_write_bw": {"error": "not run"}}
    assert snap.loaded(built) == built
    # and the health phase's (roles/validate/tasks/_health.yml): a snapshot file keeps the probes' outputs
    built["health"] = {"level": 2, "dcgm": {"nodes": {"gpu-0": {"output": "{}", "rc": 0, "error": ""}}},
                       "nvbandwidth": {"skipped": "no image"}, "nccl_loopback": {"floors": {"m": 300}, "nodes": {}}}
    assert snap.loaded(built) == built


def test_a_collection_that_is_not_a_list_in_a_snapshot_file_is_not_captured_and_says_why():
    _node, _daemonset, _policy, _pod, secret = _hostile_cluster()
    document = {"format": snap.FORMAT, "version": snap.VERSION, "target": {"name": "c", "kind": "kubernetes"},
                "read_errors": {"kubernetes.networks": "404 NotFound: the server could not find the requested resource"},
                "kubernetes": {"nodes": [], "pods": secret, "daemonsets": "all of them"}}
    loaded = snap.loaded(document)
    assert SENTINEL not in json.dumps(loaded)
    assert (loaded["kubernetes"]["pods"], loaded["kubernetes"]["daemonsets"], loaded["kubernetes"]["nodes"]) == (None, None, [])
    assert loaded["read_errors"] == {"kubernetes.networks": "404 NotFound: the server could not find the requested resource",
                                     "kubernetes.pods": "the snapshot file holds dict here, not a list",
                                     "kubernetes.daemonsets": "the snapshot file holds str here, not a list"}
    with pytest.raises(Missing) as missing:
        snap.View(loaded).kubernetes("pods")
    assert missing.value.why == "the snapshot file holds dict here, not a list"


def test_a_pod_keeps_its_containers_state_reasons_but_no_message():
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "gpu-1"},
           "status": {"phase": "Running", "hostIP": "10.0.0.9",
                      "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "unready: [c]",
                                      "lastTransitionTime": "2026-11-29T10:00:00Z"}],
                      "initContainerStatuses": [{"name": "init", "ready": True, "image": "i", "imageID": "sha",
                                                 "state": {"terminated": {"reason": "Completed", "exitCode": 0, "message": "done"}}}],
                      "containerStatuses": [{"name": "c", "ready": False, "started": False, "restartCount": 4, "containerID": "cri://x",
                                             "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                                             "lastState": {"terminated": {"reason": "Error", "exitCode": 1, "signal": 15,
                                                                          "message": "password=hunter2", "startedAt": "t"}}}]}}
    assert snap.scrub_pod(pod)["status"] == {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
        "initContainerStatuses": [{"name": "init", "ready": True, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}],
        "containerStatuses": [{"name": "c", "ready": False, "started": False, "restartCount": 4,
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                               "lastState": {"terminated": {"reason": "Error", "exitCode": 1, "signal": 15}}}]}
    assert "hunter2" not in json.dumps(snap.scrub_pod(pod))


def test_odd_container_states_are_kept_without_their_values():
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-1"},
           "status": {"containerStatuses": ["odd", {"name": "c", "state": {"running": None, "waiting": "text", "terminated": {"exitCode": 0}}}]}}
    assert snap.scrub_pod(pod)["status"]["containerStatuses"] == ["odd", {"name": "c", "state": {"running": {}, "terminated": {"exitCode": 0}}}]


def _gke_snapshot(gke, read_errors=None):
    document = {"format": snap.FORMAT, "version": snap.VERSION, "target": {"name": "c", "kind": "kubernetes"}, "kubernetes": {}}
    if gke is not None:
        document["gke"] = gke
    if read_errors:
        document["read_errors"] = read_errors
    return snap.View(document)


@pytest.mark.parametrize("gke, read_errors, why", [
    (None, None, "the GKE API was not read: validate_gke is not set"),
    (None, {"gke.cluster": "403 Forbidden"}, "403 Forbidden"),
    ({"nics": []}, None, None),
    ({"nics": []}, {"gke.cluster": "404 NotFound"}, "404 NotFound"),
])
def test_a_gke_path_that_was_not_read_says_whether_validate_gke_was_set(gke, read_errors, why):
    with pytest.raises(Missing) as raised:
        _gke_snapshot(gke, read_errors).need("gke.cluster")
    assert raised.value.why == why
    with pytest.raises(Missing) as raised:
        _gke_snapshot(None).need("kubernetes.nodes")
    assert raised.value.why is None


def test_only_the_exact_kept_variable_names_keep_their_values_and_references_keep_none():
    # names that start like a kept one are other variables: their values may hold anything
    env = [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
           {"name": "LD_LIBRARY_PATH_TOKEN", "value": "s3cr3t-1"},
           {"name": "CUDA_VISIBLE_DEVICES_KEY", "value": "s3cr3t-2"},
           {"name": "NVIDIA_VISIBLE_DEVICESX", "value": "s3cr3t-3"},
           {"name": "NCCL_SOCKET_IFNAME", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    pod = {"metadata": {"name": "a"}, "spec": {"nodeName": "gpu", "containers": [{"name": "m", "env": env}]}}
    kept = _pods(pod)[0]["spec"]["containers"][0]["env"]
    assert kept == [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}, {"name": "LD_LIBRARY_PATH_TOKEN"},
                    {"name": "CUDA_VISIBLE_DEVICES_KEY"}, {"name": "NVIDIA_VISIBLE_DEVICESX"}, {"name": "NCCL_SOCKET_IFNAME"}]


def test_only_annotations_that_start_with_the_device_injection_prefix_are_kept():
    pod = {"metadata": {"name": "a", "annotations": {"devices.gke.io/container.tcpxo-daemon": "x",
                                                     "mirror.example.com/devices.gke.io/container.copy": "token"}},
           "spec": {"nodeName": "gpu", "containers": [{"name": "m"}]}}
    assert snap.scrub_pod(pod)["metadata"]["annotations"] == {"devices.gke.io/container.tcpxo-daemon": "x"}
