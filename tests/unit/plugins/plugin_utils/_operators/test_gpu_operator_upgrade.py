# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator upgrade: the plan and its refusals, the per-node watch of the driver upgrade states, the report of
the stuck nodes with their driver pod's log line."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import gpu_operator_upgrade as up
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.gpu_operator_plan import gpu_operator_plan
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import OperatorInputError

STATE = "nvidia.com/gpu-driver-upgrade-state"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"
CRDS = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": n},
         "spec": {"group": "nvidia.com"}} for n in ("clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com")]
RELEASE = {"chart": "gpu-operator-v25.10.1", "status": "deployed", "name": "gpu-operator", "namespace": "gpu-operator"}


def _plan(version="v26.3.0", **options):
    return gpu_operator_plan(dict({"chart_version": version, "rdma": {"mode": "off"}}, **options))


_INSTALLED = object()


def _upgrade(installed=_INSTALLED, version="v26.3.0", **options):
    installed = dict(RELEASE) if installed is _INSTALLED else installed
    return up.upgrade_plan(_plan(version), installed, dict({"crds": CRDS, "node_timeout": 600}, **options))


def test_the_plan_sets_the_policy_explicitly_applies_the_crds_first_and_turns_the_chart_hook_off():
    plan = _upgrade(upgrade_policy={"auto_upgrade": True, "max_parallel_upgrades": 1, "max_unavailable": "25%",
                                    "drain": {"enable": True, "timeout_seconds": 300, "pod_selector": None},
                                    "gpu_pod_deletion": {"force": False, "delete_empty_dir": True}})
    assert (plan["action"], plan["from_version"], plan["to_version"]) == ("upgrade", "v25.10.1", "v26.3.0")
    values = plan["chart"]["values"]
    assert values["driver"]["upgradePolicy"] == {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
                                                 "drain": {"enable": True, "timeoutSeconds": 300},
                                                 "gpuPodDeletion": {"force": False, "deleteEmptyDir": True}}
    assert values["operator"]["upgradeCRD"] is False
    assert plan["chart"]["chart_version"] == "v26.3.0" and plan["crds"] == CRDS
    assert plan["steps"][:2] == ["release gpu-operator in gpu-operator: chart v25.10.1 -> v26.3.0",
                                 "CRDs first (helm never upgrades them): clusterpolicies.nvidia.com, nvidiadrivers.nvidia.com"]
    assert plan["steps"][2].startswith("driver.upgradePolicy: {autoUpgrade: true, drain: {enable: true, timeoutSeconds: 300}")
    assert "(driver 580.126.20), 600 s per node" in plan["steps"][3]
    assert plan["watch"] == {"enabled": True, "namespace": "gpu-operator", "driver_version": "580.126.20", "precompiled": False,
                             "node_timeout": 600, "driver_selector": "app=nvidia-driver-daemonset", "state_label": STATE, "skip_label": SKIP}


def test_a_release_already_at_the_target_is_not_upgraded_again():
    plan = _upgrade(dict(RELEASE, chart="gpu-operator-v26.3.0"))
    assert plan["action"] == "none"
    assert plan["steps"][0] == "release gpu-operator in gpu-operator: already chart v26.3.0, not upgraded again"


def test_without_the_operators_driver_there_is_nothing_to_watch():
    plan = up.upgrade_plan(gpu_operator_plan({"chart_version": "v26.3.0", "platform": "gke", "gke_version": "1.33.5-gke.1125000",
                                              "rdma": {"mode": "off"}}), RELEASE, {"crds": CRDS, "node_timeout": 60})
    assert not plan["watch"]["enabled"] and "upgradePolicy" not in plan["chart"]["values"]["driver"]
    assert plan["steps"][-1].startswith("the driver is not the operator's here")


