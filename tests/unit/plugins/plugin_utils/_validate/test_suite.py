# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole suite: healthy clusters and hosts give zero failures, every check passes on one of them, a snapshot
written and read back gives the same results, and every check says what it reads, its cause and its fix."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import View

HEALTHY = ("gke-tcpxo", "gke-a3ultra", "gke-a4x", "gpu-operator-mig", "host", "ack-mps")


def _comparable(result):
    return [dict((k, v) for k, v in r.items() if k != "duration_ms") for r in result["results"]]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_targets_have_no_failure(load_raw, build_snapshot, name):
    result = suite.validate(build_snapshot(load_raw(name)))
    assert result["summary"]["failed"] == 0 and result["summary"]["other"] == 0, result["results"]
    assert result["exit_status"] == 0


def test_every_check_passes_on_a_healthy_target(load_raw, build_snapshot):
    """(The performance checks pass on captured probe outputs: test_performance.py.)"""
    passed = set()
    for name in HEALTHY:
        passed.update(r["id"] for r in suite.validate(build_snapshot(load_raw(name)))["results"] if r["status"] == "passed")
    assert passed == set(c.id for c in suite.CHECKS if c.phase != "performance")


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
        assert entry["phase"] in ("preflight", "deployment", "conformance", "performance")
    assert [e["phase"] for e in listed] == sorted((e["phase"] for e in listed),
                                                  key=("preflight", "deployment", "conformance", "performance").index)


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
    # every check that reads pods and applies to this cluster (it passed on it) cannot run: other, not passed or skipped
    assert other == sorted(c.id for c in suite.CHECKS_BY_ID.values() if "kubernetes.pods" in c.reads and healthy[c.id] == "passed")
    assert len(other) >= 6
    assert result["exit_status"] == 9


def test_phases_select_checks(load_raw, build_snapshot):
    result = suite.validate(build_snapshot(load_raw("host")), phases=["preflight"])
    assert set(r["phase"] for r in result["results"]) == {"preflight"}
    only = suite.validate(build_snapshot(load_raw("host")), only=["host.driver"])
    assert [r["id"] for r in only["results"]] == ["host.driver"]
