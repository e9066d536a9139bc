# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A role's variables against an entry point's argument spec (plugins/plugin_utils/_core/role_spec.py), called directly, and
through the filter argument_spec_errors; the role-prefixed variables no role of a playbook declares, directly and through
the filter unknown_variables. tests/integration/test_playbook_preflight.py runs both in the preflight."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible.release import __version__ as ansible_core_version

from ansible_collections.gpu_ops.cluster.plugins.filter.awx_survey import argument_spec_errors, unknown_variables
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import role_spec as _role_spec

CORE_LINE = tuple(int(part) for part in ansible_core_version.split(".")[:2])
UNSET = "__gpu_ops_unset__"
OPTIONS = {
    "cluster": {"type": "str", "required": True},
    "fabric": {"type": "str", "choices": ["", "tcpx", "tcpxo"], "default": "tcpxo"},
    "node_count": {"type": "int", "default": 2},
    "zones": {"type": "list", "elements": "str", "default": []},
}


def _values(**given):
    values = dict((name, UNSET) for name in OPTIONS)
    values.update(given)
    return values


def test_values_that_pass_give_no_message():
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3", fabric="tcpx", node_count=4, zones=["z"]), UNSET) == []


def test_an_unset_variable_takes_the_default_and_a_required_one_is_missing():
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3"), UNSET) == []
    assert _role_spec.spec_errors(OPTIONS, _values(), UNSET) == ["missing required arguments: cluster"]


def test_the_messages_are_the_validators_each_naming_the_option_and_what_it_takes():
    errors = _role_spec.spec_errors(OPTIONS, _values(cluster="a3", fabric="ib", node_count="many"), UNSET)
    assert len(errors) == 2, errors
    assert any(e.startswith("value of fabric must be one of: , tcpx, tcpxo, got: ib") for e in errors), errors
    assert any("node_count" in e and "int" in e for e in errors), errors


def test_a_text_number_is_converted_as_the_spec_says():
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3", node_count="8"), UNSET) == []


def test_null_is_a_given_value_which_each_core_line_types_as_its_validate_argument_spec_does():
    # a variable set to null is given, unlike an unset one (validate_argument_spec: required means present). What the
    # type check makes of it is ansible-core's, and so differs per line: 2.19 takes a null text as "" (the empty text
    # older templating made of None), 2.16-2.18 refuse it as not a text, as the role's own validate_argument_spec does
    errors = _role_spec.spec_errors(OPTIONS, _values(cluster=None), UNSET)
    if CORE_LINE < (2, 19):
        assert errors == ["argument 'cluster' is of type <class 'NoneType'> and we were unable to convert to str: "
                          "'None' is not a string and conversion is not allowed"]
    else:
        assert errors == []


def test_an_equal_mark_is_unset_too():
    # the template's default= and the filter's mark are equal texts, not one object
    mark = "".join(["__gpu_ops", "_unset__"])
    assert mark is not UNSET
    assert _role_spec.spec_errors(OPTIONS, {"cluster": "a3", "fabric": mark}, UNSET) == []
    assert _role_spec.spec_errors(OPTIONS, {"cluster": mark}, UNSET) == ["missing required arguments: cluster"]


def test_only_the_exact_mark_is_unset():
    # the mark inside a list, or another text, is a value like any other
    assert _role_spec.spec_errors(OPTIONS, _values(cluster="a3", zones=[UNSET]), UNSET) == []
    assert _role_spec.spec_errors(OPTIONS, _values(cluster=UNSET + " "), UNSET) == []
    # an integer 0 is not the mark "0"
    assert _role_spec.spec_errors({"n": {"type": "int", "required": True}}, {"n": 0}, "0") == []
    assert _role_spec.spec_errors({"n": {"type": "int", "required": True}}, {"n": "0"}, "0") == ["missing required arguments: n"]


@pytest.mark.parametrize("options, values, message", [
    ([], {}, "options: expected the options of an entry point (a dict), got list"),
    (OPTIONS, ["cluster"], "values: expected option names and values (a dict), got list"),
    (OPTIONS, {"cluster": "a", "clutser": "b", "zone": "c"}, "values: not options of the spec: clutser, zone"),
])
def test_what_is_not_an_option_and_its_values_is_refused(options, values, message):
    with pytest.raises(ValueError) as raised:
        _role_spec.spec_errors(options, values, UNSET)
    assert str(raised.value) == message


