# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AKS agent-pool engine of gpu_nodepool against the ARM double.

Every test runs the engine with the gpu_nodepool module's own argument spec; every PUT the double
received is checked against the SDK models (read-only properties rejected) at the end of each test.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpu_ops.cluster.tests.unit.plugins.module_utils.module_args import patch_module_args

from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure import nodepool as engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.mig import AKS_GPU_INSTANCE_PROFILES
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import run_module
from ansible_collections.gpu_ops.cluster.plugins.modules import gpu_nodepool
from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import API_VERSION, read_only_paths, validate
from ansible_collections.gpu_ops.cluster.tests.doubles.arm import ArmDouble

RG = "gpu-rg"
CLUSTER = "gpu-aks"
MIG = dict(vm_size="Standard_ND96asr_v4", node_count=1, gpu_instance_profile="MIG1g", os_sku="Ubuntu",
           node_labels={"gpu": "a100"}, node_taints=["nvidia.com/gpu=present:NoSchedule"])


class Sleeps(list):
    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def double():
    with ArmDouble(retry_after=2) as arm:
        arm.add_cluster(RG, CLUSTER, kubernetes_version="1.33.2")
        yield arm
        for request in arm.requests_for("PUT"):
            assert validate("AgentPool", request["body"]) == [], request


@pytest.fixture
def run(double, capsys):
    """run(**options) -> the module result (dict); check=True / diff=True for those modes."""

    def runner(check=False, diff=False, max_retries=3, sleep=None, **options):
        args = dict(provider="aks", subscription_id=double.subscription, arm_endpoint=double.url,
                    resource_group=RG, cluster=CLUSTER, name="mig", max_retries=max_retries)
        args.update(options)
        if check:
            args["_ansible_check_mode"] = True
        if diff:
            args["_ansible_diff"] = True
        with patch_module_args(args):
            module = AnsibleModule(argument_spec=gpu_nodepool.argument_spec(), supports_check_mode=True)
            with pytest.raises(SystemExit):
                run_module(module, lambda params, context: engine.run(
                    params, context, credential=double.credential(), sleep=sleep if sleep is not None else Sleeps()))
        out = capsys.readouterr().out
        return json.loads(out)

    return runner


def writes(double):
    return [(r["method"], r["path"].rsplit("/", 1)[-1], r["status"]) for r in double.requests_for()
            if r["method"] in ("PUT", "DELETE", "PATCH", "POST")]


# ------------------------------------------------------------------------------------- create / no-op


def test_create_mig_pool(run, double):
    result = run(**MIG)
    assert not result.get("failed"), result
    assert result["changed"]
    assert result["changes"] == [{"action": "create", "kind": "agentPool", "name": "mig"}]
    pool = result["node_pool"]
    assert pool["properties"]["provisioningState"] == "Succeeded"
    assert pool["properties"]["gpuInstanceProfile"] == "MIG1g"
    # 8 x A100 40GB, 7 x 1g.5gb each, single strategy
    assert result["expected_resources"] == {"nvidia.com/gpu": 56}
    assert writes(double) == [("PUT", "mig", 201)]
    body = double.requests_for("PUT")[0]["body"]
    assert body == {"properties": {
        "vmSize": "Standard_ND96asr_v4", "count": 1, "gpuInstanceProfile": "MIG1g", "osSKU": "Ubuntu",
        "mode": "User", "osType": "Linux", "type": "VirtualMachineScaleSets",
        "nodeLabels": {"gpu": "a100"}, "nodeTaints": ["nvidia.com/gpu=present:NoSchedule"]}}
    assert double.requests_for("PUT")[0]["query"] == {"api-version": API_VERSION}
    assert double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]


def test_rerun_sends_no_put(run, double):
    run(**MIG)
    double.clear_requests()
    result = run(**MIG)
    assert not result["changed"]
    assert result["changes"] == []
    assert writes(double) == []
    assert result["node_pool"]["properties"]["gpuInstanceProfile"] == "MIG1g"
    assert result["expected_resources"] == {"nvidia.com/gpu": 56}


def test_rerun_with_defaults_spelled_out_and_other_case_is_no_change(run, double):
    run(**MIG)
    double.clear_requests()
    result = run(**dict(MIG, vm_size="standard_nd96asr_v4", gpu_driver="Install",
                        node_taints=list(reversed(MIG["node_taints"]))))
    assert not result["changed"], result
    assert writes(double) == []


