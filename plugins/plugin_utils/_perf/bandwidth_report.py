# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Bandwidth reports of the fabric tests (roles nccl_test and rdma_test): a text table for the play's
output, a Markdown table and a hand-written SVG chart of bandwidth against message size.

The chart has a log2 message-size axis, a linear bandwidth axis from 0, one line per series, a dashed
threshold line and a dotted average line. It is plain SVG 1.1 text (no dependency); every point carries
a ``<title>`` with its values, so a person hovering it in a browser reads the number.
"""

from __future__ import annotations

import math

from xml.sax.saxutils import escape, quoteattr

WIDTH = 720
HEIGHT = 420
MARGIN = dict(left=72, right=24, top=44, bottom=64)
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
_UNITS = ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))


def human_bytes(size):
    """1048576 -> '1M', 1536 -> '1.5K', 8 -> '8' (binary units, as nccl-tests' -b/-e read them)."""
    size = int(size)
    for factor, suffix in _UNITS:
        if size >= factor:
            value = size / float(factor)
            return ("%d%s" % (value, suffix)) if value.is_integer() else ("%.3g%s" % (value, suffix))
    return str(size)


def _number(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return ("%.2f" % value).rstrip("0").rstrip(".") if abs(value) < 1e6 else "%.4g" % value
    return str(value)


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def nice_step(span, ticks=5):
    """A 1-2-5 step that cuts ``span`` into about ``ticks`` intervals."""
    if not span > 0:
        return 1.0
    raw = span / float(ticks)
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


class Scale:
    """Data to pixel coordinates: log2 x (bytes), linear y from 0."""

    def __init__(self, xs, ys, width=WIDTH, height=HEIGHT):
        logs = [math.log2(x) for x in xs]
        low, high = (min(logs), max(logs)) if logs else (10.0, 30.0)
        if high - low < 1:
            low, high = low - 1, high + 1
        self.x_low, self.x_high = math.floor(low), math.ceil(high)
        top = max([y for y in ys if y > 0] or [1.0])
        self.y_step = nice_step(top)
        self.y_high = self.y_step * math.ceil(top * 1.05 / self.y_step)
        self.left, self.right = MARGIN["left"], width - MARGIN["right"]
        self.top, self.bottom = MARGIN["top"], height - MARGIN["bottom"]

    def x(self, size):
        return self.left + (math.log2(size) - self.x_low) / float(self.x_high - self.x_low) * (self.right - self.left)

    def y(self, value):
        return self.bottom - min(max(value, 0.0), self.y_high) / self.y_high * (self.bottom - self.top)

    def x_ticks(self):
        count = self.x_high - self.x_low
        every = max(1, int(math.ceil(count / 12.0)))
        return [2 ** e for e in range(self.x_low, self.x_high + 1) if (e - self.x_low) % every == 0]

    def y_ticks(self):
        steps = int(round(self.y_high / self.y_step))
        return [self.y_step * i for i in range(steps + 1)]


def _points(points):
    """The plottable points of a series: positive size, finite value >= 0, sorted by size."""
    kept = []
    for size, value in points or []:
        if _finite(size) and size > 0 and _finite(value) and value >= 0:
            kept.append((size, float(value)))
    return sorted(kept)


def _f(value):
    return "%.1f" % value


def svg_chart(series, threshold=None, average=None, title="", y_label="bandwidth", unit="GB/s",
              x_label="message size (bytes, log2 scale)", width=WIDTH, height=HEIGHT):
    """An SVG document (text) of ``series`` ([{name, points: [(bytes, value)]}]) with a threshold line."""
    series = [dict(name=str(s.get("name") or "series %d" % (i + 1)), points=_points(s.get("points")))
              for i, s in enumerate(series or [])]
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] for s in series for p in s["points"]] + [v for v in (threshold, average) if _finite(v)]
    scale = Scale(xs, ys, width, height)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="12">' % (width, height, width, height),
           '<title>%s</title>' % escape(title or y_label),
           '<rect x="0" y="0" width="%d" height="%d" fill="white"/>' % (width, height),
           '<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>' % (scale.left, escape(title))]
    # grid and axes
    for tick in scale.y_ticks():
        y = scale.y(tick)
        out.append('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>' % (
            _f(scale.left), _f(y), _f(scale.right), _f(y)))
        out.append('<text x="%s" y="%s" text-anchor="end">%s</text>' % (_f(scale.left - 6), _f(y + 4), escape(_number(tick))))
    for tick in scale.x_ticks():
        x = scale.x(tick)
        out.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#999"/>' % (_f(x), _f(scale.bottom), _f(x), _f(scale.bottom + 5)))
        out.append('<text x="%s" y="%s" text-anchor="middle">%s</text>' % (_f(x), _f(scale.bottom + 18), escape(human_bytes(tick))))
    out.append('<line class="axis" x1="%s" y1="%s" x2="%s" y2="%s" stroke="black"/>' % (
        _f(scale.left), _f(scale.bottom), _f(scale.right), _f(scale.bottom)))
    out.append('<line class="axis" x1="%s" y1="%s" x2="%s" y2="%s" stroke="black"/>' % (
        _f(scale.left), _f(scale.top), _f(scale.left), _f(scale.bottom)))
    out.append('<text class="x-label" x="%s" y="%s" text-anchor="middle">%s</text>' % (
        _f((scale.left + scale.right) / 2.0), _f(height - 22), escape(x_label)))
    out.append('<text class="y-label" x="16" y="%s" text-anchor="middle" transform="rotate(-90 16 %s)">%s (%s)</text>' % (
        _f((scale.top + scale.bottom) / 2.0), _f((scale.top + scale.bottom) / 2.0), escape(y_label), escape(unit)))
    # reference lines
    for kind, value, style, color in (("threshold", threshold, 'stroke-dasharray="8 4"', "#d62728"),
                                      ("average", average, 'stroke-dasharray="2 3"', "#555")):
        if not _finite(value):
            continue
        y = scale.y(float(value))
        out.append('<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" %s/>' % (
            kind, _f(scale.left), _f(y), _f(scale.right), _f(y), color, style))
        out.append('<text class="%s-label" x="%s" y="%s" text-anchor="end" fill="%s">%s %s %s</text>' % (
            kind, _f(scale.right - 4), _f(y - 5), color, kind, escape(_number(float(value))), escape(unit)))
    # series
    for index, item in enumerate(series):
        color = COLORS[index % len(COLORS)]
        coords = [(scale.x(size), scale.y(value), size, value) for size, value in item["points"]]
        out.append('<g class="series" data-name=%s>' % quoteattr(item["name"]))
        if len(coords) > 1:
            out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (
                color, " ".join("%s,%s" % (_f(x), _f(y)) for x, y, _s, _v in coords)))
        for x, y, size, value in coords:
            out.append('<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s: %s B (%s), %s %s</title></circle>' % (
                _f(x), _f(y), color, escape(item["name"]), size, human_bytes(size), escape(_number(value)), escape(unit)))
        out.append('</g>')
        legend_y = scale.top + 4 + 16 * index
        out.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>' % (
            _f(scale.left + 10), _f(legend_y), _f(scale.left + 30), _f(legend_y), color))
        out.append('<text x="%s" y="%s">%s</text>' % (_f(scale.left + 36), _f(legend_y + 4), escape(item["name"])))
    if not xs:
        out.append('<text class="no-data" x="%s" y="%s" text-anchor="middle">no data</text>' % (
            _f((scale.left + scale.right) / 2.0), _f((scale.top + scale.bottom) / 2.0)))
    out.append('</svg>')
    return "\n".join(out) + "\n"


