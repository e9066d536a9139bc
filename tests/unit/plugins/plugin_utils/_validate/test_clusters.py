# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite over fixtures/clusters.yml: every broken cluster fails exactly the checks that name its fault (with
their cause and fix) and no other; every cluster with nothing to judge, or healthy, is passed or skipped with its
reason - never a pass of a check that judged nothing."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite

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
