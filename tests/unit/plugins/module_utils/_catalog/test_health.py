# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health phase's facts (plugins/module_utils/_catalog/health.py) hold together: the DCGM levels split into
routine and burn-in, the host engine's names, a pinned DCGM image, and floors keyed by the testcases judged."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import health


def test_the_levels_are_routine_or_burn_in_and_nothing_else():
    assert sorted(health.DCGM_DIAG_LEVELS) == [1, 2, 3, 4]
    assert sorted(health.DCGM_DIAG_ROUTINE_LEVELS + health.DCGM_DIAG_BURN_IN_LEVELS) == [1, 2, 3, 4]
    assert not set(health.DCGM_DIAG_ROUTINE_LEVELS) & set(health.DCGM_DIAG_BURN_IN_LEVELS)


def test_the_host_engine_is_the_operator_s_service_on_its_port():
    assert health.DCGM_HOSTENGINE == {"daemonset": "nvidia-dcgm", "service": "nvidia-dcgm", "port": 5555, "container": "nvidia-dcgm-ctr"}


def test_the_dcgm_image_is_pinned_to_a_release():
    repository, tag = health.DCGM_IMAGE.rsplit(":", 1)
    assert repository == "nvcr.io/nvidia/cloud-native/dcgm" and tag[0].isdigit() and tag != "latest"


def test_every_floor_names_a_judged_testcase_and_a_positive_value():
    for model, floors in health.NVBANDWIDTH_FLOORS.items():
        assert model and set(floors) <= set(health.NVBANDWIDTH_TESTCASES)
        assert all(value > 0 for value in floors.values())
