# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A no-op run of the GKE GPUDirect playbook over a fleet of clusters, against the doubles, per fork count.

Builds an inventory of ``--clusters`` GKE clusters on inventories/fleet's group_vars (half A3 High/TCPX,
half A3 Mega/TCPXO, spread over the layouts' locations), with one GCP double for the project and one
Kubernetes double per cluster (two GPU nodes each). It converges the fleet once, then times
``playbooks/gke_gpudirect.yml`` for each ``--forks`` value, and one cluster alone (``--limit``, one fork) as
the baseline. Every timed run must be a no-op: no mutating cloud request, no changed Kubernetes write.

Reported per run: wall time, wall time per cluster, that cost against the single cluster's run, the CPU
seconds of ansible-playbook and its workers (``RUSAGE_CHILDREN``) and of the doubles (this process), and
the reads per cluster. The NCCL test is off: it runs mpirun through k8s_exec, which the double cannot serve.

Usage: ``python -m benchmarks fleet -- --clusters 50 --forks 5,10,25,50`` (the default; about an hour on
a 2-core machine), or ``--clusters 10 --forks 2,5,10`` for a quick look. Each timed run is printed (and the JSON saved) as it
ends; ``--wait-for FILE`` converges first and starts timing only once FILE exists. ``--mode render`` times render mode
instead (no doubles, nothing read).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import _paths
from benchmarks import _plain

SLOW = True  # not part of a plain ``python -m benchmarks`` (make benchmark): name it
PROJECT = "fleet-project"
# (group, node pool, accelerator, machine type, locations): the two layouts of inventories/fleet/group_vars
LAYOUTS = (("a3_high_tcpx", "a3high-pool", "nvidia-h100-80gb", "a3-highgpu-8g",
            ("us-east4", "europe-west4", "us-central1")),
           ("a3_mega_tcpxo", "a3mega-pool", "nvidia-h100-mega-80gb", "a3-megagpu-8g",
            ("us-central1", "asia-northeast1", "us-east5")))
GPU_NODES = 2


