# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the gpu_nodepool module as a module process; a failure names the options whose value came from module_defaults,
render mode records the files it wrote, and validate_only is answered in
the controller (plugins/plugin_utils/_clouds/action.py)."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._clouds.action import CloudDefaultsAction


class ActionModule(CloudDefaultsAction):
    """See plugins/plugin_utils/_clouds/action.py."""

    # imported only for validate_only: the module pulls in its engine and the cloud clients
    MODULE = "gpu_nodepool"
