# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_ops.cluster.apply role (manifests entry point), run by ansible-playbook against the Kubernetes API double."""

from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation
from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import GPU_TAINT, K8sDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import skipped_item

NAMESPACE = "gpu-ops-test"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

MANIFESTS = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-env", "namespace": NAMESPACE},
     "data": {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"}},
    {"apiVersion": "apps/v1", "kind": "DaemonSet",
     "metadata": {"name": "nic-installer", "namespace": NAMESPACE, "labels": {"app": "nic-installer"}},
     "spec": {
         "selector": {"matchLabels": {"app": "nic-installer"}},
         "template": {
             "metadata": {"labels": {"app": "nic-installer"}},
             "spec": {
                 "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "installer", "image": "registry.example/installer:1.0.0",
                                 "env": [{"name": "LOG_LEVEL", "value": "info"}],
                                 "volumeMounts": [{"name": "host-lib", "mountPath": "/host/lib"}]}],
                 "volumes": [{"name": "host-lib", "hostPath": {"path": "/home/kubernetes/lib"}}],
             },
         },
     }},
    {"apiVersion": "networking.gke.io/v1", "kind": "GKENetworkParamSet", "metadata": {"name": "vpc1"},
     "spec": {"vpc": "a3-gpunet-1", "vpcSubnet": "a3-gpunet-1-subnet", "deviceMode": "NetDevice"}},
    {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "vpc1"},
     "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                  "name": "vpc1"}}},
]
KINDS = [m["kind"] for m in MANIFESTS]

PLAYBOOK = [{
    "name": "Apply through the role",
    "hosts": "localhost",
    "gather_facts": False,
    "tasks": [{
        "name": "Apply the test manifests",
        "ansible.builtin.include_role": {"name": "gpu_ops.cluster.apply", "tasks_from": "manifests"},
        "vars": {
            "apply_step": "10-test",
            "apply_manifests": "{{ test_manifests }}",
            "apply_state": "{{ test_state | default('present') }}",
            "apply_wait": "{{ test_wait | default(false) }}",
            "apply_wait_timeout": "{{ test_wait_timeout | default(60) }}",
            "apply_wait_sleep": 1,
            "apply_wait_condition": "{{ test_wait_condition | default({}) }}",
            "apply_wait_condition_kinds": "{{ test_wait_condition_kinds | default([]) }}",
        },
    }],
}]


