# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/aks_mig.yml: render mode end to end, and the live verification + sample pod against the K8s double."""

from __future__ import annotations

import json

import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

PLAYBOOK = str(REPO_ROOT / "playbooks" / "aks_mig.yml")
POOL_LABEL = "kubernetes.azure.com/agentpool"

LISTING_MIXED = (
    "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-48aeb943-9458-4282-da24-e5f49e0db44b)\n"
    "  MIG 1g.5gb      Device  0: (UUID: MIG-fb42055e-9e53-5764-9278-438605a3014c)\n")
LISTING_WRONG = (
    "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-48aeb943-9458-4282-da24-e5f49e0db44b)\n"
    "  MIG 2g.10gb     Device  0: (UUID: MIG-3d4db13e-c42d-5555-98f4-8b50389791bc)\n")


def _requests(render):
    return [json.loads(p.read_text()) for p in sorted((render / "requests").glob("*.json"))]


def test_render_single_strategy(run_playbook, tmp_path):
    render = tmp_path / "render"
    run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    requests = _requests(render)
    assert len(requests) == 1
    put = requests[0]
    assert put["method"] == "PUT" and put["url"].split("?")[0].endswith(
        "/resourceGroups/gpu-rg/providers/Microsoft.ContainerService/managedClusters/gpu-aks/agentPools/migpool")
    assert put["body"]["properties"]["gpuInstanceProfile"] == "MIG1g"
    assert put["body"]["properties"]["vmSize"] == "Standard_ND96asr_v4"
    assert put["body"]["properties"]["osSKU"] == "Ubuntu"
    release = yaml.safe_load((render / "charts/20-nvidia-device-plugin/nvidia-device-plugin.yaml").read_text())
    assert release["values"]["migStrategy"] == "single" and release["values"]["gfd"]["enabled"] is True
    checks = yaml.safe_load((render / "checks/20-nvidia-device-plugin/node-expectations.yaml").read_text())
    assert checks["allocatable"] == {"nvidia.com/gpu": 56}  # the AKS guide's single-strategy output
    assert checks["pool_selector"] == {POOL_LABEL: "migpool"}
    pod = yaml.safe_load((render / "manifests/40-aks-mig-sample/01-pod-aks-mig-sample-single.yaml").read_text())
    assert pod["spec"]["containers"][0]["command"] == ["nvidia-smi", "-L"]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert pod["spec"]["nodeSelector"] == {POOL_LABEL: "migpool"}
    assert pod["spec"]["restartPolicy"] == "Never"
    # nothing to delete is rendered (the clean-up steps are live-only)
    assert [p.name for p in (render / "manifests/40-aks-mig-sample").iterdir()] == ["01-pod-aks-mig-sample-single.yaml"]


def test_render_mixed_strategy_on_another_size(run_playbook, tmp_path):
    render = tmp_path / "render"
    extra = {"gpu_ops_render_dir": str(render), "aks_mig_strategy": "mixed", "aks_mig_vm_size": "Standard_ND96amsr_A100_v4",
             "aks_mig_gpu_instance_profile": "MIG3g", "aks_mig_node_count": 2,
             "aks_mig_node_taints": ["sku=gpu:NoSchedule"], "aks_mig_node_labels": {"team": "ml"}}
    run_playbook(PLAYBOOK, extra_vars=extra).assert_ok()
    props = _requests(render)[0]["body"]["properties"]
    assert (props["gpuInstanceProfile"], props["count"], props["nodeTaints"], props["nodeLabels"]) == (
        "MIG3g", 2, ["sku=gpu:NoSchedule"], {"team": "ml"})
    checks = yaml.safe_load((render / "checks/20-nvidia-device-plugin/node-expectations.yaml").read_text())
    assert checks["allocatable"] == {"nvidia.com/mig-3g.40gb": 16}
    assert checks["min_nodes"] == 2
    pod = yaml.safe_load((render / "manifests/40-aks-mig-sample/01-pod-aks-mig-sample-mixed.yaml").read_text())
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-3g.40gb": 1}
    toleration = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    assert toleration in pod["spec"]["tolerations"]
    release = yaml.safe_load((render / "charts/20-nvidia-device-plugin/nvidia-device-plugin.yaml").read_text())
    assert toleration in release["values"]["tolerations"]


