# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Declarative MIG geometry on a host through nvidia-smi (module mig_profile).

Order of work, so that nothing is written before everything is known to fit:

1. ``validate_request``: the shape of the request (no nvidia-smi call).
2. ``read_host``: GPUs, MIG modes, processes and, where MIG is on, the host's own profile table
   (``mig -lgip``) and placement rules (``mig -lgipp``), the instances (``-lgi``/``-lci``) and MIG
   device UUIDs (``-L`` joined with ``-q -x``). Reads only.
3. ``resolve``: each GPU's desired instances, checked against the catalog narrowed to what the
   host's driver lists, with the host's placements. A layout that does not fit is refused with the
   reason and the nearest layout that fits.
4. ``plan_gpu``: keep the instances that match, destroy only the others, place the new ones
   around the kept ones (``mig_placement.place`` with pinned starts) and create them at explicit
   placements (``-cgi <id>:<start>``), largest first.
5. ``apply``: outside check mode, the plan through nvidia-smi; a MIG mode change that stays
   pending is reset only with ``allow_reset`` and no process on the GPU, otherwise reported as
   ``reboot_required`` with the processes in the way.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import documents as mig_documents
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import placement as mig_placement
from ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers import nvsmi as _nvsmi
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import Plan

QUERY_FIELDS = ("index", "uuid", "name", "pci.bus_id", "mig.mode.current", "mig.mode.pending")
DISABLED_LAYOUTS = ("all-disabled", "disabled")


class MigError(EngineError):
    """A request that cannot be applied, or nvidia-smi failing; ``details`` go into the module result."""


# --------------------------------------------------------------------------------------------
# 1. The request
# --------------------------------------------------------------------------------------------


def _instance_spec(item, where):
    """dict(profile, start, compute) of one requested instance (a string or a dict)."""
    if isinstance(item, dict):
        unknown = set(item) - {"profile", "compute_instances"}
        if unknown:
            raise MigError("%s: unknown keys %s (allowed: profile, compute_instances)" % (where, ", ".join(sorted(unknown))))
        text, compute = item.get("profile"), item.get("compute_instances")
        if compute is not None and (not isinstance(compute, list) or not compute):
            raise MigError("%s: compute_instances must be a non-empty list of compute-slice counts, e.g. [1, 2]" % where)
    else:
        text, compute = item, None
    if not isinstance(text, str) or not text.strip():
        raise MigError("%s: a profile name such as 3g.40gb is required, got %r" % (where, text))
    name, _sep, pin = text.strip().partition("@")
    if _sep and not pin.strip().isdigit():
        raise MigError("%s: placement of %r must be a slot number, e.g. 3g.40gb@4" % (where, text))
    try:
        ci, _gi = mig_catalog.parse_profile(name)
    except ValueError as exc:
        raise MigError("%s: %s" % (where, exc))
    if ci is not None:
        raise MigError("%s: %r names a compute instance; give the GPU instance profile and compute_instances: [%d, ...]"
                       % (where, text, ci))
    return dict(profile=name.strip(), start=int(pin) if _sep else None, compute=compute)


def validate_request(gpus):
    """The request's entries as dict(gpu, where, instances|None (MIG off)|layout name); MigError on bad shape."""
    if not gpus:
        raise MigError("gpus: at least one entry (gpu: <index|UUID|all> with profiles or layout) is required")
    entries = []
    seen = set()
    for number, entry in enumerate(gpus):
        where = "gpus[%d]" % number
        if not isinstance(entry, dict):
            raise MigError("%s: must be a dict with gpu and profiles or layout" % where)
        unknown = set(entry) - {"gpu", "profiles", "layout"}
        if unknown:
            raise MigError("%s: unknown keys %s (allowed: gpu, profiles, layout)" % (where, ", ".join(sorted(unknown))))
        selector = str(entry.get("gpu", "")).strip()
        if not selector or not (selector == "all" or selector.isdigit() or re.match(r"^GPU-[0-9a-fA-F-]+\Z", selector)):
            raise MigError("%s.gpu: %r is not a GPU index, a GPU UUID (GPU-...) or all" % (where, entry.get("gpu")))
        if selector in seen:
            raise MigError("%s.gpu: %s is named twice" % (where, selector))
        seen.add(selector)
        has_profiles, has_layout = entry.get("profiles") is not None, entry.get("layout") is not None
        if has_profiles == has_layout:
            raise MigError("%s (gpu %s): give exactly one of profiles (a list) or layout (a name such as all-balanced)"
                           % (where, selector))
        if has_layout:
            if not isinstance(entry["layout"], str):
                raise MigError("%s.layout: a layout name is a string, got %r" % (where, entry["layout"]))
            entries.append(dict(gpu=selector, where=where, layout=entry["layout"].strip(), instances=None))
            continue
        if not isinstance(entry["profiles"], list):
            raise MigError("%s.profiles: a list of profiles is required, got %r" % (where, entry["profiles"]))
        instances = [_instance_spec(item, "%s.profiles[%d]" % (where, i)) for i, item in enumerate(entry["profiles"])]
        entries.append(dict(gpu=selector, where=where, layout=None, instances=instances))
    return entries


