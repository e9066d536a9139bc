# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The helpers both operator plans share (plugins/plugin_utils/_operators/inputs.py): refusals that name the option,
catalog lookups, values merging and chart sources."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gpu_operator import GPU_OPERATOR_CHARTS
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import inputs


def test_the_input_error_is_a_value_error():
    assert issubclass(inputs.OperatorInputError, ValueError)
    with pytest.raises(inputs.OperatorInputError, match="^namespace: 'x' and 1$"):
        inputs.require(False, "namespace: %r and %d", "x", 1)
    inputs.require(True, "never shown %s")


def test_catalog_chart_finds_the_series_or_lists_the_known_ones():
    assert inputs._catalog_chart(GPU_OPERATOR_CHARTS, "gpu-operator", "v25.3.2") == ("v25.3", GPU_OPERATOR_CHARTS["v25.3"])
    with pytest.raises(inputs.OperatorInputError) as caught:
        inputs._catalog_chart(GPU_OPERATOR_CHARTS, "gpu-operator", "v23.9.0")
    assert str(caught.value).startswith("chart_version: gpu-operator chart 'v23.9.0' is not in the catalog (known: ")
    assert "v25.3.x (pinned v25.3.4)" in str(caught.value)


def test_names_and_choices_name_the_option():
    assert inputs._dns_label("namespace", "gpu-operator") == "gpu-operator"
    assert inputs._dns_subdomain("name", "cluster-policy.v1") == "cluster-policy.v1"
    with pytest.raises(inputs.OperatorInputError, match="^namespace: "):
        inputs._dns_label("namespace", "GPU_Operator")
    with pytest.raises(inputs.OperatorInputError, match="^name: "):
        inputs._dns_subdomain("name", "a..b")
    assert inputs._choice("mig.strategy", "mixed", ("single", "mixed")) == "mixed"
    with pytest.raises(inputs.OperatorInputError, match="^mig.strategy: 'both' is not one of: single, mixed$"):
        inputs._choice("mig.strategy", "both", ("single", "mixed"))


def test_flatten_and_accepted_paths():
    values = {"driver": {"enabled": True, "rdma": {"enabled": False}}, "cdi": {}, "tolerations": []}
    assert inputs._flatten(values) == ["driver.enabled", "driver.rdma.enabled", "cdi", "tolerations"]
    assert inputs._accepted("driver.rdma.enabled", {"driver"}) and inputs._accepted("cdi", {"cdi"})
    assert not inputs._accepted("drivers.x", {"driver"})


def test_merge_is_recursive_and_copies():
    base = {"driver": {"enabled": True, "env": [1]}, "mig": {"strategy": "single"}}
    merged = inputs._merge(base, {"driver": {"env": [2]}, "mig": "off"})
    assert merged == {"driver": {"enabled": True, "env": [2]}, "mig": "off"}
    merged["driver"]["enabled"] = False
    assert base == {"driver": {"enabled": True, "env": [1]}, "mig": {"strategy": "single"}}


def test_versions_pins_and_chart_sources():
    assert inputs._version_tuple("v25.10.1-rc2") == (25, 10, 1) and inputs._version_tuple(None) == ()
    assert inputs._pinned("v25.3.2", "v25.3.4", "v") == "v25.3.2"
    assert inputs._pinned("v25.3", "v25.3.4", "v") == "v25.3.4"
    assert inputs._chart_source({}, "gpu-operator", "https://helm.ngc.nvidia.com/nvidia") == {
        "chart_ref": "gpu-operator", "chart_repo_url": "https://helm.ngc.nvidia.com/nvidia"}
    assert inputs._chart_source({"chart_ref": "/charts/gpu-operator", "chart_repo_url": ""}, "gpu-operator", "x") == {
        "chart_ref": "/charts/gpu-operator", "chart_repo_url": ""}


def test_hosts_with_is_sorted_and_tolerates_empty_facts():
    hosts = {"b": {"rdma": True}, "a": {"rdma": True}, "c": None}
    assert inputs._hosts_with(hosts, lambda facts: facts.get("rdma")) == ["a", "b"]
    assert inputs._hosts_with(None, bool) == []