def test_the_filter_takes_the_default_mark_and_names_itself_in_its_errors():
    assert argument_spec_errors(OPTIONS, _values()) == ["missing required arguments: cluster"]
    assert argument_spec_errors(OPTIONS, {"cluster": "x", "node_count": "-"}, unset="-") == []
    with pytest.raises(AnsibleFilterError) as raised:
        argument_spec_errors(OPTIONS, {"nodes": 1})
    assert str(raised.value) == "argument_spec_errors: values: not options of the spec: nodes"


# ------------------------------------------------------------------------------------------- unknown_variables

# three roles as the preflight's report loads them: mps runs plain, tcpxo_installer through a templated name and
# gpudirect_installer through tcpxo_installer's tasks; rdma_test is a role of the collection the playbook does not run
ROLES = {
    "mps": {"argument_specs": {"main": {"options": {"mps_state": {}, "mps_unit_dir": {}}},
                               "ack": {"options": {"mps_ack_nodes": {}}}},
            "defaults": [{"mps_state": "present", "mps_poll_interval": 5, "__mps_internal": 1}], "vars": [],
            "tasks": ["- ansible.builtin.include_tasks: _validate.yml\n"]},
    "tcpxo_installer": {"argument_specs": {"main": {"options": {"tcpxo_installer_step": {}}}}, "defaults": [], "vars": [],
                        "tasks": ["- ansible.builtin.include_role:\n    name: gpu_ops.cluster.gpudirect_installer\n"]},
    "gpudirect_installer": {"argument_specs": {"entry_point": {"options": None}}, "defaults": [{"gpudirect_installer_wait": 1}],
                            "vars": [{"gpudirect_installer_images": {}, "__gpudirect_installer_x": 2}], "tasks": "- debug: {}\n"},
    "rdma_test": {"argument_specs": {"main": {"options": {"rdma_test_size": {}}}}, "defaults": [], "vars": [], "tasks": []},
}
PLAYBOOK = """- hosts: all
  vars:
    gpu_hosts_mps: "{{ gpu_hosts_mps_enabled | default(false) }}"
  tasks:
    - ansible.builtin.include_role:
        name: gpu_ops.cluster.mps
    - ansible.builtin.include_role:
        name: "gpu_ops.cluster.{{ fabric }}_installer"
"""


def test_roles_run_follows_the_playbook_the_roles_tasks_and_templated_names():
    assert _role_spec.roles_run(PLAYBOOK, ROLES) == ["gpudirect_installer", "mps", "tcpxo_installer"]
    assert _role_spec.roles_run("- ansible.builtin.import_role: {name: gpu_ops.cluster.rdma_test}", ROLES) == ["rdma_test"]
    assert _role_spec.roles_run("gpu_ops.cluster.nvsmi_parse and gpu_ops.cluster.rdma_tests", ROLES) == []


def test_declared_names_are_every_entry_points_options_defaults_and_vars_less_internal_names():
    assert _role_spec.declared_names(ROLES["mps"]) == {"mps_state", "mps_unit_dir", "mps_ack_nodes", "mps_poll_interval"}
    assert _role_spec.declared_names(ROLES["gpudirect_installer"]) == {"gpudirect_installer_wait", "gpudirect_installer_images"}


def test_a_misspelt_option_names_the_nearest_option_of_its_role():
    names = ["mps_unit_dri", "mps_state", "mps_ack_nodes", "tcpxo_installer_stpe", "gpudirect_installer_wiat",
             "gpu_hosts_mps_enabled", "gpu_hosts_mps", "gpu_hosts_msp", "gpu_ops_kubeconfig", "ansible_host", "mpsx"]
    assert _role_spec.unknown_variables(names, ROLES, PLAYBOOK, "gpu_hosts_") == [
        "gpu_hosts_msp is not an option of any role this playbook runs; did you mean gpu_hosts_mps?",
        "gpudirect_installer_wiat is not an option of any role this playbook runs; did you mean gpudirect_installer_wait?",
        "mps_unit_dri is not an option of any role this playbook runs; did you mean mps_unit_dir?",
        "tcpxo_installer_stpe is not an option of any role this playbook runs; did you mean tcpxo_installer_step?"]


