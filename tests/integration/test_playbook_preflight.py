# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every playbook checks every role's inputs before its first change (roles/preflight).

For each playbook, a bad input of a role that runs LATE in the play (after others have created things) fails the run
in the preflight play, before any mutating request reaches the doubles (Kubernetes, GCP, AWX, the fake nvidia-smi) or
anything is rendered, and the one message names the role and the variable. Several bad inputs of several roles come
in one message. The good runs are the playbooks' own tests (test_playbook_*.py), which still pass.
Also: the mps role checks its directory mode, unit folder and the GPUs its memory limits name before it writes.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpu_ops.cluster.tests.fakes import fake_nvidia_smi as fake
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import GCP_PROJECT, REPO_ROOT, collections_path

REPORT = "Preflight - report every problem of every host at once"
FAKE = str(REPO_ROOT / "tests" / "fakes" / "nvidia-smi")
FAKE_MPS_CONTROL = str(REPO_ROOT / "tests" / "fakes" / "nvidia-cuda-mps-control")


def _playbook(name):
    return str(REPO_ROOT / "playbooks" / name)


def _inventory(name):
    return ("-i", str(REPO_ROOT / "inventories" / name))


def _report(result, playbook):
    """The preflight's one failure: its message, after checking that nothing but the preflight failed."""
    result.assert_failed()
    reports = [r for r in result.failed if REPORT in r["task"]]
    assert len(reports) == 1, result.output
    # the only other failures are the checks the preflight rescued (recorded as problems)
    assert all(r["task"] == reports[0]["task"] or "Preflight" in r["task"] or "Generate the surveys" in r["task"]
               or "Check the template list" in r["task"] or "MPS settings" in r["task"] for r in result.failed), result.output
    message = reports[0]["result"]["msg"]
    assert message.startswith("Preflight of playbooks/%s found " % playbook), message
    assert "nothing was changed" in message
    return message


def _after_preflight(result, name):
    """The tasks named ``name`` of the plays after the preflight (the preflight runs some of the roles' own tasks files
    to check their requests)."""
    return [task for task in result.tasks(name) if not task["play"].startswith("Preflight")]


def _no_rendered_plan(render):
    """Render mode: the preflight runs after the render folder is prepared; no step of the plan is written."""
    assert not any((render / name).exists() for name in ("requests", "manifests", "charts", "checks", "nccl", "awx"))


# ------------------------------------------------------------------------------------------- gpu_operator.yml

def test_gpu_operator_rdma_test_typo_fails_before_the_network_operator_writes(run_playbook, k8s_double):
    """The RDMA test runs last, after the Network Operator release, its IPPool and network: its bad option stops the
    run before the first write to the cluster."""
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars={"rdma_test_threshold_fraction": "most of it"})
    message = _report(result, "gpu_operator.yml")
    assert "[baremetal-demo] rdma_test: " in message and "rdma_test_threshold_fraction" in message and "float" in message
    assert k8s_double.writes() == []
    assert not result.tasks("Network Operator", action="include_role") or all(
        "Preflight" in r["task"] for r in result.tasks("Network Operator", action="include_role"))


def test_gpu_operator_reports_every_bad_input_of_every_role_at_once(run_playbook, k8s_double):
    bad = {"gpu_operator_rdma": {"use_host_mofd": True},             # a typo inside a GPU Operator option
           "network_operator_ipam": "whereabout",                     # not a choice
           "rdma_test_threshold_fraction": "most"}                    # not a number
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars=bad)
    message = _report(result, "gpu_operator.yml")
    assert " found 3 problem(s)" in message, message
    lines = message.splitlines()[1:]
    assert [line.split(": ", 1)[0] for line in lines] == [
        "[baremetal-demo] network_operator", "[baremetal-demo] gpu_operator", "[baremetal-demo] rdma_test"], message
    assert "network_operator_ipam must be one of: auto, nv-ipam, whereabouts, got: whereabout" in lines[0]
    assert "gpu_operator_rdma.use_host_mofd" in lines[1] and "Supported parameters include: mode, use_host_mofed" in lines[1]
    assert "rdma_test_threshold_fraction" in lines[2]
    assert k8s_double.writes() == []


def test_gpu_operator_plan_problem_is_found_in_the_preflight(run_playbook, k8s_double):
    """What only the plan can judge (a chart version outside the catalog) is found before anything is installed too."""
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars={"gpu_operator_chart_version": "v1.0.0"})
    message = _report(result, "gpu_operator.yml")
    assert "[baremetal-demo] gpu_operator: gpu_operator_plan: chart_version: GPU Operator chart 'v1.0.0' is not in the catalog" in message
    assert "Finalization of task args" not in message
    assert k8s_double.writes() == []


