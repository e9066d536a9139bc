# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ACK MPS checks: the healthy ACK MPS cluster broken one way fails exactly that check."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite


def _pods(data):
    return data["kubernetes"]["pods"]


def _daemon_gone(data):
    data["kubernetes"]["pods"] = [p for p in _pods(data) if p["metadata"]["name"] != "mps-control-daemon-9wz7m"]


def _no_host_ipc(data):
    [p for p in _pods(data) if p["metadata"]["name"] == "mps-sample-7xk2p"][0]["spec"]["hostIPC"] = False


def _visible_devices(data):
    sample = [p for p in _pods(data) if p["metadata"]["name"] == "mps-sample-7xk2p"][0]
    sample["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]


BREAKS = [
    ("mps.ack_daemons", _daemon_gone, "node cn-beijing.192.168.0.11: no running and ready pod labelled app.aliyun.com/name=mps-control-daemon"),
    ("mps.ack_workloads", _no_host_ipc, "default/mps-sample-7xk2p: runs on MPS node cn-beijing.192.168.0.10 without hostIPC: true"),
    ("mps.ack_workloads", _visible_devices, "sets NVIDIA_VISIBLE_DEVICES=all"),
]


@pytest.mark.parametrize("check_id, mutate, text", BREAKS, ids=["%s-%s" % (b[0], b[1].__name__) for b in BREAKS])
def test_broken_one_way_fails_that_check_only(only_failure, check_id, mutate, text):
    only_failure("ack-mps", mutate, check_id, text)


def test_every_sharing_check_has_a_break():
    ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.sharing"))
    assert ids == set(b[0] for b in BREAKS)


def test_without_mps_nodes_the_checks_skip_and_say_why(load_raw, build_snapshot):
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(load_raw("gpu-operator-mig")))["results"])
    assert by_id["mps.ack_daemons"]["status"] == "skipped"
    assert "no node is labelled ack.node.gpu.schedule=mps" in by_id["mps.ack_daemons"]["message"]


def test_the_snapshot_keeps_host_ipc(load_raw, build_snapshot):
    pods = build_snapshot(load_raw("ack-mps"))["kubernetes"]["pods"]
    assert [p["spec"]["hostIPC"] for p in pods if p["metadata"]["name"] == "mps-sample-7xk2p"] == [True]


def _results(build_snapshot, data):
    return dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])


def test_nodes_labelled_for_another_ack_schedule_are_not_mps_nodes(load_raw, build_snapshot):
    # ack.node.gpu.schedule=share is cGPU sharing, not MPS: present, with another value
    data = load_raw("ack-mps")
    for node in data["kubernetes"]["nodes"]:
        if "ack.node.gpu.schedule" in node["metadata"].get("labels", {}):
            node["metadata"]["labels"]["ack.node.gpu.schedule"] = "share"
    by_id = _results(build_snapshot, data)
    for check_id in ("mps.ack_daemons", "mps.ack_workloads"):
        assert by_id[check_id]["status"] == "skipped", by_id[check_id]
        assert "no node is labelled ack.node.gpu.schedule=mps" in by_id[check_id]["message"]


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_workload_pod_is_not_judged(load_raw, build_snapshot, phase):
    data = load_raw("ack-mps")
    _no_host_ipc(data)
    [p for p in _pods(data) if p["metadata"]["name"] == "mps-sample-7xk2p"][0]["status"]["phase"] = phase
    result = _results(build_snapshot, data)["mps.ack_workloads"]
    assert result["status"] == "skipped" and "no workload pod runs on an MPS node" in result["message"], result
