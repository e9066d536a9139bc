# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reports: CTRF valid against the published schema (fixtures/ctrf.schema.json, see fixtures/README.md),
JUnit XML that CI systems parse, the one-page Markdown report and the counts line."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import jsonschema

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import report, suite

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ctrf.schema.json")


def _broken(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    data["gke"]["nics"][2]["network"]["mtu"] = 1460
    del data["kubernetes"]["nodes"][1]["status"]["nodeInfo"]
    return suite.validate(build_snapshot(data))


def test_ctrf_is_valid_against_the_published_schema(load_raw, build_snapshot):
    with open(SCHEMA) as handle:
        schema = json.load(handle)
    result = _broken(load_raw, build_snapshot)
    document = report.ctrf(result["results"], result["target"], 1000, 2000, tool_version="0.1.0")
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER).validate(document)
    summary = document["results"]["summary"]
    assert (summary["failed"], summary["other"], summary["tests"]) == (1, 4, len(result["results"]))
    failed = [t for t in document["results"]["tests"] if t["status"] == "failed"][0]
    assert failed["name"] == "gke.gpu_vpc"
    assert "Fix: role gpu_ops.cluster.gcp_gpu_vpcs, variable gcp_gpu_vpcs_mtu" in failed["message"]
    assert failed["suite"] == ["gke-a3mega", "conformance"]


def test_the_schema_rejects_what_ctrf_forbids():
    with open(SCHEMA) as handle:
        schema = json.load(handle)
    bad = report.ctrf([], "t", 0, 1)
    bad["results"]["tests"] = [dict(name="x", status="errored", duration=0)]
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))


def test_junit_counts_failures_and_errors(load_raw, build_snapshot):
    result = _broken(load_raw, build_snapshot)
    root = ET.fromstring(report.junit(result["results"], result["target"]))
    assert (root.get("failures"), root.get("errors")) == ("1", "4")
    conformance = [s for s in root.findall("testsuite") if s.get("name") == "gke-a3mega.conformance"][0]
    case = [c for c in conformance.findall("testcase") if c.get("name") == "gke.gpu_vpc"][0]
    assert "MTU 1460" in case.find("failure").get("message")
    assert sum(len(s.findall("testcase")) for s in root.findall("testsuite")) == len(result["results"])


def test_markdown_puts_failures_first_with_the_fix(load_raw, build_snapshot):
    result = _broken(load_raw, build_snapshot)
    page = report.markdown(result["results"], result["target"])
    assert page.splitlines()[2] == "%d checks: 19 passed, 1 failed, 21 skipped, 4 other - NOT OK" % len(result["results"])
    conformance = page.split("## conformance")[1].splitlines()
    assert conformance[4].startswith("| FAILED | `gke.gpu_vpc` |")
    assert "gcp_gpu_vpcs_mtu" in conformance[4]
    preflight = page.split("## preflight")[1].split("##")[0]
    assert preflight.index("| OTHER |") < preflight.index("| passed |")


def test_the_counts_line_says_not_ok_on_other():
    assert report.counts_line(dict(tests=2, passed=1, failed=0, skipped=0, other=1, ok=False)) == \
        "2 checks: 1 passed, 0 failed, 0 skipped, 1 other - NOT OK"


# ----------------------------------------------------------------------------- cases the mutation check showed missing

def _result(check_id, status, phase="deployment", message=None, duration_ms=None):
    result = dict(id=check_id, phase=phase, title="title of " + check_id, status=status, reads=["kubernetes.nodes"],
                  evidence=["seen " + check_id], message=message, duration_ms=duration_ms)
    if status == "failed":
        result.update(cause="Cause of %s." % check_id, fix="fix of " + check_id)
    elif status == "other":
        result.update(fix="what lets %s run" % check_id)
    return result


# ids chosen against the status order (z < m < c < a), so that only the order failed, other, skipped, passed holds
ORDERED = [_result("a.p", "passed", duration_ms=7), _result("c.s", "skipped", message="skipped: no GPU node"),
           _result("m.o", "other", message="cannot read kubernetes.pods"), _result("z.f", "failed", message="node a: bad")]