def test_gpu_operator_value_checks_of_every_role_run_in_the_preflight(run_playbook, k8s_double):
    """The roles' value checks (counts, Helm release names, what the RDMA test needs) used to run at each role's turn:
    the Network Operator was installed before the GPU Operator or the RDMA test refused their values. A survey answer
    is text: "-3" passes the argument spec as the number -3 and is refused as a negative count."""
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars={"gpu_operator_wait_retries": "-3", "gpu_operator_release_name": "g" * 54,
                                      "network_operator_wait_delay": -5, "rdma_test_pod_timeout": "-1",
                                      "rdma_test_nodes": ["gpu-node-1", "gpu-node-1"]})
    message = _report(result, "gpu_operator.yml")
    assert " found 5 problem(s)" in message, message
    assert "[baremetal-demo] network_operator: network_operator_wait_delay: -5 is negative" in message
    assert "[baremetal-demo] gpu_operator: gpu_operator_release_name: " in message and "at most 53" in message
    assert "[baremetal-demo] gpu_operator: gpu_operator_wait_retries: -3 is negative" in message
    assert "[baremetal-demo] rdma_test: rdma_test_pod_timeout: -1 is negative" in message
    assert "[baremetal-demo] rdma_test: rdma_test_nodes: gpu-node-1, gpu-node-1; the test needs two different nodes" in message
    assert k8s_double.writes() == []


def test_gpu_operator_rdma_test_without_a_device_fails_in_the_preflight(run_playbook, k8s_double):
    """The device the test runs on comes from the GPU hosts' facts, which the preflight has as the role has."""
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars={"rdma_test_device": "mlx5_99"})
    message = _report(result, "gpu_operator.yml")
    assert " found 1 problem(s)" in message, message
    assert "[baremetal-demo] rdma_test: " in message and "mlx5_99" in message
    assert k8s_double.writes() == []


def test_gpu_operator_missing_kubeconfig_is_found_in_the_preflight(run_playbook, k8s_double, tmp_path):
    """The connection's kubeconfig was first read by the Network Operator's first request, in an error naming no option."""
    missing = str(tmp_path / "missing" / "kubeconfig")
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars={"gpu_ops_kubeconfig": missing})
    message = _report(result, "gpu_operator.yml")
    assert " found 1 problem(s)" in message, message
    assert "[baremetal-demo] gpu_operator.yml: gpu_ops_kubeconfig: %s does not exist on the controller" % ascii(missing) in message
    assert k8s_double.requests() == []


# ---------------------------------------------------------------------------------------------- awx_setup.yml

AWX_INSTALLED = any(os.path.isfile(os.path.join(p, "ansible_collections/awx/awx/MANIFEST.json"))
                    for p in collections_path().split(":"))


@pytest.mark.skipif(not AWX_INSTALLED, reason="awx.awx is not installed next to this collection")
def test_awx_setup_checks_every_template_before_the_organization(run_playbook):
    from ansible_collections.gpu_ops.cluster.tests.doubles.awx import AwxDouble  # pylint: disable=import-outside-toplevel

    awx = AwxDouble(project_files=["playbooks/gke_gpudirect.yml", "inventories/fleet"]).start()
    try:
        templates = [
            {"name": "Typo inventory", "playbook": "playbooks/gke_gpudirect.yml", "inventory": "GPU flet"},
            {"name": "Bad survey", "playbook": "playbooks/gke_gpudirect.yml", "inventory": "GPU fleet",
             "survey": [{"role": "gke_gpu_cluster", "options": ["gke_gpu_cluster_recreate"]}]},
        ]
        result = run_playbook(_playbook("awx_setup.yml"), extra_vars={
            "awx_setup_controller": {"controller_host": awx.url, "controller_oauthtoken": awx.token},
            "awx_job_templates_project_scm_url": "https://git.example/gpu_ops/cluster.git",
            "awx_job_templates_templates": templates})
        message = _report(result, "awx_setup.yml")
        assert " found 2 problem(s)" in message, message
        assert ("awx_job_templates: awx_job_templates_templates: Typo inventory: inventory GPU flet is not one of "
                "awx_job_templates_inventories (GPU fleet)") in message
        assert "gke_gpu_cluster_recreate cannot be a survey question: bool" in message
        assert awx.mutating_requests() == []
        assert not result.tasks("Organization")
    finally:
        awx.stop()


