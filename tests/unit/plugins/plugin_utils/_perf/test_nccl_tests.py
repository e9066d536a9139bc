# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests output parser, on real outputs (../module_utils/fixtures/nccl_tests/).

- guide_tcpx_all_gather.txt, guide_tcpxo_all_gather.txt: the two tables of the seed guide
  (GKE "maximise GPU network bandwidth" guide, French edition), extracted verbatim.
- newer_mpirun_tagged_all_reduce.txt: nccl-tests 2.18.0 run under ``mpirun --tag-output`` (two RTX 5090
  ranks over the socket transport), from a public experiment log; stderr noise included.
- older_k80_all_reduce_error_column.txt: an older version (``error`` columns, redop without root) with
  an NCCL INFO line between the header and the rows, from a public Azure ML example.
- older_dgx2_three_runs.txt: three consecutive older-version runs on a DGX-2 (all_gather without
  redop/root and with 4 out-of-bounds values, all_reduce with redop, broadcast with root), from a
  public issue.
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import nccl_tests as nt
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as _gpudirect

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "module_utils", "fixtures", "nccl_tests")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# ------------------------------------------------------------------ the guide's two tables

def test_guide_tcpx_table():
    run = nt.parse(fixture("guide_tcpx_all_gather.txt"))
    assert run["columns"] == ["size", "count", "type", "redop", "root",
                              "time", "algbw", "busbw", "wrong", "time", "algbw", "busbw", "wrong"]
    assert [r["size"] for r in run["rows"]] == [1048576 * 2 ** i for i in range(10)]
    first, last = run["rows"][0], run["rows"][-1]
    assert first == dict(size=1048576, count=16384, type="float", redop="none", root=-1,
                         out_of_place=dict(time=696.8, algbw=1.50, busbw=1.41, wrong=0),
                         in_place=dict(time=729.0, algbw=1.44, busbw=1.35, wrong=0))
    assert last["size"] == 536870912 and last["in_place"]["busbw"] == 71.28
    assert run["avg_bus_bandwidth"] == 29.8293
    assert run["out_of_bounds"] == 0 and run["out_of_bounds_ok"] is True
    assert run["wrong_total"] == 0
    assert run["max_bus_bandwidth"] == 71.28
    assert run["min_size"] == 1048576 and run["max_size"] == 536870912
    # nccl-tests averages busbw over every row and both placements
    assert run["avg_bus_bandwidth_computed"] == pytest.approx(run["avg_bus_bandwidth"], abs=0.005)


def test_guide_tcpxo_table():
    run = nt.parse(fixture("guide_tcpxo_all_gather.txt"))
    assert len(run["rows"]) == 11
    big = run["rows"][-1]
    assert big["size"] == 1073741824 and big["count"] == 16777216
    assert big["out_of_place"] == dict(time=8241.7, algbw=130.28, busbw=122.14, wrong=0)
    # the in-place time of 512 MiB prints as an integer (11706): read as a number all the same
    assert run["rows"][-2]["in_place"]["time"] == 11706
    assert run["avg_bus_bandwidth"] == 22.449
    assert run["avg_bus_bandwidth_computed"] == pytest.approx(22.449, abs=0.005)


def test_guide_tables_against_the_catalog_thresholds():
    tcpx = nt.verdict(nt.parse(fixture("guide_tcpx_all_gather.txt")),
                      threshold=_gpudirect.NCCL_BANDWIDTH_THRESHOLDS["tcpx"])
    assert tcpx["passed"] and tcpx["reasons"] == [] and tcpx["threshold"] == 25.0
    # the guide's sample TCPXO output (22.449 GB/s) is below the 30 GB/s A3 Mega threshold
    tcpxo = nt.verdict(nt.parse(fixture("guide_tcpxo_all_gather.txt")),
                       threshold=_gpudirect.NCCL_BANDWIDTH_THRESHOLDS["tcpxo"])
    assert not tcpxo["passed"]
    assert tcpxo["reasons"] == ["average bus bandwidth 22.45 GB/s is below the 30 GB/s threshold"]


# ------------------------------------------------------------------ other versions and formats

