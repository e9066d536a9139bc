# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health checks (plugins/plugin_utils/_validate/health.py) on captured probe outputs: DCGM diagnostics,
nvbandwidth and the per-node NCCL loopback of two 8-GPU H100 nodes. Floors are written here as numbers, not read
from the catalog; the outputs are the _perf fixtures (written out in the tools' formats)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import health
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as snap
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite

PERF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_perf", "fixtures")
IDS = ["health.dcgm_diag", "health.nvbandwidth", "health.nccl_loopback"]
MODEL = "NVIDIA-H100-80GB-HBM3"
NV_FLOORS = {MODEL: {"host_to_device_memcpy_ce": 50, "device_to_host_memcpy_ce": 50, "device_to_device_memcpy_read_ce": 300}}


def _read(*parts):
    with open(os.path.join(PERF, *parts), encoding="utf-8") as handle:
        return handle.read()


def _nodes(outputs, **extra):
    return dict((name, dict(dict(output=text, rc=0, error="", model=MODEL, gpus=8), **extra)) for name, text in outputs.items())


def _snapshot(dcgm=None, nvb=None, loop=None, kind="kubernetes", level=1):
    empty = {"resources": []}
    base = snap.build_host("h", {}) if kind == "host" else snap.build_kubernetes("c", empty, empty, empty, empty, empty)
    healthy = {"gpu-0": None, "gpu-1": None}
    base["health"] = dict(
        level=level,
        dcgm=dcgm if dcgm is not None else dict(nodes=_nodes(dict.fromkeys(healthy, _read("dcgm", "level1_pass.json")))),
        nvbandwidth=nvb if nvb is not None else dict(floors=NV_FLOORS, nodes=_nodes(dict.fromkeys(healthy, _read("nvbandwidth", "h100x8_pass.json")))),
        nccl_loopback=loop if loop is not None else dict(floors={MODEL: 300}, nodes=_nodes(dict.fromkeys(
            healthy, _read("nccl_loopback", "h100x8_pass.txt")))))
    return base


def _results(snapshot):
    result = suite.validate(snapshot, phases=["health"])
    return dict((r["id"], r) for r in result["results"])


def test_the_health_checks_run_only_in_the_health_phase_and_only_when_asked_for():
    # besides these, compute_domain.imex_channel (test_compute_domain.py) judges the health phase's IMEX probe
    assert sorted(c["id"] for c in suite.checks() if c["phase"] == "health") == sorted(IDS + ["compute_domain.imex_channel"])
    assert not [r for r in suite.validate(_snapshot())["results"] if r["phase"] == "health"]


@pytest.mark.parametrize("kind", ["kubernetes", "host"])
def test_a_healthy_node_pair_passes_every_health_check_with_one_row_per_node(kind):
    results = _results(_snapshot(kind=kind))
    assert {i: results[i]["status"] for i in IDS} == dict.fromkeys(IDS, "passed")
    assert results["health.dcgm_diag"]["evidence"] == ["gpu-0: dcgmi diag -r 1, DCGM 3.3.7: 9 pass",
                                                       "gpu-1: dcgmi diag -r 1, DCGM 3.3.7: 9 pass"]
    assert "gpu-1 (NVIDIA-H100-80GB-HBM3): device_to_device_memcpy_read_ce lowest 370 GB/s (row 0, column 1), floor 300 GB/s" in \
        results["health.nvbandwidth"]["evidence"]
    assert results["health.nccl_loopback"]["evidence"][0] == (
        "gpu-0 (NVIDIA-H100-80GB-HBM3, 8 GPUs): all_reduce average bus bandwidth 360.0 GB/s, floor 300 GB/s")


def test_a_failing_gpu_is_one_failure_naming_node_gpu_test_and_dcgm_s_reason():
    outputs = {"gpu-0": _read("dcgm", "level2_pass.json"), "gpu-1": _read("dcgm", "level2_gpu3_memory_fail.json")}
    check = _results(_snapshot(dcgm=dict(nodes=_nodes(outputs, rc=0)), level=2))["health.dcgm_diag"]
    assert check["status"] == "failed"
    assert check["message"] == ("gpu-1 GPU 3 GPU Memory: failed - Pending page retirements together with a DBE were detected on GPU 3. "
                                "Drain the GPU and reset it or reboot the node. (DCGM error 83)")
    assert check["cause"] == suite.CHECKS_BY_ID["health.dcgm_diag"].cause


def test_a_skipped_sub_test_is_not_a_pass():
    outputs = {"gpu-0": _read("dcgm", "level2_pass.json"), "gpu-1": _read("dcgm", "level2_pcie_skipped.json")}
    check = _results(_snapshot(dcgm=dict(nodes=_nodes(outputs)), level=2))["health.dcgm_diag"]
    assert check["status"] == "other"
    assert "gpu-1 GPU 0 PCIe: skipped (PCIe test skipped" in check["message"]
    assert "a skipped sub-test is not a pass" in check["message"]


def test_a_warning_is_reported_and_does_not_fail():
    outputs = {"gpu-0": _read("dcgm", "level2_gpu5_pcie_warn.json")}
    check = _results(_snapshot(dcgm=dict(nodes=_nodes(outputs)), level=2))["health.dcgm_diag"]
    assert check["status"] == "passed"
    assert "gpu-0 GPU 5 PCIe: warning - GPU 5: PCIe link width x8 is lower than the maximum x16" in check["evidence"]
    assert "gpu-0: dcgmi diag -r 2, DCGM 3.3.7: 24 pass, 1 warn" in check["evidence"]


def test_a_failure_on_one_node_is_reported_even_when_another_node_cannot_decide():
    outputs = {"gpu-0": _read("dcgm", "level2_killed.json"), "gpu-1": _read("dcgm", "level2_gpu3_memory_fail.json")}
    check = _results(_snapshot(dcgm=dict(nodes=_nodes(outputs, rc=137))))["health.dcgm_diag"]
    assert check["status"] == "failed"
    assert check["message"].startswith("gpu-1 GPU 3 GPU Memory: failed")
    assert any(e.startswith("cannot decide: gpu-0: the JSON document is cut short") for e in check["evidence"])


@pytest.mark.parametrize("record, text", [
    (dict(output=_read("dcgm", "level2_killed.json"), rc=137), "gpu-0: the JSON document is cut short or malformed"),
    (dict(output=_read("dcgm", "hostengine_unreachable.txt"), rc=255), "no JSON document in the output"),
    (dict(output="", rc=None, error="pod vhealth-1-dcgm-0 did not finish in 600 s"), "the diagnostic could not run: pod vhealth-1-dcgm-0"),
    (dict(output=_read("dcgm", "level1_pass.json"), rc=226), "dcgmi exited with code 226 but no test failed"),
])
def test_a_killed_or_broken_probe_is_other_never_passed(record, text):
    check = _results(_snapshot(dcgm=dict(nodes={"gpu-0": dict(record, model=MODEL)})))["health.dcgm_diag"]
    assert check["status"] == "other", check
    assert text in check["message"]


def test_the_dcgm_4_layout_names_the_failing_gpu():
    check = _results(_snapshot(dcgm=dict(nodes=_nodes({"gpu-0": _read("dcgm", "dcgm4_gpu1_memory_fail.json")}))))["health.dcgm_diag"]
    assert check["status"] == "failed" and check["message"].startswith("gpu-0 GPU 1 memory: failed - Memory test failed on GPU 1")


def test_an_unknown_status_is_other():
    text = '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "Memory", "results": ' \
           '[{"gpu_ids": "0", "status": "Not Run"}]}]}]}}'
    check = _results(_snapshot(dcgm=dict(nodes=_nodes({"gpu-0": text}))))["health.dcgm_diag"]
    assert check["status"] == "other" and "status 'Not Run' is not one DCGM documents" in check["message"]


@pytest.mark.parametrize("section, status, text", [
    (dict(skipped="validate_health_dcgm is false: no diagnostic was asked for"), "skipped", "validate_health_dcgm is false"),
    (dict(error="the GPU Operator's standalone DCGM host engine (DaemonSet nvidia-dcgm) is not running"), "other",
     "the probe could not run: the GPU Operator's standalone DCGM host engine"),
    (dict(nodes={}), "other", "the probe recorded no node"),
])
def test_a_probe_not_asked_for_is_skipped_and_one_that_could_not_run_is_other(section, status, text):
    check = _results(_snapshot(dcgm=section))["health.dcgm_diag"]
    assert check["status"] == status and text in check["message"]


def test_a_snapshot_without_health_output_skips_with_the_reason():
    base = _snapshot()
    del base["health"]
    results = _results(base)
    assert {i: results[i]["status"] for i in IDS} == dict.fromkeys(IDS, "skipped")
    assert "the snapshot holds no health probe output" in results["health.nvbandwidth"]["message"]


def test_a_missing_section_is_other():
    base = _snapshot()
    base["health"]["nvbandwidth"] = None
    assert _results(base)["health.nvbandwidth"]["status"] == "other"


# ------------------------------------------------------------------ nvbandwidth

def test_a_slow_gpu_pair_fails_naming_node_and_pair():
    outputs = {"gpu-0": _read("nvbandwidth", "h100x8_pass.json"), "gpu-1": _read("nvbandwidth", "h100x8_gpu2_to_6_slow.json")}
    check = _results(_snapshot(nvb=dict(floors=NV_FLOORS, nodes=_nodes(outputs))))["health.nvbandwidth"]
    assert check["status"] == "failed"
    assert check["message"] == ("gpu-1: device_to_device_memcpy_read_ce 21.7 GB/s between row 2 and column 6 (GPU index; CPU for host "
                                "rows) is below the 300 GB/s floor of NVIDIA-H100-80GB-HBM3")


def test_a_value_at_the_floor_passes():
    floors = {MODEL: dict(NV_FLOORS[MODEL], device_to_device_memcpy_read_ce=370.0)}
    check = _results(_snapshot(nvb=dict(floors=floors, nodes=_nodes({"gpu-0": _read("nvbandwidth", "h100x8_pass.json")}))))["health.nvbandwidth"]
    assert check["status"] == "passed"


def test_an_errored_testcase_fails():
    check = _results(_snapshot(nvb=dict(floors=NV_FLOORS, nodes=_nodes({"gpu-0": _read("nvbandwidth", "d2h_error.json")}))))["health.nvbandwidth"]
    assert check["status"] == "failed" and check["message"] == "gpu-0: device_to_host_memcpy_ce ended Error"


def test_without_a_floor_for_the_model_the_row_is_report_only_other():
    check = _results(_snapshot(nvb=dict(nodes=_nodes({"gpu-0": _read("nvbandwidth", "h100x8_pass.json")}))))["health.nvbandwidth"]
    assert check["status"] == "other"
    assert ("gpu-0: no host_to_device_memcpy_ce floor for GPU model NVIDIA-H100-80GB-HBM3 (report only; NVIDIA publishes no nvbandwidth "
            "floor): set validate_health_nvbandwidth_floors, for example from this run's 55.1 GB/s on a node known to be good") in check["message"]
    assert "gpu-0: no device_to_device_memcpy_read_ce floor" in check["message"] and "this run's 370 GB/s" in check["message"]


def test_a_waived_testcase_with_a_floor_is_other_and_without_one_is_left_out():
    one = _nodes({"gpu-0": _read("nvbandwidth", "one_gpu_waived.json")})
    check = _results(_snapshot(nvb=dict(floors=NV_FLOORS, nodes=one)))["health.nvbandwidth"]
    assert check["status"] == "other" and "device_to_device_memcpy_read_ce was waived by nvbandwidth" in check["message"]
    floors = {MODEL: {"host_to_device_memcpy_ce": 50, "device_to_host_memcpy_ce": 50}}
    assert _results(_snapshot(nvb=dict(floors=floors, nodes=one)))["health.nvbandwidth"]["status"] == "passed"


@pytest.mark.parametrize("record, text", [
    (dict(output=_read("nvbandwidth", "killed.json"), rc=137), "gpu-0: the JSON document is cut short or malformed"),
    (dict(output=_read("nvbandwidth", "garbage.txt"), rc=127), "no JSON document"),
    (dict(output="", error="pod did not start"), "nvbandwidth could not run: pod did not start"),
    (dict(output='{"nvbandwidth": {"testcases": [{"name": "host_to_device_memcpy_ce", "status": "Passed"}]}}', rc=0),
     "host_to_device_memcpy_ce has no measured cell"),
])
def test_a_broken_nvbandwidth_output_is_other(record, text):
    check = _results(_snapshot(nvb=dict(floors=NV_FLOORS, nodes={"gpu-0": dict(record, model=MODEL)})))["health.nvbandwidth"]
    assert check["status"] == "other" and text in check["message"], check


# ------------------------------------------------------------------ NCCL loopback

def test_a_slow_node_fails_by_name_before_any_pair_is_tested():
    outputs = {"gpu-0": _read("nccl_loopback", "h100x8_pass.txt"), "gpu-1": _read("nccl_loopback", "h100x8_slow.txt")}
    check = _results(_snapshot(loop=dict(floors={MODEL: 300}, nodes=_nodes(outputs))))["health.nccl_loopback"]
    assert check["status"] == "failed"
    assert check["message"] == "gpu-1: average bus bandwidth 71.25 GB/s is below the 300 GB/s threshold"


def test_wrong_values_fail_the_loopback():
    check = _results(_snapshot(loop=dict(floors={MODEL: 300}, nodes=_nodes({"gpu-0": _read("nccl_loopback", "h100x8_wrong.txt")}))))
    assert check["health.nccl_loopback"]["status"] == "failed"
    assert "gpu-0: 6 wrong values (#wrong)" in check["health.nccl_loopback"]["message"]


@pytest.mark.parametrize("record, floors, text", [
    (dict(output=_read("nccl_loopback", "h100x8_killed.txt"), rc=137), {MODEL: 300}, "no complete all_reduce_perf table (killed or cut short; exit code 137)"),
    (dict(output="garbage", rc=1), {MODEL: 300}, "no complete all_reduce_perf table"),
    (dict(output="", error="the pod was evicted"), {MODEL: 300}, "the loopback could not run: the pod was evicted"),
    (dict(output=_read("nccl_loopback", "h100x8_pass.txt"), rc=0), {}, "no loopback floor for GPU model NVIDIA-H100-80GB-HBM3"),
    (dict(output=_read("nccl_loopback", "h100x8_pass.txt"), rc=1), {MODEL: 300}, "exited with code 1 after a complete table"),
])
def test_a_loopback_that_cannot_decide_is_other(record, floors, text):
    check = _results(_snapshot(loop=dict(floors=floors, nodes={"gpu-0": dict(record, model=MODEL, gpus=8)})))["health.nccl_loopback"]
    assert check["status"] == "other" and text in check["message"], check


# ------------------------------------------------------------------ the probes' plan

def _node(name, labels, gpus):
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"nvidia.com/gpu": gpus} if gpus is not None else {}}}


