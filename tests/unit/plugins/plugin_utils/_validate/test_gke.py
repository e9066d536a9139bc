# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE GPUDirect checks: the healthy A3 Mega cluster broken one way at a time fails exactly that check."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite


def _k8s(data):
    return data["kubernetes"]


def _gpu_nodes(data):
    return [n for n in _k8s(data)["nodes"] if "a3mega" in n["metadata"]["name"]]


def _ds(data, name):
    return [d for d in _k8s(data)["daemonsets"] if d["metadata"]["name"] == name][0]


def _workloads(data):
    return [p for p in _k8s(data)["pods"] if p["metadata"]["name"].startswith("nccl-test")]


def _main(pod):
    return [c for c in pod["spec"]["containers"] if c["name"] == "nccl-test"][0]


def _old_version(data):
    _gpu_nodes(data)[1]["status"]["nodeInfo"]["kubeletVersion"] = "v1.32.2-gke.1000000"


def _old_minor(data):
    for node in _gpu_nodes(data):
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.27.3-gke.100"


def _legacy_datapath(data):
    data["gke"]["cluster"]["datapath_provider"] = "LEGACY_DATAPATH"


def _no_multinet(data):
    data["gke"]["cluster"]["multi_networking"] = False


def _autopilot(data):
    data["gke"]["cluster"]["autopilot"] = True


def _ubuntu(data):
    data["gke"]["node_pools"][0]["image_type"] = "UBUNTU_CONTAINERD"


def _no_installer(data):
    _k8s(data)["daemonsets"] = [d for d in _k8s(data)["daemonsets"] if d["metadata"]["name"] != "nccl-tcpxo-installer"]


def _old_installer(data):
    _ds(data, "nccl-tcpxo-installer")["spec"]["template"]["spec"]["containers"][0]["image"] = \
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8"


def _installer_not_ready(data):
    _ds(data, "nccl-tcpxo-installer")["status"]["numberReady"] = 1


def _no_injector(data):
    _k8s(data)["daemonsets"] = [d for d in _k8s(data)["daemonsets"] if d["metadata"]["name"] != "device-injector"]


def _seven_gpus(data):
    _gpu_nodes(data)[0]["status"]["allocatable"]["nvidia.com/gpu"] = "7"


def _old_daemon(data):
    _workloads(data)[0]["spec"]["containers"][0]["image"] = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.12"


def _time_sharing(data):
    _gpu_nodes(data)[0]["metadata"]["labels"]["cloud.google.com/gke-gpu-sharing-strategy"] = "time-sharing"


def _mig_on_gpudirect(data):
    _gpu_nodes(data)[1]["metadata"]["labels"]["cloud.google.com/gke-gpu-partition-size"] = "1g.10gb"


def _four_gpus(data):
    pod = _workloads(data)[0]
    _main(pod)["resources"] = {"limits": {"nvidia.com/gpu": "4"}}


def _no_interfaces(data):
    del _workloads(data)[1]["metadata"]["annotations"]["networking.gke.io/interfaces"]


def _no_device_annotation(data):
    del _workloads(data)[0]["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"]


def _extra_network_first(data):
    pod = _workloads(data)[0]
    entries = [{"interfaceName": "eth0", "network": "default"}, {"interfaceName": "eth1", "network": "storage-net"}]
    entries += [{"interfaceName": "eth%d" % (i + 2), "network": "a3mega-gpu-%d" % i} for i in range(8)]
    pod["metadata"]["annotations"]["networking.gke.io/interfaces"] = json.dumps(entries)


def _seven_gpu_nics(data):
    pod = _workloads(data)[1]
    entries = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": "eth%d" % (i + 1), "network": "a3mega-gpu-%d" % i} for i in range(7)]
    pod["metadata"]["annotations"]["networking.gke.io/interfaces"] = json.dumps(entries)


def _no_aperture(data):
    pod = _workloads(data)[0]
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "aperture-devices"]


def _no_fastrak_env(data):
    main = _main(_workloads(data)[1])
    main["env"] = [e for e in main["env"] if not e["name"].startswith("NCCL_FASTRAK_")]


def _fast_socket(data):
    _gpu_nodes(data)[0]["metadata"]["labels"]["cloud.google.com/gke-nccl-fastsocket"] = "true"


def _mtu(data):
    data["gke"]["nics"][3]["network"]["mtu"] = 1460


def _no_firewall(data):
    data["gke"]["nics"][5]["firewall"] = None


