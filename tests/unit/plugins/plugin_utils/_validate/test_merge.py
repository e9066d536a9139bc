# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One report from the slices' per-target CTRF reports (plugins/plugin_utils/_validate/merge.py): the merged CTRF is
valid against the published schema, counts every test once, and a missing or stale report is one `other` test."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.validate import validate_merge
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import merge, report

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ctrf.schema.json")


def result(check, status, phase="deployment", **extra):
    base = dict(id=check, status=status, phase=phase, title="Title of %s" % check, reads=["nvidia-smi"],
                evidence=["line one", "line <two>"], message="%s says %s" % (check, status), duration_ms=3)
    if status == "failed":
        base.update(cause="the cause.", fix="the fix.")
    base.update(extra)
    return base


def host_ctrf(target, statuses, start=1000, stop=2000):
    results = [result("host.check_%d" % i, s, phase="deployment" if i % 2 else "preflight") for i, s in enumerate(statuses)]
    return report.ctrf(results, target, start, stop)


def reports(count, bad=()):
    return [dict(target="gpu-%04d" % i, source="out/gpu-%04d/ctrf.json" % i,
                 ctrf=host_ctrf("gpu-%04d" % i, ["passed", "failed" if i in bad else "passed", "skipped"],
                                start=1000 + i, stop=5000 - i))
            for i in range(count)]


def counts(document):
    return document["results"]["summary"]


def test_a_thousand_hosts_merge_into_one_valid_ctrf_with_every_test_once():
    with open(SCHEMA) as handle:
        schema = json.load(handle)
    merged = merge.merge(reports(1000, bad=(7, 512)))
    jsonschema.Draft7Validator(schema).validate(merged)
    summary = counts(merged)
    assert (summary["tests"], summary["passed"], summary["failed"], summary["skipped"], summary["other"]) == (3000, 1998, 2, 1000, 0)
    assert (summary["start"], summary["stop"]) == (1000, 5000)
    assert len(merged["results"]["environment"]["extra"]["targets"]) == 1000
    assert {t["suite"][0] for t in merged["results"]["tests"] if t["status"] == "failed"} == {"gpu-0007", "gpu-0512"}


def test_junit_has_a_suite_per_target_and_phase_and_markdown_lists_what_is_not_ok():
    merged = merge.merge(reports(3, bad=(1,)))
    root = ET.fromstring(merge.junit(merged))
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("9", "1", "0", "3")
    assert root.get("name") == "validate 3 targets"
    suites = [s.get("name") for s in root.findall("testsuite")]
    assert suites == ["gpu-0000.preflight", "gpu-0000.deployment", "gpu-0001.preflight", "gpu-0001.deployment",
                      "gpu-0002.preflight", "gpu-0002.deployment"]
    failure = root.find(".//failure")
    assert failure.text == "line one\nline <two>" and "the cause." in failure.get("message")
    assert root.find(".//testcase").get("time") == "0.003"
    page = merge.markdown(merged)
    assert page.splitlines()[:5] == ["# Validation of 3 targets", "", "9 checks: 5 passed, 1 failed, 3 skipped, 0 other - NOT OK",
                                     "", "2 of 3 targets ok."]
    assert "| gpu-0001 | 3 checks: 1 passed, 1 failed, 1 skipped, 0 other - NOT OK |" in page
    assert "| FAILED | gpu-0001 | `host.check_1` | the cause. host.check_1 says failed Fix: the fix. |" in page
    assert "gpu-0000 |" not in page


def test_all_ok_has_no_failure_section():
    page = merge.markdown(merge.merge(reports(2)))
    assert "2 of 2 targets ok." in page and "## Targets not ok" not in page


def test_expected_targets_decide_what_is_missing_stale_or_left_out():
    given = reports(4)
    given[1]["ctrf"] = None
    expected = {"gpu-0000": {"tests": 3, "passed": 2, "failed": 0, "skipped": 1, "other": 0},
                "gpu-0001": {"tests": 3}, "gpu-0002": {"tests": 3, "failed": 1}, "gpu-0009": {"tests": 3}}
    merged = merge.merge(given, expected)
    with open(SCHEMA) as handle:
        jsonschema.Draft7Validator(json.load(handle)).validate(merged)
    tests = merged["results"]["tests"]
    assert merged["results"]["environment"]["extra"]["targets"] == ["gpu-0000", "gpu-0001", "gpu-0002", "gpu-0009"]
    others = {t["suite"][0]: t["message"] for t in tests if t["status"] == "other"}
    assert set(others) == {"gpu-0001", "gpu-0002", "gpu-0009"}
    assert others["gpu-0001"].startswith("no CTRF report of gpu-0001 in out/gpu-0001/ctrf.json")
    assert others["gpu-0009"].startswith("no CTRF report of gpu-0009 in the merged folder")
    assert "same validate_output_dir" in others["gpu-0009"]
    assert others["gpu-0002"] == ("out/gpu-0002/ctrf.json holds failed 0 but the slice that validated gpu-0002 published"
                                  " failed 1: the file is from another run. Run the validation of gpu-0002 again, then the merge")
    # the stale report's tests are not counted; gpu-0003 was validated by no slice: left out
    assert counts(merged)["tests"] == 3 + 3 and "gpu-0003" not in {t["suite"][0] for t in tests}
    decider = [t for t in tests if t["status"] == "other"][0]
    assert decider["suite"][1] == "report" and decider["duration"] == 0 and decider["tags"] == ["report"]


