# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A failure caused by a value from module_defaults says so (plugins/plugin_utils/_clouds/action.py).

One play run: bad values set by module_defaults for group/gpu_ops.cluster.gcp, for
group/gpu_ops.cluster.azure and for one module by name, each refused by the module (or by Ansible's
argument spec check) with a message naming the option and where its value came from; the same bad
value written in the task itself carries no such note.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT

BAD_TOKEN = "ya29.from-defaults\r\ninjected"


def test_failures_name_the_module_defaults_entry_that_set_the_value(run_playbook, gcp_double, arm_double):
    gcp = dict(project=GCP_PROJECT, auth_kind="accesstoken", access_token=BAD_TOKEN,
               container_endpoint=gcp_double.url, compute_endpoint=gcp_double.url)
    azure = dict(subscription_id=arm_double.subscription, arm_endpoint=arm_double.url, tenant_id="t-1",
                 client_id="c-1", client_secret="Q~from-defaults\ninjected")
    defaults = {"group/gpu_ops.cluster.gcp": gcp, "group/gpu_ops.cluster.azure": azure,
                "gpu_ops.cluster.gke_multinetwork": dict(auth_kind="bogus")}
    tasks = [
        {"name": "token from the group", "gpu_ops.cluster.gke_cluster": dict(name="c", location="us-central1-a")},
        {"name": "token from the task", "gpu_ops.cluster.gke_cluster": dict(
            name="c", location="us-central1-a", access_token="ya29.from-the-task\ninjected")},
        {"name": "auth_kind from the module entry", "gpu_ops.cluster.gke_multinetwork": dict(
            cluster="c", location="us-central1", gpudirect="tcpx")},
        {"name": "secret from the azure group", "gpu_ops.cluster.gpu_nodepool": dict(
            provider="aks", resource_group="gpu-rg", cluster="gpu-aks", name="p1", vm_size="Standard_NC24ads_A100_v4",
            node_count=1)},
    ]
    for task in tasks:
        task["ignore_errors"] = True
    play = [dict(name="defaults", hosts="localhost", gather_facts=False, module_defaults=defaults, tasks=tasks)]
    result = run_playbook(play)
    assert result.rc == 0, result.output
    messages = {r["task"]: r["result"]["msg"] for r in result.results}
    assert messages["token from the group"].startswith("access_token:")
    assert "access_token comes from module_defaults for group/gpu_ops.cluster.gcp" in messages["token from the group"]
    assert messages["token from the task"].startswith("access_token:")
    assert "module_defaults" not in messages["token from the task"]
    assert "auth_kind" in messages["auth_kind from the module entry"]
    assert "auth_kind comes from module_defaults for gpu_ops.cluster.gke_multinetwork" in \
        messages["auth_kind from the module entry"]
    assert messages["secret from the azure group"].startswith("client_secret:")
    assert "client_secret comes from module_defaults for group/gpu_ops.cluster.azure" in \
        messages["secret from the azure group"]
    assert "from-defaults" not in result.stdout + result.stderr and "from-the-task" not in result.stdout
    assert gcp_double.requests == [] and arm_double.requests_for() == []
