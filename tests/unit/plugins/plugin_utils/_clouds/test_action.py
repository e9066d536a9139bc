# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which module_defaults entry set an option, and the note a failure gets."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._clouds.action import (
    action_groups,
    defaults_for,
    origin_note,
)


def test_groups_come_from_meta_runtime():
    groups = action_groups()
    assert groups["gpu_nodepool"] == ("gcp", "azure")
    assert groups["gke_cluster"] == ("gcp",)


def test_the_module_entry_wins_over_its_group_and_later_entries_over_earlier():
    defaults = [{"group/gpu_ops.cluster.gcp": {"project": "a", "auth_kind": "accesstoken"}},
                {"group/gpu_ops.cluster.gcp": {"project": "b"}, "gpu_ops.cluster.gke_cluster": {"project": "c"},
                 "gpu_ops.cluster.gke_multinetwork": {"max_retries": 1}}]
    sources = defaults_for("gke_cluster", defaults)
    assert sources == {"project": ("gpu_ops.cluster.gke_cluster", "c")}
    assert "max_retries" not in sources


def test_note_names_options_in_the_message_whose_value_is_the_default():
    sources = {"access_token": ("group/gpu_ops.cluster.gcp", "{{ tok }}"), "project": ("group/gpu_ops.cluster.gcp", "p")}

    def template(value):
        return "secret" if value == "{{ tok }}" else value

    args = {"access_token": "secret", "project": "p"}
    note = origin_note("access_token: the value contains a line break", args, sources, template)
    assert note == " (access_token comes from module_defaults for group/gpu_ops.cluster.gcp)"
    assert "secret" not in note
    # the task's own value differs: no note; an option the message does not name: no note
    assert origin_note("access_token: bad", dict(args, access_token="other"), sources, template) == ""
    assert origin_note("service_account_file: bad", args, sources, template) == ""
