# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_tests_parse / nccl_tests_verdict filters on the seed guide's tables."""

from __future__ import annotations

import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.nccl_tests import nccl_tests_parse, nccl_tests_verdict

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "fixtures", "nccl_tests")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def test_parse_and_judge_with_the_fabric_threshold():
    tcpx = nccl_tests_parse(fixture("guide_tcpx_all_gather.txt"))
    assert tcpx["avg_bus_bandwidth"] == 29.8293
    assert nccl_tests_verdict(tcpx, fabric="tcpx")["passed"]
    verdict = nccl_tests_verdict(fixture("guide_tcpxo_all_gather.txt"), fabric="tcpxo")
    assert not verdict["passed"] and verdict["threshold"] == 30.0
    assert nccl_tests_verdict(fixture("guide_tcpxo_all_gather.txt"), threshold=20, fabric="tcpxo")["passed"]
    assert nccl_tests_verdict(tcpx, fabric="socket")["threshold"] is None


def test_all_runs():
    runs = nccl_tests_parse(fixture("older_dgx2_three_runs.txt"), all_runs=True)
    assert [r["avg_bus_bandwidth"] for r in runs] == [30.2993, 42.5578, 41.2456]
    with pytest.raises(AnsibleFilterError, match="nccl_tests_parse: 3 nccl-tests runs found"):
        nccl_tests_parse(fixture("older_dgx2_three_runs.txt"))


def test_errors():
    with pytest.raises(AnsibleFilterError, match="no nccl-tests result table found"):
        nccl_tests_verdict("error: connection refused\n")
    with pytest.raises(AnsibleFilterError, match="fabric 'efa' is not one of"):
        nccl_tests_verdict(fixture("guide_tcpx_all_gather.txt"), fabric="efa")
    with pytest.raises(AnsibleFilterError, match="expected a parsed run"):
        nccl_tests_verdict(42)


def test_the_network_option_judges_the_transport():
    text = "host:1:1 [0] NCCL INFO Using network Socket\n" + fixture("guide_tcpx_all_gather.txt")
    fallback = nccl_tests_verdict(text, threshold=20, network="gIB")
    assert not fallback["passed"] and "NCCL used network Socket, not gIB" in fallback["reasons"][0]
    assert nccl_tests_verdict(text, threshold=20)["passed"]
    with pytest.raises(AnsibleFilterError, match="network: must be a non-empty string"):
        nccl_tests_verdict(text, network="")
