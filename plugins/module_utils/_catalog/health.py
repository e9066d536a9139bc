# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Facts of the validate role's health phase: DCGM diagnostic levels, the GPU Operator's standalone DCGM host
engine, and the nvbandwidth floors per GPU model.
"""

from __future__ import annotations

# dcgmi diag run levels: 1 quick (seconds), 2 medium (about 2 minutes), 3 long (about 15 minutes), 4 extended.
# Levels 3 and 4 load the GPUs for a long time: burn-in only. Source: NVIDIA DCGM docs, "dcgmi diag" command-line
# reference and "DCGM Diagnostics" user guide (docs.nvidia.com/datacenter/dcgm/latest), notes anchors-2026-11-29.md.
DCGM_DIAG_LEVELS = {1: "quick", 2: "medium", 3: "long", 4: "extended"}
DCGM_DIAG_ROUTINE_LEVELS = (1, 2)
DCGM_DIAG_BURN_IN_LEVELS = (3, 4)

# The GPU Operator's standalone DCGM host engine (ClusterPolicy spec.dcgm.enabled: true): DaemonSet and Service
# nvidia-dcgm, port 5555 in the operator's namespace. The Service has internalTrafficPolicy: Local, so a pod that
# connects to it reaches the host engine of its own node. Source: NVIDIA/gpu-operator assets/state-dcgm/0400_dcgm.yml
# and 0500_service.yaml (commit 282a03e8).
DCGM_HOSTENGINE = {"daemonset": "nvidia-dcgm", "service": "nvidia-dcgm", "port": 5555, "container": "nvidia-dcgm-ctr"}

# The DCGM image of the probe when the cluster's nvidia-dcgm DaemonSet cannot name one (its own image is used first,
# so dcgmi and the host engine are one release). Tag: GPU Operator 26.3.2's DCGM pin 4.5.2-1 (NVIDIA
# cloud-native-stack playbooks/gpu_operator.yaml, notes ansible-ecosystem.md).
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.5.2-1-ubuntu22.04"

# nvbandwidth testcases the health phase judges and the lowest bandwidth (GB/s, any cell of the matrix) per GPU model
# (the nvidia.com/gpu.product label or nvidia-smi's name). NVIDIA publishes no such floor: its datasheets give the links'
# peak rates (PCIe, NVLink), a ceiling that a healthy node's copies stay well below by a margin that depends on the
# platform (PCIe switches, CPU sockets), so a floor derived from them would fail healthy nodes or pass slow ones. Until a
# measured, sourced value is entered here a node's row is report-only (other, with the measured value) unless
# validate_health_nvbandwidth_floors states one - never a pass without a comparison.
NVBANDWIDTH_TESTCASES = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_read_ce")
NVBANDWIDTH_FLOORS = {}
