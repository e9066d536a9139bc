# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/mps: ACK labelling and checks, the allocation report and the device-plugin MPS path against the
Kubernetes double; bad host settings refused before anything is written.

The host daemon itself runs under molecule (molecule/mps) against the fake control daemon.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

import yaml

ROLE = "gpu_ops.cluster.mps"
POOL = {"alibabacloud.com/nodepool-id": "np-gpu"}
DAEMON_LABELS = {"app.aliyun.com/name": "mps-control-daemon"}
FIXTURES = pathlib.Path(__file__).parents[1] / "unit" / "plugins" / "module_utils" / "fixtures" / "mps"


def _play(role_vars, tasks_from="main", extra_tasks=()):
    return [{"name": "mps", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": ROLE, "tasks_from": tasks_from},
                        "vars": role_vars}] + list(extra_tasks)}]


def _ack_vars(**extra):
    role_vars = {"mps_ack_node_selector": POOL, "mps_ack_verify_retries": 2, "mps_ack_verify_delay": 0}
    role_vars.update(extra)
    return role_vars


def _daemonset():
    """ack-mps-control's DaemonSet as ACK installs it: only on nodes labelled ack.node.gpu.schedule=mps."""
    pod_spec = {"nodeSelector": {"ack.node.gpu.schedule": "mps"}, "hostPID": True, "hostIPC": True,
                "priorityClassName": "system-node-critical",
                "containers": [{"name": "mps", "image": "registry.example/acs/mps-control:v0.2.0",
                                "securityContext": {"privileged": True}}]}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "mps-control-daemon", "namespace": "kube-system", "labels": DAEMON_LABELS},
            "spec": {"selector": {"matchLabels": DAEMON_LABELS},
                     "template": {"metadata": {"labels": DAEMON_LABELS}, "spec": pod_spec}}}


def _pod(name, node, host_ipc, gpu_mem="4"):
    spec = {"nodeName": node, "containers": [{"name": "main", "image": "registry.example/train:1",
                                              "resources": {"limits": {"aliyun.com/gpu-mem": gpu_mem}}}]}
    if host_ipc:
        spec["hostIPC"] = True
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _ack_cluster(k8s, daemon=True):
    for name in ("cn-hz.10.0.0.1", "cn-hz.10.0.0.2"):
        k8s.add_node(name, labels=POOL, allocatable={"aliyun.com/gpu-mem": "15", "aliyun.com/gpu-count": "1"})
    k8s.add_node("cn-hz.10.0.0.9", labels={"alibabacloud.com/nodepool-id": "np-cpu"})
    if daemon:
        k8s.put(_daemonset())


def _labels(k8s):
    return {n["metadata"]["name"]: n["metadata"]["labels"].get("ack.node.gpu.schedule") for n in k8s.list("Node")}


def test_ack_labels_the_pool_checks_the_daemon_and_flags_workloads(k8s_double, run_playbook):
    _ack_cluster(k8s_double)
    k8s_double.put(_pod("good", "cn-hz.10.0.0.1", host_ipc=True))
    k8s_double.put(_pod("no-ipc", "cn-hz.10.0.0.2", host_ipc=False))
    result = run_playbook(_play(_ack_vars(), "ack"), env=k8s_double.env()).assert_ok()
    assert _labels(k8s_double) == {"cn-hz.10.0.0.1": "mps", "cn-hz.10.0.0.2": "mps", "cn-hz.10.0.0.9": None}
    pods = k8s_double.list("Pod", "kube-system")
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["cn-hz.10.0.0.1", "cn-hz.10.0.0.2"]
    findings = result.task("Find what the guide forbids or requires")["result"]["ansible_facts"]["mps_ack_findings"]
    assert [(f["pod"], f["rule"]) for f in findings] == [("no-ipc", "host-ipc-missing")]
    assert "hostIPC: true" in result.task("Show the findings")["result"]["msg"][0]

    k8s_double.clear_requests()
    again = run_playbook(_play(_ack_vars(mps_ack_workload_check="fail"), "ack"), env=k8s_double.env()).assert_failed()
    assert not k8s_double.writes("Node"), "a re-run patches no node whose label is already set"
    assert "default/no-ipc: runs on MPS node cn-hz.10.0.0.2 without hostIPC: true" in again.failed[0]["result"]["msg"]


