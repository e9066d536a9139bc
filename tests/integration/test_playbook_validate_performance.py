# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/validate.yml's performance phase against the Kubernetes double: the NCCL probe (role nccl_test)
runs between two A3 High (TCPX) nodes, its pods carry the managed-by label and the run's id and are gone again after a
run that passes and after one that fails; the checks judge the captured log (the guide's A3 High table with NCCL INFO
lines); without performance in validate_phases nothing is written even with a probe configured.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host
from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT
from ansible_collections.gpu_ops.cluster.tests.doubles.nvidia_operators import FakeOperators
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

PLAYBOOK = str(REPO_ROOT / "playbooks" / "validate.yml")
GUIDE_TCPX = (Path(__file__).resolve().parents[1] / "unit/plugins/module_utils/fixtures/nccl_tests/guide_tcpx_all_gather.txt").read_text()
INFO = "gpu-0:81:81 [0] NCCL INFO Using network %s\ngpu-1:82:82 [0] NCCL INFO Using network %s\n"
RUN = r"run-nccl-tests\.sh all_gather "


def _seed(k8s):
    """Two A3 High nodes (written out: accelerator nvidia-h100-80gb) and the four GPU NIC networks vpc1..vpc4."""
    for name in ("gpu-0", "gpu-1"):
        k8s.add_node(name, labels={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
                                   "node.kubernetes.io/instance-type": "a3-highgpu-8g"},
                     allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    for index in range(1, 5):
        name = "vpc%d" % index
        k8s.put({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": name},
                 "spec": {"vpc": "gpu-net-%d" % index, "vpcSubnet": "gpu-sub-%d" % index, "deviceMode": "NetDevice"}})
        k8s.put({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": name},
                 "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}}})
    k8s.script_pod(r"^vperf-[0-9a-f]{8}-test-host-", phase="Running")   # the test container sleeps until exec'd


def _run(run_playbook, k8s, out, **extra):
    extra_vars = dict(validate_clusters="localhost", validate_hosts="no-such-group", validate_output_dir=str(out),
                      validate_phases=["performance"], validate_performance_nccl="tcpx",
                      validate_performance_nccl_benchmarks=["all_gather"], validate_performance_timeout=30,
                      nccl_test_gke_version="1.30.4-gke.1129000")
    extra_vars.update(extra)
    return run_playbook(PLAYBOOK, extra_vars=extra_vars, env=k8s.env())


def _granted(path):
    """(group, resource, verb, namespace or None) granted by a shipped RBAC file: Role rules in their namespace only."""
    grants = set()
    for doc in yaml.safe_load_all(Path(path).read_text()):
        for doc in doc["items"] if doc["kind"] == "List" else [doc]:
            namespace = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
            for rule in doc["rules"]:
                grants.update((group, resource, verb, namespace) for group in rule["apiGroups"] for resource in rule["resources"]
                              for verb in rule["verbs"])
    return grants


def _needed(requests):
    """(group, resource[/subresource], verb, namespace) of each API request (discovery aside)."""
    needed = set()
    for request in requests:
        if request.kind is None or request.verb in (None, "discovery"):
            continue
        parts = request.path.strip("/").split("/")
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        if rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        resource = rest[0] + ("/" + rest[2] if len(rest) > 2 else "")
        needed.add((group, resource, request.verb, request.namespace))
    return needed


def _tests(out):
    return dict((t["name"], t) for t in json.loads((out / "localhost" / "ctrf.json").read_text())["results"]["tests"])


def _probe_pods(k8s):
    """The Pods the run created, with their labels (from the create requests)."""
    created = {}
    for write in k8s.writes():
        if write.verb == "create" and write.kind == "Pod" and not write.subresource:
            created[write.name] = json.loads(write.body)["metadata"].get("labels") or {}
    return created


def _assert_labelled_and_gone(k8s):
    pods = _probe_pods(k8s)
    assert sorted(pods) and all(name.startswith("vperf-") for name in pods), pods
    run_ids = set(name[len("vperf-"):len("vperf-") + 8] for name in pods)
    assert len(run_ids) == 1, pods
    run_id = run_ids.pop()
    for labels in pods.values():
        assert labels["app.kubernetes.io/managed-by"] == "gpu_ops.cluster", labels
        assert labels["app.kubernetes.io/instance"] == "vperf-%s-test" % run_id, labels
    # every object the probe created was deleted again; nothing it made is left
    created = set((w.kind, w.name) for w in k8s.writes() if w.verb == "create" and not w.subresource)
    deleted = set((w.kind, w.name) for w in k8s.writes() if w.verb == "delete")
    assert created and created <= deleted, (created, deleted)
    assert [p["metadata"]["name"] for p in k8s.list("Pod", "default")] == []
    assert [s["metadata"]["name"] for s in k8s.list("Service", "default") if s["metadata"]["name"].startswith("vperf-")] == []
    assert [c["metadata"]["name"] for c in k8s.list("ConfigMap", "default") if c["metadata"]["name"].startswith("vperf-")] == []


def test_the_nccl_probe_passes_and_is_removed(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    k8s_double.script_exec(r"^vperf-[0-9a-f]{8}-test-host-1$", RUN, stdout=INFO % ("GPUDirectTCPX_v7", "GPUDirectTCPX_v7") + GUIDE_TCPX)
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out).assert_ok()
    tests = _tests(out)
    assert {i: tests[i]["status"] for i in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.nccl_transport")} == dict.fromkeys(
        ("perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.nccl_transport"), "passed")
    assert tests["perf.ib_write_bw"]["status"] == "skipped"
    assert "validate_performance_rdma is false" in tests["perf.ib_write_bw"]["message"]
    # the exec ran with NCCL_DEBUG=INFO in the pods' environment, so the log names the net plugin
    created = [json.loads(w.body) for w in k8s_double.writes() if w.verb == "create" and w.kind == "Pod" and not w.subresource]
    env = dict((e["name"], e.get("value")) for c in created[0]["spec"]["containers"] if c["name"] == "nccl-test" for e in c.get("env") or [])
    assert env.get("NCCL_DEBUG") == "INFO"
    _assert_labelled_and_gone(k8s_double)
    # every request of the run is granted by the shipped ClusterRole plus the performance phase's Role / ClusterRole
    files = REPO_ROOT / "roles" / "validate" / "files"
    grants = _granted(files / "clusterrole.yaml") | _granted(files / "performance-role.yaml")
    needed = _needed(k8s_double.requests())
    assert ("", "pods", "create", "default") in needed and ("", "pods/exec", "create", "default") in needed, needed
    missing = [n for n in sorted(needed, key=str)
               if (n[0], n[1], n[2], None) not in grants and (n[0], n[1], n[2], n[3]) not in grants]
    assert missing == [], missing
    # the snapshot keeps the captured log, so it validates offline with the same results
    snapshot = json.loads((out / "localhost" / "snapshot.json").read_text())
    assert snapshot["performance"]["nccl"]["profile"] == "tcpx" and snapshot["performance"]["tolerance"] == 0.0
    # the nodes the test pods ran on, which a slow pair is read against (each node's own loopback)
    assert sorted(snapshot["performance"]["nccl"]["node_names"]) == ["gpu-0", "gpu-1"]
    offline = tmp_path / "offline"
    run_playbook(PLAYBOOK, extra_vars=dict(validate_snapshot=str(out / "localhost" / "snapshot.json"), validate_output_dir=str(offline),
                                           validate_phases=["performance"])).assert_ok()
    assert {k: v["status"] for k, v in _tests(offline).items()} == {k: v["status"] for k, v in tests.items()}


def test_a_socket_fallback_fails_the_run_and_the_probe_is_removed(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    log = INFO % ("Socket", "Socket") + GUIDE_TCPX.replace(" 70.87 ", " 3.10 ").replace("29.8293", "2.1")
    k8s_double.script_exec(r"^vperf-[0-9a-f]{8}-test-host-1$", RUN, stdout=log)
    out = tmp_path / "out"
    result = _run(run_playbook, k8s_double, out).assert_failed()
    tests = _tests(out)
    assert tests["perf.nccl_transport"]["status"] == "failed"
    assert "NCCL used Socket instead of the GPUDirectTCPX plugin" in tests["perf.nccl_transport"]["message"]
    # one fault, one failure: the slow pair is explained by the fallback, not failed a second and third time
    assert tests["perf.nccl_avg_busbw"]["status"] == "skipped" and tests["perf.nccl_large_busbw"]["status"] == "skipped"
    assert "explained by the transport NCCL used" in tests["perf.nccl_avg_busbw"]["message"]
    assert "perf.nccl_transport" in result.stdout
    _assert_labelled_and_gone(k8s_double)


def test_a_probe_whose_run_cannot_complete_is_other_and_removed(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)   # no exec scripted: the double refuses it, as a broken exec path would
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out).assert_failed()
    tests = _tests(out)
    for check_id in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.nccl_transport"):
        assert tests[check_id]["status"] == "other", tests[check_id]
    assert "could not complete" in tests["perf.nccl_avg_busbw"]["message"]
    _assert_labelled_and_gone(k8s_double)


def test_the_probes_an_interrupted_run_left_are_removed_by_the_next_run(run_playbook, k8s_double, tmp_path):
    """A run killed before its roles' always leaves its vperf-* objects; the next performance run deletes them (only
    objects named vperf-*, managed by gpu_ops.cluster and older than the probe timeout) before it starts its own probes."""
    _seed(k8s_double)
    managed = {"app.kubernetes.io/managed-by": "gpu_ops.cluster"}
    pod = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    k8s_double.put({"apiVersion": "v1", "kind": "Pod", "spec": pod, "metadata": {
        "name": "vperf-0000abcd-test-host-0", "namespace": "default", "labels": dict(managed, **{"app.kubernetes.io/instance": "vperf-0000abcd-test"})}})
    k8s_double.put({"apiVersion": "v1", "kind": "ConfigMap", "data": {"hostfile": "x"}, "metadata": {
        "name": "vperf-0000abcd-test-hostfile", "namespace": "default", "labels": managed}})
    # not the validator's: another gpu_ops.cluster workload, and a vperf-named pod nobody labelled
    k8s_double.put({"apiVersion": "v1", "kind": "Pod", "spec": pod, "metadata": {"name": "trainer", "namespace": "default", "labels": managed}})
    k8s_double.put({"apiVersion": "v1", "kind": "Pod", "spec": pod, "metadata": {"name": "vperf-users-own", "namespace": "default"}})
    # a run that started 60 s ago may still be in flight (another controller): its probe stays
    in_flight = "vperf-%08x-test-host-0" % (int(time.time()) - 60)
    k8s_double.put({"apiVersion": "v1", "kind": "Pod", "spec": pod, "metadata": {"name": in_flight, "namespace": "default", "labels": managed}})
    k8s_double.script_exec(r"^vperf-[0-9a-f]{8}-test-host-1$", RUN, stdout=INFO % ("GPUDirectTCPX_v7", "GPUDirectTCPX_v7") + GUIDE_TCPX)
    _run(run_playbook, k8s_double, tmp_path / "out").assert_ok()
    deleted = [(w.kind, w.name) for w in k8s_double.writes() if w.verb == "delete"]
    assert ("Pod", "vperf-0000abcd-test-host-0") in deleted and ("ConfigMap", "vperf-0000abcd-test-hostfile") in deleted
    # the leftovers went before this run created anything
    first_create = min(i for i, w in enumerate(k8s_double.writes()) if w.verb == "create" and not w.subresource)
    assert [i for i, w in enumerate(k8s_double.writes()) if (w.kind, w.name) == ("Pod", "vperf-0000abcd-test-host-0")][0] < first_create
    assert sorted(p["metadata"]["name"] for p in k8s_double.list("Pod", "default")) == sorted(["trainer", "vperf-users-own", in_flight])
    assert [c["metadata"]["name"] for c in k8s_double.list("ConfigMap", "default") if c["metadata"]["name"].startswith("vperf-")] == []


def test_without_the_performance_phase_nothing_is_written_even_with_a_probe_configured(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    before = len(k8s_double.requests())
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out, validate_phases=["preflight", "deployment", "conformance"])
    assert [r for r in k8s_double.requests()[before:] if r.mutating] == []
    assert not [t for t in _tests(out).values() if t["name"].startswith("perf.")]


def test_probes_turned_off_write_nothing_and_skip_with_the_reason(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    before = len(k8s_double.requests())
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out, validate_performance_probes=False).assert_ok()
    assert [r for r in k8s_double.requests()[before:] if r.mutating] == []
    tests = _tests(out)
    assert tests["perf.nccl_transport"]["status"] == "skipped"
    assert "validate_performance_probes: false" in tests["perf.nccl_transport"]["message"]


# ------------------------------------------------------------------ ib_write_bw between two bare-metal nodes

GUIDE_CLIENT = (REPO_ROOT / "tests/unit/plugins/module_utils/fixtures/perftest/guide_ib_write_bw_dmabuf.txt").read_text()


@pytest.mark.parametrize("client, status", [(GUIDE_CLIENT, "passed"), (GUIDE_CLIENT.replace("92.39", "41.07"), "failed")])
def test_the_ib_write_bw_probe_is_judged_and_removed(run_playbook, k8s_double, tmp_path, client, status):
    """Two bare-metal nodes with a 100 Gb/s RoCE NIC each (floor: rdma_test's 80% of the link, 80 Gb/s)."""
    for name in ("nvnode1", "nvnode2"):
        k8s_double.add_node(name, labels={"nvidia.com/gpu.present": "true"},
                            allocatable={"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "63"})
    hosts = {"gpu-a": "nvnode1", "gpu-b": "nvnode2"}
    inventory = tmp_path / "gpu_hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_hosts": {"hosts": {
        name: {"ansible_connection": "local", "k8s_node_name": node, "gpu_host": gpu_host(mode="dmabuf")}
        for name, node in hosts.items()}}}}}), encoding="utf-8")
    k8s_double.script_exec(r"^vperf-[0-9a-f]{8}-rdma-server$", r"^sh -c .*ib_write_bw --use_cuda=0 --use_cuda_dmabuf -d mlx5_0 ", "")
    k8s_double.script_exec(r"^vperf-[0-9a-f]{8}-rdma-client$",
                           r"^ib_write_bw -n 5000 --use_cuda=0 --use_cuda_dmabuf -d mlx5_0 .* 192\.168\.2\.\d+$", client)
    out = tmp_path / "out"
    extra_vars = dict(validate_clusters="localhost", validate_hosts="no-such-group", validate_output_dir=str(out),
                      validate_phases=["performance"], validate_performance_rdma=True, validate_performance_timeout=30,
                      rdma_test_network="rdma-net")
    with FakeOperators(k8s_double):
        result = run_playbook(PLAYBOOK, extra_vars=extra_vars, env=k8s_double.env(), extra_args=["-i", str(inventory)])
    (result.assert_ok if status == "passed" else result.assert_failed)()
    tests = _tests(out)
    check = tests["perf.ib_write_bw"]
    assert check["status"] == status, check
    if status == "failed":
        assert "BW average 41.07 Gb/s at 8388608 B is below the 80.0 Gb/s floor" in check["message"]
        assert check["extra"]["fix"].startswith("role gpu_ops.cluster.gpu_operator, variable gpu_operator_rdma")
    assert tests["perf.nccl_transport"]["status"] == "skipped"
    created = {}
    for write in k8s_double.writes():
        if write.verb == "create" and write.kind == "Pod" and not write.subresource:
            created[write.name] = json.loads(write.body)["metadata"]["labels"]
    assert sorted(created) and all(n.startswith("vperf-") and n.split("-")[-1] in ("server", "client") for n in created), created
    assert all(labels["app.kubernetes.io/managed-by"] == "gpu_ops.cluster" and labels["app.kubernetes.io/instance"].endswith("-rdma")
               for labels in created.values()), created
    assert k8s_double.list("Pod", "default") == []
