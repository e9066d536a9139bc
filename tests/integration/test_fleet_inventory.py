# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""inventories/fleet: every host's variables, templated as a play sees them, pass the roles' argument specs.

A variable named after a role (``<role>_...``) must be an option of that role's entry point, of the right
type and among its choices; the options a role requires and the playbook does not set must be there.
"""

from __future__ import annotations

import pytest
import yaml

from ansible.inventory.manager import InventoryManager
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

from ansible_collections.gpu_ops.cluster.plugins.module_utils import _gpudirect
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

FLEET = REPO_ROOT / "inventories" / "fleet"
# group -> (role, entry point, options its playbook sets itself) for every role the group's playbook runs
ROLES_BY_GROUP = {
    "gke_clusters": [("gke_gpu_cluster", "main", {"gke_gpu_cluster_fabric"}),
                     ("gcp_gpu_vpcs", "main",
                      {"gcp_gpu_vpcs_project", "gcp_gpu_vpcs_cluster", "gcp_gpu_vpcs_location", "gcp_gpu_vpcs_gpudirect"}),
                     ("nccl_test", "main", set())],
    "aks_clusters": [("nvidia_device_plugin", "main", set())],
}


def role_options(role, entry_point):
    spec = yaml.safe_load((REPO_ROOT / "roles" / role / "meta/argument_specs.yml").read_text(encoding="utf-8"))
    return spec["argument_specs"][entry_point].get("options") or {}


@pytest.fixture(scope="module")
def fleet():
    init_plugin_loader()  # the group_vars use lookups
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(FLEET)])
    variables = VariableManager(loader=loader, inventory=inventory)

    def host_vars(host):
        raw = variables.get_vars(host=host)
        raw.setdefault("ansible_playbook_python", "/usr/bin/python3")
        templar = Templar(loader=loader, variables=raw)
        return {name: templar.template(value) for name, value in raw.items()
                if any(name.startswith(entry[0] + "_") for roles in ROLES_BY_GROUP.values() for entry in roles)}

    return inventory, host_vars


def test_the_fleet_has_every_layout(fleet):
    inventory = fleet[0]
    counts = {group: len(inventory.get_groups_dict()[group]) for group in ("a3_high_tcpx", "a3_mega_tcpxo", "aks_mig", "gpu_hosts")}
    assert all(count >= 2 for count in counts.values()), counts


@pytest.mark.parametrize("group", sorted(ROLES_BY_GROUP))
def test_every_host_passes_the_argument_specs_of_its_roles(fleet, group):
    inventory, host_vars = fleet
    hosts = inventory.get_groups_dict()[group]
    assert hosts
    for name in hosts:
        values = host_vars(inventory.get_host(name))
        for role, entry_point, set_by_playbook in ROLES_BY_GROUP[group]:
            options = role_options(role, entry_point)
            mine = {k: v for k, v in values.items() if k.startswith(role + "_") and k not in set_by_playbook}
            unknown = set(mine) - set(options)
            assert not unknown, "%s: %s is not an option of role %s" % (name, ", ".join(sorted(unknown)), role)
            spec = {k: dict(v, required=bool(v.get("required")) and k not in set_by_playbook)
                    for k, v in options.items() if k not in set_by_playbook}
            result = ArgumentSpecValidator(spec).validate(mine)
            assert not result.error_messages, "%s (%s): %s" % (name, role, result.error_messages)


def test_gke_versions_meet_the_gpudirect_minimum_of_their_profile(fleet):
    inventory, host_vars = fleet
    for name in inventory.get_groups_dict()["gke_clusters"]:
        values = host_vars(inventory.get_host(name))
        profile, version = values["gke_gpu_cluster_profile"], values["gke_gpu_cluster_version"]
        machine = values["gke_gpu_cluster_node_pool"]["machine_type"]
        assert _gpudirect.MACHINES[machine]["fabric"] == profile, name
        assert _gpudirect.version_gate_error(profile, version) is None, name
