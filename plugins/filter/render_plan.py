# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan summary of a render folder (plugins/plugin_utils/_render/plan.py), for role render_notice.

Documentation: plugins/filter/render_plan.yml.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_render_plan = engine("ansible_collections.gpu_ops.cluster.plugins.plugin_utils._render.plan")


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


class FilterModule:
    """The render plan summary."""

    def filters(self):
        return {"render_plan": render_plan}
