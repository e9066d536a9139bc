#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_env
short_description: Recommended NCCL environment for a GPU fabric, and an nccl.conf that carries it
version_added: 0.1.0
description:
  - Returns the recommended NCCL environment for GPUDirect-TCPX (A3 High), GPUDirect-TCPXO (A3 Mega),
    GPUDirect-RDMA with the gIB NCCL plugin (A3 Ultra, A4), bare-metal InfiniBand (V(ib)) or RoCE (V(roce)), or the
    socket transport (V(socket)) as a fallback; as a dict, as a Kubernetes container C(env) list and as shell export
    lines. Every value comes from the collection's GPUDirect catalog, the one table the
    P(gpu_ops.cluster.gpudirect_workload#filter) filter and the roles read too.
  - Knows where upstream changed the recommendation - GPUDirect-TCPX on GKE 1.34 and later (plugin v3.1.12, daemon
    v2.0.15, devmem-TCP) uses C(NCCL_ALGO=Ring,Tree) and drops C(NCCL_NVLS_ENABLE); without O(gke_version) the
    earlier set is returned and the module warns.
  - Derives the GPU interface names (C(eth1)..C(eth4) for tcpx, C(eth1)..C(eth8) for tcpxo, C(eth2)..C(eth9) for rdma,
    the pod-side names of GKE multi-networking) and the TCPX RX/TX CPU bindings from O(machine_type) and the fabric.
  - Applies O(overrides) and warns on NCCL_* keys it does not know, on keys of another fabric's plugin, on keys
    upstream dropped from the chosen set and on keys the TCPXO guest config checker watches. An
    C(NCCL_NVLSTREE_MAX_CHUNKSIZE) other than 131072 on tcpxo is refused, because the checker aborts the workload.
  - With O(dest), writes the NCCL_* keys to an nccl.conf file (for example C(/etc/nccl.conf) on a bare-metal host);
    the whole file is managed. NCCL reads it at initialisation and values set in the environment win over it, so
    non-NCCL keys (C(LD_LIBRARY_PATH), C(CUDA_VISIBLE_DEVICES)) are left out of the file.
  - Talks to no cloud.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.CHANGES
attributes:
  diff_mode:
    details:
      - The diff is O(dest) itself, before and after (shown as a unified diff); when only its mode or owner
        changes, the diff shows those attributes. RV(changes) names every changed field.
options:
  fabric:
    description:
      - The GPU fabric.
    type: str
    required: true
    choices: [tcpx, tcpxo, rdma, rdma-a4x, ib, roce, socket]
  gke_version:
    description:
      - The GKE version of the cluster, as V(1.34), V(1.34.1-gke.1829001) or V(v1.34.1-gke.1829001). Picks the TCPX
        set. Ignored by the bare-metal fabrics.
    type: str
  machine_type:
    description:
      - The machine type; must run the fabric. Picks the TCPX CPU bindings and the gIB tuner file (A3 Ultra or A4).
        Defaults to the fabric's first machine (V(a3-highgpu-8g), V(a3-megagpu-8g), V(a3-ultragpu-8g)).
    type: str
  interfaces:
    description:
      - For tcpx, tcpxo and rdma, the GPU NIC interface names, one per GPU NIC (4 or 8), when they differ from the
        multi-network pod names (for example with C(hostNetwork)).
      - For ib and roce, the HCA names for C(NCCL_IB_HCA) (written with the exact-match C(=) prefix), for example
        V(mlx5_0).
      - For socket, the NICs for C(NCCL_SOCKET_IFNAME).
    type: list
    elements: str
  ctrl_interface:
    description:
      - The control (bootstrap) interface for C(NCCL_SOCKET_IFNAME) and the plugins' control device. Defaults to
        V(eth0) on GKE; on bare metal C(NCCL_SOCKET_IFNAME) is only set when this (or O(interfaces) for socket) is.
    type: str
  overrides:
    description:
      - Keys to change or add, as a dict. A null value removes the key from the result.
      - Values are strings, numbers or booleans (written as 1/0).
    type: dict
    default: {}
  dest:
    description:
      - Path of an nccl.conf file to manage. Omit to only return the environment.
    type: path
  mode:
    description:
      - Permissions of O(dest), as for M(ansible.builtin.file) - an octal string such as V('0644') or a symbolic mode such
        as V(u=rw,go=r).
      - Checked, with O(owner), O(group) and the file's content, before anything is written; the file is written to a
        temporary file in the same folder and moved into place.
    type: raw
    default: "0644"
  owner:
    description:
      - Owner of O(dest).
    type: str
  group:
    description:
      - Group of O(dest).
    type: str
notes:
  - Keys the guide recommends for TCPX that only the TCPX images' scripts read (C(NCCL_DYNAMIC_CHUNK_SIZE)) are kept.
  - For rdma, sourcing C(/usr/local/gib/scripts/set_nccl_env.sh) in the workload image sets the same values; it may
    change with future gIB releases.
seealso:
  - plugin: gpu_ops.cluster.nccl_env
    plugin_type: filter
  - plugin: gpu_ops.cluster.gpudirect_workload
    plugin_type: filter
"""

EXAMPLES = r"""
- name: NCCL environment for A3 Mega workloads
  gpu_ops.cluster.nccl_env:
    fabric: tcpxo
  register: tcpxo_env

- name: TCPX on a GKE 1.34 cluster, with a debug override
  gpu_ops.cluster.nccl_env:
    fabric: tcpx
    gke_version: 1.34.1-gke.1829001
    overrides:
      NCCL_DEBUG: INFO
  register: tcpx_env

- name: Bare-metal RoCE host - manage /etc/nccl.conf
  become: true
  gpu_ops.cluster.nccl_env:
    fabric: roce
    interfaces: [mlx5_0, mlx5_1, mlx5_2, mlx5_3]
    ctrl_interface: bond0
    dest: /etc/nccl.conf
"""

RETURN = r"""
env:
  description: The environment, in the catalog's order.
  returned: always
  type: dict
  sample: {"NCCL_NET": "IB", "NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
k8s_env:
  description: The environment as a Kubernetes container C(env) list.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "NCCL_NET", "value": "IB"}]
