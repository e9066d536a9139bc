# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Parser and verdict for nccl-tests output (all_reduce_perf, all_gather_perf, ...).

Format (NVIDIA/nccl-tests src/common.cu, util.cu): a ``#`` header block (version, parameters,
``#  Rank  N Group G Pid P on HOST device D [BUS] NAME`` lines), a column header naming the
leading columns (size, count, type, and - depending on the version and the collective - redop
and root) followed by one group per placement (out-of-place, in-place) of time (or cputime),
algbw, busbw and #wrong (newer) or error (older); then one row per message size, and a footer:
``# Out of bounds values : N OK|FAILED``, ``# Avg bus bandwidth    : X [OK|FAILED]`` and, in newer
versions, ``# Collective test concluded: NAME``. Values may read ``N/A``. NCCL INFO/WARN lines,
mpirun ``--tag-output`` prefixes and other noise between the lines are ignored.

Bandwidths are GB/s, times microseconds. The average nccl-tests prints is the mean busbw over
every row and placement.

The network NCCL picked is read from its ``NCCL INFO Using network NAME`` lines (NCCL_DEBUG=INFO; NVIDIA/nccl
src/init.cc ``INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name)``, the same text from v2.19.3-1 to v2.30.7-1;
the built-in transports are named ``IB`` and ``Socket``, a plugin by its own name such as ``gIB``; NCCL_NET
selects a network by that name, case-insensitively, src/plugin/net.cc). A run that expected a plugin and shows
another network fell back to it.
"""

from __future__ import annotations

import re

_TAG_PREFIX = re.compile(r"^\s*\[\d+,\d+\]<(?:stdout|stderr)>:")
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\Z")
_RANK = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)\Z")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.I)
_AVG_BUS_BW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?", re.I)
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(.*)\Z")
_PARAMS = re.compile(r"^#\s*nThread\s")
_NCCL_VERSION = re.compile(r"^(?:#\s*)?NCCL version\s+(\S+)")
_USING_NETWORK = re.compile(r"\bNCCL INFO Using network (\S+)")

TIME_COLUMNS = ("time", "cputime")
PLACEMENTS = ("out_of_place", "in_place")


class NcclTestsParseError(ValueError):
    """Output that holds no nccl-tests result table, or one this parser cannot read."""


def _strip(line):
    line = _TAG_PREFIX.sub("", line.rstrip("\r\n"))
    return line.strip()


def _value(token):
    token = token.rstrip("*")  # values over the error threshold are flagged with an asterisk
    if token.upper() == "N/A":
        return None
    if _NUMBER.match(token):
        number = float(token)
        if number.is_integer() and "." not in token and "e" not in token.lower():
            return int(number)
        return number
    return token


def _column_name(token):
    return {"#wrong": "wrong"}.get(token, token)


def _parse_header(tokens):
    """(leading column names, [placement column names]) of a column header line's tokens."""
    leading = []
    groups = []
    for token in tokens:
        name = _column_name(token)
        if name in TIME_COLUMNS:
            groups.append([name])
        elif groups:
            groups[-1].append(name)
        else:
            leading.append(name)
    if leading[:2] != ["size", "count"] or not groups:
        raise NcclTestsParseError("not an nccl-tests column header: %s" % " ".join(tokens))
    return leading, groups


def _parse_params(line):
    params = {}
    text = line.lstrip("#").strip()
    for match in re.finditer(r"([A-Za-z][A-Za-z ]*?):?\s+(\d+)(?:\((\w+)\))?", text):
        key = match.group(1).strip().replace(" ", "_")
        params[key] = int(match.group(2))
    return params


def _new_run():
    return dict(
        collective=None,
        nccl_tests_version=None,
        nccl_version=None,
        params={},
        ranks=[],
        columns=[],
        rows=[],
        out_of_bounds=None,
        out_of_bounds_ok=None,
        avg_bus_bandwidth=None,
        avg_bus_bandwidth_status=None,
        concluded=False,
        unparsed_rows=[],
        networks=[],
    )


