# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""AKS agent pools as Azure Resource Manager has them, with the MIG facts of our catalog (gpu_nodepool_info, provider
aks). Read only. What an AKS GPU instance profile gives every node comes from the MIG catalog, through the engine's own
``expected_resources``.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool as aks
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure.session import ArmSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import run_info


def aks_pool_facts(pool, mig_strategy="single"):
    """The GPU facts of one AKS agentPool document."""
    props = pool.get("properties") or {}
    profile = props.get("gpuInstanceProfile")
    mig = None
    if profile:
        try:
            mig = mig_catalog.aks_profile(props.get("vmSize"), profile)
        except ValueError as exc:
            mig = dict(gpu_instance_profile=profile, problem=str(exc))
    return dict(name=pool.get("name"), provisioning_state=props.get("provisioningState"), vm_size=props.get("vmSize"),
                count=props.get("count"), os_sku=props.get("osSKU"), mode=props.get("mode"),
                orchestrator_version=props.get("currentOrchestratorVersion") or props.get("orchestratorVersion"),
                gpu_instance_profile=profile, mig=mig,
                expected_resources=aks.expected_resources(dict(mig_strategy=mig_strategy), pool))


def aks_pools(session, params):
    """(pools facts, cluster exists) of an AKS cluster; one pool when ``name`` is given."""
    base = aks.PROVIDER_PATH % (params["resource_group"], params["cluster"])
    if params.get("name"):
        pool = session.get(session.url("%s/agentPools/%s" % (base, params["name"]), aks.API_VERSION))
        documents = [pool] if pool else []
    else:
        listing = session.get(session.url("%s/agentPools" % base, aks.API_VERSION))
        documents = (listing or {}).get("value") or []
    exists = bool(documents) or session.get(session.url(base, aks.API_VERSION)) is not None
    strategy = params.get("mig_strategy") or "single"
    return [aks_pool_facts(p, strategy) for p in documents], exists


def validate(params):
    """The names that go into the read's path, checked before the first GET (a Problems object)."""
    problems = Problems()
    aks.check_target(problems, params, name_required=False)
    return problems


def run(params, context):
    """Entry point of the gpu_nodepool_info module for AKS (the contract of ``_core.contract``)."""
    return run_info(validate(params), lambda: aks_pools(context.session(ArmSession), params))
