# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The MIG catalog and placement solver: one table per fact.

Read by the AKS node-pool engine, the nvidia_device_plugin role (through the filters in
plugins/filter/mig.py) and the bare-metal MIG module. Nothing else keeps a copy.

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

import copy
import itertools
import json
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

# --------------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------------


def _normalise(name):
    text = re.sub(r"[^A-Z0-9]+", "-", str(name).upper()).strip("-")
    text = re.sub(r"^NVIDIA-", "", text)
    text = re.sub(r"-SHARED$", "", text)
    text = re.sub(r"-MIG-[0-9A-Z-]*$", "", text)  # GFD single-strategy product suffix
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
    r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>(?:[+-][a-z.]+(?:,[a-z.]+)*)?)$")


def parse_profile(name):
    """Split a profile string (``[<C>c.]<G>g.<GB>gb[+attr]``) into (compute instance slices or None, GI name).

    Also accepts the nvidia-smi spelling (``MIG 1g.5gb``) and the device-plugin resource spelling
    (``nvidia.com/mig-1g.5gb.me``).
    """
    text = str(name).strip()
    text = re.sub(r"^(nvidia\.com/)?mig[- ]", "", text, flags=re.IGNORECASE).strip().lower()
    text = re.sub(r"\.(me\.all|me|gfx)$", r"+\1", text)  # resource spelling of attributes
    match = _PROFILE.match(text)
    if not match:
        raise ValueError("%r is not a MIG profile name (expected <G>g.<GB>gb, e.g. 1g.5gb or 1g.5gb+me)" % (name,))
    ci = int(match.group("c")) if match.group("c") else None
    gi_name = text[text.index(match.group("g") + "g."):] if ci is not None else text
    return ci, gi_name


def profile(model, name):
    """The catalog entry of a GPU-instance profile of a model; ValueError naming the model's profiles."""
    entry = gpu_model(model)
    ci, gi_name = parse_profile(name)
    if gi_name not in entry["profiles"]:
        raise ValueError("profile %r does not exist on %s; its profiles: %s"
                         % (name, entry["name"], ", ".join(profile_names(entry))))
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
    entry = gpu_model(model)
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


# --------------------------------------------------------------------------------------------
# Layouts and the placement solver
# --------------------------------------------------------------------------------------------


def standard_layouts(model):
    """The mig-parted / GPU Operator standard configs of a model: name -> layout.

    ``all-disabled`` -> None, ``all-enabled`` -> {}, ``all-<profile>`` -> the profile at its maximum
    count (``+`` written as ``.`` in the name), ``all-balanced``.
    """
    entry = gpu_model(model)
    layouts = {"all-disabled": None, "all-enabled": {}}
    for name in profile_names(entry):
        layouts["all-" + name.replace("+", ".")] = {name: entry["profiles"][name]["max_instances"]}
    layouts["all-balanced"] = dict(entry["balanced"])
    return layouts


def _request_items(entry, request):
    """[(profile entry, pinned start or None, requested text, compute split or None)] of one GPU's request.

    A list names GPU instances (``1c.3g.20gb`` in a list is one GPU instance with one 1-slice compute
    instance). A dict is a mig-parted ``mig-devices`` map: its counts are compute instances, and
    those of one GPU-instance profile share GPU instances (see ``pack_compute_instances``).
    """
    items = []
    if request is None:
        return items
    if isinstance(request, dict):
        for gi_name, split in pack_compute_instances(entry, request):
            items.append((entry["profiles"][gi_name], None, gi_name, split))
        return items
    if not isinstance(request, (list, tuple)):
        raise ValueError("a MIG request is a {profile: count} dict or a list of profiles, got %r" % (request,))
    for text in request:
        text = str(text)
        start = None
        if "@" in text:
            text, _sep, where = text.partition("@")
            if not where.strip().isdigit():
                raise ValueError("placement of %r must be a slot number, e.g. 3g.20gb@4" % (text,))
            start = int(where)
        found = profile(entry, text)
        ci, _gi = parse_profile(text)
        items.append((found, start, text.strip(), None if ci is None else [ci]))
    return items