def _finish(run):
    busbws = []
    wrong = 0
    errors = []
    for row in run["rows"]:
        for placement in PLACEMENTS:
            cells = row.get(placement)
            if not cells:
                continue
            if isinstance(cells.get("busbw"), (int, float)):
                busbws.append(float(cells["busbw"]))
            if isinstance(cells.get("wrong"), int):
                wrong += cells["wrong"]
            if isinstance(cells.get("error"), (int, float)):
                errors.append(float(cells["error"]))
    run["wrong_total"] = wrong
    run["max_error"] = max(errors) if errors else None
    run["max_bus_bandwidth"] = max(busbws) if busbws else None
    run["avg_bus_bandwidth_computed"] = round(sum(busbws) / len(busbws), 4) if busbws else None
    run["hosts"] = sorted(set(r["host"] for r in run["ranks"]))
    run["networks"] = sorted(set(run["networks"]))
    if run["rows"]:
        run["min_size"] = run["rows"][0]["size"]
        run["max_size"] = run["rows"][-1]["size"]
    else:
        run["min_size"] = run["max_size"] = None
    return run


# Header lines that open the next run: seen after the current run's rows, they conclude it.
_NEXT_RUN_FACTS = (
    ("nccl_tests_version", _VERSION, lambda match: match.group(1)),
    ("collective", _STARTING, lambda match: match.group(1)),
    ("params", _PARAMS, lambda match: _parse_params(match.string)),
)


def _next_run_fact(line):
    """(key, value) of a header line that belongs to the next run, or None."""
    for key, pattern, value in _NEXT_RUN_FACTS:
        match = pattern.match(line)
        if match:
            return key, value(match)
    return None


def parse_all(text):
    """Every nccl-tests run in ``text`` (one per column header), in order."""
    if not isinstance(text, str):
        raise NcclTestsParseError("nccl-tests output must be text, not %s" % type(text).__name__)
    runs = []
    pending = _new_run()   # header facts seen before the next column header
    current = None
    header = None
    for raw in text.splitlines():
        line = _strip(raw)
        if not line:
            continue
        target = current if current is not None and not current["concluded"] else pending
        if line.startswith("#"):
            tokens = line.lstrip("#").split()
            if tokens[:2] == ["size", "count"]:
                leading, groups = _parse_header(tokens)
                if current is not None:
                    runs.append(_finish(current))
                current = pending
                pending = _new_run()
                header = (leading, groups)
                current["columns"] = list(leading) + [n for g in groups for n in g]
                continue
            fact = _next_run_fact(line)
            if fact:
                if current is not None and current["rows"]:
                    current["concluded"] = True
                    target = pending
                key, value = fact
                target[key] = value
                continue
            match = _RANK.match(line)
            if match:
                target["ranks"].append(dict(
                    rank=int(match.group(1)), group=int(match.group(2) or 0), pid=int(match.group(3)),
                    host=match.group(4), device=int(match.group(5)), bus_id=match.group(6),
                    name=match.group(7).strip()))
                continue
            match = _NCCL_VERSION.match(line)
            if match:
                target["nccl_version"] = match.group(1)
                continue
            if current is None:
                continue
            match = _OUT_OF_BOUNDS.match(line)
            if match:
                current["out_of_bounds"] = int(match.group(1))
                status = (match.group(2) or "").upper()
                current["out_of_bounds_ok"] = (status == "OK") if status else current["out_of_bounds"] == 0
                continue
            match = _AVG_BUS_BW.match(line)
            if match:
                value = _value(match.group(1))
                current["avg_bus_bandwidth"] = float(value) if isinstance(value, (int, float)) else None
                current["avg_bus_bandwidth_status"] = (match.group(2) or "").upper() or None
                continue
            match = _CONCLUDED.match(line)
            if match:
                current["collective"] = current["collective"] or match.group(1)
                current["concluded"] = True
            continue
        match = _NCCL_VERSION.match(line)
        if match:
            target["nccl_version"] = match.group(1)
            continue
        match = _USING_NETWORK.search(line)
        if match:
            target["networks"].append(match.group(1))
            continue
        if current is None or current["concluded"] or header is None:
            continue
        tokens = line.split()
        if not tokens or not tokens[0].isdigit():
            continue  # NCCL INFO lines, warnings, "Running: ..." and other noise
        row = _parse_row(tokens, header)
        if row is None:
            current["unparsed_rows"].append(line)
        else:
            current["rows"].append(row)
    if current is not None:
        runs.append(_finish(current))
    return runs


