# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG filters: the catalog in plugins/module_utils/_catalog/mig.py, exposed to roles and playbooks.

Documentation: plugins/filter/<filter name>.yml.
"""

from __future__ import annotations

import re

import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs as _inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import filtered, plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

mig_catalog = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig")
mig_documents = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.documents")
mig_nodes = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.nodes")
mig_placement = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._mig.placement")


def _target(name, gpu_model, gpus, layout):
    """(model, gpus, layout) from explicit arguments or from a mig_aks_profile result."""
    if isinstance(gpu_model, dict):
        profile = gpu_model
        missing = [k for k in ("gpu_model", "gpus_per_vm", "layout") if k not in profile]
        if missing:
            raise AnsibleFilterError("%s: the input dict is not a mig_aks_profile result (missing %s)"
                                     % (name, ", ".join(missing)))
        gpus = profile["gpus_per_vm"] if gpus is None else gpus
        layout = profile["layout"] if layout is None else layout
        gpu_model = profile["gpu_model"]
    if gpus is None:
        raise AnsibleFilterError("%s: gpus (GPUs per node) is required" % name)
    try:
        gpus = _inputs.whole_number("gpus", gpus, minimum=1)
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, str(exc).replace("gpus: must", "gpus must")))
    if not isinstance(gpu_model, str) or not gpu_model:
        raise AnsibleFilterError("%s: gpu_model must be a GPU model name or a mig_aks_profile result, got %r"
                                 % (name, gpu_model))
    return gpu_model, gpus, plain(layout)


def _sharing(name, sharing):
    """The sharing dict (or None); anything else names the argument."""
    try:
        return plain(_inputs.mapping("sharing", sharing)) or None
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc))


def _call(filter_name, function, *args, **kwargs):
    return filtered(AnsibleFilterError, filter_name, function, *args, **kwargs)


def mig_aks_profile(vm_size, gpu_instance_profile):
    """What an AKS node pool of vm_size with gpuInstanceProfile gives on every node."""
    return _call("mig_aks_profile", mig_catalog.aks_profile, vm_size, gpu_instance_profile)


def mig_expected_resources(gpu_model, gpus=None, layout=None, strategy="single", sharing=None):
    """Resource name -> count one node advertises (device plugin, MIG strategy, sharing)."""
    model, gpus, layout = _target("mig_expected_resources", gpu_model, gpus, layout)
    return _call("mig_expected_resources", mig_nodes.expected_node_resources, model, gpus, layout, strategy,
                 _sharing("mig_expected_resources", sharing))


def mig_expected_labels(gpu_model, gpus=None, layout=None, strategy="single", sharing=None):
    """GFD label -> rule one node must carry."""
    model, gpus, layout = _target("mig_expected_labels", gpu_model, gpus, layout)
    return _call("mig_expected_labels", mig_nodes.expected_labels, model, gpus, layout, strategy,
                 _sharing("mig_expected_labels", sharing))


def mig_verify_nodes(nodes, resources, labels=None, selector=None, min_nodes=1):
    """Compare Kubernetes Nodes with the expected resources and labels."""
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError("mig_verify_nodes: the input must be a list of Node documents (k8s_info resources)")
    try:
        _inputs.objects("nodes", nodes)
        for name, value in (("resources", resources), ("labels", labels), ("selector", selector)):
            _inputs.mapping(name, value)
        min_nodes = _inputs.whole_number("min_nodes", 0 if min_nodes is None else min_nodes, minimum=0)
    except ValueError as exc:
        raise AnsibleFilterError("mig_verify_nodes: %s" % exc)
    return _call("mig_verify_nodes", mig_nodes.verify_nodes, plain(nodes), plain(resources or {}), plain(labels or {}),
                 plain(selector or {}), min_nodes)


def mig_device_plugin_config(strategy, sharing=None, resources=None, fail_on_init_error=None):
    """A k8s-device-plugin config file (version v1) for a MIG strategy and optional sharing."""
    if fail_on_init_error is not None and not isinstance(fail_on_init_error, bool):
        raise AnsibleFilterError("mig_device_plugin_config: fail_on_init_error must be true or false, got %r"
                                 % (fail_on_init_error,))
    if resources is not None and not isinstance(resources, dict):
        raise AnsibleFilterError("mig_device_plugin_config: resources must be a dict of resource name -> count, got %s"
                                 % type(resources).__name__)
    return _call("mig_device_plugin_config", mig_documents.device_plugin_config, strategy,
                 _sharing("mig_device_plugin_config", sharing), plain(resources), fail_on_init_error)


def mig_placements(gpu_model, request):
    """Place one GPU's MIG request; fits, reason and concrete start slots."""
    if not isinstance(request, (dict, list, tuple, str)) or not request:
        raise AnsibleFilterError("mig_placements: request must be a non-empty profile list, profile -> count dict or "
                                 "layout name, got %r" % (request,))
    return _call("mig_placements", mig_placement.place, gpu_model, plain(request))


