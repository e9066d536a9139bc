# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin chart catalog (plugins/module_utils/_catalog/device_plugin.py): the pin, and the chart source
a release gets where the user sets none, held against the tests' stand-in chart."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import device_plugin as catalog

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..")


def test_the_pin_is_the_stand_in_charts_version():
    """The integration tests install tests/charts/nvidia-device-plugin in place of the pinned chart: same name and version."""
    with open(os.path.join(ROOT, "tests", "charts", "nvidia-device-plugin", "Chart.yaml"), encoding="utf-8") as handle:
        chart = yaml.safe_load(handle)
    assert (chart["name"], str(chart["version"])) == (catalog.DEVICE_PLUGIN_CHART, catalog.DEVICE_PLUGIN_PINNED)
    assert catalog.DEVICE_PLUGIN_REPO_URL.startswith("https://")


@pytest.mark.parametrize("ref, url, version, expected", [
    (None, None, None, ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0")),
    ("", None, "", ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0")),
    (None, None, "0.17.4", ("nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.17.4")),
    ("/charts/nvdp", "", None, ("/charts/nvdp", "", "0.20.0")),
    ("oci://mirror.example/nvdp", "", " 0.19.3 ", ("oci://mirror.example/nvdp", "", "0.19.3")),
    (None, "https://mirror.example/nvdp", None, ("nvidia-device-plugin", "https://mirror.example/nvdp", "0.20.0")),
])
def test_unset_parts_are_the_catalogs(ref, url, version, expected):
    chart = catalog.device_plugin_chart(ref, url, version)
    assert (chart["chart_ref"], chart["chart_repo_url"], chart["chart_version"]) == expected


def test_a_version_that_is_not_text_is_refused():
    with pytest.raises(ValueError, match="chart_version: must be a string"):
        catalog.device_plugin_chart(chart_version=0.2)