@pytest.mark.parametrize("installed, options, words", [
    (None, {}, "no release gpu-operator in namespace gpu-operator: install the GPU Operator first"),
    (dict(RELEASE, chart="network-operator-25.10.0"), {}, "release gpu-operator in gpu-operator is chart network-operator-25.10.0, not gpu-operator"),
    (dict(RELEASE, status="pending-upgrade"), {}, "release gpu-operator is pending-upgrade, not deployed"),
    (dict(RELEASE, chart="gpu-operator-v26.3.9"), {}, "chart_version v26.3.0 is older than the installed v26.3.9"),
    (dict(RELEASE, chart="gpu-operator-main"), {}, "installed chart version 'main' is not a release version"),
    (RELEASE, {"crds": []}, "crds: no CustomResourceDefinition given"),
    (RELEASE, {"crds": [{"kind": "ConfigMap"}]}, "crds[0] is not a nvidia.com CustomResourceDefinition (kind ConfigMap, group None)"),
    (RELEASE, {"crds": [dict(CRDS[0], spec={"group": "example.com"})]}, "(kind CustomResourceDefinition, group example.com)"),
    (RELEASE, {"node_timeout": 0}, "node_timeout must be a whole number of seconds >= 1, got 0"),
    (RELEASE, {"node_timeout": True}, "got True"),
    (RELEASE, {"upgrade_policy": {"max_parallel": 1}}, "upgrade_policy.max_parallel is not a setting (allowed: auto_upgrade,"),
    (RELEASE, {"upgrade_policy": {"auto_upgrade": "yes"}}, "upgrade_policy.auto_upgrade must be true or false, got 'yes'"),
    (RELEASE, {"upgrade_policy": {"max_parallel_upgrades": -1}}, "upgrade_policy.max_parallel_upgrades must be a whole number >= 0"),
    (RELEASE, {"upgrade_policy": {"max_parallel_upgrades": False}}, "max_parallel_upgrades must be a whole number >= 0, got False"),
    (RELEASE, {"upgrade_policy": {"max_unavailable": "125%"}}, "max_unavailable must be a whole number >= 0 or a percentage"),
    (RELEASE, {"upgrade_policy": {"max_unavailable": True}}, "or a percentage such as 25%, got True"),
    (RELEASE, {"upgrade_policy": {"drain": {"pod_selector": 3}}}, "upgrade_policy.drain.pod_selector must be text"),
    (RELEASE, {"upgrade_policy": {"drain": {"enable": 1}}}, "upgrade_policy.drain.enable must be true or false"),
    (RELEASE, {"upgrade_policy": {"drain": "yes"}}, "upgrade_policy.drain must be a mapping (enable, force,"),
    (RELEASE, {"refusals": ["validation before the upgrade: gpu.allocatable failed: node x advertises no GPU resource"]},
     "validation before the upgrade: gpu.allocatable failed"),
    (RELEASE, {"refusals": "x"}, "refusals must be a list of problems found before the upgrade, got 'x'"),
])
def test_refusals(installed, options, words):
    with pytest.raises(OperatorInputError) as caught:
        _upgrade(installed, **options)
    assert words in str(caught.value)


def test_every_refusal_at_once_and_a_downgrade_only_when_allowed():
    with pytest.raises(OperatorInputError) as caught:
        _upgrade(dict(RELEASE, chart="gpu-operator-v26.3.9"), crds=[], node_timeout=None)
    assert str(caught.value).count("; ") == 2
    assert _upgrade(dict(RELEASE, chart="gpu-operator-v26.3.9"), allow_downgrade=True)["action"] == "upgrade"
    assert up.installed_version({"chart": "gpu-operator-v25.3.4"}) == "v25.3.4" and up.installed_version({}) is None


# ---- the watch --------------------------------------------------------------------------------

WATCH = _upgrade()["watch"]


def _node(name, state=None, skip=False, deploy=True):
    labels = {"nvidia.com/gpu.present": "true"}
    if deploy:
        labels["nvidia.com/gpu.deploy.driver"] = "true"
    if state is not None:
        labels[STATE] = state
    if skip:
        labels[SKIP] = "true"
    return {"metadata": {"name": name, "labels": labels}}


def _pod(node, version="580.126.20", ready=True, manager=None):
    pod = {"metadata": {"name": "nvidia-driver-daemonset-" + node[-1]},
           "spec": {"nodeName": node, "initContainers": [{"name": "k8s-driver-manager"}],
                    "containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:%s-ubuntu22.04" % version}]},
           "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if manager is not None:
        pod["status"]["initContainerStatuses"] = [{"name": "k8s-driver-manager", "state": manager}]
    return pod


