# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which module_defaults entry set an option, and the note a failure gets."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_multinetwork, gpu_nodepool
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._clouds.action import (
    action_groups,
    defaults_for,
    input_check,
    origin_note,
)
# validate_only is checked against the modules' own bad-input tables and their doubles (module tests; the controller
# side runs here, where ansible.plugins is importable)
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._azure.test_nodepool import (  # pylint: disable=unused-import
    BAD_INPUTS, CLUSTER, RG, double, run,
)
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils._gcp.gke_harness import module_runner  # pylint: disable=unused-import
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.modules.test_gke_bad_inputs import (  # pylint: disable=unused-import
    CASES, PROJECT, cluster, fabric, pool, world,
)


def test_groups_come_from_meta_runtime():
    groups = action_groups()
    assert groups["gpu_nodepool"] == ("gcp", "azure")
    assert groups["gke_cluster"] == ("gcp",)


def test_the_module_entry_wins_over_its_group_and_later_entries_over_earlier():
    defaults = [{"group/gpu_ops.cluster.gcp": {"project": "a", "auth_kind": "accesstoken"}},
                {"group/gpu_ops.cluster.gcp": {"project": "b"}, "gpu_ops.cluster.gke_cluster": {"project": "c"},
                 "gpu_ops.cluster.gke_multinetwork": {"max_retries": 1}}]
    sources = defaults_for("gke_cluster", defaults)
    assert sources == {"project": ("gpu_ops.cluster.gke_cluster", "c")}
    assert "max_retries" not in sources


def test_note_names_options_in_the_message_whose_value_is_the_default():
    sources = {"access_token": ("group/gpu_ops.cluster.gcp", "{{ tok }}"), "project": ("group/gpu_ops.cluster.gcp", "p")}

    def template(value):
        return "secret" if value == "{{ tok }}" else value

    args = {"access_token": "secret", "project": "p"}
    note = origin_note("access_token: the value contains a line break", args, sources, template)
    assert note == " (access_token comes from module_defaults for group/gpu_ops.cluster.gcp)"
    assert "secret" not in note
    # the task's own value differs: no note; an option the message does not name: no note
    assert origin_note("access_token: bad", dict(args, access_token="other"), sources, template) == ""
    assert origin_note("service_account_file: bad", args, sources, template) == ""


# The refusals that need the project's state (what exists there, what its locations offer): validate_only sends no
# request, so it cannot make them; the module makes them before its first change.
NEEDS_STATE = {
    # the cluster as it exists
    "cluster: existing Autopilot cluster", "cluster: existing cluster without multi-networking",
    "pool: cluster without multi-networking", "pool: Autopilot cluster", "pool: missing cluster",
    "pool: auto-upgrade off on a release channel", "pool: cluster nodes under the TCPXO minimum",
    # whether the pool exists (a new pool needs a size)
    "pool: no node count for a new pool",
    # the networks as they exist
    "pool: GPU network that does not exist", "pool: subnet of another network", "pool: primary network as a GPU network",
    # what GKE and Compute Engine offer in the location
    "cluster: well-formed region that does not exist", "cluster: version GKE does not offer",
    "cluster: image type GKE does not offer", "cluster: node location that does not exist",
    "pool: machine type the zone does not offer", "pool: more cards than an instance takes",
    "pool: disk type the zone does not offer", "pool: node version GKE does not offer", "pool: image type GKE does not offer",
    "pool: node zone that does not exist",
    "fabric: well-formed region that does not exist", "fabric: well-formed zone that does not exist",
}


@pytest.mark.parametrize("title,case,field", CASES, ids=[c[0] for c in CASES])
def test_validate_only_answers_alike_in_the_controller_and_the_module_without_a_request(
        world, module_runner, title, case, field):
    """validate_only: the module process and the action plugin's check in the controller give the same problems, send
    nothing, and name the option of every refusal that needs no state of the project."""
    main, args = case
    args = dict((k, v) for k, v in args.items() if v is not None)
    args.update(world.module_args(project=PROJECT), validate_only=True)
    world.clear_log()
    in_module = module_runner(main, args)
    in_controller = input_check(sys.modules[main.__module__], args)
    assert world.requests == [], "%s: a request was sent" % title
    if in_module.get("failed"):
        # what the argument spec refuses fails a module process before its engine runs (AnsibleModule's own way);
        # in the controller it is a problem like any other
        assert in_controller["problems"] == [in_module["msg"]], title
    else:
        assert in_module["changed"] is False and in_controller["problems"] == in_module["problems"], title
    named = [p for p in in_controller["problems"] if field in p]
    if title in NEEDS_STATE:
        assert not named, "%s: found without the project's state; take it out of NEEDS_STATE" % title
    else:
        assert named, "%s: validate_only misses it: %r" % (title, in_module["problems"])
    assert world.token not in repr(in_module) + repr(in_controller)


def test_validate_only_passes_valid_requests_and_gives_the_fabric_it_would_build(world, module_runner):
    for main, args in (cluster(), pool(), fabric()):
        args = dict(args, validate_only=True, **world.module_args(project=PROJECT))
        assert input_check(sys.modules[main.__module__], args)["problems"] == []
        assert module_runner(main, args)["problems"] == []
    main, args = fabric()
    plan = input_check(gke_multinetwork, dict(args, validate_only=True, **world.module_args(project=PROJECT)))
    assert [n["network"] for n in plan["additional_node_networks"]] == ["a3mega-gpunic-%d" % i for i in range(1, 9)]
    assert plan["changed"] is False and plan["state"] == "present"
    assert world.requests == []


def test_validate_only_reports_argument_spec_errors_as_problems(world):
    """A value the argument spec refuses is a problem too, named as Ansible names it, never a traceback."""
    main, args = pool(node_count="two", gpu_driver_version="newest")
    answer = input_check(gpu_nodepool, dict(args, validate_only=True, **world.module_args(project=PROJECT)))
    assert answer["changed"] is False and "failed" not in answer
    problems = answer["problems"]
    assert any("gpu_driver_version" in p and "default, latest, disabled" in p for p in problems), problems
    assert any("node_count" in p for p in problems), problems
    main, args = pool(enable_autoscaling=True, node_count=None)
    problems = input_check(gpu_nodepool, dict(args, validate_only=True, **world.module_args(project=PROJECT)))["problems"]
    assert problems == ["enable_autoscaling is True but all of the following are missing: min_count, max_count"]


@pytest.mark.parametrize("options,option,words", BAD_INPUTS)
def test_validate_only_gives_the_refusals_in_the_controller_and_the_module_without_a_request(run, double, options,
                                                                                             option, words):
    refused = run(**options)["problems"]
    in_module = run(validate_only=True, **options)
    args = dict(dict(provider="aks", subscription_id=double.subscription, arm_endpoint=double.url, resource_group=RG,
                     cluster=CLUSTER, name="mig", validate_only=True), **options)
    in_controller = input_check(gpu_nodepool, args)
    assert in_module["changed"] is False and not in_module.get("failed")
    assert in_module["problems"] == in_controller["problems"] == refused
    assert double.requests_for() == []
