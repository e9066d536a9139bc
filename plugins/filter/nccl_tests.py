# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests filters: parse the output table and judge it.

Documentation: plugins/filter/nccl_tests_parse.yml, nccl_tests_verdict.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs as _inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

gke_gpudirect = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect")
nccl = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.nccl")
_nccl_tests = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf.nccl_tests")


@_inputs.errors_as(AnsibleFilterError)
def nccl_tests_parse(text, all_runs=False):
    """The nccl-tests run in ``text`` (a dict), or every run (a list) with ``all_runs=true``."""
    _inputs.output_text("input", text, lines=False)  # null is a missing capture, not an empty run
    if _inputs.boolean("all_runs", all_runs):
        return _nccl_tests.parse_all(text)
    return _nccl_tests.parse(text)


def _show(value):
    return ascii(value) if len(ascii(value)) <= 40 else ascii(value)[:37] + "..."


def _check_bandwidths(run):
    """A bandwidth that is not a finite number (inf, nan, text) cannot be judged: an error naming where it is."""
    _inputs.number("avg_bus_bandwidth", run.get("avg_bus_bandwidth"), allow_none=True)
    rows = run.get("rows") or []
    if not isinstance(rows, list):
        raise ValueError("rows: must be a list, got %s" % type(rows).__name__)
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError("rows[%d]: must be a dict, got %s" % (index, type(row).__name__))
        for placement in _nccl_tests.PLACEMENTS:
            cells = row.get(placement) or {}
            for column in ("algbw", "busbw"):
                value = cells.get(column) if isinstance(cells, dict) else None
                if value is not None:  # N/A reads as null
                    _inputs.number("rows[%d] (size %s) %s %s" % (index, row.get("size"), placement, column), value,
                                   minimum=0)


@_inputs.errors_as(AnsibleFilterError)
def nccl_tests_verdict(run, threshold=None, fabric=None, min_rows=1, network=None):
    """Pass/fail of a parsed run (or of raw output text) against a GB/s threshold or a fabric's threshold and, with
    ``network``, NCCL's log showing it used that network (no fallback)."""
    threshold = _inputs.number("threshold (GB/s)", threshold, minimum=0, allow_none=True)
    min_rows = _inputs.whole_number("min_rows", min_rows, minimum=0)
    network = _inputs.text("network", network, allow_none=True)
    if isinstance(run, str):
        run = _nccl_tests.parse(run)
    if not isinstance(run, dict):
        raise ValueError("expected a parsed run (nccl_tests_parse) or nccl-tests output text")
    if threshold is None and fabric is not None:
        if not isinstance(fabric, str) or fabric not in nccl.FABRICS:
            raise ValueError("fabric %s is not one of %s" % (_show(fabric), ", ".join(nccl.FABRICS)))
        threshold = gke_gpudirect.NCCL_BANDWIDTH_THRESHOLDS.get(fabric)
    _check_bandwidths(run)
    return _nccl_tests.verdict(run, threshold=threshold, min_rows=min_rows, network=network)


class FilterModule:
    """nccl-tests filters."""

    def filters(self):
        return {
            "nccl_tests_parse": nccl_tests_parse,
            "nccl_tests_verdict": nccl_tests_verdict,
        }
