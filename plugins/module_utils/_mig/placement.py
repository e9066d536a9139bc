# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""MIG layouts and the placement solver.

Turns a requested layout (profile counts, optional compute-instance splits) into explicit placements on
one GPU of a catalog model, refusing what does not fit with the nearest layout that does. Geometry and
rules come from ``_catalog/mig`` (see its docstring); nothing here keeps a table of its own except the
nvidia-smi compute-instance profile ids (NVIDIA MIG User Guide, ``nvidia-smi mig -lcip``).

Each public function takes ``model`` (a catalog name, an nvidia-smi or GFD product name, or a catalog
entry) and resolves it once with ``gpu_model``: an unknown model is its ValueError naming the supported
models. Its ``*_on`` twin takes the entry already resolved (``gpu_model``'s result, or a host's rules
narrowed from it) and never resolves it again; everything below the public functions passes the entry
down, so a request is looked up in the catalog once however many layouts it tries.
"""

from __future__ import annotations

import copy

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import (
    COMPUTE_INSTANCE_PROFILE_IDS, gpu_model, parse_profile, parted_profile_name, profile_names_on, profile_on,
)


# --------------------------------------------------------------------------------------------
# Layouts and the placement solver
# --------------------------------------------------------------------------------------------


def standard_layouts(model):
    """The mig-parted / GPU Operator standard configs of a model: name -> layout.

    ``all-disabled`` -> None, ``all-enabled`` -> {}, ``all-<profile>`` -> the profile at its maximum
    count (``+`` written as ``.`` in the name), ``all-balanced``.
    """
    return standard_layouts_on(gpu_model(model))


def standard_layouts_on(entry):
    """``standard_layouts`` of a resolved model entry."""
    layouts = {"all-disabled": None, "all-enabled": {}}
    for name in profile_names_on(entry):
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
        for gi_name, split in pack_compute_instances_on(entry, request):
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
        found = profile_on(entry, text)
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
    return pack_compute_instances_on(gpu_model(model), counts)


def pack_compute_instances_on(entry, counts):
    """``pack_compute_instances`` on a resolved model entry."""
    flat = []
    for name, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("count of %s must be a whole number >= 0, got %r" % (name, count))
        found = profile_on(entry, name)
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
    return place_on(gpu_model(model), request)


def place_on(entry, request):
    """``place`` on a resolved model entry (the catalog's, or a host's narrowed rules)."""
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
        standard = standard_layouts_on(entry)
        if text in standard:
            return copy.deepcopy(standard[text])
        found = profile_on(entry, text)
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
            key = parted_profile_name(profile_on(entry, name), parse_profile(name)[0])
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
    return normalize_layout_on(gpu_model(model), layout, gpus)


def normalize_layout_on(entry, layout, gpus=None):
    """``normalize_layout`` on a resolved model entry."""
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
        result = place_on(entry, one)
        if not result["fits"]:
            raise ValueError("MIG layout of GPU %d %s does not fit %s: %s"
                             % (index, _describe(one), entry["name"], result["reason"]))
    return per_gpu


def _gi_name(name):
    return parse_profile(name)[1]


# --------------------------------------------------------------------------------------------
# Compute instances and the nearest layout that fits (bare-metal MIG module)
# --------------------------------------------------------------------------------------------


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


def _count_vectors(limits, total):
    """Every tuple of counts ``c`` with ``0 <= c[i] <= limits[i]`` and ``sum(c) == total``, the largest first counts first."""
    if not limits:
        if total == 0:
            yield ()
        return
    rest = sum(limits[1:])
    for first in range(min(limits[0], total), max(0, total - rest) - 1, -1):
        for tail in _count_vectors(limits[1:], total - first):
            yield (first,) + tail


def nearest_fit(model, request):
    """The largest part of ``request`` (a list of profiles, ``@slot`` pins allowed) that fits, or None.

    Drops as few instances as possible; among equal drops keeps the most compute, then memory, then the
    earliest entries. Equal entries are interchangeable, so the search runs over how many of each distinct
    entry to keep (a handful of profiles) rather than over subsets of the list, and never keeps more
    instances than the GPU has memory slices (each instance takes at least one): a list of a thousand
    entries is answered as fast as one of eight.
    """
    return nearest_fit_on(gpu_model(model), request)


def nearest_fit_on(entry, request):
    """``nearest_fit`` on a resolved model entry (the catalog's, or a host's narrowed rules)."""
    items = [str(text) for text in request]
    distinct = list(dict.fromkeys(items))
    found = {text: profile_on(entry, text.partition("@")[0]) for text in distinct}
    limits = [min(items.count(text), found[text]["max_instances"]) for text in distinct]
    for keep in range(min(len(items), entry["memory_slices"], sum(limits)), 0, -1):
        best = None
        for counts in _count_vectors(limits, keep):
            chosen = [found[text] for text, count in zip(distinct, counts) for _copy in range(count)]
            score = (sum(f["compute_slices"] for f in chosen), sum(f["memory_slices"] for f in chosen))
            if score[0] > entry["compute_slices"] or score[1] > entry["memory_slices"]:
                continue
            if best is not None and score < best[0]:
                continue
            remaining = dict(zip(distinct, counts))
            kept = []
            for index, text in enumerate(items):
                if remaining[text]:
                    remaining[text] -= 1
                    kept.append(index)
            candidate = [items[i] for i in kept]
            if best is not None and (score, [-i for i in kept]) <= (best[0], best[1]):
                continue
            if place_on(entry, candidate)["fits"]:
                best = (score, [-i for i in kept], candidate)
        if best is not None:
            return best[2]
    return None
