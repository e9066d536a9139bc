# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUDirect roles against the Kubernetes API double and in render mode.

tcpx_installer / tcpxo_installer (one shared gpudirect_installer role), nri_device_injector and
nccl_test. Expected values come from the catalog (module_utils/_catalog/gke_gpudirect.py) through its public
functions, never from copies.

The double cannot serve ``kubernetes.core.k8s_exec`` (no websocket upgrade), so the nccl-tests run
itself is exercised through the role's ``verdict`` entry point with real nccl-tests output (the GKE
guide's tables and other recorded runs); the live test checks that the exec failure is reported
and that the test objects are removed all the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as _gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl
from ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp import multinetwork
from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation
from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT, K8sDouble

NCCL_FIXTURES = Path(__file__).resolve().parents[1] / "unit/plugins/module_utils/fixtures/nccl_tests"
FAST_WAIT = {"wait_delay": 1, "wait_timeout": 4}


def _play(role, role_vars=None, tasks_from="main"):
    return [{
        "name": role,
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "Run the role",
                   "ansible.builtin.include_role": {"name": "gpu_ops.cluster." + role, "tasks_from": tasks_from},
                   "vars": role_vars or {}}],
    }]


def _installer_vars(variant, **extra):
    role_vars = {"%s_installer_%s" % (variant, k): v for k, v in FAST_WAIT.items()}
    role_vars.update({"%s_installer_%s" % (variant, k): v for k, v in extra.items()})
    return role_vars


