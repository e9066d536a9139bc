# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One validation report of many targets from their CTRF reports: what the merge node of a sliced validation writes
after the slices (each slice validated some hosts and wrote one CTRF document per host).

The merged CTRF keeps every test of every target (each test's ``suite`` already names its target and phase) and
recounts the summary from the tests. When the slices published which targets they validated and their counts
(``expected``), a target without a report, or whose report holds other counts (a file left by another run), is one
``other`` test of that target naming what would decide; a report of a target no slice validated is left out.
JUnit XML (a testsuite per target and phase) and Markdown (the counts, the targets that are not ok, then every failed
or other check with its cause and fix) are written from the merged CTRF.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import STATUSES, summary
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.report import (
    CTRF_SPEC_VERSION, TOOL, counts_line, printable)

_ORDER = {"failed": 0, "other": 1}
_COUNTED = ("tests", "passed", "failed", "skipped", "other")


def _tests_of(source, document):
    if not isinstance(document, dict) or document.get("reportFormat") != "CTRF":
        raise ValueError("%s is not a CTRF report (reportFormat CTRF)" % source)
    tests = (document.get("results") or {}).get("tests")
    if not isinstance(tests, list):
        raise ValueError("%s has no results.tests list" % source)
    for test in tests:
        if not isinstance(test, dict) or test.get("status") not in STATUSES or not isinstance(test.get("name"), str):
            raise ValueError("%s: a test without a name or with a status other than %s: %r"
                             % (source, ", ".join(STATUSES), test))
        suite = test.get("suite")
        if not isinstance(suite, list) or len(suite) < 2:
            raise ValueError("%s: test %s has no suite [target, phase]" % (source, test["name"]))
    return tests


def _decider(target, message):
    return dict(name="report", status="other", duration=0, suite=[target, "report"], tags=["report"],
                message=message, extra=dict(title="The report of %s" % target, reads=[], evidence=[]))


def merge(reports, expected=None):
    """The merged CTRF document of ``reports`` (each ``{'target', 'source', 'ctrf'}``, ``ctrf`` a parsed document or
    None when the file was not found). ``expected``: {target: counts} the slices published, or None to take every
    report given."""
    by_target, tests, starts, stops = {}, [], [], []
    for report in reports:
        target, source = report.get("target"), report.get("source") or report.get("target")
        if not isinstance(target, str) or not target:
            raise ValueError("a report without its target: %r" % (source,))
        if target in by_target:
            raise ValueError("two reports of %s (%s and %s)" % (target, by_target[target]["source"], source))
        by_target[target] = dict(report, source=source)
    wanted = sorted(expected) if expected is not None else sorted(by_target)
    for target in wanted:
        report = by_target.get(target)
        if report is None or report.get("ctrf") is None:
            where = report["source"] if report else "the merged folder"
            tests.append(_decider(target, "no CTRF report of %s in %s: the slice that validated it wrote its reports"
                                          " where this node cannot read them. Give every slice and this node the same"
                                          " validate_output_dir (a shared mount), then run the merge again" % (target, where)))
            continue
        mine = _tests_of(report["source"], report["ctrf"])
        if expected is not None and isinstance(expected.get(target), dict):
            found, published = summary(mine), expected[target]
            differ = [k for k in _COUNTED if k in published and int(published[k]) != found[k]]
            if differ:
                tests.append(_decider(target, "%s holds %s but the slice that validated %s published %s: the file is"
                                              " from another run. Run the validation of %s again, then the merge"
                                      % (report["source"], ", ".join("%s %d" % (k, found[k]) for k in differ), target,
                                         ", ".join("%s %s" % (k, published[k]) for k in differ), target)))
                continue
        tests.extend(mine)
        found_summary = (report["ctrf"].get("results") or {}).get("summary") or {}
        # 0 (or anything but a positive integer): the report does not know when it ran
        starts.extend(v for v in [found_summary.get("start")] if isinstance(v, int) and v > 0)
        stops.extend(v for v in [found_summary.get("stop")] if isinstance(v, int) and v > 0)
    tests = printable(tests)
    counts = summary(tests)
    return dict(reportFormat="CTRF", specVersion=CTRF_SPEC_VERSION, generatedBy=TOOL, results=dict(
        tool=dict(name=TOOL),
        summary=dict(tests=counts["tests"], passed=counts["passed"], failed=counts["failed"], skipped=counts["skipped"],
                     pending=0, other=counts["other"], start=min(starts) if starts else 0, stop=max(stops) if stops else 0),
        tests=tests, environment=dict(extra=dict(targets=printable(wanted)))))


def _groups(tests):
    """[(target, phase, tests)] in target, then phase, order of first appearance."""
    grouped = {}
    for test in tests:
        grouped.setdefault((test["suite"][0], test["suite"][1]), []).append(test)
    return [(t, p, grouped[(t, p)]) for t, p in grouped]


def junit(merged):
    """JUnit XML of a merged CTRF: one testsuite per target and phase; failed is a <failure>, other an <error>."""
    tests = merged["results"]["tests"]
    counts = summary(tests)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites name=%s tests="%d" failures="%d" errors="%d" skipped="%d">' % (
                 quoteattr("validate %d targets" % len(merged["results"]["environment"]["extra"]["targets"])),
                 counts["tests"], counts["failed"], counts["other"], counts["skipped"])]
    for target, phase, mine in _groups(tests):
        part = summary(mine)
        name = quoteattr("%s.%s" % (target, phase))
        lines.append('  <testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="%d">'
                     % (name, part["tests"], part["failed"], part["other"], part["skipped"]))
        for test in mine:
            seconds = (test.get("duration") or 0) / 1000.0
            head = '    <testcase classname=%s name=%s time="%.3f"' % (name, quoteattr(test["name"]), seconds)
            tag = {"failed": "failure", "other": "error", "skipped": "skipped"}.get(test["status"])
            if tag is None:
                lines.append(head + "/>")
                continue
            evidence = (test.get("extra") or {}).get("evidence") or []
            body = '      <%s message=%s>%s</%s>' % (tag, quoteattr(test.get("message") or ""), escape("\n".join(evidence)), tag)
            lines.extend([head + ">", body, "    </testcase>"])
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def _cell(text):
    return str(text or "").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown(merged):
    """One page: the counts, a line per target that is not ok, then every failed or other check with its message."""
    tests = merged["results"]["tests"]
    targets = merged["results"]["environment"]["extra"]["targets"]
    per_target = {}
    for test in tests:
        per_target.setdefault(test["suite"][0], []).append(test)
    not_ok = [t for t in targets if not summary(per_target.get(t, [])).get("ok")]
    lines = ["# Validation of %d targets" % len(targets), "", counts_line(summary(tests)),
             "", "%d of %d targets ok." % (len(targets) - len(not_ok), len(targets)), ""]
    if not_ok:
        lines.extend(["## Targets not ok", "", "| target | counts |", "| --- | --- |"])
        lines.extend("| %s | %s |" % (_cell(t), counts_line(summary(per_target.get(t, [])))) for t in not_ok)
        lines.extend(["", "## Failed and other checks", "", "| status | target | check | cause / reason and fix |",
                      "| --- | --- | --- | --- |"])
        bad = sorted((t for t in tests if t["status"] in ("failed", "other")),
                     key=lambda t: (_ORDER[t["status"]], t["suite"][0], t["name"]))
        lines.extend("| %s | %s | `%s` | %s |" % (t["status"].upper(), _cell(t["suite"][0]), t["name"], _cell(t.get("message")))
                     for t in bad)
        lines.append("")
    return "\n".join(lines)