def test_newer_version_with_mpirun_tags():
    run = nt.parse(fixture("newer_mpirun_tagged_all_reduce.txt"))
    assert run["nccl_tests_version"] == "2.18.0"
    assert run["collective"] == "all_reduce_perf_mpi"
    assert run["params"]["nGpus"] == 1 and run["params"]["iters"] == 50 and run["params"]["warmup_iters"] == 10
    assert run["params"]["validation"] == 1 and run["params"]["minBytes"] == 1048576
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    assert run["ranks"][1] == dict(rank=1, group=0, pid=2994448, host="lab", device=0, bus_id="0000:02:00",
                                   name="NVIDIA GeForce RTX 5090")
    assert run["hosts"] == ["lab"]
    assert len(run["rows"]) == 8 and run["rows"][5]["out_of_place"]["time"] == 14977.1
    assert run["avg_bus_bandwidth"] == 1.57614
    assert run["concluded"] is True
    assert run["avg_bus_bandwidth_computed"] == pytest.approx(1.57614, abs=0.005)
    assert nt.verdict(run)["passed"]


def test_older_version_error_columns_and_interleaved_log_line():
    run = nt.parse(fixture("older_k80_all_reduce_error_column.txt"))
    assert run["columns"] == ["size", "count", "type", "redop",
                              "time", "algbw", "busbw", "error", "time", "algbw", "busbw", "error"]
    assert "root" not in run["rows"][0]
    assert run["rows"][0]["out_of_place"] == dict(time=19902, algbw=1.69, busbw=2.53, error=2e-07)
    assert len(run["rows"]) == 7 and run["unparsed_rows"] == []
    assert len(run["ranks"]) == 4 and run["ranks"][0]["group"] == 0
    assert run["max_error"] == 2e-07 and run["wrong_total"] == 0
    assert run["avg_bus_bandwidth"] == 2.54225
    assert run["concluded"] is False and run["collective"] is None
    assert nt.verdict(run, threshold=2.5)["passed"]
    assert not nt.verdict(run, threshold=3)["passed"]


def test_three_older_runs_with_varying_columns():
    runs = nt.parse_all(fixture("older_dgx2_three_runs.txt"))
    assert [r["columns"][:5] for r in runs] == [
        ["size", "count", "type", "time", "algbw"],           # all_gather: no redop, no root
        ["size", "count", "type", "redop", "time"],           # all_reduce: redop
        ["size", "count", "type", "root", "time"],            # broadcast: root
    ]
    assert [len(r["rows"]) for r in runs] == [31, 31, 31]
    assert [r["avg_bus_bandwidth"] for r in runs] == [30.2993, 42.5578, 41.2456]
    assert [len(r["ranks"]) for r in runs] == [12, 12, 12]
    assert runs[2]["rows"][0]["root"] == 0
    for run in runs:
        assert run["avg_bus_bandwidth_computed"] == pytest.approx(run["avg_bus_bandwidth"], abs=0.005)
    gather = runs[0]
    assert gather["out_of_bounds"] == 4 and gather["out_of_bounds_ok"] is False
    assert gather["max_error"] == 1.0
    assert nt.verdict(gather)["reasons"] == ["4 out of bounds values"]
    with pytest.raises(nt.NcclTestsParseError, match="3 nccl-tests runs found"):
        nt.parse(fixture("older_dgx2_three_runs.txt"))


def test_not_applicable_values_read_as_null():
    # nccl-tests prints N/A in #wrong when it did not check the results (-c 0); the guide's TCPX table
    # with its #wrong cells replaced by N/A is such an output
    text = fixture("guide_tcpx_all_gather.txt")
    lines = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            cells = line.split()
            cells[8] = cells[12] = "N/A"
            line = "  ".join(cells)
        lines.append(line)
    run = nt.parse("\n".join(lines))
    assert all(r["out_of_place"]["wrong"] is None and r["in_place"]["wrong"] is None for r in run["rows"])
    assert run["wrong_total"] == 0 and run["avg_bus_bandwidth"] == 29.8293
    assert nt.verdict(run, threshold=25)["passed"]


def test_cputime_header_variant():
    text = fixture("guide_tcpx_all_gather.txt").replace("     time   algbw", "  cputime   algbw")
    run = nt.parse(text)
    assert run["columns"][5] == "cputime" and run["rows"][0]["out_of_place"]["cputime"] == 696.8


