# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU Operator catalog (plugins/module_utils/_catalog/gpu_operator.py): chart series, pinned releases and the
keys each series adds, held against the upstream chart keys in fixtures/gpu_operator/values_keys.json."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gpu_operator as catalog

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
with open(os.path.join(FIXTURES, "gpu_operator", "values_keys.json"), encoding="utf-8") as _handle:
    UPSTREAM_KEYS = json.load(_handle)["tags"]


@pytest.mark.parametrize("version, series", [
    ("v25.3.4", "v25.3"), ("25.3.4", "v25.3"), ("v25.10", "v25.10"), (" v26.3.0 ", "v26.3"),
    ("latest", None), ("v25", None), ("", None), ("v25.3.4-rc1", None),
])
def test_chart_series(version, series):
    assert catalog.chart_series(version) == series


@pytest.mark.parametrize("series", sorted(catalog.GPU_OPERATOR_CHARTS))
def test_each_series_pins_a_release_of_its_own_with_its_kernel_module_key(series):
    entry = catalog.GPU_OPERATOR_CHARTS[series]
    assert catalog.chart_series(entry["pinned"]) == series
    assert "driver." + entry["kernel_module_key"] in entry["added"]
    assert isinstance(entry["cdi_default"], bool)
    assert len(entry["driver_version"].split(".")) == 3


@pytest.mark.parametrize("series", sorted(catalog.GPU_OPERATOR_CHARTS))
def test_the_keys_a_series_adds_are_in_the_upstream_chart_of_its_pinned_release(series):
    entry = catalog.GPU_OPERATOR_CHARTS[series]
    upstream = UPSTREAM_KEYS[entry["pinned"]]
    missing = [k for k in entry["added"] if k not in upstream and not any(u.startswith(k + ".") for u in upstream)]
    assert missing == []


def test_key_history_explains_keys_some_series_lack():
    for key in catalog.KEY_HISTORY:
        having = [s for s, e in catalog.GPU_OPERATOR_CHARTS.items() if key in e["added"]]
        assert having and len(having) < len(catalog.GPU_OPERATOR_CHARTS), key


def test_choices_and_the_auto_kernel_module_minimum():
    assert "auto" in catalog.KERNEL_MODULE_TYPES and "off" in catalog.RDMA_MODES
    # "auto" needs an R570+ driver container; the pinned drivers of the newest series have one
    newest = catalog.GPU_OPERATOR_CHARTS[max(catalog.GPU_OPERATOR_CHARTS, key=lambda s: tuple(map(int, s[1:].split("."))))]
    assert tuple(map(int, newest["driver_version"].split("."))) >= catalog.KERNEL_MODULE_AUTO_MIN_DRIVER


def test_facts_other_catalogs_own_are_read_not_copied():
    """GKE's driver directory belongs to the GKE catalog, the strategies to the MIG catalog: one table per fact."""
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect
    assert catalog.GPU_OPERATOR_PLATFORMS["gke"]["install_dir"] == gke_gpudirect.HOST_NVIDIA_DIR
    assert not hasattr(catalog, "MIG_STRATEGIES") and not hasattr(catalog, "SHARING_STRATEGIES")
