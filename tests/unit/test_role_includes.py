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
