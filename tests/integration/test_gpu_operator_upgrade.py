# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/gpu_operator_upgrade.yml for real: helm through kubernetes.core.helm against the Kubernetes API double,
from the v25.10.1 test chart to the v26.3.0 one, with ``FakeOperators`` playing the driver upgrade controller on the
nodes' ``nvidia.com/gpu-driver-upgrade-state`` label: one node upgrades, one is stuck (its driver manager cannot unload
the driver), one is labelled to skip. The run reports the stuck node with its driver pod's log line, writes the
before/after difference and fails; once the cause is gone, running it again converges without a second helm upgrade.
And the render of the plan, which contacts nothing."""

from __future__ import annotations

import shutil
import sys
import tempfile

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT
from ansible_collections.gpu_ops.cluster.tests.doubles.nvidia_operators import DRIVER_DAEMONSET, UPGRADE_PATH, FakeOperators
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT, chart_path, render_playbook

NAMESPACE = "gpu-operator"
PLAYBOOK = REPO_ROOT / "playbooks" / "gpu_operator_upgrade.yml"
STATE = "nvidia.com/gpu-driver-upgrade-state"
DEPLOY_LABELS = {"nvidia.com/gpu.present": "true", **{"nvidia.com/gpu.deploy.%s" % c: "true" for c in (
    "driver", "container-toolkit", "device-plugin", "gpu-feature-discovery", "dcgm-exporter", "operator-validator")}}
IN_USE = ("Shutting down all GPU clients on the current node\nUnloading NVIDIA driver kernel modules...\n"
          "nvidia_uvm           1908736  2\nCould not unload NVIDIA driver kernel modules, driver is in use\n"
          "Uncordoning node nvnode2...\n")
COMMON = {"gpu_operator_chart_repo_url": "", "gpu_operator_rdma": {"mode": "off"}, "gpu_operator_verify": False,
          "gpu_operator_wait_delay": 1, "gpu_operator_wait_retries": 30}


@pytest.fixture
def helm_env(helm_k8s):
    folder = tempfile.mkdtemp(prefix="gpu-")  # short: ansible-core 2.21 puts a unix socket there
    try:
        yield dict(helm_k8s.helm_env, TMPDIR=folder, ANSIBLE_PIPELINING="true")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _crds(k8s, folder):
    """The target chart's crds/ folder: the CRDs the double serves, written as files (the upstream ones are large)."""
    folder.mkdir()
    for name in ("clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"):
        crd = k8s.get("CustomResourceDefinition", name)
        doc = {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": {"name": name}, "spec": crd["spec"]}
        (folder / ("nvidia.com_%s.yaml" % name.split(".", maxsplit=1)[0])).write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(folder)


def _labels(k8s, node):
    return k8s.get("Node", node)["metadata"].get("labels") or {}


def test_upgrade_watched_stuck_node_reported_diffed_and_converging(run_playbook, helm_k8s, helm_env, tmp_path):
    k8s = helm_k8s
    for index in (1, 2, 3):
        labels = dict(DEPLOY_LABELS, **({"nvidia.com/gpu-driver-upgrade.skip": "true"} if index == 3 else {}))
        k8s.add_node("nvnode%d" % index, labels=labels, allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    k8s.add_node("cpu-0", labels={"node-role.kubernetes.io/control-plane": ""})
    inventory = tmp_path / "clusters.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"k8s_clusters": {"hosts": {"lab": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}, "gpu_hosts": {"hosts": {}}}}}))
    upgrade = dict(COMMON, gpu_operator_chart_ref=chart_path("gpu-operator-v26.3.0"), gpu_operator_chart_version="v26.3.0",
                   gpu_operator_upgrade_crds_dir=_crds(k8s, tmp_path / "crds"), gpu_operator_upgrade_node_timeout=8,
                   gpu_operator_upgrade_poll_delay=1, gpu_operator_upgrade_timeout=90,
                   gpu_operator_upgrade_policy={"max_parallel_upgrades": 1, "drain": {"enable": True, "timeout_seconds": 120}},
                   gpu_operator_upgrade_report_dir=str(tmp_path / "reports"),
                   validate_checks=["gpu_operator.cluster_policy", "gpu_operator.driver_pods"])
    with FakeOperators(k8s, gpu_namespace=NAMESPACE, driver_upgrades=True, upgrade_step=0.5, stuck={"nvnode2": IN_USE},
                       paced_by_reads=True) as operators:
        install = [{"name": "install", "hosts": "localhost", "gather_facts": False, "tasks": [{
            "ansible.builtin.include_role": {"name": "gpu_ops.cluster.gpu_operator"},
            "vars": dict(COMMON, gpu_operator_chart_ref=chart_path("gpu-operator"), gpu_operator_chart_version="v25.10.1")}]}]
        run_playbook(install, env=helm_env).assert_ok()
        old_image = k8s.get("DaemonSet", DRIVER_DAEMONSET, NAMESPACE)["spec"]["template"]["spec"]["containers"][0]["image"]
        k8s.clear_requests()

        # 1. the upgrade: CRDs first, the release, the watch; nvnode2 stuck, nvnode3 skipped; the diff; a failed run
        result = run_playbook(PLAYBOOK, extra_vars=upgrade, env=helm_env, extra_args=["-i", str(inventory)]).assert_failed()
        (tmp_path / "upgrade-run.txt").write_text(result.output)
        plan = result.task("Show the plan")["result"]["msg"]
        assert plan[0] == "release gpu-operator in gpu-operator: chart v25.10.1 -> v26.3.0"
        assert plan[1] == "CRDs first (helm never upgrades them): clusterpolicies.nvidia.com, nvidiadrivers.nvidia.com"
        assert "maxParallelUpgrades: 1" in plan[2] and "drain: {enable: true, timeoutSeconds: 120}" in plan[2]
        requests = k8s.requests()
        assert requests.index(k8s.writes("CustomResourceDefinition")[0]) < requests.index(k8s.writes("Secret")[0]), \
            "the CRDs go before the release"
        values = _release(k8s)["config"]
        # the policy as given (a key left out keeps the chart's default; the role's default writes them all out)
        assert values["driver"]["upgradePolicy"] == {"maxParallelUpgrades": 1, "drain": {"enable": True, "timeoutSeconds": 120}}
        assert values["operator"]["upgradeCRD"] is False
        moves = "\n".join(line for r in result.tasks("Show what moved") if r["status"] == "ok" for line in r["result"]["msg"])
        # the node's steps as the polls saw them (one state per read of the nodes), to upgrade-done on the new driver
        mine = [line for line in moves.splitlines() if line.startswith("node nvnode1: ")]
        seen = [mine[0].split(": ")[1].split(" ")[0]] + [line.split(" -> ")[1].split(" ")[0] for line in mine[1:]]
        path = list(UPGRADE_PATH)
        assert seen == path[path.index(seen[0]):], moves
        assert " -> upgrade-done (done, " in mine[-1], moves
        assert "node nvnode2: stuck in upgrade-required (" in moves and "node nvnode3: not processed yet (skipped)" in moves
        report = result.task("Show the stuck, failed and skipped nodes")["result"]["msg"]
        assert report[0].startswith("node nvnode2 stuck in upgrade-required for ")
        assert report[0].endswith(": driver pod %s, container k8s-driver-manager (CrashLoopBackOff): Could not unload NVIDIA driver "
                                  "kernel modules, driver is in use" % report[0].split("driver pod ")[1].split(",")[0])
        assert report[1] == "node nvnode3 skipped: labelled nvidia.com/gpu-driver-upgrade.skip=true (its driver is not upgraded)"
        assert (_labels(k8s, "nvnode1")[STATE], _labels(k8s, "nvnode2")[STATE]) == ("upgrade-done", "upgrade-required")
        assert STATE not in _labels(k8s, "nvnode3")
        diff = result.task("Show the difference, before and after")["result"]["msg"]
        new_image = k8s.get("DaemonSet", DRIVER_DAEMONSET, NAMESPACE)["spec"]["template"]["spec"]["containers"][0]["image"]
        assert "node nvnode1 label: %s (none) -> upgrade-done" % STATE in diff
        assert "node nvnode2 label: %s (none) -> upgrade-required" % STATE in diff
        manager = "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1"
        assert "DaemonSet gpu-operator/%s: images %s, %s -> %s, %s" % (DRIVER_DAEMONSET, manager, old_image, manager, new_image) in diff
        assert "cluster policy cluster-policy: driver.version 580.105.08 -> 580.126.20" in diff
        checks = [line for line in diff if line.startswith("check ")]
        assert len(checks) == 2 and checks[0].startswith("check gpu_operator.cluster_policy: passed -> failed: ")
        assert checks[1].startswith("check gpu_operator.driver_pods: passed -> failed: ") and "nvnode2" in checks[1]
        written = (tmp_path / "reports" / "lab" / "upgrade-report.md").read_text()
        assert "Could not unload NVIDIA driver kernel modules" in written and "## Before and after" in written
        assert "1 done, 1 stuck, 1 skipped" in result.failed[0]["result"]["msg"]
        revisions = _revisions(k8s)

        # 2. the cause gone, the same run again: no second helm upgrade, the watch picks up where the nodes are
        operators.unstick("nvnode2")
        again = run_playbook(PLAYBOOK, extra_vars=upgrade, env=helm_env, extra_args=["-i", str(inventory)]).assert_ok()
        assert again.task("Show the plan")["result"]["msg"][0] == "release gpu-operator in gpu-operator: already chart v26.3.0, not upgraded again"
        assert _revisions(k8s) == revisions
        assert _labels(k8s, "nvnode2")[STATE] == "upgrade-done"
        assert again.task("Show the stuck, failed and skipped nodes")["result"]["msg"] == [
            "node nvnode3 skipped: labelled nvidia.com/gpu-driver-upgrade.skip=true (its driver is not upgraded)"]
    assert operators.errors == []


def _records(k8s):
    import base64
    import gzip
    import json
    return [(s["metadata"]["labels"], json.loads(gzip.decompress(base64.b64decode(base64.b64decode(s["data"]["release"])))))
            for s in k8s.list("Secret", NAMESPACE) if s.get("type") == "helm.sh/release.v1"]


def _revisions(k8s):
    return sorted(int(labels["version"]) for labels, dummy in _records(k8s))


def _release(k8s):
    return max(_records(k8s), key=lambda r: int(r[0]["version"]))[1]


def test_the_plan_renders_without_a_cluster(tmp_path_factory):
    out, result = render_playbook(tmp_path_factory, "gpu_operator_upgrade.yml", "baremetal-k8s", "upgrade")
    plan = yaml.safe_load((out / "checks" / "30-gpu-operator-upgrade" / "plan.yaml").read_text())
    assert plan["steps"][0] == "release gpu-operator in gpu-operator: chart (not read in render mode) -> v25.10.1"
    assert plan["watch"]["state_label"] == STATE and plan["watch"]["driver_version"] == "580.105.08"
    release = yaml.safe_load((out / "charts" / "30-gpu-operator" / "gpu-operator.yaml").read_text())
    assert release["values"]["driver"]["upgradePolicy"]["maxParallelUpgrades"] == 1
    assert release["values"]["operator"]["upgradeCRD"] is False
    assert not result.tasks("Validate before the upgrade")[0]["status"] == "ok"
