# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Network Operator catalog (plugins/module_utils/_catalog/network_operator.py): series, IPAM plugins, the
chart's kubeVersion rule and the names the readiness checks read."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import network_operator as catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gpu_operator import chart_series


@pytest.mark.parametrize("series", sorted(catalog.NETWORK_OPERATOR_CHARTS))
def test_each_series_pins_a_release_of_its_own(series):
    entry = catalog.NETWORK_OPERATOR_CHARTS[series]
    assert chart_series(entry["pinned"]) == series
    assert not entry["pinned"].startswith("v"), "network-operator tags its charts without a v"


@pytest.mark.parametrize("series", sorted(catalog.NETWORK_OPERATOR_CHARTS))
def test_each_series_defaults_to_an_ipam_plugin_it_has(series):
    entry = catalog.NETWORK_OPERATOR_CHARTS[series]
    assert entry["default_ipam"] in entry["ipam"]
    assert set(entry["ipam"]) <= set(catalog.IPAM_PLUGINS) - {"auto"}


@pytest.mark.parametrize("series", sorted(catalog.NETWORK_OPERATOR_CHARTS))
def test_kube_version_allows_prereleases_from_26_1(series):
    from_26_1 = tuple(int(part) for part in series[1:].split(".")) >= (26, 1)
    assert catalog.NETWORK_OPERATOR_CHARTS[series]["kube_version"].endswith("-0") == from_26_1


@pytest.mark.parametrize("series", sorted(catalog.NETWORK_OPERATOR_CHARTS))
def test_every_series_pins_a_doca_driver(series):
    assert catalog.NETWORK_OPERATOR_CHARTS[series]["doca_driver"]


def test_component_images_follow_the_release_scheme_from_25_7():
    assert catalog.component_image("v25.10", "25.10.2", "nvIpam") == {
        "image": "nvidia-k8s-ipam", "repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v25.10.2"}


def test_a_series_with_its_own_images_knows_them_for_its_pinned_release_only():
    assert catalog.component_image("v25.4", "25.4.0", "multus") == {
        "image": "multus-cni", "repository": "ghcr.io/k8snetworkplumbingwg", "version": "v4.1.0"}
    with pytest.raises(ValueError, match="25.4 images are known for the catalog's release 25.4.0 only, not 25.4.1"):
        catalog.component_image("v25.4", "25.4.1", "multus")
    own = [entry["images"] for entry in catalog.NETWORK_OPERATOR_CHARTS.values() if entry.get("images")]
    assert all(set(images) == set(catalog.COMPONENT_IMAGES) for images in own)


def test_names_the_operators_use():
    assert set(catalog.NETWORK_KINDS.values()) == {"MacvlanNetwork", "HostDeviceNetwork", "IPoIBNetwork"}
    assert catalog.RDMA_SHARED_RESOURCE.startswith(catalog.RDMA_RESOURCE_PREFIX)
    # only the RDMA shared device plugin's own selectors: others would be dropped silently
    assert "pciAddresses" not in catalog.RDMA_SHARED_SELECTORS and "vendors" in catalog.RDMA_SHARED_SELECTORS
    assert all(state.startswith("state-") for state in catalog.NCP_STATES.values())
