# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A strict fake of ``nvidia-smi`` for tests (see tests/fakes/README.md).

The executable ``tests/fakes/nvidia-smi`` calls ``main()``. State lives in the JSON file named by
``FAKE_NVIDIA_SMI_STATE`` (created from ``FAKE_NVIDIA_SMI_PRESET`` on first use); every call is
appended to ``FAKE_NVIDIA_SMI_LOG`` (JSON lines: argv, write, rc) so tests can prove that nothing
was written.

The fake is an oracle independent of the collection: its MIG profiles, placements and limits are
read from the published ``nvidia-smi mig -lgip``/``-lgipp`` captures under
tests/unit/plugins/module_utils/fixtures/nvsmi/ plus a small table of what the captures lack (the
MIG user guide's profile names and instance counts, nvidia-stack.md 5.1). It never imports or reads
the collection's own MIG catalog, so a wrong catalog shows up as a disagreement in the tests.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# nvidia-smi exit codes (nvidia-smi(1), RETURN VALUE)
RC_OK, RC_INVALID, RC_NOT_SUPPORTED, RC_NO_PERMISSION, RC_NOT_FOUND, RC_NO_DRIVER, RC_OTHER = 0, 2, 3, 4, 6, 9, 255

DRIVER_NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                     "Make sure that the latest NVIDIA driver is installed and running.\n")
INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

# GPUs the fake can be: product name, memory (MiB), compute capability, MIG model (a key of
# MIG_MODELS; None: not MIG-capable) and the engine family that sets the -lgip SM/DEC/CE/JPEG/OFA columns.
GPU_KINDS = {
    "A100-40GB": dict(name="NVIDIA A100-SXM4-40GB", memory_mib=40960, compute_cap="8.0", model="A100-40GB",
                      family="ampere"),
    "A100-80GB": dict(name="NVIDIA A100-SXM4-80GB", memory_mib=81920, compute_cap="8.0", model="A100-80GB",
                      family="ampere"),
    "H100-80GB": dict(name="NVIDIA H100 80GB HBM3", memory_mib=81559, compute_cap="9.0", model="H100-80GB",
                      family="hopper"),
    "H200-141GB": dict(name="NVIDIA H200", memory_mib=143771, compute_cap="9.0", model="H200-141GB",
                       family="hopper"),
    "A30-24GB": dict(name="NVIDIA A30", memory_mib=24576, compute_cap="8.0", model="A30-24GB", family="ampere"),
    "L4": dict(name="NVIDIA L4", memory_mib=23034, compute_cap="8.9", model=None, family=None),
    "T4": dict(name="Tesla T4", memory_mib=15360, compute_cap="7.5", model=None, family=None),
    "V100": dict(name="Tesla V100-SXM2-16GB", memory_mib=16384, compute_cap="7.0", model=None, family=None),
}

# --------------------------------------------------------------------------------------------
# MIG profiles: the fake's own data (never the collection's catalog)
# --------------------------------------------------------------------------------------------

# The published nvidia-smi outputs (provenance: README.md there; nvidia-stack.md 5.2 and 5.3).
CAPTURES = os.path.join(os.path.dirname(HERE), "unit", "plugins", "module_utils", "fixtures", "nvsmi")

# Per MIG model: the ``mig -lgipp`` capture that gives its GI profile IDs, placements (starts) and
# sizes in slots, in nvidia-smi's order, and the ``mig -lgip`` capture where one exists (profile
# names, IDs, instance totals, memory and engine columns).
# - A100-40GB, A30-24GB: their own -lgipp captures; H100-80GB: its own -lgip capture (the fixtures
#   README: rows 19, 20, 15 and 0 verbatim, rows 14, 9 and 5 rebuilt from the notes' memory/SM figures).
# - A100-80GB, H100-80GB, H200-141GB have no -lgipp capture file of their own: nvidia-stack.md 5.2
#   prints one 8-slot placement table, captured on A100-40/80 and H100-80 and valid for H200 by the
#   MIG guide's shared slot diagram; lgipp--A100-40GB-8-slot.txt is that table.
_CAPTURE_FILES = {
    "A100-40GB": ("lgipp--A100-40GB-8-slot.txt", None),
    "A100-80GB": ("lgipp--A100-40GB-8-slot.txt", None),
    "H100-80GB": ("lgipp--A100-40GB-8-slot.txt", "lgip--H100-80GB.txt"),
    "H200-141GB": ("lgipp--A100-40GB-8-slot.txt", None),
    "A30-24GB": ("lgipp--A30-24GB.txt", None),
}

# What -lgipp does not print: GI profile ID -> (profile name, maximum instances), from the MIG
# guide's supported-profiles table (nvidia-stack.md 5.1) and the ID list at the top of section 5
# (19 = 1g, 20 = 1g+me, 15 = 1g double memory, 14 = 2g, 9 = 3g, 5 = 4g, 0 = 7g; the A30 IDs are
# the annotated A30 capture in 5.2). H100-80GB needs no entry: its -lgip capture prints both.
# A100-80GB and H200-141GB have no capture at all: names and counts are the guide's table alone.
_GUIDE_PROFILES = {
    "A100-40GB": {19: ("1g.5gb", 7), 20: ("1g.5gb+me", 1), 15: ("1g.10gb", 4), 14: ("2g.10gb", 3),
                  9: ("3g.20gb", 2), 5: ("4g.20gb", 1), 0: ("7g.40gb", 1)},
    "A100-80GB": {19: ("1g.10gb", 7), 20: ("1g.10gb+me", 1), 15: ("1g.20gb", 4), 14: ("2g.20gb", 3),
                  9: ("3g.40gb", 2), 5: ("4g.40gb", 1), 0: ("7g.80gb", 1)},
    "H200-141GB": {19: ("1g.18gb", 7), 20: ("1g.18gb+me", 1), 15: ("1g.35gb", 4), 14: ("2g.35gb", 3),
                   9: ("3g.71gb", 2), 5: ("4g.71gb", 1), 0: ("7g.141gb", 1)},
    "A30-24GB": {14: ("1g.6gb", 4), 21: ("1g.6gb+me", 1), 5: ("2g.12gb", 2), 6: ("2g.12gb+me", 1), 0: ("4g.24gb", 1)},
}

