#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_host_facts
short_description: Facts of an NVIDIA GPU host - GPUs, MIG modes, driver, kernel modules, OFED, RDMA devices, GPUDirect RDMA mode
version_added: 0.1.0
description:
  - Gathers, into C(ansible_facts.gpu_host), what GPU automation needs to know about a bare-metal host or a Kubernetes
    node reached over SSH - the GPUs (model, UUID, memory, MIG capable, current and pending MIG mode, compute mode),
    the driver and CUDA versions, open or proprietary kernel modules, the kernel version, whether C(nvidia_peermem),
    C(nvidia_fs) and C(gdrdrv) are loaded, MOFED or DOCA-OFED, and the RDMA devices with their netdevs and link state.
  - Decides the GPUDirect RDMA mode that fits the host - V(dmabuf) (Linux 5.12 or later, open kernel modules, CUDA
    11.7 or later, a Turing-or-newer data-center GPU), the legacy V(peermem) (needs MOFED or DOCA-OFED), or
    V(unsupported) - with every reason a mode does not fit. The rule lives in the collection once; the
    P(gpu_ops.cluster.gpu_operator#role) role reads it from these facts.
  - A host without GPUs, without a loaded driver or without nvidia-smi returns facts that say so, with the cause in
    C(problems); the module does not fail on them. The GPUs on the PCI bus (C(pci_gpus)) are listed with or without
    a driver.
  - Reads only, with the Python standard library; runs nvidia-smi twice (the GPU table, and C(-q -d COMPUTE) for the
    CUDA version), C(ofed_info -s) and C(systemctl show nvidia-imex.service) when they exist.
extends_documentation_fragment:
  - gpu_ops.cluster.attributes.INFO_MODULE
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
options:
  nvidia_smi:
    description:
      - Path of nvidia-smi. Searched on E(PATH) and in the usual system folders when omitted.
    type: path
  ofed_info:
    description:
      - Path of C(ofed_info) (installed by MOFED and DOCA-OFED). Searched when omitted.
    type: path
  systemctl:
    description:
      - Path of C(systemctl), which tells the state of the host C(nvidia-imex.service). Searched when omitted; without it
        C(nvidia_imex) holds nulls.
    type: path
  procfs_root:
    description:
      - Where procfs is mounted. Change it only to read a captured tree (tests) or a host's procfs mounted elsewhere.
    type: path
    default: /proc
  sysfs_root:
    description:
      - Where sysfs is mounted (as O(procfs_root)).
    type: path
    default: /sys
notes:
  - Root is not needed. Facts come from C(nvidia-smi --query-gpu), C(/proc/driver/nvidia/version) (open modules say
    C(Open Kernel Module)), C(/proc/modules), C(/proc/sys/kernel/osrelease), C(/sys/class/infiniband), C(/sys/bus/pci/devices) and
    C(ofed_info -s) (C(MLNX_OFED_LINUX-...) is MOFED, C(OFED-internal-...) is DOCA-OFED).
  - DMA-BUF is preferred when both modes fit, as the GPU Operator documentation recommends.
seealso:
  - module: gpu_ops.cluster.mig_profile
"""

EXAMPLES = r"""
- name: Read the GPU host
  gpu_ops.cluster.gpu_host_facts:

- name: Pick the GPUDirect RDMA mode
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_host.gpudirect_rdma.mode }} ({{ ansible_facts.gpu_host.gpudirect_rdma.reasons | join('; ') }})"

- name: Refuse hosts whose MIG mode change is still pending
  ansible.builtin.assert:
    that: ansible_facts.gpu_host.gpus | selectattr('mig_mode_current', 'ne', None)
          | rejectattr('mig_mode_current', 'equalto', true) | selectattr('mig_mode_pending') | list | length == 0
