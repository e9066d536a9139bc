# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dcgmi diag -j`` parsing (plugins/plugin_utils/_perf/dcgm_diag.py) over written-out outputs in the layout of
DCGM's JsonOutput: a passing level 1 and level 2 run of an 8-GPU node, a memory failure on GPU 3, a skipped PCIe
test, a warning, a run killed mid-document, a host engine that cannot be reached, a runtime error and the later
(DCGM 4) layout."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import dcgm_diag

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "dcgm")


def _read(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def test_a_passing_level_1_run_is_nine_deployment_rows_for_all_gpus():
    parsed = dcgm_diag.parse(_read("level1_pass.json"))
    assert parsed["version"] == "3.3.7" and parsed["driver"] == "550.90.07"
    assert len(parsed["rows"]) == 9
    assert {r["status"] for r in parsed["rows"]} == {"pass"}
    assert parsed["rows"][0] == dict(category="Deployment", test="Denylist", gpus=["0", "1", "2", "3", "4", "5", "6", "7"],
                                     status="pass", raw_status="Pass", warnings=[], info=[])


def test_level_2_has_one_row_per_gpu_for_the_hardware_tests():
    rows = dcgm_diag.parse(_read("level2_pass.json"))["rows"]
    memory = [r for r in rows if r["test"] == "GPU Memory"]
    assert [r["gpus"] for r in memory] == [[str(i)] for i in range(8)]
    assert len(rows) == 9 + 8 + 8


def test_a_failing_gpu_keeps_its_id_and_dcgm_s_reason_with_the_error_code():
    rows = dcgm_diag.parse(_read("level2_gpu3_memory_fail.json"))["rows"]
    failed = [r for r in rows if r["status"] == "fail"]
    assert len(failed) == 1
    assert failed[0]["gpus"] == ["3"] and failed[0]["test"] == "GPU Memory" and failed[0]["category"] == "Hardware"
    assert failed[0]["warnings"] == ["Pending page retirements together with a DBE were detected on GPU 3. Drain the GPU and "
                                     "reset it or reboot the node. (DCGM error 83)"]


def test_a_skipped_test_is_skip_with_its_info_and_a_warning_is_warn():
    skipped = [r for r in dcgm_diag.parse(_read("level2_pcie_skipped.json"))["rows"] if r["status"] == "skip"]
    assert len(skipped) == 8 and all(r["test"] == "PCIe" for r in skipped)
    assert "PCIe test skipped" in skipped[0]["info"][0]
    warned = [r for r in dcgm_diag.parse(_read("level2_gpu5_pcie_warn.json"))["rows"] if r["status"] == "warn"]
    assert [(r["gpus"], r["warnings"]) for r in warned] == [(["5"], ["GPU 5: PCIe link width x8 is lower than the maximum x16"])]


def test_the_dcgm_4_layout_is_read_by_entity():
    parsed = dcgm_diag.parse(_read("dcgm4_gpu1_memory_fail.json"))
    assert parsed["version"] == "4.2.3" and parsed["driver"] == "570.124.06"
    failed = [r for r in parsed["rows"] if r["status"] == "fail"]
    assert [(r["test"], r["gpus"], r["warnings"]) for r in failed] == [
        ("memory", ["1"], ["Memory test failed on GPU 1: 12 errors found (DCGM error 7)"])]
    assert len(parsed["rows"]) == 8


@pytest.mark.parametrize("name, text", [
    ("level2_killed.json", "cut short or malformed"),
    ("hostengine_unreachable.txt", "no JSON document"),
    ("runtime_error.json", "DCGM could not run the diagnostic: Cannot run diagnostic: the GPUs are in use"),
])
def test_outputs_without_a_finished_diagnostic_are_errors_that_say_why(name, text):
    with pytest.raises(dcgm_diag.DiagOutputError, match=text):
        dcgm_diag.parse(_read(name))


@pytest.mark.parametrize("text, message", [
    ("", "no JSON document"),
    (None, "no JSON document"),
    ("[1, 2]", "no JSON document"),
    ('{"DCGM GPU Diagnostic": {"test_categories": }}', "cut short or malformed"),
    ('["a"] {}', "has no 'DCGM GPU Diagnostic'"),
    ('{"other": {}}', "has no 'DCGM GPU Diagnostic' / 'DCGM Diagnostic' object"),
    ('{"DCGM GPU Diagnostic": {"test_categories": []}}', "lists no test result"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{"name": "x", "results": []}]}]}}',
     "lists no test result"),
])
def test_garbage_is_an_error(text, message):
    with pytest.raises(dcgm_diag.DiagOutputError, match=message):
        dcgm_diag.parse(text)


def test_a_status_dcgm_does_not_document_is_unknown_never_pass():
    text = '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "Memory", "results": ' \
           '[{"gpu_ids": "0", "status": "Not Run"}, {"gpu_ids": "1", "status": "PASS"}, {"gpu_ids": "2", "status": "SKIPPED"}]}]}]}}'
    rows = dcgm_diag.parse(text)["rows"]
    assert [(r["gpus"], r["status"], r["raw_status"]) for r in rows] == [
        (["0"], "unknown", "Not Run"), (["1"], "pass", "PASS"), (["2"], "skip", "SKIPPED")]


def test_warnings_as_text_or_records_and_a_result_without_gpu():
    text = '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{"name": "Inforom", "results": ' \
           '[{"status": "Warn", "warnings": "inforom checksum", "info": [{"info": "read 3 objects"}, ""]}]}]}]}}'
    row = dcgm_diag.parse(text)["rows"][0]
    assert row["gpus"] == [] and row["warnings"] == ["inforom checksum"] and row["info"] == ["read 3 objects"]


def test_the_later_layout_keeps_each_test_s_category_and_text_right_after_the_document_is_ignored():
    rows = dcgm_diag.parse(_read("dcgm4_gpu1_memory_fail.json").rstrip() + "Done.\n")["rows"]
    assert [r["category"] for r in rows[::4]] == ["Deployment", "Hardware"]
    text = '{"DCGM Diagnostic": {"tests": [{"name": "software", "results": [{"entity_id": 0, "status": "Pass"}]}]}}'
    assert dcgm_diag.parse(text)["rows"][0]["category"] == ""
