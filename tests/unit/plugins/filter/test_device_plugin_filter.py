# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device_plugin_chart filter (plugins/filter/device_plugin.py): the catalog's pin where the user set none."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import device_plugin
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import device_plugin as catalog

FILTERS = pathlib.Path(__file__).resolve().parents[4] / "plugins" / "filter"


def test_the_filter_has_a_doc_file_naming_it():
    for name in device_plugin.FilterModule().filters():
        doc = yaml.safe_load((FILTERS / ("%s.yml" % name)).read_text())
        assert doc["DOCUMENTATION"]["name"] == name


def test_unset_settings_give_the_catalogs_pin():
    pinned = {"chart_ref": catalog.DEVICE_PLUGIN_CHART, "chart_repo_url": catalog.DEVICE_PLUGIN_REPO_URL,
              "chart_version": catalog.DEVICE_PLUGIN_PINNED}
    assert device_plugin.device_plugin_chart({}) == pinned
    assert device_plugin.device_plugin_chart(None) == pinned
    # the role passes its options as they are: null (unset) for each
    assert device_plugin.device_plugin_chart({"chart_ref": None, "chart_repo_url": None, "chart_version": None}) == pinned


def test_set_settings_win():
    chart = device_plugin.device_plugin_chart({"chart_ref": "/charts/nvdp", "chart_repo_url": "", "chart_version": "0.19.3"})
    assert chart == {"chart_ref": "/charts/nvdp", "chart_repo_url": "", "chart_version": "0.19.3"}
    # a local chart keeps the pinned version
    assert device_plugin.device_plugin_chart({"chart_ref": "/charts/nvdp", "chart_repo_url": ""})["chart_version"] == "0.20.0"


@pytest.mark.parametrize("value, message", [
    ("0.20.0", "the input must be a dict"),
    ({"version": "0.20.0"}, "unknown keys version"),
    ({"chart_version": 0.2}, "device_plugin_chart: chart_version: must be a string"),
])
def test_bad_input_is_a_filter_error(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        device_plugin.device_plugin_chart(value)
