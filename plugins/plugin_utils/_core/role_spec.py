# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""A role's variables checked against an entry point of its ``meta/argument_specs.yml``.

The same check as ``ansible.builtin.validate_argument_spec`` (ansible-core's ArgumentSpecValidator, the same messages),
as a function: the preflight records its result in the task that records the role's other problems, one task per role
instead of two (roles/preflight, tasks/check_inputs.yml).
"""

from __future__ import annotations

import difflib
import functools
import os
import re


def spec_errors(options, values, unset):
    """The messages of what ``values`` break in the argument spec ``options`` ([] when nothing).

    ``values`` maps option names to the variables' values; a value that ``is`` or equals ``unset`` is a variable that is
    not defined, which the spec sees as not given (its default, or a missing required option).
    """
    if not isinstance(options, dict):
        raise ValueError("options: expected the options of an entry point (a dict), got %s" % type(options).__name__)
    if not isinstance(values, dict):
        raise ValueError("values: expected option names and values (a dict), got %s" % type(values).__name__)
    unknown = sorted(set(values) - set(options), key=str)
    if unknown:
        raise ValueError("values: not options of the spec: %s" % ", ".join(str(name) for name in unknown))
    given = dict((name, value) for name, value in values.items() if not _is_unset(value, unset))
    # imported here: it pulls in ansible-core's JSON and vault code (and so cryptography), which loading the filter
    # file must not (tests/unit/test_plugin_imports.py); the preflight's worker is the only caller
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    return list(ArgumentSpecValidator(options).validate(given).error_messages)


def _is_unset(value, unset):
    return value is unset or (isinstance(value, type(unset)) and value == unset)


# a role a task names: gpu_ops.cluster.<name>, where a templated part ("{{ x }}_installer") stands for any name
_ROLE_REFERENCE = re.compile(r"gpu_ops\.cluster\.((?:\{\{[^{}]*\}\}|[A-Za-z0-9_])+)")
_TEMPLATED = re.compile(r"\{\{[^{}]*\}\}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a task's register: line
_REGISTERED = re.compile(r"^[ \t]*register:[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?=\n|\Z)", re.M)


def roles_run(text, roles):
    """The names of ``roles`` (role name -> its tasks files' text) that ``text`` (a playbook) runs, directly or through
    the roles it runs, sorted. A role name with a templated part matches every role it could become."""
    if not isinstance(text, str):
        raise ValueError("playbook: expected the playbook's text, got %s" % type(text).__name__)
    found, todo = set(), [text]
    while todo:
        for reference in _ROLE_REFERENCE.findall(todo.pop()):
            pattern = re.compile("".join(r"[A-Za-z0-9_]+" if _TEMPLATED.fullmatch(part) else re.escape(part)
                                         for part in re.split(r"(\{\{[^{}]*\}\})", reference) if part))
            for name in sorted(roles):
                if name not in found and pattern.fullmatch(name):
                    found.add(name)
                    todo.append(_text(name, roles[name].get("tasks", "")))
    return sorted(found)


def declared_names(role):
    """What a role declares (``role``: ``argument_specs``, the loaded ``argument_specs`` of its meta file; ``defaults``
    and ``vars``, its loaded files; ``tasks``, their text): the options of every entry point, the variables of its
    defaults and vars and the results its tasks register (a role's outputs, such as gcp_gpu_vpcs_fabric_plan), less the
    internal ones (``__`` names)."""
    names = set()
    for entry_point in (role.get("argument_specs") or {}).values():
        names.update((entry_point or {}).get("options") or {})
    for loaded in list(role.get("defaults") or []) + list(role.get("vars") or []):
        names.update(loaded or {})
    names.update(_REGISTERED.findall(_text("role", role.get("tasks") or [])))
    return set(str(name) for name in names if not str(name).startswith("__"))


def unknown_variables(names, roles, playbook, prefix=""):
    """One message per variable of ``names`` that carries the prefix of a role the ``playbook`` text runs (``<role>_``,
    ``roles_run``) or the playbook's own ``prefix``, and that none of those roles declares (``declared_names``) nor the
    playbook text names: the message names the nearest known name when one is close. Sorted by name.

    A variable of a role of ``roles`` the playbook does not run is left alone: an inventory shared by several
    playbooks holds the options of all their roles."""
    if not isinstance(names, (list, tuple, set)) or not all(isinstance(name, str) for name in names):
        raise ValueError("names: expected a list of variable names")
    if not isinstance(roles, dict) or not all(isinstance(role, dict) for role in roles.values()):
        raise ValueError("roles: expected role names to their files (argument_specs, defaults, vars, tasks)")
    if not isinstance(prefix, str):
        raise ValueError("prefix: expected text, got %s" % type(prefix).__name__)
    run = roles_run(playbook, roles)
    known = set(_IDENTIFIER.findall(playbook))  # what the playbook itself sets or reads, whatever its prefix
    for name in run:
        known.update(declared_names(roles[name]))
    checked = set([name + "_" for name in run] + ([prefix] if prefix else []))
    every = checked | set(name + "_" for name in roles)
    messages = []
    for name in sorted(set(names)):
        # the longest prefix decides: mps_ack_x is not a variable of mps when a role mps_ack exists
        start = max((start for start in every if name.startswith(start)), key=len, default="")
        if name in known or start not in checked:
            continue
        # the nearest name of the same prefix, by what follows the prefix (a misspelt option keeps its prefix, and
        # every name of a long prefix would look close otherwise)
        close = difflib.get_close_matches(name[len(start):], sorted(word[len(start):] for word in known if word.startswith(start)), n=1)
        messages.append("%s is not an option of any role this playbook runs%s" % (
            name, ("; did you mean %s%s?" % (start, close[0])) if close else " (nor a variable the playbook uses)"))
    return messages


@functools.lru_cache(maxsize=4)
def collection_roles(roles_dir):
    """Every role of the folder ``roles_dir`` (a collection's roles/) that has an argument spec, as ``unknown_variables``
    takes them: role name to ``argument_specs`` (of its meta/argument_specs.yml), ``defaults`` and ``vars`` (its loaded
    files) and ``tasks`` (the text of its tasks files). Read once per process: the preflight's report asks for every host
    of a play."""
    import yaml  # the report's worker is the only caller: loading the filter file does not need it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def read(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read()

    def files(role, part):
        folder = os.path.join(roles_dir, role, part)
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        return [os.path.join(folder, name) for name in names if name.endswith((".yml", ".yaml"))]

    roles = {}
    for role in sorted(os.listdir(roles_dir)):
        spec = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if not os.path.isfile(spec):
            continue
        roles[role] = dict(
            argument_specs=(yaml.load(read(spec), Loader=loader) or {}).get("argument_specs") or {},
            defaults=[yaml.load(read(path), Loader=loader) for path in files(role, "defaults")],
            vars=[yaml.load(read(path), Loader=loader) for path in files(role, "vars")],
            tasks=[read(path) for path in files(role, "tasks")])
    return roles


def _text(name, tasks):
    if isinstance(tasks, (list, tuple)):
        return "\n".join(str(text) for text in tasks)
    if not isinstance(tasks, str):
        raise ValueError("roles: %s: tasks: expected the text of its tasks files, got %s" % (name, type(tasks).__name__))
    return tasks