def test_the_plan_lists_whole_gpu_nodes_and_the_dcgm_host_engine():
    nodes = {"resources": [_node("gpu-0", {"nvidia.com/gpu.product": MODEL, "nvidia.com/gpu.present": "true"}, "8"),
                           _node("mig-0", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.present": "true"}, "0"),
                           _node("cpu-0", {}, None)]}
    dcgm = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvidia-dcgm", "namespace": "gpu-operator"},
            "spec": {"template": {"spec": {"containers": [{"name": "nvidia-dcgm-ctr", "image": "nvcr.io/nvidia/cloud-native/dcgm:3.3.7-1-ubuntu22.04"}]}}}}
    snapshot = snap.build_kubernetes("c", nodes, {"resources": [dcgm]}, {"resources": []}, {"resources": []}, {"resources": []})
    plan = health.probe_plan(snapshot)
    assert plan["nodes"] == [dict(name="gpu-0", model=MODEL, gpus=8)]
    assert plan["shared"] == ["mig-0"]
    assert plan["dcgm"] == dict(namespace="gpu-operator", service="nvidia-dcgm", port=5555, image="nvcr.io/nvidia/cloud-native/dcgm:3.3.7-1-ubuntu22.04")
    assert plan["dcgm_error"] is None and plan["no_nodes"] is None and plan["gpu_resource"] == "nvidia.com/gpu"
    assert health.probe_plan(snapshot, dcgm_image="mirror/dcgm:1")["dcgm"]["image"] == "mirror/dcgm:1"