# -lgip columns (SM, DEC, ENC, CE, JPEG, OFA) per profile shape. Hopper (H100-80GB, and H200-141GB,
# the same GH100 die without a capture of its own): the H100 -lgip capture's rows. Ampere: the notes'
# SM counts (14 per 1g slice, nvidia-stack.md 5.3), engines per the MIG guide.
_AMPERE_ENGINES = {"1g": (14, 0, 0, 1, 0, 0), "1g+me": (14, 1, 0, 1, 1, 1), "1g2": (14, 1, 0, 1, 0, 0),
                   "2g": (28, 1, 0, 2, 0, 0), "2g+me": (28, 1, 0, 2, 1, 1), "3g": (42, 2, 0, 3, 0, 0),
                   "4g": (56, 2, 0, 4, 0, 0), "7g": (98, 5, 0, 7, 1, 1)}
# -lgip memory (GiB) per shape where the notes give nvidia-smi's figure: A100-40GB from nvidia-stack.md
# 5.3; H100-80GB from its capture, which A100-80GB (same profile sizes, no capture) reuses. Other
# models: 97.5 % of the GB in the profile name.
_A100_40GB_MEMORY_GIB = {"1g": "4.75", "1g+me": "4.75", "1g2": "9.75", "2g": "9.75", "3g": "19.62", "4g": "19.62",
                         "7g": "39.50"}

# Compute-instance profile IDs by compute slices (nvidia-stack.md 5.3: 0 = 1 slice, 1 = 2, 2 = 3, 3 = 4, 4 = 7).
CI_PROFILE_IDS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}

_LGIPP_LINE = re.compile(r"^GPU\s+(\d+) Profile ID\s+(\d+) (?:Placements|Placement ): \{(\d+(?:,\d+)*)\}:(\d+)$")
_LGIP_FIRST = re.compile(r"^\|\s+(\d+)\s+MIG (\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|$")
_LGIP_SECOND = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+\|$")
_PROFILE_NAME = re.compile(r"^(\d+)g\.(\d+)gb(\+me)?$")


def _read_capture(name):
    with open(os.path.join(CAPTURES, name), encoding="utf-8") as handle:
        return handle.read().splitlines()


def parse_lgipp_capture(name):
    """``[(profile id, starts, size)]`` of GPU 0 in a ``mig -lgipp`` capture, in its order."""
    rows = []
    for line in _read_capture(name):
        match = _LGIPP_LINE.match(line)
        if not match:
            raise ValueError("%s: not a -lgipp line: %r" % (name, line))
        if match.group(1) == "0":
            rows.append((int(match.group(2)), [int(s) for s in match.group(3).split(",")], int(match.group(4))))
    return rows


def parse_lgip_capture(name):
    """``{profile id: row}`` of GPU 0 in a ``mig -lgip`` capture (name, total, memory GiB text, engines)."""
    rows = {}
    lines = _read_capture(name)
    for number, line in enumerate(lines):
        match = _LGIP_FIRST.match(line)
        if not match or match.group(1) != "0":
            continue
        second = _LGIP_SECOND.match(lines[number + 1]) if number + 1 < len(lines) else None
        if not second:
            raise ValueError("%s: profile row without its CE/JPEG/OFA line: %r" % (name, line))
        sm, dec, enc = (int(match.group(i)) for i in (8, 9, 10))
        ce, jpeg, ofa = (int(second.group(i)) for i in (1, 2, 3))
        rows[int(match.group(3))] = dict(name=match.group(2), total=int(match.group(5)), memory_gib=match.group(6),
                                         engines=(sm, dec, enc, ce, jpeg, ofa))
    if not rows:
        raise ValueError("%s: no profile rows" % name)
    return rows


def _shape(compute, size, media):
    """The profile's shape: ``1g``, ``1g+me``, ``1g2`` (double-memory 1g), ``2g``, ``2g+me``, ``3g``, ``4g``, ``7g``."""
    return "%dg%s%s" % (compute, "2" if compute == 1 and size == 2 else "", "+me" if media else "")


def _build_model(model, hopper):
    """A MIG model of the fake: slots, compute slices and its GI profiles (by name, in -lgipp order)."""
    lgipp, lgip = _CAPTURE_FILES[model]
    listed = parse_lgip_capture(lgip) if lgip else {}
    named = {pid: (row["name"], row["total"]) for pid, row in listed.items()} or _GUIDE_PROFILES[model]
    placements = parse_lgipp_capture(lgipp)
    if sorted(named) != sorted(pid for pid, _starts, _size in placements):
        raise ValueError("%s: profile IDs of %s and its names do not match" % (model, lgipp))
    profiles = {}
    for pid, starts, size in placements:
        name, maximum = named[pid]
        match = _PROFILE_NAME.match(name)
        if not match:
            raise ValueError("%s: profile ID %d has an unexpected name %r" % (model, pid, name))
        compute, media = int(match.group(1)), bool(match.group(3))
        shape = _shape(compute, size, media)
        if pid in listed:
            engines, memory_gib = listed[pid]["engines"], listed[pid]["memory_gib"]
        elif GPU_KINDS[model]["family"] == "hopper":
            engines, memory_gib = hopper[shape]["engines"], None
        else:
            engines, memory_gib = _AMPERE_ENGINES[shape], None
        if memory_gib is None and model == "A100-40GB":
            memory_gib = _A100_40GB_MEMORY_GIB[shape]
        elif memory_gib is None and model == "A100-80GB":
            memory_gib = hopper[shape]["memory_gib"]
        profiles[name] = dict(name=name, kind=shape, gpu_instance_profile_id=pid, compute_slices=compute,
                              memory_slices=size, memory_gb=int(match.group(2)), max_instances=maximum,
                              placements=starts, media_extensions=media, engines=engines,
                              memory_gib=memory_gib or "%.2f" % (int(match.group(2)) * 0.975))
    return dict(name=model, profiles=profiles,
                memory_slices=max(start + p["memory_slices"] for p in profiles.values() for start in p["placements"]),
                compute_slices=max(p["compute_slices"] for p in profiles.values()))


def _build_models():
    hopper_capture = parse_lgip_capture(_CAPTURE_FILES["H100-80GB"][1])
    hopper = {}
    for pid, _starts, size in parse_lgipp_capture(_CAPTURE_FILES["H100-80GB"][0]):
        match = _PROFILE_NAME.match(hopper_capture[pid]["name"])
        hopper[_shape(int(match.group(1)), size, bool(match.group(3)))] = hopper_capture[pid]
    return {model: _build_model(model, hopper) for model in _CAPTURE_FILES}


# model -> dict(name, memory_slices, compute_slices, profiles={name: profile}); a profile has name,
# kind (shape), gpu_instance_profile_id, compute_slices, memory_slices, memory_gb, max_instances,
# placements (starts), media_extensions and the -lgip columns engines and memory_gib.
MIG_MODELS = _build_models()

