# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""``dcgmi diag -r N -j`` output: one row per test and GPU with its status and DCGM's own reasons.

The document DCGM writes (its JsonOutput, NVIDIA/DCGM nvvs; DCGM 3.x) is::

    {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "Denylist", "results": [{"gpu_ids": "0,1", "status": "Pass", "warnings": [...], "info": [...]}]}]}],
     "version": "3.3.7", "Driver Version Detected": "550.90.07", "runtime_error": "..."}}

Later releases name the root ``DCGM Diagnostic``, list ``tests`` without categories and name a result's GPU
``entity_id``; a warning may be text or ``{"warning": text, "error_id": n}``. All of these are read. Text before or
after the document (dcgmi's own warnings) is ignored. A status other than Pass, Fail, Warn or Skip is ``unknown``,
never a pass.
"""

from __future__ import annotations

import json

ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
STATUSES = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "warn": "warn", "warning": "warn",
            "skip": "skip", "skipped": "skip"}


class DiagOutputError(ValueError):
    """The output holds no readable diagnostic document (killed, truncated, not JSON, no tests)."""


def _document(text):
    text = str(text or "")
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DiagOutputError("no JSON document in the output (%d characters)" % len(text.strip()))
    try:
        return json.loads(text[start:end + 1])
    except ValueError as exc:
        raise DiagOutputError("the JSON document is cut short or malformed: %s" % exc)


def _texts(values):
    """Warnings / info as text: a string, a list of strings, or {warning|message|info: text, error_id: n}."""
    if values is None:
        return []
    out = []
    for value in values if isinstance(values, list) else [values]:
        if isinstance(value, dict):
            text = value.get("warning") or value.get("message") or value.get("info") or ""
            code = value.get("error_id")
            out.append(("%s (DCGM error %s)" % (text, code) if code not in (None, "") else str(text)).strip())
        elif value not in (None, ""):
            out.append(str(value).strip())
    return [t for t in out if t]


def _gpus(result):
    for key in ("gpu_ids", "gpu_id", "entity_id"):
        value = result.get(key)
        if value not in (None, ""):
            return [g.strip() for g in str(value).split(",") if g.strip()]
    return []


def parse(text):
    """dict(version, driver, rows) of ``dcgmi diag -j`` output; rows: dict(category, test, gpus (list of ids, empty
    when the result covers the whole node), status (pass, fail, warn, skip, unknown), raw_status, warnings, info).

    Raises DiagOutputError when the output holds no document, a document DCGM did not finish, or a runtime error
    of DCGM (the message says which).
    """
    document = _document(text)
    if not isinstance(document, dict):
        raise DiagOutputError("the JSON document is a %s, not a diagnostic" % type(document).__name__)
    root = next((document[k] for k in ROOT_KEYS if isinstance(document.get(k), dict)), None)
    if root is None:
        raise DiagOutputError("the JSON document has no %s object" % " / ".join(repr(k) for k in ROOT_KEYS))
    error = root.get("runtime_error") or document.get("runtime_error")
    if error:
        raise DiagOutputError("DCGM could not run the diagnostic: %s" % " ".join(str(error).split()))
    tests = []
    for category in root.get("test_categories") or []:
        if isinstance(category, dict):
            tests += [(category.get("category") or "", t) for t in category.get("tests") or [] if isinstance(t, dict)]
    tests += [(t.get("category") or "", t) for t in root.get("tests") or [] if isinstance(t, dict)]
    rows = []
    for category, test in tests:
        for result in test.get("results") or []:
            if not isinstance(result, dict):
                continue
            raw = str(result.get("status") or "")
            rows.append(dict(category=category, test=str(test.get("name") or "?"), gpus=_gpus(result),
                             status=STATUSES.get(raw.strip().lower(), "unknown"), raw_status=raw,
                             warnings=_texts(result.get("warnings")), info=_texts(result.get("info"))))
    if not rows:
        raise DiagOutputError("the diagnostic document lists no test result")
    return dict(version=root.get("version") or document.get("version"),
                driver=root.get("Driver Version Detected") or root.get("driver_version"), rows=rows)