def pack_compute_instances(model, counts):
    """The GPU instances a mig-parted ``mig-devices`` map creates: [(GI profile name, [compute slices])].

    mig-parted counts compute instances: ``3g.40gb: 1`` is a GPU instance with one compute instance
    spanning it, ``1c.3g.40gb: 3`` three 1-slice compute instances. Its apply walks the profiles
    largest GPU instance first, then largest compute instance, and puts each compute instance into
    the GPU instance it created last when that has the same profile and room left, else into a new
    one (mig-parted pkg/mig/config SetMigConfig, types.MigConfig.Flatten). This is that first
    ordering, so ``{2c.3g.40gb: 1, 1c.3g.40gb: 2}`` is one 3g instance split 2+1 and another with 1.
    """
    entry = gpu_model(model)
    flat = []
    for name, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("count of %s must be a whole number >= 0, got %r" % (name, count))
        found = profile(entry, name)
        ci, _gi = parse_profile(name)
        slices = found["compute_slices"] if ci is None else ci
        problems = compute_split_problems(found, [slices])
        if problems:
            raise ValueError("profile %r: %s" % (name, "; ".join(problems)))
        flat.extend([(found, slices)] * count)
    flat.sort(key=lambda item: (-item[0]["compute_slices"], -item[1], item[0]["name"]))
    instances = []
    for found, slices in flat:
        last = instances[-1] if instances else None
        if last is not None and last[0] == found["name"] and sum(last[1]) + slices <= found["compute_slices"]:
            last[1].append(slices)
        else:
            instances.append((found["name"], [slices]))
    return instances


def _capacity_problems(entry, items):
    problems = []
    counts = {}
    for found, _start, _text, _split in items:
        counts[found["name"]] = counts.get(found["name"], 0) + 1
    for name in sorted(counts):
        maximum = entry["profiles"][name]["max_instances"]
        if counts[name] > maximum:
            problems.append("%d x %s requested, %s allows at most %d" % (counts[name], name, entry["name"], maximum))
    media = sum(n for name, n in counts.items() if entry["profiles"][name]["media_extensions"])
    if media > 1:
        problems.append("%d instances with media extensions (+me) requested, a GPU has one set (at most 1)" % media)
    compute = sum(found["compute_slices"] for found, _s, _t, _c in items)
    if compute > entry["compute_slices"]:
        problems.append("needs %d compute slices, %s has %d" % (compute, entry["name"], entry["compute_slices"]))
    memory = sum(found["memory_slices"] for found, _s, _t, _c in items)
    if memory > entry["memory_slices"]:
        problems.append("needs %d memory slices, %s has %d" % (memory, entry["name"], entry["memory_slices"]))
    for found, start, text, _split in items:
        if start is not None and start not in found["placements"]:
            problems.append("%s cannot start at slot %d; allowed starts: %s"
                            % (text, start, ", ".join(str(s) for s in found["placements"])))
    return problems


def _search(entry, items):
    """Backtracking over start slots; items already ordered. Returns the starts or None."""
    slots = [False] * entry["memory_slices"]
    chosen = [None] * len(items)

    def fits(start, size):
        return start + size <= len(slots) and not any(slots[start:start + size])

    def visit(index):
        if index == len(items):
            return True
        found, pinned, _text, _split = items[index]
        size = found["memory_slices"]
        starts = [pinned] if pinned is not None else found["placements"]
        floor = -1
        # identical unpinned instances: keep their starts increasing (prunes symmetric orders)
        if pinned is None and index > 0 and items[index - 1][1] is None and items[index - 1][0] is found:
            floor = chosen[index - 1]
        for start in starts:
            if start <= floor or not fits(start, size):
                continue
            for slot in range(start, start + size):
                slots[slot] = True
            chosen[index] = start
            if visit(index + 1):
                return True
            for slot in range(start, start + size):
                slots[slot] = False
        chosen[index] = None
        return False

    return list(chosen) if visit(0) else None


def place(model, request):
    """Place one GPU's MIG request.

    ``request`` is a {profile: count} dict or a list of profiles; a list entry may pin its start
    slot as ``profile@slot`` (existing instances, or explicit placements). Returns
    dict(fits, reason, placements, creation_order, compute_slices_used, memory_slices_used,
    placements_verified). Each placement is dict(profile, start, size, gpu_instance_profile_id).
    Unknown profiles and malformed requests raise ValueError.
    """
    entry = gpu_model(model)
    items = _request_items(entry, request)
    result = dict(
        gpu_model=entry["name"],
        fits=False,
        reason=None,
        placements=[],
        creation_order=[],
        compute_slices_used=sum(f["compute_slices"] for f, _s, _t, _c in items),
        memory_slices_used=sum(f["memory_slices"] for f, _s, _t, _c in items),
        placements_verified=entry["placements_verified"],
    )
    problems = _capacity_problems(entry, items)
    if problems:
        result["reason"] = "; ".join(problems)
        return result
    ordered = sorted(items, key=lambda it: (it[1] is None, -it[0]["memory_slices"], len(it[0]["placements"]),
                                            it[0]["name"], it[1] if it[1] is not None else -1))
    starts = _search(entry, ordered)
    if starts is None:
        rules = []
        for found in sorted({it[0]["name"]: it[0] for it in ordered}.values(), key=lambda f: -f["memory_slices"]):
            rules.append("%s takes %d slot%s starting at {%s}" % (
                found["name"], found["memory_slices"], "" if found["memory_slices"] == 1 else "s",
                ",".join(str(s) for s in found["placements"])))
        pinned = ["%s@%d" % (it[0]["name"], it[1]) for it in ordered if it[1] is not None]
        result["reason"] = "no non-overlapping placement on the %d slots of %s: %s%s" % (
            entry["memory_slices"], entry["name"], "; ".join(rules),
            ("; pinned: " + ", ".join(pinned)) if pinned else "")
        return result
    placements = []
    for (found, _pinned, _text, split), start in zip(ordered, starts):
        placement = dict(profile=found["name"], start=start, size=found["memory_slices"],
                         gpu_instance_profile_id=found["gpu_instance_profile_id"])
        if split is not None and split != [found["compute_slices"]]:
            placement["compute_instances"] = list(split)
        placements.append(placement)
    result["fits"] = True
    result["placements"] = sorted(placements, key=lambda p: (p["start"], p["profile"]))
    # the MIG guide: create the large instances first (e.g. 3g before 2g/1g for 3-2-1-1)
    result["creation_order"] = sorted(placements, key=lambda p: (-p["size"], p["start"]))
    return result


