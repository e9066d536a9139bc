# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the objects of an apply step are in place (plugins/plugin_utils/_k8s/in_place.py): the conservative
comparison that lets the role apply skip its kubernetes.core.k8s call."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import in_place as _k8s_in_place

ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-env", "namespace": "ns"},
             "data": {"NCCL_DEBUG": "INFO"}}
NETWORK = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "vpc1"},
           "spec": {"type": "Device", "parametersRef": {"name": "vpc1"}}}


def _applied(desired, **extra):
    """The object as kubernetes.core's client-side apply leaves it (independent of the engine: the annotation is
    json.dumps with separators=(",", ":") and sort_keys, as ``annotate`` of kubernetes.core 6.2.0 (its module_utils apply) writes)."""
    live = copy.deepcopy(desired)
    meta = live.setdefault("metadata", {})
    meta.update(uid="u-1", resourceVersion="7", creationTimestamp="2026-11-26T00:00:00Z")
    meta.setdefault("annotations", {})[ANNOTATION] = json.dumps(desired, separators=(",", ":"), sort_keys=True)
    live.update(extra)
    return live


def _result(obj, live, ready=None):
    meta = obj["metadata"]
    query = {"api_version": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"]}
    if meta.get("namespace"):
        query["namespace"] = meta["namespace"]
    entry = {"query": query, "resources": [live] if live is not None else [], "api_found": True}
    if ready is not None:
        entry["ready"] = ready
    return entry


# ------------------------------------------------------------------ same / covers
@pytest.mark.parametrize("one, other, expected", [
    ({"a": 1}, {"a": 1}, True),
    ({"a": 1}, {"a": "1"}, False),             # numbers vs strings
    ({"a": 1}, {"a": 1.0}, False),             # int vs float
    ({"a": True}, {"a": 1}, False),            # bool vs int (Python's True == 1)
    ({"a": 0}, {"a": False}, False),
    ({"a": None}, {"a": None}, True),
    ({"a": None}, {}, False),
    ({"a": 1}, {"a": 1, "b": 2}, False),       # same key set
    ({"a": [1, 2]}, {"a": [1, 2]}, True),
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": [1]}, {"a": [1, 1]}, False),
    ([], {}, False),
    ({}, [], False),
    ("x", "x", True),
])
def test_same_is_strict(one, other, expected):
    assert _k8s_in_place.same(one, other) is expected
    assert _k8s_in_place.same(other, one) is expected


@pytest.mark.parametrize("desired, live, expected", [
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3}, None),    # extra live fields are fine
    ({"a": {"b": 1}}, {"a": {"b": 2}}, "a.b"),
    ({"a": {"b": 1}}, {"a": {}}, "a.b"),                         # a missing key
    ({"a": {"b": 1}}, {"a": "x"}, "a"),                           # a dict where live has a scalar
    ({"a": [{"n": 1}]}, {"a": [{"n": 1, "extra": 0}]}, None),    # extra fields inside list elements are fine
    ({"a": [{"n": 1}]}, {"a": [{"n": 1}, {"n": 2}]}, "a"),       # list length differs
    ({"a": [{"n": 1}, {"n": 2}]}, {"a": [{"n": 1}]}, "a"),
    ({"a": [1]}, {"a": {"0": 1}}, "a"),                           # a list where live has a dict
    ({"a": [{"n": 1}, {"n": 2}]}, {"a": [{"n": 1}, {"n": 3}]}, "a[1].n"),
    ({"a": "1"}, {"a": 1}, "a"),                                  # numbers vs strings
    ({"a": True}, {"a": 1}, "a"),
    ({}, {"anything": 1}, None),
    (1, 1, None),
    (1, 2, "."),
    ({"a": 1}, [], "."),
    ([1], [1, 2], "."),
])
def test_covers(desired, live, expected):
    assert _k8s_in_place.covers(desired, live) == expected


