# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gke_multinetwork in real ansible-playbook runs against the GCP double.

The module reaches the double through ``compute_endpoint`` / ``container_endpoint`` and an access token set
with ``module_defaults`` on the ``group/gpu_ops.cluster.gcp`` action group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gpudirect
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT, collections_path

NICS = gpudirect.profile("tcpxo")["gpu_nic_count"]
FABRIC = dict(cluster="a3mega", location="us-central1", gpudirect="tcpxo")


def play(tasks, defaults):
    return [dict(name="GPU NIC fabric", hosts="localhost", gather_facts=False, module_defaults=defaults,
                 tasks=tasks)]


def fabric_task(name, register=None, **options):
    task = {"name": name, "gpu_ops.cluster.gke_multinetwork": dict(FABRIC, **options)}
    if register:
        task["register"] = register
    return task


def counts(double):
    state = double.state(GCP_PROJECT)
    return len(state["networks"]), len(state["subnetworks"]), len(state["firewalls"])


def test_create_rerun_and_remove(run_playbook, gcp_double, gcp_defaults):
    tasks = [
        fabric_task("create", register="created"),
        fabric_task("again", register="again"),
        {"name": "check", "ansible.builtin.assert": {"that": [
            "created is changed",
            "again is not changed",
            "created.additional_node_networks | length == %d" % NICS,
            "created.manifests | selectattr('kind', 'equalto', 'Network') | map(attribute='metadata.name') | list"
            " == created.k8s_network_names",
            "created.pod_annotations['networking.gke.io/interfaces'] | from_json | length == %d" % (NICS + 1),
        ]}},
    ]
    result = run_playbook(play(tasks, gcp_defaults)).assert_ok()
    assert [r["task"] for r in result.changed] == ["create"]
    assert counts(gcp_double) == (NICS, NICS, NICS)
    # both runs read each resource once; only the first one changed anything, after one read of the region
    reads = gcp_double.read_counts()
    region = [path for path in reads if "/regions/" in path and "/subnetworks/" not in path]
    assert len(region) == 1 and reads.pop(region[0]) == 1
    assert len(reads) == 3 * NICS and set(reads.values()) == {2}
    assert len(gcp_double.mutating_requests()) == 3 * NICS

    result = run_playbook(play([fabric_task("remove", state="absent")], gcp_defaults)).assert_ok()
    assert [r["task"] for r in result.changed] == ["remove"]
    assert counts(gcp_double) == (0, 0, 0)


def test_faulted_run_then_clean_rerun_converges(run_playbook, gcp_double, gcp_defaults):
    base = gcp_double.url
    faults = [
        {"kind": "429", "method": "POST", "path": "/global/networks$", "count": 3, "retry_after": 0},
        {"kind": "503", "method": "GET", "path": "/subnetworks/", "count": 4},
        {"kind": "reset", "method": "POST", "path": "/regions/.*/subnetworks$", "count": 2},
        # the third firewall insert ends in an error: the run fails half-way
        {"kind": "op_error", "method": "POST", "path": "/global/firewalls$", "count": 1, "skip": 2,
         "message": "Quota 'FIREWALLS' exceeded."},
    ]
    _control(base, "POST", "_double/faults", faults)
    result = run_playbook(play([fabric_task("faulted")], gcp_defaults)).assert_failed()
    message = result.task("faulted")["result"]["msg"]
    assert "create firewall" in message and "Quota 'FIREWALLS' exceeded." in message
    assert _control(base, "GET", "_double/faults")["faults"] == []
    assert counts(gcp_double) == (NICS, NICS, NICS - 1)

    result = run_playbook(play([fabric_task("clean", register="clean")], gcp_defaults)).assert_ok()
    assert [c["kind"] for c in result.task("clean")["result"]["changes"]] == ["firewall"]
    _assert_exact_fabric(gcp_double)


def test_killed_run_converges_on_rerun(run_playbook, gcp_double, gcp_defaults, tmp_path):
    """SIGKILL ansible-playbook while the networks are being created; the re-run finishes the job."""
    gcp_double.set_latency(6.0)  # long enough that the re-run meets the inserts still running
    playbook = tmp_path / "killed.yml"
    playbook.write_text(json.dumps(play([fabric_task("killed")], gcp_defaults)), encoding="utf-8")
    marker = "gpu-ops-killed-run-%d-%d" % (os.getpid(), time.monotonic_ns())
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_HOME=str(tmp_path / "home"), GPU_OPS_TEST_MARKER=marker)
    process = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            inserts = [r for r in gcp_double.requests if r["method"] == "POST" and r["path"].endswith("/networks")]
            if len(inserts) == NICS:
                break
            time.sleep(0.05)
        assert len(inserts) == NICS, "the run never got to the network inserts"
    finally:
        # ansible's task workers start their own sessions: kill every process of this run, found by its marker
        killed = _kill_marked(marker)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL and len(killed) >= 2  # the playbook and the module at least
    assert _kill_marked(marker) == []
    assert counts(gcp_double) == (0, 0, 0)  # nothing finished yet: the inserts are still running

    gcp_double.set_latency(0.05)
    result = run_playbook(play([fabric_task("rerun", register="rerun")], gcp_defaults)).assert_ok()
    conflicts = [r for r in gcp_double.requests if r["status"] == 409]
    assert len(conflicts) == NICS, "each network insert of the killed run is met once with 409"
    assert result.task("rerun")["result"]["changed"]
    _assert_exact_fabric(gcp_double)