def test_check_mode_create_sends_nothing(run, double):
    result = run(check=True, diff=True, **MIG)
    assert result["changed"]
    assert result["changes"][0]["action"] == "create"
    assert '"gpuInstanceProfile": "MIG1g"' in result["diff"][0]["after"]
    assert writes(double) == []
    assert double.pool(RG, CLUSTER, "mig") is None
    # from the options, as on GKE: the role that follows can wait for 56 MIG devices either way
    assert result["expected_resources"] == {"nvidia.com/gpu": 56}


def test_no_wait_returns_the_pool_while_creating(run, double):
    result = run(wait=False, **MIG)
    assert result["changed"]
    assert result["node_pool"]["properties"]["provisioningState"] == "Creating"
    assert double.requests_for("GET", "/operations/") == []


def test_cluster_missing_is_named_and_nothing_is_written(run, double):
    result = run(**dict(MIG, cluster="nosuch"))
    assert result["failed"]
    assert "cluster nosuch was not found in resource group gpu-rg" in result["msg"]
    assert writes(double) == []


def test_vm_size_is_required_to_create(run, double):
    result = run(gpu_instance_profile="MIG1g")
    assert result["failed"]
    assert result["msg"].startswith("vm_size: is required to create agent pool mig")
    assert writes(double) == []


# ------------------------------------------------------------------------------------- updates


def test_update_is_sparse_and_keeps_what_was_not_set(run, double):
    run(**MIG)
    double.clear_requests()
    result = run(node_labels={"gpu": "a100", "team": "ml"}, diff=True)
    assert result["changed"]
    assert result["changes"] == [{"action": "update", "kind": "agentPool", "name": "mig",
                                  "fields": ["properties.nodeLabels"]}]
    assert '"team": "ml"' in result["diff"][0]["after"]
    body = double.requests_for("PUT")[0]["body"]["properties"]
    # PUT replaces the pool: everything the user did not set is sent back unchanged
    assert body["nodeTaints"] == MIG["node_taints"]
    assert body["gpuInstanceProfile"] == "MIG1g"
    assert body["vmSize"] == "Standard_ND96asr_v4"
    assert "provisioningState" not in body and "currentOrchestratorVersion" not in body
    pool = double.pool(RG, CLUSTER, "mig")["properties"]
    assert pool["nodeTaints"] == MIG["node_taints"]
    assert pool["nodeLabels"] == {"gpu": "a100", "team": "ml"}


def test_labels_are_the_whole_set(run, double):
    run(**MIG)
    result = run(node_labels={})
    assert result["changed"]
    assert double.pool(RG, CLUSTER, "mig")["properties"].get("nodeLabels", {}) == {}


def test_scale_and_upgrade_in_place(run, double):
    run(**dict(MIG, orchestrator_version="1.33"))
    result = run(node_count=3, orchestrator_version="1.33.2")
    assert result["changed"]
    assert result["changes"][0]["fields"] == ["properties.count", "properties.orchestratorVersion"]
    assert double.pool(RG, CLUSTER, "mig")["properties"]["count"] == 3


def test_enabling_and_disabling_autoscaling_on_a_plain_gpu_pool(run, double):
    run(name="t4", vm_size="Standard_NC4as_T4_v3", node_count=5)
    result = run(name="t4", enable_autoscaling=True, min_count=1, max_count=3)
    assert result["changed"], result
    pool = double.pool(RG, CLUSTER, "t4")["properties"]
    assert (pool["enableAutoScaling"], pool["minCount"], pool["maxCount"], pool["count"]) == (True, 1, 3, 3)
    # node_count is the autoscaler's while it is on
    assert not run(name="t4", enable_autoscaling=True, min_count=1, max_count=3, node_count=2)["changed"]
    result = run(name="t4", enable_autoscaling=False)
    assert result["changed"]
    pool = double.pool(RG, CLUSTER, "t4")["properties"]
    assert pool["enableAutoScaling"] is False and "minCount" not in pool and "maxCount" not in pool
    assert "expected_resources" not in result  # a T4 size is not in the MIG catalog


