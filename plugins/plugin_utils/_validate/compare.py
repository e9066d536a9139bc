# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Before and after: what changed between two validations of one target - the snapshots' differences
(``snapshot.diff``) and the checks whose verdict changed, read from either run's ``validate_results`` result or the
CTRF report the validate role wrote (``ctrf.json``).
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as _snapshot
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.report import printable

STATUSES = ("passed", "failed", "skipped", "other")


def verdicts(results, which):
    """{check id: (status, message)} of a validate_results result or a CTRF report; ValueError naming ``which``."""
    if not isinstance(results, dict):
        raise ValueError("the %s results must be a validate_results result or a CTRF report (a mapping)" % which)
    if results.get("reportFormat") == "CTRF":
        tests = (results.get("results") or {}).get("tests")
        rows = [(t.get("name"), t.get("status"), _ctrf_message(t)) for t in tests if isinstance(t, dict)] if isinstance(tests, list) else None
    elif isinstance(results.get("results"), list):
        rows = [(r.get("id"), r.get("status"), r.get("message")) for r in results["results"] if isinstance(r, dict)]
    else:
        rows = None
    if rows is None:
        raise ValueError("the %s results are neither a validate_results result (results: a list) nor a CTRF report "
                         "(reportFormat: CTRF with results.tests)" % which)
    found = {}
    for check, status, message in rows:
        if not check or status not in STATUSES:
            raise ValueError("the %s results: a check needs a name and a status (%s), got %r: %r"
                             % (which, ", ".join(STATUSES), check, status))
        found[check] = (status, " ".join(str(message or "").split()))
    return found


def _ctrf_message(test):
    """A CTRF test's own message: the report writes the check's cause before it and its fix after it."""
    message, extra = str(test.get("message") or ""), test.get("extra") if isinstance(test.get("extra"), dict) else {}
    cause, fix = extra.get("cause"), extra.get("fix")
    if cause and message.startswith("%s " % cause):
        message = message[len(cause) + 1:]
    if fix and message.endswith(" Fix: %s" % fix):
        message = message[:-len(" Fix: %s" % fix)]
    return message


def verdict_changes(old, new):
    """One line per check whose verdict changed, was added or is gone; the later run's message says why."""
    before, after = verdicts(old, "old"), verdicts(new, "new")
    lines = []
    for check in sorted(set(before) | set(after)):
        if check not in after:
            lines.append("check %s: %s -> (not run)" % (check, before[check][0]))
        elif check not in before:
            lines.append("check %s: (not run) -> %s%s" % (check, after[check][0], _why(after[check])))
        elif before[check][0] != after[check][0]:
            lines.append("check %s: %s -> %s%s" % (check, before[check][0], after[check][0], _why(after[check])))
    return printable(lines)


def _why(verdict):
    status, message = verdict
    return ": %s" % message[:300] if message and status != "passed" else ""


def compare(old, new, old_results=None, new_results=None):
    """The snapshots' differences, then (with both runs' results) the checks whose verdict changed."""
    if (old_results is None) != (new_results is None):
        raise ValueError("give both runs' results (old_results and new_results) or neither")
    lines = _snapshot.diff(old, new)
    if old_results is not None:
        lines += verdict_changes(old_results, new_results)
    return lines
