# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json

import yaml


def compose(*fragments):
    """One fragment from several YAML texts, the later one winning, as a module's own fields win over its
    fragments': mappings merge key by key, top-level lists (notes, requirements) are joined, other values
    are replaced.

    Doc fragments are read on the controller only (ansible-doc, ansible-test), where PyYAML is always
    present. A module then lists one fragment for what it is, not five it must remember to combine.
    """
    merged = {}
    for text in fragments:
        for key, value in yaml.safe_load(text).items():
            if isinstance(value, list) and isinstance(merged.get(key), list):
                merged[key] = merged[key] + [item for item in value if item not in merged[key]]
            else:
                merged[key] = _merged(merged.get(key), value)
    return json.dumps(merged)  # JSON is YAML


def _merged(old, new):
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    result = dict(old)
    for key, value in new.items():
        result[key] = _merged(old.get(key), value)
    return result


class ModuleDocFragment:
    """The behaviour contract every module declares (see docs/behaviour-contract.md)."""

    # The collection's author and the attribute descriptions, written once; CHANGES and INFO_MODULE add
    # each attribute's support to them.
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
    _CHANGES_SUPPORT = r"""
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
    _INFO_SUPPORT = r"""
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

    # The action groups, which the cloud fragments (gcp, azure) add.
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


# Composed after the class: ansible-test's yamllint reads every assignment in the class body as a YAML literal.
ModuleDocFragment.CHANGES = compose(ModuleDocFragment.DOCUMENTATION, ModuleDocFragment._CHANGES_SUPPORT)
ModuleDocFragment.INFO_MODULE = compose(ModuleDocFragment.DOCUMENTATION, ModuleDocFragment._INFO_SUPPORT)
