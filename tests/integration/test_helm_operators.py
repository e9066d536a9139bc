# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/gpu_operator and roles/network_operator install their charts for real: helm (from
scripts/bootstrap.sh) through kubernetes.core.helm in roles/apply, against the Kubernetes API double, with
the test charts tests/charts/gpu-operator and tests/charts/network-operator standing in for NVIDIA's (same
names, versions and value keys; values schemas that refuse keys and types the real charts do not have).

The GPU Operator chart renders ClusterPolicy ``cluster-policy`` from the role's values, so the tests read what
the operator is told; ``FakeOperators`` (tests/doubles/nvidia_operators.py) then acts on that spec as the
operator does (driver DaemonSet with the sidecars the spec implies, ``status.state``), and the roles' own
readiness checks and verification run against it. One release lifecycle per chart, in order: install,
re-run without change, a value change that upgrades, check mode, uninstall.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import gpu_operator_plan as ops
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import network_operator_plan
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host
from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT
from ansible_collections.gpu_ops.cluster.tests.doubles.nvidia_operators import DRIVER_DAEMONSET, FakeOperators
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import chart_path, helm_binary

GPU_NAMESPACE = "gpu-operator"
HELM_TASK = "Install release %s"
DEPLOY_LABELS = {"nvidia.com/gpu.present": "true", **{"nvidia.com/gpu.deploy.%s" % c: "true" for c in (
    "driver", "container-toolkit", "device-plugin", "gpu-feature-discovery", "dcgm-exporter", "operator-validator")}}
VECTORADD_PASSED = "[Vector addition of 50000 elements]\nTest PASSED\nDone\n"
HOSTS = {"gpu-a": ("nvnode1", gpu_host(mode="peermem")), "gpu-b": ("nvnode2", gpu_host(mode="peermem"))}


@pytest.fixture
def helm_env(helm_k8s):
    """``helm_k8s.helm_env`` made cheaper for the many playbook runs of these tests, with no change to what runs:
    one temporary folder for all the test's runs (kubernetes.core keeps its API discovery cache there, so the
    double's APIs, fixed since its CRDs do not change, are discovered once per test, not once per run), and
    pipelining (each task's module goes to the local Python through stdin instead of a file written per task)."""
    folder = tempfile.mkdtemp(prefix="gpo-")  # short: ansible-core 2.21 puts a unix socket there
    try:
        yield dict(helm_k8s.helm_env, TMPDIR=folder, ANSIBLE_PIPELINING="true")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _inventory(tmp_path):
    hosts = {name: {"ansible_connection": "local", "k8s_node_name": node, "gpu_host": facts}
             for name, (node, facts) in HOSTS.items()}
    path = tmp_path / "gpu_hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_hosts": {"hosts": hosts}}}}), encoding="utf-8")
    return ["-i", str(path)]


def _cluster(k8s):
    """Two GPU nodes (tainted, as the operator's node labels leave them) and a CPU node for the operator."""
    for index in (1, 2):
        k8s.add_node("nvnode%d" % index, labels=DEPLOY_LABELS, allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    k8s.add_node("cpu-0", labels={"node-role.kubernetes.io/control-plane": ""})


def _play(role, **role_vars):
    return [{"name": role, "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Run the role", "ansible.builtin.include_role": {"name": "gpu_ops.cluster." + role}, "vars": role_vars},
        {"name": "Keep the result", "ansible.builtin.debug": {"var": "%s_result" % role}}]}]


def _release_records(k8s, namespace):
    """The release Secrets helm stored, by revision: (labels, decoded release)."""
    records = {}
    for secret in k8s.list("Secret", namespace):
        if secret.get("type") == "helm.sh/release.v1":
            release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))
            records[int(secret["metadata"]["labels"]["version"])] = (secret["metadata"]["labels"], release)
    return records


def _containers(k8s, name, namespace):
    return [c["name"] for c in k8s.get("DaemonSet", name, namespace)["spec"]["template"]["spec"]["containers"]]


