# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE GPUDirect playbook over a fleet, in render mode, against the fork count.

Builds an inventory of ``--clusters`` GKE clusters from inventories/fleet (its group_vars; half A3 High/TCPX,
half A3 Mega/TCPXO, each with its own location and render folder), then runs ``playbooks/gke_gpudirect.yml``
once per ``--forks`` value, plus one run of a single cluster as the baseline. Reports the wall time, the
time per cluster, and the cost per cluster against the single-cluster run. Render mode contacts nothing, so
this measures Ansible and the collection's own work (templating, module start-up, planning); a run against
the doubles would add the API round trips, which the fabric_converge benchmark covers.

Usage: ``python -m benchmarks fleet_render -- --clusters 50 --forks 5,10,25,50`` (slow on a small machine:
the default is that; try ``--clusters 10 --forks 2,5,10`` first).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import _paths

LAYOUTS = (("a3_high_tcpx", ("us-east4", "europe-west4", "us-central1")),
           ("a3_mega_tcpxo", ("us-central1", "asia-northeast1", "us-east5")))


def write_inventory(folder, clusters):
    """An inventory of ``clusters`` GKE clusters sharing inventories/fleet/group_vars; returns its path."""
    fleet = os.path.join(_paths.ROOT, "inventories", "fleet")
    inventory = os.path.join(folder, "inventory")
    os.makedirs(inventory)
    os.symlink(os.path.join(fleet, "group_vars"), os.path.join(inventory, "group_vars"))
    lines = ["all:", "  children:", "    gke_clusters:", "      vars:", "        ansible_connection: local",
             "        ansible_python_interpreter: %s" % sys.executable,
             "        gpu_ops_render_dir: %s/render/{{ inventory_hostname }}" % folder,
             "      children:"]
    for group, locations in LAYOUTS:
        lines += ["        %s:" % group, "          hosts:"]
        for index in range(clusters):
            if index % len(LAYOUTS) != LAYOUTS.index((group, locations)):
                continue
            location = locations[index % len(locations)]
            lines += ["            fleet-%03d:" % index, "              gke_gpu_cluster_location: %s" % location,
                      "              gke_gpu_cluster_node_locations: [%s-c]" % location]
    with open(os.path.join(inventory, "hosts.yml"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return inventory


def run(folder, inventory, forks, limit=None):
    """Seconds of one ansible-playbook run (it must succeed)."""
    shutil.rmtree(os.path.join(folder, "render"), ignore_errors=True)
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
            os.path.join(_paths.ROOT, "playbooks", "gke_gpudirect.yml"), "--forks", str(forks)]
    if limit:
        args += ["--limit", limit]
    env = dict(os.environ, HOME=folder, ANSIBLE_COLLECTIONS_PATH=_paths.setup(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=os.path.join(folder, "tmp"))
    started = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-4000:] + proc.stderr[-2000:]))
    return elapsed


def measure(clusters, forks_list, repeat):
    folder = tempfile.mkdtemp(prefix="gpo-fleet-")
    try:
        inventory = write_inventory(folder, clusters)
        single = min(run(folder, inventory, 1, limit="fleet-000") for dummy in range(repeat))
        rows = []
        for forks in forks_list:
            wall = min(run(folder, inventory, forks) for dummy in range(repeat))
            rows.append(dict(forks=forks, wall_s=round(wall, 2), per_cluster_s=round(wall / clusters, 3),
                             vs_single=round(wall / clusters / single, 3)))
        return dict(clusters=clusters, single_cluster_s=round(single, 2), runs=rows, repeat=repeat,
                    cpus=os.cpu_count(), python=platform.python_version())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def table(result):
    lines = ["%d clusters, render mode; one cluster alone: %.2f s (%d CPUs)" % (
        result["clusters"], result["single_cluster_s"], result["cpus"]),
        "%6s %10s %14s %22s" % ("forks", "wall s", "s per cluster", "per cluster / single")]
    for row in result["runs"]:
        lines.append("%6d %10.2f %14.3f %22.3f" % (row["forks"], row["wall_s"], row["per_cluster_s"], row["vs_single"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks fleet_render", description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--forks", default="5,10,25,50", help="comma-separated fork counts")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting; the fastest counts")
    parser.add_argument("--output", help="JSON file (default benchmarks/results/fleet_render-<time>.json)")
    args = parser.parse_args(argv)
    result = measure(args.clusters, [int(f) for f in args.forks.split(",") if f], max(1, args.repeat))
    print(table(result))
    print("\nJSON: %s" % os.path.relpath(_paths.save(result, "fleet_render", args.output)))
    return 0
