# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""GKE node pools as Google Cloud has them, with the GPU facts of our catalogs (gpu_nodepool_info, provider gke).
Read only. The GPU facts come from the tables gpu_nodepool itself uses: the GPUDirect catalog (which profile a
machine type runs, how many GPU NICs it needs) and the MIG catalog (what a partition size gives every node), through
the engine's own ``expected_resources``.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import checks as common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool as gke
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import run_info


def _gpudirect_facts(machine_type, networks):
    profiles = [name for name in gpudirect.PROFILE_NAMES if machine_type in gpudirect.PROFILES[name]["machine_types"]]
    if not profiles:
        return None
    needed = gpudirect.PROFILES[profiles[0]]["gpu_nic_count"]
    return dict(profile=profiles[0], gpu_nics_needed=needed, gpu_nics=len(networks), ready=len(networks) >= needed)


def gke_pool_facts(pool):
    """The GPU facts of one GKE NodePool document."""
    config = pool.get("config") or {}
    accelerator = (config.get("accelerators") or [{}])[0]
    sharing = accelerator.get("gpuSharingConfig") or {}
    networks = [dict(network=n.get("network"), subnetwork=n.get("subnetwork"))
                for n in (pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or []]
    options = dict(machine_type=config.get("machineType"), accelerator_type=accelerator.get("acceleratorType"),
                   accelerator_count=int(accelerator["acceleratorCount"]) if accelerator.get("acceleratorCount") else None,
                   gpu_partition_size=accelerator.get("gpuPartitionSize"),
                   gpu_sharing=dict(max_shared_clients_per_gpu=int(sharing["maxSharedClientsPerGpu"]))
                   if sharing.get("maxSharedClientsPerGpu") else None)
    return dict(name=pool.get("name"), status=pool.get("status"), version=pool.get("version"),
                machine_type=options["machine_type"], accelerator_type=options["accelerator_type"],
                accelerator_count=options["accelerator_count"], gpu_partition_size=options["gpu_partition_size"],
                gpu_sharing=sharing or None, image_type=config.get("imageType"), disk_type=config.get("diskType"),
                locations=pool.get("locations") or [],
                additional_node_networks=networks, gpudirect=_gpudirect_facts(options["machine_type"], networks),
                expected_resources=gke.expected_resources(options))


def gke_pools(session, params):
    """(pools facts, cluster exists) of a GKE cluster; one pool when ``name`` is given."""
    path = common.cluster_path(session.project, params["location"], params["cluster"])
    if params.get("name"):
        pool = session.get(session.container_url("%s/nodePools/%s" % (path, params["name"])))
        documents = [pool] if pool else []
    else:
        listing = session.get(session.container_url("%s/nodePools" % path))
        documents = (listing or {}).get("nodePools") or []
    exists = bool(documents) or session.get(session.container_url(path)) is not None
    return [gke_pool_facts(p) for p in documents], exists


def validate(params):
    """The names that go into the read's path, checked before the first GET (a Problems object)."""
    problems = Problems()
    common.check_project(problems, params.get("project"))
    common.check_location(problems, params.get("location"))
    common.check_name(problems, "cluster", params.get("cluster"))
    common.check_name(problems, "name", params.get("name"))
    return problems


def run(params, context):
    """Entry point of the gpu_nodepool_info module for GKE (the contract of ``_core.contract``)."""
    return run_info(validate(params), lambda: gke_pools(context.session(GcpSession), params))