@pytest.mark.parametrize("change,option,field", [
    (dict(vm_size="Standard_ND96isr_H100_v5"), "vm_size", "properties.vmSize"),
    (dict(gpu_instance_profile="MIG3g"), "gpu_instance_profile", "properties.gpuInstanceProfile"),
    (dict(os_sku="Ubuntu2204"), "os_sku", "properties.osSKU"),
    (dict(gpu_driver="None"), "gpu_driver", "properties.gpuProfile.driver"),
])
def test_immutable_change_is_refused_without_recreate(run, double, change, option, field):
    run(**MIG)
    double.clear_requests()
    result = run(**dict(MIG, **change))
    assert result["failed"]
    assert result["msg"].startswith("%s cannot be changed on the existing agent pool mig" % option)
    assert field in result["msg"]
    assert "recreate: true" in result["msg"]
    assert writes(double) == []


def test_recreate_deletes_then_creates_one_pool(run, double):
    run(**MIG)
    double.clear_requests()
    result = run(recreate=True, diff=True, **dict(MIG, vm_size="Standard_ND96isr_H100_v5", gpu_instance_profile="MIG2g"))
    assert not result.get("failed"), result
    assert result["changes"] == [{"action": "recreate", "kind": "agentPool", "name": "mig",
                                  "fields": ["properties.gpuInstanceProfile", "properties.vmSize"]}]
    assert writes(double) == [("DELETE", "mig", 202), ("PUT", "mig", 201)]
    pool = double.pool(RG, CLUSTER, "mig")["properties"]
    assert (pool["vmSize"], pool["gpuInstanceProfile"]) == ("Standard_ND96isr_H100_v5", "MIG2g")
    assert pool["nodeTaints"] == MIG["node_taints"]  # carried over
    assert double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]
    # H100 80GB: 3 x 2g.20gb per GPU, 8 GPUs
    assert result["expected_resources"] == {"nvidia.com/gpu": 24}


def test_check_mode_recreate_sends_nothing(run, double):
    run(**MIG)
    double.clear_requests()
    result = run(check=True, recreate=True, **dict(MIG, gpu_instance_profile="MIG7g"))
    assert result["changed"] and result["changes"][0]["action"] == "recreate"
    assert writes(double) == []


# ------------------------------------------------------------------------------------- delete


def test_delete_then_rerun(run, double):
    run(**MIG)
    double.clear_requests()
    assert run(state="absent", check=True)["changed"]
    assert writes(double) == []
    result = run(state="absent")
    assert result["changed"] and result["node_pool"] == {}
    assert writes(double) == [("DELETE", "mig", 202)]
    assert double.pool(RG, CLUSTER, "mig") is None
    assert not run(state="absent")["changed"]


# ------------------------------------------------------------------------------------- bad input


BAD_INPUTS = [
    (dict(MIG, vm_size="Standard_NC24ads_A10_v4"), "gpu_instance_profile",
     ["MIG1g is not available on vm_size Standard_NC24ads_A10_v4", "Standard_ND96asr_v4"]),
    (dict(MIG, enable_autoscaling=True, min_count=1, max_count=2), "enable_autoscaling",
     ["cluster autoscaler cannot be used with a multi-instance GPU pool"]),
    (dict(MIG, os_sku="AzureLinux"), "os_sku", ["AzureLinux", "Azure Linux"]),
    (dict(MIG, node_taints=["gpu:NoScheduel"]), "node_taints", ["'gpu:NoScheduel' has effect 'NoScheduel'"]),
    (dict(MIG, node_taints=["no-effect"]), "node_taints", ["is not written key=value:Effect"]),
    (dict(MIG, node_labels={"kubernetes.azure.com/mode": "x"}), "node_labels", ["reserves", "prefix"]),
    (dict(MIG, name="MIG_pool"), "name", ["1 to 12 lowercase letters and digits"]),
    (dict(MIG, name="averylongpoolname"), "name", ["1 to 12 lowercase letters and digits"]),
    (dict(MIG, resource_group="rg/../x"), "resource_group", ["not valid"]),
    (dict(MIG, cluster="a/b"), "cluster", ["not valid"]),
    (dict(MIG, subscription_id="not-a-guid"), "subscription_id", ["GUID"]),
    (dict(MIG, vm_size="ND96asr"), "vm_size", ["Azure VM size"]),
    (dict(MIG, node_count=1001), "node_count", ["out of range"]),
    (dict(MIG, mode="System", node_count=0), "node_count", ["System pool needs at least 1 node"]),
    (dict(vm_size="Standard_NC4as_T4_v3", enable_autoscaling=True, min_count=3, max_count=2), "min_count",
     ["greater than max_count"]),
    (dict(vm_size="Standard_NC4as_T4_v3", min_count=1), "min_count", ["only used with enable_autoscaling"]),
    (dict(MIG, orchestrator_version="v1.33"), "orchestrator_version", ["Kubernetes version"]),
    (dict(MIG, machine_type="a3-highgpu-8g"), "machine_type", ["GKE option"]),
    (dict(MIG, gpudirect="tcpx"), "gpudirect", ["GKE option"]),
]


