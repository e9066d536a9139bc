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
INTERNAL = {("gpudirect_installer", "entry_point"), ("gpudirect_installer", "wait"), ("gpudirect_installer", "preflight"),
            ("gcp_gpu_vpcs", "await")}


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
    return role in ("apply", "preflight") or (role, entry) in INTERNAL


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

# none left: the preflight's shared check is imported as an entry point (import_role, tasks_from) and finds the calling
# role through ansible_parent_role_paths
PATH_REACHES_LEFT = frozenset()
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


def test_every_role_a_role_includes_names_an_entry_point_of_its_argument_spec():
    missing = []
    for path, role, entry, _validate in role_includes():
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
            if entry not in yaml.safe_load(handle)["argument_specs"]:
                missing.append((path, role, entry))
    assert missing == [], "include documented entry points only (meta/argument_specs.yml): %s" % missing


def test_a_tasks_file_is_an_entry_point_or_marked_internal_by_name():
    """A role's tasks/<name>.yml is an entry point of its meta/argument_specs.yml, or named _<name>.yml: internal,
    reached only from the role's own files."""
    wrong = []
    for spec in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role_dir = os.path.dirname(os.path.dirname(spec))
        with open(spec, encoding="utf-8") as handle:
            entries = set(yaml.safe_load(handle)["argument_specs"])
        for path in glob.glob(os.path.join(role_dir, "tasks", "*.yml")):
            name = os.path.basename(path)[:-len(".yml")]
            if (name in entries) == name.startswith("_"):
                wrong.append(os.path.relpath(path, ROOT))
    assert wrong == [], "an entry point of the spec, or an internal file named _<name>.yml: %s" % sorted(wrong)
    # and the internal files are not included from elsewhere
    outside = [(path, role, entry) for path, role, entry, _validate in role_includes() if entry.startswith("_")]
    assert outside == []
