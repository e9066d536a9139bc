#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_nodepool
short_description: GPU node pools on GKE (A3 GPUDirect, GPU sharing) and AKS (multi-instance GPU)
version_added: 0.1.0
description:
  - Creates, updates and deletes one GPU node pool.
  - With O(provider=gke) it manages a GKE node pool through the container API, including the A3 GPUDirect
    settings (additional node networks, gVNIC, compact placement, reservations, host maintenance interval) and GPU sharing.
  - With O(provider=aks) it manages an AKS agent pool through Azure Resource Manager, including the multi-instance GPU
    profile (O(gpu_instance_profile)).
  - Options marked GKE or AKS belong to that provider only; setting one for the other provider is an error, except the
    account options of the other cloud (those of the other action group's shared options, for example O(project) or
    O(auth_kind) with O(provider=aks), O(subscription_id) or O(tenant_id) with O(provider=gke)). Those are ignored, so
    that C(module_defaults) for both C(group/gpu_ops.cluster.gcp) and C(group/gpu_ops.cluster.azure) can be set in
    one play.
  - A change to a field the cloud cannot update in place (for example the machine type, the accelerator, the GPU
    instance profile) names the fields and fails, unless O(recreate=true), which deletes and recreates the pool.
  - GKE. Before a create or an update (in check mode too) the module reads, once each, what the change needs the
    service to offer, and refuses what it does not offer, naming the option. For a create, each zone of
    O(node_locations), the machine type, the accelerator type and its most cards per instance, and the disk type in
    each zone of the pool, plus O(image_type) and O(node_version) in the server config of O(location). For an
    update, only what changes. A run with nothing to change reads only the cluster and the pool.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.CHANGES
  - gpu_ops.cluster.azure.WITH_GCP
  - gpu_ops.cluster.input_check