def require_fit(model, request):
    """The placements of a request that must fit; ValueError with the reason otherwise."""
    result = place(model, request)
    if not result["fits"]:
        raise ValueError("MIG layout %s does not fit one %s: %s" % (_describe(request), result["gpu_model"], result["reason"]))
    return result


def _describe(request):
    if isinstance(request, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, request[k]) for k in sorted(request))
    return "[%s]" % ", ".join(str(x) for x in request or [])


def _one_layout(entry, layout):
    """A single GPU's layout as a {profile: count} dict, or None for MIG disabled."""
    if layout is None:
        return None
    if isinstance(layout, str):
        text = layout.strip()
        if text in ("", "disabled", "none"):
            return None
        standard = standard_layouts(entry)
        if text in standard:
            return copy.deepcopy(standard[text])
        found = profile(entry, text)
        return {found["name"]: found["max_instances"]}
    if isinstance(layout, (list, tuple)):
        counts = {}
        for item in _request_items(entry, list(layout)):
            counts[item[0]["name"]] = counts.get(item[0]["name"], 0) + 1
        return counts
    if isinstance(layout, dict):
        counts = {}
        for name, count in layout.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError("count of %s must be a whole number >= 0, got %r" % (name, count))
            key = parted_profile_name(profile(entry, name), parse_profile(name)[0])
            if count:
                counts[key] = counts.get(key, 0) + count
        return counts
    raise ValueError("a MIG layout is a profile name, a standard config name (all-1g.5gb, all-balanced), "
                     "a {profile: count} dict or null, got %r" % (layout,))


def normalize_layout(model, layout, gpus=None):
    """Per-GPU layouts: a list of {profile: count} dicts (None where MIG is disabled).

    ``layout`` is one GPU's layout applied to every GPU (a profile name: that profile at its
    maximum count; a standard config name such as ``all-balanced``; a dict; null for MIG
    disabled), or a list with one layout per GPU. Every GPU's layout must fit (ValueError).
    """
    entry = gpu_model(model)
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise ValueError("gpus must be a whole number >= 1, got %r" % (gpus,))
    if isinstance(layout, (list, tuple)):
        if not layout:
            raise ValueError("the per-GPU layout list is empty")
        if gpus is not None and len(layout) != gpus:
            raise ValueError("the per-GPU layout list has %d entries for %d GPUs" % (len(layout), gpus))
        per_gpu = [_one_layout(entry, item) for item in layout]
    else:
        if gpus is None:
            raise ValueError("gpus is required when one layout applies to every GPU")
        one = _one_layout(entry, layout)
        per_gpu = [copy.deepcopy(one) for _index in range(gpus)]
    for index, one in enumerate(per_gpu):
        if one is None:
            continue
        result = place(entry, one)
        if not result["fits"]:
            raise ValueError("MIG layout of GPU %d %s does not fit %s: %s"
                             % (index, _describe(one), entry["name"], result["reason"]))
    return per_gpu


def _gi_name(name):
    return parse_profile(name)[1]


