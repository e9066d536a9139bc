# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of roles' argument specs: awx_survey_spec, an AWX job template survey generated from them,
argument_spec_errors, a role's variables checked against one (the preflight's check), and unknown_variables, the
role-prefixed variables no role of a playbook declares (the preflight's report), and awx_setup_conflicts, what the
controller already holds under a setup's names (the awx_job_templates role, before its first write).

Documentation: plugins/filter/awx_survey_spec.yml, plugins/filter/argument_spec_errors.yml and
plugins/filter/unknown_variables.yml, plugins/filter/awx_setup_conflicts.yml; the mapping rules:
plugins/plugin_utils/_awx/survey.py; the check: plugins/plugin_utils/_core/role_spec.py.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

awx_survey = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx.survey")
_awx_existing = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx.existing")
_role_spec = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.role_spec")


def awx_survey_spec(sources, name, description="", role_specs=None):
    """The survey spec of the questions ``sources`` ask ({} when none).

    A source without ``argument_specs`` takes its role's from ``role_specs`` (role name -> loaded file).
    """
    if not isinstance(sources, (list, tuple)) or not all(isinstance(s, dict) for s in sources):
        raise AnsibleFilterError("awx_survey_spec: expected a list of dicts (argument_specs, role, entry_point, options)")
    role_specs = role_specs or {}
    resolved = []
    for source in sources:
        if source.get("argument_specs") is None:
            if source.get("role") not in role_specs:
                raise AnsibleFilterError("awx_survey_spec: no argument specs for role %r" % source.get("role"))
            source = dict(source, argument_specs=role_specs[source["role"]])
        resolved.append(source)
    try:
        return awx_survey.survey_spec(resolved, name, description)
    except ValueError as exc:
        raise AnsibleFilterError("awx_survey_spec: %s" % exc)


def argument_spec_errors(options, values, unset="__gpu_ops_unset__"):
    """What ``values`` (option name -> value; ``unset`` marks a variable that is not defined) break in the argument
    spec ``options`` of a role's entry point: validate_argument_spec's messages, [] when nothing."""
    try:
        return _role_spec.spec_errors(plain(options), plain(values), unset)
    except ValueError as exc:
        raise AnsibleFilterError("argument_spec_errors: %s" % exc)


# this collection's roles/ (plugins/filter/ is two folders below the collection's root)
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


def unknown_variables(names, roles, playbook, prefix=""):
    """The variables of ``names`` with the prefix of a role the ``playbook`` text runs (or the playbook's own ``prefix``)
    that none of those roles declares and the playbook does not use: one message each, naming the nearest known name.
    ``roles`` none: the roles of this collection."""
    try:
        if roles is None:
            roles = _role_spec.collection_roles(ROLES_DIR)
        return _role_spec.unknown_variables(plain(names), plain(roles), plain(playbook), plain(prefix))
    except ValueError as exc:
        raise AnsibleFilterError("unknown_variables: %s" % exc)


def awx_setup_conflicts(existing, organization, project, inventories, credentials):
    """Why the awx_job_templates role must not write: the setup's names held by another organization ([] when none)."""
    existing = plain(existing)
    if not isinstance(existing, dict) or not all(isinstance(v, list) for v in existing.values()):
        raise AnsibleFilterError("awx_setup_conflicts: expected a dict of endpoint -> list of AWX objects")
    for label, names in (("inventories", inventories), ("credentials", credentials)):
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise AnsibleFilterError("awx_setup_conflicts: %s must be a list of names" % label)
    return _awx_existing.conflicts(existing, organization, project, list(inventories), list(credentials))


class FilterModule:
    """Filters of roles' argument specs."""

    def filters(self):
        return {"awx_survey_spec": awx_survey_spec, "argument_spec_errors": argument_spec_errors,
                "unknown_variables": unknown_variables, "awx_setup_conflicts": awx_setup_conflicts}
