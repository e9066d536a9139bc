# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""inventories/fleet: every host's variables, templated as a play sees them, pass the roles' argument specs.

A variable named after a role (``<role>_...``) must be an option of that role's entry point, of the right
type and among its choices; the options a role requires and the playbook does not set must be there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as _gpudirect
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

FLEET = REPO_ROOT / "inventories" / "fleet"
# group -> (role, entry point, options its playbook sets itself) for every role the group's playbook runs
ROLES_BY_GROUP = {
    "gke_clusters": [("gke_gpu_cluster", "main", {"gke_gpu_cluster_fabric"}),
                     ("gcp_gpu_vpcs", "main",
                      {"gcp_gpu_vpcs_project", "gcp_gpu_vpcs_cluster", "gcp_gpu_vpcs_location", "gcp_gpu_vpcs_gpudirect"}),
                     ("nccl_test", "main", set())],
    "aks_clusters": [("nvidia_device_plugin", "main", set())],
    "k8s_clusters": [("network_operator", "main", set()), ("gpu_operator", "main", set()), ("rdma_test", "main", set())],
}


def role_options(role, entry_point):
    spec = yaml.safe_load((REPO_ROOT / "roles" / role / "meta/argument_specs.yml").read_text(encoding="utf-8"))
    return spec["argument_specs"][entry_point].get("options") or {}


# Resolving the inventory needs Ansible's plugin loader, which installs its collection finder for the whole
# process; run it in a child so the pytest worker's imports stay as they were for the tests that follow.
RESOLVE = """
import json, sys
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar
from ansible.vars.manager import VariableManager

source, prefixes = sys.argv[1], tuple(json.loads(sys.argv[2]))
init_plugin_loader()  # the group_vars use lookups
loader = DataLoader()
inventory = InventoryManager(loader=loader, sources=[source])
variables = VariableManager(loader=loader, inventory=inventory)
resolved = {}
for host in inventory.get_hosts():
    raw = variables.get_vars(host=host)
    raw.setdefault("ansible_playbook_python", sys.executable)
    templar = Templar(loader=loader, variables=raw)
    resolved[host.name] = {name: templar.template(value) for name, value in raw.items() if name.startswith(prefixes)}
json.dump({"groups": inventory.get_groups_dict(), "vars": resolved}, sys.stdout)
"""


@pytest.fixture(scope="module")
def fleet():
    """The fleet's groups and, per host, its role variables templated as a play sees them."""
    prefixes = sorted({entry[0] + "_" for roles in ROLES_BY_GROUP.values() for entry in roles})
    done = subprocess.run([sys.executable, "-c", RESOLVE, str(FLEET), json.dumps(prefixes)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return SimpleNamespace(**json.loads(done.stdout))


def test_the_fleet_has_every_layout(fleet):
    counts = {group: len(fleet.groups[group]) for group in ("a3_high_tcpx", "a3_mega_tcpxo", "aks_mig", "gpu_hosts")}
    assert all(count >= 2 for count in counts.values()), counts
    assert fleet.groups["k8s_clusters"], "the GPU Operator job template needs a Kubernetes cluster of the GPU hosts"


@pytest.mark.parametrize("group", sorted(ROLES_BY_GROUP))
def test_every_host_passes_the_argument_specs_of_its_roles(fleet, group):
    hosts = fleet.groups[group]
    assert hosts
    for name in hosts:
        values = fleet.vars[name]
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
    for name in fleet.groups["gke_clusters"]:
        values = fleet.vars[name]
        profile, version = values["gke_gpu_cluster_gpudirect"], values["gke_gpu_cluster_version"]
        machine = values["gke_gpu_cluster_node_pool"]["machine_type"]
        assert _gpudirect.MACHINES[machine]["fabric"] == profile, name
        assert _gpudirect.version_gate_error(profile, version) is None, name
