# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA driver catalog (plugins/module_utils/_catalog/dra_driver.py): facts that must agree with each other and
with the upstream documents they come from (values restated here from those documents, not imported)."""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import dra_driver as catalog


def _key(version):
    return tuple(int(part) for part in version.split("."))


def test_each_chart_line_offers_its_releases_oldest_first():
    for name, chart in catalog.CHARTS.items():
        assert chart["versions"], name
        assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in chart["versions"]), name
        assert list(chart["versions"]) == sorted(chart["versions"], key=_key), name


def test_the_migration_runs_from_the_ngc_name_to_the_sigs_name():
    assert catalog.UPGRADE_ORDER == ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")
    assert set(catalog.UPGRADE_ORDER) == set(catalog.CHARTS)
    # the sigs chart lives in an OCI registry: no repository URL, the reference carries it
    sigs = catalog.CHARTS["dra-driver-nvidia-gpu"]
    assert sigs["repo_url"] == "" and sigs["chart_ref"].startswith("oci://registry.k8s.io/")
    assert catalog.CHARTS["nvidia-dra-driver-gpu"]["repo_url"] == "https://helm.ngc.nvidia.com/nvidia"


def test_what_a_working_install_publishes():
    # install.md "verify": five DeviceClasses, IMEX channels published under the compute-domain driver
    assert len(catalog.DEVICE_CLASS_SOURCES) == 5
    assert "compute-domain-default-channel.nvidia.com" in catalog.DEVICE_CLASS_SOURCES
    assert catalog.COMPUTE_DOMAIN_DRIVER == "compute-domain.nvidia.com"
    assert catalog.GPU_DRIVER in catalog.DEVICE_CLASS_SOURCES
    assert catalog.COMPUTE_DOMAIN["group"] == "resource.nvidia.com"
    assert catalog.COMPUTE_DOMAIN["version"] == "v1beta1"
    assert catalog.COMPUTE_DOMAIN["default_allocation_mode"] in catalog.COMPUTE_DOMAIN["allocation_modes"]
    assert catalog.COMPUTE_DOMAIN["default_num_nodes"] == 0


def test_floors_and_gke_values():
    assert _key(catalog.MIN_DRIVER_COMPUTE_DOMAINS) == (570, 158, 1)
    assert _key(catalog.MIN_DRIVER_GPU_ALLOCATION) < _key(catalog.MIN_DRIVER_COMPUTE_DOMAINS)
    assert _key(catalog.MIN_KUBERNETES) == (1, 34)
    assert catalog.GKE_VALUES["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    assert catalog.GKE_VALUES["gpus_enabled"] is False
    assert catalog.DRIVER_ROOTS["gpu-operator"] == "/run/nvidia/driver"
    assert catalog.HOST_IMEX_SERVICE == "nvidia-imex.service"