BREAKS = [
    ("gke.gpudirect.version_gate", _old_version, "below the minimum 1.32.2-gke.1489001 for tcpxo"),
    ("gke.gpudirect.version_gate", _old_minor, "older than 1.28"),
    ("gke.dataplane_v2", _legacy_datapath, "LEGACY_DATAPATH"),
    ("gke.multi_networking", _no_multinet, "multi-networking is off"),
    ("gke.standard_cluster", _autopilot, "Autopilot"),
    ("gke.cos_image", _ubuntu, "pool a3mega runs UBUNTU_CONTAINERD"),
    ("gpudirect.installer", _no_installer, "kube-system/nccl-tcpxo-installer not found"),
    ("gpudirect.installer", _old_installer, "needs gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"),
    ("gpudirect.installer", _installer_not_ready, "1 of 2 pods ready"),
    ("gpudirect.nri_injector", _no_injector, "kube-system/device-injector not found"),
    ("gpudirect.allocatable_gpus", _seven_gpus, "gke-a3mega-0 advertises nvidia.com/gpu=7, its machine has 8"),
    ("gpudirect.daemon_pair", _old_daemon, "tcpgpudmarxd-dev:v1.0.12"),
    ("gpudirect.no_gpu_sharing", _time_sharing, "gke-gpu-sharing-strategy=time-sharing"),
    ("gpudirect.no_gpu_sharing", _mig_on_gpudirect, "gke-gpu-partition-size=1g.10gb"),
    ("gpudirect.pod_whole_node", _four_gpus, "requests 4 GPU(s) on node gke-a3mega-0, which has 8"),
    ("gpudirect.pod_annotations", _no_interfaces, "annotation networking.gke.io/interfaces"),
    ("gpudirect.pod_annotations", _no_device_annotation, "annotation devices.gke.io/container.tcpxo-daemon"),
    ("gpudirect.pod_interfaces", _extra_network_first, "eth1 for GPU NIC network a3mega-gpu-0 (has storage-net)"),
    ("gpudirect.pod_interfaces", _seven_gpu_nics, "lacks GPU NIC interface eth8"),
    ("gpudirect.pod_volumes", _no_aperture, "volume aperture-devices"),
    ("gpudirect.pod_nccl_env", _no_fastrak_env, "NCCL_FASTRAK_CTRL_DEV"),
    ("gpudirect.fast_socket", _fast_socket, "gke-a3mega-0 has NCCL Fast Socket enabled"),
    ("gke.gpu_vpc", _mtu, "has MTU 1460, GPUDirect needs 8244"),
    ("gke.gpu_vpc", _no_firewall, "GPU NIC 5: firewall rule missing"),
]


@pytest.mark.parametrize("check_id, mutate, text", BREAKS, ids=["%s-%s" % (b[0], b[1].__name__) for b in BREAKS])
def test_broken_one_way_fails_that_check_only(only_failure, check_id, mutate, text):
    only_failure("gke-tcpxo", mutate, check_id, text)


def test_every_gpudirect_check_has_a_break():
    ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.gke"))
    assert ids == set(b[0] for b in BREAKS)


