# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """O(validate_only) of the modules that change cloud resources (module_utils/_core/argspec.py INPUT_CHECK_SPEC)."""

    DOCUMENTATION = r"""
options:
  validate_only:
    description:
      - Check every option as the module does before its first request, send nothing, and return the problems found in
        RV(problems). The task does not fail for them, and no credentials are needed.
      - The module's action plugin answers in the controller, without starting a module process; the module itself
        gives the same answer. The roles' preflight uses it to check a whole playbook's cloud requests before the
        first one is sent.
      - Only C(changed) (always V(false)) and RV(problems) are returned, plus what the module documents as returned
        with O(validate_only).
    type: bool
    default: false
"""
