# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA driver catalog against the upstream chart at each tag it names.

tests/data/upstream/dra-driver-nvidia-gpu/<release>/ holds, per catalog release, what scripts/extract_upstream.py
(``--dra-driver``) read from kubernetes-sigs/dra-driver-nvidia-gpu at the release's tag: Chart.yaml's name and
version, the CRDs of crds/, the DeviceClass templates and their conditions, and the values keys.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import dra_driver_plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "upstream", "dra-driver-nvidia-gpu")
RELEASES = [(line, version) for line, entry in dra_driver.CHARTS.items() for version in entry["versions"]]


def _load(version, name):
    with open(os.path.join(DATA, version, name), encoding="utf-8") as handle:
        return json.load(handle)


def _keys(version):
    return set(_load(version, "values.json")["keys"])


def _dotted(values, prefix=""):
    for key, value in values.items():
        path = "%s.%s" % (prefix, key) if prefix else key
        # affinity and feature gates hold Kubernetes fields and gate names, not chart keys
        if isinstance(value, dict) and value and key not in ("featureGates", "affinity"):
            yield from _dotted(value, path)
        else:
            yield path


def test_every_release_has_data_at_its_recorded_tag():
    assert sorted(os.listdir(DATA)) == sorted(v for _line, v in RELEASES)
    for _line, version in RELEASES:
        tag, commit = dra_driver.CHART_TAGS[version]
        source = _load(version, "chart.json")["source"]
        assert source["repository"] == "kubernetes-sigs/dra-driver-nvidia-gpu" and source["commit"] == commit
        assert source["tag"] == (commit if tag == "HEAD" else tag)


@pytest.mark.parametrize("line,version", RELEASES)
def test_chart_name_and_version_spelling(line, version):
    chart = _load(version, "chart.json")
    assert chart["name"] == line
    # Chart.yaml carries no "v"; 0.5.0 was read at its development head
    assert chart["version"] == (version + "-dev" if dra_driver.CHART_TAGS[version][0] == "HEAD" else version)


@pytest.mark.parametrize("line,version", RELEASES)
def test_crds_match_the_chart(line, version):
    chart = _load(version, "chart.json")
    assert sorted(chart["crds"]) == dra_driver_plan.crds(line, version)
    domain = chart["crds"]["computedomains.resource.nvidia.com"]
    spec = dra_driver.COMPUTE_DOMAIN
    assert (domain["group"], domain["kind"], domain["plural"]) == (spec["group"], spec["kind"], spec["plural"])
    assert domain["versions"] == [spec["version"]] and domain["scope"] == ("Namespaced" if spec["namespaced"] else "Cluster")


@pytest.mark.parametrize("line,version", RELEASES)
def test_device_classes_match_the_templates(line, version):
    templates = _load(version, "chart.json")["device_classes"]
    assert sorted(templates) == dra_driver_plan.device_classes(line, version, gpu_allocation=True, host_managed=False)
    for name, condition in templates.items():
        resource = dra_driver.DEVICE_CLASS_SOURCES[name][0]
        assert ".Values.resources.%s.enabled" % resource in condition


@pytest.mark.parametrize("line,version", RELEASES)
@pytest.mark.parametrize("platform", ["gke", "host", "gpu-operator"])
def test_every_value_the_plan_sets_is_a_key_of_that_release(line, version, platform):
    keys = _keys(version)
    plan = dra_driver_plan.dra_driver_plan({"chart_version": version, "platform": platform, "gpu_allocation": platform != "gke"})
    missing = [path for path in _dotted(plan["chart"]["values"]) if path not in keys]
    assert missing == []


def test_host_managed_values_exist_from_their_first_release():
    keys = _keys("0.5.0")
    assert "featureGates" in keys and dra_driver.HOST_MANAGED_IMEX["value_path"] in keys
    assert dra_driver.HOST_MANAGED_IMEX["value_path"] not in _keys("0.4.1")
    assert "featureGates" in _keys(dra_driver.FEATURE_GATES_SINCE[1]) and "featureGates" not in _keys("25.3.2")