# ------------------------------------------------------------------ incomplete and broken outputs

def test_truncated_run_fails_the_verdict():
    text = fixture("guide_tcpxo_all_gather.txt")
    truncated = "\n".join(text.splitlines()[:8])  # the header and five rows, no footer
    run = nt.parse(truncated)
    assert len(run["rows"]) == 5 and run["avg_bus_bandwidth"] is None and run["out_of_bounds"] is None
    result = nt.verdict(run, threshold=1)
    assert not result["passed"]
    assert "no '# Out of bounds values' line: the run did not finish" in result["reasons"]
    assert "no '# Avg bus bandwidth' line: the run did not finish" in result["reasons"]


def test_wrong_values_fail_the_verdict():
    text = fixture("newer_mpirun_tagged_all_reduce.txt").replace(
        "2.30       0  58055.4    2.31    2.31       0", "2.30       0  58055.4    2.31    2.31       7")
    run = nt.parse(text)
    assert run["wrong_total"] == 7
    assert "7 wrong values (#wrong)" in nt.verdict(run)["reasons"]


def test_min_bw_failed_status():
    text = fixture("guide_tcpx_all_gather.txt").replace("# Avg bus bandwidth    : 29.8293",
                                                        "# Avg bus bandwidth    : 29.8293 FAILED")
    run = nt.parse(text)
    assert run["avg_bus_bandwidth"] == 29.8293 and run["avg_bus_bandwidth_status"] == "FAILED"
    assert not nt.verdict(run)["passed"]


def test_row_that_does_not_match_the_header():
    text = fixture("guide_tcpx_all_gather.txt").replace(
        "    2097152         32768     float    none      -1    776.4    2.70    2.53      0    726.7    2.89    2.71      0",
        "    2097152         32768     float    none      -1    776.4    2.70    2.53      0")
    run = nt.parse(text)
    assert len(run["rows"]) == 9 and len(run["unparsed_rows"]) == 1
    assert "1 rows could not be read" in nt.verdict(run)["reasons"]


@pytest.mark.parametrize("text", ["", "NCCL WARN NET/Socket : no interface found\n", "# Avg bus bandwidth : 3\n"])
def test_no_table(text):
    with pytest.raises(nt.NcclTestsParseError, match="no nccl-tests result table"):
        nt.parse(text)


def test_not_text():
    with pytest.raises(nt.NcclTestsParseError, match="must be text"):
        nt.parse_all(None)


# ------------------------------------------------------------------ boundaries the mutation check showed untested

def test_the_threshold_and_the_row_count_are_met_at_equality():
    run = nt.parse(fixture("guide_tcpx_all_gather.txt"))
    assert nt.verdict(run, threshold=29.8293)["passed"], "an average equal to the threshold passes"
    below = nt.verdict(run, threshold=29.83)
    assert not below["passed"] and below["reasons"] == [
        "average bus bandwidth 29.83 GB/s is below the 29.83 GB/s threshold"]
    assert nt.verdict(run, threshold="29")["threshold"] == 29.0
    assert nt.verdict(run, min_rows=10)["passed"] and nt.verdict(run, min_rows=10)["rows"] == 10
    assert nt.verdict(run, min_rows=11)["reasons"] == ["the table has 10 rows, 11 expected at least"]
    assert nt.verdict(dict(run, rows=[]))["reasons"] == ["the table has 0 rows, 1 expected at least"]
    result = nt.verdict(run)
    assert result["collective"] == run["collective"] and result["max_bus_bandwidth"] == 71.28 and result["threshold"] is None


@pytest.mark.parametrize("line, count, ok, passed", [
    ("# Out of bounds values : 0 OK", 0, True, True),
    ("# Out of bounds values : 0", 0, True, True),
    ("# Out of bounds values : 3", 3, False, False),
    ("# Out of bounds values : 0 FAILED", 0, False, False),
    ("# Out of bounds values : 1 OK", 1, True, False),
], ids=["zero ok", "zero without status", "three", "zero failed", "one ok"])
def test_out_of_bounds_line_and_status(line, count, ok, passed):
    text = fixture("guide_tcpx_all_gather.txt")
    original = next(x for x in text.splitlines() if x.strip().startswith("# Out of bounds values")).strip()
    run = nt.parse(text.replace(original, line))
    assert (run["out_of_bounds"], run["out_of_bounds_ok"]) == (count, ok)
    result = nt.verdict(run)
    assert result["passed"] is passed
    if not passed:
        assert "%d out of bounds values" % count in result["reasons"]