def _gpu_nodes(k8s, variant, names=("gpu-0", "gpu-1")):
    accelerator = _gpudirect.INSTALLERS[variant]["accelerators"][0]
    for name in names:
        k8s.add_node(name, labels={_gpudirect.ACCELERATOR_LABEL: accelerator},
                     allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    k8s.add_node("cpu-0", labels={"cloud.google.com/gke-nodepool": "default-pool"})


def _images(pod_spec):
    return {c["name"]: c["image"] for group in ("initContainers", "containers") for c in pod_spec.get(group) or []}


def _manifests(folder):
    return [yaml.safe_load(p.read_text()) for p in sorted(Path(folder).glob("*.yaml"))]


# ------------------------------------------------------------------------------------ render


def test_render_mode_writes_valid_manifests_for_every_role(run_playbook, tmp_path):
    render = tmp_path / "render"
    play = (_play("tcpx_installer") + _play("tcpxo_installer") + _play("nri_device_injector")
            + _play("nccl_test", {"nccl_test_gpudirect": "tcpxo", "nccl_test_nodes": 3, "nccl_test_step": "nccl-test-tcpxo"})
            + _play("nccl_test", {"nccl_test_gpudirect": "tcpx", "nccl_test_gke_version": "1.34.1-gke.1829001",
                                  "nccl_test_benchmarks": ["all_gather", "all_reduce"],
                                  "nccl_test_step": "nccl-test-tcpx"}))
    # no kubeconfig in the environment: anything that tried to reach a cluster would fail
    run_playbook(play, extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    steps = sorted(p.name for p in (render / "manifests").iterdir())
    assert steps == ["30-gpudirect-tcpx-installer", "30-gpudirect-tcpxo-installer", "31-nri-device-injector",
                     "nccl-test-tcpx", "nccl-test-tcpxo"]
    # every manifest validates (kubernetes-validate strict, two Kubernetes versions)
    assert k8s_validation.validate_path(str(render / "manifests")) == 1 + 1 + 1 + (1 + 3 + 3) + (1 + 2 + 2)

    for variant in ("tcpx", "tcpxo"):
        installer = _gpudirect.INSTALLERS[variant]
        [daemonset] = _manifests(render / "manifests" / ("30-gpudirect-%s-installer" % variant))
        assert daemonset["kind"] == "DaemonSet" and daemonset["metadata"]["name"] == installer["name"]
        spec = daemonset["spec"]["template"]["spec"]
        expression = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]
        assert expression == {"key": _gpudirect.ACCELERATOR_LABEL, "operator": "In", "values": installer["accelerators"]}
        images = _gpudirect.images(variant)  # render mode, no GKE version: the catalog's baseline release
        assert _images(spec)[installer["name"]] == images["installer"]
        assert _images(spec)["pause"] == images["pause"]
        privileged = {c["name"] for c in spec["initContainers"] if c["securityContext"].get("privileged")}
        assert installer["name"] in privileged
        assert spec["hostPID"] is True and spec["tolerations"] == [{"operator": "Exists"}]
    tcpxo_spec = _manifests(render / "manifests/30-gpudirect-tcpxo-installer")[0]["spec"]["template"]["spec"]
    assert _images(tcpxo_spec)["pre-installation"] == _gpudirect.images("tcpxo")["pre_install"]
    assert "@sha256:" in _images(tcpxo_spec)["pre-installation"]  # upstream's unpinned ubuntu is pinned

    [injector] = _manifests(render / "manifests/31-nri-device-injector")
    assert _images(injector["spec"]["template"]["spec"]) == {"device-injector": _gpudirect.images("tcpxo")["nri_injector"]}
    assert "@sha256:" in _gpudirect.images("tcpxo")["nri_injector"]

    # the test pods are what gpudirect_workload makes of a user's pod: daemon sidecar, annotations, env
    tcpxo = _manifests(render / "manifests/nccl-test-tcpxo")
    assert [m["kind"] for m in tcpxo] == ["ConfigMap", "Service", "Service", "Service", "Pod", "Pod", "Pod"]
    pods = [m for m in tcpxo if m["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["nccl-test-host-1", "nccl-test-host-2", "nccl-test-host-3"]
    for pod in pods:
        daemon = pod["spec"]["initContainers"][0]
        assert daemon["name"] == "tcpxo-daemon" and daemon["restartPolicy"] == "Always"
        assert daemon["image"] == _gpudirect.images("tcpxo")["daemon"]
        key, value = _gpudirect.device_annotation("tcpxo")
        assert pod["metadata"]["annotations"][key] == value
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        expected_env, _warnings = nccl.nccl_environment("tcpxo")
        assert env == expected_env
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
        anti = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert anti["topologyKey"] == "kubernetes.io/hostname"
    script = tcpxo[0]["data"]["run-nccl-tests.sh"]
    assert "demo-run-nccl-test-tcpxo-via-mpi.sh" in script
    # the TCPX test on GKE 1.34 takes the devmem release (plugin v3.1.12 / daemon v2.0.15)
    tcpx_pods = [m for m in _manifests(render / "manifests/nccl-test-tcpx") if m["kind"] == "Pod"]
    tcpx_images = _gpudirect.images("tcpx", "1.34.1-gke.1829001")
    assert _images(tcpx_pods[0]["spec"]) == {"tcpx-daemon": tcpx_images["daemon"], "nccl-test": tcpx_images["test"]}
    assert tcpx_images != _gpudirect.images("tcpx")


def test_render_registry_override_moves_every_image(run_playbook, tmp_path):
    render = tmp_path / "render"
    mirror = "registry.example.com/gpu-mirror"
    play = (_play("tcpxo_installer", {"tcpxo_installer_registry": mirror})
            + _play("nri_device_injector", {"nri_device_injector_registry": mirror}))
    run_playbook(play, extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    images = []
    for daemonset in _manifests(render / "manifests/30-gpudirect-tcpxo-installer") + _manifests(render / "manifests/31-nri-device-injector"):
        images.extend(_images(daemonset["spec"]["template"]["spec"]).values())
    assert len(images) == 4 and all(i.startswith(mirror + "/") for i in images)
    assert mirror + "/" + _gpudirect.RELEASES["tcpxo"][0]["installer"]["repository"] + ":" in " ".join(images)


def test_render_follows_the_cluster_recorded_by_gke_gpu_cluster(run_playbook, tmp_path):
    """In the GKE playbook the installers and the test take the version gke_gpu_cluster pinned."""
    render = tmp_path / "render"
    recorded = {"version": "1.34.1-gke.1829001", "expected_nodes": 2}
    play = _play("tcpx_installer") + _play("nccl_test", {"nccl_test_gpudirect": "tcpx"})
    run_playbook(play, extra_vars={"gpu_ops_render_dir": str(render), "gke_gpu_cluster_result": recorded}).assert_ok()
    images = _gpudirect.images("tcpx", recorded["version"])
    [daemonset] = _manifests(render / "manifests/30-gpudirect-tcpx-installer")
    assert _images(daemonset["spec"]["template"]["spec"])["nccl-tcpx-installer"] == images["installer"]
    pod = [m for m in _manifests(render / "manifests/40-nccl-test") if m["kind"] == "Pod"][0]
    assert _images(pod["spec"])["tcpx-daemon"] == images["daemon"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == nccl.nccl_environment("tcpx", recorded["version"])[0]


def test_nccl_test_refuses_a_single_node(run_playbook, tmp_path):
    result = run_playbook(_play("nccl_test", {"nccl_test_nodes": 1}),
                          extra_vars={"gpu_ops_render_dir": str(tmp_path / "r")}).assert_failed()
    assert "needs 2 nodes or more" in result.stdout
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------------- installers, live


@pytest.mark.parametrize("variant", ["tcpx", "tcpxo"])
def test_installer_create_then_noop_rerun(run_playbook, k8s_double, variant):
    _gpu_nodes(k8s_double, variant)
    play = _play("%s_installer" % variant, _installer_vars(variant))
    first = run_playbook(play, env=k8s_double.env()).assert_ok()
    name = _gpudirect.INSTALLERS[variant]["name"]
    daemonset = k8s_double.get("DaemonSet", name, "kube-system")
    # the double's nodes run Kubernetes 1.33: the baseline release of the catalog
    release = _gpudirect.release(variant, "1.33.5")
    assert _images(daemonset["spec"]["template"]["spec"])[name].endswith(":" + release["installer"]["tag"])
    assert [w.verb for w in k8s_double.writes(kind="DaemonSet")] == ["create"]
    report = first.task("Wait for a ready pod of DaemonSet kube-system/" + name, action="k8s_daemonset_wait")["result"]
    assert report["daemonset"] == "kube-system/" + name
    assert [(n["node"], n["ready"]) for n in report["nodes"]] == [("gpu-0", True), ("gpu-1", True)]
    pods = [p for p in k8s_double.list("Pod", "kube-system") if p["metadata"]["name"].startswith(name)]
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-0", "gpu-1"]  # not on the CPU node

    resource_version = daemonset["metadata"]["resourceVersion"]
    k8s_double.clear_requests()
    second = run_playbook(play, env=k8s_double.env()).assert_ok()
    assert second.changed == []
    assert [w for w in k8s_double.writes() if w.changed] == []  # nothing stored changed
    assert k8s_double.get("DaemonSet", name, "kube-system")["metadata"]["resourceVersion"] == resource_version


def _daemonset_reads_after_its_apply(k8s_double):
    """The DaemonSet reads sent after the apply step's last request for it (the apply reads it before it writes)."""
    log = k8s_double.requests(kind="DaemonSet")
    last_write = max(i for i, r in enumerate(log) if r.mutating)
    return [r for r in log[last_write + 1:] if r.verb in ("get", "list")]


def test_installer_wait_takes_the_recorded_nodes_and_the_applied_daemonset(run_playbook, k8s_double):
    """Issue #22: the nodes gke_gpu_cluster recorded (when enough carry the label) and the DaemonSet the apply returned
    are not read again; too few recorded nodes are read and waited for as before."""
    _gpu_nodes(k8s_double, "tcpx", names=("gpu-0", "gpu-1", "gpu-2"))
    play = _play("tcpx_installer", _installer_vars("tcpx", min_nodes=2, gke_version="1.33.5"))
    name = _gpudirect.INSTALLERS["tcpx"]["name"]
    recorded = [k8s_double.get("Node", n) for n in ("gpu-0", "gpu-1", "cpu-0")]
    result = run_playbook(play, env=k8s_double.env(), extra_vars={"gke_gpu_cluster_result": {"gpu_nodes": recorded}})
    report = result.assert_ok().task("Wait for a ready pod of DaemonSet kube-system/" + name,
                                     action="k8s_daemonset_wait")["result"]
    # the recorded GPU nodes only (not the CPU node, not gpu-2 which was not recorded), none read
    assert [(n["node"], n["ready"]) for n in report["nodes"]] == [("gpu-0", True), ("gpu-1", True)]
    assert k8s_double.requests(kind="Node") == []
    assert _daemonset_reads_after_its_apply(k8s_double) == []  # the wait takes the applied one

    k8s_double.clear_requests()
    result = run_playbook(play, env=k8s_double.env(), extra_vars={"gke_gpu_cluster_result": {"gpu_nodes": recorded[:1]}})
    report = result.assert_ok().task("Wait for a ready pod of DaemonSet kube-system/" + name,
                                     action="k8s_daemonset_wait")["result"]
    assert [n["node"] for n in report["nodes"]] == ["gpu-0", "gpu-1", "gpu-2"]
    assert [r.verb for r in k8s_double.requests(kind="Node")] == ["list"]
    # in place: the apply step's one read, whose object the wait takes
    assert [r.verb for r in k8s_double.requests(kind="DaemonSet")] == ["get"]


def test_installer_picks_the_release_of_the_nodes_gke_version(run_playbook):
    with K8sDouble(server_version="1.34.1-gke.1829001") as k8s:
        _gpu_nodes(k8s, "tcpx")
        run_playbook(_play("tcpx_installer", _installer_vars("tcpx")), env=k8s.env()).assert_ok()
        daemonset = k8s.get("DaemonSet", "nccl-tcpx-installer", "kube-system")
    wanted = _gpudirect.images("tcpx", "v1.34.1-gke.1829001")["installer"]
    assert wanted != _gpudirect.images("tcpx")["installer"]
    assert _images(daemonset["spec"]["template"]["spec"])["nccl-tcpx-installer"] == wanted


def test_installer_drift_is_corrected_and_rolled_out(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "tcpxo")
    play = _play("tcpxo_installer", _installer_vars("tcpxo"))
    run_playbook(play, env=k8s_double.env()).assert_ok()
    pinned = _images(k8s_double.get("DaemonSet", "nccl-tcpxo-installer", "kube-system")["spec"]["template"]["spec"])

    def hand_edit(daemonset):
        for container in daemonset["spec"]["template"]["spec"]["initContainers"]:
            if container["name"] == "nccl-tcpxo-installer":
                container["image"] = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8"
    k8s_double.modify("DaemonSet", "nccl-tcpxo-installer", hand_edit, "kube-system")
    k8s_double.clear_requests()

    result = run_playbook(play, env=k8s_double.env()).assert_ok()
    assert [r["task"] for r in result.changed] == ["gpu_ops.cluster.apply : Apply the manifests of step 30-gpudirect-tcpxo-installer"]
    assert [w.verb for w in k8s_double.writes() if w.changed] == ["patch"]
    daemonset = k8s_double.get("DaemonSet", "nccl-tcpxo-installer", "kube-system")
    assert _images(daemonset["spec"]["template"]["spec"]) == pinned
    # the wait only passed on pods of the restored template
    for pod in k8s_double.list("Pod", "kube-system"):
        assert _images(pod["spec"]) == pinned


def test_installer_never_ready_names_the_node(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "tcpxo", names=("gpu-0", "gpu-1", "gpu-2"))
    k8s_double.never_ready("gpu-1")
    result = run_playbook(_play("tcpxo_installer", _installer_vars("tcpxo")), env=k8s_double.env()).assert_failed()
    failure = result.task("Wait for a ready pod of DaemonSet kube-system/nccl-tcpxo-installer",
                          action="k8s_daemonset_wait")["result"]["msg"]
    assert failure.startswith("DaemonSet kube-system/nccl-tcpxo-installer is not ready on 1 of 3 GPU nodes after 4 s: gpu-1 (pod nccl-tcpxo-installer-")
    assert "not ready" in failure and "gpu-0" not in failure and "gpu-2" not in failure
    # while it waits, it says before each retry which nodes it waits for (delay 1 s, timeout 4 s: 4 retries);
    # the failure is the one short message, no object dump before it
    waiting = [line for line in result.stdout.splitlines() if line.startswith("WAITING: [localhost]: ")]
    assert len(waiting) == 4 and all("gpu-1" in line for line in waiting), result.stdout
    assert waiting[-1] == ("WAITING: [localhost]: a ready pod of DaemonSet kube-system/nccl-tcpxo-installer on gpu-1 "
                           "(1 retries left, next read in 1 s)"), result.stdout
    first, printed = _first_failure(result)
    assert first["result"]["msg"] == failure and len(printed.encode()) < 1024, printed
    assert printed.count("fatal:") == 1 and "resourceVersion" not in result.stdout
    # the DaemonSet was applied; only the wait failed
    assert k8s_double.get("DaemonSet", "nccl-tcpxo-installer", "kube-system") is not None


def test_installer_without_gpu_nodes_fails_clearly(run_playbook, k8s_double):
    k8s_double.add_node("cpu-0")
    result = run_playbook(_play("tcpx_installer", _installer_vars("tcpx")), env=k8s_double.env()).assert_failed()
    assert "Found 0 nodes labelled cloud.google.com/gke-accelerator in (nvidia-h100-80gb) within 4 s, 1 expected at least" in result.stdout


# ------------------------------------------------------------------------- NRI injector, live


def test_nri_injector_create_noop_and_never_ready(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "tcpxo")
    play = _play("nri_device_injector", {"nri_device_injector_wait_delay": 1, "nri_device_injector_wait_timeout": 4})
    run_playbook(play, env=k8s_double.env()).assert_ok()
    daemonset = k8s_double.get("DaemonSet", "device-injector", "kube-system")
    assert daemonset["spec"]["selector"] == {"matchLabels": {"k8s-app": "device-injector"}}
    assert _images(daemonset["spec"]["template"]["spec"]) == {"device-injector": _gpudirect.images("tcpxo")["nri_injector"]}
    k8s_double.clear_requests()
    run_playbook(play, env=k8s_double.env()).assert_ok()
    assert [w for w in k8s_double.writes() if w.changed] == []

    k8s_double.never_ready("gpu-0")
    result = run_playbook(play, env=k8s_double.env()).assert_failed()
    assert "DaemonSet kube-system/device-injector is not ready on 1 of 2 GPU nodes after 4 s: gpu-0 (pod device-injector-" in result.stdout


# ------------------------------------------------------------------------------ nccl_test


def _verdict(run_playbook, variant, outputs, **extra):
    role_vars = {"nccl_test_gpudirect": variant,
                 "nccl_test_verdict_runs": [dict(benchmark=b, **o) for b, o in outputs.items()]}
    role_vars.update(extra)
    play = _play("nccl_test", role_vars, tasks_from="verdict")
    play[0]["tasks"] = [{"name": "Judge", "block": play[0]["tasks"],
                         "always": [{"name": "Show the result", "ansible.builtin.debug": {"var": "nccl_test_result"}}]}]
    result = run_playbook(play)
    return result, result.task("Show the result")["result"]["nccl_test_result"]


def _fixture(name):
    return (NCCL_FIXTURES / name).read_text()


def test_verdict_passes_the_guide_tcpx_table(run_playbook):
    result, verdict = _verdict(run_playbook, "tcpx", {"all_gather": {"output": _fixture("guide_tcpx_all_gather.txt"), "rc": 0}})
    result.assert_ok()
    bench = verdict["benchmarks"]["all_gather"]
    assert verdict["passed"] is True and bench["passed"] is True
    assert bench["avg_bus_bandwidth"] == 29.8293
    assert bench["threshold"] == _gpudirect.NCCL_BANDWIDTH_THRESHOLDS["tcpx"]
    assert [row["size"] for row in bench["table"]] == [1048576 * 2 ** i for i in range(10)]
    assert bench["table"][-1]["in_place"]["busbw"] == 71.28


def test_verdict_shows_the_numbers_when_it_passes_and_writes_the_table_and_chart(run_playbook, tmp_path):
    result, verdict = _verdict(run_playbook, "tcpx", {"all_gather": {"output": _fixture("guide_tcpx_all_gather.txt"), "rc": 0}},
                               nccl_test_verdict_nodes=["gpu-a", "gpu-b"])
    result.assert_ok()
    shown = result.task("Show the bus bandwidth per message size")["result"]["msg"]
    text = "\n".join(shown)
    # every size with its bus bandwidths, the average, the threshold, the verdict and the nodes - on a pass
    assert sum(1 for line in shown if line.split()[:1] and line.split()[0] in ("1M", "2M", "4M", "8M", "16M", "32M", "64M",
                                                                               "128M", "256M", "512M")) == 10
    assert any(line.split()[:2] == ["512M", "536870912"] and line.split()[-1] == "71.28" for line in shown), text
    threshold = _gpudirect.NCCL_BANDWIDTH_THRESHOLDS["tcpx"]
    assert "average bus bandwidth: 29.83 GB/s, threshold %g GB/s: PASSED" % threshold in shown
    assert "nodes: gpu-a, gpu-b" in shown and verdict["passed"] is True
    assert "71.28" in result.stdout and "PASSED" in result.stdout
    # the default folder is under ANSIBLE_HOME (never the current folder): table, chart and raw result
    run_dir = tmp_path / "run-01"
    folder = run_dir / "ansible_home" / "gpu_ops" / "results" / "40-nccl-test"
    assert sorted(p.name for p in folder.iterdir()) == ["all_gather.json", "all_gather.md", "all_gather.svg"]
    assert "files: %s/<collective>.md, .svg, .json" % folder in shown
    assert sorted(p.name for p in run_dir.iterdir() if p.name not in ("ansible_home", "tmp")) == [
        "ansible.cfg", "inventory.ini", "playbook.yml", "results.jsonl"]
    markdown = (folder / "all_gather.md").read_text()
    assert "| 512M | 536870912 |" in markdown and "PASSED" in markdown and "](all_gather.svg)" in markdown
    svg = ElementTree.fromstring((folder / "all_gather.svg").read_bytes())
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}circle"))) == 20
    assert [e for e in svg.iter("{http://www.w3.org/2000/svg}line") if e.get("class") == "threshold"]
    raw = json.loads((folder / "all_gather.json").read_text())
    assert raw["avg_bus_bandwidth"] == 29.8293 and raw["passed"] is True and len(raw["table"]) == 10


def test_verdict_writes_the_results_on_a_failure_too(run_playbook, tmp_path):
    folder = tmp_path / "nccl-results"
    result, _verdict_ = _verdict(run_playbook, "tcpxo", {"all_gather": {"output": _fixture("guide_tcpxo_all_gather.txt")}},
                                 nccl_test_results_dir=str(folder))
    assert result.task("Fail below the threshold, with the table")["status"] == "failed"
    shown = result.task("Show the bus bandwidth per message size")["result"]["msg"]
    assert "average bus bandwidth: 22.45 GB/s, threshold 30 GB/s: FAILED" in shown
    assert "FAILED" in (folder / "all_gather.md").read_text()
    assert (folder / "all_gather.svg").read_text().startswith("<?xml")


def test_verdict_fails_the_guide_tcpxo_table_with_the_table(run_playbook):
    result, verdict = _verdict(run_playbook, "tcpxo", {"all_gather": {"output": _fixture("guide_tcpxo_all_gather.txt")}})
    failure = result.task("Fail below the threshold, with the table")
    assert failure["status"] == "failed"
    message = failure["result"]["msg"]
    assert "all_gather: FAILED: average bus bandwidth 22.45 GB/s is below the 30 GB/s threshold" in message
    # every size of the table is in the failure, with its bus bandwidths
    assert "  1073741824     16777216    float |     8241.7   130.28   122.14 |     8375.2    128.2   120.19" in message
    assert message.count("float |") == 11
    assert verdict["passed"] is False and len(verdict["benchmarks"]["all_gather"]["table"]) == 11


def test_verdict_threshold_is_configurable(run_playbook):
    output = {"all_gather": {"output": _fixture("guide_tcpxo_all_gather.txt")}}
    _result, verdict = _verdict(run_playbook, "tcpxo", output, nccl_test_threshold_gbps=20.0)
    assert verdict["passed"] is True and verdict["threshold"] == 20.0
    _result, verdict = _verdict(run_playbook, "tcpx", {"all_gather": {"output": _fixture("guide_tcpx_all_gather.txt")}},
                                nccl_test_benchmark_thresholds={"all_gather": 35})
    assert verdict["passed"] is False
    assert verdict["benchmarks"]["all_gather"]["reasons"] == ["average bus bandwidth 29.83 GB/s is below the 35 GB/s threshold"]


def test_verdict_reads_mpirun_tagged_all_reduce_and_judges_each_collective(run_playbook):
    outputs = {"all_gather": {"output": _fixture("guide_tcpx_all_gather.txt")},
               "all_reduce": {"output": _fixture("newer_mpirun_tagged_all_reduce.txt")}}
    result, verdict = _verdict(run_playbook, "tcpx", outputs)
    assert verdict["benchmarks"]["all_gather"]["passed"] is True
    assert verdict["benchmarks"]["all_reduce"]["passed"] is False
    assert verdict["benchmarks"]["all_reduce"]["avg_bus_bandwidth"] == 1.57614
    assert verdict["passed"] is False
    message = result.task("Fail below the threshold, with the table")["result"]["msg"]
    assert "all_gather: passed" in message and "all_reduce: FAILED" in message


def test_verdict_without_a_table_shows_the_output_tail(run_playbook):
    outputs = {"all_gather": {"output": "ssh: connect to host nccl-host-2 port 222: Connection refused\n", "rc": 255,
                              "stderr": "mpirun: ORTE was unable to reliably start one or more daemons"}}
    result, verdict = _verdict(run_playbook, "tcpxo", outputs)
    reasons = verdict["benchmarks"]["all_gather"]["reasons"]
    assert reasons == ["the test exited with code 255", "no nccl-tests result table in the output"]
    message = result.task("Fail below the threshold, with the table")["result"]["msg"]
    assert "  ssh: connect to host nccl-host-2 port 222: Connection refused" in message
    assert "  mpirun: ORTE was unable to reliably start one or more daemons" in message


def _networks(k8s, count):
    for index in range(1, count + 1):
        name = "vpc%d" % index
        k8s.put({"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": name},
                 "spec": {"vpc": "gpu-net-%d" % index, "vpcSubnet": "gpu-sub-%d" % index,
                          "deviceMode": "NetDevice"}})
        k8s.put({"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": name},
                 "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                              "name": name}}})


def test_nccl_test_live_cleans_up_when_the_run_fails(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "tcpxo", names=("gpu-0", "gpu-1", "gpu-2"))
    _networks(k8s_double, 8)
    k8s_double.script_pod(r"^nccl-test-host-", phase="Running")  # the test container sleeps until exec'd
    result = run_playbook(_play("nccl_test", {"nccl_test_gpudirect": "tcpxo", "nccl_test_nodes": 3, "nccl_test_pod_timeout": 30}),
                          env=k8s_double.env()).assert_failed()
    # deployed and waited for: three pods on three GPU nodes
    created = [(w.kind, w.name) for w in k8s_double.writes() if w.verb == "create"]
    assert created == [("ConfigMap", "nccl-test-scripts")] + [("Service", "nccl-host-%d" % i) for i in (1, 2, 3)] + [
        ("Pod", "nccl-test-host-%d" % i) for i in (1, 2, 3)]
    # the exec reached the API server and was refused (the double has no websocket exec)
    assert k8s_double.requests(kind="Pod", name="nccl-test-host-1") and any(
        r.subresource == "exec" for r in k8s_double.requests(kind="Pod"))
    message = result.task("Fail below the threshold, with the table")["result"]["msg"]
    assert "all_gather: FAILED: the test could not run: Failed to execute on pod nccl-test-host-1" in message
    shown = result.task("Show the bus bandwidth per message size")["result"]["msg"]
    assert "nodes: gpu-0, gpu-1, gpu-2" in shown or "nodes: " in " ".join(shown), shown
    # and everything was removed even so, in reverse order
    deleted = [(w.kind, w.name) for w in k8s_double.writes() if w.verb == "delete"]
    assert deleted == list(reversed(created))
    assert k8s_double.list("Pod", "default") == [] and k8s_double.list("Service", "default") == []
    assert k8s_double.get("ConfigMap", "nccl-test-scripts", "default") is None


def _first_failure(result):
    """The first failed task's record and what the run printed for it (from ``fatal:`` to the next task or recap)."""
    failed = [r for r in result.results if r["status"] == "failed"]
    assert failed, result.output
    start = result.stdout.index("fatal: [")
    ends = [result.stdout.find(marker, start) for marker in ("\nTASK [", "\nPLAY RECAP")]
    return failed[0], result.stdout[start:min(e for e in ends if e > 0)]


def test_nccl_test_pods_that_never_get_ready_fail_with_one_short_message_naming_them(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "tcpxo", names=("gpu-0", "gpu-1"))
    _networks(k8s_double, 8)
    k8s_double.script_pod(r"^nccl-test-host-", phase="Running", ready=False)
    result = run_playbook(_play("nccl_test", {"nccl_test_gpudirect": "tcpxo", "nccl_test_pod_timeout": 3}),
                          env=k8s_double.env()).assert_failed()
    # while it waits, the task says what for
    assert ("Apply the manifests of step 40-nccl-test and wait up to 3 s for ConfigMap/nccl-test-scripts, Service/nccl-host-1, "
            "Service/nccl-host-2, Pod/nccl-test-host-1, Pod/nccl-test-host-2") in result.stdout
    first, printed = _first_failure(result)
    assert first["task"].endswith("Stop at the object that failed or is not ready in step 40-nccl-test"), first["task"]
    message = first["result"]["msg"]
    lines = message.splitlines()
    assert lines[0].startswith("Step 40-nccl-test: Pod default/nccl-test-host-1 is not ready after 3 s: phase Running"), message
    assert "nccl-test-host-2" in message and len(message.encode()) < 1024
    # no object dump on the way: what the run printed for the failure is short, and no object was printed at all
    assert len(printed.encode()) < 1024 and "resourceVersion" not in result.stdout, printed
    # and the test objects are removed all the same
    assert k8s_double.list("Pod", "default") == []


def test_nccl_test_live_checks_networks_and_nodes_before_deploying(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "tcpx", names=("gpu-0",))
    result = run_playbook(_play("nccl_test", {"nccl_test_gpudirect": "tcpx"}), env=k8s_double.env()).assert_failed()
    assert "The test needs 2 nodes labelled cloud.google.com/gke-accelerator in (nvidia-h100-80gb), the cluster has 1 (gpu-0)" in result.stdout
    k8s_double.add_node("gpu-1", labels={_gpudirect.ACCELERATOR_LABEL: "nvidia-h100-80gb"},
                        allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])
    _networks(k8s_double, 3)
    result = run_playbook(_play("nccl_test", {"nccl_test_gpudirect": "tcpx"}), env=k8s_double.env()).assert_failed()
    assert "Missing: vpc4." in result.stdout and "existing: vpc1, vpc2, vpc3" in result.stdout
    assert [w for w in k8s_double.writes() if w.kind not in ("Node", "Network", "GKENetworkParamSet")] == []


# ------------------------------------------------------------------------- GPUDirect-RDMA (issue 21)

def _rdma_network_objects(cluster="a3u", zone="us-central1-b"):
    """The GKENetworkParamSet + Network objects the fabric engine gives an A3 Ultra cluster (what gke_gpu_cluster applies)."""
    fabric = multinetwork.resolve(dict(project="demo-project", cluster=cluster, location=zone, gpudirect="rdma"))
    return multinetwork.manifests(fabric)


def test_rdma_render_writes_the_network_objects_the_gib_installer_and_the_test(run_playbook, tmp_path):
    """A3 Ultra / A4: GKENetworkParamSet + Network pairs, the gIB installer, the NCCL test; no NRI, no daemon."""
    render = tmp_path / "render"
    networks = _rdma_network_objects()
    play = (_play("apply", {"apply_step": "20-gke-gpu-networks", "apply_manifests": networks}, tasks_from="manifests")
            + _play("gpudirect_installer", {"gpudirect_installer_gpudirect": "rdma"})
            + _play("nccl_test", {"nccl_test_gpudirect": "rdma"}))
    run_playbook(play, extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    assert sorted(p.name for p in (render / "manifests").iterdir()) == [
        "20-gke-gpu-networks", "30-gpudirect-rdma-installer", "40-nccl-test"]
    # kubernetes-validate strict (two Kubernetes versions) and the CRD schema of GKENetworkParamSet (deviceMode RDMA)
    assert k8s_validation.validate_path(str(render / "manifests")) == 18 + 1 + (1 + 2 + 2)

    objects = _manifests(render / "manifests/20-gke-gpu-networks")
    modes = {o["metadata"]["name"]: o["spec"]["deviceMode"] for o in objects if o["kind"] == "GKENetworkParamSet"}
    assert modes == dict([("gvnic-1", "NetDevice")] + [("rdma-%d" % i, "RDMA") for i in range(8)])

    [daemonset] = _manifests(render / "manifests/30-gpudirect-rdma-installer")
    installer = _gpudirect.INSTALLERS["rdma"]
    spec = daemonset["spec"]["template"]["spec"]
    assert daemonset["metadata"]["name"] == "nccl-rdma-installer"
    assert _images(spec) == {"nccl-rdma-installer": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1",
                             "pause": _gpudirect.images("rdma")["pause"]}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": _gpudirect.ACCELERATOR_LABEL, "operator": "In",
                                            "values": ["nvidia-h200-141gb", "nvidia-b200"]}]}]
    assert {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]} == {
        "library-dir-host": "/home/kubernetes/bin/nvidia/lib64", "gib": "/home/kubernetes/bin/gib"}
    script = spec["initContainers"][0]["command"][2]
    assert script.splitlines() == [
        "set -ex", "/scripts/container_entry.sh install",
        "mkdir -p /usr/local/home/kubernetes/bin/nvidia/lib64",
        "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64",
        "mkdir -p /usr/local/home/kubernetes/bin/gib",
        "cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib"]
    assert "--install-nccl" not in script and installer["privileged"] is True

    test = _manifests(render / "manifests/40-nccl-test")
    assert [m["kind"] for m in test] == ["ConfigMap", "Service", "Service", "Pod", "Pod"]
    script = test[0]["data"]["run-nccl-tests.sh"]
    assert "source /usr/local/gib/scripts/set_nccl_env.sh" in script
    assert 'exec /usr/local/gib/scripts/run_nccl_tests.sh -t "$collective"' in script and "init_ssh" not in script
    for pod in (m for m in test if m["kind"] == "Pod"):
        annotations = pod["metadata"]["annotations"]
        interfaces = json.loads(annotations["networking.gke.io/interfaces"])
        assert [i["network"] for i in interfaces] == ["default"] + ["rdma-%d" % i for i in range(8)]
        assert [i["interfaceName"] for i in interfaces] == ["eth0"] + ["eth%d" % i for i in range(2, 10)]
        assert not any(k.startswith("devices.gke.io/") for k in annotations)
        assert "initContainers" not in pod["spec"] and len(pod["spec"]["containers"]) == 1
        container = pod["spec"]["containers"][0]
        assert container["image"] == _gpudirect.images("rdma")["test"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
        assert container["command"][2] == "/scripts/container_entry.sh shell && sleep infinity"
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["NCCL_NET"] == "gIB"
        assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/usr/local/gib", "/usr/local/nvidia"}


def test_rdma_installer_create_then_noop_rerun(run_playbook, k8s_double):
    _gpu_nodes(k8s_double, "rdma")
    play = _play("gpudirect_installer", dict({"gpudirect_installer_gpudirect": "rdma"},
                                             **{"gpudirect_installer_" + k: v for k, v in FAST_WAIT.items()}))
    run_playbook(play, env=k8s_double.env()).assert_ok()
    daemonset = k8s_double.get("DaemonSet", "nccl-rdma-installer", "kube-system")
    assert _images(daemonset["spec"]["template"]["spec"])["nccl-rdma-installer"] == _gpudirect.images("rdma")["installer"]
    pods = [p for p in k8s_double.list("Pod", "kube-system") if p["metadata"]["name"].startswith("nccl-rdma-installer")]
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-0", "gpu-1"]
    k8s_double.clear_requests()
    second = run_playbook(play, env=k8s_double.env()).assert_ok()
    assert second.changed == [] and [w for w in k8s_double.writes() if w.changed] == []


@pytest.mark.skipif("rdma-a4x" not in _gpudirect.PROFILES, reason="profile rdma-a4x is not in PROFILES yet (cloud side of issue 21)")
def test_rdma_a4x_render_pins_the_arm64_installer(run_playbook, tmp_path):
    render = tmp_path / "render"
    run_playbook(_play("gpudirect_installer", {"gpudirect_installer_gpudirect": "rdma-a4x"}),
                 extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    [daemonset] = _manifests(render / "manifests/30-gpudirect-rdma-a4x-installer")
    spec = daemonset["spec"]["template"]["spec"]
    assert _images(spec)["nccl-rdma-installer"] == _gpudirect.images("rdma-a4x")["installer"]
    assert "@sha256:" in _images(spec)["nccl-rdma-installer"] and "-arm64:" in _images(spec)["nccl-rdma-installer"]
    expressions = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert expressions[1] == {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
    assert k8s_validation.validate_path(str(render / "manifests")) == 1


def test_verdict_judges_rdma_against_its_own_threshold(run_playbook):
    """A3 Ultra / A4: a table at A3 Mega's level (22 GB/s average, what a socket or TCP path reaches) fails on rdma."""
    result, verdict = _verdict(run_playbook, "rdma", {"all_gather": {"output": _fixture("guide_tcpxo_all_gather.txt")}})
    failure = result.task("Fail below the threshold, with the table")
    assert failure["status"] == "failed"
    assert "all_gather: FAILED: average bus bandwidth 22.45 GB/s is below the 100 GB/s threshold" in failure["result"]["msg"]
    assert verdict["threshold"] == _gpudirect.NCCL_BANDWIDTH_THRESHOLDS["rdma"] == 100.0


def test_verdict_of_rdma_checks_that_nccl_used_gib(run_playbook):
    # NCCL (src/init.cc, v2.19.3-1 .. v2.30.7-1) logs INFO(NCCL_INIT, "Using network %s", ...) with NCCL_DEBUG=INFO
    table = _fixture("guide_tcpx_all_gather.txt")
    outputs = {"all_gather": {"output": "a3u-1:7:7 [0] NCCL INFO Using network gIB\n" + table, "rc": 0},
               "all_reduce": {"output": "a3u-1:7:7 [0] NCCL INFO Using network Socket\n" + table, "rc": 0}}
    result, verdict = _verdict(run_playbook, "rdma", outputs, nccl_test_threshold_gbps=20.0)
    assert result.task("Fail below the threshold, with the table")["status"] == "failed"
    assert verdict["benchmarks"]["all_gather"]["passed"] is True
    assert verdict["benchmarks"]["all_gather"]["networks"] == ["gIB"]
    assert verdict["benchmarks"]["all_reduce"]["passed"] is False
    assert verdict["benchmarks"]["all_reduce"]["reasons"] == [
        "NCCL used network Socket, not gIB: the gIB plugin did not load and NCCL fell back"]
    _result, verdict = _verdict(run_playbook, "rdma", outputs, nccl_test_threshold_gbps=20.0, nccl_test_check_transport=False)
    assert verdict["passed"] is True


def test_nccl_test_inside_a_compute_domain_renders_the_domain_the_channel_claims_and_nvls(run_playbook, tmp_path):
    """nccl_test_compute_domain on A4X: the test's ComputeDomain first, each pod claiming its channel on a clique node,
    tolerating the arm64 taint, with NVLS on; an A3 Ultra (single-node NVLink) is refused before anything is written."""
    render = tmp_path / "render"
    run_playbook(_play("nccl_test", {"nccl_test_gpudirect": "rdma-a4x", "nccl_test_compute_domain": True}),
                 extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    objects = _manifests(render / "manifests/40-nccl-test")
    assert objects[0] == {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
                          "metadata": {"name": "nccl-cd", "namespace": "default"},
                          "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": "nccl-cd-channel"},
                                                              "allocationMode": "Single"}}}
    pods = [m for m in objects if m["kind"] == "Pod"]
    assert len(pods) == 2
    for pod in pods:
        spec = pod["spec"]
        assert spec["resourceClaims"] == [{"name": "compute-domain-channel", "resourceClaimTemplateName": "nccl-cd-channel"}]
        assert spec["containers"][0]["resources"]["claims"] == [{"name": "compute-domain-channel"}]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": "nvidia.com/gpu.clique", "operator": "Exists"} in terms[0]["matchExpressions"]
        assert {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"} in spec["tolerations"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        assert env["NCCL_NVLS_ENABLE"] == "1" and env["NCCL_MNNVL_ENABLE"] == "1"
    refused = run_playbook(_play("nccl_test", {"nccl_test_gpudirect": "rdma", "nccl_test_compute_domain": True}),
                           extra_vars={"gpu_ops_render_dir": str(tmp_path / "r")}).assert_failed()
    assert "nccl_test_compute_domain: rdma runs on machines whose NVLink does not span nodes" in refused.stdout
    assert not (tmp_path / "r").exists()