options:
  name:
    description:
      - Name of the node pool (AKS agent pool names are 1 to 12 lowercase letters and digits).
    type: str
    required: true
  cluster:
    description:
      - Name of the cluster that owns the pool.
    type: str
    required: true
  state:
    description:
      - Whether the pool should exist.
    type: str
    choices: [present, absent]
    default: present
  recreate:
    description:
      - Allow deleting and recreating the pool when an immutable field changes.
    type: bool
    default: false
  node_count:
    description:
      - Number of nodes (per zone on GKE). Ignored while autoscaling is on.
      - GKE. Required to create a pool without autoscaling (no implicit default, A3 nodes are expensive); with autoscaling it is
        the initial size.
    type: int
  enable_autoscaling:
    description:
      - Turn on the cluster autoscaler for the pool. Refused together with a GPU instance profile on AKS.
    type: bool
  min_count:
    description:
      - Autoscaling lower bound.
    type: int
  max_count:
    description:
      - Autoscaling upper bound.
    type: int
  node_labels:
    description:
      - Kubernetes labels for the nodes.
    type: dict
  node_taints:
    description:
      - Kubernetes taints for the nodes, each written C(key=value:Effect) with Effect one of NoSchedule,
        PreferNoSchedule, NoExecute.
    type: list
    elements: str
  wait:
    description:
      - Wait for the long-running operation to finish.
    type: bool
    default: true
  location:
    description:
      - GKE. Zone or region of the cluster.
    type: str
  node_locations:
    description:
      - GKE. Zones for the pool's nodes (for A3 pools, usually the one zone of the reservation).
    type: list
    elements: str
  machine_type:
    description:
      - GKE. Compute Engine machine type, for example C(a3-megagpu-8g).
    type: str
  accelerator_type:
    description:
      - GKE. Accelerator type, for example C(nvidia-h100-mega-80gb). Defaults to the GPUs of an A3/A4 O(machine_type) (from the
        collection's GPUDirect catalog), or of the profile's machine with O(gpudirect).
    type: str
  accelerator_count:
    description:
      - GKE. GPUs per node. Defaults like O(accelerator_type). RV(expected_resources) multiplies it by the sharing clients or
        the MIG partitions per GPU.
    type: int
  gpu_driver_version:
    description:
      - GKE. Driver installation by GKE. V(disabled) leaves the driver to you (for example the GPU Operator).
    type: str
    choices: [default, latest, disabled]
  gpu_partition_size:
    description:
      - GKE. MIG partition size for GKE-managed MIG, for example C(1g.10gb).
    type: str
  gpu_sharing:
    description:
      - GKE. GPU sharing (time-sharing or MPS). Refused together with O(gpudirect).
    type: dict
    suboptions:
      strategy:
        description: Sharing strategy.
        type: str
        choices: [time-sharing, mps]
        required: true
      max_shared_clients_per_gpu:
        description: Containers that may share one GPU.
        type: int
        required: true
  gpudirect:
    description:
      - GKE. The GPUDirect profile the pool is for. Checks the machine type against it (C(a3-highgpu-8g) with
        V(tcpx), C(a3-megagpu-8g) with V(tcpxo), C(a3-ultragpu-8g) or C(a4-highgpu-8g) with V(rdma), C(a4x-highgpu-4g) with
        V(rdma-a4x)), fills in the accelerator, and refuses GPU sharing and MIG partitions.
      - V(rdma) also sets C(gpuDirectConfig.gpuDirectStrategy=RDMA) on the nodes (container v1; documented for A3 Ultra and
        A4). V(rdma-a4x) does not send it, the API documents the strategy for A3 Ultra and A4 only.
      - A4X (C(a4x-highgpu-4g)) takes Hyperdisk only - O(disk_type) defaults to C(hyperdisk-balanced) there and any other
        type is refused before a request.
    type: str
    choices: [tcpx, tcpxo, rdma, rdma-a4x]
  accelerator_network_profile:
    description:
      - GKE. The managed alternative to O(additional_node_networks) for GPUDirect-RDMA (C(networkConfig.acceleratorNetworkProfile),
        container v1, only value V(auto)) - GKE creates the accelerator networks itself and pods claim the RDMA NICs through
        DRANET. Adds the node label C(cloud.google.com/gke-networking-dra-driver=true).
      - Needs GKE 1.34.1-gke.1829001 or later (the node version, or the cluster's when O(node_version) is unset); older
        versions are refused before any change. Refused together with O(additional_node_networks). Immutable.
    type: str
    choices: [auto]
  additional_node_networks:
    description:
      - GKE. The GPU NIC networks, as returned by M(gpu_ops.cluster.gke_multinetwork) (RV(gpu_ops.cluster.gke_multinetwork#module:additional_node_networks)).
      - One per GPU NIC, in NIC order (4 for V(tcpx), 8 for V(tcpxo)); the cluster must have multi-networking, and the networks
        and subnetworks must exist in the cluster's region (checked before the pool is created).
      - For V(rdma) and V(rdma-a4x), the gVNIC network first, then one entry per RDMA NIC (9 and 5 in all), all RDMA entries in
        the one RoCE network, each with its own subnet. Before a create the RoCE network must carry a RoCE network profile of
        the pool's zone.
      - More networks than GPU NICs on C(a3-megagpu-8g) is refused - an extra gVNIC network takes a GPU NIC's PCI slot and the
        TCPXO daemon then sees only 7 of the 8 GPUs.
    type: list
    elements: dict
    suboptions:
      network:
        description: VPC network name.
        type: str
        required: true
      subnetwork:
        description: Subnetwork name.
        type: str
        required: true
  gvnic:
    description:
      - GKE. Use the gVNIC network interface (requires a COS image).
    type: bool
  image_type:
    description:
      - GKE. Node image.
    type: str
    default: COS_CONTAINERD
  placement_policy:
    description:
      - GKE. Compact placement of the nodes.
    type: dict
    suboptions:
      type:
        description: Placement type.
        type: str
        choices: [COMPACT]
        default: COMPACT
      policy_name:
        description: A named resource policy (in the same project and region) instead of an automatic one.
        type: str
      accelerator_topology:
        description:
          - The accelerator topology of a workload policy (Compute Engine resource policy C(workloadPolicy),
            C(type=HIGH_THROUGHPUT), C(acceleratorTopology)) named O(placement_policy.policy_name), created in the
            pool's region before the pool when it does not exist - V(1x72) for A4X (GB200 NVL72), as Cluster Toolkit's
            gke-a4x blueprint does. An existing policy of that name with another topology is refused.
          - Needs O(placement_policy.policy_name).
        type: str
  reservation_affinity:
    description:
      - GKE. Which Compute Engine reservations the nodes consume.
    type: dict
    suboptions:
      consume:
        description: Reservation use.
        type: str
        choices: [none, any, specific]
        required: true
      reservation:
        description:
          - Reservation name (or C(<name>/reservationBlocks/<block>)). Required with O(reservation_affinity.consume=specific).
        type: str
  host_maintenance_interval:
    description:
      - GKE. Host maintenance interval. Sent through the v1beta1 API, the only one that has the field.
    type: str
    choices: [AS_NEEDED, PERIODIC]
  service_account:
    description:
      - GKE. Service account the nodes run as.
    type: str
  oauth_scopes:
    description:
      - GKE. OAuth scopes of the nodes.
    type: list
    elements: str
  disk_size_gb:
    description:
      - GKE. Boot disk size.
    type: int
  disk_type:
    description:
      - GKE. Boot disk type.
    type: str
  spot:
    description:
      - GKE. Use Spot VMs.
    type: bool
  auto_upgrade:
    description:
      - GKE. Node auto-upgrade. Off by default so GPUDirect versions stay pinned.
    type: bool
    default: false
  auto_repair:
    description:
      - GKE. Node auto-repair.
    type: bool
    default: true
  node_version:
    description:
      - GKE. Kubernetes version of the nodes; defaults to the cluster's.
    type: str
  resource_group:
    description:
      - AKS. Resource group of the cluster.
    type: str
  vm_size:
    description:
      - AKS. VM size, for example C(Standard_ND96asr_v4).
    type: str
  gpu_instance_profile:
    description:
      - AKS. Multi-instance GPU profile of every GPU in the pool.
    type: str
    choices: [MIG1g, MIG2g, MIG3g, MIG4g, MIG7g]
  os_sku:
    description:
      - AKS. Node OS. MIG is not supported on V(AzureLinux).
    type: str
    choices: [Ubuntu, Ubuntu2204, Ubuntu2404, AzureLinux]
  mode:
    description:
      - AKS. Agent pool mode. A new pool is created as V(User) when this is not set; an existing pool keeps its mode.
    type: str
    choices: [User, System]
  orchestrator_version:
    description:
      - AKS. Kubernetes version of the pool.
    type: str
  gpu_driver:
    description:
      - AKS. Whether AKS installs the GPU driver (V(None) when the GPU Operator manages it).
    type: str
    choices: [Install, None]
  mig_strategy:
    description:
      - AKS. The device-plugin MIG strategy that RV(expected_resources) is computed for
        (V(single) advertises C(nvidia.com/gpu), V(mixed) advertises C(nvidia.com/mig-<profile>)).
    type: str
    choices: [single, mixed]
    default: single
"""

EXAMPLES = r"""
- name: A3 Mega node pool for GPUDirect-TCPXO
  gpu_ops.cluster.gpu_nodepool:
    provider: gke
    project: my-project
    location: us-central1
    cluster: a3mega
    name: a3mega-pool
    node_locations: [us-central1-c]
    gpudirect: tcpxo
    machine_type: a3-megagpu-8g
    node_count: 2
    gpu_driver_version: latest
    additional_node_networks: "{{ fabric.additional_node_networks }}"
    gvnic: true
    placement_policy:
      type: COMPACT
    reservation_affinity:
      consume: specific
      reservation: my-a3-reservation
    host_maintenance_interval: PERIODIC

- name: AKS MIG node pool, seven 1g.5gb instances per A100
  gpu_ops.cluster.gpu_nodepool:
    provider: aks
    subscription_id: "{{ azure_subscription }}"
    resource_group: gpu-rg
    cluster: gpu-aks
    name: mignode
    vm_size: Standard_ND96asr_v4
    node_count: 1
    gpu_instance_profile: MIG1g
    os_sku: Ubuntu
"""

RETURN = r"""
problems:
  description:
    - With O(validate_only), what the pool's options have wrong for O(provider), one line each (the option, a colon, the problem); empty
      when they are valid. Nothing was sent; what needs the cluster as it exists (its version, its networks) is not
      judged.
  returned: with O(validate_only)
  type: list
  elements: str
  sample: ["machine_type: gpudirect=tcpxo runs on a3-megagpu-8g, not a3-ultragpu-8g"]
changes:
  description:
    - What was done to the pool, in order (in check mode, what would be done).
    - Each entry has C(action) (V(create), V(update), V(recreate) or V(delete)), C(kind) (V(nodePool) on GKE,
      V(agentPool) on AKS), C(name), and for an update or a recreate the C(fields) that change.
  returned: always
  type: list
  elements: dict
  sample: [{"action": "create", "kind": "nodePool", "name": "a3mega-pool"}]
node_pool:
  description: The node pool as the cloud API returns it (GKE C(NodePool) or AKS C(AgentPool)); empty when absent.
  returned: always
  type: dict
expected_resources:
  description: The extended resources each node should advertise, from the GPU catalogs.
  returned: when known
  type: dict
  sample: {"nvidia.com/gpu": 8}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import (
    INPUT_CHECK_SPEC, PROVIDER_REQUIRED_IF, TWO_CLOUD_SPEC, with_common,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool as aks_engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool as gke_engine


def argument_spec():
    return with_common(dict(TWO_CLOUD_SPEC, **INPUT_CHECK_SPEC), dict(
        name=dict(type="str", required=True),
        cluster=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent"]),
        recreate=dict(type="bool", default=False),
        node_count=dict(type="int"),
        enable_autoscaling=dict(type="bool"),
        min_count=dict(type="int"),
        max_count=dict(type="int"),
        node_labels=dict(type="dict"),
        node_taints=dict(type="list", elements="str"),
        wait=dict(type="bool", default=True),
        # GKE
        location=dict(type="str"),
        node_locations=dict(type="list", elements="str"),
        machine_type=dict(type="str"),
        accelerator_type=dict(type="str"),
        accelerator_count=dict(type="int"),
        gpu_driver_version=dict(type="str", choices=["default", "latest", "disabled"]),
        gpu_partition_size=dict(type="str"),
        gpu_sharing=dict(type="dict", options=dict(
            strategy=dict(type="str", required=True, choices=["time-sharing", "mps"]),
            max_shared_clients_per_gpu=dict(type="int", required=True),
        )),
        gpudirect=dict(type="str", choices=["tcpx", "tcpxo", "rdma", "rdma-a4x"]),
        accelerator_network_profile=dict(type="str", choices=["auto"]),
        additional_node_networks=dict(type="list", elements="dict", options=dict(
            network=dict(type="str", required=True),
            subnetwork=dict(type="str", required=True),
        )),
        gvnic=dict(type="bool"),
        image_type=dict(type="str", default="COS_CONTAINERD"),
        placement_policy=dict(type="dict", options=dict(
            type=dict(type="str", default="COMPACT", choices=["COMPACT"]),
            policy_name=dict(type="str"),
            accelerator_topology=dict(type="str"),
        )),
        reservation_affinity=dict(type="dict", options=dict(
            consume=dict(type="str", required=True, choices=["none", "any", "specific"]),
            reservation=dict(type="str"),
        )),
        host_maintenance_interval=dict(type="str", choices=["AS_NEEDED", "PERIODIC"]),
        service_account=dict(type="str"),
        oauth_scopes=dict(type="list", elements="str"),
        disk_size_gb=dict(type="int"),
        disk_type=dict(type="str"),
        spot=dict(type="bool"),
        auto_upgrade=dict(type="bool", default=False),
        auto_repair=dict(type="bool", default=True),
        node_version=dict(type="str"),
        # AKS
        resource_group=dict(type="str"),
        vm_size=dict(type="str"),
        gpu_instance_profile=dict(type="str", choices=["MIG1g", "MIG2g", "MIG3g", "MIG4g", "MIG7g"]),
        os_sku=dict(type="str", choices=["Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux"]),
        mode=dict(type="str", choices=["User", "System"]),
        mig_strategy=dict(type="str", default="single", choices=["single", "mixed"]),
        orchestrator_version=dict(type="str"),
        gpu_driver=dict(type="str", choices=["Install", "None"]),
    ))


def module_kwargs():
    """The AnsibleModule arguments; the action plugin checks O(validate_only) runs against them in the controller."""
    return dict(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_if=PROVIDER_REQUIRED_IF + [("enable_autoscaling", True, ("min_count", "max_count"))],
        mutually_exclusive=[("gpu_sharing", "gpudirect")],
    )


def engine_for(params):
    """The engine of a run with these (validated) options: the cloud O(provider) names."""
    return gke_engine if params["provider"] == "gke" else aks_engine


def main():
    module = AnsibleModule(**module_kwargs())
    run_module(module, engine_for(module.params).run)


if __name__ == "__main__":
    main()
