# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GKE GPUDirect checks: the healthy A3 Mega cluster broken one way at a time fails exactly that check."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import gke_gpudirect as gd
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate import suite
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._validate.registry import fix_text


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


def _installer_on_one_node(data):
    # every scheduled pod is ready, but the DaemonSet's node selector misses one of the two nodes
    _ds(data, "nccl-tcpxo-installer")["status"].update(desiredNumberScheduled=1, currentNumberScheduled=1, numberReady=1)


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


def _jumbo_mtu(data):
    # larger is wrong too: the GPU NIC VPCs of TCPX/TCPXO are created at the one MTU the guide gives
    data["gke"]["nics"][2]["network"]["mtu"] = 8896


def _no_firewall(data):
    data["gke"]["nics"][5]["firewall"] = None


def _empty_device_annotation(data):
    # present but empty: the NRI injector reads the devices from its value
    _workloads(data)[0]["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"] = ""


def _installer_of_another_repository(data):
    # the right image name and tag under another repository path (not a mirror: a mirror keeps the path)
    _ds(data, "nccl-tcpxo-installer")["spec"]["template"]["spec"]["containers"][0]["image"] = \
        "us-docker.pkg.dev/gce-ai-infra/my-gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"


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
    ("gpudirect.installer", _installer_on_one_node, "DaemonSet nccl-tcpxo-installer schedules 1 pod(s) for 2 node(s)"),
    ("gpudirect.nri_injector", _no_injector, "kube-system/device-injector not found"),
    ("gpudirect.allocatable_gpus", _seven_gpus, "gke-a3mega-0 advertises nvidia.com/gpu=7, its machine has 8"),
    ("gpudirect.daemon_pair", _old_daemon, "tcpgpudmarxd-dev:v1.0.12"),
    ("gpudirect.no_gpu_sharing", _time_sharing, "gke-gpu-sharing-strategy=time-sharing"),
    ("gpudirect.no_gpu_sharing", _mig_on_gpudirect, "gke-gpu-partition-size=1g.10gb"),
    ("gpudirect.pod_whole_node", _four_gpus, "requests 4 GPU(s) on node gke-a3mega-0, which has 8"),
    ("gpudirect.pod_annotations", _no_interfaces, "annotation networking.gke.io/interfaces"),
    ("gpudirect.pod_annotations", _no_device_annotation, "annotation devices.gke.io/container.tcpxo-daemon"),
    ("gpudirect.pod_annotations", _empty_device_annotation, "lacks annotation devices.gke.io/container.tcpxo-daemon"),
    ("gpudirect.installer", _installer_of_another_repository, "needs gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"),
    ("gpudirect.pod_interfaces", _extra_network_first, "eth1 for GPU NIC network a3mega-gpu-0 (has storage-net)"),
    ("gpudirect.pod_interfaces", _seven_gpu_nics, "lacks GPU NIC interface eth8"),
    ("gpudirect.pod_volumes", _no_aperture, "volume aperture-devices"),
    ("gpudirect.pod_nccl_env", _no_fastrak_env, "NCCL_FASTRAK_CTRL_DEV"),
    ("gpudirect.fast_socket", _fast_socket, "gke-a3mega-0 has NCCL Fast Socket enabled"),
    ("gke.gpu_vpc", _mtu, "has MTU 1460, GPUDirect needs 8244"),
    ("gke.gpu_vpc", _jumbo_mtu, "has MTU 8896, GPUDirect needs 8244"),
    ("gke.gpu_vpc", _no_firewall, "GPU NIC 5: firewall rule missing"),
]


@pytest.mark.parametrize("check_id, mutate, text", BREAKS, ids=["%s-%s" % (b[0], b[1].__name__) for b in BREAKS])
def test_broken_one_way_fails_that_check_only(only_failure, check_id, mutate, text):
    only_failure("gke-tcpxo", mutate, check_id, text)


def _cluster_breaks(bases):
    """The checks the broken clusters of fixtures/clusters.yml on ``bases`` fail."""
    from ansible_collections.gpu_ops.cluster.tests.unit.plugins.plugin_utils._validate.test_suite import CLUSTERS
    return set(check_id for c in CLUSTERS if c["base"] in bases for check_id in c.get("fails") or {})