# ------------------------------------------------------------------ reasons
def test_an_object_as_apply_left_it_is_in_place():
    assert _k8s_in_place.reasons(CONFIGMAP, _applied(CONFIGMAP)) == []


def test_server_defaults_and_status_in_the_live_object_are_fine():
    live = _applied(NETWORK, status={"conditions": [{"type": "Ready", "status": "True"}]})
    live["spec"]["provider"] = "GKE"
    assert _k8s_in_place.reasons(NETWORK, live) == []


@pytest.mark.parametrize("live", [None, {}, "not an object"])
def test_absent(live):
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["absent"]


def test_an_object_without_the_annotation_is_applied():
    live = _applied(CONFIGMAP)
    del live["metadata"]["annotations"][ANNOTATION]
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["no last-applied-configuration annotation"]
    live["metadata"]["annotations"] = None
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["no last-applied-configuration annotation"]
    del live["metadata"]
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["no last-applied-configuration annotation"]


def test_an_unreadable_or_foreign_annotation_is_applied():
    live = _applied(CONFIGMAP)
    live["metadata"]["annotations"][ANNOTATION] = "{not json"
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["unreadable last-applied-configuration annotation"]
    live["metadata"]["annotations"][ANNOTATION] = {"a": 1}
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["no last-applied-configuration annotation"]


def test_a_changed_manifest_is_applied_even_when_live_already_matches():
    changed = copy.deepcopy(CONFIGMAP)
    changed["data"]["NCCL_DEBUG"] = "WARN"
    live = _applied(CONFIGMAP)
    live["data"]["NCCL_DEBUG"] = "WARN"   # someone set it by hand: the annotation still says INFO
    assert _k8s_in_place.reasons(changed, live) == ["the manifest differs from the last applied one"]


def test_a_field_removed_from_the_manifest_is_applied():
    smaller = copy.deepcopy(CONFIGMAP)
    del smaller["data"]["NCCL_DEBUG"]
    assert _k8s_in_place.reasons(smaller, _applied(CONFIGMAP)) == ["the manifest differs from the last applied one"]


def test_a_number_written_as_a_string_is_a_different_manifest():
    desired = dict(CONFIGMAP, data={"PORT": 1})
    applied = _applied(dict(CONFIGMAP, data={"PORT": "1"}))
    assert _k8s_in_place.reasons(desired, applied) == ["the manifest differs from the last applied one"]


def test_drift_names_the_path_not_the_value():
    live = _applied(CONFIGMAP)
    live["data"]["NCCL_DEBUG"] = "SECRET-LOOKING-VALUE"
    assert _k8s_in_place.reasons(CONFIGMAP, live) == ["the live object differs at data.NCCL_DEBUG"]


def test_a_waited_object_must_be_ready():
    live = _applied(NETWORK)
    assert _k8s_in_place.reasons(NETWORK, live, ready=True, wait=True) == []
    assert _k8s_in_place.reasons(NETWORK, live, ready=False, wait=True) == ["not ready yet"]
    assert _k8s_in_place.reasons(NETWORK, live, ready=None, wait=True) == ["not ready yet"]
    assert _k8s_in_place.reasons(NETWORK, live, ready=1, wait=True) == ["not ready yet"]
    assert _k8s_in_place.reasons(NETWORK, live, ready=False, wait=False) == []


# ------------------------------------------------------------------ reads / in_place
BATCHES = [{"definition": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, CONFIGMAP],
            "wait_condition": {}, "label": "Namespace/ns, ConfigMap/nccl-env"},
           {"definition": [NETWORK], "wait_condition": {"type": "Ready", "status": "True"}, "label": "Network/vpc1"}]


def test_reads_one_named_query_per_object_in_order():
    assert _k8s_in_place.reads(BATCHES) == [
        {"api_version": "v1", "kind": "Namespace", "name": "ns"},
        {"api_version": "v1", "kind": "ConfigMap", "name": "nccl-env", "namespace": "ns"},
        {"api_version": "networking.gke.io/v1", "kind": "Network", "name": "vpc1"}]
    waited = _k8s_in_place.reads(BATCHES, wait=True)
    assert [q.get("wait") for q in waited] == [True] * 3
    assert [q.get("wait_condition") for q in waited] == [None, None, {"type": "Ready", "status": "True"}]


