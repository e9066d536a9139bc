# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The MIG catalog: one table per fact, and the lookups over it (no I/O).

Read by the AKS and GKE node-pool engines, the bare-metal MIG module, the placement solver and node
expectations in ``_mig/`` and the nvidia_device_plugin and mig_manager roles (through the filters in
plugins/filter/mig.py). Nothing else keeps a copy.

Sources (shared research notes, nvidia-stack.md sections 3-5):
- profiles, maximum instances, nvidia-smi GPU-instance profile IDs and placements: NVIDIA MIG User
  Guide (R580 edition: supported GPUs, supported profiles, ``nvidia-smi mig -lgipp`` captures);
- device IDs used as mig-parted ``device-filter``: the GPU Operator's default mig-parted config;
- ``all-balanced`` layouts: the same config;
- AKS ``gpuInstanceProfile`` MIG1g..MIG7g and the Standard_ND96asr_v4 table: the AKS multi-instance
  GPU guide; the other VM sizes map the same g-count to their GPU's profile (marked unverified);
- resource names and GFD labels: NVIDIA k8s-device-plugin (``nvidia.com/mig-<profile>``, with
  ``+`` written as ``.``).

Geometry: a GPU has ``memory_slices`` slots on the placement axis (8 on A100/H100/H200/B200, 4 on
A30) and ``compute_slices`` compute slices (7, or 4). A GPU instance of a profile takes
``memory_slices`` consecutive slots from one of its allowed start slots and ``compute_slices``
compute slices; instances may not overlap, the compute total may not exceed the GPU's, and the
media extensions (``+me``/``+me.all``) exist once per GPU.
"""

from __future__ import annotations

import re


# --------------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------------

# Profile shapes of the 8-slot GPUs (A100, H100, H200, B200): kind -> (g, gi profile id, size,
# starts, max instances, attributes). "1g2" is the double-memory 1g profile (ID 15).
_EIGHT_SLOT_SHAPES = (
    ("1g", 1, 19, 1, (0, 1, 2, 3, 4, 5, 6), 7, ()),
    ("1g+me", 1, 20, 1, (0, 1, 2, 3, 4, 5, 6), 1, ("me",)),
    ("1g2", 1, 15, 2, (0, 2, 4, 6), 4, ()),
    ("2g", 2, 14, 2, (0, 2, 4), 3, ()),
    ("3g", 3, 9, 4, (0, 4), 2, ()),
    ("4g", 4, 5, 4, (0,), 1, ()),
    ("7g", 7, 0, 8, (0,), 1, ()),
)

# A30: 4 slots, 4 compute slices.
_A30_SHAPES = (
    ("1g", 1, 14, 1, (0, 1, 2, 3), 4, ()),
    ("1g+me", 1, 21, 1, (0, 1, 2, 3), 1, ("me",)),
    ("2g", 2, 5, 2, (0, 2), 2, ()),
    ("2g+me", 2, 6, 2, (0, 2), 1, ("me",)),
    ("4g", 4, 0, 4, (0,), 1, ()),
)

# RTX PRO 6000 Blackwell: profile names and maximum counts from the MIG guide; profile IDs and
# placements were not captured (placements below assume the A30-like 4-slot layout).
_RTX_PRO_6000_SHAPES = (
    ("1g", 1, None, 1, (0, 1, 2, 3), 4, ()),
    ("1g+me", 1, None, 1, (0, 1, 2, 3), 1, ("me",)),
    ("1g+gfx", 1, None, 1, (0, 1, 2, 3), 4, ("gfx",)),
    ("1g+me.all", 1, None, 1, (0, 1, 2, 3), 1, ("me.all",)),
    ("1g-me", 1, None, 1, (0, 1, 2, 3), 4, ("-me",)),
    ("2g", 2, None, 2, (0, 2), 2, ()),
    ("2g+gfx", 2, None, 2, (0, 2), 2, ("gfx",)),
    ("2g+me.all", 2, None, 2, (0, 2), 1, ("me.all",)),
    ("2g-me", 2, None, 2, (0, 2), 2, ("-me",)),
    ("4g", 4, None, 4, (0,), 1, ()),
    ("4g+gfx", 4, None, 4, (0,), 1, ("gfx",)),
)

# Minimum driver branch of a kind, per model, where the MIG guide names one.
_R470_ME = {"1g+me": 470}


def _eight_slot(name, description, aliases, device_ids, sizes, min_driver=None, placements_verified=True):
    """Facts of an 8-slot GPU (A100, H100, H200, B200): ``sizes`` is the memory in GB of its 1g, 2g, 3g and
    7g profiles. On these GPUs 1g+me has the 1g size, the double-memory 1g (1g2) the 2g size, 4g the 3g
    size, and the whole GPU (7g) is the total memory."""
    one, two, three, whole = sizes
    return dict(
        name=name, description=description, aliases=aliases, device_ids=device_ids,
        shapes=_EIGHT_SLOT_SHAPES,
        memory={"1g": one, "1g+me": one, "1g2": two, "2g": two, "3g": three, "4g": three, "7g": whole},
        min_driver=dict(min_driver or {}),
        balanced={"1g": 2, "2g": 1, "3g": 1},
        memory_slots=8, compute=7, total_memory_gb=whole, placements_verified=placements_verified,
    )


# name -> model facts. ``memory`` maps a shape kind to the profile's memory size in GB (the
# number in its name).
_MODELS = (
    _eight_slot("A100-40GB", "NVIDIA A100 40GB (SXM4, PCIe) and A800 40GB", sizes=(5, 10, 20, 40),
                aliases=("A100-SXM4-40GB", "A100-PCIE-40GB", "A100 40GB PCIe", "A100-40GB", "A800-SXM4-40GB",
                         "A800 40GB PCIe", "A800-40GB"),
                device_ids=("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
                min_driver=dict(_R470_ME, **{"1g2": 525})),
    _eight_slot("A100-80GB", "NVIDIA A100 80GB (SXM4, PCIe) and A800 80GB", sizes=(10, 20, 40, 80),
                aliases=("A100-SXM4-80GB", "A100-PCIE-80GB", "A100 80GB PCIe", "A100-80GB", "A800-SXM4-80GB",
                         "A800 80GB PCIe", "A800-80GB"),
                device_ids=("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"), min_driver=dict(_R470_ME)),
    _eight_slot("H100-80GB", "NVIDIA H100 80GB (SXM5 HBM3, PCIe) and H800 80GB", sizes=(10, 20, 40, 80),
                aliases=("H100 80GB HBM3", "H100-SXM5-80GB", "H100 SXM5 80GB", "H100 PCIe", "H100-PCIE-80GB",
                         "H100-80GB", "H800", "H800 PCIe", "H800-80GB"),
                device_ids=("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE")),
    _eight_slot("H100-94GB", "NVIDIA H100 94GB (H100 NVL, SXM5 94GB) and H800 NVL", sizes=(12, 24, 47, 94),
                aliases=("H100 NVL", "H100-NVL", "H100 94GB", "H100-94GB", "H100-SXM5-94GB", "H800 NVL"),
                device_ids=("0x232110DE", "0x233A10DE")),
    _eight_slot("H100-96GB", "NVIDIA H100 96GB (GH200 Grace Hopper, H20)", sizes=(12, 24, 48, 96),
                aliases=("GH200 480GB", "GH200", "H100 96GB", "H100-96GB", "H20"),
                device_ids=("0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE")),
    _eight_slot("H200-141GB", "NVIDIA H200 141GB (SXM5, NVL)", sizes=(18, 35, 71, 141),
                aliases=("H200", "H200 NVL", "H200-141GB", "H200-SXM5-141GB"),
                device_ids=("0x233510DE", "0x233B10DE")),
    _eight_slot("B200-180GB", "NVIDIA B200 180GB", sizes=(23, 45, 90, 180),
                aliases=("B200", "B200-180GB"),
                device_ids=("0x290110DE",), placements_verified=False),
    dict(
        name="A30-24GB",
        description="NVIDIA A30 24GB",
        aliases=("A30", "A30-24GB", "A30 24GB"),
        device_ids=("0x20B710DE",),
        shapes=_A30_SHAPES,
        memory={"1g": 6, "1g+me": 6, "2g": 12, "2g+me": 12, "4g": 24},
        min_driver={"2g+me": 525},
        balanced={"1g": 2, "2g": 1},
        memory_slots=4, compute=4, total_memory_gb=24, placements_verified=True,
    ),
    dict(
        name="RTX-PRO-6000-96GB",
        description="NVIDIA RTX PRO 6000 Blackwell 96GB",
        aliases=("RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell", "RTX PRO 6000",
                 "RTX-PRO-6000-96GB"),
        device_ids=("0x2BB510DE",),
        shapes=_RTX_PRO_6000_SHAPES,
        memory={"1g": 24, "1g+me": 24, "1g+gfx": 24, "1g+me.all": 24, "1g-me": 24,
                "2g": 48, "2g+gfx": 48, "2g+me.all": 48, "2g-me": 48, "4g": 96, "4g+gfx": 96},
        min_driver={},
        balanced={"1g": 2, "2g": 1},
        memory_slots=4, compute=4, total_memory_gb=96, placements_verified=False,
    ),
)

# MIG-capable parts the notes name without a full profile table: refused with this explanation.
UNMODELLED = {
    "GB200": "GB200 (186GB) profile table is not in the catalog",
    "B300": "B300 profile table is not in the catalog",
    "GB300": "GB300 profile table is not in the catalog",
    "RTX PRO 5000": "RTX PRO 5000 (48GB) profile table is not in the catalog",
    "RTX PRO 4500": "RTX PRO 4500 (32GB) profile table is not in the catalog",
}

MEDIA_ATTRIBUTES = frozenset(("me", "me.all"))


def _build_catalog():
    catalog = {}
    for facts in _MODELS:
        memory_slots, compute = facts["memory_slots"], facts["compute"]
        profiles = {}
        kinds = {}
        for kind, g, profile_id, size, starts, maximum, attributes in facts["shapes"]:
            base = "%dg.%dgb" % (g, facts["memory"][kind])
            suffix = ""
            for attribute in attributes:
                suffix += attribute if attribute.startswith("-") else "+" + attribute
            name = base + suffix
            profiles[name] = dict(
                name=name,
                kind=kind,
                gpu_instance_profile_id=profile_id,
                compute_slices=g,
                memory_slices=size,
                memory_gb=facts["memory"][kind],
                max_instances=maximum,
                placements=list(starts),
                attributes=list(attributes),
                media_extensions=bool(set(attributes) & MEDIA_ATTRIBUTES),
                sm_fraction="%d/%d" % (g, compute),
                memory_fraction="%d/%d" % (size, memory_slots),
                min_driver_branch=facts["min_driver"].get(kind),
            )
            kinds[kind] = name
        catalog[facts["name"]] = dict(
            name=facts["name"],
            description=facts["description"],
            aliases=list(facts["aliases"]),
            device_ids=list(facts["device_ids"]),
            memory_slices=memory_slots,
            compute_slices=compute,
            total_memory_gb=facts["total_memory_gb"],
            placements_verified=facts["placements_verified"],
            profiles=profiles,
            kinds=kinds,
            balanced={kinds[k]: n for k, n in facts["balanced"].items()},
        )
    return catalog


CATALOG = _build_catalog()
MODEL_NAMES = sorted(CATALOG)

# AKS: gpuInstanceProfile -> the profile kind it selects on every GPU of the node.
AKS_GPU_INSTANCE_PROFILES = {"MIG1g": "1g", "MIG2g": "2g", "MIG3g": "3g", "MIG4g": "4g", "MIG7g": "7g"}

# AKS VM sizes with MIG-capable GPUs. ``verified``: the AKS guide gives this size's profile table;
# the others apply the same g-count mapping to their GPU (not confirmed per size by the AKS docs).
AKS_VM_SIZES = {
    "Standard_ND96asr_v4": dict(gpu_model="A100-40GB", gpus=8, verified=True),
    "Standard_ND96amsr_A100_v4": dict(gpu_model="A100-80GB", gpus=8, verified=False),
    "Standard_NC24ads_A100_v4": dict(gpu_model="A100-80GB", gpus=1, verified=False),
    "Standard_NC48ads_A100_v4": dict(gpu_model="A100-80GB", gpus=2, verified=False),
    "Standard_NC96ads_A100_v4": dict(gpu_model="A100-80GB", gpus=4, verified=False),
    "Standard_ND96isr_H100_v5": dict(gpu_model="H100-80GB", gpus=8, verified=False),
    "Standard_NC40ads_H100_v5": dict(gpu_model="H100-94GB", gpus=1, verified=False),
    "Standard_NC80adis_H100_v5": dict(gpu_model="H100-94GB", gpus=2, verified=False),
}

# The AKS guide: multi-instance GPU node pools are not supported on Azure Linux, nor with the
# cluster autoscaler.
AKS_UNSUPPORTED_OS_SKUS = ("AzureLinux", "CBLMariner")

STRATEGIES = ("none", "single", "mixed")
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# the GPU Operator MIG manager: the node label it reads, and the state label it writes with its values
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
# (reconfigure-mig.sh, gpu-operator-mig.rst)
MIG_CONFIG_STATES = ("pending", "rebooting", "success", "failed")

# nvidia-smi compute-instance profile IDs by compute slices (nvidia-stack.md 5.3: 0 = 1 slice,
# 1 = 2, 2 = 3, 3 = 4, 4 = 7).
COMPUTE_INSTANCE_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}

# --------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------


def _normalise(name):
    text = re.sub(r"[^A-Z0-9]+", "-", str(name).upper()).strip("-")
    text = re.sub(r"^NVIDIA-", "", text)
    text = re.sub(r"-SHARED\Z", "", text)
    text = re.sub(r"-MIG-[0-9A-Z-]*\Z", "", text)  # GFD single-strategy product suffix
    return text


_ALIASES = {}
for _model in CATALOG.values():
    for _alias in [_model["name"]] + _model["aliases"]:
        _ALIASES[_normalise(_alias)] = _model["name"]


def gpu_model(name):
    """The catalog entry of a GPU model.

    ``name`` is a catalog name (``A100-40GB``), an nvidia-smi product name
    (``NVIDIA A100-SXM4-40GB``) or a GFD ``nvidia.com/gpu.product`` value
    (``NVIDIA-H100-80GB-HBM3``); ValueError naming the allowed models otherwise.
    """
    if isinstance(name, dict) and name.get("name") in CATALOG:
        return name
    key = _normalise(name or "")
    if key in _ALIASES:
        return CATALOG[_ALIASES[key]]
    for part, why in UNMODELLED.items():
        if key.startswith(_normalise(part)):
            raise ValueError("GPU model %r: %s; supported models: %s" % (name, why, ", ".join(MODEL_NAMES)))
    raise ValueError("unknown GPU model %r; supported models: %s (or their nvidia-smi/GFD product names)"
                     % (name, ", ".join(MODEL_NAMES)))


def find_gpu_model(product):
    """The catalog name for a product string, or None when it is not a known MIG-capable GPU."""
    return _ALIASES.get(_normalise(product or ""))


_PROFILE = re.compile(
    r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>(?:[+-][a-z.]+(?:,[a-z.]+)*)?)\Z")


def parse_profile(name):
    """Split a profile string (``[<C>c.]<G>g.<GB>gb[+attr]``) into (compute instance slices or None, GI name).

    Also accepts the nvidia-smi spelling (``MIG 1g.5gb``) and the device-plugin resource spelling
    (``nvidia.com/mig-1g.5gb.me``).
    """
    text = str(name).strip()
    text = re.sub(r"^(nvidia\.com/)?mig[- ]", "", text, flags=re.IGNORECASE).strip().lower()
    text = re.sub(r"\.(me\.all|me|gfx)\Z", r"+\1", text)  # resource spelling of attributes
    match = _PROFILE.match(text)
    if not match:
        raise ValueError("%r is not a MIG profile name (expected <G>g.<GB>gb, e.g. 1g.5gb or 1g.5gb+me)" % (name,))
    ci = int(match.group("c")) if match.group("c") else None
    gi_name = text[text.index(match.group("g") + "g."):] if ci is not None else text
    return ci, gi_name


def profile(model, name):
    """The catalog entry of a GPU-instance profile of a model; ValueError naming the model's profiles."""
    return profile_on(gpu_model(model), name)


