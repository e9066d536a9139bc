# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloud-neutral input checks (plugins/module_utils/_core/problems.py): the Problems list, node labels and taints."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core import problems as p


def test_problems_collect_every_option_and_read_as_one_message():
    problems = p.Problems()
    assert not problems
    problems.add("node_count", "must be at least 0")
    problems.extend(["zone: us-central1-z does not exist"])
    problems.warnings.append("quota not checked")
    assert problems
    assert problems.items == ["node_count: must be at least 0", "zone: us-central1-z does not exist"]
    assert problems.message("gpu_nodepool") == (
        "invalid gpu_nodepool input (nothing was changed): node_count: must be at least 0; zone: us-central1-z does not exist")


def test_warnings_alone_are_no_problem():
    problems = p.Problems()
    problems.warnings.append("could not read the quota")
    assert not problems


@pytest.mark.parametrize("labels", [
    None, {}, {"team": "ml", "nvidia.com/gpu.present": "true", "a": ""},
    {"example.com/" + "x" * 63: "y" * 63},
])
def test_kubernetes_labels_are_accepted(labels):
    problems = p.Problems()
    p.check_labels(problems, "labels", labels)
    assert problems.items == []


@pytest.mark.parametrize("labels, expected", [
    ({"-team": "ml"}, "labels: '-team' is not a valid Kubernetes label key"),
    ({"x" * 64: "ml"}, "labels: %r is not a valid Kubernetes label key" % ("x" * 64)),
    ({"Bad_Prefix/name": "v"}, "labels: 'Bad_Prefix/name' is not a valid Kubernetes label key"),
    ({"team": "ml team"}, "labels.team: 'ml team' is not a valid Kubernetes label value"),
    ({"team": None}, "labels.team: label values must be strings"),
    ({"team": ["ml"]}, "labels.team: label values must be strings"),
])
def test_bad_labels_name_the_key(labels, expected):
    problems = p.Problems()
    p.check_labels(problems, "labels", labels)
    assert problems.items == [expected]


def test_taints_parse_to_dicts_and_back():
    problems = p.Problems()
    taints = p.parse_taints(problems, "taints", ["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute"])
    assert problems.items == []
    assert taints == [dict(key="nvidia.com/gpu", value="present", effect="NoSchedule"),
                      dict(key="dedicated", effect="NoExecute")]
    assert [p.taint_text(t) for t in taints] == ["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute"]
    assert p.tolerations(taints) == [
        dict(key="nvidia.com/gpu", operator="Equal", value="present", effect="NoSchedule"),
        dict(key="dedicated", operator="Exists", effect="NoExecute")]


def test_no_taints_is_none_and_no_tolerations():
    assert p.parse_taints(p.Problems(), "taints", None) is None
    assert p.parse_taints(p.Problems(), "taints", []) == []
    assert p.tolerations(None) == []


@pytest.mark.parametrize("text, expected", [
    ("gpu", "taints: 'gpu' is not written key=value:Effect"),
    ("", "taints: '' is not written key=value:Effect"),
    ("gpu=yes:Sometimes", "taints: 'gpu=yes:Sometimes' has effect 'Sometimes'; allowed: NoSchedule, PreferNoSchedule, NoExecute"),
    ("-gpu=yes:NoSchedule", "taints: '-gpu=yes:NoSchedule' has an invalid key '-gpu'"),
    ("gpu=-yes-:NoSchedule", "taints: 'gpu=-yes-:NoSchedule' has an invalid value '-yes-'"),
])
def test_bad_taints_are_reported_and_left_out(text, expected):
    problems = p.Problems()
    assert p.parse_taints(problems, "taints", [text, "ok:NoSchedule"]) == [dict(key="ok", effect="NoSchedule")]
    assert problems.items == [expected]
