# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The options that name a GPU NIC fabric's resources (module_utils/_gcp/multinetwork.py NAMING_SPEC).

    gke_multinetwork and gke_multinetwork_info both extend it, so the info module finds what the resource
    module created under the same options.
    """

    DOCUMENTATION = r"""
options:
  cluster:
    description:
      - Name of the GKE cluster the fabric belongs to. It is part of the default names (O(name_prefix)) and of the
        resources' descriptions.
    type: str
    required: true
  nic_count:
    description:
      - Number of GPU NICs, 1 to 8, when there is no O(gpudirect).
      - One of O(gpudirect), O(nic_count) or O(networks) is required. When more than one is set, they must agree.
    type: int
  networks:
    description:
      - One entry per GPU NIC, in NIC order (the first entry is C(eth1) in the pods). Every field is optional and
        falls back to the derived default.
    type: list
    elements: dict
    suboptions:
      name:
        description: VPC network name. Default C(<name_prefix>-<n>).
        type: str
      subnetwork:
        description: Subnet name. Default C(<name_prefix>-<n>-sub).
        type: str
      firewall:
        description: Firewall rule name. Default C(<name_prefix>-<n>-internal).
        type: str
      cidr:
        description: Subnet range, for example C(192.168.7.0/24). Default is the next free block of
          the C(cidr_base) of M(gpu_ops.cluster.gke_multinetwork), which alone uses it.
        type: str
      mtu:
        description: MTU of this network. Default the C(mtu) of M(gpu_ops.cluster.gke_multinetwork), which alone uses it.
        type: int
      k8s_network:
        description: Name of the Kubernetes C(Network) and C(GKENetworkParamSet) objects. Default
          C(<k8s_network_prefix><n>).
        type: str
  name_prefix:
    description:
      - Prefix of the derived names. The default is C(<cluster>-gpunic), which gives networks C(<cluster>-gpunic-1),
        subnets C(<cluster>-gpunic-1-sub) and firewall rules C(<cluster>-gpunic-1-internal).
    type: str
  k8s_network_prefix:
    description:
      - Prefix of the Kubernetes C(Network) object names, numbered from 1. The default V(vpc) gives C(vpc1) to
        C(vpcN), the names the upstream GPUDirect pod manifests use.
      - Not used by the GPUDirect-RDMA profiles, whose objects are C(gvnic-1) and C(rdma-0) to C(rdma-<N-1>) (the upstream
        gpudirect-rdma manifests' names).
    type: str
    default: vpc
  zone:
    description:
      - GPUDirect-RDMA profiles (V(rdma), V(rdma-a4x)) only. The zone of the RoCE VPC, which is created with that zone's
        C(<zone>-vpc-roce) network profile and is zonal (the GPU nodes must run in that zone; its subnets are in the
        zone's region). Defaults to O(location) when that is a zone; required when O(location) is a region.
    type: str
"""