WRITE_FLAGS = ("-cgi", "--create-gpu-instance", "-dgi", "--destroy-gpu-instance", "-cci",
               "--create-compute-instance", "-dci", "--destroy-compute-instance", "-mig", "--multi-instance-gpu",
               "-c", "--compute-mode", "-r", "--gpu-reset")


class Exit(Exception):
    """Stop with this output and exit code."""

    def __init__(self, rc, output):
        super().__init__(output)
        self.rc, self.output = rc, output


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


def new_gpu(kind, index, mig=False):
    facts = GPU_KINDS[kind]
    seed = "%02x%02x" % (index, sorted(GPU_KINDS).index(kind))
    mode = ("Enabled" if mig else "Disabled") if facts["model"] else None
    return dict(index=index, kind=kind, model=facts["model"], family=facts["family"], name=facts["name"],
                uuid="GPU-%s0000-1111-2222-3333-4444555566%02d" % (seed, index),
                pci_bus_id="00000000:%02X:00.0" % (0x18 + 0x1D * index % 0xE0),
                memory_total_mib=facts["memory_mib"], compute_cap=facts["compute_cap"],
                mig_current=mode, mig_pending=mode, compute_mode="Default", processes=[], gpu_instances=[])


def new_state(kinds="H100-80GB", gpus=1, driver_version="550.54.14", cuda_version="12.4", mig=False):
    """A fresh host: ``kinds`` is one GPU kind for ``gpus`` GPUs or a list of kinds (one per GPU)."""
    if isinstance(kinds, str):
        kinds = [kinds] * gpus
    for kind in kinds:
        if kind not in GPU_KINDS:
            raise ValueError("unknown fake GPU kind %r; kinds: %s" % (kind, ", ".join(sorted(GPU_KINDS))))
    return dict(driver_version=driver_version, cuda_version=cuda_version, driver_loaded=True, root=True,
                reset_supported=True, hidden_profile_ids=[], next_uuid=1, faults=[],
                gpus=[new_gpu(kind, index, mig) for index, kind in enumerate(kinds)])


def preset_state(preset):
    """``<kind>[x<gpus>][,mig]`` (e.g. ``A100-40GB x2``, ``H100-80GB,mig``), ``none`` (no GPU) or ``no-driver``."""
    text = (preset or "H100-80GB").strip()
    if text == "none":
        return dict(new_state(gpus=1), gpus=[])
    if text == "no-driver":
        return dict(new_state(gpus=1), driver_loaded=False)
    mig = text.endswith(",mig")
    text = text[:-4] if mig else text
    match = re.match(r"^(\S+?)\s*(?:x\s*(\d+))?$", text)
    if not match:
        raise ValueError("FAKE_NVIDIA_SMI_PRESET %r: expected <kind>[ x<count>][,mig]" % preset)
    return new_state(match.group(1), int(match.group(2) or 1), mig=mig)


class Store:
    """The state file, locked for the duration of one call."""

    def __init__(self, path):
        self.path = path
        self.handle = None

    def __enter__(self):
        self.handle = open(self.path + ".lock", "a+")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as handle:
                return json.load(handle)
        state = preset_state(os.environ.get("FAKE_NVIDIA_SMI_PRESET"))
        self.save(state)
        return state

    def save(self, state):
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


# --------------------------------------------------------------------------------------------
# Profile views
# --------------------------------------------------------------------------------------------


def _profiles(state, gpu):
    """The GI profiles the driver offers on this GPU (in the -lgipp capture's order), minus hidden ones (old drivers)."""
    hidden = set(state.get("hidden_profile_ids") or [])
    return [p for p in MIG_MODELS[gpu["model"]]["profiles"].values() if p["gpu_instance_profile_id"] not in hidden]


def _profile_by(state, gpu, token):
    """A GI profile from an ID or a name (``9``, ``3g.20gb``, ``MIG 3g.20gb``); None when unknown."""
    token = token.strip()
    for found in _profiles(state, gpu):
        if token.isdigit() and int(token) == found["gpu_instance_profile_id"]:
            return found
        if re.sub(r"^MIG\s+", "", token, flags=re.IGNORECASE).lower() == found["name"]:
            return found
    return None


def _gi_id(found, start):
    """GPU instance IDs follow the slot: 7g -> 0, 4g/3g -> 1 + start/4, 2g/1g.double -> 3 + start/2, 1g -> 7 + start."""
    size = found["memory_slices"]
    if size >= 8 or found["compute_slices"] >= 7:
        return 0
    if size == 4:
        return 1 + start // 4
    if size == 2:
        return 3 + start // 2
    return 7 + start


def _used_slots(gpu, skip=None):
    used = set()
    for gi in gpu["gpu_instances"]:
        if gi is not skip:
            used.update(range(gi["start"], gi["start"] + gi["size"]))
    return used


def _free_starts(state, gpu, found):
    """Starts where another instance of ``found`` fits now, honouring counts, compute and media limits."""
    entry = MIG_MODELS[gpu["model"]]
    same = [gi for gi in gpu["gpu_instances"] if gi["profile_id"] == found["gpu_instance_profile_id"]]
    if len(same) >= found["max_instances"]:
        return []
    compute = sum(entry["profiles"][gi["profile"]]["compute_slices"] for gi in gpu["gpu_instances"])
    if compute + found["compute_slices"] > entry["compute_slices"]:
        return []
    if found["media_extensions"] and any(entry["profiles"][gi["profile"]]["media_extensions"]
                                         for gi in gpu["gpu_instances"]):
        return []
    used = _used_slots(gpu)
    return [s for s in found["placements"]
            if s + found["memory_slices"] <= entry["memory_slices"]
            and not used & set(range(s, s + found["memory_slices"]))]


def _free_count(state, gpu, found):
    """How many more instances of ``found`` could be created (greedy over free starts)."""
    probe = dict(gpu, gpu_instances=list(gpu["gpu_instances"]))
    count = 0
    while True:
        starts = _free_starts(state, probe, found)
        if not starts:
            return count
        probe["gpu_instances"].append(dict(profile=found["name"], profile_id=found["gpu_instance_profile_id"],
                                           start=starts[0], size=found["memory_slices"]))
        count += 1


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

_LGIP_RULE = "+" + "-" * 77 + "+"