def _gpu_node(double, name="gke-a3-pool-0"):
    double.add_node(name, labels={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"},
                    allocatable={"nvidia.com/gpu": "8"}, taints=[GPU_TAINT])


def _apply(run_playbook, double, manifests=None, **extra):
    extra_vars = {"test_manifests": MANIFESTS if manifests is None else manifests}
    extra_vars.update(extra)
    return run_playbook(PLAYBOOK, extra_vars=extra_vars, env=double.env())


def _apply_task(result):
    return result.task("Apply the manifests of step 10-test", action="kubernetes.core.k8s")


def _plan(result):
    """What k8s_apply_plan registered for the step (the reads and which calls are in place)."""
    return _preread(result)["result"]


def _sent(result):
    """Whether the step's calls were sent: the include of manifests_send.yml ran (a step whose calls are all in place
    skips it, and with it the kubernetes.core.k8s task)."""
    return result.task("Send the manifests of step 10-test")["status"] != "skipped"


def _calls(result):
    """The kubernetes.core.k8s calls of the step: one per run of objects with the same wait condition."""
    return _apply_task(result)["result"]["results"]


def _sent_kinds(result):
    return [obj["kind"] for call in _calls(result) for obj in call["item"]["definition"]]


def _object_results(result):
    """kubernetes.core.k8s's result for each object, by kind: a call with one object returns that object's
    result, a call with several returns result.results in the order of its definition."""
    by_kind = {}
    for call in _calls(result):
        objects = call["item"]["definition"]
        per_object = call["result"]["results"] if len(objects) > 1 else [call]
        assert len(per_object) == len(objects), call
        by_kind.update({obj["kind"]: r for obj, r in zip(objects, per_object)})
    return by_kind


def _live(double):
    return [double.get(m["kind"], m["metadata"]["name"], m["metadata"].get("namespace")) for m in MANIFESTS]


def test_creates_every_object_in_list_order(run_playbook, k8s_double):
    _gpu_node(k8s_double)

    result = _apply(run_playbook, k8s_double).assert_ok()

    writes = k8s_double.writes()
    assert [(w.verb, w.kind) for w in writes] == [("create", kind) for kind in KINDS]
    assert len(_calls(result)) == 1, "objects with the same arguments go in one kubernetes.core.k8s call"
    results = _object_results(result)
    assert list(results) == KINDS
    assert all(r["changed"] and r["method"] == "apply" for r in results.values())
    for manifest, live in zip(MANIFESTS, _live(k8s_double)):
        assert live is not None, manifest
        assert live["metadata"]["uid"] and live["metadata"]["resourceVersion"]
        # client-side apply records what was applied, for the next three-way merge
        assert yaml.safe_load(live["metadata"]["annotations"][LAST_APPLIED])["kind"] == manifest["kind"]
    daemonset = k8s_double.get("DaemonSet", "nic-installer", NAMESPACE)
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/installer:1.0.0"
    assert daemonset["status"]["desiredNumberScheduled"] == 1


# the play of PLAYBOOK, and what the role left in apply_result (what later tasks of a role read)
SHOW_RESULT = [dict(PLAYBOOK[0], tasks=PLAYBOOK[0]["tasks"] + [
    {"name": "Show apply_result", "ansible.builtin.debug": {"var": "apply_result"}}])]


def _preread(result):
    return result.task("Read the objects to skip those already in place in step 10-test")


def _reads(double):
    """The requests of a run, discovery aside."""
    return [(r.verb, r.kind, r.name) for r in double.requests() if r.verb != "discovery"]


def test_rerun_reads_each_object_once_skips_the_apply_and_writes_nothing(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    _apply(run_playbook, k8s_double).assert_ok()
    before = _live(k8s_double)
    k8s_double.clear_requests()

    result = run_playbook(SHOW_RESULT, extra_vars={"test_manifests": MANIFESTS}, env=k8s_double.env()).assert_ok()

    assert not result.changed, [r["task"] for r in result.changed]
    # one GET per object, read in the worker; no kubernetes.core.k8s call (before: one call, a no-op patch)
    assert _reads(k8s_double) == [("get", m["kind"], m["metadata"]["name"]) for m in MANIFESTS]
    assert not k8s_double.writes() and not [r for r in k8s_double.requests() if r.verb == "patch"]
    assert _plan(result)["in_worker"] is True and _plan(result)["in_place"] is True
    assert [b["in_place"] for b in _plan(result)["batches"]] == [True] and not _sent(result)
    assert result.tasks(action="kubernetes.core.k8s") == []
    # apply_result is the plan's own result: the step unchanged, and the objects as read
    shown = result.task("Show apply_result")["result"]["apply_result"]
    assert shown["in_place"] and not shown["changed"] and "results" not in shown
    assert [r["resources"] for r in shown["reads"]] == [[obj] for obj in _live(k8s_double)]
    assert [o["metadata"]["resourceVersion"] for o in _live(k8s_double)] == \
        [o["metadata"]["resourceVersion"] for o in before]


def test_rerun_with_a_satisfied_wait_condition_is_skipped_too(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    waits = dict(test_wait=True, test_wait_timeout=30, test_wait_condition={"type": "Ready", "status": "True"},
                 test_wait_condition_kinds=["Network", "GKENetworkParamSet"])
    _apply(run_playbook, k8s_double, **waits).assert_ok()
    k8s_double.clear_requests()

    result = _apply(run_playbook, k8s_double, **waits).assert_ok()

    # kubernetes.core's readiness checks hold on the objects read (the DaemonSet's ready counts, the Ready conditions)
    assert [r.get("ready") for r in _plan(result)["reads"]] == [True] * 5
    assert [b["in_place"] for b in _plan(result)["batches"]] == [True, True] and not _sent(result)
    assert _reads(k8s_double) == [("get", m["kind"], m["metadata"]["name"]) for m in MANIFESTS]


def test_a_wait_condition_that_does_not_hold_yet_runs_the_apply(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    _apply(run_playbook, k8s_double).assert_ok()

    # same manifests, every object in place, but the Network's Ready condition never has this reason
    result = _apply(run_playbook, k8s_double, test_wait=True, test_wait_timeout=2,
                    test_wait_condition={"type": "Ready", "status": "True", "reason": "NotThisReason"},
                    test_wait_condition_kinds=["Network"]).assert_failed()

    ready = [r.get("ready") for r in _plan(result)["reads"]]
    assert ready == [True, True, True, True, False]
    message = result.failed[0]["result"]["msg"]
    assert message.startswith("Step 10-test: Network vpc1 is not ready after 2 s"), message
    calls = _calls(result)
    assert skipped_item(calls[0]) and not skipped_item(calls[1]), "only the Network's call ran"


def test_a_daemonset_that_is_not_ready_runs_the_apply_and_its_wait(run_playbook, k8s_double):
    _gpu_node(k8s_double, "gke-a3-pool-0")
    _apply(run_playbook, k8s_double, manifests=MANIFESTS[:3], test_wait=True, test_wait_timeout=10).assert_ok()
    _gpu_node(k8s_double, "gke-a3-pool-1")
    k8s_double.never_ready("gke-a3-pool-1")

    result = _apply(run_playbook, k8s_double, manifests=MANIFESTS[:3], test_wait=True, test_wait_timeout=2).assert_failed()

    assert [r.get("ready") for r in _plan(result)["reads"]] == [True, True, False]
    assert "DaemonSet %s/nic-installer is not ready after 2 s: 1 of 2 pods ready" % NAMESPACE in result.failed[0]["result"]["msg"]


def test_a_missing_object_is_created_and_only_its_call_runs(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    waits = dict(test_wait_condition={"type": "Ready", "status": "True"}, test_wait_condition_kinds=["Network"])
    _apply(run_playbook, k8s_double, **waits).assert_ok()
    k8s_double.remove("ConfigMap", "nccl-env", NAMESPACE)
    k8s_double.clear_requests()

    result = _apply(run_playbook, k8s_double, **waits).assert_ok()

    assert [(w.verb, w.kind) for w in k8s_double.writes() if w.changed] == [("create", "ConfigMap")]
    calls = _calls(result)
    assert not skipped_item(calls[0]) and skipped_item(calls[1])
    assert calls[0]["item"]["not_in_place"] == ["ConfigMap/%s/nccl-env: absent" % NAMESPACE]
    assert k8s_double.get("ConfigMap", "nccl-env", NAMESPACE)["data"]["NCCL_DEBUG"] == "INFO"


def test_a_changed_manifest_is_applied_even_when_the_live_object_already_has_it(run_playbook, k8s_double):
    _apply(run_playbook, k8s_double).assert_ok()
    k8s_double.modify("ConfigMap", "nccl-env", lambda o: o["data"].update(NCCL_DEBUG="WARN"), NAMESPACE)
    manifests = copy.deepcopy(MANIFESTS)
    manifests[1]["data"]["NCCL_DEBUG"] = "WARN"

    result = _apply(run_playbook, k8s_double, manifests=manifests).assert_ok()

    assert not skipped_item(_calls(result)[0])
    assert _calls(result)[0]["item"]["not_in_place"] == [
        "ConfigMap/%s/nccl-env: the manifest differs from the last applied one" % NAMESPACE]
    annotation = k8s_double.get("ConfigMap", "nccl-env", NAMESPACE)["metadata"]["annotations"][LAST_APPLIED]
    assert yaml.safe_load(annotation)["data"]["NCCL_DEBUG"] == "WARN"


def test_patch_absent_and_check_mode_keep_the_module_path(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    _apply(run_playbook, k8s_double).assert_ok()
    patch_play = copy.deepcopy(PLAYBOOK)
    patch_play[0]["tasks"][0]["vars"]["apply_patch"] = True

    patched = run_playbook(patch_play, extra_vars={"test_manifests": MANIFESTS[1:2]}, env=k8s_double.env()).assert_ok()
    check = run_playbook(PLAYBOOK, extra_vars={"test_manifests": MANIFESTS}, env=k8s_double.env(), check=True).assert_ok()
    absent = _apply(run_playbook, k8s_double, test_state="absent").assert_ok()

    for result in (patched, check, absent):
        assert _preread(result)["status"] == "skipped"
        assert not any(skipped_item(c) for c in _calls(result))
    assert _live(k8s_double) == [None] * len(MANIFESTS)


def test_drift_is_corrected_and_only_drifted_objects_change(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    _apply(run_playbook, k8s_double).assert_ok()

    def drift_daemonset(obj):
        container = obj["spec"]["template"]["spec"]["containers"][0]
        container["image"] = "registry.example/installer:0.9.0"
        container["env"][0]["value"] = "debug"
        obj["metadata"]["labels"]["app"] = "tampered"

    k8s_double.modify("DaemonSet", "nic-installer", drift_daemonset, NAMESPACE)
    k8s_double.modify("ConfigMap", "nccl-env", lambda o: o["data"].update(NCCL_DEBUG="WARN"), NAMESPACE)
    k8s_double.modify("GKENetworkParamSet", "vpc1", lambda o: o["spec"].update(deviceMode="DPDK-VFIO"))
    generation = k8s_double.get("DaemonSet", "nic-installer", NAMESPACE)["metadata"]["generation"]
    k8s_double.clear_requests()

    result = _apply(run_playbook, k8s_double).assert_ok()

    changed = {kind for kind, r in _object_results(result).items() if r["changed"]}
    assert changed == {"ConfigMap", "DaemonSet", "GKENetworkParamSet"}
    assert {w.kind for w in k8s_double.writes() if w.changed} == changed
    daemonset = k8s_double.get("DaemonSet", "nic-installer", NAMESPACE)
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/installer:1.0.0"
    assert container["env"] == [{"name": "LOG_LEVEL", "value": "info"}]
    assert daemonset["metadata"]["labels"]["app"] == "nic-installer"
    assert daemonset["metadata"]["generation"] == generation + 1
    # server-side defaults survive the patch (no perpetual diff)
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert k8s_double.get("ConfigMap", "nccl-env", NAMESPACE)["data"]["NCCL_DEBUG"] == "INFO"
    assert k8s_double.get("GKENetworkParamSet", "vpc1")["spec"]["deviceMode"] == "NetDevice"


def test_a_field_removed_from_the_manifest_is_removed_from_the_object(run_playbook, k8s_double):
    _apply(run_playbook, k8s_double).assert_ok()
    manifests = copy.deepcopy(MANIFESTS)
    del manifests[1]["data"]["NCCL_SOCKET_IFNAME"]

    result = _apply(run_playbook, k8s_double, manifests=manifests).assert_ok()

    assert _object_results(result)["ConfigMap"]["changed"]
    assert k8s_double.get("ConfigMap", "nccl-env", NAMESPACE)["data"] == {"NCCL_DEBUG": "INFO"}


def test_render_mode_writes_valid_manifests_and_contacts_nothing(run_playbook, k8s_double, tmp_path):
    render_dir = tmp_path / "rendered"

    result = _apply(run_playbook, k8s_double, gpu_ops_render_dir=str(render_dir)).assert_ok()

    assert k8s_double.requests() == [], "render mode contacted the API server"
    assert all(r["status"] == "skipped" for r in result.tasks(action="kubernetes.core.k8s_info"))
    # neither the reads nor the calls: the live part is skipped whole
    assert _preread(result)["status"] == "skipped" and not _sent(result)
    assert result.tasks(action="kubernetes.core.k8s") == []
    step = render_dir / "manifests" / "10-test"
    assert sorted(os.listdir(step)) == [
        "01-namespace-gpu-ops-test.yaml", "02-configmap-nccl-env.yaml", "03-daemonset-nic-installer.yaml",
        "04-gkenetworkparamset-vpc1.yaml", "05-network-vpc1.yaml"]
    # the host index (for PLAN.md): this host wrote them, in apply order
    index = (render_dir / ".gpu_ops_render_hosts" / "localhost.txt").read_text(encoding="utf-8").splitlines()
    assert [line for line in index if line and not line.startswith("#")] == [
        "manifests/10-test/" + name for name in sorted(os.listdir(step))]
    for manifest, name in zip(MANIFESTS, sorted(os.listdir(step))):
        assert yaml.safe_load((step / name).read_text(encoding="utf-8")) == manifest
    assert k8s_validation.validate_path(str(step)) == len(MANIFESTS)


def test_render_mode_for_deletion_writes_reverse_order(run_playbook, k8s_double, tmp_path):
    render_dir = tmp_path / "rendered"

    _apply(run_playbook, k8s_double, gpu_ops_render_dir=str(render_dir), test_state="absent").assert_ok()

    assert k8s_double.requests() == []
    step = render_dir / "manifests" / "10-test"
    assert sorted(os.listdir(step)) == [
        "01-delete-network-vpc1.yaml", "02-delete-gkenetworkparamset-vpc1.yaml", "03-delete-daemonset-nic-installer.yaml",
        "04-delete-configmap-nccl-env.yaml", "05-delete-namespace-gpu-ops-test.yaml"]
    assert k8s_validation.validate_path(str(step)) == len(MANIFESTS)


def test_absent_deletes_in_reverse_order_then_converges(run_playbook, k8s_double):
    _gpu_node(k8s_double)
    _apply(run_playbook, k8s_double).assert_ok()
    assert k8s_double.list("Pod", NAMESPACE), "the DaemonSet controller made no pod"
    k8s_double.clear_requests()

    result = _apply(run_playbook, k8s_double, test_state="absent").assert_ok()

    assert [(w.verb, w.kind) for w in k8s_double.writes()] == [("delete", kind) for kind in reversed(KINDS)]
    results = _object_results(result)
    assert list(results) == KINDS[::-1] and all(r["changed"] and r["method"] == "delete" for r in results.values())
    assert _live(k8s_double) == [None] * len(MANIFESTS)
    assert k8s_double.list("Pod", NAMESPACE) == []

    k8s_double.clear_requests()
    again = _apply(run_playbook, k8s_double, test_state="absent").assert_ok()
    assert not again.changed
    assert k8s_double.writes() == []


def test_absent_skips_kinds_the_cluster_no_longer_serves(run_playbook, tmp_path):
    with K8sDouble(crds=["Network"]) as double:
        result = _apply(run_playbook, double, test_state="absent").assert_ok()

        assert double.writes() == []
        sent = _sent_kinds(result)
        assert "GKENetworkParamSet" not in sent, "an unserved kind was sent to kubernetes.core"
        assert sent == ["Network", "DaemonSet", "ConfigMap", "Namespace"]


def test_wait_for_network_ready_condition(run_playbook):
    # the double's GKE networking controller takes 2 s to validate each object
    with K8sDouble(ready_delay=2.0) as double:
        _gpu_node(double)
        result = _apply(run_playbook, double, test_wait=True, test_wait_timeout=30,
                        test_wait_condition={"type": "Ready", "status": "True"},
                        test_wait_condition_kinds=["Network", "GKENetworkParamSet"]).assert_ok()

        # the kinds that wait for Ready go in a call of their own
        assert [call["item"]["definition"] for call in _calls(result)] == [MANIFESTS[:3], MANIFESTS[3:]]
        assert [(call["invocation"]["module_args"].get("wait_condition") or {}).get("type") for call in _calls(result)] == \
            [None, "Ready"]
        items = _object_results(result)
        assert items["Network"]["duration"] >= 1, "the role did not wait for the Network to become Ready"
        ready = [c for c in items["Network"]["result"]["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True" and ready[0]["reason"] == "NetworkReady"
        assert items["DaemonSet"]["result"]["status"]["numberReady"] == 1


def test_wait_times_out_when_the_network_never_gets_ready(run_playbook, k8s_double):
    manifests = copy.deepcopy(MANIFESTS)
    manifests[3]["spec"]["vpc"] = "default"   # device mode may not use the default VPC

    result = _apply(run_playbook, k8s_double, manifests=manifests, test_wait=True, test_wait_timeout=3,
                    test_wait_condition={"type": "Ready", "status": "True"},
                    test_wait_condition_kinds=["Network"]).assert_failed()

    # one short message naming the object and why, not the module's object dump
    [failed] = result.failed
    message = failed["result"]["msg"]
    assert message.startswith("Step 10-test: Network vpc") and " is not ready after 3 s: " in message.splitlines()[0], message
    assert len(message.encode()) < 1024 and "resourceVersion" not in result.stdout
    gnp = k8s_double.get("GKENetworkParamSet", "vpc1")
    assert [c["reason"] for c in gnp["status"]["conditions"]] == ["DeviceModeCantUseDefaultVPC"]


def test_wait_fails_when_a_daemonset_never_gets_ready(run_playbook, k8s_double):
    _gpu_node(k8s_double, "gke-a3-pool-0")
    _gpu_node(k8s_double, "gke-a3-pool-1")
    k8s_double.never_ready("gke-a3-pool-1")

    result = _apply(run_playbook, k8s_double, manifests=MANIFESTS[:3], test_wait=True, test_wait_timeout=3).assert_failed()

    [failed] = result.failed
    assert failed["result"]["msg"].startswith("Step 10-test: DaemonSet %s/nic-installer is not ready after 3 s: 1 of 2 pods ready"
                                              % NAMESPACE), failed["result"]["msg"]
    assert "resourceVersion" not in result.stdout
    status = k8s_double.get("DaemonSet", "nic-installer", NAMESPACE)["status"]
    assert (status["desiredNumberScheduled"], status["numberReady"], status["numberUnavailable"]) == (2, 1, 1)


def test_check_mode_on_an_empty_cluster_reports_changes_and_stores_nothing(run_playbook, k8s_double):
    result = run_playbook(PLAYBOOK, extra_vars={"test_manifests": MANIFESTS}, env=k8s_double.env(), check=True)

    result.assert_ok()
    assert k8s_double.writes() == []
    dry_runs = [r for r in k8s_double.requests() if r.dry_run and r.verb == "create"]
    assert sorted(r.kind for r in dry_runs) == sorted(["Namespace", "GKENetworkParamSet", "Network"])
    deferred = result.task("Report the objects that would be created")
    assert deferred["changed"]
    assert [r["item"]["kind"] for r in deferred["result"]["results"]] == ["ConfigMap", "DaemonSet"]
    assert all(k8s_double.get(m["kind"], m["metadata"]["name"], m["metadata"].get("namespace")) is None
               for m in MANIFESTS if m["kind"] != "Namespace")
    assert k8s_double.get("Namespace", NAMESPACE) is None


# in one call (no wait condition), and in a call of its own between two others
@pytest.mark.parametrize("wait_kinds", [[], ["GKENetworkParamSet"]])
def test_invalid_manifest_is_rejected_before_anything_after_it(run_playbook, k8s_double, wait_kinds):
    manifests = copy.deepcopy(MANIFESTS)
    manifests[3]["spec"]["deviceMode"] = "RDMA-X"

    result = _apply(run_playbook, k8s_double, manifests=manifests, test_wait_condition_kinds=wait_kinds,
                    test_wait_condition={"type": "Ready", "status": "True"}).assert_failed()

    assert "deviceMode" in result.output and "RDMA-X" in result.output
    assert k8s_double.get("GKENetworkParamSet", "vpc1") is None
    assert k8s_double.get("ConfigMap", "nccl-env", NAMESPACE) is not None
    # stop at the first failure: the Network after it is never sent (only read, by the step's pre-read)
    assert not [r for r in k8s_double.requests(kind="Network") if r.verb not in ("discovery", "get")]


@pytest.mark.parametrize("code, wait_kinds", [(429, []), (500, ["Network"])])
def test_transient_api_errors_fail_the_task_without_partial_state(run_playbook, k8s_double, code, wait_kinds):
    # kubernetes.core does not retry: the role fails, and a re-run converges
    k8s_double.fail(verb="create", kind="DaemonSet", code=code, times=1, retry_after=1)

    _apply(run_playbook, k8s_double, test_wait_condition_kinds=wait_kinds,
           test_wait_condition={"type": "Ready", "status": "True"}).assert_failed()
    assert k8s_double.get("DaemonSet", "nic-installer", NAMESPACE) is None
    # stop at the first failure, in the DaemonSet's call and before the next call
    assert k8s_double.get("GKENetworkParamSet", "vpc1") is None and k8s_double.get("Network", "vpc1") is None

    _apply(run_playbook, k8s_double).assert_ok()
    assert all(obj is not None for obj in _live(k8s_double))


def test_secrets_are_refused_before_anything_is_written_or_sent(run_playbook, k8s_double, tmp_path):
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ufm-credentials", "namespace": NAMESPACE},
              "stringData": {"password": "hunter2-do-not-print"}}
    # a Secret at the top level, in a List, in a SecretList, in a List nested in a List; live and in render mode
    cases = [
        ([MANIFESTS[0], secret], "apply_manifests[1]"),
        ([MANIFESTS[0], {"apiVersion": "v1", "kind": "List", "items": [MANIFESTS[1], secret]}],
         "apply_manifests[1].items[1]"),
        ([{"apiVersion": "v1", "kind": "SecretList", "items": [secret]}], "apply_manifests[0].items[0]"),
        ([{"apiVersion": "v1", "kind": "List",
           "items": [{"apiVersion": "v1", "kind": "ConfigMapList", "items": [secret]}]}],
         "apply_manifests[0].items[0].items[0]"),
        # the plural and singular resource names, which kubernetes.core resolves to the Secret kind as well
        ([dict(secret, kind="secrets")], "apply_manifests[0]"),
        ([MANIFESTS[0], dict(secret, kind="secret")], "apply_manifests[1]"),
    ]
    for index, (manifests, path) in enumerate(cases):
        extra = {"gpu_ops_render_dir": str(tmp_path / "rendered")} if index % 2 else {}
        before = len(k8s_double.requests())
        result = run_playbook(PLAYBOOK, extra_vars=dict(test_manifests=manifests, **extra), env=k8s_double.env(),
                              verbosity=3, diff=True).assert_failed()
        # (ansible-core before 2.19 wraps a long message over lines in the YAML output)
        assert "%s: a Secret cannot go through gpu_ops.cluster.apply" % path in " ".join(result.stdout.split()), result.output
        assert "hunter2-do-not-print" not in result.stdout + result.stderr
        assert len(k8s_double.requests()) == before, "nothing may reach the API server"
    assert not (tmp_path / "rendered").exists()
    assert k8s_double.get("Secret", "ufm-credentials", NAMESPACE) is None
