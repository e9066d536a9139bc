# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The performance checks (plugins/plugin_utils/_validate/performance.py) on captured probe outputs: the guide's
nccl-tests tables (A3 High TCPX, A3 Mega TCPXO) with NCCL INFO lines, written-out tables, and the guide's ib_write_bw
output. Floors are written here as numbers (25 / 30 GB/s average, 50 / 100 GB/s at 512M / 1G), not read from the catalog.
"""

from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import snapshot as snap

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "module_utils", "fixtures")
PERF_IDS = ["perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.nccl_transport", "perf.ib_write_bw"]


def _fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


def _info(net, ranks=2):
    lines = ["gpu-0:606:642 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>"]
    lines += ["gpu-%d:606:642 [0] NCCL INFO Using network %s" % (r, net) for r in range(ranks)]
    return "\n".join(lines) + "\n"


def _table(rows, avg, finished=True):
    """An nccl-tests all_reduce table: rows of (size, busbw) (algbw and time are filler)."""
    out = ["#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
           "#  (B)  (elements)  (us)  (GB/s)  (GB/s)  (us)  (GB/s)  (GB/s)"]
    out += ["%d  %d  float  sum  -1  100.0  %.2f  %.2f  0  100.0  %.2f  %.2f  0" % (s, s // 4, b, b, b, b) for s, b in rows]
    if finished:
        out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %s" % avg, "#"]
    return "\n".join(out) + "\n"


GUIDE_TCPX = _fixture("nccl_tests", "guide_tcpx_all_gather.txt")     # avg 29.83 GB/s, 70.87 GB/s at 512M
GUIDE_TCPXO = _fixture("nccl_tests", "guide_tcpxo_all_gather.txt")   # avg 22.45 GB/s, 122.14 GB/s at 1G
GUIDE_IB = _fixture("perftest", "guide_ib_write_bw_dmabuf.txt")       # 92.39 Gb/s at the largest size


def _snapshot(nccl=None, ib=None, tolerance=0.0, kind="kubernetes"):
    empty = {"resources": []}
    base = snap.build_host("h", {}) if kind == "host" else snap.build_kubernetes("c", empty, empty, empty, empty, empty)
    base["performance"] = dict(tolerance=tolerance, nccl=nccl, ib_write_bw=ib)
    return base


def _nccl(profile="tcpx", runs=None):
    if runs is None:
        runs = [dict(benchmark="all_gather", output=_info("GPUDirectTCPX_v7") + GUIDE_TCPX, stderr="", rc=0, error="")]
    return dict(profile=profile, nodes=["gpu-0", "gpu-1"], runs=runs)


def _ib(output=GUIDE_IB, rc=0, threshold=80.0, **extra):
    return dict(dict(output=output, stderr="", rc=rc, error="", threshold_gbps=threshold, link_rate_gbps=100.0, device="mlx5_0",
                     nodes=["bm-0", "bm-1"]), **extra)


def _results(snapshot):
    result = suite.validate(snapshot, phases=["performance"])
    return result, dict((r["id"], r) for r in result["results"])


def test_the_performance_checks_are_registered_in_the_performance_phase_only():
    ids = [c["id"] for c in suite.checks() if c["phase"] == "performance"]
    assert sorted(ids) == sorted(PERF_IDS)
    # not run unless asked for: the default phases leave the performance phase out
    default = suite.validate(_snapshot(_nccl(), _ib()))
    assert not [r for r in default["results"] if r["phase"] == "performance"]


def test_the_guide_tcpx_run_and_ib_write_bw_pass():
    result, by_id = _results(_snapshot(_nccl(), _ib()))
    assert [by_id[i]["status"] for i in PERF_IDS] == ["passed"] * 4, by_id
    assert result["exit_status"] == 0
    assert "all_gather: average bus bandwidth 29.8293 GB/s over 10 sizes, floor 25.0 GB/s (tcpx)" in by_id["perf.nccl_avg_busbw"]["evidence"][0]
    assert "536870912 B bus bandwidth 70.87 GB/s, floor 50.0 GB/s" in by_id["perf.nccl_large_busbw"]["evidence"][0]
    assert "Using network GPUDirectTCPX_v7 (2 rank line(s))" in by_id["perf.nccl_transport"]["evidence"][0]
    assert "BW average 92.39 Gb/s at 8388608 B, floor 80.0 Gb/s" in by_id["perf.ib_write_bw"]["evidence"][0]


def test_the_guide_tcpxo_run_fails_the_average_floor_with_cause_and_fix_but_passes_the_large_message_floor():
    runs = [dict(benchmark="all_gather", output=_info("FasTrak") + GUIDE_TCPXO, rc=0)]
    result, by_id = _results(_snapshot(_nccl("tcpxo", runs), _ib()))
    avg = by_id["perf.nccl_avg_busbw"]
    assert avg["status"] == "failed"
    assert "average bus bandwidth 22.45 GB/s is below the 30 GB/s threshold" in avg["message"]
    assert avg["cause"] == suite.CHECKS_BY_ID["perf.nccl_avg_busbw"].cause
    assert avg["fix"].startswith("role gpu_ops.cluster.gpudirect_installer, variable gpudirect_installer_gpudirect")
    assert by_id["perf.nccl_large_busbw"]["status"] == "passed"   # 122.14 GB/s at 1G >= 100
    assert by_id["perf.nccl_transport"]["status"] == "passed"
    assert result["exit_status"] == 8


@pytest.mark.parametrize("busbw, status", [(99.9, "failed"), (100.0, "passed"), (100.1, "passed")])
def test_the_large_message_floor_is_inclusive_and_judged_at_the_profile_size(busbw, status):
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 29, 90.0), (2 ** 30, busbw)], avg=40.0)
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
    check = by_id["perf.nccl_large_busbw"]
    assert check["status"] == status, check
    if status == "failed":
        assert "bus bandwidth 99.9 GB/s at 1073741824 B is below the 100.0 GB/s large-message floor" in check["message"]
        assert check["cause"] and check["fix"]


@pytest.mark.parametrize("avg, status", [(29.99, "failed"), (30.0, "passed")])
def test_the_average_floor_is_inclusive(avg, status):
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 120.0)], avg=avg)
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
    assert by_id["perf.nccl_avg_busbw"]["status"] == status


def test_the_stated_tolerance_lowers_every_floor_and_is_shown():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 96.0)], avg=28.6)
    nccl = _nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])
    ib = _ib(threshold=96.0)   # 92.39 Gb/s measured
    _result, strict = _results(_snapshot(copy.deepcopy(nccl), copy.deepcopy(ib)))
    assert [strict[i]["status"] for i in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.ib_write_bw")] == ["failed"] * 3
    _result, tolerant = _results(_snapshot(nccl, ib, tolerance=0.05))
    assert [tolerant[i]["status"] for i in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.ib_write_bw")] == ["passed"] * 3
    assert "5% tolerance" in tolerant["perf.nccl_avg_busbw"]["evidence"][0]
    assert "5% tolerance" in tolerant["perf.ib_write_bw"]["evidence"][0]


@pytest.mark.parametrize("net", ["Socket", "IB"])
def test_a_fallback_to_ncc_own_transport_fails_the_transport_check(net):
    runs = [dict(benchmark="all_gather", output=_info(net) + "gpu-0 NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n" + GUIDE_TCPX, rc=0)]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    check = by_id["perf.nccl_transport"]
    assert check["status"] == "failed"
    assert "all_gather: NCCL used %s instead of the GPUDirectTCPX plugin (a fallback of NCCL itself)" % net in check["message"]
    assert check["cause"] == suite.CHECKS_BY_ID["perf.nccl_transport"].cause and check["fix"]


def test_one_rank_on_sockets_fails_the_transport_check_even_when_the_other_loaded_the_plugin():
    output = "r0 NCCL INFO Using network gIB\nr1 NCCL INFO Using network Socket\n" + GUIDE_TCPX
    _result, by_id = _results(_snapshot(_nccl("rdma", [dict(benchmark="all_gather", output=output, rc=0)])))
    assert by_id["perf.nccl_transport"]["status"] == "failed"
    assert "NCCL used Socket instead of the gIB plugin" in by_id["perf.nccl_transport"]["message"]


def test_the_wrong_plugin_for_the_profile_fails():
    runs = [dict(benchmark="all_gather", output=_info("GPUDirectTCPX_v7") + GUIDE_TCPXO, rc=0)]
    _result, by_id = _results(_snapshot(_nccl("tcpxo", runs)))
    assert by_id["perf.nccl_transport"]["status"] == "failed"
    assert "NCCL used GPUDirectTCPX_v7 instead of the FasTrak plugin" in by_id["perf.nccl_transport"]["message"]


# ---- never a pass: missing, truncated, errored, timed out --------------------------------------------------

TRUNCATED = _info("GPUDirectTCPX_v7") + GUIDE_TCPX.split("# Out of bounds")[0]


@pytest.mark.parametrize("run, text", [
    (dict(output="", rc=None, error=""), "no output was captured"),
    (dict(output=None, rc=None, error="Failed to execute on pod nccl-test-host-1"), "the run could not complete: Failed to execute"),
    (dict(output=TRUNCATED, rc=137, error=""), "truncated: no '# Avg bus bandwidth' line"),
    (dict(output=_info("GPUDirectTCPX_v7") + "NCCL WARN NET/Socket : no interface found\n", rc=1, error=""), "no nccl-tests result table"),
    (dict(output=_info("GPUDirectTCPX_v7") + GUIDE_TCPX, rc=124, error=""), "nccl-tests exited with code 124"),
])
def test_a_missing_truncated_or_failed_nccl_run_is_other_never_a_pass(run, text):
    run = dict(run, benchmark="all_gather")
    result, by_id = _results(_snapshot(_nccl("tcpx", [run])))
    for check_id in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw"):
        assert by_id[check_id]["status"] == "other", by_id[check_id]
        assert text in by_id[check_id]["message"], by_id[check_id]["message"]
    assert by_id["perf.nccl_transport"]["status"] != "passed" or run["output"]
    assert result["exit_status"] == 9 and not result["summary"]["ok"]


def test_a_log_without_nccl_info_lines_cannot_show_the_transport():
    runs = [dict(benchmark="all_gather", output=GUIDE_TCPX, rc=0)]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    assert by_id["perf.nccl_transport"]["status"] == "other"
    assert "no 'NCCL INFO Using network' line" in by_id["perf.nccl_transport"]["message"]
    assert by_id["perf.nccl_avg_busbw"]["status"] == "passed"


def test_a_run_below_the_large_message_size_is_other():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 29, 150.0)], avg=95.0)
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
    assert by_id["perf.nccl_large_busbw"]["status"] == "other"
    assert "largest message is 536870912 B, below the 1073741824 B" in by_id["perf.nccl_large_busbw"]["message"]


@pytest.mark.parametrize("ib, text", [
    (_ib(output="", rc=None, error=""), "no output was captured"),
    (_ib(output="Couldn't connect to 10.0.0.3:18515\n", rc=1), "no ib_write_bw result table"),
    (_ib(rc=137), "ib_write_bw exited with code 137"),
    (_ib(threshold=None), "no floor was recorded"),
    (dict(error="Pod rdma-test-server is not ready after 600 s"), "the probe could not run: Pod rdma-test-server is not ready"),
])
def test_a_missing_or_failed_ib_write_bw_is_other(ib, text):
    result, by_id = _results(_snapshot(None, ib))
    assert by_id["perf.ib_write_bw"]["status"] == "other"
    assert text in by_id["perf.ib_write_bw"]["message"], by_id["perf.ib_write_bw"]["message"]
    assert result["exit_status"] in (8, 9) and result["exit_status"] != 0


def test_ib_write_bw_below_the_floor_fails_with_cause_and_fix():
    _result, by_id = _results(_snapshot(None, _ib(threshold=93.0)))
    check = by_id["perf.ib_write_bw"]
    assert check["status"] == "failed"
    assert "BW average 92.39 Gb/s at 8388608 B is below the 93.0 Gb/s floor" in check["message"]
    assert check["fix"].startswith("role gpu_ops.cluster.gpu_operator, variable gpu_operator_rdma")


def test_no_captured_performance_output_is_other_and_a_probe_not_asked_for_is_skipped_with_its_reason():
    bare = snap.build_kubernetes("c", {"resources": []}, {"resources": []}, {"resources": []}, {"resources": []}, {"resources": []})
    _result, by_id = _results(bare)
    assert set(r["status"] for r in by_id.values()) == {"other"}
    reason = "validate_performance_nccl is empty: no NCCL probe was asked for"
    _result, by_id = _results(_snapshot(dict(skipped=reason), _ib()))
    assert by_id["perf.nccl_avg_busbw"]["status"] == "skipped" and reason in by_id["perf.nccl_avg_busbw"]["message"]
    assert by_id["perf.ib_write_bw"]["status"] == "passed"
    # a probe that could not run (pods never ready, refused) is other, with its message
    _result, by_id = _results(_snapshot(dict(error="Step nccl: Pod default/x is not ready after 30 s"), None))
    assert by_id["perf.nccl_transport"]["status"] == "other"
    assert "the probe could not run: Step nccl: Pod default/x is not ready" in by_id["perf.nccl_transport"]["message"]
    assert by_id["perf.ib_write_bw"]["status"] == "other"


def test_a_host_target_skips_the_performance_checks_with_the_reason():
    _result, by_id = _results(_snapshot(_nccl(), _ib(), kind="host"))
    assert set(r["status"] for r in by_id.values()) == {"skipped"}
    assert "the performance probes run on a Kubernetes cluster's nodes" in by_id["perf.ib_write_bw"]["message"]


@pytest.mark.parametrize("tolerance", [-0.1, 1.0, "5%", True])
def test_a_bad_tolerance_is_other(tolerance):
    _result, by_id = _results(_snapshot(_nccl(), _ib(), tolerance=tolerance))
    assert by_id["perf.nccl_avg_busbw"]["status"] == "other"
    assert "performance.tolerance must be a fraction" in by_id["perf.nccl_avg_busbw"]["message"]


def test_numbers_recorded_as_text_by_templated_facts_are_read():
    runs = [dict(benchmark="all_gather", output=_info("GPUDirectTCPX_v7") + GUIDE_TCPX, rc="0", error="")]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs), _ib(rc="0", threshold="80.0")))
    assert [by_id[i]["status"] for i in PERF_IDS] == ["passed"] * 4
    _result, by_id = _results(_snapshot(None, _ib(rc="137", threshold="80.0")))
    assert by_id["perf.ib_write_bw"]["status"] == "other" and "exited with code 137" in by_id["perf.ib_write_bw"]["message"]


@pytest.mark.parametrize("threshold, status", [(92.39, "passed"), (92.4, "failed")])
def test_the_ib_write_bw_floor_is_inclusive(threshold, status):
    _result, by_id = _results(_snapshot(None, _ib(threshold=threshold)))
    assert by_id["perf.ib_write_bw"]["status"] == status


def test_a_large_message_failure_within_a_tolerance_says_so():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 80.0)], avg=40.0)
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)]), tolerance=0.1))
    assert by_id["perf.nccl_large_busbw"]["status"] == "failed"
    assert "below the 100.0 GB/s large-message floor (10% tolerance)" in by_id["perf.nccl_large_busbw"]["message"]


def test_the_in_place_bus_bandwidth_stands_in_when_out_of_place_is_n_a():
    table = _table([(2 ** 20, 40.0), (2 ** 30, 120.0)], avg=40.0)
    rows = table.splitlines()
    cells = rows[-4].split()
    cells[7] = "N/A"   # the out-of-place busbw of the 1G row
    rows[-4] = "  ".join(cells)
    output = _info("FasTrak") + "\n".join(rows) + "\n"
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
    assert by_id["perf.nccl_large_busbw"]["status"] == "passed", by_id["perf.nccl_large_busbw"]
    assert "1073741824 B bus bandwidth 120.0 GB/s" in by_id["perf.nccl_large_busbw"]["evidence"][-1]


def test_a_table_cut_before_its_average_line_is_other():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 120.0)], avg=40.0).split("# Avg bus", maxsplit=1)[0]
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
    assert by_id["perf.nccl_avg_busbw"]["status"] == "other"
    assert "truncated" in by_id["perf.nccl_avg_busbw"]["message"]


def test_the_transport_of_a_run_that_could_not_complete_is_other_with_its_message():
    runs = [dict(benchmark="all_gather", output=_info("GPUDirectTCPX_v7"), rc=None, error="exec timed out after 1200 s")]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    # its log shows which plugin NCCL loaded, so the transport is judged; its bandwidth is not
    assert by_id["perf.nccl_transport"]["status"] == "passed"
    assert by_id["perf.nccl_avg_busbw"]["status"] == "other"
    runs = [dict(benchmark="all_gather", output="", rc=None, error="exec timed out after 1200 s")]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    assert by_id["perf.nccl_transport"]["status"] == "other"
    assert "the run could not complete: exec timed out after 1200 s" in by_id["perf.nccl_transport"]["message"]


# ---- wrong verdicts a one-line slip would give: signals, values present but wrong, records left incomplete ----------

@pytest.mark.parametrize("rc", [-9, "-15", 137, "SIGKILL"])
def test_a_probe_killed_by_a_signal_is_other_even_with_its_output_complete(rc):
    # Python reports a child killed by a signal as a negative exit code, a shell as 128 + the signal; a record may
    # hold the signal's name: the table before the kill is complete, the run is not
    runs = [dict(benchmark="all_gather", output=_info("GPUDirectTCPX_v7") + GUIDE_TCPX, rc=rc, error="")]
    result, by_id = _results(_snapshot(_nccl("tcpx", runs), _ib(rc=rc)))
    for check_id in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw", "perf.ib_write_bw"):
        assert by_id[check_id]["status"] == "other", by_id[check_id]
        assert "exited with code %s" % rc in by_id[check_id]["message"], by_id[check_id]["message"]
    assert result["exit_status"] == 9


def test_a_record_without_an_exit_code_is_judged_by_its_complete_output():
    runs = [dict(benchmark="all_gather", output=_info("GPUDirectTCPX_v7") + GUIDE_TCPX, error="")]
    ib = _ib()
    del ib["rc"]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs), ib))
    assert [by_id[i]["status"] for i in PERF_IDS] == ["passed"] * 4


@pytest.mark.parametrize("threshold", [True, "eighty", ""])
def test_a_floor_that_is_not_a_number_is_other(threshold):
    _result, by_id = _results(_snapshot(None, _ib(threshold=threshold)))
    assert by_id["perf.ib_write_bw"]["status"] == "other"
    assert "no floor was recorded" in by_id["perf.ib_write_bw"]["message"]


def test_a_run_with_neither_output_nor_error_cannot_show_the_transport():
    runs = [dict(benchmark="all_gather", output="", rc=0, error="")]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    assert by_id["perf.nccl_transport"]["status"] == "other"
    assert "no 'NCCL INFO Using network' line" in by_id["perf.nccl_transport"]["message"]


def test_a_long_error_is_cut_at_300_characters_in_every_message():
    error = "e" * 299 + "XY" + " tail"
    cut, whole = "e" * 299 + "X", "e" * 299 + "XY"
    _result, by_id = _results(_snapshot(dict(error=error), dict(error=error)))
    for check_id in PERF_IDS:
        assert cut in by_id[check_id]["message"] and whole not in by_id[check_id]["message"], check_id
    runs = [dict(benchmark="all_gather", output="", rc=None, error=error)]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    for check_id in ("perf.nccl_avg_busbw", "perf.nccl_transport"):
        assert cut in by_id[check_id]["message"] and whole not in by_id[check_id]["message"], check_id


def test_the_tolerance_is_shown_as_a_whole_percentage():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 30.0)], avg=12.0)
    nccl = _nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])
    _result, by_id = _results(_snapshot(nccl, _ib(threshold=200.0), tolerance=0.6))
    assert "60% tolerance" in by_id["perf.nccl_avg_busbw"]["evidence"][0]
    assert "(60% tolerance)" in by_id["perf.nccl_large_busbw"]["message"]
    assert "60% tolerance" in by_id["perf.ib_write_bw"]["evidence"][0]


def test_the_ib_write_bw_evidence_falls_back_to_what_the_record_holds():
    ib = _ib()
    del ib["nodes"]
    _result, by_id = _results(_snapshot(None, ib))
    evidence = by_id["perf.ib_write_bw"]["evidence"][0]
    assert evidence.startswith("nodes ?, device ") and "(link 100.0 Gb/s)" in evidence, evidence


def test_the_last_table_of_a_run_is_the_one_judged():
    # a log that holds a retried run: the first table is the failed attempt, the last the run that counts
    slow = _table([(2 ** 20, 10.0), (2 ** 30, 50.0)], avg=20.0)
    fast = _table([(2 ** 20, 40.0), (2 ** 30, 120.0)], avg=40.0)
    for tables, status in (((slow, fast), "passed"), ((fast, slow), "failed")):
        output = _info("FasTrak") + "".join(tables)
        _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
        assert by_id["perf.nccl_avg_busbw"]["status"] == status, by_id["perf.nccl_avg_busbw"]
        assert by_id["perf.nccl_large_busbw"]["status"] == status, by_id["perf.nccl_large_busbw"]


def test_ib_write_bw_is_judged_by_its_average_not_its_peak():
    last = " 8388608    5000             92.39              92.39              0.001377"
    assert last in GUIDE_IB
    burst = GUIDE_IB.replace(last, " 8388608    5000             99.10              70.20              0.001377")
    _result, by_id = _results(_snapshot(None, _ib(output=burst)))
    check = by_id["perf.ib_write_bw"]
    assert check["status"] == "failed" and "BW average 70.2 Gb/s at 8388608 B is below the 80.0 Gb/s floor" in check["message"], check


def test_every_row_at_or_above_the_large_message_size_is_held_to_the_floor():
    # 1 GiB below the floor, 2 GiB above it: the run fails at 1 GiB
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 90.0), (2 ** 31, 120.0)], avg=40.0)
    _result, by_id = _results(_snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])))
    check = by_id["perf.nccl_large_busbw"]
    assert check["status"] == "failed" and "bus bandwidth 90.0 GB/s at 1073741824 B" in check["message"], check
    assert len([e for e in check["evidence"] if " B bus bandwidth " in e]) == 2


def test_the_transport_is_read_from_stderr_too():
    # launchers that keep NCCL's INFO lines on stderr: the table is on stdout, the plugin NCCL loaded on stderr
    runs = [dict(benchmark="all_gather", output=GUIDE_TCPX, stderr=_info("GPUDirectTCPX_v7"), rc=0, error="")]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    assert by_id["perf.nccl_transport"]["status"] == "passed", by_id["perf.nccl_transport"]
    assert "Using network GPUDirectTCPX_v7 (2 rank line(s))" in by_id["perf.nccl_transport"]["evidence"][0]


def test_the_ib_write_bw_evidence_names_the_device_the_output_shows():
    # the device asked for and the one ib_write_bw opened differ: the evidence shows what ran
    _result, by_id = _results(_snapshot(None, _ib(device="mlx5_1")))
    assert "device mlx5_0, transport IB" in by_id["perf.ib_write_bw"]["evidence"][0], by_id["perf.ib_write_bw"]["evidence"]


def test_an_unknown_nccl_profile_is_other_naming_the_profiles():
    _result, by_id = _results(_snapshot(_nccl("tcpz")))
    for check_id in ("perf.nccl_avg_busbw", "perf.nccl_large_busbw"):
        assert by_id[check_id]["status"] == "other"
        assert "performance.nccl.profile 'tcpz' is not a GPUDirect profile" in by_id[check_id]["message"], by_id[check_id]


# ------------------------------------------------------------------ a slow pair against each node's own loopback

LOOPBACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_perf", "fixtures", "nccl_loopback")
H100 = "NVIDIA-H100-80GB-HBM3"


def _loopback(**outputs):
    """The health phase's loopback section: node -> fixture name (h100x8_pass: 360 GB/s, h100x8_slow: 71.25 GB/s,
    h100x8_wrong: #wrong values), judged against a 300 GB/s floor."""
    nodes = {}
    for node, name in outputs.items():
        with open(os.path.join(LOOPBACK, name + ".txt"), encoding="utf-8") as handle:
            nodes[node.replace("_", "-")] = dict(model=H100, gpus=8, output=handle.read(), rc=0, error="")
    return dict(floors={H100: 300}, nodes=nodes)


