# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gcp_gpu_vpcs role: against the GCP and Kubernetes doubles, and in render mode."""

from __future__ import annotations

import json
import os

from ansible_collections.gpu_ops.cluster.tests.contract import k8s_validation
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT

ROLE_VARS = dict(gcp_gpu_vpcs_cluster="a3high", gcp_gpu_vpcs_location="us-central1", gcp_gpu_vpcs_gpudirect="tcpx")


def play(defaults, role_vars, tasks=()):
    return [dict(name="GPU VPCs", hosts="localhost", gather_facts=False, module_defaults=defaults,
                 roles=[dict(role="gpu_ops.cluster.gcp_gpu_vpcs", vars=role_vars)], tasks=list(tasks))]


def publish(path):
    copy = {"content": "{{ gcp_gpu_vpcs_fabric | to_json }}", "dest": str(path), "mode": "0644"}
    return {"name": "publish", "ansible.builtin.copy": copy}


def test_role_converges_publishes_the_fabric_and_applies_the_objects(run_playbook, gcp_double, gcp_defaults,
                                                                     k8s_double, tmp_path):
    out = tmp_path / "fabric.json"
    role_vars = dict(ROLE_VARS, gcp_gpu_vpcs_apply_objects=True)
    run_playbook(play(gcp_defaults, role_vars, [publish(out)]), env=k8s_double.env()).assert_ok()
    fabric = json.loads(out.read_text())
    assert fabric["additional_node_networks"] == [
        {"network": "a3high-gpunic-%d" % i, "subnetwork": "a3high-gpunic-%d-sub" % i} for i in range(1, 5)]
    assert fabric["k8s_network_names"] == ["vpc1", "vpc2", "vpc3", "vpc4"]
    assert json.loads(fabric["pod_annotations"]["networking.gke.io/interfaces"])[4] == {
        "interfaceName": "eth4", "network": "vpc4"}
    state = gcp_double.state(GCP_PROJECT)
    assert (len(state["networks"]), len(state["subnetworks"]), len(state["firewalls"])) == (4, 4, 4)
    param_set = k8s_double.get("GKENetworkParamSet", "vpc2")
    assert param_set["spec"] == {"vpc": "a3high-gpunic-2", "vpcSubnet": "a3high-gpunic-2-sub",
                                 "deviceMode": "NetDevice"}
    assert k8s_double.get("Network", "vpc4")["spec"]["parametersRef"]["name"] == "vpc4"

    # second run: nothing to do anywhere
    gcp_double.clear_log()
    result = run_playbook(play(gcp_defaults, role_vars), env=k8s_double.env()).assert_ok()
    assert result.changed == [] and gcp_double.mutating_requests() == []

    # teardown: objects first, then the fabric
    result = run_playbook(play(gcp_defaults, dict(role_vars, gcp_gpu_vpcs_state="absent")),
                          env=k8s_double.env()).assert_ok()
    assert k8s_double.get("Network", "vpc1") is None and k8s_double.get("GKENetworkParamSet", "vpc1") is None
    state = gcp_double.state(GCP_PROJECT)
    assert (len(state["networks"]), len(state["subnetworks"]), len(state["firewalls"])) == (0, 0, 0)


def test_render_mode_writes_requests_and_valid_manifests(run_playbook, gcp_double, gcp_defaults, tmp_path):
    render = tmp_path / "rendered"
    role_vars = dict(ROLE_VARS, gcp_gpu_vpcs_gpudirect="tcpxo", gcp_gpu_vpcs_apply_objects=True)
    run_playbook(play(gcp_defaults, role_vars), extra_vars={"gpu_ops_render_dir": str(render)}).assert_ok()
    requests = sorted(os.listdir(render / "requests"))
    assert len(requests) == 24
    assert json.loads((render / "requests" / requests[0]).read_text())["body"]["mtu"] == 8244
    manifests = render / "manifests" / "20-gpu-networks"
    assert len(os.listdir(manifests)) == 16
    assert k8s_validation.validate_path(str(manifests)) == 16
    assert gcp_double.requests == []


def test_bad_input_fails_in_the_role_before_any_request(run_playbook, gcp_double, gcp_defaults):
    role_vars = dict(ROLE_VARS, gcp_gpu_vpcs_firewall_source_ranges=["0.0.0.0/0"])
    result = run_playbook(play(gcp_defaults, role_vars)).assert_failed()
    assert "firewall_allow_any_source" in json.dumps(result.failed[0]["result"])
    assert gcp_double.requests == []


