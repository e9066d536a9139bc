# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA DRA driver plan: values by platform and release, refusals before any change, the verdict after it.

Expected values are written out here (from the upstream docs and Cluster Toolkit's gke-a4x example), not read from
the catalog the plan reads.
"""

from __future__ import annotations

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators import dra_driver_plan as P
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._operators.inputs import OperatorInputError
from ansible_collections.gpu_ops.cluster.tests.doubles.gpu_hosts import gpu_host


def host(driver="570.158.01", imex="inactive"):
    return gpu_host(driver=driver, imex=imex)


def plan(hosts=None, **options):
    options.setdefault("chart_version", "0.4.1")
    return P.dra_driver_plan(options, hosts)


def refusal(hosts=None, **options):
    with pytest.raises(OperatorInputError) as caught:
        plan(hosts, **options)
    return str(caught.value)


# ---- chart choice -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("asked,line,ref,url,version", [
    ("v25.3.0", "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu", "https://helm.ngc.nvidia.com/nvidia", "25.3.0"),
    ("25.12.0", "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu", "https://helm.ngc.nvidia.com/nvidia", "25.12.0"),
    ("0.4.1", "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "", "0.4.1"),
    ("v0.5.0", "dra-driver-nvidia-gpu", "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", "", "0.5.0"),
])
def test_the_chart_is_chosen_by_version_with_or_without_v(asked, line, ref, url, version):
    result = plan(chart_version=asked)
    assert result["line"] == line and result["version"] == version
    assert {k: result["chart"][k] for k in ("chart_ref", "chart_repo_url", "chart_version")} == {
        "chart_ref": ref, "chart_repo_url": url, "chart_version": version}
    assert result["expect"]["controller"] == {"kind": "Deployment", "name": line + "-controller"}
    assert result["expect"]["kubelet_plugin"] == {"kind": "DaemonSet", "name": line + "-kubelet-plugin",
                                                  "selector": line + "-component=kubelet-plugin"}


def test_no_version_is_the_pinned_release():
    assert P.dra_driver_plan({}, None)["chart"]["chart_version"] == "0.4.1"


@pytest.mark.parametrize("asked", ["25.2.0", "v0.4.0", "0.6.0", "latest", "v"])
def test_a_release_outside_the_catalog_is_refused_with_the_list(asked):
    message = refusal(chart_version=asked)
    assert message.startswith("chart_version: ") and "25.3.0" in message and "0.4.1" in message


def test_name_override_renames_the_workloads_and_on_the_sigs_line_their_labels():
    moved = plan(chart_version="0.4.1", values={"nameOverride": "nvidia-dra-driver-gpu"})["expect"]
    assert moved["controller"]["name"] == "nvidia-dra-driver-gpu-controller"
    assert moved["kubelet_plugin"]["selector"] == "nvidia-dra-driver-gpu-component=kubelet-plugin"
    old = plan(chart_version="25.12.0", values={"nameOverride": "dra"})["expect"]
    assert old["kubelet_plugin"]["name"] == "dra-kubelet-plugin"
    assert old["kubelet_plugin"]["selector"] == "nvidia-dra-driver-gpu-component=kubelet-plugin"


def test_a_local_chart_keeps_the_version_and_names_the_workloads_after_it():
    result = plan(chart_version="25.8.1", chart_ref="/srv/charts/nvidia-dra-driver-gpu", chart_repo_url="")
    assert result["chart"]["chart_ref"] == "/srv/charts/nvidia-dra-driver-gpu" and result["chart"]["chart_repo_url"] == ""
    assert result["expect"]["controller"]["name"] == "nvidia-dra-driver-gpu-controller"


# ---- values -------------------------------------------------------------------------------------------------------

def test_gke_a4x_values_quota_and_expectations():
    result = plan(chart_version="v25.3.0", platform="gke", kubernetes_version="v1.35.1-gke.1000")
    values = result["chart"]["values"]
    assert values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    assert values["resources"] == {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}}
    assert "gpuResourcesEnabledOverride" not in values
    controller = values["controller"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert controller["nodeSelectorTerms"] == [{"matchExpressions": [{"key": "nvidia.com/gpu", "operator": "DoesNotExist"}]}]
    plugin = values["kubeletPlugin"]
    assert plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-gb200"]},
                              {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}]
    assert plugin["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]
    namespace, quota = result["objects"]
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nvidia-dra-driver-gpu"}}
    assert quota["kind"] == "ResourceQuota"
    assert quota["metadata"] == {"name": "nvidia-dra-driver-gpu-quota", "namespace": "nvidia-dra-driver-gpu"}
    assert quota["spec"] == {"hard": {"pods": "100"}, "scopeSelector": {"matchExpressions": [
        {"operator": "In", "scopeName": "PriorityClass", "values": ["system-node-critical", "system-cluster-critical"]}]}}
    assert result["expect"]["device_classes"] == ["compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"]
    assert result["expect"]["gpu_node_selector"] == {"cloud.google.com/gke-accelerator": "nvidia-gb200"}
    assert result["expect"]["crds"] == ["computedomains.resource.nvidia.com"]


@pytest.mark.parametrize("platform,root", [("host", "/"), ("gpu-operator", "/run/nvidia/driver")])
def test_bare_metal_driver_root_by_how_the_driver_is_installed(platform, root):
    result = plan(platform=platform, hosts={"gb-0": host()})
    assert result["chart"]["values"]["nvidiaDriverRoot"] == root
    assert "kubeletPlugin" not in result["chart"]["values"] and [o["kind"] for o in result["objects"]] == ["Namespace"]
    assert result["expect"]["gpu_node_selector"] == {}


def test_gpu_allocation_turns_the_override_on_and_expects_the_gpu_classes():
    result = plan(chart_version="25.12.0", gpu_allocation=True)
    assert result["chart"]["values"]["gpuResourcesEnabledOverride"] is True
    assert result["chart"]["values"]["resources"]["gpus"] == {"enabled": True}
    assert result["expect"]["device_classes"] == [
        "compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com", "gpu.nvidia.com",
        "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    assert "vfio.gpu.nvidia.com" not in plan(chart_version="25.8.1", gpu_allocation=True)["expect"]["device_classes"]
    assert "vfio.gpu.nvidia.com" in plan(chart_version="0.4.1", gpu_allocation=True)["expect"]["device_classes"]


def test_the_crds_follow_the_release():
    assert plan(chart_version="25.8.1")["expect"]["crds"] == ["computedomains.resource.nvidia.com"]
    both = ["computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com"]
    assert plan(chart_version="25.12.0")["expect"]["crds"] == both and plan()["expect"]["crds"] == both


def test_host_managed_imex_sets_the_gate_and_mode_and_drops_the_daemon_class():
    result = plan({"gb-0": host(imex="active")}, chart_version="0.5.0", imex_mode="host-managed")
    values = result["chart"]["values"]
    assert values["featureGates"] == {"HostManagedIMEXDaemon": True}
    assert values["resources"]["computeDomains"] == {"enabled": True, "imex": {"mode": "hostManaged"}}
    assert result["expect"]["device_classes"] == ["compute-domain-default-channel.nvidia.com"]
    assert result["disable_host_imex"] == []


def test_user_values_merge_last():
    result = plan(platform="gke", values={"logVerbosity": "6", "kubeletPlugin": {"priorityClassName": "x"}})
    assert result["chart"]["values"]["logVerbosity"] == "6"
    assert result["chart"]["values"]["kubeletPlugin"]["priorityClassName"] == "x"
    assert len(result["chart"]["values"]["kubeletPlugin"]["tolerations"]) == 2


# ---- refusals ------------------------------------------------------------------------------------------------------

def test_an_old_driver_is_refused_naming_the_host():
    message = refusal({"gb-0": host(), "gb-1": host(driver="570.124.06")})
    assert "gb-1: driver 570.124.06 is older than 570.158.01" in message and "gb-0" not in message
    assert plan({"gb-0": host(driver="580.65.06")})["version"] == "0.4.1"


def test_a_driver_version_is_compared_part_by_part():
    assert "gb-0: driver 570.158 is older than 570.158.01" in refusal({"gb-0": host(driver="570.158")})
    assert "gb-0: driver 565.57.01" in refusal({"gb-0": host(driver="565.57.01")})
    assert plan({"gb-0": host(driver="570.158.1")})["disable_host_imex"] == []
    assert plan({"gb-0": host(driver="570.172.08")})["disable_host_imex"] == []


def test_a_host_without_driver_is_refused_where_the_host_installs_it_only():
    facts = host(driver=None)
    assert "gb-0: no NVIDIA driver found (gpu_host_facts: no driver_version)" in refusal({"gb-0": facts}, platform="host")
    facts["problems"] = ["nvidia-smi not found", "cannot read /proc/modules"]
    assert "(gpu_host_facts: nvidia-smi not found; cannot read /proc/modules)" in refusal({"gb-0": facts}, platform="host")
    assert plan({"gb-0": facts}, platform="gpu-operator")["disable_host_imex"] == []


@pytest.mark.parametrize("version,ok", [("v1.33.5-gke.1200", False), ("1.34.0", True), ("v1.34.2", True),
                                        ("1.35", True), ("v1.32.9", False), ("2.0.0", True)])
def test_kubernetes_older_than_1_34_is_refused(version, ok):
    if ok:
        assert plan(kubernetes_version=version)
    else:
        assert "kubernetes_version: the cluster runs %s; the DRA driver needs Kubernetes 1.34" % version in refusal(
            kubernetes_version=version)


def test_an_active_host_imex_service_is_refused_disabled_or_kept():
    hosts = {"gb-0": host(imex="active"), "gb-1": host(imex="inactive"), "gb-2": host(imex="absent")}
    message = refusal(hosts)
    assert "gb-0: nvidia-imex.service is active" in message and "NV_ERR_IN_USE" in message
    assert "gb-1" not in message and "gb-2" not in message
    assert plan(hosts, disable_host_imex=True)["disable_host_imex"] == ["gb-0"]
    refused = refusal(hosts, chart_version="0.5.0", imex_mode="host-managed")
    assert "gb-1: host-managed IMEX needs nvidia-imex.service running" in refused and "it is inactive there" in refused
    assert "gb-0" not in refused


def test_host_managed_imex_needs_a_release_that_has_it():
    assert refusal(chart_version="25.12.0", imex_mode="host-managed").startswith(
        "imex_mode: host-managed IMEX is a value of dra-driver-nvidia-gpu 0.5.0 and later")
    assert refusal(chart_version="0.4.1", imex_mode="host-managed").startswith("imex_mode:")


@pytest.mark.parametrize("options,start", [
    (dict(platform="gke", gpu_allocation=True), "gpu_allocation: GKE's device plugin keeps"),
    (dict(platform="gke", chart_version="0.5.0", imex_mode="host-managed"), "imex_mode: host-managed IMEX needs"),
    (dict(platform="aks"), "platform: 'aks' is not one of: host, gpu-operator, gke"),
    (dict(imex_mode="hostManaged"), "imex_mode: 'hostManaged' is not one of"),
    (dict(namespace="Bad_NS"), "namespace: "),
    (dict(release_name="x" * 70), "release_name: "),
    (dict(values=["x"]), "values: a dict"),
    (dict(gpu_node_selector="x"), "gpu_node_selector: a dict"),
    (dict(gpu_operator="26.7.0"), "gpu_operator: a dict"),
    (dict(colour="blue"), "unknown options colour"),
])
def test_bad_options_are_refused_naming_the_option(options, start):
    assert refusal(**options).startswith(start)


@pytest.mark.parametrize("operator,conflict", [
    ({"chart_version": "v26.7.0", "values": {"draDriver": {"enabled": True}}}, True),
    ({"chart_version": "v26.7.1", "values": {"gpuCluster": {"deployCR": True}}}, True),
    ({"chart_version": "v26.7.0", "values": {"draDriver": {"enabled": False}}}, False),
    ({"chart_version": "v26.7.0", "values": {"gpuCluster": {"deployCR": False}, "draDriver": {"enabled": False}}}, False),
    ({"chart_version": "v26.3.1", "values": {"draDriver": {"enabled": True}}}, False),
    ({"chart_version": "", "values": {"draDriver": {"enabled": True}}}, False),
    ({"chart_version": "v26.7.0", "values": {"draDriver": "on"}}, False),
    ({}, False),
])
def test_never_both_this_release_and_the_gpu_operators_dra_driver(operator, conflict):
    if conflict:
        message = refusal(gpu_operator=operator)
        assert message.startswith("gpu_operator: GPU Operator v26.7") and "same CRDs" in message
        which = "gpuCluster.deployCR" if "gpuCluster" in operator["values"] else "draDriver.enabled"
        assert "deploys the DRA driver itself (%s)" % which in message
    else:
        assert plan(gpu_operator=operator)["version"] == "0.4.1"


def test_every_refusal_is_reported_at_once():
    message = refusal({"gb-0": host(driver="560.35.03", imex="active")}, kubernetes_version="1.33.1",
                      gpu_operator={"chart_version": "26.7.0", "values": {"draDriver": {"enabled": True}}})
    assert message.count("; ") >= 3 and "kubernetes_version" in message and "gpu_operator" in message
    assert "driver 560.35.03" in message and "nvidia-imex.service is active" in message


# ---- readiness ------------------------------------------------------------------------------------------------------

def node(name, labels=None, ready=True):
    return {"metadata": {"name": name, "labels": labels if labels is not None else {
        "cloud.google.com/gke-accelerator": "nvidia-gb200", "nvidia.com/gpu.clique": "c1.0"}},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, node_name, ready=True, phase="Running"):
    return {"metadata": {"name": name}, "spec": {"nodeName": node_name}, "status": {
        "phase": phase, "containerStatuses": [{"name": "compute-domains", "ready": ready, "state": (
            {"running": {}} if ready else {"waiting": {"reason": "CrashLoopBackOff"}})}]}}


def rslice(node_name, driver="compute-domain.nvidia.com"):
    return {"metadata": {"name": "s-" + node_name}, "spec": {"driver": driver, "nodeName": node_name}}


def read(**changes):
    base = {
        "crds": ["computedomains.resource.nvidia.com"],
        "controller": {"spec": {"replicas": 1}, "status": {"readyReplicas": 1}},
        "device_classes": ["compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"],
        "kubelet_plugin_pods": [pod("kp-a", "gb-a"), pod("kp-b", "gb-b")],
        "resource_slices": [rslice("gb-a"), rslice("gb-b"), rslice("cpu-0", driver="gpu.nvidia.com")],
        "nodes": [node("gb-a"), node("gb-b"), node("cpu-0", labels={})],
    }
    base.update(changes)
    return base


EXPECT = plan(chart_version="25.3.0", platform="gke")["expect"]


def test_a_working_install_passes_node_by_node():
    verdict = P.dra_driver_readiness(EXPECT, read())
    assert verdict == {"ok": True, "problems": [], "nodes": [
        {"name": "gb-a", "ok": True, "reasons": [], "clique": "c1.0"},
        {"name": "gb-b", "ok": True, "reasons": [], "clique": "c1.0"}]}


@pytest.mark.parametrize("changes,expected", [
    (dict(crds=[]), "CRD computedomains.resource.nvidia.com is missing"),
    (dict(controller=None), "Deployment nvidia-dra-driver-gpu-controller is missing"),
    (dict(controller={"spec": {"replicas": 1}, "status": {}}), "Deployment nvidia-dra-driver-gpu-controller: 0 ready replica(s)"),
    (dict(device_classes=["compute-domain-daemon.nvidia.com"]),
     "DeviceClass(es) missing: compute-domain-default-channel.nvidia.com"),
    (dict(kubelet_plugin_pods=[pod("kp-a", "gb-a")]),
     "node gb-b: no nvidia-dra-driver-gpu-kubelet-plugin pod (its affinity or tolerations do not fit the node)"),
    (dict(kubelet_plugin_pods=[pod("kp-a", "gb-a"), pod("kp-b", "gb-b", ready=False)]),
     "node gb-b: nvidia-dra-driver-gpu-kubelet-plugin pod kp-b not ready: compute-domains CrashLoopBackOff"),
    (dict(kubelet_plugin_pods=[pod("kp-a", "gb-a"), pod("kp-b", "gb-b", phase="Pending")]),
     "node gb-b: nvidia-dra-driver-gpu-kubelet-plugin pod kp-b not ready: phase Pending"),
    (dict(resource_slices=[rslice("gb-a"), rslice("gb-b", driver="gpu.nvidia.com")]),
     "node gb-b: no ResourceSlice of driver compute-domain.nvidia.com"),
    (dict(nodes=[node("gb-a"), node("gb-b", labels={"cloud.google.com/gke-accelerator": "nvidia-gb200"})]),
     "node gb-b: no nvidia.com/gpu.clique label"),
    (dict(nodes=[node("gb-a"), node("gb-b", ready=False)]), "node gb-b: node not Ready"),
    (dict(nodes=[node("cpu-0", labels={})]),
     "no node matches the GPU node selector {'cloud.google.com/gke-accelerator': 'nvidia-gb200'}"),
    (dict(controller={"spec": {"replicas": 2}, "status": {"readyReplicas": 1}}),
     "Deployment nvidia-dra-driver-gpu-controller: 1 ready replica(s)"),
])
def test_each_failure_names_the_node_or_object_and_its_reason(changes, expected):
    verdict = P.dra_driver_readiness(EXPECT, read(**changes))
    assert not verdict["ok"]
    assert len(verdict["problems"]) == 1 and verdict["problems"][0].startswith(expected), verdict["problems"]


def test_a_controller_without_replicas_is_one_and_slices_of_other_drivers_do_not_count():
    assert P.dra_driver_readiness(EXPECT, read(controller={"spec": {}, "status": {"readyReplicas": 1}}))["ok"]
    extra = read(resource_slices=[rslice("gb-a"), rslice("gb-b"), rslice("gb-b"), {"spec": {"driver": "compute-domain.nvidia.com"}}])
    assert P.dra_driver_readiness(EXPECT, extra)["ok"]


def test_readiness_refuses_what_is_no_dict():
    with pytest.raises(OperatorInputError):
        P.dra_driver_readiness(EXPECT, [])