def render_lgip(state, gpus):
    lines = [_LGIP_RULE,
             "| GPU instance profiles:%s|" % (" " * 54),
             "| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |",
             "|                              Free/Total   GiB              CE    JPEG  OFA  |",
             "|" + "=" * 77 + "|"]
    for gpu in gpus:
        for found in _profiles(state, gpu):
            sm, dec, enc, ce, jpeg, ofa = found["engines"]
            free = "%d/%d" % (_free_count(state, gpu, found), found["max_instances"])
            first = "|%4d  %-16s %3d     %-3s        %-10s No     %-6d %-5d %-4d|" % (
                gpu["index"], "MIG " + found["name"], found["gpu_instance_profile_id"], free, found["memory_gib"], sm,
                dec, enc)
            second = "|%61s%-6d%-6d%-4d|" % ("", ce, jpeg, ofa)
            lines += [first, second, _LGIP_RULE]
    return "\n".join(lines) + "\n"


def render_lgipp(state, gpus):
    lines = []
    for gpu in gpus:
        for found in _profiles(state, gpu):
            starts = found["placements"]
            lines.append("GPU %2d Profile ID %2d %s: {%s}:%d" % (
                gpu["index"], found["gpu_instance_profile_id"], "Placements" if len(starts) > 1 else "Placement ",
                ",".join(str(s) for s in starts), found["memory_slices"]))
    return "\n".join(lines) + "\n"


def render_lgi(gpus):
    rule = "+" + "-" * 55 + "+"
    lines = [rule, "| GPU instances:%s|" % (" " * 40),
             "| GPU   Name             Profile  Instance   Placement  |",
             "|                          ID       ID       Start:Size |",
             "|" + "=" * 55 + "|"]
    for gpu in gpus:
        for gi in sorted(gpu["gpu_instances"], key=lambda g: g["id"]):
            lines.append("|%4d  %-16s   %3d      %3d          %d:%d     |" % (
                gpu["index"], "MIG " + gi["profile"], gi["profile_id"], gi["id"], gi["start"], gi["size"]))
            lines.append(rule)
    return "\n".join(lines) + "\n"


def _ci_name(gi, ci):
    g = int(gi["profile"].split("g.", 1)[0])
    return gi["profile"] if ci["slices"] == g else "%dc.%s" % (ci["slices"], gi["profile"])


def render_lci(gpus):
    rule = "+" + "-" * 68 + "+"
    lines = [rule, "| Compute instances:%s|" % (" " * 49),
             "| GPU     GPU       Name             Profile   Instance   Placement  |",
             "|       Instance                       ID        ID       Start:Size |",
             "|         ID                                                         |",
             "|" + "=" * 68 + "|"]
    for gpu in gpus:
        for gi in sorted(gpu["gpu_instances"], key=lambda g: g["id"]):
            for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
                lines.append("|%4d   %4d       %-18s %3d       %3d          %d:%d     |" % (
                    gpu["index"], gi["id"], "MIG " + _ci_name(gi, ci), ci["profile_id"], ci["id"], ci["start"],
                    ci["slices"]))
                lines.append(rule)
    return "\n".join(lines) + "\n"


def _mig_devices(gpu):
    devices = []
    if gpu["mig_current"] != "Enabled":
        return devices
    for gi in sorted(gpu["gpu_instances"], key=lambda g: (g["start"], g["id"])):
        for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
            devices.append((gi, ci))
    return devices


def render_list(gpus):
    lines = []
    for gpu in gpus:
        lines.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        for number, (gi, ci) in enumerate(_mig_devices(gpu)):
            lines.append("  %-16s Device %2d: (UUID: %s)" % ("MIG " + _ci_name(gi, ci), number, ci["uuid"]))
    return "\n".join(lines) + "\n"


def _query_value(state, gpu, field, nounits):
    unit = "" if nounits else " MiB"
    values = {
        "index": str(gpu["index"]),
        "name": gpu["name"],
        "gpu_name": gpu["name"],
        "uuid": gpu["uuid"],
        "gpu_uuid": gpu["uuid"],
        "pci.bus_id": gpu["pci_bus_id"],
        "gpu_bus_id": gpu["pci_bus_id"],
        "memory.total": "%d%s" % (gpu["memory_total_mib"], unit),
        "memory.used": "%d%s" % (sum(p.get("used_memory_mib", 0) for p in gpu["processes"]), unit),
        "mig.mode.current": gpu["mig_current"] or "[N/A]",
        "mig.mode.pending": gpu["mig_pending"] or "[N/A]",
        "compute_mode": gpu["compute_mode"],
        "driver_version": state["driver_version"],
        "compute_cap": gpu["compute_cap"],
        "count": str(len(state["gpus"])),
        "serial": "16%011d" % (1320000000 + gpu["index"]),
        "persistence_mode": "Enabled",
    }
    if field not in values:
        raise Exit(RC_INVALID, 'Field "%s" is not a valid field to query.\n' % field)
    return values[field]


def render_query(state, gpus, fields, fmt):
    options = [o.strip() for o in fmt.split(",") if o.strip()]
    if not options or options[0] != "csv" or set(options[1:]) - {"noheader", "nounits"}:
        raise Exit(RC_INVALID, '"%s" is not a valid format.\n' % fmt)
    names = [f.strip() for f in fields.split(",") if f.strip()]
    if not names:
        raise Exit(RC_INVALID, INVALID_ARGS)
    rows = [[_query_value(state, gpu, name, "nounits" in options) for name in names] for gpu in gpus]
    lines = []
    if "noheader" not in options:
        lines.append(", ".join(n + ("" if "nounits" in options or not n.startswith("memory.") else " [MiB]")
                               for n in names))
    lines += [", ".join(row) for row in rows]
    return "\n".join(lines) + "\n"


def render_compute_apps(gpus, fields, fmt):
    options = [o.strip() for o in fmt.split(",") if o.strip()]
    if not options or options[0] != "csv":
        raise Exit(RC_INVALID, '"%s" is not a valid format.\n' % fmt)
    names = [f.strip() for f in fields.split(",") if f.strip()]
    lines = [] if "noheader" in options else [", ".join(names)]
    for gpu in gpus:
        for proc in gpu["processes"]:
            values = {"pid": str(proc["pid"]), "process_name": proc["name"], "name": proc["name"],
                      "gpu_uuid": gpu["uuid"], "gpu_bus_id": gpu["pci_bus_id"],
                      "used_memory": "%d%s" % (proc.get("used_memory_mib", 0), "" if "nounits" in options else " MiB")}
            for name in names:
                if name not in values:
                    raise Exit(RC_INVALID, 'Field "%s" is not a valid field to query.\n' % name)
            lines.append(", ".join(values[n] for n in names))
    return "\n".join(lines) + ("\n" if lines else "")