# --------------------------------------------------------------------------------------------
# 2. Reading the host
# --------------------------------------------------------------------------------------------


class Smi:
    """nvidia-smi through ``run(argv) -> (rc, out, err)``; keeps the commands it ran."""

    def __init__(self, run_command, path):
        self.run_command, self.path, self.commands = run_command, path, []

    def __call__(self, *args, **kwargs):
        argv = [self.path] + [str(a) for a in args]
        rc, out, err = self.run_command(argv)
        self.commands.append(dict(argv=argv, rc=rc))
        text = (out or "") + (err or "")
        if rc != 0 and not kwargs.get("allow_nothing"):
            raise MigError("%s failed (rc=%s): %s" % (" ".join(argv), rc, " ".join(text.split())[:500]), rc=rc,
                           output=text)
        return rc, text


def _listing(smi, parser, *args):
    """Rows of a listing; [] on nvidia-smi's "No ... found" answers."""
    rc, text = smi(*args, allow_nothing=True)
    try:
        rows = parser(text)
    except _nvsmi.NvsmiError as exc:
        raise MigError("%s %s: %s" % (smi.path, " ".join(args), exc), rc=rc, output=text)
    if rc != 0 and rows:
        raise MigError("%s %s failed (rc=%s)" % (smi.path, " ".join(args), rc), output=text)
    return rows


def read_gpus(smi):
    """[dict(index, uuid, name, bus_id, model, mig_current, mig_pending)] of every GPU."""
    _rc, text = smi("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits")
    gpus = []
    for row in _nvsmi.parse_query_csv(text, list(QUERY_FIELDS)):
        gpus.append(dict(index=int(row["index"]), uuid=row["uuid"], name=row["name"], bus_id=row["pci.bus_id"],
                         model=mig_catalog.find_gpu_model(row["name"]),
                         mig_current=(row["mig.mode.current"] or "").lower() == "enabled",
                         mig_pending=(row["mig.mode.pending"] or "").lower() == "enabled",
                         mig_capable=row["mig.mode.current"] is not None))
    if not gpus:
        raise MigError("nvidia-smi lists no GPU")
    return gpus


def read_processes(smi):
    """{GPU UUID: [dict(pid, name)]} of the compute processes."""
    _rc, text = smi("--query-compute-apps=gpu_uuid,pid,process_name", "--format=csv,noheader", allow_nothing=True)
    found = {}
    for row in _nvsmi.parse_query_csv(text, ["gpu_uuid", "pid", "process_name"]):
        found.setdefault(row["gpu_uuid"], []).append(dict(pid=int(row["pid"]), name=row["process_name"]))
    return found


def host_rules(gpu, profiles, placements):
    """The catalog entry of the GPU's model narrowed to the profiles the host lists, with its placements and limits."""
    entry = copy.deepcopy(mig_catalog.CATALOG[gpu["model"]])
    by_id = {row["profile_id"]: row for row in placements if row["gpu"] == gpu["index"]}
    totals = {row["profile"]: row["total"] for row in profiles if row["gpu"] == gpu["index"]}
    listed = set(totals)
    for name in list(entry["profiles"]):
        found = entry["profiles"][name]
        if name not in listed:
            del entry["profiles"][name]
            continue
        row = by_id.get(found["gpu_instance_profile_id"])
        if row is not None:
            found["placements"], found["memory_slices"] = list(row["starts"]), row["size"]
        found["max_instances"] = totals[name]
    return entry