def test_two_runs_need_parse_all():
    text = fixture("guide_tcpx_all_gather.txt")
    with pytest.raises(nt.NcclTestsParseError, match="2 nccl-tests runs found; parse them with parse_all"):
        nt.parse(text + "\n" + text)
    assert [len(r["rows"]) for r in nt.parse_all(text + "\n" + text)] == [10, 10]


# ------------------------------------------------------------------ the transport NCCL used (NCCL_DEBUG=INFO)
# NVIDIA/nccl src/init.cc (v2.19.3-1 .. v2.30.7-1): INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name); the
# built-in transports are named "IB" and "Socket" (src/transport/net_ib/common.cc, net_socket.cc). The INFO prefix
# (host:pid:tid [cudaDev]) is NCCL's debug format; the lines are written here around the guide's table.

def _with_networks(*names):
    info = ["a3u-host-1:412:412 [%d] NCCL INFO Using network %s" % (rank, name) for rank, name in enumerate(names)]
    return "\n".join(["# nThread 1 nGpus 1 minBytes 1048576 maxBytes 536870912 step: 2(factor) warmup iters: 5 iters: 20"]
                     + info + [fixture("guide_tcpx_all_gather.txt")])


def test_the_networks_nccl_used_are_read_from_its_info_lines():
    run = nt.parse(_with_networks("gIB", "gIB", "gIB"))
    assert run["networks"] == ["gIB"]
    assert len(run["rows"]) == 10          # the INFO lines do not disturb the table
    assert nt.parse(fixture("guide_tcpx_all_gather.txt"))["networks"] == []


def test_a_gib_run_passes_the_transport_check():
    judged = nt.verdict(nt.parse(_with_networks("gIB", "gIB")), threshold=25.0, network="gIB")
    assert judged["passed"] and judged["reasons"] == [] and judged["networks"] == ["gIB"] and judged["network"] == "gIB"
    # NCCL_NET matches a network's name case-insensitively, so does the check
    assert nt.verdict(nt.parse(_with_networks("GIB")), network="gIB")["passed"]


def test_a_socket_fallback_fails_even_above_the_threshold():
    judged = nt.verdict(nt.parse(_with_networks("gIB", "Socket")), threshold=25.0, network="gIB")
    assert not judged["passed"]
    assert judged["reasons"] == ["NCCL used network Socket, not gIB: the gIB plugin did not load and NCCL fell back"]


def test_no_transport_line_is_not_a_pass_when_the_network_is_checked():
    run = nt.parse(fixture("guide_tcpx_all_gather.txt"))
    judged = nt.verdict(run, threshold=25.0, network="gIB")
    assert not judged["passed"] and "no 'NCCL INFO Using network' line" in judged["reasons"][0]
    assert "NCCL_DEBUG=INFO" in judged["reasons"][0]
    # without ``network`` the transport is not judged (the TCPX/TCPXO verdicts are unchanged)
    assert nt.verdict(run, threshold=25.0)["passed"]


def test_each_run_keeps_its_own_networks():
    text = _with_networks("Socket") + "\n" + _with_networks("gIB")
    first, second = nt.parse_all(text)
    assert (first["networks"], second["networks"]) == (["Socket"], ["gIB"])


def test_networks_in_reads_every_using_network_line_also_without_a_table():
    text = ("[1,0]<stdout>:gpu-0:81:81 [0] NCCL INFO Using network gIB\n"
            "gpu-1:82:82 [0] NCCL INFO Using network Socket\nNCCL INFO NET/Socket : Using [0]eth0\n")
    assert nt.networks_in(text) == ["gIB", "Socket"]
    assert nt.networks_in("") == [] and nt.networks_in(None) == []