def expected_resources(model, gpus, layout, strategy):
    """The device-plugin resources one node advertises: {resource name: count}.

    - ``none``: ``nvidia.com/gpu`` = number of GPUs (MIG devices are not advertised);
    - ``single``: ``nvidia.com/gpu`` = number of MIG devices; every GPU must have MIG on with the
      same single profile;
    - ``mixed``: ``nvidia.com/mig-<profile>`` per profile, plus ``nvidia.com/gpu`` for GPUs with
      MIG disabled.
    """
    if strategy not in STRATEGIES:
        raise ValueError("MIG strategy %r is not one of: %s" % (strategy, ", ".join(STRATEGIES)))
    per_gpu = normalize_layout(model, layout, gpus)
    gpus = len(per_gpu)
    if strategy == "none":
        return {GPU_RESOURCE: gpus}
    if strategy == "single":
        kinds = set()
        total = 0
        for index, one in enumerate(per_gpu):
            if one is None:
                raise ValueError("single strategy needs MIG enabled on every GPU; GPU %d has MIG disabled "
                                 "(use the mixed strategy)" % index)
            kinds.update(one)
            total += sum(one.values())
        if len(kinds) > 1:
            raise ValueError("single strategy needs one MIG profile on every GPU (a homogeneous layout); "
                             "the layout has %s (use the mixed strategy)" % ", ".join(sorted(kinds)))
        if not total:
            raise ValueError("single strategy: the layout creates no MIG devices")
        return {GPU_RESOURCE: total}
    resources = {}
    for one in per_gpu:
        if one is None:
            resources[GPU_RESOURCE] = resources.get(GPU_RESOURCE, 0) + 1
            continue
        for name, count in one.items():
            key = resource_name(name)
            resources[key] = resources.get(key, 0) + count
    return resources


def _sharing(sharing):
    """Validated sharing settings: dict(strategy, replicas, rename_by_default, fail..., resources)."""
    sharing = dict(sharing or {})
    strategy = sharing.get("strategy") or "none"
    if strategy not in SHARING_STRATEGIES:
        raise ValueError("sharing.strategy %r is not one of: %s" % (strategy, ", ".join(SHARING_STRATEGIES)))
    unknown = set(sharing) - {"strategy", "replicas", "rename_by_default", "fail_requests_greater_than_one",
                              "resources"}
    if unknown:
        raise ValueError("unknown sharing options: %s" % ", ".join(sorted(unknown)))
    result = dict(strategy=strategy, replicas=1, rename_by_default=bool(sharing.get("rename_by_default")),
                  fail_requests_greater_than_one=sharing.get("fail_requests_greater_than_one"),
                  resources=sharing.get("resources"))
    if strategy == "none":
        return result
    replicas = sharing.get("replicas")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
        raise ValueError("sharing.replicas must be a whole number >= 2 for %s, got %r" % (strategy, replicas))
    result["replicas"] = replicas
    resources = result["resources"]
    if resources is not None and (not isinstance(resources, (list, tuple)) or not resources):
        raise ValueError("sharing.resources must be a non-empty list of resource names")
    if strategy == "mps" and resources is not None and list(resources) != [GPU_RESOURCE]:
        raise ValueError("sharing.resources: MPS shares only %s (full GPUs, no MIG devices)" % GPU_RESOURCE)
    return result


def shared_resources(resources, sharing, strategy=None):
    """Apply time-slicing/MPS replicas (and ``.shared`` renaming) to expected resources."""
    settings = _sharing(sharing)
    result = dict(resources)
    if settings["strategy"] == "none":
        return result
    names = list(settings["resources"] or sorted(resources))
    if settings["strategy"] == "mps":
        mig_devices = strategy == "single" or any(k.startswith(MIG_RESOURCE_PREFIX) for k in resources)
        if mig_devices:
            raise ValueError("MPS sharing is not supported for MIG devices (MIG strategy %s); "
                             "use time-slicing, or MIG disabled with MPS" % strategy)
        names = [GPU_RESOURCE]
    for name in names:
        if name not in resources:
            raise ValueError("sharing.resources: %s is not advertised by this layout (advertised: %s)"
                             % (name, ", ".join(sorted(resources))))
        count = resources[name] * settings["replicas"]
        if settings["rename_by_default"]:
            result[name] = 0
            result[name + ".shared"] = count
        else:
            result[name] = count
    return result


def expected_node_resources(model, gpus, layout, strategy, sharing=None):
    """``expected_resources`` with sharing applied; the number the verification compares."""
    settings = _sharing(sharing)
    if settings["strategy"] == "mps":
        per_gpu = normalize_layout(model, layout, gpus)
        if any(one is not None for one in per_gpu) and strategy != "none":
            raise ValueError("MPS sharing is not supported for MIG devices; disable MIG or use time-slicing")
    return shared_resources(expected_resources(model, gpus, layout, strategy), sharing, strategy)


