# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpu_host`` facts in the shape gpu_ops.cluster.gpu_host_facts returns, for tests of what reads them.

The per-host GPUDirect RDMA verdict (``gpudirect_rdma``) is the facts module's rule; these builders
only state an outcome of it, so the operator roles can be tested on each kind of host:
``gpu_host(mode="dmabuf")`` an open-module host with DOCA-OFED, ``gpu_host(mode="peermem", dmabuf=False)``
an old-kernel host, ``gpu_host(ofed=False)`` a host without MOFED, ``gpu_host(module="proprietary")``...;
``gpu_host(imex="active")`` a host whose nvidia-imex.service runs, ``gpu_host(driver="570.158.01")`` another driver.
"""

from __future__ import annotations


def gpu_host(mode="dmabuf", ofed=True, module="open", peermem=None, dmabuf=None, rate=100, gpus=8, imex="absent",
             driver="570.124.06"):
    """gpu_host facts; ``mode`` is the host's verdict, ``dmabuf``/``peermem`` override each mode's support."""
    dmabuf_ok = mode == "dmabuf" if dmabuf is None else dmabuf
    peermem_ok = ofed if peermem is None else peermem
    return {
        "nvidia_smi": {"present": True, "path": "/usr/bin/nvidia-smi"}, "driver_version": driver,
        "cuda_version": "12.8", "kernel_version": "6.8.0-45-generic",
        "kernel_module": {"type": module, "version": driver},
        "gpus": [{"index": i, "uuid": "GPU-%08d" % i, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                  "mig_capable": True, "mig_mode_current": "Disabled", "mig_mode_pending": "Disabled",
                  "compute_mode": "Default"} for i in range(gpus)],
        "modules_loaded": {"nvidia_peermem": False, "nvidia_fs": False, "gdrdrv": False},
        "ofed": {"present": ofed, "kind": "doca-ofed" if ofed else None, "version": "25.01" if ofed else None},
        "rdma_devices": [{"name": "mlx5_0", "netdevs": ["ens64np1"], "state": "ACTIVE", "link_layer": "Ethernet",
                          "rate_gbps": rate}],
        "gpudirect_rdma": {"mode": mode, "reasons": [] if mode != "unsupported" else ["no RDMA device"], "modes": {
            "dmabuf": {"supported": dmabuf_ok, "reasons": [] if dmabuf_ok else ["kernel 5.4.0 is older than 5.12"]},
            "peermem": {"supported": peermem_ok,
                        "reasons": [] if peermem_ok else ["MLNX_OFED/DOCA-OFED is not installed"]}}},
        "nvidia_imex": {"present": imex != "absent", "active": imex == "active",
                        "state": None if imex == "absent" else imex, "enabled": None if imex == "absent" else "enabled",
                        "error": None},
        "problems": [],
    }
