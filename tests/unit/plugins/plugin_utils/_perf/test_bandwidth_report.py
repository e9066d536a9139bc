# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bandwidth reports (plugins/plugin_utils/_perf/bandwidth_report.py): the SVG chart, the tables, the nccl and ib_write_bw reports."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import bandwidth_report as report
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import nccl_tests as _nccl_tests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import perftest as _perftest

SVG = "{http://www.w3.org/2000/svg}"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "module_utils", "fixtures")


def _tree(text):
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg ')
    return ET.fromstring(text.encode("utf-8"))


def _circles(root):
    return [(float(c.get("cx")), float(c.get("cy")), c.find(SVG + "title").text) for c in root.iter(SVG + "circle")]


def _line(root, kind):
    found = [e for e in root.iter(SVG + "line") if e.get("class") == kind]
    return found


def _texts(root):
    return ["".join(t.itertext()) for t in root.iter(SVG + "text")]


def test_points_scale_log2_in_x_and_linearly_in_y():
    points = [(1 << 20, 10.0), (1 << 21, 20.0), (1 << 23, 40.0)]
    root = _tree(report.svg_chart([{"name": "busbw", "points": points}], threshold=30))
    circles = _circles(root)
    assert len(circles) == 3
    (x1, y1, _t1), (x2, y2, _t2), (x3, y3, _t3) = circles
    # log2: 1M -> 2M is one step, 2M -> 8M two steps
    assert x2 - x1 == pytest.approx((x3 - x2) / 2, abs=0.2)
    # linear from 0: the axis is at value 0, 20 is twice as high above it as 10
    [x_axis] = [e for e in _line(root, "axis") if e.get("y1") == e.get("y2")]
    bottom = float(x_axis.get("y1"))
    assert bottom - y2 == pytest.approx(2 * (bottom - y1), abs=0.2)
    assert bottom - y3 == pytest.approx(4 * (bottom - y1), abs=0.2)
    # every point says its numbers
    assert circles[2][2] == "busbw: 8388608 B (8M), 40 GB/s"


def test_the_threshold_line_sits_at_its_value():
    root = _tree(report.svg_chart([{"name": "s", "points": [(1024, 10.0), (4096, 40.0)]}], threshold=20, average=25))
    [threshold] = _line(root, "threshold")
    [average] = _line(root, "average")
    assert threshold.get("y1") == threshold.get("y2") and threshold.get("stroke-dasharray")
    [x_axis] = [e for e in _line(root, "axis") if e.get("y1") == e.get("y2")]
    bottom = float(x_axis.get("y1"))
    low = [c for c in _circles(root) if "10 GB/s" in c[2]][0]
    assert bottom - float(threshold.get("y1")) == pytest.approx(2 * (bottom - low[1]), abs=0.2)
    assert float(threshold.get("y1")) > float(average.get("y1"))  # 20 is lower on the page than 25
    assert "threshold 20 GB/s" in _texts(root) and "average 25 GB/s" in _texts(root)


def test_a_threshold_above_every_point_stays_on_the_chart():
    root = _tree(report.svg_chart([{"name": "s", "points": [(1024, 1.0), (2048, 2.0)]}], threshold=100))
    [threshold] = _line(root, "threshold")
    assert float(threshold.get("y1")) >= report.MARGIN["top"]
    assert all(float(c[1]) > float(threshold.get("y1")) for c in _circles(root))


def test_axes_have_labels_with_units_and_size_ticks():
    root = _tree(report.svg_chart([{"name": "s", "points": [(1 << 20, 1.0), (1 << 30, 2.0)]}], unit="GB/s",
                                  y_label="bus bandwidth"))
    texts = _texts(root)
    assert "message size (bytes, log2 scale)" in texts and "bus bandwidth (GB/s)" in texts
    assert "1M" in texts and "1G" in texts


def test_empty_input_is_a_valid_chart_saying_no_data():
    for series in ([], [{"name": "s", "points": []}], None):
        root = _tree(report.svg_chart(series, threshold=30))
        assert _circles(root) == [] and "no data" in _texts(root)
        assert _line(root, "threshold")


def test_a_single_point_is_centred_and_drawn_without_a_line():
    root = _tree(report.svg_chart([{"name": "s", "points": [(65536, 5.0)]}]))
    [(x, _y, _t)] = _circles(root)
    assert x == pytest.approx((report.MARGIN["left"] + report.WIDTH - report.MARGIN["right"]) / 2.0, abs=0.2)
    assert list(root.iter(SVG + "polyline")) == []


