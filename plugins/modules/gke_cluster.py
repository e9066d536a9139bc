#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gke_cluster
short_description: Standard GKE clusters ready for GPU multi-networking (GPUDirect-TCPX/TCPXO)
version_added: 0.1.0
description:
  - Creates, updates and deletes one Standard GKE cluster with multi-networking, GKE Dataplane V2 and VPC-native
    (alias IP) networking, the foundation for the additional GPU NIC networks of A3 High and A3 Mega node pools.
  - Multi-networking cannot be turned on for an existing cluster. A cluster that exists without it is an error that
    names O(multi_networking), never a silent success; O(recreate=true) deletes and recreates it.
  - With O(gpudirect) the module checks O(cluster_version) against the minimum GKE patch version of the profile for
    its minor version (the table in the collection's GPUDirect catalog), and does the same for an existing cluster.
  - Autopilot is refused, both as O(autopilot=true) and as an existing Autopilot cluster of the same name.
  - Only what the API can change in place is updated (release channel, control-plane upgrades, node locations,
    master authorized networks, the maintenance exclusion); a change to any other option names the options and
    fails unless O(recreate=true).
  - O(default_node_pool) describes the small system pool created with the cluster; it is not changed afterwards
    (the module warns when it differs). GPU node pools are managed by M(gpu_ops.cluster.gpu_nodepool).
  - Before it creates, recreates or upgrades the cluster (in check mode too) the module reads the server config of
    O(location) once and refuses a O(location) that does not exist, a O(cluster_version) GKE does not offer there
    and a O(default_node_pool.image_type) it does not list, and reads each zone of O(node_locations) once. A run with
    nothing to change reads only the cluster.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.CHANGES
  - gpu_ops.cluster.gcp
  - gpu_ops.cluster.input_check
options:
  name:
    description:
      - Name of the cluster (1 to 40 lowercase letters, digits and hyphens).
    type: str
    required: true
  location:
    description:
      - Zone (zonal cluster, for example C(us-central1-c)) or region (regional cluster, for example C(us-central1)).
    type: str
    required: true
  state:
    description:
      - Whether the cluster should exist. V(absent) deletes it with all its node pools.
    type: str
    choices: [present, absent]
    default: present
  network:
    description:
      - Name of the primary VPC network of the nodes. The API uses C(default) when unset.
    type: str
  subnetwork:
    description:
      - Name of the subnetwork of the nodes in that network.
    type: str
  cluster_version:
    description:
      - The pinned GKE version, written in full (C(MAJOR.MINOR.PATCH-gke.BUILD), for example C(1.32.2-gke.1489001)).
      - Or an alias, V(latest) or a minor such as V(1.30), resolved on every run through the server config of
        O(location) (of O(release_channel)'s versions when one is set) to the newest offered patch that meets the
        O(gpudirect) minimum. The module fails listing the offered versions when none fits, and returns the
        resolution as RV(resolved_version). A newer offered patch upgrades the control plane on a later run; pin the
        full version to hold it. Render mode reads nothing, so it needs the full version.
      - Used as the initial version; an existing cluster on an older version is upgraded to it, one on a newer version
        is left alone with a warning (GKE does not downgrade).
      - Without a release channel the system pool is created with node auto-upgrade off. On a release
        channel GKE requires node auto-upgrade, so the pin needs O(maintenance_exclusion).
      - Required with O(gpudirect).
    type: str
  release_channel:
    description:
      - Release channel. V(unspecified) means no channel (a static version).
      - Unset creates the cluster without a channel and leaves the channel of an existing cluster alone.
    type: str
    choices: [unspecified, rapid, regular, stable, extended]
  maintenance_exclusion:
    description:
      - One maintenance exclusion, kept next to any other exclusions the cluster has.
      - The way to keep O(cluster_version) pinned on a release channel (scope V(no_minor_or_node_upgrades)).
    type: dict
    suboptions:
      name:
        description: Name of the exclusion.
        type: str
        default: gpu-ops-pin
      start_time:
        description: Start, as an RFC 3339 time with a zone (for example C(2026-01-01T00:00:00Z)).
        type: str
        required: true
      end_time:
        description:
          - End, as an RFC 3339 time. Unset means until the end of support of the minor version
            (not allowed with scope V(no_upgrades), which lasts at most 30 days).
        type: str
      scope:
        description:
          - What the exclusion blocks. Clusters without a release channel accept only V(no_upgrades).
        type: str
        choices: [no_upgrades, no_minor_upgrades, no_minor_or_node_upgrades]
        default: no_minor_or_node_upgrades
  multi_networking:
    description:
      - Turn on multi-networking (C(networkConfig.enableMultiNetworking)), needed for additional node networks.
      - Can only be set when the cluster is created.
    type: bool
    default: true
  datapath:
    description:
      - V(advanced) is GKE Dataplane V2 (C(ADVANCED_DATAPATH)), required by multi-networking.
    type: str
    choices: [advanced, legacy]
    default: advanced
  ip_allocation:
    description:
      - VPC-native (alias IP) ranges for Pods and Services; alias IPs are always on.
      - For each of Pods and Services set either the name of a secondary range of O(subnetwork) or a CIDR block
        for GKE to create; unset lets GKE choose.
    type: dict
    suboptions:
      cluster_secondary_range_name:
        description: Secondary range of the subnetwork for Pod IPs.
        type: str
      services_secondary_range_name:
        description: Secondary range of the subnetwork for Service IPs.
        type: str
      cluster_ipv4_cidr:
        description: CIDR block for Pod IPs (from /9 to /21).
        type: str
      services_ipv4_cidr:
        description: CIDR block for Service IPs (from /16 to /27).
        type: str
  gpudirect:
    description:
      - The GPUDirect profile the cluster is for. Requires O(multi_networking=true) and a pinned O(cluster_version)
        at or above the profile's minimum patch version for that minor.
      - V(rdma) (A3 Ultra, A4) and V(rdma-a4x) (A4X) need the same cluster settings as V(tcpx) and V(tcpxo) -
        multi-networking and Dataplane V2. Their minimum GKE versions are not verified, so no version is refused for them
        (the collection's GPUDirect catalog says why).
    type: str
    choices: [tcpx, tcpxo, rdma, rdma-a4x]
  autopilot:
    description:
      - Refused when true. Present so that a request for Autopilot fails clearly instead of being ignored.
    type: bool
    default: false
  node_locations:
    description:
      - Zones of the cluster's nodes (for a regional cluster, for example the zone of an A3 reservation).
    type: list
    elements: str
  default_node_pool:
    description:
      - The system node pool created with the cluster (used at creation only).
    type: dict
    suboptions:
      name:
        description: Pool name.
        type: str
        default: default-pool
      machine_type:
        description: Machine type.
        type: str
        default: e2-standard-8
      node_count:
        description: Nodes per zone.
        type: int
        default: 1
      disk_size_gb:
        description: Boot disk size.
        type: int
        default: 100
      disk_type:
        description: Boot disk type.
        type: str
        default: pd-balanced
      image_type:
        description: Node image.
        type: str
        default: COS_CONTAINERD
      service_account:
        description: Service account of the nodes (least privilege; the Compute Engine default account when unset).
        type: str
      oauth_scopes:
        description: OAuth scopes of the nodes.
        type: list
        elements: str
      auto_upgrade:
        description:
          - Node auto-upgrade. Defaults to off when O(cluster_version) is pinned without a release channel, on otherwise.
        type: bool
  private_nodes:
    description:
      - Nodes get internal IP addresses only (set at creation).
    type: bool
  master_ipv4_cidr:
    description:
      - A /28 for the control plane of a private cluster (with O(private_nodes=true)).
    type: str
  master_authorized_networks:
    description:
      - CIDR blocks allowed to reach the control plane's public endpoint. Set (even empty) turns the restriction on.
      - At most 50 blocks, or 100 with O(private_nodes=true) (GKE's documented limits).
    type: list
    elements: dict
    suboptions:
      cidr_block:
        description: A CIDR block.
        type: str
        required: true
      display_name:
        description: A label for it.
        type: str
  recreate:
    description:
      - Allow deleting and recreating the cluster when an immutable option differs or the cluster is in status
        C(ERROR). This deletes every node pool and workload of the cluster.
    type: bool
    default: false
  wait:
    description:
      - Wait for the long-running operation to finish. Operations that a later step depends on (the deletion before a
        recreate, all but the last of several updates) are always waited for.
    type: bool
    default: true
notes:
  - GKE runs one operation at a time per cluster. A cluster that is still being created, reconciled or deleted (for
    example after a run was interrupted) is waited for before it is compared.
seealso:
  - module: gpu_ops.cluster.gpu_nodepool
  - module: gpu_ops.cluster.gke_multinetwork
"""

EXAMPLES = r"""
- name: Cluster for an A3 Mega (GPUDirect-TCPXO) node pool
  gpu_ops.cluster.gke_cluster:
    project: my-project
    location: us-central1
    name: a3mega
    network: a3mega-net
    subnetwork: a3mega-sub
    node_locations: [us-central1-c]
    cluster_version: 1.32.2-gke.1489001
    gpudirect: tcpxo
    ip_allocation:
      cluster_secondary_range_name: pods
      services_secondary_range_name: services

- name: Same, on the Regular channel, pinned with a maintenance exclusion
  gpu_ops.cluster.gke_cluster:
    project: my-project
    location: us-central1
    name: a3mega
    cluster_version: 1.32.2-gke.1489001
    gpudirect: tcpxo
    release_channel: regular
    maintenance_exclusion:
      start_time: "2026-01-01T00:00:00Z"
      scope: no_minor_or_node_upgrades

- name: Write the create request to a folder instead of sending it
  gpu_ops.cluster.gke_cluster:
    project: demo-project
    location: us-central1-c
    name: demo
    cluster_version: 1.32.2-gke.1489001
    gpudirect: tcpxo
    render_dir: /tmp/render
"""

RETURN = r"""
problems:
  description:
    - With O(validate_only), every problem of the options, one line each (the option, a colon, the problem); empty when the options
      are valid. Nothing was sent.
  returned: with O(validate_only)
  type: list
  elements: str
  sample: ["node_locations: zone us-east5-a is not in the region of location us-central1"]
resolved_version:
  description: The alias given in O(cluster_version) and the full version it resolved to.
  returned: when O(cluster_version) is an alias
  type: dict
  sample: {"alias": "1.30", "version": "1.30.4-gke.1129000"}
changes:
  description:
    - What was done to the cluster, in order (in check mode, what would be done).
    - Each entry has C(action) (V(create), V(update), V(recreate) or V(delete)), C(kind) V(cluster), C(name), and for an
      update or a recreate the C(fields) that change.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create", "kind": "cluster", "name": "a3mega"}]
cluster:
  description:
    - The cluster as the GKE API returns it (C(Cluster)); empty when absent.
    - After a create in render mode, the requested cluster.
  returned: always
  type: dict
endpoint:
  description: IP address of the control plane.
  returned: when the cluster exists
  type: str
version:
  description: The control-plane version (or the requested one when the cluster is not read back).
  returned: when the cluster exists
  type: str
multi_networking:
  description: Whether the cluster has multi-networking.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import GCP_COMMON_SPEC, INPUT_CHECK_SPEC, with_common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import cluster as engine


def argument_spec():
    return with_common(dict(GCP_COMMON_SPEC, **INPUT_CHECK_SPEC), dict(
        name=dict(type="str", required=True),
        location=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        network=dict(type="str"),
        subnetwork=dict(type="str"),
        cluster_version=dict(type="str"),
        release_channel=dict(type="str", choices=["unspecified", "rapid", "regular", "stable", "extended"]),
        maintenance_exclusion=dict(type="dict", options=dict(
            name=dict(type="str", default="gpu-ops-pin"),
            start_time=dict(type="str", required=True),
            end_time=dict(type="str"),
            scope=dict(type="str", default="no_minor_or_node_upgrades",
                       choices=["no_upgrades", "no_minor_upgrades", "no_minor_or_node_upgrades"]),
        )),
        multi_networking=dict(type="bool", default=True),
        datapath=dict(type="str", default="advanced", choices=["advanced", "legacy"]),
        ip_allocation=dict(type="dict", options=dict(
            cluster_secondary_range_name=dict(type="str"),
            services_secondary_range_name=dict(type="str"),
            cluster_ipv4_cidr=dict(type="str"),
            services_ipv4_cidr=dict(type="str"),
        )),
        gpudirect=dict(type="str", choices=["tcpx", "tcpxo", "rdma", "rdma-a4x"]),
        autopilot=dict(type="bool", default=False),
        node_locations=dict(type="list", elements="str"),
        default_node_pool=dict(type="dict", options=dict(
            name=dict(type="str", default="default-pool"),
            machine_type=dict(type="str", default="e2-standard-8"),
            node_count=dict(type="int", default=1),
            disk_size_gb=dict(type="int", default=100),
            disk_type=dict(type="str", default="pd-balanced"),
            image_type=dict(type="str", default="COS_CONTAINERD"),
            service_account=dict(type="str"),
            oauth_scopes=dict(type="list", elements="str"),
            auto_upgrade=dict(type="bool"),
        )),
        private_nodes=dict(type="bool"),
        master_ipv4_cidr=dict(type="str"),
        master_authorized_networks=dict(type="list", elements="dict", options=dict(
            cidr_block=dict(type="str", required=True),
            display_name=dict(type="str"),
        )),
        recreate=dict(type="bool", default=False),
        wait=dict(type="bool", default=True),
    ))


def module_kwargs():
    """The AnsibleModule arguments; the action plugin checks O(validate_only) runs against them in the controller."""
    return dict(argument_spec=argument_spec(), supports_check_mode=True)


def engine_for(params):
    """The engine of a run with these (validated) options."""
    return engine


def main():
    module = AnsibleModule(**module_kwargs())
    run_module(module, engine_for(module.params).run)


if __name__ == "__main__":
    main()