def expected_labels(model, gpus, layout, strategy, sharing=None):
    """The GFD labels a node must carry: label -> rule.

    A rule is a string (exact value) or a dict: ``{"present": true}``, ``{"pattern": regex}``
    (re.search), or ``{"gpu_model": name}`` (the product names this catalog model when the
    product is known to the catalog).
    """
    entry = gpu_model(model)
    settings = _sharing(sharing)
    resources = expected_resources(entry, gpus, layout, strategy)
    per_gpu = normalize_layout(entry, layout, gpus)
    labels = {}
    shared_suffix = "(-SHARED)?" if settings["strategy"] != "none" and not settings["rename_by_default"] else ""
    if strategy == "single":
        name = next(iter(per_gpu[0]))
        labels["nvidia.com/mig.strategy"] = "single"
        labels["nvidia.com/gpu.count"] = str(resources[GPU_RESOURCE])
        labels["nvidia.com/gpu.product"] = {"pattern": "-MIG-%s%s$" % (re.escape(_gi_name(name)), shared_suffix)}
    elif strategy == "mixed":
        labels["nvidia.com/mig.strategy"] = "mixed"
        labels["nvidia.com/gpu.product"] = {"gpu_model": entry["name"]}
        for key, count in sorted(resources.items()):
            if key.startswith(MIG_RESOURCE_PREFIX):
                labels[key + ".count"] = str(count)
    else:
        labels["nvidia.com/gpu.count"] = str(len(per_gpu))
        labels["nvidia.com/gpu.product"] = {"gpu_model": entry["name"]}
    if settings["strategy"] != "none":
        names = [GPU_RESOURCE] if settings["strategy"] == "mps" else list(settings["resources"] or sorted(resources))
        for name in names:
            labels[name + ".replicas"] = str(settings["replicas"])
        if GPU_RESOURCE in names:
            labels["nvidia.com/gpu.sharing-strategy"] = settings["strategy"]
    return labels


def hardware_differences(model, gi_profiles=None, gi_placements=None):
    """Where nvidia-smi's own tables disagree with the catalog; [] when they agree.

    ``gi_profiles``: rows of ``_nvsmi.parse_gi_profiles`` (``-lgip``); ``gi_placements``: rows of
    ``_nvsmi.parse_gi_placements`` (``-lgipp``). Profiles the catalog has but the driver does not
    list are not differences (older drivers list fewer profiles).
    """
    entry = gpu_model(model)
    by_id = {p["gpu_instance_profile_id"]: p for p in entry["profiles"].values()
             if p["gpu_instance_profile_id"] is not None}
    differences = []
    for row in gi_profiles or []:
        found = entry["profiles"].get(row["profile"])
        if found is None:
            differences.append("GPU %s lists profile %s (ID %s), not in the %s catalog"
                               % (row["gpu"], row["profile"], row["profile_id"], entry["name"]))
            continue
        if found["gpu_instance_profile_id"] not in (None, row["profile_id"]):
            differences.append("GPU %s: %s has profile ID %s, the catalog says %s"
                               % (row["gpu"], row["profile"], row["profile_id"], found["gpu_instance_profile_id"]))
        if row.get("total") is not None and row["total"] != found["max_instances"]:
            differences.append("GPU %s: %s allows %s instances, the catalog says %s"
                               % (row["gpu"], row["profile"], row["total"], found["max_instances"]))
    for row in gi_placements or []:
        found = by_id.get(row["profile_id"])
        if found is None:
            differences.append("GPU %s lists placements for profile ID %s, not in the %s catalog"
                               % (row["gpu"], row["profile_id"], entry["name"]))
            continue
        if list(row["starts"]) != found["placements"] or row["size"] != found["memory_slices"]:
            differences.append("GPU %s: profile ID %s (%s) placements {%s}:%s, the catalog says {%s}:%s" % (
                row["gpu"], row["profile_id"], found["name"], ",".join(str(s) for s in row["starts"]), row["size"],
                ",".join(str(s) for s in found["placements"]), found["memory_slices"]))
    return differences


# --------------------------------------------------------------------------------------------
# Configuration documents
# --------------------------------------------------------------------------------------------