exports:
  description:
    - Shell C(export) lines, values quoted; C(LD_LIBRARY_PATH) is appended to the current value.
  returned: always
  type: str
  sample: "export NCCL_NET=IB\nexport NCCL_IB_DISABLE=0\n"
nccl_conf:
  description: The nccl.conf text (NCCL_* keys only) that O(dest) holds or would hold.
  returned: always
  type: str
variant:
  description: The recommendation the environment follows (V(classic) or V(devmem) for tcpx, V(default) otherwise).
  returned: always
  type: str
  sample: devmem
nccl_warnings:
  description: Why an override or a missing option is risky (also shown as task warnings).
  returned: always
  type: list
  elements: str
dest:
  description: The managed file.
  returned: when O(dest) is set
  type: str
changes:
  description: What changed (or would change in check mode) on O(dest).
  returned: always
  type: list
  elements: dict
  sample: [{"action": "update", "kind": "file", "name": "/etc/nccl.conf", "fields": ["content"]}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import nccl_conf as engine


def argument_spec():
    return dict(
        fabric=dict(type="str", required=True, choices=["tcpx", "tcpxo", "rdma", "rdma-a4x", "ib", "roce", "socket"]),
        gke_version=dict(type="str"),
        machine_type=dict(type="str"),
        interfaces=dict(type="list", elements="str"),
        ctrl_interface=dict(type="str"),
        overrides=dict(type="dict", default={}),
        dest=dict(type="path"),
        mode=dict(type="raw", default="0644"),
        owner=dict(type="str"),
        group=dict(type="str"),
    )


def main():
    run_module(AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True), engine.run)


if __name__ == "__main__":
    main()
