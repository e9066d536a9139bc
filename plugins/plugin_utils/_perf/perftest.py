# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""perftest (``ib_write_bw``) output parsing and the RDMA bandwidth threshold of a host pair (role rdma_test).
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import OperatorInputError, require


# --------------------------------------------------------------------------------------------
# perftest (ib_write_bw) output
# --------------------------------------------------------------------------------------------

_PERFTEST_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]")
_PERFTEST_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*\Z")


def parse_ib_write_bw(text):
    """The result table of perftest ``ib_write_bw`` output: rows, unit, device, transport, peak/avg Gb/s.

    Bandwidths are reported in Gb/s whatever the unit of the table (MB/sec is converted: 1 MB/s =
    0.008 Gb/s in perftest's decimal units).
    """
    lines = str(text or "").replace("\t", " ").splitlines()
    unit, rows, info = None, [], {}
    for line in lines:
        header = _PERFTEST_HEADER.search(line)
        if header:
            unit = header.group(2)
            continue
        for key, label in (("device", "Device"), ("transport", "Transport type"), ("link_type", "Link type")):
            match = re.search(r"%s\s*:\s*(\S+)" % re.escape(label), line)
            if match and key not in info:
                info[key] = match.group(1)
        if unit:
            row = _PERFTEST_ROW.match(line)
            if row:
                factor = 1.0 if unit == "Gb" else 0.008
                rows.append({"bytes": int(row.group(1)), "iterations": int(row.group(2)),
                             "bw_peak_gbps": round(float(row.group(3)) * factor, 4),
                             "bw_average_gbps": round(float(row.group(4)) * factor, 4),
                             "msg_rate_mpps": float(row.group(5))})
    if unit is None or not rows:
        raise OperatorInputError("no ib_write_bw result table (#bytes ... BW average[...]) in the output")
    averages = [r["bw_average_gbps"] for r in rows]
    return dict(info, unit="%s/sec" % unit, rows=rows, bw_average_gbps=rows[-1]["bw_average_gbps"],
                max_bw_average_gbps=max(averages))


def rdma_threshold(hosts, device=None, fraction=0.8, threshold=None):
    """(threshold Gb/s, link rate Gb/s or None, device) for the RDMA test from the hosts' RDMA devices."""
    if threshold is not None:
        require(float(threshold) > 0, "threshold_gbps must be positive, got %r", threshold)
        return float(threshold), None, device
    require(0 < float(fraction) <= 1, "threshold_fraction must be in (0, 1], got %r", fraction)
    rates, chosen = [], device
    for host, facts in sorted((hosts or {}).items()):
        devices = [d for d in (facts or {}).get("rdma_devices") or [] if device in (None, d.get("name"))]
        active = [d for d in devices if str(d.get("state", "")).upper() in ("ACTIVE", "UP", "PORT_ACTIVE")] or devices
        require(bool(active), "rdma device: %s has no RDMA device%s in its facts", host,
                " named %s" % device if device else "")
        chosen = chosen or active[0].get("name")
        if active[0].get("rate_gbps"):
            rates.append(float(active[0]["rate_gbps"]))
    require(bool(rates), "threshold_gbps: no link rate in the hosts' RDMA device facts; set threshold_gbps")
    link = min(rates)
    return round(link * float(fraction), 3), link, chosen