def text_table(headers, rows):
    """Lines of a fixed-width table (right-aligned cells)."""
    cells = [[str(h) for h in headers]] + [[_number(c) if not isinstance(c, str) else c for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]


def markdown_table(headers, rows):
    """Lines of a Markdown table (numbers right-aligned)."""
    def cell(value):
        return (_number(value) if not isinstance(value, str) else value).replace("|", "\\|")
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join(" ---: " for _h in headers) + "|"]
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return lines


def _verdict_line(passed, average, threshold, unit, what):
    line = "%s: %s %s, threshold %s %s: %s" % (
        what, _number(average), unit if average is not None else "", _number(threshold),
        unit if threshold is not None else "", "PASSED" if passed else "FAILED")
    return " ".join(line.split())


def _report(title, headers, rows, summary, chart):
    lines = [title] + text_table(headers, rows) + summary
    markdown = ["# " + title, ""] + markdown_table(headers, rows) + [""] + ["- " + s for s in summary] + [
        "", "![%s](%s)" % (chart["alt"], chart["file"]), ""]
    return dict(lines=lines, markdown="\n".join(markdown), svg=chart["svg"])


def nccl_report(result, name, nodes=None, chart_file=None):
    """Report of one nccl-tests benchmark result of role nccl_test (table rows of nccl_tests_parse)."""
    table = result.get("table") or []
    nodes = list(nodes if nodes is not None else result.get("hosts") or [])
    headers = ["size", "bytes", "out-of-place algbw", "out-of-place busbw", "in-place algbw", "in-place busbw"]
    rows = []
    for row in table:
        oop, inp = row.get("out_of_place") or {}, row.get("in_place") or {}
        rows.append([human_bytes(row["size"]), row["size"], oop.get("algbw"), oop.get("busbw"), inp.get("algbw"), inp.get("busbw")])
    passed = bool(result.get("passed"))
    summary = [_verdict_line(passed, result.get("avg_bus_bandwidth"), result.get("threshold"), "GB/s", "average bus bandwidth"),
               "nodes: %s" % (", ".join(nodes) or "unknown"), "bandwidths in GB/s"]
    summary += ["reason: %s" % r for r in result.get("reasons") or []]
    series = [dict(name=placement.replace("_", "-") + " busbw",
                   points=[(row["size"], (row.get(placement) or {}).get("busbw")) for row in table])
              for placement in ("out_of_place", "in_place")]
    title = "nccl-tests %s on %s" % (name, " + ".join(nodes) or "unknown nodes")
    svg = svg_chart(series, threshold=result.get("threshold"), average=result.get("avg_bus_bandwidth"), title=title,
                    y_label="bus bandwidth", unit="GB/s")
    return _report(title, headers, rows, summary, dict(svg=svg, file=chart_file or name + ".svg", alt=title))


