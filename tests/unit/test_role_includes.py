# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which role-to-role includes validate the argument spec again (docs/behaviour-contract.md, "Roles").

An include of another role's internal steps skips the validation (its values come from the caller's validated
options; each validation is one more task per include); an include that hands a user's options to
another role's main entry point keeps it.
"""

from __future__ import annotations

import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE_ROLE = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
# (role, entry point) of the internal steps roles include; every entry point of apply is one
INTERNAL = {("gpudirect_installer", "entry_point"), ("gpudirect_installer", "wait"), ("gcp_gpu_vpcs", "await")}


def _tasks(node):
    for task in node if isinstance(node, list) else []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _tasks(task.get(key))


def role_includes():
    """``(file, role, entry point, rolespec_validate)`` of every include of a collection role by a role."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle) or []
        for task in _tasks(document):
            for key in INCLUDE_ROLE:
                value = task.get(key)
                if isinstance(value, dict) and value.get("name", "").startswith("gpu_ops.cluster."):
                    found.append((os.path.relpath(path, ROOT), value["name"].rsplit(".", 1)[-1],
                                  value.get("tasks_from", "main"), value.get("rolespec_validate", True)))
    return found


def internal(role, entry):
    return role == "apply" or (role, entry) in INTERNAL


def test_the_scan_finds_both_kinds():
    kinds = {internal(role, entry) for _path, role, entry, _validate in role_includes()}
    assert kinds == {True, False}
    assert len([i for i in role_includes() if i[1] == "apply"]) > 20


def test_internal_steps_are_included_without_validating_again():
    wrong = [(path, role, entry) for path, role, entry, validate in role_includes() if internal(role, entry) and validate]
    assert wrong == [], "include these with rolespec_validate: false (docs/behaviour-contract.md, Roles): %s" % wrong


def test_a_role_handed_user_options_validates_them():
    wrong = [(path, role, entry) for path, role, entry, validate in role_includes()
             if not internal(role, entry) and validate is not True]
    assert wrong == [], "these include another role's user-facing entry point: keep its validation: %s" % wrong
    # the internal entry points keep a spec of their own for users who call them
    with open(os.path.join(ROOT, "roles", "apply", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        assert {"manifests", "chart", "names"} <= set(yaml.safe_load(handle)["argument_specs"])


# --- no role reaches into another role's tasks/ by path -------------------------------------------------------------

# The preflight's shared check is still imported by path into each role's tasks/preflight.yml (its tasks read the
# calling role's role_path and defaults, which an include_role would not keep); these are the only reaches left, and
# the list may only shrink.
PATH_REACHES_LEFT = frozenset(
    ("roles/%s/tasks/preflight.yml" % role, "../../preflight/tasks/%s" % entry)
    for role, entry in (
        ("awx_job_templates", "check.yml"), ("mps", "check.yml"),
        ("gcp_gpu_vpcs", "check_inputs.yml"), ("gke_gpu_cluster", "check_inputs.yml"),
        ("gpu_operator", "check_inputs.yml"), ("nccl_test", "check_inputs.yml"),
        ("network_operator", "check_inputs.yml"), ("nri_device_injector", "check_inputs.yml"),
        ("nvidia_device_plugin", "check_inputs.yml"), ("rdma_test", "check_inputs.yml"),
        ("tcpx_installer", "check_inputs.yml"), ("tcpxo_installer", "check_inputs.yml"),
    ))
TASK_FILE_KEYS = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks", "import_tasks", "include_tasks")


def path_reaches():
    """``(file, target)`` of every task file a role imports or includes from outside its own tasks/ folder."""
    found = set()
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle) or []
        for task in _tasks(document):
            for key in TASK_FILE_KEYS:
                target = task.get(key)
                if isinstance(target, dict):
                    target = target.get("file")
                if isinstance(target, str) and (".." in target.split("/") or target.startswith("/")):
                    found.add((os.path.relpath(path, ROOT), target))
    return found


def test_no_role_reaches_into_another_roles_tasks_by_path():
    unexpected = sorted(path_reaches() - PATH_REACHES_LEFT)
    assert unexpected == [], "share through a filter, a module or an entry point (include_role + tasks_from): %s" % unexpected


def test_the_list_of_reaches_left_is_not_stale():
    assert sorted(PATH_REACHES_LEFT - path_reaches()) == []
