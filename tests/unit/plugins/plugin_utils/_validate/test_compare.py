# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Before and after a GPU Operator or GKE upgrade: the snapshots' differences and the checks that changed verdict,
from validate_results results and from the CTRF reports the validate role writes."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import compare, report, suite

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"


def _operator_upgrade(data):
    """What a driver upgrade of the GPU Operator changes on the MIG fixture cluster: the driver version of the policy,
    the driver DaemonSet's image, the upgrade-state label, and one node left without GPUs."""
    policy = data["kubernetes"]["cluster_policies"][0]
    policy["spec"].setdefault("driver", {})["version"] = "580.126.20"
    for node in data["kubernetes"]["nodes"]:
        node["metadata"]["labels"][UPGRADE_STATE] = "upgrade-done"
    node = data["kubernetes"]["nodes"][0]
    node["metadata"]["labels"][UPGRADE_STATE] = "upgrade-failed"
    for key in list(node["status"]["allocatable"]):
        if key.startswith("nvidia.com/"):
            node["status"]["allocatable"][key] = "0"


def test_an_operator_upgrade_names_versions_labels_and_the_checks_it_broke(load_raw, build_snapshot):
    data = load_raw("gpu-operator-mig")
    data["kubernetes"]["cluster_policies"][0]["spec"].setdefault("driver", {})["version"] = "580.82.07"
    before = build_snapshot(data)
    upgraded = copy.deepcopy(data)
    _operator_upgrade(upgraded)
    after = build_snapshot(upgraded)
    old, new = suite.validate(before), suite.validate(after)
    lines = compare.compare(before, after, old, new)
    node = data["kubernetes"]["nodes"][0]["metadata"]["name"]
    assert "node %s label: %s (none) -> upgrade-failed" % (node, UPGRADE_STATE) in lines
    assert "cluster policy cluster-policy: driver.version 580.82.07 -> 580.126.20" in lines
    checks = [line for line in lines if line.startswith("check ")]
    # the one fault fails one check; the check that cannot judge the node any more says why it skipped it
    assert checks == ["check gpu.allocatable: passed -> failed: node %s advertises no GPU resource" % node,
                      "check gpu.requests_advertised: passed -> skipped: skipped: no pod requests a GPU resource: pod ml/trainer: "
                      "not judged, GPU node %s advertises no GPU resource" % node], checks
    # the snapshot's lines come first, then the verdicts
    assert lines.index(checks[0]) > max(i for i, line in enumerate(lines) if not line.startswith("check "))
    # the same from the CTRF reports the validate role writes (json round trip, as read back from ctrf.json)
    ctrf = [json.loads(json.dumps(report.ctrf(r["results"], r["target"], 0, 0))) for r in (old, new)]
    assert compare.compare(before, after, *ctrf) == lines
    assert compare.compare(before, before, old, old) == []


def test_checks_added_gone_and_recovered():
    old = {"results": [{"id": "a", "status": "failed", "message": "x"}, {"id": "b", "status": "passed"},
                       {"id": "c", "status": "other", "message": "m"}]}
    new = {"results": [{"id": "a", "status": "passed", "message": "ok now"}, {"id": "c", "status": "other", "message": "n"},
                       {"id": "d", "status": "skipped", "message": "no  MIG\nnodes"}]}
    assert compare.verdict_changes(old, new) == [
        "check a: failed -> passed", "check b: passed -> (not run)", "check d: (not run) -> skipped: no MIG nodes"]


def test_gke_versions_and_pools(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    before = build_snapshot(data)
    data["gke"]["cluster"]["current_master_version"] = "1.33.5-gke.1125000"
    data["gke"]["node_pools"][0]["version"] = "1.33.5-gke.1125000"
    pool = data["gke"]["node_pools"][0]["name"]
    lines = compare.compare(before, build_snapshot(data))
    assert lines == ["GKE control plane: 1.32.2-gke.1489001 -> 1.33.5-gke.1125000",
                     "GKE node pool %s: version 1.32.2-gke.1489001 -> 1.33.5-gke.1125000" % pool]


@pytest.mark.parametrize("old, new, words", [
    ({"results": []}, None, "give both runs' results"),
    ([], {"results": []}, "the old results must be a validate_results result or a CTRF report"),
    ({"results": []}, {"reportFormat": "CTRF", "results": {}}, "the new results are neither"),
    ({"summary": {}}, {"results": []}, "the old results are neither"),
    ({"results": [{"id": "a", "status": "green"}]}, {"results": []}, "the old results: a check needs a name and a status"),
    ({"results": [{"status": "passed"}]}, {"results": []}, "got None: 'passed'"),
])
def test_bad_results_are_refused_by_name(load_raw, build_snapshot, old, new, words):
    snapshot = build_snapshot(load_raw("host"))
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        compare.compare(snapshot, snapshot, old, new)


def test_a_ctrf_message_loses_only_the_cause_and_fix_the_report_wrote_around_it():
    def ctrf(*tests):
        return {"reportFormat": "CTRF", "results": {"tests": list(tests)}}
    old = ctrf({"name": "a", "status": "passed"}, {"name": "b", "status": "passed"})
    new = ctrf({"name": "a", "status": "failed", "message": "Cause. node x is down Fix: fix it", "extra": {"cause": "Cause.", "fix": "fix it"}},
               {"name": "b", "status": "other", "message": "written by hand", "extra": {"cause": "Other cause.", "fix": "hand"}})
    assert compare.verdict_changes(old, new) == ["check a: passed -> failed: node x is down", "check b: passed -> other: written by hand"]