def test_a_rollout_polled_to_its_end_with_a_stuck_node_and_a_skipped_one():
    cpu = {"metadata": {"name": "cpu-0", "labels": {}}}
    nodes = [_node("gpu-0", "upgrade-done"), _node("gpu-1", "upgrade-done"), _node("gpu-2", "upgrade-done", skip=True), cpu]
    old = [_pod("gpu-0", "580.105.08"), _pod("gpu-1", "580.105.08"), _pod("gpu-2", "580.105.08")]
    first = up.upgrade_progress(nodes, old, WATCH, None, 1000)
    # upgrade-done from the last upgrade, on the old driver: still to do (the operator has not marked it yet)
    assert [first["nodes"][n]["status"] for n in ("gpu-0", "gpu-1", "gpu-2")] == ["upgrading", "upgrading", "skipped"]
    assert "cpu-0" not in first["nodes"] and not first["finished"]
    assert first["lines"][0] == "node gpu-0: upgrade-done (upgrading)"
    nodes = [_node("gpu-0", "drain-required"), _node("gpu-1", "upgrade-required"), _node("gpu-2", "upgrade-done", skip=True)]
    second = up.upgrade_progress(nodes, old, WATCH, first, 1030)
    assert second["lines"] == ["node gpu-0: upgrade-done -> drain-required (upgrading, 30 s in upgrade-done)",
                               "node gpu-1: upgrade-done -> upgrade-required (upgrading, 30 s in upgrade-done)"]
    held = {"waiting": {"reason": "CrashLoopBackOff"}}
    pods = [_pod("gpu-0"), _pod("gpu-1", "580.105.08", ready=False, manager=held), _pod("gpu-2", "580.105.08")]
    nodes[0] = _node("gpu-0", "upgrade-done")
    third = up.upgrade_progress(nodes, pods, WATCH, second, 1600)
    assert third["nodes"]["gpu-0"]["status"] == "done" and third["nodes"]["gpu-1"]["status"] == "upgrading"
    assert third["nodes"]["gpu-1"]["since"] == 1030
    assert up.upgrade_report(third)[0] == ("node gpu-1 still in upgrade-required after the watch ended (570 s there): raise "
                                           "gpu_operator_upgrade_timeout or run again to go on watching")
    fourth = up.upgrade_progress(nodes, pods, WATCH, third, 1631)
    assert fourth["nodes"]["gpu-1"]["status"] == "stuck" and fourth["finished"] and not fourth["ok"]
    assert fourth["counts"] == {"done": ["gpu-0"], "upgrading": [], "stuck": ["gpu-1"], "failed": [], "skipped": ["gpu-2"]}
    assert fourth["summary"] == "3 driver nodes: 1 done, 1 stuck, 1 skipped"
    assert fourth["nodes"]["gpu-1"]["log_container"] == "k8s-driver-manager" and fourth["nodes"]["gpu-1"]["held"] == "CrashLoopBackOff"
    log = ("Shutting down all GPU clients on the current node by disabling their component-specific nodeSelector labels\n"
           "Unloading NVIDIA driver kernel modules...\nnvidia_modeset  1306624  1 nvidia_drm\n"
           "Could not unload NVIDIA driver kernel modules, driver is in use\n  \nUncordoning node gpu-1...\n")
    assert up.upgrade_report(fourth, {"gpu-1": log}) == [
        "node gpu-1 stuck in upgrade-required for 601 s: driver pod nvidia-driver-daemonset-1, container k8s-driver-manager "
        "(CrashLoopBackOff): Could not unload NVIDIA driver kernel modules, driver is in use",
        "node gpu-2 skipped: labelled nvidia.com/gpu-driver-upgrade.skip=true (its driver is not upgraded)"]


