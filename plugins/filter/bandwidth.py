# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bandwidth report filter: the table and the chart of an nccl-tests or ib_write_bw result.

Documentation: plugins/filter/bandwidth_report.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs as _inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_bandwidth_report = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf.bandwidth_report")

KINDS = ("nccl", "ib_write_bw")


def _check_rows(rows, size_key):
    if not isinstance(rows, list):
        raise ValueError("%s: must be a list, got %s" % ("table" if size_key == "size" else "rows", type(rows).__name__))
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError("rows[%d]: must be a dict, got %s" % (index, type(row).__name__))
        _inputs.whole_number("rows[%d].%s" % (index, size_key), row.get(size_key), minimum=1)


@_inputs.errors_as(AnsibleFilterError)
def bandwidth_report(result, kind, name=None, nodes=None):
    """{lines, markdown, svg} of a benchmark result of role nccl_test (kind nccl) or of rdma_test_result (kind ib_write_bw)."""
    result = _inputs.plain(_inputs.mapping("input", result, allow_none=False))
    if kind not in KINDS:
        raise ValueError("kind: must be one of %s, got %s" % (", ".join(KINDS), ascii(kind)[:40]))
    name = _inputs.text("name", name, allow_none=True)
    if nodes is not None:
        if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, str) for n in nodes):
            raise ValueError("nodes: must be a list of node names")
        nodes = [str(n) for n in nodes]
    for key in ("threshold", "avg_bus_bandwidth", "threshold_gbps", "bw_average_gbps"):
        if key in result:
            result[key] = _inputs.number(key, result[key], minimum=0, allow_none=True)
    if kind == "nccl":
        _check_rows(result.get("table") or [], "size")
        return _bandwidth_report.nccl_report(result, name or str(result.get("benchmark") or "nccl-tests"), nodes=nodes)
    _check_rows(result.get("rows") or [], "bytes")
    if nodes is not None:
        result["nodes"] = nodes
    return _bandwidth_report.ib_write_bw_report(result, name or "ib_write_bw")


class FilterModule:
    """Bandwidth report filter."""

    def filters(self):
        return {"bandwidth_report": bandwidth_report}