def test_render_refuses_what_aks_cannot_do_before_any_request(run_playbook, tmp_path):
    render = tmp_path / "render"
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render),
                                                "aks_mig_gpu_instance_profile": "MIG5g"}).assert_failed()
    assert "MIG1g, MIG2g, MIG3g, MIG4g, MIG7g" in result.stdout
    assert not (render / "requests").exists()
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render),
                                                "aks_mig_node_taints": ["sku=gpu"]}).assert_failed()
    assert "aks_mig_node_taints: 'sku=gpu' is not written key=value:Effect" in result.stdout
    assert not (render / "requests").exists()


def _live_vars(strategy):
    return {"aks_mig_strategy": strategy, "aks_mig_create_pool": False, "aks_mig_install_device_plugin": False,
            "nvidia_device_plugin_verify_retries": 2, "nvidia_device_plugin_verify_delay": 1,
            "aks_mig_sample_timeout": 30}


def _mig_node(k8s, strategy):
    if strategy == "mixed":
        allocatable = {"nvidia.com/mig-1g.5gb": "56"}
        labels = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
                  "nvidia.com/mig-1g.5gb.count": "56"}
    else:
        allocatable = {"nvidia.com/gpu": "56"}
        labels = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "56",
                  "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}
    k8s.add_node("aks-migpool-12345678-vmss000000", labels=dict(labels, **{POOL_LABEL: "migpool"}),
                 allocatable=allocatable)
    k8s.add_node("aks-system-12345678-vmss000000", labels={POOL_LABEL: "system"})


def test_live_verification_and_sample_pod(run_playbook, k8s_double):
    _mig_node(k8s_double, "mixed")
    k8s_double.script_pod("^aks-mig-sample-", phase="Succeeded", logs=LISTING_MIXED)
    result = run_playbook(PLAYBOOK, extra_vars=_live_vars("mixed"), env=k8s_double.env()).assert_ok()
    assert result.task("Record the verification")["status"] == "ok"
    check = result.task("Compare the listing with the expected MIG device")
    assert "lists 1g.5gb" in check["result"]["msg"]
    created = [r for r in k8s_double.writes(kind="Pod") if r.verb == "create"]
    assert [r.name for r in created] == ["aks-mig-sample-mixed"]
    # the sample pod was scheduled on the MIG pool and removed afterwards
    assert k8s_double.list("Pod", "default") == []


def test_live_sample_pod_listing_the_wrong_device_fails(run_playbook, k8s_double):
    _mig_node(k8s_double, "single")
    k8s_double.script_pod("^aks-mig-sample-", phase="Succeeded", logs=LISTING_WRONG)
    result = run_playbook(PLAYBOOK, extra_vars=_live_vars("single"), env=k8s_double.env()).assert_failed()
    message = result.task("Compare the listing with the expected MIG device")["result"]["msg"]
    assert "MIG devices of profile 2g.10gb listed, expected only 1g.5gb" in message
    assert "0 MIG 1g.5gb device(s) listed" in message
    assert k8s_double.list("Pod", "default") == []  # cleaned up even on failure


def test_live_pool_short_of_mig_devices_fails_before_the_sample(run_playbook, k8s_double):
    k8s_double.add_node("aks-migpool-12345678-vmss000000", labels={POOL_LABEL: "migpool"},
                        allocatable={"nvidia.com/gpu": "8"})
    result = run_playbook(PLAYBOOK, extra_vars=_live_vars("single"), env=k8s_double.env()).assert_failed()
    message = result.task("Report the nodes that do not match")["result"]["msg"]
    assert "node aks-migpool-12345678-vmss000000: allocatable nvidia.com/gpu=8, expected 56" in message
    assert result.tasks("Create the sample pod") == []


def test_live_sample_pod_that_never_finishes_fails_with_one_short_message(run_playbook, k8s_double):
    _mig_node(k8s_double, "mixed")
    k8s_double.script_pod("^aks-mig-sample-", phase="Running")
    result = run_playbook(PLAYBOOK, extra_vars=dict(_live_vars("mixed"), aks_mig_sample_timeout=5),
                          env=k8s_double.env()).assert_failed()
    # while it waits it names the pod; it ends with one message naming the pod and its state, no pod dump
    assert "FAILED - RETRYING: [localhost]: Wait for the sample pod to finish - default/aks-mig-sample-mixed" in result.stdout
    failed = [r for r in result.results if r["status"] == "failed"]
    assert [r["task"] for r in failed] == ["Check that the sample pod finished"], [r["task"] for r in failed]
    message = failed[0]["result"]["msg"]
    assert message.startswith("Sample pod default/aks-mig-sample-mixed did not finish within 5 s: phase Running"), message
    assert len(message.encode()) < 1024 and "resourceVersion" not in result.stdout
    assert k8s_double.list("Pod", "default") == []  # cleaned up even so
