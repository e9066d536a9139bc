# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version aliases resolved through the GKE server config of the GCP double, against the GPUDirect catalog's gates."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import versions
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import PROFILES
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

OFFERED = ["1.30.3-gke.1639000", "1.32.2-gke.1489001", "1.30.5-gke.1014001", "1.29.6-gke.1254000",
           "1.30.4-gke.1129000", "1.31.1-gke.2008000", "1.27.16-gke.1008000"]


@pytest.fixture(scope="module")
def config():
    with GcpDouble(gke_versions=OFFERED) as gcp:
        yield versions.read(GcpSession(**gcp.module_args(project="p")), "us-central1")


def test_offered_versions_are_newest_first(config):
    assert versions.offered(config)[:3] == ["1.32.2-gke.1489001", "1.31.1-gke.2008000", "1.30.5-gke.1014001"]
    assert versions.offered(config, "regular") == versions.offered(config)


@pytest.mark.parametrize("alias, profile, expected", [
    ("latest", None, "1.32.2-gke.1489001"),
    ("latest", "tcpxo", "1.32.2-gke.1489001"),
    ("1.30", None, "1.30.5-gke.1014001"),
    ("1.30", "tcpxo", "1.30.5-gke.1014001"),
    ("1.27", None, "1.27.16-gke.1008000"),
    ("1.29", "tcpx", "1.29.6-gke.1254000"),
])
def test_alias_resolves_to_the_newest_patch_that_passes_the_gate(config, alias, profile, expected):
    assert versions.resolve(config, alias, profile) == expected


def test_patches_below_the_minimum_are_skipped():
    minimum = PROFILES["tcpxo"]["min_versions"]["1.30"]
    config = {"validMasterVersions": ["1.30.3-gke.1639000", minimum]}
    assert versions.resolve(config, "1.30", "tcpxo") == minimum
    assert versions.resolve({"validMasterVersions": ["1.30.3-gke.1639000"]}, "1.30") == "1.30.3-gke.1639000"


@pytest.mark.parametrize("alias, profile", [("1.27", "tcpxo"), ("1.33", None)])
def test_no_fit_names_the_offered_versions(config, alias, profile):
    with pytest.raises(versions.VersionError) as caught:
        versions.resolve(config, alias, profile)
    assert repr(alias) in str(caught.value) and "offered: 1.32.2-gke.1489001, 1.31.1-gke.2008000" in str(caught.value)


def test_gpudirect_versions_of_the_summary(config):
    summary = versions.summary(config, "tcpxo")
    assert summary["gpudirect"]["latest"] == "1.32.2-gke.1489001"
    assert "1.30.3-gke.1639000" not in summary["gpudirect"]["versions"]
    assert "1.27.16-gke.1008000" not in summary["gpudirect"]["versions"]
    assert set(summary["channels"]) == {"RAPID", "REGULAR", "STABLE"}


@pytest.mark.parametrize("value, alias", [("latest", True), ("1.30", True), ("1.30.4-gke.1129000", False),
                                          ("1.30.4", False), (None, False), ("newest", False)])
def test_is_alias(value, alias):
    assert versions.is_alias(value) is alias


def test_render_mode_cannot_resolve(tmp_path):
    session = GcpSession(project="p", render_dir=str(tmp_path))
    with pytest.raises(versions.VersionError, match="render mode"):
        versions.read(session, "us-central1")
