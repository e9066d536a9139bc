# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job slicing (plugins/plugin_utils/_awx/slicing.py): slices from instance-group capacity, host-level playbooks only,
and the slices a launch limit leaves empty; tests/integration/test_awx_slicing.py reads the groups from the AWX double."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.awx_slicing import (
    awx_slice_count, awx_slice_extra_vars, awx_slice_problems)
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx import slicing


def node(name, capacity=100, node_type="execution", enabled=True, state="ready"):
    return {"hostname": name, "capacity": capacity, "node_type": node_type, "enabled": enabled, "node_state": state}


def group(name, instances=(), container=False, max_jobs=0, max_forks=0):
    return {"name": name, "is_container_group": container, "max_concurrent_jobs": max_jobs, "max_forks": max_forks,
            "instances": list(instances)}


def test_impact_is_forks_plus_one_with_ansibles_default_of_five():
    assert slicing.job_impact(0) == 6
    assert slicing.job_impact(None) == 6
    assert slicing.job_impact(1) == 2
    assert slicing.job_impact(50) == 51
    with pytest.raises(ValueError, match="forks must be 0"):
        slicing.job_impact(-1)


def test_one_slice_per_ready_execution_node_that_takes_the_impact():
    nodes = [node("e1"), node("e2"), node("h1", node_type="hybrid"), node("c1", node_type="control"),
             node("hop", node_type="hop"), node("off", enabled=False), node("gone", state="unavailable"),
             node("small", capacity=20)]
    result = slicing.slice_count([group("default", nodes)], forks=20)
    assert result["count"] == 3 and result["impact"] == 21 and result["problems"] == []
    assert result["why"] == ["instance group default: 3 (3 ready execution node(s) with capacity >= 21)"]
    # a node of exactly the impact takes a job
    assert slicing.slice_count([group("g", [node("e", capacity=21)])], forks=20)["count"] == 1


def test_group_limits_and_the_maximum_cap_the_nodes():
    nodes = [node("e%d" % i) for i in range(10)]
    assert slicing.slice_count([group("g", nodes, max_jobs=4)])["count"] == 4
    assert slicing.slice_count([group("g", nodes, max_forks=18)], forks=5)["count"] == 3
    capped = slicing.slice_count([group("g", nodes)], maximum=8)
    assert capped["count"] == 8 and capped["why"][-1] == "capped at 8 (awx_job_templates_slice_max)"
    assert slicing.slice_count([group("g", nodes)], maximum=10)["why"] == ["instance group g: 10 (10 ready execution node(s) with capacity >= 6)"]
    with pytest.raises(ValueError, match="maximum"):
        slicing.slice_count([group("g", nodes)], maximum=-1)


def test_container_groups_are_sized_by_their_limits_and_groups_add_up():
    assert slicing.slice_count([group("pods", container=True, max_jobs=12)])["count"] == 12
    assert slicing.slice_count([group("pods", container=True, max_forks=100)], forks=9)["count"] == 10
    assert slicing.slice_count([group("pods", container=True, max_jobs=12, max_forks=60)], forks=9)["count"] == 6
    both = slicing.slice_count([group("pods", container=True, max_jobs=4), group("default", [node("e1"), node("e2")])])
    assert both["count"] == 6 and len(both["why"]) == 2


def test_an_unbounded_container_group_or_no_capacity_is_a_problem_not_a_guess():
    result = slicing.slice_count([group("pods", container=True), group("default", [node("e1")])])
    assert result["count"] == 0 and "container group pods sets neither max_concurrent_jobs nor max_forks" in result["problems"][0]
    small = slicing.slice_count([group("default", [node("e1", capacity=5)])], forks=10)
    assert small["count"] == 0 and "no node of default can take a job of impact 11" in small["problems"][0]
    assert slicing.slice_count([])["problems"] == ["no instance group to run the slices on"]


def test_only_host_level_playbooks_are_sliced():
    assert slicing.sliceable_problem({"name": "GPU hosts", "playbook": "playbooks/gpu_hosts.yml"}) == ""
    assert slicing.sliceable_problem({"name": "Validate hosts", "playbook": "playbooks/validate.yml"}) == ""
    problem = slicing.sliceable_problem({"name": "GKE GPUDirect", "playbook": "playbooks/gke_gpudirect.yml"})
    assert problem.startswith("awx_job_templates_templates: GKE GPUDirect: slice is set but playbooks/gke_gpudirect.yml")
    assert "playbooks/gpu_hosts.yml, playbooks/validate.yml" in problem
    assert "(no playbook)" in slicing.sliceable_problem({"name": "x"})
    assert awx_slice_extra_vars("playbooks/validate.yml") == {"validate_scope": "hosts"}
    assert awx_slice_extra_vars("playbooks/gpu_hosts.yml") == {}


