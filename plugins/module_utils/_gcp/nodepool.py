# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""GKE engine of gpu_ops.cluster.gpu_nodepool (provider gke).

The shape of the run is ``_nodepool.NodePoolEngine``: validate every option (no request yet) ->
read the cluster (it must exist, be Standard, have multi-networking when the pool has additional
networks, and run a version the GPUDirect profile accepts) and the pool once -> record a Plan ->
preflight (the GPU NIC networks and subnetworks exist, before a create) -> carry it out unless in
check mode.

The container API is v1, except when ``host_maintenance_interval`` is set: that field
(``NodeConfig.hostMaintenancePolicy``) exists only in v1beta1, so every request of that pool then
goes through v1beta1 (reads included, so that the field can be compared).

Which node-pool fields change in place (container v1 methods):
- ``nodePools.setSize``: node count; ``nodePools.setAutoscaling``: autoscaling;
  ``nodePools.setManagement``: auto-upgrade and auto-repair;
- ``nodePools.update`` (one group of fields per request, as the API recommends): labels, taints,
  gVNIC, image type with node version, node locations, boot disk size and type;
- everything else this module sets is treated as immutable and needs ``recreate: true``: machine
  type and the GPU attachment (type, count, driver installation, partition size, sharing), the
  additional node networks, placement policy, reservation affinity, host maintenance interval,
  service account, OAuth scopes and Spot. The API can migrate a pool's machine type in place, but
  on GPU machine families the GPUs come with the machine type, so the module asks for a recreate.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import offers
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import checks as common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import NodePoolEngine, PoolError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import foreign_option_problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import input_check as check_engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import run as run_engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import as_given, differing_fields
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems, check_labels
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import WaitTimeout

KIND = "nodePool"