def test_without_the_standalone_host_engine_the_plan_says_how_to_enable_it():
    nodes = {"resources": [_node("gpu-0", {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, "8")]}
    snapshot = snap.build_kubernetes("c", nodes, {"resources": []}, {"resources": []}, {"resources": []}, {"resources": []})
    plan = health.probe_plan(snapshot)
    assert plan["nodes"] == [dict(name="gpu-0", model="nvidia-h100-80gb", gpus=8)]
    assert plan["dcgm"] is None
    assert "spec.dcgm.enabled: true" in plan["dcgm_error"] and "health.dcgm_diag" in plan["dcgm_error"]


def _pod(name, phase, exit_code=None):
    status = {"phase": phase}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "probe", "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]
    return {"metadata": {"name": name}, "status": status}


def test_the_records_of_a_wave_keep_partial_output_exit_codes_and_why_a_pod_has_none():
    nodes = [dict(name="n%d" % i, model=MODEL, gpus=8, pod="p-%d" % i, error=None) for i in range(5)]
    nodes[4]["error"] = "pods \"p-4\" is forbidden"
    pods = [_pod("p-0", "Succeeded", 0), _pod("p-1", "Failed", 137), _pod("p-2", "Running"), _pod("p-3", "Failed", 1)]
    logs = [dict(pod="p-0", log="done", error=None), dict(pod="p-1", log="{\"partial\": ", error=None),
            dict(pod="p-2", log="half", error=None), dict(pod="p-3", log="", error="container not found")]
    records = health.probe_records(nodes, pods, logs, timeout=60)
    assert records["n0"] == dict(model=MODEL, gpus=8, output="done", rc=0, error="")
    assert records["n1"] == dict(model=MODEL, gpus=8, output="{\"partial\": ", rc=137, error="")
    assert records["n2"]["output"] == "half" and records["n2"]["rc"] is None
    assert records["n2"]["error"] == "probe pod p-2 did not finish within 60 s (phase Running)"
    assert records["n3"]["error"] == "the log of probe pod p-3 could not be read: container not found" and records["n3"]["rc"] == 1
    assert records["n4"]["error"] == "probe pod p-4 was not created: pods \"p-4\" is forbidden"
    gone = health.probe_records([dict(name="n", pod="p-9")], [], [])
    assert gone["n"]["error"] == "probe pod p-9 is gone (deleted or evicted before its log was read)"


def test_a_cluster_without_whole_gpus_and_a_host_without_gpus_say_there_is_nothing_to_probe():
    nodes = {"resources": [_node("mig-0", {"nvidia.com/gpu.present": "true"}, "0")]}
    snapshot = snap.build_kubernetes("c", nodes, {"resources": []}, {"resources": []}, {"resources": []}, {"resources": []})
    plan = health.probe_plan(snapshot)
    assert plan["nodes"] == [] and plan["shared"] == ["mig-0"]
    assert plan["no_nodes"] == "no node advertises whole GPUs (nvidia.com/gpu): nothing to probe"
    host = health.probe_plan(snap.build_host("h", {"gpus": []}))
    assert host["nodes"] == [dict(name="h", model=None, gpus=0)] and host["no_nodes"] == "nvidia-smi lists no GPU on the host"


def test_a_whole_node_failure_and_an_error_beside_a_complete_output():
    text = '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{"name": "Persistence Mode", "results": ' \
           '[{"status": "Fail", "warnings": ["persistence mode is off"]}]}]}]}}'
    check = _results(_snapshot(dcgm=dict(nodes=_nodes({"gpu-0": text}))))["health.dcgm_diag"]
    assert check["message"] == "gpu-0 all GPUs Persistence Mode: failed - persistence mode is off"
    # a record with an error beside a complete output is judged by the output; without either, the output says why
    finished = _nodes({"gpu-0": _read("dcgm", "level1_pass.json")}, error="probe pod p did not finish within 60 s (phase Running)")
    assert _results(_snapshot(dcgm=dict(nodes=finished)))["health.dcgm_diag"]["status"] == "passed"
    nothing = _results(_snapshot(dcgm=dict(nodes=_nodes({"gpu-0": ""})), nvb=dict(floors=NV_FLOORS, nodes=_nodes({"gpu-0": ""})),
                                 loop=dict(floors={MODEL: 300}, nodes=_nodes({"gpu-0": ""}))))
    assert "gpu-0: no JSON document in the output" in nothing["health.dcgm_diag"]["message"]
    assert "gpu-0: no JSON document in the output" in nothing["health.nvbandwidth"]["message"]
    assert "gpu-0: no complete all_reduce_perf table" in nothing["health.nccl_loopback"]["message"]
    complete = _nodes({"gpu-0": _read("nvbandwidth", "h100x8_pass.json")}, error="late")
    assert _results(_snapshot(nvb=dict(floors=NV_FLOORS, nodes=complete)))["health.nvbandwidth"]["status"] == "passed"
    complete = _nodes({"gpu-0": _read("nccl_loopback", "h100x8_pass.txt")}, error="late")
    assert _results(_snapshot(loop=dict(floors={MODEL: 300}, nodes=complete)))["health.nccl_loopback"]["status"] == "passed"


def test_a_long_error_is_cut_at_300_characters():
    check = _results(_snapshot(dcgm=dict(nodes={"gpu-0": dict(output="", error="x" * 400)})))["health.dcgm_diag"]
    assert "x" * 300 + ")" in check["message"] and "x" * 301 not in check["message"]


def _dcgm_daemonset(*containers):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvidia-dcgm", "namespace": "gpu-operator"},
            "spec": {"template": {"spec": {"containers": list(containers)}}}}


