# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MPS filters: the engine in plugins/module_utils/_host/mps.py reaches roles through these."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import mps

FILTER_DIR = pathlib.Path(mps.__file__).parent


def test_every_filter_has_a_doc_file_naming_it():
    names = list(mps.FilterModule().filters())
    assert len(names) == 8
    for name in names:
        doc = yaml.safe_load((FILTER_DIR / (name + ".yml")).read_text())
        assert doc["DOCUMENTATION"]["name"] == name
        assert "_input" in doc["DOCUMENTATION"]["options"]
        assert name in doc["EXAMPLES"]


def test_report_and_table_through_the_filters():
    node = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.memory": "16384"}},
            "status": {"allocatable": {"nvidia.com/gpu": "2"}}}
    report = mps.gpu_allocation([node], [])
    assert report["memory_total_gib"] == 32.0
    assert mps.gpu_allocation_table(report).splitlines()[1].split() == ["n", "-", "nvidia.com/gpu", "none", "0/2", "0/32"]


def _node(name, schedule=None, **labels):
    if schedule is not None:
        labels["ack.node.gpu.schedule"] = schedule
    return {"metadata": {"name": name, "labels": labels}}


def test_label_patches_only_where_the_schedule_label_differs():
    nodes = [_node("a", "mps"), _node("b", "default"), _node("c", other="x"), _node("d", "mps")]
    patches = mps.mps_ack_label_patches(["a", "b", "c"], nodes, "mps")
    assert patches == [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "ack.node.gpu.schedule": "mps"}}} for name in ("b", "c")]
    # a re-run after the patches: nothing left to send
    assert mps.mps_ack_label_patches(["a", "b", "c"], [_node(n, "mps") for n in "abc"], "mps") == []
    # giving MPS back patches only the MPS nodes among the targets
    assert [p["metadata"]["name"] for p in mps.mps_ack_label_patches(["a", "b", "d"], nodes, "default")] == ["a", "d"]
    # render mode read nothing: every target, in the given order
    assert [p["metadata"]["name"] for p in mps.mps_ack_label_patches(["c", "a"], [], "mps", every=True)] == ["c", "a"]


@pytest.mark.parametrize("call, message", [
    (lambda: mps.mps_ack_label_patches("node-a", [], "mps"), "mps_ack_label_patches: the input must be a list of node names"),
    (lambda: mps.mps_ack_label_patches(["a"], None, "mps"), "mps_ack_label_patches: nodes must be a list of Node documents"),
    (lambda: mps.mps_ack_label_patches(["a"], [], ""), "mps_ack_label_patches: schedule must be the label value"),
    (lambda: mps.mps_host_settings("pipe"), "mps_host_settings: the input must be a dict"),
    (lambda: mps.mps_host_settings({"pipe_directory": "/a", "log_directory": "/b", "active_thread_percentage": 200}),
     "mps_host_settings: active_thread_percentage: must be a whole number from 1 to 100"),
    (lambda: mps.mps_server_list("error"), "mps_server_list: get_server_list printed 'error'"),
    (lambda: mps.mps_ack_findings({"items": []}, []), "mps_ack_findings: pods must be a list of Pod documents"),
    (lambda: mps.mps_ack_daemon_coverage([], "x"), "mps_ack_daemon_coverage: pods must be a list"),
    (lambda: mps.mps_ack_findings([], None), "mps_ack_findings: nodes must be a list of Node documents"),
    (lambda: mps.mps_ack_findings([], [], exempt_namespaces="kube-system"), "exempt_namespaces must be a list"),
    (lambda: mps.mps_ack_findings([], [], exempt_labels=["a=b"]), "exempt_labels must be a dict"),
    (lambda: mps.mps_gpudirect_conflicts(None), "mps_gpudirect_conflicts: nodes must be a list"),
    (lambda: mps.gpu_allocation([], None), "gpu_allocation: pods must be a list"),
    (lambda: mps.mps_gpudirect_conflicts([1]), "mps_gpudirect_conflicts: nodes must be a list of Node documents"),
    (lambda: mps.gpu_allocation([{"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "x"}}}], []),
     "gpu_allocation: node n allocatable nvidia.com/gpu"),
    (lambda: mps.gpu_allocation_table([]), "must be a gpu_allocation result"),
])
def test_errors_are_filter_errors(call, message):
    with pytest.raises(AnsibleFilterError) as err:
        call()
    assert message in str(err.value)


def test_host_settings_filter_checks_devices_against_the_hosts_gpus():
    settings = {"pipe_directory": "/run/nvidia-mps", "log_directory": "/var/log/nvidia-mps", "visible_devices": [3]}
    assert mps.mps_host_settings(settings)["visible_devices"] == ["3"]
    with pytest.raises(AnsibleFilterError, match=r"^mps_host_settings: visible_devices: 3 is not a GPU of this host \(GPUs: 0\)"):
        mps.mps_host_settings(settings, gpus=[{"index": 0, "uuid": "GPU-0"}])
    with pytest.raises(AnsibleFilterError, match="gpus must be the gpu_host facts' gpus"):
        mps.mps_host_settings(settings, gpus={"index": 0})