def render_q(state, gpus, sections):
    lines = ["", "==============NVSMI LOG==============", "",
             "Timestamp                                 : Mon Nov 23 12:00:00 2026",
             "Driver Version                            : %s" % state["driver_version"],
             "CUDA Version                              : %s" % state["cuda_version"], "",
             "Attached GPUs                             : %d" % len(state["gpus"])]
    for gpu in gpus:
        lines.append("GPU %s" % gpu["pci_bus_id"])
        if not sections:
            lines += ["    Product Name                          : %s" % gpu["name"],
                      "    GPU UUID                              : %s" % gpu["uuid"],
                      "    MIG Mode",
                      "        Current                           : %s" % (gpu["mig_current"] or "N/A"),
                      "        Pending                           : %s" % (gpu["mig_pending"] or "N/A"),
                      "    FB Memory Usage",
                      "        Total                             : %d MiB" % gpu["memory_total_mib"]]
        if not sections or "COMPUTE" in sections:
            lines.append("    Compute Mode                          : %s" % gpu["compute_mode"])
        if not sections:
            lines.append("    Processes")
            if not gpu["processes"]:
                lines[-1] += "                             : None"
            for proc in gpu["processes"]:
                lines += ["        Process ID                        : %d" % proc["pid"],
                          "            Type                          : C",
                          "            Name                          : %s" % proc["name"],
                          "            Used GPU Memory               : %d MiB" % proc.get("used_memory_mib", 0)]
        lines.append("")
    return "\n".join(lines) + "\n"


def render_xml(state, gpus):
    out = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">', "<nvidia_smi_log>",
           "\t<driver_version>%s</driver_version>" % state["driver_version"],
           "\t<cuda_version>%s</cuda_version>" % state["cuda_version"],
           "\t<attached_gpus>%d</attached_gpus>" % len(state["gpus"])]
    for gpu in gpus:
        out += ['\t<gpu id="%s">' % gpu["pci_bus_id"], "\t\t<product_name>%s</product_name>" % gpu["name"],
                "\t\t<uuid>%s</uuid>" % gpu["uuid"], "\t\t<mig_mode>",
                "\t\t\t<current_mig>%s</current_mig>" % (gpu["mig_current"] or "N/A"),
                "\t\t\t<pending_mig>%s</pending_mig>" % (gpu["mig_pending"] or "N/A"), "\t\t</mig_mode>"]
        devices = _mig_devices(gpu)
        if not devices:
            out.append("\t\t<mig_devices>None</mig_devices>")
        else:
            out.append("\t\t<mig_devices>")
            entry = MIG_MODELS[gpu["model"]]
            for number, (gi, ci) in enumerate(devices):
                found = entry["profiles"][gi["profile"]]
                sm = found["engines"][0] * ci["slices"] // found["compute_slices"]
                mib = int(gpu["memory_total_mib"] * gi["size"] / entry["memory_slices"]) - 512
                out += ["\t\t\t<mig_device>", "\t\t\t\t<index>%d</index>" % number,
                        "\t\t\t\t<gpu_instance_id>%d</gpu_instance_id>" % gi["id"],
                        "\t\t\t\t<compute_instance_id>%d</compute_instance_id>" % ci["id"],
                        "\t\t\t\t<device_attributes>", "\t\t\t\t\t<shared>",
                        "\t\t\t\t\t\t<multiprocessor_count>%d</multiprocessor_count>" % sm,
                        "\t\t\t\t\t</shared>", "\t\t\t\t</device_attributes>",
                        "\t\t\t\t<fb_memory_usage>", "\t\t\t\t\t<total>%d MiB</total>" % mib,
                        "\t\t\t\t</fb_memory_usage>", "\t\t\t</mig_device>"]
            out.append("\t\t</mig_devices>")
        out.append("\t\t<compute_mode>%s</compute_mode>" % gpu["compute_mode"])
        out.append("\t</gpu>")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Selecting GPUs
# --------------------------------------------------------------------------------------------


def select_gpus(state, ident):
    """GPUs named by ``-i`` (indexes, UUIDs or PCI bus IDs, comma-separated); all without it."""
    if ident is None:
        return list(state["gpus"])
    chosen = []
    for token in [t.strip() for t in ident.split(",") if t.strip()]:
        match = [g for g in state["gpus"] if token in (str(g["index"]), g["uuid"], g["pci_bus_id"])
                 or g["pci_bus_id"].lower().endswith(token.lower()) and ":" in token]
        if not match:
            raise Exit(RC_NOT_FOUND, "No devices were found\n")
        chosen += [g for g in match if g not in chosen]
    return chosen


def _mig_gpus(gpus):
    enabled = [g for g in gpus if g["mig_current"] == "Enabled"]
    if not enabled:
        raise Exit(RC_NOT_FOUND, "No MIG-enabled devices found.\n")
    return enabled


# --------------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------------


def _require_root(state, what, gpu):
    if not state.get("root", True):
        raise Exit(RC_NO_PERMISSION, "Unable to %s for GPU %s: Insufficient Permissions\n" % (what, gpu["pci_bus_id"]))


def _new_uuid(state, gpu):
    number = state.get("next_uuid", 1)
    state["next_uuid"] = number + 1
    return "MIG-%08x-%s-5%03x-8000-%012x" % (number * 2654435761 % (1 << 32), gpu["uuid"][4:8], gpu["index"], number)


def _busy_processes(gpu, gi=None):
    return [p for p in gpu["processes"] if gi is None or p.get("gpu_instance_id") == gi["id"]]


def set_mig_mode(state, gpus, value):
    if value not in ("0", "1"):
        raise Exit(RC_INVALID, INVALID_ARGS)
    want = "Enabled" if value == "1" else "Disabled"
    word = "enable" if value == "1" else "disable"
    out = []
    rc = RC_OK
    for gpu in gpus:
        if gpu["model"] is None:
            out.append("Unable to %s MIG Mode for GPU %s: Not Supported" % (word, gpu["pci_bus_id"]))
            rc = RC_NOT_SUPPORTED
            continue
        _require_root(state, "%s MIG Mode" % word, gpu)
        if value == "0" and gpu["gpu_instances"]:
            out.append("Unable to disable MIG Mode for GPU %s: In use by another client" % gpu["pci_bus_id"])
            rc = RC_OTHER
            continue
        gpu["mig_pending"] = want
        if gpu["mig_current"] == want:
            out.append("%s MIG Mode for GPU %s" % (want, gpu["pci_bus_id"]))
            continue
        if _busy_processes(gpu):
            out.append("Warning: MIG mode is in pending %s state for GPU %s:In use by another client" % (
                word, gpu["pci_bus_id"]))
            out.append("%s is currently being used by one or more other processes (e.g. CUDA application or a "
                       "monitoring application such as another instance of nvidia-smi). Please first kill all "
                       "processes using the device and retry the command or reboot the system to make MIG mode "
                       "effective." % gpu["pci_bus_id"])
            continue
        if not state.get("reset_supported", True):
            out.append("Warning: MIG mode is in pending %s state for GPU %s:Not Supported" % (word, gpu["pci_bus_id"]))
            out.append("Reboot the system or try nvidia-smi --gpu-reset to make MIG mode effective on GPU %s"
                       % gpu["pci_bus_id"])
            continue
        gpu["mig_current"] = want
        out.append("%s MIG Mode for GPU %s" % (want, gpu["pci_bus_id"]))
    out.append("All done.")
    return rc, "\n".join(out) + "\n"


