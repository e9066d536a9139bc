# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Say when a failing option's value came from ``module_defaults``.

Ansible merges ``module_defaults`` (for an action group or for the module) into a task's arguments
before the module runs, so a module cannot tell where a value came from. The controller can: our
cloud modules run through an action plugin (``CloudDefaultsAction``) that, when the module fails,
names each option the failure message mentions whose value is the one ``module_defaults`` sets, and
the ``module_defaults`` entry that sets it. It never shows a value. An option the task sets to the
same value as ``module_defaults`` is named too: the note says the value is the one module_defaults sets.
"""

from __future__ import annotations

import functools
import importlib
import os
import re

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action.normal import ActionModule as NormalAction

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._render import plan as _render_plan

COLLECTION = "gpu_ops.cluster"
RUNTIME = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "meta",
                       "runtime.yml")


@functools.lru_cache(maxsize=1)
def action_groups():
    """``{module: (group, ...)}`` from meta/runtime.yml, the one place the groups are written."""
    with open(RUNTIME, encoding="utf-8") as handle:
        groups = (yaml.safe_load(handle) or {}).get("action_groups") or {}
    members = {}
    for group, modules in groups.items():
        for module in modules or []:
            if isinstance(module, str):
                members.setdefault(module.rsplit(".", 1)[-1], []).append(group)
    return dict((module, tuple(names)) for module, names in members.items())


def defaults_for(module, module_defaults):
    """``{option: (module_defaults key, raw value)}`` for ``module`` (short name), in Ansible's precedence:
    later entries over earlier ones, the module's own entry over its groups'."""
    merged = {}
    for entry in module_defaults or []:
        if isinstance(entry, dict):
            merged.update(entry)
    keys = ["group/%s.%s" % (COLLECTION, group) for group in action_groups().get(module, ())]
    keys += ["%s.%s" % (COLLECTION, module), module]
    sources = {}
    for key in keys:
        values = merged.get(key)
        if isinstance(values, dict):
            sources.update((option, (key, value)) for option, value in values.items())
    return sources


def origin_note(message, args, sources, template):
    """`` (...)`` naming the options in ``message`` whose value in ``args`` is the one ``sources`` set, or ""."""
    named = []
    for option in sorted(sources):
        key, raw = sources[option]
        if option not in args or not re.search(r"(?<![\w.])%s(?!\w)" % re.escape(option), message):
            continue
        try:
            same = template(raw) == args[option]
        except Exception:  # pylint: disable=broad-except
            continue  # a default that does not template here is not what the task ran with
        if same:
            named.append("%s comes from module_defaults for %s" % (option, key))
    return " (%s)" % "; ".join(named) if named else ""


def input_check(module, args):
    """What ``module`` (a cloud module's Python module: ``module_kwargs()``, ``engine_for(params)``) answers with
    ``validate_only`` for the task arguments ``args``: its argument spec's errors, else its engine's input problems
    (``input_check``). The same checks a module process makes before its first request; nothing is sent."""
    kwargs = module.module_kwargs()
    validator = ArgumentSpecValidator(kwargs["argument_spec"], **dict(
        (key, kwargs[key]) for key in ("mutually_exclusive", "required_together", "required_one_of", "required_if",
                                       "required_by") if key in kwargs))
    validated = validator.validate(dict(args))
    if validated.error_messages:
        return dict(changed=False, problems=[str(message) for message in validated.error_messages])
    params = validated.validated_parameters
    return module.engine_for(params).input_check(params)


class CloudDefaultsAction(NormalAction):
    """Runs the module as ``normal`` does, as a module process; a failure names
    the options that came from module_defaults.

    With ``validate_only`` it answers in the controller instead (``input_check``): the checks need no host, no
    credentials and no request, and the preflight asks them for every cluster of a fleet. ``MODULE`` (the module's
    name) is set by each action plugin; the module is imported only then.

    In render mode it also takes the module's ``render_files`` out of the result and records them as the
    inventory host's in the render folder's host index (``_render_plan.record``), for the plan summary."""

    MODULE = None

    def run(self, tmp=None, task_vars=None):
        if self.MODULE is not None and boolean(self._task.args.get("validate_only", False), strict=False):
            module = importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.modules." + self.MODULE)
            return input_check(module, self._task.args)
        result = super().run(tmp, task_vars)
        rendered = result.pop("render_files", None)
        render_dir = self._task.args.get("render_dir")
        if rendered and isinstance(render_dir, str) and os.path.isdir(render_dir):
            _render_plan.record(render_dir, (task_vars or {}).get("inventory_hostname", ""), rendered)
        if result.get("failed") and isinstance(result.get("msg"), str):
            module = self._task.action.rsplit(".", 1)[-1]
            sources = defaults_for(module, self._task.module_defaults)
            if sources:
                result["msg"] += origin_note(result["msg"], self._task.args, sources, self._templar.template)
        return result
