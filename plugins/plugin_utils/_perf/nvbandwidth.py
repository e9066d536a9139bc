# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""``nvbandwidth -j`` output: its testcases with their status and bandwidth matrix.

The document (NVIDIA/nvbandwidth, JSON output since v0.5; its own test data holds a full example)::

    {"nvbandwidth": {"CUDA Runtime Version": 12070, "Driver Version": "565.02", "version": "v0.5",
     "testcases": [{"name": "device_to_device_memcpy_read_ce", "status": "Passed",
                    "bandwidth_description": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
                    "bandwidth_matrix": [["N/A", "370.1"], ["371.0", "N/A"]], "min": .., "max": .., "average": ..},
                   {"name": "all_to_one_write_ce", "status": "Waived"}]}}

A matrix cell is text: a number, or ``N/A`` (the diagonal, a pair without a path). ``Waived`` is a testcase that
does not apply to the machine (one GPU, no peer access). nvbandwidth may print warnings around the document.
"""

from __future__ import annotations

import json


class BandwidthOutputError(ValueError):
    """The output holds no readable nvbandwidth document."""


def _cell(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def parse(text):
    """dict(version, driver, testcases: {name: dict(status, description, matrix (rows of float or None))}).

    Raises BandwidthOutputError for output without a complete document or without testcases.
    """
    text = str(text or "")
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise BandwidthOutputError("no JSON document in the output (%d characters)" % len(text.strip()))
    try:
        document = json.loads(text[start:end + 1])
    except ValueError as exc:
        raise BandwidthOutputError("the JSON document is cut short or malformed: %s" % exc)
    root = document.get("nvbandwidth") if isinstance(document, dict) else None
    if not isinstance(root, dict) or not isinstance(root.get("testcases"), list) or not root["testcases"]:
        raise BandwidthOutputError("the document has no nvbandwidth.testcases")
    testcases = {}
    for case in root["testcases"]:
        if not isinstance(case, dict) or not case.get("name"):
            continue
        matrix = [[_cell(v) for v in row] for row in case.get("bandwidth_matrix") or [] if isinstance(row, list)]
        testcases[str(case["name"])] = dict(status=str(case.get("status") or ""), description=case.get("bandwidth_description"),
                                            matrix=matrix)
    return dict(version=root.get("version"), driver=root.get("Driver Version"), testcases=testcases)


def lowest(matrix):
    """(value, row, column) of the lowest measured cell; None when no cell holds a number."""
    cells = [(v, r, c) for r, row in enumerate(matrix) for c, v in enumerate(row) if v is not None]
    return min(cells) if cells else None
