# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet play that sets module_defaults for both action groups and manages a GKE and an AKS pool.

gpu_nodepool is a member of group/gpu_ops.cluster.gcp and group/gpu_ops.cluster.azure, so both
groups' defaults reach every gpu_nodepool task: the other cloud's account options are ignored.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT


def test_gke_and_aks_pools_in_one_play_with_both_groups_defaults(run_playbook, gcp_double, arm_double, arm_env):
    defaults = {
        "group/gpu_ops.cluster.gcp": gcp_double.module_args(project=GCP_PROJECT),
        "group/gpu_ops.cluster.azure": dict(subscription_id=arm_double.subscription, arm_endpoint=arm_double.url),
    }
    tasks = [
        {"name": "GKE cluster", "gpu_ops.cluster.gke_cluster": dict(
            name="fleet", location="us-central1-a", multi_networking=False)},
        {"name": "GKE pool", "register": "gke", "gpu_ops.cluster.gpu_nodepool": dict(
            provider="gke", cluster="fleet", location="us-central1-a", name="l4", machine_type="g2-standard-8",
            accelerator_type="nvidia-l4", accelerator_count=1,
            node_count=1)},
        {"name": "AKS pool", "register": "aks", "gpu_ops.cluster.gpu_nodepool": dict(
            provider="aks", resource_group="gpu-rg", cluster="gpu-aks", name="mig", vm_size="Standard_ND96asr_v4",
            node_count=1, gpu_instance_profile="MIG1g")},
        {"name": "check", "ansible.builtin.assert": {"that": [
            "gke.expected_resources['nvidia.com/gpu'] == 1",
            "aks.expected_resources['nvidia.com/gpu'] == 56",
        ]}},
    ]
    play = [dict(name="fleet", hosts="localhost", gather_facts=False, module_defaults=defaults, tasks=tasks)]
    result = run_playbook(play, env=arm_env).assert_ok()
    assert [r["task"] for r in result.changed] == ["GKE cluster", "GKE pool", "AKS pool"]
    assert gcp_double.resource("v1/projects/%s/locations/us-central1-a/clusters/fleet/nodePools/l4" % GCP_PROJECT)
    assert arm_double.pool("gpu-rg", "gpu-aks", "mig")["properties"]["gpuInstanceProfile"] == "MIG1g"
    # a re-run of the same play converges without a write to either cloud
    gcp_double.clear_log()
    arm_double.clear_requests()
    result = run_playbook(play, env=arm_env).assert_ok()
    assert result.changed == []
    assert gcp_double.mutating_requests() == [] and arm_double.requests_for("PUT") == []
