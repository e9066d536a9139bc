# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge the GPU-NIC fabric of an A3 Mega (TCPXO) cluster - or of another profile: tcpx, or the
GPUDirect-RDMA ones, rdma (A3 Ultra / A4: gVNIC VPC + RoCE VPC with 8 subnets) and rdma-a4x (4 subnets) -
against the GCP double, with a fixed latency per operation, and compare the schedules:

- ``concurrent``: gke_multinetwork's default (all networks together, then each network's subnet and
  firewall rule together). Critical path: 2 operation latencies.
- ``parallelism-10``: the same engine limited to 10 operations in flight, like Terraform's default
  ``-parallelism=10``. Critical path: 3 latencies (8 networks, then 16 leaves in two waves).
- ``one-at-a-time``: the guide's loop, one resource after the other (24 operations for TCPXO).

Times are also given in latency units (wall time / the latency of one operation), so the schedule can be read
apart from the chosen latency. Then the reads of the first apply (each resource once, plus the preflight reads:
the region, and for RDMA the zone's network profile), the no-op
re-run of the concurrent fabric (mutating requests, reads per resource; no preflight read, nothing changes)
and the teardown.

Usage: ``python -m benchmarks fabric_converge -- --latency 0.5 --repeat 3`` (or ``make benchmark``) runs the
profiles tcpxo, rdma and rdma-a4x one after the other and ends with a table comparing them (``--profile`` picks
others, comma-separated). The exit status is 1 when a profile's no-op re-run writes or reads a resource twice,
or its first apply reads more than each resource once plus its preflight reads.
The engine runs in-process (the module's own code path: resolve, read, plan, apply), so the numbers
measure the schedule, not Ansible's start-up.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time

from benchmarks import _paths

PROJECT = "bench-project"
SCENARIOS = (("concurrent", 16, 2), ("parallelism-10", 10, None), ("one-at-a-time", 1, None))
RDMA_ZONE = "us-central1-b"   # a zone with a RoCE network profile in the double's catalog


def _imports():
    _paths.setup()
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork as fabric
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gpudirect
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session import GcpSession
    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble

    return fabric, gpudirect, GcpSession, GcpDouble


def _params(profile):
    return dict(project=PROJECT, cluster="bench", location="us-central1", gpudirect=profile, nic_count=None,
                networks=None, name_prefix=None, k8s_network_prefix="vpc", mtu=None, cidr_base="192.168.0.0/16",
                subnet_prefix_length=24, firewall_source_ranges=None, firewall_allow_any_source=False,
                zone=RDMA_ZONE if profile.startswith("rdma") else None)


def _shape(fabric_mod, spec):
    """(networks, subnetworks, firewalls, resources, expected latencies at parallelism 10) of a fabric."""
    keys = fabric_mod.resource_keys(spec)
    count = dict((kind, sum(1 for k, n in keys if k == kind)) for kind in ("network", "subnetwork", "firewall"))
    leaves = count["subnetwork"] + count["firewall"]
    waves = -(-count["network"] // 10) + -(-leaves // 10)
    return count["network"], count["subnetwork"], count["firewall"], len(keys), waves


def _converge(fabric_mod, session_cls, double, spec, concurrency, state="present"):
    session = session_cls(**double.module_args(project=PROJECT))
    engine = fabric_mod.FabricEngine(session, spec, concurrency=concurrency)
    started = time.perf_counter()
    engine.read()
    if state == "present":
        engine.plan_present()
    else:
        engine.plan_absent()
    engine.preflight()
    engine.apply()
    return time.perf_counter() - started, engine


def _peak_in_flight(double, latency):
    """Largest number of operations running at the same moment (from the double's operations)."""
    events = []
    for op in double.operations.values():
        start = op.done_at - latency
        events.append((start, 1))
        events.append((op.done_at, -1))
    peak = current = 0
    for dummy, delta in sorted(events, key=lambda e: (e[0], e[1])):
        current += delta
        peak = max(peak, current)
    return peak


def run(latency=0.5, repeat=3, profile="tcpxo"):
    fabric_mod, gpudirect, session_cls, double_cls = _imports()
    spec = fabric_mod.resolve(_params(profile))
    nics = gpudirect.profile(profile)["gpu_nic_count"]
    networks, subnets, rules, resources, waves = _shape(fabric_mod, spec)
    rows = []
    for name, concurrency, expected in SCENARIOS:
        expected = waves if name == "parallelism-10" else expected
        walls, operations, peaks = [], [], []
        for dummy in range(repeat):
            with double_cls(latency=latency) as double:
                wall, dummy_engine = _converge(fabric_mod, session_cls, double, spec, concurrency)
                state = double.state(PROJECT)
                assert [len(state[k]) for k in ("networks", "subnetworks", "firewalls")] == [networks, subnets, rules]
                walls.append(wall)
                operations.append(len(double.mutating_requests()))
                peaks.append(_peak_in_flight(double, latency))
        wall = statistics.median(walls)
        rows.append(dict(scenario=name, concurrency=concurrency, operations=operations[0],
                         peak_in_flight=max(peaks), wall_s=round(wall, 3), wall_min_s=round(min(walls), 3),
                         wall_max_s=round(max(walls), 3), latencies=round(wall / latency, 2),
                         expected_latencies=expected if expected is not None else operations[0]))

    # no-op re-run and teardown of the concurrent fabric
    with double_cls(latency=latency) as double:
        _converge(fabric_mod, session_cls, double, spec, 16)
        reads = double.read_counts()
        apply_reads = dict(reads=sum(reads.values()), resources=resources,
                           preflight=sum(n for path, n in reads.items() if ("/regions/" in path
                                         and "/subnetworks/" not in path) or "/networkProfiles/" in path))
        double.clear_log()
        noop_wall, engine = _converge(fabric_mod, session_cls, double, spec, 16)
        reads = double.read_counts()
        noop = dict(wall_s=round(noop_wall, 3), changes=len(engine.plan.changes),
                    mutating_requests=len(double.mutating_requests()), requests=len(double.requests),
                    resources_read=len(reads), reads_per_resource_min=min(reads.values()),
                    reads_per_resource_max=max(reads.values()), resources=resources, reads=sum(reads.values()))
        double.clear_log()
        teardown_wall, dummy_engine = _converge(fabric_mod, session_cls, double, spec, 16, state="absent")
        state = double.state(PROJECT)
        teardown = dict(wall_s=round(teardown_wall, 3), latencies=round(teardown_wall / latency, 2),
                        operations=len(double.mutating_requests()),
                        left=sum(len(state[k]) for k in ("networks", "subnetworks", "firewalls")))

    sequential = [r for r in rows if r["scenario"] == "one-at-a-time"][0]["wall_s"]
    for row in rows:
        row["speedup_vs_one_at_a_time"] = round(sequential / row["wall_s"], 1)
    return dict(benchmark="fabric_converge", profile=profile, nics=nics, resources=resources, latency_s=latency,
                repeat=repeat, shape=dict(networks=networks, subnetworks=subnets, firewalls=rules),
                when=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform()),
                converge=rows, apply_reads=apply_reads, noop_rerun=noop, teardown=teardown)


def table(result):
    shape = result["shape"]
    lines = ["GPU NIC fabric, profile %s (%d GPU NICs: %d networks, %d subnets, %d firewall rules = %d operations), "
             "%.2fs per operation (1 latency unit), median of %d" % (
                 result["profile"], result["nics"], shape["networks"], shape["subnetworks"], shape["firewalls"],
                 result["resources"], result["latency_s"], result["repeat"]), ""]
    columns = ("schedule", "concurrency", "operations", "in flight", "wall (s)", "latencies", "expected", "speedup")
    header = "%-16s %11s %10s %9s %9s %10s %9s %8s" % columns
    lines.append(header)
    lines.append("-" * len(header))
    for row in result["converge"]:
        lines.append("%-16s %11d %10d %9d %9.2f %10.2f %9s %7.1fx" % (
            row["scenario"], row["concurrency"], row["operations"], row["peak_in_flight"], row["wall_s"],
            row["latencies"], row["expected_latencies"], row["speedup_vs_one_at_a_time"]))
    noop = result["noop_rerun"]
    summary = "no-op re-run: %.3fs, %d changes, %d mutating requests, %d requests, %d/%d resources read, " \
        "reads per resource min %d max %d" % (
            noop["wall_s"], noop["changes"], noop["mutating_requests"], noop["requests"], noop["resources_read"],
            noop["resources"], noop["reads_per_resource_min"], noop["reads_per_resource_max"])
    applied = result["apply_reads"]
    lines += ["", "first apply: %d reads = %d resources + %d preflight (region%s)" % (
        applied["reads"], applied["resources"], applied["preflight"],
        ", network profile" if result["profile"].startswith("rdma") else ""), summary]
    down = result["teardown"]
    lines.append("teardown (absent): %.2fs = %.2f latencies, %d operations, %d resources left" % (
        down["wall_s"], down["latencies"], down["operations"], down["left"]))
    return "\n".join(lines)


def compare(results):
    """One line per profile: the schedules in latency units and the read budget (README's benchmark table)."""
    header = "%-9s %9s %11s %13s %13s %13s %26s %9s" % (
        "profile", "resources", "concurrent", "parallelism10", "one-at-a-time", "first apply", "no-op re-run",
        "teardown")
    lines = ["", "profiles side by side (wall time in latency units; reads: per resource)", header, "-" * len(header)]
    for result in results:
        rows = dict((row["scenario"], row) for row in result["converge"])
        noop, applied = result["noop_rerun"], result["apply_reads"]
        lines.append("%-9s %9d %11s %13s %13s %13s %26s %9s" % (
            result["profile"], result["resources"],
            "%.2f (%s)" % (rows["concurrent"]["latencies"], rows["concurrent"]["expected_latencies"]),
            "%.2f (%s)" % (rows["parallelism-10"]["latencies"], rows["parallelism-10"]["expected_latencies"]),
            "%.2f (%s)" % (rows["one-at-a-time"]["latencies"], rows["one-at-a-time"]["expected_latencies"]),
            "%d+%d reads" % (applied["resources"], applied["preflight"]),
            "%d writes, %d reads, max %d" % (noop["mutating_requests"], noop["reads"], noop["reads_per_resource_max"]),
            "%.2f" % result["teardown"]["latencies"]))
    return "\n".join(lines)


def _budget_ok(result):
    noop, applied = result["noop_rerun"], result["apply_reads"]
    return noop["mutating_requests"] == 0 and noop["reads_per_resource_max"] == 1 and noop["reads"] == noop["resources"] \
        and applied["reads"] == applied["resources"] + applied["preflight"] \
        and applied["preflight"] == (2 if result["profile"].startswith("rdma") else 1)


PROFILES = ("tcpx", "tcpxo", "rdma", "rdma-a4x")
DEFAULT_PROFILES = "tcpxo,rdma,rdma-a4x"


def _profiles(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PROFILES]
    if not names or unknown:
        wrong = ", ".join(unknown) or "(none)"
        raise argparse.ArgumentTypeError("unknown profile(s) %s; choose from %s" % (wrong, ", ".join(PROFILES)))
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks fabric_converge", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per operation (default 0.5)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per schedule; the median is reported")
    parser.add_argument("--profile", type=_profiles, default=_profiles(DEFAULT_PROFILES),
                        help="profiles, comma-separated (default %s; also tcpx)" % DEFAULT_PROFILES)
    parser.add_argument("--output", help="JSON file (default benchmarks/results/fabric_converge-<time>.json)")
    args = parser.parse_args(argv)
    results = []
    for profile in args.profile:
        result = run(args.latency, args.repeat, profile)
        results.append(result)
        print(table(result) + "\n")
    if len(results) > 1:
        print(compare(results))
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    document = results[0] if len(results) == 1 else dict(
        benchmark="fabric_converge", profiles=[r["profile"] for r in results], latency_s=args.latency, repeat=args.repeat,
        when=results[0]["when"], machine=results[0]["machine"], results=results)
    document["load_average_after"] = [round(x, 2) for x in load] if load else None
    os.makedirs(_paths.RESULTS, exist_ok=True)
    path = args.output or os.path.join(_paths.RESULTS, "fabric_converge-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    with open(path, "w") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
    print("\nJSON: %s" % os.path.relpath(path))
    return 0 if all(_budget_ok(result) for result in results) else 1
