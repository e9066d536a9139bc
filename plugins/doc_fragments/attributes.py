# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The behaviour contract every module declares (see docs/behaviour-contract.md)."""

    # Every module extends this one: the collection's author and the attribute descriptions, written once.
    DOCUMENTATION = r"""
options: {}
author:
  - gpu_ops.cluster maintainers (@gpu-ops)
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying the target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled by the module has not been modified by anything else in between.
"""

    # For modules that change something: full check mode, diff and idempotence.
    CHANGES = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
"""

    # For read-only modules.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    support: full
"""

    ACTIONGROUP_GCP = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/gpu_ops.cluster.gcp) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - gpu_ops.cluster.gcp
"""

    ACTIONGROUP_GCP_AZURE = r"""
options: {}
attributes:
  action_group:
    description:
      - Use C(group/gpu_ops.cluster.gcp) or C(group/gpu_ops.cluster.azure) in C(module_defaults) to set defaults for this
        module; both can be set in one play.
      - The account options of the other cloud's group reach this module too and are ignored.
    support: full
    membership:
      - gpu_ops.cluster.gcp
      - gpu_ops.cluster.azure
"""
