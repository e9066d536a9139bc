# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The GPUDirect profile catalog: one table per fact, read by modules, filters and roles.

Sources (see shared research notes, gke-gpudirect.md):
- machine types, accelerator labels, GPU-NIC counts: GoogleCloudPlatform/container-engine-accelerators
  gpudirect-tcpx/ and gpudirect-tcpxo/ manifests (node affinity values, interface annotations).
- MTU 8244: every peer (Cluster Toolkit multivpc, xpk, the GKE guide).
- minimum GKE patch versions: TCPX from the guide's requirements table as encoded by Cluster Toolkit
  (gpu_direct.tf, Sept 2024); TCPXO from container-engine-accelerators gpudirect-tcpxo/README.md
  "Recommended GKE versions" (latest entry per minor).
"""

from __future__ import annotations

import re

DEFAULT_MTU = 8244
MTU_RANGE = (1300, 8896)  # compute.v1 Network.mtu

PROFILES = {
    "tcpx": dict(
        description="GPUDirect-TCPX on A3 High",
        machine_type="a3-highgpu-8g",
        accelerator_type="nvidia-h100-80gb",
        gpus_per_node=8,
        gpu_nic_count=4,
        device_mode="NetDevice",
        # minor -> minimum patch version
        min_versions={
            "1.27": "1.27.7-gke.1121000",
            "1.28": "1.28.8-gke.1095000",
            "1.29": "1.29.3-gke.1093000",
            "1.30": "1.30.2-gke.1023000",
        },
    ),
    "tcpxo": dict(
        description="GPUDirect-TCPXO on A3 Mega",
        machine_type="a3-megagpu-8g",
        accelerator_type="nvidia-h100-mega-80gb",
        gpus_per_node=8,
        gpu_nic_count=8,
        device_mode="NetDevice",
        min_versions={
            "1.28": "1.28.11-gke.1289000",
            "1.29": "1.29.6-gke.1254000",
            "1.30": "1.30.4-gke.1129000",
            "1.31": "1.31.1-gke.2008000",
            "1.32": "1.32.2-gke.1489001",
        },
    ),
}

PROFILE_NAMES = sorted(PROFILES)

_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")


def profile(name):
    """The catalog entry of a profile; ValueError naming the allowed values otherwise."""
    if name not in PROFILES:
        raise ValueError("unknown GPUDirect profile %r; allowed: %s" % (name, ", ".join(PROFILE_NAMES)))
    return PROFILES[name]


def parse_gke_version(version):
    """(major, minor, patch, gke_build) of a full GKE version such as 1.30.4-gke.1129000."""
    match = _GKE_VERSION.match(version or "")
    if not match:
        raise ValueError("%r is not a full GKE version (MAJOR.MINOR.PATCH-gke.BUILD, e.g. 1.30.4-gke.1129000)" % (version,))
    return tuple(int(part) for part in match.groups())


def version_gate_error(profile_name, version):
    """Why ``version`` is too old for the profile, or None when it is new enough.

    Minors below the table's first minor are refused; minors above its last are accepted.
    """
    entry = profile(profile_name)
    wanted = parse_gke_version(version)
    minors = sorted(entry["min_versions"], key=lambda m: tuple(int(p) for p in m.split(".")))
    first = tuple(int(p) for p in minors[0].split("."))
    minor = "%d.%d" % wanted[:2]
    if wanted[:2] < first:
        return "GKE %s is older than %s, the first minor that supports %s (%s)" % (
            version, minors[0], profile_name, entry["min_versions"][minors[0]])
    minimum = entry["min_versions"].get(minor)
    if minimum and wanted < parse_gke_version(minimum):
        return "GKE %s is below the minimum %s for %s on %s" % (version, minimum, profile_name, minor)
    return None