def test_ack_without_the_control_daemon_names_the_nodes(k8s_double, run_playbook):
    _ack_cluster(k8s_double, daemon=False)
    result = run_playbook(_play(_ack_vars(mps_ack_workload_check="skip"), "ack"), env=k8s_double.env()).assert_failed()
    message = result.failed[-1]["result"]["msg"]
    assert "node cn-hz.10.0.0.1: no running and ready pod labelled app.aliyun.com/name=mps-control-daemon" in message
    assert "ack-mps-control" in message


def test_ack_removal_refuses_while_gpu_pods_run(k8s_double, run_playbook):
    _ack_cluster(k8s_double)
    run_playbook(_play(_ack_vars(mps_ack_workload_check="skip"), "ack"), env=k8s_double.env()).assert_ok()
    k8s_double.put(_pod("train", "cn-hz.10.0.0.1", host_ipc=True))
    refused = run_playbook(_play(_ack_vars(mps_state="absent"), "ack"), env=k8s_double.env()).assert_failed()
    assert "GPU pods still run on the MPS nodes (default/train)" in refused.failed[0]["result"]["msg"]
    assert set(_labels(k8s_double).values()) == {"mps", None}
    k8s_double.remove("Pod", "train", "default")
    run_playbook(_play(_ack_vars(mps_state="absent"), "ack"), env=k8s_double.env()).assert_ok()
    assert _labels(k8s_double)["cn-hz.10.0.0.1"] == "default"
    assert not [p for p in k8s_double.list("Pod", "kube-system") if p["spec"].get("nodeName")]