def _slow_pair(loopback, **nccl):
    """The guide's A3 Mega table (22.45 GB/s average, below the 30 GB/s floor) between gpu-0 and gpu-1, with the health
    phase's loopback of those nodes."""
    section = dict(_nccl("tcpxo", [dict(benchmark="all_gather", output=_info("FasTrak") + GUIDE_TCPXO, rc=0)]), **nccl)
    snapshot = _snapshot(section)
    if loopback is not None:
        snapshot["health"] = dict(level=1, nccl_loopback=loopback)
    result = suite.validate(snapshot, phases=["health", "performance"], only=["health.nccl_loopback"] + PERF_IDS[:3])
    return result, dict((r["id"], r) for r in result["results"])


@pytest.mark.parametrize("bad", ["h100x8_slow", "h100x8_wrong"])
def test_a_slow_pair_with_a_bad_node_is_one_failure_naming_that_node(bad):
    result, by_id = _slow_pair(_loopback(gpu_0="h100x8_pass", gpu_1=bad))
    assert [r["id"] for r in result["results"] if r["status"] == "failed"] == ["health.nccl_loopback"]
    assert by_id["health.nccl_loopback"]["message"].startswith("gpu-1: ")
    pair = by_id["perf.nccl_avg_busbw"]
    assert pair["status"] == "skipped", pair
    assert pair["message"].startswith("skipped: the pair gpu-0 / gpu-1 is below its floor (all_gather: average bus bandwidth 22.45 GB/s "
                                      "is below the 30 GB/s threshold), explained by gpu-1 failing its own NCCL loopback (gpu-1: ")
    assert pair["message"].endswith("the link between the pair is judged once gpu-1 passes its loopback")
    assert "gpu-0" not in pair["message"].split("explained by")[1]
    assert by_id["perf.nccl_large_busbw"]["status"] == "passed"      # 122.14 GB/s at 1G: the pair is not slow there
    assert by_id["perf.nccl_transport"]["status"] == "passed"
    assert result["exit_status"] == 8