def test_the_plan_s_gpu_counts_and_dcgm_image():
    nodes = {"resources": [_node("one", {"nvidia.com/gpu.present": "true"}, "1"),
                           {"metadata": {"name": "cap", "labels": {"nvidia.com/gpu.present": "true"}},
                            "status": {"allocatable": {"nvidia.com/gpu": "0"}, "capacity": {"nvidia.com/gpu": "8"}}},
                           {"metadata": {"name": "caponly", "labels": {"nvidia.com/gpu.present": "true"}},
                            "status": {"capacity": {"nvidia.com/gpu": "4"}}},
                           _node("bad", {"nvidia.com/gpu.present": "true"}, "many"),
                           {"metadata": {"name": "mig", "labels": {"nvidia.com/gpu.present": "true"}},
                            "status": {"allocatable": {"nvidia.com/mig-1g.10gb": "7"}}}]}

    def plan(*containers):
        snapshot = snap.build_kubernetes("c", nodes, {"resources": [_dcgm_daemonset(*containers)]}, {"resources": []},
                                         {"resources": []}, {"resources": []})
        return health.probe_plan(snapshot)
    first = plan({"name": "sidecar", "image": "busybox:1"}, {"name": "nvidia-dcgm-ctr", "image": "dcgm:own"})
    assert [(n["name"], n["gpus"]) for n in first["nodes"]] == [("one", 1), ("caponly", 4)]
    assert first["shared"] == ["bad", "cap", "mig"]
    assert first["dcgm"]["image"] == "dcgm:own"
    assert plan({"name": "renamed", "image": "dcgm:renamed"})["dcgm"]["image"] == "dcgm:renamed"
    assert plan()["dcgm"]["image"].startswith("nvcr.io/nvidia/cloud-native/dcgm:")


