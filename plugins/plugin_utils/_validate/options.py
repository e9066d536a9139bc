# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The validate role's phase and check choices, judged against the registry before anything is read or started.

The suite refuses an unknown phase or check id only when it runs the checks, after the targets were read and the
performance probes had run; a check id of a phase the run does not list would silently run nothing. The allowed
values come from the registry, so a new phase or check is allowed as soon as it is registered.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import PHASES
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.suite import CHECKS_BY_ID


def _show(value):
    text = ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."


def option_problems(phases, checks):
    """``"<option>: <why>"`` lines for ``validate_phases`` and ``validate_checks`` ([] when the run can go on)."""
    found = []
    if not isinstance(phases, (list, tuple)) or not phases:
        return ["validate_phases: must be a non-empty list of phases (%s)" % ", ".join(PHASES)]
    for index, phase in enumerate(phases):
        if phase not in PHASES:
            found.append("validate_phases[%d]: %s is not a phase; choose from %s" % (index, _show(phase), ", ".join(PHASES)))
    if not isinstance(checks, (list, tuple)):
        return found + ["validate_checks: must be a list of check ids (docs/validate-checks.md)"]
    for index, check_id in enumerate(checks):
        check = CHECKS_BY_ID.get(check_id)
        if check is None:
            near = sorted(c for c in CHECKS_BY_ID if isinstance(check_id, str) and c.split(".")[0] == check_id.split(".")[0])
            found.append("validate_checks[%d]: %s is not a check id (docs/validate-checks.md lists them%s)" % (
                index, _show(check_id), ("; of its group: " + ", ".join(near)) if near else ""))
        elif check.phase not in phases:
            found.append("validate_checks[%d]: %s is a check of the %s phase, which validate_phases (%s) does not list: it "
                         "would not run" % (index, check_id, check.phase, ", ".join(str(p) for p in phases)))
    return found
