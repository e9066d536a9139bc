# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the GCP double offers where: regions, zones, and per zone the machine types, accelerator types and
disk types of Compute Engine; the image types of GKE.

State, not canned answers per test: ``GcpDouble.catalog`` is one ``Catalog``; a test changes it with
``withdraw``/``offer`` (``double.catalog.withdraw("us-central1-c", "acceleratorTypes", "nvidia-b200")``), and
both the reads (``regions.get``, ``zones.get``, ``machineTypes.get``, ``acceleratorTypes.get``,
``diskTypes.get``, ``getServerConfig``) and the writes that depend on them (a subnet in a region, a cluster in
a location, a node pool's machine type, accelerators, disk type and image type in its zones) consult it, so
what a read says is what a write gets.

The numbers (vCPUs, memory, attached GPUs, the most cards per instance) follow the Compute Engine machine
family pages; availability is "everywhere in the catalog" unless a test withdraws an offer, because the
real per-zone lists change every month and no test should depend on them.
"""

from __future__ import annotations

import copy
import threading
import zlib

SELF_LINK_HOST = "https://www.googleapis.com/"

REGIONS = {
    "us-central1": ("a", "b", "c", "f"),
    "us-east4": ("a", "b", "c"),
    "us-east5": ("a", "b", "c"),
    "us-west1": ("a", "b", "c"),
    "europe-west4": ("a", "b", "c"),
    "asia-northeast1": ("a", "b", "c"),
    "asia-southeast1": ("a", "b", "c"),
}

# machine type -> (vCPUs, memory in MiB, attached accelerator type or None, attached count)
MACHINE_TYPES = {
    "e2-medium": (2, 4096, None, 0),
    "e2-standard-2": (2, 8192, None, 0),
    "e2-standard-4": (4, 16384, None, 0),
    "e2-standard-8": (8, 32768, None, 0),
    "e2-standard-16": (16, 65536, None, 0),
    "n1-standard-4": (4, 15360, None, 0),
    "n1-standard-8": (8, 30720, None, 0),
    "n1-standard-16": (16, 61440, None, 0),
    "n2-standard-8": (8, 32768, None, 0),
    "g2-standard-4": (4, 16384, "nvidia-l4", 1),
    "g2-standard-8": (8, 32768, "nvidia-l4", 1),
    "g2-standard-24": (24, 98304, "nvidia-l4", 2),
    "g2-standard-48": (48, 196608, "nvidia-l4", 4),
    "g2-standard-96": (96, 393216, "nvidia-l4", 8),
    "g4-standard-48": (48, 184320, "nvidia-rtx-pro-6000", 1),
    "a2-highgpu-1g": (12, 87040, "nvidia-tesla-a100", 1),
    "a2-highgpu-2g": (24, 174080, "nvidia-tesla-a100", 2),
    "a2-highgpu-4g": (48, 348160, "nvidia-tesla-a100", 4),
    "a2-highgpu-8g": (96, 696320, "nvidia-tesla-a100", 8),
    "a2-ultragpu-8g": (96, 1392640, "nvidia-a100-80gb", 8),
    "a3-highgpu-1g": (26, 239616, "nvidia-h100-80gb", 1),
    "a3-highgpu-2g": (52, 479232, "nvidia-h100-80gb", 2),
    "a3-highgpu-4g": (104, 958464, "nvidia-h100-80gb", 4),
    "a3-highgpu-8g": (208, 1916928, "nvidia-h100-80gb", 8),
    "a3-megagpu-8g": (208, 1916928, "nvidia-h100-mega-80gb", 8),
    "a3-ultragpu-8g": (224, 3022848, "nvidia-h200-141gb", 8),
    "a4-highgpu-8g": (224, 4063232, "nvidia-b200", 8),
    "a4x-highgpu-4g": (140, 905216, "nvidia-gb200", 4),
}

# accelerator type -> the most cards one instance can have
ACCELERATOR_TYPES = {
    "nvidia-tesla-t4": 4,
    "nvidia-l4": 8,
    "nvidia-rtx-pro-6000": 8,
    "nvidia-tesla-a100": 16,
    "nvidia-a100-80gb": 8,
    "nvidia-h100-80gb": 8,
    "nvidia-h100-mega-80gb": 8,
    "nvidia-h200-141gb": 8,
    "nvidia-b200": 8,
    "nvidia-gb200": 4,
}

# RoCE network profiles ("<zone>-vpc-roce"): the zones https://cloud.google.com/vpc/docs/rdma-network-profiles
# lists that this catalog holds (europe-west1-b is not in REGIONS). A RoCE VPC network takes only MRDMA NICs,
# which "are only available on the A3 Ultra, A4, and A4X machine series" (same page).
ROCE_ZONES = ("us-central1-a", "us-central1-b", "us-east4-b", "us-west1-c")
MRDMA_MACHINES = ("a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g")
# container v1 GPUDirectConfig.gpuDirectStrategy RDMA: "GPUDirect-RDMA on A3 Ultra, and A4 machine types"
GPUDIRECT_RDMA_MACHINES = ("a3-ultragpu-8g", "a4-highgpu-8g")
# A4X cannot attach Persistent Disk (Hyperdisk only); GKE's boot disk default is pd-balanced
HYPERDISK_ONLY_MACHINES = ("a4x-highgpu-4g",)
GKE_DEFAULT_DISK_TYPE = "pd-balanced"

DISK_TYPES = ("pd-standard", "pd-balanced", "pd-ssd", "pd-extreme", "hyperdisk-balanced", "hyperdisk-extreme",
              "hyperdisk-throughput", "hyperdisk-ml")

IMAGE_TYPES = ("COS_CONTAINERD", "UBUNTU_CONTAINERD", "WINDOWS_LTSC_CONTAINERD")

KINDS = ("machineTypes", "acceleratorTypes", "diskTypes")


class Catalog:
    """Regions, zones and per-zone offers; thread-safe."""

    def __init__(self, regions=None, machine_types=None, accelerator_types=None, disk_types=None, image_types=None):
        self.lock = threading.RLock()
        self.regions = dict((r, ["%s-%s" % (r, z) for z in zones]) for r, zones in (regions or REGIONS).items())
        self.machine_types = dict(machine_types or MACHINE_TYPES)
        self.accelerator_types = dict(accelerator_types or ACCELERATOR_TYPES)
        self.image_types = list(image_types or IMAGE_TYPES)
        disk_types = tuple(disk_types or DISK_TYPES)
        self.offers = {}
        self.roce_zones = set(ROCE_ZONES)
        for zones in self.regions.values():
            for zone in zones:
                self.offers[zone] = dict(machineTypes=set(self.machine_types),
                                         acceleratorTypes=set(self.accelerator_types), diskTypes=set(disk_types))

    # ---- changes a test makes

    def withdraw(self, zone, kind, name):
        """``name`` (of ``kind``: machineTypes, acceleratorTypes, diskTypes) is no longer offered in ``zone``."""
        with self.lock:
            self.offers[zone][kind].discard(name)

    def offer(self, zone, kind, name):
        with self.lock:
            self.offers[zone][kind].add(name)

    # ---- questions

    def withdraw_network_profile(self, zone):
        """The zone's RoCE network profile no longer exists."""
        with self.lock:
            self.roce_zones.discard(zone)

    def network_profile_document(self, project, name):
        """networkProfiles.get of "<zone>-vpc-roce" (None when the zone has none)."""
        with self.lock:
            zone = name[:-len("-vpc-roce")] if name.endswith("-vpc-roce") else None
            if zone not in self.roce_zones or zone not in self.offers:
                return None
            return dict(kind="compute#networkProfile", name=name, id=str(zlib.crc32(name.encode())),
                        description="RDMA over converged ethernet (RoCE) network profile", profileType=dict(
                            networkType="RDMA", rdmaSubtype="ROCE"),
                        location=dict(name=zone, scope="ZONE"),
                        features=dict(interfaceTypes=["MRDMA"], allowVpcFirewallRules="VPC_FIREWALL_RULES_BLOCKED",
                                      firewallPolicyTypes=["RDMA_ROCE_POLICY"],
                                      allowMultiNicInSameNetwork="MULTI_NIC_IN_SAME_NETWORK_ALLOWED",
                                      allowAutoModeSubnet="AUTO_MODE_SUBNET_BLOCKED"),
                        selfLink=_link(project, "global/networkProfiles/%s" % name))

    def network_profiles(self, project):
        with self.lock:
            return [self.network_profile_document(project, "%s-vpc-roce" % z) for z in sorted(self.roce_zones)
                    if z in self.offers]

    def region_of(self, location):
        """The region of a region or zone name, or None when the catalog has neither."""
        with self.lock:
            if location in self.regions:
                return location
            for region, zones in self.regions.items():
                if location in zones:
                    return region
            return None

    def is_zone(self, name):
        with self.lock:
            return name in self.offers

    def offered(self, zone, kind, name):
        with self.lock:
            return zone in self.offers and name in self.offers[zone][kind]

    def default_zones(self, location):
        """The zones a pool runs in when it names none: the zone itself, or the first three of a region."""
        with self.lock:
            if location in self.offers:
                return [location]
            return list(self.regions.get(location, []))[:3]

    # ---- documents

    def region_document(self, project, name):
        with self.lock:
            if name not in self.regions:
                return None
            return dict(kind="compute#region", id=str(1000 + sorted(self.regions).index(name)), name=name,
                        description=name, status="UP",
                        zones=[_link(project, "zones/%s" % z) for z in self.regions[name]],
                        selfLink=_link(project, "regions/%s" % name))

    def zone_document(self, project, name):
        with self.lock:
            region = self.region_of(name)
            if region is None or name not in self.offers:
                return None
            return dict(kind="compute#zone", id=str(2000 + sorted(self.offers).index(name)), name=name,
                        description=name, status="UP", region=_link(project, "regions/%s" % region),
                        selfLink=_link(project, "zones/%s" % name))

    def offer_document(self, project, zone, kind, name):
        with self.lock:
            if not self.offered(zone, kind, name):
                return None
            link = _link(project, "zones/%s/%s/%s" % (zone, kind, name))
            doc = dict(name=name, zone=zone, selfLink=link, id=str(zlib.crc32(("%s/%s" % (kind, name)).encode())))
            if kind == "machineTypes":
                cpus, memory, accelerator, count = self.machine_types[name]
                doc.update(kind="compute#machineType", guestCpus=cpus, memoryMb=memory,
                           description="%d vCPUs, %d GB RAM" % (cpus, memory // 1024), maximumPersistentDisks=128,
                           maximumPersistentDisksSizeGb="263168", isSharedCpu=name == "e2-medium")
                if accelerator:
                    doc["accelerators"] = [dict(guestAcceleratorType=accelerator, guestAcceleratorCount=count)]
            elif kind == "acceleratorTypes":
                doc.update(kind="compute#acceleratorType", description=name,
                           maximumCardsPerInstance=self.accelerator_types[name])
            else:
                doc.update(kind="compute#diskType", description=name, validDiskSize="10GB-65536GB",
                           defaultDiskSizeGb="100")
            return copy.deepcopy(doc)

    def pool_problems(self, location, pool):
        """Why GKE would refuse a node pool's machine, accelerators, disk type or image type (or [])."""
        config = pool.get("config") or {}
        zones = pool.get("locations") or self.default_zones(location)
        problems = []
        image = config.get("imageType")
        if image and image.upper() not in self.image_types:
            problems.append("Image type %s is not supported. Valid image types are: %s."
                            % (image, ", ".join(self.image_types)))
        for zone in zones:
            machine = config.get("machineType")
            if machine and not self.offered(zone, "machineTypes", machine):
                problems.append("Machine type %s is not available in zone %s." % (machine, zone))
            disk = config.get("diskType")
            if disk and not self.offered(zone, "diskTypes", disk):
                problems.append("Disk type %s is not available in zone %s." % (disk, zone))
            if machine in HYPERDISK_ONLY_MACHINES and not (disk or GKE_DEFAULT_DISK_TYPE).startswith("hyperdisk-"):
                problems.append("Machine type %s does not support disk type %s; use a Hyperdisk type."
                                % (machine, disk or GKE_DEFAULT_DISK_TYPE))
            for accel in config.get("accelerators") or []:
                name = accel.get("acceleratorType")
                if not self.offered(zone, "acceleratorTypes", name):
                    problems.append("Accelerator type %s is not available in zone %s." % (name, zone))
                elif int(accel.get("acceleratorCount") or 0) > self.accelerator_types[name]:
                    problems.append("Accelerator count %s of %s is above the maximum of %d per instance."
                                    % (accel.get("acceleratorCount"), name, self.accelerator_types[name]))
        strategy = (config.get("gpuDirectConfig") or {}).get("gpuDirectStrategy")
        if strategy == "RDMA" and config.get("machineType") not in GPUDIRECT_RDMA_MACHINES:
            problems.append("GPUDirect strategy RDMA is not supported on machine type %s." % config.get("machineType"))
        return problems


def _link(project, rest):
    return "%scompute/v1/projects/%s/%s" % (SELF_LINK_HOST, project, rest)