@pytest.mark.parametrize("options,option,words", BAD_INPUTS)
def test_bad_input_is_refused_before_any_request(run, double, options, option, words):
    result = run(**options)
    assert result["failed"]
    assert result["msg"].startswith("invalid gpu_nodepool (provider aks) input (nothing was changed)")
    assert any(item.startswith(option + ": ") for item in result["problems"]), result["problems"]
    for word in words:
        assert word in result["msg"]
    assert double.requests_for() == []


def test_unknown_profile_is_refused_by_the_module_with_the_choices(capsys, double):
    args = dict(provider="aks", subscription_id=double.subscription, arm_endpoint=double.url, resource_group=RG,
                cluster=CLUSTER, name="mig", vm_size="Standard_ND96asr_v4", gpu_instance_profile="MIG5g")
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_nodepool.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"]
    assert "gpu_instance_profile" in result["msg"] and "MIG1g, MIG2g, MIG3g, MIG4g, MIG7g" in result["msg"]
    assert double.requests_for() == []


def test_engine_refuses_an_unknown_profile_on_its_own():
    problems = engine.validate(dict(provider="aks", subscription_id="00000000-0000-0000-0000-000000000000",
                                    resource_group=RG, cluster=CLUSTER, name="mig",
                                    vm_size="Standard_ND96asr_v4", gpu_instance_profile="MIG5g"))
    assert problems.items == ["gpu_instance_profile: 'MIG5g' is not one of: MIG1g, MIG2g, MIG3g, MIG4g, MIG7g"]


def test_autoscaling_on_an_existing_mig_pool_is_refused(run, double):
    run(**MIG)
    double.clear_requests()
    result = run(enable_autoscaling=True, min_count=1, max_count=2)
    assert result["failed"]
    assert "enable_autoscaling: the cluster autoscaler cannot be used" in result["msg"]
    assert writes(double) == []


# ------------------------------------------------------------------------------------- faults


def test_throttled_put_is_retried_honouring_retry_after(run, double):
    sleeps = Sleeps()
    double.fault("throttle", count=2, method="PUT", retry_after=6)
    result = run(sleep=sleeps, **MIG)
    assert result["changed"] and not result.get("failed")
    assert writes(double) == [("PUT", "mig", 429), ("PUT", "mig", 429), ("PUT", "mig", 201)]
    assert sleeps[:2] == [6.0, 6.0]
    assert sleeps[2:] == [2.0, 2.0, 2.0]  # the LRO's Retry-After between polls


def test_failed_lro_fails_the_run_then_a_rerun_reconciles(run, double):
    double.fault("lro_failed", method="PUT", match="/mig")
    result = run(**MIG)
    assert result["failed"]
    assert "OverconstrainedAllocationRequest" in result["msg"]
    assert "PUT" in result["msg"] and "agentPools/mig" in result["msg"]
    assert double.pool(RG, CLUSTER, "mig")["properties"]["provisioningState"] == "Failed"
    result = run(**MIG)
    assert result["changed"] and not result.get("failed"), result
    assert result["changes"][0]["fields"] == ["properties.provisioningState"]
    assert "provisioning state Failed" in json.dumps(result.get("warnings")), result.keys()
    assert double.pool(RG, CLUSTER, "mig")["properties"]["provisioningState"] == "Succeeded"
    assert double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]


def test_interrupted_run_then_rerun_converges_to_one_pool(run, double):
    # the PUT reaches ARM, the answer never comes back, and the run gives up (no retries)
    double.fault("commit_then_reset", method="PUT")
    result = run(max_retries=0, **MIG)
    assert result["failed"]
    assert double.pool(RG, CLUSTER, "mig")["properties"]["provisioningState"] == "Creating"
    # the re-run finds the pool mid-creation, waits for it, and has nothing left to do
    result = run(**MIG)
    assert not result.get("failed"), result
    assert not result["changed"]
    assert result["node_pool"]["properties"]["provisioningState"] == "Succeeded"
    assert [w[:2] for w in writes(double)] == [("PUT", "mig")]
    assert double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]