def read_mig_state(smi, gpu):
    """Adds rules, instances and device UUIDs of a GPU whose MIG mode is on."""
    index = str(gpu["index"])
    profiles = _listing(smi, _nvsmi.parse_gi_profiles, "mig", "-lgip", "-i", index)
    placements = _listing(smi, _nvsmi.parse_gi_placements, "mig", "-lgipp", "-i", index)
    gpu["rules"] = host_rules(gpu, profiles, placements)
    gpu["rules_source"] = "host"
    gpu["hardware_differences"] = mig_nodes.hardware_differences(gpu["model"], profiles, placements)
    gis = _listing(smi, _nvsmi.parse_gi, "mig", "-lgi", "-i", index)
    cis = _listing(smi, _nvsmi.parse_ci, "mig", "-lci", "-i", index) if gis else []
    uuids = {}
    if cis:
        listed = _nvsmi.mig_devices(smi("-L", "-i", index)[1])
        xml = _nvsmi.parse_query_xml(smi("-q", "-x", "-i", index)[1])
        by_number = {d["index"]: d for g in xml for d in g["mig_devices"]}
        for device in listed:
            known = by_number.get(device["index"])
            if known:
                uuids[(known["gpu_instance_id"], known["compute_instance_id"])] = device["uuid"]
    instances = []
    for gi in sorted(gis, key=lambda g: (g["start"], g["instance_id"])):
        mine = [c for c in cis if c["gpu_instance_id"] == gi["instance_id"]]
        computes = [dict(compute_instance_id=c["instance_id"], slices=_ci_slices(c, gi),
                         uuid=uuids.get((gi["instance_id"], c["instance_id"]))) for c in mine]
        instances.append(dict(profile=gi["profile"], start=gi["start"], size=gi["size"],
                              gpu_instance_id=gi["instance_id"], profile_id=gi["profile_id"],
                              compute_instances=sorted(computes, key=lambda c: c["compute_instance_id"])))
    gpu["instances"] = instances


def _ci_slices(ci, gi):
    if ci.get("size"):
        return ci["size"]
    match = re.match(r"^(?:(\d+)c\.)?(\d+)g\.", ci["profile"])
    return int(match.group(1) or match.group(2)) if match else None


def read_host(smi):
    gpus = read_gpus(smi)
    processes = read_processes(smi)
    for gpu in gpus:
        gpu["processes"] = processes.get(gpu["uuid"], [])
        gpu["instances"] = []
        gpu["hardware_differences"] = []
        if gpu["model"] is not None:
            gpu["rules"], gpu["rules_source"] = mig_catalog.CATALOG[gpu["model"]], "catalog"
            if gpu["mig_current"]:
                read_mig_state(smi, gpu)
    return gpus


# --------------------------------------------------------------------------------------------
# 3. Desired geometry per GPU
# --------------------------------------------------------------------------------------------


def _select(entries, gpus):
    """{GPU index: entry}; a GPU named by index or UUID wins over ``all``."""
    chosen = {}
    for entry in entries:
        if entry["gpu"] == "all":
            for gpu in gpus:
                chosen.setdefault(gpu["index"], entry)
    for entry in entries:
        if entry["gpu"] == "all":
            continue
        match = [g for g in gpus if entry["gpu"] in (str(g["index"]), g["uuid"])]
        if not match:
            raise MigError("%s.gpu: no GPU %s on this host (GPUs: %s)" % (
                entry["where"], entry["gpu"], ", ".join("%d %s" % (g["index"], g["uuid"]) for g in gpus)))
        chosen[match[0]["index"]] = entry
    return chosen


def _label(gpu):
    return "GPU %d (%s)" % (gpu["index"], gpu["model"] or gpu["name"])


def _layout_instances(gpu, entry):
    """The entry's instances on this GPU: None for MIG off, else a list of specs."""
    if entry["layout"] is None:
        return entry["instances"]
    if entry["layout"] in DISABLED_LAYOUTS:
        return None
    if gpu["model"] is None:
        return []  # refused by resolve with the GPU named
    layouts = mig_placement.standard_layouts_on(gpu["rules"])
    if entry["layout"] not in layouts:
        raise MigError("%s.layout: %s has no layout %r; layouts: %s" % (
            entry["where"], _label(gpu), entry["layout"], ", ".join(sorted(layouts) + ["disabled"])))
    layout = layouts[entry["layout"]]
    if layout is None:
        return None
    instances = []
    for name, count in sorted(layout.items()):
        instances += [dict(profile=name, start=None, compute=None)] * count
    return instances