def test_rdma_a4x_fabric_converges_applies_rdma_objects_and_tears_down(run_playbook, gcp_double, gcp_defaults,
                                                                       k8s_double, tmp_path):
    out = tmp_path / "fabric.json"
    role_vars = dict(gcp_gpu_vpcs_cluster="a4x", gcp_gpu_vpcs_location="us-central1",
                     gcp_gpu_vpcs_zone="us-central1-b", gcp_gpu_vpcs_gpudirect="rdma-a4x",
                     gcp_gpu_vpcs_apply_objects=True)
    run_playbook(play(gcp_defaults, role_vars, [publish(out)]), env=k8s_double.env()).assert_ok()
    fabric = json.loads(out.read_text())
    assert fabric["zone"] == "us-central1-b" and fabric["network_profile"] == "us-central1-b-vpc-roce"
    assert fabric["k8s_network_names"] == ["gvnic-1", "rdma-0", "rdma-1", "rdma-2", "rdma-3"]
    state = gcp_double.state(GCP_PROJECT)
    assert (len(state["networks"]), len(state["subnetworks"]), len(state["firewalls"])) == (2, 5, 1)
    assert k8s_double.get("GKENetworkParamSet", "rdma-3")["spec"] == {
        "vpc": "a4x-gpunic-rdma", "vpcSubnet": "a4x-gpunic-rdma-sub-3", "deviceMode": "RDMA"}
    assert k8s_double.get("GKENetworkParamSet", "gvnic-1")["spec"]["deviceMode"] == "NetDevice"

    gcp_double.clear_log()
    result = run_playbook(play(gcp_defaults, role_vars), env=k8s_double.env()).assert_ok()
    assert result.changed == [] and gcp_double.mutating_requests() == []

    run_playbook(play(gcp_defaults, dict(role_vars, gcp_gpu_vpcs_state="absent")), env=k8s_double.env()).assert_ok()
    assert k8s_double.get("GKENetworkParamSet", "rdma-0") is None
    state = gcp_double.state(GCP_PROJECT)
    assert (len(state["networks"]), len(state["subnetworks"]), len(state["firewalls"])) == (0, 0, 0)


def test_background_converge_starts_only_when_the_plan_has_changes(run_playbook, gcp_double, gcp_defaults, tmp_path):
    # the playbooks' way: the role with gcp_gpu_vpcs_background, then the await entry point only for a started job
    await_job = {"name": "await", "when": "gcp_gpu_vpcs_fabric_job | default({}) | length > 0",
                 "ansible.builtin.include_role": {"name": "gpu_ops.cluster.gcp_gpu_vpcs", "tasks_from": "await"},
                 "vars": {"gcp_gpu_vpcs_background_delay": 1}}
    role_vars = dict(ROLE_VARS, gcp_gpu_vpcs_background=True)
    first = run_playbook(play(gcp_defaults, role_vars, [await_job, publish(tmp_path / "first.json")])).assert_ok()
    remembered = first.task("Remember the background converge")["result"]["ansible_facts"]
    job = remembered["gcp_gpu_vpcs_fabric_job"]
    assert job["jid"] and job["cluster"] == "a3high" and job["timeout"] == 3600
    # a job started: the fabric is not published yet (await publishes it once the job ends)
    assert "gcp_gpu_vpcs_fabric" not in remembered
    assert [r["status"] for r in first.tasks(action="async_status")][-1] == "ok"
    assert len(gcp_double.mutating_requests()) == 12

    # nothing to do: one read per resource, no write, no background job, no status file to poll or remove
    gcp_double.clear_log()
    noop = run_playbook(play(gcp_defaults, role_vars, [await_job, publish(tmp_path / "noop.json")])).assert_ok()
    assert gcp_double.mutating_requests() == []
    reads = gcp_double.read_counts()
    assert len(reads) == 3 * 4 and set(reads.values()) == {1}, reads
    assert noop.tasks(action="async_status") == [] and [r["task"] for r in noop.changed] == ["publish"]
    assert noop.task("Converge the GPU NIC fabric")["status"] == "skipped"
    # no job, and the plan is the fabric, published by the same task
    remembered = noop.task("Remember the background converge")["result"]["ansible_facts"]
    assert sorted(remembered) == ["gcp_gpu_vpcs_fabric", "gcp_gpu_vpcs_fabric_job"] and remembered["gcp_gpu_vpcs_fabric_job"] == {}
    assert remembered["gcp_gpu_vpcs_fabric"]["cluster"] == "a3high" and len(remembered["gcp_gpu_vpcs_fabric"]["networks"]) == 4
    assert noop.task("await")["status"] == "skipped"

    # the fabric it publishes is the one a converge in the foreground publishes
    run_playbook(play(gcp_defaults, ROLE_VARS, [publish(tmp_path / "foreground.json")])).assert_ok()
    published = json.loads((tmp_path / "noop.json").read_text())
    assert published == json.loads((tmp_path / "foreground.json").read_text())
    assert published == json.loads((tmp_path / "first.json").read_text())
