# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation filters: snapshot from k8s_info results, results, reports; bad input is refused by name."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import validate

NODE = {"metadata": {"name": "gpu-0", "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"allocatable": {"nvidia.com/gpu": "1"}, "nodeInfo": {"kubeletVersion": "v1.30.4"}}}
PLUGIN = {"metadata": {"name": "nvidia-device-plugin-daemonset-x1", "namespace": "gpu-operator"},
          "spec": {"nodeName": "gpu-0", "containers": [{"name": "p", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]},
          "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _reads(**changes):
    reads = dict(nodes={"resources": [NODE]}, daemonsets={"resources": []}, pods={"resources": [PLUGIN]},
                 cluster_policies={"resources": [], "api_found": False}, nic_cluster_policies={"resources": []})
    reads.update(changes)
    return reads


def test_a_small_cluster_passes_what_applies():
    snapshot = validate.validate_snapshot(_reads(), "c1")
    result = validate.validate_results(snapshot)
    by_id = dict((r["id"], r["status"]) for r in result["results"])
    assert by_id["gpu.device_plugin"] == by_id["gpu.allocatable"] == "passed"
    assert result["summary"]["ok"] and result["exit_status"] == 0
    assert validate.validate_report(result, "counts").startswith("%d checks: 2 passed, 0 failed" % len(result["results"]))
    ctrf = json.loads(validate.validate_report(result, "ctrf", 1, 2))
    assert ctrf["reportFormat"] == "CTRF" and ctrf["results"]["summary"]["start"] == 1
    assert ET.fromstring(validate.validate_report(result, "junit")).get("failures") == "0"
    assert validate.validate_report(result, "markdown").startswith("# Validation of c1")


def test_a_failed_read_ends_as_other_with_its_message():
    snapshot = validate.validate_snapshot(_reads(pods={"failed": True, "msg": "pods is forbidden"}), "c1")
    result = validate.validate_results(snapshot, ["deployment"])
    plugin = [r for r in result["results"] if r["id"] == "gpu.device_plugin"][0]
    assert plugin["status"] == "other"
    assert "pods is forbidden" in plugin["message"]
    assert result["exit_status"] == 9


def test_the_mig_parted_configmap_goes_into_the_snapshot():
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "custom", "namespace": "gpu-operator"},
                  "data": {"config.yaml": "version: v1\nmig-configs:\n  disabled:\n    - devices: all\n      mig-enabled: false\n"}}
    snapshot = validate.validate_snapshot(_reads(), "c", mig_parted_config=config_map)
    assert snapshot["mig_parted"] == {"source": "ConfigMap gpu-operator/custom", "config": {
        "version": "v1", "mig-configs": {"disabled": [{"devices": "all", "mig-enabled": False}]}}}
    assert "mig_parted" not in validate.validate_snapshot(_reads(), "c")


def test_a_host_snapshot():
    snapshot = validate.validate_snapshot({"gpus": [], "pci_gpus": []}, "h1", kind="host")
    assert snapshot["target"] == {"name": "h1", "kind": "host"}


@pytest.mark.parametrize("call, words", [
    (lambda: validate.validate_snapshot(_reads(), ""), "name must be the target's name"),
    (lambda: validate.validate_snapshot(_reads(), "c", kind="vm"), "kind must be kubernetes or host"),
    (lambda: validate.validate_snapshot(["n"], "c"), "reads must map"),
    (lambda: validate.validate_snapshot(dict(_reads(), secrets={"resources": []}), "c"), "unknown reads secrets"),
    (lambda: validate.validate_snapshot(None, "h", kind="host"), "gpu_host fact"),
    (lambda: validate.validate_snapshot(_reads(), "c", gke=["x"]), "gke must be a dict"),
    (lambda: validate.validate_snapshot(_reads(), "c", mig_parted_config="version: v1"), "mig_parted_config must be a ConfigMap"),
    (lambda: validate.validate_results({"target": {}}), "not a validation snapshot"),
    (lambda: validate.validate_results(validate.validate_snapshot(_reads(), "c"), phases="preflight"), "phases must be a list"),
    (lambda: validate.validate_results(validate.validate_snapshot(_reads(), "c"), phases=["later"]), "unknown phase"),
    (lambda: validate.validate_results(validate.validate_snapshot(_reads(), "c"), checks=["no.such"]), "unknown check id"),
    (lambda: validate.validate_report({}, "ctrf"), "must be a validate_results result"),
    (lambda: validate.validate_report({"results": [], "target": "t", "summary": {}}, "html"), "format must be one of"),
    (lambda: validate.validate_snapshot_diff(None, {}), "both snapshots must be mappings"),
    (lambda: validate.validate_snapshot_diff(validate.validate_snapshot(_reads(), "c"), {"version": 1}), "the new snapshot: format"),
])
def test_bad_input_is_refused_by_name(call, words):
    with pytest.raises(AnsibleFilterError) as error:
        call()
    assert str(error.value).startswith("validate_"), str(error.value)
    assert words in str(error.value)


def test_a_diff_of_two_reads():
    before = validate.validate_snapshot(_reads(), "c1")
    node = dict(NODE, status=dict(NODE["status"], allocatable={"nvidia.com/gpu": "0"}))
    after = validate.validate_snapshot(_reads(nodes={"resources": [node]}), "c1")
    assert validate.validate_snapshot_diff(before, after) == ["node gpu-0 allocatable: nvidia.com/gpu 1 -> 0"]


def test_a_snapshot_file_is_read_reduced_and_refused_without_quoting_it():
    snapshot = validate.validate_snapshot(_reads(), "c1")
    planted = dict(snapshot, kubernetes=dict(snapshot["kubernetes"], secrets=[
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"token": "cGxhbnRlZA=="}}]))
    assert validate.validate_snapshot_file(json.dumps(planted), "s.json") == json.loads(json.dumps(snapshot))
    assert validate.validate_snapshot_file(planted) == snapshot
    with pytest.raises(AnsibleFilterError, match=r"^validate_snapshot_file: s\.json is not JSON \(line 1, column 1: Expecting value\)$") as caught:
        validate.validate_snapshot_file('token: planted-in-yaml', "s.json")
    assert "planted" not in str(caught.value)
    with pytest.raises(AnsibleFilterError, match=r"s\.json must hold a snapshot \(a mapping\), got list"):
        validate.validate_snapshot_file("[]", "s.json")
    with pytest.raises(AnsibleFilterError, match=r"s\.json: not a validation snapshot: format is None"):
        validate.validate_snapshot_file({"kind": "List"}, "s.json")