def test_bad_reports_are_refused_naming_the_file():
    good = reports(1)[0]
    with pytest.raises(ValueError, match="two reports of gpu-0000"):
        merge.merge([good, good])
    with pytest.raises(ValueError, match="a report without its target"):
        merge.merge([dict(good, target="")])
    with pytest.raises(ValueError, match="out/x is not a CTRF report"):
        merge.merge([dict(target="x", source="out/x", ctrf={"results": {}})])
    with pytest.raises(ValueError, match="has no results.tests list"):
        merge.merge([dict(target="x", source="out/x", ctrf={"reportFormat": "CTRF", "results": {}})])
    with pytest.raises(ValueError, match="a test without a name or with a status other than"):
        merge.merge([dict(target="x", ctrf={"reportFormat": "CTRF", "results": {"tests": [{"name": "a", "status": "pending"}]}})])
    with pytest.raises(ValueError, match="test a has no suite"):
        merge.merge([dict(target="x", ctrf={"reportFormat": "CTRF", "results": {"tests": [{"name": "a", "status": "passed"}]}})])


def test_the_filter_reads_file_text_and_checks_its_inputs():
    given = [dict(r, ctrf=json.dumps(r["ctrf"])) for r in reports(2, bad=(0,))]
    document = json.loads(validate_merge(given))
    assert counts(document)["failed"] == 1
    assert validate_merge(given, "markdown").startswith("# Validation of 2 targets")
    assert validate_merge(given, "junit").startswith('<?xml version="1.0"')
    with pytest.raises(AnsibleFilterError, match="validate_merge: out/x is not JSON"):
        validate_merge([dict(target="x", source="out/x", ctrf="{")])
    with pytest.raises(AnsibleFilterError, match="validate_merge: format must be one of ctrf, junit, markdown"):
        validate_merge(given, "counts")
    with pytest.raises(AnsibleFilterError, match="validate_merge: expected a list of reports"):
        validate_merge("x")
    with pytest.raises(AnsibleFilterError, match="validate_merge: expected must map"):
        validate_merge(given, expected=["x"])
    with pytest.raises(AnsibleFilterError, match="validate_merge: two reports"):
        validate_merge(given + given[:1])


def test_failures_come_before_checks_that_could_not_decide():
    given = reports(2)
    given[0]["ctrf"] = None  # gpu-0000: an `other` test
    given[1]["ctrf"] = host_ctrf("gpu-0001", ["failed"])
    page = merge.markdown(merge.merge(given, {"gpu-0000": {}, "gpu-0001": {}}))
    rows = [line for line in page.splitlines() if line.startswith(("| FAILED", "| OTHER"))]
    assert [row.split(" | ")[1] for row in rows] == ["gpu-0001", "gpu-0000"]
    assert rows[0].startswith("| FAILED") and rows[1].startswith("| OTHER")


def test_the_run_spans_the_reports_that_know_when_they_ran():
    given = reports(4)
    for report_, (start, stop) in zip(given, [(0, 0), (1, 7), ("x", "y"), (1000, 5)]):
        report_["ctrf"]["results"]["summary"].update(start=start, stop=stop)
    assert (counts(merge.merge(given))["start"], counts(merge.merge(given))["stop"]) == (1, 7)
    for report_ in given:
        report_["ctrf"]["results"]["summary"].update(start=0, stop=0)
    assert (counts(merge.merge(given))["start"], counts(merge.merge(given))["stop"]) == (0, 0)


def test_failed_rows_by_target_a_test_without_duration_and_no_pending():
    def one(target, phase):
        return dict(target=target, ctrf=report.ctrf([result("host.x", "failed", phase=phase)], target, 0, 1))
    merged = merge.merge([one("b", "deployment"), one("a", "preflight")])
    rows = [line for line in merge.markdown(merged).splitlines() if line.startswith("| FAILED")]
    assert [row.split(" | ")[1] for row in rows] == ["a", "b"]
    assert counts(merged)["pending"] == 0 and counts(merged)["stop"] == 1
    del merged["results"]["tests"][0]["duration"]
    assert 'time="0.000"' in merge.junit(merged)
