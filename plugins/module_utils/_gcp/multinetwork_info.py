# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What Google Cloud knows of a cluster's GPU NIC fabric (gke_multinetwork_info): read only.

The names come from the same ``_gcp.multinetwork.resolve`` the resource module uses, the reads from its
``FabricEngine`` (one GET per resource, concurrently), so the two never disagree on what "the fabric" is.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.checks import operation_error_text
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError

KINDS = (multinetwork.NETWORK, multinetwork.SUBNETWORK, multinetwork.FIREWALL)


def _cluster_view(session, fabric, location):
    url = session.container_url("projects/%s/locations/%s/clusters/%s" % (session.project, location, fabric["cluster"]))
    cluster = session.get(url)
    if cluster is None:
        return dict(exists=False, multi_networking=False, datapath_provider=None, status=None, autopilot=None,
                    current_master_version=None)
    config = cluster.get("networkConfig") or {}
    return dict(exists=True, multi_networking=bool(config.get("enableMultiNetworking")),
                datapath_provider=config.get("datapathProvider"), status=cluster.get("status"),
                autopilot=bool((cluster.get("autopilot") or {}).get("enabled")),
                current_master_version=cluster.get("currentMasterVersion"))


def describe(session, params):
    """The fabric's resources as GCP has them (None where missing), the cluster's multi-networking, and the
    names later steps use. Raises FabricError on bad input, ApiError on a failed read."""
    fabric = multinetwork.resolve(params)
    engine = multinetwork.FabricEngine(session, fabric, check_mode=True)
    current = engine.read()
    outputs = multinetwork.outputs(fabric)
    nics = []
    for nic in fabric["nics"]:
        entry = dict(index=nic["index"], k8s_network=nic["k8s_network"], interface=nic["interface"],
                     device_mode=nic["device_mode"])
        entry.update((kind, current.get((kind, nic[kind]))) for kind in KINDS)
        nics.append(entry)
    # each resource once (the RDMA NICs share their RoCE network; they have no firewall rule)
    missing = ["%s %s" % key for key in multinetwork.resource_keys(fabric) if current.get(key) is None]
    return dict(
        changed=False,
        gpudirect=fabric["profile"],
        region=fabric["region"],
        zone=fabric["zone"],
        network_profile=fabric["network_profile"],
        device_mode=fabric["device_mode"],
        nics=nics,
        exists=not missing,
        missing=missing,
        cluster=_cluster_view(session, fabric, params["location"]),
        additional_node_networks=outputs["additional_node_networks"],
        k8s_network_names=outputs["k8s_network_names"],
        pod_annotations=outputs["pod_annotations"],
    )


def run(params, context):
    """Entry point of the gke_multinetwork_info module (the contract of ``_core.contract``)."""
    try:
        return describe(context.session(GcpSession), params)
    except multinetwork.FabricError as exc:
        raise EngineError(str(exc), problems=exc.problems)
    except ApiError as exc:
        raise EngineError("Google Cloud request failed: %s" % operation_error_text(exc), status=exc.status)
