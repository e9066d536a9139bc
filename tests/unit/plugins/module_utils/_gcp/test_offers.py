# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight reads (_gcp_offers) against the GCP double's catalog: one read per fact, refusals name the option."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import offers
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

PROJECT = "offers-project"
A3_MEGA = dict(machine_type="a3-megagpu-8g", accelerator_type="nvidia-h100-mega-80gb", accelerator_count=8,
               disk_type="pd-ssd", image_type="COS_CONTAINERD", node_version="1.32.2-gke.1489001")


@pytest.fixture
def double():
    with GcpDouble() as gcp:
        yield gcp


def session(double, **options):
    return GcpSession(**double.module_args(project=PROJECT, **options))


def check(gcp, zones=("us-central1-c",), named=True, location="us-central1", **changes):
    problems = Problems()
    offers.check_node_pool(gcp, problems, location, list(zones), named, dict(A3_MEGA, **changes))
    return problems.items


def test_a_pool_the_zone_offers_passes_with_one_read_per_fact(double):
    gcp = session(double)
    assert check(gcp, zones=("us-central1-a", "us-central1-c")) == []
    assert check(gcp, zones=("us-central1-a", "us-central1-c")) == [], "a second check reads nothing more"
    reads = double.read_counts()
    assert set(reads.values()) == {1}
    # the server config, then per zone: the zone, machine type, accelerator type, disk type
    assert len(reads) == 1 + 2 * 4


def test_zones_from_the_cluster_are_not_read_again(double):
    gcp = session(double)
    assert check(gcp, named=False) == []
    assert not [p for p in double.read_counts() if p.endswith("/zones/us-central1-c")]


@pytest.mark.parametrize("changes,zones,expected", [
    (dict(), ("us-central1-z",), "node_locations: zone us-central1-z does not exist"),
    (dict(machine_type="a3-megagpu-16g"), ("us-central1-c",),
     "machine_type: machine type a3-megagpu-16g in zone us-central1-c does not exist"),
    (dict(accelerator_type="nvidia-h300"), ("us-central1-c",),
     "accelerator_type: accelerator type nvidia-h300 in zone us-central1-c does not exist"),
    (dict(accelerator_type="nvidia-l4", accelerator_count=16, machine_type="g2-standard-96"), ("us-central1-c",),
     "accelerator_count: 16 cards of nvidia-l4: zone us-central1-c allows at most 8 per instance"),
    (dict(disk_type="pd-turbo"), ("us-central1-c",), "disk_type: disk type pd-turbo in zone us-central1-c does not"),
    (dict(image_type="COS"), ("us-central1-c",), "image_type: COS is not an image type GKE offers"),
    (dict(node_version="1.30.0-gke.1"), ("us-central1-c",), "node_version: 1.30.0-gke.1 is not a node version"),
])
def test_what_the_service_does_not_offer_is_refused_naming_the_option(double, changes, zones, expected):
    problems = check(session(double), zones=zones, **changes)
    assert any(expected in p for p in problems), problems
    assert double.mutating_requests() == []


def test_an_offer_withdrawn_from_one_zone(double):
    double.catalog.withdraw("us-central1-b", "machineTypes", "a3-megagpu-8g")
    problems = check(session(double), zones=("us-central1-a", "us-central1-b"))
    assert problems == ["machine_type: machine type a3-megagpu-8g in zone us-central1-b does not exist (Compute "
                        "Engine/GKE answered 404 Not Found for projects/%s/zones/us-central1-b/machineTypes/"
                        "a3-megagpu-8g)" % PROJECT]


def test_a_location_gke_does_not_know(double):
    assert check(session(double), location="us-central9", zones=()) == [
        "location: location us-central9 does not exist (Compute Engine/GKE answered 404 Not Found for "
        "projects/%s/locations/us-central9/serverConfig)" % PROJECT]


def test_a_refusal_quotes_the_service_and_other_errors_propagate(double):
    gcp = session(double)
    double.inject("status", status=400, method="GET", path="/regions/", count=1, message="Invalid value for region")
    problems = Problems()
    assert offers.check_region(gcp, problems, "location", "us-central1") is None
    assert "the service refused it" in problems.items[0] and "Invalid value for region" in problems.items[0]
    double.inject("status", status=500, method="GET", path="/zones/", count=1, message="backend error")
    with pytest.raises(ApiError):
        offers.check_zone(session(double, max_retries=0), Problems(), "node_locations", "us-central1-c")


def test_a_read_the_credentials_may_not_make_is_a_warning_not_a_failure(double):
    double.inject("status", status=403, method="GET", path="/machineTypes/", count=1,
                  message="Required 'compute.machineTypes.get' permission")
    problems = Problems()
    offers.check_node_pool(session(double), problems, "us-central1", ["us-central1-c"], False, A3_MEGA)
    assert problems.items == []
    assert problems.warnings == ["machine_type: machine type a3-megagpu-8g in zone us-central1-c was not checked "
                                 "before the change: the credentials may not read projects/%s/zones/us-central1-c/"
                                 "machineTypes/a3-megagpu-8g (HTTP 403)" % PROJECT]
