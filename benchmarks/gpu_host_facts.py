# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cold run of ``gpu_ops.cluster.gpu_host_facts`` against ``ansible.builtin.ping`` (goal: at most 100 ms over it).

Each sample is a fresh ``ansible localhost -m <module>`` process (AnsiballZ build, module start-up, the
module's work), alternating the two modules so that both see the same machine load. The facts module
reads a host with two GPUs through the fake nvidia-smi (tests/fakes, a Python process per call, so the
numbers include two interpreter start-ups that a real nvidia-smi does not have), and once more with
no nvidia-smi at all (the module's own cost). Also reported: the engine alone, in-process.

Usage: ``python -m benchmarks gpu_host_facts -- --repeat 7`` (or ``make benchmark``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import _paths

GOAL_MS = 100.0


def _ansible(module, args, env):
    binary = os.path.join(os.path.dirname(sys.executable), "ansible")
    command = [binary if os.path.exists(binary) else "ansible", "localhost", "-c", "local", "-m", module]
    if args:
        command += ["-a", args]
    command += ["-e", "ansible_python_interpreter=%s" % sys.executable]
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = (time.perf_counter() - started) * 1000.0
    if proc.returncode != 0:
        raise SystemExit("%s failed:\n%s\n%s" % (" ".join(command), proc.stdout, proc.stderr))
    return elapsed


def _engine_ms(fake_smi, env, repeat):
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpu_ops.cluster.plugins.module_utils import _gpu_host

    def run(argv):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    samples = []
    for _dummy in range(repeat):
        started = time.perf_counter()
        _gpu_host.gather(run, fake_smi, None)
        samples.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(samples)


def run(repeat=7):
    collections = _paths.setup()
    fake_smi = os.path.join(_paths.ROOT, "tests", "fakes", "nvidia-smi")
    work = tempfile.mkdtemp(prefix="bench-facts-")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_HOME=os.path.join(work, "home"),
               ANSIBLE_LOCAL_TEMP=os.path.join(work, "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0",
               FAKE_NVIDIA_SMI_STATE=os.path.join(work, "state.json"), FAKE_NVIDIA_SMI_PRESET="H100-80GB x2",
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    cases = (("ping", "ansible.builtin.ping", ""),
             ("gpu_host_facts", "gpu_ops.cluster.gpu_host_facts", "nvidia_smi=%s" % fake_smi),
             ("gpu_host_facts, no nvidia-smi", "gpu_ops.cluster.gpu_host_facts", "nvidia_smi=/nonexistent"))
    try:
        for _name, module, args in cases:  # warm the disk cache; not counted
            _ansible(module, args, env)
        samples = {name: [] for name, _m, _a in cases}
        for _dummy in range(repeat):
            for name, module, args in cases:
                samples[name].append(_ansible(module, args, env))
        engine = _engine_ms(fake_smi, env, repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ping = statistics.median(samples["ping"])
    rows = []
    for name, _module, _args in cases:
        median = statistics.median(samples[name])
        rows.append(dict(case=name, median_ms=round(median, 1), min_ms=round(min(samples[name]), 1),
                         max_ms=round(max(samples[name]), 1), over_ping_ms=round(median - ping, 1)))
    return dict(benchmark="gpu_host_facts", repeat=repeat, goal_over_ping_ms=GOAL_MS, rows=rows,
                engine_in_process_ms=round(engine, 1),
                when=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform()))


def table(result):
    lines = ["Cold `ansible localhost -m <module>` runs, median of %d (goal: facts <= ping + %d ms)" % (
        result["repeat"], result["goal_over_ping_ms"]), ""]
    header = "%-32s %10s %9s %9s %12s" % ("case", "median ms", "min ms", "max ms", "over ping")
    lines += [header, "-" * len(header)]
    for row in result["rows"]:
        values = (row["case"], row["median_ms"], row["min_ms"], row["max_ms"], row["over_ping_ms"])
        lines.append("%-32s %10.1f %9.1f %9.1f %12.1f" % values)
    lines += ["", "engine in-process (2 GPUs, fake nvidia-smi twice): %.1f ms" % result["engine_in_process_ms"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks gpu_host_facts", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=7, help="samples per case; the median is reported")
    parser.add_argument("--output", help="JSON file (default benchmarks/results/gpu_host_facts-<time>.json)")
    args = parser.parse_args(argv)
    result = run(args.repeat)
    print(table(result))
    print("\nJSON: %s" % os.path.relpath(_paths.save(result, "gpu_host_facts", args.output)))
    facts = [r for r in result["rows"] if r["case"] == "gpu_host_facts"][0]
    return 0 if facts["over_ping_ms"] <= GOAL_MS else 1
