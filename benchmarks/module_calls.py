# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU seconds of one of our module calls (a module process, as ansible-core runs every module) against a debug task.

One play of ``--calls`` gke_multinetwork plans (check mode, against the GCP double: one read per resource)
runs, then as many debug tasks. Reported: the CPU seconds of ansible-playbook and its workers (``RUSAGE_CHILDREN``), the fastest
of ``--repeat`` runs each, and per call over the debug play.

Usage: ``python -m benchmarks module_calls -- --calls 10 --repeat 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import _paths

PROJECT = "bench-project"
FABRIC = dict(cluster="a3high", location="us-central1", gpudirect="tcpx")


def play(kind, calls, defaults):
    """A play of ``calls`` tasks: gke_multinetwork plans (module processes) or debug tasks."""
    if kind == "debug":
        tasks = [{"name": "debug %d" % i, "ansible.builtin.debug": {"msg": "x"}} for i in range(calls)]
    else:
        tasks = [{"name": "plan %d" % i, "gpu_ops.cluster.gke_multinetwork": dict(FABRIC), "check_mode": True}
                 for i in range(calls)]
    return [dict(name="module calls", hosts="localhost", gather_facts=False, module_defaults=defaults, tasks=tasks)]


def run(folder, document):
    """One ansible-playbook run (it must succeed): (wall s, CPU s of it and its workers)."""
    path = os.path.join(folder, "play.yml")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    inventory = os.path.join(folder, "inventory.ini")
    with open(inventory, "w", encoding="utf-8") as handle:
        handle.write("localhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    env = dict(os.environ, HOME=folder, ANSIBLE_COLLECTIONS_PATH=_paths.setup(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=os.path.join(folder, "tmp"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, path],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-4000:] + proc.stderr[-2000:]))
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(calls, repeat):
    """The benchmark's result: per kind the fastest run (CPU) and the CPU per call over the debug play."""
    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble  # pylint: disable=import-outside-toplevel

    folder = tempfile.mkdtemp(prefix="gpo-calls-")
    gcp = GcpDouble().start()
    try:
        defaults = {"group/gpu_ops.cluster.gcp": gcp.module_args(project=PROJECT)}
        best = {}
        for dummy in range(repeat):
            for kind in ("debug", "process"):
                wall, cpu = run(folder, play(kind, calls, defaults))
                if kind not in best or cpu < best[kind]["cpu_s"]:
                    best[kind] = dict(wall_s=round(wall, 2), cpu_s=round(cpu, 2))
        if gcp.mutating_requests():
            raise SystemExit("a plan wrote to the GCP double")
        for kind in ("process",):
            best[kind]["cpu_per_call_s"] = round((best[kind]["cpu_s"] - best["debug"]["cpu_s"]) / calls, 3)
        return dict(calls=calls, repeat=repeat, runs=best, gcp_reads=sum(gcp.read_counts().values()))
    finally:
        gcp.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks module_calls", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3, help="runs per kind; the least CPU counts")
    parser.add_argument("--output", help="JSON file (default benchmarks/results/module_calls-<time>.json)")
    args = parser.parse_args(argv)
    result = measure(args.calls, args.repeat)
    print("%-8s %8s %8s %14s" % ("kind", "wall s", "CPU s", "CPU s / call"))
    for kind in ("debug", "process"):
        row = result["runs"][kind]
        print("%-8s %8.2f %8.2f %14s" % (kind, row["wall_s"], row["cpu_s"], row.get("cpu_per_call_s", "-")))
    print("JSON: %s" % _paths.save(result, "module_calls", args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
