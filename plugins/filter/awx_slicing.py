# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job slicing filters of the awx_job_templates role: awx_slice_count, how many slices the instance groups run at
once; awx_slice_problems, why a template must not be sliced or which slices a launch limit leaves without a host.

Documentation: plugins/filter/awx_slice_count.yml, plugins/filter/awx_slice_problems.yml; the rules:
plugins/plugin_utils/_awx/slicing.py.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_slicing = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._awx.slicing")


def awx_slice_count(groups, forks=0, maximum=0):
    """The slice count of a host-level template from its instance groups (each with its ``instances``)."""
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, dict) for g in groups):
        raise AnsibleFilterError("awx_slice_count: expected the instance groups as the API lists them (a list of dicts)")
    try:
        return _slicing.slice_count(plain(groups), forks=int(forks or 0), maximum=int(maximum or 0))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("awx_slice_count: %s" % exc) from None


def awx_slice_problems(template, hosts=None, selected=None, count=1):
    """Why ``template`` must not be sliced; with ``hosts`` (the inventory) and ``selected`` (the limited hosts), the
    slices of ``count`` that the limit leaves without a host."""
    if not isinstance(template, dict):
        raise AnsibleFilterError("awx_slice_problems: expected a job template entry (a dict with name and playbook)")
    problem = _slicing.sliceable_problem(template)
    if problem or hosts is None:
        return [problem] if problem else []
    for label, value in (("hosts", hosts), ("selected", selected)):
        if not isinstance(value, (list, tuple)) or not all(isinstance(h, str) for h in value):
            raise AnsibleFilterError("awx_slice_problems: %s must be a list of host names" % label)
    try:
        return _slicing.limit_problems(list(hosts), list(selected), int(count), template.get("name") or "")
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("awx_slice_problems: %s" % exc) from None


def awx_slice_extra_vars(playbook):
    """The extra variables a sliced template of ``playbook`` runs with so that only its host plays run."""
    return dict(_slicing.SLICE_EXTRA_VARS.get(playbook, {}))


class FilterModule:
    """Job slicing filters."""

    def filters(self):
        return {"awx_slice_count": awx_slice_count, "awx_slice_problems": awx_slice_problems,
                "awx_slice_extra_vars": awx_slice_extra_vars}