def test_slices_are_cut_in_name_order_every_nth_host():
    hosts = ["gpu-%03d" % i for i in (5, 1, 4, 2, 3, 1)]
    assert slicing.slices(hosts, 2) == [["gpu-001", "gpu-003", "gpu-005"], ["gpu-002", "gpu-004"]]
    assert slicing.slices(hosts, 9) == [["gpu-001"], ["gpu-002"], ["gpu-003"], ["gpu-004"], ["gpu-005"]]
    assert slicing.slices([], 3) == []


def test_a_limit_that_empties_a_slice_is_refused_naming_the_slices():
    hosts = ["gpu-%04d" % i for i in range(1000)]
    assert slicing.limit_problems(hosts, hosts, 8) == []
    assert slicing.limit_problems(hosts, hosts[:8], 8) == []
    assert slicing.limit_problems(hosts, hosts[:1], 1) == []
    problems = slicing.limit_problems(hosts, hosts[:3], 8, "GPU hosts")
    assert problems == ["GPU hosts: the limit keeps 3 of 1000 hosts and leaves 5 of the 8 slices without a host "
                        "(slice 4, 5, 6, 7, 8): AWX fails such a slice and with it the whole job. Launch without a limit, "
                        "with a limit that keeps a host in every slice (at least 8 hosts spread over the inventory), or "
                        "run the template's unsliced playbook for a few hosts"]
    # as many hosts as slices, but two in one slice: still an empty slice
    assert "slice 2)" in slicing.limit_problems(hosts, [hosts[0], hosts[2]], 2)[0]
    many = slicing.limit_problems(hosts, hosts[:1], 20)[0]
    assert "(slice 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 9 more)" in many and many.startswith("the limit keeps 1 of 1000")
    with pytest.raises(ValueError, match="count must be 1"):
        slicing.limit_problems(hosts, hosts, 0)
    with pytest.raises(ValueError, match="limited hosts other are not in the inventory"):
        slicing.limit_problems(hosts, ["other"], 2)


def test_the_filters_check_their_inputs_and_name_themselves():
    assert awx_slice_count([group("g", [node("e")])])["count"] == 1
    with pytest.raises(AnsibleFilterError, match="awx_slice_count: expected the instance groups"):
        awx_slice_count("default")
    with pytest.raises(AnsibleFilterError, match="awx_slice_count: forks must be 0"):
        awx_slice_count([group("g")], forks=-2)
    gpu = {"name": "GPU hosts", "playbook": "playbooks/gpu_hosts.yml"}
    assert awx_slice_problems(gpu) == []
    assert awx_slice_problems({"name": "F", "playbook": "playbooks/gke_gpudirect.yml"}, ["a"], ["a"], 2)[0].startswith(
        "awx_job_templates_templates: F: slice is set")
    assert awx_slice_problems(gpu, ["a", "b"], ["a"], 2)[0].startswith("GPU hosts: the limit keeps 1 of 2 hosts")
    with pytest.raises(AnsibleFilterError, match="awx_slice_problems: expected a job template entry"):
        awx_slice_problems("GPU hosts")
    with pytest.raises(AnsibleFilterError, match="awx_slice_problems: selected must be a list of host names"):
        awx_slice_problems(gpu, ["a"], "a", 2)
    with pytest.raises(AnsibleFilterError, match="awx_slice_problems: limited hosts"):
        awx_slice_problems(gpu, ["a"], ["b"], 2)


def test_limits_of_one_and_instances_as_older_controllers_list_them():
    nodes = [node("e%d" % i) for i in range(5)]
    assert slicing.slice_count([group("g", nodes, max_jobs=1)])["count"] == 1
    # a max_forks below one job's impact leaves no slot
    tiny = slicing.slice_count([group("g", nodes, max_forks=1)])
    assert tiny["count"] == 0 and tiny["problems"]
    # an instance listed without enabled / node_type / node_state is an enabled, ready execution node
    bare = [{"hostname": "e1", "capacity": 50}, {"hostname": "e2", "capacity": 50}]
    assert slicing.slice_count([group("g", bare)])["count"] == 2
    assert slicing.slice_count([])["count"] == 0


def test_the_message_names_at_most_ten_slices_and_five_unknown_hosts():
    hosts = ["h%02d" % i for i in range(30)]
    ten = slicing.limit_problems(hosts, hosts[:1], 11)[0]
    assert "(slice 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)" in ten
    eleven = slicing.limit_problems(hosts, hosts[:1], 12)[0]
    assert "(slice 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 1 more)" in eleven
    with pytest.raises(ValueError) as raised:
        slicing.limit_problems(hosts, ["x%d" % i for i in range(7)], 2)
    assert str(raised.value) == "limited hosts x0, x1, x2, x3, x4 are not in the inventory"
