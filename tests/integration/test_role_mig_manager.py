# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/mig_manager against the Kubernetes double and its fake GPU Operator MIG manager.

The double's MIG manager (tests/doubles/k8s.py ``mig_manager``) drives nvidia.com/mig.config.state
the way reconfigure-mig.sh does: pending at once, success or failed after a delay, only on nodes
labelled nvidia.com/gpu.deploy.mig-manager=true.
"""

from __future__ import annotations

import yaml

ROLE = "gpu_ops.cluster.mig_manager"
NAMESPACE = "gpu-operator"
POOL = {"cloud.google.com/gke-nodepool": "h100-pool"}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/mig.capable": "true"}
H100_IDS = ["0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"]
A100_IDS = ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]


def _parted_config():
    """A default-mig-parted-config as the GPU Operator ships it (a few of its configs) plus custom ones."""
    return {"version": "v1", "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        "all-balanced": [
            {"device-filter": A100_IDS, "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
            {"device-filter": H100_IDS, "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}],
        "split-3g": [{"device-filter": H100_IDS, "devices": "all", "mig-enabled": True,
                      "mig-devices": {"1c.3g.40gb": 3, "3g.40gb": 1}}],
        "a100-only": [{"device-filter": A100_IDS, "devices": "all", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}}],
        "too-big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "3g.40gb": 2}}],
    }}


def _cluster(k8s, manager=True, **manager_args):
    k8s.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    k8s.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "default-mig-parted-config", "namespace": NAMESPACE},
             "data": {"config.yaml": yaml.safe_dump(_parted_config())}})
    applied = {"nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"}
    for name in ("gpu-1", "gpu-2"):
        k8s.add_node(name, labels=dict(POOL, team="ml", **H100, **applied), allocatable={"nvidia.com/gpu": "8"})
    k8s.add_node("cpu-1", labels={"cloud.google.com/gke-nodepool": "cpu-pool"})
    if manager:
        k8s.mig_manager(delay=manager_args.pop("delay", 1.0), **manager_args)


def _play(role_vars):
    base = {"mig_manager_node_selector": POOL, "mig_manager_poll_interval": 1, "mig_manager_timeout": 30}
    base.update(role_vars)
    return [{"name": "mig", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": ROLE}, "vars": base}]}]


def _labels(k8s, key):
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(key) for n in k8s.list("Node")}


def test_sets_the_label_waits_for_success_and_reruns_without_a_write(k8s_double, run_playbook):
    _cluster(k8s_double)
    run_playbook(_play({"mig_manager_config": "all-balanced"}), env=k8s_double.env()).assert_ok()
    assert _labels(k8s_double, "nvidia.com/mig.config") == {"gpu-1": "all-balanced", "gpu-2": "all-balanced", "cpu-1": None}
    assert _labels(k8s_double, "nvidia.com/mig.config.state") == {"gpu-1": "success", "gpu-2": "success", "cpu-1": None}
    assert _labels(k8s_double, "team") == {"gpu-1": "ml", "gpu-2": "ml", "cpu-1": None}  # a patch, not a takeover
    assert sorted(k8s_double.mig_manager_log()) == [("gpu-1", "all-balanced", "success"), ("gpu-2", "all-balanced", "success")]
    node = k8s_double.get("Node", "gpu-1")
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (node["metadata"].get("annotations") or {})

    k8s_double.clear_requests()
    again = run_playbook(_play({"mig_manager_config": "all-balanced"}), env=k8s_double.env()).assert_ok()
    assert k8s_double.writes() == [] and again.changed == []
    assert len(k8s_double.mig_manager_log()) == 2


def test_compute_instance_splits_and_named_nodes(k8s_double, run_playbook):
    _cluster(k8s_double)
    run_playbook(_play({"mig_manager_config": "split-3g", "mig_manager_nodes": ["gpu-2"]}), env=k8s_double.env()).assert_ok()
    assert _labels(k8s_double, "nvidia.com/mig.config") == {"gpu-1": "all-disabled", "gpu-2": "split-3g", "cpu-1": None}


def test_check_mode_writes_nothing_and_does_not_wait(k8s_double, run_playbook):
    _cluster(k8s_double, stuck={"all-1g.10gb"})
    k8s_double.clear_requests()
    result = run_playbook(_play({"mig_manager_config": "all-1g.10gb"}), env=k8s_double.env(), check=True).assert_ok()
    assert [w for w in k8s_double.writes() if not w["dry_run"]] == []
    assert result.task("Apply the manifests of step 40-mig-config")["changed"]
    assert _labels(k8s_double, "nvidia.com/mig.config")["gpu-1"] == "all-disabled"


def test_failed_state_is_reported_at_once_with_the_node_events(k8s_double, run_playbook):
    _cluster(k8s_double, failing={"all-1g.10gb"})
    k8s_double.put({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "gpu-1.1", "namespace": "default"},
                    "involvedObject": {"kind": "Node", "name": "gpu-1", "apiVersion": "v1"}, "reason": "GPUResetFailed",
                    "message": "nvidia-smi -r: GPU is in use by nvidia_drm", "type": "Warning", "count": 3,
                    "lastTimestamp": "2026-11-23T19:00:00Z", "source": {"component": "nvidia-mig-manager"}})
    failed = run_playbook(_play({"mig_manager_config": "all-1g.10gb", "mig_manager_timeout": 600}),
                          env=k8s_double.env()).assert_failed()
    message = failed.task("Report the nodes the MIG manager did not configure")["result"]["msg"]
    assert "node gpu-1: nvidia.com/mig.config.state=failed for config all-1g.10gb" in message
    assert "Warning GPUResetFailed: nvidia-smi -r: GPU is in use by nvidia_drm (x3)" in message
    assert "node gpu-2: nvidia.com/mig.config.state=failed" in message and "recent events: none" in message
    attempts = failed.task("Wait for the MIG manager to apply all-1g.10gb on gpu-1, gpu-2")["result"]["attempts"]
    assert attempts < 30  # stopped on failed, not after mig_manager_timeout / poll_interval = 600 polls


def test_a_node_without_mig_manager_times_out_pending(k8s_double, run_playbook):
    _cluster(k8s_double)
    k8s_double.modify("Node", "gpu-2", lambda n: n["metadata"]["labels"].pop("nvidia.com/gpu.deploy.mig-manager"))
    failed = run_playbook(_play({"mig_manager_config": "all-balanced", "mig_manager_timeout": 3}),
                          env=k8s_double.env()).assert_failed()
    message = failed.task("Report the nodes the MIG manager did not configure")["result"]["msg"]
    assert "node gpu-2: nvidia.com/mig.config.state=pending for config all-balanced" in message
    # while it waits it names the config and the nodes; the wait ends without dumping the nodes it read
    assert "FAILED - RETRYING: [localhost]: Wait for the MIG manager to apply all-balanced on gpu-1, gpu-2" in failed.retry_lines()
    assert failed.task("Wait for the MIG manager to apply all-balanced on gpu-1, gpu-2")["status"] == "ok"
    first = [r for r in failed.results if r["status"] == "failed"][0]["result"]["msg"]
    assert first.startswith("The MIG manager did not apply all-balanced on every node of gpu-1, gpu-2") and len(first) < 1024
    assert "managedFields" not in failed.stdout and "resourceVersion" not in failed.stdout
    assert "is nvidia-mig-manager running there" in message and "gpu-1" not in message
    assert _labels(k8s_double, "nvidia.com/mig.config.state")["gpu-1"] == "success"


def test_bad_configs_are_refused_before_any_write(k8s_double, run_playbook):
    _cluster(k8s_double)
    k8s_double.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-1-mig-config", "namespace": NAMESPACE},
                    "data": {"config.yaml": yaml.safe_dump({"version": "v1", "mig-configs": {
                        "all-disabled": [{"devices": "all", "mig-enabled": False}]}})}})
    cases = [
        ({"mig_manager_config": "all-3g.20gb"},
         "node gpu-2: config 'all-3g.20gb' is not in ConfigMap default-mig-parted-config; its configs: a100-only, all-1g.10gb"),
        ({"mig_manager_config": "all-balanced"},  # gpu-1 has a generated per-node config (GPU Operator v26.3)
         "node gpu-1: config 'all-balanced' is not in ConfigMap gpu-1-mig-config; its configs: all-disabled"),
        ({"mig_manager_config": "a100-only", "mig_manager_nodes": ["gpu-2"]},
         "config 'a100-only' of ConfigMap default-mig-parted-config has no entry for H100-80GB"),
        ({"mig_manager_config": "too-big", "mig_manager_nodes": ["gpu-2"]},
         "mig-devices {3g.40gb: 2, 4g.40gb: 1} do not fit one H100-80GB"),
        ({"mig_manager_config": "all-balanced", "mig_manager_config_map": "custom-mig-config"},
         "ConfigMap custom-mig-config not found in the MIG manager's namespace"),
        ({"mig_manager_config": "all-balanced", "mig_manager_nodes": ["gpu-9"]}, "nodes not found: gpu-9"),
        ({"mig_manager_config": "Bad Name"}, "mig_manager_config"),
        ({"mig_manager_config": ""}, "set mig_manager_config"),
        ({"mig_manager_config": "custom", "mig_manager_nodes": ["gpu-2"],
          "mig_manager_parted_config": {"version": "v1", "mig-configs": {"custom": [
              {"devices": "all", "mig-enabled": True, "mig-devices": {"5c.7g.80gb": 1}}]}}},
         "compute instance size 5 is not one of 1, 2, 3, 4, 7"),
    ]
    tasks = []
    for index, (role_vars, _message) in enumerate(cases):
        play_vars = dict(_play(role_vars)[0]["tasks"][0]["vars"])
        tasks.append({"name": "case %d" % index, "block": [
            {"name": "Run the role %d" % index, "ansible.builtin.include_role": {"name": ROLE}, "vars": play_vars}],
            "rescue": [{"name": "Refused %02d" % index, "ansible.builtin.debug": {"msg": "{{ ansible_failed_result.msg }}"}}]})
    k8s_double.clear_requests()
    result = run_playbook([{"name": "bad", "hosts": "localhost", "gather_facts": False, "tasks": tasks}], env=k8s_double.env())
    assert result.rc == 0, result.output
    for index, (_vars, message) in enumerate(cases):
        refused = str(result.task("Refused %02d" % index)["result"]["msg"])
        assert message in refused, (index, refused)
    assert k8s_double.writes() == []


def test_render_mode_writes_the_label_patches(run_playbook, tmp_path):
    out = tmp_path / "rendered"
    play = _play({"mig_manager_config": "all-1g.10gb", "mig_manager_nodes": ["gpu-2", "gpu-1"],
                  "mig_manager_gpu_model": "H100-80GB", "mig_manager_node_selector": {}})
    run_playbook(play, extra_vars={"gpu_ops_render_dir": str(out)}).assert_ok()
    folder = out / "manifests" / "40-mig-config"
    assert sorted(p.name for p in folder.iterdir()) == ["01-node-gpu-1.yaml", "02-node-gpu-2.yaml"]
    patch = yaml.safe_load((folder / "01-node-gpu-1.yaml").read_text(encoding="utf-8"))
    assert patch == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {
        "nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "pending"}}}
    refused = run_playbook(_play({"mig_manager_config": "all-2g.12gb", "mig_manager_nodes": ["gpu-1"],
                                  "mig_manager_gpu_model": "H100-80GB"}),
                           extra_vars={"gpu_ops_render_dir": str(tmp_path / "other")}).assert_failed()
    assert "config 'all-2g.12gb' is not one of the GPU Operator's default configs for H100-80GB" in refused.output
    assert not (tmp_path / "other").exists()
