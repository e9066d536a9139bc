# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole suite: healthy clusters and hosts give zero failures, every check passes on one of them, a snapshot
written and read back gives the same results, and every check says what it reads, its cause and its fix. Over
fixtures/clusters.yml: every broken cluster fails exactly the checks that name its fault (with their cause and fix) and
no other; every cluster with nothing to judge is passed or skipped with its reason - never a pass of a check that judged
nothing."""

from __future__ import annotations

import copy
import json
import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import View

HEALTHY = ("gke-tcpxo", "gke-a3ultra", "gke-a4x", "gpu-operator-mig", "gpu-operator-rdma", "host", "ack-mps")


def _comparable(result):
    return [dict((k, v) for k, v in r.items() if k != "duration_ms") for r in result["results"]]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_targets_have_no_failure(load_raw, build_snapshot, name):
    result = suite.validate(build_snapshot(load_raw(name)))
    assert result["summary"]["failed"] == 0 and result["summary"]["other"] == 0, result["results"]
    assert result["exit_status"] == 0


def test_every_check_passes_on_a_healthy_target(load_raw, build_snapshot):
    """(The health and performance checks pass on captured probe outputs: test_health.py, test_performance.py.)"""
    passed = set()
    for name in HEALTHY:
        passed.update(r["id"] for r in suite.validate(build_snapshot(load_raw(name)))["results"] if r["status"] == "passed")
    assert passed == set(c.id for c in suite.CHECKS if c.phase not in ("health", "performance"))


@pytest.mark.parametrize("name", HEALTHY)
def test_a_snapshot_round_trip_gives_the_same_results(load_raw, build_snapshot, name):
    live = build_snapshot(load_raw(name))
    offline = json.loads(json.dumps(live))
    assert _comparable(suite.validate(live)) == _comparable(suite.validate(offline))


def test_every_check_reads_only_what_it_declares(load_raw, build_snapshot, monkeypatch):
    touched = {}
    real = View.need

    def spy(view, path):
        touched.setdefault(current[0], set()).add(path.split("[")[0])
        return real(view, path)
    monkeypatch.setattr(View, "need", spy)
    current = [None]
    for name in HEALTHY:
        view = View(build_snapshot(load_raw(name)))
        for check in suite.CHECKS_BY_ID.values():
            current[0] = check.id
            from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import run_check
            run_check(check, view)
    for check_id, paths in touched.items():
        declared = suite.CHECKS_BY_ID[check_id].reads
        assert all(any(p == d or p.startswith(d + ".") or d.startswith(p + ".") for d in declared) for p in paths), (check_id, paths)


def test_every_check_documents_itself():
    listed = suite.checks()
    assert len(listed) == len(suite.CHECKS_BY_ID) >= 30
    for entry in listed:
        assert entry["reads"] and entry["cause"].endswith(".") and entry["fix"] and entry["title"]
        assert entry["phase"] in ("preflight", "deployment", "conformance", "health", "performance")
    assert [e["phase"] for e in listed] == sorted((e["phase"] for e in listed),
                                                  key=("preflight", "deployment", "conformance", "health", "performance").index)


def test_every_description_beside_a_checks_file_belongs_to_a_check_of_that_file():
    for module in suite.CHECK_MODULES:
        with open(os.path.splitext(module.__file__)[0] + ".yml", encoding="utf-8") as handle:
            described = list(yaml.safe_load(handle))
        registered = [c.id for c in suite.CHECKS if c.function.__module__ == module.__name__]
        assert described == registered, module.__name__


def test_a_missing_collection_makes_its_checks_other(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    healthy = dict((r["id"], r["status"]) for r in suite.validate(build_snapshot(data))["results"])
    data["kubernetes"]["pods"] = None
    result = suite.validate(build_snapshot(data))
    other = sorted(r["id"] for r in result["results"] if r["status"] == "other")
    # every check that reads pods and applies to this cluster (it passed on it) cannot run: other, not passed or skipped;
    # gpu.allocatable reads them only for a node that advertises no GPU (here none), the DaemonSet checks only for a
    # DaemonSet that is not ready (to name the node and container)
    assert other == sorted(c.id for c in suite.CHECKS_BY_ID.values()
                           if "kubernetes.pods" in c.reads and healthy[c.id] == "passed"
                           and c.id not in ("gpu.allocatable", "gpudirect.installer", "gpudirect.nri_injector"))
    assert len(other) >= 6
    assert result["exit_status"] == 9


def test_phases_select_checks(load_raw, build_snapshot):
    result = suite.validate(build_snapshot(load_raw("host")), phases=["preflight"])
    assert set(r["phase"] for r in result["results"]) == {"preflight"}
    only = suite.validate(build_snapshot(load_raw("host")), only=["host.driver"])
    assert [r["id"] for r in only["results"]] == ["host.driver"]


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(FIXTURES, "clusters.yml"), encoding="utf-8") as _handle:
    CLUSTERS = yaml.safe_load(_handle)


def _step(document, key):
    if isinstance(document, list):
        if isinstance(key, int):
            return key
        found = [i for i, item in enumerate(document) if ((item.get("metadata") or {}).get("name") or item.get("name")) == key]
        assert len(found) == 1, "no single item named %s" % key
        return found[0]
    assert isinstance(document, dict) and (key in document), "no key %s" % key
    return key


def _parent(data, path):
    document = data
    for key in path[:-1]:
        document = document[_step(document, key)]
    return document


def variant(load_raw, cluster):
    data = copy.deepcopy(load_raw(cluster["base"]))
    for change in cluster.get("changes") or []:
        if "delete" in change:
            parent = _parent(data, change["delete"])
            del parent[_step(parent, change["delete"][-1])]
        elif "append" in change:
            parent = _parent(data, change["append"])
            parent[_step(parent, change["append"][-1])].append(copy.deepcopy(change["value"]))
        elif "update" in change:
            parent = _parent(data, change["update"])
            parent[_step(parent, change["update"][-1])].update(copy.deepcopy(change["value"]))
        else:
            parent = _parent(data, change["set"])
            key = change["set"][-1]
            parent[key if isinstance(parent, dict) and key not in parent else _step(parent, key)] = copy.deepcopy(change["value"])
    return data


def _results(build_snapshot, data):
    return dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])


@pytest.mark.parametrize("cluster", CLUSTERS, ids=[c["name"] for c in CLUSTERS])
def test_each_cluster_fails_exactly_its_faults(load_raw, build_snapshot, cluster):
    healthy = _results(build_snapshot, load_raw(cluster["base"]))
    assert not [k for k, r in healthy.items() if r["status"] in ("failed", "other")], cluster["base"]
    results = _results(build_snapshot, variant(load_raw, cluster))
    fails, skipped, other = cluster.get("fails") or {}, cluster.get("skipped") or {}, cluster.get("other") or {}
    assert sorted(k for k, r in results.items() if r["status"] == "failed") == sorted(fails), [
        (k, r["message"]) for k, r in results.items() if r["status"] == "failed"]
    assert sorted(k for k, r in results.items() if r["status"] == "other") == sorted(other), [
        (k, r["message"]) for k, r in results.items() if r["status"] == "other"]
    for check_id, text in fails.items():
        failed = results[check_id]
        assert text in failed["message"], failed["message"]
        assert failed["cause"] == suite.CHECKS_BY_ID[check_id].cause and failed["fix"]
    for check_id, text in list(skipped.items()) + list(other.items()):
        assert text in results[check_id]["message"], results[check_id]["message"]
    for check_id in other:
        # what would let the check run, and how to leave it out
        assert "validate_checks" in results[check_id]["fix"], results[check_id]
    assert all(results[k]["status"] == "skipped" for k in skipped)
    for check_id, result in results.items():
        if check_id not in fails and check_id not in skipped and check_id not in other:
            assert result["status"] == healthy[check_id]["status"], (check_id, result)
        if result["status"] == "skipped":
            assert len(result["message"]) > len("skipped: "), check_id
    assert (suite.exit_status(list(results.values())) == 0) == (not fails and not other)


def test_the_set_holds_clusters_with_nothing_to_judge_and_combined_faults():
    assert len([c for c in CLUSTERS if not c.get("fails")]) >= 4
    assert [c["name"] for c in CLUSTERS if len(c.get("fails") or {}) >= 2]
