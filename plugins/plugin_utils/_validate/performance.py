# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The performance checks: NCCL collectives between a node pair (average and large-message bus bandwidth
against the GPUDirect profile's floors, and the NCCL net plugin that really carried them) and ``ib_write_bw`` between
two bare-metal nodes, judged from the captured outputs of the probes (roles nccl_test and rdma_test run them; the
validate role records their output under the snapshot's ``performance``), so a captured log validates offline.

Snapshot shape (the validate role writes it; any key may be null when the probe did not run)::

    performance:
      tolerance: 0.05                  # a measured value passes at floor * (1 - tolerance) or above
      nccl: {profile, nodes, node_names, runs: [{benchmark, output, stderr, rc, error}], skipped, error}
      ib_write_bw: {output, stderr, rc, error, threshold_gbps, link_rate_gbps, device, nodes, skipped, error}

``nodes`` are the host names the ranks printed, ``node_names`` the Kubernetes nodes the test pods ran on: a pair below its
floor is read against each node's own NCCL loopback of the health phase (``health.nccl_loopback``, judged as
``_validate/health.py`` judges it), so a slow pair is attributed to the node that is bad, or to the link between two good
nodes. ``skipped`` (a reason) when the probe was not asked for; ``error`` when it could not run (its checks end as other).
The floors and plugin names are the catalogs' (``_catalog/gke_gpudirect.py`` NCCL_BANDWIDTH_THRESHOLDS,
NCCL_LARGE_MESSAGE_FLOORS and NCCL_NET_PLUGINS, ``_catalog/nccl.py``'s NCCL_NET of the RDMA profiles) and the rdma_test
role's threshold (from the hosts' link rate) - never copied here. An output that is
missing, truncated (no result table, no ``# Avg bus bandwidth`` line) or from a probe that errored or timed out is
``other``, never a pass.
"""

from __future__ import annotations

import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import nccl_tests as _nccl_tests
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._perf import perftest as _perftest
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import health as _health
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import Fault, Missing, Skip, described_by, probe_record

# each check's phase, title, reads, cause and fix: performance.yml beside this file
described = described_by(__file__)

_NET_SOCKET = re.compile(r"NET/Socket\b")


def _number(value):
    """A recorded number (templated facts may hold it as text); None when absent or not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value) if "." in str(value) else int(str(value).strip())
    except ValueError:
        return None


def _failed_rc(rc):
    """The exit code when it is one other than 0 (an absent one is not judged here)."""
    number = _number(rc)
    return rc if (number is not None and number != 0) or (number is None and rc not in (None, "", "None")) else None


def _tolerance(view):
    value = (view.need("performance") or {}).get("tolerance") or 0.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
        raise ValueError("performance.tolerance must be a fraction in [0, 1), got %r" % (value,))
    return float(value)


def _section(view, key):
    """The probe's record; Skip when it was not asked for (with the reason), Missing when it could not run."""
    if view.kind != "kubernetes":
        raise Skip("the target is a %s: the performance probes run on a Kubernetes cluster's nodes" % view.kind)
    return probe_record("performance", view.need("performance"), key)


def _nccl_runs(view):
    """[(benchmark, parsed run)] of the NCCL probe; Missing when a run errored, timed out or its output is truncated."""
    section = _section(view, "nccl")
    profile = section.get("profile")
    if profile not in gke_gpudirect.NCCL_BANDWIDTH_THRESHOLDS:
        raise ValueError("performance.nccl.profile %r is not a GPUDirect profile (%s)" % (
            profile, ", ".join(sorted(gke_gpudirect.NCCL_BANDWIDTH_THRESHOLDS))))
    runs = section.get("runs") or []
    if not runs:
        raise Missing("performance.nccl.runs", "the probe recorded no collective")
    judged = []
    for run in runs:
        name = run.get("benchmark") or "?"
        where = "performance.nccl.runs[%s]" % name
        if run.get("error"):
            raise Missing(where, "the run could not complete: %s" % " ".join(str(run["error"]).split())[:300])
        if not run.get("output"):
            raise Missing(where + ".output", "no output was captured")
        parsed = _nccl_tests.parse_all(run["output"])
        if not parsed:
            raise Missing(where + ".output", "no nccl-tests result table (exit code %s)" % run.get("rc"))
        last = parsed[-1]
        if last.get("out_of_bounds") is None or last.get("avg_bus_bandwidth") is None:
            raise Missing(where + ".output", "truncated: no '# Avg bus bandwidth' line (the run did not finish, exit code %s)"
                          % run.get("rc"))
        if _failed_rc(run.get("rc")) is not None:
            raise Missing(where, "nccl-tests exited with code %s" % run["rc"])
        judged.append((name, last))
    return profile, section, judged


