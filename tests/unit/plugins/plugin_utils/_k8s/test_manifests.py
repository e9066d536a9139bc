# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The apply role's manifest checks and call grouping (plugins/plugin_utils/_k8s/manifests.py), called directly
(tests/unit/plugins/filter/test_k8s_names.py tests the filters that wrap them)."""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import manifests as engine


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "data": {"t": "c2VjcmV0"}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "gpu"}}
NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu"}}


def test_secrets_are_found_at_any_depth_by_path_only():
    manifests = [CM, {"apiVersion": "v1", "kind": "List", "items": [NS, {"kind": "ConfigMapList", "items": [SECRET]}]}]
    assert engine.secret_paths(manifests) == ["apply_manifests[1].items[1].items[0]"]
    assert "c2VjcmV0" not in repr(engine.manifest_problems(manifests))


@pytest.mark.parametrize("kind", ["Secret", "secret", "secrets", "Secrets", "SECRETS", " Secret ", "sEcReT"])
def test_every_spelling_the_api_resolves_to_a_secret_is_refused(kind):
    secret = dict(SECRET, kind=kind)
    assert engine.secret_paths([CM, secret]) == ["apply_manifests[1]"]
    assert engine.manifest_problems([secret])[0].startswith("apply_manifests[0]: a Secret cannot go through")


def test_flatten_puts_list_items_in_place():
    assert engine.flatten([NS, {"kind": "List", "items": [CM, {"kind": "ConfigMapList", "items": [CM]}]}]) == [NS, CM, CM]


def test_apply_batches_group_runs_with_the_same_wait_condition():
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "gpu"}}
    ready = {"type": "Available", "status": "True"}
    batches = engine.apply_batches([NS, CM, deploy, CM], wait_condition=ready, wait_condition_kinds=["Deployment"])
    assert [b["label"] for b in batches] == ["Namespace/gpu, ConfigMap/cm", "Deployment/d", "ConfigMap/cm"]
    assert [b["wait_condition"] for b in batches] == [{}, ready, {}]
    assert engine.apply_batches([NS, CM], leave_out=[NS]) == [{"definition": [CM], "wait_condition": {},
                                                              "label": "ConfigMap/cm"}]


@pytest.mark.parametrize("args, kwargs", [(("not a list",), {}), (([NS],), dict(wait_condition="Ready")),
                                          (([NS],), dict(leave_out=NS))])
def test_apply_batches_refuse_bad_arguments(args, kwargs):
    with pytest.raises(TypeError):
        engine.apply_batches(*args, **kwargs)
