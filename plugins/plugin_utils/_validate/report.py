# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The validation reports: CTRF JSON (the Common Test Report Format, spec 0.0.0 of github.com/ctrf-io/ctrf,
schema/ctrf.schema.json), JUnit XML for CI systems, a one-page Markdown report (a table per phase, failures
first, with the fixes) and the counts line the play ends with.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import PHASES, summary

CTRF_SPEC_VERSION = "0.0.0"
TOOL = "gpu_ops.cluster validate"
_ORDER = {"failed": 0, "other": 1, "skipped": 2, "passed": 3}
# control characters but tab and newlines (XML 1.0 forbids most even as references; a terminal runs them), the
# noncharacters XML forbids and lone surrogates: a snapshot's names and messages may hold any of them
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(value):
    """``value`` with every control character (but tab, CR and LF) written as ``\\xNN`` / ``\\uNNNN``, at any depth."""
    if isinstance(value, str):
        return _UNPRINTABLE.sub(lambda m: ("\\x%02x" if ord(m.group()) < 0x100 else "\\u%04x") % ord(m.group()), value)
    if isinstance(value, dict):
        return dict((printable(k), printable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    return value


def _detail(result):
    if result["status"] == "failed":
        return "%s %s Fix: %s" % (result["cause"], result["message"], result["fix"])
    if result.get("fix"):
        return "%s Fix: %s" % (result.get("message") or "", result["fix"])
    return result.get("message") or ""


def ctrf(results, target, start_ms, stop_ms, tool_version=None):
    """A CTRF document of one target's results (``start_ms`` / ``stop_ms``: epoch milliseconds)."""
    results, target = printable(results), printable(target)
    counts = summary(results)
    tests = []
    for result in results:
        test = dict(name=result["id"], status=result["status"], duration=int(result.get("duration_ms") or 0),
                    suite=[target, result["phase"]], tags=[result["phase"]],
                    extra=dict(title=result["title"], reads=result["reads"], evidence=result["evidence"]))
        if result.get("message"):
            test["message"] = _detail(result)
        if result["status"] == "failed":
            test["extra"].update(cause=result["cause"], fix=result["fix"])
        elif result.get("fix"):
            test["extra"].update(fix=result["fix"])
        tests.append(test)
    tool = dict(name=TOOL)
    if tool_version:
        tool["version"] = str(tool_version)
    return dict(reportFormat="CTRF", specVersion=CTRF_SPEC_VERSION, generatedBy=TOOL, results=dict(
        tool=tool,
        summary=dict(tests=counts["tests"], passed=counts["passed"], failed=counts["failed"], skipped=counts["skipped"],
                     pending=0, other=counts["other"], start=int(start_ms), stop=int(stop_ms)),
        tests=tests, environment=dict(extra=dict(target=target))))


def junit(results, target):
    """JUnit XML: one testsuite per phase; failed is a <failure>, other an <error>, skipped a <skipped>."""
    results, target = printable(results), printable(target)
    counts = summary(results)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<testsuites name=%s tests="%d" failures="%d" errors="%d" skipped="%d">' % (
                 quoteattr("validate %s" % target), counts["tests"], counts["failed"], counts["other"], counts["skipped"])]
    for phase in PHASES:
        mine = [r for r in results if r["phase"] == phase]
        if not mine:
            continue
        part = summary(mine)
        lines.append('  <testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="%d">' % (
            quoteattr("%s.%s" % (target, phase)), part["tests"], part["failed"], part["other"], part["skipped"]))
        for result in mine:
            head = '    <testcase classname=%s name=%s time="%.3f"' % (
                quoteattr("%s.%s" % (target, phase)), quoteattr(result["id"]), (result.get("duration_ms") or 0) / 1000.0)
            tag = {"failed": "failure", "other": "error", "skipped": "skipped"}.get(result["status"])
            if tag is None:
                lines.append(head + "/>")
                continue
            lines.append(head + ">")
            lines.append('      <%s message=%s>%s</%s>' % (tag, quoteattr(_detail(result)), escape("\n".join(result["evidence"])), tag))
            lines.append("    </testcase>")
        lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return "\n".join(lines) + "\n"


def _cell(text):
    return str(text or "").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown(results, target):
    """One page: the counts, then a table per phase, failures first, each failure with its cause and fix."""
    results, target = printable(results), printable(target)
    counts = summary(results)
    lines = ["# Validation of %s" % target, "", counts_line(counts), ""]
    for phase in PHASES:
        mine = sorted((r for r in results if r["phase"] == phase), key=lambda r: (_ORDER[r["status"]], r["id"]))
        if not mine:
            continue
        lines.extend(["## %s" % phase, "", "| status | check | cause / reason | fix |", "| --- | --- | --- | --- |"])
        for r in mine:
            if r["status"] == "failed":
                reason, fix = "%s %s" % (r["cause"], r["message"]), r["fix"]
            else:
                reason, fix = r.get("message") or r["title"], r.get("fix") or ""
            status = r["status"].upper() if r["status"] != "passed" else "passed"
            lines.append("| %s | `%s` | %s | %s |" % (status, r["id"], _cell(reason), _cell(fix)))
        lines.append("")
    return "\n".join(lines)


def counts_line(counts):
    return "%d checks: %d passed, %d failed, %d skipped, %d other%s" % (
        counts["tests"], counts["passed"], counts["failed"], counts["skipped"], counts["other"],
        "" if counts["ok"] else " - NOT OK")
