# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""network_operator, gpu_operator and rdma_test against the Kubernetes double.

The double plays the operators' part with a small thread (``tests/doubles/nvidia_operators.py``): it marks
the NicClusterPolicy and the networks ready, and gives the RDMA test server its Multus address. The charts
are not installed here (``*_install: false``; test_helm_operators.py installs them for real); what the GPU
Operator would have created is seeded - the namespaces, ClusterPolicy ``cluster-policy`` and the driver DaemonSet, whose pods the
double runs on the GPU nodes. One ansible-playbook run per path (success; never-ready and failed
tests; refusals), many checks each.
"""

from __future__ import annotations

import contextlib

import json
from xml.etree import ElementTree

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host
from ansible_collections.gpu_ops.cluster.tests.doubles.nvidia_operators import PEERMEM_LOG, FakeOperators
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

GUIDE_CLIENT = (REPO_ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "perftest"
                / "guide_ib_write_bw_dmabuf.txt").read_text()
SLOW_CLIENT = """ #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      5000             41.20              41.10              0.078391
 8388608    5000             41.32              41.30              0.000615
"""
DEPLOY_LABELS = {"nvidia.com/gpu.present": "true", **{"nvidia.com/gpu.deploy.%s" % c: "true" for c in (
    "driver", "container-toolkit", "device-plugin", "gpu-feature-discovery", "dcgm-exporter", "operator-validator")}}
VECTORADD_PASSED = ("[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\n"
                    "CUDA kernel launch with 196 blocks of 256 threads\nCopy output data from the CUDA device to the host memory\n"
                    "Test PASSED\nDone\n")


def seed_cluster(k8s, policy_state="ready", sidecars=("nvidia-peermem-ctr", "nvidia-fs-ctr")):
    """GPU nodes, and what the GPU Operator chart and the Network Operator chart would have created."""
    for index in (1, 2, 3):
        k8s.add_node("nvnode%d" % index, labels=DEPLOY_LABELS,
                     allocatable={"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "63"})
    for namespace in ("gpu-operator", "nvidia-network-operator"):
        k8s.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    spec = {key: {"enabled": key not in ("dcgm", "nodeStatusExporter")} for key in (
        "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "nodeStatusExporter")}  # the CRD's required keys
    k8s.put({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
             "spec": dict(spec, operator={}, daemonsets={})})
    k8s.set_status("ClusterPolicy", "cluster-policy", {"state": policy_state, "namespace": "gpu-operator"})
    labels = {"app": "nvidia-driver-daemonset"}
    k8s.put({"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": "nvidia-driver-daemonset", "namespace": "gpu-operator", "labels": labels},
             "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                 "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
                 "containers": [{"name": c, "image": "nvcr.io/nvidia/driver:570.124.06"}
                                for c in ("nvidia-driver-ctr",) + tuple(sidecars)]}}}})
    for pod in k8s.list("Pod", "gpu-operator"):
        k8s.set_pod_log(pod["metadata"]["name"], PEERMEM_LOG, "gpu-operator", "nvidia-peermem-ctr")


def inventory(tmp_path, groups):
    """An inventory file holding GPU host groups with their gpu_host facts (never contacted)."""
    children = {}
    for group, hosts in groups.items():
        children[group] = {"hosts": {name: {"ansible_connection": "local", "k8s_node_name": node, "gpu_host": facts}
                                     for name, (node, facts) in hosts.items()}}
    path = tmp_path / "gpu_hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": children}}), encoding="utf-8")
    return ["-i", str(path)]


PEERMEM_HOSTS = {"gpu-a": ("nvnode1", gpu_host(mode="peermem")), "gpu-b": ("nvnode2", gpu_host(mode="peermem"))}
NETWORK_VARS = {
    "network_operator_install": False, "network_operator_wait_delay": 0,
    "network_operator_ip_pools": [{"name": "rdma-pool", "subnet": "192.168.2.0/24", "gateway": "192.168.2.1"}],
    "network_operator_networks": [{"kind": "macvlan", "name": "rdma-net", "master": "ens64np1", "ip_pool": "rdma-pool"}],
}
GPU_VARS = {"gpu_operator_install": False, "gpu_operator_wait_delay": 0, "gpu_operator_verify_delay": 0,
            "gpu_operator_vectoradd_delay": 0, "gpu_operator_rdma": {"mode": "auto", "use_host_mofed": True},
            "gpu_operator_gds": True}


def _play(name, roles, extra=None, rescue=False):
    tasks = [{"name": "%s: %s" % (name, role), "ansible.builtin.include_role": {"name": "gpu_ops.cluster." + role}}
             for role in roles]
    if rescue:
        tasks = [{"name": name, "block": tasks, "rescue": [{"name": "Refused: " + name, "ansible.builtin.debug": {
            "msg": "{{ ansible_failed_result.msg }}"}}]}]
    return {"name": name, "hosts": "localhost", "gather_facts": False, "vars": dict(extra or {}), "tasks": tasks}


# ---- the whole path works --------------------------------------------------------------------------

@contextlib.contextmanager
def whole_path(run_playbook, tmp_path, hosts, gpu_vars, network_vars=None):
    """network_operator, gpu_operator and rdma_test against a seeded K8s double: (result, double) while it runs."""
    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble  # pylint: disable=import-outside-toplevel

    k8s = K8sDouble().start()
    try:
        seed_cluster(k8s)
        k8s.script_pod("gpu-operator-vectoradd", phase="Succeeded", logs=VECTORADD_PASSED)
        k8s.script_exec("rdma-test-server", r"^sh -c .*ib_write_bw --use_cuda=0 -d mlx5_0 -a -F --report_gbits -q 1 >", "")
        k8s.script_exec("rdma-test-client", r"^ib_write_bw -n 5000 --use_cuda=0 -d mlx5_0 .* 192\.168\.2\.\d+$", GUIDE_CLIENT)
        k8s.clear_requests()
        play = _play("operators", ["network_operator", "gpu_operator", "rdma_test"],
                     dict(NETWORK_VARS, **dict(network_vars or {}, **gpu_vars)))
        play["tasks"].append({"name": "Keep the results", "ansible.builtin.debug": {"msg": {
            "gpu": "{{ gpu_operator_result }}", "network": "{{ network_operator_result }}", "rdma": "{{ rdma_test_result }}"}}})
        play["vars"]["rdma_test_results_dir"] = str(tmp_path / "rdma-results")
        with FakeOperators(k8s):
            result = run_playbook([play], env=k8s.env(), extra_args=inventory(tmp_path, {"gpu_hosts": hosts}))
        result.results_dir = tmp_path / "rdma-results"
        yield result, k8s
    finally:
        k8s.stop()


@pytest.fixture(scope="module")
def success(run_playbook_module, tmp_path_factory):
    with whole_path(run_playbook_module, tmp_path_factory.mktemp("inv"), PEERMEM_HOSTS, GPU_VARS) as outcome:
        yield outcome


def test_peermem_with_the_network_operators_ofed_reaches_the_rdma_test(run_playbook, tmp_path):
    # proprietary driver running (no DMA-BUF) and no MOFED on the hosts: the OFED comes from the Network Operator
    hosts = {name: (node, gpu_host(mode="unsupported", ofed=False, module="proprietary", dmabuf=False))
             for name, node in (("gpu-a", "nvnode1"), ("gpu-b", "nvnode2"))}
    with whole_path(run_playbook, tmp_path, hosts, dict(GPU_VARS, gpu_operator_rdma={"mode": "auto", "use_host_mofed": False}),
                    {"network_operator_ofed": {"source": "operator", "version": "doca3.1.0-25.07-0.9.7.0-0"}}) as (result, dummy):
        result.assert_ok()
    outcome = result.task("Keep the results")["result"]["msg"]
    assert outcome["gpu"]["rdma"]["mode"] == "peermem" and outcome["gpu"]["rdma"]["use_host_mofed"] is False
    assert outcome["rdma"]["mode"] == "peermem" and outcome["rdma"]["passed"] is True


def _check_the_whole_path_succeeds(success):
    result, dummy = success
    result.assert_ok()
    outcome = result.task("Keep the results")["result"]["msg"]
    assert outcome["gpu"]["rdma"] == {"mode": "peermem", "use_host_mofed": True, "notes": []}
    assert outcome["gpu"]["verified"] is True and outcome["gpu"]["gpu_nodes"] == ["nvnode1", "nvnode2"]
    assert outcome["network"]["ipam"] == "nv-ipam" and outcome["network"]["networks"] == ["rdma-net"]
    rdma = outcome["rdma"]
    assert rdma["passed"] is True and rdma["bw_average_gbps"] == 92.39 and rdma["threshold_gbps"] == 80.0
    assert rdma["nodes"] == ["nvnode1", "nvnode2"] and rdma["mode"] == "peermem"
    # the numbers are shown on a pass too, and the table, the chart and the raw result are written
    shown = result.task("Show the bandwidth per message size, the threshold and the node pair")["result"]["msg"]
    assert "BW average of the largest message: 92.39 Gb/s, threshold 80 Gb/s: PASSED" in shown
    assert "nodes: nvnode1 -> nvnode2 (server -> client)" in shown
    assert any(line.split()[:2] == ["8M", "8388608"] and line.split()[-1] == "92.39" for line in shown), shown
    folder = result.results_dir
    assert sorted(p.name for p in folder.iterdir()) == ["ib_write_bw.json", "ib_write_bw.md", "ib_write_bw.svg"]
    assert "| 8M | 8388608 |" in (folder / "ib_write_bw.md").read_text()
    svg = ElementTree.fromstring((folder / "ib_write_bw.svg").read_bytes())
    assert [e for e in svg.iter("{http://www.w3.org/2000/svg}line") if e.get("class") == "threshold"]
    assert json.loads((folder / "ib_write_bw.json").read_text())["bw_average_gbps"] == 92.39


def _check_objects_are_created_and_the_test_pods_removed(success):
    dummy, k8s = success
    policy = k8s.get("NicClusterPolicy", "nic-cluster-policy")
    assert json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])["configList"][0]["resourceName"] == "rdma_shared_device_a"
    assert k8s.get("IPPool", "rdma-pool", "nvidia-network-operator")["spec"]["subnet"] == "192.168.2.0/24"
    assert json.loads(k8s.get("MacvlanNetwork", "rdma-net")["spec"]["ipam"])["poolName"] == "rdma-pool"
    namespace = k8s.get("Namespace", "gpu-operator")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    # the vector-add and perftest pods are gone, and were created once each
    assert [p["metadata"]["name"] for p in k8s.list("Pod", "default")] == []
    created = [(r.kind, r.name) for r in k8s.writes() if r.verb == "create" and r.kind == "Pod" and not r.subresource]
    assert sorted(created) == [("Pod", "gpu-operator-vectoradd"), ("Pod", "rdma-test-client"), ("Pod", "rdma-test-server")]


def _check_the_server_starts_before_the_client(success):
    result, dummy = success
    names = [r["task"].split(" : ")[-1] for r in result.results]
    # (the double answers only the scripted command lines: peermem mode, no --use_cuda_dmabuf)
    assert names.index("Start the ib_write_bw server") < names.index("Run the ib_write_bw client against the server")


def test_the_whole_path_works(success):
    """One playbook run, every check (one test per run keeps pytest-xdist from running it on both workers)."""
    _check_the_whole_path_succeeds(success)
    _check_objects_are_created_and_the_test_pods_removed(success)
    _check_the_server_starts_before_the_client(success)


# ---- never ready, failed tests -------------------------------------------------------------------

@pytest.fixture(scope="module")
def failures(run_playbook_module, tmp_path_factory):
    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble  # pylint: disable=import-outside-toplevel

    k8s = K8sDouble().start()
    try:
        seed_cluster(k8s, policy_state="notReady")
        k8s.never_ready("nvnode2")
        k8s.script_pod("gpu-operator-vectoradd", phase="Failed", logs="CUDA error: no CUDA-capable device is detected\nTest FAILED\n")
        k8s.script_exec("rdma-test-server", "ib_write_bw", "")
        k8s.script_exec("rdma-test-client", "ib_write_bw", SLOW_CLIENT)
        plays = [
            _play("ClusterPolicy never ready", ["gpu_operator"], dict(GPU_VARS, gpu_operator_wait_retries=2,
                                                                      gpu_operator_verify=False), rescue=True),
            _play("NicClusterPolicy never ready", ["network_operator"], dict(NETWORK_VARS, network_operator_wait_retries=2),
                  rescue=True),
            _play("Vector-add fails", ["gpu_operator"], dict(GPU_VARS, gpu_operator_wait=False, gpu_operator_verify_retries=1,
                                                             gpu_operator_vectoradd_retries=3, gpu_operator_gds=False,
                                                             gpu_operator_rdma={"mode": "off"}), rescue=True),
            _play("RDMA below the threshold", ["rdma_test"], {"rdma_test_network": "rdma-net", "rdma_test_nodes": ["nvnode1", "nvnode3"],
                                                              "rdma_test_pod_timeout": 30}, rescue=True),
        ]
        with FakeOperators(k8s, ncp_ready=False):
            result = run_playbook_module(plays, env=k8s.env(), extra_args=inventory(
                tmp_path_factory.mktemp("inv"), {"gpu_hosts": PEERMEM_HOSTS}))
        yield result, k8s
    finally:
        k8s.stop()


def _refusal(result, name):
    return result.task("Refused: " + name)["result"]["msg"]


def _check_cluster_policy_never_ready_names_the_component_and_node(failures):
    result, dummy = failures
    assert result.rc == 0, result.output  # every failure was rescued and recorded
    message = _refusal(result, "ClusterPolicy never ready")
    assert "ClusterPolicy/cluster-policy is notReady" in message
    assert "nvidia-driver-daemonset not ready on node nvnode2" in message and "nvnode1" not in message


def _check_nic_cluster_policy_never_ready_names_the_component(failures):
    result, dummy = failures
    message = _refusal(result, "NicClusterPolicy never ready")
    assert "component state-RDMA-device-plugin is notReady: DaemonSet rdma-shared-dp-ds: 1 of 2 pods ready" in message
    assert "state-multus-cni" not in message


def _check_failed_vector_add_fails_with_its_log_and_is_cleaned_up(failures):
    result, k8s = failures
    message = _refusal(result, "Vector-add fails")
    assert "did not pass (phase Failed)" in message and "Test FAILED" in message
    assert k8s.get("Pod", "gpu-operator-vectoradd", "default") is None


def _check_rdma_below_the_threshold_shows_the_table_and_cleans_up(failures):
    result, k8s = failures
    message = _refusal(result, "RDMA below the threshold")
    assert "BW average 41.3 Gb/s, threshold 80.0 Gb/s (80% of the 100.0 Gb/s link)" in message
    shown = result.task("Show the bandwidth per message size, the threshold and the node pair")["result"]["msg"]
    assert "BW average of the largest message: 41.3 Gb/s, threshold 80 Gb/s: FAILED" in shown
    assert "nodes: nvnode1 -> nvnode3 (server -> client)" in shown
    assert "8388608" in message
    assert [p["metadata"]["name"] for p in k8s.list("Pod", "default")] == []


def _check_waits_name_what_they_wait_for_and_fail_with_one_short_message(failures):
    result, dummy = failures
    # while waiting, the retry lines name the object
    assert "FAILED - RETRYING: [localhost]: Wait until ready: ClusterPolicy cluster-policy (GPU Operator in gpu-operator)" in result.retry_lines()
    assert "FAILED - RETRYING: [localhost]: Wait until ready: NicClusterPolicy nic-cluster-policy" in result.retry_lines()
    # each never-ready wait fails once, with a short message whose first line names the object: no dump of what was read
    failed = [r for r in result.results if r["status"] == "failed"]
    messages = [r["result"]["msg"] for r in failed]
    cluster_policy = [m for m in messages if "ClusterPolicy/cluster-policy" in m]
    nic_policy = [m for m in messages if m.startswith("NicClusterPolicy not ready")]
    assert len(cluster_policy) == 1 and len(nic_policy) == 1, messages
    for message in cluster_policy + nic_policy:
        assert len(message.encode()) < 1024, message
    first_line = cluster_policy[0].splitlines()[0]
    assert first_line.startswith("The GPU Operator is not ready after ") and "ClusterPolicy/cluster-policy is notReady" in first_line
    assert "resourceVersion" not in result.stdout and "managedFields" not in result.stdout


def test_never_ready_and_failed_tests_are_reported(failures):
    """One playbook run, every check (one test per run keeps pytest-xdist from running it on both workers)."""
    _check_waits_name_what_they_wait_for_and_fail_with_one_short_message(failures)
    _check_cluster_policy_never_ready_names_the_component_and_node(failures)
    _check_nic_cluster_policy_never_ready_names_the_component(failures)
    _check_failed_vector_add_fails_with_its_log_and_is_cleaned_up(failures)
    _check_rdma_below_the_threshold_shows_the_table_and_cleans_up(failures)


# ---- refusals before anything is installed --------------------------------------------------------

HOST_GROUPS = {
    "good_hosts": {"gpu-a": ("nvnode1", gpu_host()), "gpu-b": ("nvnode2", gpu_host())},
    "old_hosts": {"old-a": ("nvnode1", gpu_host(mode="peermem", dmabuf=False))},
    "nomofed_hosts": {"bare-a": ("nvnode1", gpu_host(ofed=False))},
    "mixed_hosts": {"mix-a": ("nvnode1", gpu_host()), "mix-b": ("nvnode2", gpu_host(mode="peermem"))},
    "unsupported_hosts": {"none-a": ("nvnode1", gpu_host(mode="unsupported", dmabuf=False, ofed=False))},
}
GOOD = {"gpu_operator_gpu_hosts_group": "good_hosts", "network_operator_gpu_hosts_group": "good_hosts",
        "rdma_test_gpu_hosts_group": "good_hosts"}
GKE = {"gpu_operator_platform": "gke", "gpu_operator_gke_version": "1.33.2-gke.1111000", "gpu_operator_rdma": {"mode": "off"}}
POOL = {"network_operator_ip_pools": [{"name": "p", "subnet": "192.168.2.0/24"}]}
BAD_INPUTS = [
    ("gpu_operator", {"gpu_operator_chart_version": "v23.9.0"}, "chart_version: GPU Operator chart 'v23.9.0' is not in the catalog"),
    ("gpu_operator", {"gpu_operator_chart_version": "v24.9.2", "gpu_operator_values": {"driver": {"kernelModuleType": "open"}}},
     "chart v24.9.2 has no value driver.kernelModuleType (added in v25.3"),
    ("gpu_operator", {"gpu_operator_chart_version": "v25.3.4", "gpu_operator_values": {"driver": {"useOpenKernelModules": True}}},
     "chart v25.3.4 has no value driver.useOpenKernelModules"),
    ("gpu_operator", {"gpu_operator_chart_version": "v24.9.2", "gpu_operator_driver": {"kernel_module_type": "auto"},
                      "gpu_operator_rdma": {"mode": "off"}},
     "driver.kernel_module_type auto: GPU Operator chart v24.9.2"),
    ("gpu_operator", {"gpu_operator_driver": {"kernel_module_type": "auto", "version": "550.144.03"},
                      "gpu_operator_rdma": {"mode": "off"}}, "570.86.15"),
    ("gpu_operator", {"gpu_operator_gds": True, "gpu_operator_driver": {"kernel_module_type": "proprietary"}},
     "driver.kernel_module_type proprietary cannot serve GPUDirect Storage"),
    ("gpu_operator", {"gpu_operator_gpu_hosts_group": "old_hosts", "gpu_operator_rdma": {"mode": "dmabuf"}},
     "rdma.mode dmabuf is not supported on old-a (kernel 5.4.0 is older than 5.12)"),
    ("gpu_operator", {"gpu_operator_gpu_hosts_group": "nomofed_hosts", "gpu_operator_rdma": {"mode": "peermem"}},
     "rdma.mode peermem is not supported on bare-a (MLNX_OFED/DOCA-OFED is not installed)"),
    ("gpu_operator", {"gpu_operator_gpu_hosts_group": "mixed_hosts"}, "dmabuf: mix-a; peermem: mix-b"),
    ("gpu_operator", {"gpu_operator_gpu_hosts_group": "nomofed_hosts", "gpu_operator_rdma": {"mode": "auto", "use_host_mofed": True}},
     "rdma.use_host_mofed: MLNX_OFED/DOCA-OFED is not installed on bare-a"),
    ("gpu_operator", dict(GKE, gpu_operator_driver={"enabled": True}), "driver.enabled: on GKE the driver is installed by GKE"),
    ("gpu_operator", dict(GKE, gpu_operator_gds=True), "gds: its kernel module is loaded by a sidecar"),
    ("gpu_operator", dict(GKE, gpu_operator_gke_version=""), "gke_version"),
    ("gpu_operator", {"gpu_operator_namespace": "GPU_Operator"}, "namespace: 'GPU_Operator' is not a DNS-1123 label"),
    ("gpu_operator", {"gpu_operator_platform": "eks"}, "gpu_operator_platform"),
    ("gpu_operator", {"gpu_operator_mig": {"strategy": "all"}}, "strategy"),
    ("gpu_operator", {"gpu_operator_mig": {"strategy": "single"}, "gpu_operator_device_plugin": {"sharing": {"strategy": "mps"}}},
     "MPS is not supported on MIG devices"),
    ("gpu_operator", {"gpu_operator_device_plugin": {"sharing": {"strategy": "time-slicing", "replicas": 1}}},
     "device_plugin.sharing.replicas"),
    ("gpu_operator", {"gpu_operator_driver_pools": [{"name": "a", "node_selector": {"pool": "x"}},
                                                    {"name": "b", "node_selector": {"pool": "x"}}]},
     "driver_pools[1].node_selector repeats"),
    ("network_operator", {"network_operator_ipam": "whereabouts"}, "ipam: whereabouts is not available in Network Operator chart 25.10.0"),
    ("network_operator", {"network_operator_values": {"deployCR": True}}, "has no top-level value deployCR"),
    ("network_operator", {"network_operator_gpu_hosts_group": "nomofed_hosts"}, "ofed.source host: MLNX_OFED/DOCA-OFED is not installed on bare-a"),
    ("network_operator", dict(POOL, network_operator_networks=[{"kind": "macvlan", "name": "n", "ip_pool": "p"}]), "networks[0].master"),
    ("network_operator", dict(POOL, network_operator_networks=[{"kind": "macvlan", "name": "n", "master": "e", "ip_pool": "q"}]),
     "networks[0].ip_pool"),
    # the catalog's DOCA driver is 26.4.1's: another 26.4 release needs its own doca-driver tag
    ("network_operator", {"network_operator_chart_version": "26.4.0", "network_operator_ofed": {"source": "operator"}},
     "ofed.version: the catalog's DOCA driver (doca3.4.1-26.04-1.1.0.0-1) is the one of Network Operator 26.4.1"),
    # the chart's upstream kubeVersion '>= 1.21.0' against the double's pre-release version (v1.33.5-double, like
    # GKE's v1.33.5-gke.1234): refused before helm is called, with the ways out
    ("network_operator", {}, "Network Operator chart 25.10.0 declares kubeVersion '>= 1.21.0', which helm never "
                             "matches with a pre-release Kubernetes version such as this cluster's v1.33.5-double"),
    ("rdma_test", {"rdma_test_gpu_hosts_group": "unsupported_hosts", "rdma_test_network": "n"}, "resolves to off"),
    ("rdma_test", {"rdma_test_gpu_hosts_group": "old_hosts", "rdma_test_mode": "dmabuf", "rdma_test_network": "n"},
     "kernel 5.4.0 is older than 5.12"),
    ("rdma_test", {"rdma_test_nodes": ["nvnode1", "nvnode1"], "rdma_test_network": "n"}, "two different nodes"),
]


@pytest.fixture(scope="module")
def refusals(run_playbook_module, tmp_path_factory):
    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble  # pylint: disable=import-outside-toplevel

    k8s = K8sDouble().start()
    try:
        plays = [_play("case %02d" % index, [role], dict(GOOD, **variables), rescue=True)
                 for index, (role, variables, dummy) in enumerate(BAD_INPUTS)]
        result = run_playbook_module(plays, env=k8s.env(), extra_args=inventory(tmp_path_factory.mktemp("inv"), HOST_GROUPS))
        yield result, k8s
    finally:
        k8s.stop()


def _check_bad_inputs_are_refused_before_anything_is_sent(refusals):
    result, k8s = refusals
    assert result.rc == 0, result.output
    assert len(BAD_INPUTS) >= 20
    for index, (role, dummy, fragment) in enumerate(BAD_INPUTS):
        message = _refusal(result, "case %02d" % index)
        assert fragment in message, "case %02d (%s): %r not in %r" % (index, role, fragment, message)
    assert k8s.writes() == [], "nothing may be written before the input is valid"


def test_bad_inputs_are_refused_before_anything_is_sent(refusals):
    """One playbook run, every check (one test per run keeps pytest-xdist from running it on both workers)."""
    _check_bad_inputs_are_refused_before_anything_is_sent(refusals)