def _layout_text(profiles):
    """A requested layout as a person reads it: every entry when short, counts per entry when long."""
    if len(profiles) <= 8:
        return "[%s]" % ", ".join(profiles)
    counts = {}
    for text in profiles:
        counts[text] = counts.get(text, 0) + 1
    return "[%s] (%d instances)" % (", ".join("%d x %s" % (n, text) for text, n in counts.items()), len(profiles))


def _fit_problem(gpu, instances):
    """None when the instances fit this GPU's rules, else the reason and the nearest layout that fits."""
    rules = gpu["rules"]
    request = [spec["profile"] + ("@%d" % spec["start"] if spec["start"] is not None else "") for spec in instances]
    result = mig_placement.place_on(rules, request)
    if result["fits"]:
        return None
    unpinned = [spec["profile"] for spec in instances]
    if unpinned != request and mig_placement.place_on(rules, unpinned)["fits"]:
        nearest = unpinned  # the same instances where the placement rules allow them
    else:
        nearest = mig_placement.nearest_fit_on(rules, request)
    return "%s: layout %s does not fit: %s; nearest layout that fits: %s" % (
        _label(gpu), _layout_text(request), result["reason"], "[%s]" % ", ".join(nearest) if nearest else "none")


def resolve(entries, gpus):
    """{GPU index: None (MIG off) or [dict(profile, start, compute)]}, every profile canonical; MigError listing every problem."""
    problems = []
    desired = {}
    for index, entry in sorted(_select(entries, gpus).items()):
        gpu = next(g for g in gpus if g["index"] == index)
        try:
            instances = _layout_instances(gpu, entry)
        except MigError as exc:
            problems.append(str(exc))
            continue
        if instances is None:
            desired[index] = None
            continue
        if gpu["model"] is None:
            problems.append("%s.gpu: %s does not support MIG (not in the MIG catalog: %s)" % (
                entry["where"], _label(gpu), ", ".join(mig_catalog.MODEL_NAMES)))
            continue
        checked = []
        for number, spec in enumerate(instances):
            where = "%s.profiles[%d]" % (entry["where"], number) if entry["layout"] is None else entry["where"]
            problem = _profile_problem(gpu, spec, where)
            if problem:
                problems.append(problem)
                continue
            found = gpu["rules"]["profiles"][mig_catalog.parse_profile(spec["profile"])[1]]
            split = mig_placement.compute_split_problems(found, spec["compute"] or [])
            if split:
                problems.append("%s: %s, profile %s: %s" % (where, _label(gpu), found["name"], "; ".join(split)))
                continue
            split = sorted(spec["compute"] or [found["compute_slices"]], reverse=True)
            checked.append(dict(spec, profile=found["name"], compute=split))
        if len(checked) == len(instances):
            problem = _fit_problem(gpu, checked)
            if problem:
                problems.append(problem)
                continue
        desired[index] = checked
    if problems:
        raise MigError("the requested MIG geometry cannot be applied (nothing was changed): " + " | ".join(problems),
                       problems=problems)
    return desired


def _profile_problem(gpu, spec, where):
    rules = gpu["rules"]
    _ci, name = mig_catalog.parse_profile(spec["profile"])
    if name in rules["profiles"]:
        return None
    catalog = mig_catalog.CATALOG[gpu["model"]]["profiles"]
    if name in catalog:
        return "%s: %s, profile %s: the driver on this host does not offer it (nvidia-smi mig -lgip lists %s)" % (
            where, _label(gpu), name, ", ".join(mig_catalog.profile_names_on(rules)) if rules["profiles"] else "nothing")
    return "%s: %s, profile %s does not exist on %s; its profiles: %s" % (
        where, _label(gpu), spec["profile"], gpu["model"], ", ".join(mig_catalog.profile_names_on(rules)))


# --------------------------------------------------------------------------------------------
# 4. The plan
# --------------------------------------------------------------------------------------------


def _same_split(instance, spec):
    return sorted((c["slices"] for c in instance["compute_instances"]), reverse=True) == spec["compute"]