@pytest.mark.skipif(not AWX_INSTALLED, reason="awx.awx is not installed next to this collection")
def test_awx_setup_checks_the_project_files_before_the_organization(run_playbook):
    """A playbook or an inventory source that is not in the project: AWX refused them at the inventory source or the job
    template, after the organization, project, credentials and inventories were created. Now the preflight names them,
    from the project's copy (this collection), and nothing is sent."""
    from ansible_collections.gpu_ops.cluster.tests.doubles.awx import AwxDouble  # pylint: disable=import-outside-toplevel

    awx = AwxDouble(project_files=["playbooks/gke_gpudirect.yml", "playbooks/aks_mig.yml", "inventories/fleet"]).start()
    try:
        result = run_playbook(_playbook("awx_setup.yml"), extra_vars={
            "awx_setup_controller": {"controller_host": awx.url, "controller_oauthtoken": awx.token},
            "awx_job_templates_project_scm_url": "https://git.example/gpu_ops/cluster.git",
            "awx_job_templates_inventories": [{"name": "GPU fleet", "source_path": "inventories/fleet"},
                                              {"name": "Typo fleet", "source_path": "inventories/flet"}],
            "awx_job_templates_templates": [
                {"name": "Typo playbook", "playbook": "playbooks/gke_gpudirec.yml", "inventory": "GPU fleet"},
                {"name": "Outside", "playbook": "../cluster/playbooks/aks_mig.yml", "inventory": "GPU fleet"},
                {"name": "AKS MIG", "playbook": "playbooks/aks_mig.yml", "inventory": "GPU fleet"}]})
        message = _report(result, "awx_setup.yml")
        assert " found 3 problem(s)" in message, message
        assert ("[localhost] awx_job_templates: awx_job_templates_templates: Typo playbook: playbook playbooks/gke_gpudirec.yml "
                "is not a playbook of the project (%s; its playbooks: playbooks/aks_mig.yml, playbooks/awx_setup.yml, "
                "playbooks/gke_gpudirect.yml, playbooks/gke_gpudirect_teardown.yml" % os.path.realpath(REPO_ROOT)) in message
        assert "Outside: playbook ../cluster/playbooks/aks_mig.yml is not a playbook of the project" in message
        assert ("awx_job_templates_inventories: Typo fleet: source_path inventories/flet is not in the project (%s)"
                % os.path.realpath(REPO_ROOT)) in message
        assert "AKS MIG" not in message
        assert awx.mutating_requests() == []
        assert not result.tasks("Organization")
    finally:
        awx.stop()


# ------------------------------------------------------------------------------------- gke_gpudirect(.yml, teardown)

def _gke_vars(gcp_double, k8s_double, **extra):
    return dict({"gke_gpudirect_gcp": gcp_double.module_args(project=GCP_PROJECT),
                 "gpu_ops_kubeconfig": k8s_double.kubeconfig,
                 "gke_gpu_cluster_project": GCP_PROJECT, "gke_gpu_cluster_kubeconfig": ""}, **extra)


def test_gke_gpudirect_bad_input_of_the_last_roles_fails_before_the_first_request(run_playbook, gcp_double, k8s_double):
    """The NRI injector and the NCCL test run after the fabric, the cluster and the node pool were created."""
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, nri_device_injector_wait_timeout="soon", nccl_test_benchmark_thresholds={"all_redcue": 40}))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 2 problem(s)" in message, message
    assert "[a3mega-demo] nri_device_injector: " in message and "nri_device_injector_wait_timeout" in message
    assert "[a3mega-demo] nccl_test: " in message and "all_redcue" in message
    assert gcp_double.mutating_requests() == [] and k8s_double.writes() == []
    assert not _after_preflight(result, "GPU NIC fabric of cluster")


def test_gke_gpudirect_node_count_and_installer_counts_fail_before_the_first_request(run_playbook, gcp_double, k8s_double):
    """A negative NCCL node count and a negative installer timeout were refused after the cluster was created; the
    installer's problem names the tcpxo_installer option the user set."""
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, nccl_test_nodes=-2, tcpxo_installer_wait_timeout="-10"))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 2 problem(s)" in message, message
    assert "[a3mega-demo] nccl_test: nccl_test_nodes: -2 is not a valid node count" in message
    assert "[a3mega-demo] tcpxo_installer: tcpxo_installer_wait_timeout: -10 is negative" in message
    assert gcp_double.mutating_requests() == [] and k8s_double.writes() == []


