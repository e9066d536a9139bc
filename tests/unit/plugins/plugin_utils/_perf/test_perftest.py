# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""perftest output (plugins/plugin_utils/_perf/perftest.py): ib_write_bw tables and the bandwidth threshold."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import perftest as _perftest
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host as host


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "module_utils", "fixtures")


GUIDE_OUTPUT = """
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 2          5000             0.11               0.11               6.897101
 65536      5000             92.39              92.38              0.176196
 8388608    5000             92.39              92.39              0.001377
---------------------------------------------------------------------------------------
"""


# ---- perftest -------------------------------------------------------------------------------------

def test_ib_write_bw_guide_output():
    with open(os.path.join(FIXTURES, "perftest", "guide_ib_write_bw_dmabuf.txt"), encoding="utf-8") as handle:
        result = _perftest.parse_ib_write_bw(handle.read())
    assert result["unit"] == "Gb/sec" and result["device"] == "mlx5_0" and result["link_type"] == "Ethernet"
    assert len(result["rows"]) == 23
    assert result["rows"][15] == {"bytes": 65536, "iterations": 5000, "bw_peak_gbps": 92.39, "bw_average_gbps": 92.38,
                                  "msg_rate_mpps": 0.176196}
    assert result["bw_average_gbps"] == 92.39 and result["max_bw_average_gbps"] == 92.46


def test_ib_write_bw_megabytes_tabs_and_warnings():
    text = ("Conflicting CPU frequency values detected: 1500.000000 != 3000.000000. CPU Frequency is not max.\n"
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            "Conflicting CPU frequency values detected: 1500.000000 != 3000.000000. CPU Frequency is not max.\n"
            " 65536\t5000\t11548.00\t11547.50\t0.184760\n")
    result = _perftest.parse_ib_write_bw(text)
    assert result["unit"] == "MB/sec" and result["bw_average_gbps"] == pytest.approx(92.38)


def test_ib_write_bw_without_a_table_is_an_error():
    with pytest.raises(inputs.OperatorInputError, match="no ib_write_bw result table"):
        _perftest.parse_ib_write_bw("Couldn't connect to 192.168.2.226:18515\nUnable to init the socket connection")


def test_threshold_is_a_fraction_of_the_slowest_link():
    assert _perftest.rdma_threshold({"a": host(rate=200), "b": host(rate=100)}, fraction=0.8) == (80.0, 100.0, "mlx5_0")
    assert _perftest.rdma_threshold({"a": host()}, threshold=50) == (50.0, None, None)
    with pytest.raises(inputs.OperatorInputError, match="mlx5_9"):
        _perftest.rdma_threshold({"a": host()}, device="mlx5_9")
    with pytest.raises(inputs.OperatorInputError, match="threshold_fraction"):
        _perftest.rdma_threshold({"a": host()}, fraction=1.5)


def test_the_guide_result_passes_the_default_threshold_of_its_100g_link():
    threshold, dummy, dummy = _perftest.rdma_threshold({"a": host(rate=100)})
    assert _perftest.parse_ib_write_bw(GUIDE_OUTPUT)["bw_average_gbps"] >= threshold
