# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/nvidia_device_plugin installs its chart for real: helm (from scripts/bootstrap.sh) through
kubernetes.core.helm in roles/apply, against the Kubernetes API double, with the test chart
tests/charts/nvidia-device-plugin standing in for NVIDIA's (same name, version and value keys, and a values
schema that refuses unknown top-level keys).

One release lifecycle, in order (each step needs the state the previous one left): install, re-run without
change, a value change that upgrades, check mode, a value the chart does not accept, uninstall.
"""

from __future__ import annotations

import base64
import gzip
import json

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import chart_path

ROLE = "gpu_ops.cluster.nvidia_device_plugin"
RELEASE = NAMESPACE = "nvidia-device-plugin"
POOL = {"kubernetes.azure.com/agentpool": "gpupool"}
GFD_LABELS = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
              "nvidia.com/gpu.count": "56"}
HELM_TASK = "Install release nvidia-device-plugin"


def _play(verify=False, **extra):
    role_vars = {
        "nvidia_device_plugin_verify": verify,
        "nvidia_device_plugin_chart_ref": chart_path("nvidia-device-plugin"),
        "nvidia_device_plugin_chart_repo_url": "",
        "nvidia_device_plugin_mig_strategy": "single",
        "nvidia_device_plugin_aks_vm_size": "Standard_ND96asr_v4",
        "nvidia_device_plugin_aks_gpu_instance_profile": "MIG1g",
        "nvidia_device_plugin_node_selector": POOL,
        "nvidia_device_plugin_pool_selector": POOL,
        "nvidia_device_plugin_wait_timeout": 60,
        "nvidia_device_plugin_verify_retries": 1,
        "nvidia_device_plugin_verify_delay": 0,
    }
    role_vars.update(extra)
    return [{"name": "device plugin", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": ROLE}, "vars": role_vars}]}]


def _release_records(k8s):
    """The release Secrets helm stored, by revision: (labels, decoded release)."""
    records = {}
    for secret in k8s.list("Secret", NAMESPACE):
        if secret.get("type") != "helm.sh/release.v1":
            continue
        # data.release: base64 (the Secret encoding) of base64 of gzipped JSON (helm's own encoding)
        release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))
        records[int(secret["metadata"]["labels"]["version"])] = (secret["metadata"]["labels"], release)
    return records


def _env(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_release_lifecycle(run_playbook, helm_k8s):
    k8s = helm_k8s
    for index in range(2):
        k8s.add_node("aks-gpupool-%d" % index, labels=dict(POOL, **GFD_LABELS), allocatable={"nvidia.com/gpu": "56"},
                     taints=[GPU_TAINT])

    # 1. install: the release record, the chart's objects with the values the role set, pods on the pool
    result = run_playbook(_play(verify=True), env=k8s.helm_env).assert_ok()
    helm = result.task(HELM_TASK)
    assert helm["changed"] and "upgrade -i " in helm["result"]["command"] and "--wait" in helm["result"]["command"]
    labels, release = _release_records(k8s)[1]
    assert {k: labels[k] for k in ("name", "owner", "status", "version")} == {
        "name": RELEASE, "owner": "helm", "status": "deployed", "version": "1"}
    assert release["chart"]["metadata"]["version"] == "0.20.0"
    assert release["config"]["migStrategy"] == "single" and release["config"]["nodeSelector"] == POOL
    plugin = k8s.get("DaemonSet", RELEASE, NAMESPACE)
    assert plugin["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    pod_spec = plugin["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == POOL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod_spec["tolerations"]
    assert _env(pod_spec["containers"][0])["MIG_STRATEGY"] == "single"
    assert plugin["status"]["numberReady"] == 2  # helm --wait saw the DaemonSet ready on both pool nodes
    worker = k8s.get("DaemonSet", RELEASE + "-node-feature-discovery-worker", NAMESPACE)
    assert worker["spec"]["template"]["spec"]["tolerations"] == pod_spec["tolerations"]
    assert k8s.get("DaemonSet", RELEASE + "-gpu-feature-discovery", NAMESPACE)
    assert result.task("Record the verification")["status"] == "ok"

    # 2. the same values again (the node verification, which only reads, left out from here on)
    k8s.clear_requests()
    result = run_playbook(_play(), env=k8s.helm_env).assert_ok()
    assert not result.task(HELM_TASK)["changed"]
    assert k8s.writes() == []

    # 3. a value change upgrades: revision 2, the DaemonSet patched in place, revision 1 superseded
    uid = plugin["metadata"]["uid"]
    result = run_playbook(_play(nvidia_device_plugin_values={"gfd": {"sleepInterval": "120s"}}),
                          env=k8s.helm_env).assert_ok()
    helm = result.task(HELM_TASK)
    assert helm["changed"] and "upgrade -i " in helm["result"]["command"]
    records = _release_records(k8s)
    assert records[1][0]["status"] == "superseded" and records[2][0]["status"] == "deployed"
    gfd = k8s.get("DaemonSet", RELEASE + "-gpu-feature-discovery", NAMESPACE)
    assert _env(gfd["spec"]["template"]["spec"]["containers"][0])["GFD_SLEEP_INTERVAL"] == "120s"
    assert k8s.get("DaemonSet", RELEASE, NAMESPACE)["metadata"]["uid"] == uid
    assert [r.content_type for r in k8s.writes("DaemonSet")] == ["application/strategic-merge-patch+json"]

    # 4. check mode: the change is reported, nothing is written
    k8s.clear_requests()
    result = run_playbook(_play(nvidia_device_plugin_values={"gfd": {"sleepInterval": "60s"}}), env=k8s.helm_env,
                          check=True).assert_ok()
    assert result.task(HELM_TASK)["changed"]
    assert k8s.writes() == []
    assert sorted(_release_records(k8s)) == [1, 2]

    # 5. a key the chart does not have fails loudly, before anything is written
    result = run_playbook(_play(nvidia_device_plugin_values={"migStrategyy": "mixed"}), env=k8s.helm_env)
    result.assert_failed()
    message = result.task(HELM_TASK)["result"]["msg"]
    assert "additional properties 'migStrategyy' not allowed" in message, message
    assert k8s.writes() == []

    # 6. absent uninstalls: release records and objects gone; the namespace stays
    result = run_playbook(_play(nvidia_device_plugin_state="absent"), env=k8s.helm_env).assert_ok()
    assert result.task(HELM_TASK)["changed"]
    assert _release_records(k8s) == {}
    assert k8s.list("DaemonSet", NAMESPACE) == [] and k8s.list("Pod", NAMESPACE) == []
    assert k8s.get("Namespace", NAMESPACE)