def _keep(gpu, wanted):
    """(kept [(instance, spec)], placements of the new specs) keeping as many matching instances as fit."""
    existing = list(gpu["instances"])
    pairs = []
    free_specs = list(wanted)
    for instance in existing:
        for spec in free_specs:
            if spec["profile"] == instance["profile"] and spec["start"] in (None, instance["start"]):
                pairs.append((instance, spec))
                free_specs.remove(spec)
                break
    # drop kept instances (those that are not pinned first, smallest first) until the rest can be placed around them
    while True:
        kept_specs = [s for _i, s in pairs]
        new_specs = [s for s in wanted if not any(s is k for k in kept_specs)]
        request = ["%s@%d" % (i["profile"], i["start"]) for i, _s in pairs]
        request += [s["profile"] + ("@%d" % s["start"] if s["start"] is not None else "") for s in new_specs]
        result = mig_placement.place_on(gpu["rules"], request)
        if result["fits"]:
            return pairs, new_specs, result
        if not pairs:
            raise MigError("%s: no placement found for %s" % (_label(gpu), ", ".join(request)))
        pairs.sort(key=lambda p: (p[1]["start"] is not None, p[0]["size"]))
        pairs.pop(0)


def _new_placements(pairs, new_specs, result):
    """[(spec, start)] for the new instances, from the solver's placements minus the kept ones."""
    taken = {(i["profile"], i["start"]) for i, _s in pairs}
    free = [p for p in result["creation_order"] if (p["profile"], p["start"]) not in taken]
    chosen = []
    for spec in sorted(new_specs, key=lambda s: s["start"] is None):
        for placement in free:
            if placement["profile"] == spec["profile"] and (spec["start"] is None or spec["start"] == placement["start"]):
                chosen.append((spec, placement))
                free.remove(placement)
                break
    return sorted(chosen, key=lambda c: (-c[1]["size"], c[1]["start"]))


def _describe(instance):
    computes = instance.get("compute_instances") or []
    split = "+".join(str(c["slices"]) for c in computes) if computes else "no compute instance"
    return "%s@%d [%s]" % (instance["profile"], instance["start"], split)


def plan_gpu(plan, gpu, wanted):
    """Record the changes for one GPU; returns its per-GPU steps for apply."""
    name = "gpu%d" % gpu["index"]
    steps = dict(gpu=gpu, mode=None, destroy=[], recompute=[], create=[])
    if wanted is None:
        if gpu["instances"]:
            for instance in gpu["instances"]:
                plan.delete("gpu_instance", "%s/%s" % (name, _describe(instance)), _describe(instance))
                steps["destroy"].append(instance)
        if gpu["mig_current"] or gpu["mig_pending"]:
            plan.update("mig_mode", name, {"mig": _mode_text(gpu)}, {"mig": "Disabled"}, ["mig"])
            steps["mode"] = False
        return steps
    if not gpu["mig_current"] or not gpu["mig_pending"]:
        plan.update("mig_mode", name, {"mig": _mode_text(gpu)}, {"mig": "Enabled"}, ["mig"])
        steps["mode"] = True
    pairs, new_specs, result = _keep(gpu, wanted)
    kept = [i for i, _s in pairs]
    for instance in gpu["instances"]:
        if not any(instance is k for k in kept):
            plan.delete("gpu_instance", "%s/%s" % (name, _describe(instance)), _describe(instance))
            steps["destroy"].append(instance)
    for instance, spec in pairs:
        if not _same_split(instance, spec):
            after = dict(instance, compute_instances=[dict(slices=s) for s in spec["compute"]])
            plan.update("compute_instances", "%s/%s@%d" % (name, instance["profile"], instance["start"]),
                        _describe(instance), _describe(after), ["compute_instances"])
            steps["recompute"].append((instance, spec))
    for spec, placement in _new_placements(pairs, new_specs, result):
        instance = dict(profile=spec["profile"], start=placement["start"],
                        compute_instances=[dict(slices=s) for s in spec["compute"]])
        plan.create("gpu_instance", "%s/%s" % (name, _describe(instance)), _describe(instance))
        steps["create"].append((spec, placement))
    return steps


def _mode_text(gpu):
    current = "Enabled" if gpu["mig_current"] else "Disabled"
    pending = "Enabled" if gpu["mig_pending"] else "Disabled"
    return current if current == pending else "%s (pending %s)" % (current, pending)


# --------------------------------------------------------------------------------------------
# 5. Apply
# --------------------------------------------------------------------------------------------