def mig_parted_config(gpu_model, layout, name="custom", device_filter=True, include_defaults=True):
    """A mig-parted version v1 config holding the layout as config name."""
    try:
        _inputs.boolean("device_filter", device_filter)
        _inputs.boolean("include_defaults", include_defaults)
        if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z", name):
            raise ValueError("name: %r is not a mig-parted config name (letters, digits, '.', '_' and '-')" % (name,))
    except ValueError as exc:
        raise AnsibleFilterError("mig_parted_config: %s" % exc)
    return _call("mig_parted_config", mig_documents.mig_parted_config, gpu_model, plain(layout), name=name,
                 device_filter=bool(device_filter), include_defaults=bool(include_defaults))


DEFAULT_PARTED_CONFIG_MAP = "default-mig-parted-config"


def _node_name(node):
    return node if isinstance(node, str) else ((node or {}).get("metadata") or {}).get("name")


def _node_model(node, gpu_model):
    if gpu_model:
        return mig_catalog.gpu_model(gpu_model)["name"]
    labels = {} if isinstance(node, str) else ((node.get("metadata") or {}).get("labels") or {})
    return mig_catalog.find_gpu_model(labels.get("nvidia.com/gpu.product"))


def _config_map_document(name, config_maps, wanted):
    """(parsed config.yaml, source, problem) of the MIG manager's ConfigMap for a node."""
    by_name = {(c.get("metadata") or {}).get("name"): c for c in config_maps}
    if not wanted:
        wanted = "%s-mig-config" % name if "%s-mig-config" % name in by_name else DEFAULT_PARTED_CONFIG_MAP
    source = "ConfigMap %s" % wanted
    if wanted not in by_name:
        return None, source, ("%s not found in the MIG manager's namespace (is the GPU Operator's MIG manager installed, "
                              "and is migManager.config.name right?)" % source)
    text = (by_name[wanted].get("data") or {}).get("config.yaml")
    if text is None:
        return None, source, "%s has no config.yaml key" % source
    try:
        return yaml.safe_load(text), source, None
    except yaml.YAMLError as exc:
        return None, source, "%s: config.yaml is not YAML: %s" % (source, " ".join(str(exc).split()))


def mig_manager_problems(nodes, config, config_maps=None, config_map="", parted_config=None, gpu_model=""):
    """Why the MIG manager cannot apply config to these nodes (Node documents, or names in render mode); [] when it can."""
    if not isinstance(nodes, (list, tuple)) or not nodes:
        raise AnsibleFilterError("mig_manager_problems: the input must be a non-empty list of Nodes or node names")
    if not isinstance(config, str) or not config:
        raise AnsibleFilterError("mig_manager_problems: config must be a mig-parted config name, got %r" % (config,))
    parted_config = plain(parted_config) or None
    problems = []
    for node in nodes:
        name = _node_name(node)
        try:
            model = _node_model(node, gpu_model)
        except ValueError as exc:
            raise AnsibleFilterError("mig_manager_problems: gpu_model: %s" % exc)
        if parted_config is not None:
            document, source, problem = parted_config, "mig_manager_parted_config", None
        elif config_maps is not None:
            document, source, problem = _config_map_document(name, plain(config_maps), config_map)
        else:
            document, source, problem = None, "the GPU Operator's default config", None
        if problem is None:
            found = mig_nodes.parted_config_problems(document, config, model, source)
            problem = "; ".join(found) if found else None
        if problem:
            problems.append("node %s: %s" % (name, problem))
    return problems


def mig_config_status(nodes, config, events=None, event_count=10):
    """Where the MIG manager stands on every node for config (converged, failed, nodes, message)."""
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError("mig_config_status: the input must be a list of Node documents (k8s_info resources)")
    try:
        _inputs.objects("nodes", nodes)
        event_count = _inputs.whole_number("event_count", event_count, minimum=0)
    except ValueError as exc:
        raise AnsibleFilterError("mig_config_status: %s" % exc)
    return mig_nodes.mig_config_status(plain(nodes), config, plain(events or []), event_count)


def mig_label_patches(targets, nodes, config, every=False):
    """Node patches for the MIG manager's config label (and its state, pending), only where the config label differs."""
    if not isinstance(targets, (list, tuple)) or not all(isinstance(t, str) and t for t in targets):
        raise AnsibleFilterError("mig_label_patches: the input must be a list of node names, got %r" % (targets,))
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, dict) for n in nodes):
        raise AnsibleFilterError("mig_label_patches: nodes must be a list of Node documents (k8s_info resources), got %s"
                                 % type(nodes).__name__)
    if not isinstance(config, str) or not config:
        raise AnsibleFilterError("mig_label_patches: config must be a mig-parted config name, got %r" % (config,))
    try:
        _inputs.boolean("every", every)
    except ValueError as exc:
        raise AnsibleFilterError("mig_label_patches: %s" % exc)
    return _call("mig_label_patches", mig_nodes.mig_label_patches, list(targets), plain(nodes), config, bool(every))


class FilterModule:
    """MIG filters."""

    def filters(self):
        return {
            "mig_aks_profile": mig_aks_profile,
            "mig_expected_resources": mig_expected_resources,
            "mig_expected_labels": mig_expected_labels,
            "mig_verify_nodes": mig_verify_nodes,
            "mig_device_plugin_config": mig_device_plugin_config,
            "mig_placements": mig_placements,
            "mig_parted_config": mig_parted_config,
            "mig_manager_problems": mig_manager_problems,
            "mig_config_status": mig_config_status,
            "mig_label_patches": mig_label_patches,
        }
