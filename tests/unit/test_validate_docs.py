# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/validate-checks.md and docs/validate-sample-report.md are what scripts/gen_validate_docs.py makes of the check
registry and the sample snapshot today: they cannot drift."""

from __future__ import annotations

import importlib.util
import os

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator():
    spec = importlib.util.spec_from_file_location("gen_validate_docs", os.path.join(ROOT, "scripts", "gen_validate_docs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_docs_are_the_generated_ones():
    for path, text in _generator().render().items():
        with open(path, encoding="utf-8") as handle:
            assert handle.read() == text, "%s is stale: run python3 scripts/gen_validate_docs.py" % os.path.relpath(path, ROOT)


def test_the_list_names_every_check_with_its_cause_and_fix():
    text = _generator().render_checks()
    for check in suite.checks():
        row = [line for line in text.splitlines() if line.startswith("| `%s` |" % check["id"])]
        assert len(row) == 1, check["id"]
        assert check["cause"].replace("|", "\\|") in row[0] and check["fix"].replace("|", "\\|") in row[0]


def test_the_sample_report_shows_failures_with_their_fixes():
    text = _generator().render_sample()
    assert "3 failed" in text and "0 other" in text
    assert "| FAILED | `gke.gpu_vpc` |" in text and "gcp_gpu_vpcs_mtu" in text
    assert "| FAILED | `gpudirect.pod_whole_node` |" in text
    assert "| FAILED | `gpudirect.fast_socket` |" in text
