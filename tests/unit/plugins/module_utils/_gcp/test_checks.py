# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE input checks and helpers (plugins/module_utils/_gcp/checks.py), called directly.

Each check is held at its boundaries: the shortest and longest accepted value and one past each, the first and
last character, and the message naming the option.
"""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import checks
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import OperationError, OperationTimeoutError


def problems_of(check, *args, **kwargs):
    problems = Problems()
    check(problems, *args, **kwargs)
    return problems.items


# ---- names -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["a", "z", "a" * 40, "a" + "-" * 38 + "z", "gpu-pool-1", "a1", "a9"])
def test_gke_name_accepted(value):
    assert problems_of(checks.check_name, "name", value) == []


@pytest.mark.parametrize("value", [
    "",  # too short
    "a" * 41,  # one past the longest
    "1pool",  # first character a digit
    "-pool",  # first character a hyphen
    "pool-",  # last character a hyphen
    "Pool",  # uppercase
    "gpu_pool",  # underscore
    "gpu.pool",
    "gpu pool",
])
def test_gke_name_refused_with_the_rule(value):
    assert problems_of(checks.check_name, "name", value) == [
        "name: %r is not a valid name (%s)" % (value, checks.GKE_NAME_RULE)]


def test_name_none_is_not_checked():
    assert problems_of(checks.check_name, "name", None) == []


def test_gke_name_with_a_trailing_newline_is_refused():
    assert problems_of(checks.check_name, "name", "pool\n") != []


@pytest.mark.parametrize("value, ok", [
    ("a" * 63, True),
    ("a" * 62 + "1", True),
    ("a" * 64, False),
    ("a" * 41, True),  # longer than a GKE name, still a Compute Engine name
    ("vpc-", False),
    ("1vpc", False),
])
def test_gce_name_boundaries(value, ok):
    found = problems_of(checks.check_gce_name, "network", value)
    if ok:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith("network: %r is not a valid name (1 to 63" % (value,))


# ---- node types --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(machine_type="a3-megagpu-8g"),
    dict(machine_type="g2-standard-8"),
    dict(machine_type="n2-custom-8-32768-ext"),
    dict(machine_type="a" * 61 + "-b"),  # 63 characters
    dict(disk_type="pd-balanced"),
    dict(disk_type="pd-ssd"),
    dict(disk_type="hyperdisk-balanced"),
    dict(image_type="COS_CONTAINERD"),
    dict(image_type="ubuntu_containerd"),
    dict(image_type="C"),
    dict(accelerator_type="nvidia-l4"),
    dict(accelerator_type="nvidia-h100-mega-80gb"),
    dict(),
])
def test_node_types_accepted(kwargs):
    assert problems_of(checks.check_node_types, "", **kwargs) == []


@pytest.mark.parametrize("option, value, rule_word", [
    ("machine_type", "a" * 62 + "-b", "machine type"),  # 64 characters
    ("machine_type", "e2", "machine type"),  # no hyphen
    ("machine_type", "2e-medium", "machine type"),
    ("machine_type", "e2-medium-", "machine type"),
    ("machine_type", "E2-medium", "machine type"),
    ("disk_type", "ssd", "disk type"),
    ("disk_type", "pd-", "disk type"),
    ("disk_type", "pd-ssd2", "disk type"),
    ("image_type", "_COS", "image type"),
    ("image_type", "COS_", "image type"),
    ("image_type", "COS__CONTAINERD", "image type"),
    ("image_type", "COS-CONTAINERD", "image type"),
    ("image_type", "C" * 64, "image type"),  # the 63-character cap holds for every type
    ("accelerator_type", "nvidia-l4-", "accelerator type"),
    ("accelerator_type", "NVIDIA-L4", "accelerator type"),
])
def test_node_types_refused(option, value, rule_word):
    found = problems_of(checks.check_node_types, "", **{option: value})
    assert len(found) == 1 and found[0].startswith("%s: %r is not " % (option, value)) and rule_word in found[0]


def test_node_types_prefix_names_the_nested_option_and_all_problems_are_listed():
    found = problems_of(checks.check_node_types, "default_node_pool.", machine_type=8, disk_type="ssd",
                        image_type="COS", accelerator_type="nvidia-l4")
    assert [line.split(":")[0] for line in found] == ["default_node_pool.machine_type", "default_node_pool.disk_type"]
    assert found[0].startswith("default_node_pool.machine_type: 8 is not")


# ---- project -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["abcdef", "my-project-1", "a" * 30, "example.com:my-project",
                                   "e" * 32 + ".com:" + "p" * 26])  # 63 characters, domain-scoped
def test_project_accepted(value):
    assert problems_of(checks.check_project, value) == []


@pytest.mark.parametrize("value", ["abcde", "a" * 31, "a" * 64, "e" * 33 + ".com:" + "p" * 26, "1project", "project-",
                                   "My-project", "my_project", "", "my-project\n"])
def test_project_refused(value):
    assert problems_of(checks.check_project, value) == ["project: %r is not a valid Google Cloud project ID" % (value,)]


def test_project_none_is_not_checked():
    assert problems_of(checks.check_project, None) == []


def test_plain_project_id_longer_than_30_is_refused():
    assert problems_of(checks.check_project, "a" * 31) != []


# ---- locations ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("location, kind, region", [
    ("us-central1-c", "zone", "us-central1"),
    ("europe-west4-a", "zone", "europe-west4"),
    ("us-central1", "region", "us-central1"),
    ("northamerica-northeast12", "region", "northamerica-northeast12"),
    ("us-central", None, "us-central"),
    ("us-central1-cc", None, "us-central1-cc"),
    ("US-central1", None, "US-central1"),
    ("", None, ""),
    (None, None, None),
])
def test_location_kind_and_region_of(location, kind, region):
    assert checks.location_kind(location) == kind
    assert checks.region_of(location) == region


def test_check_location_names_the_option():
    assert problems_of(checks.check_location, None) == []
    assert problems_of(checks.check_location, "us-central1") == []
    assert problems_of(checks.check_location, "us-central1-c", option="zone") == []
    assert problems_of(checks.check_location, "moon-base", option="zone") == [
        "zone: 'moon-base' is neither a zone (for example us-central1-c) nor a region (for example us-central1)"]


@pytest.mark.parametrize("zones, location, expected", [
    (None, "us-central1", []),
    (["us-central1-a", "us-central1-c"], "us-central1", []),
    (["us-central1-a"], "us-central1-c", []),  # a zonal cluster's extra zone in the same region
    (["europe-west4-a"], None, []),  # no location to compare with
    (["europe-west4-a"], "moon", []),  # a bad location is reported by check_location, not here
    ([], "us-central1", ["node_locations: must name at least one zone when set"]),
    (["us-central1-a", "us-central1-a"], "us-central1",
     ["node_locations: lists a zone more than once: us-central1-a, us-central1-a"]),
    (["us-central1"], "us-central1", ["node_locations: 'us-central1' is not a zone (for example us-central1-c)"]),
    ([None], "us-central1", ["node_locations: None is not a zone (for example us-central1-c)"]),
    (["europe-west4-a", "us-central1-b"], "us-central1",
     ["node_locations: zone europe-west4-a is not in the region of location us-central1"]),
])
def test_node_locations(zones, location, expected):
    assert problems_of(checks.check_node_locations, "node_locations", zones, location) == expected


# ---- versions ----------------------------------------------------------------------------------------------

def test_full_version_is_parsed_or_reported():
    problems = Problems()
    assert checks.check_full_version(problems, "version", "1.30.4-gke.1129000") == (1, 30, 4, 1129000)
    assert checks.check_full_version(problems, "version", None) is None
    assert problems.items == []
    for bad in ("1.30", "latest", "v1.30.4-gke.1129000", "1.30.4-gke.1129000 "):
        assert checks.check_full_version(problems, "version", bad) is None
    assert len(problems.items) == 4
    assert all(line.startswith("version: ") and "MAJOR.MINOR.PATCH-gke.BUILD" in line for line in problems.items)


def test_version_key_sorts_numerically_and_rejects_aliases():
    offered = ["1.30.10-gke.1", "1.30.9-gke.1200", "1.30.9-gke.999", "1.4.0-gke.1"]
    assert sorted(offered, key=checks.version_key) == ["1.4.0-gke.1", "1.30.9-gke.999", "1.30.9-gke.1200",
                                                       "1.30.10-gke.1"]
    assert checks.version_key("1.30") is None
    assert checks.version_key(None) is None


# ---- CIDR --------------------------------------------------------------------------------------------------

def test_cidr_returns_the_network():
    problems = Problems()
    network = checks.check_cidr(problems, "cidr", "10.8.0.0/14")
    assert str(network) == "10.8.0.0/14" and network.num_addresses == 2 ** 18
    assert checks.check_cidr(problems, "cidr", None) is None
    assert problems.items == []


@pytest.mark.parametrize("value, words", [
    ("10.8.0.1/14", "is not a valid CIDR block"),  # host bits set
    ("10.8.0.0/33", "is not a valid CIDR block"),
    ("10.256.0.0/16", "is not a valid CIDR block"),
    ("fd00::/64", "is not an IPv4 CIDR block"),
    ("10.8.0.0", "has no prefix length"),
    (167772160, "is not a valid CIDR block"),
])
def test_cidr_refused(value, words):
    problems = Problems()
    assert checks.check_cidr(problems, "cidr", value) is None
    assert len(problems.items) == 1 and problems.items[0].startswith("cidr: %r " % (value,)) and words in problems.items[0]


@pytest.mark.parametrize("value, expected", [
    ("10.0.0.0/16", []),  # exactly min_prefix
    ("10.0.0.0/24", []),  # exactly max_prefix
    ("10.0.0.0/15", ["cidr: 10.0.0.0/15 is too large: the prefix length must be at least /16"]),
    ("10.0.0.0/25", ["cidr: 10.0.0.0/25 is too small: the prefix length must be at most /24"]),
])
def test_cidr_prefix_bounds(value, expected):
    problems = Problems()
    network = checks.check_cidr(problems, "cidr", value, max_prefix=24, min_prefix=16)
    assert str(network) == value  # the network comes back even when its size is refused
    assert problems.items == expected


def test_no_overlap_reports_each_overlapping_pair_once():
    problems = Problems()
    pods = checks.check_cidr(problems, "pods", "10.0.0.0/14")
    services = checks.check_cidr(problems, "services", "10.4.0.0/20")  # adjacent: 10.0.0.0/14 ends at 10.3.255.255
    nodes = checks.check_cidr(problems, "nodes", "10.2.0.0/16")  # inside pods
    master = checks.check_cidr(problems, "master", "10.4.0.0/28")  # inside services
    checks.check_no_overlap(problems, [("pods", pods), ("services", services), ("unset", None), ("nodes", nodes),
                                       ("master", master)])
    assert problems.items == ["pods: 10.0.0.0/14 overlaps nodes (10.2.0.0/16)",
                              "services: 10.4.0.0/20 overlaps master (10.4.0.0/28)"]


# ---- taints ------------------------------------------------------------------------------------------------

def test_taints_get_the_container_api_effects():
    problems = Problems()
    parsed = checks.parse_taints(problems, "taints", [
        "nvidia.com/gpu=present:NoSchedule", "dedicated:PreferNoSchedule", "example.com/drain=:NoExecute"])
    assert problems.items == []
    assert parsed == [dict(key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE"),
                      dict(key="dedicated", effect="PREFER_NO_SCHEDULE"),
                      dict(key="example.com/drain", effect="NO_EXECUTE")]


def test_taints_none_and_empty():
    problems = Problems()
    assert checks.parse_taints(problems, "taints", None) is None
    assert checks.parse_taints(problems, "taints", []) == []
    assert problems.items == []


@pytest.mark.parametrize("text, words", [
    ("gpu=present:Evict", "has effect 'Evict'; allowed: NoSchedule, PreferNoSchedule, NoExecute"),
    ("gpu=present:noschedule", "has effect 'noschedule'"),
    ("gpu=present:NO_SCHEDULE", "is not written key=value:Effect"),  # the API's spelling is not an input
    ("gpu=present", "is not written key=value:Effect"),
    ("gpu=a b:NoSchedule", "is not written key=value:Effect"),
    ("-gpu=present:NoSchedule", "has an invalid key '-gpu'"),
    ("gpu=present-:NoSchedule", "has an invalid value 'present-'"),
    ("gpu=%s:NoSchedule" % ("v" * 64), "has an invalid value"),
])
def test_bad_taint_is_reported_and_left_out(text, words):
    problems = Problems()
    assert checks.parse_taints(problems, "node_taints", [text, "ok:NoExecute"]) == [dict(key="ok", effect="NO_EXECUTE")]
    assert len(problems.items) == 1 and problems.items[0].startswith("node_taints: %r " % (text,))
    assert words in problems.items[0]


def test_taint_value_at_the_63_character_limit():
    problems = Problems()
    parsed = checks.parse_taints(problems, "taints", ["gpu=%s:NoSchedule" % ("v" * 63)])
    assert problems.items == [] and parsed[0]["value"] == "v" * 63


@pytest.mark.parametrize("taint, text", [
    (dict(key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE"), "nvidia.com/gpu=present:NoSchedule"),
    (dict(key="dedicated", effect="PREFER_NO_SCHEDULE"), "dedicated:PreferNoSchedule"),
    (dict(key="drain", value="", effect="NO_EXECUTE"), "drain:NoExecute"),
    (dict(key="odd", value="x", effect="EFFECT_UNSPECIFIED"), "odd=x:EFFECT_UNSPECIFIED"),  # unknown: kept as read
])
def test_taint_text(taint, text):
    assert checks.taint_text(taint) == text


def test_taint_text_reverses_parse_taints():
    texts = ["nvidia.com/gpu=present:NoSchedule", "a:PreferNoSchedule", "b=c:NoExecute"]
    assert [checks.taint_text(t) for t in checks.parse_taints(Problems(), "taints", texts)] == texts


def test_taint_effect_tables_are_inverse():
    assert sorted(checks.TAINT_EFFECTS) == ["NoExecute", "NoSchedule", "PreferNoSchedule"]
    assert {checks.TAINT_EFFECT_NAMES[v]: v for v in checks.TAINT_EFFECTS.values()} == checks.TAINT_EFFECTS


# ---- busy statuses -----------------------------------------------------------------------------------------

# the Cluster.Status and NodePool.Status values of the container v1 API
CLUSTER_STATUSES = {"STATUS_UNSPECIFIED", "PROVISIONING", "RUNNING", "RECONCILING", "STOPPING", "ERROR", "DEGRADED"}
POOL_STATUSES = {"STATUS_UNSPECIFIED", "PROVISIONING", "RUNNING", "RUNNING_WITH_ERROR", "RECONCILING", "STOPPING",
                 "ERROR"}


def test_busy_statuses_are_the_transitional_ones():
    assert set(checks.BUSY_CLUSTER_STATUSES) == {"PROVISIONING", "RECONCILING", "STOPPING"}
    assert set(checks.BUSY_POOL_STATUSES) == {"PROVISIONING", "RECONCILING", "STOPPING"}
    assert set(checks.BUSY_CLUSTER_STATUSES) <= CLUSTER_STATUSES
    assert set(checks.BUSY_POOL_STATUSES) <= POOL_STATUSES
    # settled states, good or bad, end the wait
    for settled in ("RUNNING", "RUNNING_WITH_ERROR", "ERROR", "DEGRADED"):
        assert settled not in checks.BUSY_CLUSTER_STATUSES and settled not in checks.BUSY_POOL_STATUSES


# ---- times -------------------------------------------------------------------------------------------------

UTC = datetime.timezone.utc


@pytest.mark.parametrize("text, expected", [
    ("2026-01-31T00:00:00Z", datetime.datetime(2026, 1, 31, tzinfo=UTC)),
    ("2026-12-31T23:59:59Z", datetime.datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ("2026-01-31T05:30:00+05:30", datetime.datetime(2026, 1, 31, tzinfo=UTC)),
    ("2026-01-30T19:00:00-05:00", datetime.datetime(2026, 1, 31, tzinfo=UTC)),
    ("2026-01-31T00:00:00.5Z", datetime.datetime(2026, 1, 31, 0, 0, 0, 500000, tzinfo=UTC)),
    ("2026-01-31T00:00:00.123456789Z", datetime.datetime(2026, 1, 31, 0, 0, 0, 123456, tzinfo=UTC)),  # ns cut
    ("2024-02-29T12:00:00Z", datetime.datetime(2024, 2, 29, 12, tzinfo=UTC)),
])
def test_rfc3339_times_are_read(text, expected):
    problems = Problems()
    parsed = checks.parse_time(problems, "start", text)
    assert problems.items == [] and parsed == expected and parsed.tzinfo is not None


@pytest.mark.parametrize("text", [
    "2026-01-31T00:00:00",  # no zone
    "2026-01-31 00:00:00Z",
    "2026-01-31T00:00:00z",
    "2026-01-31",
    "2026-02-30T00:00:00Z",  # no such day
    "2026-01-31T24:00:00Z",
    "2026-01-31T00:00:00+0530",
    "2026-01-31T00:00:00.Z",
])
def test_bad_times_are_reported(text):
    problems = Problems()
    assert checks.parse_time(problems, "start", text) is None
    assert problems.items == ["start: %r is not an RFC 3339 time with a zone, for example 2026-01-31T00:00:00Z" % (text,)]


def test_unset_time_is_not_checked():
    problems = Problems()
    assert checks.parse_time(problems, "start", None) is None and problems.items == []


def test_rfc3339_writes_utc_without_fraction():
    moment = datetime.datetime(2026, 1, 31, 5, 30, 0, 999999, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30)))
    assert checks.rfc3339(moment) == "2026-01-31T00:00:00Z"
    assert checks.to_datetime(checks.rfc3339(moment)) == moment.replace(microsecond=0)


# ---- names in paths and links ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("projects/p/global/networks/vpc1", "vpc1"),
    ("https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/subnetworks/sub1", "sub1"),
    ("projects/p/global/networks/vpc1/", "vpc1"),
    ("vpc1", "vpc1"),
    ("", ""),
    (None, None),
])
def test_last_segment(value, expected):
    assert checks.last_segment(value) == expected


def test_cluster_path():
    assert checks.cluster_path("p", "us-central1", "a3mega") == "projects/p/locations/us-central1/clusters/a3mega"


# ---- error texts -------------------------------------------------------------------------------------------

def test_operation_error_text_uses_describe():
    api = ApiError(409, "already exists", method="POST", url="https://container.googleapis.com/v1/x")
    assert checks.operation_error_text(api) == "HTTP 409 POST https://container.googleapis.com/v1/x: already exists"
    failed = OperationError(dict(name="op-1", operationType="CREATE_NODE_POOL"), "quota exceeded", status=429)
    assert checks.operation_error_text(failed) == "HTTP 429: operation op-1 (CREATE_NODE_POOL) failed: quota exceeded"
    timed_out = OperationTimeoutError(dict(name="op-2", status="RUNNING"), 60)
    assert checks.operation_error_text(timed_out) == "operation op-2 (unknown type) was not DONE after 60s (status RUNNING)"


def test_operation_error_text_of_other_errors():
    assert checks.operation_error_text(ValueError("bad value")) == "bad value"

    class NotCallable(Exception):
        describe = "not a method"

    assert checks.operation_error_text(NotCallable("plain text")) == "plain text"
