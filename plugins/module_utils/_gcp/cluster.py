# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Engine of gpu_ops.cluster.gke_cluster: a Standard GKE cluster ready for multi-networking.

Flow: validate every option (no request yet) -> read the cluster once -> refuse what can never
converge (Autopilot, multi-networking off on an existing cluster) -> record a Plan (create, sparse
updates through the API's update methods, or a recreate that the user must allow) -> carry it out
unless in check mode.

Which cluster fields can change in place (container v1):
- ``clusters.update`` (PUT, one ``desired*`` field per request): release channel
  (``desiredReleaseChannel``), control-plane version (``desiredMasterVersion``, upgrades only),
  node locations (``desiredLocations``), master authorized networks
  (``desiredMasterAuthorizedNetworksConfig``);
- ``clusters.setMaintenancePolicy``: maintenance exclusions (other exclusions are kept);
- everything else this module sets (network, subnetwork, IP allocation, datapath,
  multi-networking, private nodes) is treated as immutable. Multi-networking and Dataplane V2
  are the foundation of the GPU NIC networks: a cluster without them is never accepted silently.
"""

from __future__ import annotations

import copy
import datetime

from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import offers
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import checks as common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import versions
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gke_gpudirect import version_gate_error
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import (
    Plan, as_given, differing_fields, resulting_document,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import WaitTimeout
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError

KIND = "cluster"

DATAPATHS = {"advanced": "ADVANCED_DATAPATH", "legacy": "LEGACY_DATAPATH"}
CHANNELS = ("unspecified", "rapid", "regular", "stable", "extended")
EXCLUSION_SCOPES = {
    "no_upgrades": "NO_UPGRADES",
    "no_minor_upgrades": "NO_MINOR_UPGRADES",
    "no_minor_or_node_upgrades": "NO_MINOR_OR_NODE_UPGRADES",
}
NO_UPGRADES_MAX_DAYS = 30
# "Public clusters can have up to 50 authorized network CIDR ranges. Private clusters can have up to 100."
# (https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks, Limitations)
MAX_AUTHORIZED_NETWORKS = 50
MAX_AUTHORIZED_NETWORKS_PRIVATE = 100

# option path -> how the API changes it in place (None: immutable, needs recreate)
UPDATE_METHODS = {
    "release_channel": "desiredReleaseChannel",
    "node_locations": "desiredLocations",
    "master_authorized_networks": "desiredMasterAuthorizedNetworksConfig",
    "maintenance_exclusion": "setMaintenancePolicy",
}

UPDATE_ORDER = ("cluster_version", "release_channel", "node_locations", "master_authorized_networks",
                "maintenance_exclusion")

# what a fresh cluster's system pool looks like unless default_node_pool says otherwise
DEFAULT_POOL = dict(name="default-pool", machine_type="e2-standard-8", node_count=1, disk_size_gb=100,
                    disk_type="pd-balanced", image_type="COS_CONTAINERD")


class ClusterInputError(Exception):
    pass


# --------------------------------------------------------------------------- validation

def validate(params):
    """All input problems (a Problems object), without any request."""
    problems = Problems()
    common.check_project(problems, params.get("project"))
    common.check_name(problems, "name", params["name"])
    common.check_location(problems, params["location"])
    common.check_node_locations(problems, "node_locations", params.get("node_locations"), params["location"])
    if params.get("state") == "absent":
        return problems

    if params.get("autopilot"):
        problems.add("autopilot", "Autopilot clusters are refused: GPUDirect multi-networking node pools need a "
                                  "Standard cluster (set autopilot: false)")
    for option in ("network", "subnetwork"):
        common.check_gce_name(problems, option, params.get(option))

    alias = versions.is_alias(params.get("cluster_version"))
    # an alias is resolved after validation, to a version that meets the profile's minimum (versions.resolve)
    version = None if alias else common.check_full_version(problems, "cluster_version", params.get("cluster_version"))
    profile = params.get("gpudirect")
    multi = params.get("multi_networking")
    datapath = params.get("datapath")
    if multi and datapath != "advanced":
        problems.add("datapath", "multi-networking needs Dataplane V2: datapath must be 'advanced' while "
                                 "multi_networking is true (got %r)" % (datapath,))
    if profile:
        if not multi:
            problems.add("multi_networking", "gpudirect=%s needs multi_networking: true (the GPU NICs are additional "
                                             "node networks)" % profile)
        if params.get("cluster_version") is None:
            problems.add("cluster_version", "gpudirect=%s needs a pinned cluster_version (MAJOR.MINOR.PATCH-gke.BUILD) "
                                            "so that the minimum GKE version of the profile can be checked" % profile)
        elif version is not None:
            gate = version_gate_error(profile, params["cluster_version"])
            if gate:
                problems.add("cluster_version", gate)

    _validate_ip_allocation(problems, params)
    _validate_release(problems, params)
    _validate_default_pool(problems, params.get("default_node_pool") or {})
    _validate_private(problems, params)
    return problems


def _validate_ip_allocation(problems, params):
    ip = params.get("ip_allocation") or {}
    networks = []
    for kind in ("cluster", "services"):
        name = ip.get("%s_secondary_range_name" % kind)
        cidr = ip.get("%s_ipv4_cidr" % kind)
        if name and cidr:
            problems.add("ip_allocation.%s_ipv4_cidr" % kind,
                         "set either ip_allocation.%s_secondary_range_name or ip_allocation.%s_ipv4_cidr, not both"
                         % (kind, kind))
        common.check_gce_name(problems, "ip_allocation.%s_secondary_range_name" % kind, name)
        # pods need at least a /21 for the smallest cluster; services at least a /27
        networks.append(("ip_allocation.%s_ipv4_cidr" % kind, common.check_cidr(
            problems, "ip_allocation.%s_ipv4_cidr" % kind, cidr, max_prefix=21 if kind == "cluster" else 27,
            min_prefix=9 if kind == "cluster" else 16)))
    if params.get("private_nodes") and params.get("master_ipv4_cidr"):
        networks.append(("master_ipv4_cidr", common.check_cidr(problems, "master_ipv4_cidr",
                                                               params["master_ipv4_cidr"])))
    common.check_no_overlap(problems, networks)


def _validate_release(problems, params):
    channel = params.get("release_channel") or "unspecified"
    pool = params.get("default_node_pool") or {}
    exclusion = params.get("maintenance_exclusion")
    pinned = params.get("cluster_version") is not None
    if channel != "unspecified":
        if pool.get("auto_upgrade") is False:
            problems.add("default_node_pool.auto_upgrade",
                         "GKE requires node auto-upgrade on clusters in a release channel (release_channel=%s); "
                         "keep auto_upgrade on and pin with maintenance_exclusion, or use release_channel=unspecified"
                         % channel)
        if pinned and not exclusion:
            problems.add("maintenance_exclusion",
                         "release_channel=%s upgrades the nodes automatically; to keep cluster_version %s pinned set "
                         "maintenance_exclusion (scope no_minor_or_node_upgrades), or use release_channel=unspecified"
                         % (channel, params["cluster_version"]))
    if not exclusion:
        return
    common.check_gce_name(problems, "maintenance_exclusion.name", exclusion.get("name"))
    start = common.parse_time(problems, "maintenance_exclusion.start_time", exclusion.get("start_time"))
    end = common.parse_time(problems, "maintenance_exclusion.end_time", exclusion.get("end_time"))
    scope = exclusion.get("scope")
    if start and end and end <= start:
        problems.add("maintenance_exclusion.end_time", "must be after maintenance_exclusion.start_time")
    if scope == "no_upgrades":
        if exclusion.get("end_time") is None:
            problems.add("maintenance_exclusion.end_time", "scope no_upgrades needs an end_time (at most %d days "
                                                           "after start_time)" % NO_UPGRADES_MAX_DAYS)
        elif start and end and end - start > datetime.timedelta(days=NO_UPGRADES_MAX_DAYS):
            problems.add("maintenance_exclusion.end_time", "scope no_upgrades lasts at most %d days"
                         % NO_UPGRADES_MAX_DAYS)
    elif channel == "unspecified":
        problems.add("maintenance_exclusion.scope", "clusters without a release channel only accept scope "
                                                    "no_upgrades (got %s)" % scope)


def _validate_default_pool(problems, pool):
    common.check_name(problems, "default_node_pool.name", pool.get("name"))
    common.check_node_types(problems, "default_node_pool.", machine_type=pool.get("machine_type"),
                            disk_type=pool.get("disk_type"), image_type=pool.get("image_type"))
    if pool.get("node_count") is not None and pool["node_count"] < 1:
        problems.add("default_node_pool.node_count", "must be at least 1 (got %d)" % pool["node_count"])
    if pool.get("disk_size_gb") is not None and pool["disk_size_gb"] < 12:
        problems.add("default_node_pool.disk_size_gb", "must be at least 12 (got %d)" % pool["disk_size_gb"])
    account = pool.get("service_account")
    if account is not None and not common.SERVICE_ACCOUNT.match(account):
        problems.add("default_node_pool.service_account", "%r is not a service account e-mail address" % (account,))


def _validate_private(problems, params):
    if params.get("master_ipv4_cidr") and not params.get("private_nodes"):
        problems.add("master_ipv4_cidr", "only used with private_nodes: true")
    if params.get("private_nodes") and params.get("master_ipv4_cidr"):
        net = common.check_cidr(Problems(), "master_ipv4_cidr", params["master_ipv4_cidr"])
        if net is not None and net.prefixlen != 28:
            problems.add("master_ipv4_cidr", "the control plane range must be a /28 (got %s)" % params["master_ipv4_cidr"])
    networks = params.get("master_authorized_networks") or []
    limit = MAX_AUTHORIZED_NETWORKS_PRIVATE if params.get("private_nodes") else MAX_AUTHORIZED_NETWORKS
    if len(networks) > limit:
        problems.add("master_authorized_networks", "lists %d CIDR blocks; GKE allows at most %d on a %s cluster (%s)" % (
            len(networks), limit, "private" if params.get("private_nodes") else "public",
            "100 with private_nodes, 50 without"))
    for index, entry in enumerate(networks):
        common.check_cidr(problems, "master_authorized_networks[%d].cidr_block" % index, entry.get("cidr_block"))


# --------------------------------------------------------------------------- desired state

def _pinned_without_channel(params):
    return params.get("cluster_version") is not None and (params.get("release_channel") or "unspecified") == "unspecified"


def default_pool_auto_upgrade(params):
    pool = params.get("default_node_pool") or {}
    if pool.get("auto_upgrade") is not None:
        return pool["auto_upgrade"]
    return not _pinned_without_channel(params)


def exclusion_window(exclusion):
    """The TimeWindow document of the maintenance_exclusion option."""
    window = dict(startTime=common.rfc3339(common.to_datetime(exclusion["start_time"])),
                  maintenanceExclusionOptions=dict(scope=EXCLUSION_SCOPES[exclusion["scope"]]))
    if exclusion.get("end_time"):
        window["endTime"] = common.rfc3339(common.to_datetime(exclusion["end_time"]))
    else:
        window["maintenanceExclusionOptions"]["endTimeBehavior"] = "UNTIL_END_OF_SUPPORT"
    return window


def create_body(params):
    """The Cluster document of a clusters.create request."""
    pool_opts = dict(DEFAULT_POOL)
    pool_opts.update(dict((k, v) for k, v in (params.get("default_node_pool") or {}).items() if v is not None))
    config = dict(machineType=pool_opts["machine_type"], diskSizeGb=pool_opts["disk_size_gb"],
                  diskType=pool_opts["disk_type"], imageType=pool_opts["image_type"])
    if pool_opts.get("service_account"):
        config["serviceAccount"] = pool_opts["service_account"]
    if pool_opts.get("oauth_scopes"):
        config["oauthScopes"] = list(pool_opts["oauth_scopes"])
    pool = dict(name=pool_opts["name"], initialNodeCount=pool_opts["node_count"], config=config,
                management=dict(autoUpgrade=default_pool_auto_upgrade(params), autoRepair=True))

    cluster = dict(name=params["name"])
    if params.get("network"):
        cluster["network"] = params["network"]
    if params.get("subnetwork"):
        cluster["subnetwork"] = params["subnetwork"]
    network_config = dict(datapathProvider=DATAPATHS[params["datapath"]])
    if params.get("multi_networking"):
        network_config["enableMultiNetworking"] = True
    cluster["networkConfig"] = network_config
    ip = params.get("ip_allocation") or {}
    ip_policy = dict(useIpAliases=True)
    for option, field in (("cluster_secondary_range_name", "clusterSecondaryRangeName"),
                          ("services_secondary_range_name", "servicesSecondaryRangeName"),
                          ("cluster_ipv4_cidr", "clusterIpv4CidrBlock"),
                          ("services_ipv4_cidr", "servicesIpv4CidrBlock")):
        if ip.get(option):
            ip_policy[field] = ip[option]
    cluster["ipAllocationPolicy"] = ip_policy
    if params.get("cluster_version"):
        cluster["initialClusterVersion"] = params["cluster_version"]
    cluster["releaseChannel"] = dict(channel=(params.get("release_channel") or "unspecified").upper())
    if params.get("node_locations"):
        cluster["locations"] = list(params["node_locations"])
    cluster["autopilot"] = dict(enabled=False)
    cluster["nodePools"] = [pool]
    exclusion = params.get("maintenance_exclusion")
    if exclusion:
        cluster["maintenancePolicy"] = dict(window=dict(maintenanceExclusions={exclusion["name"]: exclusion_window(exclusion)}))
    if params.get("private_nodes") is not None:
        private = dict(enablePrivateNodes=params["private_nodes"])
        if params.get("master_ipv4_cidr"):
            private["masterIpv4CidrBlock"] = params["master_ipv4_cidr"]
        cluster["privateClusterConfig"] = private
    if params.get("master_authorized_networks") is not None:
        cluster["masterAuthorizedNetworksConfig"] = _authorized_networks(params["master_authorized_networks"])
    return cluster


def _authorized_networks(entries):
    blocks = []
    for entry in entries:
        block = dict(cidrBlock=entry["cidr_block"])
        if entry.get("display_name"):
            block["displayName"] = entry["display_name"]
        blocks.append(block)
    return dict(enabled=True, cidrBlocks=blocks)


# --------------------------------------------------------------------------- comparison views

def desired_view(params):
    """The options this module compares, shaped like the options (None: not set, not compared)."""
    ip = params.get("ip_allocation") or {}
    view = dict(
        as_given(params, "network", "subnetwork", "datapath", "release_channel", "private_nodes"),
        multi_networking=True if params.get("multi_networking") else None,
        ip_allocation=as_given(ip, "cluster_secondary_range_name", "services_secondary_range_name",
                               "cluster_ipv4_cidr", "services_ipv4_cidr"),
        node_locations=sorted(params["node_locations"]) if params.get("node_locations") else None,
        master_ipv4_cidr=params.get("master_ipv4_cidr") if params.get("private_nodes") else None,
        master_authorized_networks=(sorted(e["cidr_block"] for e in params["master_authorized_networks"])
                                    if params.get("master_authorized_networks") is not None else None),
    )
    exclusion = params.get("maintenance_exclusion")
    if exclusion:
        window = exclusion_window(exclusion)
        view["maintenance_exclusion"] = dict(
            name=exclusion["name"],
            start_time=window["startTime"],
            end_time=window.get("endTime"),
            scope=exclusion["scope"],
            until_end_of_support=True if not exclusion.get("end_time") else None,
        )
    return view


def current_view(cluster, params):
    """The same options read from a Cluster document."""
    network_config = cluster.get("networkConfig") or {}
    ip = cluster.get("ipAllocationPolicy") or {}
    datapath = network_config.get("datapathProvider")
    private = cluster.get("privateClusterConfig") or {}
    authorized = cluster.get("masterAuthorizedNetworksConfig") or {}
    view = dict(
        network=common.last_segment(cluster.get("network") or network_config.get("network")),
        subnetwork=common.last_segment(cluster.get("subnetwork") or network_config.get("subnetwork")),
        multi_networking=bool(network_config.get("enableMultiNetworking")),
        datapath="advanced" if datapath == "ADVANCED_DATAPATH" else "legacy",
        ip_allocation=dict(
            cluster_secondary_range_name=ip.get("clusterSecondaryRangeName"),
            services_secondary_range_name=ip.get("servicesSecondaryRangeName"),
            cluster_ipv4_cidr=ip.get("clusterIpv4CidrBlock") or ip.get("clusterIpv4Cidr"),
            services_ipv4_cidr=ip.get("servicesIpv4CidrBlock") or ip.get("servicesIpv4Cidr"),
        ),
        release_channel=((cluster.get("releaseChannel") or {}).get("channel") or "UNSPECIFIED").lower(),
        node_locations=sorted(cluster.get("locations") or []),
        private_nodes=bool(private.get("enablePrivateNodes")),
        master_ipv4_cidr=private.get("masterIpv4CidrBlock"),
        master_authorized_networks=(sorted(b.get("cidrBlock") for b in authorized.get("cidrBlocks") or [])
                                    if authorized.get("enabled") else None),
    )
    exclusion = params.get("maintenance_exclusion")
    if exclusion:
        windows = (((cluster.get("maintenancePolicy") or {}).get("window") or {}).get("maintenanceExclusions")) or {}
        window = windows.get(exclusion["name"])
        if window is None:
            view["maintenance_exclusion"] = None
        else:
            options = window.get("maintenanceExclusionOptions") or {}
            start = common.to_datetime(window.get("startTime"))
            end = common.to_datetime(window.get("endTime"))
            view["maintenance_exclusion"] = dict(
                name=exclusion["name"],
                start_time=common.rfc3339(start) if start else window.get("startTime"),
                end_time=common.rfc3339(end) if end else window.get("endTime"),
                scope=dict((v, k) for k, v in EXCLUSION_SCOPES.items()).get(options.get("scope"), options.get("scope")),
                until_end_of_support=options.get("endTimeBehavior") == "UNTIL_END_OF_SUPPORT" or None,
            )
    return view


def _top_field(path):
    return path.split(".", 1)[0]


def _immutable(fields):
    return [f for f in fields if _top_field(f) not in UPDATE_METHODS]


# --------------------------------------------------------------------------- engine

class ClusterEngine:
    """Plans and applies one cluster; the session is a _gcp.GcpSession."""

    def __init__(self, context, session):
        self.context = context
        self.params = context.params
        self.session = session
        self.project = self.params["project"]
        self.location = self.params["location"]
        self.name = self.params["name"]
        self.path = common.cluster_path(self.project, self.location, self.name)
        self.url = session.container_url(self.path)
        self.plan = Plan()
        self.warnings = []

    # ---- reads and waits

    def read(self):
        return self.session.get(self.url)

    def wait_settled(self, cluster):
        """Wait while the cluster is being created, reconciled or deleted (a run killed half-way)."""
        if self.context.check_mode:
            return cluster
        return self.session.settle(
            self.read, lambda current: current is None or current.get("status") not in common.BUSY_CLUSTER_STATUSES,
            lambda current: "cluster %s is still %s" % (self.name, current.get("status")), first=cluster)

    def wait(self, operation, final=True):
        if self.params.get("wait") or not final:
            return self.session.wait_container_operation(operation)
        return operation

    # ---- planning

    def plan_present(self, current):
        desired = create_body(self.params)
        if current is None:
            self.plan.create(KIND, self.name, desired, request=("create", desired))
            return
        if (current.get("autopilot") or {}).get("enabled"):
            raise ClusterInputError("autopilot: cluster %s exists and is an Autopilot cluster; this module manages "
                                    "Standard clusters only (GPUDirect node pools need one)" % self.name)
        if current.get("status") == "ERROR":
            if not self.params.get("recreate"):
                raise ClusterInputError("cluster %s is in status ERROR (%s); set recreate: true to delete and "
                                        "create it again" % (self.name, current.get("statusMessage") or "no message"))
            self.plan.recreate(KIND, self.name, current, desired, ["status"], request=("recreate", desired))
            return
        want = desired_view(self.params)
        have = current_view(current, self.params)
        fields = differing_fields(want, have)
        immutable = _immutable(fields)
        if "multi_networking" in immutable and not self.params.get("recreate"):
            raise ClusterInputError(
                "multi_networking: cluster %s exists without multi-networking; it can only be turned on when a "
                "cluster is created, and the GPU NIC networks need it. Use a new cluster name, or set recreate: true "
                "(deletes the cluster and everything on it)" % self.name)
        if immutable:
            if not self.params.get("recreate"):
                raise ClusterInputError(
                    "%s: cannot change on the existing cluster %s (immutable fields: %s); set recreate: true to "
                    "delete and recreate it (this deletes its node pools and workloads)"
                    % (", ".join(immutable), self.name, ", ".join(immutable)))
            self.plan.recreate(KIND, self.name, have, want, fields, request=("recreate", desired))
            return
        version_update = self._version_update(current)
        if version_update:
            fields.append("cluster_version")
            have["cluster_version"] = current.get("currentMasterVersion")
            want["cluster_version"] = self.params["cluster_version"]
        self._gate_current(current)
        self._warn_default_pool(current)
        if fields:
            self.plan.update(KIND, self.name, have, want, fields, request=("update", fields))

    def _version_update(self, current):
        wanted = self.params.get("cluster_version")
        have = current.get("currentMasterVersion")
        if not wanted or not have:
            return False
        wanted_key, have_key = common.version_key(wanted), common.version_key(have)
        if wanted_key is None or have_key is None or wanted_key == have_key:
            return False
        if wanted_key < have_key:
            self.warnings.append("cluster %s runs %s, newer than cluster_version %s; GKE does not downgrade, the "
                                 "cluster is left as it is" % (self.name, have, wanted))
            return False
        return True

    def _gate_current(self, current):
        profile = self.params.get("gpudirect")
        version = current.get("currentMasterVersion")
        if not profile or common.version_key(version) is None:
            return
        if common.version_key(self.params.get("cluster_version")) and \
                common.version_key(self.params["cluster_version"]) > common.version_key(version):
            return  # the planned upgrade takes it to a version that passed validation
        gate = version_gate_error(profile, version)
        if gate:
            raise ClusterInputError("cluster_version: the existing cluster %s runs %s: %s" % (self.name, version, gate))

    def _warn_default_pool(self, current):
        pool_opts = self.params.get("default_node_pool") or {}
        if not pool_opts:
            return
        name = pool_opts.get("name") or DEFAULT_POOL["name"]
        pool = next((p for p in current.get("nodePools") or [] if p.get("name") == name), None)
        if pool is None:
            return
        config = pool.get("config") or {}
        for option, have in (("machine_type", config.get("machineType")), ("disk_size_gb", config.get("diskSizeGb")),
                             ("disk_type", config.get("diskType")), ("image_type", config.get("imageType"))):
            want = pool_opts.get(option)
            if want is not None and have is not None and "%s" % want != "%s" % have:
                self.warnings.append("default_node_pool.%s: %s is only used when the cluster is created; node pool "
                                     "%s has %s (manage it with gpu_ops.cluster.gpu_nodepool)" % (option, want, name, have))

    def preflight(self):
        """Before the first write of a create, recreate or upgrade: the location's GKE server config offers the
        version and the default pool's image type; the node locations exist. One read each, in check mode too."""
        if self.session.render or not self.plan.changes:
            return
        change = self.plan.changes[0]
        creates = change.action in ("create", "recreate")
        upgrades = change.action == "update" and "cluster_version" in change.fields
        moves = change.action == "update" and "node_locations" in change.fields
        if not (creates or upgrades or moves):
            return
        problems = Problems()
        if creates or upgrades:
            config = offers.server_config(self.session, problems, "location", self.location)
            if config is not None:
                offers.check_versions(problems, config, master=[("cluster_version", self.params.get("cluster_version"))])
                if creates:
                    pool = self.params.get("default_node_pool") or {}
                    offers.check_image_type(problems, config, "default_node_pool.image_type",
                                            pool.get("image_type") or DEFAULT_POOL["image_type"])
        if not problems:
            for zone in (self.params.get("node_locations") or []) if (creates or moves) else []:
                offers.check_zone(self.session, problems, "node_locations", zone)
        self.warnings.extend(problems.warnings)
        if problems:
            raise ClusterInputError(problems.message("gke_cluster"))

    def plan_absent(self, current):
        if current is not None:
            self.plan.delete(KIND, self.name, current, request=("delete", None))

    # ---- applying

    def apply(self, current):
        for change in self.plan.changes:
            action, payload = change.request
            if action == "create":
                self._create(payload)
            elif action == "delete":
                self._delete(final=True)
            elif action == "recreate":
                self._delete(final=False)
                self._create(payload)
            elif action == "update":
                self._update(current, payload)

    def _create(self, body):
        parent = "projects/%s/locations/%s" % (self.project, self.location)
        try:
            operation = self.session.post(self.session.container_url(parent + "/clusters"),
                                          dict(cluster=body, parent=parent))
        except ApiError as exc:
            if exc.status != 409:
                raise
            # created by an earlier, interrupted run: carry on with what is there
            self.wait_settled(self.read())
            return
        self.wait(operation)

    def _delete(self, final):
        operation = self.session.delete_if_present(self.url)
        if operation is None:
            return
        self.wait(operation, final=final)
        if not final and not self.session.render:
            # the create that follows needs the name free
            self.wait_gone()

    def wait_gone(self):
        self.session.settle(self.read, lambda current: current is None,
                            "cluster %s still exists after its deletion" % self.name)

    def _update(self, current, fields):
        wanted = set(_top_field(field) for field in fields)
        # the control plane first, so that the other updates run on the upgraded cluster
        tops = [top for top in UPDATE_ORDER if top in wanted]
        requests = []
        for top in tops:
            if top == "cluster_version":
                requests.append(("PUT", self.url, dict(update=dict(desiredMasterVersion=self.params["cluster_version"]))))
            elif top == "release_channel":
                requests.append(("PUT", self.url, dict(update=dict(desiredReleaseChannel=dict(
                    channel=self.params["release_channel"].upper())))))
            elif top == "node_locations":
                requests.append(("PUT", self.url, dict(update=dict(desiredLocations=list(self.params["node_locations"])))))
            elif top == "master_authorized_networks":
                requests.append(("PUT", self.url, dict(update=dict(
                    desiredMasterAuthorizedNetworksConfig=_authorized_networks(self.params["master_authorized_networks"])))))
            elif top == "maintenance_exclusion":
                requests.append(("POST", self.url + ":setMaintenancePolicy", dict(
                    maintenancePolicy=self._merged_maintenance_policy(current))))
        for index, (method, url, body) in enumerate(requests):
            if method == "PUT":
                operation = self.session.put(url, body)
            else:
                operation = self.session.post(url, body)
            self.wait(operation, final=index == len(requests) - 1)

    def _merged_maintenance_policy(self, current):
        policy = copy.deepcopy(current.get("maintenancePolicy") or {})
        window = policy.setdefault("window", {})
        exclusions = window.setdefault("maintenanceExclusions", {})
        exclusion = self.params["maintenance_exclusion"]
        exclusions[exclusion["name"]] = exclusion_window(exclusion)
        # resourceVersion stays: the API refuses the write when someone changed the policy meanwhile
        return policy


def _scrub_cluster(cluster):
    """The Cluster document without anything secret (legacy basic-auth password, client key)."""
    if not cluster:
        return {}
    cluster = copy.deepcopy(cluster)
    auth = cluster.get("masterAuth")
    if isinstance(auth, dict):
        for secret in ("password", "clientKey"):
            auth.pop(secret, None)
    return cluster


def input_check(params):
    """What ``validate_only`` returns: every input problem (``problems``, ``option: problem`` lines), and no request.
    The module's run and the action plugin's check in the controller both answer with it."""
    return dict(changed=False, problems=list(validate(params).items))


def run(params, context):
    """Entry point of the gke_cluster module (the contract of ``_core.contract``)."""
    if params.get("validate_only"):
        return input_check(params)
    problems = validate(params)
    if problems:
        raise EngineError(problems.message("gke_cluster"), problems=problems.items)
    session = context.session(GcpSession)
    alias = params.get("cluster_version") if versions.is_alias(params.get("cluster_version")) else None
    if alias and params["state"] == "present":
        params["cluster_version"] = _resolve_alias(params, session, alias)
    engine = ClusterEngine(context, session)
    try:
        current = engine.read()
        if params["state"] == "present":
            current = engine.wait_settled(current)
            engine.plan_present(current)
        else:
            if current is not None and current.get("status") == "STOPPING" and not context.check_mode:
                engine.wait_gone()
                current = None
            engine.plan_absent(current)
        engine.preflight()
        if not context.check_mode:
            engine.apply(current)
        result = engine.plan.result(diff=context.diff)
        cluster = resulting_document(params["state"], context.check_mode, engine.plan.changed, current,
                                     session.render, engine.read, lambda: create_body(params))
    except (ClusterInputError, WaitTimeout) as exc:
        raise EngineError(str(exc), changes=[c.as_dict() for c in engine.plan.changes])
    except ApiError as exc:
        raise EngineError("GKE request failed: %s" % common.operation_error_text(exc),
                          changes=[c.as_dict() for c in engine.plan.changes], status=exc.status)
    for warning in engine.warnings:
        context.warn(warning)
    cluster = _scrub_cluster(cluster)
    result.update(
        cluster=cluster,
        endpoint=cluster.get("endpoint"),
        version=cluster.get("currentMasterVersion") or cluster.get("initialClusterVersion"),
        multi_networking=bool((cluster.get("networkConfig") or {}).get("enableMultiNetworking")),
    )
    if alias and params["state"] == "present":
        result["resolved_version"] = dict(alias=alias, version=params["cluster_version"])
    return result


def _resolve_alias(params, session, alias):
    """The full version a cluster_version alias names, from the location's server config (one read)."""
    try:
        config = versions.read(session, params["location"])
        return versions.resolve(config, alias, params.get("gpudirect"), params.get("release_channel"))
    except versions.VersionError as exc:
        raise EngineError("cluster_version: %s" % exc)
    except ApiError as exc:
        raise EngineError("cluster_version %s: reading the GKE server config failed: %s" % (
            alias, common.operation_error_text(exc)), status=exc.status)