def test_failed_done_and_what_holds_a_pod():
    nodes = [_node("gpu-0", "upgrade-failed"), _node("gpu-1", "upgrade-done"), _node("gpu-2", "validation-required"),
             _node("gpu-3", "upgrade-done"), _node("gpu-4", "upgrade-done")]
    ended = {"terminated": {"exitCode": 0}}
    pods = [_pod("gpu-0", manager={"terminated": {"exitCode": 1, "reason": "Error"}}), _pod("gpu-1"),
            _pod("gpu-2", ready=False, manager=ended), _pod("gpu-3", ready=False)]
    result = up.upgrade_progress(nodes, pods, dict(WATCH, node_timeout=5), None, 100)
    statuses = dict((n, r["status"]) for n, r in result["nodes"].items())
    assert statuses == {"gpu-0": "failed", "gpu-1": "done", "gpu-2": "upgrading", "gpu-3": "upgrading", "gpu-4": "upgrading"}
    assert result["nodes"]["gpu-0"]["held"] == "Error"
    later = up.upgrade_progress(nodes, pods, dict(WATCH, node_timeout=5), result, 106)
    assert (later["nodes"]["gpu-2"]["log_container"], later["nodes"]["gpu-2"]["held"]) == ("nvidia-driver-ctr", "not ready")
    assert later["nodes"]["gpu-4"]["pod"] is None and later["ok"] is False
    report = up.upgrade_report(later, {"gpu-0": "a\nerror: modprobe failed\nb\n", "gpu-2": "loading\n", "gpu-3": ""})
    assert report == [
        "node gpu-0 failed in upgrade-failed for 6 s: driver pod nvidia-driver-daemonset-0, container k8s-driver-manager (Error): error: modprobe failed",
        "node gpu-2 stuck in validation-required for 6 s: driver pod nvidia-driver-daemonset-2, container nvidia-driver-ctr (not ready): loading",
        "node gpu-3 stuck in upgrade-done for 6 s: driver pod nvidia-driver-daemonset-3, container k8s-driver-manager (not started): (no log line)",
        "node gpu-4 stuck in upgrade-done for 6 s: no driver pod on the node"]


def test_the_target_driver_by_tag_and_precompiled_branch_and_unknown_states():
    assert up.runs_target("nvcr.io/nvidia/driver:580.126.20-ubuntu22.04", WATCH)
    assert up.runs_target("registry:5000/driver:580.126.20", WATCH)
    assert not up.runs_target("nvcr.io/nvidia/driver:580.126.200-ubuntu22.04", WATCH)
    assert not up.runs_target("nvcr.io/nvidia/driver", WATCH)
    precompiled = dict(WATCH, precompiled=True)
    assert up.runs_target("nvcr.io/nvidia/driver:580-6.8.0-60-generic-ubuntu24.04", precompiled)
    assert not up.runs_target("nvcr.io/nvidia/driver:570-6.8.0-60-generic-ubuntu24.04", precompiled)
    with pytest.raises(ValueError, match="node gpu-0: unknown nvidia.com/gpu-driver-upgrade-state 'upgrading'"):
        up.upgrade_progress([_node("gpu-0", "upgrade-required"), _node("gpu-0", "upgrading")], [], WATCH)
    assert up.why_line("x\nAuthorization: Bearer abc.def\n") == "Authorization: Bearer ********"
    assert up.why_line("") == ""
    # a node with a state but no deploy label is still watched (the operator labelled it); without either it is not
    assert list(up.upgrade_progress([_node("a", "upgrade-required", deploy=False), _node("b", deploy=False)], [], WATCH)["nodes"]) == ["a"]


def test_render_mode_reads_no_release_and_may_know_no_crds():
    plan = up.upgrade_plan(_plan(), None, {"crds": [], "node_timeout": 60, "render": True})
    assert plan["action"] == "upgrade" and plan["from_version"] is None
    assert plan["steps"][:2] == ["release gpu-operator in gpu-operator: chart (not read in render mode) -> v26.3.0",
                                 "CRDs first (helm never upgrades them): the crds/ folder of chart v26.3.0 (render mode pulls no chart)"]
    # CRDs that were given are still checked
    with pytest.raises(OperatorInputError, match="crds.0. is not a nvidia.com CustomResourceDefinition"):
        up.upgrade_plan(_plan(), None, {"crds": [{"kind": "Pod"}], "node_timeout": 60, "render": True})