def test_gke_gpudirect_rdma_installer_has_a_preflight(run_playbook, gcp_double, k8s_double):
    """The gIB installer of the RDMA profiles had no preflight: its bad values were found after the cluster."""
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gke_gpu_cluster_gpudirect="rdma", gpudirect_installer_wait_delay=-1,
        gpudirect_installer_labels={"bad key!": "x"}))
    message = _report(result, "gke_gpudirect.yml")
    assert "[a3mega-demo] gpudirect_installer: gpudirect_installer_wait_delay: -1 is negative" in message
    assert "[a3mega-demo] gpudirect_installer: gpudirect_installer_labels: " in message
    assert gcp_double.mutating_requests() == [] and k8s_double.writes() == []


def test_gke_gpudirect_refuses_two_kubeconfigs_before_the_first_request(run_playbook, gcp_double, k8s_double, tmp_path):
    """The file gke_gpu_cluster writes and gpu_ops_kubeconfig, the connection of every later request, must be one."""
    written = str(tmp_path / "kube" / "a3mega.yaml")
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gke_gpu_cluster_kubeconfig=written))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 1 problem(s)" in message, message
    assert ("gke_gpudirect.yml: gpu_ops_kubeconfig (%s) is not gke_gpu_cluster_kubeconfig (%s)"
            % (k8s_double.kubeconfig, written)) in message
    assert gcp_double.mutating_requests() == [] and k8s_double.requests() == []
    assert not (tmp_path / "kube").exists()


def test_gke_gpudirect_cloud_request_problems_fail_before_the_first_request(run_playbook, gcp_double, k8s_double):
    """What gke_cluster and gpu_nodepool refuse (a zone outside the region, 60 authorized networks on a public cluster, a
    machine type of another profile) used to fail at their turn: the fabric converging in the background had already created networks.
    The preflight asks the modules themselves (validate_only), so nothing is read or created, and no background job
    starts."""
    networks = [{"cidr_block": "10.%d.0.0/16" % index} for index in range(60)]
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gke_gpu_cluster_node_locations=["us-east5-a"],
        gke_gpu_cluster_master_authorized_networks=networks,
        gke_gpu_cluster_node_pool={"machine_type": "a3-ultragpu-8g"}))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 3 problem(s)" in message, message
    # each under the variable that sets it, and the zone once, although both requests take it
    assert message.count("us-east5-a") == 1, message
    assert "[a3mega-demo] gke_gpu_cluster: gke_gpu_cluster_node_locations: zone us-east5-a is not in the region" in message
    assert "[a3mega-demo] gke_gpu_cluster: gke_gpu_cluster_master_authorized_networks: lists 60 CIDR blocks" in message
    assert ("[a3mega-demo] gke_gpu_cluster: gke_gpu_cluster_node_pool.machine_type: gpudirect=tcpxo runs on "
            "a3-megagpu-8g, not a3-ultragpu-8g") in message
    assert gcp_double.requests == [] and k8s_double.requests() == []
    assert not _after_preflight(result, "GPU NIC fabric of cluster")


def test_gke_gpudirect_cluster_and_fabric_names_fail_before_the_first_request(run_playbook, gcp_double, k8s_double):
    """The names and counts gke_gpu_cluster and gcp_gpu_vpcs check first, in the preflight too."""
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gke_gpu_cluster_verify_timeout="-3", gcp_gpu_vpcs_step="../fabric"))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 2 problem(s)" in message, message
    assert "[a3mega-demo] gke_gpu_cluster: gke_gpu_cluster_verify_timeout" in message
    assert "[a3mega-demo] gcp_gpu_vpcs: gcp_gpu_vpcs_step" in message
    assert gcp_double.requests == [] and k8s_double.requests() == []


def test_gke_gpudirect_fabric_request_problem_fails_before_the_first_request(run_playbook, gcp_double, k8s_double):
    """gke_multinetwork's own checks of the fabric (here its subnets do not fit in the base range) run in the
    preflight; the node pool, which takes the fabric's networks, is not judged without them."""
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gcp_gpu_vpcs_cidr_base="10.0.0.0/24", gcp_gpu_vpcs_subnet_prefix_length=20))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 1 problem(s)" in message, message
    assert "[a3mega-demo] gcp_gpu_vpcs: gcp_gpu_vpcs_subnet_prefix_length: " in message
    assert "gke_gpu_cluster" not in message
    assert gcp_double.requests == [] and k8s_double.requests() == []