def test_every_gpudirect_check_has_a_break():
    ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.gke"))
    assert ids == set(b[0] for b in BREAKS) | set(b[1] for b in RDMA_BREAKS) | (_cluster_breaks(("gke-tcpxo", A3U, A4X)) & ids)


def test_without_gke_reads_the_cluster_checks_are_other_not_passed(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    del data["gke"]
    result = suite.validate(build_snapshot(data))
    by_id = dict((r["id"], r) for r in result["results"])
    for check_id in ("gke.dataplane_v2", "gke.multi_networking", "gke.standard_cluster", "gke.gpu_vpc"):
        assert by_id[check_id]["status"] == "other", by_id[check_id]
        assert "cannot read gke." in by_id[check_id]["message"]
        assert "(the GKE API was not read: validate_gke is not set)" in by_id[check_id]["message"]
        assert by_id[check_id]["fix"].startswith("set validate_gke (cluster and location;")
        assert by_id[check_id]["fix"].endswith("or leave %s out of validate_checks (list the checks to run)" % check_id)
    # the node image is what the nodes show of it (their osImage here)
    assert by_id["gke.cos_image"]["status"] == "passed"
    assert by_id["gke.cos_image"]["evidence"] == ["gke.node_pools: not read; judged from the nodes",
                                                  "node gke-a3mega-0: osImage Container-Optimized OS from Google",
                                                  "node gke-a3mega-1: osImage Container-Optimized OS from Google"]
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


# --------------------------------------------------------------------------------------------
# GPUDirect-RDMA: the healthy A3 Ultra (rdma) and A4X (rdma-a4x) clusters broken one way at a time
# --------------------------------------------------------------------------------------------

def _rdma_nodes(data):
    return [n for n in _k8s(data)["nodes"] if n["metadata"]["labels"].get("cloud.google.com/gke-accelerator")]


def _env(pod, name=None, value=None, drop=None):
    main = _main(pod)
    main["env"] = [e for e in main["env"] if e["name"] != drop]
    if name:
        main["env"].append({"name": name, "value": value})


def _annotation(pod, entries):
    pod["metadata"]["annotations"]["networking.gke.io/interfaces"] = json.dumps(entries)


def _named(documents, name):
    return [d for d in documents if d["metadata"]["name"] == name][0]


def _rdma_legacy_datapath(data):
    data["gke"]["cluster"]["datapath_provider"] = "LEGACY_DATAPATH"


def _rdma_no_multinet(data):
    data["gke"]["cluster"]["multi_networking"] = False


def _rdma_autopilot(data):
    data["gke"]["cluster"]["autopilot"] = True


def _rdma_ubuntu(data):
    data["gke"]["node_pools"][0]["image_type"] = "UBUNTU_CONTAINERD"


def _no_gib_installer(data):
    _k8s(data)["daemonsets"] = [d for d in _k8s(data)["daemonsets"] if d["metadata"]["name"] != "nccl-rdma-installer"]


def _amd64_installer_on_a4x(data):
    _ds(data, "nccl-rdma-installer")["spec"]["template"]["spec"]["containers"][0]["image"] = \
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"


def _gib_installer_not_ready(data):
    _ds(data, "nccl-rdma-installer")["status"]["numberReady"] = 1


def _no_param_set_rdma7(data):
    _k8s(data)["network_param_sets"] = [d for d in _k8s(data)["network_param_sets"] if d["metadata"]["name"] != "rdma-7"]


def _rdma2_netdevice(data):
    _named(_k8s(data)["network_param_sets"], "rdma-2")["spec"]["deviceMode"] = "NetDevice"


def _gvnic_rdma_mode(data):
    _named(_k8s(data)["network_param_sets"], "gvnic-1")["spec"]["deviceMode"] = "RDMA"


def _no_network_rdma3(data):
    _k8s(data)["networks"] = [d for d in _k8s(data)["networks"] if d["metadata"]["name"] != "rdma-3"]


def _network_wrong_ref(data):
    _named(_k8s(data)["networks"], "rdma-1")["spec"]["parametersRef"]["name"] = "rdma-0"


def _three_gpus(data):
    _rdma_nodes(data)[0]["status"]["allocatable"]["nvidia.com/gpu"] = "3"


def _rdma_time_sharing(data):
    _rdma_nodes(data)[0]["metadata"]["labels"]["cloud.google.com/gke-gpu-sharing-strategy"] = "time-sharing"


def _rdma_mps(data):
    _rdma_nodes(data)[1]["metadata"]["labels"]["cloud.google.com/gke-gpu-sharing-strategy"] = "mps"


def _rdma_mig(data):
    _rdma_nodes(data)[1]["metadata"]["labels"]["cloud.google.com/gke-gpu-partition-size"] = "1g.47gb"


def _two_gpus(data):
    _main(_workloads(data)[0])["resources"] = {"limits": {"nvidia.com/gpu": "2"}}


def _rdma_no_interfaces(data):
    del _workloads(data)[1]["metadata"]["annotations"]["networking.gke.io/interfaces"]


def _no_eth0(data):
    _annotation(_workloads(data)[0], [{"interfaceName": "eth%d" % (i + 2), "network": "rdma-%d" % i} for i in range(8)])


def _eth0_on_gvnic(data):
    # eth0 listed, but on the gVNIC network rather than the default one
    _annotation(_workloads(data)[0], [{"interfaceName": "eth0", "network": "gvnic-1"}] + [
        {"interfaceName": "eth%d" % (i + 2), "network": "rdma-%d" % i} for i in range(8)])


def _rxdm_native_sidecar(data):
    # the TCPXO daemon as a native sidecar (an init container that keeps running): still an RxDM daemon
    _workloads(data)[0]["spec"].setdefault("initContainers", []).append(
        {"name": "tcpxo-daemon", "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21", "restartPolicy": "Always"})


def _three_rdma_nics(data):
    _annotation(_workloads(data)[1], [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": "eth%d" % (i + 2), "network": "rdma-%d" % i} for i in range(3)])


def _gvnic_on_eth2(data):
    entries = [{"interfaceName": "eth0", "network": "default"}, {"interfaceName": "eth2", "network": "gvnic-1"}]
    entries += [{"interfaceName": "eth%d" % (i + 2), "network": "rdma-%d" % i} for i in range(1, 8)]
    _annotation(_workloads(data)[0], entries)


def _no_gib_volume(data):
    pod = _workloads(data)[0]
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "gib"]


def _no_gib_mount(data):
    main = _main(_workloads(data)[0])
    main["volumeMounts"] = [m for m in main["volumeMounts"] if m["name"] != "gib"]


def _no_nccl_net(data):
    _env(_workloads(data)[1], drop="NCCL_NET")


def _a4x_no_nccl_net(data):
    _env(_workloads(data)[0], drop="NCCL_NET")


def _nccl_net_socket(data):
    _env(_workloads(data)[0], "NCCL_NET", "Socket", drop="NCCL_NET")


def _tcpxo_env(data):
    _env(_workloads(data)[1], "NCCL_FASTRAK_IFNAME", "eth1,eth2")


def _fast_socket_env(data):
    _env(_workloads(data)[0], "NCCL_FASTSOCKET_NUM_FLOWS", "8")


def _rxdm_sidecar(data):
    _workloads(data)[1]["spec"]["containers"].insert(0, {
        "name": "tcpxo-daemon", "image": "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"})


def _nri_annotation(data):
    _workloads(data)[0]["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"] = "- path: /dev/nvidia0\n"


def _rdma_fast_socket(data):
    _rdma_nodes(data)[1]["metadata"]["labels"]["cloud.google.com/gke-nccl-fastsocket"] = "true"


def _pd_balanced(data):
    data["gke"]["node_pools"][0]["disk_type"] = "pd-balanced"


def _roce_mtu(data):
    data["gke"]["nics"][3]["network"]["mtu"] = 8244


def _gvnic_no_firewall(data):
    data["gke"]["nics"][0]["firewall"] = None


def _rdma_no_subnet(data):
    data["gke"]["nics"][2]["subnetwork"] = None


A3U, A4X = "gke-a3ultra", "gke-a4x"
RDMA_BREAKS = [
    (A3U, "gke.dataplane_v2", _rdma_legacy_datapath, "LEGACY_DATAPATH"),
    (A4X, "gke.multi_networking", _rdma_no_multinet, "multi-networking is off"),
    (A3U, "gke.standard_cluster", _rdma_autopilot, "Autopilot"),
    (A4X, "gke.cos_image", _rdma_ubuntu, "pool a4x runs UBUNTU_CONTAINERD"),
    (A3U, "gpudirect.installer", _no_gib_installer, "kube-system/nccl-rdma-installer not found"),
    (A4X, "gpudirect.installer", _amd64_installer_on_a4x,
     "rdma-a4x on GKE 1.34.1-gke.1829001 needs gpudirect-gib/nccl-plugin-gib-arm64:v1.1.2"),
    (A4X, "gpudirect.installer", _gib_installer_not_ready, "1 of 2 pods ready"),
    (A3U, "gpudirect.rdma_networks", _no_param_set_rdma7, "GKENetworkParamSet rdma-7 not found (rdma needs it, deviceMode RDMA)"),
    (A4X, "gpudirect.rdma_networks", _rdma2_netdevice, "GKENetworkParamSet rdma-2 has deviceMode NetDevice; rdma-a4x needs RDMA"),
    (A3U, "gpudirect.rdma_networks", _gvnic_rdma_mode, "GKENetworkParamSet gvnic-1 has deviceMode RDMA; rdma needs NetDevice"),
    (A4X, "gpudirect.rdma_networks", _no_network_rdma3, "Network rdma-3 not found"),
    (A3U, "gpudirect.rdma_networks", _network_wrong_ref, "Network rdma-1 does not refer to GKENetworkParamSet rdma-1"),
    (A4X, "gpudirect.allocatable_gpus", _three_gpus, "gke-a4x-0 advertises nvidia.com/gpu=3, its machine has 4"),
    (A3U, "gpudirect.no_gpu_sharing", _rdma_time_sharing, "GPUDirect-RDMA needs whole nodes"),
    (A3U, "gpudirect.no_gpu_sharing", _rdma_mps, "gke-gpu-sharing-strategy=mps"),
    (A4X, "gpudirect.no_gpu_sharing", _rdma_mig, "gke-gpu-partition-size=1g.47gb"),
    (A4X, "gpudirect.pod_whole_node", _two_gpus, "requests 2 GPU(s) on node gke-a4x-0, which has 4"),
    (A3U, "gpudirect.pod_annotations", _rdma_no_interfaces, "annotation networking.gke.io/interfaces"),
    (A3U, "gpudirect.pod_interfaces", _no_eth0, "eth0 on network default (has None)"),
    (A3U, "gpudirect.pod_interfaces", _eth0_on_gvnic, "eth0 on network default (has gvnic-1)"),
    (A4X, "gpudirect.pod_interfaces", _three_rdma_nics, "lacks GPU NIC interface eth5"),
    (A3U, "gpudirect.pod_interfaces", _gvnic_on_eth2, "eth2 for GPU NIC network rdma-0 (has gvnic-1)"),
    (A3U, "gpudirect.pod_volumes", _no_gib_volume, "volume gib"),
    (A4X, "gpudirect.pod_volumes", _no_gib_mount, "container nccl-test mount gib at /usr/local/gib"),
    (A3U, "gpudirect.pod_nccl_env", _no_nccl_net, "NCCL_NET"),
    (A4X, "gpudirect.pod_nccl_env", _a4x_no_nccl_net, "container nccl-test: NCCL_NET"),
    (A3U, "gpudirect.rdma_conflicts", _nccl_net_socket, "NCCL_NET: Socket selects another network plugin"),
    (A3U, "gpudirect.rdma_conflicts", _tcpxo_env, "NCCL_FASTRAK_IFNAME: a GPUDirect-TCPXO setting"),
    (A4X, "gpudirect.rdma_conflicts", _fast_socket_env, "NCCL_FASTSOCKET_NUM_FLOWS: NCCL Fast Socket does not work"),
    (A4X, "gpudirect.rdma_conflicts", _rxdm_sidecar, "container tcpxo-daemon: the TCPX/TCPXO RxDM daemon"),
    (A3U, "gpudirect.rdma_conflicts", _rxdm_native_sidecar, "container tcpxo-daemon: the TCPX/TCPXO RxDM daemon"),
    (A3U, "gpudirect.rdma_conflicts", _nri_annotation, "annotation devices.gke.io/container.tcpxo-daemon"),
    (A4X, "gpudirect.fast_socket", _rdma_fast_socket, "gke-a4x-1 has NCCL Fast Socket enabled"),
    (A4X, "gke.gpudirect.boot_disk", _pd_balanced, "pool a4x (a4x-highgpu-4g) boots from pd-balanced"),
    (A3U, "gke.gpu_vpc", _roce_mtu, "network a3u-gpunic-rdma has MTU 8244, GPUDirect needs 8896"),
    (A4X, "gke.gpu_vpc", _gvnic_no_firewall, "GPU NIC 1: firewall rule missing"),
    (A4X, "gke.gpu_vpc", _rdma_no_subnet, "GPU NIC 3: subnetwork missing"),
]


@pytest.mark.parametrize("name, check_id, mutate, text", RDMA_BREAKS,
                         ids=["%s-%s-%s" % (b[0], b[1], b[2].__name__) for b in RDMA_BREAKS])
def test_rdma_broken_one_way_fails_that_check_only(only_failure, name, check_id, mutate, text):
    failed = only_failure(name, mutate, check_id, text)
    # a missing or not ready installer is repaired by another step than a wrong release: the check's other fixes
    other_fix = {_no_gib_installer: "missing", _gib_installer_not_ready: "not_ready"}.get(mutate)
    check = suite.CHECKS_BY_ID[check_id]
    assert failed["fix"] == fix_text(check.fixes[other_fix] if other_fix else check.fix)


def test_every_rdma_relevant_check_has_an_rdma_break():
    gke_ids = set(c.id for c in suite.CHECKS_BY_ID.values() if c.function.__module__.endswith("_validate.gke"))
    # the RxDM daemon checks skip on RDMA (no daemon, no NRI injector): the healthy tests show it; the version gate's
    # RDMA breaks need a DRANET pool or a catalog floor: test_dranet_below_its_floor_fails_the_version_gate_only and
    # test_an_rdma_profile_floor_in_the_catalog_is_enforced; gpudirect.gpu_nic_networks judges TCPX/TCPXO networks
    # (rdma_networks those of RDMA)
    breaks = set(b[1] for b in RDMA_BREAKS) | _cluster_breaks((A3U, A4X))
    assert gke_ids - breaks == {"gpudirect.nri_injector", "gpudirect.daemon_pair", "gke.gpudirect.version_gate", "gpudirect.gpu_nic_networks"}


@pytest.mark.parametrize("name", [A3U, A4X])
def test_a_healthy_rdma_cluster_needs_no_injector_and_no_rxdm_daemon(load_raw, build_snapshot, name):
    result = suite.validate(build_snapshot(load_raw(name)))
    by_id = dict((r["id"], r) for r in result["results"])
    assert result["summary"]["failed"] == 0 and result["summary"]["other"] == 0
    for check_id in ("gpudirect.nri_injector", "gpudirect.daemon_pair"):
        assert by_id[check_id]["status"] == "skipped" and "no TCPX or TCPXO node" in by_id[check_id]["message"]
    for check_id in ("gpudirect.installer", "gpudirect.rdma_networks", "gpudirect.rdma_conflicts", "gke.gpu_vpc",
                     "gpudirect.pod_interfaces", "gpudirect.pod_volumes", "gpudirect.pod_nccl_env"):
        assert by_id[check_id]["status"] == "passed", by_id[check_id]


def test_an_rdma_profile_floor_in_the_catalog_is_enforced(only_failure, monkeypatch):
    # the catalog has no verified RDMA floor yet; the check reads whatever the profile's table says
    monkeypatch.setitem(gd.PROFILES["rdma"], "min_versions", {"1.33": "1.33.5-gke.1162000"})

    def older_patch(data):
        _rdma_nodes(data)[0]["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.5-gke.1000000"
    only_failure(A3U, older_patch, "gke.gpudirect.version_gate", "below the minimum 1.33.5-gke.1162000 for rdma")


def _dranet_cluster(load_raw):
    """The healthy A4X cluster as a DRANET pool (accelerator_network_profile auto): GKE's networks, DRA claims."""
    data = load_raw(A4X)
    for node in _rdma_nodes(data):
        node["metadata"]["labels"]["cloud.google.com/gke-networking-dra-driver"] = "true"
    _k8s(data)["network_param_sets"], _k8s(data)["networks"] = [], []
    data["gke"]["node_pools"][0]["gpudirect"]["gpu_nics"] = 0
    for pod in _workloads(data):
        del pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
    return data


def test_dranet_below_its_floor_fails_the_version_gate_only(load_raw, build_snapshot):
    data = _dranet_cluster(load_raw)
    healthy = suite.validate(build_snapshot(data))
    for node in _rdma_nodes(data):
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.5-gke.1162000"
    result = suite.validate(build_snapshot(data))
    before, after = [dict((r["id"], r) for r in x["results"]) for x in (healthy, result)]
    gate = after["gke.gpudirect.version_gate"]
    assert before["gke.gpudirect.version_gate"]["status"] == "passed" and gate["status"] == "failed"
    assert "GKE 1.33.5-gke.1162000 is below 1.34.1-gke.1829001, the floor of accelerator_network_profile auto" in gate["message"]
    assert gate["cause"] == suite.CHECKS_BY_ID["gke.gpudirect.version_gate"].cause
    assert gate["fix"] == "role gpu_ops.cluster.gke_gpu_cluster, variable gke_gpu_cluster_version: " \
                          "upgrade the control plane and the GPUDirect node pool to a patch at or above the minimum"
    assert dict((k, r["status"]) for k, r in before.items() if k != gate["id"]) == \
        dict((k, r["status"]) for k, r in after.items() if k != gate["id"])


def test_dranet_nodes_need_no_network_objects_nor_annotations(load_raw, build_snapshot):
    data = _dranet_cluster(load_raw)
    result = suite.validate(build_snapshot(data))
    by_id = dict((r["id"], r) for r in result["results"])
    assert result["summary"]["failed"] == 0 and result["summary"]["other"] == 0, [r for r in result["results"] if r["status"] == "failed"]
    for check_id in ("gpudirect.rdma_networks", "gpudirect.pod_annotations", "gpudirect.pod_interfaces", "gke.gpudirect.pool_networks"):
        assert by_id[check_id]["status"] == "skipped" and "DRANET" in by_id[check_id]["message"]


def test_without_the_network_objects_read_the_rdma_check_is_other(load_raw, build_snapshot):
    data = load_raw(A3U)
    _k8s(data)["networks"] = {"failed": True, "msg": "the server could not find the requested resource"}
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(data))["results"])
    assert by_id["gpudirect.rdma_networks"]["status"] == "other"
    assert "could not find the requested resource" in by_id["gpudirect.rdma_networks"]["message"]


def test_a_tcpxo_cluster_skips_the_rdma_checks(load_raw, build_snapshot):
    by_id = dict((r["id"], r) for r in suite.validate(build_snapshot(load_raw("gke-tcpxo")))["results"])
    for check_id in ("gpudirect.rdma_networks", "gpudirect.rdma_conflicts"):
        assert by_id[check_id]["status"] == "skipped" and "no GPUDirect-RDMA node" in by_id[check_id]["message"]


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


def test_a_missing_installer_is_installed_not_upgraded(only_failure):
    failed = only_failure("gke-tcpxo", _no_installer, "gpudirect.installer", "kube-system/nccl-tcpxo-installer not found")
    assert failed["fix"].startswith("install it: playbooks/gke_gpudirect.yml (gke_gpudirect_install true)")
    assert "gke_version" not in failed["fix"]


def test_a_not_ready_daemonset_names_only_its_own_pods(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    _ds(data, "nccl-tcpxo-installer")["status"]["numberReady"] = 1
    crashing = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{"name": "c", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
    pods = dict((p["metadata"]["name"], p) for p in _k8s(data)["pods"])
    pods["nccl-tcpxo-installer-fghij"]["status"] = crashing
    # a pod of another DaemonSet in the same namespace, and one of another namespace with the installer's owner name
    pods["nvidia-gpu-device-plugin-large-cos-k2x9p"]["status"] = crashing
    pods["nccl-test-0"]["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "nccl-tcpxo-installer"}]
    pods["nccl-test-0"]["status"] = crashing
    failed = _by_id(build_snapshot, data)["gpudirect.installer"]
    assert failed["message"] == "DaemonSet nccl-tcpxo-installer not ready on node gke-a3mega-1: pod nccl-tcpxo-installer-fghij, c CrashLoopBackOff"
    pods["nccl-tcpxo-installer-fghij"]["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "nccl-tcpxo-installer"}]
    assert _by_id(build_snapshot, data)["gpudirect.installer"]["message"] == "DaemonSet nccl-tcpxo-installer: 1 of 2 pods ready"


@pytest.mark.parametrize("name, label", [
    ("gke-tcpxo", "cloud.google.com/gke-nccl-fastsocket"),          # Fast Socket set to false is Fast Socket off
    (A4X, "cloud.google.com/gke-networking-dra-driver"),            # a DRA driver label that is not true is no DRANET
])
def test_a_feature_label_present_with_false_changes_no_verdict(load_raw, build_snapshot, name, label):
    data = load_raw(name)
    healthy = dict((k, r["status"]) for k, r in _by_id(build_snapshot, data).items())
    for node in _k8s(data)["nodes"]:
        node["metadata"]["labels"][label] = "false"
    assert dict((k, r["status"]) for k, r in _by_id(build_snapshot, data).items()) == healthy


@pytest.mark.parametrize("name", ["gke-tcpxo", A3U])
def test_a_pool_record_without_its_node_network_count_is_other(load_raw, build_snapshot, name):
    data = load_raw(name)
    del data["gke"]["node_pools"][0]["gpudirect"]["gpu_nics"]
    result = _by_id(build_snapshot, data)["gke.gpudirect.pool_networks"]
    assert result["status"] == "other", result
    assert "gpudirect.gpu_nics (the pool record has no count of its additional node networks" in result["message"]


@pytest.mark.parametrize("name", ["gke-tcpxo", A3U])
def test_only_the_nccl_variables_of_the_environment_are_required(load_raw, build_snapshot, name):
    # LD_LIBRARY_PATH comes from the image as often as from the pod: its absence is no missing NCCL setting
    data = load_raw(name)
    healthy = dict((k, r["status"]) for k, r in _by_id(build_snapshot, data).items())
    for pod in _workloads(data):
        _env(pod, drop="LD_LIBRARY_PATH")
    assert dict((k, r["status"]) for k, r in _by_id(build_snapshot, data).items()) == healthy


def test_a_pool_record_without_its_boot_disk_type_is_other(load_raw, build_snapshot):
    data = load_raw(A4X)
    del data["gke"]["node_pools"][0]["disk_type"]
    result = _by_id(build_snapshot, data)["gke.gpudirect.boot_disk"]
    assert result["status"] == "other" and "cannot read gke.node_pools[a4x].disk_type" in result["message"], result


def test_the_installer_image_given_by_its_path_alone_is_the_catalog_image(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    _ds(data, "nccl-tcpxo-installer")["spec"]["template"]["spec"]["containers"][0]["image"] = \
        "gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
    assert _by_id(build_snapshot, data)["gpudirect.installer"]["status"] == "passed"


def test_the_rdma_network_evidence_shows_each_pair_with_its_device_mode(load_raw, build_snapshot):
    evidence = _by_id(build_snapshot, load_raw(A3U))["gpudirect.rdma_networks"]["evidence"]
    assert evidence[0] == "rdma: GKENetworkParamSet gvnic-1 deviceMode NetDevice, Network present", evidence
    assert evidence[1] == "rdma: GKENetworkParamSet rdma-0 deviceMode RDMA, Network present", evidence


def test_a_pool_without_gpus_is_not_held_to_the_gpudirect_image(load_raw, build_snapshot):
    data = load_raw("gke-tcpxo")
    [p for p in data["gke"]["node_pools"] if p["name"] == "default-pool"][0]["image_type"] = "UBUNTU_CONTAINERD"
    result = _by_id(build_snapshot, data)["gke.cos_image"]
    assert result["status"] == "passed" and result["evidence"] == ["pool a3mega: COS_CONTAINERD"], result


@pytest.mark.parametrize("key, text", [("network", "GPU NIC 4: network missing"), ("subnetwork", "GPU NIC 4: subnetwork missing")])
def test_a_gpu_nic_record_left_empty_fails_the_vpc_check(load_raw, build_snapshot, key, text):
    data = load_raw("gke-tcpxo")
    data["gke"]["nics"][4][key] = {}
    result = _by_id(build_snapshot, data)["gke.gpu_vpc"]
    assert result["status"] == "failed" and text in result["message"], result


def test_the_sharing_evidence_says_when_a_node_shows_no_sharing(load_raw, build_snapshot):
    evidence = _by_id(build_snapshot, load_raw("gke-tcpxo"))["gpudirect.no_gpu_sharing"]["evidence"]
    assert evidence == ["node gke-a3mega-0: no sharing label", "node gke-a3mega-1: no sharing label"]