def expected_network(profile):
    """The net plugin NCCL must show for a GPUDirect profile: its NCCL_NET (RDMA: gIB, _catalog/nccl.py), else the
    plugin name of gke_gpudirect.NCCL_NET_PLUGINS (TCPX, TCPXO); None for an unknown profile."""
    env = (nccl.NCCL_ENVS.get(profile) or {}).get("default") or {}
    return env.get("NCCL_NET") or gke_gpudirect.NCCL_NET_PLUGINS.get(profile)


def _floor(value, tolerance):
    return value * (1.0 - tolerance)


def _loopback_of(name, loopbacks):
    """The health phase's loopback record of a pair node: by its node name, else by a rank's host name (the first label of
    a node's name when the pod runs in the host's network), else None."""
    if name in loopbacks:
        return loopbacks[name]
    short = [node for node in loopbacks if node.split(".", maxsplit=1)[0] == str(name).split(".", maxsplit=1)[0]]
    return loopbacks[short[0]] if len(short) == 1 else None


def _attributed(view, section, evidence, problems):
    """The pair's verdict in the light of the transport NCCL used and of each pair node's own NCCL loopback (the health
    phase, run before the pair): a fallback to NCCL's own transport explains a slow pair (perf.nccl_transport names it);
    a node that fails its loopback explains a slow pair (the pair is not judged: health.nccl_loopback names the node,
    one fault is one failure); when both nodes pass theirs, the link between them is what is slow; otherwise the pair's
    failure stands, with what kept it from being attributed."""
    if not problems:
        return evidence, problems
    try:
        _evidence, fallback = nccl_transport(view)
    except (Missing, Skip, ValueError):
        fallback = []
    if fallback:
        raise Skip("the pair is below its floor (%s), explained by the transport NCCL used (%s; perf.nccl_transport names the "
                   "cause): the bandwidth is judged once NCCL runs over the profile's plugin" % ("; ".join(problems), "; ".join(fallback)))
    pair = [str(n) for n in section.get("node_names") or section.get("nodes") or []]
    loopbacks = _health.loopbacks(view.snapshot)
    if not loopbacks:
        return evidence + ["not attributed: the snapshot holds no NCCL loopback of the pair's nodes (validate_phases health "
                           "with performance runs one per node first and tells a bad node from a bad link)"], problems
    states = [(node, _loopback_of(node, loopbacks)) for node in pair]
    bad = [(node, state) for node, state in states if state is not None and state[0] == "failed"]
    if bad:
        raise Skip("the pair %s is below its floor (%s), explained by %s failing its own NCCL loopback (%s; health.nccl_loopback "
                   "names the cause): the link between the pair is judged once %s passes its loopback" % (
                       " / ".join(pair), "; ".join(problems), " and ".join(n for n, _s in bad),
                       "; ".join(t for _n, s in bad for t in s[2]), " and ".join(n for n, _s in bad)))
    if pair and all(state is not None and state[0] == "passed" for _node, state in states):
        own = ", ".join(state[1] for _node, state in states)
        return evidence + ["each node passes its own NCCL loopback: %s" % own], [
            Fault("%s - both nodes pass their own NCCL loopback, so the link between %s is slow" % (problem, " and ".join(pair)), "link")
            for problem in problems]
    why = ["%s: no loopback recorded" % node if state is None else "; ".join(state[2]) for node, state in states if state is None or state[0] != "passed"]
    return evidence + ["not attributed to a node or the link: %s" % ("; ".join(why) or "the pair's nodes are not recorded")], problems


@described("perf.nccl_avg_busbw")
def nccl_avg_busbw(view):
    profile, section, runs = _nccl_runs(view)
    tolerance = _tolerance(view)
    floor = gke_gpudirect.NCCL_BANDWIDTH_THRESHOLDS[profile]
    evidence, problems = [], []
    for name, run in runs:
        verdict = _nccl_tests.verdict(run, threshold=_floor(floor, tolerance))
        evidence.append("%s: average bus bandwidth %s GB/s over %d sizes, floor %s GB/s (%s) - %d%% tolerance" % (
            name, run["avg_bus_bandwidth"], verdict["rows"], floor, profile, round(tolerance * 100)))
        problems += ["%s: %s" % (name, reason) for reason in verdict["reasons"]]
    return _attributed(view, section, evidence, problems)


def _large_busbw(row):
    cells = row.get("out_of_place") or {}
    value = cells.get("busbw")
    if not isinstance(value, (int, float)):
        value = (row.get("in_place") or {}).get("busbw")
    return value if isinstance(value, (int, float)) else None