def test_gke_gpudirect_rdma_pool_of_another_machine_fails_before_the_first_request(run_playbook, gcp_double, k8s_double):
    """An RDMA cluster: the pool is checked against the fabric the preflight planned (one gVNIC network and eight
    RDMA subnets in the zone of the first node location), so only the wrong machine type is refused."""
    result = run_playbook(_playbook("gke_gpudirect.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gke_gpu_cluster_gpudirect="rdma", gke_gpu_cluster_version="1.32.4-gke.1533000",
        gke_gpu_cluster_node_locations=["us-central1-b"], gke_gpu_cluster_node_pool={"machine_type": "a3-megagpu-8g"}))
    message = _report(result, "gke_gpudirect.yml")
    assert " found 1 problem(s)" in message, message
    assert ("[a3mega-demo] gke_gpu_cluster: gke_gpu_cluster_node_pool.machine_type: gpudirect=rdma runs on "
            "a3-ultragpu-8g, a4-highgpu-8g, not a3-megagpu-8g") in message
    assert gcp_double.requests == [] and k8s_double.requests() == []


def test_gke_gpudirect_teardown_bad_fabric_input_fails_before_any_request(run_playbook, gcp_double, k8s_double):
    result = run_playbook(_playbook("gke_gpudirect_teardown.yml"), extra_args=_inventory("gke"), extra_vars=_gke_vars(
        gcp_double, k8s_double, gcp_gpu_vpcs_subnet_prefix_length="narrow"))
    message = _report(result, "gke_gpudirect_teardown.yml")
    assert "[a3mega-demo] gcp_gpu_vpcs: " in message and "gcp_gpu_vpcs_subnet_prefix_length" in message
    assert gcp_double.requests == [] and k8s_double.requests() == []
    assert not result.tasks("Name the GPU NIC fabric")


def test_site_bad_nccl_test_input_fails_before_anything_is_rendered(run_playbook, tmp_path):
    render = tmp_path / "render"
    result = run_playbook(_playbook("site.yml"), extra_args=_inventory("local"),
                          extra_vars={"gpu_ops_render_dir": str(render), "nccl_test_benchmarks": ["all_reduse"],
                                      "gke_gpu_cluster_version": "1.30.1-gke.100"})
    message = _report(result, "gke_gpudirect.yml")
    assert "nccl_test: " in message and "nccl_test_benchmarks" in message and "all_reduce" in message
    # the NCCL environment site.yml renders last, checked by its own preflight play (nccl_env's function)
    assert ("[a3mega-demo] site.yml: nccl_env of gke_gpu_cluster_gpudirect and gke_gpu_cluster_version: gke_version: GKE "
            "1.30.1-gke.100 is below the minimum 1.30.4-gke.1129000 for tcpxo on 1.30\n") in message, message
    _no_rendered_plan(render)


# --------------------------------------------------------------------------------------------------- aks_mig.yml

def _aks_mig_render(run_playbook, render, **extra_vars):
    return run_playbook(_playbook("aks_mig.yml"), extra_args=_inventory("aks"),
                        env={"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"},
                        extra_vars=dict({"gpu_ops_render_dir": str(render)}, **extra_vars))


def test_aks_mig_bad_device_plugin_input_fails_before_the_pool_request(run_playbook, tmp_path):
    render = tmp_path / "render"
    result = _aks_mig_render(run_playbook, render, nvidia_device_plugin_wait_timeout="later")
    message = _report(result, "aks_mig.yml")
    assert "nvidia_device_plugin: " in message and "nvidia_device_plugin_wait_timeout" in message
    _no_rendered_plan(render)
    assert not result.tasks("Create the multi-instance GPU node pool")


def test_aks_mig_node_pool_request_problems_fail_before_anything_is_rendered(run_playbook, tmp_path):
    """gpu_nodepool's checks of the AKS pool (a pool name AKS refuses, a taint not written key=value:Effect) in the
    preflight, with every other problem, before the pool request is planned."""
    render = tmp_path / "render"
    result = run_playbook(_playbook("aks_mig.yml"), extra_args=_inventory("aks"),
                          env={"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"},
                          extra_vars={"gpu_ops_render_dir": str(render), "aks_mig_pool_name": "Mig_Pool",
                                      "aks_mig_node_taints": ["bad taint"]})
    message = _report(result, "aks_mig.yml")
    assert " found 2 problem(s)" in message, message
    assert "[gpu-aks] aks_mig.yml: aks_mig_pool_name: 'Mig_Pool' is not valid" in message
    assert "[gpu-aks] aks_mig.yml: aks_mig_node_taints: 'bad taint' is not written key=value:Effect" in message
    _no_rendered_plan(render)
    assert not result.tasks("Create the multi-instance GPU node pool")


