#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_nodepool_info
short_description: GKE node pools and AKS agent pools with their GPU, GPUDirect and MIG facts
version_added: 0.1.0
description:
  - Reads the node pools of a GKE cluster (O(provider=gke)) or the agent pools of an AKS cluster (O(provider=aks)),
    all of them or the one named by O(name).
  - Each pool comes with its GPU settings and the facts the collection's catalogs derive from them, the same
    M(gpu_ops.cluster.gpu_nodepool) uses - the GPUDirect profile of the machine type and whether the pool has its
    GPU NICs, the MIG profile of an AKS GPU instance profile, and the extended resources every node should advertise.
  - Reads only; nothing changes.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
  - gpu_ops.cluster.azure.WITH_GCP
options:
  cluster:
    description: Name of the cluster.
    type: str
    required: true
  name:
    description: Name of one pool; all pools of the cluster when not set.
    type: str
  location:
    description: GKE. Zone or region of the cluster. Required with O(provider=gke).
    type: str
  resource_group:
    description: AKS. Resource group of the cluster. Required with O(provider=aks).
    type: str
  mig_strategy:
    description: AKS. The device plugin's MIG strategy, for the C(expected_resources) of RV(node_pools).
    type: str
    choices: [single, mixed]
    default: single
seealso:
  - module: gpu_ops.cluster.gpu_nodepool
"""

EXAMPLES = r"""
- name: GPU pools of a GKE cluster
  gpu_ops.cluster.gpu_nodepool_info:
    provider: gke
    project: my-project
    location: us-central1
    cluster: a3mega
  register: pools

- name: The MIG pool of an AKS cluster
  gpu_ops.cluster.gpu_nodepool_info:
    provider: aks
    subscription_id: "{{ azure_subscription }}"
    resource_group: gpu-rg
    cluster: gpu-aks
    name: mig
  register: mig
"""

RETURN = r"""
cluster_exists:
  description: Whether the cluster exists.
  returned: always
  type: bool
node_pools:
  description:
    - The pools, each with its name, state, size and GPU settings as the cloud has them, and C(expected_resources)
      (the extended resources each node should advertise; null when the catalog does not know the GPU).
    - GKE pools also have C(gpudirect) (C(profile), C(gpu_nics_needed), C(gpu_nics), C(ready); null for machine
      types without GPUDirect), C(additional_node_networks) and C(disk_type) (the boot disk type).
    - AKS pools also have C(mig) (from the MIG catalog - C(gpu_model), C(mig_profile), C(instances_per_gpu),
      C(instances_per_vm), C(layout); null without a GPU instance profile).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "a3mega", "machine_type": "a3-megagpu-8g", "accelerator_count": 8,
            "gpudirect": {"profile": "tcpxo", "gpu_nics_needed": 8, "gpu_nics": 8, "ready": true},
            "expected_resources": {"nvidia.com/gpu": 8}}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.argspec import (
    PROVIDER_REQUIRED_IF, TWO_CLOUD_SPEC, with_common,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool_info as aks_engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool_info as gke_engine


def argument_spec():
    return with_common(TWO_CLOUD_SPEC, dict(
        cluster=dict(type="str", required=True),
        name=dict(type="str"),
        location=dict(type="str"),
        resource_group=dict(type="str"),
        mig_strategy=dict(type="str", default="single", choices=["single", "mixed"]),
    ))


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True, required_if=PROVIDER_REQUIRED_IF)
    run_module(module, gke_engine.run if module.params["provider"] == "gke" else aks_engine.run)


if __name__ == "__main__":
    main()
