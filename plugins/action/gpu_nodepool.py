# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the gpu_nodepool module; a failure names the options whose value came from module_defaults."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._defaults_origin import CloudDefaultsAction


class ActionModule(CloudDefaultsAction):
    """See plugins/plugin_utils/_defaults_origin.py."""