def test_aks_mig_device_plugin_strategy_against_the_pool_fails_before_the_pool_request(run_playbook, tmp_path):
    """The MIG strategy against the pool's MIG profile was judged after the pool, whose profile cannot change, was made."""
    render = tmp_path / "render"
    result = _aks_mig_render(run_playbook, render, aks_mig_strategy="none")
    message = _report(result, "aks_mig.yml")
    assert " found 1 problem(s)" in message, message
    assert "nvidia_device_plugin: nvidia_device_plugin_mig_strategy none does not match the pool" in message
    _no_rendered_plan(render)
    assert not result.tasks("Create the multi-instance GPU node pool")


# ------------------------------------------------------------------------------------------ unknown variables

UNKNOWN = "aks_mig_gpu_instance_profil is not an option of any role this playbook runs; did you mean aks_mig_gpu_instance_profile?"


def test_aks_mig_warns_of_a_misspelt_playbook_option_and_goes_on(run_playbook, tmp_path):
    """Ansible ignores aks_mig_gpu_instance_profil: the pool was MIG1g, in silence. Now the preflight names the option
    it most likely means, and (not strict) the run goes on."""
    render = tmp_path / "render"
    result = run_playbook(_playbook("aks_mig.yml"), extra_args=_inventory("aks"),
                          env={"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"},
                          extra_vars={"gpu_ops_render_dir": str(render), "aks_mig_gpu_instance_profil": "MIG3g",
                                      "nvidia_device_plugin_wait_timout": 60, "aks_mig_pool_name": "migpool"})
    result.assert_ok()
    message = result.task(REPORT)["result"]["msg"]
    assert message.splitlines() == [
        "Warning: 2 variable(s) with the prefix of a role that no role of playbooks/aks_mig.yml declares; Ansible ignores"
        " them (gpu_ops_preflight_strict=true makes them problems of the preflight):",
        "[gpu-aks] " + UNKNOWN,
        "[gpu-aks] nvidia_device_plugin_wait_timout is not an option of any role this playbook runs; did you mean"
        " nvidia_device_plugin_wait_timeout?"]
    assert (render / "requests").is_dir()


def test_aks_mig_strict_fails_on_a_misspelt_option_before_the_pool_request(run_playbook, tmp_path):
    render = tmp_path / "render"
    result = run_playbook(_playbook("aks_mig.yml"), extra_args=_inventory("aks"),
                          env={"AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"},
                          extra_vars={"gpu_ops_render_dir": str(render), "aks_mig_gpu_instance_profil": "MIG3g",
                                      "gpu_ops_preflight_strict": True})
    message = _report(result, "aks_mig.yml")
    assert message.splitlines()[1:] == ["[gpu-aks] aks_mig.yml: " + UNKNOWN], message
    _no_rendered_plan(render)
    assert not result.tasks("Create the multi-instance GPU node pool")


def test_gpu_operator_strict_fails_on_a_role_option_typo_before_any_write(run_playbook, k8s_double):
    """A role's option (every entry point of its spec, its defaults) misspelt in the inventory's place, strict: one problem
    with the others, and nothing is written to the cluster."""
    result = run_playbook(_playbook("gpu_operator.yml"), extra_args=_inventory("baremetal-k8s"), env=k8s_double.env(),
                          extra_vars={"rdma_test_threshold_fractoin": 0.5, "network_operator_ipam": "whereabout",
                                      "gpu_ops_preflight_strict": "true"})
    message = _report(result, "gpu_operator.yml")
    assert message.splitlines()[1:] == [
        "[baremetal-demo] network_operator: value of network_operator_ipam must be one of: auto, nv-ipam, whereabouts,"
        " got: whereabout",
        "[baremetal-demo] gpu_operator.yml: rdma_test_threshold_fractoin is not an option of any role this playbook runs;"
        " did you mean rdma_test_threshold_fraction?"], message
    assert k8s_double.writes() == []