def test_a_slow_pair_of_two_good_nodes_fails_on_the_link_between_them():
    result, by_id = _slow_pair(_loopback(gpu_0="h100x8_pass", gpu_1="h100x8_pass"))
    assert [r["id"] for r in result["results"] if r["status"] == "failed"] == ["perf.nccl_avg_busbw"]
    pair = by_id["perf.nccl_avg_busbw"]
    assert pair["message"] == ("all_gather: average bus bandwidth 22.45 GB/s is below the 30 GB/s threshold - both nodes pass their own "
                               "NCCL loopback, so the link between gpu-0 and gpu-1 is slow")
    assert pair["fix"].startswith("both nodes reach their floor on their own (the health phase's NCCL loopback), so the path between "
                                  "them is slow")
    assert "gpudirect_installer" not in pair["fix"]
    assert pair["evidence"][-1] == ("each node passes its own NCCL loopback: gpu-0 (NVIDIA-H100-80GB-HBM3, 8 GPUs): all_reduce average bus "
                                    "bandwidth 360.0 GB/s, floor 300 GB/s, gpu-1 (NVIDIA-H100-80GB-HBM3, 8 GPUs): all_reduce average "
                                    "bus bandwidth 360.0 GB/s, floor 300 GB/s")


def test_without_a_loopback_the_pair_fails_as_before_and_says_what_would_attribute_it():
    _result, by_id = _slow_pair(None)
    pair = by_id["perf.nccl_avg_busbw"]
    assert pair["status"] == "failed"
    assert pair["message"] == "all_gather: average bus bandwidth 22.45 GB/s is below the 30 GB/s threshold"
    assert pair["fix"].startswith("role gpu_ops.cluster.gpudirect_installer")
    assert pair["evidence"][-1].startswith("not attributed: the snapshot holds no NCCL loopback of the pair's nodes (validate_phases health")
    for section in (dict(skipped="validate_health_probe_image is empty"), dict(error="forbidden")):
        _result, by_id = _slow_pair(section)
        assert by_id["perf.nccl_avg_busbw"]["status"] == "failed"
        assert by_id["perf.nccl_avg_busbw"]["evidence"][-1].startswith("not attributed: the snapshot holds no NCCL loopback")


