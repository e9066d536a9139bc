# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Short wait-failure messages (plugins/plugin_utils/_k8s/wait.py): one line per object, never a dump."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter import k8s_names
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import wait as _k8s_wait

PULLING = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "nccl-test-host-1", "namespace": "default", "annotations": {"secret-ish": "x" * 5000}},
    "spec": {"nodeName": "gpu-0", "containers": [{"name": "nccl-test", "image": "example/nccl:1"}]},
    "status": {"phase": "Pending",
               "conditions": [{"type": "PodScheduled", "status": "True"},
                              {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                               "message": "containers with unready status: [nccl-test]"}],
               "containerStatuses": [{"name": "nccl-test", "ready": False, "state": {"waiting": {
                   "reason": "ImagePullBackOff", "message": 'Back-off pulling image "example/nccl:1"'}}}]},
}


def test_a_pod_says_its_phase_node_container_reason_and_false_conditions():
    text = _k8s_wait.not_ready(PULLING)
    assert text.startswith("phase Pending on node gpu-0; container nccl-test waiting: ImagePullBackOff")
    assert "Ready=False (ContainersNotReady" in text and "PodScheduled" not in text
    assert "x" * 20 not in text and len(text) <= _k8s_wait.LIMIT


def test_a_crashed_container_says_its_exit_code():
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running", "containerStatuses": [
        {"name": "c", "ready": False, "state": {"terminated": {"reason": "Error", "exitCode": 137}}}]}}
    assert _k8s_wait.not_ready(pod) == "phase Running; container c terminated: Error (exit code 137)"


@pytest.mark.parametrize("obj, text", [
    ({"kind": "DaemonSet", "metadata": {"name": "d"}, "status": {"numberReady": 1, "desiredNumberScheduled": 3}}, "1 of 3 pods ready"),
    ({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2}, "status": {}}, "0 of 2 pods ready"),
    ({"kind": "ClusterPolicy", "metadata": {"name": "c"}, "status": {"state": "notReady"}}, "state notReady"),
    ({"kind": "ConfigMap", "metadata": {"name": "c"}}, "no status yet"),
    ({}, "not found"),
    (None, "not found"),
])
def test_other_kinds(obj, text):
    assert _k8s_wait.not_ready(obj) == text


def test_a_long_condition_message_is_cut():
    obj = {"kind": "X", "metadata": {"name": "x"}, "status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "R", "message": "m" * 1000}] * 5}}
    text = _k8s_wait.not_ready(obj)
    assert len(text) == _k8s_wait.LIMIT and text.endswith("...")


def _results(*entries):
    return [dict({"item": {"label": "ConfigMap/c, Pod/nccl-test-host-1, Pod/nccl-test-host-2"}, "changed": False}, **e) for e in entries]


def test_a_timed_out_wait_names_the_object_first_then_what_was_waited_for():
    results = _results({"result": {}}, {"msg": '"Pod" "nccl-test-host-1": Timed out waiting on resource', "result": PULLING})
    message = _k8s_wait.apply_failure(results, "40-nccl-test", 30)
    first, second = message.splitlines()
    assert first.startswith("Step 40-nccl-test: Pod default/nccl-test-host-1 is not ready after 30 s: phase Pending on node gpu-0")
    assert second == "Waited for: ConfigMap/c, Pod/nccl-test-host-1, Pod/nccl-test-host-2."
    assert len(message) <= _k8s_wait.MESSAGE_LIMIT and "xxxx" not in message and "example/nccl:1" in message


def test_an_api_error_is_reported_as_such():
    message = _k8s_wait.apply_failure(_results({"msg": "Failed to create object: b'{\"reason\":\"Forbidden\"}'" + "z" * 2000}), "s")
    assert message.startswith("Step s: applying ConfigMap/c, Pod/nccl-test-host-1, Pod/nccl-test-host-2 failed: Failed to create object")
    assert len(message) < 700


def test_an_error_whose_message_ansible_dropped_is_still_a_failure():
    """ansible-core 2.19 keeps no msg for a module error that failed_when suppressed: never a silent pass."""
    results = _results({"failed": False, "failed_when_result": False, "failed_when_suppressed_exception": "(traceback unavailable)"})
    message = _k8s_wait.apply_failure(results, "10-connection")
    assert message.startswith("Step 10-connection: applying ConfigMap/c, Pod/nccl-test-host-1, Pod/nccl-test-host-2 failed: "
                              "the module failed and Ansible kept no message")


def test_nothing_failed_is_an_empty_message():
    assert _k8s_wait.apply_failure(_results({"result": PULLING}, {"skipped": True, "msg": "skipped"}), "s") == ""
    assert _k8s_wait.apply_failure([], "s") == ""


def test_the_filters_check_their_input():
    assert k8s_names.k8s_not_ready(PULLING).startswith("phase Pending")
    with pytest.raises(AnsibleFilterError, match="k8s_not_ready: the input must be a Kubernetes object"):
        k8s_names.k8s_not_ready(["pod"])
    with pytest.raises(AnsibleFilterError, match="k8s_wait_failure: the input must be the list of loop results"):
        k8s_names.k8s_wait_failure({"results": []}, "s")
    with pytest.raises(AnsibleFilterError, match="k8s_wait_failure: step must be a non-empty string"):
        k8s_names.k8s_wait_failure([], "")
