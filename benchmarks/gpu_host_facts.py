# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cold run of ``gpu_ops.cluster.gpu_host_facts`` against ``ansible.builtin.ping`` (goal: at most 100 ms over it).

Two measurements, each alternating the modules so that all see the same machine load:

- playbook: ONE ``ansible-playbook`` run whose play repeats the tasks ping / facts / facts without
  nvidia-smi ``--repeat`` times; a small callback plugin times every task (task start to result: worker
  fork, module transfer, module start-up and work). The first round is a warm-up and is not counted.
- adhoc: each sample a fresh ``ansible localhost -m <module>`` process (AnsiballZ build included).

The facts module reads a host with two GPUs through a replay of nvidia-smi: the strict fake (tests/fakes, a
Python program) answers the module's two commands once, before any timing, and a shell script that ``exec``s
``cat`` on the captured output stands in for nvidia-smi while timing, so the numbers hold the module's work
and two cheap process starts (what the real binary costs on a GPU host cannot be measured here). And once
more with no nvidia-smi at all (the module's own cost). Also reported: the engine alone, in-process.

Usage: ``python -m benchmarks gpu_host_facts -- --repeat 7 [--mode playbook|adhoc|both]`` (or ``make benchmark``).
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


def _replay_nvidia_smi(fake_smi, env, work):
    """A /bin/sh nvidia-smi that replays what the strict fake answers to the module's commands."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import facts as host_facts

    commands = (["--query-gpu=" + ",".join(host_facts.GPU_FIELDS), "--format=csv,noheader,nounits"], ["-q", "-d", "COMPUTE"])
    branches = []
    for number, argv in enumerate(commands):
        proc = subprocess.run([fake_smi] + argv, env=env, capture_output=True, text=True, check=True)
        captured = os.path.join(work, "nvidia-smi-%d.out" % number)
        with open(captured, "w", encoding="utf-8") as handle:
            handle.write(proc.stdout)
        branches.append("    '%s') exec cat '%s' ;;" % (" ".join(argv), captured))
    script = os.path.join(work, "nvidia-smi")
    with open(script, "w", encoding="utf-8") as handle:  # any other command line: an error, as a strict fake
        handle.write("#!/bin/sh\ncase \"$*\" in\n%s\n    *) echo \"replay: $*\" >&2; exit 2 ;;\nesac\n" % "\n".join(branches))
    os.chmod(script, 0o755)
    return script


def _engine_ms(fake_smi, env, repeat):
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpu_ops.cluster.plugins.module_utils._host import facts as host_facts

    def run(argv):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    facts = host_facts.gather(run, fake_smi, None)
    if len(facts["gpus"]) != 2 or not facts["cuda_version"]:  # else the timings would be of a failure path
        raise SystemExit("the replayed nvidia-smi did not give the module two GPUs: %s" % facts["problems"])
    samples = []
    for _dummy in range(repeat):
        started = time.perf_counter()
        host_facts.gather(run, fake_smi, None)
        samples.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(samples)


_CALLBACK = '''
import json, os, time
from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_ms"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.started, self.samples = {}, []

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.started[task._uuid] = time.perf_counter()

    def v2_runner_on_ok(self, result):
        task = result._task
        self.samples.append([task.get_name(), (time.perf_counter() - self.started[task._uuid]) * 1000.0])

    def v2_playbook_on_stats(self, stats):
        with open(os.environ["TASK_MS_OUTPUT"], "w", encoding="utf-8") as handle:
            json.dump(self.samples, handle)
'''


def _playbook_samples(cases, repeat, env, work):
    """{case: [ms, ...]} of one ansible-playbook run repeating the cases' tasks (the first round not counted)."""
    import json  # pylint: disable=import-outside-toplevel

    plugins = os.path.join(work, "callbacks")
    os.makedirs(plugins)
    with open(os.path.join(plugins, "task_ms.py"), "w", encoding="utf-8") as handle:
        handle.write(_CALLBACK)
    tasks = []
    for round_number in range(repeat + 1):
        for name, module, args in cases:
            params = dict(item.split("=", 1) for item in args.split()) if args else {}
            tasks.append({"name": "%s #%d" % (name, round_number), module: params})
    playbook = os.path.join(work, "bench.yml")
    with open(playbook, "w", encoding="utf-8") as handle:
        json.dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], handle)
    output = os.path.join(work, "task_ms.json")
    binary = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    command = [binary if os.path.exists(binary) else "ansible-playbook", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % sys.executable, playbook]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, env=dict(
        env, ANSIBLE_CALLBACK_PLUGINS=plugins, ANSIBLE_CALLBACKS_ENABLED="task_ms", TASK_MS_OUTPUT=output))
    if proc.returncode != 0:
        raise SystemExit("%s failed:\n%s\n%s" % (" ".join(command), proc.stdout, proc.stderr))
    with open(output, encoding="utf-8") as handle:
        recorded = json.load(handle)
    samples = {name: [] for name, _m, _a in cases}
    for task_name, elapsed in recorded:
        name, _sep, round_number = task_name.rpartition(" #")
        if name in samples and round_number != "0":
            samples[name].append(elapsed)
    return samples