def test_a_name_nothing_is_close_to_says_so_and_a_role_the_playbook_does_not_run_is_left_alone():
    """An inventory shared by several playbooks holds the options of every role (rdma_test_ here)."""
    assert _role_spec.unknown_variables(["rdma_test_size", "rdma_test_sise", "mps_zzzzzzzzzz", "mps_state"], ROLES, PLAYBOOK) == [
        "mps_zzzzzzzzzz is not an option of any role this playbook runs (nor a variable the playbook uses)"]
    # without a prefix of its own, the playbook's other names are still known: what it sets or reads is no typo
    assert _role_spec.unknown_variables(["gpu_hosts_msp", "mps_poll_interval"], ROLES, PLAYBOOK) == []


def test_the_longest_prefix_decides_the_role():
    roles = dict(ROLES, gpu={"argument_specs": {"main": {"options": {"gpu_count": {}}}}, "tasks": ""},
                 mps_ack={"argument_specs": {"main": {"options": {"mps_ack_size": {}}}}, "tasks": ""})
    assert _role_spec.unknown_variables(["gpu_cuont", "gpudirect_installer_wai", "mps_ack_sise", "mps_stae"], roles,
                                        PLAYBOOK + "gpu_ops.cluster.gpu") == [
        "gpu_cuont is not an option of any role this playbook runs; did you mean gpu_count?",
        "gpudirect_installer_wai is not an option of any role this playbook runs; did you mean gpudirect_installer_wait?",
        "mps_stae is not an option of any role this playbook runs; did you mean mps_state?"]


@pytest.mark.parametrize("args, message", [
    (("mps_state", ROLES, PLAYBOOK), "names: expected a list of variable names"),
    (([1], ROLES, PLAYBOOK), "names: expected a list of variable names"),
    ((["mps_state"], [], PLAYBOOK), "roles: expected role names to their files (argument_specs, defaults, vars, tasks)"),
    ((["mps_state"], ROLES, None), "playbook: expected the playbook's text, got NoneType"),
    ((["mps_state"], ROLES, PLAYBOOK, 3), "prefix: expected text, got int"),
    ((["mps_state"], {"mps": {"tasks": 3}}, PLAYBOOK), "roles: mps: tasks: expected the text of its tasks files, got int"),
])
def test_bad_arguments_are_errors_naming_the_argument(args, message):
    with pytest.raises(ValueError) as raised:
        _role_spec.unknown_variables(*args)
    assert str(raised.value) == message
    with pytest.raises(AnsibleFilterError) as raised:
        unknown_variables(*args)
    assert str(raised.value) == "unknown_variables: " + message


def test_the_collection_roles_are_read_from_a_roles_folder_once(tmp_path):
    """A role with an argument spec, with its defaults, vars and tasks; a folder without a spec is no role."""
    (tmp_path / "mps" / "meta").mkdir(parents=True)
    (tmp_path / "mps" / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      mps_state: {type: str}\n", encoding="utf-8")
    (tmp_path / "mps" / "defaults").mkdir()
    (tmp_path / "mps" / "defaults" / "main.yml").write_text("mps_pipe: /tmp/pipe\n", encoding="utf-8")
    (tmp_path / "mps" / "tasks").mkdir()
    tasks = "- ansible.builtin.include_role: {name: gpu_ops.cluster.apply}\n  register: mps_outcome\n"
    (tmp_path / "mps" / "tasks" / "main.yml").write_text(tasks, encoding="utf-8")
    (tmp_path / "mps" / "tasks" / "notes.txt").write_text("not a tasks file", encoding="utf-8")
    (tmp_path / "files_only" / "files").mkdir(parents=True)
    roles = _role_spec.collection_roles(str(tmp_path))
    assert roles == {"mps": {"argument_specs": {"main": {"options": {"mps_state": {"type": "str"}}}},
                             "defaults": [{"mps_pipe": "/tmp/pipe"}], "vars": [],
                             "tasks": [tasks]}}
    assert _role_spec.collection_roles(str(tmp_path)) is roles
    # a result the role registers is one of its names too
    assert _role_spec.unknown_variables(["mps_stat", "mps_pipe", "mps_outcome"], roles, "gpu_ops.cluster.mps") == [
        "mps_stat is not an option of any role this playbook runs; did you mean mps_state?"]
