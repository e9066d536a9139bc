# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action groups (meta/runtime.yml) against the shared argument specs.

``module_defaults`` of ``group/gpu_ops.cluster.<name>`` is merged into the arguments of every member
of the group, so every member must accept the whole shared spec of its group, document the
membership it has, and a member of both groups must accept the other cloud's account options
(ignored) while still refusing the other cloud's pool options.
"""

from __future__ import annotations

import importlib
import pathlib

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool as _aks_nodepool
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core import argspec as _args
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import nodepool as _gke_nodepool
from ansible_collections.gpu_ops.cluster.plugins.modules import gpu_nodepool

ROOT = pathlib.Path(__file__).resolve().parents[2]
GROUP_SPECS = {"gcp": _args.GCP_COMMON_SPEC, "azure": _args.AZURE_COMMON_SPEC}
ALL_GROUPS = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["action_groups"]
# the cloud groups; group/gpu_ops.cluster.k8s (the Kubernetes connection) is tested on its own below
GROUPS = dict((name, members) for name, members in ALL_GROUPS.items() if name != "k8s")

# what a fleet playbook sets for each group (every account option, non-default values)
GCP_DEFAULTS = dict(project="fleet-project", auth_kind="accesstoken", access_token="ya29.token",
                    scopes=["https://www.googleapis.com/auth/cloud-platform"],
                    container_endpoint="https://container.example/", compute_endpoint="https://compute.example/",
                    service_account_file="/nonexistent/sa.json", request_timeout=30)
AZURE_DEFAULTS = dict(subscription_id="00000000-0000-0000-0000-000000000000", cloud="usgovernment",
                      arm_endpoint="https://arm.example/", tenant_id="tenant", client_id="client",
                      client_secret="secret", max_retries=3)
GKE_POOL = dict(provider="gke", name="gpu", cluster="c1", location="us-central1", machine_type="g2-standard-8",
                accelerator_type="nvidia-l4", accelerator_count=1, node_count=1)
AKS_POOL = dict(provider="aks", name="mig", cluster="aks1", resource_group="rg", vm_size="Standard_ND96asr_v4",
                node_count=1, gpu_instance_profile="MIG1g")


def members():
    return sorted((group, module) for group, modules in GROUPS.items() for module in modules)


def module_named(name):
    return importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.modules.%s" % name)


def test_every_group_has_a_shared_spec():
    assert sorted(GROUPS) == sorted(GROUP_SPECS)


@pytest.mark.parametrize("group, name", members())
def test_member_accepts_the_whole_shared_spec_of_its_group(group, name):
    spec = module_named(name).argument_spec()
    for option, shared in GROUP_SPECS[group].items():
        assert option in spec, "%s lacks %s, which module_defaults of group/gpu_ops.cluster.%s may set" % (
            name, option, group)
        assert spec[option]["type"] == shared["type"], (name, option)
        assert spec[option].get("no_log", False) == shared.get("no_log", False), (name, option)


def fragment_docs(name):
    """The documentation the module's doc fragments add, each read as ansible-doc reads it (slug -> var)."""
    for slug in yaml.safe_load(module_named(name).DOCUMENTATION)["extends_documentation_fragment"]:
        if not slug.startswith("gpu_ops.cluster."):
            continue  # another collection's fragment (kubernetes.core's connection options)
        parts = slug.split(".")
        fragment = importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.doc_fragments.%s" % parts[2])
        yield yaml.safe_load(getattr(fragment.ModuleDocFragment, parts[3].upper() if len(parts) > 3 else "DOCUMENTATION"))


@pytest.mark.parametrize("group, name", members())
def test_member_documents_its_membership(group, name):
    documented = [doc["attributes"]["action_group"] for doc in fragment_docs(name)
                  if "action_group" in doc.get("attributes", {})]
    assert len(documented) == 1, name
    wanted = sorted("gpu_ops.cluster.%s" % g for g, modules in GROUPS.items() if name in modules)
    assert sorted(documented[0]["membership"]) == wanted


@pytest.mark.parametrize("group, name", members())
def test_member_documents_every_shared_option_of_its_group(group, name):
    documented = set()
    for doc in fragment_docs(name):
        documented.update(doc.get("options") or {})
    assert set(GROUP_SPECS[group]) <= documented, sorted(set(GROUP_SPECS[group]) - documented)


def test_account_specs_are_disjoint_and_session_options_shared():
    assert not set(_args.GCP_ACCOUNT_SPEC) & set(_args.AZURE_ACCOUNT_SPEC)
    for spec in GROUP_SPECS.values():
        assert set(spec) - set(_args.SESSION_SPEC) in (set(_args.GCP_ACCOUNT_SPEC), set(_args.AZURE_ACCOUNT_SPEC))
        for option, shared in _args.SESSION_SPEC.items():
            assert spec[option] == shared


def pool_params(pool):
    """gpu_nodepool's parameters for ``pool`` with both groups' module_defaults merged in."""
    args = dict(GCP_DEFAULTS, **AZURE_DEFAULTS)
    args.update(pool)
    result = ArgumentSpecValidator(gpu_nodepool.argument_spec()).validate(args)
    assert result.error_messages == []
    return result.validated_parameters


@pytest.mark.parametrize("pool, engine", [(AKS_POOL, _aks_nodepool), (GKE_POOL, _gke_nodepool)],
                         ids=["aks", "gke"])
def test_both_groups_defaults_are_accepted_by_each_provider(pool, engine):
    problems = engine.validate(pool_params(pool))
    assert not problems, "; ".join(problems.items)


@pytest.mark.parametrize("pool, engine, foreign", [
    (AKS_POOL, _aks_nodepool, dict(machine_type="a3-megagpu-8g")),
    (AKS_POOL, _aks_nodepool, dict(location="us-central1")),
    (GKE_POOL, _gke_nodepool, dict(vm_size="Standard_ND96asr_v4")),
    (GKE_POOL, _gke_nodepool, dict(resource_group="rg")),
], ids=["aks-machine_type", "aks-location", "gke-vm_size", "gke-resource_group"])
def test_pool_options_of_the_other_provider_are_still_refused(pool, engine, foreign):
    problems = engine.validate(pool_params(dict(pool, **foreign)))
    option = next(iter(foreign))
    assert option in "; ".join(problems.items) and "cannot be used with provider=%s" % pool["provider"] in "; ".join(problems.items)


def test_the_k8s_group_carries_kubernetes_core_connection_options_only_to_members_that_take_them():
    """group/gpu_ops.cluster.k8s: kubernetes.core's k8s and helm groups (extended), k8s_cluster_info, and the
    collection's own Kubernetes actions, each of which documents kubernetes.core's connection options."""
    group = ALL_GROUPS["k8s"]
    [metadata] = [entry["metadata"] for entry in group if isinstance(entry, dict)]
    assert metadata == {"extend_group": ["kubernetes.core.k8s", "kubernetes.core.helm"]}
    own = [entry for entry in group if isinstance(entry, str) and "." not in entry]
    assert sorted(own) == ["k8s_apply_plan", "k8s_daemonset_wait", "k8s_objects_info"]
    assert [entry for entry in group if isinstance(entry, str) and "." in entry] == ["kubernetes.core.k8s_cluster_info"]
    for name in own:
        fragments = yaml.safe_load(module_named(name).DOCUMENTATION)["extends_documentation_fragment"]
        assert "kubernetes.core.k8s_auth_options" in fragments, name
        documented = [doc["attributes"]["action_group"]["membership"] for doc in fragment_docs(name)
                      if "action_group" in doc.get("attributes", {})]
        assert documented == [["gpu_ops.cluster.k8s"]], name
