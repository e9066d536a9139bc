# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device plugin filters: the chart catalog in plugins/module_utils/_catalog/device_plugin.py, exposed to roles.

Documentation: plugins/filter/device_plugin_chart.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import filtered, plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

catalog = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.device_plugin")

_KEYS = ("chart_ref", "chart_repo_url", "chart_version")


def device_plugin_chart(options=None):
    """chart_ref, chart_repo_url and chart_version of the device plugin release: the catalog's pin where unset."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise AnsibleFilterError("device_plugin_chart: the input must be a dict of chart_ref, chart_repo_url and "
                                 "chart_version, got %s" % type(options).__name__)
    unknown = sorted(set(options) - set(_KEYS))
    if unknown:
        raise AnsibleFilterError("device_plugin_chart: unknown keys %s (known: %s)" % (", ".join(map(str, unknown)), ", ".join(_KEYS)))
    options = plain(options)
    return filtered(AnsibleFilterError, "device_plugin_chart", catalog.device_plugin_chart,
                    *[options.get(key) for key in _KEYS])


class FilterModule:
    """Device plugin filters."""

    def filters(self):
        return {"device_plugin_chart": device_plugin_chart}
