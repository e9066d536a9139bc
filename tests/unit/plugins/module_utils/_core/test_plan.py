# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import (
    Plan,
    differing_fields,
    pick,
)


def test_only_fields_the_user_set_are_compared():
    desired = {"mtu": 8244, "description": None, "routingConfig": {"routingMode": "REGIONAL"}}
    current = {"mtu": 8244, "description": "made by hand", "routingConfig": {"routingMode": "REGIONAL"}, "id": "1"}
    assert differing_fields(desired, current) == []


def test_nested_and_list_differences_are_reported_as_dotted_paths():
    desired = {"mtu": 8244, "config": {"labels": {"a": "1"}, "taints": [{"key": "k"}]}}
    current = {"mtu": 1460, "config": {"labels": {"a": "2"}, "taints": []}}
    assert differing_fields(desired, current) == ["config.labels.a", "config.taints", "mtu"]


def test_int64_strings_from_google_apis_equal_their_integers():
    assert differing_fields({"acceleratorCount": 8}, {"acceleratorCount": "8"}) == []
    assert differing_fields({"acceleratorCount": 8}, {"acceleratorCount": "4"}) == ["acceleratorCount"]


def test_booleans_are_not_confused_with_integer_strings():
    assert differing_fields({"enabled": True}, {"enabled": "1"}) == ["enabled"]


def test_empty_desired_subtree_asks_for_nothing():
    assert differing_fields({"gvnic": {"enabled": None}}, {}) == []


def test_pick_keeps_only_the_named_fields():
    document = {"a": {"b": 1, "c": 2}, "d": 3}
    assert pick(document, ["a.b", "d", "missing.x"]) == {"a": {"b": 1}, "d": 3}


def test_compare_records_create_then_update_then_nothing():
    plan = Plan()
    assert plan.compare("network", "vpc1", {"mtu": 8244}, None).action == "create"
    assert plan.compare("network", "vpc2", {"mtu": 8244}, {"mtu": 1460}).fields == ["mtu"]
    assert plan.compare("network", "vpc3", {"mtu": 8244}, {"mtu": 8244}) is None
    assert [c.action for c in plan.changes] == ["create", "update"]
    assert plan.changed


def test_result_without_diff_has_no_diff_key_and_lists_changes():
    plan = Plan()
    plan.delete("firewall", "fw1", {"name": "fw1"})
    result = plan.result()
    assert result == {"changed": True, "changes": [{"action": "delete", "kind": "firewall", "name": "fw1"}]}


def test_update_diff_shows_only_the_changed_fields():
    plan = Plan()
    plan.update("network", "vpc1", {"mtu": 1460, "name": "vpc1", "id": "9"}, {"mtu": 8244, "name": "vpc1"}, ["mtu"])
    diff = plan.result(diff=True)["diff"][0]
    assert json.loads(diff["before"]) == {"mtu": 1460}
    assert json.loads(diff["after"]) == {"mtu": 8244}
    assert diff["before_header"] == "network/vpc1 (current)"


def test_create_and_delete_diffs_show_absence():
    plan = Plan()
    plan.create("subnetwork", "s1", {"ipCidrRange": "192.168.0.0/24"})
    plan.delete("subnetwork", "s2", {"ipCidrRange": "192.168.1.0/24"})
    create, delete = plan.result(diff=True)["diff"]
    assert create["before"] == "" and "192.168.0.0/24" in create["after"]
    assert delete["after"] == "" and delete["after_header"] == "subnetwork/s2 (absent)"


def test_empty_plan_is_unchanged():
    assert Plan().result(diff=True) == {"changed": False, "changes": [], "diff": []}


def test_unknown_action_is_refused():
    with pytest.raises(ValueError, match="unknown action"):
        Plan().add("upsert", "network", "x")


def test_of_filters_by_action():
    plan = Plan()
    plan.create("a", "1", {})
    plan.recreate("b", "2", {}, {}, ["machineType"])
    assert [c.name for c in plan.of("recreate")] == ["2"]