@described("perf.nccl_large_busbw")
def nccl_large_busbw(view):
    profile, section, runs = _nccl_runs(view)
    tolerance = _tolerance(view)
    size, floor = gke_gpudirect.NCCL_LARGE_MESSAGE_FLOORS[profile]
    evidence, problems = [], []
    for name, run in runs:
        large = [r for r in run["rows"] if isinstance(r.get("size"), int) and r["size"] >= size]
        if not large:
            raise Missing("performance.nccl.runs[%s].output" % name, "the run's largest message is %s B, below the %d B of "
                          "the large-message floor (nccl_test_max_bytes)" % (run.get("max_size"), size))
        for row in large:
            busbw = _large_busbw(row)
            if busbw is None:
                raise Missing("performance.nccl.runs[%s].output" % name, "no bus bandwidth at %s B" % row["size"])
            evidence.append("%s: %s B bus bandwidth %s GB/s, floor %s GB/s at >= %d B (%s)" % (name, row["size"], busbw, floor, size, profile))
            if busbw < _floor(floor, tolerance):
                problems.append("%s: bus bandwidth %s GB/s at %s B is below the %s GB/s large-message floor%s" % (
                    name, busbw, row["size"], floor, " (%d%% tolerance)" % round(tolerance * 100) if tolerance else ""))
    return _attributed(view, section, evidence, problems)


@described("perf.nccl_transport")
def nccl_transport(view):
    section = _section(view, "nccl")
    profile = section.get("profile")
    expected = expected_network(profile)
    if expected is None:
        raise ValueError("performance.nccl.profile %r has no net plugin in the catalog" % (profile,))
    runs = section.get("runs") or []
    if not runs:
        raise Missing("performance.nccl.runs", "the probe recorded no collective")
    evidence, problems = [], []
    for run in runs:
        name = run.get("benchmark") or "?"
        if run.get("error") and not run.get("output"):
            raise Missing("performance.nccl.runs[%s]" % name, "the run could not complete: %s" % " ".join(str(run["error"]).split())[:300])
        text = "%s\n%s" % (run.get("output") or "", run.get("stderr") or "")
        used = _nccl_tests.networks_in(text)
        if not used:
            raise Missing("performance.nccl.runs[%s].output" % name, "no 'NCCL INFO Using network' line: the probe ran "
                          "without NCCL_DEBUG=INFO or its log is truncated")
        names = sorted(set(used))
        sockets = len(_NET_SOCKET.findall(text))
        evidence.append("%s: Using network %s (%d rank line(s)), %d NET/Socket line(s); expected %s (%s)" % (
            name, ", ".join(names), len(used), sockets, expected, profile))
        wrong = [n for n in names if not n.startswith(expected)]
        if wrong:
            problems.append("%s: NCCL used %s instead of the %s plugin%s" % (
                name, ", ".join(wrong), expected,
                " (a fallback of NCCL itself)" if any(n in gke_gpudirect.NCCL_FALLBACK_NETS for n in wrong) else ""))
    return evidence, problems


@described("perf.ib_write_bw")
def ib_write_bw(view):
    section = _section(view, "ib_write_bw")
    tolerance = _tolerance(view)
    threshold = _number(section.get("threshold_gbps"))
    if threshold is None:
        raise Missing("performance.ib_write_bw.threshold_gbps", "no floor was recorded (rdma_test's threshold)")
    if not section.get("output"):
        raise Missing("performance.ib_write_bw.output", "no output was captured (exit code %s)" % section.get("rc"))
    try:
        parsed = _perftest.parse_ib_write_bw(section["output"])
    except ValueError as exc:
        raise Missing("performance.ib_write_bw.output", str(exc))
    if _failed_rc(section.get("rc")) is not None:
        raise Missing("performance.ib_write_bw", "ib_write_bw exited with code %s" % section["rc"])
    measured = parsed["bw_average_gbps"]
    evidence = ["nodes %s, device %s, transport %s: BW average %s Gb/s at %s B, floor %s Gb/s (link %s Gb/s), %d%% tolerance" % (
        " -> ".join(section.get("nodes") or []) or "?", parsed.get("device") or section.get("device"), parsed.get("transport"),
        measured, parsed["rows"][-1]["bytes"], threshold, section.get("link_rate_gbps"), round(tolerance * 100))]
    if measured < _floor(float(threshold), tolerance):
        return evidence, ["BW average %s Gb/s at %s B is below the %s Gb/s floor" % (measured, parsed["rows"][-1]["bytes"], threshold)]
    return evidence, []