def reset(state, gpus):
    """``-r``: refused while any selected GPU runs a process; without ``-i`` every GPU is reset."""
    busy = [g for g in gpus if _busy_processes(g)]
    if busy:
        lines = ["The following GPUs could not be reset:"]
        lines += ["  GPU %s: In use by another client" % g["pci_bus_id"] for g in busy]
        lines += ["", "%d device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
                      "application, graphics application such as an X server, or a monitoring application such as "
                      "another instance of nvidia-smi). Please first kill all processes using this device and all "
                      "compute applications running in the system." % len(busy)]
        return RC_OTHER, "\n".join(lines) + "\n"
    out = []
    for gpu in gpus:
        _require_root(state, "reset GPU", gpu)
        if not state.get("reset_supported", True):
            return RC_NOT_SUPPORTED, "Resetting GPU %s is not supported.\n" % gpu["pci_bus_id"]
    for gpu in gpus:
        # a reset applies the pending MIG mode; MIG instances do not survive it
        gpu["mig_current"] = gpu["mig_pending"]
        gpu["gpu_instances"] = []
        out.append("GPU %s was successfully reset." % gpu["pci_bus_id"])
    out.append("All done.")
    return RC_OK, "\n".join(out) + "\n"


COMPUTE_MODES = {"0": "Default", "DEFAULT": "Default", "2": "Prohibited", "PROHIBITED": "Prohibited",
                 "3": "Exclusive_Process", "EXCLUSIVE_PROCESS": "Exclusive_Process"}


def set_compute_mode(state, gpus, value):
    mode = COMPUTE_MODES.get((value or "").upper())
    if mode is None:
        if (value or "").upper() in ("1", "EXCLUSIVE_THREAD"):
            return RC_INVALID, "EXCLUSIVE_THREAD compute mode is deprecated. Use EXCLUSIVE_PROCESS.\n"
        return RC_INVALID, 'Invalid compute mode "%s". Valid values: 0/DEFAULT, 2/PROHIBITED, 3/EXCLUSIVE_PROCESS\n' % value
    out = []
    for gpu in gpus:
        _require_root(state, "set the compute mode", gpu)
        gpu["compute_mode"] = mode
        out.append("Set compute mode to %s for GPU %s." % (mode.upper(), gpu["pci_bus_id"]))
    out.append("All done.")
    return RC_OK, "\n".join(out) + "\n"


def _split_tuple(token):
    """``9``, ``3g.20gb`` or ``9:4`` (profile and placement start)."""
    profile, _sep, start = token.partition(":")
    return profile.strip(), (start.strip() if _sep else None)


def create_gi(state, gpus, spec, default_ci):
    out = []
    rc = RC_OK
    for gpu in _mig_gpus(gpus):
        _require_root(state, "create GPU instances", gpu)
        for token in [t for t in spec.split(",") if t.strip()]:
            name, start = _split_tuple(token)
            found = _profile_by(state, gpu, name)
            if found is None:
                out.append("Unable to create a GPU instance on GPU %2d using profile %s: Invalid Argument"
                           % (gpu["index"], name))
                out.append("Failed to create GPU instances: Invalid Argument")
                return RC_INVALID, "\n".join(out) + "\n"
            starts = _free_starts(state, gpu, found)
            if start is not None:
                if not start.isdigit() or int(start) not in found["placements"]:
                    out.append("Unable to create a GPU instance on GPU %2d using profile %d: Invalid Argument"
                               % (gpu["index"], found["gpu_instance_profile_id"]))
                    out.append("Failed to create GPU instances: Invalid Argument")
                    return RC_INVALID, "\n".join(out) + "\n"
                starts = [s for s in starts if s == int(start)]
            if not starts:
                out.append("Unable to create a GPU instance on GPU %2d using profile %d: Insufficient Resources"
                           % (gpu["index"], found["gpu_instance_profile_id"]))
                out.append("Failed to create GPU instances: Insufficient Resources")
                return RC_OTHER, "\n".join(out) + "\n"
            # without a placement the driver picks one: 3g/4g-sized instances from the top (the MIG
            # guide's 3-2-1-1 example puts the first 3g at slot 4), the others from slot 0
            chosen = starts[-1] if found["memory_slices"] == 4 else starts[0]
            gi = dict(id=_gi_id(found, chosen), profile=found["name"], profile_id=found["gpu_instance_profile_id"],
                      start=chosen, size=found["memory_slices"], compute_instances=[])
            gpu["gpu_instances"].append(gi)
            out.append("Successfully created GPU instance ID %2d on GPU %2d using profile MIG %s (ID %2d)" % (
                gi["id"], gpu["index"], found["name"], found["gpu_instance_profile_id"]))
            if default_ci:
                out.append(_add_ci(state, gpu, gi, found["compute_slices"]))
    return rc, "\n".join(out) + "\n"


def _ci_starts(gi_slices, slices):
    if slices == gi_slices:
        return [0]
    if slices in (3,):
        return [0, 4] if gi_slices == 7 else [0]
    return [s for s in range(0, gi_slices - slices + 1) if s % slices == 0]


def _add_ci(state, gpu, gi, slices):
    g = int(gi["profile"].split("g.", 1)[0])
    used = set()
    for ci in gi["compute_instances"]:
        used.update(range(ci["start"], ci["start"] + ci["slices"]))
    starts = [s for s in _ci_starts(g, slices) if not used & set(range(s, s + slices))]
    if slices not in CI_PROFILE_IDS or slices > g or not starts:
        raise Exit(RC_OTHER, "Unable to create a compute instance on GPU %2d GPU instance ID %2d using profile %s: "
                   "Insufficient Resources\nFailed to create compute instances: Insufficient Resources\n"
                   % (gpu["index"], gi["id"], CI_PROFILE_IDS.get(slices, slices)))
    ids = {c["id"] for c in gi["compute_instances"]}
    ci = dict(id=min(i for i in range(8) if i not in ids), profile_id=CI_PROFILE_IDS[slices], slices=slices,
              start=starts[0], uuid=_new_uuid(state, gpu))
    gi["compute_instances"].append(ci)
    return "Successfully created compute instance ID %2d on GPU %2d GPU instance ID %2d using profile MIG %s (ID %2d)" % (
        ci["id"], gpu["index"], gi["id"], _ci_name(gi, ci), ci["profile_id"])