def _set_mode(smi, gpu, enable, allow_reset, report):
    """Switch MIG mode; True when it is in effect, False when a reset or reboot is still needed."""
    index = str(gpu["index"])
    _rc, text = smi("-i", index, "-mig", "1" if enable else "0")
    events = _nvsmi.parse_mig_messages(text)
    if not any(e["event"] == "mig_pending" for e in events):
        gpu["mig_current"] = gpu["mig_pending"] = enable
        return True
    gpu["mig_pending"] = enable
    processes = read_processes(smi).get(gpu["uuid"], [])
    if allow_reset and not processes:
        smi("-i", index, "-r")
        gpu["mig_current"] = enable
        return True
    reason = "GPU %d: MIG mode %s is pending until a GPU reset or reboot" % (gpu["index"], "enable" if enable else "disable")
    if processes:
        reason += "; processes in the way: %s" % ", ".join("%d (%s)" % (p["pid"], p["name"]) for p in processes)
    elif not allow_reset:
        reason += "; allow_reset is false"
    report["reboot_required"].append(dict(gpu=gpu["index"], uuid=gpu["uuid"], reason=reason, processes=processes))
    return False


def _destroy(smi, gpu, instances):
    index = str(gpu["index"])
    with_ci = [str(i["gpu_instance_id"]) for i in instances if i["compute_instances"]]
    if with_ci:
        smi("mig", "-i", index, "-dci", "-gi", ",".join(with_ci))
    if instances:
        smi("mig", "-i", index, "-dgi", "-gi", ",".join(str(i["gpu_instance_id"]) for i in instances))


def _refuse_busy_teardown(steps):
    """MigError before any write when instances to remove or re-split sit on a GPU with compute processes.

    nvidia-smi's compute-process list names the GPU, not the MIG device, and a destroy of a busy instance
    fails half-way through a GPU's (or the host's) changes; so a GPU with processes keeps its instances,
    and no GPU is touched (no partial teardown). Adding instances beside running work stays allowed.
    """
    problems = []
    for one in steps:
        gpu = one["gpu"]
        touched = one["destroy"] + [instance for instance, _spec in one["recompute"]]
        if touched and gpu["processes"]:
            problems.append("%s: cannot remove or re-split %s while compute processes run on the GPU: %s" % (
                _label(gpu), ", ".join(_describe(i) for i in touched),
                ", ".join("%d (%s)" % (p["pid"], p["name"]) for p in gpu["processes"])))
    if problems:
        raise MigError("the requested MIG geometry cannot be applied (nothing was changed): %s; stop those processes "
                       "and run again" % "; ".join(problems))


def _create_cis(smi, gpu, gi_id, slices):
    ids = ",".join(str(mig_catalog.COMPUTE_INSTANCE_PROFILE_IDS[s]) for s in slices)
    smi("mig", "-i", str(gpu["index"]), "-gi", str(gi_id), "-cci", ids)


def apply_gpu(smi, steps, allow_reset, report):
    gpu = steps["gpu"]
    if steps["mode"] is False:
        _destroy(smi, gpu, steps["destroy"])
        _set_mode(smi, gpu, False, allow_reset, report)
        return
    if steps["mode"] is True and not _set_mode(smi, gpu, True, allow_reset, report):
        return
    _destroy(smi, gpu, steps["destroy"])
    for instance, spec in steps["recompute"]:
        if instance["compute_instances"]:
            smi("mig", "-i", str(gpu["index"]), "-dci", "-gi", str(instance["gpu_instance_id"]))
        _create_cis(smi, gpu, instance["gpu_instance_id"], spec["compute"])
    for spec, placement in steps["create"]:
        found = gpu["rules"]["profiles"][spec["profile"]]
        whole = spec["compute"] == [found["compute_slices"]]
        args = ["mig", "-i", str(gpu["index"]), "-cgi", "%d:%d" % (found["gpu_instance_profile_id"], placement["start"])]
        _rc, text = smi(*(args + (["-C"] if whole else [])))
        created = [e for e in _nvsmi.parse_mig_messages(text) if e["event"] == "created_gi"]
        if not created:
            raise MigError("%s: nvidia-smi did not report the new %s instance: %s" % (_label(gpu), spec["profile"], text))
        if not whole:
            _create_cis(smi, gpu, created[0]["gpu_instance_id"], spec["compute"])


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def geometry(gpu):
    """The GPU's geometry as returned by the module."""
    return dict(index=gpu["index"], uuid=gpu["uuid"], name=gpu["name"], model=gpu["model"],
                mig_mode_current=gpu["mig_current"] if gpu["mig_capable"] else None,
                mig_mode_pending=gpu["mig_pending"] if gpu["mig_capable"] else None,
                placement_rules=gpu.get("rules_source"),
                instances=[dict(profile=i["profile"], start=i["start"], size=i["size"],
                                gpu_instance_id=i["gpu_instance_id"], compute_instances=i["compute_instances"])
                           for i in gpu["instances"]],
                mig_devices=[c["uuid"] for i in gpu["instances"] for c in i["compute_instances"] if c.get("uuid")],
                processes=gpu["processes"])


