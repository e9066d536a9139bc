# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The whole validation suite: every registered check (GKE GPUDirect, operators and MIG, bare-metal hosts, and the
performance probes' outputs) run over one snapshot, with the counts and the exit status; and the list of checks the docs are generated from.
"""

from __future__ import annotations

# the check modules register their checks on import
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import compute_domain as _compute_domain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import gke as _gke
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import health as _health
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import host as _host
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import operators as _operators
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import performance as _performance
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import sharing as _sharing
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import CHECKS, PHASES, exit_status, run_checks, summary
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.snapshot import View

CHECK_MODULES = (_gke, _operators, _sharing, _compute_domain, _host, _health, _performance)
CHECKS_BY_ID = dict((c.id, c) for c in CHECKS)


def checks():
    """Every check as the docs list it, by phase then id."""
    return [c.describe() for c in sorted(CHECKS, key=lambda c: (PHASES.index(c.phase), c.id))]


def validate(snapshot, phases=None, only=None):
    """dict(target, kind, results, summary, exit_status) of the checks of ``phases`` (default: all but health and performance)."""
    view = View(snapshot)
    results = run_checks(view, phases=phases, checks=only)
    return dict(target=snapshot["target"]["name"], kind=snapshot["target"]["kind"], results=results,
                summary=summary(results), exit_status=exit_status(results))