def test_a_pair_node_whose_loopback_cannot_decide_leaves_the_pair_failing_with_the_reason():
    loopback = _loopback(gpu_0="h100x8_pass", gpu_1="h100x8_pass")
    loopback["nodes"]["gpu-1"]["rc"] = 137
    _result, by_id = _slow_pair(loopback)
    pair = by_id["perf.nccl_avg_busbw"]
    assert pair["status"] == "failed" and pair["fix"].startswith("role gpu_ops.cluster.gpudirect_installer")
    assert "link between" not in pair["message"]
    assert pair["evidence"][-1] == ("not attributed to a node or the link: gpu-1: all_reduce_perf exited with code 137 after a "
                                    "complete table")
    # a pair node the health phase did not probe
    _result, by_id = _slow_pair(_loopback(gpu_0="h100x8_pass", gpu_7="h100x8_pass"))
    assert by_id["perf.nccl_avg_busbw"]["status"] == "failed"
    assert by_id["perf.nccl_avg_busbw"]["evidence"][-1] == "not attributed to a node or the link: gpu-1: no loopback recorded"
    # no recorded pair at all
    _result, by_id = _slow_pair(_loopback(gpu_0="h100x8_pass", gpu_1="h100x8_pass"), nodes=[])
    assert by_id["perf.nccl_avg_busbw"]["status"] == "failed"
    assert by_id["perf.nccl_avg_busbw"]["evidence"][-1] == "not attributed to a node or the link: the pair's nodes are not recorded"


