# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What Kubernetes nodes must show for a MIG layout, and how to judge them.

Expected allocatable resources and GPU Feature Discovery labels per strategy (none / single / mixed)
and sharing mode, node checks against them, and the GPU Operator MIG manager's view of a node
(``nvidia.com/mig.config`` and its state label, the mig-parted config it reads, recent events).
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import (
    GPU_RESOURCE, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, MIG_CONFIG_STATES, MIG_RESOURCE_PREFIX, SHARING_STRATEGIES, STRATEGIES, find_gpu_model, gpu_model,
    resource_name,
)
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.placement import (
    _describe, _gi_name, normalize_layout, normalize_layout_on, place_on, standard_layouts_on,
)


def expected_resources(model, gpus, layout, strategy):
    """The device-plugin resources one node advertises: {resource name: count}.

    - ``none``: ``nvidia.com/gpu`` = number of GPUs (MIG devices are not advertised);
    - ``single``: ``nvidia.com/gpu`` = number of MIG devices; every GPU must have MIG on with the
      same single profile;
    - ``mixed``: ``nvidia.com/mig-<profile>`` per profile, plus ``nvidia.com/gpu`` for GPUs with
      MIG disabled.
    """
    _check_strategy(strategy)
    return _advertised(normalize_layout(model, layout, gpus), strategy)


def _check_strategy(strategy):
    if strategy not in STRATEGIES:
        raise ValueError("MIG strategy %r is not one of: %s" % (strategy, ", ".join(STRATEGIES)))


def _advertised(per_gpu, strategy):
    """``expected_resources`` of layouts already normalised per GPU (``normalize_layout``)."""
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
    if settings["strategy"] != "mps":
        return shared_resources(expected_resources(model, gpus, layout, strategy), sharing, strategy)
    per_gpu = normalize_layout(model, layout, gpus)
    if any(one is not None for one in per_gpu) and strategy != "none":
        raise ValueError("MPS sharing is not supported for MIG devices; disable MIG or use time-slicing")
    _check_strategy(strategy)
    return shared_resources(_advertised(per_gpu, strategy), sharing, strategy)


def expected_labels(model, gpus, layout, strategy, sharing=None):
    """The GFD labels a node must carry: label -> rule.

    A rule is a string (exact value) or a dict: ``{"present": true}``, ``{"pattern": regex}``
    (re.search), or ``{"gpu_model": name}`` (the product names this catalog model when the
    product is known to the catalog).
    """
    entry = gpu_model(model)
    settings = _sharing(sharing)
    _check_strategy(strategy)
    per_gpu = normalize_layout_on(entry, layout, gpus)
    resources = _advertised(per_gpu, strategy)
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
# Verification against Kubernetes Nodes
# --------------------------------------------------------------------------------------------


def _quantity(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    return int(text) if re.match(r"^\d+\Z", text) else text


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
        names = sorted(standard_layouts_on(entry))
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
            result = place_on(entry, dict(devices))
        except ValueError as exc:
            problems.append("config %r of %s: %s" % (name, source, exc))
            continue
        if not result["fits"]:
            problems.append("config %r of %s: mig-devices %s do not fit one %s: %s" % (
                name, source, _describe(dict(devices)), entry["name"], result["reason"]))
    return problems


_PENDING, _REBOOTING, _SUCCESS, _FAILED = MIG_CONFIG_STATES


def mig_config_state(node, config):
    """One Node's MIG manager state for ``config``: dict(name, config, state, done, failed)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    have, state = labels.get(MIG_CONFIG_LABEL), labels.get(MIG_CONFIG_STATE_LABEL)
    current = have == config
    return dict(name=(node.get("metadata") or {}).get("name"), config=have, state=state,
                done=current and state == _SUCCESS, failed=current and state == _FAILED)


def mig_label_patches(targets, nodes, config, every=False):
    """Node patches that ask the MIG manager for ``config`` on the ``targets`` (node names).

    Each patch sets ``nvidia.com/mig.config`` to ``config`` and ``nvidia.com/mig.config.state`` to
    ``pending`` (what reconfigure-mig.sh then moves on to success or failed), so a wait never reads the
    previous config's success. Only the nodes (read as ``nodes``) whose config label differs get a patch:
    a patch is a write even when it changes nothing, so a re-run sends none. ``every`` (render mode:
    nothing was read) patches them all.
    """
    current = dict((((n.get("metadata") or {}).get("name")), ((n.get("metadata") or {}).get("labels") or {}).get(MIG_CONFIG_LABEL))
                   for n in nodes or [])
    return [dict(apiVersion="v1", kind="Node", metadata=dict(name=name, labels={
        MIG_CONFIG_LABEL: config, MIG_CONFIG_STATE_LABEL: _PENDING}))
        for name in targets if every or current.get(name) != config]


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
        hint = {_FAILED: "the MIG manager could not apply it; see the nvidia-mig-manager pod's log on the node",
                _REBOOTING: "the MIG manager is rebooting the node (WITH_REBOOT=true)"}.get(
            state["state"], "the MIG manager has not finished; is nvidia-mig-manager running there "
                            "(label nvidia.com/gpu.deploy.mig-manager=true)?")
        recent = node_events(events, state["name"], event_count)
        lines.append("node %s: %s for config %s - %s; recent events: %s" % (
            state["name"], what, config, hint, "; ".join(recent) if recent else "none"))
    return dict(converged=bool(states) and all(s["done"] for s in states),
                failed=[s["name"] for s in states if s["failed"]], nodes=states, message=" | ".join(lines))