def _parse_row(tokens, header):
    leading, groups = header
    width = len(leading) + sum(len(g) for g in groups)
    if len(tokens) != width:
        return None
    row = {}
    position = 0
    for name in leading:
        row[name] = _value(tokens[position])
        position += 1
    if not isinstance(row.get("size"), int) or not isinstance(row.get("count"), int):
        return None
    placements = list(PLACEMENTS) + ["placement_%d" % i for i in range(2, len(groups))]
    for placement, group in zip(placements, groups):
        cells = {}
        for name in group:
            cells[name] = _value(tokens[position])
            position += 1
        row[placement] = cells
    return row


def parse(text):
    """The one nccl-tests run in ``text``; NcclTestsParseError when there is none or several."""
    runs = parse_all(text)
    if not runs:
        raise NcclTestsParseError("no nccl-tests result table found (no '#  size  count ...' header)")
    if len(runs) > 1:
        raise NcclTestsParseError("%d nccl-tests runs found; parse them with parse_all" % len(runs))
    return runs[0]


def networks_in(text):
    """The networks NCCL's ``NCCL INFO Using network NAME`` lines in ``text`` name, one per line (a log without a table too)."""
    return _USING_NETWORK.findall(str(text or ""))


def transport_reasons(run, network):
    """Why a run does not show that NCCL used ``network`` (a plugin such as gIB): [] when every ``Using network``
    line names it; a reason when another network (a fallback such as Socket) or none is shown."""
    seen = run.get("networks") or []
    if not seen:
        return ["no 'NCCL INFO Using network' line: the transport (%s expected) is not shown; run with NCCL_DEBUG=INFO" % network]
    other = [n for n in seen if n.lower() != network.lower()]
    if other:
        return ["NCCL used network %s, not %s: the %s plugin did not load and NCCL fell back" % (
            ", ".join(other), network, network)]
    return []


def verdict(run, threshold=None, min_rows=1, network=None):
    """Pass/fail of a parsed run: a complete table, no wrong values, no out-of-bounds values,
    when ``threshold`` (GB/s) is given an average bus bandwidth at or above it and, when ``network``
    (such as gIB) is given, NCCL's log showing it used that network and no other."""
    reasons = []
    if len(run.get("rows") or []) < min_rows:
        reasons.append("the table has %d rows, %d expected at least" % (len(run.get("rows") or []), min_rows))
    if run.get("unparsed_rows"):
        reasons.append("%d rows could not be read" % len(run["unparsed_rows"]))
    if run.get("wrong_total"):
        reasons.append("%d wrong values (#wrong)" % run["wrong_total"])
    if run.get("out_of_bounds") is None:
        reasons.append("no '# Out of bounds values' line: the run did not finish")
    elif run["out_of_bounds"] or run.get("out_of_bounds_ok") is False:
        reasons.append("%d out of bounds values" % run["out_of_bounds"])
    avg = run.get("avg_bus_bandwidth")
    if avg is None:
        reasons.append("no '# Avg bus bandwidth' line: the run did not finish")
    elif threshold is not None and avg < float(threshold):
        reasons.append("average bus bandwidth %.4g GB/s is below the %.4g GB/s threshold" % (avg, float(threshold)))
    if run.get("avg_bus_bandwidth_status") == "FAILED":
        reasons.append("nccl-tests reported the bandwidth check FAILED (NCCL_TESTS_MIN_BW)")
    if network is not None:
        reasons.extend(transport_reasons(run, network))
    return dict(
        passed=not reasons,
        reasons=reasons,
        avg_bus_bandwidth=avg,
        max_bus_bandwidth=run.get("max_bus_bandwidth"),
        threshold=float(threshold) if threshold is not None else None,
        collective=run.get("collective"),
        rows=len(run.get("rows") or []),
        networks=list(run.get("networks") or []),
        network=network,
    )
