# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller-side cost per host of one slice of the sliced "Validate GPU hosts" AWX job, and of its merge node.

One slice is ``playbooks/validate.yml -e validate_scope=hosts`` on the slice's hosts. Here every host is this machine
(``ansible_connection=local``) with the replay of the strict fake nvidia-smi of benchmarks/gpu_host_facts.py (two H100s),
so what is timed is the controller's work per host - fork, module transfer, gpu_host_facts, the checks, three report
files - and not SSH or a real nvidia-smi. The slice runs once with one host and once with ``--hosts`` hosts; the cost
per host is the difference over the extra hosts (wall and CPU seconds of ansible-playbook and its workers). Then the
merge node (``playbooks/validate_merge.yml``) runs on the reports the slice wrote: its cost per report.

Usage: ``python -m benchmarks awx_slice -- --hosts 20 --forks 5``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks import _paths
from benchmarks.gpu_host_facts import _replay_nvidia_smi

SLOW = True


def _run(playbook, inventory, extra, env, forks):
    binary = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    command = [binary, "-i", inventory, os.path.join(_paths.ROOT, "playbooks", playbook), "-f", str(forks),
               "-e", json.dumps(extra)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return dict(wall_s=round(wall, 2), cpu_s=round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2),
                rc=proc.returncode, tail=proc.stdout[-1500:] + proc.stderr[-1500:])


def _inventory(work, count):
    path = os.path.join(work, "hosts-%d.json" % count)
    hosts = {"gpu-%04d" % i: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable} for i in range(count)}
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"all": {"children": {"gpu_hosts": {"hosts": hosts}}}}, handle)
    return path


def run(hosts=20, forks=5):
    collections = _paths.setup()
    work = tempfile.mkdtemp(prefix="bench-slice-")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_HOME=os.path.join(work, "home"),
               ANSIBLE_LOCAL_TEMP=os.path.join(work, "tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0",
               ANSIBLE_HOST_KEY_CHECKING="0", FAKE_NVIDIA_SMI_STATE=os.path.join(work, "state.json"),
               FAKE_NVIDIA_SMI_PRESET="H100-80GB x2", PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    try:
        smi = _replay_nvidia_smi(os.path.join(_paths.ROOT, "tests", "fakes", "nvidia-smi"), env, work)
        runs = {}
        for count in (1, hosts):
            out = os.path.join(work, "reports-%d" % count)
            extra = dict(validate_scope="hosts", validate_become=False, validate_nvidia_smi=smi, validate_output_dir=out)
            runs[count] = _run("validate.yml", _inventory(work, count), extra, env, forks)
            written = len([d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "ctrf.json"))]) if os.path.isdir(out) else 0
            if written != count:
                raise SystemExit("the slice of %d hosts wrote %d reports:\n%s" % (count, written, runs[count]["tail"]))
        reports = os.path.join(work, "reports-%d" % hosts)
        merge = _run("validate_merge.yml", _inventory(work, 1), dict(validate_output_dir=reports, validate_fail=False), env, forks)
        if merge["rc"] != 0:
            raise SystemExit("the merge failed:\n%s" % merge["tail"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    extra_hosts = max(hosts - 1, 1)
    per_host = dict(wall_s=round((runs[hosts]["wall_s"] - runs[1]["wall_s"]) / extra_hosts, 3),
                    cpu_s=round((runs[hosts]["cpu_s"] - runs[1]["cpu_s"]) / extra_hosts, 3))
    return dict(benchmark="awx_slice", hosts=hosts, forks=forks, one_host=runs[1], slice=runs[hosts], per_host=per_host,
                merge=merge, merge_per_report_ms=round(merge["wall_s"] * 1000.0 / hosts, 1),
                load_average=list(os.getloadavg()), when=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=dict(python=platform.python_version(), cpus=os.cpu_count(), platform=platform.platform()))


def table(result):
    lines = ["| run | wall s | CPU s |", "| --- | --- | --- |"]
    for label, key in (("slice of 1 host", "one_host"), ("slice of %d hosts" % result["hosts"], "slice"),
                       ("per extra host", "per_host"), ("merge of %d reports" % result["hosts"], "merge")):
        lines.append("| %s | %s | %s |" % (label, result[key]["wall_s"], result[key]["cpu_s"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks awx_slice")
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--forks", type=int, default=5)
    args = parser.parse_args(argv)
    result = run(args.hosts, args.forks)
    print(table(result))
    print("saved", _paths.save(result, "awx_slice"))
    return 0