def test_the_plan_of_a_host_names_its_gpu_model_and_count():
    # the model is the first GPU's (nvidia-smi lists them in index order)
    plan = health.probe_plan(snap.build_host("h", {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}, {"name": "NVIDIA H100 NVL"}]}))
    assert plan["nodes"] == [dict(name="h", model="NVIDIA H100 80GB HBM3", gpus=2)] and plan["no_nodes"] is None and plan["dcgm"] is None


def test_a_finished_pod_with_an_empty_log_has_no_error_of_its_own():
    records = health.probe_records([dict(name="n", pod="p")], [_pod("p", "Succeeded", 0)], [dict(pod="p", log="", error=None)])
    assert records["n"] == dict(model=None, gpus=None, output="", rc=0, error="")


def test_the_loopback_of_each_node_as_the_pairwise_checks_read_it():
    outputs = {"gpu-0": _read("nccl_loopback", "h100x8_pass.txt"), "gpu-1": _read("nccl_loopback", "h100x8_slow.txt"),
               "gpu-2": _read("nccl_loopback", "h100x8_killed.txt")}
    states = health.loopbacks(_snapshot(loop=dict(floors={MODEL: 300}, nodes=_nodes(outputs))))
    assert states["gpu-0"] == ("passed", "gpu-0 (NVIDIA-H100-80GB-HBM3, 8 GPUs): all_reduce average bus bandwidth 360.0 GB/s, floor 300 GB/s", [])
    assert states["gpu-1"][0] == "failed" and states["gpu-1"][2] == ["gpu-1: average bus bandwidth 71.25 GB/s is below the 300 GB/s threshold"]
    assert states["gpu-2"][0] == "undecided" and states["gpu-2"][1] is None
    # nothing to read: no health phase, a loopback not asked for or one that could not run
    no_health = _snapshot()
    del no_health["health"]
    for snapshot in (no_health, _snapshot(loop=dict(skipped="validate_health_probe_image is empty")), _snapshot(loop=dict(error="forbidden")),
                     _snapshot(loop=dict(floors={MODEL: 300}, nodes=None))):
        assert health.loopbacks(snapshot) == {}