def profile_on(entry, name):
    """``profile`` on a model entry already resolved by ``gpu_model`` (or a host's narrowed copy of one).

    Takes the entry as it is, so a caller that resolved the model once can look up many profiles.
    """
    ci, gi_name = parse_profile(name)
    if gi_name not in entry["profiles"]:
        raise ValueError("profile %r does not exist on %s; its profiles: %s"
                         % (name, entry["name"], ", ".join(profile_names_on(entry))))
    found = entry["profiles"][gi_name]
    if ci is not None and not 1 <= ci <= found["compute_slices"]:
        raise ValueError("profile %r: a compute instance of %d slices does not fit a %dg GPU instance"
                         % (name, ci, found["compute_slices"]))
    return found


def parted_profile_name(gpu_instance_profile, compute_slices=None):
    """mig-parted's name of a compute instance: ``<C>c.<GI profile>``, or the GI profile when C spans it."""
    found = gpu_instance_profile
    if compute_slices is None or compute_slices == found["compute_slices"]:
        return found["name"]
    return "%dc.%s" % (compute_slices, found["name"])


def profile_names(model):
    """The model's profile names, largest first."""
    return profile_names_on(gpu_model(model))


def profile_names_on(entry):
    """``profile_names`` of a model entry already resolved by ``gpu_model``."""
    return [p["name"] for p in sorted(entry["profiles"].values(),
                                      key=lambda p: (-p["compute_slices"], -p["memory_slices"], p["name"]))]