@pytest.mark.parametrize("bad", [None, {}, [{"label": "x"}], ["x"]])
def test_reads_refuses_what_is_not_batches(bad):
    with pytest.raises(TypeError):
        _k8s_in_place.reads(bad)


def _all_read(wait=False, ready=True):
    objects = [o for b in BATCHES for o in b["definition"]]
    return [_result(o, _applied(o), ready if wait else None) for o in objects]


def test_every_call_in_place_is_marked_and_keeps_its_call():
    results = _all_read()
    marked = _k8s_in_place.in_place(BATCHES, results)
    assert [b["in_place"] for b in marked] == [True, True]
    assert [b["not_in_place"] for b in marked] == [[], []]
    # the marks are the engine's own: nothing shaped like kubernetes.core.k8s's result
    assert [sorted(b) for b in marked] == [sorted(list(BATCHES[0]) + ["in_place", "not_in_place"])] * 2
    assert marked[0]["definition"] == BATCHES[0]["definition"] and marked[0]["label"] == BATCHES[0]["label"]
    assert "in_place" not in BATCHES[0], "the input is not modified"


def test_a_waited_step_is_in_place_when_every_object_is_ready():
    marked = _k8s_in_place.in_place(BATCHES, _all_read(wait=True), wait=True)
    assert all(b["in_place"] for b in marked)


def test_one_object_out_of_place_applies_its_whole_call_only():
    results = _all_read()
    results[1]["resources"][0]["data"]["NCCL_DEBUG"] = "WARN"
    marked = _k8s_in_place.in_place(BATCHES, results)
    assert [b["in_place"] for b in marked] == [False, True]
    assert marked[0]["not_in_place"] == ["ConfigMap/ns/nccl-env: the live object differs at data.NCCL_DEBUG"]


def test_a_missing_object_or_several_are_not_in_place():
    results = _all_read()
    results[2]["resources"] = []
    assert _k8s_in_place.in_place(BATCHES, results)[1]["not_in_place"] == ["Network/vpc1: absent"]
    results[2]["resources"] = [_applied(NETWORK), _applied(NETWORK)]
    assert _k8s_in_place.in_place(BATCHES, results)[1]["not_in_place"] == ["Network/vpc1: not one object"]


def test_a_waited_object_not_ready_is_not_in_place():
    results = _all_read(wait=True)
    results[2]["ready"] = False
    marked = _k8s_in_place.in_place(BATCHES, results, wait=True)
    assert [b["in_place"] for b in marked] == [True, False]
    assert marked[1]["not_in_place"] == ["Network/vpc1: not ready yet"]


@pytest.mark.parametrize("results", [None, [], "x", _all_read()[:2], _all_read() + [{}], _all_read()[:2] + ["x"]])
def test_results_that_do_not_pair_apply_everything(results):
    marked = _k8s_in_place.in_place(BATCHES, results)
    assert [b["in_place"] for b in marked] == [False, False]
    assert marked[1]["not_in_place"] == ["Network/vpc1: not read"]


@pytest.mark.parametrize("field, value", [("kind", "Service"), ("name", "other"), ("namespace", "other"),
                                          ("api_version", "v2")])
def test_a_result_for_another_object_is_not_used(field, value):
    results = _all_read()
    results[1]["query"][field] = value
    marked = _k8s_in_place.in_place(BATCHES, results)
    assert marked[0]["not_in_place"] == ["ConfigMap/ns/nccl-env: not read"] and marked[1]["in_place"]


def test_a_cluster_scoped_query_with_an_empty_namespace_pairs():
    results = _all_read()
    results[2]["query"]["namespace"] = ""
    assert _k8s_in_place.in_place(BATCHES, results)[1]["in_place"]