def _rows(cases, samples):
    ping = statistics.median(samples["ping"])
    rows = []
    for name, _module, _args in cases:
        median = statistics.median(samples[name])
        rows.append(dict(case=name, median_ms=round(median, 1), min_ms=round(min(samples[name]), 1),
                         max_ms=round(max(samples[name]), 1), over_ping_ms=round(median - ping, 1)))
    return rows


def run(repeat=7, mode="both"):
    collections = _paths.setup()
    strict_fake = os.path.join(_paths.ROOT, "tests", "fakes", "nvidia-smi")
    work = tempfile.mkdtemp(prefix="bench-facts-")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_HOME=os.path.join(work, "home"),
               ANSIBLE_LOCAL_TEMP=os.path.join(work, "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0",
               FAKE_NVIDIA_SMI_STATE=os.path.join(work, "state.json"), FAKE_NVIDIA_SMI_PRESET="H100-80GB x2",
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    cases = (("ping", "ansible.builtin.ping", ""),
             ("gpu_host_facts", "gpu_ops.cluster.gpu_host_facts", "nvidia_smi=%s" % os.path.join(work, "nvidia-smi")),
             ("gpu_host_facts, no nvidia-smi", "gpu_ops.cluster.gpu_host_facts", "nvidia_smi=/nonexistent"))
    measured = {}
    try:
        fake_smi = _replay_nvidia_smi(strict_fake, env, work)
        engine = _engine_ms(fake_smi, env, repeat)  # first: it checks that the replay gives the module its GPUs
        if mode in ("playbook", "both"):
            measured["playbook"] = _rows(cases, _playbook_samples(cases, repeat, env, work))
        if mode in ("adhoc", "both"):
            for _name, module, args in cases:  # warm the disk cache; not counted
                _ansible(module, args, env)
            samples = {name: [] for name, _m, _a in cases}
            for _dummy in range(repeat):
                for name, module, args in cases:
                    samples[name].append(_ansible(module, args, env))
            measured["adhoc"] = _rows(cases, samples)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dict(benchmark="gpu_host_facts", repeat=repeat, goal_over_ping_ms=GOAL_MS, modes=measured,
                load_average=list(os.getloadavg()), engine_in_process_ms=round(engine, 1),
                when=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform()))


TITLES = {"playbook": "Tasks of one ansible-playbook run (task start to result)",
          "adhoc": "Cold `ansible localhost -m <module>` processes"}


def table(result):
    lines = ["load average at the end: %s" % " ".join("%.2f" % v for v in result["load_average"])]
    for mode, rows in result["modes"].items():
        lines += ["", "%s, median of %d (goal: facts <= ping + %d ms)" % (
            TITLES[mode], result["repeat"], result["goal_over_ping_ms"]), ""]
        header = "%-32s %10s %9s %9s %12s" % ("case", "median ms", "min ms", "max ms", "over ping")
        lines += [header, "-" * len(header)]
        for row in rows:
            values = (row["case"], row["median_ms"], row["min_ms"], row["max_ms"], row["over_ping_ms"])
            lines.append("%-32s %10.1f %9.1f %9.1f %12.1f" % values)
    lines += ["", "engine in-process (2 GPUs, replayed nvidia-smi twice): %.1f ms" % result["engine_in_process_ms"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks gpu_host_facts", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=7, help="samples per case; the median is reported")
    parser.add_argument("--mode", choices=("playbook", "adhoc", "both"), default="both",
                        help="one ansible-playbook run, separate ansible processes, or both")
    parser.add_argument("--output", help="JSON file (default benchmarks/results/gpu_host_facts-<time>.json)")
    args = parser.parse_args(argv)
    result = run(args.repeat, args.mode)
    print(table(result))
    print("\nJSON: %s" % os.path.relpath(_paths.save(result, "gpu_host_facts", args.output)))
    over = [r["over_ping_ms"] for rows in result["modes"].values() for r in rows if r["case"] == "gpu_host_facts"]
    return 0 if max(over) <= GOAL_MS else 1
