# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two container-API behaviours the GCP double (gcp.py) lacks, added to its handler table.

``install()`` is idempotent and only touches ``gcp._HANDLERS``:

- ``clusters.setMaintenancePolicy`` (not served by the double): replaces the cluster's
  ``maintenancePolicy``; a ``resourceVersion`` that does not match the stored one is refused
  (400 FAILED_PRECONDITION, as the API does for a concurrent change); a new one is issued.
- ``nodePools.update``: the request's ``labels`` (NodeLabels) and ``taints`` (NodeTaints) are
  wrapper objects whose list/map *replaces* the pool's ``config.labels`` / ``config.taints``
  (UpdateNodePoolRequest docs: "the existing node labels will be *replaced*"); ``diskSizeGb`` is
  an int64 string in the request and an int32 number in NodeConfig. The double merged the
  wrapper into the map instead.

These belong in gcp.py; until they are folded in, GKE tests call ``install()``.
"""

from __future__ import annotations

import copy
import random

from ansible_collections.gpu_ops.cluster.tests.doubles import gcp as _gcp


def _set_maintenance_policy(double, params, body, query):
    project, location = params["projectsId"], params["locationsId"]
    store = double._project(project)
    key, cluster = double._cluster(store, project, location, params["clustersId"])
    double._cluster_busy(project, key)
    policy = copy.deepcopy(body.get("maintenancePolicy") or {})
    stored_version = (cluster.get("maintenancePolicy") or {}).get("resourceVersion")
    if policy.get("resourceVersion") and policy["resourceVersion"] != stored_version:
        raise _gcp.ApiFailure(400, "FAILED_PRECONDITION", "The maintenance policy was changed concurrently "
                              "(resourceVersion %s is not the current one)." % policy["resourceVersion"],
                              "failedPrecondition")
    exclusions = ((policy.get("window") or {}).get("maintenanceExclusions")) or {}
    for name, window in exclusions.items():
        if not window.get("startTime"):
            raise _gcp.bad_request("maintenancePolicy.window.maintenanceExclusions[%s].startTime is required." % name)
    cluster["status"] = "RECONCILING"

    def effect(ok):
        cluster["status"] = "RUNNING"
        if ok:
            policy["resourceVersion"] = "%08x" % random.getrandbits(32)
            cluster["maintenancePolicy"] = policy

    return double._container_op(project, location, "UPDATE_CLUSTER", cluster["selfLink"], effect, key)


def _node_pools_update(double, params, body, query):
    body = copy.deepcopy(body)

    def apply(pool):
        config = pool.setdefault("config", {})
        for field, value in body.items():
            if field in _gcp._POOL_UPDATE_IGNORED:
                continue
            if field == "labels":
                config["labels"] = dict((value or {}).get("labels") or {})
            elif field == "taints":
                config["taints"] = list((value or {}).get("taints") or [])
            elif field == "diskSizeGb":
                config["diskSizeGb"] = int(value)
            else:
                target = _gcp._POOL_UPDATE_PATHS.get(field, ("config", field))
                holder = pool
                for part in target[:-1]:
                    holder = holder.setdefault(part, {})
                if isinstance(value, dict) and isinstance(holder.get(target[-1]), dict):
                    holder[target[-1]].update(copy.deepcopy(value))
                else:
                    holder[target[-1]] = copy.deepcopy(value)

    return _gcp._pool_op(double, params, "UPGRADE_NODES" if "nodeVersion" in body else "UPDATE_NODE_POOL", apply)


def install():
    _gcp._HANDLERS.setdefault("projects.locations.clusters.setMaintenancePolicy", _set_maintenance_policy)
    _gcp._HANDLERS["projects.locations.clusters.nodePools.update"] = _node_pools_update