def test_a_pair_that_meets_its_floor_passes_even_beside_a_bad_node():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 120.0)], avg=31.0)
    snapshot = _snapshot(_nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)]))
    snapshot["health"] = dict(level=1, nccl_loopback=_loopback(gpu_0="h100x8_pass", gpu_1="h100x8_slow"))
    by_id = dict((r["id"], r) for r in suite.validate(snapshot, phases=["performance"])["results"])
    assert by_id["perf.nccl_avg_busbw"]["status"] == "passed" and by_id["perf.nccl_large_busbw"]["status"] == "passed"


def test_the_pair_s_nodes_are_matched_by_node_name_then_by_host_name():
    # the pods' nodes (node_names) first; without them the ranks' host names, matched on the node name's first label
    fqdn = _loopback(gpu_0="h100x8_pass", gpu_1="h100x8_slow")
    fqdn["nodes"] = dict(("%s.c.project.internal" % k, v) for k, v in fqdn["nodes"].items())
    _result, by_id = _slow_pair(fqdn)
    assert by_id["perf.nccl_avg_busbw"]["status"] == "skipped"
    assert "explained by gpu-1 failing" in by_id["perf.nccl_avg_busbw"]["message"]
    named = _loopback(node_a="h100x8_pass", node_b="h100x8_slow")
    _result, by_id = _slow_pair(named, node_names=["node-a", "node-b"])
    assert "the pair node-a / node-b is below its floor" in by_id["perf.nccl_avg_busbw"]["message"]
    assert "explained by node-b failing" in by_id["perf.nccl_avg_busbw"]["message"]
    # two nodes with the same first label: no guess
    twice = _loopback(gpu_0="h100x8_pass", gpu_1="h100x8_slow")
    twice["nodes"] = {"gpu-0.a": twice["nodes"]["gpu-0"], "gpu-1.a": twice["nodes"]["gpu-1"], "gpu-1.b": twice["nodes"]["gpu-1"]}
    _result, by_id = _slow_pair(twice)
    assert by_id["perf.nccl_avg_busbw"]["status"] == "failed"
    assert by_id["perf.nccl_avg_busbw"]["evidence"][-1] == "not attributed to a node or the link: gpu-1: no loopback recorded"