"""

RETURN = r"""
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    gpu_host:
      description: The GPU host.
      returned: always
      type: dict
      contains:
        nvidia_smi:
          description: Whether nvidia-smi was found (C(present)) and where (C(path)).
          type: dict
          returned: always
          sample: {"present": true, "path": "/usr/bin/nvidia-smi"}
        driver_version:
          description: The NVIDIA driver version; null without a driver.
          type: str
          returned: always
          sample: "550.54.14"
        cuda_version:
          description: The CUDA version the driver provides; null when unknown.
          type: str
          returned: always
          sample: "12.4"
        kernel_version:
          description: The running kernel's release.
          type: str
          returned: always
          sample: "5.15.0-105-generic"
        kernel_module:
          description: The loaded NVIDIA kernel module - C(type) V(open), V(proprietary) or null, and C(version).
          type: dict
          returned: always
          sample: {"type": "open", "version": "550.54.14"}
        gpus:
          description:
            - One entry per GPU - C(index), C(uuid), C(name), C(memory_total_mib), C(mig_capable),
              C(mig_mode_current) and C(mig_mode_pending) (true, false or null on GPUs without MIG), C(compute_mode)
              and C(compute_capability).
          type: list
          elements: dict
          returned: always
          sample: [{"index": 0, "uuid": "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77", "name": "NVIDIA A100-SXM4-40GB",
                    "memory_total_mib": 40960, "mig_capable": true, "mig_mode_current": false,
                    "mig_mode_pending": false, "compute_mode": "Default", "compute_capability": "8.0"}]
        modules_loaded:
          description: Whether C(nvidia_peermem), C(nvidia_fs), C(gdrdrv) and C(ib_core) (the kernel's RDMA core) are loaded.
          type: dict
          returned: always
          sample: {"nvidia_peermem": false, "nvidia_fs": false, "gdrdrv": false, "ib_core": true}
        pci_gpus:
          description:
            - The NVIDIA display and 3D controllers of C(/sys/bus/pci/devices) - C(address) and C(device) (the PCI device
              ID). They are listed before any NVIDIA driver is installed; the P(gpu_ops.cluster.gpu_operator#role) role
              judges the GPUDirect RDMA mode of such fresh hosts from them and the driver the operator will install.
          type: list
          elements: dict
          returned: always
          sample: [{"address": "0000:18:00.0", "device": "0x2330"}]
        ofed:
          description: MOFED or DOCA-OFED - C(present), C(kind) (V(mofed), V(doca-ofed) or null), C(version).
          type: dict
          returned: always
          sample: {"present": true, "kind": "mofed", "version": "23.10-1.1.9.0"}
        rdma_devices:
          description:
            - RDMA devices of C(/sys/class/infiniband) - C(name), C(netdevs), and of the first port C(state),
              C(link_layer) and C(rate_gbps); C(ports) lists every port.
          type: list
          elements: dict
          returned: always
          sample: [{"name": "mlx5_0", "netdevs": ["ibp24s0"], "state": "ACTIVE", "link_layer": "InfiniBand",
                    "rate_gbps": 400, "ports": [{"port": 1, "state": "ACTIVE", "link_layer": "InfiniBand",
                                                 "rate_gbps": 400}]}]
        nvidia_imex:
          description:
            - The host C(nvidia-imex.service) (C(systemctl show)) - C(present) (its unit exists), C(active), C(state)
              (C(ActiveState)) and C(enabled) (C(UnitFileState), V(masked) once masked); nulls and the reason in
              C(error) where systemd cannot tell (no systemctl, a host not booted with systemd).
            - Where the NVIDIA DRA driver runs ComputeDomains the service must be off (it holds the IMEX session), unless
              IMEX is host-managed; the P(gpu_ops.cluster.dra_driver#role) role reads it here.
          type: dict
          returned: always
          sample: {"present": true, "active": true, "state": "active", "enabled": "enabled", "error": null}
        gpudirect_rdma:
          description:
            - The GPUDirect RDMA mode that fits - C(mode) (V(dmabuf), V(peermem) or V(unsupported)), C(reasons) (why
              the preferred modes do not fit; for V(unsupported) every reason), and per mode C(modes.<mode>.supported)
              and C(modes.<mode>.reasons).
          type: dict
          returned: always
          sample: {"mode": "peermem", "reasons": ["dmabuf: kernel 5.4.0-150-generic is older than 5.12"],
                   "modes": {"dmabuf": {"supported": false, "reasons": ["kernel 5.4.0-150-generic is older than 5.12"]},
                             "peermem": {"supported": true, "reasons": []}}}
        problems:
          description: What could not be read, and states to look at (a pending MIG mode change).
          type: list
          elements: str
          returned: always
          sample: ["nvidia-smi not found"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import facts as engine


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            ofed_info=dict(type="path"),
            systemctl=dict(type="path"),
            procfs_root=dict(type="path", default="/proc"),
            sysfs_root=dict(type="path", default="/sys"),
        ),
        supports_check_mode=True,
    )
    run_module(module, engine.run)


if __name__ == "__main__":
    main()