def test_lost_answer_within_one_run_converges(run, double):
    # the PUT reaches ARM, the answer is lost, the retry meets the running operation (409)
    double.fault("commit_then_reset", method="PUT")
    result = run(**MIG)
    assert not result.get("failed"), result
    assert result["changed"]
    assert [w[2] for w in writes(double)] == ["reset", 409]
    assert result["node_pool"]["properties"]["provisioningState"] == "Succeeded"
    assert double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]


def test_interrupted_delete_then_rerun(run, double):
    run(**MIG)
    double.fault("commit_then_reset", method="DELETE")
    result = run(state="absent", max_retries=0)
    assert result["failed"]
    result = run(state="absent")
    assert not result.get("failed"), result
    assert double.pool(RG, CLUSTER, "mig") is None


def test_503_and_reset_on_reads_are_retried(run, double):
    double.fault("unavailable", count=1, method="GET")
    double.fault("reset", count=1, method="GET")
    result = run(**MIG)
    assert result["changed"] and not result.get("failed")


# ------------------------------------------------------------------------------------- render mode


def test_render_mode_writes_the_put_and_needs_no_credentials(tmp_path, capsys):
    args = dict(provider="aks", subscription_id="00000000-0000-0000-0000-00000000a2c5", resource_group=RG,
                cluster=CLUSTER, name="mig", render_dir=str(tmp_path), **MIG)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            gpu_nodepool.main()
    result = json.loads(capsys.readouterr().out)
    assert not result.get("failed"), result
    assert result["changed"]
    assert result["node_pool"]["properties"]["provisioningState"] == "Succeeded"
    assert result["expected_resources"] == {"nvidia.com/gpu": 56}
    files = os.listdir(str(tmp_path / "requests"))
    assert files == ["001-arm-put-agentPools_mig.json"]
    recorded = json.loads((tmp_path / "requests" / files[0]).read_text())
    assert validate("AgentPool", recorded["body"]) == []
    assert recorded["url"] == (
        "https://management.azure.com/subscriptions/00000000-0000-0000-0000-00000000a2c5/resourceGroups/gpu-rg/"
        "providers/Microsoft.ContainerService/managedClusters/gpu-aks/agentPools/mig?api-version=%s" % API_VERSION)


# ------------------------------------------------------------------------------------- contract


def test_read_only_lists_match_the_sdk():
    ours = set(engine.READ_ONLY_TOP) | set("properties." + p for p in engine.READ_ONLY_PROPERTIES) | set(
        "properties.%s.%s" % pair for pair in engine.READ_ONLY_NESTED)
    assert ours == read_only_paths("AgentPool")


def test_api_version_is_the_models_version():
    assert engine.API_VERSION == API_VERSION


def test_gpu_instance_profiles_match_the_sdk_enum():
    from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import enum_values  # pylint: disable=import-outside-toplevel

    # the MIG catalog holds the AKS profiles (the AKS engine reads them there)
    assert sorted(AKS_GPU_INSTANCE_PROFILES) == enum_values("AgentPool", "properties.gpuInstanceProfile")
    assert list(engine.GPU_DRIVERS) == enum_values("AgentPool", "properties.gpuProfile.driver")


@pytest.mark.parametrize("strategy,expected", [
    ("single", {"nvidia.com/gpu": 56}),
    ("mixed", {"nvidia.com/mig-1g.5gb": 56}),
])
def test_expected_resources_by_strategy(strategy, expected):
    params = dict(vm_size="Standard_ND96asr_v4", gpu_instance_profile="MIG1g", mig_strategy=strategy)
    assert engine.expected_resources(params) == expected


def test_expected_resources_without_mig_and_unknown_size():
    assert engine.expected_resources(dict(vm_size="Standard_ND96asr_v4")) == {"nvidia.com/gpu": 8}
    assert engine.expected_resources(dict(vm_size="Standard_NC4as_T4_v3")) is None
    assert engine.expected_resources(dict()) is None


def test_expected_resources_prefer_the_pool_document():
    """An existing pool's VM size and profile count when the options leave them out (a re-run that sets only counts)."""
    pool = {"properties": {"vmSize": "Standard_ND96asr_v4", "gpuInstanceProfile": "MIG1g"}}
    assert engine.expected_resources(dict(mig_strategy="mixed"), pool) == {"nvidia.com/mig-1g.5gb": 56}
