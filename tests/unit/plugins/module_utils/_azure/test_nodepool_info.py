# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_nodepool_info's AKS engine (plugins/module_utils/_azure/nodepool_info.py): the GPU facts of AKS pool documents,
which documents it reads, and the names it refuses before the first read."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool as aks
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool_info as info
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError

AKS_MIG = {"name": "mig", "properties": {"vmSize": "Standard_ND96asr_v4", "count": 1, "gpuInstanceProfile": "MIG1g",
                                         "osSKU": "Ubuntu", "mode": "User", "provisioningState": "Succeeded",
                                         "orchestratorVersion": "1.30"}}


def test_aks_mig_pool_facts_per_strategy():
    single = info.aks_pool_facts(AKS_MIG)
    assert single["mig"]["mig_profile"] == "1g.5gb" and single["mig"]["instances_per_vm"] == 56
    assert single["orchestrator_version"] == "1.30" and single["provisioning_state"] == "Succeeded"
    assert single["expected_resources"] == {"nvidia.com/gpu": 56}
    assert info.aks_pool_facts(AKS_MIG, "mixed")["expected_resources"] == {"nvidia.com/mig-1g.5gb": 56}


def test_aks_pool_on_a_size_without_mig_reports_the_problem():
    facts = info.aks_pool_facts({"name": "bad", "properties": {"vmSize": "Standard_D4s_v5", "gpuInstanceProfile": "MIG1g"}})
    assert facts["mig"]["gpu_instance_profile"] == "MIG1g" and "Standard_D4s_v5" in facts["mig"]["problem"]


class _Session:
    """What the AKS engine calls on an ARM session: documents by URL, None for a 404; every read is logged."""

    def __init__(self, documents):
        self.documents = documents
        self.reads = []

    def url(self, path, api_version):
        return "arm:%s?%s" % (path, api_version)

    def get(self, url):
        self.reads.append(url)
        return self.documents.get(url)


CLUSTER = "container:projects/info-project/locations/us-central1/clusters/fab"


def test_aks_pools_use_the_strategy_and_the_api_version():
    base = "arm:%s" % (aks.PROVIDER_PATH % ("rg", "aks1"))
    session = _Session({"%s/agentPools?%s" % (base, aks.API_VERSION): {"value": [AKS_MIG]}})
    pools, exists = info.aks_pools(session, dict(resource_group="rg", cluster="aks1", mig_strategy="mixed"))
    assert exists and pools[0]["expected_resources"] == {"nvidia.com/mig-1g.5gb": 56}
    assert info.aks_pools(_Session({}), dict(resource_group="rg", cluster="aks1", name="mig")) == ([], False)


SUBSCRIPTION = "00000000-1111-2222-3333-444444444444"
AKS_OK = dict(provider="aks", subscription_id=SUBSCRIPTION, resource_group="rg-gpu.1", cluster="aks1", name=None)

BAD_READS = [
    # (case, params, option named, text the message must carry)
    ("aks: subscription not a GUID", dict(AKS_OK, subscription_id="my-subscription"), "subscription_id", "GUID"),
    ("aks: subscription GUID with a suffix", dict(AKS_OK, subscription_id=SUBSCRIPTION + "/x"), "subscription_id", "GUID"),
    ("aks: subscription missing", dict(AKS_OK, subscription_id=""), "subscription_id", "required"),
    ("aks: resource group ends with a period", dict(AKS_OK, resource_group="rg."), "resource_group", "not ending with '.'"),
    ("aks: resource group of 91 characters", dict(AKS_OK, resource_group="r" * 91), "resource_group", "1 to 90"),
    ("aks: resource group with a slash", dict(AKS_OK, resource_group="rg/../other"), "resource_group", "1 to 90"),
    ("aks: cluster with a space", dict(AKS_OK, cluster="aks 1"), "cluster", "1 to 63"),
    ("aks: pool name with capitals", dict(AKS_OK, name="GPU"), "name", "lowercase"),
]


@pytest.mark.parametrize("case, params, option, text", BAD_READS, ids=[c[0] for c in BAD_READS])
def test_bad_read_input_is_refused_before_the_first_get(case, params, option, text):
    # no context: opening a session would raise AttributeError, not the refusal
    with pytest.raises(EngineError) as caught:
        info.run(params, None)
    assert "%s: " % option in caught.value.msg and text in caught.value.msg, (case, caught.value.msg)


def test_good_read_input_passes_the_checks():
    assert not info.validate(AKS_OK) and not info.validate(dict(AKS_OK, resource_group="a", name="mig"))
    assert not info.validate(dict(AKS_OK, resource_group="r" * 90, subscription_id=SUBSCRIPTION.upper()))