# ---- the chart stands in honestly -----------------------------------------------------------------

def _schema_accepts(schema, path):
    node = schema
    for part in path.split("."):
        if node.get("type") != "object" or "properties" not in node:
            return True  # an open object: anything below is the chart's business
        if part not in node["properties"]:
            return False
        node = node["properties"][part]
    return True


def _chart(name):
    folder = Path(chart_path(name))
    schema = json.loads((folder / "values.schema.json").read_text(encoding="utf-8"))
    return yaml.safe_load((folder / "Chart.yaml").read_text(encoding="utf-8"))["version"], schema


def test_the_test_charts_have_every_key_the_catalog_allows():
    """Every value key the catalog lets the roles set for a test chart's version is in the chart's schema (else
    the schema, not the role, would fail the lifecycles below), and the schemas are closed where it matters."""
    version, schema = _chart("gpu-operator")
    assert [k for k in sorted(ops.gpu_operator_keys(version)) if not _schema_accepts(schema, k)] == []
    assert not _schema_accepts(schema, "driver.rdma.useHostMOFED") and not _schema_accepts(schema, "driver.useOpenKernelModules")
    version, schema = _chart("gpu-operator-v26.3.0")
    assert version == "v26.3.0" and [k for k in sorted(ops.gpu_operator_keys(version)) if not _schema_accepts(schema, k)] == []
    assert not _schema_accepts(schema, "operator.initContainer")
    version, schema = _chart("gpu-operator-v24.9.2")
    assert [k for k in sorted(ops.gpu_operator_keys(version)) if not _schema_accepts(schema, k)] == []
    v25_only = ("driver.kernelModuleType", "driver.secretEnv", "dcgmExporter.hostPID", "dcgmExporter.service")
    assert [k for k in v25_only if _schema_accepts(schema, k)] == []
    refused = subprocess.run([helm_binary(), "template", "x", chart_path("gpu-operator-v24.9.2"), "--set",
                              "driver.kernelModuleType=open"], capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "additional properties 'kernelModuleType' not allowed" in refused.stderr, refused.stderr
    version, schema = _chart("network-operator")
    assert [k for k in sorted(network_operator_plan.network_operator_keys(version)) if not _schema_accepts(schema, k)] == []
    assert not _schema_accepts(schema, "deployCR") and not _schema_accepts(schema, "nfd.deployCR")


# ---- GPU Operator ---------------------------------------------------------------------------------

GPU_VARS = {
    "gpu_operator_chart_ref": chart_path("gpu-operator"), "gpu_operator_chart_repo_url": "",
    "gpu_operator_wait_delay": 1, "gpu_operator_wait_retries": 30, "gpu_operator_verify_delay": 0,
    "gpu_operator_vectoradd_delay": 0, "gpu_operator_gds": True,
    "gpu_operator_rdma": {"mode": "auto"},
    "gpu_operator_mig": {"strategy": "single"},
    "gpu_operator_device_plugin": {"enabled": True, "sharing": {"strategy": "time-slicing", "replicas": 4}},
}


def _gpu_play(**extra):
    return _play("gpu_operator", **dict(GPU_VARS, **extra))


def test_gpu_operator_release_lifecycle(run_playbook, helm_k8s, helm_env, tmp_path):
    k8s, inventory = helm_k8s, _inventory(tmp_path)
    _cluster(k8s)
    k8s.script_pod("gpu-operator-vectoradd", phase="Succeeded", logs=VECTORADD_PASSED)
    helm_task = HELM_TASK % "gpu-operator"
    with FakeOperators(k8s, gpu_namespace=GPU_NAMESPACE) as operators:
        # 1. install: helm --wait, ClusterPolicy from the values, the operator's answer, the guide's checks
        result = run_playbook(_gpu_play(), env=helm_env, extra_args=inventory).assert_ok()
        helm = result.task(helm_task)
        assert helm["changed"] and "upgrade -i " in helm["result"]["command"] and "--wait" in helm["result"]["command"]
        labels, release = _release_records(k8s, GPU_NAMESPACE)[1]
        assert (labels["status"], release["chart"]["metadata"]["version"]) == ("deployed", "v25.10.1")
        policy = k8s.get("ClusterPolicy", "cluster-policy")
        spec = policy["spec"]
        assert policy["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == GPU_NAMESPACE
        assert spec["driver"]["enabled"] is True and spec["driver"]["kernelModuleType"] == "open"  # GDS needs open
        assert spec["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}  # peermem hosts with DOCA-OFED
        assert spec["gds"]["enabled"] is True and spec["gdrcopy"]["enabled"] is False
        assert spec["mig"] == {"strategy": "single"} and spec["migManager"]["config"] == {"default": "all-disabled"}
        assert spec["dcgmExporter"] == {"enabled": True} and spec["toolkit"]["enabled"] is True
        assert spec["devicePlugin"]["config"] == {"name": "device-plugin-config", "default": "shared"}
        sharing = json.loads(k8s.get("ConfigMap", "device-plugin-config", GPU_NAMESPACE)["data"]["shared"])
        assert sharing["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
        assert sharing["flags"] == {"migStrategy": "single"}
        assert k8s.get("Deployment", "gpu-operator", GPU_NAMESPACE)["status"]["readyReplicas"] == 1
        assert k8s.get("ClusterPolicy", "cluster-policy")["status"]["state"] == "ready"
        assert _containers(k8s, DRIVER_DAEMONSET, GPU_NAMESPACE) == ["nvidia-driver-ctr", "nvidia-peermem-ctr", "nvidia-fs-ctr"]
        outcome = result.task("Keep the result")["result"]["gpu_operator_result"]
        assert outcome["verified"] is True and outcome["rdma"]["mode"] == "peermem"
        assert outcome["chart"]["chart_ref"] == chart_path("gpu-operator") and outcome["chart"]["chart_repo_url"] == ""
        namespace = k8s.get("Namespace", GPU_NAMESPACE)
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"

        # 2. the same values again (the verification, which only reads and cleans up, left out): nothing changes
        k8s.clear_requests()
        result = run_playbook(_gpu_play(gpu_operator_verify=False), env=helm_env, extra_args=inventory).assert_ok()
        assert not result.task(helm_task)["changed"]
        assert k8s.writes() == []
        assert sorted(_release_records(k8s, GPU_NAMESPACE)) == [1]

        # 3. a value change upgrades in place: revision 2, the ClusterPolicy patched, the operator's new answer
        uid, generation = policy["metadata"]["uid"], policy["metadata"]["generation"]
        result = run_playbook(_gpu_play(gpu_operator_verify=False, gpu_operator_gdrcopy=True,
                                        gpu_operator_dcgm_exporter={"enabled": False}),
                              env=helm_env, extra_args=inventory).assert_ok()
        assert result.task(helm_task)["changed"]
        records = _release_records(k8s, GPU_NAMESPACE)
        assert (records[1][0]["status"], records[2][0]["status"]) == ("superseded", "deployed")
        policy = k8s.get("ClusterPolicy", "cluster-policy")
        assert policy["metadata"]["uid"] == uid and policy["metadata"]["generation"] == generation + 1
        assert policy["spec"]["gdrcopy"]["enabled"] is True and policy["spec"]["dcgmExporter"] == {"enabled": False}
        assert _containers(k8s, DRIVER_DAEMONSET, GPU_NAMESPACE)[-1] == "nvidia-gdrcopy-ctr"
        assert policy["status"]["state"] == "ready"

        # 4. check mode: the change is reported, nothing is written, no revision added
        k8s.clear_requests()
        result = run_playbook(_gpu_play(gpu_operator_verify=False, gpu_operator_gds=False), env=helm_env,
                              extra_args=inventory, check=True).assert_ok()
        assert result.task(helm_task)["changed"]
        assert k8s.writes() == []
        assert sorted(_release_records(k8s, GPU_NAMESPACE)) == [1, 2]
        assert k8s.get("ClusterPolicy", "cluster-policy")["spec"]["gds"]["enabled"] is True

        # 5. absent uninstalls: release, ClusterPolicy and the operator gone, then the namespace
        result = run_playbook(_gpu_play(gpu_operator_state="absent"), env=helm_env, extra_args=inventory).assert_ok()
        assert result.task(helm_task)["changed"]
        assert k8s.get("ClusterPolicy", "cluster-policy") is None
        assert k8s.get("Namespace", GPU_NAMESPACE) is None and _release_records(k8s, GPU_NAMESPACE) == {}
    assert operators.errors == []


def test_gpu_operator_v24_9_installs_and_never_ready_names_the_node(run_playbook, helm_k8s, helm_env, tmp_path):
    """Chart v24.9.2 (``driver.useOpenKernelModules``, no ``kernelModuleType``: its schema refuses the v25 keys)
    installs with the values the role builds for v24.9; then the driver pod on nvnode2 never gets ready, the
    operator leaves the ClusterPolicy notReady, and the role fails within its short timeout naming the
    component and the node (one playbook run for both: the failure comes after the real install)."""
    k8s, inventory = helm_k8s, _inventory(tmp_path)
    _cluster(k8s)
    k8s.never_ready("nvnode2")
    with FakeOperators(k8s, gpu_namespace=GPU_NAMESPACE) as operators:
        started = time.monotonic()
        result = run_playbook(_gpu_play(gpu_operator_chart_ref=chart_path("gpu-operator-v24.9.2"),
                                        gpu_operator_chart_version="v24.9.2", gpu_operator_verify=False,
                                        gpu_operator_wait_retries=3, gpu_operator_wait_delay=1),
                              env=helm_env, extra_args=inventory)
        elapsed = time.monotonic() - started
    result.assert_failed()
    assert operators.errors == []
    helm = result.task(HELM_TASK % "gpu-operator")
    assert helm["status"] == "ok" and helm["changed"]
    labels, release = _release_records(k8s, GPU_NAMESPACE)[1]
    assert (labels["status"], release["chart"]["metadata"]["version"]) == ("deployed", "v24.9.2")
    assert release["config"]["driver"]["useOpenKernelModules"] is True  # GDS needs the open modules
    assert "kernelModuleType" not in release["config"]["driver"] and "secretEnv" not in release["config"]["driver"]
    driver = k8s.get("ClusterPolicy", "cluster-policy")["spec"]["driver"]
    assert driver["useOpenKernelModules"] is True and "kernelModuleType" not in driver
    assert k8s.get("ClusterPolicy", "cluster-policy")["status"]["state"] == "notReady"
    # never ready: the wait gives up after its retries (3 x 1 s), not the default 90 x 10 s
    # (the wait itself ends quietly at its last read; the one failure is the report naming what is not ready)
    wait = result.task("Wait until ready: ClusterPolicy cluster-policy (GPU Operator in gpu-operator)")
    assert wait["status"] == "ok" and wait["result"]["attempts"] == 4
    [failure] = result.failed
    message = failure["result"]["msg"]
    assert "not ready after 3 seconds" in message and "ClusterPolicy/cluster-policy is notReady" in message
    assert "nvidia-driver-daemonset not ready on node nvnode2" in message and "nvnode1" not in message
    assert elapsed < 120, elapsed


# ---- Network Operator -----------------------------------------------------------------------------

NET_NAMESPACE = "nvidia-network-operator"
NET_VARS = {
    "network_operator_chart_ref": chart_path("network-operator"), "network_operator_chart_repo_url": "",
    "network_operator_wait_delay": 1, "network_operator_wait_retries": 30,
    "network_operator_ip_pools": [{"name": "rdma-pool", "subnet": "192.168.2.0/24", "gateway": "192.168.2.1"}],
    "network_operator_networks": [{"kind": "macvlan", "name": "rdma-net", "master": "ens64np1", "ip_pool": "rdma-pool"}],
}


def _net_play(**extra):
    return _play("network_operator", **dict(NET_VARS, **extra))


def test_network_operator_release_lifecycle(run_playbook, helm_k8s, helm_env, tmp_path):
    k8s, inventory = helm_k8s, _inventory(tmp_path)
    _cluster(k8s)
    helm_task = HELM_TASK % "network-operator"
    nfd_master = "network-operator-node-feature-discovery-master"
    with FakeOperators(k8s) as operators:
        # 1. install (helm --wait on the operator), then the role's NicClusterPolicy and networks, ready
        result = run_playbook(_net_play(), env=helm_env, extra_args=inventory).assert_ok()
        helm = result.task(helm_task)
        assert helm["changed"] and "--wait" in helm["result"]["command"]
        labels, release = _release_records(k8s, NET_NAMESPACE)[1]
        assert (labels["status"], release["chart"]["metadata"]["version"]) == ("deployed", "25.10.0")
        assert release["config"] == {"nfd": {"enabled": True, "deployNodeFeatureRules": True},
                                     "sriovNetworkOperator": {"enabled": False}}
        operator = k8s.get("Deployment", "network-operator", NET_NAMESPACE)
        assert operator["status"]["readyReplicas"] == 1
        assert k8s.get("Deployment", nfd_master, NET_NAMESPACE) and not k8s.get("Deployment", "sriov-network-operator", NET_NAMESPACE)
        policy = k8s.get("NicClusterPolicy", "nic-cluster-policy")
        assert policy["status"]["state"] == "ready" and "meta.helm.sh/release-name" not in policy["metadata"].get("annotations", {})
        assert k8s.get("MacvlanNetwork", "rdma-net")["status"]["state"] == "ready"
        outcome = result.task("Keep the result")["result"]["network_operator_result"]
        assert outcome["ipam"] == "nv-ipam" and outcome["chart"]["chart_version"] == "25.10.0"

        # 2. the same values again: nothing changes
        k8s.clear_requests()
        result = run_playbook(_net_play(), env=helm_env, extra_args=inventory).assert_ok()
        assert not result.task(helm_task)["changed"]
        assert k8s.writes() == []

        # 3. a value change upgrades: the SR-IOV Network Operator sub-chart switched on, revision 2
        result = run_playbook(_net_play(network_operator_sriov_network_operator=True), env=helm_env,
                              extra_args=inventory).assert_ok()
        assert result.task(helm_task)["changed"]
        records = _release_records(k8s, NET_NAMESPACE)
        assert (records[1][0]["status"], records[2][0]["status"]) == ("superseded", "deployed")
        assert k8s.get("Deployment", "sriov-network-operator", NET_NAMESPACE)["status"]["readyReplicas"] == 1
        assert k8s.get("Deployment", "network-operator", NET_NAMESPACE)["metadata"]["uid"] == operator["metadata"]["uid"]

        # 4. check mode: NFD off is reported, nothing is written
        k8s.clear_requests()
        result = run_playbook(_net_play(network_operator_sriov_network_operator=True, network_operator_nfd_enabled=False),
                              env=helm_env, extra_args=inventory, check=True).assert_ok()
        assert result.task(helm_task)["changed"]
        assert k8s.writes() == [] and k8s.get("Deployment", nfd_master, NET_NAMESPACE)

        # 5. absent: networks, NicClusterPolicy and release gone
        result = run_playbook(_net_play(network_operator_state="absent"), env=helm_env, extra_args=inventory).assert_ok()
        assert result.task(helm_task)["changed"]
        assert k8s.get("NicClusterPolicy", "nic-cluster-policy") is None and k8s.get("MacvlanNetwork", "rdma-net") is None
        assert _release_records(k8s, NET_NAMESPACE) == {} and k8s.list("Deployment", NET_NAMESPACE) == []
    assert operators.errors == []
