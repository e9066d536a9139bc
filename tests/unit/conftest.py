# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared unit-test setup."""

from __future__ import annotations

import pytest

try:
    from ansible.module_utils import _internal as module_utils_internal
except ImportError:  # ansible-core before 2.18
    module_utils_internal = None


@pytest.fixture(autouse=True)
def module_process(monkeypatch):
    """Run module code as it runs for real: in a module process, not on the controller.

    Importing controller code (filter tests load the templating engine) flips ansible-core's
    process-wide ``is_controller`` flag; from then on ``AnsibleModule.warn`` goes to the display
    instead of the module result, and a test's result depends on which tests ran before it in the
    same worker. Modules never run in the controller process, so each test starts outside it.
    """
    # ansible-core before 2.19 has no process-wide controller flag: AnsibleModule.warn always lands in the
    # module result, so there is nothing to reset
    if hasattr(module_utils_internal, "is_controller"):
        monkeypatch.setattr(module_utils_internal, "is_controller", False)
