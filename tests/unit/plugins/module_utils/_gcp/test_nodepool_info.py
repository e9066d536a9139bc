# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_nodepool_info's GKE engine (plugins/module_utils/_gcp/nodepool_info.py): the GPU facts of GKE pool documents,
which documents it reads, and the names it refuses before the first read."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool_info as info
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError

A3_HIGH = {"name": "a3high", "status": "RUNNING", "version": "1.30.4-gke.1129000", "locations": ["us-central1-c"],
           "config": {"machineType": "a3-highgpu-8g", "imageType": "COS_CONTAINERD",
                      "accelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": "8"}]},
           "networkConfig": {"additionalNodeNetworkConfigs": [
               {"network": "fab-gpunic-%d" % i, "subnetwork": "fab-gpunic-%d-sub" % i} for i in range(1, 5)]}}
L4_SHARED = {"name": "l4", "config": {"machineType": "g2-standard-8", "accelerators": [{
    "acceleratorType": "nvidia-l4", "acceleratorCount": "1",
    "gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": "4"}}]}}


def test_gke_gpudirect_pool_facts():
    facts = info.gke_pool_facts(A3_HIGH)
    assert (facts["name"], facts["status"], facts["machine_type"], facts["accelerator_count"]) == (
        "a3high", "RUNNING", "a3-highgpu-8g", 8)
    assert facts["additional_node_networks"][0] == dict(network="fab-gpunic-1", subnetwork="fab-gpunic-1-sub")
    assert facts["gpudirect"] == dict(profile="tcpx", gpu_nics_needed=4, gpu_nics=4, ready=True)
    assert facts["expected_resources"] == {"nvidia.com/gpu": 8}


def test_gke_gpudirect_pool_without_all_its_nics_is_not_ready():
    pool = dict(A3_HIGH, networkConfig={"additionalNodeNetworkConfigs": [{"network": "n1", "subnetwork": "s1"}]})
    assert info.gke_pool_facts(pool)["gpudirect"] == dict(profile="tcpx", gpu_nics_needed=4, gpu_nics=1, ready=False)


def test_gke_time_shared_pool_multiplies_the_gpu_resource():
    facts = info.gke_pool_facts(L4_SHARED)
    assert facts["gpudirect"] is None and facts["locations"] == []
    assert facts["gpu_sharing"]["maxSharedClientsPerGpu"] == "4"
    assert facts["expected_resources"] == {"nvidia.com/gpu": 4}


def test_gke_pool_without_a_gpu_expects_nothing():
    facts = info.gke_pool_facts({"name": "cpu", "config": {"machineType": "e2-standard-4"}})
    assert facts["accelerator_type"] is None and facts["expected_resources"] is None


class _Session:
    """What the GKE engine calls on a GCP session: documents by URL, None for a 404; every read is logged."""

    project = "info-project"

    def __init__(self, documents):
        self.documents = documents
        self.reads = []

    def container_url(self, path):
        return "container:" + path

    def get(self, url):
        self.reads.append(url)
        return self.documents.get(url)


CLUSTER = "container:projects/info-project/locations/us-central1/clusters/fab"


def test_gke_pools_lists_or_reads_one_pool():
    session = _Session({CLUSTER + "/nodePools": {"nodePools": [A3_HIGH, L4_SHARED]}, CLUSTER + "/nodePools/l4": L4_SHARED,
                        CLUSTER: {"name": "fab"}})
    pools, exists = info.gke_pools(session, dict(location="us-central1", cluster="fab"))
    assert exists and [p["name"] for p in pools] == ["a3high", "l4"]
    assert session.reads == [CLUSTER + "/nodePools"], "a cluster with pools is not read again"
    pools, exists = info.gke_pools(session, dict(location="us-central1", cluster="fab", name="l4"))
    assert exists and [p["name"] for p in pools] == ["l4"]


def test_gke_pools_of_a_missing_cluster():
    assert info.gke_pools(_Session({}), dict(location="us-central1", cluster="fab")) == ([], False)
    session = _Session({CLUSTER: {"name": "fab"}})
    assert info.gke_pools(session, dict(location="us-central1", cluster="fab", name="none")) == ([], True)


GKE_OK = dict(provider="gke", project="info-project", location="us-central1", cluster="fab", name=None)

BAD_READS = [
    # (case, params, option named, text the message must carry)
    ("gke: project with capitals", dict(GKE_OK, project="Info-Project"), "project", "project ID"),
    ("gke: location neither zone nor region", dict(GKE_OK, location="uscentral"), "location", "zone"),
    ("gke: cluster with an underscore", dict(GKE_OK, cluster="fab_1"), "cluster", "1 to 40"),
    ("gke: pool name with a slash", dict(GKE_OK, name="a/b"), "name", "1 to 40"),
]


@pytest.mark.parametrize("case, params, option, text", BAD_READS, ids=[c[0] for c in BAD_READS])
def test_bad_read_input_is_refused_before_the_first_get(case, params, option, text):
    # no context: opening a session would raise AttributeError, not the refusal
    with pytest.raises(EngineError) as caught:
        info.run(params, None)
    assert "%s: " % option in caught.value.msg and text in caught.value.msg, (case, caught.value.msg)


def test_good_read_input_passes_the_checks():
    assert not info.validate(GKE_OK) and not info.validate(dict(GKE_OK, location="us-central1-c", name="l4"))
