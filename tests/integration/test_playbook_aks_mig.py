# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/aks_mig.yml: render mode end to end (inventories/aks, and both AKS clusters of inventories/fleet with their
own settings), the required settings, and the live verification + sample pod against the K8s double."""

from __future__ import annotations

import json

import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

PLAYBOOK = str(REPO_ROOT / "playbooks" / "aks_mig.yml")
AKS = ("-i", str(REPO_ROOT / "inventories" / "aks"))        # one cluster: the host gpu-aks
FLEET = ("-i", str(REPO_ROOT / "inventories" / "fleet"))
SUBSCRIPTION = "11111111-2222-4333-8444-555555555555"
SUBSCRIBED = {"AZURE_SUBSCRIPTION_ID": SUBSCRIPTION}     # what AWX's Azure credential sets
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
    run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render)}, extra_args=AKS, env=SUBSCRIBED).assert_ok()
    requests = _requests(render)
    assert len(requests) == 1
    put = requests[0]
    assert put["method"] == "PUT" and put["url"].split("?")[0].endswith(
        "/subscriptions/%s/resourceGroups/gpu-rg/providers/Microsoft.ContainerService/managedClusters/gpu-aks"
        "/agentPools/migpool" % SUBSCRIPTION)
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
    run_playbook(PLAYBOOK, extra_vars=extra, extra_args=AKS, env=SUBSCRIBED).assert_ok()
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
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render), "aks_mig_gpu_instance_profile": "MIG5g"},
                          extra_args=AKS, env=SUBSCRIBED).assert_failed()
    assert "MIG1g, MIG2g, MIG3g, MIG4g, MIG7g" in result.stdout
    assert not (render / "requests").exists()
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render), "aks_mig_node_taints": ["sku=gpu"]},
                          extra_args=AKS, env=SUBSCRIBED).assert_failed()
    assert "aks_mig_node_taints: 'sku=gpu' is not written key=value:Effect" in result.stdout
    assert not (render / "requests").exists()


def test_render_every_aks_cluster_of_the_fleet_with_its_own_settings(run_playbook, tmp_path):
    """The fleet inventory (AWX's "GPU fleet"): one plan per AKS cluster, MIG1g single on aks-a100-eastus and MIG3g
    mixed on aks-a100-westeurope, each in its resource group, the subscription from the Azure credential."""
    render = tmp_path / "render"
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render)}, extra_args=FLEET,
                          env=SUBSCRIBED).assert_ok()
    pools = {}
    for put in _requests(render):
        path = put["url"].split("?")[0]
        cluster = path.split("/managedClusters/")[1].split("/")[0]
        pools[cluster] = (path.split("/subscriptions/")[1].split("/")[0], path.split("/resourceGroups/")[1].split("/")[0],
                          put["body"]["properties"]["gpuInstanceProfile"], put["body"]["properties"]["vmSize"])
    assert pools == {"aks-a100-eastus": (SUBSCRIPTION, "gpu-rg", "MIG1g", "Standard_ND96asr_v4"),
                     "aks-a100-westeurope": (SUBSCRIPTION, "gpu-rg-westeurope", "MIG3g", "Standard_ND96asr_v4")}
    # no cluster's files overwrite the other's: each step carries the cluster's inventory host
    east = yaml.safe_load((render / "checks/20-nvidia-device-plugin-aks-a100-eastus/node-expectations.yaml").read_text())
    west = yaml.safe_load((render / "checks/20-nvidia-device-plugin-aks-a100-westeurope/node-expectations.yaml").read_text())
    assert east["allocatable"] == {"nvidia.com/gpu": 56} and west["allocatable"] == {"nvidia.com/mig-3g.20gb": 16}
    for host, strategy in (("aks-a100-eastus", "single"), ("aks-a100-westeurope", "mixed")):
        release = yaml.safe_load((render / "charts/20-nvidia-device-plugin-{0}/nvidia-device-plugin.yaml".format(host)).read_text())
        assert release["values"]["migStrategy"] == strategy
        pod = render / "manifests/40-aks-mig-sample-{0}/01-pod-aks-mig-sample-{1}.yaml".format(host, strategy)
        assert pod.is_file(), sorted(str(p.relative_to(render)) for p in render.rglob("*"))
    # the other hosts of the fleet (GKE clusters, bare-metal hosts) ran nothing of the AKS play
    assert {r["host"] for r in result.tasks("Create the multi-instance GPU node pool")} == {
        "aks-a100-eastus", "aks-a100-westeurope"}


def test_missing_required_settings_fail_naming_them_before_any_request(run_playbook, tmp_path):
    """No default subscription, resource group or cluster: one failure per cluster naming all it misses, nothing sent."""
    inventory = tmp_path / "aks.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    inventory.write_text(yaml.safe_dump({"aks_clusters": {"hosts": {
        "aks-one": dict(local, aks_mig_cluster="aks-one"),
        "aks-two": dict(local, aks_mig_resource_group="rg-two")}}}), encoding="utf-8")
    render = tmp_path / "render"
    result = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render)}, extra_args=("-i", str(inventory)),
                          env={"AZURE_SUBSCRIPTION_ID": ""}).assert_failed()
    failures = {r["host"]: r["result"]["msg"] for r in result.failed}
    assert sorted(failures) == ["aks-one", "aks-two"], result.output
    assert failures["aks-one"].startswith("aks-one: required and not set: aks_mig_subscription_id (or AZURE_SUBSCRIPTION_ID")
    assert "aks_mig_resource_group" in failures["aks-one"] and "aks_mig_cluster (" not in failures["aks-one"]
    assert "aks_mig_subscription_id" in failures["aks-two"] and "aks_mig_cluster (" in failures["aks-two"]
    assert "aks_mig_resource_group" not in failures["aks-two"].split("Set them")[0]
    assert not (render / "requests").exists() and result.tasks("Create the multi-instance GPU node pool") == []
    # the environment's subscription is enough for it
    again = run_playbook(PLAYBOOK, extra_vars={"gpu_ops_render_dir": str(render), "aks_mig_resource_group": "rg",
                                               "aks_mig_cluster": "c"}, extra_args=("-i", str(inventory)),
                         env=SUBSCRIBED).assert_ok()
    assert len(again.tasks("Create the multi-instance GPU node pool")) == 2
    assert len(_requests(render)) == 2


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
    result = run_playbook(PLAYBOOK, extra_vars=_live_vars("mixed"), env=dict(k8s_double.env(), AZURE_SUBSCRIPTION_ID=""), extra_args=AKS).assert_ok()
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
    result = run_playbook(PLAYBOOK, extra_vars=_live_vars("single"), env=dict(k8s_double.env(), AZURE_SUBSCRIPTION_ID=""), extra_args=AKS).assert_failed()
    message = result.task("Compare the listing with the expected MIG device")["result"]["msg"]
    assert "MIG devices of profile 2g.10gb listed, expected only 1g.5gb" in message
    assert "0 MIG 1g.5gb device(s) listed" in message
    assert k8s_double.list("Pod", "default") == []  # cleaned up even on failure


def test_live_pool_short_of_mig_devices_fails_before_the_sample(run_playbook, k8s_double):
    k8s_double.add_node("aks-migpool-12345678-vmss000000", labels={POOL_LABEL: "migpool"},
                        allocatable={"nvidia.com/gpu": "8"})
    result = run_playbook(PLAYBOOK, extra_vars=_live_vars("single"), env=dict(k8s_double.env(), AZURE_SUBSCRIPTION_ID=""), extra_args=AKS).assert_failed()
    message = result.task("Report the nodes that do not match")["result"]["msg"]
    assert "node aks-migpool-12345678-vmss000000: allocatable nvidia.com/gpu=8, expected 56" in message
    assert result.tasks("Create the sample pod") == []


def test_live_sample_pod_that_never_finishes_fails_with_one_short_message(run_playbook, k8s_double):
    _mig_node(k8s_double, "mixed")
    k8s_double.script_pod("^aks-mig-sample-", phase="Running")
    result = run_playbook(PLAYBOOK, extra_vars=dict(_live_vars("mixed"), aks_mig_sample_timeout=5),
                          env=dict(k8s_double.env(), AZURE_SUBSCRIPTION_ID=""), extra_args=AKS).assert_failed()
    # while it waits it names the pod; it ends with one message naming the pod and its state, no pod dump
    assert "FAILED - RETRYING: [gpu-aks]: Wait for the sample pod to finish - default/aks-mig-sample-mixed" in result.retry_lines()
    failed = [r for r in result.results if r["status"] == "failed"]
    assert [r["task"] for r in failed] == ["Check that the sample pod finished"], [r["task"] for r in failed]
    message = failed[0]["result"]["msg"]
    assert message.startswith("Sample pod default/aks-mig-sample-mixed did not finish within 5 s: phase Running"), message
    assert len(message.encode()) < 1024 and "resourceVersion" not in result.stdout
    assert k8s_double.list("Pod", "default") == []  # cleaned up even so