def _pick_gis(gpu, gi_ids):
    if gi_ids is None:
        return list(gpu["gpu_instances"])
    wanted = {int(x) for x in gi_ids.split(",") if x.strip().isdigit()}
    return [gi for gi in gpu["gpu_instances"] if gi["id"] in wanted]


def create_ci(state, gpus, spec, gi_ids):
    out = []
    for gpu in _mig_gpus(gpus):
        _require_root(state, "create compute instances", gpu)
        targets = _pick_gis(gpu, gi_ids)
        if not targets:
            raise Exit(RC_NOT_FOUND, "No GPU instances found: Not Found\n")
        for gi in targets:
            g = int(gi["profile"].split("g.", 1)[0])
            for token in [t.strip() for t in spec.split(",") if t.strip()]:
                if token.isdigit():
                    slices = {v: k for k, v in CI_PROFILE_IDS.items()}.get(int(token))
                else:
                    match = re.match(r"^(?:MIG\s+)?(?:(\d+)c\.)?(\d+)g\.", token, re.IGNORECASE)
                    slices = int(match.group(1) or match.group(2)) if match else None
                if slices is None or slices > g:
                    raise Exit(RC_INVALID, "Unable to create a compute instance on GPU %2d GPU instance ID %2d using "
                               "profile %s: Invalid Argument\nFailed to create compute instances: Invalid Argument\n"
                               % (gpu["index"], gi["id"], token))
                out.append(_add_ci(state, gpu, gi, slices))
    return RC_OK, "\n".join(out) + "\n"


def destroy_ci(state, gpus, gi_ids, ci_ids):
    out = []
    found_any = False
    for gpu in _mig_gpus(gpus):
        _require_root(state, "destroy compute instances", gpu)
        for gi in _pick_gis(gpu, gi_ids):
            wanted = None if ci_ids is None else {int(x) for x in ci_ids.split(",") if x.strip().isdigit()}
            for ci in sorted(gi["compute_instances"], key=lambda c: c["id"]):
                if wanted is not None and ci["id"] not in wanted:
                    continue
                found_any = True
                if _busy_processes(gpu, gi):
                    raise Exit(RC_OTHER, "Unable to destroy compute instance ID %2d from GPU %2d GPU instance ID %2d: "
                               "In use by another client\nFailed to destroy compute instances: In use by another "
                               "client\n" % (ci["id"], gpu["index"], gi["id"]))
                gi["compute_instances"].remove(ci)
                out.append("Successfully destroyed compute instance ID %2d from GPU %2d GPU instance ID %2d"
                           % (ci["id"], gpu["index"], gi["id"]))
    if not found_any:
        raise Exit(RC_NOT_FOUND, "No compute instances found: Not Found\n")
    return RC_OK, "\n".join(out) + "\n"


def destroy_gi(state, gpus, gi_ids):
    out = []
    found_any = False
    for gpu in _mig_gpus(gpus):
        _require_root(state, "destroy GPU instances", gpu)
        for gi in sorted(_pick_gis(gpu, gi_ids), key=lambda g: g["id"]):
            found_any = True
            if gi["compute_instances"] or _busy_processes(gpu, gi):
                raise Exit(RC_OTHER, "Unable to destroy GPU instance ID %2d from GPU %2d: In use by another client\n"
                           "Failed to destroy GPU instances: In use by another client\n" % (gi["id"], gpu["index"]))
            gpu["gpu_instances"].remove(gi)
            out.append("Successfully destroyed GPU instance ID %2d from GPU %2d" % (gi["id"], gpu["index"]))
    if not found_any:
        raise Exit(RC_NOT_FOUND, "No GPU instances found: Not Found\n")
    return RC_OK, "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

_VALUE_OPTIONS = {"-i": "id", "--id": "id", "-mig": "mig", "--multi-instance-gpu": "mig", "-c": "compute_mode",
                  "--compute-mode": "compute_mode", "-cgi": "cgi", "--create-gpu-instance": "cgi",
                  "-cci": "cci", "--create-compute-instance": "cci", "-gi": "gi", "--gpu-instance-id": "gi",
                  "-ci": "ci", "--compute-instance-id": "ci", "-d": "display", "--display": "display",
                  "--query-gpu": "query_gpu", "--query-compute-apps": "query_apps", "--format": "format"}
_FLAG_OPTIONS = {"-L": "list", "--list-gpus": "list", "-q": "query", "--query": "query", "-x": "xml",
                 "--xml-format": "xml", "-r": "reset", "--gpu-reset": "reset", "-C": "default_ci",
                 "--default-compute-instance": "default_ci", "-lgip": "lgip", "--list-gpu-instance-profiles": "lgip",
                 "-lgipp": "lgipp", "--list-gpu-instance-possible-placements": "lgipp", "-lgi": "lgi",
                 "--list-gpu-instances": "lgi", "-lci": "lci", "--list-compute-instances": "lci",
                 "-dgi": "dgi", "--destroy-gpu-instance": "dgi", "-dci": "dci", "--destroy-compute-instance": "dci"}
_MIG_ONLY = {"cgi", "cci", "gi", "ci", "default_ci", "lgip", "lgipp", "lgi", "lci", "dgi", "dci"}


def parse_args(argv):
    args = {"mig_subcommand": False}
    rest = list(argv)
    if rest and rest[0] == "mig":
        args["mig_subcommand"] = True
        rest = rest[1:]
    while rest:
        token = rest.pop(0)
        key, _sep, inline = token.partition("=")
        if key in _VALUE_OPTIONS:
            if _sep:
                value = inline
            elif rest:
                value = rest.pop(0)
            else:
                raise Exit(RC_INVALID, INVALID_ARGS)
            args[_VALUE_OPTIONS[key]] = value
        elif token in _FLAG_OPTIONS:
            args[_FLAG_OPTIONS[token]] = True
        elif args["mig_subcommand"]:
            raise Exit(RC_INVALID, 'Option "%s" is not recognized. Please run \'nvidia-smi mig -h\' for help.\n' % token)
        else:
            raise Exit(RC_INVALID, INVALID_ARGS)
    if not args["mig_subcommand"] and set(args) & _MIG_ONLY:
        raise Exit(RC_INVALID, INVALID_ARGS)
    return args