def parted_devices(gpu):
    """One GPU's geometry as a mig-parted ``mig-devices`` map, counted the way ``nvidia-mig-parted export`` does.

    mig-parted counts compute instances by profile (``1c.3g.40gb``; the GI profile alone when the
    compute instance spans its GPU instance), so a GPU instance without compute instance is not part
    of it, and which GPU instance holds which compute instance is not either.
    """
    rules = gpu["rules"]
    counts = {}
    for instance in gpu["instances"]:
        found = rules["profiles"].get(instance["profile"]) or mig_catalog.CATALOG[gpu["model"]]["profiles"][instance["profile"]]
        for compute in instance["compute_instances"]:
            key = mig_catalog.parted_profile_name(found, compute["slices"])
            counts[key] = counts.get(key, 0) + 1
    return counts


def parted_differences(gpu):
    """How mig-parted would lay out this GPU's exported map differently from the GPU itself; [] when it would not."""
    have = sorted((i["profile"], sorted((c["slices"] for c in i["compute_instances"]), reverse=True))
                  for i in gpu["instances"])
    want = sorted((name, sorted(split, reverse=True))
                  for name, split in mig_placement.pack_compute_instances_on(gpu["rules"], parted_devices(gpu)))
    if have == want:
        return []
    return ["GPU %d: mig-parted would create %s from the exported config, the GPU has %s (mig-parted counts compute "
            "instances per profile, not which GPU instance holds them, and skips GPU instances without one)"
            % (gpu["index"], _split_text(want), _split_text(have))]


def _split_text(instances):
    return ", ".join("%s[%s]" % (name, "+".join(str(s) for s in split) or "-") for name, split in instances)


def parted_config(gpus, name):
    """The host's geometry as a mig-parted config (the existing filter's code), or None for mixed/non-MIG models."""
    models = {g["model"] for g in gpus}
    if len(models) != 1 or None in models:
        return None
    layouts = [parted_devices(gpu) if gpu["mig_current"] else None for gpu in gpus]
    return mig_documents.mig_parted_config(models.pop(), layouts, name=name)


def offline_host(offline):
    """GPUs of ``offline`` (dict(model, count)) with MIG off and the catalog's rules: render mode, no nvidia-smi."""
    try:
        entry = mig_catalog.gpu_model(offline.get("model"))
    except ValueError as exc:
        raise MigError("offline.model: %s" % exc)
    count = offline.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 64:
        raise MigError("offline.count: the number of GPUs must be a whole number from 1 to 64, got %r" % (count,))
    return [dict(index=i, uuid=None, name=entry["name"], bus_id=None, model=entry["name"], mig_current=False,
                 mig_pending=False, mig_capable=True, processes=[], instances=[], hardware_differences=[],
                 rules=entry, rules_source="catalog") for i in range(count)]


def run(params, context):
    """Entry point of the mig_profile module (the contract of ``_core.contract``)."""
    params = dict(params)
    params["gpus"] = [{k: v for k, v in entry.items() if v is not None} for entry in params["gpus"]]
    path = params["nvidia_smi"] or context.get_bin_path("nvidia-smi", opt_dirs=["/usr/bin", "/usr/local/bin"])
    if not path and not params["offline"]:
        raise EngineError("nvidia-smi not found; install the NVIDIA driver or set nvidia_smi")
    params["nvidia_smi"] = path
    validate_request(params["gpus"])
    result = converge(params, lambda argv: context.run_command(argv, environ_update=dict(LC_ALL="C")),
                      context.check_mode, context.diff)
    for difference in result["mig_parted_differences"]:
        context.warn(difference)
    return result


