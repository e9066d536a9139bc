# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""docs/version-floors.md is what scripts/gen_version_floors.py makes of the catalogs today: it cannot drift."""

from __future__ import annotations

import importlib.util
import os

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect, mig, network_operator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator():
    spec = importlib.util.spec_from_file_location("gen_version_floors", os.path.join(ROOT, "scripts", "gen_version_floors.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_doc_is_the_generated_one():
    with open(os.path.join(ROOT, "docs", "version-floors.md"), encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == _generator().render(), "docs/version-floors.md is stale: run python3 scripts/gen_version_floors.py"


def test_the_doc_names_every_floor_of_the_catalog():
    text = _generator().render()
    for name, profile in gke_gpudirect.PROFILES.items():
        for minimum in profile["min_versions"].values():
            assert "`%s`" % minimum in text, (name, minimum)
    for series, chart in network_operator.NETWORK_OPERATOR_CHARTS.items():
        assert "| `%s` | `%s` |" % (series, chart["pinned"]) in text
    for model in mig.CATALOG.values():
        for profile in model["profiles"].values():
            if profile["min_driver_branch"]:
                assert "| `%s` | `%s` | R%s |" % (model["name"], profile["name"], profile["min_driver_branch"]) in text


def test_a_catalog_change_changes_the_doc(monkeypatch):
    before = _generator().render()
    minimums = dict(gke_gpudirect.PROFILES["tcpxo"]["min_versions"], **{"1.33": "1.33.0-gke.9999999"})
    changed = dict(gke_gpudirect.PROFILES["tcpxo"], min_versions=minimums)
    monkeypatch.setitem(gke_gpudirect.PROFILES, "tcpxo", changed)
    after = _generator().render()
    assert after != before and "`1.33.0-gke.9999999`" in after and "GKE 1.33" in after
