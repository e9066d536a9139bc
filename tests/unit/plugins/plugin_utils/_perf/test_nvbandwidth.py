# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvbandwidth -j`` parsing (plugins/plugin_utils/_perf/nvbandwidth.py) over written-out outputs of an 8-GPU H100
node (passing, one slow GPU pair, an errored testcase behind nvbandwidth's own warning), a one-GPU node whose
device-to-device tests are waived, a run killed mid-document and a binary that could not start."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import nvbandwidth

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nvbandwidth")


def _read(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def test_a_passing_run_has_its_testcases_and_matrices():
    parsed = nvbandwidth.parse(_read("h100x8_pass.json"))
    assert parsed["version"] == "v0.8" and parsed["driver"] == "550.90.07"
    d2d = parsed["testcases"]["device_to_device_memcpy_read_ce"]
    assert d2d["status"] == "Passed" and len(d2d["matrix"]) == 8
    assert d2d["matrix"][0][0] is None and d2d["matrix"][0][1] == 370.0
    assert parsed["testcases"]["host_to_device_memcpy_ce"]["matrix"] == [[55.1] * 8]
    assert parsed["testcases"]["all_to_one_write_ce"] == dict(status="Waived", description=None, matrix=[])


def test_the_lowest_cell_names_the_gpu_pair():
    parsed = nvbandwidth.parse(_read("h100x8_gpu2_to_6_slow.json"))
    assert nvbandwidth.lowest(parsed["testcases"]["device_to_device_memcpy_read_ce"]["matrix"]) == (21.7, 2, 6)
    assert nvbandwidth.lowest([[None, None]]) is None
    assert nvbandwidth.lowest([]) is None


def test_a_one_gpu_node_waives_device_to_device():
    parsed = nvbandwidth.parse(_read("one_gpu_waived.json"))
    assert parsed["testcases"]["device_to_device_memcpy_read_ce"]["status"] == "Waived"
    assert parsed["testcases"]["host_to_device_memcpy_ce"]["matrix"] == [[55.1]]


def test_warnings_around_the_document_are_ignored_and_an_error_status_is_kept():
    parsed = nvbandwidth.parse(_read("d2h_error.json"))
    assert parsed["testcases"]["device_to_host_memcpy_ce"] == dict(status="Error", description="memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
                                                                   matrix=[])


@pytest.mark.parametrize("text, message", [
    (_read("killed.json"), "cut short or malformed"),
    (_read("garbage.txt"), "no JSON document"),
    ("", "no JSON document"),
    ('{"nvbandwidth": {"testcases": []}}', "no nvbandwidth.testcases"),
    ('{"other": 1}', "no nvbandwidth.testcases"),
])
def test_outputs_without_a_document_are_errors(text, message):
    with pytest.raises(nvbandwidth.BandwidthOutputError, match=message):
        nvbandwidth.parse(text)


def test_a_testcase_without_a_name_is_left_out():
    parsed = nvbandwidth.parse('{"nvbandwidth": {"testcases": [{"status": "Passed"}, {"name": "x", "status": "Passed", '
                               '"bandwidth_matrix": [["1.5", "bad"]]}]}}')
    assert parsed["testcases"] == {"x": dict(status="Passed", description=None, matrix=[[1.5, None]])}


def test_text_right_after_the_document_is_ignored():
    parsed = nvbandwidth.parse(_read("h100x8_pass.json").rstrip() + "Done.\n")
    assert parsed["testcases"]["host_to_device_memcpy_ce"]["status"] == "Passed"