def test_moved_is_a_new_state_a_new_node_or_a_timeout_reached_while_upgrading():
    nodes = [_node("gpu-0", "upgrade-done"), _node("gpu-1", "cordon-required")]
    pods = [_pod("gpu-0"), _pod("gpu-1", "580.105.08")]
    first = up.upgrade_progress(nodes, pods, WATCH, None, 0)
    assert first["moved"] and first["nodes"]["gpu-0"]["status"] == "done"
    # the nodes alone (no pods), as the wait between two polls reads them: the done node does not count as moved
    assert not up.upgrade_progress(nodes, [], WATCH, first, 10)["moved"]
    assert not up.upgrade_progress(nodes, [], WATCH, first, 700)["nodes"]["gpu-0"]["status"] == "done"
    assert up.upgrade_progress(nodes, [], WATCH, first, 700)["moved"] is True   # gpu-1 ran past its 600 s
    assert up.upgrade_progress([nodes[0], _node("gpu-1", "drain-required")], [], WATCH, first, 10)["moved"]
    assert up.upgrade_progress(nodes + [_node("gpu-2", "upgrade-required")], [], WATCH, first, 10)["moved"]
    assert up.upgrade_progress(nodes[:1], [], WATCH, first, 10)["moved"]
    # settled: from the nodes alone, every one at an end (upgrade-done counts; its pod is judged by the full poll)
    assert not first["settled"] and up.upgrade_progress(nodes, [], WATCH, first, 700)["settled"]
    assert up.upgrade_progress([nodes[0], _node("gpu-1", "upgrade-done")], [], WATCH, first, 10)["settled"]


def test_the_smallest_values_are_accepted_and_a_pod_without_the_driver_container_is_not_done():
    plan = _upgrade(node_timeout=1, upgrade_policy={"max_parallel_upgrades": 0, "max_unavailable": 0,
                                                    "wait_for_completion": {"timeout_seconds": 0}})
    assert plan["chart"]["values"]["driver"]["upgradePolicy"] == {"maxParallelUpgrades": 0, "maxUnavailable": 0,
                                                                  "waitForCompletion": {"timeoutSeconds": 0}}
    assert _upgrade(upgrade_policy={"max_unavailable": "0%"})["chart"]["values"]["driver"]["upgradePolicy"] == {"maxUnavailable": "0%"}
    pod = _pod("gpu-0")
    pod["spec"]["containers"] = [{"name": "nvidia-peermem-ctr", "image": "nvcr.io/nvidia/driver:580.126.20-ubuntu22.04"}]
    row = up.upgrade_progress([_node("gpu-0", "upgrade-done")], [pod], WATCH, None, 0)["nodes"]["gpu-0"]
    assert (row["status"], row["image"]) == ("upgrading", "")


def test_a_node_is_stuck_only_past_its_timeout_and_a_clean_rollout_is_ok():
    nodes = [_node("gpu-0", "drain-required")]
    first = up.upgrade_progress(nodes, [], WATCH, None, 100)
    assert up.upgrade_progress(nodes, [], WATCH, first, 700)["nodes"]["gpu-0"]["status"] == "upgrading"   # 600 s: not past
    assert up.upgrade_progress(nodes, [], WATCH, first, 701)["nodes"]["gpu-0"]["status"] == "stuck"
    done = up.upgrade_progress([_node("gpu-0", "upgrade-done"), _node("gpu-1", skip=True)], [_pod("gpu-0")], WATCH, first, 110)
    assert done["finished"] and done["ok"] and done["summary"] == "2 driver nodes: 1 done, 1 skipped"
    assert up.upgrade_progress([], [], WATCH)["summary"] == "0 driver nodes: none"


def test_a_done_node_read_without_its_pod_is_no_move_and_a_node_the_operator_never_labelled_is_stuck_by_name():
    done = up.upgrade_progress([_node("gpu-0", "upgrade-done")], [_pod("gpu-0")], WATCH, None, 0)
    later = up.upgrade_progress([_node("gpu-0", "upgrade-done")], [], WATCH, done, 700)
    assert later["nodes"]["gpu-0"]["status"] == "stuck" and not later["moved"]
    never = up.upgrade_progress([_node("gpu-1")], [], WATCH, None, 0)
    assert up.upgrade_progress([_node("gpu-1")], [], WATCH, never, 601)["lines"] == ["node gpu-1: stuck in no upgrade state (601 s)"]