def test_a_shared_inventory_gives_no_unknown_variable(run_playbook, tmp_path):
    """inventories/fleet holds the options of every playbook's roles (nccl_test_* for gke_gpudirect.yml): the teardown,
    which does not run nccl_test, leaves them alone, strict or not."""
    result = run_playbook(_playbook("gke_gpudirect_teardown.yml"), extra_args=_inventory("fleet"),
                          extra_vars={"gpu_ops_render_dir": str(tmp_path / "render"), "gpu_ops_preflight_strict": True})
    assert result.task(REPORT)["status"] == "skipped", result.output
    assert "is not an option of any role" not in result.output


def test_a_playbook_of_your_own_is_read_beside_it_and_an_unknown_name_leaves_the_check_out(run_playbook, tmp_path):
    """roles/preflight/README.md's pattern: a playbook outside the collection names itself; the roles it runs and its own
    names are read from its file (beside the playbook that runs). A name found nowhere is no error: no check."""
    def play(name):
        mps = {"name": "Preflight of mps", "vars": {"mps_service_manager": "none", "mps_unit_dir": "/tmp", "mps_nvidia_smi": FAKE},
               "ansible.builtin.include_role": {"name": "gpu_ops.cluster.mps", "tasks_from": "preflight", "rolespec_validate": False}}
        report = {"name": "Preflight - every problem at once", "run_once": True, "vars": {"preflight_playbook": name},
                  "ansible.builtin.include_role": {"name": "gpu_ops.cluster.preflight", "tasks_from": "report", "rolespec_validate": False}}
        path = tmp_path / "mine.yml"
        path.write_text(json.dumps([{"name": "mine", "hosts": "localhost", "gather_facts": False,
                                     "vars": {"mine_x": "{{ mine_mps }}"}, "tasks": [mps, report]}]), encoding="utf-8")
        return path
    bad = {"mps_stop_polcy": "drain", "mine_mpss": True, "mine_mps": True, "nccl_test_nodes": 2}
    result = run_playbook(play("mine.yml"), extra_vars=bad).assert_ok()
    assert result.task(REPORT)["result"]["msg"].splitlines()[1:] == [
        "[localhost] mine_mpss is not an option of any role this playbook runs; did you mean mine_mps?",
        "[localhost] mps_stop_polcy is not an option of any role this playbook runs; did you mean mps_stop_policy?"]
    result = run_playbook(play("nowhere.yml"), extra_vars=bad).assert_ok()
    assert result.task(REPORT)["status"] == "skipped"


# ------------------------------------------------------------------------------------------------- gpu_hosts.yml

def _fake_host(tmp_path):
    state, log = tmp_path / "nvidia-smi.json", tmp_path / "nvidia-smi.log"
    state.write_text(json.dumps(fake.preset_state("A100-40GB x2")), encoding="utf-8")
    return {"FAKE_NVIDIA_SMI_STATE": str(state), "FAKE_NVIDIA_SMI_LOG": str(log)}, log


def _fake_writes(log):
    if not log.exists():
        return []
    return [c for c in (json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()) if c["write"]]


def _gpu_hosts_vars(tmp_path, **more):
    # the unit folder is there, as /etc/systemd/system is on a host (the role refuses a missing one)
    (tmp_path / "units").mkdir(exist_ok=True)
    return dict(gpu_hosts_target="localhost", gpu_hosts_become=False, gpu_hosts_nvidia_smi=FAKE,
                gpu_hosts_mig=[{"gpu": "0", "profiles": ["3g.20gb", "2g.10gb"]}], gpu_hosts_mig_allow_reset=True,
                gpu_hosts_nccl_fabric="ib", gpu_hosts_nccl_interfaces=["mlx5_0"],
                gpu_hosts_nccl_dest=str(tmp_path / "nccl.conf"), gpu_hosts_mps=True, mps_nvidia_smi=FAKE, mps_control_binary=FAKE_MPS_CONTROL,
                mps_service_manager="none", mps_unit_dir=str(tmp_path / "units"), mps_state_dir=str(tmp_path / "state"),
                mps_pipe_directory=str(tmp_path / "pipe"), mps_log_directory=str(tmp_path / "log"), **more)


def test_gpu_hosts_mps_limit_on_a_missing_gpu_fails_before_the_mig_geometry(run_playbook, tmp_path):
    """MPS runs after MIG: a memory limit naming GPU 5 of a two-GPU host used to fail after MIG was applied."""
    env, log = _fake_host(tmp_path)
    result = run_playbook(_playbook("gpu_hosts.yml"), env=env, extra_vars=_gpu_hosts_vars(
        tmp_path, mps_visible_devices=["1"], mps_pinned_device_mem_limit={"1": "8G", "5": "8G"}))
    message = _report(result, "gpu_hosts.yml")
    assert "[localhost] mps: mps_pinned_device_mem_limit / mps_visible_devices: GPU 5 is not a GPU of localhost (it has 0, 1)" in message
    assert _fake_writes(log) == []
    assert not any((tmp_path / name).exists() for name in ("nccl.conf", "state", "pipe", "log"))
    assert list((tmp_path / "units").iterdir()) == []