@pytest.mark.parametrize("points, kept", [
    ([(1, 0.0), (2, 0.0)], 2),                              # zero bandwidth everywhere, 1-byte messages
    ([(0, 1.0), (-8, 1.0), (8, 1.0)], 1),                   # sizes that have no log2
    ([(8, None), (16, float("nan")), (32, float("inf")), (64, -1.0), (128, 1.0)], 1),  # N/A, non-finite, negative
    ([(1 << 40, 1e6), (1 << 41, 2e6)], 2),                  # huge values
])
def test_boundary_values_stay_inside_the_plot(points, kept):
    root = _tree(report.svg_chart([{"name": "s", "points": points}], threshold=0))
    circles = _circles(root)
    assert len(circles) == kept
    for x, y, _t in circles:
        assert report.MARGIN["left"] <= x <= report.WIDTH - report.MARGIN["right"]
        assert report.MARGIN["top"] <= y <= report.HEIGHT - report.MARGIN["bottom"]
        assert math.isfinite(x) and math.isfinite(y)


def test_names_are_escaped():
    root = _tree(report.svg_chart([{"name": "a<b & \"c\"", "points": [(8, 1.0)]}], title="<x>"))
    assert "a<b & \"c\"" in _texts(root) and "<x>" in _texts(root)


@pytest.mark.parametrize("span, step", [(100, 20), (30, 10), (25, 5), (1, 0.2), (0, 1.0), (7.5, 2)])
def test_nice_step(span, step):
    assert report.nice_step(span) == pytest.approx(step)


def test_human_bytes():
    assert [report.human_bytes(v) for v in (8, 1024, 1536, 1 << 20, 3 << 30, 1 << 40)] == ["8", "1K", "1.5K", "1M", "3G", "1T"]


def test_tables_align_and_escape():
    assert report.text_table(["a", "bytes"], [["x", 1048576], ["yy", None]]) == [
        " a    bytes", " x  1048576", "yy        -"]
    assert report.markdown_table(["a|b", "n"], [["c", 1.5]]) == ["| a\\|b | n |", "| ---: | ---: |", "| c | 1.5 |"]


def _nccl_result(name):
    with open(os.path.join(FIXTURES, "nccl_tests", name), encoding="utf-8") as handle:
        run = _nccl_tests.parse(handle.read())
    verdict = _nccl_tests.verdict(run, threshold=30)
    return dict(verdict, table=run["rows"], hosts=run["hosts"], benchmark="all_gather")


def test_the_nccl_report_shows_every_size_the_average_threshold_verdict_and_nodes():
    result = _nccl_result("guide_tcpxo_all_gather.txt")
    out = report.nccl_report(result, "all_gather", nodes=["gpu-a", "gpu-b"])
    lines = out["lines"]
    assert lines[0] == "nccl-tests all_gather on gpu-a + gpu-b"
    assert len([line for line in lines if line.strip().split()[0][-1:] in "KMG" and line.strip()[0].isdigit()]) == 11
    assert any(line.split()[:2] == ["1G", "1073741824"] and "122.14" in line and "120.19" in line for line in lines)
    assert "average bus bandwidth: 22.45 GB/s, threshold 30 GB/s: FAILED" in lines
    assert "nodes: gpu-a, gpu-b" in lines
    assert out["markdown"].startswith("# nccl-tests all_gather on gpu-a + gpu-b\n")
    assert "](all_gather.svg)" in out["markdown"] and "| 1G | 1073741824 | 130.28 | 122.14 | 128.2 | 120.19 |" in out["markdown"]
    root = _tree(out["svg"])
    assert len(_circles(root)) == 22  # out-of-place and in-place busbw of 11 sizes
    assert "threshold 30 GB/s" in _texts(root)


def test_the_ib_write_bw_report():
    with open(os.path.join(FIXTURES, "perftest", "guide_ib_write_bw_dmabuf.txt"), encoding="utf-8") as handle:
        parsed = _perftest.parse_ib_write_bw(handle.read())
    result = dict(rows=parsed["rows"], bw_average_gbps=parsed["bw_average_gbps"], threshold_gbps=80.0, passed=True,
                  nodes=["n1", "n2"], device="mlx5_0", mode="dmabuf")
    out = report.ib_write_bw_report(result)
    assert "BW average of the largest message: %s Gb/s, threshold 80 Gb/s: PASSED" % report._number(parsed["bw_average_gbps"]) in out["lines"]
    assert "nodes: n1 -> n2 (server -> client)" in out["lines"]
    assert len(_circles(_tree(out["svg"]))) == 2 * len(parsed["rows"])
    assert "](ib_write_bw.svg)" in out["markdown"]