def mig_parted_config(model, layout, name="custom", gpus=None, device_filter=True, include_defaults=True):
    """A mig-parted ``version: v1`` config holding ``layout`` as config ``name``.

    ``layout`` is one GPU's layout for every GPU (``devices: all``) or a per-GPU list (GPUs with
    the same layout share an entry). ``device_filter`` adds the model's PCI device IDs so the
    config only applies to this GPU model. ``include_defaults`` adds ``all-disabled`` and
    ``all-enabled``.
    """
    entry = gpu_model(model)
    if not name or not isinstance(name, str):
        raise ValueError("name: the config name must be a non-empty string")
    if include_defaults and name in ("all-disabled", "all-enabled"):
        raise ValueError("name: %s is one of the default configs; pick another name or include_defaults=false" % name)
    filters = None
    if device_filter:
        filters = entry["device_ids"][0] if len(entry["device_ids"]) == 1 else list(entry["device_ids"])
    if isinstance(layout, (list, tuple)):
        per_gpu = normalize_layout(entry, layout, len(layout) if gpus is None else gpus)
        groups = []
        for index, one in enumerate(per_gpu):
            for group in groups:
                if group[0] == one:
                    group[1].append(index)
                    break
            else:
                groups.append((one, [index]))
        entries = [_parted_entry(one, devices, filters) for one, devices in groups]
    else:
        one = normalize_layout(entry, layout, 1)[0]
        entries = [_parted_entry(one, "all", filters)]
    configs = {}
    if include_defaults:
        configs["all-disabled"] = [_parted_entry(None, "all", None)]
        configs["all-enabled"] = [_parted_entry({}, "all", None)]
    configs[name] = entries
    return {"version": "v1", "mig-configs": configs}


def _parted_entry(layout, devices, filters):
    entry = {"devices": devices}
    if filters:
        entry["device-filter"] = filters
    entry["mig-enabled"] = layout is not None
    if layout is not None:
        entry["mig-devices"] = {name: count for name, count in sorted(layout.items()) if count}
    return entry


def device_plugin_config(strategy, sharing=None, resources=None, fail_on_init_error=None):
    """A k8s-device-plugin config file (``version: v1``): flags.migStrategy and the sharing block.

    ``resources`` are the resources the node advertises (from expected_resources); under the
    mixed strategy time-slicing shares every MIG resource unless ``sharing.resources`` names them.
    """
    if strategy not in STRATEGIES:
        raise ValueError("MIG strategy %r is not one of: %s" % (strategy, ", ".join(STRATEGIES)))
    settings = _sharing(sharing)
    config = {"version": "v1", "flags": {"migStrategy": strategy}}
    if fail_on_init_error is not None:
        config["flags"]["failOnInitError"] = bool(fail_on_init_error)
    if settings["strategy"] == "none":
        return config
    names = settings["resources"]
    if names is None:
        if settings["strategy"] == "mps" or not resources:
            names = [GPU_RESOURCE]
        else:
            names = sorted(resources)
    if settings["strategy"] == "mps" and strategy != "none":
        raise ValueError("MPS sharing is not supported for MIG devices; use mig strategy none or time-slicing")
    block = {"renameByDefault": settings["rename_by_default"]}
    if settings["fail_requests_greater_than_one"] is not None:
        block["failRequestsGreaterThanOne"] = bool(settings["fail_requests_greater_than_one"])
    block["resources"] = [{"name": n, "replicas": settings["replicas"]} for n in names]
    config["sharing"] = {"timeSlicing" if settings["strategy"] == "time-slicing" else "mps": block}
    return config


# --------------------------------------------------------------------------------------------
# Verification against Kubernetes Nodes
# --------------------------------------------------------------------------------------------


def _quantity(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    return int(text) if re.match(r"^\d+$", text) else text


def _is_gpu_resource(name):
    return name == GPU_RESOURCE or name.startswith(GPU_RESOURCE + ".") or name.startswith(MIG_RESOURCE_PREFIX)


def _label_problem(key, rule, labels):
    have = labels.get(key)
    if isinstance(rule, dict):
        if have is None:
            return "label %s missing" % key
        if "pattern" in rule and not re.search(rule["pattern"], have):
            return "label %s=%s does not match %s" % (key, have, rule["pattern"])
        if "gpu_model" in rule:
            found = find_gpu_model(have)
            if found is not None and found != rule["gpu_model"]:
                return "label %s=%s is a %s, expected %s" % (key, have, found, rule["gpu_model"])
        return None
    if have is None:
        return "label %s missing (expected %s)" % (key, rule)
    if str(have) != str(rule):
        return "label %s=%s, expected %s" % (key, have, rule)
    return None


def node_problems(node, resources, labels=None):
    """What differs on one Node (a Kubernetes Node document) from the expectation; [] when none."""
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    node_labels = (node.get("metadata") or {}).get("labels") or {}
    problems = []
    for name in sorted(resources):
        want = resources[name]
        have = allocatable.get(name)
        if have is None:
            if want:
                problems.append("allocatable %s missing (expected %s)" % (name, want))
            continue
        if _quantity(have) != want:
            problems.append("allocatable %s=%s, expected %s" % (name, have, want))
    for name in sorted(allocatable):
        if _is_gpu_resource(name) and name not in resources and _quantity(allocatable[name]) not in (0, "0"):
            problems.append("allocatable %s=%s not expected" % (name, allocatable[name]))
    for key in sorted(labels or {}):
        problem = _label_problem(key, labels[key], node_labels)
        if problem:
            problems.append(problem)
    return problems


def _selected(node, selector):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == str(v) for k, v in (selector or {}).items())


