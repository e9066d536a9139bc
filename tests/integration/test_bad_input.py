# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad input is refused with a message that names the option and its allowed values, before any request."""

from __future__ import annotations


def _play(tasks, defaults=None):
    play = {"name": "bad input", "hosts": "localhost", "gather_facts": False, "tasks": tasks}
    if defaults:
        play["module_defaults"] = defaults
    return [play]


def test_wrong_choice_names_the_option_and_the_allowed_values(run_playbook, gcp_double, gcp_defaults):
    result = run_playbook(_play([{
        "name": "Pool with a provider that does not exist",
        "gpu_ops.cluster.gpu_nodepool": {"provider": "gcp", "name": "pool", "cluster": "c", "location": "us-central1"},
    }], gcp_defaults)).assert_failed()
    message = result.task("Pool with a provider").get("result", {}).get("msg", "")
    assert "provider" in message and "gke, aks" in message and "gcp" in message, result.output
    assert gcp_double.requests == [], "nothing may be sent before the input is valid"


def test_unknown_option_names_the_option_and_lists_the_supported_ones(run_playbook, gcp_double, gcp_defaults):
    result = run_playbook(_play([{
        "name": "Fabric with a misspelt option",
        "gpu_ops.cluster.gke_multinetwork": {"cluster": "c", "location": "us-central1", "gpudirect": "tcpxo", "mtuu": 8244},
    }], gcp_defaults)).assert_failed()
    message = result.task("Fabric with a misspelt option").get("result", {}).get("msg", "")
    assert "mtuu" in message and "Supported parameters include" in message and "mtu" in message, result.output
    assert gcp_double.requests == []


def test_role_argument_spec_names_the_variable_and_choices(run_playbook, tmp_path):
    result = run_playbook(_play([{
        "name": "Apply with a state that does not exist",
        "ansible.builtin.include_role": {"name": "gpu_ops.cluster.apply", "tasks_from": "manifests"},
        "vars": {"apply_state": "gone", "apply_manifests": [], "gpu_ops_render_dir": str(tmp_path / "out")},
    }]))
    assert result.rc != 0, result.output
    assert "apply_state" in result.output and "present, absent" in result.output, result.output
    assert not (tmp_path / "out").exists()
