# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/validate.yml's health phase against the Kubernetes double: two 8-GPU H100 nodes of a GPU Operator
cluster with its standalone DCGM host engine; one probe pod per node and probe (DCGM diagnostics, nvbandwidth, NCCL
loopback) runs to completion, its log is judged, and every probe pod is gone after the run - after one that passes,
one where a GPU fails, and one where the API refuses a probe. A DCGM burn-in level without the burn-in option is
refused before anything is read. The tools' outputs are the unit tests' written-out fixtures.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

PLAYBOOK = str(REPO_ROOT / "playbooks" / "validate.yml")
OUTPUTS = Path(__file__).resolve().parents[1] / "unit/plugins/plugin_utils/_perf/fixtures"
MODEL = "NVIDIA-H100-80GB-HBM3"
IDS = ("health.dcgm_diag", "health.nvbandwidth", "health.nccl_loopback")
DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:3.3.7-1-ubuntu22.04"
PROBE_IMAGE = "registry.example.com/gpu-probe:12.4"


def _output(*parts):
    return (OUTPUTS / Path(*parts)).read_text(encoding="utf-8")


def _seed(k8s, dcgm=True):
    for name in ("gpu-0", "gpu-1"):
        k8s.add_node(name, labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": MODEL},
                     allocatable={"nvidia.com/gpu": "8"})
    if dcgm:
        k8s.put({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "nvidia-dcgm", "namespace": "gpu-operator"},
                 "spec": {"selector": {"matchLabels": {"app": "nvidia-dcgm"}},
                          "template": {"metadata": {"labels": {"app": "nvidia-dcgm"}},
                                       "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.dcgm": "true"},
                                                "containers": [{"name": "nvidia-dcgm-ctr", "image": DCGM_IMAGE}]}}}})
    k8s.script_pod(r"^vhealth-[0-9a-f]{8}-dcgm-\d+$", logs={"probe": _output("dcgm", "level1_pass.json")})
    k8s.script_pod(r"^vhealth-[0-9a-f]{8}-nvb-\d+$", logs={"probe": _output("nvbandwidth", "h100x8_pass.json")})
    k8s.script_pod(r"^vhealth-[0-9a-f]{8}-nccl-\d+$", logs={"probe": _output("nccl_loopback", "h100x8_pass.txt")})


def _run(run_playbook, k8s, out, **extra):
    extra_vars = dict(validate_clusters="localhost", validate_hosts="no-such-group", validate_output_dir=str(out),
                      validate_phases=["health"], validate_health_timeout=30, validate_health_probe_image=PROBE_IMAGE,
                      validate_health_nvbandwidth_floors={MODEL: {"host_to_device_memcpy_ce": 50, "device_to_host_memcpy_ce": 50,
                                                                  "device_to_device_memcpy_read_ce": 300}},
                      validate_health_nccl_loopback_floors={MODEL: 300})
    extra_vars.update(extra)
    return run_playbook(PLAYBOOK, extra_vars=extra_vars, env=k8s.env())


def _tests(out):
    return dict((t["name"], t) for t in json.loads((out / "localhost" / "ctrf.json").read_text())["results"]["tests"])


def _created(k8s):
    return dict((w.name, json.loads(w.body)) for w in k8s.writes() if w.verb == "create" and w.kind == "Pod" and not w.subresource)