def clusters_of(count):
    """[(host name, layout, location)] for ``count`` clusters, the layouts alternating."""
    fleet = []
    for index in range(count):
        layout = LAYOUTS[index % len(LAYOUTS)]
        locations = layout[4]
        fleet.append(("fleet-%03d" % index, layout, locations[(index // len(LAYOUTS)) % len(locations)]))
    return fleet


def write_inventory(folder, fleet, kubeconfigs=None):
    """The fleet's inventory on inventories/fleet/group_vars; returns its path (JSON is valid YAML)."""
    inventory = os.path.join(folder, "inventory")
    os.makedirs(inventory)
    os.symlink(os.path.join(_paths.ROOT, "inventories", "fleet", "group_vars"), os.path.join(inventory, "group_vars"))
    groups = {}
    for host, layout, location in fleet:
        host_vars = dict(gke_gpu_cluster_location=location, gke_gpu_cluster_node_locations=["%s-c" % location])
        if kubeconfigs:
            host_vars["gpu_ops_kubeconfig"] = kubeconfigs[host]
        groups.setdefault(layout[0], {"hosts": {}})["hosts"][host] = host_vars
    common = dict(ansible_connection="local", ansible_python_interpreter=sys.executable)
    document = {"all": {"children": {"gke_clusters": {"vars": common, "children": groups}}}}
    with open(os.path.join(inventory, "hosts.yml"), "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
    return inventory


def live_vars(gcp):
    """Extra vars of a live run: the GCP double as the account, no kubeconfig written, short waits."""
    return dict(gke_gpudirect_gcp=gcp.module_args(project=PROJECT), gke_gpu_cluster_project=PROJECT,
                gke_gpu_cluster_kubeconfig="", gke_gpudirect_nccl_test=False,
                gke_gpu_cluster_verify_timeout=60, gke_gpu_cluster_verify_delay=1,
                gke_gpu_cluster_network_wait_timeout=60, nri_device_injector_wait_timeout=60,
                nri_device_injector_wait_delay=1, tcpx_installer_wait_timeout=60, tcpx_installer_wait_delay=1,
                tcpxo_installer_wait_timeout=60, tcpxo_installer_wait_delay=1)


def start_doubles(fleet):
    """One GCP double and, per cluster, a Kubernetes double with its GPU nodes."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble
    from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble

    gcp = GcpDouble().start()
    clusters = {}
    for host, (dummy, pool, accelerator, machine_type, dummy_locations), dummy_location in fleet:
        k8s = K8sDouble().start()
        for node in range(GPU_NODES):
            k8s.add_node("gke-%s-%s-%d" % (host, pool, node),
                         labels={"cloud.google.com/gke-nodepool": pool, "cloud.google.com/gke-accelerator": accelerator,
                                 "node.kubernetes.io/instance-type": machine_type},
                         allocatable={"nvidia.com/gpu": "8"},
                         taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
        clusters[host] = k8s
    return gcp, clusters


PING_PLAY = """- name: Baseline - one ping
  hosts: all
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""


def ping_baseline(folder, inventory, host, repeat):
    """The fastest of ``repeat`` one-task ping plays on ``host`` (the cost of starting Ansible and one module)."""
    path = os.path.join(folder, "ping.yml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(PING_PLAY)
    best = None
    for dummy in range(repeat):
        wall, cpu = playbook(folder, inventory, 1, limit=host, path=path)
        if best is None or wall < best["wall_s"]:
            best = dict(wall_s=round(wall, 2), playbook_cpu_s=round(cpu, 2))
    return best


def playbook(folder, inventory, forks, extra=None, limit=None, profile=None, path=None):
    """One ansible-playbook run (it must succeed): wall seconds and CPU seconds of it and its workers.

    With ``profile`` (a file path) the task-profile callback writes where the run's time went into that file.
    """
    args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
            path or os.path.join(_paths.ROOT, "playbooks", "gke_gpudirect.yml"), "--forks", str(forks)]
    if extra:
        extra_file = os.path.join(folder, "extra.json")
        with open(extra_file, "w", encoding="utf-8") as handle:
            json.dump(extra, handle)
        args += ["-e", "@" + extra_file]
    if limit:
        args += ["--limit", limit]
    env = dict(os.environ, HOME=folder, ANSIBLE_COLLECTIONS_PATH=_paths.setup(), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=os.path.join(folder, "tmp"), ANSIBLE_HOST_KEY_CHECKING="False")
    if profile:
        env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(_paths.ROOT, "benchmarks", "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="gpu_ops_task_profile", GPU_OPS_TASK_PROFILE=profile)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-6000:] + proc.stderr[-3000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _clear(gcp, clusters):
    gcp.clear_log()
    for k8s in clusters.values():
        k8s.clear_requests()


def _noop_check(gcp, clusters):
    """Reads of the run per cluster; raises when the run changed anything (a no-op run must not)."""
    cloud_writes = gcp.mutating_requests()
    k8s_writes = [(host, w.kind, w.name) for host, k8s in clusters.items() for w in k8s.writes() if w.changed]
    if cloud_writes or k8s_writes:
        raise SystemExit("not a no-op run: %d cloud writes %s, Kubernetes writes %s" % (
            len(cloud_writes), [(r["method"], r["path"]) for r in cloud_writes[:5]], k8s_writes[:5]))
    return dict(gcp_reads=sum(gcp.read_counts().values()),
                k8s_requests=sum(len(k8s.requests()) for k8s in clusters.values()))


def timed(folder, inventory, forks, count, gcp=None, clusters=None, extra=None, limit=None, repeat=1):
    """The fastest of ``repeat`` runs as a result row (checked to be a no-op when live)."""
    best = None
    for dummy in range(repeat):
        if gcp:
            _clear(gcp, clusters)
        own = _own_cpu()
        wall, cpu = playbook(folder, inventory, forks, extra, limit)
        row = dict(forks=forks, clusters=count, wall_s=round(wall, 2), per_cluster_s=round(wall / count, 3),
                   playbook_cpu_s=round(cpu, 1), doubles_cpu_s=round(_own_cpu() - own, 1))
        if gcp:
            reads = _noop_check(gcp, clusters)
            row.update(gcp_reads_per_cluster=round(reads["gcp_reads"] / count, 1),
                       k8s_requests_per_cluster=round(reads["k8s_requests"] / count, 1))
        if best is None or row["wall_s"] < best["wall_s"]:
            best = row
    return best


def alternating_pairs(folder, inventory, host, gcp, clusters, extra, pairs):
    """``pairs`` one-task ping plays, each followed at once by one cluster's run (checked to be a no-op when live):
    the medians and their ratio. The machine's speed drifts by tens of percent between minutes; a pair is measured
    at one moment, so the ratio of the medians is steadier than that of a ping and a run minutes apart."""
    path = os.path.join(folder, "ping.yml")
    ping, run = [], []
    for dummy in range(pairs):
        ping.append(playbook(folder, inventory, 1, limit=host, path=path))
        row = timed(folder, inventory, 1, 1, gcp, clusters, extra, limit=host)
        run.append((row["wall_s"], row["playbook_cpu_s"]))
    ping_wall, ping_cpu = statistics.median(w for w, c in ping), statistics.median(c for w, c in ping)
    run_wall, run_cpu = statistics.median(w for w, c in run), statistics.median(c for w, c in run)
    return dict(pairs=pairs, ping_wall_s=round(ping_wall, 2), ping_cpu_s=round(ping_cpu, 2), run_wall_s=round(run_wall, 2),
                run_cpu_s=round(run_cpu, 2), vs_ping_wall=round(run_wall / ping_wall, 2),
                vs_ping_cpu=round(run_cpu / max(ping_cpu, 0.01), 2))


def plain_pairs(folder, inventory, host, gcp, clusters, extra, pairs):
    """``pairs`` rounds of the ping play, the same no-op written the plain way (benchmarks/_plain.py) and one cluster's
    run, one after the other: the medians and the ratios. The plain play is rendered from the collection's own render
    of ``host``; a plain run that changes anything is reported, not refused (its apply may patch what ours leaves)."""
    render_dir = os.path.join(folder, "plain-render")
    playbook(folder, inventory, 1, dict(extra, gpu_ops_render_dir=render_dir), limit=host)
    token = extra["gke_gpudirect_gcp"]["access_token"]
    plain_path = _plain.write(folder, render_dir, gcp.url, token, clusters[host].kubeconfig)
    ping_path = os.path.join(folder, "ping.yml")
    ping, plain, ours, plain_writes = [], [], [], 0
    for dummy in range(pairs):
        ping.append(playbook(folder, inventory, 1, limit=host, path=ping_path))
        _clear(gcp, clusters)
        plain.append(playbook(folder, inventory, 1, limit=host, path=plain_path))
        plain_writes = max(plain_writes, len([w for w in clusters[host].writes() if w.changed]) + len(gcp.mutating_requests()))
        row = timed(folder, inventory, 1, 1, gcp, clusters, extra, limit=host)
        ours.append((row["wall_s"], row["playbook_cpu_s"]))

    def median(runs, index):
        return statistics.median(run[index] for run in runs)

    result = dict(pairs=pairs, plain_tasks=len(_plain.play(render_dir, gcp.url, token, "k")[0]["tasks"]),
                  plain_changed_writes=plain_writes)
    for name, runs in (("ping", ping), ("plain", plain), ("ours", ours)):
        result["%s_wall_s" % name], result["%s_cpu_s" % name] = round(median(runs, 0), 2), round(median(runs, 1), 2)
    result.update(ours_vs_ping_cpu=round(result["ours_cpu_s"] / max(result["ping_cpu_s"], 0.01), 2),
                  ours_vs_plain_cpu=round(result["ours_cpu_s"] / max(result["plain_cpu_s"], 0.01), 2),
                  ours_vs_plain_wall=round(result["ours_wall_s"] / max(result["plain_wall_s"], 0.01), 2),
                  plain_vs_ping_cpu=round(result["plain_cpu_s"] / max(result["ping_cpu_s"], 0.01), 2))
    return result


def summarize_profile(document, top=25):
    """The per-task profile of one run: totals, executions per action, the ``top`` tasks by wall time."""
    tasks = document["tasks"]
    actions = {}
    for entry in tasks:
        row = actions.setdefault(entry["action"], dict(action=entry["action"], tasks=0, executions=0, wall_s=0.0))
        row["tasks"] += 1
        row["executions"] += entry["executions"]
        row["wall_s"] = round(row["wall_s"] + entry["wall_s"], 3)
    return dict(run_wall_s=document["run_wall_s"], task_starts=sum(e["starts"] for e in tasks),
                executions=sum(e["executions"] for e in tasks), skipped=sum(e["skipped"] for e in tasks),
                tasks_wall_s=round(sum(e["wall_s"] for e in tasks), 3),
                actions=sorted(actions.values(), key=lambda row: -row["wall_s"]), top=tasks[:top])


def profile_single(folder, inventory, host, gcp, clusters, extra):
    """One more no-op run of ``host`` alone with the task-profile callback (not timed: the callback costs a little)."""
    path = os.path.join(folder, "profile.json")
    if gcp:
        _clear(gcp, {host: clusters[host]})
    playbook(folder, inventory, 1, extra, limit=host, profile=path)
    if gcp:
        _noop_check(gcp, {host: clusters[host]})
    with open(path, encoding="utf-8") as handle:
        return summarize_profile(json.load(handle))


def profile_table(profile):
    """Where one cluster's no-op run spends its time, as text."""
    lines = ["per-task profile of one cluster's run: %.1f s wall, %d task starts, %d executions, %d skips" % (
        profile["run_wall_s"], profile["task_starts"], profile["executions"], profile["skipped"]),
        "%-34s %6s %11s %8s" % ("action", "tasks", "executions", "wall s")]
    for row in profile["actions"]:
        lines.append("%-34s %6d %11d %8.2f" % (row["action"][-34:], row["tasks"], row["executions"], row["wall_s"]))
    lines.append("slowest tasks (role | task | action):")
    for entry in profile["top"][:15]:
        lines.append("  %6.2f s  x%-3d %s" % (entry["wall_s"], entry["executions"], entry["task"][:110]))
    return "\n".join(lines)


def _progress(text):
    print(text, flush=True)


def _wait_for(path):
    """Hold the converged fleet until ``path`` exists (converge while the machine is busy, time once it is idle)."""
    _progress("converged; the timed runs start once %s exists" % path)
    while not os.path.exists(path):
        time.sleep(5)


def measure(count, forks_list, repeat, mode, wait_for=None, partial=None, pairs=0, plain=0):
    """The benchmark's result; ``partial(result)`` is called after each timed run (a long run killed keeps its rows)."""
    folder = tempfile.mkdtemp(prefix="gpo-fleet-")
    fleet = clusters_of(count)
    gcp, clusters = (None, None)
    try:
        if mode == "live":
            gcp, clusters = start_doubles(fleet)
            inventory = write_inventory(folder, fleet, {host: k8s.kubeconfig for host, k8s in clusters.items()})
            extra = live_vars(gcp)
            started = time.perf_counter()
            playbook(folder, inventory, max(forks_list), extra)
            converge_s = time.perf_counter() - started
            _progress("first converge of %d clusters: %.0f s (load %.1f)" % (count, converge_s, os.getloadavg()[0]))
        else:
            # render mode only from the command line (-e), as for a user: one folder per cluster
            inventory, converge_s = write_inventory(folder, fleet), None
            extra = {"gpu_ops_render_dir": "%s/render/{{ inventory_hostname }}" % folder}
        if wait_for:
            _wait_for(wait_for)
        result = dict(mode=mode, clusters=count, converge_s=converge_s and round(converge_s, 1), runs=[],
                      repeat=repeat, cpus=os.cpu_count(), python=platform.python_version(),
                      load_before=os.getloadavg()[0], machine=platform.machine(), system=platform.platform())
        result["single"] = timed(folder, inventory, 1, 1, gcp, clusters and {fleet[0][0]: clusters[fleet[0][0]]},
                                 extra, limit=fleet[0][0], repeat=repeat)
        _progress("one cluster alone: %s" % json.dumps(result["single"]))
        result["ping"] = ping_baseline(folder, inventory, fleet[0][0], max(repeat, 3))
        result["single"]["vs_ping_wall"] = round(result["single"]["wall_s"] / result["ping"]["wall_s"], 1)
        result["single"]["vs_ping_cpu"] = round(result["single"]["playbook_cpu_s"] / max(result["ping"]["playbook_cpu_s"], 0.01), 1)
        _progress("one-task ping play: %s; one cluster alone = %sx its wall, %sx its CPU" % (
            json.dumps(result["ping"]), result["single"]["vs_ping_wall"], result["single"]["vs_ping_cpu"]))
        if pairs:
            result["pairs"] = alternating_pairs(folder, inventory, fleet[0][0], gcp,
                                                clusters and {fleet[0][0]: clusters[fleet[0][0]]}, extra, pairs)
            _progress("%d alternating pairs (ping play, one cluster), medians: %s" % (pairs, json.dumps(result["pairs"])))
        if plain and gcp:
            result["plain"] = plain_pairs(folder, inventory, fleet[0][0], gcp,
                                          {fleet[0][0]: clusters[fleet[0][0]]}, extra, plain)
            _progress("%d rounds (ping play, plain play, one cluster), medians: %s" % (plain, json.dumps(result["plain"])))
        result["profile"] = profile_single(folder, inventory, fleet[0][0], gcp, clusters, extra)
        _progress(profile_table(result["profile"]))
        for forks in forks_list:
            row = timed(folder, inventory, forks, count, gcp, clusters, extra, repeat=repeat)
            row["vs_single"] = round(row["per_cluster_s"] / result["single"]["wall_s"], 3)
            row["per_cluster_vs_ping"] = round(row["per_cluster_s"] / result["ping"]["wall_s"], 2)
            row["load_after"] = round(os.getloadavg()[0], 2)
            result["runs"].append(row)
            _progress("forks %d: %s" % (forks, json.dumps(row)))
            if partial:
                partial(result)
        return result
    finally:
        if gcp:
            gcp.stop()
            for k8s in clusters.values():
                k8s.stop()
        shutil.rmtree(folder, ignore_errors=True)


def table(result):
    single = result["single"]
    lines = ["%d clusters, %s mode, %d CPUs; one cluster alone: %.2f s wall, %.1f s CPU" % (
        result["clusters"], result["mode"], result["cpus"], single["wall_s"], single["playbook_cpu_s"])]
    if result["converge_s"]:
        lines[0] += "; first converge of the fleet: %.0f s" % result["converge_s"]
    if result.get("ping"):
        lines.append("one-task ping play: %.2f s wall, %.2f s CPU; one cluster alone = %.1fx its wall, %.1fx its CPU" % (
            result["ping"]["wall_s"], result["ping"]["playbook_cpu_s"], single["vs_ping_wall"], single["vs_ping_cpu"]))
    if result.get("pairs"):
        pairs = result["pairs"]
        lines.append("%d alternating pairs, medians: ping play %.2f s wall / %.2f s CPU, one cluster %.2f s / %.2f s = %.1fx its "
                     "wall, %.1fx its CPU" % (pairs["pairs"], pairs["ping_wall_s"], pairs["ping_cpu_s"], pairs["run_wall_s"],
                                              pairs["run_cpu_s"], pairs["vs_ping_wall"], pairs["vs_ping_cpu"]))
    if result.get("plain"):
        plain = result["plain"]
        lines.append("%d rounds, medians: ping play %.2f s CPU, plain play (%d tasks) %.2f s wall / %.2f s CPU, one cluster "
                     "%.2f s / %.2f s = %.2fx the ping play's CPU, %.2fx the plain play's CPU (%.2fx its wall)" % (
                         plain["pairs"], plain["ping_cpu_s"], plain["plain_tasks"], plain["plain_wall_s"], plain["plain_cpu_s"],
                         plain["ours_wall_s"], plain["ours_cpu_s"], plain["ours_vs_ping_cpu"], plain["ours_vs_plain_cpu"],
                         plain["ours_vs_plain_wall"]))
    lines.append("%6s %9s %13s %20s %14s %16s %15s %12s" % ("forks", "wall s", "s / cluster", "per cluster / single",
                                                            "/ ping wall", "playbook CPU s", "doubles CPU s", "reads / cl."))
    for row in result["runs"]:
        lines.append("%6d %9.1f %13.3f %20.3f %14.2f %16.1f %15.1f %12s" % (
            row["forks"], row["wall_s"], row["per_cluster_s"], row["vs_single"], row["per_cluster_vs_ping"], row["playbook_cpu_s"],
            row["doubles_cpu_s"], row.get("gcp_reads_per_cluster", "-")))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks fleet", description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--forks", default="5,10,25,50", help="comma-separated fork counts")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting; the fastest counts")
    parser.add_argument("--mode", choices=("live", "render"), default="live")
    parser.add_argument("--pairs", type=int, default=0,
                        help="also time this many alternating pairs of a ping play and one cluster's run (their medians)")
    parser.add_argument("--plain", type=int, default=0,
                        help="also time this many rounds of a ping play, the same no-op written the plain way "
                             "(benchmarks/_plain.py) and one cluster's run (their medians); live mode only")
    parser.add_argument("--output", help="JSON file (default benchmarks/results/fleet-<time>.json)")
    parser.add_argument("--wait-for", metavar="FILE",
                        help="after the first converge, wait until FILE exists before the timed runs")
    args = parser.parse_args(argv)
    _paths.setup()
    output = args.output or os.path.join(_paths.RESULTS, "fleet-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    result = measure(args.clusters, [int(f) for f in args.forks.split(",") if f], max(1, args.repeat), args.mode,
                     args.wait_for, lambda partial: _paths.save(partial, "fleet", output), max(0, args.pairs),
                     max(0, args.plain))
    print(table(result))
    print("\nJSON: %s" % os.path.relpath(_paths.save(result, "fleet", output)))
    return 0