def test_markdown_orders_a_phase_failed_other_skipped_passed_and_says_why():
    rows = [line for line in report.markdown(ORDERED, "t").splitlines() if line.startswith("| ") and "`" in line]
    assert [r.split("`")[1] for r in rows] == ["z.f", "m.o", "c.s", "a.p"]
    assert rows[0] == "| FAILED | `z.f` | Cause of z.f. node a: bad | fix of z.f |"
    assert rows[2] == "| SKIPPED | `c.s` | skipped: no GPU node |  |"
    assert rows[3] == "| passed | `a.p` | title of a.p |  |"     # a pass without a message shows its title


def test_ctrf_and_junit_keep_durations_and_the_messages_of_what_did_not_pass():
    document = report.ctrf(ORDERED, "t", 5, 9)
    tests = dict((t["name"], t) for t in document["results"]["tests"])
    assert (tests["a.p"]["duration"], tests["c.s"]["duration"]) == (7, 0)
    assert "message" not in tests["a.p"]
    assert tests["c.s"]["message"] == "skipped: no GPU node"
    assert tests["z.f"]["message"] == "Cause of z.f. node a: bad Fix: fix of z.f"
    assert tests["z.f"]["extra"]["cause"] == "Cause of z.f." and "cause" not in tests["m.o"]["extra"]
    # a check that could not run says what would let it, in its message and its extra fix
    assert tests["m.o"]["message"] == "cannot read kubernetes.pods Fix: what lets m.o run"
    assert tests["m.o"]["extra"]["fix"] == "what lets m.o run" and "fix" not in tests["c.s"]["extra"]
    assert document["results"]["summary"] == dict(tests=4, passed=1, failed=1, skipped=1, pending=0, other=1, start=5, stop=9)
    assert report.ctrf(ORDERED, "t", 5, 9, tool_version=1)["results"]["tool"] == dict(name=report.TOOL, version="1")
    root = ET.fromstring(report.junit(ORDERED, "t"))
    cases = dict((c.get("name"), c) for c in root.iter("testcase"))
    assert (cases["a.p"].get("time"), cases["c.s"].get("time")) == ("0.007", "0.000")
    assert cases["c.s"].find("skipped").get("message") == "skipped: no GPU node"
    assert cases["m.o"].find("error").text == "seen m.o"
    assert cases["m.o"].find("error").get("message") == "cannot read kubernetes.pods Fix: what lets m.o run"
    page = report.markdown(ORDERED, "t")
    assert "| OTHER | `m.o` | cannot read kubernetes.pods | what lets m.o run |" in page
    assert "| SKIPPED | `c.s` | skipped: no GPU node |  |" in page
    assert list(cases["a.p"]) == []
    assert [s.get("name") for s in root.findall("testsuite")] == ["t.deployment"]     # phases without results are left out


def test_every_report_parses_when_names_and_messages_hold_control_characters(load_raw, build_snapshot):
    """XML 1.0 forbids most C0 characters even as character references: every report writes them escaped."""
    data = load_raw("gke-tcpxo")
    data["gke"]["nics"][2]["network"]["mtu"] = 1460
    result = suite.validate(build_snapshot(data))
    hostile = "\x00\x01\x08\x0b\x0c\x1b[31m\x7f\x85\ufffe\ud800"
    for entry in result["results"]:
        entry["id"] += hostile
        entry["message"] = (entry.get("message") or "") + hostile
        entry["evidence"] = list(entry["evidence"]) + ["pod a" + hostile]
        if entry["status"] == "failed":
            entry.update(cause=entry["cause"] + hostile, fix=entry["fix"] + hostile)
    target = "c" + hostile
    junit = report.junit(result["results"], target)
    root = ET.fromstring(junit.encode("utf-8"))
    failure = root.find(".//failure")
    escaped = "\\x00\\x01\\x08\\x0b\\x0c\\x1b[31m\\x7f\\x85\\ufffe\\ud800"
    assert root.get("name") == "validate c" + escaped
    assert failure is not None and escaped in failure.get("message") and failure.text.endswith("pod a" + escaped)
    ctrf = report.ctrf(result["results"], target, 1, 2)
    text = json.dumps(ctrf, ensure_ascii=False)
    assert json.loads(text)["results"]["environment"]["extra"]["target"] == "c" + escaped
    page = report.markdown(result["results"], target)
    for text in (junit, text, page):
        assert not [c for c in "\x00\x01\x08\x0b\x0c\x1b\x7f\x85\ufffe\ud800" if c in text]
    # tab and newlines are text, not control characters to escape
    assert report.printable({"a\tb": ["x\ny\r"]}) == {"a\tb": ["x\ny\r"]}