def resource_name(profile_name):
    """Device-plugin resource name of a profile under the mixed strategy (``+`` becomes ``.``)."""
    return MIG_RESOURCE_PREFIX + str(profile_name).replace("+", ".")


# --------------------------------------------------------------------------------------------
# AKS
# --------------------------------------------------------------------------------------------


def aks_vm_size(vm_size):
    """(canonical VM size, facts) of a MIG-capable AKS VM size (case-insensitive)."""
    for name, facts in AKS_VM_SIZES.items():
        if str(vm_size or "").lower() == name.lower():
            return name, facts
    raise ValueError("VM size %r has no MIG support in the catalog; supported VM sizes: %s"
                     % (vm_size, ", ".join(sorted(AKS_VM_SIZES))))


def aks_profile(vm_size, gpu_instance_profile):
    """What an AKS node pool of ``vm_size`` with ``gpuInstanceProfile`` gives on every node.

    Returns dict(vm_size, gpu_model, mig_profile, instances_per_gpu, gpus_per_vm, layout,
    instances_per_vm, verified). ValueError names the supported VM sizes or profiles.
    """
    size, facts = aks_vm_size(vm_size)
    if gpu_instance_profile not in AKS_GPU_INSTANCE_PROFILES:
        raise ValueError("gpu_instance_profile %r is not an AKS GPU instance profile; allowed: %s"
                         % (gpu_instance_profile, ", ".join(sorted(AKS_GPU_INSTANCE_PROFILES))))
    model = CATALOG[facts["gpu_model"]]
    name = model["kinds"][AKS_GPU_INSTANCE_PROFILES[gpu_instance_profile]]
    instances = model["profiles"][name]["max_instances"]
    return dict(
        vm_size=size,
        gpu_instance_profile=gpu_instance_profile,
        gpu_model=model["name"],
        mig_profile=name,
        instances_per_gpu=instances,
        gpus_per_vm=facts["gpus"],
        instances_per_vm=instances * facts["gpus"],
        layout={name: instances},
        verified=facts["verified"],
    )