def _assert_labelled_and_gone(k8s):
    pods = _created(k8s)
    assert pods and all(name.startswith("vhealth-") for name in pods), sorted(pods)
    run_ids = set(name.split("-")[1] for name in pods)
    assert len(run_ids) == 1, sorted(pods)
    instance = "vhealth-%s" % run_ids.pop()
    for pod in pods.values():
        labels = pod["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpu_ops.cluster", labels
        assert labels["app.kubernetes.io/instance"] == instance, labels
    deleted = set(w.name for w in k8s.writes() if w.verb == "delete" and w.kind == "Pod")
    assert set(pods) <= deleted, (sorted(pods), sorted(deleted))
    assert [p["metadata"]["name"] for p in k8s.list("Pod", "default")] == []


def _granted(path):
    grants = set()
    for doc in yaml.safe_load_all(Path(path).read_text()):
        for doc in doc["items"] if doc["kind"] == "List" else [doc]:
            namespace = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
            for rule in doc["rules"]:
                grants.update((g, r, v, namespace) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"])
    return grants


def _needed(requests):
    needed = set()
    for request in requests:
        if request.kind is None or request.verb in (None, "discovery"):
            continue
        parts = request.path.strip("/").split("/")
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        if rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        needed.add((group, rest[0] + ("/" + rest[2] if len(rest) > 2 else ""), request.verb, request.namespace))
    return needed


def test_a_healthy_cluster_passes_every_health_check_and_the_probes_are_removed(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out).assert_ok()
    tests = _tests(out)
    assert {i: tests[i]["status"] for i in IDS} == dict.fromkeys(IDS, "passed"), {i: tests[i].get("message") for i in IDS}
    # one pod per node and probe, pinned to its node; the diagnostic through the operator's host engine of that node
    pods = _created(k8s_double)
    assert sorted(p["spec"]["nodeName"] for n, p in pods.items() if "-dcgm-" in n) == ["gpu-0", "gpu-1"]
    dcgm = next(p for n, p in pods.items() if "-dcgm-" in n)["spec"]["containers"][0]
    assert dcgm["image"] == DCGM_IMAGE
    assert dcgm["command"] == ["dcgmi", "diag", "--host", "nvidia-dcgm.gpu-operator.svc:5555", "-r", "1", "-j"]
    assert dcgm.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") is None
    nccl = next(p for n, p in pods.items() if "-nccl-" in n)["spec"]["containers"][0]
    assert nccl["image"] == PROBE_IMAGE and nccl["command"][-2:] == ["-g", "8"]
    assert str(nccl["resources"]["limits"]["nvidia.com/gpu"]) == "8"
    nvb = next(p for n, p in pods.items() if "-nvb-" in n)["spec"]["containers"][0]
    assert nvb["command"][:3] == ["nvbandwidth", "-j", "-t"]
    _assert_labelled_and_gone(k8s_double)
    # every request is granted by the shipped ClusterRole plus the health phase's Role
    files = REPO_ROOT / "roles" / "validate" / "files"
    grants = _granted(files / "clusterrole.yaml") | _granted(files / "health-role.yaml")
    needed = _needed(k8s_double.requests())
    assert ("", "pods", "create", "default") in needed and ("", "pods/log", "get", "default") in needed, needed
    missing = [n for n in sorted(needed, key=str) if (n[0], n[1], n[2], None) not in grants and n not in grants]
    assert missing == [], missing
    # one row per node in the evidence; the snapshot keeps the outputs, so offline gives the same results
    assert tests["health.dcgm_diag"]["extra"]["evidence"] == ["gpu-0: dcgmi diag -r 1, DCGM 3.3.7: 9 pass",
                                                              "gpu-1: dcgmi diag -r 1, DCGM 3.3.7: 9 pass"]
    offline = tmp_path / "offline"
    run_playbook(PLAYBOOK, extra_vars=dict(validate_snapshot=str(out / "localhost" / "snapshot.json"), validate_output_dir=str(offline),
                                           validate_phases=["health"])).assert_ok()
    assert {i: _tests(offline)[i]["status"] for i in IDS} == dict.fromkeys(IDS, "passed")


def test_a_failing_gpu_is_one_failure_naming_node_gpu_and_test_and_the_probes_are_removed(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    # dcgmi exits non-zero when a test fails; the second node's GPU 3 fails its memory test at level 2
    k8s_double.script_pod(r"^vhealth-[0-9a-f]{8}-dcgm-0$", logs={"probe": _output("dcgm", "level2_pass.json")})
    k8s_double.script_pod(r"^vhealth-[0-9a-f]{8}-dcgm-1$", phase="Failed", exit_code=226,
                          logs={"probe": _output("dcgm", "level2_gpu3_memory_fail.json")})
    out = tmp_path / "out"
    result = _run(run_playbook, k8s_double, out, validate_health_dcgm_level=2).assert_failed()
    tests = _tests(out)
    check = tests["health.dcgm_diag"]
    assert check["status"] == "failed"
    assert "gpu-1 GPU 3 GPU Memory: failed - Pending page retirements" in check["message"], check["message"]
    assert "gpu-0" not in check["message"] and check["message"].count(": failed - ") == 1
    assert tests["health.nvbandwidth"]["status"] == "passed" and tests["health.nccl_loopback"]["status"] == "passed"
    assert "health.dcgm_diag" in result.stdout
    commands = [p["spec"]["containers"][0]["command"] for n, p in _created(k8s_double).items() if "-dcgm-" in n]
    assert all(c[4:6] == ["-r", "2"] for c in commands), commands
    _assert_labelled_and_gone(k8s_double)


def test_a_probe_the_api_refuses_and_a_killed_probe_are_other_and_every_probe_is_removed(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    k8s_double.fail(verb="create", kind="Pod", name=None, code=500, times=1, message="etcd is unavailable")
    k8s_double.script_pod(r"^vhealth-[0-9a-f]{8}-nvb-1$", phase="Failed", exit_code=137, logs={"probe": _output("nvbandwidth", "killed.json")})
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out).assert_failed()
    tests = _tests(out)
    assert tests["health.dcgm_diag"]["status"] == "other"
    assert "gpu-0: the diagnostic could not run: probe pod vhealth-" in tests["health.dcgm_diag"]["message"]
    assert "etcd is unavailable" in tests["health.dcgm_diag"]["message"]
    assert tests["health.nvbandwidth"]["status"] == "other"
    assert "gpu-1: the JSON document is cut short or malformed" in tests["health.nvbandwidth"]["message"]
    assert "(exit code 137)" in tests["health.nvbandwidth"]["message"]
    _assert_labelled_and_gone(k8s_double)


def test_without_the_operator_s_host_engine_the_diagnostic_is_other_with_the_fix(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double, dcgm=False)
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out).assert_failed()
    check = _tests(out)["health.dcgm_diag"]
    assert check["status"] == "other" and "spec.dcgm.enabled: true" in check["message"]
    assert not [n for n in _created(k8s_double) if "-dcgm-" in n]


def test_a_burn_in_level_without_the_burn_in_option_is_refused_before_anything_is_read(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    before = len(k8s_double.requests())
    result = _run(run_playbook, k8s_double, tmp_path / "out", validate_health_dcgm_level=3).assert_failed()
    text = result.stdout + result.stderr
    assert "validate_health_dcgm_level 3 is not allowed without validate_health_burn_in: true" in text
    assert "allowed: 1 (quick) or 2 (medium), and 3 (long) or 4 (extended) only with validate_health_burn_in: true" in text
    assert k8s_double.requests()[before:] == []


def test_without_the_health_phase_nothing_is_written(run_playbook, k8s_double, tmp_path):
    _seed(k8s_double)
    before = len(k8s_double.requests())
    out = tmp_path / "out"
    _run(run_playbook, k8s_double, out, validate_phases=["preflight", "deployment", "conformance"])
    assert [r for r in k8s_double.requests()[before:] if r.mutating] == []
    assert not [t for t in _tests(out) if t.startswith("health.")]


def test_a_bare_metal_host_runs_the_probes_over_its_connection(run_playbook, tmp_path):
    """The host play (local connection standing in for SSH): gpu_host_facts against the strict fake nvidia-smi (two
    A100s), fake dcgmi and nvbandwidth that answer only the expected command line, and an all_reduce_perf that is not
    installed. The diagnostic passes; nvbandwidth has no floor for the model (report-only: other); the missing
    loopback tool is other with the shell's reason."""
    from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake
    state = tmp_path / "nvidia-smi.json"
    state.write_text(json.dumps(fake.preset_state("A100-40GB x2")), encoding="utf-8")
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, expected, output in (("dcgmi", "diag -r 2 -j", OUTPUTS / "dcgm" / "level2_pass.json"),
                                   ("nvbandwidth", "-j -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce",
                                    OUTPUTS / "nvbandwidth" / "h100x8_pass.json")):
        script = tools / name
        script.write_text('#!/bin/sh\n[ "$*" = "%s" ] || { echo "unexpected arguments: $*" >&2; exit 2; }\ncat "%s"\n' % (expected, output),
                          encoding="utf-8")
        script.chmod(0o755)
    out = tmp_path / "out"
    env = {"FAKE_NVIDIA_SMI_STATE": str(state), "FAKE_NVIDIA_SMI_LOG": str(tmp_path / "nvidia-smi.log")}
    run_playbook(PLAYBOOK, extra_vars=dict(validate_clusters="none", validate_hosts="localhost", validate_become=False,
                                           validate_nvidia_smi=str(REPO_ROOT / "tests" / "fakes" / "nvidia-smi"),
                                           validate_output_dir=str(out), validate_phases=["health"], validate_health_dcgm_level=2,
                                           validate_health_host_dcgmi=str(tools / "dcgmi"),
                                           validate_health_host_nvbandwidth=str(tools / "nvbandwidth"),
                                           validate_health_host_all_reduce_perf=str(tools / "all_reduce_perf")), env=env).assert_failed()
    tests = _tests(out)
    assert tests["health.dcgm_diag"]["status"] == "passed", tests["health.dcgm_diag"]
    assert tests["health.dcgm_diag"]["extra"]["evidence"] == ["localhost: dcgmi diag -r 2, DCGM 3.3.7: 25 pass"]
    nvb = tests["health.nvbandwidth"]
    assert nvb["status"] == "other" and "localhost: no host_to_device_memcpy_ce floor for GPU model" in nvb["message"]
    loop = tests["health.nccl_loopback"]
    assert loop["status"] == "other" and "localhost: the loopback could not run" in loop["message"], loop
    # each tool runs under the host's own timeout, so one whose controller went away ends by itself
    assert "timeout: failed to run command" in loop["message"], loop


def test_the_probes_an_interrupted_run_left_are_removed_and_nothing_else(run_playbook, k8s_double, tmp_path):
    """A run killed before its always leaves its vhealth-* pods; the next health run deletes those (managed by
    gpu_ops.cluster, instance vhealth-<run id> older than a whole phase) before anything else, and touches nothing else:
    not another workload of the collection, not a pod that only looks like a probe, not a run in flight."""
    _seed(k8s_double)
    managed = {"app.kubernetes.io/managed-by": "gpu_ops.cluster"}
    spec = {"containers": [{"name": "probe", "image": PROBE_IMAGE}]}

    def pod(name, labels):
        k8s_double.put({"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {"name": name, "namespace": "default", "labels": labels}})
    old = dict(managed, **{"app.kubernetes.io/instance": "vhealth-0000abcd"})
    pod("vhealth-0000abcd-dcgm-0", old)
    pod("vhealth-0000abcd-nccl-1", old)
    in_flight = "vhealth-%08x" % (int(time.time()) - 60)
    pod(in_flight + "-nvb-0", dict(managed, **{"app.kubernetes.io/instance": in_flight}))
    pod("trainer", managed)
    pod("vhealth-0000abcd-users-own", {"app.kubernetes.io/instance": "vhealth-0000abcd"})
    pod("vperf-0000abcd-test-host-0", dict(managed, **{"app.kubernetes.io/instance": "vhealth-0000abcd"}))
    before = len(k8s_double.writes())
    # no probe is asked for: the sweep alone runs
    _run(run_playbook, k8s_double, tmp_path / "out", validate_health_dcgm=False, validate_health_probe_image="")
    writes = [(w.verb, w.kind, w.name) for w in k8s_double.writes()[before:]]
    assert sorted(writes) == [("delete", "Pod", "vhealth-0000abcd-dcgm-0"), ("delete", "Pod", "vhealth-0000abcd-nccl-1")], writes
    assert sorted(p["metadata"]["name"] for p in k8s_double.list("Pod", "default")) == sorted(
        [in_flight + "-nvb-0", "trainer", "vhealth-0000abcd-users-own", "vperf-0000abcd-test-host-0"])