def verify_nodes(nodes, resources, labels=None, selector=None, min_nodes=1):
    """Compare every Node of a pool with the expectation.

    ``nodes``: Kubernetes Node documents (kubernetes.core.k8s_info ``resources``); ``selector``
    keeps only nodes carrying these labels (the check does not rely on the API server having
    applied the label selector). Returns dict(ok, nodes=[dict(name, ok, problems,
    expected_resources, actual_resources)], problems=[text]).
    """
    report = dict(ok=True, nodes=[], problems=[])
    pool = [n for n in nodes or [] if _selected(n, selector)]
    for node in sorted(pool, key=lambda n: (n.get("metadata") or {}).get("name") or ""):
        name = (node.get("metadata") or {}).get("name")
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        problems = node_problems(node, resources, labels)
        actual = {k: _quantity(v) for k, v in allocatable.items() if _is_gpu_resource(k)}
        summary = "Node %s: expected %s, actual %s." % (name, _json(resources), _json(actual))
        report["nodes"].append(dict(name=name, ok=not problems, problems=problems,
                                    expected_resources=dict(resources), actual_resources=actual, summary=summary))
        for problem in problems:
            report["problems"].append("node %s: %s" % (name, problem))
    if len(pool) < (min_nodes or 0):
        report["problems"].insert(0, "found %d node(s) matching %s, expected at least %d"
                                  % (len(pool), _describe_selector(selector), min_nodes))
    report["ok"] = not report["problems"]
    return report


def _json(value):
    return json.dumps(value, sort_keys=True)


def _describe_selector(selector):
    if not selector:
        return "(all nodes)"
    return ",".join("%s=%s" % (k, selector[k]) for k in sorted(selector))


# --------------------------------------------------------------------------------------------
# MIG geometry of Kubernetes nodes through the GPU Operator's MIG manager (role mig_manager)
# --------------------------------------------------------------------------------------------

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
# reconfigure-mig.sh / gpu-operator-mig.rst: the states the MIG manager writes
MIG_CONFIG_STATES = ("pending", "rebooting", "success", "failed")


def _entry_applies(entry, model):
    """Whether a mig-parted config entry applies to GPUs of ``model`` (its device-filter; no filter: every GPU)."""
    filters = entry.get("device-filter")
    if filters is None or model is None:
        return True
    filters = [filters] if isinstance(filters, str) else list(filters)
    wanted = {d.upper() for d in model["device_ids"]}
    return any(str(f).upper() in wanted for f in filters)


def parted_config_problems(config, name, model=None, source="the mig-parted config"):
    """Why config ``name`` of a mig-parted document cannot be applied to GPUs of ``model``; [] when it can.

    ``config`` is a parsed mig-parted ``version: v1`` document, or None for the names the GPU
    Operator's default config has for the model (``standard_layouts``); ``model`` may be None
    (unknown GPU: only the name is checked).
    """
    entry = gpu_model(model) if model is not None else None
    if config is None:
        if entry is None:
            return ["no mig-parted config and no GPU model to check config %r against" % (name,)]
        names = sorted(standard_layouts(entry))
        if name in names:
            return []
        return ["config %r is not one of the GPU Operator's default configs for %s: %s" % (name, entry["name"], ", ".join(names))]
    if not isinstance(config, dict) or config.get("version") != "v1" or not isinstance(config.get("mig-configs"), dict):
        return ["%s is not a mig-parted config (version: v1 with mig-configs)" % source]
    configs = config["mig-configs"]
    if name not in configs:
        return ["config %r is not in %s; its configs: %s" % (name, source, ", ".join(sorted(configs)) or "none")]
    entries = configs[name]
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        return ["config %r of %s is not a non-empty list of entries" % (name, source)]
    applying = [e for e in entries if _entry_applies(e, entry)]
    if not applying:
        return ["config %r of %s has no entry for %s (device IDs %s)" % (
            name, source, entry["name"], ", ".join(entry["device_ids"]))]
    problems = []
    for number, one in enumerate(applying):
        devices = one.get("mig-devices") or {}
        if entry is None or not one.get("mig-enabled") or not devices:
            continue
        try:
            result = place(entry, dict(devices))
        except ValueError as exc:
            problems.append("config %r of %s: %s" % (name, source, exc))
            continue
        if not result["fits"]:
            problems.append("config %r of %s: mig-devices %s do not fit one %s: %s" % (
                name, source, _describe(dict(devices)), entry["name"], result["reason"]))
    return problems