# ------------------------------------------------------------------ the health phase's plan and records

def test_the_health_plan_of_a_cluster_and_of_a_host():
    plan = validate.validate_health_plan(validate.validate_snapshot(_reads(), "c1"))
    assert plan["nodes"] == [{"name": "gpu-0", "model": None, "gpus": 1}]
    assert plan["dcgm"] is None and "nvidia-dcgm" in plan["dcgm_error"]
    host = validate.validate_snapshot({"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}] * 2, "pci_gpus": []}, "h1", kind="host")
    assert validate.validate_health_plan(host)["nodes"] == [{"name": "h1", "model": "NVIDIA H100 80GB HBM3", "gpus": 2}]


def test_the_health_records_of_registered_results():
    created = [{"__validate_health_node": {"name": "gpu-0", "model": "m", "gpus": 8}, "__validate_health_index": 0, "result": {"kind": "Pod"}},
               {"__validate_health_node": {"name": "gpu-1", "model": "m", "gpus": 8}, "__validate_health_index": 1, "failed": False,
                "msg": "Failed to create object: etcd is unavailable"}]
    pods = [{"metadata": {"name": "vhealth-1-dcgm-0"}, "status": {"phase": "Succeeded", "containerStatuses": [
        {"state": {"terminated": {"exitCode": 0}}}]}}]
    logs = [{"__validate_health_pod": {"metadata": {"name": "vhealth-1-dcgm-0"}}, "log": "{}"}]
    records = validate.validate_health_records(created, pods, logs, "vhealth-1-dcgm", 30)
    assert records["gpu-0"] == dict(model="m", gpus=8, output="{}", rc=0, error="")
    assert records["gpu-1"]["error"] == "probe pod vhealth-1-dcgm-1 was not created: Failed to create object: etcd is unavailable"


@pytest.mark.parametrize("call, words", [
    (lambda: validate.validate_health_plan(None), "must be a validation snapshot"),
    (lambda: validate.validate_health_plan(validate.validate_snapshot(_reads(), "c"), dcgm_image=5), "dcgm_image must be an image reference"),
    (lambda: validate.validate_health_records({}, [], [], "p"), "created must be a list"),
    (lambda: validate.validate_health_records([{"x": 1}], [], [], "p"), "not the validate role's registered probe results"),
])
def test_bad_health_input_is_refused_by_name(call, words):
    with pytest.raises(AnsibleFilterError) as error:
        call()
    assert str(error.value).startswith("validate_health_") and words in str(error.value)


def test_a_diff_with_both_runs_results_names_the_checks_that_changed_verdict():
    before = validate.validate_snapshot(_reads(), "c1")
    node = dict(NODE, status=dict(NODE["status"], allocatable={"nvidia.com/gpu": "0"}))
    after = validate.validate_snapshot(_reads(nodes={"resources": [node]}), "c1")
    old, new = validate.validate_results(before), validate.validate_results(after)
    lines = validate.validate_snapshot_diff(before, after, old, json.loads(validate.validate_report(new, "ctrf")))
    assert lines[0] == "node gpu-0 allocatable: nvidia.com/gpu 1 -> 0"
    assert "check gpu.allocatable: passed -> failed: node gpu-0 advertises no GPU resource" in lines
    with pytest.raises(AnsibleFilterError, match="^validate_snapshot_diff: give both runs' results"):
        validate.validate_snapshot_diff(before, after, old)