def ib_write_bw_report(result, name="ib_write_bw", chart_file=None):
    """Report of role rdma_test's result (rows of ib_write_bw_parse, bandwidths in Gb/s)."""
    rows_in = result.get("rows") or []
    nodes = list(result.get("nodes") or [])
    headers = ["size", "bytes", "iterations", "BW peak", "BW average"]
    rows = [[human_bytes(r["bytes"]), r["bytes"], r.get("iterations"), r.get("bw_peak_gbps"), r.get("bw_average_gbps")]
            for r in rows_in]
    summary = [_verdict_line(bool(result.get("passed")), result.get("bw_average_gbps"), result.get("threshold_gbps"), "Gb/s",
                             "BW average of the largest message"),
               "nodes: %s (server -> client)" % (" -> ".join(nodes) or "unknown"),
               "device %s, mode %s, bandwidths in Gb/s" % (result.get("device") or "unknown", result.get("mode") or "unknown")]
    title = "ib_write_bw %s" % (" -> ".join(nodes) or "unknown nodes")
    svg = svg_chart([dict(name="BW average", points=[(r["bytes"], r.get("bw_average_gbps")) for r in rows_in]),
                     dict(name="BW peak", points=[(r["bytes"], r.get("bw_peak_gbps")) for r in rows_in])],
                    threshold=result.get("threshold_gbps"), title=title, y_label="bandwidth", unit="Gb/s")
    return _report(title, headers, rows, summary, dict(svg=svg, file=chart_file or name + ".svg", alt=title))
