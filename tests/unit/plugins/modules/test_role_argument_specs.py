# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role argument specs are as strict as the modules they feed, and agree with them.

Every dict (or list of dicts) role option carries suboption specs, except free-form maps, which the
roles check with the shared name rules instead; suboptions that are handed to a module keep the
module's names, types and choices.
"""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.modules import gke_cluster, gke_multinetwork, gpu_nodepool

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..")

# free-form maps: keys are the user's (labels, selectors, chart values, NCCL variables) or a module result
FREE_FORM = {
    "awx_job_templates_templates.extra_vars": "a job template's extra variables, for any playbook of the project",
    "apply_manifests": "Kubernetes objects, checked by k8s_manifest_problems",
    "apply_chart.values": "chart values",
    "apply_names": "checked by its own suboptions",
    "gcp_gpu_vpcs_fabric": "a gke_multinetwork result, checked by content",
    "gke_gpu_cluster_fabric": "a gke_multinetwork result, checked by content",
    "gke_gpu_cluster_node_pool.node_labels": "labels, checked by the names rule",
    "gpudirect_installer_labels": "labels, checked by the names rule",
    "gpudirect_installer_wait_daemonset": "a DaemonSet as the apply step returned it, checked by kind and name",
    "nri_device_injector_labels": "labels, checked by the names rule",
    "tcpx_installer_labels": "labels, checked in gpudirect_installer",
    "tcpxo_installer_labels": "labels, checked in gpudirect_installer",
    "nccl_test_nccl_overrides": "NCCL variables, checked by the catalog",
    "nvidia_device_plugin_node_selector": "labels, checked by the names rule",
    "nvidia_device_plugin_pool_selector": "labels, checked by the names rule",
    "nvidia_device_plugin_values": "chart values",
    "dra_driver_values": "chart values",
    "dra_driver_gpu_node_selector": "labels, checked by the names rule",
    "dra_driver_gpu_operator.values": "the GPU Operator's chart values, read by dra_driver_plan for draDriver and gpuCluster",
    "awx_job_templates_credential_types": "the user's short names -> AWX credential type names; the templates' "
                                          "credentials are checked against its keys",
    "awx_job_templates_credentials.inputs": "the inputs of the credential's type (secret, no_log)",
    "validate_health_nvbandwidth_floors": "GPU model -> floor in GB/s, checked by the health checks",
    "validate_health_nccl_loopback_floors": "GPU model -> floor in GB/s, checked by the health checks",
    "awx_job_templates_controller": "awx.awx's connection options and their aliases, handed as given to its controller_api "
                                    "lookup, which checks them",
    "mps_pinned_device_mem_limit": "device index or UUID -> limit, checked by mps_host_settings",
    "mps_k8s_pool_selector": "labels, checked by the names rule",
    "mps_ack_node_selector": "labels, checked by the names rule",
    "mps_ack_exempt_labels": "labels, checked by the names rule",
    "mig_manager_node_selector": "labels, checked by the names rule",
    "mig_manager_parted_config": "a mig-parted document (or a mig_profile result), checked by mig_manager_problems",
    "validate_mig_parted_config": "a mig-parted ConfigMap or document, checked by the snapshot's mig_parted reader",
    "gpu_operator_values": "chart values, checked against the chart version's keys",
    "gpu_operator_mig.config": "a mig-parted document, checked by gpu_operator_plan",
    "gpu_operator_driver_pools.node_selector": "labels, checked by the names rule in gpu_operator_plan",
    "network_operator_values": "chart values, checked against the chart version's keys",
}


def _specs():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        with open(path, encoding="utf-8") as handle:
            for entry, spec in yaml.safe_load(handle)["argument_specs"].items():
                yield path.split(os.sep)[-3], entry, spec.get("options") or {}


def _walk(options, prefix=""):
    for name, spec in options.items():
        yield prefix + name, spec
        yield from _walk(spec.get("options") or {}, prefix + name + ".")


def test_every_structured_option_has_suboptions():
    missing = []
    for role, entry, options in _specs():
        for name, spec in _walk(options):
            structured = spec.get("type") == "dict" or (spec.get("type") == "list" and spec.get("elements") == "dict")
            if structured and not spec.get("options") and name not in FREE_FORM:
                missing.append("%s/%s: %s" % (role, entry, name))
    assert missing == [], "dict/list options without suboptions (add them, or list the option as free-form): %s" % missing


def _role_option(role, entry, name):
    options = dict((e, o) for r, e, o in _specs() if r == role)[entry]
    return options[name]["options"]


def _assert_agrees(role_options, module_options, where):
    for name, spec in role_options.items():
        assert name in module_options, "%s.%s is not an option of the module" % (where, name)
        module_spec = module_options[name]
        assert spec.get("type", "str") == module_spec.get("type", "str"), "%s.%s: type differs" % (where, name)
        if "choices" in spec:
            assert sorted(spec["choices"]) == sorted(module_spec["choices"]), "%s.%s: choices differ" % (where, name)
        if spec.get("options"):
            _assert_agrees(spec["options"], module_spec["options"], where + "." + name)


@pytest.mark.parametrize("role, entry, option, module_options", [
    ("gke_gpu_cluster", "main", "gke_gpu_cluster_node_pool", gpu_nodepool.argument_spec()),
    ("gke_gpu_cluster", "teardown", "gke_gpu_cluster_node_pool", gpu_nodepool.argument_spec()),
    ("gke_gpu_cluster", "main", "gke_gpu_cluster_maintenance_exclusion",
     gke_cluster.argument_spec()["maintenance_exclusion"]["options"]),
    ("gke_gpu_cluster", "main", "gke_gpu_cluster_ip_allocation", gke_cluster.argument_spec()["ip_allocation"]["options"]),
    ("gke_gpu_cluster", "main", "gke_gpu_cluster_default_node_pool",
     gke_cluster.argument_spec()["default_node_pool"]["options"]),
    ("gke_gpu_cluster", "main", "gke_gpu_cluster_master_authorized_networks",
     gke_cluster.argument_spec()["master_authorized_networks"]["options"]),
    ("gcp_gpu_vpcs", "main", "gcp_gpu_vpcs_networks", gke_multinetwork.argument_spec()["networks"]["options"]),
])
def test_suboptions_agree_with_the_module(role, entry, option, module_options):
    _assert_agrees(_role_option(role, entry, option), module_options, option)
