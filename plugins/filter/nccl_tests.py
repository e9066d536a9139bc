# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests filters: parse the output table and judge it.

Documentation: plugins/filter/nccl_tests_parse.yml, nccl_tests_verdict.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.module_utils import _gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils import _nccl_tests


def nccl_tests_parse(text, all_runs=False):
    """The nccl-tests run in ``text`` (a dict), or every run (a list) with ``all_runs=true``."""
    try:
        if all_runs:
            return _nccl_tests.parse_all(text)
        return _nccl_tests.parse(text)
    except ValueError as exc:
        raise AnsibleFilterError("nccl_tests_parse: %s" % exc)


def nccl_tests_verdict(run, threshold=None, fabric=None, min_rows=1):
    """Pass/fail of a parsed run (or of raw output text) against a GB/s threshold or a fabric's threshold."""
    try:
        if isinstance(run, str):
            run = _nccl_tests.parse(run)
        if not isinstance(run, dict):
            raise ValueError("expected a parsed run (nccl_tests_parse) or nccl-tests output text")
        if threshold is None and fabric is not None:
            if fabric not in _gpudirect.FABRICS:
                raise ValueError("fabric %r is not one of %s" % (fabric, ", ".join(_gpudirect.FABRICS)))
            threshold = _gpudirect.NCCL_BANDWIDTH_THRESHOLDS.get(fabric)
        return _nccl_tests.verdict(run, threshold=threshold, min_rows=int(min_rows))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("nccl_tests_verdict: %s" % exc)


class FilterModule:
    """nccl-tests filters."""

    def filters(self):
        return {
            "nccl_tests_parse": nccl_tests_parse,
            "nccl_tests_verdict": nccl_tests_verdict,
        }