def test_gpu_hosts_mig_and_mps_on_one_gpu_is_a_cross_role_problem(run_playbook, tmp_path):
    """MIG on GPU 0 and an MPS daemon for every GPU (mps_visible_devices empty), plus a bad directory mode: both at once."""
    env, log = _fake_host(tmp_path)
    result = run_playbook(_playbook("gpu_hosts.yml"), env=env, extra_vars=_gpu_hosts_vars(tmp_path, mps_directory_mode="755x"))
    message = _report(result, "gpu_hosts.yml")
    assert " found 2 problem(s)" in message, message
    assert "[localhost] mps: mps_directory_mode: \"755x\" is not a file mode" in message
    assert "[localhost] gpu_hosts_mig + gpu_hosts_mps: GPU(s) 0 get MIG instances" in message
    assert _fake_writes(log) == []


# ----------------------------------------------------------------------------------------- mps role, on its own

def test_mps_role_checks_mode_unit_folder_and_gpus_before_any_write(run_playbook, tmp_path):
    """Before: the role set EXCLUSIVE_PROCESS and created its directories, then refused the mode, the unit folder or a
    memory limit on a GPU the host does not have. Now every problem in one message, and nothing written."""
    env, log = _fake_host(tmp_path)
    role_vars = {"mps_nvidia_smi": FAKE, "mps_control_binary": FAKE_MPS_CONTROL, "mps_service_manager": "systemd", "mps_unit_dir": str(tmp_path / "no-units"),
                 "mps_state_dir": str(tmp_path / "state"), "mps_pipe_directory": str(tmp_path / "pipe"),
                 "mps_log_directory": str(tmp_path / "log"), "mps_directory_mode": "0x755",
                 "mps_exclusive_process": True, "mps_pinned_device_mem_limit": {"0": "4G", "3": "4G"}}
    play = [{"name": "mps", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": "gpu_ops.cluster.mps"},
                        "vars": role_vars}]}]
    result = run_playbook(play, env=env).assert_failed()
    message = result.task("Refuse settings the host cannot take")["result"]["msg"]
    assert "mps_directory_mode: \"0x755\" is not a file mode" in message
    assert "mps_unit_dir: %s is not a folder on localhost" % (tmp_path / "no-units") in message
    assert "GPU 3 is not a GPU of localhost (it has 0, 1)" in message and message.endswith("Nothing was changed.")
    assert _fake_writes(log) == []
    assert not any((tmp_path / name).exists() for name in ("state", "pipe", "log"))


def test_mps_role_checks_the_unit_folder_and_directories_without_systemd_before_any_write(run_playbook, tmp_path):
    """mps_service_manager none still writes the unit: a missing unit folder used to be found by the template, after the
    pipe, log and state directories were created. A file where a directory goes is refused with it, before any write."""
    env, log = _fake_host(tmp_path)
    (tmp_path / "log").write_text("a file, not a folder", encoding="utf-8")
    role_vars = {"mps_nvidia_smi": FAKE, "mps_control_binary": FAKE_MPS_CONTROL, "mps_service_manager": "none", "mps_unit_dir": str(tmp_path / "no-units"),
                 "mps_state_dir": str(tmp_path / "state"), "mps_pipe_directory": str(tmp_path / "pipe"),
                 "mps_log_directory": str(tmp_path / "log"), "mps_exclusive_process": True}
    play = [{"name": "mps", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": "gpu_ops.cluster.mps"},
                        "vars": role_vars}]}]
    result = run_playbook(play, env=env).assert_failed()
    message = result.task("Refuse settings the host cannot take")["result"]["msg"]
    assert message == ("mps_unit_dir: %s is not a folder on localhost (the folder of systemd units, such as /etc/systemd/system); "
                       "mps_log_directory: %s is not a folder on localhost (something else has its path). Nothing was changed."
                       % (tmp_path / "no-units", tmp_path / "log")), message
    assert _fake_writes(log) == []
    assert not any((tmp_path / name).exists() for name in ("state", "pipe", "no-units"))