def is_write(args):
    return any(k in args for k in ("cgi", "cci", "dgi", "dci", "mig", "compute_mode", "reset"))


def dispatch(state, args):
    if not state.get("driver_loaded", True):
        return RC_NO_DRIVER, DRIVER_NOT_LOADED
    if not state["gpus"]:
        return RC_NOT_FOUND, "No devices were found\n"
    gpus = select_gpus(state, args.get("id"))
    if args["mig_subcommand"]:
        if "lgip" in args:
            return RC_OK, render_lgip(state, _mig_gpus(gpus))
        if "lgipp" in args:
            return RC_OK, render_lgipp(state, _mig_gpus(gpus))
        if "lgi" in args:
            mig = _mig_gpus(gpus)
            if not any(g["gpu_instances"] for g in mig):
                return RC_NOT_FOUND, "No GPU instances found: Not Found\n"
            return RC_OK, render_lgi(mig)
        if "lci" in args:
            mig = _mig_gpus(gpus)
            if not any(gi["compute_instances"] for g in mig for gi in _pick_gis(g, args.get("gi"))):
                return RC_NOT_FOUND, "No compute instances found: Not Found\n"
            return RC_OK, render_lci(mig)
        if "cgi" in args:
            return create_gi(state, gpus, args["cgi"], args.get("default_ci"))
        if "cci" in args:
            return create_ci(state, gpus, args["cci"], args.get("gi"))
        if "dci" in args:
            return destroy_ci(state, gpus, args.get("gi"), args.get("ci"))
        if "dgi" in args:
            return destroy_gi(state, gpus, args.get("gi"))
        return RC_INVALID, INVALID_ARGS
    if "mig" in args:
        return set_mig_mode(state, gpus, args["mig"])
    if "compute_mode" in args:
        return set_compute_mode(state, gpus, args["compute_mode"])
    if "reset" in args:
        return reset(state, gpus)
    if "list" in args:
        return RC_OK, render_list(gpus)
    if "query_gpu" in args:
        if "format" not in args:
            return RC_INVALID, "--format option is required with --query-gpu\n"
        return RC_OK, render_query(state, gpus, args["query_gpu"], args["format"])
    if "query_apps" in args:
        return RC_OK, render_compute_apps(gpus, args["query_apps"], args.get("format", "csv"))
    if "query" in args:
        if "xml" in args:
            return RC_OK, render_xml(state, gpus)
        sections = [s.strip().upper() for s in args.get("display", "").split(",") if s.strip()]
        return RC_OK, render_q(state, gpus, sections)
    return RC_INVALID, INVALID_ARGS


def _fault(state, argv):
    """The first injected fault whose ``match`` is in the command line (consumed when ``times`` runs out)."""
    line = " ".join(argv)
    for fault in state.get("faults") or []:
        if fault.get("match", "") in line and fault.get("times", 1) != 0:
            if fault.get("times", 1) > 0:
                fault["times"] = fault.get("times", 1) - 1
            return fault
    return None


def run(argv, state):
    """(rc, output, write) of one call against ``state`` (changed in place)."""
    write = False
    try:
        args = parse_args(argv)
        write = is_write(args)
        fault = _fault(state, argv)
        if fault is not None:
            return fault.get("rc", RC_OTHER), fault.get("output", "Unknown Error\n"), write
        rc, output = dispatch(state, args)
    except Exit as stop:
        rc, output = stop.rc, stop.output
    return rc, output, write


def _log(argv, rc, write):
    path = os.environ.get("FAKE_NVIDIA_SMI_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(dict(argv=list(argv), rc=rc, write=write)) + "\n")


# --------------------------------------------------------------------------------------------
# Test control: python tests/fakes/fake_nvidia_smi.py <command> (state file from FAKE_NVIDIA_SMI_STATE)
# --------------------------------------------------------------------------------------------


def control(argv, state):
    """Change the fake host the way the outside world would; returns a short confirmation.

    ``init <preset>``, ``process add <gpu> <pid> <name> [<gpu instance id>]``, ``process clear [<gpu>]``,
    ``set <key> <json value>`` (driver_loaded, root, reset_supported, hidden_profile_ids, driver_version,
    cuda_version), ``fault <match> <rc> <output> [<times>]``.
    """
    command = argv[:2]
    if argv[:1] == ["init"] and len(argv) == 2:
        state.clear()
        state.update(preset_state(argv[1]))
    elif command == ["process", "add"] and len(argv) in (5, 6):
        gpu = state["gpus"][int(argv[2])]
        proc = dict(pid=int(argv[3]), name=argv[4], used_memory_mib=512)
        if len(argv) == 6:
            proc["gpu_instance_id"] = int(argv[5])
        gpu["processes"].append(proc)
    elif command == ["process", "clear"]:
        for gpu in state["gpus"]:
            if len(argv) == 2 or str(gpu["index"]) == argv[2]:
                gpu["processes"] = []
    elif argv[:1] == ["set"] and len(argv) == 3:
        if argv[1] not in ("driver_loaded", "root", "reset_supported", "hidden_profile_ids", "driver_version",
                           "cuda_version"):
            raise ValueError("set: unknown key %s" % argv[1])
        state[argv[1]] = json.loads(argv[2])
    elif argv[:1] == ["fault"] and len(argv) in (4, 5):
        state.setdefault("faults", []).append(dict(match=argv[1], rc=int(argv[2]), output=argv[3] + "\n",
                                                   times=int(argv[4]) if len(argv) == 5 else 1))
    else:
        raise ValueError("usage: " + control.__doc__.split("\n\n", 1)[1].strip())
    return "ok: %s\n" % " ".join(argv)


def control_main(argv):
    path = os.environ.get("FAKE_NVIDIA_SMI_STATE")
    if not path:
        sys.stderr.write("FAKE_NVIDIA_SMI_STATE is not set\n")
        return 2
    store = Store(path)
    with store as state:
        try:
            message = control(argv, state)
        except (ValueError, IndexError) as exc:
            sys.stderr.write("%s\n" % exc)
            return 2
        store.save(state)
    sys.stdout.write(message)
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    path = os.environ.get("FAKE_NVIDIA_SMI_STATE")
    if not path:
        sys.stdout.write(DRIVER_NOT_LOADED)
        return RC_NO_DRIVER
    store = Store(path)
    with store as state:
        before = json.dumps(state, sort_keys=True)
        rc, output, write = run(argv, state)
        if json.dumps(state, sort_keys=True) != before:
            store.save(state)
    _log(argv, rc, write)
    sys.stdout.write(output)
    return rc


if __name__ == "__main__":
    sys.exit(control_main(sys.argv[1:]))