def test_ack_render_mode_writes_the_labels(run_playbook, tmp_path):
    render = tmp_path / "render"
    bad = run_playbook(_play({"mps_ack_nodes": ["cn-hz.10.0.0.1", "Bad Node"], "mps_ack_node_selector": {"pool": "a b"}},
                             "ack"), extra_vars={"gpu_ops_render_dir": str(render)}).assert_failed()
    message = bad.failed[0]["result"]["msg"]
    assert "mps_ack_nodes[1]" in message and "mps_ack_node_selector" in message and not render.exists()
    run_playbook(_play({"mps_ack_nodes": ["cn-hz.10.0.0.2", "cn-hz.10.0.0.1"]}, "ack"),
                 extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    files = sorted((render / "manifests" / "30-ack-mps").iterdir())
    assert [f.name for f in files] == ["01-node-cn-hz.10.0.0.1.yaml", "02-node-cn-hz.10.0.0.2.yaml"]
    assert yaml.safe_load(files[0].read_text())["metadata"]["labels"] == {"ack.node.gpu.schedule": "mps"}


def test_allocation_report_from_the_cluster(k8s_double, run_playbook, tmp_path):
    cluster = yaml.safe_load((FIXTURES / "cluster.yaml").read_text())
    for node in cluster["nodes"][:5]:
        k8s_double.add_node(node["metadata"]["name"], labels=node["metadata"]["labels"],
                            allocatable=node["status"]["allocatable"])
    for namespace in ("ml", "lab"):
        k8s_double.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for pod in cluster["pods"]:
        if pod["status"]["phase"] == "Running":
            k8s_double.put(dict(pod, apiVersion="v1", kind="Pod", status={}))
    dest = tmp_path / "cgpu.txt"
    result = run_playbook(_play({"mps_report_dest": str(dest)}, "report"), env=k8s_double.env()).assert_ok()
    report = result.task("Compute the allocation")["result"]["ansible_facts"]["mps_gpu_allocation"]
    rows = {(n["name"], r["resource"]): "%d/%d" % (r["allocated"], r["total"]) for n in report["nodes"] for r in n["resources"]}
    assert rows == {("cn-shanghai.192.168.6.104", "aliyun.com/gpu-mem"): "7/15",
                    ("mig-mixed", "nvidia.com/mig-1g.10gb"): "1/2", ("mig-mixed", "nvidia.com/mig-2g.20gb"): "0/1",
                    ("mig-mixed", "nvidia.com/mig-3g.40gb"): "1/1", ("mps-a100", "nvidia.com/gpu"): "2/4",
                    ("ts-l4", "nvidia.com/gpu.shared"): "1/6", ("whole-h100", "nvidia.com/gpu"): "4/8"}
    text = dest.read_text()
    assert text.splitlines()[0].split()[:3] == ["NAME", "IPADDRESS", "RESOURCE"]
    assert "Allocated/Total GPU Memory In Cluster: 403.09/817.17 (49%)" in text


def test_device_plugin_mps_is_rendered_through_the_device_plugin_role(run_playbook, tmp_path):
    render = tmp_path / "render"
    run_playbook(_play({"mps_k8s_replicas": 4}, "kubernetes"),
                 extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    values = yaml.safe_load((render / "charts/20-nvidia-device-plugin/nvidia-device-plugin.yaml").read_text())["values"]
    shared = yaml.safe_load(values["config"]["map"]["shared"])
    assert shared["sharing"] == {"mps": {"renameByDefault": False, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    assert values["config"]["default"] == "shared" and values["migStrategy"] == "none"


def test_device_plugin_mps_refuses_gpudirect_nodes(k8s_double, run_playbook):
    pool = {"cloud.google.com/gke-nodepool": "a3"}
    k8s_double.add_node("gke-a3-0", labels=dict(pool, **{"node.kubernetes.io/instance-type": "a3-megagpu-8g"}),
                        allocatable={"nvidia.com/gpu": "8"})
    k8s_double.add_node("gke-g2-0", labels={"node.kubernetes.io/instance-type": "g2-standard-8"},
                        allocatable={"nvidia.com/gpu": "1"})
    role_vars = {"mps_k8s_pool_selector": pool, "nvidia_device_plugin_install": False, "nvidia_device_plugin_verify": False}
    result = run_playbook(_play(role_vars, "kubernetes"), env=k8s_double.env()).assert_failed()
    assert ("node gke-a3-0 (a3-megagpu-8g): GPUDirect-TCPXO needs whole nodes, not MPS, time-sharing or multi-instance GPUs"
            in result.failed[0]["result"]["msg"])
    role_vars["mps_k8s_pool_selector"] = {"node.kubernetes.io/instance-type": "g2-standard-8"}
    run_playbook(_play(role_vars, "kubernetes"), env=k8s_double.env()).assert_ok()


BAD_HOST_VARS = [
    ({"mps_active_thread_percentage": 0}, "active_thread_percentage: must be a whole number from 1 to 100, got 0"),
    ({"mps_active_thread_percentage": 150}, "from 1 to 100, got 150"),
    ({"mps_pipe_directory": "nvidia-mps"}, "pipe_directory: must be an absolute path"),
    ({"mps_log_directory": "var/log"}, "log_directory: must be an absolute path"),
    ({"mps_pinned_device_mem_limit": {"0": "10GiB"}}, "pinned_device_mem_limit[0]: '10GiB' is not a memory limit"),
    ({"mps_pinned_device_mem_limit": {"first": "1G"}}, "pinned_device_mem_limit key: 'first' is not a GPU index"),
    ({"mps_visible_devices": ["MIG-5c5b2f3a-8f9e-5b4d-a1c2-3d4e5f6a7b8c", "0"]}, "a MIG device needs a control daemon of its own"),
    ({"mps_stop_policy": "kill"}, "mps_stop_policy"),
    ({"mps_service_manager": "openrc"}, "mps_service_manager"),
    ({"mps_instance": "GPU 0"}, "mps_instance must be empty or lowercase"),
    ({"mps_state_dir": "state"}, "mps_state_dir, mps_unit_dir, mps_control_binary and mps_nvidia_smi must be absolute"),
    ({}, "mps_control_binary: /nonexistent/nvidia-cuda-mps-control is not an executable file on localhost"),
]


def test_bad_host_settings_are_refused_before_any_write(run_playbook, tmp_path):
    base = {"mps_unit_dir": str(tmp_path / "units"), "mps_state_dir": str(tmp_path / "state"),
            "mps_pipe_directory": str(tmp_path / "pipe"), "mps_log_directory": str(tmp_path / "log"),
            "mps_control_binary": "/nonexistent/nvidia-cuda-mps-control", "mps_service_manager": "none"}
    tasks = []
    for index, (bad, _message) in enumerate(BAD_HOST_VARS):
        tasks.append({"name": "case %d" % index, "block": [
            {"name": "Run the role %d" % index, "ansible.builtin.include_role": {"name": ROLE}, "vars": dict(base, **bad)}],
            "rescue": [{"name": "Refused %02d" % index, "ansible.builtin.debug": {"msg": "{{ ansible_failed_result.msg }}"}}]})
    play = [{"name": "bad input", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    result = run_playbook(play)
    assert result.rc == 0, result.output
    for index, (_bad, message) in enumerate(BAD_HOST_VARS):
        refused = result.task("Refused %02d" % index)["result"]["msg"]
        assert message in str(refused), (index, refused)
    assert not any((tmp_path / name).exists() for name in ("units", "state", "pipe", "log"))


def test_absent_on_a_host_without_the_control_binary_is_a_no_op(run_playbook, tmp_path):
    """A host whose driver (and so nvidia-cuda-mps-control) is gone: removal cleans up and succeeds, re-runs change nothing."""
    path = os.pathsep.join([str(pathlib.Path(sys.executable).parent), "/usr/bin", "/bin"])
    assert shutil.which("nvidia-cuda-mps-control", path=path) is None, "this test needs a PATH without the binary"
    units, state = tmp_path / "units", tmp_path / "state"
    units.mkdir()
    state.mkdir()
    (units / "nvidia-mps.service").write_text("[Service]\nExecStart=/usr/bin/nvidia-cuda-mps-control -d\n")
    (state / "nvidia-mps.service.json").write_text('{"environment": {"CUDA_MPS_PIPE_DIRECTORY": "%s"}}' % (tmp_path / "pipe"))
    (tmp_path / "pipe").mkdir()
    role_vars = {"mps_state": "absent", "mps_service_manager": "none", "mps_unit_dir": str(units),
                 "mps_state_dir": str(state), "mps_log_directory": str(tmp_path / "log"),
                 "mps_control_binary": str(tmp_path / "uninstalled" / "nvidia-cuda-mps-control")}
    module_task = {"name": "Stop by name on PATH", "gpu_ops.cluster.mps_control": {
        "state": "absent", "pipe_directory": str(tmp_path / "pipe")}, "register": "by_name"}
    play = [{"name": "mps", "hosts": "localhost", "gather_facts": False, "environment": {"PATH": path},
             "tasks": [module_task, {"name": "Run the role", "ansible.builtin.include_role": {"name": ROLE},
                                     "vars": role_vars}]}]
    first = run_playbook(play, env={"PATH": path}).assert_ok()
    by_name = first.task("Stop by name on PATH")["result"]
    assert not by_name["changed"] and not by_name["running"]
    assert by_name["actions"] == ["nvidia-cuda-mps-control is not installed: no MPS control daemon to stop"]
    stopped = first.task("Check the MPS clients and stop the daemon (refuse)")["result"]
    assert not stopped["changed"] and "is not installed" in stopped["actions"][0]
    assert not any(p.exists() for p in (units / "nvidia-mps.service", state / "nvidia-mps.service.json", tmp_path / "pipe"))
    again = run_playbook(play, env={"PATH": path}).assert_ok()
    assert again.changed == []