def test_the_large_message_floor_is_attributed_too():
    output = _info("FasTrak") + _table([(2 ** 20, 40.0), (2 ** 30, 60.0)], avg=31.0)
    section = _nccl("tcpxo", [dict(benchmark="all_reduce", output=output, rc=0)])
    for loopback, status in ((_loopback(gpu_0="h100x8_slow", gpu_1="h100x8_pass"), "skipped"),
                             (_loopback(gpu_0="h100x8_pass", gpu_1="h100x8_pass"), "failed")):
        snapshot = _snapshot(copy.deepcopy(section))
        snapshot["health"] = dict(level=1, nccl_loopback=loopback)
        check = dict((r["id"], r) for r in suite.validate(snapshot, phases=["performance"])["results"])["perf.nccl_large_busbw"]
        assert check["status"] == status, check
        if status == "skipped":
            assert "explained by gpu-0 failing its own NCCL loopback" in check["message"]
        else:
            assert check["message"].endswith("large-message floor - both nodes pass their own NCCL loopback, so the link between gpu-0 "
                                             "and gpu-1 is slow")
            assert check["fix"].startswith("both nodes reach their floor on their own")


def test_a_slow_pair_over_a_socket_fallback_is_one_failure_the_transport():
    # NCCL fell back to its own sockets: the guide's TCPX table slowed to 2.1 GB/s average, 3.10 GB/s at 512M
    log = _info("Socket") + GUIDE_TCPX.replace(" 70.87 ", " 3.10 ").replace("29.8293", "2.1")
    snapshot = _snapshot(_nccl("tcpx", [dict(benchmark="all_gather", output=log, rc=0)]))
    snapshot["health"] = dict(level=1, nccl_loopback=_loopback(gpu_0="h100x8_pass", gpu_1="h100x8_pass"))
    result, by_id = _results(snapshot)
    assert [r["id"] for r in result["results"] if r["status"] == "failed"] == ["perf.nccl_transport"]
    for check_id, below in (("perf.nccl_avg_busbw", "average bus bandwidth 2.1 GB/s is below the 25 GB/s threshold"),
                            ("perf.nccl_large_busbw", "bus bandwidth 3.1 GB/s at 536870912 B is below the 50.0 GB/s large-message floor")):
        check = by_id[check_id]
        assert check["status"] == "skipped", check
        assert check["message"] == ("skipped: the pair is below its floor (all_gather: %s), explained by the transport NCCL used "
                                    "(all_gather: NCCL used Socket instead of the GPUDirectTCPX plugin (a fallback of NCCL itself); "
                                    "perf.nccl_transport names the cause): the bandwidth is judged once NCCL runs over the profile's "
                                    "plugin" % below)
    # a log without the transport lines attributes nothing to the transport: the bandwidth failure stands
    runs = [dict(benchmark="all_gather", output=GUIDE_TCPX.replace("29.8293", "2.1"), rc=0)]
    _result, by_id = _results(_snapshot(_nccl("tcpx", runs)))
    assert by_id["perf.nccl_transport"]["status"] == "other" and by_id["perf.nccl_avg_busbw"]["status"] == "failed"