def aks_pool_problems(vm_size, gpu_instance_profile, os_sku=None, enable_auto_scaling=None):
    """The AKS multi-instance GPU rules, written only here: ``option: problem`` lines (empty when fine).

    ``vm_size`` None skips the availability check (the caller reports a malformed size itself).
    """
    profile = gpu_instance_profile
    if profile is None:
        return []
    if profile not in AKS_GPU_INSTANCE_PROFILES:
        return ["gpu_instance_profile: %r is not one of: %s" % (profile, ", ".join(sorted(AKS_GPU_INSTANCE_PROFILES)))]
    problems = []
    if os_sku in AKS_UNSUPPORTED_OS_SKUS:
        problems.append("os_sku: %s: AKS does not support multi-instance GPU (gpu_instance_profile %s) on Azure Linux; "
                        "use Ubuntu" % (os_sku, profile))
    if os_sku and os_sku.lower().startswith("windows"):
        problems.append("os_sku: %s: multi-instance GPU node pools are Linux only" % os_sku)
    if enable_auto_scaling:
        problems.append("enable_autoscaling: the cluster autoscaler cannot be used with a multi-instance GPU pool "
                        "(gpu_instance_profile %s)" % profile)
    if vm_size is not None:
        try:
            aks_profile(vm_size, profile)
        except ValueError as exc:
            problems.append("gpu_instance_profile: %s is not available on vm_size %s: %s" % (profile, vm_size, exc))
    return problems
