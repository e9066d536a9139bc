# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_nodepool (provider aks) in real ansible-playbook runs against the ARM double.

The module authenticates with azure-identity's DefaultAzureCredential, which finds the double's
managed-identity endpoint (IDENTITY_ENDPOINT / IDENTITY_HEADER), and talks to the double through
``arm_endpoint`` set with ``module_defaults`` on the ``group/gpu_ops.cluster.azure`` action group.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import validate

RG = "gpu-rg"
CLUSTER = "gpu-aks"
POOL = dict(provider="aks", resource_group=RG, cluster=CLUSTER, name="mig", vm_size="Standard_ND96asr_v4",
            node_count=1, gpu_instance_profile="MIG1g", os_sku="Ubuntu", gpu_driver="None",
            node_taints=["nvidia.com/gpu=present:NoSchedule"])


def play(tasks, defaults):
    return [dict(name="AKS MIG pool", hosts="localhost", gather_facts=False, module_defaults=defaults, tasks=tasks)]


def pool_task(name, register=None, **options):
    task = {"name": name, "gpu_ops.cluster.gpu_nodepool": dict(POOL, **options)}
    if register:
        task["register"] = register
    return task


def test_create_rerun_and_delete(run_playbook, arm_double, arm_env, azure_defaults):
    tasks = [
        pool_task("create", register="created"),
        pool_task("again", register="again"),
        {"name": "check", "ansible.builtin.assert": {"that": [
            "created is changed",
            "created.node_pool.properties.provisioningState == 'Succeeded'",
            "created.expected_resources['nvidia.com/gpu'] == 56",
            "again is not changed",
        ]}},
    ]
    result = run_playbook(play(tasks, azure_defaults), env=arm_env).assert_ok()
    assert [r["task"] for r in result.changed] == ["create"]
    puts = arm_double.requests_for("PUT")
    assert len(puts) == 1 and validate("AgentPool", puts[0]["body"]) == []
    assert all(r["authorized"] for r in arm_double.requests_for(contains="/subscriptions/"))
    assert arm_double.requests_for("GET", "/msi/token")  # tokens came from the managed-identity endpoint
    pool = arm_double.pool(RG, CLUSTER, "mig")["properties"]
    assert (pool["gpuInstanceProfile"], pool["gpuProfile"]) == ("MIG1g", {"driver": "None"})

    result = run_playbook(play([pool_task("remove", state="absent")], azure_defaults), env=arm_env).assert_ok()
    assert [r["task"] for r in result.changed] == ["remove"]
    assert arm_double.pool(RG, CLUSTER, "mig") is None


def test_check_mode_and_diff_send_nothing(run_playbook, arm_double, arm_env, azure_defaults):
    result = run_playbook(play([pool_task("create")], azure_defaults), env=arm_env, check=True, diff=True).assert_ok()
    assert [r["task"] for r in result.changed] == ["create"]
    assert '"gpuInstanceProfile": "MIG1g"' in result.stdout
    assert arm_double.requests_for("PUT") == []
    assert arm_double.pool(RG, CLUSTER, "mig") is None


def test_immutable_change_fails_naming_the_option(run_playbook, arm_double, arm_env, azure_defaults):
    run_playbook(play([pool_task("create")], azure_defaults), env=arm_env).assert_ok()
    arm_double.clear_requests()
    result = run_playbook(play([pool_task("resize", gpu_instance_profile="MIG3g")], azure_defaults),
                          env=arm_env).assert_failed()
    message = result.task("resize")["result"]["msg"]
    assert message.startswith("gpu_instance_profile cannot be changed on the existing agent pool mig")
    assert "recreate: true" in message
    assert arm_double.requests_for("PUT") == [] and arm_double.requests_for("DELETE") == []


def test_mig_on_azure_linux_is_refused_before_any_request(run_playbook, arm_double, arm_env, azure_defaults):
    result = run_playbook(play([pool_task("bad", os_sku="AzureLinux")], azure_defaults), env=arm_env).assert_failed()
    assert "os_sku: AzureLinux" in result.task("bad")["result"]["msg"]
    assert arm_double.requests_for(contains="/subscriptions/") == []


def test_throttling_and_failed_lro_then_rerun(run_playbook, arm_double, arm_env, azure_defaults):
    arm_double.fault("throttle", count=2, method="PUT", retry_after=0)
    arm_double.fault("lro_failed", method="PUT", match="/mig")
    result = run_playbook(play([pool_task("create")], azure_defaults), env=arm_env).assert_failed()
    assert "OverconstrainedAllocationRequest" in result.task("create")["result"]["msg"]
    assert [r["status"] for r in arm_double.requests_for("PUT")] == [429, 429, 201]
    result = run_playbook(play([pool_task("create")], azure_defaults), env=arm_env).assert_ok()
    assert [r["task"] for r in result.changed] == ["create"]
    assert arm_double.pool(RG, CLUSTER, "mig")["properties"]["provisioningState"] == "Succeeded"
    assert arm_double.pool_names(RG, CLUSTER) == ["mig", "nodepool1"]


def test_render_mode_needs_no_azure(run_playbook, tmp_path):
    render = tmp_path / "rendered"
    options = dict(subscription_id="00000000-0000-0000-0000-00000000a2c5", render_dir=str(render))
    defaults = {"group/gpu_ops.cluster.azure": options}
    run_playbook(play([pool_task("create")], defaults)).assert_ok()
    files = sorted(p.name for p in (render / "requests").iterdir())
    assert files == ["001-arm-put-agentPools_mig.json"]