def test_without_gke_reads_the_cluster_checks_are_other_not_passed(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    del data["gke"]
    result = suite.validate(build_snapshot(data))
    by_id = dict((r["id"], r) for r in result["results"])
    for check_id in ("gke.dataplane_v2", "gke.multi_networking", "gke.standard_cluster", "gke.cos_image", "gke.gpu_vpc"):
        assert by_id[check_id]["status"] == "other", by_id[check_id]
        assert "cannot read gke." in by_id[check_id]["message"]
    assert result["exit_status"] == 9


def test_without_gpudirect_nodes_the_checks_skip_with_the_reason(load_raw, build_snapshot):
    result = suite.validate(build_snapshot(load_raw("gpu-operator-mig")))
    by_id = dict((r["id"], r) for r in result["results"])
    assert by_id["gpudirect.installer"]["status"] == "skipped"
    assert "no node of a GPUDirect machine type" in by_id["gpudirect.installer"]["message"]


def test_a_node_without_its_kubelet_version_is_other(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    del data["kubernetes"]["nodes"][0]["status"]["nodeInfo"]
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gke.gpudirect.version_gate"]["status"] == "other"
    assert "kubeletVersion" in by_id["gke.gpudirect.version_gate"]["message"]


def test_a_mirror_registry_keeps_the_installer_passing(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    _ds(data, "nccl-tcpxo-installer")["spec"]["template"]["spec"]["containers"][0]["image"] = \
        "registry.example.com/mirror/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15@sha256:abc"
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gpudirect.installer"]["status"] == "passed"


def test_a_container_that_sources_the_env_script_needs_no_env(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    main = _main(_workloads(data)[0])
    main["env"] = []
    main["command"] = ["bash", "-c", "source /usr/local/nvidia/lib64/nccl-env-profile.sh && exec all_gather_perf"]
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gpudirect.pod_nccl_env"]["status"] == "passed"


def test_a_mig_manager_config_on_a_gpudirect_node_fails_the_sharing_check(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    _gpu_nodes(data)[1]["metadata"]["labels"]["nvidia.com/mig.config"] = "all-1g.10gb"
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gpudirect.no_gpu_sharing"]["status"] == "failed"
    assert "nvidia.com/mig.config=all-1g.10gb" in by_id["gpudirect.no_gpu_sharing"]["message"]
    assert "GPUDirect-TCPXO needs whole nodes" in by_id["gpudirect.no_gpu_sharing"]["message"]


# ----------------------------------------------------------------------------- cases the mutation check showed missing

def _by_id(build_snapshot, data):
    return dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])


def test_daemonset_counts_at_their_boundaries(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    installer = _ds(data, "nccl-tcpxo-installer")
    installer["status"] = {"desiredNumberScheduled": 2, "numberReady": 2}          # exactly the two nodes, all ready
    assert _by_id(build_snapshot, data)["gpudirect.installer"]["status"] == "passed"
    installer["status"] = {"desiredNumberScheduled": 3, "numberReady": 3}          # more than the nodes is not a problem
    assert _by_id(build_snapshot, data)["gpudirect.installer"]["status"] == "passed"
    installer["status"] = {"numberReady": 0}                                       # no counts yet: nothing scheduled
    result = _by_id(build_snapshot, data)["gpudirect.installer"]
    assert result["message"] == "DaemonSet nccl-tcpxo-installer schedules 0 pod(s) for 2 node(s)"
    installer["status"] = {"desiredNumberScheduled": 2}                            # scheduled, none ready
    assert _by_id(build_snapshot, data)["gpudirect.installer"]["message"] == "DaemonSet nccl-tcpxo-installer: 0 of 2 pods ready"


def test_the_evidence_names_pods_by_namespace_and_what_each_lacks(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    results = _by_id(build_snapshot, data)
    assert results["gpudirect.pod_whole_node"]["evidence"] == ["pod default/nccl-test-0: nvidia.com/gpu=8",
                                                               "pod default/nccl-test-1: nvidia.com/gpu=8"]
    assert results["gpudirect.pod_volumes"]["evidence"] == ["pod default/nccl-test-0 (tcpxo): complete",
                                                            "pod default/nccl-test-1 (tcpxo): complete"]
    _k8s(data)["nodes"].reverse()
    assert [e.split(":")[0] for e in _by_id(build_snapshot, data)["gke.gpudirect.version_gate"]["evidence"]] == [
        "node gke-a3mega-0", "node gke-a3mega-1"]


def test_a_pod_without_a_namespace_is_named_in_default_and_finished_pods_are_not_judged(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    pod = _workloads(data)[1]
    del pod["metadata"]["namespace"]
    _main(pod)["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    result = _by_id(build_snapshot, data)["gpudirect.pod_whole_node"]
    assert result["message"] == "pod default/nccl-test-1 requests 4 GPU(s) on node gke-a3mega-1, which has 8"
    pod["status"]["phase"] = "Succeeded"
    assert _by_id(build_snapshot, data)["gpudirect.pod_whole_node"]["status"] == "passed"


def test_an_unknown_autopilot_setting_is_other_not_passed(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    del data["gke"]["cluster"]["autopilot"]
    assert _by_id(build_snapshot, data)["gke.standard_cluster"]["status"] == "other"
    data["gke"]["cluster"]["autopilot"] = None
    result = _by_id(build_snapshot, data)["gke.standard_cluster"]
    assert result["status"] == "other" and "gke.cluster.autopilot" in result["message"]


def test_a_pod_asking_for_no_whole_gpu_on_a_gpudirect_node_requests_zero(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    _main(_workloads(data)[0])["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    result = _by_id(build_snapshot, data)["gpudirect.pod_whole_node"]
    assert result["message"] == "pod default/nccl-test-0 requests 0 GPU(s) on node gke-a3mega-0, which has 8"


def test_an_unreadable_interfaces_annotation_fails_the_interfaces_check(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    _workloads(data)[0]["metadata"]["annotations"]["networking.gke.io/interfaces"] = "[{not json"
    result = _by_id(build_snapshot, data)["gpudirect.pod_interfaces"]
    assert result["status"] == "failed"
    assert "pod default/nccl-test-0 on node gke-a3mega-0 lacks a readable networking.gke.io/interfaces annotation" in result["message"]


def test_no_gpu_nic_network_at_all_fails_the_vpc_check(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    data["gke"]["nics"] = []
    result = _by_id(build_snapshot, data)["gke.gpu_vpc"]
    assert (result["status"], result["message"]) == ("failed", "no GPU NIC network was found for the GPUDirect nodes")