DRIVER_VERSIONS = {"default": "DEFAULT", "latest": "LATEST", "disabled": "INSTALLATION_DISABLED"}
SHARING_STRATEGIES = {"time-sharing": "TIME_SHARING", "mps": "MPS"}
RESERVATION_TYPES = {"none": "NO_RESERVATION", "any": "ANY_RESERVATION", "specific": "SPECIFIC_RESERVATION"}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
MAX_SHARED_CLIENTS = 48
MIN_DISK_GB = 12
SCOPE_PREFIX = "https://www.googleapis.com/auth/"
RESERVATION = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?(?:/reservationBlocks/[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)?\Z")
PARTITION = re.compile(r"^[1-7]g\.[0-9]+gb\Z")

# GKE accelerator type -> GPU model of the MIG catalog (_catalog/mig.py), for the partition sizes.
GKE_ACCELERATOR_MIG_MODELS = {
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100-80GB",
    "nvidia-h100-mega-80gb": "H100-80GB",
    "nvidia-h200-141gb": "H200-141GB",
    "nvidia-b200": "B200-180GB",
}

# Options that belong to the AKS provider (value that counts as "not set"). The Azure account options
# (_core.argspec.AZURE_ACCOUNT_SPEC) are not listed: module_defaults of group/gpu_ops.cluster.azure reach every
# member of the group, GKE pools included, so they are ignored here rather than refused.
AKS_ONLY = dict(resource_group=None, vm_size=None, gpu_instance_profile=None, os_sku=None,
                orchestrator_version=None, gpu_driver=None, mode="User", mig_strategy="single")

IMMUTABLE = ("machine_type", "accelerator_type", "accelerator_count", "gpu_driver_version", "gpu_partition_size",
             "gpu_sharing", "additional_node_networks", "placement_policy", "reservation_affinity",
             "host_maintenance_interval", "service_account", "oauth_scopes", "spot", "gpudirect_strategy",
             "accelerator_network_profile")

# in-place update groups, in the order they are sent; each is one request
UPDATE_GROUPS = (
    ("setManagement", ("auto_upgrade", "auto_repair")),
    ("version", ("node_version", "image_type")),
    ("locations", ("node_locations",)),
    ("labels", ("node_labels",)),
    ("taints", ("node_taints",)),
    ("gvnic", ("gvnic",)),
    ("disk", ("disk_size_gb", "disk_type")),
    ("setAutoscaling", ("autoscaling",)),
    ("setSize", ("node_count",)),
)


# --------------------------------------------------------------------------- validation

def effective(params):
    """Options with the defaults of the machine type and GPUDirect profile filled in (a new dict).

    A3/A4 machine types come with their GPUs: the accelerator defaults to the machine's; with
    ``gpudirect`` and an unknown machine type, to the profile's default machine; gVNIC defaults to on
    with ``gpudirect``.
    """
    values = dict(params)
    machine = gpudirect.MACHINES.get(params.get("machine_type") or "")
    if machine is None and params.get("gpudirect"):
        machine = gpudirect.MACHINES[gpudirect.profile(params["gpudirect"])["machine_type"]]
    if machine is not None:
        if values.get("accelerator_type") is None:
            values["accelerator_type"] = machine["accelerator_type"]
        if values.get("accelerator_count") is None:
            values["accelerator_count"] = machine["gpus_per_node"]
    if params.get("gpudirect") and values.get("gvnic") is None:
        values["gvnic"] = True
    # A4X takes no Persistent Disk: GKE's default boot disk (pd-balanced) would be refused
    if machine is not None and values.get("disk_type") is None and machine.get("default_disk_type"):
        values["disk_type"] = machine["default_disk_type"]
    entry = gpudirect.PROFILES.get(params.get("gpudirect") or "")
    values["gpudirect_strategy"] = entry["gpudirect_strategy"] if entry else None
    return values


def validate(params):
    """All input problems of a GKE pool (a Problems object), without any request."""
    problems = Problems()
    foreign_option_problems(problems, params, AKS_ONLY, "gke", "an AKS")
    common.check_project(problems, params.get("project"))
    common.check_name(problems, "name", params.get("name"))
    common.check_name(problems, "cluster", params.get("cluster"))
    common.check_location(problems, params.get("location"))
    common.check_node_locations(problems, "node_locations", params.get("node_locations"), params.get("location"))
    if params.get("state") == "absent":
        return problems
    values = effective(params)

    if not params.get("machine_type"):
        problems.add("machine_type", "is required with provider=gke and state=present")
    common.check_node_types(problems, "", machine_type=params.get("machine_type"), disk_type=params.get("disk_type"),
                            image_type=params.get("image_type"), accelerator_type=params.get("accelerator_type"))
    _validate_boot_disk(problems, params)
    _validate_accelerator_network_profile(problems, params)
    _validate_gpus(problems, params, values)
    _validate_networks(problems, params, values)
    _validate_gpudirect(problems, params, values)
    _validate_placement(problems, params)
    _validate_reservation(problems, params)
    _validate_size(problems, params)
    check_labels(problems, "node_labels", params.get("node_labels"))
    common.parse_taints(problems, "node_taints", params.get("node_taints"))
    common.check_full_version(problems, "node_version", params.get("node_version"))
    account = params.get("service_account")
    if account is not None and not common.SERVICE_ACCOUNT.match(account):
        problems.add("service_account", "%r is not a service account e-mail address (or 'default')" % (account,))
    for scope in params.get("oauth_scopes") or []:
        if not ("%s" % scope).startswith(SCOPE_PREFIX):
            problems.add("oauth_scopes", "%r is not a full OAuth scope URL (%s...)" % (scope, SCOPE_PREFIX))
    if params.get("disk_size_gb") is not None and params["disk_size_gb"] < MIN_DISK_GB:
        problems.add("disk_size_gb", "must be at least %d (got %d)" % (MIN_DISK_GB, params["disk_size_gb"]))
    if values.get("gvnic") and not (params.get("image_type") or "").upper().startswith("COS"):
        problems.add("image_type", "gVNIC on GKE needs a Container-Optimized OS image (COS_CONTAINERD); got %r"
                     % (params.get("image_type"),))
    return problems


def _validate_gpus(problems, params, values):
    count = values.get("accelerator_count")
    accel = values.get("accelerator_type")
    if count is not None and count < 1:
        problems.add("accelerator_count", "must be at least 1 (got %d)" % count)
    if count is not None and not accel:
        problems.add("accelerator_type", "is required with accelerator_count")
    if accel and count is None:
        problems.add("accelerator_count", "is required with accelerator_type")
    has_gpu = bool(accel)
    for option in ("gpu_driver_version", "gpu_partition_size", "gpu_sharing"):
        if params.get(option) is not None and not has_gpu:
            problems.add(option, "needs a GPU: set accelerator_type and accelerator_count (or gpudirect)")
    machine = gpudirect.MACHINES.get(params.get("machine_type") or "")
    if machine and accel and accel != machine["accelerator_type"]:
        problems.add("accelerator_type", "%s comes with %s GPUs, not %s" % (
            params["machine_type"], machine["accelerator_type"], accel))
    if machine and count is not None and count != machine["gpus_per_node"]:
        problems.add("accelerator_count", "%s has %d GPUs per node, not %d" % (
            params["machine_type"], machine["gpus_per_node"], count))
    sharing = params.get("gpu_sharing")
    if sharing:
        clients = sharing.get("max_shared_clients_per_gpu")
        if clients is None or not 2 <= clients <= MAX_SHARED_CLIENTS:
            problems.add("gpu_sharing.max_shared_clients_per_gpu", "must be between 2 and %d (got %s)"
                         % (MAX_SHARED_CLIENTS, clients))
    partition = params.get("gpu_partition_size")
    if partition is not None:
        if not PARTITION.match(partition):
            problems.add("gpu_partition_size", "%r is not a MIG partition size such as 1g.10gb" % (partition,))
        elif accel in GKE_ACCELERATOR_MIG_MODELS:

            try:
                mig_catalog.profile(GKE_ACCELERATOR_MIG_MODELS[accel], partition)
            except ValueError as exc:
                problems.add("gpu_partition_size", str(exc))
        if sharing and sharing.get("strategy") == "mps":
            problems.add("gpu_sharing.strategy", "MPS cannot be combined with gpu_partition_size (MIG)")


def _validate_boot_disk(problems, params):
    machine = gpudirect.MACHINES.get(params.get("machine_type") or "")
    allowed = machine and machine.get("boot_disk_types")
    disk = params.get("disk_type")
    if allowed and disk is not None and disk not in allowed:
        problems.add("disk_type", "%s takes Hyperdisk only (%s), not %s" % (
            params["machine_type"], ", ".join(allowed), disk))


def _validate_accelerator_network_profile(problems, params):
    """The managed alternative (GKE creates the accelerator networks, DRANET hands them to pods)."""
    if not params.get("accelerator_network_profile"):
        return
    floor = gpudirect.ACCELERATOR_NETWORK_PROFILE_MIN_GKE
    if params.get("additional_node_networks"):
        problems.add("accelerator_network_profile", "GKE manages the accelerator networks with it; "
                                                    "additional_node_networks must not be set too")
    version = params.get("node_version")
    if version and common.version_key(version) and common.version_key(version) < common.version_key(floor):
        problems.add("accelerator_network_profile", "needs GKE %s or later; node_version is %s" % (floor, version))


def _rdma_layout(params):
    entry = gpudirect.PROFILES.get(params.get("gpudirect") or "")
    return entry if entry and entry["layout"] == "rdma" else None


def _validate_networks(problems, params, values):
    networks = params.get("additional_node_networks")
    if networks is None:
        return
    rdma = _rdma_layout(params)
    seen_networks, seen_subnets = {}, {}
    for index, item in enumerate(networks):
        where = "additional_node_networks[%d]" % index
        common.check_gce_name(problems, where + ".network", item.get("network"))
        common.check_gce_name(problems, where + ".subnetwork", item.get("subnetwork"))
        for seen, key in ((seen_networks, "network"), (seen_subnets, "subnetwork")):
            value = item.get(key)
            if key == "network" and rdma and index >= rdma["gvnic_networks"]:
                continue  # the RDMA NICs share their RoCE network, each with its own subnet
            if value in seen:
                problems.add("%s.%s" % (where, key), "%s is already used by additional_node_networks[%d]; each "
                             "additional interface needs its own %s" % (value, seen[value], key))
            else:
                seen[value] = index
    if rdma and len(networks) > rdma["gvnic_networks"]:
        roce = set(n.get("network") for n in networks[rdma["gvnic_networks"]:])
        if len(roce) != 1:
            problems.add("additional_node_networks", "gpudirect=%s: the RDMA NIC entries (after the first %d gVNIC "
                         "network) must all name the one RoCE network, got %s" % (
                             params["gpudirect"], rdma["gvnic_networks"], ", ".join(sorted("%s" % r for r in roce))))
        elif roce & set(n.get("network") for n in networks[:rdma["gvnic_networks"]]):
            problems.add("additional_node_networks", "gpudirect=%s: the gVNIC network must not be the RoCE network %s"
                         % (params["gpudirect"], roce.pop()))
    if _a3_mega_trap(params):
        count = gpudirect.PROFILES["tcpxo"]["gpu_nic_count"]
        problems.add("additional_node_networks", "%s has %d GPU NICs but %d additional networks are listed: an "
                     "extra gVNIC network on A3 Mega takes a GPU NIC's PCI slot and the TCPXO daemon then sees 7 of 8 "
                     "GPUs; list exactly %d GPU NIC networks" % (params["machine_type"], count, len(networks), count))


def _a3_mega_trap(params):
    """More additional networks than GPU NICs on an A3 Mega (TCPXO) machine. Not with a GPUDirect profile that the
    machine does not run: the machine type is the fault then, and _validate_gpudirect names it."""
    machine = gpudirect.MACHINES.get(params.get("machine_type") or "")
    networks = params.get("additional_node_networks") or []
    profile = gpudirect.PROFILES.get(params.get("gpudirect") or "")
    if profile and params.get("machine_type") not in profile["machine_types"]:
        return False
    return bool(machine) and machine["fabric"] == "tcpxo" and \
        len(networks) > gpudirect.PROFILES["tcpxo"]["gpu_nic_count"]


def _validate_gpudirect(problems, params, values):
    name = params.get("gpudirect")
    if not name:
        return
    entry = gpudirect.profile(name)
    machine_type = params.get("machine_type")
    if machine_type and machine_type not in entry["machine_types"]:
        problems.add("machine_type", "gpudirect=%s runs on %s, not %s" % (
            name, ", ".join(entry["machine_types"]), machine_type))
    networks = params.get("additional_node_networks") or []
    count = entry["node_networks"]
    managed = bool(params.get("accelerator_network_profile"))
    if managed and entry["layout"] != "rdma":
        problems.add("accelerator_network_profile", "is offered here for the GPUDirect-RDMA profiles, not gpudirect=%s"
                     % name)
    if len(networks) != count and not _a3_mega_trap(params) and not managed:
        what = "(one per GPU NIC)" if not entry["gvnic_networks"] else "(%d gVNIC network, then one per RDMA NIC)" % (
            entry["gvnic_networks"])
        problems.add("additional_node_networks", "gpudirect=%s needs exactly %d GPU NIC networks %s, "
                     "%d given" % (name, count, what, len(networks)))
    if values.get("gvnic") is False:
        problems.add("gvnic", "gpudirect=%s needs gVNIC (gvnic: true)" % name)
    if params.get("gpu_partition_size"):
        problems.add("gpu_partition_size", "MIG partitions are not used with gpudirect=%s" % name)
    if params.get("gpu_sharing"):
        problems.add("gpu_sharing", gpudirect.sharing_refusal(entry["fabric"]))
    if params.get("gpu_driver_version") == "disabled":
        problems.add("gpu_driver_version", "gpudirect=%s installs its NCCL plugin next to the GKE-installed driver "
                     "(%s); use default or latest" % (name, gpudirect.HOST_NVIDIA_DIR))
    if params.get("node_version") and common.version_key(params["node_version"]):
        gate = gpudirect.version_gate_error(name, params["node_version"])
        if gate:
            problems.add("node_version", gate)


ACCELERATOR_TOPOLOGY = re.compile(r"^[1-9][0-9]*x[1-9][0-9]*\Z")
WORKLOAD_POLICY_TYPE = "HIGH_THROUGHPUT"


def _validate_placement(problems, params):
    placement = params.get("placement_policy")
    if not placement:
        return
    common.check_gce_name(problems, "placement_policy.policy_name", placement.get("policy_name"))
    topology = placement.get("accelerator_topology")
    if topology is not None:
        if not ACCELERATOR_TOPOLOGY.match(str(topology)):
            problems.add("placement_policy.accelerator_topology",
                         "%r is no accelerator topology (<blocks>x<accelerators>, such as 1x72 for A4X)" % (topology,))
        if not placement.get("policy_name"):
            problems.add("placement_policy.accelerator_topology",
                         "a workload policy needs a name: set placement_policy.policy_name")
    zones = params.get("node_locations")
    location = params.get("location")
    single_zone = (zones is not None and len(zones) == 1) or (zones is None and common.location_kind(location) == "zone")
    if not single_zone:
        problems.add("placement_policy", "compact placement needs the pool in one zone: set node_locations to a "
                                         "single zone (got %s)" % (", ".join(zones) if zones else "all zones of %s"
                                                                   % location))


def _validate_reservation(problems, params):
    affinity = params.get("reservation_affinity")
    if not affinity:
        return
    consume, reservation = affinity.get("consume"), affinity.get("reservation")
    if consume == "specific":
        if not reservation:
            problems.add("reservation_affinity.reservation", "is required with reservation_affinity.consume=specific")
        elif not RESERVATION.match(reservation):
            problems.add("reservation_affinity.reservation", "%r is not a reservation name (or "
                         "<name>/reservationBlocks/<block>)" % (reservation,))
    elif reservation:
        problems.add("reservation_affinity.reservation", "is only used with reservation_affinity.consume=specific "
                                                         "(consume is %s)" % consume)


def _validate_size(problems, params):
    count = params.get("node_count")
    if count is not None and count < 0:
        problems.add("node_count", "must be 0 or more (got %d)" % count)
    if params.get("enable_autoscaling"):
        low, high = params.get("min_count"), params.get("max_count")
        if low is not None and low < 0:
            problems.add("min_count", "must be 0 or more (got %d)" % low)
        if high is not None and high < 1:
            problems.add("max_count", "must be at least 1 (got %d)" % high)
        if low is not None and high is not None and low > high:
            problems.add("min_count", "%d is above max_count %d" % (low, high))
    elif params.get("min_count") is not None or params.get("max_count") is not None:
        problems.add("min_count" if params.get("min_count") is not None else "max_count",
                     "only used with enable_autoscaling: true")


# --------------------------------------------------------------------------- desired state

def _taints(params):
    return common.parse_taints(Problems(), "node_taints", params.get("node_taints"))


def accelerator_config(values):
    if not values.get("accelerator_type"):
        return None
    accel = dict(acceleratorType=values["accelerator_type"], acceleratorCount=str(values["accelerator_count"]))
    if values.get("gpu_driver_version"):
        accel["gpuDriverInstallationConfig"] = dict(gpuDriverVersion=DRIVER_VERSIONS[values["gpu_driver_version"]])
    if values.get("gpu_partition_size"):
        accel["gpuPartitionSize"] = values["gpu_partition_size"]
    sharing = values.get("gpu_sharing")
    if sharing:
        accel["gpuSharingConfig"] = dict(gpuSharingStrategy=SHARING_STRATEGIES[sharing["strategy"]],
                                         maxSharedClientsPerGpu=str(sharing["max_shared_clients_per_gpu"]))
    return accel


def reservation_affinity(affinity):
    body = dict(consumeReservationType=RESERVATION_TYPES[affinity["consume"]])
    if affinity["consume"] == "specific":
        body.update(key=RESERVATION_KEY, values=[affinity["reservation"]])
    return body


def create_body(params):
    """The NodePool document of a nodePools.create request."""
    values = effective(params)
    config = dict(machineType=values["machine_type"], imageType=values["image_type"])
    accel = accelerator_config(values)
    if accel:
        config["accelerators"] = [accel]
    if values.get("gvnic") is not None:
        config["gvnic"] = dict(enabled=values["gvnic"])
    if values.get("gpudirect_strategy"):
        config["gpuDirectConfig"] = dict(gpuDirectStrategy=values["gpudirect_strategy"])
    if values.get("reservation_affinity"):
        config["reservationAffinity"] = reservation_affinity(values["reservation_affinity"])
    if values.get("host_maintenance_interval"):
        config["hostMaintenancePolicy"] = dict(maintenanceInterval=values["host_maintenance_interval"])
    for option, field in (("spot", "spot"), ("service_account", "serviceAccount"), ("disk_size_gb", "diskSizeGb"),
                          ("disk_type", "diskType")):
        if values.get(option) is not None:
            config[field] = values[option]
    if values.get("oauth_scopes"):
        config["oauthScopes"] = list(values["oauth_scopes"])
    labels = managed_labels(values)
    if labels:
        config["labels"] = labels
    taints = _taints(values)
    if taints:
        config["taints"] = taints

    pool = dict(name=values["name"], config=config)
    if values.get("enable_autoscaling"):
        pool["autoscaling"] = dict(enabled=True, minNodeCount=values["min_count"], maxNodeCount=values["max_count"])
        initial = values.get("node_count")
        pool["initialNodeCount"] = initial if initial is not None else max(values["min_count"], 1)
    else:
        pool["initialNodeCount"] = values["node_count"]
    if values.get("node_locations"):
        pool["locations"] = list(values["node_locations"])
    if values.get("node_version"):
        pool["version"] = values["node_version"]
    if values.get("additional_node_networks"):
        pool["networkConfig"] = dict(additionalNodeNetworkConfigs=[
            dict(network=n["network"], subnetwork=n["subnetwork"]) for n in values["additional_node_networks"]])
    if values.get("accelerator_network_profile"):
        pool.setdefault("networkConfig", {})["acceleratorNetworkProfile"] = values["accelerator_network_profile"]
    placement = values.get("placement_policy")
    if placement:
        pool["placementPolicy"] = dict(type=placement.get("type") or "COMPACT")
        if placement.get("policy_name"):
            pool["placementPolicy"]["policyName"] = placement["policy_name"]
    pool["management"] = dict(autoUpgrade=bool(values.get("auto_upgrade")), autoRepair=bool(values.get("auto_repair")))
    return pool


def managed_labels(values):
    """The node labels to send: the user's, plus the DRANET label with the managed accelerator network profile."""
    labels = dict((k, "%s" % v) for k, v in (values.get("node_labels") or {}).items())
    if values.get("accelerator_network_profile"):
        key, value = gpudirect.DRANET_NODE_LABEL
        labels.setdefault(key, value)
    return labels if labels or values.get("node_labels") is not None else None


def desired_view(params):
    values = effective(params)
    sharing = values.get("gpu_sharing")
    placement = values.get("placement_policy")
    affinity = values.get("reservation_affinity")
    taints = _taints(values)
    view = dict(
        as_given(values, "machine_type", "accelerator_type", "accelerator_count", "gpu_driver_version",
                 "gpu_partition_size", "gvnic", "image_type", "host_maintenance_interval", "service_account",
                 "disk_size_gb", "disk_type", "spot", "auto_upgrade", "auto_repair", "node_version",
                 "gpudirect_strategy", "accelerator_network_profile"),
        gpu_sharing=dict(strategy=sharing["strategy"], max_shared_clients_per_gpu=sharing["max_shared_clients_per_gpu"])
        if sharing else None,
        additional_node_networks=[dict(network=n["network"], subnetwork=n["subnetwork"])
                                  for n in values["additional_node_networks"]]
        if values.get("additional_node_networks") is not None else None,
        placement_policy=dict(type=placement.get("type") or "COMPACT", policy_name=placement.get("policy_name"))
        if placement else None,
        reservation_affinity=dict(consume=affinity["consume"], reservation=affinity.get("reservation"))
        if affinity else None,
        oauth_scopes=sorted(values["oauth_scopes"]) if values.get("oauth_scopes") else None,
        node_locations=sorted(values["node_locations"]) if values.get("node_locations") else None,
        # compared as a whole: the API replaces the pool's labels
        node_labels=sorted("%s=%s" % (k, v) for k, v in managed_labels(values).items())
        if managed_labels(values) is not None else None,
        node_taints=sorted(common.taint_text(t) for t in taints) if taints is not None else None,
    )
    if values.get("enable_autoscaling") is not None:
        view["autoscaling"] = dict(enabled=bool(values["enable_autoscaling"]),
                                   min_count=values.get("min_count") if values["enable_autoscaling"] else None,
                                   max_count=values.get("max_count") if values["enable_autoscaling"] else None)
    if not values.get("enable_autoscaling"):
        view["node_count"] = values.get("node_count")
    return view


def current_view(pool, node_count):
    config = pool.get("config") or {}
    accels = config.get("accelerators") or []
    accel = accels[0] if accels else {}
    driver = (accel.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion")
    sharing = accel.get("gpuSharingConfig") or {}
    placement = pool.get("placementPolicy") or {}
    affinity = config.get("reservationAffinity") or {}
    consume = dict((v, k) for k, v in RESERVATION_TYPES.items()).get(affinity.get("consumeReservationType"))
    autoscaling = pool.get("autoscaling") or {}
    count = accel.get("acceleratorCount")
    return dict(
        machine_type=config.get("machineType"),
        accelerator_type=accel.get("acceleratorType"),
        accelerator_count=int(count) if count not in (None, "") else None,
        gpu_driver_version=dict((v, k) for k, v in DRIVER_VERSIONS.items()).get(driver),
        gpu_partition_size=accel.get("gpuPartitionSize"),
        gpu_sharing=dict(strategy=dict((v, k) for k, v in SHARING_STRATEGIES.items()).get(
            sharing.get("gpuSharingStrategy")), max_shared_clients_per_gpu=int(sharing["maxSharedClientsPerGpu"])
            if sharing.get("maxSharedClientsPerGpu") not in (None, "") else None) if sharing else None,
        additional_node_networks=[dict(network=common.last_segment(n.get("network")),
                                       subnetwork=common.last_segment(n.get("subnetwork")))
                                  for n in (pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or []],
        gvnic=bool((config.get("gvnic") or {}).get("enabled")),
        gpudirect_strategy=(config.get("gpuDirectConfig") or {}).get("gpuDirectStrategy"),
        accelerator_network_profile=(pool.get("networkConfig") or {}).get("acceleratorNetworkProfile"),
        image_type=config.get("imageType"),
        placement_policy=dict(type=placement.get("type"), policy_name=placement.get("policyName"))
        if placement.get("type") not in (None, "TYPE_UNSPECIFIED") else None,
        reservation_affinity=dict(consume=consume, reservation=(affinity.get("values") or [None])[0]
                                  if consume == "specific" else None) if consume else None,
        host_maintenance_interval=(config.get("hostMaintenancePolicy") or {}).get("maintenanceInterval"),
        service_account=config.get("serviceAccount"),
        oauth_scopes=sorted(config.get("oauthScopes") or []) or None,
        disk_size_gb=int(config["diskSizeGb"]) if config.get("diskSizeGb") not in (None, "") else None,
        disk_type=config.get("diskType"),
        spot=bool(config.get("spot")),
        auto_upgrade=bool((pool.get("management") or {}).get("autoUpgrade")),
        auto_repair=bool((pool.get("management") or {}).get("autoRepair")),
        node_version=pool.get("version"),
        node_locations=sorted(pool.get("locations") or []) or None,
        node_labels=sorted("%s=%s" % (k, v) for k, v in (config.get("labels") or {}).items()),
        node_taints=sorted(common.taint_text(t) for t in config.get("taints") or []),
        autoscaling=dict(enabled=bool(autoscaling.get("enabled")),
                         min_count=autoscaling.get("minNodeCount") if autoscaling.get("enabled") else None,
                         max_count=autoscaling.get("maxNodeCount") if autoscaling.get("enabled") else None),
        node_count=node_count,
    )


def expected_resources(params, pool=None):
    """{"nvidia.com/gpu": N} each node should advertise, or None when unknown.

    From the options alone: every GPU field of a GKE pool is immutable, so the pool document
    (``pool``, the signature every node-pool engine shares) cannot say anything else.
    """
    del pool
    values = effective(params)
    count = values.get("accelerator_count")
    if not values.get("accelerator_type") or not count:
        return None
    sharing = values.get("gpu_sharing")
    partition = values.get("gpu_partition_size")
    if partition:
        model = GKE_ACCELERATOR_MIG_MODELS.get(values["accelerator_type"])
        if model is None:
            return None

        try:
            share = dict(strategy="time-slicing", replicas=sharing["max_shared_clients_per_gpu"]) if sharing else None
            return mig_nodes.expected_node_resources(model, count, partition, "single", share)
        except ValueError:
            return None
    replicas = sharing["max_shared_clients_per_gpu"] if sharing else 1
    return {mig_catalog.GPU_RESOURCE: count * replicas}


# --------------------------------------------------------------------------- engine

class PoolEngine(NodePoolEngine):
    """Plans and applies one GKE node pool; the session is a _gcp.GcpSession."""

    PROVIDER, API = "gke", "GKE"
    validate = staticmethod(validate)
    expected_resources = staticmethod(expected_resources)

    def __init__(self, context, session):
        super().__init__(context, session)
        self.beta = bool(self.params.get("host_maintenance_interval"))
        self.project = self.params["project"]
        self.location = self.params["location"]
        self.cluster_name = self.params["cluster"]
        self.name = self.params["name"]
        self.cluster_path = common.cluster_path(self.project, self.location, self.cluster_name)
        self.pool_path = "%s/nodePools/%s" % (self.cluster_path, self.name)
        self.cluster = None  # the cluster document, once read (its zones, for the preflight reads)

    @classmethod
    def open_session(cls, context, **options):
        return context.session(GcpSession, **options)

    def url(self, path):
        return self.session.container_url(path, beta=self.beta)

    # ---- reads and waits

    def read(self):
        """The cluster (checked with state=present), then the pool, each once it has settled."""
        cluster = self.settled_cluster()
        if self.params["state"] == "present":
            self.check_cluster(cluster)
            return self.settled_pool() if cluster is not None else None
        current = self.read_pool() if cluster is not None else None
        if current is not None and current.get("status") == "STOPPING" and not self.check_mode:
            current = self.settled_pool()
        return current

    def read_back(self):
        return self.read_pool()

    def desired_document(self):
        return create_body(self.params)

    def read_cluster(self):
        return self.session.get(self.session.container_url(self.cluster_path))

    def read_pool(self):
        return self.session.get(self.url(self.pool_path))

    def _poll(self, read, busy, what):
        document = read()
        if self.check_mode:
            return document
        return self.session.settle(read, lambda current: current is None or current.get("status") not in busy,
                                   lambda current: "%s is still %s" % (what, current.get("status")), first=document)

    def settled_cluster(self):
        return self._poll(self.read_cluster, common.BUSY_CLUSTER_STATUSES, "cluster %s" % self.cluster_name)

    def settled_pool(self):
        return self._poll(self.read_pool, common.BUSY_POOL_STATUSES, "node pool %s" % self.name)

    def node_count(self, pool):
        """Nodes per zone: the instance groups' target sizes when readable, else initialNodeCount."""
        sizes = []
        for link in pool.get("instanceGroupUrls") or []:
            try:
                manager = link.replace("/instanceGroups/", "/instanceGroupManagers/")
                group = self.session.get(self.session.compute_link(manager))
            except ApiError:
                group = None
            if not group or group.get("targetSize") is None:
                sizes = []
                break
            sizes.append(int(group["targetSize"]))
        if sizes and len(set(sizes)) == 1:
            return sizes[0]
        count = pool.get("initialNodeCount")
        return int(count) if count is not None else None

    # ---- checks that need the cluster (still before any change)

    def check_cluster(self, cluster):
        params = self.params
        self.cluster = cluster
        if cluster is None:
            if self.session.render:
                return  # render mode: the cluster is created by an earlier step of the same run
            raise PoolError("cluster: %s not found in %s (project %s)" % (self.cluster_name, self.location,
                                                                          self.project))
        if (cluster.get("autopilot") or {}).get("enabled"):
            raise PoolError("cluster: %s is an Autopilot cluster; GKE manages its nodes, node pools are refused"
                            % self.cluster_name)
        if cluster.get("status") in ("ERROR", "STOPPING"):
            raise PoolError("cluster: %s is in status %s (%s)" % (self.cluster_name, cluster.get("status"),
                                                                  cluster.get("statusMessage") or "no message"))
        networks = params.get("additional_node_networks") or []
        network_config = cluster.get("networkConfig") or {}
        if networks and not network_config.get("enableMultiNetworking"):
            raise PoolError("additional_node_networks: cluster %s does not have multi-networking, which additional "
                            "node networks need (create it with gpu_ops.cluster.gke_cluster multi_networking: true)"
                            % self.cluster_name)
        primary = common.last_segment(cluster.get("network") or network_config.get("network"))
        for index, item in enumerate(networks):
            if item["network"] == primary:
                raise PoolError("additional_node_networks[%d].network: %s is the cluster's primary network; GPU NIC "
                                "networks must be separate VPCs" % (index, primary))
        channel = ((cluster.get("releaseChannel") or {}).get("channel") or "UNSPECIFIED")
        if channel != "UNSPECIFIED" and params.get("auto_upgrade") is False:
            raise PoolError("auto_upgrade: cluster %s is on the %s release channel, where GKE requires node "
                            "auto-upgrade; set auto_upgrade: true and pin the version with a maintenance exclusion "
                            "(gpu_ops.cluster.gke_cluster maintenance_exclusion)" % (self.cluster_name, channel))
        if params.get("accelerator_network_profile") and network_config.get("datapathProvider") != "ADVANCED_DATAPATH":
            raise PoolError("accelerator_network_profile: cluster %s does not run Dataplane V2, which the managed "
                            "accelerator networks (DRANET) need (gpu_ops.cluster.gke_cluster datapath: advanced)"
                            % self.cluster_name)
        if params.get("accelerator_network_profile") and not params.get("node_version"):
            version = cluster.get("currentNodeVersion") or cluster.get("currentMasterVersion")
            floor = gpudirect.ACCELERATOR_NETWORK_PROFILE_MIN_GKE
            if common.version_key(version) and common.version_key(version) < common.version_key(floor):
                raise PoolError("accelerator_network_profile: needs GKE %s or later; the pool would run the "
                                "cluster's version %s" % (floor, version))
        profile = params.get("gpudirect")
        if profile and not params.get("node_version"):
            version = cluster.get("currentNodeVersion") or cluster.get("currentMasterVersion")
            if common.version_key(version):
                gate = gpudirect.version_gate_error(profile, version)
                if gate:
                    raise PoolError("node_version: the pool would run the cluster's version %s: %s" % (version, gate))

    # ---- planning

    def plan_present(self, current):
        desired = create_body(self.params)
        if current is None:
            self._require_size()
            self.plan.create(KIND, self.name, desired, request=("create", desired))
            return
        if current.get("status") == "ERROR":
            if not self.params.get("recreate"):
                raise PoolError("node pool %s is in status ERROR (%s); set recreate: true to delete and create it "
                                "again" % (self.name, current.get("statusMessage") or "no message"))
            self._require_size()
            self.plan.recreate(KIND, self.name, current, desired, ["status"], request=("recreate", desired))
            return
        want = desired_view(self.params)
        have = current_view(current, self.node_count(current))
        fields = differing_fields(want, have)
        if "node_version" in fields and not self._version_needs_update(have.get("node_version")):
            fields.remove("node_version")
        immutable = [f for f in fields if f.split(".", 1)[0] in IMMUTABLE]
        if immutable:
            tops = []
            for field in immutable:
                if field.split(".", 1)[0] not in tops:
                    tops.append(field.split(".", 1)[0])
            if not self.params.get("recreate"):
                raise PoolError("%s: cannot change on the existing node pool %s (immutable fields: %s); set "
                                "recreate: true to delete and recreate the pool"
                                % (", ".join(tops), self.name, ", ".join(tops)))
            self._require_size()
            self.plan.recreate(KIND, self.name, have, want, fields, request=("recreate", desired))
            return
        if fields:
            self.plan.update(KIND, self.name, have, want, fields, request=("update", (fields, current)))

    def _version_needs_update(self, have):
        wanted = self.params.get("node_version")
        wanted_key, have_key = common.version_key(wanted), common.version_key(have)
        if wanted_key is None or have_key is None:
            return wanted != have
        if wanted_key < have_key:
            self.warnings.append("node pool %s runs %s, newer than node_version %s; GKE does not downgrade nodes, "
                                 "the pool is left as it is" % (self.name, have, wanted))
            return False
        return wanted_key != have_key

    def _require_size(self):
        if self.params.get("node_count") is None and not self.params.get("enable_autoscaling"):
            raise PoolError("node_count: required to create node pool %s (or enable_autoscaling with min_count and "
                            "max_count)" % self.name)

    def plan_absent(self, current):
        if current is not None:
            self.plan.delete(KIND, self.name, current, request=("delete", None))

    # ---- checks of referenced resources before a create

    def preflight(self):
        """Before a create (or recreate), the resources the new pool refers to exist.

        The GPU NIC networks are not looked for in check mode: in a check-mode run of a whole play
        the networks that earlier tasks (gcp_gpu_vpcs, gke_multinetwork) would create do not exist yet.
        """
        if any(c.action in ("create", "recreate") for c in self.plan.changes) and not self.check_mode:
            self.check_networks()
        self.check_offers()

    def check_offers(self):
        """What the change needs the service to offer (``_gcp.offers``), one read each, in check mode too.

        A create: the zones named in node_locations, the machine, accelerator (type and count) and disk types in
        each zone of the pool, the image type and node version in the location's server config. An update: only
        what it changes (new zones, disk type, image type, node version). Nothing for a no-op or a delete.
        """
        change = self.plan.changes[0] if self.plan.changes else None
        if change is None or change.action == "delete" or self.session.render:
            return
        creates = change.action in ("create", "recreate")
        fields = set(f.split(".", 1)[0] for f in change.fields or [])
        values = effective(self.params)
        named = bool(self.params.get("node_locations")) and (creates or "node_locations" in fields)
        if creates or "node_locations" in fields:
            node = dict((o, values.get(o)) for o in ("machine_type", "accelerator_type", "accelerator_count",
                                                     "disk_type"))
        else:
            node = dict(disk_type=values.get("disk_type") if "disk_type" in fields else None)
        for option in ("image_type", "node_version"):
            node[option] = self.params.get(option) if creates or option in fields else None
        zones = self.params.get("node_locations") or (self.cluster or {}).get("locations") or (
            [self.location] if common.location_kind(self.location) == "zone" else [])
        problems = Problems()
        offers.check_node_pool(self.session, problems, self.location, zones, named, node)
        self.warnings.extend(problems.warnings)
        if problems:
            raise PoolError(problems.message("gpu_nodepool (provider %s)" % self.PROVIDER))

    def check_networks(self):
        """The additional networks and their subnetworks exist (in the cluster's region)."""
        networks = self.params.get("additional_node_networks") or []
        if not networks or self.session.render:
            return
        region = common.region_of(self.location)
        names = []
        for item in networks:  # the RDMA NICs share one network: read it once
            if item["network"] not in names:
                names.append(item["network"])
        tasks = [lambda n=n: self.session.get(self.session.compute_url("global/networks/%s" % n)) for n in names]
        tasks += [lambda s=item["subnetwork"]: self.session.get(
            self.session.compute_url("regions/%s/subnetworks/%s" % (region, s))) for item in networks]
        found = self.session.run_concurrently(tasks)
        documents = dict(zip(names, found[:len(names)]))
        rdma = _rdma_layout(self.params)
        zones = self.params.get("node_locations") or (self.cluster or {}).get("locations") or (
            [self.location] if common.location_kind(self.location) == "zone" else [])
        for index, item in enumerate(networks):
            network, subnet = documents[item["network"]], found[len(names) + index]
            where = "additional_node_networks[%d]" % index
            if network is not None and rdma and index >= rdma["gvnic_networks"]:
                profile = common.last_segment(network.get("networkProfile"))
                suffix = "-" + gpudirect.RDMA_NETWORK_PROFILE_SUFFIX
                if not profile or not profile.endswith(suffix):
                    raise PoolError("%s.network: %s was not created with a RoCE network profile (<zone>%s); the RDMA "
                                    "NICs need one (gpu_ops.cluster.gke_multinetwork gpudirect: %s)" % (
                                        where, item["network"], suffix, self.params["gpudirect"]))
                zone = profile[:-len(suffix)]
                if zones and any(z != zone for z in zones):
                    raise PoolError("%s.network: %s is restricted to zone %s by its network profile; the pool runs "
                                    "in %s (set node_locations: [%s])" % (where, item["network"], zone,
                                                                          ", ".join(zones), zone))
            if network is None:
                raise PoolError("%s.network: network %s not found in project %s (create the GPU NIC networks first, "
                                "for example with the gcp_gpu_vpcs role)" % (where, item["network"], self.project))
            if subnet is None:
                raise PoolError("%s.subnetwork: subnetwork %s not found in region %s"
                                % (where, item["subnetwork"], region))
            if common.last_segment(subnet.get("network")) != item["network"]:
                raise PoolError("%s.subnetwork: %s belongs to network %s, not %s" % (
                    where, item["subnetwork"], common.last_segment(subnet.get("network")), item["network"]))

    # ---- applying

    def apply(self):
        for change in self.plan.changes:
            action, payload = change.request
            if action == "create":
                self._create(payload, final=True)
            elif action == "delete":
                self._delete(final=True)
            elif action == "recreate":
                self._delete(final=False)
                self._create(payload, final=True)
            elif action == "update":
                self._update(*payload)

    def _mutate(self, send, final):
        """Send one mutating request (retrying while the cluster runs another operation) and wait."""
        def attempt():
            try:
                return True, send()
            except ApiError as exc:
                if not _cluster_busy(exc):
                    raise
                return False, exc

        try:
            dummy, operation = self.session.settle(attempt, lambda outcome: outcome[0], "the cluster stayed busy")
        except WaitTimeout as exc:
            raise exc.last[1] from None  # the last "cluster busy" answer
        if operation is not None and (self.params.get("wait") or not final):
            return self.session.wait_container_operation(operation)
        return operation

    def _workload_policy(self):
        """The workload policy (accelerator topology) the pool's placement names: created in the pool's region when
        missing, refused when it exists with another topology."""
        placement = self.params.get("placement_policy") or {}
        topology = placement.get("accelerator_topology")
        if not topology:
            return
        region = common.region_of(self.location)
        name = placement["policy_name"]
        current = self.session.get(self.session.compute_url("regions/%s/resourcePolicies/%s" % (region, name)))
        if current is not None:
            have = (current.get("workloadPolicy") or {}).get("acceleratorTopology")
            if have != topology:
                raise PoolError("placement_policy.accelerator_topology: resource policy %s in %s has accelerator topology "
                                "%s, not %s; name another policy or delete that one" % (name, region, have, topology))
            return
        operation = self.session.post(self.session.compute_url("regions/%s/resourcePolicies" % region), dict(
            name=name, workloadPolicy=dict(type=WORKLOAD_POLICY_TYPE, acceleratorTopology=topology)))
        self.session.wait_compute_operation(operation)

    def _create(self, body, final):
        parent = self.cluster_path
        self._workload_policy()

        def send():
            return self.session.post(self.url(parent + "/nodePools"), dict(nodePool=body, parent=parent))

        try:
            self._mutate(send, final)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # created by an earlier, interrupted run: wait for it and carry on
            self.settled_pool()

    def _delete(self, final):
        self._mutate(lambda: self.session.delete_if_present(self.url(self.pool_path)), final)

    def _update(self, fields, current):
        params = effective(self.params)
        tops = set(f.split(".", 1)[0] for f in fields)
        config = current.get("config") or {}
        pool_url = self.url(self.pool_path)
        requests = []
        for group, members in UPDATE_GROUPS:
            if not tops.intersection(members):
                continue
            if group == "setManagement":
                management = dict(current.get("management") or {})
                for option, field in (("auto_upgrade", "autoUpgrade"), ("auto_repair", "autoRepair")):
                    if params.get(option) is not None:
                        management[field] = params[option]
                requests.append((pool_url + ":setManagement", "POST", dict(management=dict(
                    autoUpgrade=bool(management.get("autoUpgrade")), autoRepair=bool(management.get("autoRepair"))))))
            elif group == "version":
                requests.append((pool_url, "PUT", dict(
                    nodeVersion=params.get("node_version") or current.get("version"),
                    imageType=params.get("image_type") or config.get("imageType"))))
            elif group == "locations":
                requests.append((pool_url, "PUT", dict(locations=list(params["node_locations"]))))
            elif group == "labels":
                requests.append((pool_url, "PUT", dict(labels=dict(labels=managed_labels(params)))))
            elif group == "taints":
                requests.append((pool_url, "PUT", dict(taints=dict(taints=_taints(params)))))
            elif group == "gvnic":
                requests.append((pool_url, "PUT", dict(gvnic=dict(enabled=bool(params["gvnic"])))))
            elif group == "disk":
                body = {}
                if params.get("disk_size_gb") is not None:
                    body["diskSizeGb"] = str(params["disk_size_gb"])
                if params.get("disk_type") is not None:
                    body["diskType"] = params["disk_type"]
                requests.append((pool_url, "PUT", body))
            elif group == "setAutoscaling":
                scaling = dict(enabled=bool(params.get("enable_autoscaling")))
                if params.get("enable_autoscaling"):
                    scaling.update(minNodeCount=params["min_count"], maxNodeCount=params["max_count"])
                requests.append((pool_url + ":setAutoscaling", "POST", dict(autoscaling=scaling)))
            elif group == "setSize":
                requests.append((pool_url + ":setSize", "POST", dict(nodeCount=params["node_count"])))
        for index, (url, method, body) in enumerate(requests):
            send = (lambda u=url, b=body: self.session.put(u, b)) if method == "PUT" else \
                (lambda u=url, b=body: self.session.post(u, b))
            self._mutate(send, final=index == len(requests) - 1)


_BUSY_MESSAGE = re.compile(r"incompatible operation|currently operating on cluster|please wait and try again",
                           re.IGNORECASE)


def _cluster_busy(exc):
    """GKE's answer while another operation runs on the cluster (400/409 FAILED_PRECONDITION)."""
    return exc.status in (400, 409) and bool(_BUSY_MESSAGE.search(exc.message or ""))


def run(params, context):
    """Entry point of gpu_nodepool for provider gke (the contract of ``_core.contract``)."""
    return run_engine(params, context, PoolEngine)


def input_check(params):
    """What ``validate_only`` returns for provider gke: the input problems, without any request."""
    return check_engine(params, PoolEngine)
