# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One cluster's preflight + deployment + conformance validation (``playbooks/validate.yml``) against the Kubernetes
double: wall time, CPU, and the requests it sends (goal: under 15 s, one list call per kind read, no write).

The cluster: ``--nodes`` GPU nodes (A100 40GB, MIG ``all-1g.5gb``, mixed strategy) and one CPU node, the GPU Operator's
driver and device plugin DaemonSets (the double's controller runs their pods on every GPU node), a ready ClusterPolicy
and ``--pods`` workload pods requesting MIG devices. Also timed: the checks alone, in-process, on the snapshot the run
wrote (and on that snapshot scaled to ``--scale`` times the nodes and pods).

Usage: ``python -m benchmarks validate -- --nodes 16 --pods 64 --repeat 3``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import _paths

GOAL_S = 15.0
LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/mig.config": "all-1g.5gb",
          "nvidia.com/mig.config.state": "success", "nvidia.com/mig.strategy": "mixed"}
POLICY_PARTS = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "gfd", "nodeStatusExporter", "operator", "toolkit")


def _daemonset(name, image):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "gpu-operator", "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                "nodeSelector": {"nvidia.com/gpu.present": "true"}, "containers": [{"name": name, "image": image}]}}}}


def seed(k8s, nodes, pods):
    for index in range(nodes):
        k8s.add_node("dgx-%02d" % index, labels=LABELS, allocatable={"nvidia.com/mig-1g.5gb": "56"})
    k8s.add_node("cpu-0")
    k8s.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
    k8s.put(_daemonset("nvidia-driver-daemonset", "nvcr.io/nvidia/driver:550.127.08"))
    k8s.put(_daemonset("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"))
    k8s.put({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
             "spec": dict({k: {} for k in POLICY_PARTS}, driver={"enabled": True}, mig={"strategy": "mixed"})})
    k8s.set_status("ClusterPolicy", "cluster-policy", {"state": "ready"})
    for index in range(pods):
        k8s.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job-%03d" % index, "namespace": "ml"},
                 "spec": {"containers": [{"name": "t", "image": "pytorch", "resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}}}]}})


def run_playbook(folder, k8s):
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
            os.path.join(_paths.ROOT, "playbooks", "validate.yml"), "-e", "ansible_python_interpreter=%s" % sys.executable,
            "-e", "validate_clusters=localhost", "-e", "validate_hosts=none", "-e", "validate_output_dir=%s" % folder]
    env = dict(os.environ, HOME=folder, ANSIBLE_COLLECTIONS_PATH=_paths.setup(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=os.path.join(folder, "tmp"), **k8s.env())
    before_requests = len(k8s.requests())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-6000:] + proc.stderr[-3000:]))
    requests = k8s.requests()[before_requests:]
    lists = sorted(r.kind for r in requests if r.verb == "list")
    return dict(wall_s=round(wall, 2), cpu_s=round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
                requests=len(requests), lists=lists, discovery=sum(1 for r in requests if r.verb == "discovery"),
                mutating=sum(1 for r in requests if r.mutating))


def _scaled(snapshot, factor):
    """The snapshot with every GPU node and pod repeated ``factor`` times (renamed)."""
    big = copy.deepcopy(snapshot)
    k8s = big["kubernetes"]
    nodes, pods = list(k8s["nodes"]), list(k8s["pods"])
    for copy_index in range(1, factor):
        for node in nodes:
            extra = copy.deepcopy(node)
            extra["metadata"]["name"] += "-x%d" % copy_index
            k8s["nodes"].append(extra)
        for pod in pods:
            extra = copy.deepcopy(pod)
            extra["metadata"]["name"] += "-x%d" % copy_index
            if extra["spec"].get("nodeName"):
                extra["spec"]["nodeName"] += "-x%d" % copy_index
            k8s["pods"].append(extra)
    return big


def time_engine(snapshot, repeat):
    from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite  # pylint: disable=import-outside-toplevel
    samples = []
    for _index in range(repeat):
        started = time.perf_counter()
        result = suite.validate(snapshot)
        samples.append((time.perf_counter() - started) * 1000.0)
    return round(statistics.median(samples), 1), result["summary"]


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks validate")
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--pods", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=int, default=32, help="engine only: the snapshot's nodes and pods times this")
    parser.add_argument("--output", help="JSON file (default benchmarks/results/validate-<time>.json)")
    options = parser.parse_args(argv)
    _paths.setup()
    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble  # pylint: disable=import-outside-toplevel
    k8s = K8sDouble().start()
    runs = []
    try:
        seed(k8s, options.nodes, options.pods)
        with tempfile.TemporaryDirectory(prefix="gpu_ops-validate-bench-") as folder:
            for _index in range(options.repeat):
                runs.append(run_playbook(folder, k8s))
            with open(os.path.join(folder, "localhost", "snapshot.json"), encoding="utf-8") as handle:
                snapshot = json.load(handle)
    finally:
        k8s.stop()
    engine_ms, summary = time_engine(snapshot, 5)
    big_ms, big_summary = time_engine(_scaled(snapshot, options.scale), 3)
    walls = [r["wall_s"] for r in runs]
    scaled = dict(factor=options.scale, nodes=len(snapshot["kubernetes"]["nodes"]) * options.scale, engine_ms=big_ms, summary=big_summary)
    result = dict(nodes=options.nodes, pods=options.pods, runs=runs, wall_median_s=statistics.median(walls),
                  goal_s=GOAL_S, engine_ms=engine_ms, summary=summary, scaled=scaled, load=os.getloadavg())
    print("| run | wall | CPU | list calls (kinds) | discovery | writes |")
    print("| --- | --- | --- | --- | --- | --- |")
    for index, run in enumerate(runs, 1):
        kinds = ", ".join(run["lists"])
        row = (index, run["wall_s"], run["cpu_s"], len(run["lists"]), kinds, run["discovery"], run["mutating"])
        print("| %d | %.2f s | %.2f s | %d (%s) | %d | %d |" % row)
    print("checks alone: %.1f ms (%d GPU nodes, %d checks: %d passed); scaled x%d: %.1f ms" % (
        engine_ms, options.nodes, summary["tests"], summary["passed"], options.scale, big_ms))
    print("load average %.1f %.1f %.1f; goal %.0f s: %s" % (result["load"] + (GOAL_S, "met" if max(walls) < GOAL_S else "NOT met")))
    print("written: %s" % _paths.save(result, "validate", options.output))
    ok = max(walls) < GOAL_S and all(r["mutating"] == 0 and len(r["lists"]) == len(set(r["lists"])) for r in runs)
    return 0 if ok else 1