def test_verbose_output_never_shows_the_token(run_playbook, gcp_double, gcp_defaults):
    gcp_double.inject("503", method="GET", count=2)
    result = run_playbook(play([fabric_task("verbose", mtu=1500), fabric_task("bad", mtu=20000)], gcp_defaults),
                          verbosity=3, diff=True)
    assert result.rc != 0 and "1300-8896" in result.task("bad")["result"]["msg"]
    assert "a3mega-gpunic-1" in result.stdout  # the verbose diff was printed: the check below is not vacuous
    for text in (result.stdout, result.stderr):
        assert gcp_double.token not in text
    assert counts(gcp_double) == (NICS, NICS, NICS)


def _assert_exact_fabric(double):
    state = double.state(GCP_PROJECT)
    assert counts(double) == (NICS, NICS, NICS)
    expected = ["a3mega-gpunic-%d" % i for i in range(1, NICS + 1)]
    assert sorted(n["name"] for n in state["networks"]) == sorted(expected)
    assert sorted(s["name"] for s in state["subnetworks"]) == sorted(e + "-sub" for e in expected)
    assert sorted(f["name"] for f in state["firewalls"]) == sorted(e + "-internal" for e in expected)
    assert {n["mtu"] for n in state["networks"]} == {gpudirect.DEFAULT_MTU}
    ranges = sorted(s["ipCidrRange"] for s in state["subnetworks"])
    assert len(set(ranges)) == NICS


def _kill_marked(marker):
    """SIGKILL the processes (started by this test) whose environment carries ``marker``; their pids."""
    needle = ("GPU_OPS_TEST_MARKER=%s" % marker).encode()
    killed = []
    for dummy in range(50):
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % entry, "rb") as handle:
                    if needle in handle.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        alive = []
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                alive.append(pid)
            except ProcessLookupError:
                continue
        killed.extend(p for p in alive if p not in killed)
        if not alive:
            break
        time.sleep(0.05)
    return killed


def _control(base, method, path, body=None):
    import requests  # pylint: disable=import-outside-toplevel

    response = requests.request(method, base + path, json=body, timeout=10)
    response.raise_for_status()
    return response.json()


def test_rdma_a4x_fabric_cluster_and_pool_create_rerun_refuse_and_remove(run_playbook, gcp_double, gcp_defaults):
    """The RDMA path end to end on the cloud side: fabric -> cluster -> pool; a re-run changes nothing; a PD boot
    disk on A4X and an RDMA pool outside the RoCE zone are refused before any request; teardown in reverse."""
    zone = "us-central1-b"
    fabric = dict(cluster="a4x", location="us-central1", zone=zone, gpudirect="rdma-a4x")
    cluster = dict(name="a4x", location="us-central1", node_locations=[zone], cluster_version="1.32.2-gke.1489001",
                   gpudirect="rdma-a4x")
    pool = dict(provider="gke", cluster="a4x", location="us-central1", name="gpu", machine_type="a4x-highgpu-4g",
                gpudirect="rdma-a4x", node_count=1, node_locations=[zone], gpu_driver_version="latest",
                placement_policy=dict(type="COMPACT"), reservation_affinity=dict(consume="specific", reservation="r1"),
                additional_node_networks="{{ net.additional_node_networks }}")
    tasks = [
        {"name": "fabric", "gpu_ops.cluster.gke_multinetwork": fabric, "register": "net"},
        {"name": "cluster", "gpu_ops.cluster.gke_cluster": cluster},
        {"name": "pool", "gpu_ops.cluster.gpu_nodepool": pool, "register": "created"},
        {"name": "fabric again", "gpu_ops.cluster.gke_multinetwork": fabric, "register": "net_again"},
        {"name": "pool again", "gpu_ops.cluster.gpu_nodepool": pool, "register": "again"},
        {"name": "pd boot disk", "gpu_ops.cluster.gpu_nodepool": dict(pool, name="pd", disk_type="pd-balanced"),
         "register": "pd", "ignore_errors": True},
        {"name": "other zone", "gpu_ops.cluster.gpu_nodepool": dict(pool, name="moved", node_locations=["us-central1-c"]),
         "register": "moved", "ignore_errors": True},
        {"name": "check", "ansible.builtin.assert": {"that": [
            "created is changed and net_again is not changed and again is not changed",
            "net.additional_node_networks | length == 5",
            "pd is failed and 'takes Hyperdisk only' in pd.msg",
            "moved is failed and 'restricted to zone us-central1-b' in moved.msg",
        ]}},
    ]
    gcp_double.clear_log()
    result = run_playbook(play(tasks, gcp_defaults)).assert_ok()
    assert [r["task"] for r in result.changed] == ["fabric", "cluster", "pool"]
    assert counts(gcp_double) == (2, 5, 1)
    creates = [r for r in gcp_double.mutating_requests() if r["path"].endswith("/nodePools")]
    assert len(creates) == 1 and creates[0]["body"]["nodePool"]["config"]["diskType"] == "hyperdisk-balanced"

    teardown = [
        {"name": "pool", "gpu_ops.cluster.gpu_nodepool": dict(
            provider="gke", cluster="a4x", location="us-central1", name="gpu", state="absent")},
        {"name": "fabric", "gpu_ops.cluster.gke_multinetwork": dict(fabric, state="absent")},
    ]
    gcp_double.clear_log()
    run_playbook(play(teardown, gcp_defaults)).assert_ok()
    assert counts(gcp_double) == (0, 0, 0)
