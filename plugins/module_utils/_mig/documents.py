# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Configuration documents derived from the MIG catalog: the mig-parted config the GPU Operator's MIG
manager reads, and the NVIDIA device plugin's config (MIG strategy, time-slicing or MPS sharing).
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import GPU_RESOURCE, STRATEGIES, gpu_model
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.nodes import _sharing
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.placement import normalize_layout_on


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
        per_gpu = normalize_layout_on(entry, layout, len(layout) if gpus is None else gpus)
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
        one = normalize_layout_on(entry, layout, 1)[0]
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
