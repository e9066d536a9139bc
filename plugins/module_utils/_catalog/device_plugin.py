# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The NVIDIA k8s-device-plugin chart catalog: facts only, no I/O.

Sources: NVIDIA/k8s-device-plugin ``README.md`` ("Deployment via helm": ``helm repo add nvdp
https://nvidia.github.io/k8s-device-plugin``, chart ``nvdp/nvidia-device-plugin``) and its release tags, up to
``v0.20.0`` at the research snapshot (shared notes nvidia-stack.md, header and section 3); the chart and the
plugin share the version number. The tests' stand-in chart (tests/charts/nvidia-device-plugin) mirrors the
top-level values of that release.

- ``DEVICE_PLUGIN_REPO_URL``, ``DEVICE_PLUGIN_CHART``, ``DEVICE_PLUGIN_PINNED``: the chart the
  nvidia_device_plugin role installs unless told otherwise.
- ``device_plugin_chart``: the release's chart source, the pin where the user set none.
"""

from __future__ import annotations


DEVICE_PLUGIN_REPO_URL = "https://nvidia.github.io/k8s-device-plugin"
DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
DEVICE_PLUGIN_PINNED = "0.20.0"


def device_plugin_chart(chart_ref=None, chart_repo_url=None, chart_version=None):
    """dict(chart_ref, chart_repo_url, chart_version) of the device plugin release.

    Unset (None or empty) chart_ref and chart_version are the catalog's chart and pin. An unset (None)
    repository URL is the catalog's; an empty one is kept: chart_ref is then a local chart path or an OCI
    reference (the apply role leaves the URL out).
    """
    for name, value in (("chart_ref", chart_ref), ("chart_repo_url", chart_repo_url), ("chart_version", chart_version)):
        if value is not None and not isinstance(value, str):
            raise ValueError("%s: must be a string, got %r" % (name, value))
    version = (chart_version or "").strip()
    return {"chart_ref": chart_ref or DEVICE_PLUGIN_CHART,
            "chart_repo_url": DEVICE_PLUGIN_REPO_URL if chart_repo_url is None else chart_repo_url,
            "chart_version": version or DEVICE_PLUGIN_PINNED}