def converge(module_params, run_command, check_mode, diff):
    """The module's work; returns the result dict. MigError for refusals and nvidia-smi failures."""
    entries = validate_request(module_params["gpus"])
    smi = Smi(run_command, module_params["nvidia_smi"])
    if module_params.get("offline"):
        check_mode = True
        gpus = offline_host(module_params["offline"])
    else:
        gpus = read_host(smi)
    desired = resolve(entries, gpus)
    plan = Plan()
    steps = [plan_gpu(plan, g, desired[g["index"]]) for g in gpus if g["index"] in desired]
    report = dict(reboot_required=[])
    reads = len(smi.commands)
    if module_params.get("offline"):
        gpus = [_predicted(g, s) for g, s in zip([g for g in gpus if g["index"] in desired], steps)] + \
            [g for g in gpus if g["index"] not in desired]
        gpus.sort(key=lambda g: g["index"])
    elif plan.changed:
        _refuse_busy_teardown(steps)
        if not check_mode:
            for one in steps:
                apply_gpu(smi, one, module_params["allow_reset"], report)
            gpus = read_host(smi)
            _check_read_back(steps, gpus, report, [c["argv"] for c in smi.commands[reads:] if _is_write(c["argv"])])
    result = plan.result(diff=diff)
    result.update(
        gpus=[geometry(g) for g in gpus],
        mig_devices=[u for g in gpus for u in geometry(g)["mig_devices"]],
        reboot_required=bool(report["reboot_required"]),
        pending=report["reboot_required"],
        mig_parted_config=parted_config(gpus, module_params["mig_parted_config_name"]),
        mig_parted_differences=[d for g in gpus if g["mig_current"] and g["model"] for d in parted_differences(g)],
        nvidia_smi_writes=[" ".join(c["argv"][1:]) for c in smi.commands[reads:] if _is_write(c["argv"])],
        hardware_differences=[d for g in gpus for d in g["hardware_differences"]],
    )
    return result


def _layout_of(instances):
    """A GPU's instances as comparable text: profile@start [compute split], in slot order."""
    return sorted("%s@%d [%s]" % (i["profile"], i["start"], "+".join(
        str(s) for s in sorted((c["slices"] for c in i["compute_instances"]), reverse=True)) or "no compute instance")
        for i in instances)


def _planned_layout(steps):
    """The instances a GPU's steps leave it with: kept ones (re-split as planned) and the created ones."""
    if steps["mode"] is False:
        return []
    gone = [id(i) for i in steps["destroy"]]
    splits = dict((id(i), spec["compute"]) for i, spec in steps["recompute"])
    kept = [dict(i, compute_instances=[dict(slices=s) for s in splits[id(i)]]) if id(i) in splits else i
            for i in steps["gpu"]["instances"] if id(i) not in gone]
    created = [dict(profile=spec["profile"], start=placement["start"],
                    compute_instances=[dict(slices=s) for s in spec["compute"]]) for spec, placement in steps["create"]]
    return _layout_of(kept + created)


def _check_read_back(steps, gpus, report, written):
    """MigError when nvidia-smi's read-back after the writes disagrees with the plan: what was planned, what the
    host shows, and every write sent (a GPU whose mode change waits for a reset or reboot is not judged)."""
    pending = set(r["gpu"] for r in report["reboot_required"])
    problems = []
    for one in steps:
        index = one["gpu"]["index"]
        if index in pending:
            continue
        after = next((g for g in gpus if g["index"] == index), None)
        planned = _planned_layout(one)
        shown = _layout_of(after["instances"]) if after else None
        if shown != planned:
            problems.append("%s: planned [%s], nvidia-smi shows %s" % (
                _label(one["gpu"]), ", ".join(planned), "[%s]" % ", ".join(shown) if shown is not None else "no such GPU"))
    if problems:
        raise MigError("the MIG geometry read back after the changes differs from the plan: %s; written: %s" % (
            "; ".join(problems), "; ".join(" ".join(argv[1:]) for argv in written) or "nothing"), problems=problems)


def _predicted(gpu, steps):
    """The geometry a planned GPU will have (render mode: there is no host to read back)."""
    enable = steps["mode"] if steps["mode"] is not None else gpu["mig_current"]
    instances = [dict(profile=spec["profile"], start=placement["start"], size=placement["size"], gpu_instance_id=None,
                      compute_instances=[dict(compute_instance_id=None, slices=s, uuid=None) for s in spec["compute"]])
                 for spec, placement in steps["create"]]
    return dict(gpu, mig_current=enable, mig_pending=enable, instances=sorted(instances, key=lambda i: i["start"]))


def _is_write(argv):
    return any(flag in argv for flag in ("-cgi", "-dgi", "-cci", "-dci", "-mig", "-r"))
