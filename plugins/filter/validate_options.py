# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate_option_problems: the validate role's phases and check ids against the registry, before anything is read.

Documentation: plugins/filter/validate_option_problems.yml; the rules: plugins/plugin_utils/_validate/options.py.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_options = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.options")


def validate_option_problems(phases, checks=None):
    """``"<option>: <why>"`` for each phase and check id the validation does not have ([] when all are known)."""
    return _options.option_problems(plain(phases), plain([] if checks is None else checks))


class FilterModule:
    """The validate role's option checks."""

    def filters(self):
        return {"validate_option_problems": validate_option_problems}