def mig_config_state(node, config):
    """One Node's MIG manager state for ``config``: dict(name, config, state, done, failed)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    have, state = labels.get(MIG_CONFIG_LABEL), labels.get(MIG_CONFIG_STATE_LABEL)
    current = have == config
    return dict(name=(node.get("metadata") or {}).get("name"), config=have, state=state,
                done=current and state == "success", failed=current and state == "failed")


def _event_time(event):
    return str(event.get("lastTimestamp") or event.get("eventTime") or (event.get("metadata") or {}).get("creationTimestamp") or "")


def node_events(events, node_name, count):
    """The last ``count`` Events about a Node, oldest first, as ``<type> <reason>: <message> (xN)`` lines."""
    about = [e for e in events or [] if (e.get("involvedObject") or {}).get("kind") == "Node"
             and (e.get("involvedObject") or {}).get("name") == node_name]
    lines = []
    for event in sorted(about, key=_event_time)[-count:] if count else []:
        text = "%s %s: %s" % (event.get("type") or "Normal", event.get("reason") or "-", " ".join(str(event.get("message") or "").split()))
        if (event.get("count") or 1) > 1:
            text += " (x%d)" % event["count"]
        lines.append(text)
    return lines


def mig_config_status(nodes, config, events=None, event_count=10):
    """Where the MIG manager stands on every node for ``config``.

    Returns dict(converged (every node success), failed (names of nodes in state failed), nodes
    (mig_config_state of each), message (the nodes not done, each with its state and its recent
    Events, for a failure)).
    """
    states = [mig_config_state(n, config) for n in sorted(nodes or [], key=lambda n: (n.get("metadata") or {}).get("name") or "")]
    lines = []
    for state in states:
        if state["done"]:
            continue
        if state["config"] != config:
            what = "%s=%s (expected %s)" % (MIG_CONFIG_LABEL, state["config"], config)
        else:
            what = "%s=%s" % (MIG_CONFIG_STATE_LABEL, state["state"] or "(not set)")
        hint = {"failed": "the MIG manager could not apply it; see the nvidia-mig-manager pod's log on the node",
                "rebooting": "the MIG manager is rebooting the node (WITH_REBOOT=true)"}.get(
            state["state"], "the MIG manager has not finished; is nvidia-mig-manager running there "
                            "(label nvidia.com/gpu.deploy.mig-manager=true)?")
        recent = node_events(events, state["name"], event_count)
        lines.append("node %s: %s for config %s - %s; recent events: %s" % (
            state["name"], what, config, hint, "; ".join(recent) if recent else "none"))
    return dict(converged=bool(states) and all(s["done"] for s in states),
                failed=[s["name"] for s in states if s["failed"]], nodes=states, message=" | ".join(lines))


# --------------------------------------------------------------------------------------------
# Compute instances and the nearest layout that fits (bare-metal MIG module)
# --------------------------------------------------------------------------------------------

# nvidia-smi compute-instance profile IDs by compute slices (nvidia-stack.md 5.3: 0 = 1 slice,
# 1 = 2, 2 = 3, 3 = 4, 4 = 7).
COMPUTE_INSTANCE_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}


def compute_split_problems(gpu_instance_profile, slices):
    """Why compute instances of ``slices`` (a list of slice counts) do not fit one GPU instance; [] when they do."""
    found = gpu_instance_profile
    problems = []
    for size in slices:
        if isinstance(size, bool) or not isinstance(size, int) or size not in COMPUTE_INSTANCE_PROFILE_IDS:
            problems.append("compute instance size %r is not one of %s" % (
                size, ", ".join(str(s) for s in sorted(COMPUTE_INSTANCE_PROFILE_IDS))))
        elif size > found["compute_slices"]:
            problems.append("a %d-slice compute instance does not fit %s (%d compute slices)"
                            % (size, found["name"], found["compute_slices"]))
    if not problems and sum(slices) > found["compute_slices"]:
        problems.append("compute instances of %s slices need %d compute slices, %s has %d" % (
            "+".join(str(s) for s in slices), sum(slices), found["name"], found["compute_slices"]))
    return problems


def nearest_fit(model, request):
    """The largest part of ``request`` (a list of profiles, ``@slot`` pins allowed) that fits, or None.

    Drops as few instances as possible; among equal drops keeps the most compute, then memory.
    """
    entry = gpu_model(model)
    items = list(request)
    for drop in range(1, len(items) + 1):
        best = None
        for kept in itertools.combinations(range(len(items)), len(items) - drop):
            candidate = [items[i] for i in kept]
            if not candidate or not place(entry, candidate)["fits"]:
                continue
            found = [profile(entry, str(text).partition("@")[0]) for text in candidate]
            score = (sum(f["compute_slices"] for f in found), sum(f["memory_slices"] for f in found))
            if best is None or score > best[0]:
                best = (score, candidate)
        if best is not None:
            return best[1]
    return None
