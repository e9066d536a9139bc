# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan summary of a render folder (plugins/plugin_utils/_render_plan.py), and the controller's preload of the
collection's filters, for role render_notice.

Documentation: plugins/filter/render_plan.yml, plugins/filter/controller_preload.yml.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _render_plan
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._filter_inputs import plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._workers import freeze_inherited_objects_in_workers


def render_plan(render_dir, hosts=None):
    """``headline``, ``markdown``, ``files`` and ``counts`` of the plan in the folder ``render_dir`` (a folder that
    does not exist, as in a --check run, plans nothing)."""
    if not isinstance(render_dir, str) or not render_dir:
        raise AnsibleFilterError("render_plan: the input must be the render folder's path, got %r" % (render_dir,))
    if os.path.exists(render_dir) and not os.path.isdir(render_dir):
        raise AnsibleFilterError("render_plan: %s is not a folder" % render_dir)
    hosts = plain(hosts) if hosts is not None else []
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise AnsibleFilterError("render_plan: hosts must be a list of inventory host names, got %r" % (hosts,))
    return _render_plan.summarize(render_dir, hosts)


def controller_preload(value):
    """``value`` unchanged.

    ansible-core loads a collection's filter files the first time a template names one of them, in the process that
    templates it. A worker is a fork of the controller made for one task, so each worker that templates a filter of
    this collection before the controller has loaded them loads them all again (about 0.1 s each, issue #22). The
    first task of every playbook (role render_notice, tasks/start.yml) names this filter in its task name, which the
    controller templates before it forks the worker: from then on every worker inherits the loaded filters. It also
    keeps every later worker's garbage collector off the objects inherited from the controller (plugin_utils/_workers.py)."""
    freeze_inherited_objects_in_workers()
    return value


class FilterModule:
    """The render plan summary; the controller's preload of the collection's filters."""

    def filters(self):
        return {"render_plan": render_plan, "controller_preload": controller_preload}
