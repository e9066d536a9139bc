# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The first build of one GKE GPUDirect cluster (A3 High, TCPX) against the doubles, with long operations shaped like
the real services', run three ways on fresh doubles:

- ``no-latency``: every operation done at once; what is left is Ansible's own time (the overhead),
- ``one-after-the-other``: ``gke_gpudirect_parallel: false`` (fabric, then cluster, then node pool),
- ``fabric-with-cluster``: the playbook's default (the fabric converges in the background while the cluster
  is created; the node pool waits for both).

Operation latencies, in units U (``--unit`` seconds, default 2): a Compute Engine insert (network, subnet,
firewall rule) 1 U, a cluster create ``--cluster-units`` (20), a node-pool create ``--pool-units`` (15). GKE
creates take minutes and VPC inserts tens of seconds, so these ratios follow the services' shape; the
absolute values are scaled down to keep the run short.

The fabric converges its networks together, then their subnets and firewall rules together: 2 U. So the sum of
the steps is 2 + cluster + pool units; the critical path is max(2, cluster) + pool. Each run's time waiting
on operations is its wall time minus the no-latency run's, reported in U against both.

Usage: ``python -m benchmarks first_build -- --unit 2 --repeat 1`` (about 6 minutes on 2 idle cores). The pollers
pause 1 s, then 1.5 times longer each time, up to 10 s: with U = 2 s the cluster (40 s) and the pool (30 s) are seen
done within about 1 s; with smaller units the polling, not the schedule, would dominate the waits.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time

from benchmarks import _paths
from benchmarks import fleet

SLOW = True  # minutes: not part of a plain ``python -m benchmarks`` (make benchmark): name it
FABRIC_UNITS = 2  # networks together, then their subnets and firewall rules together


def run_once(unit, cluster_units, pool_units, parallel):
    """One first build on fresh doubles; returns its wall and CPU seconds."""
    folder = tempfile.mkdtemp(prefix="gpo-first-build-")
    cluster = fleet.clusters_of(1)
    gcp, clusters = fleet.start_doubles(cluster)
    try:
        gcp.set_latency(unit)
        gcp.set_latency(unit * cluster_units, "CREATE_CLUSTER")
        gcp.set_latency(unit * pool_units, "CREATE_NODE_POOL")
        inventory = fleet.write_inventory(folder, cluster, {host: k8s.kubeconfig for host, k8s in clusters.items()})
        extra = dict(fleet.live_vars(gcp), gke_gpudirect_parallel=parallel, gke_gpu_cluster_fabric_wait_delay=1)
        wall, cpu = fleet.playbook(folder, inventory, 1, extra)
        return dict(wall_s=round(wall, 2), playbook_cpu_s=round(cpu, 1))
    finally:
        gcp.stop()
        for k8s in clusters.values():
            k8s.stop()
        shutil.rmtree(folder, ignore_errors=True)


def measure(unit, cluster_units, pool_units, repeat):
    """The three runs (the fastest of ``repeat`` each) and their waits in units."""
    runs = {}
    for name, latency, parallel in (("no-latency", 0.0, True), ("one-after-the-other", unit, False),
                                    ("fabric-with-cluster", unit, True)):
        best = None
        for dummy in range(repeat):
            row = run_once(latency, cluster_units, pool_units, parallel)
            if best is None or row["wall_s"] < best["wall_s"]:
                best = row
        runs[name] = best
        print("%s: %s" % (name, best), flush=True)
    overhead = runs["no-latency"]["wall_s"]
    steps = FABRIC_UNITS + cluster_units + pool_units
    critical = max(FABRIC_UNITS, cluster_units) + pool_units
    for name in ("one-after-the-other", "fabric-with-cluster"):
        waited = (runs[name]["wall_s"] - overhead) / unit
        runs[name].update(waited_units=round(waited, 2), vs_sum_of_steps=round(waited / steps, 3),
                          vs_critical_path=round(waited / critical, 3))
    return dict(unit_s=unit, cluster_units=cluster_units, pool_units=pool_units, sum_of_steps_units=steps,
                critical_path_units=critical, runs=runs, cpus=os.cpu_count(), python=platform.python_version(),
                machine=platform.machine(), load_after=round(os.getloadavg()[0], 2))


def table(result):
    lines = ["first build of one TCPX cluster, U = %.2f s: sum of the steps %d U, critical path %d U; %d CPUs, load %.1f" % (
             result["unit_s"], result["sum_of_steps_units"], result["critical_path_units"], result["cpus"], result["load_after"]),
             "%-22s %8s %8s %10s %14s %16s" % ("run", "wall s", "CPU s", "waited U", "/ sum of steps", "/ critical path")]
    for name, row in result["runs"].items():
        lines.append("%-22s %8.1f %8.1f %10s %14s %16s" % (
            name, row["wall_s"], row["playbook_cpu_s"], row.get("waited_units", "-"), row.get("vs_sum_of_steps", "-"),
            row.get("vs_critical_path", "-")))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks first_build", description=__doc__.splitlines()[0])
    parser.add_argument("--unit", type=float, default=2.0, help="seconds per latency unit")
    parser.add_argument("--cluster-units", type=int, default=20)
    parser.add_argument("--pool-units", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--output", help="JSON file (default benchmarks/results/first_build-<time>.json)")
    args = parser.parse_args(argv)
    _paths.setup()
    started = time.perf_counter()
    result = measure(args.unit, args.cluster_units, args.pool_units, max(1, args.repeat))
    result["benchmark_s"] = round(time.perf_counter() - started, 1)
    print(table(result))
    print("\nJSON: %s" % os.path.relpath(_paths.save(result, "first_build", args.output)))
    return 0
