# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPUDirect workload patcher (plugins/plugin_utils/_gpudirect_workload.py), called directly: what a patch adds,
that a re-patch changes nothing, and the refusals (tests/unit/plugins/filter/test_gpudirect_workload.py validates
the filter's output of every kind against the Kubernetes schemas)."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as g
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _gpudirect_workload as w

TCPXO_NETWORKS = ["vpc%d" % i for i in range(1, 9)]
GKE = "1.32.2-gke.1489001"


def pod(gpus=8, **spec):
    trainer = dict(name="trainer", image="us-docker.pkg.dev/my-project/ml/trainer:1.0",
                   resources=dict(limits={"nvidia.com/gpu": gpus}))
    return dict(apiVersion="v1", kind="Pod", metadata=dict(name="train-0"), spec=dict(containers=[trainer], **spec))


def test_a_tcpxo_pod_gets_the_fabric_the_daemon_and_the_nccl_environment():
    original = pod()
    warnings = []
    patched = w.patch_workload(original, "tcpxo", TCPXO_NETWORKS, gke_version=GKE, warnings=warnings)
    assert original == pod(), "the input is not changed"
    annotations = patched["metadata"]["annotations"]
    assert annotations[g.DEFAULT_INTERFACE_ANNOTATION] == g.CONTROL_INTERFACE
    assert [i["network"] for i in json.loads(annotations[g.INTERFACES_ANNOTATION])][1:] == TCPXO_NETWORKS
    daemon = g.DAEMONS["tcpxo"]["name"]
    # GKE 1.32 runs native sidecars: the daemon is an init container that keeps running
    assert [c["name"] for c in patched["spec"]["initContainers"]] == [daemon]
    assert [c["name"] for c in patched["spec"]["containers"]] == ["trainer"]
    env = {e["name"]: e.get("value") for e in patched["spec"]["containers"][0]["env"]}
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "eth0"
    assert patched["spec"]["volumes"]


def test_a_patch_of_a_patch_changes_nothing():
    once = w.patch_workload(pod(), "tcpxo", TCPXO_NETWORKS, gke_version=GKE)
    assert w.patch_workload(copy.deepcopy(once), "tcpxo", TCPXO_NETWORKS, gke_version=GKE) == once


def test_older_gke_gets_a_classic_sidecar():
    patched = w.patch_workload(pod(), "tcpxo", TCPXO_NETWORKS, gke_version="1.28.11-gke.1289000")
    daemon = g.DAEMONS["tcpxo"]["name"]
    assert daemon in [c["name"] for c in patched["spec"]["containers"]]
    assert daemon not in [c["name"] for c in patched["spec"].get("initContainers") or []]


@pytest.mark.parametrize("args, kwargs, message", [
    ((pod(), "tcp", TCPXO_NETWORKS), {}, "fabric: 'tcp' has no GKE workload patch; allowed: rdma, rdma-a4x, tcpx, tcpxo"),
    ((pod(), "tcpxo", TCPXO_NETWORKS), dict(sidecar="both"), "sidecar: 'both' is not one of auto, native, classic"),
    ((pod(), "tcpxo", TCPXO_NETWORKS), dict(sidecar="native", gke_version="1.28.11-gke.1289000"),
     "sidecar: native sidecars need GKE >= 1.29"),
    ((pod(), "tcpxo", TCPXO_NETWORKS), dict(gke_version="latest"), "gke_version: "),
    (("Pod", "tcpxo", TCPXO_NETWORKS), {}, "the manifest must be a mapping, not str"),
    ((pod(gpus=4), "tcpxo", TCPXO_NETWORKS), {}, "requests 4 of the 8 GPUs"),
    ((pod(hostNetwork=True), "tcpxo", TCPXO_NETWORKS), {}, "hostNetwork"),
])
def test_refusals_say_what_is_wrong(args, kwargs, message):
    with pytest.raises(w.WorkloadError) as caught:
        w.patch_workload(*args, **kwargs)
    assert message in str(caught.value)


def test_workload_error_is_a_value_error():
    assert issubclass(w.WorkloadError, ValueError)
