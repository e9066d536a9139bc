#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gke_multinetwork_info
short_description: What Google Cloud has of a GKE cluster's GPU NIC fabric
version_added: 0.1.0
description:
  - Reads the VPC networks, subnets and firewall rules that M(gpu_ops.cluster.gke_multinetwork) manages for a
    cluster, and the cluster's multi-networking settings. The resources are named from the same options as there
    (O(cluster), O(gpudirect), O(nic_count), O(networks), O(name_prefix), O(k8s_network_prefix)), so the same
    variables find what that module created, custom names included.
  - Returns each resource as the Compute Engine API has it (null where it does not exist) and the names later
    steps use (node pool networks, Kubernetes C(Network) objects, pod annotations).
  - Reads only; nothing changes.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
  - gpu_ops.cluster.gcp
  - gpu_ops.cluster.gke_multinetwork
options:
  location:
    description: Region or zone of the cluster (the fabric's subnets are in its region).
    type: str
    required: true
  gpudirect:
    description: GPUDirect profile; sets the number of GPU NICs and the interface names.
    type: str
    choices: [tcpx, tcpxo, rdma, rdma-a4x]
seealso:
  - module: gpu_ops.cluster.gke_multinetwork
"""

EXAMPLES = r"""
- name: Is the fabric of a3mega complete?
  gpu_ops.cluster.gke_multinetwork_info:
    project: my-project
    cluster: a3mega
    location: us-central1
    gpudirect: tcpxo
  register: fabric
  failed_when: not fabric.exists or not fabric.cluster.multi_networking
"""

RETURN = r"""
exists:
  description: Whether every network, subnet and firewall rule of the fabric exists.
  returned: always
  type: bool
missing:
  description: The resources that do not exist, as C(<kind> <name>).
  returned: always
  type: list
  elements: str
nics:
  description: Per GPU NIC its C(index), C(interface), C(k8s_network) and the C(network), C(subnetwork) and C(firewall)
    documents as the Compute Engine API returns them (null when missing).
  returned: always
  type: list
  elements: dict
cluster:
  description: The cluster's C(exists), C(status), C(multi_networking), C(datapath_provider), C(autopilot) and
    C(current_master_version) as GKE has them.
  returned: always
  type: dict
  sample: {"exists": true, "status": "RUNNING", "multi_networking": true, "datapath_provider": "ADVANCED_DATAPATH",
           "autopilot": false, "current_master_version": "1.32.2-gke.1489001"}
gpudirect:
  description: The O(gpudirect) profile, or null.
  returned: always
  type: str
region:
  description: The region of the fabric's subnets.
  returned: always
  type: str
zone:
  description: The zone of the RoCE VPC (RDMA profiles), else null.
  returned: always
  type: str
network_profile:
  description: The network profile of the RoCE VPC (RDMA profiles), else null.
  returned: always
  type: str
device_mode:
  description: The device mode of the GKENetworkParamSet objects (C(NetDevice) for TCPX/TCPXO, C(RDMA) for the RDMA NICs; each NIC's own in RV(nics)).
  returned: always
  type: str
additional_node_networks:
  description: The node pool's additional node networks (network, subnetwork).
  returned: always
  type: list
  elements: dict
k8s_network_names:
  description: The names of the Kubernetes C(Network) objects.
  returned: always
  type: list
  elements: str
pod_annotations:
  description: The annotations a GPU pod carries to get the GPU NICs.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import GCP_COMMON_SPEC, with_common
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.multinetwork import NAMING_SPEC
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork_info as engine


def argument_spec():
    return with_common(GCP_COMMON_SPEC, dict(
        NAMING_SPEC,
        location=dict(type="str", required=True),
        gpudirect=dict(type="str", choices=["tcpx", "tcpxo", "rdma", "rdma-a4x"]),
    ))


def main():
    run_module(AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True), engine.run)


if __name__ == "__main__":
    main()
