# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the gke_multinetwork module (in the worker where that is the same as a module process: plugin_utils/_inprocess.py);
a failure names the options whose value came from module_defaults."""

from __future__ import annotations

# imported here, in the controller, once: every worker it forks inherits the module, its engine and libraries
from ansible_collections.gpu_ops.cluster.plugins.modules import gke_multinetwork as module
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._defaults_origin import CloudDefaultsAction


class ActionModule(CloudDefaultsAction):
    """See plugins/plugin_utils/_defaults_origin.py and _inprocess.py."""

    IN_PROCESS_MODULE = module
