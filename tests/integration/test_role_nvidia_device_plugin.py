# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/nvidia_device_plugin: the chart in render mode, the node verification against the K8s double.

The Helm install itself runs in test_role_nvidia_device_plugin_helm.py (helm from scripts/bootstrap.sh, the
test chart tests/charts/nvidia-device-plugin); here the values are checked in render mode and the
verification against Nodes in the double.
"""

from __future__ import annotations

import threading
import time

import yaml

ROLE = "gpu_ops.cluster.nvidia_device_plugin"
POOL = {"kubernetes.azure.com/agentpool": "migpool"}
GFD_MIXED = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
             "nvidia.com/gpu.count": "8", "nvidia.com/mig-1g.5gb.count": "56"}
GFD_SINGLE = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
              "nvidia.com/gpu.count": "56"}


def _play(role_vars, tasks_from="main"):
    return [{
        "name": "device plugin",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": ROLE, "tasks_from": tasks_from},
                   "vars": role_vars}],
    }]


def _aks(strategy, **extra):
    role_vars = {"nvidia_device_plugin_mig_strategy": strategy,
                 "nvidia_device_plugin_aks_vm_size": "Standard_ND96asr_v4",
                 "nvidia_device_plugin_aks_gpu_instance_profile": "MIG1g",
                 "nvidia_device_plugin_pool_selector": POOL,
                 "nvidia_device_plugin_verify_retries": 1,
                 "nvidia_device_plugin_verify_delay": 0}
    role_vars.update(extra)
    return role_vars


# ------------------------------------------------------------------------------------- render


def test_render_single_strategy_chart(run_playbook, tmp_path):
    render = tmp_path / "render"
    run_playbook(_play(_aks("single", nvidia_device_plugin_node_selector=POOL)),
                 extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    release = yaml.safe_load((render / "charts/20-nvidia-device-plugin/nvidia-device-plugin.yaml").read_text())
    assert release["chart_ref"] == "nvidia-device-plugin"
    assert release["chart_repo_url"] == "https://nvidia.github.io/k8s-device-plugin"
    assert release["chart_version"] == "0.20.0"
    assert release["release_namespace"] == "nvidia-device-plugin"
    values = release["values"]
    assert values["migStrategy"] == "single"
    assert values["gfd"] == {"enabled": True}
    assert values["nodeSelector"] == POOL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
    assert values["nfd"]["worker"]["tolerations"] == values["tolerations"]
    assert "config" not in values  # no sharing: the strategy flag alone, as in the AKS guide
    checks = yaml.safe_load((render / "checks/20-nvidia-device-plugin/node-expectations.yaml").read_text())
    assert checks["allocatable"] == {"nvidia.com/gpu": 56}
    assert checks["labels"]["nvidia.com/mig.strategy"] == "single"
    assert checks["labels"]["nvidia.com/gpu.count"] == "56"
    assert checks["pool_selector"] == POOL


def test_render_mixed_time_slicing_config(run_playbook, tmp_path):
    render = tmp_path / "render"
    role_vars = _aks("mixed", nvidia_device_plugin_sharing_strategy="time-slicing",
                     nvidia_device_plugin_sharing_replicas=4,
                     nvidia_device_plugin_sharing_default=False,
                     nvidia_device_plugin_sharing_config_name="mig-shared",
                     nvidia_device_plugin_values={"gfd": {"sleepInterval": "120s"}})
    run_playbook(_play(role_vars), extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    values = yaml.safe_load((render / "charts/20-nvidia-device-plugin/nvidia-device-plugin.yaml").read_text())["values"]
    assert values["gfd"] == {"enabled": True, "sleepInterval": "120s"}  # merged, not replaced
    assert values["config"]["default"] == "default"  # only labelled nodes share
    default = yaml.safe_load(values["config"]["map"]["default"])
    shared = yaml.safe_load(values["config"]["map"]["mig-shared"])
    assert default == {"version": "v1", "flags": {"migStrategy": "mixed"}}
    assert shared == {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
        "renameByDefault": False, "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 4}]}}}
    assert values["config"]["map"]["mig-shared"].startswith("version: v1\n")
    # the pool selector does not pick the labelled nodes: the expectation is unshared
    checks = yaml.safe_load((render / "checks/20-nvidia-device-plugin/node-expectations.yaml").read_text())
    assert checks["allocatable"] == {"nvidia.com/mig-1g.5gb": 56}
    assert checks["sharing"] is None


def test_render_shared_pool_expectation(run_playbook, tmp_path):
    render = tmp_path / "render"
    role_vars = _aks("single", nvidia_device_plugin_sharing_strategy="time-slicing",
                     nvidia_device_plugin_sharing_replicas=2, nvidia_device_plugin_sharing_rename_by_default=True)
    run_playbook(_play(role_vars), extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    checks = yaml.safe_load((render / "checks/20-nvidia-device-plugin/node-expectations.yaml").read_text())
    assert checks["allocatable"] == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 112}
    assert checks["labels"]["nvidia.com/gpu.replicas"] == "2"


def test_render_refuses_mps_on_mig_before_writing(run_playbook, tmp_path):
    render = tmp_path / "render"
    result = run_playbook(_play(_aks("single", nvidia_device_plugin_sharing_strategy="mps",
                                     nvidia_device_plugin_sharing_replicas=4)),
                          extra_vars={"gpu_ops_render_dir": str(render)}).assert_failed()
    assert "MPS sharing is not supported for MIG devices" in result.stdout
    assert not (render / "charts").exists()


def test_render_refuses_a_strategy_that_does_not_match_the_profile(run_playbook, tmp_path):
    render = tmp_path / "render"
    result = run_playbook(_play(_aks("none")), extra_vars={"gpu_ops_render_dir": str(render)}).assert_failed()
    assert "nvidia_device_plugin_mig_strategy none does not match the pool" in result.stdout
    assert "nvidia.com/mig-1g.5gb" in result.stdout and "use single or mixed" in result.stdout
    assert not (render / "charts").exists()


def test_render_refuses_unknown_vm_size(run_playbook, tmp_path):
    result = run_playbook(_play(dict(_aks("mixed"), nvidia_device_plugin_aks_vm_size="Standard_NC6s_v3")),
                          extra_vars={"gpu_ops_render_dir": str(tmp_path / "r")}).assert_failed()
    assert "supported VM sizes: Standard_NC24ads_A100_v4" in result.stdout


def test_role_argument_spec_rejects_bad_strategy(run_playbook, tmp_path):
    result = run_playbook(_play(_aks("auto")), extra_vars={"gpu_ops_render_dir": str(tmp_path / "r")}).assert_failed()
    assert "nvidia_device_plugin_mig_strategy" in result.stdout and "none, single, mixed" in result.stdout


# ---------------------------------------------------------------------------- verify (double)


def _pool(k8s, allocatable, labels, names=("aks-migpool-0", "aks-migpool-1")):
    for name in names:
        k8s.add_node(name, labels=dict(POOL, **labels), allocatable=allocatable)
    k8s.add_node("aks-system-0", labels={"kubernetes.azure.com/agentpool": "system"})


def test_verify_passes_when_every_node_matches(run_playbook, k8s_double):
    _pool(k8s_double, {"nvidia.com/mig-1g.5gb": "56"}, GFD_MIXED)
    result = run_playbook(_play(_aks("mixed", nvidia_device_plugin_min_nodes=2), "verify"),
                          env=k8s_double.env()).assert_ok()
    report = result.task("Record the verification")["result"]["ansible_facts"]["__nvidia_device_plugin_verify_result"]
    assert report["ok"] is True
    assert [n["name"] for n in report["nodes"]] == ["aks-migpool-0", "aks-migpool-1"]
    assert report["nodes"][0]["actual_resources"] == {"nvidia.com/mig-1g.5gb": 56}
    # the role only read: nothing written to the cluster
    assert k8s_double.writes() == []
    assert [r.verb for r in k8s_double.requests(kind="Node")] == ["list"]


def test_verify_fails_naming_the_short_node(run_playbook, k8s_double):
    _pool(k8s_double, {"nvidia.com/gpu": "56"}, GFD_SINGLE, names=("aks-migpool-0",))
    k8s_double.add_node("aks-migpool-1", labels=dict(POOL, **dict(GFD_SINGLE, **{"nvidia.com/gpu.count": "49"})),
                        allocatable={"nvidia.com/gpu": "49"})
    result = run_playbook(_play(_aks("single"), "verify"), env=k8s_double.env()).assert_failed()
    failure = result.task("Report the nodes that do not match")
    message = failure["result"]["msg"]
    assert "node aks-migpool-1: allocatable nvidia.com/gpu=49, expected 56" in message
    assert "node aks-migpool-1: label nvidia.com/gpu.count=49, expected 56" in message
    assert 'Node aks-migpool-1: expected {"nvidia.com/gpu": 56}, actual {"nvidia.com/gpu": 49}' in message
    assert "aks-migpool-0" not in message


def test_verify_fails_when_the_pool_is_missing(run_playbook, k8s_double):
    k8s_double.add_node("aks-system-0", labels={"kubernetes.azure.com/agentpool": "system"})
    result = run_playbook(_play(_aks("mixed"), "verify"), env=k8s_double.env()).assert_failed()
    assert ("found 0 node(s) matching kubernetes.azure.com/agentpool=migpool, expected at least 1"
            in result.task("Report the nodes that do not match")["result"]["msg"])


def test_verify_waits_for_the_plugin_to_register(run_playbook, k8s_double):
    # the plugin still advertises whole GPUs (no GFD MIG labels yet), then the MIG devices appear
    _pool(k8s_double, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})

    stop = threading.Event()

    def plugin_registers():
        # once the role has read the nodes once (and found whole GPUs), the MIG devices appear
        while not stop.is_set() and not k8s_double.requests(verb="list", kind="Node"):
            time.sleep(0.05)
        for name in ("aks-migpool-0", "aks-migpool-1"):
            def change(node):
                node["status"]["allocatable"].pop("nvidia.com/gpu")
                node["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "56"
                node["metadata"]["labels"].update(GFD_MIXED)
            k8s_double.modify("Node", name, change)

    watcher = threading.Thread(target=plugin_registers, daemon=True)
    watcher.start()
    try:
        result = run_playbook(_play(_aks("mixed", nvidia_device_plugin_verify_retries=30,
                                         nvidia_device_plugin_verify_delay=1), "verify"),
                              env=k8s_double.env()).assert_ok()
    finally:
        stop.set()
        watcher.join(5)
    attempts = result.task("advertises what the MIG catalog expects")["result"].get("attempts")
    assert attempts and attempts > 1


def test_main_entry_point_without_install_verifies(run_playbook, k8s_double):
    _pool(k8s_double, {"nvidia.com/mig-1g.5gb": "56"}, GFD_MIXED)
    result = run_playbook(_play(_aks("mixed", nvidia_device_plugin_install=False)), env=k8s_double.env()).assert_ok()
    assert result.tasks("Install or render the release") == []
    assert result.task("Record the verification")["status"] == "ok"


def test_verify_without_a_pool_description_says_what_to_set(run_playbook, k8s_double):
    role_vars = {"nvidia_device_plugin_mig_strategy": "single", "nvidia_device_plugin_verify_retries": 1}
    result = run_playbook(_play(role_vars, "verify"), env=k8s_double.env()).assert_failed()
    assert "describe the GPU pool" in result.stdout
