# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Engine of the mps_control_info module: what an MPS control daemon reports (``_host/mps.py``'s ``info``)."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import mps


def run(params, context):
    """Entry point of the mps_control_info module (the contract of ``_core.contract``)."""
    try:
        return mps.info(params, context.run_command, context.get_bin_path)
    except ValueError as exc:
        raise EngineError(str(exc))
